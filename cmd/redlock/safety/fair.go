package safety

import (
	"fmt"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// fairOpts are the options of the fair rows' Clients: Options.Fair, the quick retries
// of the other rows, and the shortest entry lease the default node timeout allows
// (10 × 50 ms), so that an entry a late copy puts back blocks the queue briefly.
// Without fencing: New refuses Fair with Fencing today.
var fairOpts = func() redlock.Options {
	o := quick
	o.Fair, o.FairLease = true, 500*time.Millisecond
	return o
}()

// fair returns the rows for fair locks (Options.Fair): the workload's workers wait in
// the key's queue on every node, and the nodes grant the key to the head alone; in
// the reentrant row each worker is an owner whose nested hold joins its own key ahead
// of the queue. (The row with duplicates comes last: a row that kills nodes leaves
// go-redis dialling them for a second after it, which the leak check at the end of
// the tests would count.)
func fair() []*Scenario {
	return []*Scenario{{
		Name: "fair: every Client with Options.Fair, kill 2 of 5 under load", Mode: Redlock5, Expect: Safe,
		Why: "the queue only picks who may take the key; a grant still needs a majority where the key is absent",
		run: func(t redlocktest.T) (*Report, error) {
			var nodes []*redlocktest.Process
			rep, _, after := faultedWorkload(t, Workload{TTL: ttl}, fairOpts, 2*time.Second, func(procs []*redlocktest.Process) {
				nodes = procs
				procs[0].Kill()
				procs[1].Kill()
			})
			if after == 0 {
				return rep, fmt.Errorf("no grant after the kill")
			}
			return rep, queued(t, nodes[2:])
		},
	}, {
		Name: "fair reentrant: an owner per worker, a nested hold per grant, kill 2 of 5 under load", Mode: Redlock5, Expect: Safe,
		Why: "an owner's hold joins its own key ahead of the queue, never another's; the key goes with the last hold",
		run: func(t redlocktest.T) (*Report, error) {
			rep, nodes, err := nestedUnderKills(t, fairOpts)
			if err != nil {
				return rep, err
			}
			return rep, queued(t, nodes[2:])
		},
	}, {
		Name: "fair: the same, 30% of commands delivered twice, up to a TTL late", Mode: Redlock5, Expect: Safe,
		Why: "a late copy can put a finished waiter's entry back for one entry lease, never shorten a TTL or take a later lock's key",
		run: func(t redlocktest.T) (*Report, error) {
			rep, nodes, err := duplicatedRun(t, 201, Workload{}, fairOpts)
			if err == nil {
				err = queued(t, nodes)
			}
			return rep, err
		},
	}}
}

// queued checks that the workload's waiters queued: the key's ticket counter
// (redlock.FairKeys) is above 0 on at least one of nodes, read as soon as the run has
// ended (it lives two entry leases after the last renewal). Without it a row would
// pass just as well with Options.Fair ignored.
func queued(t redlocktest.T, nodes []*redlocktest.Process) error {
	_, _, counter := redlock.FairKeys("safety")
	for _, p := range nodes {
		if n, err := dial(t, p.Addr()).Get(t.Context(), counter).Int64(); err == nil && n > 0 {
			return nil
		}
	}
	return fmt.Errorf("no waiter drew a ticket: the Clients did not queue")
}
