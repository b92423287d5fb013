package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/benchload"
	"github.com/redlock-go/redlock/redlocktest"
)

// TestSmoke runs every workload of every library for a moment on real nodes and
// checks the harness's numbers add up: no errors, no violations, latencies
// recorded and ordered. It measures nothing.
func TestSmoke(t *testing.T) {
	for _, l := range libs {
		n := nodesOf(l, *nodeCount)
		for _, g := range []int{1, 8} {
			t.Run(fmt.Sprintf("Uncontended/lib=%s/G=%d/N=%d", l.name, g, n), func(t *testing.T) {
				checkCycles(t, l, g, n, 64)
			})
		}
		t.Run(fmt.Sprintf("HotKey/lib=%s/G=8/N=%d", l.name, n), func(t *testing.T) {
			checkHotKey(t, l, n)
		})
	}
	for _, l := range clientLibs {
		n := nodesOf(l, *nodeCount)
		t.Run(fmt.Sprintf("Clients/hot/lib=%s/K=%d/N=%d", l.name, clientsK, n), func(t *testing.T) {
			checkClientsHot(t, l, n)
		})
		t.Run(fmt.Sprintf("Clients/uncontended/lib=%s/K=%d/N=%d", l.name, clientsK, n), func(t *testing.T) {
			run := prepareClients(t, l, startNodes(t, n), clientsK)
			checkCyclesOf(t, l.name, run.all, clientsK, 64)
		})
	}
	for _, n := range []int{1, 3, 7} {
		for _, l := range libs {
			if l.single {
				continue
			}
			t.Run(fmt.Sprintf("Scaling/lib=%s/G=8/N=%d", l.name, n), func(t *testing.T) {
				checkCycles(t, l, 8, n, 32)
			})
		}
	}
}

func checkCycles(t *testing.T, l lib, g, n, cycles int) {
	checkCyclesOf(t, l.name, open(t, l, startNodes(t, n)), g, cycles)
}

// checkCyclesOf runs cycles uncontended cycles of s (library name) with g goroutines.
func checkCyclesOf(t *testing.T, name string, s *setup, g, cycles int) {
	keys := freshKeys("smoke:"+name, cycles)
	st := runCycles(context.Background(), s, g, keys)
	if st.Errors() != 0 {
		t.Fatalf("%d failed acquires, %d failed releases; first: %v", st.AcquireErrs, st.ReleaseErrs, st.FirstErr)
	}
	elapsed := st.Elapsed
	if elapsed <= 0 {
		t.Errorf("elapsed = %v, want > 0", elapsed)
	}
	if st.Cycles != cycles || len(st.Acquire) != cycles {
		t.Fatalf("%d cycles, %d latencies recorded, want %d", st.Cycles, len(st.Acquire), cycles)
	}
	for i, d := range st.Acquire {
		if d <= 0 {
			t.Fatalf("cycle %d: acquire took %v, want > 0 (not recorded?)", i, d)
		}
	}
	if p50, p99 := benchload.Percentile(st.Acquire, 0.5), benchload.Percentile(st.Acquire, 0.99); p50 > p99 || p99 > elapsed {
		t.Errorf("acquire p50 %v, p99 %v, run %v: want p50 ≤ p99 ≤ run", p50, p99, elapsed)
	}
	// Every lock was released: the same keys can be taken again at once.
	if st := runCycles(context.Background(), s, g, keys); st.Errors() != 0 {
		t.Fatalf("keys not released: %v", st.FirstErr)
	}
}

func checkHotKey(t *testing.T, l lib, n int) {
	s := open(t, l, startNodes(t, n))
	const want = 40
	st := benchload.HotKey(context.Background(), s.newLocker, freshKeys("smoke-hot:"+l.name, 1)[0], benchload.HotConfig{
		Workers:      8,
		Hold:         hotHold,
		Acquisitions: want,
		MaxDuration:  20 * time.Second,
		WaitTimeout:  10 * time.Second,
	})
	if st.Violations != 0 || st.ReleaseErrs != 0 {
		t.Fatalf("%d violations, %d failed releases (first error: %v)", st.Violations, st.ReleaseErrs, st.FirstErr)
	}
	if st.Acquisitions < want {
		t.Fatalf("%d acquisitions in %v, want %d (gave up %d times; first error: %v)", st.Acquisitions, st.Elapsed, want, st.GaveUp, st.FirstErr)
	}
	// Only the very first acquisition has no previous holder.
	if st.Handoffs+st.Self != st.Acquisitions-1 {
		t.Errorf("handoffs %d + self %d != acquisitions %d − 1", st.Handoffs, st.Self, st.Acquisitions)
	}
	if len(st.Waits) != st.Handoffs {
		t.Errorf("%d waits recorded for %d handoffs", len(st.Waits), st.Handoffs)
	}
	if !slices.IsSorted(st.Waits) {
		t.Error("waits not sorted")
	}
	if p50, p99, top := benchload.Percentile(st.Waits, 0.5), benchload.Percentile(st.Waits, 0.99), benchload.Percentile(st.Waits, 1); p50 > p99 || p99 > top || top > st.Elapsed+10*time.Second {
		t.Errorf("wait p50 %v, p99 %v, max %v: want ordered and within the run", p50, p99, top)
	}
	if !l.single && l.name != "redsync" && st.GaveUp != 0 {
		t.Errorf("%s gave up %d times (first error: %v)", l.name, st.GaveUp, st.FirstErr)
	}
	t.Logf("%d acquisitions in %v: %d handoffs, %d self, wait p99 %v", st.Acquisitions, st.Elapsed.Round(time.Millisecond), st.Handoffs, st.Self, benchload.Percentile(st.Waits, 0.99))
}

// TestSharedNodes: nodes started for one test outlive it and serve the next one, which
// gets the same processes back rather than new ones.
func TestSharedNodes(t *testing.T) {
	var first []*redlocktest.Process
	t.Run("start", func(t *testing.T) { first = startNodes(t, 2) })
	if t.Failed() || t.Skipped() || len(first) != 2 {
		return
	}
	t.Run("reuse", func(t *testing.T) {
		again := startNodes(t, 1)
		if again[0] != first[0] {
			t.Errorf("startNodes(1) after startNodes(2) gave a new node %s", again[0].Addr())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, n := range first {
			if n.PID() == 0 || n.Client().Ping(ctx).Err() != nil {
				t.Errorf("node %s (pid %d) stopped with the test that started it", n.Addr(), n.PID())
			}
		}
	})
}
