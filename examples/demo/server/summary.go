package server

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// actor names a kind of writer of workflow histories; conflicts are counted
// per actor.
type actor uint8

const (
	actorStarter actor = iota
	actorRunner
	actorActivity
	actorSignal
	actorTimer
	actorScheduler
	actorOperator
	actorShutdown
	numActors
)

var actorNames = [numActors]string{"starter", "workflow runner", "activity worker", "signal sender", "timer firer", "scheduler", "operator", "shutdown"}

func (a actor) String() string { return actorNames[a] }

// counters are the server's running totals, all atomic.
type counters struct {
	workflowsStarted, runsContinued                    atomic.Int64
	completed, failed, cancelled, timedOut, reopened   atomic.Int64
	paused, resumed, open, cancelledAtShutdown         atomic.Int64
	dispatched, succeeded, actFailed, actCancelled     atomic.Int64
	actTimedOut, abandoned, retried, lateResults       atomic.Int64
	signals, signalsRejected, schedules, timersFired   atomic.Int64
	signalsDuplicate                                   atomic.Int64
	conflicts                                          [numActors]atomic.Int64
	transcriptEvents, transcriptDuplicates, ephemeral  atomic.Int64
	transcriptBatches                                  atomic.Int64
	storeCalls, keyspaceCalls, startsSkipped, errCount atomic.Int64

	errMu    sync.Mutex
	firstErr error
}

// observe counts what a committed batch recorded.
func (c *counters) observe(d *decision) {
	continued := false
	for _, ev := range d.events {
		switch e := ev.(type) {
		case eventstore.WorkflowContinuedAsNew:
			continued = true
			c.runsContinued.Add(1)
		case eventstore.WorkflowStarted:
			if !continued {
				c.workflowsStarted.Add(1)
				c.open.Add(1)
			}
		case eventstore.WorkflowCompleted:
			c.completed.Add(1)
			c.open.Add(-1)
		case eventstore.WorkflowFailed:
			c.failed.Add(1)
			c.open.Add(-1)
		case eventstore.WorkflowCancelled:
			c.cancelled.Add(1)
			c.open.Add(-1)
		case eventstore.WorkflowTimedOut:
			c.timedOut.Add(1)
			c.open.Add(-1)
		case eventstore.WorkflowReopened:
			c.reopened.Add(1)
			c.open.Add(1)
		case eventstore.WorkflowPaused:
			c.paused.Add(1)
		case eventstore.WorkflowResumed:
			c.resumed.Add(1)
		case eventstore.SignalReceived:
			c.signals.Add(1)
		case eventstore.ScheduleTriggered:
			c.schedules.Add(1)
		case eventstore.TimerFired:
			c.timersFired.Add(1)
		case eventstore.ActivityScheduled:
			c.dispatched.Add(1)
		case eventstore.ActivityCompleted:
			c.succeeded.Add(1)
		case eventstore.ActivityFailed:
			if e.Error.Kind == eventstore.Retryable {
				c.retried.Add(1)
			} else {
				c.actFailed.Add(1)
			}
		case eventstore.ActivityCancelled:
			c.actCancelled.Add(1)
		case eventstore.ActivityTimedOut:
			c.actTimedOut.Add(1)
		}
	}
	c.abandoned.Add(int64(d.abandoned))
}

func (c *counters) conflict(a actor) { c.conflicts[a].Add(1) }

func (c *counters) totalConflicts() int64 {
	var n int64
	for i := range c.conflicts {
		n += c.conflicts[i].Load()
	}
	return n
}

func (c *counters) recordError(err error) {
	c.errCount.Add(1)
	c.errMu.Lock()
	if c.firstErr == nil {
		c.firstErr = err
	}
	c.errMu.Unlock()
}

// Stats is a live snapshot of the server, for a progress display.
type Stats struct {
	Elapsed           time.Duration
	WorkflowsStarted  int64 // workflows started (not counting continue-as-new runs)
	WorkflowsFinished int64 // workflows closed for good: completed, failed, cancelled, timed out
	ActivitiesRunning int   // activities in flight, as the pairing tracker counts them
	StoreCalls        int64 // event store and keyspace calls so far
	Conflicts         int64 // sequence conflicts met (and retried) so far
}

// Summary is what a run did, returned by [Server.Run] once it has drained.
type Summary struct {
	Elapsed time.Duration

	// Workflows: started counts workflows (first runs); the closing counts
	// are final statuses; ContinuedAsNew counts runs that handed over to a
	// next run; Reopened counts failed runs an operator reopened (and that
	// closed again later).
	WorkflowsStarted, Completed, Failed, Cancelled, TimedOut int64
	ContinuedAsNew, Reopened, Paused, Resumed                int64
	// CancelledAtShutdown is the part of Cancelled that shutdown cancelled.
	CancelledAtShutdown int64
	// OpenAtEnd is the number of workflows still open after the drain: 0
	// unless the drain failed.
	OpenAtEnd int64

	// Activities by outcome. Retried counts retryable failures (each followed
	// by another attempt); LateResults counts results that arrived after the
	// activity had ended (timed out or cancelled) and were dropped.
	Dispatched, Succeeded, ActivitiesFailed, ActivitiesCancelled int64
	ActivitiesTimedOut, Abandoned, Retried, LateResults          int64
	// InFlightAtEnd is the pairing tracker's in-flight count after the drain,
	// ClaimedRowsAtEnd the outbox rows still claimed: both 0 after a clean
	// drain.
	InFlightAtEnd    int
	ClaimedRowsAtEnd int

	// Signals counts signals recorded; SignalsRejected those refused because
	// the workflow was closed; SignalsDuplicate client retries of a request
	// already recorded, which were not recorded again.
	Signals, SignalsRejected, SignalsDuplicate, SchedulesFired, TimersFired int64

	// Conflicts counts the sequence conflicts met (each retried), by the kind
	// of writer that lost the race.
	Conflicts        int64
	ConflictsByActor map[string]int64

	// Transcripts: events stored through the Sequencer, re-delivered events
	// it dropped as duplicates, ephemeral events forwarded (never stored),
	// and Append calls.
	TranscriptEvents, TranscriptDuplicates, EphemeralEvents, TranscriptBatches int64

	StoreCalls, KeyspaceCalls int64
	// StartsSkipped counts starts skipped because the workers' backlog was
	// too long (the machine could not keep up with the rate).
	StartsSkipped int64

	// Errors counts unexpected store errors; FirstError is the first one.
	Errors     int64
	FirstError error
}

// WriteTo prints the summary as a table: one section per subject, labels
// left, numbers right-aligned, notes after them.
func (s Summary) WriteTo(w io.Writer) (int64, error) {
	type line struct{ label, value, note string }
	var lines []line
	section := func(title string) { lines = append(lines, line{label: title}) }
	row := func(label string, v any, note string) {
		lines = append(lines, line{label: "  " + label, value: fmt.Sprint(v), note: note})
	}
	section("workflows")
	row("started", s.WorkflowsStarted, "")
	row("completed", s.Completed, "")
	row("failed", s.Failed, "")
	row("cancelled", s.Cancelled, fmt.Sprintf("(%d at shutdown)", s.CancelledAtShutdown))
	row("timed out", s.TimedOut, "")
	row("continued as new", s.ContinuedAsNew, "runs")
	row("reopened", s.Reopened, "(failed, then reopened by an operator)")
	row("paused / resumed", fmt.Sprintf("%d / %d", s.Paused, s.Resumed), "")
	row("open at exit", s.OpenAtEnd, "")
	section("activities")
	row("dispatched", s.Dispatched, "")
	row("succeeded", s.Succeeded, "")
	row("failed", s.ActivitiesFailed, "")
	row("cancelled", s.ActivitiesCancelled, "")
	row("timed out", s.ActivitiesTimedOut, "")
	row("abandoned", s.Abandoned, "(open when their workflow timed out)")
	row("retried", s.Retried, "attempts")
	row("late results dropped", s.LateResults, "")
	row("in flight at exit", s.InFlightAtEnd, "")
	row("claimed outbox rows at exit", s.ClaimedRowsAtEnd, "")
	section("events")
	row("signals", s.Signals, fmt.Sprintf("(%d client retries deduplicated, %d refused: workflow closed)", s.SignalsDuplicate, s.SignalsRejected))
	row("schedules fired", s.SchedulesFired, "")
	row("timers fired", s.TimersFired, "")
	row("conflicts retried", s.Conflicts, conflictNote(s.ConflictsByActor))
	section("transcripts")
	row("events stored", s.TranscriptEvents, fmt.Sprintf("in %d sequencer appends", s.TranscriptBatches))
	row("duplicates dropped", s.TranscriptDuplicates, "(re-delivered after a failover)")
	row("ephemeral forwarded", s.EphemeralEvents, "(never stored)")
	section("store calls")
	row("event store", s.StoreCalls, "")
	row("keyspace", s.KeyspaceCalls, "")
	if s.StartsSkipped > 0 {
		row("starts skipped", s.StartsSkipped, "(backlog too long: lower -rate)")
	}
	if s.Errors > 0 {
		row("errors", s.Errors, fmt.Sprintf("first: %v", s.FirstError))
	}

	labelWidth, valueWidth := 0, 0
	for _, l := range lines {
		if l.value != "" {
			labelWidth = max(labelWidth, len(l.label))
			valueWidth = max(valueWidth, len(l.value))
		}
	}
	cw := &countingWriter{w: w}
	fmt.Fprintf(cw, "summary after %s\n", s.Elapsed.Round(time.Millisecond))
	for _, l := range lines {
		switch {
		case l.value == "":
			fmt.Fprintln(cw, l.label)
		case l.note == "":
			fmt.Fprintf(cw, "%-*s  %*s\n", labelWidth, l.label, valueWidth, l.value)
		default:
			fmt.Fprintf(cw, "%-*s  %*s  %s\n", labelWidth, l.label, valueWidth, l.value, l.note)
		}
	}
	return cw.n, cw.err
}

func conflictNote(by map[string]int64) string {
	note := ""
	for _, a := range actorNames {
		if n := by[a]; n > 0 {
			if note != "" {
				note += ", "
			}
			note += fmt.Sprintf("%s %d", a, n)
		}
	}
	if note == "" {
		return ""
	}
	return "(lost by: " + note + ")"
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}
