package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// This is the README's quick start: a nightly job that cron starts on several machines
// at once, over five independent Redis masters (docker/compose.yaml starts them on
// these ports). One copy writes the report; the others find the lock held and exit.
func Example() {
	client, err := redlock.NewFromURLs([]string{
		"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003",
		"redis://127.0.0.1:7004", "redis://127.0.0.1:7005",
	}, redlock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// Never wait for another copy (SkipIfHeld): a copy that finds the lock held has
	// nothing to do. The lock lives 30 s and is renewed while writeReport runs.
	err = client.Do(context.Background(), "nightly-report", 30*time.Second, writeReport, redlock.SkipIfHeld())
	var ran *redlock.RunError // first: writeReport's own error may match anything
	switch {
	case errors.As(err, &ran):
		log.Fatal(err) // writeReport failed, or the lock was lost while it ran
	case errors.Is(err, redlock.ErrNotAcquired):
		log.Print("another copy is writing the report") // not an error: exit quietly
	case err != nil:
		log.Fatal(err) // not run: nodes down or too slow
	}
}

// writeReport is the quick start's job. Its ctx ends if the lock is lost (before the
// lock's validity does): the work must then stop.
func writeReport(ctx context.Context) error {
	fmt.Println("writing the report")
	return ctx.Err()
}

// startNodes starts n redis-server processes on free loopback ports for the runnable
// examples; stop closes the clients and stops the servers by their PIDs.
func startNodes(n int) (nodes []redis.UniversalClient, servers []*redistest.Server, stop func()) {
	for range n {
		s, err := redistest.StartServer(context.Background(), redistest.Options{})
		if err != nil {
			log.Fatal(err)
		}
		servers = append(servers, s)
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1}))
	}
	return nodes, servers, func() {
		for i := range nodes {
			nodes[i].Close()
			servers[i].Close()
		}
	}
}

func ExampleClient_TryAcquire() {
	nodes, _, stop := startNodes(3)
	defer stop()
	alice, _ := redlock.New(nodes, redlock.Options{})
	defer alice.Close()
	bob, _ := redlock.New(nodes, redlock.Options{})
	defer bob.Close()
	ctx := context.Background()

	lock, err := alice.TryAcquire(ctx, "stock:42", 5*time.Second)
	fmt.Println("alice:", err)

	_, err = bob.TryAcquire(ctx, "stock:42", 5*time.Second)
	fmt.Println("bob while alice holds it:", errors.Is(err, redlock.ErrNotAcquired))

	fmt.Println("alice releases:", lock.Release(ctx))
	_, err = bob.TryAcquire(ctx, "stock:42", 5*time.Second)
	fmt.Println("bob after:", err)
	// Output:
	// alice: <nil>
	// bob while alice holds it: true
	// alice releases: <nil>
	// bob after: <nil>
}

func ExampleLock_Extend() {
	nodes, _, stop := startNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.Options{})
	defer client.Close()
	ctx := context.Background()

	lock, _ := client.TryAcquire(ctx, "migration", time.Second)
	before := lock.Until()
	if err := lock.Extend(ctx, time.Minute); err != nil {
		log.Fatal(err)
	}
	fmt.Println("extended by more than 50s:", lock.Until().Sub(before) > 50*time.Second)
	fmt.Println(lock.Release(ctx))
	fmt.Println("released twice:", errors.Is(lock.Release(ctx), redlock.ErrLockLost))
	// Output:
	// extended by more than 50s: true
	// <nil>
	// released twice: true
}

func ExampleQuorumError() {
	nodes, servers, stop := startNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.Options{})
	defer client.Close()
	down := servers[0].Addr()
	servers[0].Close() // two of three nodes down: no majority possible
	servers[1].Close()

	_, err := client.TryAcquire(context.Background(), "report", 5*time.Second)
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		fmt.Println("unavailable:", errors.Is(err, redlock.ErrUnavailable))
		fmt.Printf("%d of %d agreed, %d needed, %d failed\n", qe.Agreed, qe.Nodes, qe.Needed, qe.Failed)
	}
	var ne *redlock.NodeError
	if errors.As(err, &ne) {
		fmt.Println("first failed node:", ne.Node == down)
	}
	// Output:
	// unavailable: true
	// 1 of 3 agreed, 2 needed, 2 failed
	// first failed node: true
}

func ExampleClient_Do() {
	nodes, _, stop := startNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.Options{})
	defer client.Close()

	err := client.Do(context.Background(), "migrations", 10*time.Second, func(ctx context.Context) error {
		// The lock is renewed in the background while this runs; ctx ends if the
		// lock is lost, before its validity does. Stop working when it ends.
		fmt.Println("migrating under the lock")
		return ctx.Err()
	})
	fmt.Println("done:", err)
	// Output:
	// migrating under the lock
	// done: <nil>
}

func ExampleLock_KeepAlive() {
	nodes, _, stop := startNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.Options{})
	defer client.Close()
	ctx := context.Background()

	lock, err := client.Acquire(ctx, "leader", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	work, stopRenewing := lock.KeepAlive(ctx)
	defer stopRenewing()

	select {
	case <-work.Done(): // the lock was lost: stop acting as leader
		fmt.Println("lost:", errors.Is(context.Cause(work), redlock.ErrLockLost))
	default:
		fmt.Println("leading")
	}
	fmt.Println(lock.Release(ctx))
	// Output:
	// leading
	// <nil>
}

func ExampleSkipIfHeld() {
	nodes, _, stop := startNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.Options{})
	defer client.Close()
	other, _ := redlock.New(nodes, redlock.Options{})
	defer other.Close()
	ctx := context.Background()

	// Another copy of the job holds the lock: this one does not wait for it.
	held, _ := other.TryAcquire(ctx, "nightly-report", 30*time.Second)
	err := client.Do(ctx, "nightly-report", 30*time.Second, func(ctx context.Context) error {
		fmt.Println("writing the report") // not reached
		return nil
	}, redlock.SkipIfHeld())
	fmt.Println("not run, held elsewhere:", errors.Is(err, redlock.ErrNotRun) && errors.Is(err, redlock.ErrNotAcquired))
	held.Release(ctx)
	// Output:
	// not run, held elsewhere: true
}

func ExampleWaitAtMost() {
	nodes, _, stop := startNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.Options{})
	defer client.Close()

	// Wait at most a second for the lock. The work is not bound by that second: its
	// context ends only if the lock is lost (or the caller's context ends).
	err := client.Do(context.Background(), "migrations", 10*time.Second, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(1500 * time.Millisecond): // work for longer than the wait bound
			fmt.Println("migrated")
			return nil
		}
	}, redlock.WaitAtMost(time.Second))
	fmt.Println("done:", err)
	// Output:
	// migrated
	// done: <nil>
}

// Telling Do's outcomes apart, without a flag set inside fn: check for a *RunError
// first (fn ran), then for ErrNotRun.
func ExampleRunError() {
	nodes, servers, stop := startNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.Options{})
	defer client.Close()

	report := func(err error) string {
		var run *redlock.RunError
		switch {
		case err == nil:
			return "ran, released"
		case errors.As(err, &run) && run.Lost != nil:
			return "ran, then lost the lock: " + run.Lost.Error() // stop trusting the work's result
		case errors.As(err, &run) && run.Err != nil:
			return "ran, failed: " + run.Err.Error()
		case errors.As(err, &run):
			return "ran, but the release failed (the keys expire with the TTL)"
		case errors.Is(err, redlock.ErrNotAcquired):
			return "not run: held elsewhere"
		default:
			return "not run: " + err.Error() // nodes down, bad settings, context ended
		}
	}
	ctx := context.Background()
	fmt.Println(report(client.Do(ctx, "job", 10*time.Second, func(context.Context) error { return nil })))
	fmt.Println(report(client.Do(ctx, "job", 10*time.Second, func(context.Context) error {
		return errors.New("disk full")
	})))
	other, _ := redlock.New(nodes, redlock.Options{})
	defer other.Close()
	held, _ := other.TryAcquire(ctx, "job", 10*time.Second)
	fmt.Println(report(client.Do(ctx, "job", 10*time.Second, func(context.Context) error { return nil }, redlock.TryOnce())))
	held.Release(ctx)
	fmt.Println(report(client.Do(ctx, "job", 10*time.Second, func(context.Context) error {
		servers[1].Close() // two of three nodes gone before the release
		servers[2].Close()
		return nil
	})))
	// Output:
	// ran, released
	// ran, failed: disk full
	// not run: held elsewhere
	// ran, but the release failed (the keys expire with the TTL)
}

func ExampleWithOwner() {
	nodes, _, stop := startNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.Options{})
	defer client.Close()
	restarted, _ := redlock.New(nodes, redlock.Options{}) // say, a copy of the job in another process
	defer restarted.Close()
	ctx := context.Background()
	job := redlock.WithOwner(ctx, "invoice-run:2026-11-30") // one owner per job

	outer, _ := client.Acquire(job, "ledger", 10*time.Second)
	inner, err := restarted.TryAcquire(job, "ledger", 10*time.Second)
	fmt.Println("the same owner, from another Client:", err)
	_, err = restarted.TryAcquire(redlock.WithOwner(ctx, "invoice-run:2026-12-01"), "ledger", 10*time.Second)
	fmt.Println("another owner:", errors.Is(err, redlock.ErrNotAcquired))

	fmt.Println("release one hold:", inner.Release(ctx))
	_, err = restarted.TryAcquire(ctx, "ledger", 10*time.Second)
	fmt.Println("a lock without owner while a hold is left:", errors.Is(err, redlock.ErrNotAcquired))

	fmt.Println("release the last hold:", outer.Release(ctx))
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := restarted.Acquire(wait, "ledger", 10*time.Second)
	fmt.Println("a lock without owner then:", err)
	_ = l.Release(ctx)
	// Output:
	// the same owner, from another Client: <nil>
	// another owner: true
	// release one hold: <nil>
	// a lock without owner while a hold is left: true
	// release the last hold: <nil>
	// a lock without owner then: <nil>
}

// stepPrinter is an Observer that prints each step's op, outcome and the replies of
// its last round, and keeps a count of the locks held, as a metrics exporter would.
type stepPrinter struct{ held atomic.Int64 }

func (p *stepPrinter) Observe(_ context.Context, e redlock.Event) {
	if e.Op == redlock.OpAcquire && e.Outcome == redlock.OutcomeOK {
		p.held.Add(1)
	}
	if e.Ended {
		p.held.Add(-1)
	}
	yes := 0
	for _, n := range e.Nodes {
		if n.Result == redlock.ResultYes {
			yes++
		}
	}
	fmt.Printf("%s %s: attempts %d, at least 2 yes: %v, ended %v, held %d\n",
		e.Op, e.Outcome, e.Attempts, yes >= 2, e.Ended, p.held.Load())
}

func ExampleObserver() {
	nodes, _, stop := startNodes(3)
	defer stop()
	client, _ := redlock.New(nodes, redlock.Options{Observer: &stepPrinter{}})
	defer client.Close()
	ctx := context.Background()

	lock, _ := client.Acquire(ctx, "invoice:7", 5*time.Second)
	_, _ = client.TryAcquire(ctx, "invoice:7", 5*time.Second) // held: not acquired
	_ = lock.Extend(ctx, 5*time.Second)
	_ = lock.Release(ctx)
	// Output:
	// acquire ok: attempts 1, at least 2 yes: true, ended false, held 1
	// acquire not_acquired: attempts 1, at least 2 yes: false, ended false, held 1
	// extend ok: attempts 0, at least 2 yes: true, ended false, held 1
	// release ok: attempts 0, at least 2 yes: true, ended true, held 0
}
