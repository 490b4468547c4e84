package pgstore

import (
	"fmt"
	"unicode/utf8"

	"github.com/aionotel/aionotel/eventstore"
)

// Option configures [New] and [Open].
type Option interface {
	apply(*config)
}

type config struct {
	schema string
	table  string
}

// DefaultTable is the name of the records table when [WithTable] is not
// given. Its schema-version table is named after it with a "_meta" suffix.
const DefaultTable = "aionotel_keyspace"

// maxTableLen leaves room for the "_meta" suffix within PostgreSQL's 63-byte
// identifier limit (longer names would be truncated silently).
const (
	maxTableLen  = 63 - len("_meta")
	maxSchemaLen = 63
)

func newConfig(opts []Option) config {
	c := config{table: DefaultTable}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

func (c config) validate() error {
	if err := checkIdent("table", c.table, maxTableLen); err != nil {
		return err
	}
	if c.schema != "" {
		return checkIdent("schema", c.schema, maxSchemaLen)
	}
	return nil
}

func checkIdent(what, name string, maxLen int) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: pgstore: empty %s name", eventstore.ErrInvalidArgument, what)
	case len(name) > maxLen:
		return fmt.Errorf("%w: pgstore: %s name %q is longer than %d bytes", eventstore.ErrInvalidArgument, what, name, maxLen)
	case !utf8.ValidString(name):
		// PostgreSQL's identifiers are text in the server's encoding.
		return fmt.Errorf("%w: pgstore: %s name %q is not valid UTF-8", eventstore.ErrInvalidArgument, what, name)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return fmt.Errorf("%w: pgstore: %s name %q holds a NUL byte", eventstore.ErrInvalidArgument, what, name)
		}
	}
	return nil
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithSchema puts the tables in the named PostgreSQL schema, which [New]
// creates if it does not exist. Names are quoted, so any valid UTF-8 up to
// 63 bytes without NUL is a valid name, case kept; a longer one, or one
// holding NUL or invalid UTF-8, makes New fail with an error wrapping
// [eventstore.ErrInvalidArgument].
// Tests use a schema per test run to stay apart. Without this option (or
// with "") the tables are unqualified and land in the first schema of the
// connection's search_path (normally "public").
func WithSchema(name string) Option {
	return optionFunc(func(c *config) { c.schema = name })
}

// WithTable names the records table (quoted, 1 to 58 bytes of valid UTF-8
// without NUL; the schema-version table gets the same name with a "_meta"
// suffix). Any other name makes New fail with an error wrapping
// [eventstore.ErrInvalidArgument]. Without this option the table is
// [DefaultTable].
func WithTable(name string) Option {
	return optionFunc(func(c *config) { c.table = name })
}
