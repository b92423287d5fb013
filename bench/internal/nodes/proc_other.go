//go:build !linux

package nodes

import (
	"errors"
	"syscall"
	"time"
)

func procAttr() *syscall.SysProcAttr { return nil }

func procCPU(int) (time.Duration, error) {
	return 0, errors.New("server CPU time is read from /proc, on Linux only")
}
