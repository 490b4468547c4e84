package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// exported mirrors the part of the stdout exporter's JSON the test reads.
type exported struct {
	ScopeMetrics []struct {
		Metrics []struct {
			Name string
			Data struct {
				DataPoints []struct {
					Attributes []struct {
						Key   string
						Value struct{ Value any }
					}
					Value any
					Count uint64
				}
			}
		}
	}
}

// TestRun runs the quickstart and reads its output back: one workflow started
// and completed, one activity dispatched and succeeded, none left in flight,
// and four timed appends.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.HasPrefix(text, "recorded 4 events of workflow ") {
		t.Fatalf("output starts %q", text[:min(len(text), 60)])
	}
	var got exported
	if err := json.Unmarshal([]byte(text[strings.IndexByte(text, '{'):]), &got); err != nil {
		t.Fatalf("metrics JSON: %v", err)
	}
	values := map[string]float64{} // "name attr=value,..." -> value or count
	for _, sm := range got.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, p := range m.Data.DataPoints {
				key := m.Name
				for _, a := range p.Attributes {
					key += " " + a.Key + "=" + toString(a.Value.Value)
				}
				if v, ok := p.Value.(float64); ok {
					values[key] = v
				} else {
					values[key] = float64(p.Count)
				}
			}
		}
	}
	want := map[string]float64{
		"aion.workflows.started aion.namespace=default aion.workflow.type=greeting":                                      1,
		"aion.workflows.completed aion.namespace=default aion.workflow.status=completed":                                 1,
		"aion.activities.dispatched aion.activity.type=send_email aion.namespace=default":                                1,
		"aion.activities.completed aion.activity.outcome=succeeded aion.activity.type=send_email aion.namespace=default": 1,
		"aion.inflight_activities aion.activity.type=send_email aion.namespace=default":                                  0,
		"aion.activity.duration aion.activity.outcome=succeeded aion.activity.type=send_email aion.namespace=default":    1,
		"aion.store.operation.duration aion.namespace=default db.operation.name=append db.system.name=aion.eventstore":   4,
	}
	for k, v := range want {
		if g, ok := values[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if t.Failed() {
		t.Logf("exported points: %v", values)
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
