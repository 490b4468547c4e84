package pgstore

import (
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/codec"
)

// EncodeForTest exposes the payload encoding to the external tests, which
// write rows behind a Store's back.
func EncodeForTest(ev keyspace.ActivityEvent) ([]byte, error) { return codec.AppendEvent(nil, &ev) }

// QueriesForTest returns the statements of ReadFrom and ListStreams, for the
// tests that check their plans.
func (s *Store) QueriesForTest() (readFrom, listStreams string) {
	return s.q.readFrom, s.q.listStreams
}
