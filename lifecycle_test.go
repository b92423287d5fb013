package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// jumpClock is a clock that stands still except that every reading moves it forward
// by step, so each step of the algorithm (one reading before it, one after) appears
// to take exactly step, however long it really took on a loaded machine. (Its After
// is the system's: the node timeout stays real.)
type jumpClock struct {
	mu    sync.Mutex
	base  time.Time
	shift time.Duration
	step  time.Duration
}

func (j *jumpClock) Now() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.base.IsZero() {
		j.base = time.Now()
	}
	j.shift += j.step
	return j.base.Add(j.shift)
}

func (j *jumpClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (j *jumpClock) set(step time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.step = step
}

// TestValidityBoundary: a majority that says yes when the TTL minus drift has passed is
// no lock (validity 0); the attempt fails and releases every node. One millisecond
// sooner, it is a lock with 1 ms of validity.
func TestValidityBoundary(t *testing.T) {
	const ttl = time.Second
	drift := ttl/100 + 2*time.Millisecond
	clock := &jumpClock{step: ttl - drift}
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Clock: clock})
	_, err := c.client.TryAcquire(t.Context(), "slow", ttl)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrUnavailable) || !errors.As(err, &qe) || !qe.Late || qe.Agreed < 2 {
		t.Fatalf("validity 0: got %v, want ErrUnavailable with a late majority", err)
	}
	c.client.Close() // waits for the SET still out and the clean-up DELs
	c.wantValues("slow", "", "", "")

	// Another Client, its connections dialled first: the attempt below gets 1 ms.
	clock.set(0)
	next := c.newClient(redlock.Options{Clock: clock})
	if warm, err := next.TryAcquire(t.Context(), "warm", ttl); err != nil {
		t.Fatal(err)
	} else if err := warm.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	clock.set(ttl - drift - time.Millisecond)
	lock, err := next.TryAcquire(t.Context(), "slow", ttl)
	if err != nil {
		t.Fatalf("validity 1 ms: %v", err)
	}
	clock.set(0)
	if left := lock.Until().Sub(clock.Now()); left > time.Millisecond {
		t.Fatalf("validity left %v, want at most 1 ms", left)
	}
}

// TestExtendValidity: Extend's new end is start + ttl − drift, a too-slow Extend fails
// as lost and does not move Until later, and Release after the local validity ran out
// reports ErrLockLost yet deletes the keys.
func TestExtendValidity(t *testing.T) {
	clock := &jumpClock{}
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Clock: clock})
	lock, err := c.client.TryAcquire(t.Context(), "timed", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// An extend queued behind a call still out is judged by the clock, which jumps
	// below: it would be dropped as stale. Let the acquire's calls return first.
	lock.WaitForCalls()
	const ttl = 20 * time.Second
	drift := ttl/100 + 2*time.Millisecond
	clock.set(time.Second) // every reading jumps 1 s: the Extend appears to take 1 s
	before := clock.Now()  // the Extend's start reading is this one + 1 s
	if err := lock.Extend(t.Context(), ttl); err != nil {
		t.Fatal(err)
	}
	clock.set(0)
	if want := before.Add(time.Second + ttl - drift); lock.Until().Sub(want).Abs() > 20*time.Millisecond {
		t.Fatalf("Until %v, want start + ttl − drift = %v", lock.Until(), want)
	}

	until := lock.Until()
	lock.WaitForCalls()
	clock.set(ttl) // an Extend that takes a whole TTL confirms nothing
	err = lock.Extend(t.Context(), ttl)
	clock.set(0)
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend slower than its TTL: got %v, want ErrLockLost", err)
	}
	if !lock.Until().Equal(until) {
		t.Fatalf("a failed Extend moved Until: %v → %v", until, lock.Until())
	}

	clock.set(time.Minute) // local validity over; the keys (TTL 20 s) still on the nodes
	err = lock.Release(t.Context())
	clock.set(0)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrLockLost) || !errors.As(err, &qe) || !qe.Late {
		t.Fatalf("Release after the local validity: got %v, want ErrLockLost, late", err)
	}
	lock.WaitForCalls()
	c.wantValues("timed", "", "", "")
}

// TestStaleCleanupCannotDeleteNextAttempt: attempt 1 fails while node 1 is paused, so
// its clean-up DEL waits behind its SET there; attempt 2 runs while node 1 resumes. The
// stale DEL must not delete attempt 2's key (each attempt has its own token), so no
// second client can win while the first lock is valid. Whether the stale DEL lands
// after attempt 2's SET depends on scheduling: with one token per Acquire call (the old
// bug) one run in two showed two valid locks, so the scenario runs four times.
func TestStaleCleanupCannotDeleteNextAttempt(t *testing.T) {
	for run := range 4 {
		staleCleanupRun(t, run)
	}
}

func staleCleanupRun(t *testing.T, run int) {
	const nodeTimeout = 300 * time.Millisecond
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{
		NodeTimeout: nodeTimeout, MaxAttempts: 2,
		RetryDelay: func(int) time.Duration { return time.Millisecond },
	})
	c.admin[1].Set(t.Context(), "stale", "foreign", time.Minute)
	if l, err := c.client.TryAcquire(t.Context(), "warm", time.Second); err == nil { // dial node 1 now
		l.Release(t.Context())
	}
	c.servers[0].Pause()
	type result struct {
		lock *redlock.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.client.Acquire(t.Context(), "stale", 10*time.Second)
		done <- result{l, err}
	}()
	// Attempt 1 waits for the node timeout and its clean-up for another; attempt 2
	// starts at about 600 ms and waits until about 900 ms: resume node 1 in between.
	time.Sleep(2*nodeTimeout + nodeTimeout/3)
	c.servers[0].Resume()
	res := <-done
	if res.err != nil {
		return // failing is safe
	}
	res.lock.WaitForCalls()
	c.client.Close() // every stale call has landed now
	c.admin[1].Del(t.Context(), "stale")
	l2, err := c.newClient(redlock.Options{}).TryAcquire(t.Context(), "stale", 10*time.Second)
	if err == nil && time.Now().Before(res.lock.Until()) {
		t.Fatalf("run %d: two valid locks: first until %v, second until %v (nodes %q)", run, res.lock.Until(), l2.Until(), c.values("stale"))
	}
}

// TestClose: a waiting Acquire gives up when Close is called; every Close call waits
// and returns; Acquire after Close fails at once with ErrClosed.
func TestClose(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	for _, a := range c.admin {
		a.Set(t.Context(), "busy", "foreign", time.Minute)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := c.client.Acquire(context.Background(), "busy", time.Second)
		waiting <- err
	}()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.client.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-waiting:
		if !errors.Is(err, redlock.ErrClosed) {
			t.Fatalf("waiting Acquire after Close: got %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting Acquire did not return after Close")
	}
	start := time.Now()
	if _, err := c.client.TryAcquire(t.Context(), "free", time.Second); !errors.Is(err, redlock.ErrClosed) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("Acquire after Close: got %v after %v, want ErrClosed at once", err, time.Since(start))
	}
	c.wantValues("free", "", "", "")
}

// TestURLClientsPausedNodes: with NewFromURLs's clients, a SET stuck on a paused node
// is still undone by the release queued behind it once the node resumes.
func TestURLClientsPausedNodes(t *testing.T) {
	servers := redistest.StartN(t, 5, redistest.Options{})
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = "redis://" + s.Addr()
	}
	client, err := redlock.NewFromURLs(urls, redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if l, err := client.TryAcquire(t.Context(), "warm", time.Second); err != nil {
		t.Fatal(err)
	} else {
		l.Release(t.Context())
	}
	servers[0].Pause()
	servers[1].Pause()
	lock, err := client.TryAcquire(t.Context(), "url-paused", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	servers[0].Resume()
	servers[1].Resume()
	client.Close() // waits for the stuck SETs and the DELs behind them
	c := &cluster{t: t, servers: servers[:2], admin: []*redis.Client{servers[0].Client(), servers[1].Client()}}
	c.wantValues("url-paused", "", "")
}

// TestUntilAfterReleaseAndLoss: a Lock that was released, handed off or proven lost
// reports no validity after that moment, since callers check Until before side effects.
func TestUntilAfterReleaseAndLoss(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	ctx := t.Context()

	lock, err := c.client.TryAcquire(ctx, "until", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); lock.Until().After(now) {
		t.Errorf("after Release: Until %v is %v ahead", lock.Until(), lock.Until().Sub(now))
	}

	holder, err := c.client.TryAcquire(ctx, "until", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(ctx, c.client, "until", time.Minute)
	eventually(t, "the waiter's offer", func() bool { return c.client.Offered("until") })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := wantResult(t, "the waiter", waiter).lock
	if now := time.Now(); holder.Until().After(now) {
		t.Errorf("after a handoff: the old lock's Until is %v ahead", holder.Until().Sub(now))
	}
	if !next.Until().After(time.Now().Add(50 * time.Second)) {
		t.Errorf("the new lock's Until %v: want about a minute ahead", next.Until())
	}

	next.WaitForCalls()
	for _, a := range c.admin {
		if err := a.Set(ctx, "until", "intruder", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := next.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend with another token on every node: %v, want ErrLockLost", err)
	}
	if now := time.Now(); next.Until().After(now) {
		t.Errorf("after a proven loss: Until is %v ahead", next.Until().Sub(now))
	}
}

// TestExtendUnprovenKeepsTheLock: an Extend whose majority came too late for the new
// TTL proves nothing new, but the lock is still held until its old Until: the error
// is ErrUnavailable, not ErrLockLost, and Until stays.
func TestExtendUnprovenKeepsTheLock(t *testing.T) {
	clock := &jumpClock{}
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Clock: clock})
	lock, err := c.client.TryAcquire(t.Context(), "unproven", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	until := lock.Until()
	clock.set(2 * time.Second) // the Extend appears to take 2 s: longer than its TTL
	err = lock.Extend(t.Context(), time.Second)
	clock.set(0)
	if !errors.Is(err, redlock.ErrUnavailable) || errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend slower than its TTL within the old validity: got %v, want ErrUnavailable", err)
	}
	if !lock.Until().Equal(until) {
		t.Fatalf("Until moved from %v to %v", until, lock.Until())
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatalf("Release within the old validity: %v", err)
	}
}

// copyFirst is a go-redis hook that sends a copy of every release call to the node,
// on another connection, before the call itself: the call then finds the key deleted,
// as a copy that go-redis re-sends after a lost reply does.
type copyFirst struct {
	admin   *redis.Client
	release string // the SHA1 of release.lua
	source  string
}

func (copyFirst) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h copyFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.copy(ctx, cmd)
		return next(ctx, cmd)
	}
}
func (h copyFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.copy(ctx, cmd)
		}
		return next(ctx, cmds)
	}
}
func (h copyFirst) copy(ctx context.Context, cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 || (args[1] != h.release && args[1] != h.source) {
		return
	}
	copied := append([]any{"eval", h.source}, args[2:]...)
	_ = h.admin.Do(ctx, copied...).Err()
}

// TestReleaseAfterAnEarlierCopy: a release whose earlier copy already deleted the key
// on every node (a reply lost, the call re-sent) reports success, not a lost lock.
func TestReleaseAfterAnEarlierCopy(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	src, err := os.ReadFile("scripts/release.lua")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(src)
	rdbs := redistest.Clients(servers)
	for i, rdb := range rdbs {
		rdb.AddHook(copyFirst{servers[i].Client(), hex.EncodeToString(sum[:]), string(src)})
	}
	client, err := redlock.New(rdbs, redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	lock, err := client.TryAcquire(t.Context(), "copied", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatalf("Release after its copy deleted the key: %v", err)
	}
}

// TestUntilStaysBackAfterALossInFlight: a loss recorded while an Extend is out (as
// KeepAlive records a suspension it detects) sticks: the Extend that then succeeds
// must not move Until past the loss, and it reports the lock lost.
func TestUntilStaysBackAfterALossInFlight(t *testing.T) {
	c, gate, others := gatedCluster(t)
	ctx := t.Context()
	lock, err := c.client.TryAcquire(ctx, "suspended", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	extended := heldExtend(t, lock, gate, others)
	lostAt := time.Now()
	lock.LoseAt(lostAt)
	gate.release()
	others.release()
	if err := <-extended; !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend that ran across the loss: %v, want ErrLockLost", err)
	}
	if u := lock.Until(); u.After(lostAt) {
		t.Errorf("Until moved %v past the loss", u.Sub(lostAt))
	}
	if err := lock.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend after the loss: %v, want ErrLockLost", err)
	}
	_ = lock.Release(ctx)
}
