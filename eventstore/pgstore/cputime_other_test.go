//go:build !unix

package pgstore_test

// processCPU cannot read the process CPU time on this platform.
func processCPU() int64 { return -1 }
