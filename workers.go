package redlock

import (
	"sync"
	"time"
)

// workers runs node calls on goroutines that are kept for a while after their call
// returns. A new goroutine per call would start with a small stack and grow it on each
// trip through go-redis; a reused one has grown it already. In a profile of a hot lock
// that growth cost about a quarter of the client's CPU.
type workers struct {
	tasks chan func() // unbuffered: a send succeeds only when a worker is idle
	quit  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// workerIdle is how long a worker waits for another call before it exits.
const workerIdle = 10 * time.Second

func newWorkers() *workers {
	return &workers{tasks: make(chan func()), quit: make(chan struct{})}
}

// run calls f on an idle worker, or on a new one when none is idle.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
	default:
		w.wg.Add(1)
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	defer w.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.tasks:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop ends the idle workers and waits for all of them; calls must no longer be
// submitted (Client.Close calls it after every node call has returned).
func (w *workers) stop() {
	w.once.Do(func() { close(w.quit) })
	w.wg.Wait()
}
