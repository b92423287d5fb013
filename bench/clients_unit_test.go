package bench

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []int
		want float64
	}{
		{[]int{5, 5, 5, 5}, 1},
		{[]int{8, 0, 0, 0}, 0.25},   // one has everything: 1/n
		{[]int{1, 2, 3}, 36.0 / 42}, // (1+2+3)² / (3·(1+4+9))
		{[]int{10, 10, 10, 10, 10, 10, 10, 9}, 79.0 * 79 / (8 * 781)},
		{[]int{0, 0}, 0},
		{nil, 0},
	} {
		if got := jain(c.xs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// TestGrantLog: hand-overs are grants to another worker than the previous holder, the
// first grant is neither, and a call that never got the key counts towards the
// longest wait up to the run's stop.
func TestGrantLog(t *testing.T) {
	g := newGrantLog(3)
	at := func(ms int) time.Time { return g.base.Add(time.Duration(ms) * time.Millisecond) }
	for _, gr := range []struct{ worker, from, to int }{
		{0, 0, 1},  // first grant: no previous holder
		{0, 1, 2},  // self
		{1, 0, 3},  // hand-over, waited 3 ms
		{2, 0, 4},  // hand-over, 4 ms
		{2, 4, 5},  // self
		{0, 2, 9},  // hand-over, 7 ms
		{1, 3, 10}, // hand-over, 7 ms
	} {
		g.granted(gr.worker, at(gr.from), at(gr.to))
	}
	g.ended(at(5), at(30)) // cut short by the stop at the 7th grant (10 ms): 5 ms
	f := g.figures(7)
	if f.grants != 7 || f.handoffs != 4 || f.self != 2 {
		t.Errorf("%d grants, %d hand-overs, %d self; want 7, 4, 2", f.grants, f.handoffs, f.self)
	}
	if !slices.Equal(f.counts, []int{3, 2, 2}) || !slices.Equal(f.order, []int{0, 0, 1, 2, 2, 0, 1}) {
		t.Errorf("counts %v, order %v", f.counts, f.order)
	}
	ms := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	if !slices.Equal(f.waits, ms(3, 4, 7, 7)) || f.longest != 7*time.Millisecond {
		t.Errorf("waits %v, longest %v; want [3 4 7 7] ms, 7 ms", f.waits, f.longest)
	}
	// After the third grant (3 ms), when each of the 3 workers has had one: the calls
	// from 4 ms (1 ms) and from 5 ms (open, 5 ms up to the stop at 10 ms). The calls
	// from 2 and 3 ms began before.
	if f.longestLate != 5*time.Millisecond {
		t.Errorf("longest after the start %v, want 5ms", f.longestLate)
	}
	// The second grant (waited from 1 ms) went before the third (waiting since 0), the
	// fifth (from 4 ms) before the sixth (since 2 ms).
	if f.overtakes != 2 {
		t.Errorf("%d overtakes, want 2", f.overtakes)
	}
	// A call that failed long before the stop counts in full.
	g.ended(at(0), at(9))
	if f := g.figures(7); f.longest != 9*time.Millisecond {
		t.Errorf("longest %v after a 9 ms failed call, want 9ms", f.longest)
	}
	// Without a stop grant (fewer grants than asked), open calls count in full.
	if f := g.figures(100); f.longest != 25*time.Millisecond {
		t.Errorf("longest %v with no stop, want 25ms", f.longest)
	}
}

// TestRoundRobin: K calls give K lockers of K different setups, and the next K again.
func TestRoundRobin(t *testing.T) {
	var setups []*setup
	for i := range 3 {
		setups = append(setups, &setup{newLocker: func() locker { return &tagLocker{i} }})
	}
	next := roundRobin(setups)
	var got []int
	for range 6 {
		got = append(got, next().(*tagLocker).setup)
	}
	if !slices.Equal(got, []int{0, 1, 2, 0, 1, 2}) {
		t.Errorf("lockers from setups %v, want 0 1 2 0 1 2", got)
	}
}

type tagLocker struct{ setup int }

func (*tagLocker) Lock(context.Context, string) error { return nil }
func (*tagLocker) Unlock(context.Context) error       { return nil }

// TestClientsOwnPools: the K Clients of a multi-Client workload share no go-redis
// client, and after the warm-up each has used its own pool to every node it locks on
// (the worker of each Client did work through it).
func TestClientsOwnPools(t *testing.T) {
	for _, l := range clientLibs {
		t.Run(l.name, func(t *testing.T) {
			run := prepareClients(t, l, startNodes(t, nodesOf(l, 3)), clientsK)
			seen := map[redis.UniversalClient]bool{}
			for i, s := range run.setups {
				for j, r := range s.rdbs {
					if seen[r] {
						t.Fatalf("Client %d shares its go-redis client for node %d", i, j)
					}
					seen[r] = true
					if n := r.PoolStats().TotalConns; n == 0 {
						t.Errorf("Client %d: no connection to node %d after the warm-up", i, j)
					}
				}
			}
			if want := clientsK * nodesOf(l, 3); len(seen) != want {
				t.Errorf("%d go-redis clients, want %d", len(seen), want)
			}
		})
	}
}

// TestWaitBound: with 8 workers a waiter has 7 ahead of it; the bound is twice 7 cycles.
func TestWaitBound(t *testing.T) {
	if got := waitBound(8, time.Millisecond); got != 14*time.Millisecond {
		t.Errorf("waitBound(8, 1ms) = %v, want 14ms", got)
	}
}
