package redlock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Fast handoff: waiters do not depend on polling alone.
//
//   - Inside one Client, blocking Acquires (waiters) for the same key queue up in arrival
//     order and only the head of the queue runs attempts (an Acquire with nobody of
//     its Client waiting tries once before it queues). While a lock of this Client
//     holds the key within its validity the head sends no doomed attempts; it leaves a
//     standing offer, and a Release of that lock hands it off in one step
//     (Lock.handoff), at most maxHandoffs times in a row. A goroutine that releases and
//     immediately calls Acquire again joins the back of the queue, so it cannot starve
//     the others.
//   - Across Clients, a release is announced on the key's channel (releaseChannel)
//     once: by the key's line node as it deletes the key, naming the head of the
//     key's line, whose Client attempts at once while the others wait (line.go); or
//     by the releasing Client once a majority deleted it (Client.announce). A Client
//     subscribes, one connection per node shared by all its keys, to the channels of
//     keys its waiters found taken.
//   - Polling with Options.RetryDelay stays as the fallback: a lock that expires is
//     never announced, and notices are lost while a node is down or reconnecting.
//
// The parts, one file each: handoff.go holds the state they share (queues, under one
// mutex) and the direct handoff inside one Client (offers, Lock.handoff, the record of
// the locks this Client holds); handoff_queue.go the wait queue (turns and wake-ups, no
// Redis); handoff_announce.go the release announcer (subscriptions, notices, the timer
// that drops idle keys); channels.go the announcements; line.go the line across
// Clients; handoff_pacing.go every constant and decision of fairness and timing.

// queues is a Client's per-key state for waiters and its subscriptions.
type queues struct {
	c     *Client
	mu    sync.Mutex // taken after Lock.op, before Lock.mu (see the lock order above Client)
	keys  map[string]*keyQueue
	chans map[string]string // subscribed channel → key
	// fairID, with Options.Fair, names this Client in its waiters' queue entries
	// ("<fairID>:<waiter>") and in its channel (fairChannel): the nodes tell the head
	// of a queue that the key is free on the channel of the head's Client only.
	fairID string
	// lineID names this Client in the lines of plain keys (line.go).
	lineID string
	// fairKeys maps each fair waiter id of this Client to its key, for the notices on
	// the Client's channel; fairListening holds the nodes that confirmed that channel.
	fairKeys      map[string]string
	fairListening map[int]bool
	// fairSettled: a fair waiter waited out settle's cap (a node had not confirmed the
	// channel); the waiters after it do not wait for that node again, and every
	// confirmation from then on rechecks the Client's fair keys (listening).
	fairSettled bool

	// held lists the locks this Client holds per key, until released: one, or the
	// holds of one owner (WithOwner).
	held       map[string][]*Lock
	heldPruned int // size of held after its last pruning

	// yields holds, per key this Client released while other Clients listened, until
	// when a new Acquire of this Client for the key lets them go first (see yielding).
	yields map[string]yieldRecord

	start     sync.Once
	listeners []*listener // one per node, made at the first subscription
	wg        sync.WaitGroup
	closed    bool

	// sweeper drops lingering keys (sweepLater); armed while a key lingers, else nil.
	sweeper *time.Timer
	// partials are the armed timers of partialNotice, which close stops.
	partials map[*time.Timer]struct{}
	linger   time.Duration // how long an idle key stays subscribed; 0 means linger
}

// offer is a waiting head's standing request: a Release of this Client's lock on the
// key may hand the lock off instead of deleting it (see Lock.handoff).
type offer struct {
	ttl time.Duration
	got chan *Lock // buffered: the lock handed off, or nil if the handoff failed
}

// offer registers a standing request for a handoff with ttl; withdraw it after
// waiting.
func (t *ticket) offer(ttl time.Duration) *offer {
	o := &offer{ttl: ttl, got: make(chan *Lock, 1)}
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	t.kq.offer = o
	return o
}

// withdraw takes o back; it returns false if a Release has claimed it already, and
// then a result will arrive on o.got.
func (t *ticket) withdraw(o *offer) bool {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	if t.kq.offer != o {
		return false
	}
	t.kq.offer = nil
	return true
}

// claim takes the standing handoff request for key, if there is one and the
// handoffs in a row have not reached maxHandoffs. A nil result means: release
// plainly (which also resets the count); capped says that a waiter here would have
// taken the lock but for the limit.
func (q *queues) claim(key string) (o *offer, capped bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	kq := q.keys[key]
	if kq == nil {
		return nil, false
	}
	o = kq.offer
	if o == nil || kq.handoffs >= maxHandoffs {
		kq.handoffs = 0
		return nil, o != nil
	}
	kq.offer = nil
	kq.handoffs++
	return o, false
}

// handoff releases l by handing it straight to the waiting Acquire of this Client that
// made offer o: handoff.lua replaces l's token with a new one on every node, so one
// step does the work of a release and an acquire. The new lock is granted exactly as
// an acquired one: with a majority, and validity measured from just before this step.
// It reports whether that happened (the waiter then has the lock). If not, the calls of
// the step not sent yet are dropped, and token (when one was made) is the new token,
// which the caller's plain release must delete wherever it landed, before it tells the
// waiter (o.got <- nil). The caller holds l.op and has checked that l is valid.
func (l *Lock) handoff(ctx context.Context, o *offer) (handed bool, token string) {
	c := l.c
	token, err := newToken()
	if err != nil {
		return false, ""
	}
	start := c.opts.Clock.Now()
	r := c.start(ctx, stepRequest{step: stepHandoff, keys: []string{l.key},
		args: []any{l.token, token, o.ttl.Milliseconds()}, after: l.lastRound, mustLand: true})
	l.lastRound = r // the plain release after a failed handoff waits behind these calls
	t, _, ctxErr := c.gather(ctx, r, true)
	now := c.opts.Clock.Now()
	// After Shutdown began nothing is granted (as in try): the waiter could not even
	// release the lock. The handoff then counts as failed, and the caller's release
	// deletes the new token with ours.
	if v := validity(o.ttl, now.Sub(start), c.opts.DriftFactor); ctxErr == nil && t.won() && v > 0 && !c.isClosed() {
		next := &Lock{c: c, key: l.key, token: token, ttl: o.ttl, until: now.Add(v), lastRound: r}
		c.queues.granted(next)
		c.queues.released(l, 0, 0, 0, now)
		// Where the handoff call failed, our token may still hold the key: release
		// it there once that call has returned, so the node is not blocked until our
		// TTL ends. Nobody waits for it. It is queued before the waiter gets the
		// lock, so it reaches each node before any call of the new lock: a release of
		// the new lock that came first would find our token and leave it, and a late
		// run of the failed handoff call would then turn our token into the new
		// lock's key, which nothing would delete (TestHandOverCleanUpGoesFirst).
		c.start(context.WithoutCancel(ctx), stepRequest{step: stepRelease, keys: []string{l.key},
			args: []any{l.token}, after: r, mustLand: true, need: r.failed})
		handOver(o, next)
		return true, token
	}
	// Unsent calls set nothing; the others are undone by the caller's release.
	r.abandoned.Store(true)
	return false, token
}

// handOver gives the waiter that made offer o its lock next, then runs afterHandOver
// if a test set it: whatever Release does after handOver comes after the hook, so a
// test can hold it there.
func handOver(o *offer, next *Lock) {
	o.got <- next
	if f := afterHandOver.Load(); f != nil {
		(*f)()
	}
}

// afterHandOver, when set (by tests only), runs in Release right after a handoff gave
// the waiter its lock (handOver).
var afterHandOver atomic.Pointer[func()]

// granted records the lock this Client now holds on its key, so that waiters here do
// not attempt while it is valid. Locks dropped without a Release are forgotten once
// their validity is over (looked for whenever the record has doubled).
func (q *queues) granted(l *Lock) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held == nil {
		q.held = make(map[string][]*Lock)
	}
	now := time.Now()
	q.held[l.key] = append(valid(q.held[l.key], now), l)
	if len(q.held) > 2*q.heldPruned {
		// Into a new map: the old one would keep the memory of its largest size.
		live := make(map[string][]*Lock, len(q.held))
		for key, hs := range q.held {
			if hs = valid(hs, now); len(hs) > 0 {
				live[key] = hs
			}
		}
		q.held = live
		q.heldPruned = max(len(q.held), heldPruneFloor)
	}
}

// valid returns the locks of ls still valid at now, in ls's array.
func valid(ls []*Lock, now time.Time) []*Lock {
	return slices.DeleteFunc(ls, func(l *Lock) bool { return !now.Before(l.validUntil()) })
}

// heldHere returns the validity end of the lock this Client holds on the key, if one is
// still valid at now (an attempt would then certainly fail), and zero otherwise. A lock
// of owner (not "") does not count: owner's attempt would succeed.
func (t *ticket) heldHere(now time.Time, owner string) time.Time {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	hs := valid(t.q.held[t.key], now)
	if len(hs) == 0 {
		delete(t.q.held, t.key)
		return time.Time{}
	}
	t.q.held[t.key] = hs
	var until time.Time
	for _, l := range hs {
		if owner != "" && l.owner == owner {
			return time.Time{}
		}
		if u := l.validUntil(); u.After(until) {
			until = u
		}
	}
	return until
}

// released wakes the key's waiters after this Client released l. A courtesy above
// zero makes the head wait that long first (see pause). heard is the largest reply of
// release.lua (1 + the subscribers to the key's release channel on one node); when
// other Clients listen, a new Acquire of this Client for the key in the next yield
// lets them go first (see yielding).
func (q *queues) released(l *Lock, courtesy time.Duration, heard int64, yield time.Duration, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if hs := slices.DeleteFunc(q.held[l.key], func(h *Lock) bool { return h == l }); len(hs) > 0 {
		q.held[l.key] = hs
	} else {
		delete(q.held, l.key)
	}
	kq := q.keys[l.key]
	// A fair waiter attempts when the nodes name it the head (notice): this Client
	// does not know which of the waiters that is.
	if kq != nil && !q.c.opts.Fair {
		kq.courtesy, kq.gone, kq.released = courtesy, l.token, l.token
		kq.wakeUp(courtesy > 0)
	}
	others := heard - 1
	if kq != nil && kq.subscribed && !q.c.opts.Fair {
		others-- // this Client's own subscription (a fair release is heard by the head's Client only)
	}
	if others <= 0 || courtesy > 0 || yield <= 0 {
		return
	}
	if q.yields == nil {
		q.yields = make(map[string]yieldRecord)
	}
	if len(q.yields) >= maxYields {
		for key, y := range q.yields {
			if !now.Before(y.until) {
				delete(q.yields, key)
			}
		}
	}
	if len(q.yields) < maxYields {
		q.yields[l.key] = yieldRecord{until: now.Add(yield), gone: l.token}
	}
}

// othersQueued reports, for a fair Acquire (Options.Fair) about to make its first
// attempt on key, that other waiters are most likely queued on the nodes, so that a
// TryAcquire-mode attempt could only fail: this Client has waiters for key, or it
// released key a moment ago while other Clients listened (within the record's yield,
// see yielding). It consumes the record: a fair Acquire does not yield, the queue
// orders the waiters.
func (q *queues) othersQueued(key string, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if kq := q.keys[key]; kq != nil && len(kq.queue) > 0 {
		return true
	}
	y, ok := q.yields[key]
	delete(q.yields, key)
	return ok && now.Before(y.until)
}

// yielding returns how long an Acquire for key should wait before its first attempt:
// this Client released the key a moment ago while other Clients waited for it, and
// they were woken at that moment. Without stepping back, the releaser's immediate
// attempt would often beat them all and the handoff would not happen. It is asked
// once: the record is consumed. gone is the released token (for leadHint).
func (q *queues) yielding(key string, now time.Time) (d time.Duration, gone string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	y, ok := q.yields[key]
	if !ok {
		return 0, ""
	}
	delete(q.yields, key)
	return y.until.Sub(now), y.gone
}

// yieldRecord is queues.yields' entry for a key: until when a new Acquire yields, and
// the token whose release it yields to.
type yieldRecord struct {
	until time.Time
	gone  string
}

// mayListen reports whether any Client may listen for key's releases, given heard,
// the largest reply of release.lua (1 + the subscribers to the key's channel on one
// node). This Client's own subscription is not discounted: what it knows of it may be
// stale (a dropped connection that cannot reconnect still counts as confirmed), and an
// announcement too many costs one PUBLISH, which this Client ignores, while one too
// few leaves a waiter to its RetryDelay (forever without polling:
// TestOwnerReleaseAnnouncedDespiteStaleOwnSubscriptions).
func (q *queues) mayListen(key string, heard int64) bool {
	return heard > 1
}
