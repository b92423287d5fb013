package main

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// setPdeathsig makes the kernel SIGKILL a child when redlock dies, even by SIGKILL: a
// command must not run on without the process that renews its lock, and the demo's
// redis-server processes must not outlive it.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// terminalForeground reports whether in is a terminal whose foreground process group is
// ours. A command started in its own process group must then be made the foreground
// group, or reading from the terminal would stop it (SIGTTIN).
func terminalForeground(in io.Reader) (fd int, ok bool) {
	f, isFile := in.(*os.File)
	if !isFile {
		return 0, false
	}
	fd = int(f.Fd())
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return fd, err == nil && pgrp == unix.Getpgrp()
}

// reclaimTerminal makes redlock's process group the terminal's foreground group again
// after the command ended. A background group asking for that would get SIGTTOU, so
// it is ignored meanwhile.
func reclaimTerminal(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())
}
