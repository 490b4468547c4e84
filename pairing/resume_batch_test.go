package pairing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// batchStore is a Memory with ReadHistories as a loop of ReadHistory,
// recording each call's size and failing the call of one page on demand;
// it counts the single reads too, which a batched resume must not make.
type batchStore struct {
	eventstore.Store
	mu      sync.Mutex
	pages   []int
	singles int
	failAt  int // the 1-based call that fails; 0: none
	short   bool
}

func (b *batchStore) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	b.mu.Lock()
	b.singles++
	b.mu.Unlock()
	return b.Store.ReadHistory(ctx, wf)
}

func (b *batchStore) ReadHistories(ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	b.mu.Lock()
	b.pages = append(b.pages, len(ids))
	call := len(b.pages)
	b.mu.Unlock()
	if call == b.failAt {
		return nil, errPage
	}
	out, err := readEach(ctx, b.Store, ids)
	if err != nil {
		return nil, err
	}
	if b.short {
		out = out[:len(out)-1]
	}
	return out, nil
}

var errPage = errors.New("page refused")

// A resume over a store with ReadHistories reads its open workflows in
// pages of eventstore.HistoriesPage, one call each, no single reads, and
// leaves the tracker as a resume of single reads does; a page that fails
// (or answers for fewer workflows than asked) fails its workflows alone.
func TestResumeReadsHistoriesInPages(t *testing.T) {
	const open = 2*eventstore.HistoriesPage + 500
	m := eventstore.NewMemory()
	run := runID(1)
	for i := range open {
		wf := eventstore.WorkflowID{0: 0xaa}
		binary.BigEndian.PutUint64(wf[8:], uint64(i))
		appendTo(t, m, wf,
			eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
			eventstore.ActivityScheduled{Envelope: env(run, 1), ActivityID: 0, ActivityType: "slow"},
		)
	}
	single := newHarness(t)
	want, err := single.tr.Resume(bg, "n", m)
	if err != nil || want.Workflows != open {
		t.Fatalf("single reads: %+v, %v", want, err)
	}

	store := &batchStore{Store: m}
	h := newHarness(t)
	got, err := h.tr.Resume(bg, "n", store)
	if err != nil || got != want {
		t.Fatalf("paged: %+v, %v; single reads gave %+v", got, err, want)
	}
	slices.Sort(store.pages)
	if !slices.Equal(store.pages, []int{500, eventstore.HistoriesPage, eventstore.HistoriesPage}) || store.singles != 0 {
		t.Errorf("pages %v and %d single reads, want pages of %d, 500 last, and none", store.pages, store.singles, eventstore.HistoriesPage)
	}
	if h.tr.InFlight() != single.tr.InFlight() || h.tr.InFlight() != open {
		t.Errorf("InFlight %d paged, %d single, want %d", h.tr.InFlight(), single.tr.InFlight(), open)
	}

	for _, short := range []bool{false, true} {
		failing := &batchStore{Store: m, failAt: 2, short: short}
		if short {
			failing.failAt = 0
		}
		h := newHarness(t)
		report, err := h.tr.Resume(bg, "n", failing, WithResumeConcurrency(1))
		wantFailed := eventstore.HistoriesPage
		if short {
			wantFailed = open // every page answers short
		}
		if err == nil || report.Failed != wantFailed || report.Workflows != open-wantFailed {
			t.Errorf("short %v: report %+v, err %v; want %d failed, the rest resumed", short, report, err, wantFailed)
		}
		if !short && !errors.Is(err, errPage) {
			t.Errorf("the page's error is not in %v", err)
		}
	}
}

// rttStore adds a round trip of rtt to every read call of a Memory, as a
// database on a network would; pages gives it ReadHistories.
type rttStore struct {
	eventstore.Store
	rtt time.Duration
}

func (r rttStore) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	time.Sleep(r.rtt)
	return r.Store.ReadHistory(ctx, wf)
}

func (r rttStore) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	time.Sleep(r.rtt)
	return r.Store.ReadHistoryFrom(ctx, wf, from)
}

type rttPages struct{ rttStore }

func (r rttPages) ReadHistories(ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	time.Sleep(r.rtt)
	return readEach(ctx, r.Store, ids)
}

// readEach is ReadHistories as a loop of s's ReadHistory.
func readEach(ctx context.Context, s eventstore.Store, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	out := make([][]eventstore.Event, len(ids))
	for i, id := range ids {
		h, err := s.ReadHistory(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// BenchmarkResumeRoundTrips: how a resume scales with a 1 ms round trip
// per read call, at 1,000 and 10,000 open workflows: one read per
// workflow (DefaultResumeConcurrency at a time) against pages of
// eventstore.HistoriesPage.
func BenchmarkResumeRoundTrips(b *testing.B) {
	for _, open := range []int{1_000, 10_000} {
		m := eventstore.NewMemory()
		run := runID(1)
		for i := range open {
			wf := eventstore.WorkflowID{0: 0xaa}
			binary.BigEndian.PutUint64(wf[8:], uint64(i))
			if err := m.Append(bg, eventstore.RecorderToken(), wf, []eventstore.Event{
				eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
				eventstore.ActivityScheduled{Envelope: env(run, 1), ActivityID: 0, ActivityType: "slow"},
			}, 0); err != nil {
				b.Fatal(err)
			}
		}
		base := rttStore{m, time.Millisecond}
		for _, tc := range []struct {
			reads string
			store eventstore.Store
		}{{"single", base}, {"pages", rttPages{base}}} {
			b.Run(fmt.Sprintf("open=%d/reads=%s", open, tc.reads), func(b *testing.B) {
				for b.Loop() {
					tr, err := New()
					if err != nil {
						b.Fatal(err)
					}
					if report, err := tr.Resume(bg, "n", tc.store); err != nil || report.Workflows != open {
						b.Fatalf("Resume = %+v, %v", report, err)
					}
				}
			})
		}
	}
}
