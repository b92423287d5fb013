//go:build !linux

package bench

import (
	"errors"
	"time"
)

// procCPU is not measured outside Linux: it reads /proc.
func procCPU(int) (time.Duration, error) {
	return 0, errors.New("server CPU time is read from /proc, on Linux only")
}
