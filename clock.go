package redlock

import "time"

// Clock is the source of time for validity deadlines, node timeouts and retry delays.
// Tests inject a fake; the default is the system clock.
//
// Readings from Now must carry Go's monotonic clock reading (as time.Now's do), so that
// t.Sub(start) measures elapsed time that a step of the wall clock cannot distort.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After sends the current time on the returned channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the Clock of the running machine.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// driftMinimum is added to every drift allowance: 1 ms for the precision of Redis expiry
// plus 1 ms so that even a tiny TTL keeps a margin (the reference implementation's rule).
const driftMinimum = 2 * time.Millisecond

// drift returns how much of a ttl is set aside for clock drift between the nodes and
// this process: ttl × factor + 2 ms.
func drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + driftMinimum
}

// validity returns how long a lock remains safely held after a step that set its TTL to
// ttl on a majority and took elapsed (measured from just before the first request left):
// ttl − elapsed − drift. A result ≤ 0 means the lock must be treated as not held.
func validity(ttl, elapsed time.Duration, factor float64) time.Duration {
	return ttl - elapsed - drift(ttl, factor)
}

// bestValidity returns the validity a step that sets ttl gives at best, when it takes no
// time at all: ttl − drift. A step that took elapsed gives elapsed less, but counted
// from its end, so the validity still ends bestValidity after the step started.
func bestValidity(ttl time.Duration, factor float64) time.Duration {
	return ttl - drift(ttl, factor)
}
