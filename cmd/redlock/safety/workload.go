package safety

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fenced"
)

// Workload is a set of workers that loop: Acquire → critical section → Release. The
// critical section is a read, a pause of Work, and a write of a shared counter: not
// atomic, so two holders at once lose an update. With Fenced, the read and the write go
// through a fenced.Guard with the lock's fencing token (the Clients need
// Options.Fencing), the way a resource that checks tokens would.
type Workload struct {
	Clients []*redlock.Client // the workers use them in turn; at least one
	Workers int               // number of workers; 0 means 4
	Key     string            // the lock's key; "" means "safety"
	TTL     time.Duration     // the lock's TTL; 0 means 1 s
	Work    time.Duration     // the pause between the read and the write; 0 means 1 ms
	Fenced  bool

	// Reentrant: each worker acquires for an owner of its own (redlock.WithOwner), and
	// once granted takes a nested hold of its lock (TryAcquire with the same owner) and
	// releases it before the critical section: the outer hold must still exclude the
	// other workers, as owners exclude each other.
	Reentrant bool

	// Wait bounds each Acquire call; 0 means 2 × TTL.
	Wait time.Duration

	// Stall, when set, is called inside each critical section between the read and the
	// write, with the worker's number and the section's number (1, 2, ...) for that
	// worker; the worker then stops for the duration it returns, as a garbage-collection
	// pause or a SIGSTOP of the holder would. A negative duration makes the worker
	// abandon the lock without writing or releasing, as a crashed holder would.
	Stall func(worker, section int) time.Duration

	// Grants, when set, receives the number of grants so far after each one (never
	// blocking: values are dropped when nobody reads). Scenarios use it to inject a
	// fault once the run is under way.
	Grants chan<- int
}

// Report is what one run of a Workload measured.
type Report struct {
	Start          time.Time // the zero of the run's clock: Section times are offsets from it
	Duration       time.Duration
	Grants         int
	Overlaps       int           // sections that began before an earlier one had ended
	LongestOverlap time.Duration // of those overlaps
	LostUpdates    int           // accepted writes minus the counter's final value
	StaleAccepted  int           // writes accepted after a later holder had entered
	StaleRefused   int           // writes the fence refused
	Abandoned      int           // locks left without a release (Stall < 0)
	Reacquire      time.Duration // longest time from an abandoned grant to the next grant
	NotAcquired    int           // Acquire calls that failed with ErrNotAcquired
	Unavailable    int           // ... with ErrUnavailable
	OtherErrors    int           // ... with anything else (ErrLockLost on release excluded)
	FirstError     string        // the first of those errors, for a scenario to explain a failure
	ReleaseLost    int           // Release calls that reported ErrLockLost
	AcquireP50     time.Duration // latency of successful Acquire calls
	AcquireP99     time.Duration
	FenceViolation string // with Fenced: why the tokens were not strictly increasing
	Nested         int    // with Reentrant: nested holds granted
	Sections       []Section
}

// OverlapsPer1000 returns the overlaps per 1,000 grants.
func (r *Report) OverlapsPer1000() float64 {
	if r.Grants == 0 {
		return 0
	}
	return 1000 * float64(r.Overlaps) / float64(r.Grants)
}

// GrantsPerSecond returns the grant rate of the run.
func (r *Report) GrantsPerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Grants) / r.Duration.Seconds()
}

// resource is the protected resource: a counter, its fence, and the log of sections.
type resource struct {
	start time.Time
	guard fenced.Guard

	mu       sync.Mutex
	counter  int
	writes   int // accepted writes
	entered  int // sections entered so far
	sections []Section
	grants   []Grant
	latency  []time.Duration
	abandon  []time.Duration // grant times of abandoned locks
	report   Report
}

func (r *resource) now() time.Duration { return time.Since(r.start) }

// Run runs the workload until ctx ends or d has passed, then checks the log.
func (w Workload) Run(ctx context.Context, d time.Duration) *Report {
	if w.Workers == 0 {
		w.Workers = 4
	}
	if w.Key == "" {
		w.Key = "safety"
	}
	if w.TTL == 0 {
		w.TTL = time.Second
	}
	if w.Work == 0 {
		w.Work = time.Millisecond
	}
	if w.Wait == 0 {
		w.Wait = 2 * w.TTL
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	res := &resource{start: time.Now()}
	var wg sync.WaitGroup
	for i := range w.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.worker(ctx, res, i, w.Clients[i%len(w.Clients)])
		}()
	}
	wg.Wait()
	return res.check(w.Fenced)
}

func (w Workload) worker(ctx context.Context, res *resource, id int, client *redlock.Client) {
	octx := ctx // the context the worker acquires with: its owner's when Reentrant
	if w.Reentrant {
		octx = redlock.WithOwner(ctx, "safety-worker-"+strconv.Itoa(id))
	}
	for n := 1; ctx.Err() == nil; n++ {
		actx, cancel := context.WithTimeout(octx, w.Wait)
		start := res.now()
		lock, err := client.Acquire(actx, w.Key, w.TTL)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				res.failed(err)
			}
			continue
		}
		sec := Section{Worker: id, Grant: res.now(), Until: lock.Until().Sub(res.start), Fence: lock.Fence()}
		res.granted(Grant{Start: start, End: sec.Grant, Fence: sec.Fence}, sec.Grant-start, w.Grants)
		w.nested(octx, res, client)
		if !w.section(ctx, res, &sec, lock, n) {
			continue // abandoned: no release, like a crashed holder
		}
		err = lock.Release(context.WithoutCancel(ctx))
		if errors.Is(err, redlock.ErrLockLost) {
			res.mu.Lock()
			res.report.ReleaseLost++
			res.mu.Unlock()
		}
	}
}

// nested takes and releases the nested hold of a Reentrant workload.
func (w Workload) nested(octx context.Context, res *resource, client *redlock.Client) {
	if !w.Reentrant {
		return
	}
	inner, err := client.TryAcquire(octx, w.Key, w.TTL)
	if err != nil {
		return // a failed round (a node down, a late majority): the section goes on
	}
	res.mu.Lock()
	res.report.Nested++
	res.mu.Unlock()
	_ = inner.Release(context.WithoutCancel(octx))
}

// section runs one critical section; it returns false if the lock was abandoned.
func (w Workload) section(ctx context.Context, res *resource, sec *Section, lock *redlock.Lock, n int) bool {
	sec.Enter = res.now()
	res.mu.Lock()
	res.entered++
	seq := res.entered
	res.mu.Unlock()

	var v int
	read := func() error { res.mu.Lock(); v = res.counter; res.mu.Unlock(); return nil }
	if w.Fenced {
		if res.guard.Do(sec.Fence, read) != nil { // a later holder has marked the resource
			res.mu.Lock()
			res.report.StaleRefused++
			res.mu.Unlock()
			sec.Exit = res.now()
			res.log(*sec)
			return true
		}
	} else {
		_ = read()
	}
	pause := w.Work
	if w.Stall != nil {
		stall := w.Stall(sec.Worker, n)
		if stall < 0 {
			sec.Exit = res.now()
			res.log(*sec)
			res.mu.Lock()
			res.report.Abandoned++
			res.abandon = append(res.abandon, sec.Grant)
			res.mu.Unlock()
			return false
		}
		pause += stall
	}
	sleep(ctx, pause)
	write := func() error {
		res.mu.Lock()
		defer res.mu.Unlock()
		res.counter = v + 1
		res.writes++
		if res.entered > seq {
			res.report.StaleAccepted++
		}
		return nil
	}
	if w.Fenced {
		if res.guard.Do(sec.Fence, write) != nil {
			res.mu.Lock()
			res.report.StaleRefused++
			res.mu.Unlock()
		}
	} else {
		_ = write()
	}
	sec.Exit = res.now()
	res.log(*sec)
	return true
}

// sleep pauses for d, or less if ctx ends (a stalled holder still stops with the run).
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (r *resource) granted(g Grant, latency time.Duration, notify chan<- int) {
	r.mu.Lock()
	r.grants = append(r.grants, g)
	r.latency = append(r.latency, latency)
	n := len(r.grants)
	r.mu.Unlock()
	if notify != nil {
		select {
		case notify <- n:
		default:
		}
	}
}

func (r *resource) log(s Section) {
	r.mu.Lock()
	r.sections = append(r.sections, s)
	r.mu.Unlock()
}

func (r *resource) failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.report.FirstError == "" {
		r.report.FirstError = err.Error()
	}
	switch {
	case errors.Is(err, redlock.ErrUnavailable):
		r.report.Unavailable++
	case errors.Is(err, redlock.ErrNotAcquired):
		r.report.NotAcquired++
	default:
		r.report.OtherErrors++
	}
}

// check computes the report from the log.
func (r *resource) check(fenced bool) *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := r.report
	rep.Start = r.start
	rep.Duration = r.now()
	rep.Grants = len(r.grants)
	rep.Sections = r.sections
	rep.Overlaps, rep.LongestOverlap = Overlaps(r.sections)
	rep.LostUpdates = r.writes - r.counter
	slices.Sort(r.latency)
	rep.AcquireP50, rep.AcquireP99 = percentile(r.latency, 0.5), percentile(r.latency, 0.99)
	for _, at := range r.abandon {
		next := time.Duration(-1)
		for _, g := range r.grants {
			if g.End > at && (next < 0 || g.End < next) {
				next = g.End
			}
		}
		if next > 0 {
			rep.Reacquire = max(rep.Reacquire, next-at)
		}
	}
	if fenced {
		if err := FenceViolation(r.grants); err != nil {
			rep.FenceViolation = err.Error()
		}
	}
	return &rep
}
