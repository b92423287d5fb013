package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// countingObserver is the cheap Observer a metrics exporter amounts to: per event a
// few atomic adds, by op, outcome and node result, and the locks-held gauge.
type countingObserver struct {
	events   [5][8]atomic.Int64 // [op][outcome]
	replies  [4]atomic.Int64    // by redlock.Result
	held     atomic.Int64
	refusals atomic.Int64
}

func (o *countingObserver) Observe(_ context.Context, e redlock.Event) {
	o.events[e.Op%5][e.Outcome%8].Add(1)
	for _, n := range e.Nodes {
		o.replies[n.Result%4].Add(1)
	}
	if e.Op == redlock.OpAcquire && e.Outcome == redlock.OutcomeOK {
		o.held.Add(1)
	}
	if e.Ended {
		o.held.Add(-1)
	}
	o.refusals.Add(int64(e.FenceRefusals))
}

// observerCases are the two sides of BenchmarkObserver.
var observerCases = []struct {
	name string
	obs  func() redlock.Observer
}{
	{"off", func() redlock.Observer { return nil }},
	{"on", func() redlock.Observer { return &countingObserver{} }},
}

// BenchmarkObserver: the uncontended workload of this library (G goroutines, a fresh
// key per acquire-release cycle, N=3) with Options.Observer unset and set to a
// counting Observer, alternating; b.N is the number of cycles. Compare with
// benchstat -col /obs: the cost of the hook is the cycles/s ratio on/off.
func BenchmarkObserver(b *testing.B) {
	for _, g := range []int{1, 8} {
		for _, oc := range observerCases {
			b.Run(fmt.Sprintf("obs=%s/G=%d/N=3", oc.name, g), func(b *testing.B) {
				l := lib{name: "redlock-obs-" + oc.name, open: func(addrs []string) (*setup, error) {
					return openRedlockWith(addrs, redlock.Options{Observer: oc.obs()})
				}}
				benchCycles(b, l, g, 3)
			})
		}
	}
}

// TestObserverCounts runs the workload with the counting Observer for a moment: one
// granted acquire and one ending release per cycle, the gauge back at zero.
func TestObserverCounts(t *testing.T) {
	obs := &countingObserver{}
	s, err := openRedlockWith(redlocktest.Addrs(startNodes(t, 3)), redlock.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	const cycles = 64
	st := runCycles(context.Background(), s, 8, freshKeys("obs", cycles))
	if st.Errors() != 0 {
		t.Fatalf("%d errors; first: %v", st.Errors(), st.FirstErr)
	}
	acquired := obs.events[redlock.OpAcquire][redlock.OutcomeOK].Load()
	released := obs.events[redlock.OpRelease][redlock.OutcomeOK].Load()
	if acquired != cycles || released != cycles || obs.held.Load() != 0 || obs.replies[redlock.ResultYes].Load() < 2*2*cycles {
		t.Fatalf("%d acquires, %d releases, %d held, %d yes replies for %d cycles", acquired, released, obs.held.Load(), obs.replies[redlock.ResultYes].Load(), cycles)
	}
}
