package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// TestReleaseSkipsUnsentAcquires: a lock released while its SET to a slow node still
// waits in that node's queue costs that node nothing. Node 3's sender is busy with a
// held call; K locks on one key are granted by nodes 1 and 2 and released, their SETs
// to node 3 still queued. Once node 3 answers, none of those SETs or releases is sent
// (before Lock.skipUnsent each lock cost node 3 a SET and a release, one batch each,
// since a release parked behind a SET cuts the batch for its key), every Release
// returned nil, and node 3 holds no key.
func TestReleaseSkipsUnsentAcquires(t *testing.T) {
	const K = 20
	var trips tripCounter
	c, gate, _ := gatedClusterWith(t, &trips)
	ctx := t.Context()
	other := busyNode3(t, c, gate)
	locks := make([]*redlock.Lock, K)
	for k := range locks {
		l, err := c.client.TryAcquire(ctx, "backlog", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", k, err)
		}
		locks[k] = l
	}
	if n := c.client.Queued(2); n != K {
		t.Fatalf("%d calls queued for node 3, want the %d SETs", n, K)
	}
	before := trips.trips.Load()
	gate.release()
	for _, l := range locks {
		l.WaitForCalls()
	}
	if got := trips.trips.Load() - before; got != 0 {
		t.Errorf("node 3 got %d round trips for %d locks released before their SETs left, want 0", got, K)
	}
	c.wantValues("backlog", "", "", "")
	release(t, other)
}

// TestReleaseAfterSentAcquireLands: the SETs that did leave still get their release.
// Lock "other" has run its SET on node 3 (the reply is held) when it is released; once
// the reply comes, the release follows it there and node 3 holds no key. A lock that
// was extended before its release, whose SET to node 3 waited in the queue, is
// released there as before: only the winning round's own calls are skipped.
func TestReleaseAfterSentAcquireLands(t *testing.T) {
	c, gate, _ := gatedCluster(t)
	ctx := t.Context()
	other := busyNode3(t, c, gate)
	release(t, other) // node 3's delete waits for the held reply
	extended, err := c.client.TryAcquire(ctx, "extended", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := extended.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err) // nodes 1 and 2; node 3's extend is parked behind its SET
	}
	release(t, extended)
	gate.release()
	other.WaitForCalls()
	extended.WaitForCalls()
	c.wantValues("other", "", "", "")
	c.wantValues("extended", "", "", "")
}

// TestReleaseSkipsUnsentUnderRace: locks released while their SETs to node 3 may be
// leaving at that very moment. Node 3 answers after a random pause of up to 2 ms, so
// its sender is now idle, now busy; 200 locks on one key are taken and released in a
// row, and each SET to node 3 is either skipped with its release or sent and then
// deleted. Afterwards node 3 holds no key and every Release returned nil.
func TestReleaseSkipsUnsentUnderRace(t *testing.T) {
	c, _, _ := gatedClusterWith(t, jitterHook{})
	ctx := t.Context()
	var last *redlock.Lock
	for k := range 200 {
		l, err := c.client.TryAcquire(ctx, "race", time.Minute)
		if err != nil {
			t.Fatalf("acquire %d: %v", k, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", k, err)
		}
		last = l
	}
	last.WaitForCalls()
	// The calls of earlier locks may still be out behind the last one's: wait for the
	// node's queue to drain, then look.
	eventually(t, "node 3's queue drained", func() bool { return c.client.Queued(2) == 0 })
	probe, err := c.client.TryAcquire(ctx, "race", time.Minute) // queued behind them all
	if err != nil {
		t.Fatal(err)
	}
	probe.WaitForCalls()
	tok := probe.Token()
	c.wantValues("race", tok, tok, tok)
	release(t, probe)
	probe.WaitForCalls()
	c.wantValues("race", "", "", "")
}

// TestReleaseSkipsUnsentKeepsALossSeen (found by review): a lock granted by nodes 1
// and 2 while its SET to node 3 waits in node 3's queue. Then node 1 loses our key
// (a restart without persistence) and another holder takes nodes 1 and 3: a majority.
// Release hears "another token" from node 1 and "deleted" from node 2; node 3 decides.
// Asked, node 3 would refuse the queued SET and answer the release "another token":
// ErrLockLost. Skipped, it must count the same way; counting it as "our token is
// gone" made Release return nil although another holder had a majority.
func TestReleaseSkipsUnsentKeepsALossSeen(t *testing.T) {
	c, gate, others := gatedCluster(t)
	ctx := t.Context()
	other := busyNode3(t, c, gate)
	l, err := c.client.TryAcquire(ctx, "masked", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		if err := c.admin[i].Set(ctx, "masked", "foreign", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	others.armed.Store(true) // so we know Release has started before node 3 moves on
	done := make(chan error, 1)
	go func() { done <- l.Release(ctx) }()
	waitHeld(t, others)
	others.armed.Store(false)
	gate.release()
	others.release()
	err = <-done
	t.Logf("Release: %v; values %q", err, c.values("masked"))
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Release = %v, want ErrLockLost (another token holds nodes 1 and 3)", err)
	}
	l.WaitForCalls()
	release(t, other)
}

// jitterHook delays each call to a node by a random pause of up to 2 ms (a slow
// node, not a synchronisation).
type jitterHook struct{}

func (jitterHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (jitterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(rand.N(2 * time.Millisecond))
		return next(ctx, cmd)
	}
}
func (jitterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		time.Sleep(rand.N(2 * time.Millisecond))
		return next(ctx, cmds)
	}
}
