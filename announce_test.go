package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// releaseMessages subscribes, with a pattern, to every node's release channels, and
// returns a function that reports what each node published on them since: it publishes
// a marker on each node after the lock's calls have all returned, and reads up to it.
// A pattern subscription is not counted by release.lua's PUBSUB NUMSUB, so the
// listener itself changes nothing.
func releaseMessages(t *testing.T, c *cluster) func() [][]string {
	t.Helper()
	var subs []*redis.PubSub
	for _, a := range c.admin {
		ps := a.PSubscribe(t.Context(), "redlock:released:*")
		t.Cleanup(func() { ps.Close() })
		if _, err := ps.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, ps)
	}
	return func() [][]string {
		t.Helper()
		out := make([][]string, len(subs))
		for i, ps := range subs {
			if err := c.admin[i].Publish(t.Context(), "redlock:released:marker", "end").Err(); err != nil {
				t.Fatal(err)
			}
			for {
				msg, err := ps.ReceiveMessage(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if msg.Channel == "redlock:released:marker" {
					break
				}
				out[i] = append(out[i], msg.Payload)
			}
		}
		return out
	}
}

// TestReleaseAnnouncedOnce: a release that another Client waits for is announced
// once, by the releasing Client on one node that deleted the key ("!<token>"), not by
// each node that deleted it (five messages to every waiting Client before); the waiter,
// which polls once an hour, gets the lock at once. An owner's last hold is announced
// the same way, by its id. A release nobody listens for is not announced. (A plain
// lock's release is announced on the line node if anyone listens there, the
// releasing Client included, which ignores it: its own view of its subscription may
// be stale, TestLineReleaseAnnouncedDespiteStaleOwnSubscription.)
func TestReleaseAnnouncedOnce(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	heard := releaseMessages(t, c)
	for _, owner := range []string{"", "job"} {
		waiter := c.newClient(noPolling)
		key := "announced-" + owner
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		hctx := ctx
		if owner != "" {
			hctx = redlock.WithOwner(ctx, owner)
		}
		lock, err := c.client.TryAcquire(hctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		results := acquireAsync(ctx, waiter, key, time.Minute)
		// Subscribed on every node, the line node included: else the waiter may hear
		// of the release only by its check after the last subscription, with nothing
		// published.
		eventually(t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == len(c.servers) })
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := wantResult(t, "waiter (owner "+strconv.Quote(owner)+")", results)
		c.client.WaitForCalls() // the announcement is sent in the background
		var all []string
		for _, msgs := range heard() {
			all = append(all, msgs...)
		}
		// A plain lock's release is announced on the key's line node, naming the
		// waiter's Client, the line's head: "!<token> <line id>"; the releasing Client
		// announces it too if that node's reply came much later than the majority's
		// (a loaded machine), but never more than that.
		want := "!" + lock.Token()
		ok := len(all) == 1 || len(all) == 2 && owner == ""
		for _, m := range all {
			ok = ok && (m == want || strings.HasPrefix(m, want+" "))
		}
		if !ok {
			t.Errorf("owner %q: the nodes published %q, want %q once (a plain lock's: at most twice)", owner, all, want)
		}
		// Once the waiter's Client has gone, nobody else listens: nothing is published.
		if err := r.lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := waiter.Close(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the waiter's subscriptions to go", func() bool { return allSubscribers(t, c, key) == 0 })
		heard() // the waiter's own release, announced to itself
		lock, err = c.client.TryAcquire(hctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		c.client.WaitForCalls()
		for i, msgs := range heard() {
			if len(msgs) > 0 {
				t.Errorf("owner %q: nobody listening, node %d published %q", owner, i, msgs)
			}
		}
		cancel()
	}
}

// allSubscribers returns how many clients subscribe to key's release channel on all
// the nodes together.
func allSubscribers(t *testing.T, c *cluster, key string) int64 {
	t.Helper()
	ch := redlock.ReleaseChannel(key)
	var n int64
	for _, a := range c.admin {
		m, err := a.PubSubNumSub(t.Context(), ch).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += m[ch]
	}
	return n
}
