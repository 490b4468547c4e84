package keyspacetest_test

import (
	"reflect"
	"testing"

	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

func TestExpectFailureRecordsEveryKind(t *testing.T) {
	testCases := []struct {
		name  string
		check func(t testing.TB)
		want  []string
	}{
		{"errors", func(t testing.TB) { t.Error("a", 1); t.Errorf("b %d", 2) }, []string{"a 1", "b 2"}},
		{"fatal-ends-the-check", func(t testing.TB) { t.Fatal("c"); t.Error("not reached") }, []string{"c"}},
		{"fatalf-ends-the-check", func(t testing.TB) { t.Fatalf("d %s", "e"); t.Error("not reached") }, []string{"d e"}},
		{"fail", func(t testing.TB) { t.Fail() }, []string{"Fail"}},
		{"failnow", func(t testing.TB) { t.FailNow(); t.Error("not reached") }, []string{"FailNow"}},
		{"skip-is-no-pass", func(t testing.TB) { t.Skip("why"); t.Error("not reached") }, []string{"Skip: why"}},
		{"skipf", func(t testing.TB) { t.Skipf("%s", "why"); t.Error("not reached") }, []string{"Skip: why"}},
		{"skipnow", func(t testing.TB) { t.SkipNow() }, []string{"SkipNow"}},
		{"failed-reports", func(t testing.TB) {
			if t.Failed() {
				t.Error("Failed before any failure")
			}
			t.Error("x")
			if !t.Failed() {
				t.Error("not Failed after one")
			}
		}, []string{"x"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyspacetest.ExpectFailure(t, tc.check); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ExpectFailure = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExpectFailureFailsOnAPass runs ExpectFailure on a check that passes,
// inside ExpectFailure itself: the outer one sees the inner one fail.
func TestExpectFailureFailsOnAPass(t *testing.T) {
	var inner []string
	outer := keyspacetest.ExpectFailure(t, func(tb testing.TB) {
		inner = keyspacetest.ExpectFailure(tb, func(testing.TB) {})
	})
	if inner != nil {
		t.Errorf("inner ExpectFailure returned %q for a passing check, want nothing", inner)
	}
	if len(outer) != 1 || outer[0] != "the check passed; want it to report a failure" {
		t.Errorf("outer failures %q, want the inner ExpectFailure's complaint", outer)
	}
}
