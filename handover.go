package redlock

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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
//   - Across Clients, release.lua publishes the released token on the key's channel
//     (releaseChannel) on every node that deleted the key. A Client subscribes, one
//     connection per node shared by all its keys, to the channels of keys its waiters
//     found taken, and wakes the head when a majority of nodes reported the same token
//     released: the key is then free on a majority and the next attempt can win.
//   - Polling with Options.RetryDelay stays as the fallback: a lock that expires is
//     never announced, and notices are lost while a node is down or reconnecting.

// releaseChannel is the pub/sub channel on which release.lua announces that key was
// released; the message is the released (now dead) token.
func releaseChannel(key string) string { return "redlock:released:" + key } // as in release.lua

// queues is a Client's per-key state for waiters and its subscriptions.
type queues struct {
	c     *Client
	mu    sync.Mutex // taken after Lock.op, before Lock.mu (see the lock order above Client)
	keys  map[string]*keyQueue
	chans map[string]string // subscribed channel → key

	held       map[string]*Lock // the lock this Client holds per key, until released
	heldPruned int              // size of held after its last pruning

	// yields holds, per key this Client released while other Clients listened, until
	// when a new Acquire of this Client for the key lets them go first (see yielding).
	yields map[string]time.Time

	start     sync.Once
	listeners []*listener // one per node, made at the first subscription
	wg        sync.WaitGroup
	closed    bool

	// sweeper drops lingering keys (sweepLater); armed while a key lingers, else nil.
	sweeper *time.Timer
	linger  time.Duration // how long an idle key stays subscribed; 0 means linger
}

// A key whose queue emptied keeps its subscription for linger, so a client that takes
// the same contended lock again and again is not subscribing and unsubscribing all the
// time (and missing the announcements in between). A timer drops it after that, also
// when no other Acquire comes: the subscription is gone within linger + linger/4.
const linger = 5 * time.Second

// keyQueue is the state of one key that has waiters in this Client. It exists while
// its queue is not empty, and for linger after that if it is subscribed.
type keyQueue struct {
	idle       time.Time       // when the queue last became empty; zero while in use
	queue      []chan struct{} // turns in arrival order; queue[0]'s is closed (its turn)
	wake       chan struct{}   // closed and replaced when the lock may have become free
	wakes      uint64          // how many times wake was closed
	subscribed bool
	notices    map[string]int // released token → nodes that announced it
	remote     bool           // the latest wake-up came from the nodes, not this Client
	offer      *offer         // the waiting head's standing request for a handoff
	handoffs   int            // handoffs in a row since the last plain release
	courtesy   time.Duration  // see released
	listeners  int            // nodes subscribed to the key's channel so far
}

// maxHandoffs bounds the handoffs in a row inside one Client: after that many, a
// release deletes the key and announces it, so waiters in other Clients get a chance.
const maxHandoffs = 16

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

// maxNotices bounds a key's pending notices (tokens a minority announced, such as the
// clean-up of a failed attempt); past it they are forgotten.
const maxNotices = 64

// ticket is one waiter's place in its key's queue.
type ticket struct {
	q    *queues
	key  string
	kq   *keyQueue
	turn chan struct{}
}

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
		delete(q.keys, t.key)
	}
}

// lingering returns how long an idle key stays subscribed.
func (q *queues) lingering() time.Duration {
	if q.linger > 0 {
		return q.linger
	}
	return linger
}

// schedule arms the sweeper to run after d, unless it is armed already (then it runs
// sooner: every key that became idle before this one lingers out earlier) or the
// Client is closed. Callers hold q.mu.
func (q *queues) schedule(d time.Duration) {
	if q.sweeper != nil || q.closed {
		return
	}
	q.wg.Add(1) // done by sweepLater, or by close if it stops the timer first
	q.sweeper = time.AfterFunc(d, q.sweepLater)
}

// sweepLater drops the keys that lingered out, and arms the sweeper again while others
// linger: at the end of the earliest one's linger, but at least linger/4 from now, so
// that keys going idle one after another cost a few sweeps per linger, not one each.
func (q *queues) sweepLater() {
	defer q.wg.Done()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweeper = nil
	if q.closed {
		return
	}
	if next, ok := q.sweep(time.Now()); ok {
		q.schedule(max(next, q.lingering()/4))
	}
}

// sweep drops the keys that have been idle for linger, and their subscriptions. It
// returns how long until the next idle key lingers out, and whether there is one.
// Callers hold q.mu.
func (q *queues) sweep(now time.Time) (next time.Duration, lingering bool) {
	d := q.lingering()
	dropped := false
	for key, kq := range q.keys {
		if kq.idle.IsZero() {
			continue
		}
		left := d - now.Sub(kq.idle)
		if left <= 0 {
			delete(q.keys, key)
			delete(q.chans, releaseChannel(key))
			dropped = true
			continue
		}
		if !lingering || left < next {
			next, lingering = left, true
		}
	}
	// A map keeps the memory of its largest size: let go of emptied ones.
	if len(q.keys) == 0 {
		q.keys = nil
	}
	if len(q.chans) == 0 {
		q.chans = nil
	}
	if dropped {
		q.changed()
	}
	return next, lingering
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

// pause returns how long the head should wait after a wake-up before it attempts.
// After an announcement, the heads of every Client waiting for the key woke at the same
// moment; if all tried at once they could split the votes so that none wins, so each
// waits a random part of its last attempt's duration (took) and one goes first. After
// this Client's own release that ended a run of handoffs while other Clients were
// listening, the head steps back for the courtesy time, so they can go first.
func (t *ticket) pause(took time.Duration) time.Duration {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	switch {
	case !t.kq.remote:
		return 0
	case t.kq.courtesy > 0:
		return t.kq.courtesy
	case took > 0:
		return rand.N(took)
	}
	return 0
}

// heldHere returns the validity end of the lock this Client holds on the key, if one is
// still valid at now (an attempt would then certainly fail), and zero otherwise.
func (t *ticket) heldHere(now time.Time) time.Time {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	l := t.q.held[t.key]
	if l == nil {
		return time.Time{}
	}
	if u := l.validUntil(); now.Before(u) {
		return u
	}
	delete(t.q.held, t.key)
	return time.Time{}
}

// subscribe asks every node to announce releases of the key to this Client.
func (t *ticket) subscribe() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.kq.subscribed || q.closed {
		return
	}
	t.kq.subscribed = true
	if q.chans == nil {
		q.chans = make(map[string]string)
	}
	q.chans[releaseChannel(t.key)] = t.key
	q.start.Do(q.listen)
	q.changed()
}

// granted records the lock this Client now holds on its key, so that waiters here do
// not attempt while it is valid. Locks dropped without a Release are forgotten once
// their validity is over (looked for whenever the record has doubled).
func (q *queues) granted(l *Lock) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held == nil {
		q.held = make(map[string]*Lock)
	}
	q.held[l.key] = l
	if len(q.held) > 2*q.heldPruned {
		// Into a new map: the old one would keep the memory of its largest size.
		now := time.Now()
		live := make(map[string]*Lock, len(q.held))
		for key, h := range q.held {
			if now.Before(h.validUntil()) {
				live[key] = h
			}
		}
		q.held = live
		q.heldPruned = max(len(q.held), 64)
	}
}

// released wakes the key's waiters after this Client released l. A courtesy above
// zero makes the head wait that long first (see pause). heard is the largest reply of
// release.lua (1 + the subscribers that heard the announcement on one node); when
// other Clients heard it, a new Acquire of this Client for the key in the next yield
// lets them go first (see yielding).
func (q *queues) released(l *Lock, courtesy time.Duration, heard int64, yield time.Duration, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[l.key] == l {
		delete(q.held, l.key)
	}
	kq := q.keys[l.key]
	if kq != nil {
		kq.courtesy = courtesy
		kq.wakeUp(courtesy > 0)
	}
	others := heard - 1
	if kq != nil && kq.subscribed {
		others-- // this Client's own subscription
	}
	if others <= 0 || courtesy > 0 || yield <= 0 {
		return
	}
	if q.yields == nil {
		q.yields = make(map[string]time.Time)
	}
	if len(q.yields) >= maxYields {
		for key, until := range q.yields {
			if !now.Before(until) {
				delete(q.yields, key)
			}
		}
	}
	if len(q.yields) < maxYields {
		q.yields[l.key] = now.Add(yield)
	}
}

// maxYields bounds the keys remembered for yielding.
const maxYields = 1024

// yielding returns how long an Acquire for key should wait before its first attempt:
// this Client released the key a moment ago while other Clients waited for it, and
// they were woken at that moment. Without stepping back, the releaser's immediate
// attempt would often beat them all and the handoff would not happen. It is asked
// once: the record is consumed.
func (q *queues) yielding(key string, now time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	until, ok := q.yields[key]
	if !ok {
		return 0
	}
	delete(q.yields, key)
	return until.Sub(now)
}

// notice counts one node's announcement that token was released on key, and wakes the
// key's waiters once a majority of nodes announced it.
func (q *queues) notice(channel, token string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	kq := q.keys[q.chans[channel]]
	if kq == nil {
		return
	}
	if kq.notices == nil {
		kq.notices = make(map[string]int)
	}
	if _, ok := kq.notices[token]; !ok && len(kq.notices) >= maxNotices {
		for old := range kq.notices { // forget one (a minority's clean-up, most likely)
			delete(kq.notices, old)
			break
		}
	}
	kq.notices[token]++
	if kq.notices[token] == len(q.c.nodes)/2+1 {
		kq.courtesy = 0
		kq.wakeUp(true)
	}
}

func (kq *keyQueue) wakeUp(remote bool) {
	kq.remote = remote
	kq.wakes++
	close(kq.wake)
	kq.wake = make(chan struct{})
}

// changed tells every listener that the set of channels changed. Callers hold q.mu.
func (q *queues) changed() {
	for _, ls := range q.listeners {
		select {
		case ls.kick <- struct{}{}:
		default: // a kick is already pending
		}
	}
}

// listener keeps one node's subscription in line with the channels the Client wants,
// and forwards the node's release announcements.
type listener struct {
	ps   *redis.PubSub
	kick chan struct{}
	stop chan struct{}
}

// listen starts one listener per node. Called once, with q.mu held.
func (q *queues) listen() {
	for _, n := range q.c.nodes {
		ls := &listener{
			ps:   n.rdb.Subscribe(context.Background()),
			kick: make(chan struct{}, 1),
			stop: make(chan struct{}),
		}
		q.listeners = append(q.listeners, ls)
		msgs := ls.ps.Channel()
		q.wg.Add(2)
		go func() { // deliver announcements
			defer q.wg.Done()
			for m := range msgs {
				q.notice(m.Channel, m.Payload)
			}
		}()
		go func() { // follow the wanted channels
			defer q.wg.Done()
			q.follow(ls)
		}()
	}
}

// follow subscribes ls to the channels the Client wants and unsubscribes it from the
// others, each time it is kicked, until stopped. A node that is down makes these calls
// fail or wait; go-redis keeps the wanted set and subscribes again on reconnection.
func (q *queues) follow(ls *listener) {
	have := make(map[string]bool)
	for {
		select {
		case <-ls.stop:
			return
		case <-ls.kick:
		}
		q.mu.Lock()
		var add, drop []string
		for ch := range q.chans {
			if !have[ch] {
				add = append(add, ch)
			}
		}
		for ch := range have {
			if _, ok := q.chans[ch]; !ok {
				drop = append(drop, ch)
			}
		}
		q.mu.Unlock()
		ctx := context.Background()
		if len(add) > 0 {
			_ = ls.ps.Subscribe(ctx, add...) // go-redis records them even on error
			for _, ch := range add {
				have[ch] = true
			}
			q.listening(add)
		}
		if len(drop) > 0 {
			_ = ls.ps.Unsubscribe(ctx, drop...)
			for _, ch := range drop {
				delete(have, ch)
			}
			if len(have) == 0 {
				have = make(map[string]bool) // let go of the emptied map's memory
			}
		}
	}
}

// listening counts one more node subscribed to each channel. Once a majority is, a
// release announced from then on wakes the head; one announced between the head's last
// attempt and now was missed, so the head is woken to attempt once more.
func (q *queues) listening(chans []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ch := range chans {
		if kq := q.keys[q.chans[ch]]; kq != nil {
			kq.listeners++
			if kq.listeners == len(q.c.nodes)/2+1 {
				kq.courtesy = 0
				kq.wakeUp(true)
			}
		}
	}
}

// close ends the subscriptions and waits for their goroutines.
func (q *queues) close() {
	q.mu.Lock()
	q.closed = true
	if q.sweeper != nil && q.sweeper.Stop() {
		q.wg.Done() // its sweepLater will not run
	}
	q.sweeper = nil
	listeners := q.listeners
	q.mu.Unlock()
	for _, ls := range listeners {
		close(ls.stop)
		q.wg.Add(1)
		go func() { // in parallel: each may wait for a reconnection to a dead node
			defer q.wg.Done()
			_ = ls.ps.Close() // ends its message channel
		}()
	}
	q.wg.Wait()
}
