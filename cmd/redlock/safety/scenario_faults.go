package safety

// The scenarios of restarts, holder pauses, clock skew, partitions and duplicate
// delivery; scenario.go has the scenario type, node faults and the shared helpers.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

func restarts() []*Scenario {
	// T7–T9: A holds nodes 1–3 (it cannot reach 4 and 5), node 3 restarts, and B, which
	// reaches only 3–5, tries to take the lock.
	t7 := func(restart func(p *redlocktest.Process), pers redlocktest.Persistence) func(t redlocktest.T) (*Report, error) {
		return func(t redlocktest.T) (*Report, error) {
			procs := redlocktest.StartN(t, 5, redlocktest.Options{Persistence: pers})
			c := partitioned(t, procs, quick, []int{0, 1, 2}, []int{2, 3, 4})
			return duel(t, c[0], c[1], func() { restart(procs[2]) })
		}
	}
	return []*Scenario{{
		Name: "restart 1 of A's 3 nodes empty at once (T7)", Mode: Redlock5, Expect: Detected,
		Why: "the restarted node forgot A's key and votes for B: persistence or a delayed restart is required",
		run: t7(func(p *redlocktest.Process) { p.Restart(redlocktest.NoPersistence) }, redlocktest.NoPersistence),
	}, {
		Name: "the same, restart delayed past the TTL (T8)", Mode: Redlock5, Expect: Safe,
		Why: "the node is back only after A's validity ended",
		run: t7(func(p *redlocktest.Process) {
			p.RestartAfter(ttl+100*time.Millisecond, redlocktest.NoPersistence)
		}, redlocktest.NoPersistence),
	}, {
		Name: "the same, with appendfsync always (T9)", Mode: Redlock5, Expect: Safe,
		Why: "the node reloads A's key with its absolute expiry and refuses B",
		run: t7(func(p *redlocktest.Process) { p.Restart(redlocktest.AOFAlways) }, redlocktest.AOFAlways),
	}, {
		Name: "restart the node empty", Mode: Single, Expect: Detected,
		Why: "a single node without persistence forgets the lock",
		run: func(t redlocktest.T) (*Report, error) {
			procs := redlocktest.StartN(t, 1, redlocktest.Options{})
			c := newClients(t, 2, func() []redis.UniversalClient { return nodeClients(t, procs) }, quick)
			return duel(t, c[0], c[1], func() { procs[0].Restart(redlocktest.NoPersistence) })
		},
	}, {
		Name: "master restarted empty before a failover", Mode: Replica, Expect: Detected,
		Why: "the replica resyncs from the empty master: replication does not keep the lock",
		run: func(t redlocktest.T) (*Report, error) {
			r := redlocktest.StartReplicated(t, redlocktest.Options{})
			c := newClients(t, 2, func() []redis.UniversalClient { return []redis.UniversalClient{r.FailoverClient()} }, quick)
			return duel(t, c[0], c[1], func() { r.Master.Restart(redlocktest.NoPersistence) })
		},
	}, {
		Name: "master killed before the replica got the lock; Sentinel promotes it", Mode: Replica, Expect: Detected,
		Why: "replication is asynchronous: the promoted replica never saw A's key and grants it to B",
		run: func(t redlocktest.T) (*Report, error) {
			r := redlocktest.StartReplicated(t, redlocktest.Options{})
			// The replica replicates through a proxy, so that its stream can be cut
			// while the master still acknowledges writes (loopback is otherwise too
			// fast to lose a write on demand).
			link := redlocktest.NewNetwork(t).Proxy(r.Master.Addr())
			replica := dial(t, r.Replica.Addr())
			host, port, _ := strings.Cut(link.Addr(), ":")
			if err := replica.Do(t.Context(), "REPLICAOF", host, port).Err(); err != nil {
				return nil, err
			}
			if err := waitLink(t, replica); err != nil {
				return nil, err
			}
			link.Blackhole(redlocktest.BothWays)
			c := newClients(t, 2, func() []redis.UniversalClient { return []redis.UniversalClient{r.FailoverClient()} }, quick)
			// A lease longer than the failover (about 2 s here), so A still holds it.
			return duelFor(t, c[0], c[1], 5*time.Second, func() {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				if _, err := r.WaitFailover(ctx, r.Master.Kill); err != nil {
					t.Fatalf("safety: %v", err)
				}
			})
		},
	}}
}

// waitLink waits until a replica reports its link to the master up, for up to 10 s.
func waitLink(t redlocktest.T, replica *redis.Client) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		info, err := replica.Info(t.Context(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
	}
	return fmt.Errorf("the replica's link to its master never came up")
}

func holderPauses() []*Scenario {
	// Worker 0 stops in its third critical section for longer than the TTL, as a
	// garbage-collection pause or a SIGSTOP would stop it; the others go on.
	stall := func(worker, n int) time.Duration {
		if worker == 0 && n == 3 {
			return ttl + 300*time.Millisecond
		}
		return 0
	}
	run := func(fencing bool) func(t redlocktest.T) (*Report, error) {
		return func(t redlocktest.T) (*Report, error) {
			opts := quick
			opts.Fencing = fencing
			clients := modeClients(t, Redlock5, 2, opts)
			return Workload{Clients: clients, TTL: ttl, Stall: stall, Fenced: fencing}.Run(t.Context(), 2500*time.Millisecond), nil
		}
	}
	return []*Scenario{{
		Name: "holder stalled past its TTL (in-process pause)", Mode: Redlock5, Expect: Detected,
		Why: "no lease survives a pause after the grant: the documented limit",
		run: run(false),
	}, {
		Name: "holder stalled past its TTL, fenced resource", Mode: Redlock5, Expect: Fenced,
		Why: "the late holder's write carries an older fencing token and is refused",
		run: run(true),
	}, {
		Name: "holder process SIGSTOPped past its TTL (T12)", Mode: Redlock5, Expect: Detected,
		Why: "a stopped process cannot notice its lease end; its late write lands",
		run: func(t redlocktest.T) (*Report, error) { return stoppedHolder(t, false) },
	}, {
		Name: "holder process SIGSTOPped past its TTL, fenced resource (T12)", Mode: Redlock5, Expect: Fenced,
		Why: "the resource refuses the stopped holder's write: its token is older",
		run: func(t redlocktest.T) (*Report, error) { return stoppedHolder(t, true) },
	}, {
		Name: "holder crashes without releasing", Mode: Redlock5, Expect: Safe,
		Why: "the lock frees itself after its TTL: the next grant comes about one TTL later",
		run: func(t redlocktest.T) (*Report, error) {
			clients := modeClients(t, Redlock5, 2, quick)
			crash := func(worker, n int) time.Duration {
				if worker == 0 && n == 3 {
					return -1
				}
				return 0
			}
			rep := Workload{Clients: clients, TTL: ttl, Stall: crash}.Run(t.Context(), 2*ttl)
			if rep.Abandoned != 1 || rep.Reacquire < ttl-drift(ttl) || rep.Reacquire > ttl+500*time.Millisecond {
				return rep, fmt.Errorf("%d abandoned locks, next grant after %v; want 1, about the TTL", rep.Abandoned, rep.Reacquire)
			}
			return rep, nil
		},
	}}
}

// skewed starts 5 nodes, the first 3 with the given clock, and two Clients over them.
func skewed(t redlocktest.T, clock redlocktest.Clock) ([]*redlocktest.Process, []*redlock.Client) {
	procs := redlocktest.StartN(t, 3, redlocktest.Options{Clock: &clock})
	procs = append(procs, redlocktest.StartN(t, 2, redlocktest.Options{})...)
	return procs, newClients(t, 2, func() []redis.UniversalClient { return nodeClients(t, procs) }, quick)
}

func clocks() []*Scenario {
	rate := func(r float64) func(t redlocktest.T) (*Report, error) {
		return func(t redlocktest.T) (*Report, error) {
			_, c := skewed(t, redlocktest.Clock{Rate: r})
			return duel(t, c[0], c[1], func() {})
		}
	}
	return []*Scenario{{
		Name: "server clocks ×1.10 on 3 of 5 (T15)", Mode: Redlock5, Expect: Detected,
		Why: "keys expire 9% early in real time, more than the 1% drift allowance",
		run: rate(1.10),
	}, {
		Name: "server clocks ×1.005 on 3 of 5 (T15)", Mode: Redlock5, Expect: Safe,
		Why: "a rate error inside the drift allowance is covered",
		run: rate(1.005),
	}, {
		Name: "server clocks jump +TTL on 3 of 5 (T13)", Mode: Redlock5, Expect: Detected,
		Why: "Redis expires keys on its wall clock: a forward jump ends the lock early",
		run: func(t redlocktest.T) (*Report, error) {
			procs, c := skewed(t, redlocktest.Clock{})
			return duel(t, c[0], c[1], func() {
				for _, p := range procs[:3] {
					// A's grant needed only 3 replies; its SET to this node may still be on
					// the way, and must land before the jump to be expired by it.
					if err := waitKey(t, p, "duel"); err != nil {
						t.Fatalf("safety: %v", err)
					}
					p.Jump(ttl)
				}
			})
		},
	}}
}

func partitions() []*Scenario {
	return []*Scenario{{
		Name: "2 of 5 partitioned away", Mode: Redlock5, Expect: Safe,
		Why: "a majority is reachable: grants go on",
		run: func(t redlocktest.T) (*Report, error) {
			procs := redlocktest.StartN(t, 5, redlocktest.Options{})
			c := partitioned(t, procs, quick, []int{2, 3, 4}, []int{2, 3, 4})
			// Wait well below the run, so that a run without grants records why (once
			// in CI: 0 grants and, with a 2 s wait, no error to tell the cause).
			w := Workload{Clients: c, TTL: ttl, Wait: 400 * time.Millisecond}
			rep := w.Run(t.Context(), 1500*time.Millisecond)
			if rep.Grants == 0 {
				return rep, fmt.Errorf("no grant: %d unavailable, %d not acquired, %d other errors; the first: %s",
					rep.Unavailable, rep.NotAcquired, rep.OtherErrors, rep.FirstError)
			}
			perClient := grantsPerClient(rep, len(c))
			if !slices.Contains(perClient, 0) || unsafe(rep) {
				return rep, nil // a violation is the matrix's to report (Scenario.Run)
			}
			// Default mode orders no Clients: one Client's workers hand the lock to
			// each other 16 times in a row, and the other Client can lose every race
			// that follows by chance (runs here: from [1 19] to [203 176]; once in CI
			// [74 0]). A Client that cannot win at all (before b9b7193: [0 842]) loses a
			// second run too; a Client that lost by chance does not. (Not longer: each
			// grant leaves calls queued for the partitioned nodes, which Close waits
			// out one node timeout per batch.)
			again := w.Run(t.Context(), 1500*time.Millisecond)
			if second := grantsPerClient(again, len(c)); slices.Contains(second, 0) {
				return again, fmt.Errorf("grants per Client %v, then %v in a second run: one was starved", perClient, second)
			}
			return again, nil
		},
	}, {
		Name: "asymmetric partition: A sees 1–2, B sees 3–5 (T17)", Mode: Redlock5, Expect: Safe,
		Why: "only B can reach a majority; A fails fast and leaves no key behind",
		run: func(t redlocktest.T) (*Report, error) {
			procs := redlocktest.StartN(t, 5, redlocktest.Options{})
			c := partitioned(t, procs, quick, []int{0, 1}, []int{2, 3, 4})
			rep := Workload{Clients: c, Workers: 2, TTL: ttl, Wait: 200 * time.Millisecond}.Run(t.Context(), 1500*time.Millisecond)
			switch {
			case rep.Grants == 0:
				return rep, fmt.Errorf("B got no grant")
			case rep.Unavailable == 0:
				return rep, fmt.Errorf("A never failed with ErrUnavailable")
			}
			for i, p := range procs[:2] {
				if n := p.Client().Exists(t.Context(), "safety").Val(); n != 0 {
					return rep, fmt.Errorf("node %d, reachable only by A, still holds a key", i+1)
				}
			}
			return rep, nil
		},
	}, {
		Name: "replies of 3 of 5 delayed by the TTL (T2)", Mode: Redlock5, Expect: Safe,
		Why: "the majority answers yes after ttl − drift: no validity left, so no lock",
		run: func(t redlocktest.T) (*Report, error) {
			procs := redlocktest.StartN(t, 5, redlocktest.Options{})
			proxies := redlocktest.Proxies(redlocktest.NewNetwork(t), procs)
			opts := redlock.Options{NodeTimeout: 6 * ttl, MaxAttempts: 1}
			rdbs := make([]redis.UniversalClient, len(proxies))
			for i, p := range proxies { // the slow replies must be read, not timed out
				rdbs[i] = redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: 6 * ttl})
				t.Cleanup(func() { _ = rdbs[i].Close() })
			}
			// Connect and load the scripts first, so that only the lock's own calls are
			// slow: with a throwaway Client over the same connections, closed before the
			// faults so that none of its calls is still out (a release still on its way
			// when the latency starts delays the lock's calls queued behind it, by
			// seconds at times).
			warm := newClients(t, 1, func() []redis.UniversalClient { return rdbs }, opts)[0]
			if l, err := warm.TryAcquire(t.Context(), "warm", ttl); err != nil {
				return nil, fmt.Errorf("warming up: %w", err)
			} else if err := l.Release(t.Context()); err != nil {
				return nil, fmt.Errorf("warming up: %w", err)
			}
			if err := warm.Close(); err != nil {
				return nil, fmt.Errorf("warming up: %w", err)
			}
			c := newClients(t, 1, func() []redis.UniversalClient { return rdbs }, opts)[0]
			for _, p := range proxies[:3] {
				p.Latency(redlocktest.Replies, ttl, 0)
			}
			proxies[3].Down()
			proxies[4].Down()
			rep := &Report{}
			start := time.Now()
			lock, err := c.TryAcquire(t.Context(), "safety", ttl)
			rep.Duration = time.Since(start)
			var qe *redlock.QuorumError
			switch {
			case err == nil:
				rep.Grants = 1
				_ = lock.Release(t.Context())
				return rep, fmt.Errorf("granted with replies %v late", ttl)
			case !errors.As(err, &qe) || !qe.Late || !errors.Is(err, redlock.ErrUnavailable):
				return rep, fmt.Errorf("got %v, want ErrUnavailable from a late majority", err)
			}
			rep.Unavailable = 1
			return rep, nil
		},
	}}
}

// duplicates is the scenario of duplicated and late delivery: every command a Client
// sends has a 30 % chance of being delivered again, up to a TTL later, on another
// connection (redlocktest.Duplicate). Two workers per Client make handoffs.
func duplicates() *Scenario {
	return &Scenario{
		Name: "30% of commands delivered twice, up to a TTL late", Mode: Redlock5, Expect: Safe,
		Why: "no script shortens a TTL or touches a later lock's key when a command arrives again",
		run: func(t redlocktest.T) (*Report, error) {
			rep, _, err := duplicatedRun(t, 1, Workload{}, quick)
			return rep, err
		},
	}
}

// duplicatedRun runs w for 2 s, with two Clients made with opts and the TTL ttl, on 5
// nodes (returned) each of whose commands has a 30 % chance of being delivered again,
// up to a TTL later, on another connection (redlocktest.Duplicate); the nodes'
// Duplicators draw from the seeds first, first+1, .... It fails when no command was
// delivered twice.
func duplicatedRun(t redlocktest.T, first uint64, w Workload, opts redlock.Options) (*Report, []*redlocktest.Process, error) {
	procs := redlocktest.StartN(t, 5, redlocktest.Options{})
	var dups []*redlocktest.Duplicator
	seed := first
	w.Clients = newClients(t, 2, func() []redis.UniversalClient {
		rdbs := nodeClients(t, procs)
		for _, rdb := range rdbs {
			dups = append(dups, redlocktest.Duplicate(t, rdb.(*redis.Client), redlocktest.DuplicateOptions{
				Fraction: 0.3, MaxDelay: ttl, Seed: seed,
			}))
			seed++
		}
		return rdbs
	}, opts)
	w.TTL = ttl
	rep := w.Run(t.Context(), 2*time.Second)
	sent := 0
	for _, d := range dups {
		_, n := d.Counts()
		sent += n
	}
	if sent == 0 {
		return rep, procs, fmt.Errorf("no command was delivered twice")
	}
	return rep, procs, nil
}

// grantsPerClient counts a run's grants per Client (the workers use the Clients in
// turn).
func grantsPerClient(rep *Report, clients int) []int {
	n := make([]int, clients)
	for _, s := range rep.Sections {
		n[s.Worker%clients]++
	}
	return n
}

// unsafe reports whether a run saw two holders at once or its effects.
func unsafe(rep *Report) bool {
	return rep.Overlaps > 0 || rep.LostUpdates > 0 || rep.StaleAccepted > 0
}
