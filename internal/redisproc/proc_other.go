//go:build !linux

package redisproc

import "syscall"

// SysProcAttr returns the process attributes for the server.
func SysProcAttr() *syscall.SysProcAttr { return nil }

// Exited reports whether the child process pid has exited. Outside
// Linux there is no portable way to ask without reaping the process, so it
// always reports false: a server that dies during startup is then detected
// only when the readiness deadline passes.
func Exited(int) bool { return false }
