package redlock

import (
	"testing"
	"time"
)

// winLossesOf returns c's average of its winners' lost races for key (agePause), and
// whether the key has a queue's state.
func (c *Client) winLossesOf(key string) (float64, bool) {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	kq := c.queues.keys[key]
	if kq == nil {
		return 0, false
	}
	return kq.winLosses, true
}

// TestPollsAreNotRacesLost: a waiter that polls through a long hold elsewhere (every
// poll refused) has lost no race, so its win leaves the average at 0; and a run of
// uncontended wins pulls an average down (found in review: polls counted as races, and
// first attempts that won were not recorded, so a stale average stayed).
func TestPollsAreNotRacesLost(t *testing.T) {
	nodes, _ := plainNodes(t, 3)
	holder, err := New(nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	c, err := New(nodes, Options{RetryDelay: func(int) time.Duration { return 2 * time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	l, err := holder.TryAcquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	go func() {
		lk, err := c.Acquire(ctx, "k", time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- lk
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c.Waiting("k") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not queue")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // about 50 polls, every one refused
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lk := <-got
	if lk == nil {
		t.Fatal("no lock")
	}
	if w, _ := c.winLossesOf("k"); w > 1 {
		t.Errorf("after a win that followed polls only: winLosses %.2f, want under 1 (a race is a lead-first attempt)", w)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.queues.mu.Lock()
	if kq := c.queues.keys["k"]; kq != nil {
		kq.winLosses = 40 // as if after heavy contention
	}
	c.queues.mu.Unlock()
	for range 20 {
		lk, err := c.Acquire(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w, ok := c.winLossesOf("k"); ok && w > 1 {
		t.Errorf("after 20 uncontended wins: winLosses %.2f, want near 0", w)
	}
}

// TestAgePauseCapped: a slow round trip cannot stretch the age pause past a quarter
// of the node timeout (found in review: 4 round trips near the timeout outlasted a
// releaser's yield, itself capped at the node timeout).
func TestAgePauseCapped(t *testing.T) {
	c := &Client{opts: Options{NodeTimeout: 40 * time.Millisecond}}
	for _, took := range []time.Duration{200 * time.Microsecond, 2 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
		tk := &ticket{q: &queues{c: c}, kq: &keyQueue{remote: true, winLosses: 10}}
		d, _, _ := tk.pauseLed(1, took)
		if want := min(agePause(10, 1, took), 10*time.Millisecond); d != want {
			t.Errorf("took %v: pause %v, want %v", took, d, want)
		}
		if y := yieldFor(took, c.opts.NodeTimeout); took >= 10*time.Millisecond && d > y {
			t.Errorf("took %v: pause %v past the yield %v", took, d, y)
		}
	}
}
