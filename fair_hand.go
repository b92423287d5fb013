package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// The nodes' hand-over of a fair key to the head of its queue (docs/design.md, "Fair
// locks across processes"): a waiter registers a token with its draw and with each
// attempt that does not get the key; a release that frees the key makes each node set
// it to the head's registered token and tell the head's Client (fair_queue.lua,
// fairHand), which grants the lock on a majority of nodes without a round of its own.

// handed returns the lock when a majority of nodes handed the key to the waiter with
// its latest registration's token (fairHand), counted by node (keyQueue.handedBy), and
// nil otherwise. Each of those nodes set the key after the registration reached it,
// for the TTL its notice gives (at most handPX), so the key lives there until at least
// handAt + that TTL by the node's clock: the validity is counted as a round's would
// be, had the round begun at handAt, with the shortest TTL of the majority. A
// registration older than the latest is never counted: the waiter made an attempt
// with its token since (use), whose failure may have released it on some nodes.
func (w *fairWaiter) handed() *Lock {
	c, e := w.c, &w.entry
	if !e.hands || e.hand == "" || w.away || w.leftID == e.id || w.ctx.Err() != nil || c.isClosed() {
		return nil // the waiter leaves, or has left, which frees the keys handed to it
	}
	px := w.t.handedPX(e.id, e.hand, len(c.nodes)/2+1)
	if px <= 0 {
		return nil
	}
	now := c.opts.Clock.Now()
	v := validity(px, now.Sub(e.handAt), c.opts.DriftFactor)
	if v < bestValidity(px, c.opts.DriftFactor)/2 {
		// The registration is old (a waiter behind others renews every FairLease/3):
		// its next attempt, with this token, takes the key where it was handed and
		// raises its TTL to the lock's, for a whole validity.
		return nil
	}
	// The lock's TTL is the one the nodes set, until finishHand extends it: KeepAlive
	// and Do plan their renewals from it.
	l := &Lock{c: c, key: w.key, token: e.hand, ttl: px, handTTL: w.ttl, until: now.Add(v), lastRound: w.lastRound, fairID: e.id}
	if px < w.ttl {
		l.handEnd = make(chan struct{}) // before l is shared: finishHand waits on it
	}
	w.tries++ // for Options.Observer: the grant came in place of an attempt
	c.queues.granted(l)
	if px < w.ttl {
		c.finishHand(w.ctx, l, v/2, w.ttl)
	}
	return l
}

// finishHand extends a lock that the nodes handed over with less than its TTL
// (handTTL) to its TTL, after, unless it was released or extended, or the Client
// closed, first: each ends the wait at once (Lock.handEnd, made by the caller), so
// a lock held briefly leaves no goroutine behind. A failed extension leaves the
// lock's Until where it was, as a failed Extend does, and is tried again at the retry
// delay (with one try, a majority that missed it for a moment left a 30 s lock to
// expire with its hand TTL: found in review).
//
// While a KeepAlive runs, its keeper does this work (finishHanded) and finishHand only
// waits: if the keeper stops first, it takes up the work again. Its last try starts a
// node timeout before the keeper's last one (lastRenewal), so that the keeper, whose
// Extend may wait for that try's to end, still confirms or gives up by Until − V/10,
// and no try of finishHand is still out when the keeper has given the lock up. These
// conditions are checked once the try holds the lock's op (extend's guard): checked
// before, a try that waited for the op behind the caller's Extend ran late, beside a
// keeper begun meanwhile, or after the caller's Extend had chosen the TTL (found in
// review). (The first way tried, KeepAlive ending finishHand and waiting for its
// goroutine, waited through the Observer's call too: a Release from that Observe
// deadlocked, and a slow Observe kept the work going past Until; found in review.)
func (c *Client) finishHand(ctx context.Context, l *Lock, after, ttl time.Duration) {
	if !c.enter() { // Close waits for it, and it ends at once when Close begins
		return
	}
	l.mu.Lock()
	end := l.handEnd
	l.mu.Unlock()
	if end == nil { // released or extended already
		c.inFlight.Done()
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer c.inFlight.Done()
		wait := after
		for try := 1; ; try++ {
			select {
			case <-c.opts.Clock.After(wait):
			case <-end:
				return
			case <-c.closing:
				return
			}
			l.mu.Lock()
			pending, kept, lastStart := l.handPending()
			l.mu.Unlock()
			if !pending || !c.opts.Clock.Now().Before(lastStart) {
				return // extended, released or lost, or too late
			}
			if !kept { // else the keeper does it: look again later
				err := l.extend(ctx, ttl, l.handTry)
				if err == nil || errors.Is(err, ErrLockLost) || errors.Is(err, ErrClosed) {
					return
				}
			}
			// At least a tenth of a node timeout: a RetryDelay of 0 made the looks a
			// busy loop while a keeper ran (found in review).
			wait = max(min(c.opts.RetryDelay(try), lastStart.Sub(c.opts.Clock.Now())), c.opts.NodeTimeout/10)
		}
	}()
}

// handPending reports whether l still waits to be extended to its TTL (handTTL: not
// extended, released or lost since), whether a keeper runs, and the last moment a try
// of finishHand may start: a node timeout before the keeper's last one (lastRenewal).
// Callers hold l.mu.
func (l *Lock) handPending() (pending, kept bool, lastStart time.Time) {
	_, keeperLast := l.c.lastRenewal(l.until, l.ttl)
	return l.handTTL > 0 && !l.released && !l.lost, l.keeper != nil, keeperLast.Add(-l.c.opts.NodeTimeout)
}

// handTry is the guard of finishHand's extend (see extend): the try goes ahead only if
// it is still wanted, no keeper runs, and it starts (at now, holding l.op) in time.
// Callers hold l.mu.
func (l *Lock) handTry(now time.Time) bool {
	pending, kept, lastStart := l.handPending()
	return pending && !kept && now.Before(lastStart)
}

// finishHanded extends a lock that the nodes handed over with less than its TTL
// (Lock.handTTL) to that TTL before the keeper's first pass, whose renewals are planned
// from it (a 30 s lock handed for 1 s made the keeper give up at once: found in
// review). A failed try is tried again at the retry delay, and it gives up exactly as
// the keeper's renewals do (renew): no try starts after lastRenewal, and the cause
// then matches ErrLockLost, so that the work hears of it by Until − V/10 (it used to
// retry until Until − NodeTimeout and end the work with the last ErrUnavailable:
// found in review). A non-nil result ends the keeper.
func (l *Lock) finishHanded(ctx context.Context, k *keeper) error {
	c := l.c
	var last *QuorumError // the latest failed try's
	for try := 1; ; try++ {
		l.mu.Lock()
		want, until, ttl := l.handTTL, l.until, l.ttl
		done := want == 0 || l.released
		l.mu.Unlock()
		if done {
			return nil
		}
		_, lastStart := c.lastRenewal(until, ttl)
		if !c.opts.Clock.Now().Before(lastStart) {
			return noRenewal(l.key, last)
		}
		// Asked again once the Extend holds the lock's op: the caller's own Extend,
		// which it may have waited for, chose the TTL (found in review).
		err := l.extend(ctx, want, func(time.Time) bool { return l.handTTL > 0 })
		switch {
		case err == nil, err == errExtendSkipped:
			return nil
		case errors.Is(err, ErrLockLost), errors.Is(err, ErrClosed):
			return err
		case ctx.Err() != nil:
			return context.Cause(ctx)
		}
		errors.As(err, &last)
		wait := min(c.opts.RetryDelay(try), lastStart.Sub(c.opts.Clock.Now()))
		if err := l.idle(ctx, k, wait); err != nil {
			return err
		}
	}
}

// handsOff turns off hand registrations (fairEntry.hands), with which the nodes hand a
// free key to the head of its queue, for the Acquire calls that begin while it is
// set. Tests compare both ways with it.
var handsOff atomic.Bool
