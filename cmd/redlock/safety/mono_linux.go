package safety

import "golang.org/x/sys/unix"

// monotonic returns CLOCK_MONOTONIC in nanoseconds: one clock for every process on the
// machine, so that the sections of a worker process and of this one can be compared.
func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("safety: CLOCK_MONOTONIC: " + err.Error()) // cannot fail on Linux
	}
	return ts.Nano()
}

// processPauses tells whether the holder-process scenarios can run here.
const processPauses = true
