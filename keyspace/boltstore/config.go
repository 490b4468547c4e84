package boltstore

import (
	"os"
	"time"
)

// Option configures [Open].
type Option interface {
	apply(*config)
}

type config struct {
	openTimeout time.Duration
	noSync      bool
	fileMode    os.FileMode
}

// defaultOpenTimeout is how long Open waits for the file lock by default.
const defaultOpenTimeout = time.Second

func newConfig(opts []Option) config {
	c := config{
		openTimeout: defaultOpenTimeout,
		fileMode:    0o600,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithOpenTimeout sets how long [Open] waits for the file's lock, held while
// another process or another [Store] has the file open, before it gives up
// with [ErrLocked]. A d <= 0 waits without limit. Without this option Open
// waits one second.
func WithOpenTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.openTimeout = d })
}

// WithNoSync makes commits skip fsync. A committed batch is then still in the
// operating system's page cache when AppendEvents returns, so it survives the
// process being killed (kill -9 included), but not a crash of the machine or
// a power loss, which may lose recent commits or, in bbolt's words, corrupt
// the file. Meant for tests and throw-away data. Without this option every
// AppendEvents fsyncs before it returns.
func WithNoSync() Option {
	return optionFunc(func(c *config) { c.noSync = true })
}

// WithFileMode sets the permission bits of a file that [Open] creates. It has
// no effect on an existing file. Without this option new files get 0600.
func WithFileMode(mode os.FileMode) Option {
	return optionFunc(func(c *config) { c.fileMode = mode })
}
