package safety

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// Mode is what stands behind the lock: one Redis node, a replicated node with Sentinel
// failover, or a Redlock quorum of independent masters.
type Mode string

// The modes the matrix compares.
const (
	Single   Mode = "single node"
	Replica  Mode = "master+replica+Sentinel"
	Redlock3 Mode = "Redlock N=3"
	Redlock5 Mode = "Redlock N=5"
)

// Expect is what a scenario must show for the lock's claims to hold.
type Expect int

const (
	// Safe: no overlapping critical sections, no lost update, no stale write accepted.
	Safe Expect = iota
	// Fenced: holders may overlap (a paused holder wakes up late), but the fenced
	// resource accepts no stale write and loses no update.
	Fenced
	// Detected: a negative control. The fault breaks an assumption, and the checker
	// must see the overlap; a run without one means the harness cannot fail.
	Detected
)

func (e Expect) String() string {
	return [...]string{"0 overlaps", "0 stale writes accepted", "overlap detected"}[e]
}

// Scenario is one fault against one mode, with the result the documentation claims.
type Scenario struct {
	Name   string // what is done, e.g. "kill 2 of 5 under load"
	Mode   Mode
	Expect Expect
	Why    string // the reason for the expected result, for the report
	run    func(t redlocktest.T) (*Report, error)
}

// Result is a scenario's outcome: the checker's report, and whether it matched.
type Result struct {
	Scenario *Scenario
	Report   *Report
	// Problem says why the result does not match the expectation; empty when it does.
	Problem string
}

// Run runs the scenario on nodes it starts itself (stopped when t ends).
func (s *Scenario) Run(t redlocktest.T) Result {
	rep, err := s.run(t)
	res := Result{Scenario: s, Report: rep}
	switch {
	case err != nil:
		res.Problem = err.Error()
	case s.Expect == Safe && unsafe(rep):
		res.Problem = fmt.Sprintf("%d overlaps, %d lost updates, %d stale writes accepted", rep.Overlaps, rep.LostUpdates, rep.StaleAccepted)
	case s.Expect == Fenced && (rep.StaleAccepted > 0 || rep.LostUpdates > 0 || rep.FenceViolation != ""):
		res.Problem = fmt.Sprintf("%d stale writes accepted, %d lost updates %s", rep.StaleAccepted, rep.LostUpdates, rep.FenceViolation)
	case s.Expect == Fenced && rep.StaleRefused == 0:
		res.Problem = "no stale write was attempted: the fault did not happen"
	case s.Expect == Detected && rep.Overlaps == 0:
		res.Problem = "no overlap seen: the negative control did not fail"
	}
	return res
}

// ttl is the lock TTL of every scenario: short, so expiry-based faults play out in a
// second, and long next to the node timeout and the loopback round trip.
const ttl = time.Second

// Scenarios returns the matrix: every mode without faults, then the faults of
// docs/safety.md, each against the mode it is about. Each takes a few seconds.
func Scenarios() []*Scenario {
	var all []*Scenario
	for _, m := range []Mode{Single, Replica, Redlock3, Redlock5} {
		all = append(all, &Scenario{
			Name: "no fault", Mode: m, Expect: Safe,
			Why: "every mode is a mutex while nothing fails",
			run: func(t redlocktest.T) (*Report, error) {
				clients := modeClients(t, m, 2, redlock.Options{})
				return Workload{Clients: clients, TTL: ttl}.Run(t.Context(), 1500*time.Millisecond), nil
			},
		})
	}
	all = append(all, nodeFaults()...)
	all = append(all, restarts()...)
	all = append(all, holderPauses()...)
	all = append(all, clocks()...)
	all = append(all, partitions()...)
	all = append(all, duplicates())
	all = append(all, reentrant()...)
	all = append(all, fair()...)
	return all
}

// modeClients starts the nodes of mode m and returns k Clients over them.
func modeClients(t redlocktest.T, m Mode, k int, opts redlock.Options) []*redlock.Client {
	var nodes func() []redis.UniversalClient
	switch m {
	case Single, Redlock3, Redlock5:
		n := map[Mode]int{Single: 1, Redlock3: 3, Redlock5: 5}[m]
		procs := redlocktest.StartN(t, n, redlocktest.Options{})
		nodes = func() []redis.UniversalClient { return nodeClients(t, procs) }
	case Replica:
		r := redlocktest.StartReplicated(t, redlocktest.Options{})
		nodes = func() []redis.UniversalClient { return []redis.UniversalClient{r.FailoverClient()} }
	}
	return newClients(t, k, nodes, opts)
}

// newClients returns k Clients, each over its own go-redis clients from nodes.
func newClients(t redlocktest.T, k int, nodes func() []redis.UniversalClient, opts redlock.Options) []*redlock.Client {
	t.Helper()
	var clients []*redlock.Client
	for range k {
		c, err := redlock.New(nodes(), opts)
		if err != nil {
			t.Fatalf("safety: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	return clients
}

// quick makes attempts retry fast, so a take-over shows within milliseconds.
var quick = redlock.Options{RetryDelay: redlock.ExponentialJitter(2*time.Millisecond, 10*time.Millisecond)}

// atGrant returns a channel for Workload.Grants and a function that waits until the
// run has made n grants.
func atGrant(n int) (chan int, func(ctx context.Context)) {
	ch := make(chan int, 1)
	return ch, func(ctx context.Context) {
		for {
			select {
			case g := <-ch:
				if g >= n {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
}

// faulted starts 5 nodes and runs a workload of two Clients over them for d, with
// Acquire calls bounded by wait (0: the default). Once the run has made 20 grants it
// calls fault (on the caller's goroutine, as the kit needs). It returns the report and
// the grants made while fault ran and after it returned.
func faulted(t redlocktest.T, d, wait time.Duration, fault func(procs []*redlocktest.Process)) (rep *Report, during, after int) {
	return faultedWorkload(t, Workload{TTL: ttl, Wait: wait}, quick, d, fault)
}

// faultedWorkload is faulted for workload w (its Clients, made with opts, and Grants
// are set here).
func faultedWorkload(t redlocktest.T, w Workload, opts redlock.Options, d time.Duration, fault func(procs []*redlocktest.Process)) (rep *Report, during, after int) {
	procs := redlocktest.StartN(t, 5, redlocktest.Options{})
	w.Clients = newClients(t, 2, func() []redis.UniversalClient { return nodeClients(t, procs) }, opts)
	grants, started := atGrant(20)
	w.Grants = grants
	done := make(chan *Report, 1)
	begin := time.Now() // the run's clock starts within microseconds of this
	go func() { done <- w.Run(t.Context(), d) }()
	started(t.Context())
	from := time.Since(begin)
	fault(procs)
	to := time.Since(begin)
	rep = <-done
	for _, s := range rep.Sections {
		switch {
		case s.Grant > to:
			after++
		case s.Grant > from:
			during++
		}
	}
	return rep, during, after
}

func nodeFaults() []*Scenario {
	return []*Scenario{{
		Name: "kill 2 of 5 under load", Mode: Redlock5, Expect: Safe,
		Why: "a majority is still up: grants go on",
		run: func(t redlocktest.T) (*Report, error) {
			rep, _, after := faulted(t, 2*time.Second, 0, func(procs []*redlocktest.Process) {
				procs[0].Kill()
				procs[1].Kill()
			})
			if after == 0 {
				return rep, fmt.Errorf("no grant after the kill")
			}
			return rep, nil
		},
	}, {
		Name: "kill 3 of 5, restart after the TTL", Mode: Redlock5, Expect: Safe,
		Why: "no majority: Acquire fails with ErrUnavailable, then recovers",
		run: func(t redlocktest.T) (*Report, error) {
			rep, _, after := faulted(t, 3500*time.Millisecond, 200*time.Millisecond, func(procs []*redlocktest.Process) {
				procs[0].Kill()
				procs[1].Kill()
				procs[2].RestartAfter(ttl+100*time.Millisecond, redlocktest.NoPersistence)
				procs[0].Restart(redlocktest.NoPersistence)
				procs[1].Restart(redlocktest.NoPersistence)
			})
			switch {
			case rep.Unavailable == 0:
				return rep, fmt.Errorf("no ErrUnavailable while 3 of 5 were down")
			case after == 0:
				return rep, fmt.Errorf("no grant after the restart")
			}
			return rep, nil
		},
	}, {
		Name: "pause 2 of 5 past the node timeout", Mode: Redlock5, Expect: Safe,
		Why: "paused nodes count as failed after 50 ms; their late replies are never counted",
		run: func(t redlocktest.T) (*Report, error) {
			rep, during, _ := faulted(t, 2*time.Second, 0, func(procs []*redlocktest.Process) {
				procs[0].Pause()
				procs[1].Pause()
				time.Sleep(700 * time.Millisecond)
				procs[0].Resume()
				procs[1].Resume()
			})
			if during == 0 {
				return rep, fmt.Errorf("no grant while 2 of 5 were paused")
			}
			return rep, nil
		},
	}}
}

// duel is the schedule of the negative controls: holder A acquires through a and works
// right up to its validity end (as it may); then B starts trying through b (for up to
// 3 s, retrying every few milliseconds) while fault runs on the caller's goroutine; if
// B gets the lock it works for 20 ms. Both sections go into one log, so an overlap
// means B was granted the lock while A's was still valid.
func duel(t redlocktest.T, a, b *redlock.Client, fault func()) (*Report, error) {
	return duelFor(t, a, b, ttl, fault)
}

// duelFor is duel with a lock TTL of lease; B tries for up to 3 × lease.
func duelFor(t redlocktest.T, a, b *redlock.Client, lease time.Duration, fault func()) (*Report, error) {
	res := &resource{start: time.Now()}
	ctx := t.Context()
	hold := func(c *redlock.Client, worker int, work func(*redlock.Lock) time.Duration) error {
		start := res.now()
		actx, cancel := context.WithTimeout(ctx, 3*lease)
		lock, err := c.Acquire(actx, "duel", lease)
		cancel()
		if err != nil {
			res.failed(err)
			return err
		}
		sec := Section{Worker: worker, Grant: res.now(), Until: lock.Until().Sub(res.start), Fence: lock.Fence()}
		sec.Enter = sec.Grant
		res.granted(Grant{Start: start, End: sec.Grant, Fence: sec.Fence}, sec.Grant-start, nil)
		sleep(ctx, work(lock))
		sec.Exit = res.now()
		res.log(sec)
		_ = lock.Release(context.WithoutCancel(ctx))
		return nil
	}
	held := make(chan error, 1)
	aDone := make(chan struct{})
	go func() { // A works until its validity ends
		defer close(aDone)
		_ = hold(a, 0, func(l *redlock.Lock) time.Duration {
			held <- nil
			return time.Until(l.Until())
		})
	}()
	select {
	case <-held:
	case <-aDone:
		return nil, fmt.Errorf("holder A got no lock")
	}
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		_ = hold(b, 1, func(*redlock.Lock) time.Duration { return 20 * time.Millisecond })
	}()
	fault()
	<-bDone
	<-aDone
	return res.check(false), nil
}

// partitioned returns one Client per view: view[i] lists the nodes (indexes into procs)
// that Client can reach; the others are behind proxies that drop all traffic.
func partitioned(t redlocktest.T, procs []*redlocktest.Process, opts redlock.Options, views ...[]int) []*redlock.Client {
	netw := redlocktest.NewNetwork(t)
	var clients []*redlock.Client
	for _, view := range views {
		proxies := redlocktest.Proxies(netw, procs)
		reach := make(map[int]bool)
		for _, i := range view {
			reach[i] = true
		}
		for i, p := range proxies {
			if !reach[i] {
				p.Blackhole(redlocktest.BothWays)
			}
		}
		clients = append(clients, newClients(t, 1, func() []redis.UniversalClient { return proxyClients(t, proxies) }, opts)...)
	}
	return clients
}

// proxyClients returns a go-redis client through each proxy.
func proxyClients(t redlocktest.T, proxies []*redlocktest.Proxy) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(proxies))
	for i, p := range proxies {
		out[i] = dial(t, p.Addr())
	}
	return out
}

// nodeClients returns a go-redis client for each node.
func nodeClients(t redlocktest.T, procs []*redlocktest.Process) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(procs))
	for i, p := range procs {
		out[i] = dial(t, p.Addr())
	}
	return out
}

// dial returns a go-redis client that gives up on a silent node within 250 ms and does
// not retry (the quorum is the retry), so that calls to paused or partitioned nodes end
// soon after the scenario does, and Close does not wait for seconds.
func dial(t redlocktest.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  250 * time.Millisecond,
		ReadTimeout:  250 * time.Millisecond,
		WriteTimeout: 250 * time.Millisecond,
		MaxRetries:   -1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitKey waits until node p holds key (polling: the node's state is only visible from
// outside), for at most a second.
func waitKey(t redlocktest.T, p *redlocktest.Process, key string) error {
	c := dial(t, p.Addr())
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if c.Exists(t.Context(), key).Val() == 1 {
			return nil
		}
	}
	return fmt.Errorf("node %s never got key %q", p.Addr(), key)
}

// drift is the allowance the library sets aside for a TTL with the default factor.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }
