package safety

import (
	"fmt"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// reentrant returns the rows for reentrant locks (redlock.WithOwner): every worker is
// an owner of its own, and takes and releases a nested hold before each critical
// section, so the owners must exclude each other while each re-enters its own lock.
func reentrant() []*Scenario {
	return []*Scenario{{
		Name: "reentrant: an owner per worker, a nested hold taken and released per grant, kill 2 of 5 under load", Mode: Redlock5, Expect: Safe,
		Why: "holds of one owner share its lease, which the nested release leaves; other owners need a majority where the key is absent",
		run: func(t redlocktest.T) (*Report, error) {
			rep, _, err := nestedUnderKills(t, quick)
			return rep, err
		},
	}, {
		Name: "reentrant: the same, 30% of commands delivered twice, up to a TTL late", Mode: Redlock5, Expect: Safe,
		Why: "a hold is an id on the node: a copy adds or removes nothing twice, and no TTL is shortened",
		run: func(t redlocktest.T) (*Report, error) {
			rep, _, err := duplicatedRun(t, 101, Workload{Reentrant: true}, quick)
			if err == nil && rep.Nested == 0 {
				err = fmt.Errorf("no nested hold was granted")
			}
			return rep, err
		},
	}}
}

// nestedUnderKills runs the reentrant workload (an owner per worker, a nested hold per
// grant) with Clients of opts, killing 2 of the 5 nodes under load, and returns the
// nodes; it fails if nothing was granted after the kill or no nested hold was.
func nestedUnderKills(t redlocktest.T, opts redlock.Options) (*Report, []*redlocktest.Process, error) {
	var nodes []*redlocktest.Process
	rep, _, after := faultedWorkload(t, Workload{TTL: ttl, Reentrant: true}, opts, 2*time.Second, func(procs []*redlocktest.Process) {
		nodes = procs
		procs[0].Kill()
		procs[1].Kill()
	})
	switch {
	case after == 0:
		return rep, nodes, fmt.Errorf("no grant after the kill")
	case rep.Nested == 0:
		return rep, nodes, fmt.Errorf("no nested hold was granted")
	}
	return rep, nodes, nil
}
