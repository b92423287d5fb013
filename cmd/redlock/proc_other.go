//go:build unix && !linux

package main

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// setPdeathsig does nothing: only Linux can tie a child's life to its parent's.
func setPdeathsig(*syscall.SysProcAttr) {}

// setReaperPdeathsig does nothing: only Linux can tie a child's life to its parent's.
func setReaperPdeathsig(*syscall.SysProcAttr) {}

// becomeSubreaper does nothing outside Linux: descendants that leave the command's
// process group are not found there.
func becomeSubreaper() error { return nil }

// leaseClock returns the current time in nanoseconds on CLOCK_MONOTONIC.
func leaseClock() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// descendants finds nothing outside Linux; only the command's process group is killed.
func descendants(int) []int { return nil }

// childrenOf finds nothing outside Linux.
func childrenOf(int) map[int]bool { return nil }

// terminalForeground reports false: outside Linux the command is not given the terminal
// (a command in its own process group that reads from the terminal is stopped there).
func terminalForeground(io.Reader) (int, bool) { return 0, false }

func reclaimTerminal(int) {}
