package main

import (
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// setPdeathsig makes the kernel SIGKILL a child when its parent dies, even by SIGKILL.
// The reaper sets it on the command, from a thread that lives as long as the reaper.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// setReaperPdeathsig has the kernel send the reaper SIGCONT when redlock dies: a reaper
// stopped from outside then goes on, sees its lease pipe closed and kills everything.
// (Under init the kernel does that anyway for the orphaned group; not under a subreaper
// of the same session.) A SIGCONT when only redlock's starting thread ends is harmless.
func setReaperPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGCONT }

// becomeSubreaper makes the calling process the one that inherits its orphaned
// descendants (PR_SET_CHILD_SUBREAPER), so that a process that leaves the command's
// group, or whose parent exits, is still the reaper's to find and kill.
func becomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// leaseClock returns the current time in nanoseconds on the clock the reaper's lease is
// kept on: CLOCK_BOOTTIME, which is the same for every process and goes on while the
// machine is suspended, as the nodes' TTLs do.
func leaseClock() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0 // cannot happen on any Linux since 2.6.39
	}
	return ts.Nano()
}

// descendants returns the PIDs of every descendant of pid (zombies included), read from
// /proc. As the reaper is a subreaper, this is everything the command started, in its
// process group or not (setsid, double forks, nested subreapers and PID namespaces).
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// childrenOf returns the PIDs of pid's children (zombies included), read from /proc.
func childrenOf(pid int) map[int]bool {
	out := map[int]bool{}
	for _, p := range descendants(pid) {
		if ppid, ok := parentOf(p); ok && ppid == pid {
			out[p] = true
		}
	}
	return out
}

// parentOf reads a process's parent PID from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

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
