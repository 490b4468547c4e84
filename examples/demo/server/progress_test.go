package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	p := NewProgress(nil, false)
	first := p.Line(Stats{Elapsed: 2 * time.Second, WorkflowsStarted: 40, WorkflowsFinished: 30, ActivitiesRunning: 7, StoreCalls: 2000, Conflicts: 3})
	want := "    2s  workflows 40 started, 30 finished | activities 7 in flight | store 1000 calls/s | conflicts 3 retried"
	if first != want {
		t.Errorf("first line\n got %q\nwant %q", first, want)
	}
	// The rate is measured since the previous line.
	second := p.Line(Stats{Elapsed: 2500 * time.Millisecond, StoreCalls: 2600})
	if !strings.Contains(second, "store 1200 calls/s") {
		t.Errorf("second line %q: want 1200 calls/s", second)
	}
}

func TestProgressReport(t *testing.T) {
	testCases := []struct {
		name     string
		terminal bool
		want     string
	}{
		{"terminal rewrites one line", true, "\r    1s  workflows 1 started, 0 finished | activities 0 in flight | store 0 calls/s | conflicts 0 retried\x1b[K\n"},
		{"log gets plain lines", false, "    1s  workflows 1 started, 0 finished | activities 0 in flight | store 0 calls/s | conflicts 0 retried\n"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			p := NewProgress(&b, tc.terminal)
			p.Report(Stats{Elapsed: time.Second, WorkflowsStarted: 1})
			p.Finish()
			if b.String() != tc.want {
				t.Errorf("wrote %q, want %q", b.String(), tc.want)
			}
		})
	}
}

func TestProgressRunReportsEachTick(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false)
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	n := int64(0)
	go func() {
		p.Run(ctx, tick, func() Stats { n++; return Stats{WorkflowsStarted: n} })
		close(done)
	}()
	tick <- time.Time{}
	tick <- time.Time{}
	cancel()
	<-done
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "workflows 2 started") {
		t.Errorf("wrote %q, want two reports", b.String())
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) || IsTerminal(&bytes.Buffer{}) {
		t.Error("a regular file or a buffer taken for a terminal")
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if !IsTerminal(tty) {
			t.Error("/dev/tty not taken for a terminal")
		}
	}
}
