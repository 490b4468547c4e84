// Package historytest generates workflow histories for the tests of the
// order property: runs with their continue-as-new chains, reopened runs,
// retries, every activity outcome and run status, activities left to their
// run's close, second terminals and terminals after a close; and cuts them
// into the batches a decorator observes, in history order or shuffled with
// repeats. Times are whole seconds, so sums of durations are exact in any
// order.
package historytest

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// History is one workflow's history, Seq 1 first.
type History struct {
	Namespace  string
	WorkflowID eventstore.WorkflowID
	Events     []eventstore.Event
}

// Generate makes one to three workflows' histories.
func Generate(rng *rand.Rand) []History {
	var out []History
	for w := range 1 + rng.IntN(3) {
		var id eventstore.WorkflowID
		id[0], id[15] = 0xaa, byte(w+1)
		g := generator{rng: rng, h: History{Namespace: []string{"", "tenant"}[rng.IntN(2)], WorkflowID: id}, clock: 1_000_000}
		g.workflow()
		out = append(out, g.h)
	}
	return out
}

// RunID returns the n-th run ID of the generated histories (from 1).
func RunID(n int) eventstore.RunID {
	var id eventstore.RunID
	id[0], id[15] = 0xbb, byte(n)
	return id
}

type generator struct {
	rng   *rand.Rand
	h     History
	clock int64 // whole seconds
}

func (g *generator) env(run eventstore.RunID) eventstore.Envelope {
	g.clock += 1 + g.rng.Int64N(3)
	return eventstore.Envelope{WorkflowID: g.h.WorkflowID, RunID: run, Seq: uint64(len(g.h.Events) + 1), RecordedAt: time.Unix(g.clock, 0)}
}

func (g *generator) add(ev eventstore.Event) { g.h.Events = append(g.h.Events, ev) }

var activityTypes = []string{"charge", "ship", "llm"}

func (g *generator) workflow() {
	runs := 1 + g.rng.IntN(3)
	for r := range runs {
		run := RunID(r + 1)
		g.add(eventstore.WorkflowStarted{Envelope: g.env(run), WorkflowType: "flow"})
		open := g.activities(run, 0)
		switch {
		case r < runs-1:
			g.add(eventstore.WorkflowContinuedAsNew{Envelope: g.env(run), NewRunID: RunID(r + 2)})
		case g.rng.IntN(4) == 0:
			continue // left open
		default:
			g.close(run)
		}
		// A terminal after the close, for an activity the close abandoned.
		if len(open) > 0 && g.rng.IntN(3) == 0 {
			g.terminal(run, open[g.rng.IntN(len(open))])
		}
		if r == runs-1 && g.rng.IntN(3) == 0 {
			g.add(eventstore.WorkflowReopened{Envelope: g.env(run)})
			g.activities(run, 10)
			if g.rng.IntN(2) == 0 {
				g.close(run)
			}
		}
	}
}

func (g *generator) close(run eventstore.RunID) {
	env := g.env(run)
	switch g.rng.IntN(4) {
	case 0:
		g.add(eventstore.WorkflowCompleted{Envelope: env})
	case 1:
		g.add(eventstore.WorkflowFailed{Envelope: env})
	case 2:
		g.add(eventstore.WorkflowCancelled{Envelope: env})
	default:
		g.add(eventstore.WorkflowTimedOut{Envelope: env})
	}
}

// activities writes a run's activity events from ordinal first on, and
// returns those left without a terminal.
func (g *generator) activities(run eventstore.RunID, first eventstore.ActivityID) []eventstore.ActivityID {
	var open, done []eventstore.ActivityID
	next := first
	for range g.rng.IntN(12) {
		switch x := g.rng.IntN(10); {
		case x < 3 || len(open) == 0:
			g.add(eventstore.ActivityScheduled{Envelope: g.env(run), ActivityID: next, ActivityType: activityTypes[g.rng.IntN(len(activityTypes))]})
			open = append(open, next)
			next++
		case x < 5:
			a := open[g.rng.IntN(len(open))]
			g.add(eventstore.ActivityFailed{Envelope: g.env(run), ActivityID: a, Error: eventstore.ActivityError{Kind: eventstore.Retryable}})
		case x < 8:
			i := g.rng.IntN(len(open))
			g.terminal(run, open[i])
			done = append(done, open[i])
			open = slices.Delete(open, i, i+1)
		case x < 9 && len(done) > 0:
			g.terminal(run, done[g.rng.IntN(len(done))]) // a second terminal
		default:
			g.add(eventstore.SignalReceived{Envelope: g.env(run), SignalName: "poke"})
		}
	}
	return open
}

func (g *generator) terminal(run eventstore.RunID, a eventstore.ActivityID) {
	env := g.env(run)
	switch g.rng.IntN(4) {
	case 0:
		g.add(eventstore.ActivityCompleted{Envelope: env, ActivityID: a})
	case 1:
		g.add(eventstore.ActivityFailed{Envelope: env, ActivityID: a, Error: eventstore.ActivityError{Kind: eventstore.Terminal}})
	case 2:
		g.add(eventstore.ActivityCancelled{Envelope: env, ActivityID: a})
	default:
		g.add(eventstore.ActivityTimedOut{Envelope: env, ActivityID: a})
	}
}

// Batch is one committed batch of a workflow, as a decorator observes it.
type Batch struct {
	Namespace  string
	WorkflowID eventstore.WorkflowID
	// FirstSeq is the Seq of Events[0]; 0 in some batches, whose events
	// carry their Seq.
	FirstSeq uint64
	Events   []eventstore.Event
	// Call is the span context of the store call that committed it: the
	// batch's number in history order (from 1), in both IDs.
	Call trace.SpanContext
}

// Cut cuts each history into batches of one to four events, in history
// order.
func Cut(rng *rand.Rand, hs []History) []Batch {
	var out []Batch
	for _, h := range hs {
		for i := 0; i < len(h.Events); {
			n := min(1+rng.IntN(4), len(h.Events)-i)
			b := Batch{Namespace: h.Namespace, WorkflowID: h.WorkflowID, FirstSeq: uint64(i + 1), Events: h.Events[i : i+n], Call: callSpan(len(out) + 1)}
			if rng.IntN(3) == 0 {
				b.FirstSeq = 0
			}
			out = append(out, b)
			i += n
		}
	}
	return out
}

func callSpan(n int) trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	binary.BigEndian.PutUint64(tid[8:], uint64(n))
	binary.BigEndian.PutUint64(sid[:], uint64(n))
	tid[0], sid[0] = 0xca, 0xca
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}

// Shuffle returns the batches in a random order; with repeats, some of them
// twice or more.
func Shuffle(rng *rand.Rand, batches []Batch, repeats bool) []Batch {
	out := slices.Clone(batches)
	for _, b := range batches {
		for repeats && rng.IntN(4) == 0 {
			out = append(out, b)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
