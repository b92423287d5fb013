//go:build !unix

package main

import (
	"context"
	"fmt"
)

// runExec reports that exec needs process groups and POSIX signals.
func runExec(_ context.Context, e *env, _ []string) int {
	fmt.Fprintln(e.errw(), "redlock exec: not supported on this platform (it needs POSIX process groups and signals)")
	return exitExecFailure
}

// runReaperIfAsked does nothing: exec, and so its reaper, needs a Unix system.
func runReaperIfAsked() {}
