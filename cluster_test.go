package redlock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/fencecheck"
	"github.com/redlock-go/redlock/internal/redistest"
)

// members is a quorum of three members that are not all plain servers: two Redis
// Clusters of two masters each, and one plain redis-server (five processes in all).
type members struct {
	t        *testing.T
	clusters []*redistest.Cluster
	plain    *redistest.Server
}

func newMembers(t *testing.T) *members {
	t.Helper()
	m := &members{t: t}
	for range 2 {
		m.clusters = append(m.clusters, redistest.StartCluster(t, 2, redistest.Options{}))
	}
	m.plain = redistest.Start(t, redistest.Options{})
	return m
}

// rdbs returns fresh go-redis clients, one per member: a ClusterClient for each cluster
// and a plain client for the plain server. They are closed when the test ends.
func (m *members) rdbs() []redis.UniversalClient {
	var out []redis.UniversalClient
	for _, c := range m.clusters {
		out = append(out, c.ClusterClient())
	}
	return append(out, m.plain.Client())
}

// newClient returns a Client over fresh clients of the members, closed at the end.
func (m *members) newClient(opts redlock.Options) *redlock.Client {
	m.t.Helper()
	c, err := redlock.New(m.rdbs(), opts)
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { c.Close() })
	return c
}

// clusterKeys are lock keys that exercise Redis' hash-tag rules: no tag, a tag, a "{"
// without a "}" after it, an empty tag "{}" (the whole key is hashed), and a "}" before
// any "{".
var clusterKeys = []string{"job", "{user1000}.lock", "a{b", "a{}b", "}x{"}

// TestClusterMembers: every feature with two of three members Redis Clusters. The
// subtests share the members; healing, which restarts a master, comes last.
func TestClusterMembers(t *testing.T) {
	m := newMembers(t)
	t.Run("fencing", func(t *testing.T) { clusterFencing(t, m) })
	t.Run("release wakes another Client", func(t *testing.T) { clusterWakeUp(t, m) })
	t.Run("release announced on clusters only", func(t *testing.T) { clusterOnlyWakeUp(t, m) })
	t.Run("an owner's hold left is not announced", func(t *testing.T) { clusterOwnerHoldsLeft(t, m) })
	t.Run("handoff inside a Client", func(t *testing.T) { clusterHandoff(t, m) })
	t.Run("healing", func(t *testing.T) { clusterHealing(t, m, false) })
	t.Run("healing with fencing", func(t *testing.T) { clusterHealing(t, m, true) })
}

// clusterFencing: fenced locks work for keys with and without hash tags, the tokens of
// two Clients are unique and strictly increase in real-time order, and the counters are
// where FenceKey says.
func clusterFencing(t *testing.T, m *members) {
	opts := redlock.Options{Fencing: true, RetryDelay: redlock.ExponentialJitter(time.Millisecond, 4*time.Millisecond)}
	clients := []*redlock.Client{m.newClient(opts), m.newClient(opts)}
	admins := m.rdbs()
	base := time.Now()
	for _, key := range clusterKeys {
		t.Run(fmt.Sprintf("key=%q", key), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var (
				mu     sync.Mutex
				grants []fencecheck.Grant
				wg     sync.WaitGroup
			)
			for w := range 4 {
				wg.Go(func() {
					client := clients[w%2]
					for i := range 10 {
						start := time.Now()
						lock, err := client.Acquire(ctx, key, 100*time.Millisecond)
						end := time.Now()
						if err != nil {
							t.Errorf("Acquire: %v", err)
							return
						}
						mu.Lock()
						grants = append(grants, fencecheck.Grant{Start: start.Sub(base), End: end.Sub(base), Fence: lock.Fence()})
						mu.Unlock()
						if (w+i)%4 != 0 { // every fourth lock is left to expire
							_ = lock.Release(ctx)
						}
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if err := fencecheck.Violation(grants); err != nil {
				t.Fatal(err)
			}
			// The counters are where FenceKeys says, at the last token on a majority.
			var last uint64
			for _, g := range grants {
				last = max(last, g.Fence)
			}
			at := 0
			for _, rdb := range admins {
				if v, _ := rdb.Get(ctx, redlock.FenceKeys(rdb, key)[0]).Uint64(); v == last {
					at++
				}
			}
			if at < 2 {
				t.Fatalf("the last token %d is the counter on %d members, want at least 2", last, at)
			}
		})
	}
}

// masterOf returns the master of cluster c that serves key's slot (StartCluster gives
// master i the i-th equal range of slots), asking the cluster for the slot.
func masterOf(t *testing.T, c *redistest.Cluster, key string) *redistest.Server {
	t.Helper()
	slot, err := c.Masters[0].Client().ClusterKeySlot(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return c.Masters[int(slot)*len(c.Masters)/16384]
}

// clusterWakeUp: with polling off, a waiter in another Client wakes when the holder
// releases. The releasing Client announces the release with one PUBLISH on a member
// that deleted the key (Client.announce). The key is chosen so that, on both clusters,
// the key's master differs from the channel's: a message published on a cluster goes
// over its bus to every master, including the one the waiter's subscription is on, and
// release.lua's count of subscribers, made on the key's master, cannot see the waiter
// there (the announcement is sent all the same when a member is a cluster).
func clusterWakeUp(t *testing.T, m *members) {
	holder, waiter := m.newClient(noPolling), m.newClient(noPolling)
	key := keyApartFromChannel(t, m, "wake")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lock, err := holder.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()

	// Listeners of our own on every member, to see the announcement arrive (on one of
	// them: a node that deleted the key, the lead if it was among the first majority).
	ch := redlock.ReleaseChannel(key)
	heard := make(chan *redis.Message, 10)
	for _, rdb := range m.rdbs() {
		ps := rdb.Subscribe(ctx, ch)
		t.Cleanup(func() { ps.Close() })
		if _, err := ps.Receive(ctx); err != nil { // the subscription is confirmed
			t.Fatal(err)
		}
		go func() {
			for msg := range ps.Channel() {
				heard <- msg
			}
		}()
	}

	results := acquireAsync(ctx, waiter, key, time.Minute)
	// The waiter's subscriptions: on some master of each cluster (go-redis picks one),
	// and on the plain server, next to ours. PUBSUB NUMSUB counts a node's own clients.
	eventually(t, "the waiter's subscriptions", func() bool {
		for _, c := range m.clusters {
			var subs int64
			for _, master := range c.Masters {
				n, err := master.Client().PubSubNumSub(ctx, ch).Result()
				if err != nil {
					return false
				}
				subs += n[ch]
			}
			if subs < 2 {
				return false
			}
		}
		n, err := m.plain.Client().PubSubNumSub(ctx, ch).Result()
		return err == nil && n[ch] == 2
	})
	eventually(t, "the waiter to be woken once its subscriptions were made", func() bool { return waiter.Wakes(key) >= 1 })
	wakes := waiter.Wakes(key)
	released := time.Now()
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "waiter", results)
	t.Logf("waiter got the lock %v after the release", r.at.Sub(released))
	if took := r.at.Sub(released); took > 2*time.Second {
		t.Errorf("the waiter got the lock %v after the release, want promptly", took)
	}
	select {
	case msg := <-heard:
		if want := "!" + lock.Token(); msg.Payload != want && !strings.HasPrefix(msg.Payload, want+" ") {
			t.Errorf("a member announced %q, want the releasing Client's notice of its token", msg.Payload)
		}
	case <-time.After(5 * time.Second):
		t.Error("no announcement on any member")
	}
	eventually(t, "the waiter to hear the announcement", func() bool { return waiter.Wakes(key) > wakes })
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// clusterOnlyWakeUp: a quorum of the two clusters alone, and a key whose master differs
// from its channel's on both, so that release.lua counts no subscriber on any node
// that deleted the key: the release is announced all the same, and the waiter in
// another Client (polling off) gets the lock at once.
func clusterOnlyWakeUp(t *testing.T, m *members) {
	newClient := func() *redlock.Client {
		c, err := redlock.New(m.rdbs()[:len(m.clusters)], noPolling)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	holder, waiter := newClient(), newClient()
	key := keyApartFromChannel(t, m, "only")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lock, err := holder.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	results := acquireAsync(ctx, waiter, key, time.Minute)
	eventually(t, "the waiter to be woken once its subscriptions were made", func() bool { return waiter.Wakes(key) >= 1 })
	released := time.Now()
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "waiter", results)
	if took := r.at.Sub(released); took > 2*time.Second {
		t.Errorf("the waiter got the lock %v after the release, want promptly", took)
	}
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// clusterOwnerHoldsLeft: with Cluster members a Client announces every release its
// replies show gone from a majority (their subscriber counts miss other masters'), so
// a hold released while the owner's other hold keeps the key (reentrant_release.lua's
// 1 on every member, read as a delete) was announced "!<hold>": the waiter in another
// Client woke and attempted in vain, once per hold released (5 of 5).
func clusterOwnerHoldsLeft(t *testing.T, m *members) {
	holder, waiter := m.newClient(noPolling), m.newClient(noPolling)
	key := "cluster-owner-left"
	ctx := redlock.WithOwner(t.Context(), "job")
	a, err := holder.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	results := acquireAsync(t.Context(), waiter, key, time.Minute)
	eventually(t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == 3 })
	time.Sleep(200 * time.Millisecond)
	wakes := waiter.Wakes(key)
	for range 5 {
		b, err := holder.TryAcquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	holder.WaitForCalls()
	time.Sleep(200 * time.Millisecond)
	if got := waiter.Wakes(key); got != wakes {
		t.Errorf("the waiter was woken %d times by 5 releases of a second hold, the key held throughout", got-wakes)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "waiter", results)
	_ = r.lock.Release(t.Context())
}

// keyApartFromChannel returns the first key prefix+n whose master differs, on every
// cluster, from the master of its release channel.
func keyApartFromChannel(t *testing.T, m *members, prefix string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		apart := true
		for _, c := range m.clusters {
			apart = apart && masterOf(t, c, k) != masterOf(t, c, redlock.ReleaseChannel(k))
		}
		if apart {
			return k
		}
	}
}

// clusterHandoff: a Release hands the lock straight to a waiting Acquire of the same
// Client (handoff.lua) on cluster members.
func clusterHandoff(t *testing.T, m *members) {
	c := m.newClient(noPolling)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lock, err := c.TryAcquire(ctx, "handed", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	results := acquireAsync(ctx, c, "handed", time.Minute)
	eventually(t, "the waiter's offer", func() bool { return c.Offered("handed") })
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "waiter", results)
	r.lock.WaitForCalls()
	for i, rdb := range m.rdbs() {
		if got := rdb.Get(ctx, "handed").Val(); got != r.lock.Token() {
			t.Errorf("member %d holds %q, want the new lock's token", i+1, got)
		}
	}
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// clusterHealing: the master of the key's slot in one cluster member restarts empty;
// the next Extends prove the lock held by the other two members and put the key back
// there, with fencing also the counter.
func clusterHealing(t *testing.T, m *members, fencing bool) {
	key := "healed"
	if fencing {
		key = "healed-fenced"
	}
	c := m.newClient(redlock.Options{Fencing: fencing, NodeTimeout: time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lock, err := c.TryAcquire(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	member := m.clusters[0].ClusterClient()
	counter := redlock.FenceKeys(member, key)[0]
	masterOf(t, m.clusters[0], key).Restart()
	// The restarted master answers CLUSTERDOWN for a moment, until it rejoins.
	eventually(t, "the restarted master to answer, without the key and its counter", func() bool {
		n, err := member.Exists(ctx, key, counter).Result()
		return err == nil && n == 0
	})
	healed := func() bool {
		if member.Get(ctx, key).Val() != lock.Token() {
			return false
		}
		return !fencing || member.Get(ctx, counter).Val() == strconv.FormatUint(lock.Fence(), 10)
	}
	extends := 0
	for !healed() {
		extends++
		if err := lock.Extend(ctx, 10*time.Second); err != nil {
			t.Fatalf("Extend with two of three members holding the lock: %v", err)
		}
		lock.WaitForCalls()
		if ctx.Err() != nil {
			t.Fatal("the restarted master never got the key back")
		}
	}
	t.Logf("healed by Extend number %d", extends)
	if pttl := member.PTTL(ctx, key).Val(); pttl < 9*time.Second {
		t.Fatalf("healed key's PTTL %v, want about 10 s", pttl)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
