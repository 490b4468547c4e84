package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aionotel/aionotel/eventstore"
)

// qReadMany reads the histories of a page of workflows: one scan of the
// events' primary key per workflow, in one statement (so one snapshot).
const qReadMany = `SELECT workflow_id, seq, run_id, body FROM {events} WHERE workflow_id = ANY($1::uuid[]) ORDER BY workflow_id, seq`

// ReadHistories returns the histories of workflowIDs (see
// [eventstore.HistoriesReader]): one statement per [eventstore.HistoriesPage]
// workflows, each page's histories from one snapshot. An unknown workflow
// has an empty history. The rows are decoded as they arrive, without a
// copy of their bodies; a page's histories share one backing array (each
// capped to its own events, so appending to one never touches another),
// so one history kept keeps that array, a few dozen KiB a page. A row
// that cannot be decoded fails the call with [ErrCorruptRecord].
func (s *Store) ReadHistories(ctx context.Context, workflowIDs []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	out := make([][]eventstore.Event, len(workflowIDs))
	for start := 0; start < len(workflowIDs); start += eventstore.HistoriesPage {
		page := workflowIDs[start:min(start+eventstore.HistoriesPage, len(workflowIDs))]
		if err := s.readPage(ctx, page, out[start:]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readPage reads the histories of page into out (out[i] for page[i]).
// Each row is decoded as it arrives, from the driver's buffer (no copy of
// its body): the rows come grouped by workflow, and a page's histories
// share one backing array, each history capped to its own events. An ID
// given twice is decoded once per position, so that its histories share
// nothing.
func (s *Store) readPage(ctx context.Context, page []eventstore.WorkflowID, out [][]eventstore.Event) error {
	args := make([]pgtype.UUID, len(page))
	// first is where each ID's history goes; again[i], the next position
	// of page[i]'s ID, or -1.
	first := make(map[eventstore.WorkflowID]int, len(page))
	var again []int
	for i, id := range page {
		args[i] = uuidArg(id)
		if j, ok := first[id]; ok {
			if again == nil {
				again = make([]int, len(page))
				for k := range again {
					again[k] = -1
				}
			}
			for again[j] >= 0 {
				j = again[j]
			}
			again[j] = i
			continue
		}
		first[id] = i
	}
	rows, err := s.pool.Query(ctx, s.q.readMany, args)
	if err != nil {
		return s.dbErr("read histories", err)
	}
	defer rows.Close()
	var (
		all     = make([]eventstore.Event, 0, 4*len(page)) // grows once or twice at most
		lo, hi  = make([]int32, len(page)), make([]int32, len(page))
		cur     = -1 // the position of the workflow whose rows are being read
		wf, run pgtype.UUID
		seq     int64
		body    pgtype.DriverBytes
	)
	for rows.Next() {
		if err := rows.Scan(&wf, &seq, &run, &body); err != nil {
			return s.dbErr("read histories", err)
		}
		id := eventstore.WorkflowID(wf.Bytes)
		i, ok := first[id]
		if !ok {
			continue // not asked for: cannot happen
		}
		if i != cur {
			cur = i
			lo[i] = int32(len(all))
		}
		ev, err := decodeEvent(id, eventstore.RunID(run.Bytes), uint64(seq), body)
		if err != nil {
			return fmt.Errorf("%w: workflow %s event %d: %w", ErrCorruptRecord, id, seq, err)
		}
		all = append(all, ev)
		hi[i] = int32(len(all))
		for j := i; again != nil && again[j] >= 0; {
			j = again[j]
			ev, _ := decodeEvent(id, eventstore.RunID(run.Bytes), uint64(seq), body) // decoded once already
			out[j] = append(out[j], ev)
		}
	}
	if err := rows.Err(); err != nil {
		return s.dbErr("read histories", err)
	}
	for i, id := range page {
		switch {
		case first[id] != i: // a repeat: its own, decoded above
		case hi[i] > lo[i]:
			out[i] = all[lo[i]:hi[i]:hi[i]]
			continue
		}
		if out[i] == nil {
			out[i] = []eventstore.Event{}
		}
	}
	return nil
}

var _ eventstore.HistoriesReader = (*Store)(nil)
