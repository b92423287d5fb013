package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// resetStats clears every node's INFO commandstats.
func (c *cluster) resetStats() {
	c.t.Helper()
	for _, a := range c.admin {
		if err := a.ConfigResetStat(c.t.Context()).Err(); err != nil {
			c.t.Fatal(err)
		}
	}
}

// acquiresRan returns how many acquire scripts (one SET each) every node ran since
// the last resetStats.
func (c *cluster) acquiresRan() []int {
	c.t.Helper()
	ran := make([]int, len(c.admin))
	for i, a := range c.admin {
		stats, err := a.Info(c.t.Context(), "commandstats").Result()
		if err != nil {
			c.t.Fatal(err)
		}
		ran[i] = commandCalls(stats, "set")
	}
	return ran
}

// foreignOnLead loads the scripts, then sets key to another token on key's lead node
// only, and returns that node.
func (c *cluster) foreignOnLead(t *testing.T, key string) int {
	t.Helper()
	c.loadScripts()
	lead := c.client.Lead(key)
	if lead < 0 {
		t.Fatal("no lead for a key over healthy nodes")
	}
	if err := c.admin[lead].Set(t.Context(), key, "foreign", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	return lead
}

// TestLeadFirstLoserAsksOnlyTheLead: when the lead node says that another token holds
// the key, a lead-first attempt asks no other node, even though they would have said
// yes: it leaves no key behind and needs no clean-up.
func TestLeadFirstLoserAsksOnlyTheLead(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	lead := c.foreignOnLead(t, "hot")
	c.resetStats()
	_, err := c.client.TryAcquireLeadFirst(ctx, "hot", time.Second, "")
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("got %v, want a QuorumError with ErrNotAcquired", err)
	}
	c.client.WaitForCalls()
	if qe.Refused < 3 || qe.Failed != 0 {
		t.Errorf("got %d refused and %d failed, want the lead's refusal to count for a majority", qe.Refused, qe.Failed)
	}
	for i, ran := range c.acquiresRan() {
		if want := map[bool]int{true: 1, false: 0}[i == lead]; ran != want {
			t.Errorf("node %d ran %d acquires, want %d (lead: node %d)", i+1, ran, want, lead+1)
		}
	}
	for i, v := range c.values("hot") {
		if i != lead && v != "" {
			t.Errorf("node %d holds %q after the lost attempt, want no key", i+1, v)
		}
	}
}

// TestLeadFirstLoserDoesNotWaitForABusyNode: a lead-first attempt lost at the lead
// sends nothing to the other nodes, so its clean-up has nothing to undo and returns at
// once. It used to start a release step whose calls were all dropped, but only once
// each node's sender got to them: a sender stuck in a batch to a paused node held
// every lost attempt up for the node timeout (1 s here, so that a stalled box cannot
// make a lost attempt look that slow). Found in review.
func TestLeadFirstLoserDoesNotWaitForABusyNode(t *testing.T) {
	const nodeTimeout = time.Second
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{NodeTimeout: nodeTimeout})
	ctx := t.Context()
	lead := c.foreignOnLead(t, "hot")
	busy := (lead + 1) % 5
	c.servers[busy].Pause()
	defer c.servers[busy].Resume()
	// Four nodes grant another key; the call to the paused one stays out, so its
	// sender is in that batch until the node timeout.
	other, err := c.client.TryAcquire(ctx, "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the paused node's call taken out of its sender's queue", func() bool { return c.client.Queued(busy) == 0 })
	for range 3 {
		start := time.Now()
		if _, err := c.client.TryAcquireLeadFirst(ctx, "hot", time.Minute, ""); !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatalf("got %v, want ErrNotAcquired (the lead holds another token)", err)
		}
		if took := time.Since(start); took > nodeTimeout/2 {
			t.Fatalf("a lost lead-first attempt took %v: its clean-up waited for the busy node's sender", took)
		}
	}
	c.servers[busy].Resume()
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.client.WaitForCalls()
}

// TestLeadFirstReleaseNotOnTheLeadYet: a waiter wakes once a majority announced a
// release, maybe before the release reached the lead. A lead whose key still holds the
// released token says so, and the attempt asks the other nodes, which grant it; a
// lead held by any other token ends the attempt at the lead.
func TestLeadFirstReleaseNotOnTheLeadYet(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	lead := c.client.Lead("hot")
	c.admin[lead].Set(ctx, "hot", "released-token", time.Minute)
	if _, err := c.client.TryAcquireLeadFirst(ctx, "hot", time.Minute, "another-token"); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("lead held by a token other than the released one: got %v, want ErrNotAcquired", err)
	}
	lock, err := c.client.TryAcquireLeadFirst(ctx, "hot", time.Minute, "released-token")
	if err != nil {
		t.Fatalf("lead still held by the released token: %v", err)
	}
	lock.WaitForCalls()
	for i, v := range c.values("hot") {
		want := lock.Token()
		if i == lead {
			want = "released-token"
		}
		if v != want {
			t.Errorf("node %d holds %q, want %q", i+1, v, want)
		}
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLeadFirstWinnerTakesEveryNode: once the lead says yes, the attempt asks the other
// nodes, and the lock holds on all of them.
func TestLeadFirstWinnerTakesEveryNode(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	lock, err := c.client.TryAcquireLeadFirst(ctx, "hot", time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	vals := c.values("hot")
	for i, v := range vals {
		if v == "" || v != vals[0] {
			t.Fatalf("node values %q: want one token on every node (node %d)", vals, i+1)
		}
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLeadFirstSameLeadAcrossClients: Clients that name the nodes alike pick the same
// lead for a key whatever order they list the nodes in, and the leads of many keys
// spread over every node.
func TestLeadFirstSameLeadAcrossClients(t *testing.T) {
	servers := redistest.StartN(t, 5, redistest.Options{})
	forward := redistest.Clients(servers)
	backward := make([]redis.UniversalClient, len(forward))
	for i, rdb := range redistest.Clients(servers) {
		backward[len(forward)-1-i] = rdb
	}
	a, err := redlock.New(forward, redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := redlock.New(backward, redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	leads := make([]int, len(servers))
	for k := range 500 {
		key := fmt.Sprintf("job:%d", k)
		la, lb := a.Lead(key), b.Lead(key)
		if la < 0 || lb != len(servers)-1-la {
			t.Fatalf("key %q: leads %d and %d of the same nodes listed in reverse", key, la, lb)
		}
		leads[la]++
	}
	for i, n := range leads {
		if n < 50 { // 100 expected of 500 keys over 5 nodes
			t.Errorf("node %d leads %d of 500 keys: %v", i+1, n, leads)
		}
	}
}

// TestLeadFirstDownLead: with the lead down, a lead-first attempt asks the other nodes
// once the lead's call has failed and gets the lock from them; later attempts ask
// every node at once until the lead answers again.
func TestLeadFirstDownLead(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	lead := c.client.Lead("hot")
	c.servers[lead].Kill()
	lock, err := c.client.TryAcquireLeadFirst(ctx, "hot", time.Minute, "")
	if err != nil {
		t.Fatalf("lead-first attempt with the lead down: %v", err)
	}
	eventually(t, "the lead's call to fail", func() bool { return c.client.Lead("hot") == -1 })
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.servers[lead].Restart()
	eventually(t, "the lead to answer again", func() bool {
		lock, err := c.client.TryAcquire(ctx, "hot", time.Minute)
		if err != nil {
			return false
		}
		lock.Release(ctx)
		lock.WaitForCalls()
		return c.client.Lead("hot") == lead
	})
}

// TestLeadFirstStalledLead: a stalled lead costs the first lead-first attempt half the
// node timeout (leadWait), after which it asks the other nodes and gets the lock from
// them; from then on, while the stalled call waits for its read timeout, attempts ask
// every node at once.
func TestLeadFirstStalledLead(t *testing.T) {
	const nodeTimeout = 400 * time.Millisecond
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{NodeTimeout: nodeTimeout})
	ctx := t.Context()
	c.loadScripts()
	lead := c.client.Lead("hot")
	c.servers[lead].Pause()
	defer c.servers[lead].Resume()
	start := time.Now()
	lock, err := c.client.TryAcquireLeadFirst(ctx, "hot", time.Minute, "")
	if err != nil {
		t.Fatalf("lead-first attempt with the lead stalled: %v", err)
	}
	if took := time.Since(start); took < nodeTimeout/2 {
		t.Errorf("granted after %v, before the lead's wait of %v was over", took, nodeTimeout/2)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.client.Lead("hot"); got != -1 {
		t.Errorf("lead %d after it was silent for the lead's wait, want -1 (ask every node)", got)
	}
	start = time.Now()
	lock, err = c.client.TryAcquireLeadFirst(ctx, "hot", time.Minute, "")
	if err != nil {
		t.Fatalf("attempt after the lead was seen failing: %v", err)
	}
	if took := time.Since(start); took >= nodeTimeout/2 {
		t.Errorf("second attempt took %v: it waited for the stalled lead again", took)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// slowHook delays every reply of one node by d: the node answers, but late.
type slowHook struct{ d time.Duration }

func (slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		time.Sleep(h.d)
		return err
	}
}
func (h slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		time.Sleep(h.d)
		return err
	}
}

// TestLeadFirstSlowLeadCostsOneAttempt: a lead that answers, but only after the lead's
// wait, costs one lead-first attempt that wait; its later successes do not make it
// lead again at once (found in review: every attempt paid the wait).
func TestLeadFirstSlowLeadCostsOneAttempt(t *testing.T) {
	const nodeTimeout = 400 * time.Millisecond
	servers := redistest.StartN(t, 5, redistest.Options{})
	rdbs := redistest.Clients(servers)
	client, err := redlock.New(rdbs, redlock.Options{NodeTimeout: nodeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := t.Context()
	lead := client.Lead("hot")
	rdbs[lead].AddHook(slowHook{d: nodeTimeout * 6 / 10})
	slow := 0
	for i := range 4 {
		start := time.Now()
		lock, err := client.TryAcquireLeadFirst(ctx, "hot", time.Minute, "")
		took := time.Since(start)
		if err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		if took >= nodeTimeout/2 {
			slow++
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lock.WaitForCalls() // the slow lead's calls too: they succeed
	}
	if slow != 1 {
		t.Errorf("%d of 4 lead-first attempts waited for the slow lead, want 1", slow)
	}
}

// TestLeadFirstStaleKeyOnLead: a key that no release will delete, left only on the
// lead (a clean-up that did not reach it), makes the lead refuse every woken
// attempt; the next poll asks every node at once and gets the lock from the free
// majority, so the stale key costs a poll, not its TTL.
func TestLeadFirstStaleKeyOnLead(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	const poll = 300 * time.Millisecond
	waiter := c.newClient(redlock.Options{RetryDelay: func(int) time.Duration { return poll }})
	lead := waiter.Lead("hot")
	held, err := c.client.TryAcquire(ctx, "hot", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	held.WaitForCalls()
	results := acquireAsync(ctx, waiter, "hot", time.Minute)
	eventually(t, "the waiter's subscriptions", func() bool { return subscribed(ctx, c.admin, "hot") })
	c.admin[lead].Set(ctx, "hot", "stale", time.Minute) // replaces the holder's key there
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "waiter", results)
	if took := r.at.Sub(released); took > 3*poll {
		t.Errorf("waiter got the lock %v after the release, want within a poll (%v)", took, poll)
	}
	if got := c.values("hot")[lead]; got != "stale" {
		t.Errorf("lead holds %q, want the stale key untouched", got)
	}
}
