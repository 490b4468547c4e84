package pgstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	if c := newConfig([]Option{nil}); c.table != DefaultTable || c.schema != "" || c.validate() != nil {
		t.Fatalf("defaults = %+v, want table %q, no schema, valid", c, DefaultTable)
	}
	testCases := []struct {
		name  string
		opts  []Option
		valid bool
	}{
		{"named", []Option{WithSchema("obs"), WithTable("transcripts")}, true},
		{"longest-table", []Option{WithTable(strings.Repeat("t", 58))}, true},
		{"longest-schema", []Option{WithSchema(strings.Repeat("s", 63))}, true},
		{"odd-but-quotable", []Option{WithSchema(`a"b`), WithTable("Mixed Case; --")}, true},
		{"empty-schema-is-none", []Option{WithSchema("")}, true},
		{"empty-table", []Option{WithTable("")}, false},
		{"table-too-long", []Option{WithTable(strings.Repeat("t", 59))}, false},
		{"schema-too-long", []Option{WithSchema(strings.Repeat("s", 64))}, false},
		{"nul-in-table", []Option{WithTable("a\x00")}, false},
		{"nul-in-schema", []Option{WithSchema("a\x00")}, false},
		// Regression: New sent these to the server, which refused them
		// with an untyped error (SQLSTATE 22021).
		{"table-not-utf8", []Option{WithTable("t\xff")}, false},
		{"schema-not-utf8", []Option{WithSchema("s\xff")}, false},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := newConfig(tc.opts).validate()
			if tc.valid && err != nil {
				t.Fatalf("validate = %v, want valid", err)
			}
			if !tc.valid && !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Fatalf("validate = %v, want an error matching ErrInvalidArgument", err)
			}
		})
	}
}

func TestNamesAreQuotedAndLocksDistinct(t *testing.T) {
	testCases := []struct {
		name        string
		cfg         config
		records     string
		meta        string
		schemaIdent string
	}{
		{"default", config{table: DefaultTable}, `"aionotel_keyspace"`, `"aionotel_keyspace_meta"`, ""},
		{"schema", config{schema: "obs", table: "t"}, `"obs"."t"`, `"obs"."t_meta"`, `"obs"`},
		{"quotes", config{schema: `x"y`, table: `a "b"`}, `"x""y"."a ""b"""`, `"x""y"."a ""b""_meta"`, `"x""y"`},
	}
	locks := map[int64]string{}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNames(tc.cfg)
			if n.records != tc.records || n.meta != tc.meta || n.schema != tc.schemaIdent {
				t.Fatalf("names = %+v, want %s, %s, %s", n, tc.records, tc.meta, tc.schemaIdent)
			}
			if other, dup := locks[n.lockKey]; dup {
				t.Fatalf("migration lock key of %s equals that of %s", tc.name, other)
			}
			locks[n.lockKey] = tc.name
			if again := newNames(tc.cfg); again.lockKey != n.lockKey {
				t.Fatal("the migration lock key is not stable")
			}
		})
	}
}
