package bench

import "time"

// stallTick is how long the stall watch sleeps between two looks at the clock.
const stallTick = time.Millisecond

// stallWatch measures how late the box wakes a sleeping goroutine while a workload
// runs: a goroutine sleeps stallTick at a time, and the longest overshoot is the
// longest stretch in which this process got no CPU when it asked for it (the OS ran
// something else, the VM was descheduled, or the Go runtime was busy). A hot-key wait
// cannot be shorter than such a stall: BenchmarkClients reports it beside the waits
// (box-stall-ms) so that a reader can tell the box's stalls from the library's.
type stallWatch struct {
	stop    chan struct{}
	done    chan struct{}
	longest time.Duration
}

// watchStalls starts a stall watch that sleeps with sleep and reads the time with now.
func watchStalls(sleep func(time.Duration), now func() time.Time) *stallWatch {
	s := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		last := now()
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			sleep(stallTick)
			t := now()
			s.longest = max(s.longest, t.Sub(last)-stallTick)
			last = t
		}
	}()
	return s
}

// end stops the watch and returns the longest overshoot it saw.
func (s *stallWatch) end() time.Duration {
	close(s.stop)
	<-s.done
	return s.longest
}
