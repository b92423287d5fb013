package redlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// recordingClock is a Clock whose After records the durations asked for and returns
// fire: nil blocks for ever.
type recordingClock struct {
	mu    sync.Mutex
	asked []time.Duration
	fire  chan time.Time
}

func (r *recordingClock) Now() time.Time { return time.Now() }

func (r *recordingClock) After(d time.Duration) <-chan time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, d)
	return r.fire
}

// waits returns the durations After was asked for so far.
func (r *recordingClock) waits() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked)
}

// settleSetup is a fair waiter for "k" of a Client with three nodes, no Redis.
func settleSetup(ctx context.Context, clock Clock) (*queues, *fairWaiter, string) {
	c := &Client{nodes: make([]node, 3), opts: Options{Fair: true, NodeTimeout: 50 * time.Millisecond, Clock: clock}}
	c.queues = queues{c: c, fairID: "C"}
	q := &c.queues
	tk := q.join("k")
	tk.joinFair("C/a")
	ch := q.channel("k")
	q.chans = map[string]string{ch: "k"}
	return q, &fairWaiter{waiter: &waiter{c: c, ctx: ctx, key: "k", t: tk}}, ch
}

// TestFairSettleWaitsForEveryConfirmation: a fair waiter's first attempt waits until
// every node confirmed the key's subscription (so that the confirmations' namings
// come before it, not during it), and no longer than partialNoticeWait; a
// subscription confirmed already costs no wait; the caller's context ends the wait.
func TestFairSettleWaitsForEveryConfirmation(t *testing.T) {
	t.Run("confirmed already", func(t *testing.T) {
		clock := &recordingClock{}
		q, w, ch := settleSetup(t.Context(), clock)
		for i := range 3 {
			q.listening(i, ch)
		}
		if err := w.settle(); err != nil {
			t.Fatal(err)
		}
		if len(clock.waits()) != 0 {
			t.Errorf("waited %v with every node confirmed", clock.waits())
		}
	})
	t.Run("the last confirmation ends it", func(t *testing.T) {
		clock := &recordingClock{} // the cap never fires
		q, w, ch := settleSetup(t.Context(), clock)
		q.listening(0, ch)
		done := make(chan error, 1)
		go func() { done <- w.settle() }()
		for len(clock.waits()) == 0 { // settle has looked, and waits
			time.Sleep(time.Millisecond)
		}
		q.listening(2, ch) // the majority: a wake-up, which must not end the wait
		select {
		case err := <-done:
			t.Fatalf("settle returned (%v) before the last node confirmed", err)
		case <-time.After(20 * time.Millisecond): // a negative check: only its absence is seen
		}
		q.listening(1, ch)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("capped", func(t *testing.T) {
		clock := &recordingClock{fire: make(chan time.Time, 1)}
		clock.fire <- time.Now()
		q, w, ch := settleSetup(t.Context(), clock)
		q.listening(0, ch)
		q.listening(1, ch) // node 2 is down: it never confirms
		if err := w.settle(); err != nil {
			t.Fatal(err)
		}
		want, got := partialNoticeWait(50*time.Millisecond), clock.waits()
		if len(got) != 1 || got[0] != want {
			t.Errorf("cap asked for %v, want once %v", got, want)
		}
	})
	t.Run("context ends it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		_, w, _ := settleSetup(ctx, &recordingClock{})
		cancel()
		if err := w.settle(); !errors.Is(err, context.Canceled) {
			t.Errorf("settle after the context ended: %v, want context.Canceled", err)
		}
	})
}
