// Package server is the simulated workflow server behind the aionotel demo
// (go run ./examples/demo). It runs a small durable workflow engine on the
// in-memory reference stores (or, for the agent transcripts, a durable
// keyspace: see "Keyspace backends"), wrapped by otelstore, so that every
// metric of the telemetry catalog moves the way it would in production: store
// call latencies, workflows started and closed by status, signals, schedules,
// activities dispatched, in flight, completed by outcome, retried, and the
// transcript keyspace's append latency and batch size.
//
// [Command] is the command line: it parses the flags into a [Config], prints
// the usage and maps errors to exit statuses; [Main] runs a Config. [Exec] is
// a demo's whole main: Command on the process's arguments, stopped by the
// first SIGINT or SIGTERM, ended at once by a second. Tests and
// other programs can build the pieces themselves: [StartTelemetry] for an
// exporter pipeline, [New] with [WithMeterProvider], [WithTracerProvider] and
// [WithKeyspace] for the server, and [Server.Run], which returns a [Summary]
// once the server has drained.
//
// # What is simulated
//
// The stores are an eventstore.Memory and a keyspace.Memory (or the keyspace
// given to [WithKeyspace]), wrapped by otelstore.New and
// otelstore.NewKeyspace, sharing one pairing.Tracker. The
// event store's outbox wake (otelstore.WithOutboxWake) goes to a channel with
// a buffer of one.
//
// Three workflow types run, started at the configured rate (weights 5:3:2):
//
//   - checkout: reserve inventory, charge the card, wait for the
//     payment_confirmed signal, ship the order, send a receipt (optional: its
//     failure is ignored). A cancel_order signal cancels the open activity
//     and the workflow.
//   - onboarding: create the account; provision the workspace, configure
//     billing and import contacts in parallel; sleep on a durable timer; run
//     an agent (a welcome tour, with a transcript); wait for the
//     profile_completed signal; send a welcome e-mail (optional).
//   - report: a long-lived workflow fired by its schedule (ScheduleTriggered):
//     twice per run, an agent summarises and a report is published; then the
//     run continues as new (WorkflowContinuedAsNew followed by the
//     WorkflowStarted of the new run), for three generations.
//
// Every run arms an execution timeout (a durable timer); when it fires first,
// the run times out and its open activities are left to the decorator, which
// settles them as abandoned. Every activity arms a timeout timer too. When
// it schedules an activity the workflow draws its behaviour: succeed, fail
// retryably once or twice and then succeed, fail terminally, be cancelled by
// the downstream system, or overrun its timeout (its late result is then
// dropped). A terminal failure of a required step fails the workflow,
// cancelling its open sibling activities; an operator sometimes reopens a
// failed workflow (WorkflowReopened), which runs the failed step again.
// Operators also pause some workflows for a while and resume them. Clients
// send signals, some of them twice (a client retry, deduplicated by request
// ID), and notes that the workflows ignore; signals to closed workflows are
// refused.
//
// # The machinery
//
// Workflow workers run workflow tasks: read the current run's history
// (ReadHistoryFrom its WorkflowStarted), fold it into the run's state, run
// the workflow's code (a short pause, as real code takes time), and append
// the decision. A decision that schedules activities is one AppendWithOutbox
// that stages one outbox row per activity in the same commit. After the
// commit, timers are armed (ScheduleTimer, fenced by the Seq of their
// TimerScheduled event) and retired (RetireTimer) as the decision says.
//
// A dispatcher goroutine, woken by the outbox wake (and polling every 100 ms,
// since a wake is advisory), claims rows (ClaimOutboxRows) and hands them to
// the activity workers, which play the activity's attempts and record their
// results (ActivityCompleted, ActivityFailed, ActivityCancelled). Agent
// activities write their transcript, turn by turn, through a
// keyspace.Sequencer: messages, tool calls and results, token usage, and
// ephemeral status events, which the Sequencer hands back for live
// forwarding and never stores. Now and then a turn goes through the
// Sequencer of a second simulated node and re-sends the previous turn, as a
// worker does after reconnecting elsewhere: the re-delivered events are
// dropped as duplicates, and the first node's next append meets a sequence
// conflict and retries.
//
// A timer poller asks for expired timers (ExpiredTimers) every 20 ms and fires
// each on a workflow worker (TimerFired, then RetireTimer). Simulated work
// takes time through a delay queue, not sleeping goroutines, so thousands of
// activities can be in flight on a few workers.
//
// # Optimistic concurrency
//
// Nothing serialises the writers of a workflow: its workflow task, activity
// workers reporting results, clients signalling, the timer poller, the
// scheduler and operators all read the history and append at the head they
// read. When two race, the store refuses the loser's append with a
// *eventstore.SequenceConflictError; the loser reads the events it missed
// (up to conflict.Found), decides again on the new state (the signal may now
// be a duplicate, the activity may have timed out, the run may be closed) and
// appends at the new head. Conflicts are counted per kind of writer, and show
// on the store spans and the duration metric as error.type
// sequence_conflict. Every event carries its RunID and a RecordedAt from the
// server's clock ([WithClock]).
//
// # Shutdown
//
// When the context given to [Server.Run] is done, no workflow is started any
// more; for the drain grace ([WithDrainGrace]) the rest go on and may finish;
// then every goroutine stops and each workflow still open has its outbox rows
// cancelled (SettleWorkflowOutboxRowsCancelled), its open activities
// cancelled and is itself cancelled. When Run returns, no activity is in
// flight (the aion.inflight_activities series are all 0) and no outbox row is
// claimed. [Main] then prints the summary and shuts the telemetry pipeline
// down, flushing it.
//
// # Randomness and time
//
// One math/rand/v2 PCG, seeded by [WithSeed], draws everything: workflow
// types, IDs, behaviours, durations. The seed fixes the sequence of draws,
// not the run: goroutine scheduling decides who draws next. The clock
// ([WithClock], time.Now by default) stamps events and outbox rows and
// decides timer expiry; waiting uses real time.
//
// # Keyspace backends
//
// The -keyspace flag ([Config].Keyspace) says where the agent transcripts
// go: "memory" (the default: a keyspace.Memory), or NAME:ARG for a
// [Backend] whose Scheme is NAME, opened with ARG, everything after the
// first colon, verbatim. The workflow histories stay in an
// eventstore.Memory whatever the flag says.
//
// This package registers no durable backend, and neither does the demo of
// the root module: the bbolt and PostgreSQL keyspaces are nested modules
// (keyspace/boltstore and keyspace/pgstore) so that a build which does not
// import them links neither go.etcd.io/bbolt nor pgx, and the root module's
// go.mod lists neither. Each nested module has its own demo main, the same
// command with its backend passed to [Exec]:
//
//	cd keyspace/boltstore && go run ./cmd/demo -keyspace bolt:/tmp/demo.db
//	cd keyspace/pgstore && go run ./cmd/demo -keyspace postgres:postgres://USER:PASSWORD@localhost:5432/DB
//
// A -keyspace NAME the build does not have is a usage error (exit status 2,
// [ErrUnknownBackend]) whose message gives the command line of the demo that
// has it. The syntax is checked by [Config.Validate]; that NAME is
// registered, by [Main] and [Command], before anything is opened or started.
// Errors never quote ARG, which may be a DSN holding a password.
//
// [Main] opens the keyspace first (a failure is [ErrKeyspaceOpen], exit
// status 1, and nothing has started), hands it to the server with
// [WithKeyspace], and closes it last, after the run has drained and the
// telemetry pipeline has shut down; a Close error fails the run.
//
// A durable keyspace outlives the run, while the histories do not: a second
// run with the same seed would draw the same workflow and run IDs, and its
// transcripts would land in the first run's streams, where the Sequencer
// drops them as re-deliveries. So with a keyspace other than memory,
// [Command] draws the seed at random unless -seed is given, and the start
// banner shows it.
//
// # Exporters
//
// [StartTelemetry] builds SDK providers on one resource ([NewResource]:
// service.name from OTEL_SERVICE_NAME, default "aionotel-demo", and
// service.version) with one of three exporters:
//
//   - prometheus: the OpenTelemetry Prometheus exporter with its default name
//     translation, on its own registry, served by promhttp at
//     http://<listen>/metrics. Spans have nowhere to go: the tracer provider
//     is a no-op one.
//   - otlp: otlpmetricgrpc and otlptracegrpc (batched spans), configured by
//     the standard OTEL_EXPORTER_OTLP_* variables. When none of the endpoint
//     or insecure variables is set, they send to 127.0.0.1:4317 without TLS,
//     where the Collector of collector-config.yaml listens.
//   - stdout: stdoutmetric and stdouttrace, JSON lines.
//
// The push exporters export every OTEL_METRIC_EXPORT_INTERVAL milliseconds,
// or every 5 s when it is not set (not the SDK's 60 s: a demo should show
// data soon), and once more at shutdown.
//
// # Memory
//
// The in-memory stores keep every history and transcript for the life of the
// process: at the default rate (20 workflows/s) the heap grows by about 25 MB
// a minute, more than half of it transcripts (a durable keyspace takes those
// out of the heap). The demo is meant to run for minutes or a few hours, not
// for days.
//
// # Concurrency
//
// A [Server] is safe for concurrent use (Run once, Stats any time) and must
// not be copied. A [Telemetry] is safe for concurrent use; a [Progress] is
// used by one goroutine.
package server
