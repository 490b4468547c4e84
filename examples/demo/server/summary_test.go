package server

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

func TestSummaryWriteTo(t *testing.T) {
	sum := Summary{
		Elapsed:          3 * time.Second,
		WorkflowsStarted: 12, Completed: 9, Cancelled: 3, CancelledAtShutdown: 2,
		Dispatched: 40, Succeeded: 38, ActivitiesCancelled: 2,
		Conflicts: 5, ConflictsByActor: map[string]int64{"workflow runner": 3, "signal sender": 2},
		TranscriptEvents: 70, TranscriptBatches: 20,
		StoreCalls: 900, KeyspaceCalls: 30,
	}
	var b bytes.Buffer
	n, err := sum.WriteTo(&b)
	if err != nil || n != int64(b.Len()) {
		t.Fatalf("WriteTo = %d, %v; wrote %d bytes", n, err, b.Len())
	}
	out := b.String()
	for _, want := range []string{
		`summary after 3s`,
		`started\s+12`,
		`cancelled\s+3\s+\(2 at shutdown\)`,
		`dispatched\s+40`,
		`conflicts retried\s+5\s+\(lost by: workflow runner 3, signal sender 2\)`,
		`events stored\s+70\s+in 20 sequencer appends`,
		`event store\s+900`,
		`in flight at exit\s+0`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("summary lacks /%s/:\n%s", want, out)
		}
	}
	if strings.Contains(out, "errors") || strings.Contains(out, "starts skipped") {
		t.Errorf("summary shows errors or skipped starts that did not happen:\n%s", out)
	}

	sum.Errors, sum.FirstError, sum.StartsSkipped = 1, errors.New("boom"), 4
	b.Reset()
	if _, err := sum.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`errors\s+1\s+first: boom`, `starts skipped\s+4`} {
		if !regexp.MustCompile(want).MatchString(b.String()) {
			t.Errorf("summary lacks /%s/:\n%s", want, b.String())
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestSummaryWriteToReportsWriteErrors(t *testing.T) {
	if _, err := (Summary{}).WriteTo(failingWriter{}); err == nil {
		t.Error("no error from a failing writer")
	}
}

func TestCountersObserve(t *testing.T) {
	var c counters
	run, next := eventstore.RunID{1}, eventstore.RunID{2}
	batches := []*decision{
		{events: []eventstore.Event{eventstore.WorkflowStarted{}, eventstore.ActivityScheduled{}, eventstore.ActivityScheduled{}}},
		{events: []eventstore.Event{eventstore.ActivityFailed{Error: eventstore.ActivityError{Kind: eventstore.Retryable}}}},
		{events: []eventstore.Event{eventstore.ActivityCompleted{}, eventstore.ActivityFailed{Error: eventstore.ActivityError{Kind: eventstore.Terminal}}}},
		{events: []eventstore.Event{eventstore.WorkflowFailed{}}},
		{events: []eventstore.Event{eventstore.WorkflowReopened{}}},
		{events: []eventstore.Event{eventstore.WorkflowContinuedAsNew{NewRunID: next}, eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: next}}}},
		{events: []eventstore.Event{eventstore.ActivityScheduled{}, eventstore.WorkflowTimedOut{Envelope: eventstore.Envelope{RunID: run}}}, abandoned: 1},
	}
	for _, d := range batches {
		c.observe(d)
	}
	checks := []struct {
		name      string
		got, want int64
	}{
		{"workflows started", c.workflowsStarted.Load(), 1},
		{"runs continued", c.runsContinued.Load(), 1},
		{"open", c.open.Load(), 0},
		{"failed", c.failed.Load(), 1},
		{"reopened", c.reopened.Load(), 1},
		{"timed out", c.timedOut.Load(), 1},
		{"dispatched", c.dispatched.Load(), 3},
		{"retried", c.retried.Load(), 1},
		{"succeeded", c.succeeded.Load(), 1},
		{"activities failed", c.actFailed.Load(), 1},
		{"abandoned", c.abandoned.Load(), 1},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %d, want %d", ch.name, ch.got, ch.want)
		}
	}
}
