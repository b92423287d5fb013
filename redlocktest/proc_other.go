//go:build !linux

package redlocktest

import "syscall"

// sysProcAttr returns the process attributes for the server.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// processExited reports whether the child process pid has exited. Outside
// Linux there is no portable way to ask without reaping the process, so it
// always reports false: a server that dies during startup is then detected
// only when the readiness deadline passes.
func processExited(int) bool { return false }
