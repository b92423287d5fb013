package redlock

import "testing"

// TestFairCheckFreeForEachWaiter: two fair waiters of one Client for a key. The nodes
// name W1 the head (a real naming), then a node reconnects and confirms the
// subscription again (a check: nameAll names both). For W2 only the check changed
// anything, so its attempt is free; W1's naming before the check still counts for W1.
// The record of real wake-ups used to be one per key, so W1's naming made W2's
// attempt count toward MaxAttempts (found in review).
func TestFairCheckFreeForEachWaiter(t *testing.T) {
	c := &Client{nodes: make([]node, 3), opts: Options{Fair: true}}
	c.queues = queues{c: c, fairID: "X"}
	q := &c.queues
	t1, t2 := q.join("k"), q.join("k")
	t1.joinFair("X/w1")
	t2.joinFair("X/w2")
	_, seen1 := t1.headNamed("X/w1")
	_, seen2 := t2.headNamed("X/w2")

	q.mu.Lock()
	t1.kq.nameHead("X/w1") // a majority named W1
	t1.kq.check(true)      // a node confirmed again
	t1.kq.nameAll()
	q.mu.Unlock()

	if _, named := t2.headNamed("X/w2"); named == seen2 {
		t.Fatal("the check did not name W2")
	}
	if !t2.namedByChecks("X/w2", seen2) {
		t.Error("W2, named by the check alone, would count the attempt")
	}
	if t1.namedByChecks("X/w1", seen1) {
		t.Error("W1, named by a majority before the check, would not count the attempt")
	}
	w2 := &fairWaiter{waiter: &waiter{c: c, t: t2, tries: 1, attempt: 2}}
	w2.checked(t2.namedByChecks("X/w2", seen2))
	if !w2.free || w2.checks != 1 {
		t.Errorf("W2's attempt: free %v, checks %d; want free, 1", w2.free, w2.checks)
	}
}
