package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// KeepAlive's schedule, as fractions of the validity a renewal gives at best
// (bestValidity: ttl − drift, nearly the whole TTL with the default DriftFactor).
const (
	// renewDivisor: a held lock is extended every validity/3, so two renewals can fail
	// before the validity is in danger.
	renewDivisor = 3
	// marginDivisor: the work's context ends at Until − validity/10 at the latest,
	// leaving the work that long to stop before another client can take the lock.
	marginDivisor = 10
)

var (
	errReleased         = errors.New("redlock: lock released")
	errKeepAliveRunning = errors.New("redlock: KeepAlive already running for this lock")
)

// keeper is the one renewal goroutine of a kept-alive lock.
type keeper struct {
	stop   chan struct{} // closed to ask the goroutine to end
	once   sync.Once
	done   chan struct{} // closed when the goroutine has ended
	cancel context.CancelCauseFunc
	// observing: the goroutine is calling Options.Observer (emit), holding no lock;
	// once that returns, it does nothing but end (it finds stop closed).
	observing atomic.Bool
}

// halt cancels the work's context with cause (unless it already ended), asks the
// goroutine to end, and waits until it has; while the goroutine is in Observe, which
// may be the caller (a Release or stop called from Observe), it does not wait: the
// goroutine sends nothing more.
func (k *keeper) halt(cause error) {
	k.cancel(cause)
	k.once.Do(func() { close(k.stop) })
	if k.observing.Load() {
		return
	}
	<-k.done
}

// KeepAlive renews the lock in the background (Extend with its current TTL every
// third of the validity a renewal gives, ttl − (ttl × DriftFactor + 2 ms): about ttl/3
// with the default DriftFactor; sooner after a failure) and returns a context for the
// work done under the lock. That context is cancelled:
//   - when renewal cannot prove the lock is still held: at the latest at Until − a tenth
//     of that validity (about ttl/10; for a fair lock that the nodes handed over with
//     less than its TTL, which KeepAlive first extends to its TTL, a tenth of the
//     validity of the TTL it was handed with), even if every node hangs; also at once
//     when a node says our token is gone, or when the wall clock and the monotonic clock drift
//     apart by more than the drift allowance (the machine was suspended, so the
//     validity can no longer be trusted). context.Cause then matches ErrLockLost; when
//     renewals failed, it is a *QuorumError carrying the last renewal's counts and a
//     *NodeError for each node that failed (errors.As), and it matches no other sentinel;
//   - when ctx ends, or stop is called;
//   - when Release is called, before Release returns;
//   - when the Client is closed, before Close returns; context.Cause then matches
//     ErrClosed.
//
// stop ends the renewal (it does not release the lock) and waits for the goroutine to
// exit; while that goroutine is calling Options.Observer (possibly calling stop or
// Release itself), stop does not wait for it, and it ends without another renewal
// (until it has, a new KeepAlive of the lock is refused as running).
// Exactly one goroutine runs per kept-alive lock; a second KeepAlive while one runs
// returns a context already cancelled.
//
// The lock's TTL must pass Options.CheckKeepAliveTTL (at least 20 × NodeTimeout, 1 s
// with the defaults, and enough validity left after the drift allowance); otherwise
// KeepAlive starts nothing and returns a context already cancelled with that check's
// error (matching ErrTTLTooShort) as its cause. The lock then stays held, unrenewed,
// until its Until: Release it, or Extend it to a TTL that passes and call KeepAlive
// again.
func (l *Lock) KeepAlive(ctx context.Context) (lockCtx context.Context, stop func()) {
	if ctx == nil { // refused like a TTL too short: the lock stays held, unrenewed
		lockCtx, cancel := context.WithCancelCause(context.Background())
		cancel(nilContextError("keep alive", l.key))
		return lockCtx, func() {}
	}
	c := l.c
	lockCtx, cancel := context.WithCancelCause(ctx)
	k := &keeper{stop: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	refuse := func(cause error) (context.Context, func()) {
		cancel(cause)
		return lockCtx, func() {}
	}
	// closeMu, then l.mu (see the lock order above Client). Close waits for every keeper
	// registered before it began, and none can register after.
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed {
		return refuse(fmt.Errorf("redlock: keep alive %q: %w", l.key, ErrClosed))
	}
	l.mu.Lock()
	switch {
	case l.released:
		l.mu.Unlock()
		return refuse(lostError("keep alive", l.key, "already released"))
	case l.keeper != nil:
		l.mu.Unlock()
		return refuse(errKeepAliveRunning)
	}
	if err := c.opts.checkKeepAlive(max(l.ttl, l.handTTL)); err != nil {
		l.mu.Unlock()
		return refuse(fmt.Errorf("redlock: keep alive %q: %w", l.key, err))
	}
	l.keeper = k
	l.mu.Unlock()

	c.keepers.Add(1)
	go func() {
		defer c.keepers.Done()
		rctx := c.markRenewals(lockCtx, k)
		cause := l.finishHanded(rctx, k)
		if cause == nil {
			cause = l.renew(rctx, k)
		}
		l.detach(k)
		cancel(cause)
		l.keepAliveEnded(ctx, k, cause)
		close(k.done)
	}()
	return lockCtx, func() { k.halt(context.Canceled) }
}

// lastRenewal returns, for a lock valid until until with TTL ttl, its best validity v
// and the last moment a renewal may start: the work must have stopped by Until − v/10
// (marginDivisor), and a renewal started later could not be confirmed by then, as a
// step may take NodeTimeout.
func (c *Client) lastRenewal(until time.Time, ttl time.Duration) (v time.Duration, lastStart time.Time) {
	v = bestValidity(ttl, c.opts.DriftFactor)
	return v, until.Add(-v/marginDivisor - c.opts.NodeTimeout)
}

// noRenewal is the cause with which a keeper gives up when no renewal was confirmed in
// time: matching ErrLockLost, and carrying the latest failed renewal's counts if any.
func noRenewal(key string, last *QuorumError) error {
	const why = "no renewal confirmed in time"
	if last != nil {
		return renewalsFailed(last, why)
	}
	return lostError("keep alive", key, why)
}

// detach forgets k as the lock's keeper.
func (l *Lock) detach(k *keeper) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keeper == k {
		l.keeper = nil
	}
}

// renew runs the keeper's loop and returns the cause for ending the work's context.
func (l *Lock) renew(ctx context.Context, k *keeper) error {
	c := l.c
	s := l.firstRenewal()
	for {
		select {
		case <-c.closing:
			return keepAliveClosed(l.key)
		case <-k.stop: // halted while the last renewal's Observe ran
			return context.Canceled
		default:
		}
		now := c.opts.Clock.Now()
		until, ttl := l.deadline()
		if gap := clockGap(s.prev, now); gap > drift(ttl, c.opts.DriftFactor) {
			l.lose(now)
			return lostError("keep alive", l.key, fmt.Sprintf("wall and monotonic clocks moved apart by %v (suspended?)", gap.Round(time.Millisecond)))
		}
		s.prev = now
		v, lastStart := c.lastRenewal(until, ttl)
		if !now.Before(lastStart) {
			return noRenewal(l.key, s.last)
		}
		if now.Before(s.next) {
			if err := l.idle(ctx, k, min(s.next.Sub(now), lastStart.Sub(now))); err != nil {
				return err
			}
			continue
		}
		if err := s.extended(ctx, c, l.Extend(ctx, ttl), v); err != nil {
			return err
		}
	}
}

// renewal is the state the keeper's loop carries from one pass to the next.
type renewal struct {
	failures int          // renewals failed in a row
	last     *QuorumError // the latest failed renewal since the last success
	prev     time.Time    // the previous clock reading, for the suspension check
	next     time.Time    // when the next renewal is due
}

// firstRenewal returns the keeper's state before its first pass. The first renewal
// comes a third of the validity after KeepAlive was called, or, for a lock already part
// way through a validity that its TTL gives, a third into that validity, as every later
// renewal does: a lock kept alive some time after its Acquire would otherwise reach its
// last renewal start unrenewed.
func (l *Lock) firstRenewal() renewal {
	c := l.c
	prev := c.opts.Clock.Now()
	until, ttl := l.deadline()
	v := bestValidity(ttl, c.opts.DriftFactor)
	return renewal{prev: prev, next: earlier(prev.Add(v/renewDivisor), until.Add(-v+v/renewDivisor))}
}

// idle waits d, until the next pass of the keeper's loop. A non-nil result (stop was
// called, ctx ended, the Client closed) ends the keeper with that cause.
func (l *Lock) idle(ctx context.Context, k *keeper, d time.Duration) error {
	c := l.c
	select {
	case <-k.stop:
		return context.Canceled
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.closing:
		return keepAliveClosed(l.key)
	case <-c.opts.Clock.After(d):
		return nil
	}
}

// extended records the outcome err of one renewal (an Extend to the lock's TTL, whose
// validity is v at best) and schedules the next. A non-nil result ends the keeper with
// that cause.
func (s *renewal) extended(ctx context.Context, c *Client, err error, v time.Duration) error {
	switch {
	case err == nil:
		s.failures, s.last = 0, nil
		s.next = c.opts.Clock.Now().Add(v / renewDivisor)
	case errors.Is(err, ErrLockLost), errors.Is(err, ErrClosed):
		return err
	case ctx.Err() != nil:
		return context.Cause(ctx)
	default: // ErrUnavailable: try again soon, while time remains
		s.failures++
		if qe := (*QuorumError)(nil); errors.As(err, &qe) {
			s.last = qe
		}
		s.next = c.opts.Clock.Now().Add(c.opts.RetryDelay(s.failures))
	}
	return nil
}

// keepAliveClosed is the cause that ends a KeepAlive when the Client closes.
func keepAliveClosed(key string) error {
	return fmt.Errorf("redlock: keep alive %q: %w", key, ErrClosed)
}

// deadline returns the lock's validity end and TTL.
func (l *Lock) deadline() (time.Time, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until, l.ttl
}

// clockGap returns how far the wall clock and the monotonic clock disagree about the
// time from prev to now. Go's monotonic clock stops while the machine is suspended, but
// Redis keeps expiring keys by wall time, so a large gap means the validity measured on
// the monotonic clock is no longer true. Readings without a monotonic part give 0.
func clockGap(prev, now time.Time) time.Duration {
	return absDiff(now.Round(0).Sub(prev.Round(0)), now.Sub(prev))
}

// absDiff returns |wall − mono|.
func absDiff(wall, mono time.Duration) time.Duration {
	if wall < mono {
		return mono - wall
	}
	return wall - mono
}

// DoOption changes how one call of Client.Do waits for its lock; the work is not
// affected. Without options, Do waits as Acquire does, until ctx ends.
type DoOption func(*doOptions)

// doOptions holds the DoOptions of one call.
type doOptions struct {
	mode doMode
	wait time.Duration // > 0: bound on the wait, not on the work
}

// doMode is how Do acquires its lock.
type doMode int

const (
	doWait       doMode = iota // Acquire: wait for the lock
	doTryOnce                  // TryAcquire: exactly one attempt
	doSkipIfHeld               // attempts until the key is found held elsewhere (skipAttempts at most)
)

// skipAttempts bounds the attempts of SkipIfHeld.
const skipAttempts = 3

// TryOnce makes Do attempt the lock exactly once, as TryAcquire does: if the attempt
// fails, Do returns at once without running fn (its error matches ErrNotRun and
// TryAcquire's: ErrNotAcquired when the key is held elsewhere). Copies of a job that
// start at the same instant can split the nodes' votes so that none of them gets a
// majority, and one slow first connection can cost an attempt; a job that must run in
// one copy should use SkipIfHeld, which retries those cases.
func TryOnce() DoOption { return func(o *doOptions) { o.mode = doTryOnce } }

// SkipIfHeld makes Do give up, without running fn, as soon as two attempts in a row
// find the key held elsewhere (no node said yes and the refusals rule out a majority;
// the second look, a few round trips later, tells a holder from the partial keys of
// copies whose votes split, which are undone by then): it never waits for another
// holder. An attempt that failed otherwise (a split vote with other
// copies starting at the same instant, nodes that failed or answered late) is retried
// after a short random pause of one to three round trips, up to 3 attempts in all, so a
// split vote does not leave every copy without the lock. This is the form for a job that
// several copies start at once (cron on several machines): one runs, the others return
// an error matching ErrNotRun and ErrNotAcquired. After 3 failed attempts, Do returns
// the last one's error (ErrUnavailable when too many nodes failed). WaitAtMost bounds
// the attempts' time too. See Client.AcquireUnlessHeld, which it uses.
func SkipIfHeld() DoOption { return func(o *doOptions) { o.mode = doSkipIfHeld } }

// WaitAtMost bounds how long Do waits for the lock to d, without bounding the work: fn's
// context does not inherit that deadline. A d ≤ 0 means a single attempt, as TryOnce.
// When the wait ends without the lock, Do's error matches ErrNotRun, ErrNotAcquired (or
// ErrUnavailable, when too many nodes were failing) and context.DeadlineExceeded.
func WaitAtMost(d time.Duration) DoOption {
	return func(o *doOptions) {
		if d <= 0 {
			o.mode, o.wait = doTryOnce, 0
			return
		}
		o.wait = d
	}
}

// AcquireUnlessHeld takes the lock on key for ttl unless it is held elsewhere: it never
// waits for another holder, and is what Do does with SkipIfHeld. It returns, with
// TryAcquire's error (matching ErrNotAcquired), when two attempts in a row find the key
// held elsewhere: no node said yes and the refusals rule out a majority (one such
// attempt may have met the partial keys of callers whose votes split). An attempt that
// failed otherwise (a split vote with other callers that started at the same instant,
// nodes that failed or answered late, such as a first call over a cold connection) is
// retried after a random pause of one to three round trips, up to 3 attempts in all;
// then it returns the last attempt's error. It also stops when ctx ends, on a reply no
// retry can fix, and once Close was called.
func (c *Client) AcquireUnlessHeld(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	seenHeld := false // the previous attempt found the key held
	for attempt := 1; ; attempt++ {
		lock, err := c.TryAcquire(ctx, key, ttl)
		var qe *QuorumError
		if err == nil || attempt == skipAttempts || !errors.As(err, &qe) || qe.ctxErr != nil || qe.hopeless() {
			return lock, err
		}
		// Refusals alone do not prove a holder: the partial keys of copies whose votes
		// split look the same, and our own yes may simply have come last. Those keys
		// are undone within a round trip, a holder's stay: give up only when the next
		// attempt finds the key held too.
		held := qe.kind == ErrNotAcquired && qe.Agreed == 0
		if held && seenHeld {
			return lock, err
		}
		seenHeld = held
		// A split vote: the other copies undo their partial keys at once, and one of
		// the next attempts, spread out at random, finds the nodes free.
		rtt := qe.quorum
		if rtt <= 0 {
			rtt = c.opts.NodeTimeout
		}
		c.pause(ctx, rtt+rand.N(2*rtt))
	}
}

// Do acquires the lock on key (waiting as Acquire does, unless TryOnce, SkipIfHeld or
// WaitAtMost says otherwise), runs fn under KeepAlive, and releases the lock when fn
// returns (or panics), on a context the caller cannot have cancelled. fn's context is
// cancelled when the lock is lost, before its validity ends, and when ctx ends; fn must
// then stop its work promptly. ctx bounds both the wait and the work; WaitAtMost bounds
// the wait alone.
//
// Do checks ttl with Options.CheckKeepAliveTTL first (at least 20 × NodeTimeout, 1 s
// with the defaults) and returns that error, matching ErrTTLTooShort and ErrNotRun,
// before acquiring anything.
//
// Do's error tells the outcomes apart:
//   - nil: fn ran, returned nil, and the lock was released;
//   - an error matching ErrNotRun: fn did not run; it also matches Acquire's error
//     (ErrNotAcquired: held elsewhere; ErrUnavailable: too many nodes failing; ErrClosed;
//     the context's error) or the refused argument's;
//   - a *RunError: fn ran. Its Err is fn's error, its Lost the cause that ended fn's
//     context when the lock was lost while fn ran (matching ErrLockLost, with the last
//     renewal's *QuorumError when renewals failed), else its Release the error of
//     Release (for example ErrUnavailable: fn's work is done, but the keys stay until
//     the TTL ends).
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error, opts ...DoOption) (err error) {
	if ctx == nil {
		return &notRunError{nilContextError("do", key)}
	}
	var o doOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := c.check(key, ttl); err != nil {
		return &notRunError{err}
	}
	if fn == nil {
		return &notRunError{fmt.Errorf("redlock: do %q: nil function", key)}
	}
	if err := c.opts.checkKeepAlive(ttl); err != nil {
		return &notRunError{fmt.Errorf("redlock: do %q: %w", key, err)}
	}
	acquire := c.Acquire
	switch o.mode {
	case doTryOnce:
		acquire = c.TryAcquire
	case doSkipIfHeld:
		acquire = c.AcquireUnlessHeld
	}
	waitCtx := ctx
	if o.wait > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, o.wait)
		defer cancel()
	}
	lock, err := acquire(waitCtx, key, ttl)
	if err != nil {
		return &notRunError{err}
	}
	work, stop := lock.KeepAlive(ctx)
	if work.Err() != nil { // ctx ended, or Close began, right after the Acquire
		cause := context.Cause(work)
		_ = lock.Release(context.WithoutCancel(ctx))
		return &notRunError{fmt.Errorf("redlock: do %q: %w", key, cause)}
	}
	defer func() {
		stop()
		rerr := lock.Release(context.WithoutCancel(ctx))
		run := &RunError{Key: key, Err: err}
		if cause := context.Cause(work); errors.Is(cause, ErrLockLost) {
			run.Lost = cause
		} else {
			run.Release = rerr
		}
		if run.Err != nil || run.Lost != nil || run.Release != nil {
			err = run
		}
	}()
	return fn(work)
}
