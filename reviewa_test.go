package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestReviewAHandoffAfterShutdown: a Release that began before Shutdown hands the
// lock over to a waiting Acquire of the same Client; the handoff wins its majority
// only after Shutdown began (two of three nodes were paused). Shutdown promises that
// nothing is granted after it began, so the waiter must fail with ErrClosed and the
// handed-over key must not stay on the nodes: a lock returned there could not even be
// released (Release after Shutdown returns ErrClosed).
func TestReviewAHandoffAfterShutdown(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{
		NodeTimeout: 5 * time.Second,
		RetryDelay:  func(int) time.Duration { return time.Hour },
	})
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "handed", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(context.Background(), c.client, "handed", time.Minute)
	eventually(t, "the waiter's offer", func() bool { return c.client.Offered("handed") })
	holder.WaitForCalls()

	c.servers[0].Pause()
	c.servers[1].Pause()
	released := make(chan error, 1)
	go func() { released <- holder.Release(context.Background()) }()
	// The Release claims the offer before its handoff step goes out. (Not "no offer":
	// the waiter takes its offer back for a moment when it rechecks its subscription.)
	eventually(t, "the Release to claim the offer", func() bool { return c.client.Claimed("handed") == 1 })
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.client.Shutdown(gone); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown with the handoff out: got %v, want context.Canceled", err)
	}
	c.servers[0].Resume()
	c.servers[1].Resume()
	releaseErr := <-released
	// If the key stays behind, say whose it is: the holder's (the release did not run
	// there), or another (the handoff's, or an attempt's).
	defer func() {
		if t.Failed() {
			t.Logf("the holder's token %s; its Release returned %v", holder.Token(), releaseErr)
		}
	}()
	var r result
	select {
	case r = <-waiter:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not return 10 s after the nodes resumed")
	}
	if err := c.client.Close(); err != nil {
		t.Fatal(err)
	}
	if r.lock != nil {
		t.Errorf("the waiter got a lock handed off after Shutdown began (token %s); its Release: %v",
			r.lock.Token(), r.lock.Release(ctx))
	} else if !errors.Is(r.err, redlock.ErrClosed) {
		t.Errorf("the waiter: got %v, want ErrClosed", r.err)
	}
	c.wantValues("handed", "", "", "")
}
