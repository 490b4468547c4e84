//go:build !unix

package pgstore_test

// processCPU cannot read the process CPU time on this platform.
func processCPU() int64 { return -1 }

// processPeakRSS cannot read the peak resident set on this platform.
func processPeakRSS() int64 { return -1 }
