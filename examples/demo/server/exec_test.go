//go:build unix

package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aionotel/aionotel/keyspace"
)

// execChildEnv, when set, makes this test binary a demo: TestMain calls Exec
// with the arguments it holds (separated by spaces) instead of running the
// tests. The Exec tests start such children and signal them.
const execChildEnv = "AIONOTEL_DEMO_EXEC_CHILD"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(execChildEnv); ok {
		os.Args = append([]string{"demo"}, strings.Fields(args)...)
		Exec(stuckBackend)
	}
	os.Exit(m.Run())
}

// stuckBackend is -keyspace stuck:ARG in the children: a keyspace.Memory
// whose Close waits until the child's stdin is closed, so that a child past
// its drain stays alive until the test ends it.
var stuckBackend = Backend{Scheme: "stuck", Open: func(context.Context, string) (keyspace.Store, io.Closer, error) {
	return keyspace.NewMemory(), stdinCloser{}, nil
}}

type stdinCloser struct{}

func (stdinCloser) Close() error {
	_, err := io.Copy(io.Discard, os.Stdin)
	return err
}

// execChild is a demo process started by a test.
type execChild struct {
	cmd    *exec.Cmd
	lines  chan string // stdout, a line at a time; closed at EOF
	stdout strings.Builder
	stderr bytes.Buffer
}

// startExecChild starts the test binary as a demo running Exec with args.
// The child is killed if it outlives the test's bound, and its stdin stays
// open until the test ends.
func startExecChild(t *testing.T, args ...string) *execChild {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	stdin, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdinW.Close() })
	c := &execChild{cmd: exec.CommandContext(ctx, os.Args[0]), lines: make(chan string)}
	c.cmd.Env = append(os.Environ(), execChildEnv+"="+strings.Join(args, " "))
	c.cmd.Stdin = stdin
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = stdin.Close() // the child has its copy
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

// waitFor reads the child's stdout up to a line starting with prefix, and
// fails the test if the output ends before one.
func (c *execChild) waitFor(t *testing.T, prefix string) {
	t.Helper()
	for line := range c.lines {
		c.stdout.WriteString(line + "\n")
		if strings.HasPrefix(line, prefix) {
			return
		}
	}
	_ = c.cmd.Wait()
	t.Fatalf("the demo ended without a line starting %q; stdout:\n%s\nstderr:\n%s", prefix, c.stdout.String(), c.stderr.String())
}

// wait reads the rest of the child's stdout and waits for it to end.
func (c *execChild) wait() error {
	for line := range c.lines {
		c.stdout.WriteString(line + "\n")
	}
	return c.cmd.Wait()
}

func (c *execChild) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// TestExecFirstSignalDrains runs demos until interrupted and sends each one
// SIGINT or SIGTERM once: the demo stops, drains, prints its summary and
// exits with status 0.
func TestExecFirstSignalDrains(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			c := startExecChild(t, "-listen", "127.0.0.1:0", "-rate", "50", "-drain", "100ms")
			c.waitFor(t, "running ")
			c.signal(t, sig)
			if err := c.wait(); err != nil {
				t.Fatalf("the demo ended with %v after one %v; stdout:\n%s\nstderr:\n%s", err, sig, c.stdout.String(), c.stderr.String())
			}
			for _, want := range []string{"until interrupted", "stopping: workflows may finish for up to 100ms", "(interrupt again to quit at once)", "summary after"} {
				if !strings.Contains(c.stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, c.stdout.String())
				}
			}
		})
	}
}

// TestExecSecondSignalKills sends a demo a first signal, then, once it says
// it is stopping, a second: the second ends the process at once, by the
// signal's default action, although the demo would stay (its keyspace's
// Close waits for stdin, which the test keeps open).
func TestExecSecondSignalKills(t *testing.T) {
	for _, sigs := range [][2]syscall.Signal{{syscall.SIGINT, syscall.SIGINT}, {syscall.SIGTERM, syscall.SIGINT}, {syscall.SIGINT, syscall.SIGTERM}} {
		t.Run(sigs[0].String()+" then "+sigs[1].String(), func(t *testing.T) {
			c := startExecChild(t, "-keyspace", "stuck:x", "-listen", "127.0.0.1:0", "-rate", "50", "-drain", "0s")
			c.waitFor(t, "running ")
			c.signal(t, sigs[0])
			c.waitFor(t, "stopping: ")
			c.signal(t, sigs[1])
			err := c.wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the demo ended with %v, want killed by %v; stdout:\n%s\nstderr:\n%s", err, sigs[1], c.stdout.String(), c.stderr.String())
			}
			if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sigs[1] {
				t.Fatalf("the demo ended with %v, want killed by %v; stderr:\n%s", err, sigs[1], c.stderr.String())
			}
		})
	}
}
