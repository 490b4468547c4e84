package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// A third party with its own keyspace runs the suite inside a test of its
// package, one subtest per rule on a fresh store:
//
//	func TestMyKeyspaceConformance(t *testing.T) {
//		conformance.TestKeyspace(t, func(t *testing.T) keyspace.Store {
//			s, err := mykeyspace.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Examples cannot take a *testing.T, so this one runs the same rules through
// the error-returning core, on keyspace.Memory.
func ExampleTestKeyspace() {
	err := conformance.CheckKeyspace(context.Background(), func() (keyspace.Store, func(), error) {
		s := keyspace.NewMemory()
		return s, func() { /* close s here */ }, nil
	}, conformance.WithSeed(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ok")
	// Output: ok
}

// hidingDecorator wraps a store but keeps only the Store methods: it hides
// whatever optional capabilities the inner store has.
type hidingDecorator struct{ eventstore.Store }

func (d hidingDecorator) Unwrap() eventstore.Store { return d.Store }

// The core returns one *RuleError per broken rule; RuleErrors takes the
// joined error apart.
func ExampleRuleErrors() {
	err := conformance.CheckDecorator(context.Background(), func(inner eventstore.Store) eventstore.Store {
		return hidingDecorator{inner}
	})
	for _, re := range conformance.RuleErrors(err) {
		if strings.HasSuffix(re.Rule, "/capabilities") {
			fmt.Println(re.Rule)
		}
	}
	var first *conformance.RuleError
	if errors.As(err, &first) {
		fmt.Println("first failure in suite", first.Suite)
	}
	// Output:
	// outbox/capabilities
	// shardowner/capabilities
	// outbox+shardowner/capabilities
	// historiesreader/capabilities
	// outbox+historiesreader/capabilities
	// shardowner+historiesreader/capabilities
	// outbox+shardowner+historiesreader/capabilities
	// first failure in suite decorator
}

// A Spy records what reaches it and answers with distinctive defaults.
func ExampleSpy() {
	spy := conformance.NewSpy(conformance.CapShardOwner)
	store := spy.Store()
	ctx := context.Background()

	owner := store.(eventstore.ShardOwner)
	fmt.Println("owner of shard 3:", owner.IsCurrentOwner(ctx, 3))
	_, isOutbox := store.(eventstore.Outbox)
	fmt.Println("outbox:", isOutbox)

	sentinel := errors.New("disk on fire")
	spy.SetError(sentinel)
	err := store.Append(ctx, eventstore.RecorderToken(), eventstore.NewWorkflowID(), nil, 0)
	fmt.Println("same error:", err == sentinel)

	for _, c := range spy.Calls() {
		fmt.Println(c.Method, c.Args[len(c.Args)-1])
	}
	// Output:
	// owner of shard 3: false
	// outbox: false
	// same error: true
	// IsCurrentOwner 3
	// Append 0
}
