package bench

import (
	"context"
	"slices"
	"sync"
	"time"
)

// The multi-Client workloads (BenchmarkClients) run K independent library clients,
// each over go-redis clients of its own (its own connection pools) and each used by
// one worker goroutine, as K processes would. This file holds what they need beyond
// internal/benchload's loops: the record of who was granted the hot key when, and the
// numbers drawn from it.

// clientsK is the number of Clients (and workers) of the multi-Client workloads.
const clientsK = 8

// clientLibs are the libraries of the multi-Client workloads, in the order they
// alternate: this library in its default mode and in fair mode (Options.Fair), then
// the peers.
var clientLibs = []lib{
	{name: "redlock", open: openRedlock},
	{name: "redlock-fair", open: openRedlockFair},
	{name: "redsync", open: openRedsync},
	{name: "redislock", single: true, open: openRedislock},
}

// roundRobin returns a newLocker that takes the lockers of setups in turn: the i-th
// call gets a locker of setups[i mod len(setups)]. A workload that asks for one
// locker per worker, len(setups) of them, thus gives each worker a setup of its own.
func roundRobin(setups []*setup) func() locker {
	var (
		mu sync.Mutex
		i  int
	)
	return func() locker {
		mu.Lock()
		s := setups[i%len(setups)]
		i++
		mu.Unlock()
		return s.newLocker()
	}
}

// grantLog records the Lock calls of a hot-key run: who was granted the key, after
// how long, and the calls that ended without a grant. A grant is logged by the worker
// that now holds the key, before its critical section, so (with mutual exclusion) the
// log's order is the order of the grants.
type grantLog struct {
	mu       sync.Mutex
	base     time.Time       // offsets below count from here
	last     int             // the worker granted last, −1 before the first grant
	counts   []int           // grants per worker
	handoffs int             // grants to another worker than the previous holder
	self     int             // grants to the previous holder again
	waits    []time.Duration // the wait of every hand-over grant
	longest  time.Duration   // the longest wait of any grant
	grantAt  []time.Duration // when each grant came, from base
	startAt  []time.Duration // when the call of each grant began to wait, from base
	order    []int           // the worker of each grant
	open     [][2]time.Duration
}

// newGrantLog returns an empty log for workers workers.
func newGrantLog(workers int) *grantLog {
	return &grantLog{base: time.Now(), last: -1, counts: make([]int, workers)}
}

// granted logs a grant to worker, which started waiting at t0 and got the key at t1.
func (g *grantLog) granted(worker int, t0, t1 time.Time) {
	wait := t1.Sub(t0)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.counts[worker]++
	switch {
	case g.last == worker:
		g.self++
	case g.last >= 0:
		g.handoffs++
		g.waits = append(g.waits, wait)
	}
	g.last = worker
	g.longest = max(g.longest, wait)
	g.grantAt = append(g.grantAt, t1.Sub(g.base))
	g.startAt = append(g.startAt, t0.Sub(g.base))
	g.order = append(g.order, worker)
}

// ended logs a Lock call of a worker that started at t0 and failed at t1: it gave up,
// or the run ended while it waited.
func (g *grantLog) ended(t0, t1 time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = append(g.open, [2]time.Duration{t0.Sub(g.base), t1.Sub(g.base)})
}

// hotFigures are the numbers of a multi-Client hot-key run drawn from its grantLog.
type hotFigures struct {
	grants   int
	handoffs int
	self     int
	counts   []int           // grants per worker
	order    []int           // the worker of each grant, in grant order
	waits    []time.Duration // hand-over waits, sorted
	// longest is the longest wait of the run: of any grant, and of any Lock call that
	// ended without one, counted up to the stop (the stop-th grant) at the latest, so a
	// worker that starves shows here although it has no grant to show.
	longest time.Duration
	// longestLate is longest for the calls that began after every worker's first
	// grant (the workers-th grant of the run), when the calls of a synchronized start
	// have been served: the longest wait of a run in its steady state.
	longestLate time.Duration
	// overtakes counts the grants, up to the stop, that went to a call which began to
	// wait after another call that was still waiting then (granted later, or never):
	// 0 in arrival order.
	overtakes int
}

// figures returns the log's numbers for a run that stopped at its stop-th grant
// (or, when fewer came, when the last failed call returned).
func (g *grantLog) figures(stop int) hotFigures {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := hotFigures{
		grants:   len(g.grantAt),
		handoffs: g.handoffs,
		self:     g.self,
		counts:   slices.Clone(g.counts),
		order:    slices.Clone(g.order),
		waits:    slices.Sorted(slices.Values(g.waits)),
		longest:  g.longest,
	}
	end := time.Duration(1<<63 - 1)
	if stop > 0 && stop <= len(g.grantAt) {
		end = g.grantAt[stop-1]
	}
	for _, o := range g.open {
		f.longest = max(f.longest, min(o[1], end)-o[0])
	}
	if workers := len(g.counts); workers <= len(g.grantAt) {
		from := g.grantAt[workers-1] // every worker has had a grant (at best)
		for i := range g.grantAt {
			if g.startAt[i] > from {
				f.longestLate = max(f.longestLate, g.grantAt[i]-g.startAt[i])
			}
		}
		for _, o := range g.open {
			if o[0] > from {
				f.longestLate = max(f.longestLate, min(o[1], end)-o[0])
			}
		}
	}
	f.overtakes = g.overtakesUntil(end)
	return f
}

// overtakesUntil counts the grants up to end that overtook a waiting call (see
// hotFigures.overtakes). The caller holds g.mu.
func (g *grantLog) overtakesUntil(end time.Duration) int {
	n := 0
	earliest := time.Duration(1<<63 - 1) // the earliest start among the later grants
	for i := len(g.grantAt) - 1; i >= 0; i-- {
		overtook := g.grantAt[i] <= end && earliest < g.startAt[i]
		for _, o := range g.open {
			overtook = overtook || g.grantAt[i] <= end && o[0] < g.startAt[i] && g.grantAt[i] < o[1]
		}
		if overtook {
			n++
		}
		earliest = min(earliest, g.startAt[i])
	}
	return n
}

// jain returns Jain's fairness index of xs, (Σx)² / (n·Σx²): 1 when all are equal,
// 1/n when one has everything. It is 0 for no values or all zero.
func jain(xs []int) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// loggedLocker is a worker's locker that logs its Lock calls in a grantLog.
type loggedLocker struct {
	locker
	worker int
	log    *grantLog
}

// Lock calls the library's Lock and logs the grant, or the failure.
func (l *loggedLocker) Lock(ctx context.Context, key string) error {
	t0 := time.Now()
	err := l.locker.Lock(ctx, key)
	if err != nil {
		l.log.ended(t0, time.Now())
		return err
	}
	l.log.granted(l.worker, t0, time.Now())
	return nil
}

// logged returns a newLocker that wraps the lockers of next in loggedLockers, the
// i-th call's as worker i.
func logged(next func() locker, log *grantLog) func() locker {
	var (
		mu sync.Mutex
		i  int
	)
	return func() locker {
		mu.Lock()
		w := i
		i++
		mu.Unlock()
		return &loggedLocker{locker: next(), worker: w, log: log}
	}
}
