package redlock

import (
	"testing"
	"time"
)

// TestFollowSubscribesAgainForNewKeyState: sweep drops an idle key and, before any
// node's listener runs, an Acquire brings the key back. The channel is wanted and
// subscribed as before, but the new key state has no node's confirmation; without
// one, its waiters miss the checks the confirmations make (listening: a release
// announced before a node listened). follow subscribes again, and every node confirms.
// (A fair Client's channel is one for all keys and never dropped: no such race.)
func TestFollowSubscribesAgainForNewKeyState(t *testing.T) {
	nodes, _ := plainNodes(t, 3)
	c, err := New(nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := &c.queues
	confirmed := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		if kq := q.keys["k"]; kq != nil {
			return len(kq.listening)
		}
		return 0
	}
	waitConfirmed := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for confirmed() < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of 3 nodes confirmed the subscription", what, confirmed())
			}
			time.Sleep(time.Millisecond)
		}
	}
	q.join("k").subscribe()
	waitConfirmed("first subscription")

	// In one critical section, so that no listener runs in between: the key lingers
	// out, and a new waiter brings it back (what join and subscribe do).
	q.mu.Lock()
	q.keys["k"].idle = time.Now().Add(-time.Hour)
	q.sweep(time.Now())
	if q.keys != nil || q.chans != nil {
		q.mu.Unlock()
		t.Fatalf("sweep kept %d keys and %d channels", len(q.keys), len(q.chans))
	}
	q.keys = map[string]*keyQueue{"k": {wake: make(chan struct{}), subscribed: true}}
	q.chans = map[string]string{q.channel("k"): "k"}
	q.changed()
	q.mu.Unlock()
	waitConfirmed("the key's new state")
}
