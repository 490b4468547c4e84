// Command demo is the aionotel demo (go run ./examples/demo from the
// repository root) with the bbolt keyspace added: -keyspace bolt:PATH keeps
// the agent transcripts in the bbolt file at PATH, created if missing.
//
//	cd keyspace/boltstore
//	go run ./cmd/demo -keyspace bolt:/tmp/demo.db -duration 30s
//
// It lives in this module, not the root one, so that the root module's demo,
// and every program that does not import boltstore, links no bbolt. Every
// other flag, the signal handling, the output and the exit status are the
// root demo's (server.Exec; go run ./cmd/demo -h lists the flags). The file
// stays locked while the demo runs; a second demo on the same file waits a
// second, then fails with exit status 1. Without -seed, the seed is random,
// so that runs on one file draw different IDs.
package main

import (
	"context"
	"io"

	"github.com/aionotel/aionotel/examples/demo/server"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/boltstore"
)

func main() { server.Exec(backend) }

// backend is -keyspace bolt:PATH: a boltstore.Store on the file at PATH,
// with the package's defaults (every append fsynced).
var backend = server.Backend{Scheme: "bolt", Open: openBolt}

func openBolt(_ context.Context, path string) (keyspace.Store, io.Closer, error) {
	s, err := boltstore.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return s, s, nil
}
