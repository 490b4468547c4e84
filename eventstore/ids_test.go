package eventstore

import (
	"errors"
	"strings"
	"testing"
)

func TestIDsRoundTrip(t *testing.T) {
	wf, run := NewWorkflowID(), NewRunID()
	if wf.IsZero() || run.IsZero() {
		t.Fatal("a new ID is zero")
	}
	if NewWorkflowID() == wf || NewRunID() == run {
		t.Fatal("two new IDs are equal")
	}
	gotWf, err := ParseWorkflowID(wf.String())
	if err != nil || gotWf != wf {
		t.Errorf("ParseWorkflowID(%q) = %v, %v; want %v", wf, gotWf, err, wf)
	}
	gotRun, err := ParseRunID(run.String())
	if err != nil || gotRun != run {
		t.Errorf("ParseRunID(%q) = %v, %v; want %v", run, gotRun, err, run)
	}
	const text = "0190b6f2-7c1d-7a00-8000-00000000abcd"
	if id, _ := ParseWorkflowID(text); id.String() != text {
		t.Errorf("String() = %q, want %q", id.String(), text)
	}
	if !(WorkflowID{}).IsZero() || !(RunID{}).IsZero() {
		t.Error("the zero IDs do not report IsZero")
	}
	if got := ActivityID(42).String(); got != "42" {
		t.Errorf("ActivityID(42).String() = %q", got)
	}
}

func TestParseIDErrors(t *testing.T) {
	testCases := []struct {
		name  string
		parse func(string) error
		kind  string
		input string
	}{
		{name: "workflow garbage", parse: func(s string) error { _, err := ParseWorkflowID(s); return err }, kind: "workflow", input: "not-a-uuid"},
		{name: "workflow empty", parse: func(s string) error { _, err := ParseWorkflowID(s); return err }, kind: "workflow", input: ""},
		{name: "run truncated", parse: func(s string) error { _, err := ParseRunID(s); return err }, kind: "run", input: "0190b6f2-7c1d-7a00-8000"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse(tc.input)
			var pe *ParseIDError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseIDError", err)
			}
			if pe.Kind != tc.kind || pe.Input != tc.input || pe.Unwrap() == nil {
				t.Errorf("ParseIDError = %+v", pe)
			}
			if !errors.Is(err, ErrInvalidArgument) {
				t.Error("a ParseIDError does not match ErrInvalidArgument")
			}
			if errors.Is(err, ErrNotFound) {
				t.Error("a ParseIDError matches ErrNotFound")
			}
			if msg := err.Error(); !strings.Contains(msg, tc.kind) || !strings.Contains(msg, `"`+tc.input+`"`) {
				t.Errorf("message %q does not name the kind and input", msg)
			}
		})
	}
}
