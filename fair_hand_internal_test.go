package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestHandedGrantRules: a fair waiter grants on the nodes' hand notices only with a
// majority of nodes for its latest registration, and never after it left under its id
// (a removal on its way frees the keys handed to it, node by node), while away, or
// once its context ended. Found in review: a waiter that left under id X while one
// node was slow counted that node's later hand, and granted a key the removal had
// freed on another node.
func TestHandedGrantRules(t *testing.T) {
	c := &Client{nodes: make([]node, 3), opts: Options{Fair: true, Clock: systemClock{}, DriftFactor: 0.01}, closing: make(chan struct{})}
	c.queues = queues{c: c, fairID: "C"}
	q := &c.queues
	ch := q.channel("k")
	fresh := func(ctx context.Context) *fairWaiter {
		tk := q.join("k")
		tk.joinFair("C:w")
		w := &fairWaiter{waiter: &waiter{c: c, ctx: ctx, key: "k", ttl: time.Second, t: tk}}
		w.entry = fairEntry{id: "C:w", hands: true, handPX: time.Second}
		if err := w.entry.register(time.Now()); err != nil {
			t.Fatal(err)
		}
		return w
	}
	gone := func(w *fairWaiter) { // the waiter's Acquire ended
		w.t.leaveFair("C:w")
		w.t.leave()
	}
	hand := func(w *fairWaiter, nodes ...int) {
		for _, n := range nodes {
			q.notice(n, ch, "="+w.entry.hand+" 1000 C:w")
		}
	}

	w := fresh(t.Context())
	hand(w, 0)
	if w.handed() != nil {
		t.Fatal("granted on one node of three")
	}
	old := w.entry.hand
	if err := w.entry.register(time.Now()); err != nil { // its next attempt
		t.Fatal(err)
	}
	q.notice(1, ch, "="+old+" 1000 C:w")
	if w.handed() != nil {
		t.Fatal("granted on an earlier registration's token")
	}
	hand(w, 1)
	w.leftID = w.entry.id
	hand(w, 2)
	if w.handed() != nil {
		t.Fatal("granted after the waiter left under its id")
	}
	gone(w)

	w = fresh(t.Context())
	w.away = true
	hand(w, 0, 1)
	if w.handed() != nil {
		t.Fatal("granted while away")
	}
	gone(w)

	ctx, cancel := context.WithCancel(t.Context())
	w = fresh(ctx)
	cancel()
	hand(w, 0, 1)
	if w.handed() != nil {
		t.Fatal("granted after the context ended")
	}
	gone(w)

	w = fresh(t.Context())
	w.entry.handAt = time.Now().Add(-700 * time.Millisecond) // registered long ago
	hand(w, 0, 1)
	if w.handed() != nil {
		t.Fatal("granted with less than half the hand TTL's validity left (the attempt gives a whole one)")
	}
	gone(w)

	w = fresh(t.Context())
	hand(w, 0, 1)
	l := w.handed()
	if l == nil {
		t.Fatal("not granted on a majority's hand notices")
	}
	if l.Token() != w.entry.hand || l.ttl != time.Second || time.Until(l.Until()) > time.Second {
		t.Fatalf("granted %q for %v until %v, want the registration's token for 1 s", l.Token(), l.ttl, l.Until())
	}
}

// TestRegisterAfterNewID: back from away under a new id, the waiter's attempt uses a
// fresh token, never one registered under the old id: a late removal of the old id
// frees keys holding those (found in review).
func TestRegisterAfterNewID(t *testing.T) {
	e := fairEntry{id: "C:x", hands: true}
	seen := map[string]bool{}
	for range 3 {
		if err := e.register(time.Now()); err != nil {
			t.Fatal(err)
		}
		seen[e.hand] = true
	}
	e.id, e.hand = "C:y", "" // as turn does
	if err := e.register(time.Now()); err != nil {
		t.Fatal(err)
	}
	if e.use == "" || seen[e.use] || seen[e.hand] {
		t.Fatalf("under the new id the attempt uses %q (registered under the old one: %v)", e.use, seen[e.use])
	}
}

// TestHandNoticesWakeAsOneRelease: the nodes' hand notices of one release differ in
// their TTL (each node's lease left); counted as wake-ups without it, they make one
// majority, and arm one partial-notice timer, not one per node (found in review).
func TestHandNoticesWakeAsOneRelease(t *testing.T) {
	c := &Client{nodes: make([]node, 5), opts: Options{Fair: true, NodeTimeout: time.Hour}}
	c.queues = queues{c: c, fairID: "C"}
	q := &c.queues
	tk := q.join("k")
	tk.joinFair("C:w")
	ch := q.channel("k")
	q.notice(0, ch, "=T 990 C:w")
	q.notice(1, ch, "=T 980 C:w")
	q.mu.Lock()
	timers, counted := len(q.partials), tk.kq.notices["=T C:w"].nodes
	q.mu.Unlock()
	if timers != 1 || counted != 2 {
		t.Fatalf("%d partial-notice timers and %d nodes counted for the release, want 1 and 2", timers, counted)
	}
	q.close()
}

// TestPartialTimerStoppedAtMajority: a fair release's first notice arms a timer that
// names the head if no majority follows (partialNotice); the majority's notice stops
// it, so that a hot key does not keep one armed timer, and one goroutine run later,
// per release. A notice that no majority follows keeps its timer.
func TestPartialTimerStoppedAtMajority(t *testing.T) {
	c := &Client{nodes: make([]node, 5), opts: Options{Fair: true, Clock: systemClock{}, DriftFactor: 0.01, NodeTimeout: time.Minute}, closing: make(chan struct{})}
	c.queues = queues{c: c, fairID: "C"}
	q := &c.queues
	ch := q.channel("k")
	tk := q.join("k")
	tk.joinFair("C:w")
	armed := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.partials)
	}
	for i := range 3 {
		msg := fmt.Sprintf("token%d C:w", i)
		q.notice(0, ch, msg)
		if n := armed(); n != 1 {
			t.Fatalf("release %d: %d partial timers armed after its first notice, want 1", i, n)
		}
		q.notice(1, ch, msg)
		q.notice(2, ch, msg) // the majority of 5
		if n := armed(); n != 0 {
			t.Fatalf("release %d: %d partial timers armed after the majority, want 0", i, n)
		}
		q.notice(3, ch, msg)
		q.notice(4, ch, msg)
	}
	q.notice(0, ch, "lonely C:w")
	if n := armed(); n != 1 {
		t.Fatalf("%d partial timers armed for a notice no majority followed, want 1", n)
	}
	tk.leaveFair("C:w")
	tk.leave()
	q.close()
	if n := armed(); n != 0 {
		t.Fatalf("%d partial timers left after close", n)
	}
}
