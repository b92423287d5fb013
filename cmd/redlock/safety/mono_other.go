//go:build !linux

package safety

import "time"

var processStart = time.Now()

// monotonic returns this process's monotonic time in nanoseconds; other processes do
// not share it here, so the holder-process scenarios do not run.
func monotonic() int64 { return int64(time.Since(processStart)) }

// processPauses tells whether the holder-process scenarios can run here.
const processPauses = false
