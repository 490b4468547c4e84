//go:build !unix

package otelworkflows

// processCPU cannot read the process CPU time on this platform.
func processCPU() int64 { return -1 }
