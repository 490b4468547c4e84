package boltstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// The crash test re-runs this test binary as a child process that appends to
// a bbolt file until it is killed. These variables select the child mode and
// give it its file and random seed.
const (
	crashChildPathEnv = "AIONOTEL_BOLTSTORE_CRASH_CHILD_PATH"
	crashChildSeedEnv = "AIONOTEL_BOLTSTORE_CRASH_CHILD_SEED"
	// crashSeedEnv, when set, replaces the parent's random seed.
	crashSeedEnv = "AIONOTEL_BOLTSTORE_CRASH_SEED"
)

// crashWriters is the number of goroutines of the child, each appending to
// its own stream. While one of them acknowledges a batch (the moment the
// parent may kill), the others are at unrelated points of their own appends:
// encoding, waiting for bbolt's writer lock, writing pages, or in fsync.
const crashWriters = 4

// crashKey returns the stream of writer w of the crash test.
func crashKey(w int) keyspace.StreamKey {
	return keyspace.NewStreamKey(eventstore.WorkflowID{0xC0, 0xFF, 0xEE}, eventstore.RunID{0xBA, 0xD0}, 7, uint32(w))
}

// Every event of the crash test carries (batch id, index in batch, batch
// size) in its WorkerSeq, so a partial batch is detectable.
func crashWorkerSeq(batch uint64, index, size int) uint64 {
	return batch<<16 | uint64(index)<<8 | uint64(size)
}

func splitCrashWorkerSeq(ws uint64) (batch uint64, index, size int) {
	return ws >> 16, int(ws >> 8 & 0xFF), int(ws & 0xFF)
}

// crashText is the event's text: its own coordinates, padded to a length
// that varies so values spill across bbolt pages now and then. A torn or
// misplaced value shows as a text that does not match its WorkerSeq.
func crashText(ws uint64) string {
	pad := int(ws*2654435761%3000) + 1
	return fmt.Sprintf("ws=%d;", ws) + strings.Repeat("x", pad)
}

// TestSurvivesKill9 kills a process appending to a bbolt file with SIGKILL
// at random points, more than 20 times, reopening the file after each kill.
// Each time it checks, for every stream the child writes, that every batch
// the child acknowledged (printed after AppendEvents returned) is there, that
// no batch is there in part, that the store seqs run from 0 without a gap,
// that every value is intact, and that bbolt's own consistency check passes.
// The child continues from the heads each time, so later kills hit a file
// that has grown across restarts.
func TestSurvivesKill9(t *testing.T) {
	if path := os.Getenv(crashChildPathEnv); path != "" {
		crashChild(path, os.Getenv(crashChildSeedEnv))
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary; skipped in -short mode")
	}
	const kills = 24
	seed := rand.Uint64()
	if text := os.Getenv(crashSeedEnv); text != "" {
		var err error
		if seed, err = strconv.ParseUint(text, 10, 64); err != nil {
			t.Fatalf("%s: %v", crashSeedEnv, err)
		}
	}
	t.Logf("seed %d (kill points and batch sizes derive from it; %s=%d replays them)", seed, crashSeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	path := filepath.Join(t.TempDir(), "crash.db")

	var lastAck [crashWriters]uint64
	var totalAcks int
	for kill := range kills {
		acksWanted := 1 + rng.IntN(40)
		cmd := exec.Command(os.Args[0], "-test.run=^TestSurvivesKill9$", "-test.count=1", "-test.timeout=5m")
		cmd.Env = append(os.Environ(),
			crashChildPathEnv+"="+path,
			crashChildSeedEnv+"="+strconv.FormatUint(seed+uint64(kill)+1, 10))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// On a failure below, the child must not outlive the test. (After
		// Wait, Kill only returns os.ErrProcessDone.)
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		sc := bufio.NewScanner(stdout)
		acks := 0
		for acks < acksWanted && sc.Scan() {
			var w int
			var head uint64
			if n, err := fmt.Sscanf(sc.Text(), "ack %d %d", &w, &head); n != 2 || w < 0 || w >= crashWriters {
				t.Logf("kill %d: child printed %q (%v)", kill, sc.Text(), err)
				continue
			}
			if head <= lastAck[w] {
				t.Fatalf("kill %d: writer %d acknowledged head %d after %d", kill, w, head, lastAck[w])
			}
			lastAck[w] = head
			acks++
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", kill, err)
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("kill %d: the child ended with %v before it was killed (after %d of %d acks); stderr:\n%s", kill, err, acks, acksWanted, stderr.String())
		}
		totalAcks += acks
		checkCrashFile(t, path, lastAck, kill)
	}
	t.Logf("%d kills, %d acknowledged batches, final acknowledged heads %v", kills, totalAcks, lastAck)
}

// checkCrashFile opens the file a killed child left and checks it.
func checkCrashFile(t *testing.T, path string, lastAck [crashWriters]uint64, kill int) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("kill %d: reopening the file: %v", kill, err)
	}
	defer s.Close()
	err = s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("kill %d: bbolt consistency check: %v", kill, err)
	}
	list, err := s.ListStreams(ctx, crashKey(0).WorkflowID, crashKey(0).RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) > crashWriters {
		t.Fatalf("kill %d: %d streams, want at most %d", kill, len(list), crashWriters)
	}
	for w := range crashWriters {
		checkCrashStream(t, s, w, lastAck[w], kill)
	}
}

func checkCrashStream(t *testing.T, s *Store, w int, lastAck uint64, kill int) {
	t.Helper()
	ctx := context.Background()
	key := crashKey(w)
	head, err := s.Head(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if head < lastAck {
		t.Fatalf("kill %d: writer %d: head %d is below the acknowledged head %d: an acknowledged batch was lost", kill, w, head, lastAck)
	}
	recs, err := s.ReadFrom(ctx, key, 0, 0)
	if err != nil {
		t.Fatalf("kill %d: writer %d: reading the stream: %v", kill, w, err)
	}
	if uint64(len(recs)) != head {
		t.Fatalf("kill %d: writer %d: %d records under head %d", kill, w, len(recs), head)
	}
	var wantBatch uint64
	for i := 0; i < len(recs); {
		batch, _, size := splitCrashWorkerSeq(recs[i].Event.WorkerSeq)
		if batch != wantBatch || size < 1 || size > 32 {
			t.Fatalf("kill %d: writer %d: record %d starts batch %d of size %d, want batch %d", kill, w, i, batch, size, wantBatch)
		}
		if i+size > len(recs) {
			t.Fatalf("kill %d: writer %d: batch %d holds %d of its %d events: a partial batch was committed", kill, w, batch, len(recs)-i, size)
		}
		for j := range size {
			r := recs[i+j]
			ws := crashWorkerSeq(batch, j, size)
			if r.StoreSeq != uint64(i+j) || r.Event.WorkerSeq != ws {
				t.Fatalf("kill %d: writer %d: record %d has seq %d worker seq %x, want seq %d worker seq %x (a partial batch was committed)", kill, w, i+j, r.StoreSeq, r.Event.WorkerSeq, i+j, ws)
			}
			if msg, ok := r.Event.Content.(keyspace.Message); !ok || msg.Text != crashText(ws) {
				t.Fatalf("kill %d: writer %d: record %d has a damaged value %#v", kill, w, i+j, r.Event.Content)
			}
		}
		i += size
		wantBatch++
	}
}

// crashChild is the child process: each of its writers continues its stream
// from the head with batches of 1 to 32 events, printing each acknowledged
// head, until the process is killed. It returns only by exiting with a
// failure.
func crashChild(path, seedText string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	seed, err := strconv.ParseUint(seedText, 10, 64)
	if err != nil {
		fail(err)
	}
	s, err := Open(path, WithOpenTimeout(time.Minute))
	if err != nil {
		fail(err)
	}
	for w := range crashWriters {
		go func() {
			if err := crashWriter(s, w, rand.New(rand.NewPCG(seed, uint64(w)))); err != nil {
				fail(err)
			}
		}()
	}
	select {}
}

func crashWriter(s *Store, w int, rng *rand.Rand) error {
	ctx := context.Background()
	key := crashKey(w)
	head, err := s.Head(ctx, key)
	if err != nil {
		return err
	}
	var batch uint64
	if head > 0 {
		last, err := s.ReadFrom(ctx, key, head-1, 1)
		if err != nil || len(last) != 1 {
			return fmt.Errorf("writer %d: reading the last record: %d records, %v", w, len(last), err)
		}
		b, _, _ := splitCrashWorkerSeq(last[0].Event.WorkerSeq)
		batch = b + 1
	}
	for ; ; batch++ {
		size := 1 + rng.IntN(32)
		evs := make([]keyspace.ActivityEvent, size)
		for i := range evs {
			ws := crashWorkerSeq(batch, i, size)
			evs[i] = keyspace.ActivityEvent{
				WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
				AgentID: "crash-child", WorkerSeq: ws, EmittedAt: time.Unix(int64(ws), 0).UTC(),
				Content: keyspace.Message{Role: "assistant", Text: crashText(ws)},
			}
		}
		if head, err = s.AppendEvents(ctx, head, evs); err != nil {
			return fmt.Errorf("writer %d: %w", w, err)
		}
		// os.Stdout is unbuffered and the line is shorter than PIPE_BUF: it
		// is in the pipe, whole, when this returns.
		if _, err := fmt.Fprintf(os.Stdout, "ack %d %d\n", w, head); err != nil {
			return err
		}
	}
}
