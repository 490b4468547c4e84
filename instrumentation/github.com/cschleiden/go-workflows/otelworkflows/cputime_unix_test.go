//go:build unix

package otelworkflows

import "syscall"

// processCPU returns the user+system CPU time the process has used, in
// nanoseconds, or -1 if it cannot be read.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
