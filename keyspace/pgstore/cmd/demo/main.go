// Command demo is the aionotel demo (go run ./examples/demo from the
// repository root) with the PostgreSQL keyspace added: -keyspace
// postgres:DSN keeps the agent transcripts in PostgreSQL, in the table
// pgstore.DefaultTable of the DSN's search path, created if missing.
//
//	cd keyspace/pgstore
//	go run ./cmd/demo -keyspace postgres:postgres://USER:PASSWORD@localhost:5432/DB -duration 30s
//
// DSN is what pgxpool.ParseConfig reads: a URL as above or key=value pairs
// ("postgres:host=localhost dbname=demo"); everything after the first colon
// of the -keyspace value is the DSN, verbatim. Several demos may share one
// database at once: each writes through its own Sequencer, and the table's
// primary key keeps their store seqs apart.
//
// It lives in this module, not the root one, so that the root module's demo,
// and every program that does not import pgstore, links no pgx. Every other
// flag, the signal handling, the output and the exit status are the root
// demo's (server.Exec; go run ./cmd/demo -h lists the flags). Without -seed,
// the seed is random, so that runs on one database draw different IDs.
package main

import (
	"context"
	"io"

	"github.com/aionotel/aionotel/examples/demo/server"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

func main() { server.Exec(backend) }

// backend is -keyspace postgres:DSN: a pgstore.Store on a pool of its own,
// which it closes, after migrating the schema.
var backend = server.Backend{Scheme: "postgres", Open: openPostgres}

func openPostgres(ctx context.Context, dsn string) (keyspace.Store, io.Closer, error) {
	s, err := pgstore.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	return s, s, nil
}
