package pipeline

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is an external program a test started: the Collector, Prometheus or
// the demo. It runs in a process group of its own, so stopping it reaches
// whatever it started too, and nothing outside that group is ever signalled.
// Its standard output and error go to a log file the test prints on failure.
// When the program exits, on its own or because it was stopped, the rest of
// its group is killed (on Linux), so no orphan outlives it.
//
// Safe for concurrent use; stop is idempotent.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string

	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // what Wait returned; read only after done

	stopOnce sync.Once
}

// startProcess starts argv in dir with the current environment plus env,
// writing its output to logPath.
func startProcess(name, dir, logPath string, env []string, argv ...string) (*process, error) {
	if len(argv) == 0 {
		return nil, errors.New("startProcess: empty command line")
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		// Once the leader has exited, but before it is reaped (so the group
		// ID is still ours), sweep whatever it left behind in its group: a
		// program that ends, by itself or on SIGINT, takes its children along.
		if waitExitNoReap(cmd.Process.Pid) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is the process ID, which is also its process group ID.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited is closed when the process has ended, for whatever reason.
func (p *process) exited() <-chan struct{} { return p.done }

// exitErr is how the process ended (nil for exit status 0). It blocks until
// the process has exited.
func (p *process) exitErr() error {
	<-p.done
	return p.waitErr
}

// stop ends the process group: SIGINT first (the Collector, Prometheus and the
// demo all shut down cleanly on it), SIGKILL if it is still running after
// grace. It returns once the process has been reaped. A process that already
// exited is left alone: its group ID may no longer be ours to signal.
func (p *process) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		// Until Wait has reaped it, the leader's PID (= the group ID) cannot be
		// reused, so these signals reach only what this process started.
		_ = syscall.Kill(-p.pid(), syscall.SIGINT)
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-p.done:
		case <-timer.C:
			_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
			<-p.done
		}
	})
}

// logTail returns at most the last n bytes of the process's output.
func (p *process) logTail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		if _, err := f.Seek(fi.Size()-n, io.SeekStart); err != nil {
			return fmt.Sprintf("(log unreadable: %v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	return string(b)
}
