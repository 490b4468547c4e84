package keyspacetest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// ExpectFailure runs check with a testing.TB that records its failures
// instead of failing t, and returns them: one string per Error, Errorf,
// Fatal, Fatalf, Fail, FailNow, Skip, Skipf or SkipNow (a check that skips
// has not passed). It fails t if check reported nothing: a check that does
// not fail on the broken store it was given proves nothing.
//
// check runs on a goroutine of its own, which Fatal, FailNow and the skips
// end, as they end a test. Everything else (Cleanup, TempDir, Context, Log,
// Name, ...) is t's, so cleanups run when t ends.
func ExpectFailure(t testing.TB, check func(t testing.TB)) []string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	failures := r.take()
	if len(failures) == 0 {
		t.Error("the check passed; want it to report a failure")
	}
	return failures
}

// recorder is ExpectFailure's testing.TB.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) add(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, strings.TrimSuffix(msg, "\n"))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fail()                          { r.add("Fail") }
func (r *recorder) FailNow()                       { r.add("FailNow"); runtime.Goexit() }
func (r *recorder) Error(args ...any)              { r.add(fmt.Sprintln(args...)) }
func (r *recorder) Errorf(format string, a ...any) { r.add(fmt.Sprintf(format, a...)) }
func (r *recorder) Fatal(args ...any)              { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, a ...any) { r.Errorf(format, a...); runtime.Goexit() }
func (r *recorder) SkipNow()                       { r.add("SkipNow"); runtime.Goexit() }
func (r *recorder) Skip(args ...any)               { r.add("Skip: " + fmt.Sprintln(args...)); runtime.Goexit() }
func (r *recorder) Skipf(format string, a ...any) {
	r.add("Skip: " + fmt.Sprintf(format, a...))
	runtime.Goexit()
}
func (r *recorder) Failed() bool  { return len(r.take()) > 0 }
func (r *recorder) Skipped() bool { return false }

// run runs the case f named name: as a subtest of t when t is a
// *testing.T, otherwise on a goroutine of its own, waited for, so that a
// Fatal of ExpectFailure's recorder ends the case and not the whole check.
func run(t testing.TB, name string, f func(t testing.TB)) {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		tt.Run(name, func(t *testing.T) { f(t) })
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(t)
	}()
	<-done
}
