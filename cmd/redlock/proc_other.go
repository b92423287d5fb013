//go:build !linux

package main

import (
	"io"
	"syscall"
)

// setPdeathsig does nothing: only Linux can tie a child's life to its parent's.
func setPdeathsig(*syscall.SysProcAttr) {}

// terminalForeground reports false: outside Linux the command is not given the terminal
// (a command in its own process group that reads from the terminal is stopped there).
func terminalForeground(io.Reader) (int, bool) { return 0, false }

func reclaimTerminal(int) {}
