package exporttest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// Regression: a WithAttributes key that the Prometheus exporter cannot turn
// into a label, or that names a label the exporter adds itself, was
// accepted and then failed every scrape of the process with HTTP 500. Each
// is now dropped by New (and reported to the error handler; New succeeds);
// with every key, dropped or kept, the scrape and the OTLP export work.
func TestWithAttributesKeysKeepExportWorking(t *testing.T) {
	testCases := []struct {
		name    string
		key     string
		dropped bool
	}{
		{"only non-ASCII letters", "ключ", true},
		{"Prometheus reserved name", "__name__", true},
		{"exporter's scope label", "otel_scope_name", true},
		{"exporter's scope label with dots", "otel.scope.version", true},
		// The OTel exporter serves "le" twice on every bucket series, with
		// HTTP 200; a real Prometheus then refuses the whole target.
		{"histogram bucket label", "le", true},
		{"summary quantile label", "quantile", true},
		{"leading digit", "1abc", false},
		{"NUL inside", "a\x00b", false},
		{"leading underscore", "_x", false},
		{"mixed scripts", "k.ключ", false},
		{"mixed scripts, underscores first", "ключ.k", true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t)
			e := newExporters(t, r)
			p := newPipeline(t)
			s, err := otelstore.New(eventstore.NewMemory(), otelstore.WithMeterProvider(p.mp),
				otelstore.WithTracerProvider(p.tp), otelstore.WithAttributes(attribute.String(tc.key, "v")))
			if err != nil {
				t.Fatalf("New with key %q: %v (a bad key is dropped, never a failed New)", tc.key, err)
			}
			ctx, wf := context.Background(), eventstore.NewWorkflowID()
			if err := s.Append(ctx, eventstore.RecorderToken(), wf, []eventstore.Event{eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: eventstore.NewRunID()}, WorkflowType: "checkout"}}, 0); err != nil {
				t.Fatal(err)
			}
			code, body := p.scrape()
			if code != http.StatusOK {
				t.Errorf("scrape: HTTP %d: %.300s", code, body)
			}
			if tc.dropped && strings.Contains(body, `="v"`) {
				t.Errorf("key %q was to be dropped, but the scrape has its value: %.300s", tc.key, body)
			}
			if err := p.export(ctx, e); err != nil {
				t.Errorf("OTLP export: %v", err)
			}
		})
	}
}

// FuzzAttributeKey feeds arbitrary bytes as a WithAttributes key (with
// string, string slice and int values) to both decorators and to a shared
// pairing tracker: each constructor either refuses it with its
// ErrInvalidOption or, after a workflow runs through, a Prometheus scrape
// succeeds and the OTLP export decodes.
func FuzzAttributeKey(f *testing.F) {
	for _, k := range []string{"deployment", "ключ", "__name__", "otel_scope_name", "le", "1abc", "a\x00b", "\xff", "", "error_type", "k.ключ"} {
		f.Add(k, "v")
	}
	r := newReceiver(f)
	e := newExporters(f, r)
	f.Fuzz(func(t *testing.T, key, value string) {
		p := newPipeline(t)
		attrs := []attribute.KeyValue{attribute.String(key, value), attribute.StringSlice(key+".s", []string{value}), attribute.Int(key+".n", 1)}
		tracker, err := pairing.New(pairing.WithMeterProvider(p.mp), pairing.WithAttributes(attrs...))
		if errors.Is(err, pairing.ErrInvalidOption) {
			tracker = nil
		} else if err != nil {
			t.Fatal(err)
		}
		opts := []otelstore.Option{otelstore.WithMeterProvider(p.mp), otelstore.WithTracerProvider(p.tp), otelstore.WithAttributes(attrs...)}
		for _, shared := range []*pairing.Tracker{nil, tracker} {
			s, err := otelstore.New(eventstore.NewMemory(), append(opts, otelstore.WithPairing(shared))...)
			if errors.Is(err, otelstore.ErrInvalidOption) {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			ctx, wf, run := context.Background(), eventstore.NewWorkflowID(), eventstore.NewRunID()
			env := eventstore.Envelope{RunID: run}
			if err := s.Append(ctx, eventstore.RecorderToken(), wf, []eventstore.Event{
				eventstore.WorkflowStarted{Envelope: env, WorkflowType: "checkout"},
				eventstore.ActivityScheduled{Envelope: env, ActivityType: "charge"},
			}, 0); err != nil {
				t.Fatal(err)
			}
		}
		if ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), otelstore.WithMeterProvider(p.mp), otelstore.WithTracerProvider(p.tp), otelstore.WithAttributes(attrs...)); err == nil {
			_, _ = ks.Head(context.Background(), keyspace.StreamKey{})
		} else if !errors.Is(err, otelstore.ErrInvalidOption) {
			t.Fatal(err)
		}
		if code, body := p.scrape(); code != http.StatusOK {
			t.Fatalf("key %q: scrape: HTTP %d: %.300s", key, code, body)
		}
		if err := p.export(context.Background(), e); err != nil {
			t.Fatalf("key %q: OTLP export: %v", key, err)
		}
	})
}
