package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// checkWait checks the wait for a worker end to end, while the OTLP demo
// runs. In Prometheus: per activity type of the scenario's job, the wait
// histogram has samples, at least half as many as the dispatches of that
// type (the pool claims what is dispatched), and the oldest-waiting gauge
// has a finite, non-negative point. That there are never more waits than
// dispatches is only checked once the demo has stopped
// (checkWaitsPerDispatch): while it runs, one collection reads the
// dispatch counter before the wait histogram, which may meanwhile count
// claims of dispatches the counter has not. In Jaeger: activity spans of several types
// carry their claim events, each within its span, in order and numbered
// from 1 (checkClaims).
func (r *e2e) checkWait(ctx context.Context) {
	r.t.Helper()
	sel := fmt.Sprintf("{job=%q}", r.job)
	var types []string
	r.waitFor(ctx, "the wait series in Prometheus", 2*time.Minute, func(ctx context.Context) error {
		waits, dispatched, err := r.waitsAndDispatches(ctx)
		if err != nil {
			return err
		}
		ages, err := byType(ctx, r, "max by (aion_activity_type) (aion_activity_oldest_waiting_age_seconds"+sel+")")
		if err != nil {
			return err
		}
		types = types[:0]
		var problems []string
		for typ, n := range waits {
			types = append(types, typ)
			if d := dispatched[typ]; n < d/2 {
				problems = append(problems, fmt.Sprintf("%s: %v waits for %v dispatches", typ, n, d))
			}
			if age, ok := ages[typ]; !ok || age < 0 {
				problems = append(problems, fmt.Sprintf("%s: oldest waiting age %v (present %v), want a point >= 0", typ, age, ok))
			}
		}
		sort.Strings(types)
		if len(types) < 3 {
			problems = append(problems, fmt.Sprintf("waits recorded for types %v, want several", types))
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s", strings.Join(problems, "; "))
		}
		return nil
	})

	since := time.Now().Add(-30 * time.Minute)
	var spans, claims int
	r.waitFor(ctx, "claim events on activity spans in Jaeger", 2*time.Minute, func(ctx context.Context) error {
		ops, err := r.jaeger.operations(ctx, r.job)
		if err != nil {
			return err
		}
		var problems []string
		spans, claims = 0, 0
		seen := map[string]bool{}
		for _, op := range ops {
			if !strings.HasPrefix(op, activitySpanPrefix) {
				continue
			}
			td, err := r.jaeger.findTraces(ctx, r.job, op, since, time.Now().Add(time.Minute), 10)
			if err == errNoTraces {
				continue
			}
			if err != nil {
				return err
			}
			for _, s := range claimedSpans(td) {
				if seen[s.Where] {
					continue
				}
				seen[s.Where] = true
				spans++
				claims += len(s.Claims)
				problems = append(problems, checkClaims(s)...)
			}
		}
		if len(problems) > 0 {
			sort.Strings(problems)
			return permanent(fmt.Errorf("%d problems:\n\t%s", len(problems), strings.Join(problems, "\n\t")))
		}
		if spans < 10 {
			return fmt.Errorf("%d activity spans with claim events among operations %v, want 10 or more", spans, ops)
		}
		return nil
	})
	r.t.Logf("wait for a worker: series for %v in Prometheus; %d activity spans in Jaeger with %d claim events, each within its span", types, spans, claims)
}

// checkWaitsPerDispatch checks, once the OTLP demo has stopped and its
// last export is final, that no activity type has more waits recorded than
// dispatches: one wait per dispatch, re-claims add none.
func (r *e2e) checkWaitsPerDispatch(ctx context.Context) {
	r.t.Helper()
	var checked int
	r.waitFor(ctx, "at most one wait per dispatch, in the final export", time.Minute, func(ctx context.Context) error {
		waits, dispatched, err := r.waitsAndDispatches(ctx)
		if err != nil {
			return err
		}
		var problems []string
		for typ, n := range waits {
			if d := dispatched[typ]; n > d {
				problems = append(problems, fmt.Sprintf("%s: %v waits recorded for %v dispatches", typ, n, d))
			}
		}
		if len(problems) > 0 || len(waits) == 0 {
			sort.Strings(problems)
			return fmt.Errorf("%d types with waits, more waits than dispatches: %v", len(waits), problems)
		}
		checked = len(waits)
		return nil
	})
	r.t.Logf("wait for a worker: at most one wait per dispatch for each of %d types, in the final export", checked)
}

// waitsAndDispatches returns, by activity type of the scenario's job, the
// waits recorded and the dispatches counted.
func (r *e2e) waitsAndDispatches(ctx context.Context) (waits, dispatched map[string]float64, err error) {
	sel := fmt.Sprintf("{job=%q}", r.job)
	if waits, err = byType(ctx, r, "sum by (aion_activity_type) (aion_activity_wait_duration_seconds_count"+sel+")"); err != nil {
		return nil, nil, err
	}
	dispatched, err = byType(ctx, r, "sum by (aion_activity_type) (aion_activities_dispatched_total"+sel+")")
	return waits, dispatched, err
}

// byType runs a query by aion_activity_type and returns its values.
func byType(ctx context.Context, r *e2e, expr string) (map[string]float64, error) {
	got, err := instant(ctx, r.prom, expr)
	if err != nil {
		if badQuery(err) {
			return nil, permanent(err)
		}
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range got {
		out[s.Labels["aion_activity_type"]] = s.Value
	}
	return out, nil
}
