package redlock_test

// The Logger's edge cases: several CheckNodes problems on one node, and a node's
// held-back line on an idle Client; on real redis-server nodes.

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

// TestLoggerConfigProblemsAllShown: CheckNodes can find two problems on one node (a
// CONFIG the ACL denies, and go-redis retries left on); the rate limit must not hide
// the second one, found in the same call.
func TestLoggerConfigProblemsAllShown(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	ctx := context.Background()
	admin := servers[0].Client()
	if err := admin.Do(ctx, "ACL", "SETUSER", "noconfig", "on", ">pw", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	rdbs := redistest.Clients(servers)
	// Node 1 logs in as that user, with go-redis's default retries (MaxRetries 3).
	limited := redis.NewClient(&redis.Options{Addr: servers[0].Addr(), Username: "noconfig", Password: "pw"})
	defer limited.Close()
	rdbs[0] = limited
	logs := &lineRecorder{}
	client, err := redlock.New(rdbs, redlock.Options{Logger: newLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	err = client.CheckNodes(ctx)
	if err == nil || !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "MaxRetries") {
		t.Fatalf("CheckNodes: %v; want the denied CONFIG and the retries", err)
	}
	lines := logs.with("redlock: node configuration problem")
	byNode := map[string]string{}
	for _, l := range lines {
		byNode[l.attrs["node"]] += l.attrs["error"] + "\n"
	}
	var first string // node 1's lines: the one that names the denied CONFIG
	for _, text := range byNode {
		if strings.Contains(text, "NOPERM") {
			first = text
		}
	}
	if !strings.Contains(first, "MaxRetries") {
		t.Fatalf("node 1's configuration lines:\n%s\nwant both of its problems; all lines: %+v", first, lines)
	}
}

// TestLoggerRecoveryNotStale: a node that answers again within a second of its
// "failing" line, on a Client that then goes idle, still gets its "recovered" line a
// second after the first one: the last line about a node tells its state, with no
// further call needed.
func TestLoggerRecoveryNotStale(t *testing.T) {
	const failing, recovered = "redlock: node failing", "redlock: node recovered"
	servers := redistest.StartN(t, 3, redistest.Options{})
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = "redis://" + s.Addr()
	}
	logs := &lineRecorder{}
	client, err := redlock.NewFromURLs(urls, redlock.Options{NodeTimeout: 20 * time.Millisecond, Logger: newLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	step := func() {
		if lock, err := client.TryAcquire(ctx, "log:stale", time.Second); err == nil {
			_ = lock.Release(ctx)
			lock.WaitForCalls()
		}
	}
	// The paused node's lines (under load another node may miss the 20 ms too).
	count := func(msg string) int { return len(nodeLines(logs, msg, servers[1].Port())) }
	step()
	servers[1].Pause()
	eventually(t, "a failing line", func() bool { step(); return count(failing) > 0 })
	shown := time.Now()
	servers[1].Resume()
	step() // the node answers: too soon after its failing line to print at once
	if time.Since(shown) >= time.Second || count(recovered) != 0 {
		t.Skipf("the recovery came %v after the failing line: not held back", time.Since(shown))
	}
	// No more calls: the held-back line must come by itself.
	eventually(t, "the recovered line, with the Client idle", func() bool { return count(recovered) > 0 })
	if count(failing) != 1 || count(recovered) != 1 {
		t.Fatalf("%d failing and %d recovered lines, want 1 and 1: %+v", count(failing), count(recovered), logs.all())
	}
}

// nodeLines returns the records with message msg about the node on port.
func nodeLines(logs *lineRecorder, msg string, port int) (out []record) {
	for _, l := range logs.with(msg) {
		if strings.HasSuffix(l.attrs["node"], ":"+strconv.Itoa(port)) {
			out = append(out, l)
		}
	}
	return out
}
