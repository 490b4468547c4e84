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
// has an empty history.
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
func (s *Store) readPage(ctx context.Context, page []eventstore.WorkflowID, out [][]eventstore.Event) error {
	args := make([]pgtype.UUID, len(page))
	for i, id := range page {
		args[i] = uuidArg(id)
	}
	rows, err := s.pool.Query(ctx, s.q.readMany, args)
	if err != nil {
		return s.dbErr("read histories", err)
	}
	defer rows.Close()
	type record struct {
		seq  int64
		run  eventstore.RunID
		body []byte
	}
	byID := make(map[eventstore.WorkflowID][]record, len(page))
	for rows.Next() {
		var (
			wf, run pgtype.UUID
			r       record
		)
		if err := rows.Scan(&wf, &r.seq, &run, &r.body); err != nil {
			return s.dbErr("read histories", err)
		}
		r.run = eventstore.RunID(run.Bytes)
		id := eventstore.WorkflowID(wf.Bytes)
		byID[id] = append(byID[id], r)
	}
	if err := rows.Err(); err != nil {
		return s.dbErr("read histories", err)
	}
	// Decoded per position, so that an ID given twice gets two histories
	// that share nothing.
	for i, id := range page {
		h := make([]eventstore.Event, 0, len(byID[id]))
		for _, r := range byID[id] {
			ev, err := decodeEvent(id, r.run, uint64(r.seq), r.body)
			if err != nil {
				return fmt.Errorf("%w: workflow %s event %d: %w", ErrCorruptRecord, id, r.seq, err)
			}
			h = append(h, ev)
		}
		out[i] = h
	}
	return nil
}

var _ eventstore.HistoriesReader = (*Store)(nil)
