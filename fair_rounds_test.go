package redlock_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// fairCall is a recorded call of a fair script, told apart by its arguments: a ticket
// draw (fair_ticket.lua: the counter's TTL first), an attempt or try
// (fair_acquire.lua or fair_fenced_acquire.lua: token, TTL, waiter id, ticket, lease,
// and the owner, a fence or a hand registration), or a release or removal
// (fair_release.lua: token or "", waiter id, the owner).
type fairCall struct {
	kind      string // "draw", "acquire" or "release"
	token, id string // the draw's: id only
}

// parseFairCall returns the fair script call that args (EVALSHA or EVAL) make, and
// false for any other command.
func parseFairCall(args []any) (fairCall, bool) {
	if len(args) < 3 {
		return fairCall{}, false
	}
	name := strings.ToLower(fmt.Sprint(args[0]))
	nkeys, err := strconv.Atoi(fmt.Sprint(args[2]))
	if (name != "evalsha" && name != "eval") || err != nil || (nkeys != 4 && nkeys != 5) || len(args) < 3+nkeys+2 {
		return fairCall{}, false
	}
	argv := make([]string, 0, len(args)-3-nkeys)
	for _, a := range args[3+nkeys:] {
		argv = append(argv, fmt.Sprint(a))
	}
	_, numeric := strconv.ParseInt(argv[0], 10, 64)
	switch {
	case numeric == nil && (len(argv) == 3 || len(argv) == 6):
		return fairCall{kind: "draw", id: argv[1]}, true
	case len(argv) >= 5:
		return fairCall{kind: "acquire", token: argv[0], id: argv[2]}, true
	case len(argv) <= 3:
		return fairCall{kind: "release", token: argv[0], id: argv[1]}, true
	}
	return fairCall{}, false
}

// fairRounds counts the fair rounds among recorded calls: TryAcquire-mode tries
// (fair_acquire.lua with no waiter id) and a waiter's attempts (with one), each told
// apart by its token, on whichever nodes their calls were sent to, and ticket draws,
// the most any node was sent.
func fairRounds(calls []sentCall) (tries, draws, attempts int) {
	tokens := map[string]bool{}
	drawsOn := map[int]int{}
	for _, call := range calls {
		fc, _ := parseFairCall(call.args)
		switch {
		case fc.kind == "draw":
			drawsOn[call.node]++
			draws = max(draws, drawsOn[call.node])
		case fc.kind == "acquire" && !tokens[fc.token]:
			tokens[fc.token] = true
			if fc.id == "" {
				tries++
			} else {
				attempts++
			}
		}
	}
	return tries, draws, attempts
}

// TestFairRequeueRounds: a Client that releases a fair lock while another Client waits
// for it, and at once calls Acquire again (a worker in a loop on a hot key), knows that
// someone is queued: it skips the TryAcquire-mode try, which could only fail, and makes
// two rounds in all (the ticket, which queues it behind the other waiter, and the
// attempt that wins after the other's release), not four as before: a try, the ticket,
// an attempt that only queued it, and the one that wins; and its own release, which
// names the other waiter the head, does not make it attempt before its turn.
func TestFairRequeueRounds(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	rec := &recorder{}
	a, err := redlock.New(rec.clients(c.servers), fairOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	first, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(ctx, a, "k", 5*time.Second) // a waits once, and so subscribes
	c.waitQueued("k", 1)
	eventually(t, "a listening on every node", func() bool { return listening(len(c.admin), a) })
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	held := wantResult(t, "a's first lock", got).lock
	g := &grants{}
	g.queueWaiter(ctx, c, "k", 1, 100*time.Millisecond, 2) // behind a's entry
	eventually(t, "both subscriptions", func() bool { return subscribers(ctx, c.admin, "k") >= 2 })
	// The nodes' ticket counters may differ by now (one drew a number above the
	// ticket its draw's majority agreed on; seen once in 60 runs), and a draw that
	// meets different numbers attempts at once (TestFairDrawQueuesBehind): make
	// them alike, above every ticket queued.
	_, _, counter := redlock.FairKeys("k")
	for _, admin := range c.admin {
		if err := admin.Set(ctx, counter, 100, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := len(rec.sent())
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := a.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g.wg.Wait()
	calls := rec.sent()[before:]
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	tries, draws, attempts := fairRounds(calls)
	t.Logf("after its release: %d tries, %d draws, %d attempts", tries, draws, attempts)
	if tries != 0 {
		t.Errorf("%d TryAcquire-mode tries with another Client queued: it cannot win them", tries)
	}
	// The draw queues it and registers a hand token; the other's release hands it the
	// key on every node, so no attempt is needed (with an attempt, 1 and 1 before).
	if draws != 1 || attempts != 0 {
		t.Errorf("%d draws and %d attempts, want 1 and 0 (the draw queues it, then the nodes hand it the key)", draws, attempts)
	}
	if len(g.order) != 1 {
		t.Errorf("the other waiter was granted %d times, want once, before a", len(g.order))
	}
}
