package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aionotel/aionotel/keyspace"
)

func TestParseKeyspace(t *testing.T) {
	testCases := []struct {
		value        string
		scheme, arg  string
		wantErr      string // part of the error; "": valid
		leaksNothing string // must not appear in the error
	}{
		{value: "", scheme: "memory"},
		{value: "memory", scheme: "memory"},
		{value: "bolt:/tmp/demo.db", scheme: "bolt", arg: "/tmp/demo.db"},
		{value: "bolt:C:\\demo.db", scheme: "bolt", arg: "C:\\demo.db"},
		{value: "postgres:postgres://u:pw@h:5432/db?sslmode=disable", scheme: "postgres", arg: "postgres://u:pw@h:5432/db?sslmode=disable"},
		{value: "postgres:host=h password=pw", scheme: "postgres", arg: "host=h password=pw"},
		{value: "my-store.v2+x:a", scheme: "my-store.v2+x", arg: "a"},
		{value: "/tmp/demo.db", wantErr: "-keyspace: want memory, bolt:PATH or postgres:DSN (NAME:ARG)", leaksNothing: "demo.db"},
		{value: "host=h password=pw", wantErr: "-keyspace: want memory", leaksNothing: "pw"},
		{value: "bolt", wantErr: "-keyspace bolt: needs a PATH: bolt:PATH"},
		{value: "postgres", wantErr: "-keyspace postgres: needs a DSN: postgres:DSN"},
		{value: "memory:", wantErr: "-keyspace memory: takes no argument"},
		{value: "memory:x", wantErr: "-keyspace memory: takes no argument"},
		{value: "bolt:", wantErr: "-keyspace bolt: nothing after the colon; want bolt:PATH"},
		{value: "redis:", wantErr: "-keyspace redis: nothing after the colon; want NAME:ARG"},
		{value: ":x", wantErr: "not a backend name"},
		{value: "BOLT:x", wantErr: "not a backend name"},
		{value: "1db:x", wantErr: "not a backend name"},
		{value: "host=h password=p:w", wantErr: "not a backend name", leaksNothing: "p:w"},
		{value: "postgres://u:pw@h/db", wantErr: "-keyspace postgres://...: a URL needs the backend name in front of it", leaksNothing: "pw"},
	}
	for _, tc := range testCases {
		t.Run(tc.value, func(t *testing.T) {
			scheme, arg, err := parseKeyspace(tc.value)
			if tc.wantErr == "" {
				if err != nil || scheme != tc.scheme || arg != tc.arg {
					t.Errorf("parseKeyspace = %q, %q, %v; want %q, %q, nil", scheme, arg, err, tc.scheme, tc.arg)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parseKeyspace error = %v, want one matching ErrInvalidConfig with %q", err, tc.wantErr)
			}
			if tc.leaksNothing != "" && strings.Contains(err.Error(), tc.leaksNothing) {
				t.Errorf("error %q quotes %q", err, tc.leaksNothing)
			}
		})
	}
}

func TestResolveKeyspace(t *testing.T) {
	open := func(context.Context, string) (keyspace.Store, io.Closer, error) {
		return keyspace.NewMemory(), nil, nil
	}
	bolt := Backend{Scheme: "bolt", Open: open}
	testCases := []struct {
		name     string
		value    string
		backends []Backend
		scheme   string // of the Backend returned; "": the memory one
		arg      string
		unknown  bool // the error matches ErrUnknownBackend
		wantErr  string
	}{
		{name: "memory", value: "memory", backends: []Backend{bolt}},
		{name: "registered", value: "bolt:/x.db", backends: []Backend{bolt}, scheme: "bolt", arg: "/x.db"},
		{name: "bolt not registered", value: "bolt:/x.db", unknown: true, wantErr: "cd keyspace/boltstore && go run ./cmd/demo -keyspace bolt:/tmp/demo.db"},
		{name: "postgres not registered", value: "postgres:dsn", backends: []Backend{bolt}, unknown: true, wantErr: "cd keyspace/pgstore && go run ./cmd/demo -keyspace postgres:"},
		{name: "unknown", value: "etcd:x", backends: []Backend{bolt}, unknown: true, wantErr: "-keyspace etcd:...: keyspace backend not in this build (it has memory, bolt); postgres:DSN: cd keyspace/pgstore"},
		{name: "syntax", value: "bolt:", backends: []Backend{bolt}, wantErr: "nothing after the colon"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			b, arg, err := resolveKeyspace(tc.value, tc.backends)
			if tc.wantErr == "" {
				if err != nil || b.Scheme != tc.scheme || arg != tc.arg {
					t.Errorf("resolveKeyspace = %q, %q, %v; want %q, %q, nil", b.Scheme, arg, err, tc.scheme, tc.arg)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrUnknownBackend) != tc.unknown || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("resolveKeyspace error = %v; want ErrInvalidConfig, ErrUnknownBackend %t, %q", err, tc.unknown, tc.wantErr)
			}
		})
	}
}

func TestCheckBackends(t *testing.T) {
	open := func(context.Context, string) (keyspace.Store, io.Closer, error) {
		return keyspace.NewMemory(), nil, nil
	}
	testCases := []struct {
		name     string
		backends []Backend
		want     []string // parts of the error; none: valid
	}{
		{"none", nil, nil},
		{"two", []Backend{{Scheme: "bolt", Open: open}, {Scheme: "postgres", Open: open}}, nil},
		{"empty scheme", []Backend{{Open: open}}, []string{`backend 0: Scheme "" is not a valid name`}},
		{"colon in scheme", []Backend{{Scheme: "a:b", Open: open}}, []string{`Scheme "a:b" is not a valid name`}},
		{"memory", []Backend{{Scheme: "memory", Open: open}}, []string{`Scheme "memory" is built in`}},
		{"twice", []Backend{{Scheme: "bolt", Open: open}, {Scheme: "bolt", Open: open}}, []string{`backend 1: Scheme "bolt" given twice`}},
		{"nil open", []Backend{{Scheme: "bolt"}}, []string{`backend 0 ("bolt"): nil Open`}},
		{"every error", []Backend{{Scheme: "X", Open: open}, {Scheme: "y"}}, []string{`Scheme "X"`, `backend 1 ("y"): nil Open`}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkBackends(tc.backends)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("checkBackends: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidBackend) || errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("checkBackends = %v, want an error matching ErrInvalidBackend and not ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// closeCounter counts its Close calls.
type closeCounter struct{ n int }

func (c *closeCounter) Close() error { c.n++; return nil }

func TestOpenKeyspace(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		s, c, err := openKeyspace(t.Context(), Backend{}, "")
		if _, ok := s.(*keyspace.Memory); !ok || c != nil || err != nil {
			t.Errorf("openKeyspace = %T, %v, %v; want a *keyspace.Memory, nil, nil", s, c, err)
		}
	})
	t.Run("backend", func(t *testing.T) {
		mem, closer := keyspace.NewMemory(), &closeCounter{}
		var gotArg string
		b := Backend{Scheme: "fake", Open: func(_ context.Context, arg string) (keyspace.Store, io.Closer, error) {
			gotArg = arg
			return mem, closer, nil
		}}
		s, c, err := openKeyspace(t.Context(), b, "the arg")
		if s != mem || c != closer || err != nil || gotArg != "the arg" || closer.n != 0 {
			t.Errorf("openKeyspace = %v, %v, %v (arg %q, closes %d)", s, c, err, gotArg, closer.n)
		}
	})
	t.Run("failure", func(t *testing.T) {
		cause, closer := errors.New("refused"), &closeCounter{}
		b := Backend{Scheme: "fake", Open: func(context.Context, string) (keyspace.Store, io.Closer, error) { return nil, closer, cause }}
		s, c, err := openKeyspace(t.Context(), b, "secret")
		if s != nil || c != nil || !errors.Is(err, ErrKeyspaceOpen) || !errors.Is(err, cause) || closer.n != 1 {
			t.Errorf("openKeyspace = %v, %v, %v (closes %d); want nil, nil, ErrKeyspaceOpen wrapping the cause, one close", s, c, err, closer.n)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q quotes the argument", err)
		}
	})
}

func TestDescribeKeyspaceFlag(t *testing.T) {
	open := func(context.Context, string) (keyspace.Store, io.Closer, error) {
		return keyspace.NewMemory(), nil, nil
	}
	testCases := []struct {
		name     string
		backends []Backend
		want     string
	}{
		{"root build", nil, "where agent transcripts are kept: memory (bolt:PATH needs the demo of keyspace/boltstore; postgres:DSN needs the demo of keyspace/pgstore)"},
		{"bolt build", []Backend{{Scheme: "bolt", Open: open}}, "where agent transcripts are kept: memory, bolt:PATH (postgres:DSN needs the demo of keyspace/pgstore)"},
		{"every backend", []Backend{{Scheme: "postgres", Open: open}, {Scheme: "bolt", Open: open}, {Scheme: "s3", Open: open}},
			"where agent transcripts are kept: memory, postgres:DSN, bolt:PATH, s3:ARG"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := describeKeyspaceFlag(tc.backends); got != tc.want {
				t.Errorf("describeKeyspaceFlag = %q, want %q", got, tc.want)
			}
		})
	}
}
