package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// checkUsage is printed for `demo check -h` and bad arguments.
const checkUsage = `usage: demo check -store postgres:DSN NODE...

Reads the histories of a cluster's store (the open workflows, one read
each, nothing written) and the aion_inflight_activities gauges of its
live nodes (NODE: a node's Prometheus endpoint, HOST:PORT or a URL), and
prints the activities in flight by type, as the histories say and as the
gauges sum, side by side.

So that the history does not move while it is read, check holds every
append for the read's duration (-freeze, the default: a transaction holds
pgstore's workflows table in SHARE mode, which lets reads, leases, timers
and claims through): the gauges are read until two readings agree, then
the histories, then the gauges again, and they agree when all three do.
With -freeze=false nothing waits, and they agree when, for every type,
the histories' count lies between the gauges read before and after them.
A disagreement is read again, up to -tries times. Exit status 0 when they
agree, 1 when they never did or a read failed, 2 for bad arguments.

`

// runCheck is `demo check`: the cluster claim, that the live nodes'
// in-flight gauges add up to what the histories have in flight, as a
// command a reader can run. It returns the exit status.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, checkUsage); fs.PrintDefaults() }
	store := fs.String("store", "", "the cluster's event store: postgres:DSN")
	tries := fs.Int("tries", 10, "how many times to read before giving up")
	freeze := fs.Bool("freeze", true, "hold the nodes' appends while the histories are read")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	dsn, ok := strings.CutPrefix(*store, "postgres:")
	var bad []string
	if !ok || dsn == "" {
		bad = append(bad, "-store: want postgres:DSN (the store the nodes share)")
	}
	if fs.NArg() == 0 {
		bad = append(bad, "no NODE: give each live node's Prometheus endpoint (HOST:PORT)")
	}
	if *tries < 1 {
		bad = append(bad, fmt.Sprintf("-tries %d: want 1 or more", *tries))
	}
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "demo check: %s\n", strings.Join(bad, "; "))
		return 2
	}
	nodes := fs.Args()
	s, err := pgstore.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintln(stderr, "demo check: -store postgres: cannot connect (check the DSN and that the server is up)")
		return 1
	}
	defer s.Close()

	var last checkReading
	for try := 1; try <= *tries; try++ {
		if try > 1 {
			select {
			case <-ctx.Done():
				return 1
			case <-time.After(time.Second):
			}
		}
		var thaw func()
		if *freeze {
			if thaw, err = freezeHistory(ctx, dsn); err != nil {
				fmt.Fprintln(stderr, "demo check:", err)
				return 1
			}
		}
		last, err = readCheck(ctx, s, nodes, *freeze)
		if thaw != nil {
			thaw()
		}
		if err != nil {
			fmt.Fprintln(stderr, "demo check:", err)
			return 1
		}
		if last.agree() {
			last.print(stdout, nodes)
			fmt.Fprintf(stdout, "agree: the gauges of %d nodes sum to what the histories have in flight (read %d of %d)\n", len(nodes), try, *tries)
			return 0
		}
	}
	last.print(stdout, nodes)
	fmt.Fprintf(stdout, "differ after %d reads: the workload moved between every pair of reads, or a node is missing from the list, or a dead node's shards are not adopted yet\n", *tries)
	return 1
}

// checkReading is one round of reads: the gauges of every node before and
// after the histories, by activity type.
type checkReading struct {
	histories     map[string]int
	openWorkflows int
	before, after []map[string]float64 // per node
	frozen        bool                 // the history did not move: all three must be equal
}

// freezeHistory holds every append of the nodes until the returned
// function is called: a transaction takes pgstore's workflows table in
// SHARE mode, which every append's update of its workflow's row waits for,
// while reads go on. It returns once no append is in progress.
func freezeHistory(ctx context.Context, dsn string) (func(), error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, errors.New("-freeze: cannot connect (check the DSN and that the server is up)")
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, "LOCK TABLE aionotel_workflows IN SHARE MODE")
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("-freeze: holding the appends: %w", err)
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	}, nil
}

// readCheck reads the gauges, the histories, the gauges again. Frozen, it
// first reads the gauges until two readings agree: an append that
// committed just before the freeze may not be observed yet.
func readCheck(ctx context.Context, s eventstore.Store, nodes []string, frozen bool) (checkReading, error) {
	r := checkReading{frozen: frozen}
	var err error
	if r.before, err = scrapeAll(ctx, nodes); err != nil {
		return r, err
	}
	for i := 0; frozen && i < 20; i++ {
		again, err := scrapeAll(ctx, nodes)
		if err != nil {
			return r, err
		}
		if fmt.Sprint(sum(again)) == fmt.Sprint(sum(r.before)) {
			break
		}
		r.before = again
		time.Sleep(50 * time.Millisecond)
	}
	if r.histories, r.openWorkflows, err = historiesInFlight(ctx, s); err != nil {
		return r, err
	}
	if r.after, err = scrapeAll(ctx, nodes); err != nil {
		return r, err
	}
	return r, nil
}

// sum returns the gauges summed over the nodes, by type.
func sum(per []map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, m := range per {
		for typ, v := range m {
			out[typ] += v
		}
	}
	return out
}

// types returns every activity type of the reading, sorted.
func (r checkReading) types() []string {
	set := map[string]bool{}
	for typ := range r.histories {
		set[typ] = true
	}
	for _, per := range [][]map[string]float64{r.before, r.after} {
		for _, m := range per {
			for typ := range m {
				set[typ] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// agree reports whether, for every type, the histories' count equals
// both summed gauge readings (frozen), or lies between them.
func (r checkReading) agree() bool {
	before, after := sum(r.before), sum(r.after)
	for _, typ := range r.types() {
		h := float64(r.histories[typ])
		if r.frozen && (h != before[typ] || h != after[typ]) {
			return false
		}
		if h < min(before[typ], after[typ]) || h > max(before[typ], after[typ]) {
			return false
		}
	}
	return true
}

// print writes the table: one row per type, the histories' count, the
// gauges' sum (after the histories were read) and each node's gauge.
func (r checkReading) print(w io.Writer, nodes []string) {
	how := "the appends held while they were read"
	if !r.frozen {
		how = "read while the workload moved"
	}
	fmt.Fprintf(w, "activities in flight: the histories (%d open workflows; %s) beside the gauges of %d nodes\n", r.openWorkflows, how, len(nodes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "activity type\thistories\tgauges\t")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t", n)
	}
	fmt.Fprintln(tw)
	after := sum(r.after)
	var totalH int
	var totalG float64
	for _, typ := range r.types() {
		fmt.Fprintf(tw, "%s\t%d\t%g\t", typ, r.histories[typ], after[typ])
		for _, m := range r.after {
			fmt.Fprintf(tw, "%g\t", m[typ])
		}
		fmt.Fprintln(tw)
		totalH += r.histories[typ]
		totalG += after[typ]
	}
	fmt.Fprintf(tw, "total\t%d\t%g\t", totalH, totalG)
	for _, m := range r.after {
		var t float64
		for _, v := range m {
			t += v
		}
		fmt.Fprintf(tw, "%g\t", t)
	}
	fmt.Fprintln(tw)
	tw.Flush()
}

// historiesInFlight reads every open workflow's history and counts its
// activities in flight by type, by the pairing rules (see inFlight).
func historiesInFlight(ctx context.Context, s eventstore.Store) (map[string]int, int, error) {
	open, err := s.ListActive(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("listing the open workflows: %w", err)
	}
	counts := map[string]int{}
	for _, wf := range open {
		events, err := s.ReadHistory(ctx, wf)
		if errors.Is(err, eventstore.ErrNotFound) {
			continue // pruned since the listing
		}
		if err != nil {
			return nil, 0, fmt.Errorf("reading workflow %s: %w", wf, err)
		}
		for typ, n := range inFlight(events) {
			counts[typ] += n
		}
	}
	return counts, len(open), nil
}

// inFlight counts a history's activities in flight by type: dispatched
// (ActivityScheduled) in a run and not yet settled, by their first
// terminal (ActivityCompleted, a terminal ActivityFailed,
// ActivityCancelled, ActivityTimedOut; a retryable failure settles
// nothing) or by their run's close (abandoned; a reopen does not revive
// them). This is how the pairing tracker behind the gauge folds history,
// written out here on its own.
func inFlight(events []eventstore.Event) map[string]int {
	type key struct {
		run eventstore.RunID
		act eventstore.ActivityID
	}
	open := map[key]string{} // -> type
	settle := func(k key) { delete(open, k) }
	for _, ev := range events {
		run := ev.EventEnvelope().RunID
		switch e := ev.(type) {
		case eventstore.ActivityScheduled:
			if _, dup := open[key{run, e.ActivityID}]; !dup {
				open[key{run, e.ActivityID}] = e.ActivityType
			}
		case eventstore.ActivityCompleted:
			settle(key{run, e.ActivityID})
		case eventstore.ActivityFailed:
			if e.Error.Kind == eventstore.Terminal {
				settle(key{run, e.ActivityID})
			}
		case eventstore.ActivityCancelled:
			settle(key{run, e.ActivityID})
		case eventstore.ActivityTimedOut:
			settle(key{run, e.ActivityID})
		case eventstore.WorkflowCompleted, eventstore.WorkflowFailed, eventstore.WorkflowCancelled,
			eventstore.WorkflowTimedOut, eventstore.WorkflowContinuedAsNew:
			for k := range open {
				if k.run == run {
					delete(open, k)
				}
			}
		}
	}
	counts := map[string]int{}
	for _, typ := range open {
		counts[typ]++
	}
	return counts
}

// scrapeAll reads aion_inflight_activities from every node.
func scrapeAll(ctx context.Context, nodes []string) ([]map[string]float64, error) {
	out := make([]map[string]float64, len(nodes))
	for i, n := range nodes {
		m, err := scrape(ctx, n)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// activityTypeLabel finds the activity type label of a series.
var activityTypeLabel = regexp.MustCompile(`aion_activity_type="((?:[^"\\]|\\.)*)"`)

// scrape reads a node's Prometheus endpoint and sums its
// aion_inflight_activities series by activity type (over namespaces).
func scrape(ctx context.Context, node string) (map[string]float64, error) {
	url := node
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	if !strings.Contains(strings.SplitN(url, "://", 2)[1], "/") {
		url += "/metrics"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node %s: %s", node, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "aion_inflight_activities{") {
			continue
		}
		m := activityTypeLabel.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		typ, err := strconv.Unquote(`"` + m[1] + `"`)
		if err != nil {
			typ = m[1]
		}
		// The value follows the closing brace (a timestamp may follow it).
		value := strings.Fields(line[strings.LastIndex(line, "}")+1:])
		if len(value) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(value[0], 64)
		if err != nil {
			return nil, fmt.Errorf("node %s: %q: %w", node, line, err)
		}
		out[typ] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	return out, nil
}
