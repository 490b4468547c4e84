//go:build unix

package pgstore_test

import "syscall"

// processCPU returns the user+system CPU time this process (the client, not
// the database server) has used, in nanoseconds, or -1 if it cannot be read.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// processPeakRSS returns the largest resident set this process has had so
// far, in bytes (Linux reports kilobytes), or -1 if it cannot be read.
func processPeakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return int64(ru.Maxrss) * 1024
}
