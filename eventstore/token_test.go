package eventstore

import (
	"errors"
	"testing"
)

func TestWriteToken(t *testing.T) {
	if (WriteToken{}).Valid() {
		t.Error("the zero WriteToken is valid")
	}
	if !RecorderToken().Valid() {
		t.Error("RecorderToken() is not valid")
	}
	m := NewMemory()
	if err := m.Append(t.Context(), WriteToken{}, wfA, []Event{started(runA, "t")}, 0); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Append with the zero token = %v, want ErrInvalidToken", err)
	}
	if err := m.Append(t.Context(), RecorderToken(), wfA, []Event{started(runA, "t")}, 0); err != nil {
		t.Errorf("Append with RecorderToken() = %v", err)
	}
}
