package redlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The tests of this file guard the behaviour that #12's move of Acquire into the waiter
// type had to keep (review D): each passes on the code before the move and after it.

// TestReviewDAcquireCountsAttempts: with the key held elsewhere and MaxAttempts 4,
// Acquire makes four attempts and asks RetryDelay for the waits between them with the
// number of attempts failed so far. The wait after the attempt made before queueing is
// skipped when a wake-up (the subscription reaching a majority) came meanwhile, so the
// calls are 1, 2, 3 or 2, 3; either way the last is 3: no fifth attempt, no missing one.
// The nodes' confirmations of the subscription (the majority's, the last one's) make
// the waiter attempt once more each, and those checks count for neither MaxAttempts
// nor RetryDelay: each is followed by a call with the same number as the one before,
// so the calls may be, say, 1, 1, 1, 2, 3. The error is the last attempt's, matching
// ErrNotAcquired and no context error.
func TestReviewDAcquireCountsAttempts(t *testing.T) {
	var mu sync.Mutex
	var asked []int
	opts := redlock.Options{MaxAttempts: 4, RetryDelay: func(attempt int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, attempt)
		return 20 * time.Millisecond
	}}
	c := newCluster(t, 3, redistest.Options{}, opts)
	warmUp(t, c.client)
	held, err := acquireRetrying(t, c.newClient(redlock.Options{}), "counted", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	asked = nil // the warm-up's
	mu.Unlock()

	lock, err := c.client.Acquire(t.Context(), "counted", time.Second)
	var qe *redlock.QuorumError
	if lock != nil || !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNotAcquired) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire of a held key: lock %v, err %v; want a *QuorumError matching ErrNotAcquired only", lock, err)
	}
	if qe.Refused < qe.Needed {
		t.Fatalf("last attempt %+v: want a majority refusing", qe)
	}
	mu.Lock()
	got := slices.Clone(asked)
	mu.Unlock()
	if counted := slices.Compact(slices.Clone(got)); len(got) > len(counted)+3 ||
		!slices.Equal(counted, []int{1, 2, 3}) && !slices.Equal(counted, []int{2, 3}) || slices.Index(got, 3) != len(got)-1 {
		t.Fatalf("RetryDelay asked with %v, want [1 2 3] or [2 3], numbers repeated at most 3 times in all (checks), and 3 once, last", got)
	}
	if c.client.Waiting("counted") != 0 {
		t.Fatalf("%d waiters left in the queue", c.client.Waiting("counted"))
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestReviewDAcquireExits: every way a waiting Acquire ends leaves its queue and says
// why. A waiter behind the head whose ctx ends gets ErrNotAcquired with ctx's error
// (no attempt of its own); the head whose ctx ends keeps its last attempt's class (or that of the attempt the
// cancel cut short); a
// successful Acquire after a release leaves the queue too; Close ends the rest with
// ErrClosed. Afterwards no waiter is queued and no goroutine is left (goleak).
func TestReviewDAcquireExits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	servers := redistest.StartN(t, 3, redistest.Options{})
	owner, err := redlock.New(redistest.Clients(servers), redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	client, err := redlock.New(redistest.Clients(servers), redlock.Options{
		RetryDelay: func(int) time.Duration { return 10 * time.Millisecond },
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			client.Close()
		}
	}()
	held, err := acquireRetrying(t, owner, "exits", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// The head: attempts, fails, sleeps; its ctx ends.
	headCtx, endHead := context.WithCancel(t.Context())
	headErr := make(chan error, 1)
	go func() {
		_, err := client.Acquire(headCtx, "exits", time.Second)
		headErr <- err
	}()
	waitFor(t, func() bool { return client.Waiting("exits") == 1 })
	// A second waiter queues behind it and gives up while queued.
	behindCtx, endBehind := context.WithCancel(t.Context())
	behindErr := make(chan error, 1)
	go func() {
		_, err := client.Acquire(behindCtx, "exits", time.Second)
		behindErr <- err
	}()
	waitFor(t, func() bool { return client.Waiting("exits") == 2 })
	endBehind()
	err = <-behindErr
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) || qe.Agreed+qe.Refused+qe.Failed != 0 {
		t.Fatalf("waiter behind the head, ctx ended: %v; want ErrNotAcquired and Canceled, no votes", err)
	}
	waitFor(t, func() bool { return client.Waiting("exits") == 1 })
	endHead()
	err = <-headErr
	// The cancel finds the head asleep after a refused attempt, or (under load, often)
	// inside its next attempt, whose replies are then not all in: either way the
	// error is ErrNotAcquired with Canceled, and never a failure.
	if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) || qe.Failed != 0 {
		t.Fatalf("head, ctx ended: %v; want ErrNotAcquired with Canceled and no failed node", err)
	}
	if cut := qe.Agreed+qe.Refused < qe.Nodes; qe.Refused < qe.Needed && !cut {
		t.Fatalf("head, ctx ended: %v; want its last attempt refused by a majority, or an attempt cut short", err)
	}
	waitFor(t, func() bool { return client.Waiting("exits") == 0 })

	// A waiter that wins after the release leaves the queue.
	got := make(chan *redlock.Lock, 1)
	go func() {
		lock, err := client.Acquire(t.Context(), "exits", time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- lock
	}()
	waitFor(t, func() bool { return client.Waiting("exits") == 1 })
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	lock := <-got
	if lock == nil {
		t.FailNow()
	}
	if n := client.Waiting("exits"); n != 0 {
		t.Fatalf("%d waiters queued after a successful Acquire", n)
	}

	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

	// Close ends a head that waits for a key held elsewhere: ErrClosed, with its last
	// attempt in the message.
	if held, err = acquireRetrying(t, owner, "exits", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	closeErr := make(chan error, 1)
	go func() {
		_, err := client.Acquire(context.Background(), "exits", time.Second)
		closeErr <- err
	}()
	waitFor(t, func() bool { return client.Waiting("exits") == 1 })
	closed = true
	client.Close()
	err = <-closeErr
	if !errors.Is(err, redlock.ErrClosed) || errors.As(err, &qe) {
		t.Fatalf("waiter at Close: %v; want ErrClosed (not a *QuorumError)", err)
	}
	if n := client.Waiting("exits"); n != 0 {
		t.Fatalf("%d waiters queued after Close", n)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every millisecond for up to five seconds: the state it watches
// (a queue's length) has no signal a test could wait on.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// subscribePanics is a node client whose Subscribe panics once, when armed: a
// UniversalClient of the caller's own that fails in a way the library does not expect.
type subscribePanics struct {
	redis.UniversalClient
	armed *atomic.Bool
}

func (s subscribePanics) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	if s.armed.CompareAndSwap(true, false) {
		panic("review D: Subscribe panics")
	}
	return s.UniversalClient.Subscribe(ctx, channels...)
}

// TestReviewDPanicWhileQueueingLeavesQueue: a panic inside Acquire after it joined its
// key's queue (here: the node client's Subscribe, called when the queued Acquire
// subscribes to the key's releases) must still take it out of the queue, as the
// deferred leave did before the waiter refactor. Otherwise, once the caller recovers,
// the dead ticket holds the turn forever and every later Acquire of the key in this
// Client waits behind it until its ctx ends.
func TestReviewDPanicWhileQueueingLeavesQueue(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	armed := new(atomic.Bool)
	nodes := redistest.Clients(servers)
	nodes[0] = subscribePanics{UniversalClient: nodes[0], armed: armed}
	client, err := redlock.New(nodes, redlock.Options{
		RetryDelay: func(int) time.Duration { return 10 * time.Millisecond },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	owner, err := redlock.New(redistest.Clients(servers), redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	held, err := acquireRetrying(t, owner, "panics", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	armed.Store(true)
	recovered := func() (r any) {
		defer func() { r = recover() }()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, _ = client.Acquire(ctx, "panics", time.Second)
		return nil
	}()
	if recovered == nil {
		t.Fatal("Acquire did not reach Subscribe: the test sets nothing up")
	}
	if n := client.Waiting("panics"); n != 0 {
		t.Errorf("%d waiters queued after the Acquire panicked", n)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	lock, err := client.Acquire(ctx, "panics", time.Second)
	if err != nil {
		t.Fatalf("Acquire of a free key after a recovered panic: %v", err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
