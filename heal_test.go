package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestHealRestartedNode: a node of a held lock restarts empty; the next Extend proves
// the lock still held by the others and puts the key back on that node.
func TestHealRestartedNode(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	lock, err := c.client.TryAcquire(t.Context(), "healed", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls() // a majority decided: the other SETs may still be out
	c.servers[0].Restart()
	c.wantValues("healed", "", lock.Token(), lock.Token())
	if err := lock.Extend(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	c.wantValues("healed", repeat(lock.Token(), 3)...)
	if pttl := c.admin[0].PTTL(t.Context(), "healed").Val(); pttl < 9*time.Second {
		t.Fatalf("healed key's PTTL %v, want about 10 s", pttl)
	}
}

// TestHealByKeepAlive: the same, with the renewals of KeepAlive doing the healing.
func TestHealByKeepAlive(t *testing.T) {
	const ttl = time.Second // KeepAlive needs ttl ≥ 20 × NodeTimeout
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	lock, err := c.client.TryAcquire(t.Context(), "kept", ttl)
	if err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls() // else node 3's SET may land after the restart, and no healing is seen
	lockCtx, stop := lock.KeepAlive(t.Context())
	defer stop()
	c.servers[2].Restart()
	eventually(t, "a renewal to heal the restarted node", func() bool {
		return c.admin[2].Get(t.Context(), "kept").Val() == lock.Token()
	})
	if lockCtx.Err() != nil {
		t.Fatalf("lock lost: %v", context.Cause(lockCtx))
	}
	stop()
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestHealKeepsBareMajority: a lock granted on a bare majority (3 of 5, two nodes held
// by a stale key) spreads to the other two once the stale keys expire, so it then
// survives losing two more nodes. Without healing it would be lost.
func TestHealKeepsBareMajority(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	for _, a := range c.admin[3:] {
		a.Set(ctx, "bare", "stale", 300*time.Millisecond)
	}
	lock, err := c.client.TryAcquire(ctx, "bare", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stale keys to expire", func() bool {
		return c.admin[3].Exists(ctx, "bare").Val()+c.admin[4].Exists(ctx, "bare").Val() == 0
	})
	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	c.wantValues("bare", repeat(lock.Token(), 5)...)

	c.servers[0].Kill()
	c.servers[1].Restart() // empty
	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend with one node killed and one restarted empty: %v", err)
	}
	lock.WaitForCalls()
	if got := c.admin[1].Get(ctx, "bare").Val(); got != lock.Token() {
		t.Fatalf("restarted node holds %q, want the lock's token", got)
	}
}

// TestHealNeverRevivesALostLock: when too few nodes still hold the token, Extend fails
// and puts the key back nowhere, even while the lock's own validity has time left.
func TestHealNeverRevivesALostLock(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	lock, err := c.client.TryAcquire(ctx, "gone", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	c.servers[0].Restart()
	c.servers[1].Restart()
	if err := lock.Extend(ctx, 10*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend with the key on 1 of 3 nodes: got %v, want ErrLockLost", err)
	}
	lock.WaitForCalls()
	c.wantValues("gone", "", "", lock.Token())
	if err := lock.Extend(ctx, 10*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("second Extend: got %v, want ErrLockLost", err)
	}
	lock.WaitForCalls()
	c.wantValues("gone", "", "", lock.Token())
}

// TestHealRespectsFencing: with fencing, a node restarted empty is healed and gets its
// counter back to the lock's token; a node whose counter is above the lock's token (a
// later proposal reached it) is not healed.
func TestHealRespectsFencing(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{Fencing: true})
	ctx := t.Context()
	lock, err := c.client.TryAcquire(ctx, "fenced-heal", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	fence := strconv.FormatUint(lock.Fence(), 10)
	c.servers[0].Restart() // loses the key and the counter
	c.admin[1].Del(ctx, "fenced-heal")
	c.admin[1].Set(ctx, "fenced-heal:fence", lock.Fence()+5, 0)
	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	tok := lock.Token()
	c.wantValues("fenced-heal", tok, "", tok, tok, tok)
	if got := c.admin[0].Get(ctx, "fenced-heal:fence").Val(); got != fence {
		t.Fatalf("healed node's counter %q, want the lock's token %s", got, fence)
	}
	if got := c.admin[1].Get(ctx, "fenced-heal:fence").Val(); got != strconv.FormatUint(lock.Fence()+5, 10) {
		t.Fatalf("refusing node's counter changed to %q", got)
	}
}
