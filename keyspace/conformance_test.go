package keyspace_test

import (
	"testing"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/keyspace"
)

// TestMemoryConformance runs the reusable keyspace contract suite on the
// reference implementation: every rule is a subtest on a fresh Memory.
func TestMemoryConformance(t *testing.T) {
	conformance.TestKeyspace(t, func(*testing.T) keyspace.Store { return keyspace.NewMemory() })
}
