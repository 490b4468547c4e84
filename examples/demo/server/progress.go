package server

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// Progress display intervals: a terminal line is rewritten often; a log (a
// pipe, a file, CI) gets a plain line now and then.
const (
	TerminalProgressInterval = 250 * time.Millisecond
	PlainProgressInterval    = 5 * time.Second
)

// IsTerminal reports whether w is a character device (a terminal), the way
// the demo decides between a live line and plain periodic lines. Anything that
// is not an *os.File is not a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Progress writes a server's progress: on a terminal one line rewritten in
// place (carriage return, then erase to the end of the line), elsewhere one
// plain line per report. It is not safe for concurrent use: one goroutine
// runs it.
type Progress struct {
	w        io.Writer
	terminal bool
	last     Stats
	wrote    bool
}

// NewProgress returns a Progress writing to w, in terminal form if terminal.
func NewProgress(w io.Writer, terminal bool) *Progress {
	return &Progress{w: w, terminal: terminal}
}

// Line renders st, the store call rate being measured since the previous
// Line (or since the start).
func (p *Progress) Line(st Stats) string {
	rate := 0.0
	if dt := (st.Elapsed - p.last.Elapsed).Seconds(); dt > 0 {
		rate = float64(st.StoreCalls-p.last.StoreCalls) / dt
	}
	p.last = st
	return fmt.Sprintf("%6s  workflows %d started, %d finished | activities %d in flight | store %.0f calls/s | conflicts %d retried",
		st.Elapsed.Truncate(time.Second), st.WorkflowsStarted, st.WorkflowsFinished, st.ActivitiesRunning, rate, st.Conflicts)
}

// Report writes one report of st.
func (p *Progress) Report(st Stats) {
	line := p.Line(st)
	if p.terminal {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.wrote = true
}

// Run reports stats() at every tick until ctx is done.
func (p *Progress) Run(ctx context.Context, tick <-chan time.Time, stats func() Stats) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			p.Report(stats())
		}
	}
}

// Finish ends the display: on a terminal it ends the live line so that what
// follows starts on a fresh one.
func (p *Progress) Finish() {
	if p.terminal && p.wrote {
		fmt.Fprintln(p.w)
	}
}
