package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/keyspace"
)

func TestConfigValidate(t *testing.T) {
	testCases := []struct {
		name   string
		modify func(*Config)
		want   []string // parts of the error; none: valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"otlp needs no listen address", func(c *Config) { c.Exporter, c.Listen = ExporterOTLP, "" }, nil},
		{"negative duration", func(c *Config) { c.Duration = -time.Second }, []string{"-duration -1s"}},
		{"no workers", func(c *Config) { c.Workers = 0 }, []string{"-workers 0"}},
		{"zero rate", func(c *Config) { c.Rate = 0 }, []string{"-rate 0"}},
		{"NaN rate", func(c *Config) { c.Rate = math.NaN() }, []string{"-rate NaN"}},
		{"huge rate", func(c *Config) { c.Rate = 1e9 }, []string{"-rate 1e+09"}},
		{"unknown exporter", func(c *Config) { c.Exporter = "zipkin" }, []string{`unknown exporter "zipkin"`}},
		{"prometheus without an address", func(c *Config) { c.Listen = "" }, []string{"-listen"}},
		{"negative bound", func(c *Config) { c.MaxInFlight = -1 }, []string{"-max-inflight -1"}},
		{"negative drain", func(c *Config) { c.DrainGrace = -time.Second }, []string{"-drain -1s"}},
		{"memory keyspace", func(c *Config) { c.Keyspace = "memory" }, nil},
		{"empty keyspace is memory", func(c *Config) { c.Keyspace = "" }, nil},
		{"any backend name is syntax", func(c *Config) { c.Keyspace = "bolt:/tmp/demo.db" }, nil},
		{"keyspace without a name", func(c *Config) { c.Keyspace = "/tmp/demo.db" }, []string{"-keyspace: want memory, bolt:PATH or postgres:DSN"}},
		{"keyspace without an argument", func(c *Config) { c.Keyspace = "bolt:" }, []string{"-keyspace bolt: nothing after the colon"}},
		{"every error at once", func(c *Config) { c.Workers, c.Rate, c.Keyspace = -2, -1, "bolt" }, []string{"-workers -2", "-rate -1", "-keyspace bolt"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.modify(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want an error matching ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestMainRefusesBadConfigBeforeStarting(t *testing.T) {
	var stdout, stderr bytes.Buffer
	cfg := DefaultConfig()
	cfg.Workers = 0
	if err := Main(t.Context(), cfg, &stdout, &stderr); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Main = %v, want ErrInvalidConfig", err)
	}
	if stdout.Len()+stderr.Len() != 0 {
		t.Errorf("Main wrote output for a bad config: %q %q", stdout.String(), stderr.String())
	}
}

// TestMainRefusesUnknownKeyspace: a keyspace none of Main's backends has is
// a configuration error, found before anything is opened or started.
func TestMainRefusesUnknownKeyspace(t *testing.T) {
	opened := false
	pg := Backend{Scheme: "postgres", Open: func(context.Context, string) (keyspace.Store, io.Closer, error) {
		opened = true
		return keyspace.NewMemory(), nil, nil
	}}
	var stdout, stderr bytes.Buffer
	cfg := DefaultConfig()
	cfg.Keyspace = "bolt:/tmp/demo.db"
	err := Main(t.Context(), cfg, &stdout, &stderr, pg)
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, ErrUnknownBackend) {
		t.Fatalf("Main = %v, want ErrInvalidConfig and ErrUnknownBackend", err)
	}
	if opened || stdout.Len()+stderr.Len() != 0 {
		t.Errorf("Main opened a backend (%t) or wrote output: %q %q", opened, stdout.String(), stderr.String())
	}
}

// TestMainRefusesInvalidBackend: an unusable Backend fails Main before it
// looks at the config.
func TestMainRefusesInvalidBackend(t *testing.T) {
	if err := Main(t.Context(), DefaultConfig(), &bytes.Buffer{}, &bytes.Buffer{}, Backend{Scheme: "bolt"}); !errors.Is(err, ErrInvalidBackend) {
		t.Fatalf("Main = %v, want ErrInvalidBackend", err)
	}
}

func TestMainListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := DefaultConfig()
	cfg.Listen = ln.Addr().String()
	var le *ListenError
	if err := Main(t.Context(), cfg, &bytes.Buffer{}, &bytes.Buffer{}); !errors.As(err, &le) || le.Addr != cfg.Listen {
		t.Fatalf("Main = %v, want a *ListenError for %s", err, cfg.Listen)
	}
}
