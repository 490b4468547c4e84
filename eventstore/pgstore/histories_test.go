package pgstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
	"github.com/aionotel/aionotel/pairing"
)

// ReadHistories answers as ReadHistory does, for every workflow asked,
// across its page boundary (at, below and above eventstore.HistoriesPage
// workflows): unknown workflows get an empty history, and an ID given
// twice two histories that share no payload. A resume from it makes one
// call per page and finds what a resume from single reads finds.
func TestReadHistories(t *testing.T) {
	s, _, _ := newStore(t)
	ctx, tok := context.Background(), eventstore.RecorderToken()
	const n = eventstore.HistoriesPage + 1
	ids := make([]eventstore.WorkflowID, n)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	activities := 0
	for i := range ids {
		activities += i % 3
		binary.BigEndian.PutUint64(ids[i][8:], uint64(i+1))
		run := eventstore.NewRunID()
		events := []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: run, RecordedAt: t0}, WorkflowType: "flow", Input: eventstore.Payload{Data: []byte{byte(i)}}},
		}
		for a := range i % 3 { // 1 to 3 events
			events = append(events, eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run, RecordedAt: t0.Add(time.Second)},
				ActivityID: eventstore.ActivityID(a), ActivityType: "charge"})
		}
		if err := s.Append(ctx, tok, ids[i], events, 0); err != nil {
			t.Fatal(err)
		}
	}
	unknown := eventstore.NewWorkflowID()
	for _, size := range []int{0, 1, eventstore.HistoriesPage - 1, eventstore.HistoriesPage, n} {
		t.Run(fmt.Sprintf("%d workflows", size), func(t *testing.T) {
			ask := append(append([]eventstore.WorkflowID{}, ids[:size]...), unknown)
			if size > 0 {
				ask = append(ask, ask[0]) // twice
			}
			got, err := s.ReadHistories(ctx, ask)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(ask) {
				t.Fatalf("%d histories for %d workflows", len(got), len(ask))
			}
			for i, id := range ask {
				want, err := s.ReadHistory(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if got[i] == nil || !reflect.DeepEqual(got[i], want) {
					t.Fatalf("history %d (%v): %v, ReadHistory gives %v", i, id, got[i], want)
				}
			}
			if size > 0 {
				first, again := got[0][0].(eventstore.WorkflowStarted), got[len(got)-1][0].(eventstore.WorkflowStarted)
				first.Input.Data[0]++
				if again.Input.Data[0] == first.Input.Data[0] {
					t.Error("an ID given twice got histories that share their payload")
				}
			}
		})
	}
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.ReadHistories(ctxDone, ids); err == nil {
		t.Error("ReadHistories with a done context succeeded")
	}

	tr, err := pairing.New()
	if err != nil {
		t.Fatal(err)
	}
	report, err := tr.Resume(ctx, "n", s)
	if err != nil || report.Workflows != n || report.Activities != activities {
		t.Errorf("Resume = %+v, %v; want %d workflows and their %d activities", report, err, n, activities)
	}
}

// A row that cannot be decoded fails the whole call with ErrCorruptRecord
// (all or nothing), naming its workflow; a call without that workflow is
// unaffected.
func TestReadHistoriesCorruptRow(t *testing.T) {
	s, pool, schema := newStore(t)
	ctx, tok := context.Background(), eventstore.RecorderToken()
	ids := []eventstore.WorkflowID{eventstore.NewWorkflowID(), eventstore.NewWorkflowID(), eventstore.NewWorkflowID()}
	for _, id := range ids {
		if err := s.Append(ctx, tok, id, []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: eventstore.NewRunID(), RecordedAt: time.Now()}, WorkflowType: "flow"},
		}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "UPDATE "+table(schema, "aionotel_events")+" SET body = '\\x01ff'::bytea WHERE workflow_id = $1", ids[1]); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadHistories(ctx, ids)
	if !errors.Is(err, pgstore.ErrCorruptRecord) || got != nil || !strings.Contains(err.Error(), ids[1].String()) {
		t.Errorf("ReadHistories = %v, %v; want no history and ErrCorruptRecord naming %v", got, err, ids[1])
	}
	if got, err := s.ReadHistories(ctx, []eventstore.WorkflowID{ids[0], ids[2]}); err != nil || len(got) != 2 || len(got[0]) != 1 || len(got[1]) != 1 {
		t.Errorf("without the corrupt workflow: %v, %v", got, err)
	}
}
