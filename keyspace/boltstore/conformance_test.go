package boltstore_test

import (
	"path/filepath"
	"testing"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/boltstore"
)

// TestConformance runs the keyspace contract suite on a fresh bbolt file per
// rule, with fsync on (the default), as users run it.
func TestConformance(t *testing.T) {
	conformance.TestKeyspace(t, func(t *testing.T) keyspace.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "keyspace.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		return s
	})
}
