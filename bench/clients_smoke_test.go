package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/benchload"
)

// checkClientsHot runs the multi-Client hot key of l for a moment and checks that the
// grant log agrees with benchload's own counts, and for fair mode that the workers
// took turns.
func checkClientsHot(t *testing.T, l lib, n int) {
	const want = 80
	st, f := prepareClients(t, l, startNodes(t, n), clientsK).hot(want, 20*time.Second)
	if st.Violations != 0 || st.ReleaseErrs != 0 {
		t.Fatalf("%d violations, %d failed releases (first error: %v)", st.Violations, st.ReleaseErrs, st.FirstErr)
	}
	if st.Acquisitions < want {
		t.Fatalf("%d acquisitions in %v, want %d (gave up %d times; first error: %v)", st.Acquisitions, st.Elapsed, want, st.GaveUp, st.FirstErr)
	}
	// The log counts what benchload counts, grant by grant.
	if f.grants != st.Acquisitions || f.handoffs != st.Handoffs || f.self != st.Self {
		t.Errorf("log: %d grants, %d hand-overs, %d self; benchload: %d, %d, %d", f.grants, f.handoffs, f.self, st.Acquisitions, st.Handoffs, st.Self)
	}
	if sum(f.counts) != f.grants || len(f.order) != f.grants || len(f.waits) != f.handoffs {
		t.Errorf("per-worker counts sum to %d, %d in order, %d waits; want %d grants and %d waits", sum(f.counts), len(f.order), len(f.waits), f.grants, f.handoffs)
	}
	if top := benchload.Percentile(f.waits, 1); top > f.longest || !slices.IsSorted(f.waits) {
		t.Errorf("longest wait %v below the longest hand-over wait %v, or waits not sorted", f.longest, top)
	}
	if j := jain(f.counts); j < 1.0/clientsK || j > 1 {
		t.Errorf("Jain's index %v outside [1/%d, 1]", j, clientsK)
	}
	if !l.single && l.name != "redsync" && st.GaveUp != 0 {
		t.Errorf("%s gave up %d times (first error: %v)", l.name, st.GaveUp, st.FirstErr)
	}
	if l.name == "redlock-fair" {
		checkTurns(t, f)
	}
	t.Logf("%d grants in %v: %d hand-overs, %d self, per worker %v, Jain %.3f, wait p99 %v, longest %v", f.grants, st.Elapsed.Round(time.Millisecond), f.handoffs, f.self, f.counts, jain(f.counts), benchload.Percentile(f.waits, 0.99), f.longest)
}

// checkTurns: in arrival order, with every worker back in the queue at once after
// its release, the workers' grants differ by at most one, give or take a slow
// renewal; 2 is allowed. (Random winners, as in the default mode, spread 80 grants
// over 8 workers by about ±3.) The grants are counted from the first grant after
// every worker has been granted once: until then a fair Acquire's first try may go
// before waiters that are still drawing their tickets (docs/design.md, "One
// Acquire"; the nemesis allows 250 ms for it), and the run starts with 8 such Acquires.
func checkTurns(t *testing.T, f hotFigures) {
	seen := map[int]bool{}
	start := len(f.order)
	for i, w := range f.order {
		seen[w] = true
		if len(seen) == clientsK {
			start = i + 1
			break
		}
	}
	counts := make([]int, clientsK)
	for _, w := range f.order[start:] {
		counts[w]++
	}
	if len(f.order)-start < 4*clientsK {
		t.Fatalf("fair mode: %d grants after every worker's first (order %v), too few to judge turns", len(f.order)-start, f.order)
	}
	lo, hi := slices.Min(counts), slices.Max(counts)
	if hi-lo > 2 {
		t.Errorf("fair mode: grants per worker after every worker's first %v range over %d, want at most 2 (order %v)", counts, hi-lo, f.order)
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}
