package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitForFile polls for path to hold a line of text, within a deadline.
func waitForFile(t *testing.T, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var line string
	err := poll(ctx, 10*time.Millisecond, func(context.Context) error {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return fmt.Errorf("%s not written yet", path)
		}
		line = strings.TrimSpace(string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// waitGone polls until pid is no longer a live process, within a deadline:
// an orphan is reaped by init asynchronously.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := poll(ctx, 10*time.Millisecond, func(context.Context) error {
		if alive(pid) {
			return fmt.Errorf("process %d still running", pid)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

func TestProcessStop(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to observe the child processes")
	}
	testCases := []struct {
		name   string
		script string // starts a child, writes its PID to $PIDFILE, waits
	}{
		// A non-interactive shell starts background jobs with SIGINT ignored:
		// the shell exits on SIGINT, the sleep is ended by the group sweep.
		{name: "stops on SIGINT", script: `sleep 300 & echo $! > "$PIDFILE"; wait`},
		// trap '' INT makes the shell and its child ignore SIGINT: only the
		// SIGKILL after the grace period ends them.
		{name: "killed when SIGINT is ignored", script: `trap '' INT; sleep 300 & echo $! > "$PIDFILE"; wait`},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "child.pid")
			p, err := startProcess("sh", dir, filepath.Join(dir, "log"),
				[]string{"PIDFILE=" + pidFile}, "/bin/sh", "-c", tc.script)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.stop(time.Second) })
			child, err := strconv.Atoi(waitForFile(t, pidFile))
			if err != nil {
				t.Fatal(err)
			}
			if !alive(p.pid()) || !alive(child) {
				t.Fatal("processes not running before stop")
			}
			p.stop(200 * time.Millisecond)
			select {
			case <-p.exited():
			default:
				t.Fatal("stop returned before the process exited")
			}
			if alive(p.pid()) {
				t.Errorf("leader %d still running", p.pid())
			}
			// The child is in the same group: it ends too.
			waitGone(t, child)
			p.stop(time.Second) // idempotent
		})
	}
}

// TestProcessSweepsGroupOnExit: a program that exits by itself, leaving a
// child behind, takes the child along; nothing outlives the test.
func TestProcessSweepsGroupOnExit(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to observe the child processes")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	release := filepath.Join(dir, "release")
	// The shell starts a child, then exits as soon as the test lets it.
	p, err := startProcess("sh", dir, filepath.Join(dir, "log"),
		[]string{"PIDFILE=" + pidFile, "RELEASE=" + release},
		"/bin/sh", "-c", `sleep 300 & echo $! > "$PIDFILE"; while [ ! -e "$RELEASE" ]; do sleep 0.01; done; exit 0`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(time.Second) })
	child, err := strconv.Atoi(waitForFile(t, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	if !alive(child) {
		t.Fatal("child not running")
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.exitErr(); err != nil {
		t.Fatalf("shell: %v", err)
	}
	waitGone(t, child)
}

func TestProcessExitAndLog(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess("sh", dir, filepath.Join(dir, "log"), nil,
		"/bin/sh", "-c", `echo first; echo second >&2; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	if p.exitErr() == nil {
		t.Error("exit status 3 reported as success")
	}
	p.stop(time.Second) // after exit: no signal, no hang
	if got := p.logTail(1 << 10); got != "first\nsecond\n" {
		t.Errorf("log = %q, want both streams", got)
	}
	if got := p.logTail(7); got != "second\n" {
		t.Errorf("tail = %q, want the last 7 bytes", got)
	}
}

func TestStartProcessErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := startProcess("none", dir, filepath.Join(dir, "log"), nil); err == nil {
		t.Error("empty command line accepted")
	}
	if _, err := startProcess("missing", dir, filepath.Join(dir, "log"), nil, filepath.Join(dir, "no-such-program")); err == nil {
		t.Error("missing program started")
	}
}

// TestProcessDiesWithTest kills a test binary that started a program, the
// way go test's -timeout or a CI runner would, and expects the program to
// die with it: no cleanup runs in that case, only the kernel's death signal.
func TestProcessDiesWithTest(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux-only")
	}
	if pidFile := os.Getenv("PIPELINE_TEST_HELPER_PIDFILE"); pidFile != "" {
		// The helper: start a long program, report its PID, wait to be killed.
		dir := filepath.Dir(pidFile)
		p, err := startProcess("sleep", dir, filepath.Join(dir, "sleep.log"), nil, "sleep", "300")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(p.pid())+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		<-p.exited()
		return
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	helper := exec.Command(os.Args[0], "-test.run=^TestProcessDiesWithTest$", "-test.count=1")
	helper.Env = append(os.Environ(), "PIPELINE_TEST_HELPER_PIDFILE="+pidFile)
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = helper.Process.Kill()
		_ = helper.Wait()
	})
	grandchild, err := strconv.Atoi(waitForFile(t, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	if !alive(grandchild) {
		t.Fatal("the helper's program is not running")
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	waitGone(t, grandchild)
}
