package bench

import (
	"sync"
	"testing"
	"time"
)

// TestStallWatchReportsLongestOvershoot: a watch whose sleeps take 1, 1, 9 and 2 ms on a
// fake clock reports the 9 ms sleep's overshoot, 8 ms, and stops when told to.
func TestStallWatchReportsLongestOvershoot(t *testing.T) {
	var mu sync.Mutex
	at := time.Unix(0, 0)
	takes := []time.Duration{time.Millisecond, time.Millisecond, 9 * time.Millisecond, 2 * time.Millisecond}
	seen := make(chan struct{})
	sleep := func(time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if len(takes) == 0 {
			select {
			case <-seen:
			default:
				close(seen)
			}
			at = at.Add(stallTick)
			return
		}
		at, takes = at.Add(takes[0]), takes[1:]
	}
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
	s := watchStalls(sleep, now)
	<-seen // every scripted sleep has been taken
	if got := s.end(); got != 8*time.Millisecond {
		t.Fatalf("longest overshoot %v, want 8ms", got)
	}
}
