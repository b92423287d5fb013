package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The wait queue on its own: a zero queues, no Client and no Redis.

// hasTurn reports, without blocking, whether it is t's turn.
func hasTurn(t *ticket) bool {
	select {
	case <-t.turn:
		return true
	default:
		return false
	}
}

func TestQueueTurnsInArrivalOrder(t *testing.T) {
	var q queues
	if q.busy("k") {
		t.Fatal("busy before anyone joined")
	}
	a, b, c := q.join("k"), q.join("k"), q.join("k")
	other := q.join("other")
	if !q.busy("k") || !hasTurn(a) || hasTurn(b) || hasTurn(c) {
		t.Fatalf("after three joins: busy %v, turns %v %v %v; want busy, only the first's turn",
			q.busy("k"), hasTurn(a), hasTurn(b), hasTurn(c))
	}
	if !hasTurn(other) {
		t.Fatal("the head of another key's queue waits for this key's queue")
	}
	if err := a.wait(context.Background(), nil); err != nil {
		t.Fatalf("the head's wait: %v", err)
	}
	a.leave()
	if !hasTurn(b) || hasTurn(c) {
		t.Fatalf("after the head left: turns %v %v, want the second's only", hasTurn(b), hasTurn(c))
	}
	b.leave()
	if !hasTurn(c) {
		t.Fatal("the third waiter did not get its turn")
	}
	c.leave()
	if q.busy("k") {
		t.Fatal("still busy after everyone left")
	}
	if _, ok := q.keys["k"]; ok {
		t.Fatal("an unsubscribed key's state stayed after its queue emptied")
	}
	other.leave()
}

func TestQueueLeavingFromTheMiddleKeepsTheTurn(t *testing.T) {
	var q queues
	a, b, c := q.join("k"), q.join("k"), q.join("k")
	b.leave() // gave up while waiting (ctx ended)
	if !hasTurn(a) || hasTurn(c) {
		t.Fatalf("after the second left: turns %v %v, want the head's only", hasTurn(a), hasTurn(c))
	}
	a.leave()
	if !hasTurn(c) {
		t.Fatal("the turn skipped nobody: the third waiter should have it")
	}
	c.leave()
}

func TestQueueWaitEnds(t *testing.T) {
	var q queues
	head, next := q.join("k"), q.join("k")
	defer head.leave()
	defer next.leave()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := next.wait(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with ctx ended: %v, want context.Canceled", err)
	}
	closing := make(chan struct{})
	close(closing)
	if err := next.wait(context.Background(), closing); !errors.Is(err, ErrClosed) {
		t.Fatalf("wait while the Client closes: %v, want ErrClosed", err)
	}
	// The head's turn wins over an ended ctx and a closing Client.
	if err := head.wait(ctx, closing); err != nil {
		t.Fatalf("the head's wait: %v, want nil", err)
	}
}

func TestQueueWakeUps(t *testing.T) {
	var q queues
	if n := q.wakes("k"); n != 0 {
		t.Fatalf("wakes of a key without state: %d", n)
	}
	tk := q.join("k")
	defer tk.leave()
	wake, n := tk.woken()
	if n != 0 {
		t.Fatalf("wakes before any: %d", n)
	}
	q.mu.Lock()
	tk.kq.wakeUp(true)
	q.mu.Unlock()
	select {
	case <-wake:
	default:
		t.Fatal("the channel taken before the wake-up was not closed")
	}
	next, n := tk.woken()
	if n != 1 || q.wakes("k") != 1 {
		t.Fatalf("wakes after one: %d and %d, want 1", n, q.wakes("k"))
	}
	select {
	case <-next:
		t.Fatal("the channel for the next wake-up is closed already")
	default:
	}
}

func TestQueueHandoffOffers(t *testing.T) {
	var q queues
	if o, capped := q.claim("k"); o != nil || capped {
		t.Fatalf("claim without state: %v %v", o, capped)
	}
	tk := q.join("k")
	defer tk.leave()
	if o, capped := q.claim("k"); o != nil || capped {
		t.Fatalf("claim without an offer: %v %v", o, capped)
	}
	o := tk.offer(time.Second)
	if !tk.withdraw(o) {
		t.Fatal("an unclaimed offer could not be withdrawn")
	}
	if got, _ := q.claim("k"); got != nil {
		t.Fatal("a withdrawn offer was claimed")
	}
	for i := range maxHandoffs {
		o := tk.offer(time.Second)
		got, capped := q.claim("k")
		if got != o || capped {
			t.Fatalf("claim %d: %v %v, want the offer", i+1, got, capped)
		}
		if tk.withdraw(o) {
			t.Fatalf("claim %d: a claimed offer was withdrawn", i+1)
		}
	}
	o = tk.offer(time.Second)
	if got, capped := q.claim("k"); got != nil || !capped {
		t.Fatalf("claim after %d handoffs in a row: %v %v, want none, capped", maxHandoffs, got, capped)
	}
	if got, capped := q.claim("k"); got != o || capped {
		t.Fatalf("claim after the capped release: %v %v, want the offer again", got, capped)
	}
}

func TestQueueIdleSubscribedKeyLingers(t *testing.T) {
	q := queues{c: &Client{}, linger: time.Hour}
	defer q.close()
	tk := q.join("k")
	q.mu.Lock()
	tk.kq.subscribed = true // as subscribe does, without nodes to listen to
	q.mu.Unlock()
	tk.leave()
	q.mu.Lock()
	defer q.mu.Unlock()
	kq := q.keys["k"]
	if kq == nil || kq.idle.IsZero() || q.sweeper == nil {
		t.Fatal("a subscribed key's state did not stay, idle, with the sweeper armed")
	}
	if next, lingering := q.sweep(kq.idle.Add(time.Minute)); !lingering || next != time.Hour-time.Minute {
		t.Fatalf("sweep a minute later: %v %v, want the key lingering 59m more", next, lingering)
	}
	if _, lingering := q.sweep(kq.idle.Add(time.Hour)); lingering || q.keys != nil {
		t.Fatalf("sweep after linger: lingering %v, keys %v; want the key dropped", lingering, q.keys)
	}
}

// TestNoticesKeepTheTokenBeingCounted: on a hot key the notices fill with tokens that
// reached their majority and with minorities' clean-ups; making room for those never
// forgets a release still being counted while older entries can go, so its majority
// still wakes the waiters. The earlier random choice dropped it now and then (in fair
// mode, a whole renewal period lost); 20 rounds make that near certain to show.
func TestNoticesKeepTheTokenBeingCounted(t *testing.T) {
	const n = 5 // nodes; a majority is 3
	for round := range 20 {
		var kq keyQueue
		for i := range maxNotices {
			tok := fmt.Sprint("done", i)
			for range 3 { // reached its majority; two nodes' announcements still to come
				kq.heard(tok, n)
			}
		}
		if kq.heard("T", n) || kq.heard("T", n) {
			t.Fatal("a majority from two announcements")
		}
		for i := range maxNotices - 1 { // clean-ups of failed attempts: one node each
			kq.heard(fmt.Sprint("minority", i), n)
		}
		if !kq.heard("T", n) {
			t.Fatalf("round %d: the third announcement of T did not make its majority", round)
		}
		if len(kq.notices) > maxNotices {
			t.Fatalf("%d notices kept, bound %d", len(kq.notices), maxNotices)
		}
		for range 2 {
			if kq.heard("T", n) {
				t.Fatal("a second wake-up for T")
			}
		}
		if _, kept := kq.notices["T"]; kept {
			t.Fatal("T kept after every node announced it")
		}
	}
	var slow keyQueue // T heard first, then releases that finished: those go first
	slow.heard("T", n)
	slow.heard("T", n)
	for i := range 2 * maxNotices {
		for range 3 {
			slow.heard(fmt.Sprint("done", i), n)
		}
	}
	if !slow.heard("T", n) {
		t.Error("T, the oldest, forgotten though finished releases could go")
	}
	var kq keyQueue // past maxNotices clean-ups, the oldest go first
	for i := range 2 * maxNotices {
		kq.heard(fmt.Sprint("minority", i), n)
	}
	if _, kept := kq.notices["minority0"]; kept || len(kq.notices) != maxNotices {
		t.Errorf("%d kept, the oldest among them: %v", len(kq.notices), kept)
	}
	var one keyQueue
	if !one.heard("x", 1) || len(one.notices) != 0 {
		t.Errorf("one node: no wake-up, or the count kept: %v", one.notices)
	}
}

// TestHeadNoticeWakesTheNamedWaiter: with Options.Fair, a majority's notice that names
// a waiter of this Client wakes the key's waiters, and only the named one sees its
// name change (the others go back to sleep); a notice naming an id that is not a
// waiter here (left, or back under a new id) wakes nobody; the subscription's majority
// names every waiter once.
func TestHeadNoticeWakesTheNamedWaiter(t *testing.T) {
	// A NodeTimeout far beyond the test: a notice from one node names its waiter after
	// NodeTimeout/5 anyway (partialNotice), and with the zero NodeTimeout that timer
	// fired at once, naming a and b from a single node's notice before the assertions
	// below (seen with -count=3000 -cpu 2,4).
	q := &queues{c: &Client{nodes: make([]node, 3), opts: Options{Fair: true, NodeTimeout: time.Hour}}, fairID: "C"}
	a, b := q.join("k"), q.join("k")
	a.joinFair("C/a")
	b.joinFair("C/b")
	wakeA, namedA := a.headNamed("C/a")
	_, namedB := b.headNamed("C/b")
	ch := q.channel("k")
	q.chans = map[string]string{ch: "k"}
	q.notice(0, ch, "T1 C/a")
	q.notice(1, ch, "T1 C/b") // another node names b for the same release: counted apart
	select {
	case <-wakeA:
		t.Fatal("woken before a majority named anyone")
	default:
	}
	q.notice(2, ch, "T1 C/a")
	select {
	case <-wakeA:
	default:
		t.Fatal("a majority named a, and the key's waiters were not woken")
	}
	_, nowA := a.headNamed("C/a")
	wakeB, nowB := b.headNamed("C/b")
	if nowA == namedA || nowB != namedB {
		t.Fatalf("a named %v (was %v), b %v (was %v): only a is to attempt", nowA, namedA, nowB, namedB)
	}
	b.leaveFair("C/b")
	q.notice(0, ch, "T2 C/b")
	q.notice(1, ch, "T2 C/b")
	select {
	case <-wakeB:
		t.Fatal("a notice naming a waiter that left woke the key's waiters")
	default:
	}
	q.mu.Lock()
	q.keys["k"].wakeUp(true)
	q.keys["k"].nameAll()
	q.mu.Unlock()
	if _, again := a.headNamed("C/a"); again == nowA {
		t.Error("the subscription's majority did not name the waiters")
	}
}

// TestLateConfirmationWakesTheWaiters: a node that confirms the key's subscription
// after the majority did may have sent, before that, a notice that counted. With
// Options.Fair the last node's confirmation wakes the key's waiters and names the fair
// ones again (once: not each node past the majority). Without it each confirmation past
// the majority wakes them: a release is announced on one node (Client.announce), and
// the waiter missed it if that node confirmed late.
func TestLateConfirmationWakesTheWaiters(t *testing.T) {
	for _, fair := range []bool{true, false} {
		q := &queues{c: &Client{nodes: make([]node, 5), opts: Options{Fair: fair, NodeTimeout: time.Hour}}, fairID: "C"}
		a := q.join("k")
		a.joinFair("C/a")
		ch := q.channel("k")
		q.chans = map[string]string{ch: "k"}
		want := []uint64{0, 0, 1, 1, 2} // wake-ups after each confirmation
		if !fair {
			want = []uint64{0, 0, 1, 2, 3}
		}
		var named []uint64
		for i, node := range []int{4, 2, 0, 1, 3} {
			q.listening(node, ch)
			if got := q.wakes("k"); got != want[i] {
				t.Fatalf("fair=%v: %d wake-ups after %d confirmations, want %d", fair, got, i+1, want[i])
			}
			_, n := a.headNamed("C/a")
			named = append(named, n)
		}
		if _, all := a.listened(); !all {
			t.Errorf("fair=%v: every node confirmed, listened says not all", fair)
		}
		if fair && named[4] == named[3] {
			t.Error("the last confirmation did not name the fair waiter again")
		}
	}
}

// TestHandNoticesCountNodes: the nodes' hand notices ("=<token> <ttl ms> <waiter id>")
// count by node: a node's notice delivered again does not count twice, so a grant never
// rests on fewer than a majority of nodes; notices with another token, malformed ones
// and ones for a waiter that left count for nothing. The grant's TTL is the shortest
// of the nodes'.
func TestHandNoticesCountNodes(t *testing.T) {
	q := &queues{c: &Client{nodes: make([]node, 5), opts: Options{Fair: true, NodeTimeout: time.Hour}}, fairID: "C"}
	a := q.join("k")
	a.joinFair("C:a")
	ch := q.channel("k")
	for range 4 { // node 0's notice, delivered again and again
		q.notice(0, ch, "=T 900 C:a")
	}
	q.notice(1, ch, "=T 900 C:a")
	q.notice(2, ch, "=U 900 C:a") // another registration's token
	q.notice(2, ch, "=T C:a")     // no TTL
	q.notice(2, ch, "=T x C:a")   // a TTL that is no number
	q.notice(2, ch, "=C:a")       // no token
	q.notice(2, ch, "= 900 C:a")  // an empty token
	if n := a.handedNodes("C:a", "T"); n != 2 {
		t.Fatalf("T counted on %d nodes, want 2 (nodes 0 and 1)", n)
	}
	q.notice(1, ch, "=T 900 C:a")
	if n := a.handedNodes("C:a", "T"); n != 2 {
		t.Fatalf("T counted on %d nodes after node 1 repeated it, want 2", n)
	}
	_, named := a.headNamed("C:a")
	if px := a.handedPX("C:a", "T", 3); px != 0 {
		t.Fatalf("a TTL of %v before a majority handed the key", px)
	}
	q.notice(3, ch, "=T 700 C:a")
	if n := a.handedNodes("C:a", "T"); n != 3 {
		t.Fatalf("T counted on %d nodes, want 3", n)
	}
	if px := a.handedPX("C:a", "T", 3); px != 700*time.Millisecond {
		t.Fatalf("the grant's TTL is %v, want the shortest of the nodes' (700ms)", px)
	}
	if _, now := a.headNamed("C:a"); now == named {
		t.Fatal("the third node's hand notice did not wake the waiter")
	}
	a.leaveFair("C:a")
	q.notice(4, ch, "=T 900 C:a")
	if n := a.handedNodes("C:a", "T"); n != 0 {
		t.Fatalf("a waiter that left keeps %d nodes' hand notices", n)
	}
}

// handedNodes reports how many nodes handed the key to the fair waiter id with token.
func (t *ticket) handedNodes(id, token string) int {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return len(t.kq.handed[id][token])
}

// TestMayListenCountsEveryListener: release.lua counts the subscribers to the key's
// channel on a node. One subscriber may be this Client itself, but what it knows of
// its own subscription may be stale (a dropped connection still counts as
// confirmed), so it is never discounted: an announcement too many costs one PUBLISH,
// which this Client ignores (TestOwnerReleaseAnnouncedDespiteStaleOwnSubscriptions).
// Before, a subscription confirmed on every node was taken for the one subscriber.
func TestMayListenCountsEveryListener(t *testing.T) {
	q := &queues{c: &Client{nodes: make([]node, 3), opts: Options{NodeTimeout: time.Hour}}}
	q.join("k")
	q.keys["k"].subscribed = true
	q.chans = map[string]string{releaseChannel("k"): "k"}
	if q.mayListen("k", 1) {
		t.Error("nobody subscribed: may listen")
	}
	for i := range 3 {
		q.listening(i, releaseChannel("k"))
		if !q.mayListen("k", 2) {
			t.Errorf("one subscriber, %d of 3 nodes confirmed ours: may listen false, want true", i+1)
		}
	}
	if !q.mayListen("other", 2) {
		t.Error("one subscriber to a key this Client does not wait for: another Client listens")
	}
}

// TestOwnAnnouncementKeepsCourtesy: a Release that ends a capped run of handoffs while
// other Clients listen gives them a courtesy: this Client's head, woken by
// queues.released, waits that long before it attempts. The Client then announces the
// release itself, and its own subscription hears "!<token>" a round trip later. That
// notice reset the courtesy to 0, so a head not yet scheduled attempted at once,
// racing the Clients the courtesy was for; this Client's own announcement is ignored.
func TestOwnAnnouncementKeepsCourtesy(t *testing.T) {
	q := &queues{c: &Client{nodes: make([]node, 3), opts: Options{NodeTimeout: time.Hour}}}
	tk := q.join("k")
	q.chans = map[string]string{releaseChannel("k"): "k"}
	q.keys["k"].subscribed = true
	l := &Lock{key: "k", token: "T"}
	q.released(l, 20*time.Millisecond, 3, 0, time.Now())
	if d, _, _ := tk.pauseLed(0, 0); d != 20*time.Millisecond {
		t.Fatalf("courtesy after the release: %v", d)
	}
	q.notice(0, releaseChannel("k"), announcePrefix+"T") // this Client's own announcement
	if d, _, _ := tk.pauseLed(0, 0); d != 20*time.Millisecond {
		t.Errorf("this Client's own announcement of T reset the head's courtesy: pause %v, want 20ms", d)
	}
}
