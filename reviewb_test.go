package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestReviewBKeepAliveStartedLateRenews: a lock whose KeepAlive starts some time after
// its Acquire (the caller prepared its work first) must still be renewed while the
// nodes are healthy. KeepAlive scheduled its first renewal a third of the validity
// after KeepAlive was called, not after the lock's validity began; started when less
// than V/3 + V/10 + NodeTimeout of validity was left, that renewal came after the last
// moment a renewal may start, and the work's context was cancelled as "lost" without a
// single renewal tried.
func TestReviewBKeepAliveStartedLateRenews(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	const ttl = time.Second
	lock, err := acquireRetrying(t, c.client, "late-kept", ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(context.Background())
	first := lock.Until()
	// The caller's preparation, before it asks for renewal: 600 ms of the 990 ms of
	// validity pass (the scenario, not a synchronisation).
	time.Sleep(600 * time.Millisecond)
	work, stop := lock.KeepAlive(t.Context())
	defer stop()
	select { // the work: two TTLs
	case <-work.Done():
		t.Fatalf("work context ended with healthy nodes, %v before the validity end: %v",
			time.Until(first).Round(time.Millisecond), context.Cause(work))
	case <-time.After(2 * ttl):
	}
	if !lock.Until().After(first.Add(ttl)) {
		t.Fatalf("Until moved from %v only to %v", first, lock.Until())
	}
}

// lossHidingError is an error of the work that wraps the lock's loss cause (so that
// errors.Is finds it) but says only what the work was doing.
type lossHidingError struct{ cause error }

func (e *lossHidingError) Error() string { return "report aborted" }
func (e *lossHidingError) Unwrap() error { return e.cause }

// TestReviewBRunErrorKeepsTheLossText: fn returns its own error type that wraps
// context.Cause(ctx) but prints only "report aborted". Do's error must still say that
// the lock was lost: RunError's text dropped the loss cause whenever errors.Is found it
// inside fn's error, although fn's text did not contain it, so the log said "report
// aborted" and nothing about the lock.
func TestReviewBRunErrorKeepsTheLossText(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	warmUp(t, c.client)
	err := c.client.Do(t.Context(), "hidden-loss", time.Second, func(ctx context.Context) error {
		c.stealKey(ctx, "hidden-loss")
		<-ctx.Done()
		return &lossHidingError{context.Cause(ctx)}
	})
	var run *redlock.RunError
	if !errors.As(err, &run) || !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v; want a RunError matching ErrLockLost", err)
	}
	if !strings.Contains(err.Error(), "report aborted") || !strings.Contains(err.Error(), run.Lost.Error()) {
		t.Fatalf("Do's text %q: want fn's text and the loss cause %q", err, run.Lost)
	}
}
