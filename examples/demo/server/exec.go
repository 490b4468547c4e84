package server

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exec is a demo's whole main: it runs [Command] on the process's arguments
// (os.Args[1:]), stdout and stderr, with backends, and exits with the status
// Command returns. Every demo main is a call of it: the root module's with no
// backend, each nested keyspace module's with its own.
//
// It handles SIGINT (Ctrl-C) and SIGTERM: the first one stops the run, which
// drains (see [Main]); the handling is then given back to the operating
// system, so that a second one ends the process at once, drained or not.
func Exec(backends ...Backend) {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr, backends))
}

// execute is Exec without the exit: it installs the signal handling, runs
// Command until it returns, and removes the handling.
func execute(args []string, stdout, stderr io.Writer, backends []Backend) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			// Restore the default handling before stopping the run, so
			// that once the demo says it is stopping, a second signal is
			// sure to end the process.
			signal.Stop(sigs)
			cancel()
		case <-ctx.Done():
		}
	}()
	return Command(ctx, args, stdout, stderr, backends...)
}
