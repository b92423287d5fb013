package safety

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

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
			rep, _, after := faultedWorkload(t, Workload{TTL: ttl, Reentrant: true}, 2*time.Second, func(procs []*redlocktest.Process) {
				procs[0].Kill()
				procs[1].Kill()
			})
			switch {
			case after == 0:
				return rep, fmt.Errorf("no grant after the kill")
			case rep.Nested == 0:
				return rep, fmt.Errorf("no nested hold was granted")
			}
			return rep, nil
		},
	}, {
		Name: "reentrant: the same, 30% of commands delivered twice, up to a TTL late", Mode: Redlock5, Expect: Safe,
		Why: "a hold is an id on the node: a copy adds or removes nothing twice, and no TTL is shortened",
		run: func(t redlocktest.T) (*Report, error) {
			procs := redlocktest.StartN(t, 5, redlocktest.Options{})
			var dups []*redlocktest.Duplicator
			seed := uint64(101)
			clients := newClients(t, 2, func() []redis.UniversalClient {
				rdbs := nodeClients(t, procs)
				for _, rdb := range rdbs {
					dups = append(dups, redlocktest.Duplicate(t, rdb.(*redis.Client), redlocktest.DuplicateOptions{
						Fraction: 0.3, MaxDelay: ttl, Seed: seed,
					}))
					seed++
				}
				return rdbs
			}, quick)
			rep := Workload{Clients: clients, TTL: ttl, Reentrant: true}.Run(t.Context(), 2*time.Second)
			sent := 0
			for _, d := range dups {
				_, n := d.Counts()
				sent += n
			}
			switch {
			case sent == 0:
				return rep, fmt.Errorf("no command was delivered twice")
			case rep.Nested == 0:
				return rep, fmt.Errorf("no nested hold was granted")
			}
			return rep, nil
		},
	}}
}
