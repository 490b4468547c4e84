package eventstore

import "testing"

func TestActivityErrorKindString(t *testing.T) {
	testCases := []struct {
		kind ActivityErrorKind
		want string
	}{
		{Retryable, "retryable"},
		{Terminal, "terminal"},
		{0, "unknown"},
		{99, "unknown"},
	}
	for _, tc := range testCases {
		if got := tc.kind.String(); got != tc.want {
			t.Errorf("ActivityErrorKind(%d).String() = %q, want %q", uint8(tc.kind), got, tc.want)
		}
	}
}

func TestEnvelopeEventEnvelope(t *testing.T) {
	e := Envelope{WorkflowID: wfA, RunID: runA, Seq: 4, RecordedAt: t0}
	ev := ActivityCompleted{Envelope: e}
	if got := ev.EventEnvelope(); got != e {
		t.Errorf("EventEnvelope() = %+v, want %+v", got, e)
	}
}
