package redisproc

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// SysProcAttr returns the process attributes for a server process. Pdeathsig
// kills the server if the test binary dies without running its cleanups,
// for example when `go test -timeout` panics.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// Exited reports whether the child process pid has exited. It uses
// waitid with WNOWAIT, so the process is left for exec.Cmd.Wait to reap,
// and WNOHANG, so it never blocks. A process stopped by SIGSTOP does not
// count as exited.
func Exited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		// ECHILD: no such child, so it is certainly not running.
		return err == unix.ECHILD
	}
	// Linux sets si_signo to SIGCHLD when a child changed state and to 0
	// when WNOHANG found none.
	return info.Signo != 0
}
