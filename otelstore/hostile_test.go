package otelstore_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
)

// hostile is a value no exporter accepts as it is: invalid UTF-8, and longer
// than any bound.
var hostile = "bad\xff\xfe" + strings.Repeat("x", 5000)

// Every value a caller or a store controls that reaches an attribute or span
// text is made valid UTF-8 and bounded before it is admitted: the OTLP
// protobuf encoding and the Prometheus exporter refuse anything else, and the
// cumulative state would keep refusing it until restart.
func TestHostileValuesStayExportable(t *testing.T) {
	testCases := []struct {
		name string
		opts []otelstore.Option
		// workflowType and activityType go into the appended events;
		// storeErr is the message of the inner store's failure.
		workflowType, activityType, storeErr string
		classify                             func(error) string
	}{
		{name: "workflow type", workflowType: hostile},
		{name: "activity type", activityType: hostile},
		{name: "namespace", opts: []otelstore.Option{otelstore.WithNamespace(hostile)}},
		{name: "attribute value", opts: []otelstore.Option{otelstore.WithAttributes(
			attribute.String("deployment", hostile), attribute.StringSlice("tags", []string{"ok", hostile}))}},
		{name: "classifier result", classify: func(error) string { return hostile }},
		{name: "error message", storeErr: hostile},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			opts := tc.opts
			if tc.classify != nil {
				opts = append(opts, otelstore.WithErrorClassifier(tc.classify))
			}
			storeErr := tc.storeErr
			if storeErr == "" {
				storeErr = "unavailable"
			}
			s := h.wrap(t, failing{Store: eventstore.NewMemory(), err: errors.New(storeErr)}, opts...)
			w := newWriter(t, s)
			w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: tc.workflowType + "wf"},
				w.scheduled(0, tc.activityType+"act", 0))
			if _, err := s.ReadHistory(context.Background(), w.wf); err == nil {
				t.Fatal("the failing store did not fail")
			}
			assertExportable(t, h)
		})
	}
}

// The keyspace decorator puts only IDs and its own names in attributes, and
// error text from the inner keyspace is cleaned like the event store's.
func TestKeyspaceHostileErrorStaysExportable(t *testing.T) {
	h := newHarness(t)
	ks, err := otelstore.NewKeyspace(failingKeyspace{keyspace.NewMemory(), errors.New(hostile)}, h.keyspaceOptions(otelstore.WithAttributes(attribute.String("deployment", hostile)))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Head(context.Background(), keyspace.StreamKey{}); err == nil {
		t.Fatal("the failing keyspace did not fail")
	}
	assertExportable(t, h)
}

type failingKeyspace struct {
	keyspace.Store
	err error
}

func (f failingKeyspace) Head(context.Context, keyspace.StreamKey) (uint64, error) { return 0, f.err }

// The series carry the cleaned values, so a hostile type is still told apart
// from the others.
func TestHostileWorkflowTypeRecordedCleaned(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, eventstore.NewMemory())
	w := newWriter(t, s)
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "bad\xff\xfe"})
	h.assertSum(t, "aion.workflows.started", true, point(1, ns, otelstore.AttrWorkflowType.String("bad\uFFFD")))
}

// The span of a failed call keeps a readable, bounded error text: the status
// description and (WithExceptionEvents) the exception event's message, with
// the exception type of the inner error.
func TestErrorTextCleanedAndBounded(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, failing{Store: eventstore.NewMemory(), err: &customError{hostile}}, otelstore.WithExceptionEvents(true))
	_, _ = s.ReadHistory(context.Background(), eventstore.NewWorkflowID())
	sp := h.spans.Ended()[0]
	want := attrvalue.Cut(hostile, attrvalue.MaxTextLen)
	if got := sp.Status().Description; got != want {
		t.Errorf("status description is %d bytes %q..., want the cleaned %d bytes", len(got), got[:min(len(got), 10)], len(want))
	}
	events := sp.Events()
	if len(events) != 1 || events[0].Name != "exception" {
		t.Fatalf("span events %v, want one exception", events)
	}
	gotAttrs := attribute.NewSet(events[0].Attributes...)
	if v, _ := gotAttrs.Value("exception.message"); v.AsString() != want {
		t.Errorf("exception.message is %d bytes, want the cleaned %d bytes", len(v.AsString()), len(want))
	}
	if v, _ := gotAttrs.Value("exception.type"); !strings.HasSuffix(v.AsString(), "customError") {
		t.Errorf("exception.type = %q, want the inner error's type", v.AsString())
	}
}

// assertExportable checks every string the SDK would export (resource,
// scope, metric and span names, attribute values, span events and status):
// valid UTF-8, attribute values at most attrvalue.MaxLen bytes, span text at
// most attrvalue.MaxTextLen bytes.
func assertExportable(t *testing.T, h *harness) {
	t.Helper()
	check := func(where, s string, limit int) {
		t.Helper()
		if !utf8.ValidString(s) || len(s) > limit {
			t.Errorf("%s: %d bytes, valid UTF-8 %v: not exportable as it is", where, len(s), utf8.ValidString(s))
		}
	}
	checkAttrs := func(where string, kvs []attribute.KeyValue, limit int) {
		t.Helper()
		for _, kv := range kvs {
			check(where+" key", string(kv.Key), attrvalue.MaxLen)
			switch kv.Value.Type() {
			case attribute.STRING:
				check(where+" "+string(kv.Key), kv.Value.AsString(), limit)
			case attribute.STRINGSLICE:
				for _, s := range kv.Value.AsStringSlice() {
					check(where+" "+string(kv.Key), s, limit)
				}
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	checkAttrs("resource", rm.Resource.Attributes(), attrvalue.MaxLen)
	points := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, set := range pointAttrs(m) {
				points++
				checkAttrs(m.Name, set.ToSlice(), attrvalue.MaxLen)
			}
		}
	}
	if points == 0 {
		t.Error("no metric points collected")
	}
	spans := h.spans.Ended()
	if len(spans) == 0 {
		t.Error("no spans recorded")
	}
	for _, sp := range spans {
		check("span name", sp.Name(), attrvalue.MaxLen)
		checkAttrs(sp.Name(), sp.Attributes(), attrvalue.MaxLen)
		check(sp.Name()+" status", sp.Status().Description, attrvalue.MaxTextLen)
		for _, ev := range sp.Events() {
			check(sp.Name()+" event", ev.Name, attrvalue.MaxLen)
			checkAttrs(sp.Name()+" event "+ev.Name, ev.Attributes, attrvalue.MaxTextLen)
		}
	}
}

// pointAttrs returns the attribute set of every data point of m.
func pointAttrs(m metricdata.Metrics) []attribute.Set {
	var out []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	}
	return out
}

// nilReceiverError reads its receiver: a typed nil of it panics in Error.
type nilReceiverError struct{ msg string }

func (e *nilReceiverError) Error() string { return e.msg }

// panickingError panics in Error.
type panickingError struct{}

func (panickingError) Error() string { panic("Error exploded") }

// Regression: an error whose Error method panics (a typed nil pointer, or a
// method that panics), a typed nil *SequenceConflictError (its Found
// was read), or a typed nil whose Unwrap panics (classification walks it), made the decorator panic while building the span,
// where the undecorated call returns the error. The call now returns the
// same error value, and the span says what fmt says of it.
func TestErrorWithPanickingMethodReturned(t *testing.T) {
	testCases := []struct {
		name string
		err  error
		want string
	}{
		{"typed nil pointer", (*nilReceiverError)(nil), "<nil>"},
		{"panicking Error", panickingError{}, "%!v(PANIC=Error method: Error exploded)"},
		// A typed nil conflict matches ErrSequenceConflict but has no Found.
		{"typed nil sequence conflict", (*eventstore.SequenceConflictError)(nil), "<nil>"},
		// errors.Is and errors.As walk Unwrap, which reads the receiver.
		{"typed nil with a chain", (*fs.PathError)(nil), "<nil>"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			s := h.wrap(t, failing{Store: eventstore.NewMemory(), err: tc.err})
			var got error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("ReadHistory panicked: %v", r)
					}
				}()
				_, got = s.ReadHistory(context.Background(), eventstore.NewWorkflowID())
			}()
			if got != tc.err {
				t.Errorf("ReadHistory returned %#v, want the inner error value", got)
			}
			if spans := h.spans.Ended(); len(spans) != 1 || spans[0].Status().Description != tc.want {
				t.Fatalf("spans %v, want one with status description %q", spans, tc.want)
			}
			assertExportable(t, h)
		})
	}
}
