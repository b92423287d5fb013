package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // dial failures to killed nodes are expected here
	redistest.SkipExamplesWithoutServer()
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// cluster is a set of real redis-server processes and a Client over them.
type cluster struct {
	t       *testing.T
	servers []*redistest.Server
	admin   []*redis.Client // for inspecting the nodes, separate from the lock client's
	client  *redlock.Client
}

// newCluster starts n redis-server processes and a Client over them. The Client is
// closed at the end of the test, after which every node call it started has returned.
func newCluster(t *testing.T, n int, rs redistest.Options, opts redlock.Options) *cluster {
	t.Helper()
	c := &cluster{t: t, servers: redistest.StartN(t, n, rs)}
	for _, s := range c.servers {
		c.admin = append(c.admin, s.Client())
	}
	c.client = c.newClient(opts)
	return c
}

// newClient returns another Client over the same nodes, with its own connections.
func (c *cluster) newClient(opts redlock.Options) *redlock.Client {
	c.t.Helper()
	client, err := redlock.New(redistest.Clients(c.servers), opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { client.Close() })
	return client
}

// values returns the key's value on every node ("" where it is absent).
func (c *cluster) values(key string) []string {
	c.t.Helper()
	vals := make([]string, len(c.admin))
	for i, a := range c.admin {
		v, err := a.Get(context.Background(), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			c.t.Fatalf("GET %s on node %d: %v", key, i+1, err)
		}
		vals[i] = v
	}
	return vals
}

// wantValues fails the test unless the key's value on every node is as given.
func (c *cluster) wantValues(key string, want ...string) {
	c.t.Helper()
	if got := c.values(key); strings.Join(got, ",") != strings.Join(want, ",") {
		c.t.Fatalf("values of %q on the nodes: got %q, want %q", key, got, want)
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestMutualExclusion runs 8 goroutines on 2 Clients, each incrementing a counter 200
// times with a non-atomic read, pause, write under the lock: any overlap loses updates
// or is seen by the holder count.
func TestMutualExclusion(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			opts := redlock.Options{RetryDelay: redlock.ExponentialJitter(time.Millisecond, 4*time.Millisecond)}
			c := newCluster(t, n, redistest.Options{}, opts)
			clients := []*redlock.Client{c.client, c.newClient(opts)}
			const workers, increments = 8, 200
			var counter, inside, overlaps atomic.Int64
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func(client *redlock.Client) {
					defer wg.Done()
					for range increments {
						lock, err := client.Acquire(ctx, "counter", 5*time.Second)
						if err != nil {
							errs <- err
							return
						}
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						v := counter.Load() // read ...
						time.Sleep(50 * time.Microsecond)
						counter.Store(v + 1) // ... write: an overlap loses an update
						inside.Add(-1)
						if err := lock.Release(ctx); err != nil {
							errs <- err
							return
						}
						lock.WaitForCalls() // so the nodes are clean when the test ends
					}
				}(clients[w%2])
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := counter.Load(); got != workers*increments || overlaps.Load() != 0 {
				t.Fatalf("counter = %d, want %d; overlaps seen = %d", got, workers*increments, overlaps.Load())
			}
			c.wantValues("counter", repeat("", n)...)
		})
	}
}

// TestKilledNodes: a killed minority does not stop locking; a killed majority gives
// ErrUnavailable and leaves no key on the nodes still alive.
func TestKilledNodes(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			c := newCluster(t, n, redistest.Options{}, redlock.Options{})
			minority := n / 2
			for _, s := range c.servers[:minority] {
				s.Kill()
			}
			lock, err := c.client.TryAcquire(t.Context(), "minority-down", time.Second)
			if err != nil {
				t.Fatalf("with %d of %d nodes killed: %v", minority, n, err)
			}
			if err := lock.Release(t.Context()); err != nil {
				t.Fatalf("release with %d of %d nodes killed: %v", minority, n, err)
			}

			c.servers[minority].Kill() // now a majority is down
			_, err = c.client.TryAcquire(t.Context(), "majority-down", time.Second)
			if !errors.Is(err, redlock.ErrUnavailable) || errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("with a majority killed: got %v, want ErrUnavailable only", err)
			}
			var qe *redlock.QuorumError
			if !errors.As(err, &qe) || qe.Failed != minority+1 || qe.Agreed != n-minority-1 {
				t.Fatalf("quorum error counts: %+v", qe)
			}
			c.client.Close() // the clean-up waits at most the node timeout: wait for its DELs
			for i, a := range c.admin[minority+1:] {
				if v, _ := a.Get(t.Context(), "majority-down").Result(); v != "" {
					t.Fatalf("live node %d still holds %q", minority+2+i, v)
				}
			}
		})
	}
}

// TestPreTakenSubsets walks every subset of nodes on which another holder has the key:
// the lock is granted iff the free nodes are a majority, and a failed attempt leaves
// no key of its own on any node.
func TestPreTakenSubsets(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			c := newCluster(t, n, redistest.Options{}, redlock.Options{})
			for mask := 0; mask < 1<<n; mask++ {
				key := fmt.Sprintf("subset-%b", mask)
				want := make([]string, n)
				for i := range n {
					if mask&(1<<i) != 0 {
						c.admin[i].Set(t.Context(), key, "foreign", time.Minute)
						want[i] = "foreign"
					}
				}
				free := n - bits.OnesCount(uint(mask))
				client := c.newClient(redlock.Options{}) // one per attempt: its Close waits for every call
				lock, err := client.TryAcquire(t.Context(), key, 10*time.Second)
				if free >= n/2+1 {
					if err != nil {
						t.Fatalf("taken on %05b: %v", mask, err)
					}
					lock.WaitForCalls() // the last SET may still be out: the lock was granted on a majority
					got := make([]string, n)
					for i := range n {
						got[i] = want[i]
						if got[i] == "" {
							got[i] = lock.Token()
						}
					}
					c.wantValues(key, got...)
					if err := lock.Release(t.Context()); err != nil {
						t.Fatalf("release, taken on %05b: %v", mask, err)
					}
					lock.WaitForCalls()
				} else if !errors.Is(err, redlock.ErrNotAcquired) || errors.Is(err, redlock.ErrUnavailable) {
					t.Fatalf("taken on %05b: got %v, want ErrNotAcquired", mask, err)
				} else {
					// The attempt gave up as soon as the refusals made a majority
					// impossible; a SET still on its way is undone when it returns (or
					// dropped unsent).
					client.Close() // waits for that SET and the DEL queued behind it
				}
				c.wantValues(key, want...) // the foreign keys untouched, ours gone
			}
		})
	}
}

// TestPausedNodes: SIGSTOPped nodes cost at most the node timeout; their late SETs are
// undone once they resume.
func TestPausedNodes(t *testing.T) {
	const nodeTimeout = 100 * time.Millisecond
	const margin = 150 * time.Millisecond // scheduling on a loaded 2-core machine under -race
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{NodeTimeout: nodeTimeout})
	ttl := 10 * time.Second

	// Warm the connections, so the timing below measures locking, not dialling.
	if l, err := c.client.TryAcquire(t.Context(), "warm", ttl); err != nil {
		t.Fatal(err)
	} else if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

	t.Run("minority", func(t *testing.T) {
		c.servers[0].Pause()
		c.servers[1].Pause()
		start := time.Now()
		lock, err := c.client.TryAcquire(t.Context(), "paused-minority", ttl)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("TryAcquire with 2 of 5 nodes paused took %v", took)
		if took > nodeTimeout+margin {
			t.Fatalf("TryAcquire took %v, want at most %v", took, nodeTimeout+margin)
		}
		drift := ttl/100 + 2*time.Millisecond // until = attempt start + ttl - drift
		if u := lock.Until(); u.Before(start.Add(ttl-drift)) || u.After(start.Add(took+ttl-drift)) {
			t.Fatalf("Until %v outside [%v, %v]", u, start.Add(ttl-drift), start.Add(took+ttl-drift))
		}
		start = time.Now()
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Logf("Release with 2 of 5 nodes paused took %v", time.Since(start))
		c.servers[0].Resume()
		c.servers[1].Resume()
		c.client.Close() // waits for the late SETs and the DELs queued behind them
		c.wantValues("paused-minority", repeat("", 5)...)
	})

	t.Run("majority", func(t *testing.T) {
		client := c.newClient(redlock.Options{NodeTimeout: nodeTimeout})
		for _, s := range c.servers[:3] {
			s.Pause()
		}
		start := time.Now()
		_, err := client.TryAcquire(t.Context(), "paused-majority", ttl)
		took := time.Since(start)
		t.Logf("TryAcquire with 3 of 5 nodes paused failed after %v", took)
		if !errors.Is(err, redlock.ErrUnavailable) || !errors.Is(err, redlock.ErrNodeTimeout) {
			t.Fatalf("got %v, want ErrUnavailable with node timeouts", err)
		}
		if took > 2*nodeTimeout+margin { // the attempt, then the bounded clean-up
			t.Fatalf("TryAcquire took %v, want at most %v", took, 2*nodeTimeout+margin)
		}
		for i, a := range c.admin[3:] { // the live nodes are clean at once
			if v, _ := a.Get(t.Context(), "paused-majority").Result(); v != "" {
				t.Fatalf("live node %d still holds %q", 4+i, v)
			}
		}
		for _, s := range c.servers[:3] {
			s.Resume()
		}
		client.Close()
		c.wantValues("paused-majority", repeat("", 5)...)
	})
}

// TestExpiredHolder: once a holder's TTL has passed, another client acquires; the old
// holder's Extend and Release report ErrLockLost and leave the new holder's keys alone,
// both when its local validity has run out and when only the nodes know.
func TestExpiredHolder(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	other := c.newClient(redlock.Options{RetryDelay: redlock.ExponentialJitter(time.Millisecond, 10*time.Millisecond)})

	old, err := c.client.TryAcquire(t.Context(), "expiring", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	next, err := other.Acquire(ctx, "expiring", 10*time.Second) // succeeds once the keys expire
	if err != nil {
		t.Fatal(err)
	}
	if !time.Now().After(old.Until()) {
		t.Fatalf("second holder got the lock before the first one's validity ended")
	}
	if err := old.Extend(t.Context(), time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend after expiry: got %v, want ErrLockLost", err)
	}
	if err := old.Release(t.Context()); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Release after expiry: got %v, want ErrLockLost", err)
	}
	old.WaitForCalls()
	next.WaitForCalls() // granted on a majority; the third SET may still be out
	// The new holder's keys are untouched: its token on the nodes that granted it (a
	// majority), and nothing of the old holder's anywhere.
	held := c.values("expiring")
	for i, v := range held {
		if v != next.Token() && v != "" {
			t.Fatalf("node %d holds %q, want the new holder's token or nothing", i+1, v)
		}
	}
	if n := strings.Count(strings.Join(held, ","), next.Token()); n < 2 {
		t.Fatalf("new holder's token on %d nodes: %q", n, held)
	}

	// A holder whose keys vanished while its own validity still runs (a flush, an
	// operator's DEL): the nodes' compare-and-set refuses it.
	stale, err := c.client.TryAcquire(t.Context(), "vanished", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stale.WaitForCalls()
	for _, a := range c.admin {
		a.Del(t.Context(), "vanished")
	}
	fresh, err := other.TryAcquire(t.Context(), "vanished", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Extend(t.Context(), 10*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend of a lock taken over: got %v, want ErrLockLost", err)
	}
	if err := stale.Release(t.Context()); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Release of a lock taken over: got %v, want ErrLockLost", err)
	}
	fresh.WaitForCalls()
	c.wantValues("vanished", repeat(fresh.Token(), 3)...)
	if err := fresh.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	fresh.WaitForCalls()
	c.wantValues("vanished", "", "", "")
	if err := fresh.Release(t.Context()); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("second Release: got %v, want ErrLockLost", err)
	}
}

// TestExtend: Extend moves the deadline and the nodes' TTLs, and never re-creates a key.
func TestExtend(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	lock, err := c.client.TryAcquire(t.Context(), "extend", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := lock.Until()
	if err := lock.Extend(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	if !lock.Until().After(before.Add(20 * time.Second)) {
		t.Fatalf("Until moved from %v to %v, want about 29 s later", before, lock.Until())
	}
	for i, a := range c.admin {
		if pttl := a.PTTL(t.Context(), "extend").Val(); pttl < 29*time.Second {
			t.Fatalf("node %d PTTL %v after Extend(30s)", i+1, pttl)
		}
	}
	// A shorter Extend shortens nothing: not the nodes' TTLs, not Until.
	until := lock.Until()
	if err := lock.Extend(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	if lock.Until().Before(until) {
		t.Fatalf("Extend(1s) moved Until from %v back to %v", until, lock.Until())
	}
	for i, a := range c.admin {
		if pttl := a.PTTL(t.Context(), "extend").Val(); pttl < 28*time.Second {
			t.Fatalf("node %d PTTL %v after Extend(1s): a TTL was shortened", i+1, pttl)
		}
	}
	// Keys gone on two of three nodes: Extend fails and does not bring them back.
	c.admin[0].Del(t.Context(), "extend")
	c.admin[1].Del(t.Context(), "extend")
	err = lock.Extend(t.Context(), 30*time.Second)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrLockLost) || !errors.As(err, &qe) || qe.Agreed > 1 || qe.Refused != 2 {
		t.Fatalf("Extend with the key gone on 2 of 3: got %v", err)
	}
	lock.WaitForCalls()
	c.wantValues("extend", "", "", lock.Token())
}

// TestCancelMidAttempt: a caller's context that ends while replies are out still leaves
// no key behind: not on the nodes that answered, nor on a paused node whose SET lands
// after the caller gave up.
func TestCancelMidAttempt(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{NodeTimeout: 500 * time.Millisecond})
	c.admin[2].Set(t.Context(), "cancelled", "foreign", time.Minute)
	if err := c.admin[0].Ping(t.Context()).Err(); err != nil { // warm the admin connection
		t.Fatal(err)
	}
	c.servers[0].Pause() // its reply stays out, so the attempt is undecided: 1 yes, 1 no
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := c.client.TryAcquire(ctx, "cancelled", 10*time.Second)
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrNotAcquired and context.DeadlineExceeded", err)
	}
	if v := c.admin[1].Get(t.Context(), "cancelled").Val(); v != "" {
		t.Fatalf("node 2 still holds %q after the cancelled attempt", v)
	}
	c.servers[0].Resume()
	c.client.Close() // the SET lands on node 1 now, and the queued DEL after it
	c.wantValues("cancelled", "", "", "foreign")
}

// TestScriptCacheLoss: SCRIPT FLUSH and a node restart (with its data kept) between
// calls: EVALSHA meets NOSCRIPT, EVAL takes over, and Extend and Release still work.
func TestScriptCacheLoss(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{Persistent: true}, redlock.Options{})
	lock, err := c.client.TryAcquire(t.Context(), "flushed", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range c.admin {
		if err := a.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := lock.Extend(t.Context(), 20*time.Second); err != nil {
		t.Fatalf("Extend after SCRIPT FLUSH: %v", err)
	}
	// Node 1's SET and Extend may still be out (a majority decided): let them land first.
	lock.WaitForCalls()
	c.servers[0].Restart() // appendfsync always: the key survives, the script cache does not
	if got := c.admin[0].Get(t.Context(), "flushed").Val(); got != lock.Token() {
		t.Fatalf("restarted node holds %q, want our token", got)
	}
	if err := lock.Extend(t.Context(), 30*time.Second); err != nil {
		t.Fatalf("Extend after a restart: %v", err)
	}
	lock.WaitForCalls()
	if pttl := c.admin[0].PTTL(t.Context(), "flushed").Val(); pttl < 29*time.Second {
		t.Fatalf("restarted node PTTL %v, want about 30 s", pttl)
	}
	for _, a := range c.admin {
		a.ScriptFlush(t.Context())
	}
	c.servers[1].Restart()
	if err := lock.Release(t.Context()); err != nil {
		t.Fatalf("Release after SCRIPT FLUSH and a restart: %v", err)
	}
	lock.WaitForCalls()
	c.wantValues("flushed", "", "", "")
}

// TestNodeErrorReplies: WRONGTYPE and READONLY replies count as failed nodes, named in
// the error.
func TestNodeErrorReplies(t *testing.T) {
	t.Run("WRONGTYPE", func(t *testing.T) {
		c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
		c.admin[0].HSet(t.Context(), "hash", "f", "v")
		c.admin[1].HSet(t.Context(), "hash", "f", "v")
		_, err := c.client.TryAcquire(t.Context(), "hash", time.Second)
		if !errors.Is(err, redlock.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
		wantNodeErrors(t, err, "WRONGTYPE", c.servers[0].Addr(), c.servers[1].Addr())
		c.client.Close() // the clean-up waits at most the node timeout: wait for its DEL on node 3
		if v := c.admin[2].Get(t.Context(), "hash").Val(); v != "" {
			t.Fatalf("node 3 still holds %q", v) // nodes 1 and 2 hold hashes, GET errors there
		}
	})
	t.Run("READONLY", func(t *testing.T) {
		// A default go-redis client retries READONLY with back-off until the node timeout
		// hides it; NewFromURLs's clients do not retry, so the cause shows.
		servers := redistest.StartN(t, 2, redistest.Options{})
		replica, master := servers[0], servers[1]
		if err := replica.Client().SlaveOf(t.Context(), "127.0.0.1", fmt.Sprint(master.Port())).Err(); err != nil {
			t.Fatal(err)
		}
		client, err := redlock.NewFromURLs([]string{"redis://" + replica.Addr()}, redlock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		_, err = client.TryAcquire(t.Context(), "replica", time.Second)
		if !errors.Is(err, redlock.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
		wantNodeErrors(t, err, "READONLY", "redis://"+replica.Addr())
	})
}

// wantNodeErrors checks that err carries exactly one *NodeError per named node, each
// with a cause containing text.
func wantNodeErrors(t *testing.T, err error, text string, nodes ...string) {
	t.Helper()
	var me *multierror.Error
	if !errors.As(err, &me) || len(me.Errors) != len(nodes) {
		t.Fatalf("want %d node errors in %v", len(nodes), err)
	}
	for i, e := range me.Errors {
		var ne *redlock.NodeError
		if !errors.As(e, &ne) || ne.Node != nodes[i] || !strings.Contains(ne.Err.Error(), text) {
			t.Fatalf("node error %d = %v, want node %s with %q", i, e, nodes[i], text)
		}
	}
}
