package pipeline

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in a process group of its own and has the
// kernel kill it if the test process dies first (a test binary killed by
// its -timeout never runs its cleanups). The death signal is tied to the
// creating OS thread; the Go runtime keeps its threads alive unless a
// goroutine exits while locked to one, which this package never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitExitNoReap blocks until the child pid has exited, leaving it a zombie
// for exec.Cmd.Wait to reap. It reports whether it could wait that way.
func waitExitNoReap(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		return err == nil
	}
}
