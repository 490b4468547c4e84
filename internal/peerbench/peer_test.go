package peerbench_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/XSAM/otelsql"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

// BenchmarkPeers times one instrumented call of each library next to its
// bare call, with metrics only (a no-op tracer) and with a sampled span
// (an SDK provider without processor: the span is built, ended and
// dropped). The instrumentation's own cost is the difference with the bare
// call (benchstat -col /impl puts each beside its bare call):
//
//	spans=sampled: (otelstore decorated - bare) <= 0.85 x (otelsql decorated - bare)
//
// The store call is a ReadHistory of a three-event eventstore.Memory
// history; the SQL call an ExecContext on a driver that answers at once.
// otelsql is configured to make one span per call, its minimum: no span
// for the connection's session reset, rows, prepare or connect.
func BenchmarkPeers(b *testing.B) {
	for _, mode := range []string{"metrics_only", "sampled"} {
		b.Run("spans="+mode+"/lib=otelstore/impl=bare", func(b *testing.B) {
			m, wf := history(b)
			benchRead(b, m, wf)
		})
		b.Run("spans="+mode+"/lib=otelstore/impl=decorated", func(b *testing.B) {
			m, wf := history(b)
			mp, tp := providers(b, mode)
			s, err := otelstore.New(m, otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp),
				otelstore.WithDBSystem(semconv.DBSystemNamePostgreSQL.Value.AsString()))
			if err != nil {
				b.Fatal(err)
			}
			benchRead(b, s, wf)
		})
		b.Run("spans="+mode+"/lib=otelsql/impl=bare", func(b *testing.B) {
			benchExec(b, sql.OpenDB(connector{}))
		})
		b.Run("spans="+mode+"/lib=otelsql/impl=decorated", func(b *testing.B) {
			mp, tp := providers(b, mode)
			benchExec(b, otelsql.OpenDB(connector{}, otelsql.WithMeterProvider(mp), otelsql.WithTracerProvider(tp),
				otelsql.WithAttributes(semconv.DBSystemNamePostgreSQL),
				otelsql.WithSpanOptions(otelsql.SpanOptions{OmitConnResetSession: true, OmitConnPrepare: true,
					OmitRows: true, OmitConnectorConnect: true})))
		})
	}
}

func providers(b *testing.B, mode string) (*sdkmetric.MeterProvider, trace.TracerProvider) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	if mode == "metrics_only" {
		return mp, tracenoop.NewTracerProvider()
	}
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return mp, tp
}

func history(b *testing.B) (*eventstore.Memory, eventstore.WorkflowID) {
	m := eventstore.NewMemory()
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	e := eventstore.Envelope{RunID: run, RecordedAt: time.Unix(1, 0)}
	events := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: e, WorkflowType: "checkout"},
		eventstore.ActivityScheduled{Envelope: e, ActivityType: "charge"},
		eventstore.ActivityCompleted{Envelope: e},
	}
	if err := m.Append(context.Background(), eventstore.RecorderToken(), wf, events, 0); err != nil {
		b.Fatal(err)
	}
	return m, wf
}

func benchRead(b *testing.B, s eventstore.Store, wf eventstore.WorkflowID) {
	ctx := context.Background()
	read := func() {
		if _, err := s.ReadHistory(ctx, wf); err != nil {
			b.Fatal(err)
		}
	}
	read()
	b.ReportAllocs()
	for b.Loop() {
		read()
	}
}

func benchExec(b *testing.B, db *sql.DB) {
	b.Cleanup(func() { _ = db.Close() })
	db.SetMaxIdleConns(1)
	ctx := context.Background()
	exec := func() {
		if _, err := db.ExecContext(ctx, "UPDATE runs SET closed = true WHERE id = $1", 7); err != nil {
			b.Fatal(err)
		}
	}
	exec()
	b.ReportAllocs()
	for b.Loop() {
		exec()
	}
}

// connector makes connections to a database that answers every
// statement at once.
type connector struct{}

func (connector) Connect(context.Context) (driver.Conn, error) { return conn{}, nil }
func (connector) Driver() driver.Driver                        { return drv{} }

type drv struct{}

func (drv) Open(string) (driver.Conn, error) { return conn{}, nil }

type conn struct{}

func (conn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not supported") }
func (conn) Close() error                        { return nil }
func (conn) Begin() (driver.Tx, error)           { return nil, errors.New("not supported") }

func (conn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(1), nil
}

// The benchmark's statement reaches the driver through both libraries.
func TestExec(t *testing.T) {
	for _, db := range []*sql.DB{sql.OpenDB(connector{}), otelsql.OpenDB(connector{})} {
		res, err := db.ExecContext(context.Background(), "UPDATE runs SET closed = true WHERE id = $1", 7)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Errorf("rows affected %d, want 1", n)
		}
		_ = db.Close()
	}
}
