package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// waiter is one blocking Acquire: its attempts, the pacing between them, its waits for
// a wake-up or a handoff, and the error it ends with. Its fields are the state that one
// pass of the head's loop hands to the next.
type waiter struct {
	c   *Client
	ctx context.Context
	key string
	ttl time.Duration
	t   *ticket // the waiter's place in the key's queue; nil before it queued

	last    *QuorumError  // the latest failed attempt; nil before the first
	took    time.Duration // how long the latest attempt took to hear from a majority
	attempt int           // the number of the next attempt, from 1
	seen    uint64        // wake-ups of the key's waiters before the latest attempt
	// waitFirst: the attempt made before queueing counts; the head waits before the next.
	waitFirst bool
	// quick: the latest attempt lost a race, so the next one comes soon; at most once
	// between two wake-ups (quickUsed).
	quick, quickUsed bool
	// lead: the next attempt follows a release that other Clients' waiters may have
	// heard too, so it asks the key's lead node first (leadHint).
	lead leadHint
	// losses: lead-first attempts after a wake-up refused so far (races lost, for
	// agePause).
	losses int

	tries, refused int // attempts made, and their fencing refusals, for Options.Observer
	// settling: how many attempts in a row, since the wake-up at wokeAt that the
	// release of settleGone made, met a node where that release had not landed yet
	// (QuorumError.goneHere; a release's announcement can come before all its deletes);
	// the next attempt comes soon (pacing.settle), within NodeTimeout of the wake-up.
	settling   int
	settleGone string
	wokeAt     time.Time
	// turn: the latest attempt met another Client's turn on the key's line node: the
	// next one comes when that turn is over, lead-first (pacing.turn).
	turn bool
	// placed: the lease of the place in the key's line that the latest attempt took or
	// renewed, if it was refused (0: none); a longer wait renews it first (renewLine).
	placed time.Duration
	// everPlaced: an attempt was refused with placed set (Lock.placed).
	everPlaced bool
	// delay: the latest wait the pacing chose, which the line entry's lease outlasts
	// (lineLeaseFor).
	delay time.Duration

	// free: the attempt being made follows checks alone (keyQueue.lastReal), so that it
	// counts neither toward Options.MaxAttempts nor for the retry delay; checks counts
	// those attempts, at most one per node per Acquire (checked).
	free   bool
	checks int
}

// checked decides whether w's next attempt is free: w made one before, what makes it
// attempt now are checks alone (onlyChecks: a node confirming the key's subscription;
// such a wake-up guards against a notice missed before it, and a waiter that
// subscribes gets one at the majority and one at the last node, so that with
// MaxAttempts 4 it used to give up after one retry delay instead of three), and w has
// made fewer such attempts than there are nodes (a node whose connection flaps
// confirms again at each reconnection).
func (w *waiter) checked(onlyChecks bool) {
	w.free = w.tries > 0 && w.checks < len(w.c.nodes) && onlyChecks
	if w.free {
		w.checks++
	}
}

// observed returns what Acquire's event says of w's work, for an Acquire that began
// at start.
func (w *waiter) observed(start time.Time) acquireObs {
	return acquireObs{key: w.key, ttl: w.ttl, start: start, attempts: w.tries, refused: w.refused}
}

// newWaiter returns the waiter of one Acquire, before its first attempt.
func (c *Client) newWaiter(ctx context.Context, key string, ttl time.Duration) *waiter {
	return &waiter{c: c, ctx: ctx, key: key, ttl: ttl, attempt: 1}
}

// queue waits for w's turn in its key's queue, which w has joined (w.t): the caller
// joined and deferred w.t.leave before, so that w leaves on every exit, a panic too.
// A non-nil error is Acquire's.
func (w *waiter) queue() error {
	if err := w.t.wait(w.ctx, w.c.closing); err != nil {
		if errors.Is(err, ErrClosed) {
			return closedError(w.key)
		}
		return w.stopped()
	}
	if w.last != nil && w.last.Refused > 0 {
		w.t.subscribe() // held elsewhere: hear when it is released
	}
	return nil
}

// pass is one turn of the head's loop: an attempt, unless the head must wait first or
// a lock of this Client holds the key, then a wait for a wake-up, a handoff or the
// pacing delay. Nil lock and error mean: go round again.
func (w *waiter) pass() (*Lock, error) {
	c, t := w.c, w.t
	wake, wakes := t.woken()
	since := w.seen
	if w.waitFirst && wakes != w.seen {
		// Released while the attempt before queueing was out: attempt now, after the
		// pause any woken head takes.
		w.waitFirst, w.quickUsed = false, false
		w.afterWake()
	}
	w.seen = wakes
	now := c.opts.Clock.Now()
	held := t.heldHere(now, w.owner()) // a lock of this Client holds the key until then
	switch {
	case w.waitFirst:
	case held.IsZero():
		w.checked(w.t.onlyChecks(since))
		w.free = w.free || w.settling > 0 // a release still landing is no contention
		if lock, err := w.try(); lock != nil || err != nil {
			return lock, err
		}
	default:
		// No attempt: this Client's own lock holds the key (and the wake-up that asked
		// for a lead-first attempt is over).
		w.quick, w.lead = false, leadHint{}
	}
	w.waitFirst = false
	p := pacing{failed: w.attempt - 1, quick: w.quick, took: w.took, held: held}
	if w.turn {
		p.turn = lineTurn(c.opts.NodeTimeout)
		w.lead = leadHint{first: true} // one call to the line node, not every node's
	}
	if w.settling > 0 {
		p.settle = max(w.took, settleFloor) << min(w.settling-1, settleDoublings)
		w.lead = leadHint{gone: w.settleGone}
	}
	w.delay = p.delay(now, c.opts.RetryDelay, rand.N[time.Duration])
	t.paced(w.delay)
	if lease := lineLeaseFor(w.delay); w.placed > 0 && lease > w.placed {
		// The place the latest attempt took or renewed would lapse during this wait.
		w.placed = lease
		c.renewLine(w.key, lease)
	}
	return w.sleep(wake, w.delay)
}

// try makes one attempt. Nil lock and error mean that it failed and Acquire goes on:
// w has recorded it for the pacing.
func (w *waiter) try() (*Lock, error) {
	lead := w.lead
	w.lead = leadHint{}
	// A plain Acquire's attempt joins the key's line if refused there: its first
	// refusal is when it came. (A grant there writes nothing for the line.)
	if o := &w.c.opts; !o.Fencing && !o.Fair && w.owner() == "" {
		lead.line, lead.lease = w.c.queues.lineID, w.c.queues.leaseFor(w.key, w.delay)
	}

	lock, qe, err := w.c.try(w.ctx, w.key, w.ttl, lead)
	if lock != nil {
		lock.placed = w.everPlaced
		w.c.queues.won(w.key, w.losses)
	}
	if lock != nil || err != nil {
		if lock != nil || !errors.Is(err, ErrClosed) { // closed: no attempt counts, as in TryAcquire
			w.tries++
		}
		return lock, err
	}
	w.tries++
	w.refused += qe.fenceRefusals()
	w.took = qe.quorum // a round trip to a majority, not the wait for silent nodes
	if err := w.verdict(qe); err != nil {
		return nil, err
	}
	w.last = qe
	w.placed = 0
	if lead.line != "" && qe.Refused > 0 {
		w.placed = lead.lease // refused, maybe by the line node: it took or renewed a place
		w.everPlaced = true
	}
	if !w.free && !qe.turn { // as in verdict
		w.attempt++
	}
	if qe.Refused > 0 && lead.first {
		w.losses++ // a race after a wake-up lost (agePause)
	}
	if qe.Refused > 0 && w.t != nil {
		w.t.subscribe() // held elsewhere: hear when it is released
	}
	w.turn = qe.turn
	if qe.goneHere && lead.gone != "" && w.c.opts.Clock.Now().Sub(w.wokeAt) < w.c.opts.NodeTimeout {
		w.settling, w.settleGone = w.settling+1, lead.gone
	} else {
		w.settling = 0
	}
	w.quick = !w.quickUsed && lostRace(qe, w.took)
	w.quickUsed = w.quickUsed || w.quick
	return nil, nil
}

// sleep waits for a handoff, a wake-up, the delay, the end of ctx or Close. Nil lock
// and error mean: attempt again.
func (w *waiter) sleep(wake <-chan struct{}, delay time.Duration) (*Lock, error) {
	c, t := w.c, w.t
	var o *offer // a Release of this Client may hand the lock off directly
	var handed <-chan *Lock
	if !c.opts.Fencing && w.owner() == "" { // a handoff gives a lock without owner
		o = t.offer(w.ttl)
		handed = o.got
	}
	var lock *Lock
	stop := false
	select {
	case lock = <-handed:
		o = nil // claimed and answered
	case <-w.ctx.Done():
		stop = true
	case <-c.closing:
		stop = true
	case <-wake:
		w.quickUsed = false
		w.afterWake()
	case <-c.opts.Clock.After(delay):
	}
	if o != nil && !t.withdraw(o) {
		lock = <-o.got // a Release is handing the lock off: wait for its outcome
	}
	if lock != nil {
		if w.ctx.Err() == nil {
			return lock, nil
		}
		_ = lock.Release(context.WithoutCancel(w.ctx)) // handed off as ctx ended
	}
	if !stop && w.ctx.Err() == nil {
		return nil, nil
	}
	return nil, w.stopped()
}

// afterWake prepares the attempt that follows a wake-up: several Clients' heads may
// have heard the same release. If the attempt can go lead-first (a plain acquire, and
// the key has a lead node), it asks the lead first and goes without the jitter (only
// the lead's winner asks the others); otherwise the head first waits a random part of
// its last attempt's duration, so that one of them can go first. A courtesy
// (wakePause) is waited out either way.
func (w *waiter) afterWake() {
	w.wokeAt, w.settling = w.c.opts.Clock.Now(), 0
	if w.canLead() {
		d, gone, named := w.t.pauseLed(w.losses, w.took)
		// Named the line's head by the release: the line node keeps the key for it
		// (the turn), so it asks every node at once, without a pause.
		w.lead = leadHint{first: !named, gone: gone}
		w.c.pause(w.ctx, d)
		return
	}
	w.c.pause(w.ctx, w.t.pause(w.took))
}

// canLead reports whether w's next attempt can go lead-first: the step is a plain
// acquire (no owner, Fencing or Fair: roundRequest.stepRequest drops the hint for the
// others) and the key has a usable lead (Client.lead).
func (w *waiter) canLead() bool {
	o := &w.c.opts
	return !o.Fencing && !o.Fair && w.owner() == "" && w.c.lead(w.key) >= 0
}

// verdict classifies a failed attempt: nil means Acquire retries; otherwise the error
// is Acquire's. It is the one place, with stopped, that decides how Acquire fails.
func (w *waiter) verdict(qe *QuorumError) error {
	if qe.ctxErr != nil && qe.Refused == 0 && w.last != nil && w.last.kind == ErrUnavailable {
		// Cut short by ctx without a sign of contention: the last complete attempt
		// says more (too many nodes failing) than "not acquired".
		w.last.ctxErr = qe.ctxErr
		return w.last
	}
	// An attempt refused by another Client's turn (QuorumError.turn) met a free key
	// that the line node keeps for a moment: no contention, and it does not count
	// toward MaxAttempts (a waiter whose NodeTimeout is shorter than the releaser's
	// comes back more than once within one turn).
	counts := !w.free && !qe.turn
	if maxAttempts := w.c.opts.MaxAttempts; qe.ctxErr != nil || (maxAttempts > 0 && w.attempt >= maxAttempts && counts) || qe.hopeless() {
		return qe
	}
	return nil
}

// stopped returns Acquire's error once ctx ended or the Client closed while no attempt
// was out.
func (w *waiter) stopped() error {
	if err := w.ctx.Err(); err != nil {
		// The last attempt's class stays: a caller whose deadline passed while too
		// many nodes were down learns that, not just "not acquired".
		if w.last == nil {
			w.last = w.c.quorumError("acquire", w.key, newTally(len(w.c.nodes)), nil, ErrNotAcquired, nil)
		}
		w.last.ctxErr = err
		return w.last
	}
	if w.last == nil {
		return closedError(w.key)
	}
	return fmt.Errorf("redlock: acquire %q: %w (last attempt: %v)", w.key, ErrClosed, w.last)
}

// closedError is Acquire's error when the Client is closed.
func closedError(key string) error {
	return fmt.Errorf("redlock: acquire %q: %w", key, ErrClosed)
}
