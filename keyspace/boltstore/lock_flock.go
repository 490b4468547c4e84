//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package boltstore

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockRetry is how often lockFile retries a lock another holder has, as
// bbolt does.
const lockRetry = 50 * time.Millisecond

// errLockTimeout reports that lockFile gave up.
var errLockTimeout = errors.New("timeout")

// lockFile takes the exclusive flock that bbolt takes on the file, so that
// the file can be checked before bbolt maps it with no other process
// writing it. bbolt then locks the same open file, which succeeds at once.
// A timeout <= 0 waits without limit.
func lockFile(f *os.File, timeout time.Duration) error {
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if timeout > 0 && time.Since(start) > timeout-lockRetry {
			return errLockTimeout
		}
		time.Sleep(lockRetry)
	}
}

// unlockFile releases the lock lockFile took. Closing the file is not
// enough while bbolt's memory map of it exists: the map keeps the open
// file, and with it the lock, alive.
func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
