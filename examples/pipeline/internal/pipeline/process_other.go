//go:build !linux

package pipeline

import "syscall"

// sysProcAttr puts the child in a process group of its own.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// waitExitNoReap is Linux-only (waitid with WNOWAIT); elsewhere the group is
// not swept after its leader exits.
func waitExitNoReap(int) bool { return false }
