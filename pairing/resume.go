package pairing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// ResumeReport is what [Tracker.Resume] did.
type ResumeReport struct {
	// Workflows is the number of open workflows whose history was read and
	// fed to the tracker.
	Workflows int
	// Failed is the number of open workflows whose history could not be
	// read; the error Resume returns says why.
	Failed int
	// Activities and Runs are the activities that history has in flight
	// and the runs it has open that the tracker did not know before.
	Activities, Runs int
}

// ResumeOption configures [Tracker.Resume].
type ResumeOption interface {
	applyResume(*resumeConfig)
}

type resumeConfig struct {
	shardCount  int
	shards      map[int]bool // nil: every workflow listed
	concurrency int
}

type resumeFunc func(*resumeConfig)

func (f resumeFunc) applyResume(c *resumeConfig) { f(c) }

// WithResumeShards limits a resume to the workflows of the listed shards
// among shardCount (as [eventstore.ShardOf] computes them): a node adopting
// a dead node's shards resumes those only. Without it every open workflow
// the store lists is resumed. A shardCount <= 0 is ignored.
func WithResumeShards(shardCount int, shards ...int) ResumeOption {
	return resumeFunc(func(c *resumeConfig) {
		if shardCount > 0 {
			c.shardCount = shardCount
			c.shards = make(map[int]bool, len(shards))
			for _, s := range shards {
				c.shards[s] = true
			}
		}
	})
}

// DefaultResumeConcurrency is how many histories [Tracker.Resume] reads at
// once without [WithResumeConcurrency].
const DefaultResumeConcurrency = 4

// WithResumeConcurrency sets how many histories a resume reads at once (and
// so holds in memory at once): single histories, or pages of
// [eventstore.HistoriesPage] from a store that reads them in batches. Without it, or with n <= 0, it is
// [DefaultResumeConcurrency].
func WithResumeConcurrency(n int) ResumeOption {
	return resumeFunc(func(c *resumeConfig) {
		if n > 0 {
			c.concurrency = n
		}
	})
}

// ResumeShards is [WithResumeShards].
//
// Deprecated: use [WithResumeShards], named as every other option is.
func ResumeShards(shardCount int, shards ...int) ResumeOption {
	return WithResumeShards(shardCount, shards...)
}

// ResumeConcurrency is [WithResumeConcurrency].
//
// Deprecated: use [WithResumeConcurrency], named as every other option is.
func ResumeConcurrency(n int) ResumeOption { return WithResumeConcurrency(n) }

// maxResumeErrors bounds the read errors Resume returns joined; the report
// counts them all.
const maxResumeErrors = 8

// Resume is a warm-up: gap filling (see the package doc) already makes
// the completions, durations and spans of a workflow exact at its first
// write here; Resume makes the gauges right before that write, for every
// open workflow at once.
//
// Resume reads from store the workflows whose current run is open (running
// or paused: ListActive and ListPaused, in the store's enumeration scope for
// a ShardOwner) and their histories, and feeds what each history says, as
// [Tracker.Observe] does, but as facts read back rather than seen
// committing: the runs open and the activities in flight (with their
// dispatch times, types and retries) join the tracker, which from then on
// counts them in the gauges and records, when their terminals and closes
// commit, their completions, durations and spans at history's times.
// Resumed facts count nothing themselves (no dispatched, retried or
// completed, no span for what history already settled): counters count what
// this process observes committing, so a process that restarts or adopts
// shards does not count again what its predecessor counted.
//
// Resume may run while appends go on: the join makes the two meet in any
// order. A live batch that reached a workflow before the resume did found
// a gap, and its fill may still be joining or recording when the reads
// end: Resume then waits for the fills queued or running for the
// workflows it read (not for those begun later), so that, once it and the
// appends have returned, the gauges, completions, durations and spans of
// those workflows are exact. It costs two listing calls and one ReadHistory per open workflow,
// at most [WithResumeConcurrency] at a time, holding at most that many
// histories at once; from a store that is an [eventstore.HistoriesReader]
// (pgstore), one ReadHistories call per page of [eventstore.HistoriesPage]
// workflows instead, as many pages at a time, each held until joined (so
// pages are read while others are joined: at most [WithResumeConcurrency]
// pages of a few MiB are held at once, each history let go once joined,
// and a page's workflows count on aion.pairing.resumed together); what it
// feeds stays within the tracker's bounds. Each
// workflow is fed whole or not at all, so a store error part-way leaves the
// tracker consistent: Resume goes on with the other workflows, and returns
// the errors (at most 8, joined) with the report. A listing error, or ctx
// done, stops it (also while it waits for fills). Every workflow read is counted on aion.pairing.resumed,
// with error.type for those that failed.
func (t *Tracker) Resume(ctx context.Context, namespace string, store eventstore.Store, opts ...ResumeOption) (ResumeReport, error) {
	if t == nil || t.join == nil || store == nil {
		return ResumeReport{}, nil
	}
	ctx = markReadBack(orBackground(ctx))
	c := resumeConfig{concurrency: DefaultResumeConcurrency}
	for _, o := range opts {
		if o != nil {
			o.applyResume(&c)
		}
	}
	ids, err := openWorkflows(ctx, store)
	if err != nil {
		return ResumeReport{}, fmt.Errorf("pairing: resume: listing the open workflows: %w", err)
	}
	if c.shards != nil {
		ids = slices.DeleteFunc(ids, func(id eventstore.WorkflowID) bool { return !c.shards[eventstore.ShardOf(id, c.shardCount)] })
	}
	ns := t.attrs.namespaces.Get(namespaceOf(namespace))
	// Workers take pages of workflows: one history each from ReadHistory,
	// or one ReadHistories call per page from a store that has it.
	page := 1
	batch, batched := store.(eventstore.HistoriesReader)
	if batched {
		page = eventstore.HistoriesPage
	}
	var (
		mu     sync.Mutex
		report ResumeReport
		errs   []error
		next   = make(chan []eventstore.WorkflowID)
		wg     sync.WaitGroup
	)
	record := func(id eventstore.WorkflowID, history []eventstore.Event, err error) {
		var res result
		if err == nil {
			res = t.observeHistory(ctx, namespace, id, history)
		}
		t.countResumed(ctx, ns, err)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			report.Failed++
			if len(errs) < maxResumeErrors {
				errs = append(errs, fmt.Errorf("workflow %v: %w", id, err))
			}
			return
		}
		report.Workflows++
		report.Activities += res.activities
		report.Runs += res.runs
	}
	// recordPage is record for a page read in one call: its workflows
	// joined one by one, counted and reported once for the page.
	recordPage := func(ids []eventstore.WorkflowID, histories [][]eventstore.Event, err error) {
		var res result
		if err == nil {
			for i, id := range ids {
				r := t.observeHistory(ctx, namespace, id, histories[i])
				histories[i] = nil // joined: let it go
				res.activities += r.activities
				res.runs += r.runs
			}
		}
		t.countResumedN(ctx, ns, err, len(ids))
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			report.Failed += len(ids)
			for _, id := range ids[:min(len(ids), max(maxResumeErrors-len(errs), 0))] {
				errs = append(errs, fmt.Errorf("workflow %v: %w", id, err))
			}
			return
		}
		report.Workflows += len(ids)
		report.Activities += res.activities
		report.Runs += res.runs
	}
	for range min(c.concurrency, max((len(ids)+page-1)/page, 1)) {
		wg.Go(func() {
			for ids := range next {
				if !batched {
					history, err := store.ReadHistory(ctx, ids[0])
					record(ids[0], history, err)
					continue
				}
				histories, err := batch.ReadHistories(ctx, ids)
				if err == nil && len(histories) != len(ids) {
					err = fmt.Errorf("ReadHistories returned %d histories for %d workflows", len(histories), len(ids))
				}
				recordPage(ids, histories, err)
			}
		})
	}
	for start := 0; start < len(ids); start += page {
		if ctx.Err() != nil {
			break
		}
		select {
		case next <- ids[start:min(start+page, len(ids))]:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() == nil {
		// A fill of a workflow read here that overlaps the read (its
		// gap found before the read was joined) may still be joining or
		// recording: the gauges and the completions it decides are
		// right once it has ended.
		_ = t.fill.waitFor(ctx, namespaceOf(namespace), ids)
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return report, fmt.Errorf("pairing: resume: %w", errors.Join(errs...))
	}
	return report, nil
}

// openWorkflows lists the workflows whose current run is open, once each.
func openWorkflows(ctx context.Context, store eventstore.Store) ([]eventstore.WorkflowID, error) {
	active, err := store.ListActive(ctx)
	if err != nil {
		return nil, err
	}
	paused, err := store.ListPaused(ctx)
	if err != nil {
		return nil, err
	}
	seen := make(map[eventstore.WorkflowID]bool, len(active)+len(paused))
	ids := make([]eventstore.WorkflowID, 0, len(active)+len(paused))
	for _, id := range slices.Concat(active, paused) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// observeHistory feeds a history read back: positions from its events'
// Seq, facts not seen committing.
func (t *Tracker) observeHistory(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, history []eventstore.Event) result {
	if len(history) == 0 {
		return result{}
	}
	fx := getEffects(orBackground(ctx))
	defer putEffects(fx)
	t.collect(fx, 0, history, false)
	return t.observe(fx, namespace, workflowID)
}

// countResumed counts one workflow read by a resume.
func (t *Tracker) countResumed(ctx context.Context, ns *nsAttrs, err error) {
	t.countResumedN(ctx, ns, err, 1)
}

// countResumedN counts n workflows read by a resume with the same result.
func (t *Tracker) countResumedN(ctx context.Context, ns *nsAttrs, err error, n int) {
	defer t.recovered()
	if err == nil {
		t.inst.resumed.Add(ctx, int64(n), ns.evicted...)
		return
	}
	t.inst.resumed.Add(ctx, int64(n), ns.resumeFailed(errorType(err))...)
}

// errorType classifies a failed read for aion.pairing.resumed.
func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, eventstore.ErrNotOwner):
		return "not_owner"
	case errors.Is(err, eventstore.ErrNotFound):
		return "not_found"
	}
	return catalog.OtherError
}
