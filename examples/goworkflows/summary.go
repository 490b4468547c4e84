package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/cschleiden/go-workflows/backend/metrics"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ownMetrics is a go-workflows metrics.Client that keeps what go-workflows
// itself reports: counters summed and distributions counted, by name and
// tags.
type ownMetrics struct {
	mu    *sync.Mutex
	tags  metrics.Tags
	count map[string]int64   // name{tags} -> counter sum or distribution count
	sum   map[string]float64 // name{tags} -> distribution sum
}

func newOwnMetrics() *ownMetrics {
	return &ownMetrics{mu: &sync.Mutex{}, count: map[string]int64{}, sum: map[string]float64{}}
}

func (m *ownMetrics) key(name string, tags metrics.Tags) string {
	all := map[string]string{}
	for k, v := range m.tags {
		all[k] = v
	}
	for k, v := range tags {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		if k != "activity" && k != "event" && k != "backend" { // the summary sums over them
			keys = append(keys, k+"="+all[k])
		}
	}
	sort.Strings(keys)
	return name + "{" + strings.Join(keys, ",") + "}"
}

func (m *ownMetrics) Counter(name string, tags metrics.Tags, value int64) {
	m.mu.Lock()
	m.count[m.key(name, tags)] += value
	m.mu.Unlock()
}

func (m *ownMetrics) Distribution(name string, tags metrics.Tags, value float64) {
	m.mu.Lock()
	k := m.key(name, tags)
	m.count[k]++
	m.sum[k] += value
	m.mu.Unlock()
}

func (m *ownMetrics) Gauge(name string, tags metrics.Tags, value int64) {
	m.mu.Lock()
	m.count[m.key(name, tags)] = value
	m.mu.Unlock()
}

func (m *ownMetrics) Timing(name string, tags metrics.Tags, d time.Duration) {
	m.Distribution(name, tags, float64(d/time.Millisecond))
}

func (m *ownMetrics) WithTags(tags metrics.Tags) metrics.Client {
	all := metrics.Tags{}
	for k, v := range m.tags {
		all[k] = v
	}
	for k, v := range tags {
		all[k] = v
	}
	return &ownMetrics{mu: m.mu, tags: all, count: m.count, sum: m.sum}
}

// byPrefix sums the counts of the series whose key starts with prefix.
func (m *ownMetrics) byPrefix(prefix string) (count int64, sum float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.count {
		if strings.HasPrefix(k, prefix) {
			count += v
			sum += m.sum[k]
		}
	}
	return count, sum
}

func (m *ownMetrics) series(prefix string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, v := range m.count {
		if strings.HasPrefix(k, prefix) {
			out = append(out, fmt.Sprintf("%s %d", strings.TrimPrefix(k, prefix), v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// spanCounter counts the timeline's ended spans.
type spanCounter struct{ runs, activities, calls atomic.Int64 }

func (s *spanCounter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *spanCounter) OnEnd(sp sdktrace.ReadOnlySpan) {
	switch {
	case strings.HasPrefix(sp.Name(), "workflow "):
		s.runs.Add(1)
	case strings.HasPrefix(sp.Name(), "activity "):
		s.activities.Add(1)
	default:
		s.calls.Add(1)
	}
}
func (s *spanCounter) Shutdown(context.Context) error   { return nil }
func (s *spanCounter) ForceFlush(context.Context) error { return nil }

// figures is what the wrapper's metrics say: per instrument, per series
// (its attributes other than the namespace), a counter's sum, a gauge's
// value or a histogram's count; and each histogram's sum over its series.
type figures struct {
	value map[string]map[string]float64
	sum   map[string]float64
}

func collect(r *sdkmetric.ManualReader) figures {
	f := figures{value: map[string]map[string]float64{}, sum: map[string]float64{}}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		return f
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if f.value[m.Name] == nil {
				f.value[m.Name] = map[string]float64{}
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					f.value[m.Name][label(dp.Attributes)] += float64(dp.Value)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					f.value[m.Name][label(dp.Attributes)] = dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					f.value[m.Name][label(dp.Attributes)] += float64(dp.Count)
					f.sum[m.Name] += dp.Sum
				}
			}
		}
	}
	return f
}

// label names a series by its attributes' values, the namespace left out.
func label(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		if kv.Key != "aion.namespace" {
			parts = append(parts, kv.Value.String())
		}
	}
	return strings.Join(parts, "/")
}

// total sums an instrument's series.
func (f figures) total(name string) float64 {
	t := 0.0
	for _, v := range f.value[name] {
		t += v
	}
	return t
}

// list prints an instrument's series, largest first.
func (f figures) list(name string) string {
	type kv struct {
		k string
		v float64
	}
	var all []kv
	for k, v := range f.value[name] {
		if v != 0 {
			all = append(all, kv{k, v})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	var out []string
	for _, e := range all {
		out = append(out, fmt.Sprintf("%s %g", e.k, e.v))
	}
	if len(out) == 0 {
		return "0"
	}
	return strings.Join(out, ", ")
}

// inflight is the wrapper's in-flight gauge, summed.
func inflight(r *sdkmetric.ManualReader) int64 {
	return int64(collect(r).total("aion.inflight_activities"))
}

// printSummary prints, row by row, what go-workflows' own metrics gave and
// what the wrapper recorded, on this run.
func printSummary(out io.Writer, r *sdkmetric.ManualReader, own *ownMetrics, spans *spanCounter, orders int, cancelled int64) error {
	f := collect(r)
	ownCount := func(prefix string) string { n, _ := own.byPrefix(prefix); return fmt.Sprint(n) }
	ownMean := func(prefix string) string {
		n, s := own.byPrefix(prefix)
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf("%d, mean %.1f ms", n, s/float64(n))
	}
	mean := func(name string) string {
		n := f.total(name)
		if n == 0 {
			return "0"
		}
		return fmt.Sprintf("%g, mean %.1f ms (%s)", n, 1000*f.sum[name]/n, f.list(name))
	}
	logf(out, "\nstarted %d workflows (%d cancelled by the client)\n", orders, cancelled)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "what\tgo-workflows' own metrics\taionotel (otelworkflows)")
	rows := [][3]string{
		{"workflows started", "workflow.created " + ownCount("workflows.workflow.created"), f.list("aion.workflows.started")},
		{"workflows closed", own.series("workflows.workflow.finished"), f.list("aion.workflows.completed")},
		{"workflow duration", "-", mean("aion.workflow.duration")},
		{"activities dispatched", "activity.task.scheduled " + ownCount("workflows.activity.task.scheduled"), f.list("aion.activities.dispatched")},
		{"activities completed", "activity.task.processed " + ownCount("workflows.activity.task.processed") + " (no outcome)", f.list("aion.activities.completed")},
		{"activity duration", "execution only: " + ownMean("workflows.activity.task.processed"), mean("aion.activity.duration")},
		{"activity retries", "-", f.list("aion.activities.retried")},
		{"activities in flight", "-", fmt.Sprintf("%g now, by type; oldest age per type", f.total("aion.inflight_activities"))},
		{"activity time in queue", ownMean("workflows.activity.task.time_in_queue"), mean("aion.activity.wait.duration")},
		{"workflow task time in queue", ownMean("workflows.workflow.task.time_in_queue"), mean("aion.workflow.task.wait.duration")},
		{"backend calls", "-", fmt.Sprintf("%g timed calls, mean %.2f ms", f.total("aion.store.operation.duration"), 1000*f.sum["aion.store.operation.duration"]/max(1, f.total("aion.store.operation.duration")))},
		{"timeline (history's times)", "-", fmt.Sprintf("%d run spans, %d activity spans", spans.runs.Load(), spans.activities.Load())},
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", row[0], row[1], row[2])
	}
	return tw.Flush()
}
