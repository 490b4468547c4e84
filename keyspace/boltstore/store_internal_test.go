package boltstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

func testEvents(key keyspace.StreamKey, n int) []keyspace.ActivityEvent {
	out := make([]keyspace.ActivityEvent, n)
	for i := range out {
		out[i] = keyspace.ActivityEvent{
			WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
			AgentID: "agent", WorkerSeq: uint64(i), EmittedAt: time.Unix(int64(i), 0).UTC(),
			Content: keyspace.Message{Text: "x"},
		}
	}
	return out
}

// rawUpdate opens the closed file at path with bbolt directly and runs fn in
// a write transaction on the data bucket.
func rawUpdate(t *testing.T, path string, fn func(b *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(dataBucket)) }); err != nil {
		t.Fatal(err)
	}
}

// TestRegionTagDisjointness shares the data bucket with keys of other
// regions, including keys whose bytes after the tag equal a stream's: the
// store never reads, lists or changes them, and every key it writes starts
// with RegionTag.
func TestRegionTagDisjointness(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	key := keyspace.NewStreamKey(eventstore.NewWorkflowID(), eventstore.NewRunID(), 4, 1)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	foreign := map[string]string{}
	for _, tag := range []byte{0x00, 'E', 'N', 'P', 0xFF} {
		for seq := range uint64(3) {
			k := appendRecordKey(nil, streamPrefix(key), seq)
			k[0] = tag
			foreign[string(k)] = "foreign " + string(tag)
		}
		foreign[string([]byte{tag})] = "bare tag"
	}
	rawUpdate(t, path, func(b *bolt.Bucket) error {
		for k, v := range foreign {
			if err := b.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if head, err := s.Head(ctx, key); err != nil || head != 0 {
		t.Fatalf("Head with only foreign keys around = %d, %v; want 0", head, err)
	}
	if list, err := s.ListStreams(ctx, key.WorkflowID, key.RunID); err != nil || len(list) != 0 {
		t.Fatalf("ListStreams with only foreign keys around = %v, %v; want none", list, err)
	}
	if _, err := s.AppendEvents(ctx, 0, testEvents(key, 5)); err != nil {
		t.Fatal(err)
	}
	recs, err := s.ReadFrom(ctx, key, 0, 0)
	if err != nil || len(recs) != 5 {
		t.Fatalf("ReadFrom = %d records, %v; want 5", len(recs), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	own := 0
	rawUpdate(t, path, func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if want, ok := foreign[string(k)]; ok {
				if string(v) != want {
					t.Errorf("foreign key %x changed to %q", k, v)
				}
				delete(foreign, string(k))
				return nil
			}
			if k[0] != RegionTag || len(k) != recordKeyLen {
				t.Errorf("the store wrote key %x outside its region", k)
			}
			own++
			return nil
		})
	})
	if len(foreign) != 0 || own != 5 {
		t.Fatalf("after the appends: %d foreign keys missing, %d own keys; want 0 and 5", len(foreign), own)
	}
}

func TestCorruptRecordsFailReadsClearly(t *testing.T) {
	ctx := context.Background()
	key := keyspace.NewStreamKey(eventstore.NewWorkflowID(), eventstore.NewRunID(), 0, 0)
	testCases := []struct {
		name   string
		damage func(b *bolt.Bucket) error
		want   string
	}{
		{"future-version", func(b *bolt.Bucket) error {
			k := appendRecordKey(nil, streamPrefix(key), 1)
			v := bytes.Clone(b.Get(k))
			v[0] = 9
			return b.Put(k, v)
		}, "format version 9 is not supported"},
		{"gap", func(b *bolt.Bucket) error {
			return b.Delete(appendRecordKey(nil, streamPrefix(key), 1))
		}, "found record 2 where record 1 belongs"},
		{"huge-last-seq", func(b *bolt.Bucket) error {
			// The last record's key now claims seq 2^62: the head read
			// from it is huge, and ReadFrom must not allocate for it.
			k := appendRecordKey(nil, streamPrefix(key), 2)
			v := bytes.Clone(b.Get(k))
			if err := b.Delete(k); err != nil {
				return err
			}
			return b.Put(appendRecordKey(nil, streamPrefix(key), 1<<62), v)
		}, "found record 4611686018427387904 where record 2 belongs"},
		{"truncated", func(b *bolt.Bucket) error {
			k := appendRecordKey(nil, streamPrefix(key), 1)
			return b.Put(k, bytes.Clone(b.Get(k))[:4])
		}, "record 1"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "k.db")
			s, err := Open(path, WithNoSync())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.AppendEvents(ctx, 0, testEvents(key, 3)); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			rawUpdate(t, path, tc.damage)
			s, err = Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.ReadFrom(ctx, key, 0, 0)
			if !errors.Is(err, ErrCorruptRecord) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), key.String()) {
				t.Fatalf("ReadFrom of a damaged stream = %v, want ErrCorruptRecord naming the stream and saying %q", err, tc.want)
			}
		})
	}
}

func TestOpenRefusesANewerLayoutAndLeavesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "newer.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		return b.Put(layoutKey, []byte{LayoutVersion + 1})
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path); !errors.Is(err, ErrLayoutVersion) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("Open of a newer layout = %v, want ErrLayoutVersion", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("Open changed a file it refused")
	}
}

func TestOpenRecordsTheLayoutVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	s, err := Open(path, WithFileMode(0o640))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("file mode %v, want 0640", fi.Mode().Perm())
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(metaBucket).Get(layoutKey); !bytes.Equal(v, []byte{LayoutVersion}) {
			t.Errorf("layout version %x, want %d", v, LayoutVersion)
		}
		if tx.Bucket(dataBucket) == nil {
			t.Error("no data bucket")
		}
		return nil
	})
}

func TestConfigDefaults(t *testing.T) {
	c := newConfig([]Option{nil})
	if c.openTimeout != time.Second || c.noSync || c.fileMode != 0o600 {
		t.Fatalf("defaults = %+v, want a 1s open timeout, fsync on, mode 0600", c)
	}
	c = newConfig([]Option{WithOpenTimeout(-1), WithNoSync(), WithFileMode(0o644)})
	if c.openTimeout != -1 || !c.noSync || c.fileMode != 0o644 {
		t.Fatalf("configured = %+v", c)
	}
}

// waitingCtx is a context that reports on asked when Done is first
// called: when the call given it starts to wait on it.
type waitingCtx struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// TestWaitingAppendEndsWithItsContext: an append waiting for the append
// before it (here, the writer slot held as that append holds it) returns
// its context's error once the context ends, writes nothing, and leaves
// the slot to the next append, which commits at the same expected seq.
func TestWaitingAppendEndsWithItsContext(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "wait.db"), WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	key := keyspace.NewStreamKey(eventstore.NewWorkflowID(), eventstore.NewRunID(), 1, 0)
	s.writer <- struct{}{} // an append in progress
	parent, cancel := context.WithCancel(context.Background())
	ctx := &waitingCtx{Context: parent, asked: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := s.AppendEvents(ctx, 0, testEvents(key, 2))
		done <- err
	}()
	<-ctx.asked // it waits for the writer slot
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("AppendEvents waiting for the writer, its context cancelled = %v, want context.Canceled", err)
	}
	s.unlockWriter() // the append in progress ends
	if head, err := s.Head(context.Background(), key); err != nil || head != 0 {
		t.Fatalf("Head after the cancelled append = %d, %v; want 0", head, err)
	}
	if head, err := s.AppendEvents(context.Background(), 0, testEvents(key, 2)); err != nil || head != 2 {
		t.Fatalf("the next AppendEvents = %d, %v; want 2", head, err)
	}
}
