package boltstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/keyspace/boltstore"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

// openStore opens a store on a fresh file and closes it at the end of the
// test. It returns the file's path for tests that reopen it.
func openStore(t testing.TB, opts ...boltstore.Option) (*boltstore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keyspace.db")
	s, err := boltstore.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestRecordsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyspace.db")
	keyspacetest.CheckRecordsSurviveReopen(t, func(t testing.TB) keyspacetest.Store {
		s, err := boltstore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestAppendRefusalsWriteNothing(t *testing.T) {
	s, _ := openStore(t)
	keyspacetest.CheckAppendRefusalsWriteNothing(t, s)
}

func TestListStreamsOrdersActivitiesAsUnsigned(t *testing.T) {
	s, _ := openStore(t)
	keyspacetest.CheckListOrderIsUnsigned(t, s)
}

func TestReadFromLimitsAndBounds(t *testing.T) {
	s, _ := openStore(t)
	keyspacetest.CheckReadFromBounds(t, s)
}

func TestOpenOfALockedFileFailsWithErrLocked(t *testing.T) {
	s, path := openStore(t)
	_, err := boltstore.Open(path, boltstore.WithOpenTimeout(20*time.Millisecond))
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("second Open of an open file = %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := boltstore.Open(path, boltstore.WithOpenTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatalf("Open after Close = %v, want the lock released", err)
	}
	_ = s2.Close()
}

func TestOpenFailsOnWhatIsNotABoltFile(t *testing.T) {
	testCases := []struct {
		name string
		path func(t *testing.T) string
	}{
		{"directory", func(t *testing.T) string { return t.TempDir() }},
		{"missing-parent", func(t *testing.T) string { return filepath.Join(t.TempDir(), "no", "such", "dir", "k.db") }},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := boltstore.Open(tc.path(t))
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

func TestCloseIsIdempotentAndEndsEveryMethod(t *testing.T) {
	s, _ := openStore(t)
	keyspacetest.CheckCloseEndsEveryMethod(t, s, boltstore.ErrClosed)
}

func TestReadMethodsRefuseZeroIDs(t *testing.T) {
	s, _ := openStore(t)
	keyspacetest.CheckReadMethodsRefuseZeroIDs(t, s)
}

// TestStoreConcurrentSafe runs appends to many streams, reads and listings at
// once (run it under -race), then checks every stream holds exactly what its
// writer appended.
func TestStoreConcurrentSafe(t *testing.T) {
	s, _ := openStore(t, boltstore.WithNoSync())
	keyspacetest.CheckConcurrentSafe(t, s)
}

// TestCloseConcurrentWithCallsIsSafe closes the store while calls are in
// flight: each call either completes or returns ErrClosed, and nothing
// panics or races.
func TestCloseConcurrentWithCallsIsSafe(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, boltstore.WithNoSync())
	key := keyspacetest.NewKey(0, 0)
	const goroutines = 4
	running := make(chan struct{}, goroutines)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			k := key
			k.Attempt = uint32(g)
			for i := uint64(0); ; i++ {
				_, err := s.AppendEvents(ctx, i, keyspacetest.Messages(k, i, 1))
				if err == nil {
					_, err = s.ReadFrom(ctx, k, 0, 0)
				}
				if i == 0 {
					running <- struct{}{}
				}
				if errors.Is(err, boltstore.ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// Close once every goroutine has made a call, so Close meets calls in
	// flight.
	for range goroutines {
		<-running
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call racing Close failed with %v, want nil or ErrClosed", err)
	}
}

// Regression: every method of a nil *Store panicked, and of a zero Store
// too ("close of nil channel" from the damage handling it set off). They
// now fail with ErrInvalidArgument, and Close returns nil.
func TestNilAndZeroStoreFailWithoutPanic(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *boltstore.Store
	}{{"nil", nil}, {"zero", &boltstore.Store{}}} {
		t.Run(tc.name, func(t *testing.T) { keyspacetest.CheckUnmadeStoreFailsWithoutPanic(t, tc.s) })
	}
}
