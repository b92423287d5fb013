package redlock_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// setCounters sets key's fencing counter on every node of c to v (a decimal string, or
// anything else for a counter damaged by hand).
func (c *cluster) setCounters(key, v string) {
	c.t.Helper()
	for i, a := range c.admin {
		for _, name := range redlock.FenceKeys(a, key) {
			if err := a.Set(context.Background(), name, v, 0).Err(); err != nil {
				c.t.Fatalf("SET %s on node %d: %v", name, i+1, err)
			}
		}
	}
}

// TestFenceCounterEdges: with counters above 2^53 and up to 2^63 − 2, the next token is
// exactly one above, and every node stores it exactly. The scripts used Lua numbers
// (doubles): above 2^53 a counter was read rounded, and near 2^63 the reply turned
// negative, so that Acquire reported "too few nodes".
func TestFenceCounterEdges(t *testing.T) {
	opts := redlock.Options{Fencing: true, MaxAttempts: 3}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	for _, start := range []int64{1<<53 - 1, 1 << 53, 1<<53 + 1, 1e17, math.MaxInt64 - 2} {
		key := "{edge}" + strconv.FormatInt(start, 10)
		c.setCounters(key, strconv.FormatInt(start, 10))
		fresh := c.newClient(opts)   // no counter cached: phase 1 reads them
		for step := range int64(2) { // then from the cache
			want := start + 1 + step
			lock, err := fresh.TryAcquire(ctx, key, time.Second)
			if err != nil {
				t.Fatalf("counter %d: want token %d, got %v", start, want, err)
			}
			if lock.Fence() != uint64(want) {
				t.Errorf("counter %d: token %d, want %d", start, lock.Fence(), want)
			}
			if err := lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		fresh.Close() // every call it sent has returned
		// A majority took the last token, stored exactly; a node that missed a round
		// (its key still held by the previous lock) may be one behind.
		last, behind := strconv.FormatInt(start+2, 10), strconv.FormatInt(start+1, 10)
		got := c.values(redlock.FenceKeys(c.admin[0], key)[0])
		n := 0
		for _, v := range got {
			if v == last {
				n++
			} else if v != behind {
				n = -len(got)
			}
		}
		if n < 2 {
			t.Errorf("counter %d: nodes hold %q; want %s on a majority, else %s", start, got, last, behind)
		}
	}
}

// TestFenceCounterAtMax: a counter at 2^63 − 1 leaves no higher token. Acquire fails
// at once with ErrFenceExhausted (also ErrUnavailable), naming the counter; no lock key
// is left and no counter goes down or wraps. This holds when phase 1 reads the
// counter, and for a Client that remembers a lower counter and is refused.
func TestFenceCounterAtMax(t *testing.T) {
	opts := redlock.Options{Fencing: true}
	c := newCluster(t, 3, redistest.Options{}, opts)
	maxText := strconv.FormatInt(math.MaxInt64, 10)
	check := func(what string, client *redlock.Client, key string) {
		t.Helper()
		err, took := acquireNoDeadline(t, client, key)
		if !errors.Is(err, redlock.ErrFenceExhausted) || !errors.Is(err, redlock.ErrUnavailable) {
			t.Fatalf("%s: got %v, want ErrFenceExhausted and ErrUnavailable", what, err)
		}
		name := redlock.FenceKeys(c.admin[0], key)[0]
		if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), maxText) {
			t.Errorf("%s: %q does not name the counter %s and its value", what, err, name)
		}
		if took > 2*time.Second {
			t.Errorf("%s: Acquire took %v to give up, want at once", what, took)
		}
		c.wantValues(key, "", "", "")
		c.wantValues(name, repeat(maxText, 3)...)
	}

	c.setCounters("{top}read", maxText)
	check("counter read in phase 1", c.newClient(opts), "{top}read")

	cached := c.newClient(opts)
	lock, err := cached.TryAcquire(t.Context(), "{top}cached", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Release returns at a majority: the last delete may still be on its way.
	lock.WaitForCalls()
	c.setCounters("{top}cached", maxText) // the Client still remembers 1
	check("proposal refused", cached, "{top}cached")
	// The refused attempt returned at a majority: its call to the third node may still
	// be out, and once the counters are gone it would begin a lease there with its
	// proposal, which phase 1 below could then read.
	cached.WaitForCalls()

	// An operator resets the counters: the Client that saw the top takes the lock
	// again, with a low token, without a restart.
	for _, a := range c.admin {
		a.Del(t.Context(), redlock.FenceKeys(a, "{top}cached")...)
	}
	lock, err = cached.TryAcquire(t.Context(), "{top}cached", time.Second)
	if err != nil {
		t.Fatalf("after the counters were reset: %v", err)
	}
	if lock.Fence() != 1 {
		t.Errorf("after the counters were reset: token %d, want 1", lock.Fence())
	}
	_ = lock.Release(t.Context())
}

// TestFenceCounterGarbage: a counter that is not a decimal integer from 0 to 2^63 − 1
// is an error naming it, one no retry can fix, never taken as 0 (or, for "0x10", as
// 16): Acquire fails at once, leaves the counter as it was and sets no lock key.
func TestFenceCounterGarbage(t *testing.T) {
	opts := redlock.Options{Fencing: true}
	c := newCluster(t, 3, redistest.Options{}, opts)
	addrs := redistest.Addrs(c.servers)
	for i, bad := range []string{"garbage", "-3", "0x10", "1e3", "007", " 5", "", "9223372036854775808", "18446744073709551615"} {
		key := "{bad}" + strconv.Itoa(i)
		c.setCounters(key, bad)
		err, took := acquireNoDeadline(t, c.newClient(opts), key)
		name := redlock.FenceKeys(c.admin[0], key)[0]
		if err == nil || !strings.Contains(err.Error(), "fencing counter "+name) {
			t.Errorf("counter %q: got %v, want an error naming %s", bad, err, name)
			continue
		}
		wantPermanent(t, err, took, "fencing counter", addrs...)
		c.wantValues(key, "", "", "")
		c.wantValues(name, repeat(bad, 3)...)
	}
}
