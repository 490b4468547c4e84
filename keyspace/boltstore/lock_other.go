//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package boltstore

import (
	"errors"
	"os"
	"time"
)

// errLockTimeout reports that lockFile gave up.
var errLockTimeout = errors.New("timeout")

// lockFile does nothing on this platform: bbolt takes its own lock when it
// opens the file, just after Open's check, which therefore runs unlocked.
func lockFile(*os.File, time.Duration) error { return nil }

// unlockFile does nothing on this platform.
func unlockFile(*os.File) error { return nil }
