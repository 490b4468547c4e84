package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aionotel/aionotel/keyspace"
)

// MemoryKeyspace is the -keyspace value (and [Config].Keyspace) of the
// built-in transcript keyspace, a keyspace.Memory. It is the default.
const MemoryKeyspace = "memory"

// Backend is a transcript keyspace that -keyspace NAME:ARG can name, besides
// the built-in [MemoryKeyspace]. A program registers the backends it links
// by passing them to [Command] or [Main]; the demo of the root module
// registers none, so that its build holds no database driver. The bbolt and
// PostgreSQL backends are registered by the demos of their own modules
// (keyspace/boltstore/cmd/demo and keyspace/pgstore/cmd/demo).
type Backend struct {
	// Scheme is the NAME of -keyspace NAME:ARG: a lower-case letter followed
	// by lower-case letters, digits, '+', '-' or '.', and not "memory".
	Scheme string
	// Open opens the store ARG names (a file path, a DSN: what follows the
	// first colon of the -keyspace value, verbatim). The returned Closer, if
	// not nil, is closed once the run has ended; when Open fails, a Closer it
	// returns anyway is closed at once. Open must not be nil.
	Open func(ctx context.Context, arg string) (keyspace.Store, io.Closer, error)
}

var (
	// ErrUnknownBackend is matched by the error of a -keyspace NAME:ARG
	// whose NAME is not a backend of the build: neither [MemoryKeyspace] nor
	// the Scheme of a [Backend] given to [Command] or [Main]. The error also
	// matches [ErrInvalidConfig], and its text says which build has the
	// backend (for bolt and postgres: the demo of keyspace/boltstore or
	// keyspace/pgstore).
	ErrUnknownBackend = errors.New("keyspace backend not in this build")

	// ErrInvalidBackend is matched by the error of [Command] and [Main] when
	// a [Backend] given to them is unusable: a Scheme that is not a valid
	// name, "memory" or given twice, or a nil Open. It is the program's fault,
	// not its user's: it does not match [ErrInvalidConfig].
	ErrInvalidBackend = errors.New("invalid keyspace Backend")

	// ErrKeyspaceOpen is matched by the error of [Main] when the -keyspace
	// backend's Open fails, or returns no store. The error wraps the
	// backend's own error too.
	ErrKeyspaceOpen = errors.New("cannot open the keyspace")
)

// separateBackend describes a backend that lives in a module of its own, for
// the hint given when a build without it is asked for it.
type separateBackend struct {
	scheme  string
	arg     string // what ARG is, for "NAME:ARG"
	what    string
	dir     string // the module's directory, from the repository root
	example string // a -keyspace value
}

// separateBackends are the backends of the nested modules, in the order the
// hints list them.
var separateBackends = []separateBackend{
	{"bolt", "PATH", "the bbolt backend (a file)", "keyspace/boltstore", "bolt:/tmp/demo.db"},
	{"postgres", "DSN", "the PostgreSQL backend", "keyspace/pgstore", "postgres:postgres://USER:PASSWORD@localhost:5432/DB"},
}

// runHint is the command line that runs the demo of b's module.
func (b separateBackend) runHint() string {
	return "cd " + b.dir + " && go run ./cmd/demo -keyspace " + b.example
}

func separateBackendNamed(scheme string) (separateBackend, bool) {
	for _, b := range separateBackends {
		if b.scheme == scheme {
			return b, true
		}
	}
	return separateBackend{}, false
}

// validScheme reports whether s can be the NAME of -keyspace NAME:ARG.
func validScheme(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// parseKeyspace splits a -keyspace value into its backend name and argument:
// "" and "memory" are ([MemoryKeyspace], ""), "NAME:ARG" is (NAME, ARG). It
// checks the syntax only, not whether the build has the backend. Its errors
// match [ErrInvalidConfig] and never quote ARG, which may hold a password.
func parseKeyspace(value string) (scheme, arg string, err error) {
	bad := func(format string, args ...any) (string, string, error) {
		return "", "", fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if value == "" || value == MemoryKeyspace {
		return MemoryKeyspace, "", nil
	}
	scheme, arg, found := strings.Cut(value, ":")
	switch {
	case !found:
		if b, ok := separateBackendNamed(value); ok {
			return bad("-keyspace %s: needs a %s: %s:%s", value, b.arg, value, b.arg)
		}
		return bad("-keyspace: want %s, bolt:PATH or postgres:DSN (NAME:ARG)", MemoryKeyspace)
	case !validScheme(scheme):
		return bad("-keyspace: the part before the first colon is not a backend name; want %s, bolt:PATH or postgres:DSN", MemoryKeyspace)
	case scheme == MemoryKeyspace:
		return bad("-keyspace %s: takes no argument", MemoryKeyspace)
	case arg == "":
		want := "NAME:ARG"
		if b, ok := separateBackendNamed(scheme); ok {
			want = scheme + ":" + b.arg
		}
		return bad("-keyspace %s: nothing after the colon; want %s", scheme, want)
	case strings.HasPrefix(arg, "//"):
		// A URL given alone: "postgres://host/db" reads as backend
		// "postgres" with the argument "//host/db".
		return bad("-keyspace %s://...: a URL needs the backend name in front of it, as in -keyspace postgres:postgres://HOST/DB", scheme)
	}
	return scheme, arg, nil
}

// checkBackends returns an error matching [ErrInvalidBackend] for each
// unusable backend, joined.
func checkBackends(backends []Backend) error {
	var errs []error
	seen := map[string]bool{}
	for i, b := range backends {
		switch {
		case !validScheme(b.Scheme):
			errs = append(errs, fmt.Errorf("%w: backend %d: Scheme %q is not a valid name", ErrInvalidBackend, i, b.Scheme))
		case b.Scheme == MemoryKeyspace:
			errs = append(errs, fmt.Errorf("%w: backend %d: Scheme %q is built in", ErrInvalidBackend, i, b.Scheme))
		case seen[b.Scheme]:
			errs = append(errs, fmt.Errorf("%w: backend %d: Scheme %q given twice", ErrInvalidBackend, i, b.Scheme))
		}
		seen[b.Scheme] = true
		if b.Open == nil {
			errs = append(errs, fmt.Errorf("%w: backend %d (%q): nil Open", ErrInvalidBackend, i, b.Scheme))
		}
	}
	return errors.Join(errs...)
}

// resolveKeyspace returns the backend of a -keyspace value and the argument
// to open it with. For [MemoryKeyspace] the Backend is the zero one. A NAME
// the build lacks returns an error matching [ErrUnknownBackend] and
// [ErrInvalidConfig]; a syntax error, [parseKeyspace]'s.
func resolveKeyspace(value string, backends []Backend) (Backend, string, error) {
	scheme, arg, err := parseKeyspace(value)
	if err != nil || scheme == MemoryKeyspace {
		return Backend{}, arg, err
	}
	for _, b := range backends {
		if b.Scheme == scheme {
			return b, arg, nil
		}
	}
	if b, ok := separateBackendNamed(scheme); ok {
		return Backend{}, "", fmt.Errorf("%w: -keyspace %s:...: %w; %s is in its own module, whose demo has it: %s",
			ErrInvalidConfig, scheme, ErrUnknownBackend, b.what, b.runHint())
	}
	have := []string{MemoryKeyspace}
	for _, b := range backends {
		have = append(have, b.Scheme)
	}
	var elsewhere strings.Builder
	for _, b := range separateBackends {
		if !hasScheme(backends, b.scheme) {
			fmt.Fprintf(&elsewhere, "; %s:%s: %s", b.scheme, b.arg, b.runHint())
		}
	}
	return Backend{}, "", fmt.Errorf("%w: -keyspace %s:...: %w (it has %s)%s",
		ErrInvalidConfig, scheme, ErrUnknownBackend, strings.Join(have, ", "), elsewhere.String())
}

func hasScheme(backends []Backend, scheme string) bool {
	for _, b := range backends {
		if b.Scheme == scheme {
			return true
		}
	}
	return false
}

// openKeyspace opens the keyspace b names (the zero Backend: a
// keyspace.Memory). The Closer is nil when there is nothing to close.
func openKeyspace(ctx context.Context, b Backend, arg string) (keyspace.Store, io.Closer, error) {
	if b.Open == nil {
		return keyspace.NewMemory(), nil, nil
	}
	store, closer, err := b.Open(ctx, arg)
	if err == nil && store == nil {
		err = fmt.Errorf("the %s backend returned no store", b.Scheme)
	}
	if err != nil {
		if closer != nil {
			err = errors.Join(err, closer.Close())
		}
		return nil, nil, fmt.Errorf("-keyspace %s:...: %w: %w", b.Scheme, ErrKeyspaceOpen, err)
	}
	return store, closer, nil
}

// describeKeyspaceFlag is the help text of -keyspace for a build with the
// given backends.
func describeKeyspaceFlag(backends []Backend) string {
	var sb strings.Builder
	sb.WriteString("where agent transcripts are kept: " + MemoryKeyspace)
	for _, b := range backends {
		if sep, ok := separateBackendNamed(b.Scheme); ok {
			sb.WriteString(", " + b.Scheme + ":" + sep.arg)
		} else {
			sb.WriteString(", " + b.Scheme + ":ARG")
		}
	}
	var elsewhere []string
	for _, b := range separateBackends {
		if !hasScheme(backends, b.scheme) {
			elsewhere = append(elsewhere, b.scheme+":"+b.arg+" needs the demo of "+b.dir)
		}
	}
	if len(elsewhere) > 0 {
		sb.WriteString(" (" + strings.Join(elsewhere, "; ") + ")")
	}
	return sb.String()
}
