package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// KeepAlive's schedule, as fractions of the lock's TTL.
const (
	// renewDivisor: a held lock is extended every ttl/3, so two renewals can fail
	// before the validity is in danger.
	renewDivisor = 3
	// marginDivisor: the work's context ends at Until − ttl/10 at the latest, leaving
	// the work that long to stop before another client can take the lock.
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
}

// halt cancels the work's context with cause (unless it already ended), asks the
// goroutine to end, and waits until it has.
func (k *keeper) halt(cause error) {
	k.cancel(cause)
	k.once.Do(func() { close(k.stop) })
	<-k.done
}

// KeepAlive renews the lock in the background (Extend with its current TTL every
// ttl/3, retrying sooner after a failure) and returns a context for the work done under
// the lock. That context is cancelled:
//   - when renewal cannot prove the lock is still held: at the latest at Until − ttl/10,
//     even if every node hangs; also at once when a node says our token is gone, or when
//     the wall clock and the monotonic clock drift apart by more than the drift
//     allowance (the machine was suspended, so the validity can no longer be trusted).
//     context.Cause then matches ErrLockLost;
//   - when ctx ends, or stop is called;
//   - when Release is called, before Release returns;
//   - when the Client is closed, before Close returns; context.Cause then matches
//     ErrClosed.
//
// stop ends the renewal (it does not release the lock) and waits for the goroutine to
// exit. Exactly one goroutine runs per kept-alive lock; a second KeepAlive while one
// runs returns a context already cancelled. Use a TTL of at least 20 × NodeTimeout
// (1 s with the defaults), so a renewal fits inside the margin.
func (l *Lock) KeepAlive(ctx context.Context) (lockCtx context.Context, stop func()) {
	c := l.c
	lockCtx, cancel := context.WithCancelCause(ctx)
	k := &keeper{stop: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	refuse := func(cause error) (context.Context, func()) {
		cancel(cause)
		return lockCtx, func() {}
	}
	// Lock order: the Client's closeMu, then l.mu. Close waits for every keeper
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
	l.keeper = k
	l.mu.Unlock()

	c.keepers.Add(1)
	go func() {
		defer c.keepers.Done()
		cause := l.renew(lockCtx, k)
		l.detach(k)
		cancel(cause)
		close(k.done)
	}()
	return lockCtx, func() { k.halt(context.Canceled) }
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
	failures := 0
	prev := c.opts.Clock.Now()
	_, ttl := l.deadline()
	next := prev.Add(ttl / renewDivisor)
	closed := func() error { return fmt.Errorf("redlock: keep alive %q: %w", l.key, ErrClosed) }
	for {
		select {
		case <-c.closing:
			return closed()
		default:
		}
		now := c.opts.Clock.Now()
		until, ttl := l.deadline()
		if gap := clockGap(prev, now); gap > drift(ttl, c.opts.DriftFactor) {
			l.lose(now)
			return lostError("keep alive", l.key, fmt.Sprintf("wall and monotonic clocks moved apart by %v (suspended?)", gap.Round(time.Millisecond)))
		}
		prev = now
		// The work must have stopped by stopBy; a renewal started after lastStart
		// could not be confirmed before then, as a step may take NodeTimeout.
		stopBy := until.Add(-ttl / marginDivisor)
		lastStart := stopBy.Add(-c.opts.NodeTimeout)
		if !now.Before(lastStart) {
			return lostError("keep alive", l.key, "no renewal confirmed in time")
		}
		if now.Before(next) {
			wait := min(next.Sub(now), lastStart.Sub(now))
			select {
			case <-k.stop:
				return context.Canceled
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-c.closing:
				return closed()
			case <-c.opts.Clock.After(wait):
			}
			continue
		}
		err := l.Extend(ctx, ttl)
		switch {
		case err == nil:
			failures = 0
			next = c.opts.Clock.Now().Add(ttl / renewDivisor)
		case errors.Is(err, ErrLockLost), errors.Is(err, ErrClosed):
			return err
		case ctx.Err() != nil:
			return context.Cause(ctx)
		default: // ErrUnavailable: try again soon, while time remains
			failures++
			next = c.opts.Clock.Now().Add(c.opts.RetryDelay(failures))
		}
	}
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

// Do acquires the lock on key (waiting as Acquire does), runs fn under KeepAlive, and
// releases the lock when fn returns (or panics), on a context the caller cannot have
// cancelled. fn's context is cancelled when the lock is lost, before its validity ends,
// and when ctx ends; fn must then stop its work promptly. Do returns the error of
// Acquire, or fn's error joined with the error that ended the lock: one matching
// ErrLockLost if the lock was lost while fn ran, otherwise Release's.
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error) (err error) {
	lock, err := c.Acquire(ctx, key, ttl)
	if err != nil {
		return err
	}
	work, stop := lock.KeepAlive(ctx)
	defer func() {
		stop()
		rerr := lock.Release(context.WithoutCancel(ctx))
		if cause := context.Cause(work); errors.Is(cause, ErrLockLost) {
			err = errors.Join(err, cause)
		} else {
			err = errors.Join(err, rerr)
		}
	}()
	return fn(work)
}
