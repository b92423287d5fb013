package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// stalledLoad runs lock traffic on client (workers retrying TryAcquire on keys of their
// own, one lock kept alive), then pauses servers[:stall] and returns once attempts
// have failed against the paused majority several times: calls are then in flight to
// the paused nodes and more wait behind them. The workers end when the client closes;
// wait waits for them and returns the kept-alive lock's work context.
func stalledLoad(t *testing.T, client *redlock.Client, servers []*redistest.Server, stall int) (wait func() context.Context) {
	t.Helper()
	warm, cancel := context.WithTimeout(t.Context(), 10*time.Second) // the first attempt dials: retry under load
	defer cancel()
	kept, err := client.Acquire(warm, "close-kept", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	work, stop := kept.KeepAlive(context.Background())
	const workers = 6
	failed := make(chan struct{}, 64) // one token per attempt that failed for want of nodes
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "close-load-" + string(rune('a'+w))
			for {
				lock, err := client.TryAcquire(context.Background(), key, 10*time.Second)
				switch {
				case errors.Is(err, redlock.ErrClosed):
					return
				case err == nil:
					_ = lock.Release(context.Background())
				case errors.Is(err, redlock.ErrUnavailable):
					select {
					case failed <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	for _, s := range servers[:stall] {
		s.Pause()
	}
	for range 2 * workers {
		select {
		case <-failed:
		case <-time.After(10 * time.Second):
			t.Fatal("no attempt failed against the paused majority")
		}
	}
	return func() context.Context {
		wg.Wait()
		stop()
		return work
	}
}

// urlsOf returns a redis:// URL for each server, with query appended.
func urlsOf(servers []*redistest.Server, query string) []string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = "redis://" + s.Addr() + query
	}
	return urls
}

// TestCloseAfterMajorityStalled (#15 §3): with 3 of 5 nodes paused under load, Close
// of a NewFromURLs Client returns within a bound derived from NodeTimeout (its go-redis
// clients time out at 10 × NodeTimeout; a release parked behind a stalled call, and
// one behind that, each wait for one such timeout), not after go-redis's 5 s default
// read timeout two or three times over.
func TestCloseAfterMajorityStalled(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const nodeTimeout = 50 * time.Millisecond
	servers := redistest.StartN(t, 5, redistest.Options{})
	client, err := redlock.NewFromURLs(urlsOf(servers, ""), redlock.Options{NodeTimeout: nodeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	wait := stalledLoad(t, client, servers, 3)
	start := time.Now()
	if err := client.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	took := time.Since(start)
	work := wait()
	t.Logf("Close with 3 of 5 nodes paused under load took %v", took)
	// Three go-redis timeouts one behind the other, and a second of slack for a loaded
	// machine: far below one default read timeout (5 s).
	if limit := 3*10*nodeTimeout + time.Second; took > limit {
		t.Errorf("Close took %v, want at most %v", took, limit)
	}
	if cause := context.Cause(work); !errors.Is(cause, redlock.ErrClosed) {
		t.Errorf("the kept-alive lock's context: cause %v, want ErrClosed", cause)
	}
	for _, s := range servers[:3] {
		s.Resume()
	}
}

// TestShutdownBounded (#15 §3): Shutdown returns when its context ends although calls
// to 3 paused nodes are still in flight (the URL's read_timeout of 10 s wins over the
// derived one, so they stay out), with an error wrapping the context's; new steps fail
// with ErrClosed at once, the kept-alive lock's context has ended with ErrClosed, and a
// later Close waits until the calls have ended and leaves no goroutine behind.
func TestShutdownBounded(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	servers := redistest.StartN(t, 5, redistest.Options{})
	client, err := redlock.NewFromURLs(urlsOf(servers, "?read_timeout=10s"), redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	wait := stalledLoad(t, client, servers, 3)

	const bound = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	err = client.Shutdown(ctx)
	took := time.Since(start)
	t.Logf("Shutdown with a %v context took %v: %v", bound, took, err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: got %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if limit := bound + 300*time.Millisecond; took > limit {
		t.Errorf("Shutdown took %v, want at most %v", took, limit)
	}
	if _, err := client.TryAcquire(t.Context(), "after-shutdown", time.Second); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("TryAcquire after Shutdown: got %v, want ErrClosed", err)
	}
	work := wait() // the workers saw ErrClosed
	if cause := context.Cause(work); !errors.Is(cause, redlock.ErrClosed) {
		t.Errorf("the kept-alive lock's context: cause %v, want ErrClosed", cause)
	}
	expired, cancelExpired := context.WithCancel(context.Background())
	cancelExpired()
	if err := client.Shutdown(expired); !errors.Is(err, context.Canceled) {
		t.Errorf("a second Shutdown while the calls are out: got %v, want context.Canceled", err)
	}

	for _, s := range servers[:3] {
		s.Resume()
	}
	start = time.Now()
	if err := client.Close(); err != nil {
		t.Errorf("Close after the nodes resumed: %v", err)
	}
	t.Logf("the later Close waited %v for the calls to end", time.Since(start))
}

// TestShutdownGrantsNothing: an attempt that wins its majority after Shutdown began
// (two of three nodes held its SET while paused) is released, and TryAcquire fails
// with ErrClosed instead of returning a lock nobody can release any more.
func TestShutdownGrantsNothing(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{NodeTimeout: 5 * time.Second})
	ctx := t.Context()
	if l, err := c.client.TryAcquire(ctx, "warm", time.Second); err != nil {
		t.Fatal(err)
	} else if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.servers[0].Pause()
	c.servers[1].Pause()
	done := make(chan error, 1)
	go func() {
		lock, err := c.client.TryAcquire(context.Background(), "late-win", 30*time.Second)
		if lock != nil {
			err = errors.New("granted a lock")
		}
		done <- err
	}()
	eventually(t, "the attempt's SET on the live node", func() bool {
		return c.admin[2].Exists(ctx, "late-win").Val() == 1
	})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := c.client.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with the attempt out: got %v, want context.DeadlineExceeded", err)
	}
	c.servers[0].Resume()
	c.servers[1].Resume()
	if err := <-done; !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("the attempt that won after Shutdown began: got %v, want ErrClosed", err)
	}
	if err := c.client.Close(); err != nil {
		t.Fatal(err)
	}
	c.wantValues("late-win", "", "", "")
}
