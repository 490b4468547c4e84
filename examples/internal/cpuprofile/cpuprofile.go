// Package cpuprofile writes a CPU profile of a whole program run, for the
// examples' -cpuprofile flags (examples/demo/cpushare reads the profiles).
package cpuprofile

import (
	"errors"
	"os"
	"runtime/pprof"
)

// Start starts profiling the process's CPU into path; stop ends the
// profile and closes the file.
func Start(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
