package redlock

import (
	"context"
	"time"
)

// ticket is one waiter's place in its key's queue.
type ticket struct {
	q    *queues
	key  string
	kq   *keyQueue
	turn chan struct{}
}

// keyQueue is the state of one key that has waiters in this Client. It exists while
// its queue is not empty, and for linger after that if it is subscribed.
type keyQueue struct {
	idle  time.Time       // when the queue last became empty; zero while in use
	queue []chan struct{} // turns in arrival order; queue[0]'s is closed (its turn)
	wake  chan struct{}   // closed and replaced when the lock may have become free
	wakes uint64          // how many times wake was closed
	// lastReal is the latest wake-up (of wakes) that was not a check: a wake-up made by
	// a node's confirmation of the key's subscription (listening), which only guards
	// against a notice missed before it. An attempt that follows checks alone does not
	// count toward Options.MaxAttempts (onlyChecks).
	lastReal   uint64
	subscribed bool
	notices    map[string]noticed // released token → the nodes that announced it so far
	noticeSeq  uint64             // notices' tokens heard so far (noticed.seq)
	remote     bool               // the latest wake-up came from the nodes, not this Client
	gone       string             // the token whose release made the latest wake-up, if known
	released   string             // the token of this Client's latest release of the key (queues.released)
	paceDelay  time.Duration      // the latest wait a waiter of this Client's pacing chose for the key (lineLeaseFor)
	winLosses  float64            // races lost by this Client's recent winners, averaged (agePause)
	offer      *offer             // the waiting head's standing request for a handoff
	handoffs   int                // handoffs in a row since the last plain release
	courtesy   time.Duration      // see released
	named      bool               // the latest announcement named this Client the line's head (line.go)
	lineToken  string             // the release whose announcement named another Client (lineWait); "" if none
	lineDue    time.Time          // when lineWait's timer wakes the waiters
	lineTimer  *time.Timer        // lineWait's timer; nil before the first
	listening  map[int]bool       // the nodes that confirmed the key's subscription (not with Options.Fair: queues.fairListening)
	// fair holds, with Options.Fair, the ids of this Client's fair waiters for the key,
	// each with its latest naming: the waiter attempts when that changes (headNamed).
	fair map[string]naming
	// handed holds, for each fair waiter of fair, the nodes that handed it the key
	// (fair_queue.lua, fairHand) by token, each with the TTL it set (handedBy).
	handed map[string]map[string]map[int]time.Duration
}

// handedPX returns the shortest TTL with which the nodes handed the key to the fair
// waiter id with token, once at least quorum nodes did, and 0 before that.
func (t *ticket) handedPX(id, token string, quorum int) time.Duration {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	nodes := t.kq.handed[id][token]
	if len(nodes) < quorum {
		return 0
	}
	var px time.Duration
	for _, d := range nodes {
		if px == 0 || d < px {
			px = d
		}
	}
	return px
}

// forgetHanded drops the hand notices counted for the fair waiter id (it left).
func (t *ticket) forgetHanded(id string) {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	delete(t.kq.handed, id)
}

// naming is when a fair waiter was last named the head of a free key, as a wake-up
// (keyQueue.wakes; 0: not yet): by a majority of nodes (real) or by either that or a
// check (at: nameAll, after a node confirmed the subscription).
type naming struct{ at, real uint64 }

// busy reports whether this Client has waiters for key.
func (q *queues) busy(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	kq := q.keys[key]
	return kq != nil && len(kq.queue) > 0
}

// join puts a blocking Acquire for key at the back of its queue.
func (q *queues) join(key string) *ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.keys == nil {
		q.keys = make(map[string]*keyQueue)
	}
	kq := q.keys[key]
	if kq == nil {
		kq = &keyQueue{wake: make(chan struct{})}
		q.keys[key] = kq
	}
	kq.idle = time.Time{}
	t := &ticket{q: q, key: key, kq: kq, turn: make(chan struct{})}
	if len(kq.queue) == 0 {
		close(t.turn)
	}
	kq.queue = append(kq.queue, t.turn)
	return t
}

// wait blocks until it is t's turn to run attempts, ctx ends or the Client closes.
func (t *ticket) wait(ctx context.Context, closing <-chan struct{}) error {
	select {
	case <-t.turn:
		return nil
	default:
	}
	select {
	case <-t.turn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closing:
		return ErrClosed
	}
}

// leave takes t out of its queue, handing the turn to the next waiter if t had it. The
// last one out drops the key's state, or marks it idle if it is subscribed.
func (t *ticket) leave() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	kq := t.kq
	for i, turn := range kq.queue {
		if turn == t.turn {
			kq.queue = append(kq.queue[:i], kq.queue[i+1:]...)
			if i == 0 && len(kq.queue) > 0 {
				close(kq.queue[0])
			}
			break
		}
	}
	if len(kq.queue) > 0 {
		return
	}
	if kq.subscribed {
		kq.idle = time.Now()
		q.schedule(q.lingering())
	} else {
		q.stopLine(kq)
		delete(q.keys, t.key)
	}
}

// woken returns the channel that is closed at the next sign that the lock may be free,
// and how many such signs came before. Take it before an attempt, so that a release
// during the attempt is not missed.
func (t *ticket) woken() (<-chan struct{}, uint64) {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.kq.wake, t.kq.wakes
}

// wakes returns how many signs that the lock may be free the key's state has seen (0
// when it has none). Acquire reads it before an attempt made outside the queue: a sign
// that comes during that attempt, or before the caller has queued, is then not lost.
func (q *queues) wakes(key string) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if kq := q.keys[key]; kq != nil {
		return kq.wakes
	}
	return 0
}

// joinFair registers the fair waiter id of this Client for the key's head notices.
func (t *ticket) joinFair(id string) {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.kq.fair == nil {
		t.kq.fair = make(map[string]naming)
	}
	t.kq.fair[id] = naming{}
	if q.fairKeys == nil {
		q.fairKeys = make(map[string]string)
	}
	q.fairKeys[id] = t.key
}

// leaveFair takes the fair waiter id out of the key's head notices.
func (t *ticket) leaveFair(id string) {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(t.kq.fair, id)
	delete(t.kq.handed, id)
	delete(q.fairKeys, id)
	if len(q.fairKeys) == 0 {
		q.fairKeys = nil // let go of the emptied map's memory
	}
}

// headNamed returns the channel that is closed at the key's next wake-up, and the
// wake-up at which the nodes last named the fair waiter id the head of a free key (see
// keyQueue.fair). Take it before an attempt, so that a notice during the attempt is not
// missed.
func (t *ticket) headNamed(id string) (<-chan struct{}, uint64) {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.kq.wake, t.kq.fair[id].at
}

// namedByChecks reports whether the fair waiter id was named since the naming seen
// (headNamed) by checks alone.
func (t *ticket) namedByChecks(id string, seen uint64) bool {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	n := t.kq.fair[id]
	return n.at > seen && n.real <= seen
}

// nameHead records that a majority of nodes named the fair waiter id the head of a
// free key, and wakes it. An id that is not this Client's waiter for the key any more
// (it left, or came back from stepping aside under a new id) wakes nobody.
func (kq *keyQueue) nameHead(id string) {
	if _, ok := kq.fair[id]; !ok {
		return
	}
	kq.wakeUp(true)
	kq.fair[id] = naming{at: kq.wakes, real: kq.wakes}
}

// nameAll makes every fair waiter of the key attempt at the wake-up just made, a
// check: once the key's channel is subscribed on a majority, a notice sent before is
// not heard again.
func (kq *keyQueue) nameAll() {
	for id, n := range kq.fair {
		n.at = kq.wakes
		kq.fair[id] = n
	}
}

// wakeUp wakes the key's waiters: the lock may have become free, remote telling
// whether the nodes said so (not this Client).
func (kq *keyQueue) wakeUp(remote bool) {
	kq.check(remote)
	kq.lastReal = kq.wakes
}

// check wakes the key's waiters as wakeUp does, as a check only (see lastReal).
func (kq *keyQueue) check(remote bool) {
	kq.remote = remote
	kq.wakes++
	close(kq.wake)
	kq.wake = make(chan struct{})
}

// onlyChecks reports whether the key's waiters were woken since the wake-up count
// since, by checks only (keyQueue.lastReal).
func (t *ticket) onlyChecks(since uint64) bool {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.kq.wakes > since && t.kq.lastReal <= since
}

// noticed is the count of one released token's announcements.
type noticed struct {
	nodes   int         // nodes that announced it
	seq     uint64      // when it was first heard (keyQueue.noticeSeq): the lowest is the oldest
	partial *time.Timer // a fair notice's partialNotice timer, stopped at the majority
}

// heard counts one node's announcement of token, of n nodes in all, and reports whether
// it is the one that makes a majority. The count is kept until every node announced
// it (a later one must not start a new count). At most maxNotices tokens are kept;
// making room forgets a token that already reached its majority, else the oldest
// (most likely a minority's clean-up): never the token just being counted, which a
// random choice once dropped on a hot key, so that its waiters missed that release.
func (kq *keyQueue) heard(token string, n int) bool {
	c, ok := kq.notices[token]
	if !ok {
		if kq.notices == nil {
			kq.notices = make(map[string]noticed)
		}
		if len(kq.notices) >= maxNotices {
			kq.forgetNotice(n/2 + 1)
		}
		kq.noticeSeq++
		c.seq = kq.noticeSeq
	}
	c.nodes++
	if c.nodes >= n {
		delete(kq.notices, token)
	} else {
		kq.notices[token] = c
	}
	return c.nodes == n/2+1
}

// forgetNotice drops one token from notices: one that reached quorum nodes, else the
// oldest.
func (kq *keyQueue) forgetNotice(quorum int) {
	oldest, first := "", true
	var seq uint64
	for token, c := range kq.notices {
		if c.nodes >= quorum {
			delete(kq.notices, token)
			return
		}
		if first || c.seq < seq {
			oldest, seq, first = token, c.seq, false
		}
	}
	delete(kq.notices, oldest)
}
