package otelstore

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// An append whose context ends while it runs may have committed: the
// store contract lets it return the context's error either way. The
// caller cannot tell, but this process wrote the batch, so if it landed
// its completions, durations and spans are this process's to record, and
// nobody else's. The decorator reads the positions the batch asked for
// back from the inner store, with a context of its own (at most
// ambiguousReadTimeout), and observes the batch as committed here when
// those positions hold it: the same kinds of events, of the same runs,
// the same activities, at the same times where the caller gave them. Two
// writers appending such a batch at the same position at once is what
// optimistic concurrency refuses, so the match is this call's commit.
const ambiguousReadTimeout = time.Second

// mayHaveCommitted reports whether err leaves an append's outcome unknown:
// the context ended while it ran.
func mayHaveCommitted(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// committedBatch reads back the positions of an append that returned
// mayHaveCommitted, and returns the stored events when they are the
// batch's, nil otherwise.
func (s *core) committedBatch(ctx context.Context, workflowID eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) []eventstore.Event {
	if len(events) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ambiguousReadTimeout)
	defer cancel()
	stored, err := s.inner.ReadHistoryFrom(ctx, workflowID, expectedSeq+1)
	if err != nil || len(stored) < len(events) {
		return nil
	}
	for i, sent := range events {
		if !sameEvent(sent, stored[i]) {
			return nil
		}
	}
	return stored[:len(events)]
}

// sameEvent reports whether stored can be sent as committed: its type,
// run, activity (for an activity's event) and, where the caller set it,
// time.
func sameEvent(sent, stored eventstore.Event) bool {
	if sent == nil || stored == nil || reflect.TypeOf(sent) != reflect.TypeOf(stored) {
		return false
	}
	a, b := sent.EventEnvelope(), stored.EventEnvelope()
	if a.RunID != b.RunID || !a.RecordedAt.IsZero() && !a.RecordedAt.Equal(b.RecordedAt) {
		return false
	}
	va, vb := reflect.ValueOf(sent), reflect.ValueOf(stored)
	if va.Kind() == reflect.Struct {
		if fa := va.FieldByName("ActivityID"); fa.IsValid() && fa.Interface() != vb.FieldByName("ActivityID").Interface() {
			return false
		}
	}
	return true
}
