package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// heldCounter is the Observer a locks-held gauge would be: up on a granted Acquire,
// down on Ended. It also counts grants and ends per key, and the lowest count seen.
type heldCounter struct {
	mu             sync.Mutex
	held, lowest   int
	lost           int
	grants, ends   map[string]int
	renewals, keep int // renewal events, OpKeepAlive events
}

func newHeldCounter() *heldCounter {
	return &heldCounter{grants: map[string]int{}, ends: map[string]int{}}
}

func (h *heldCounter) Observe(_ context.Context, e redlock.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.Op == redlock.OpAcquire && e.Outcome == redlock.OutcomeOK {
		h.held++
		h.grants[e.Key]++
	}
	if e.Ended {
		h.held--
		h.ends[e.Key]++
		if e.Lost {
			h.lost++
		}
	}
	if e.Renewal && e.Op == redlock.OpExtend {
		h.renewals++
	}
	if e.Op == redlock.OpKeepAlive {
		h.keep++
	}
	h.lowest = min(h.lowest, h.held)
}

// TestObserverLocksHeldNeverDrifts: with real redis-server nodes flushed, paused,
// killed and restarted under many locks (released at once, extended, or kept alive
// through the faults), a locks-held count kept from the events never goes below
// zero, and returns to zero once every lock is released: each granted lock reported
// its end exactly once, losses included.
func TestObserverLocksHeldNeverDrifts(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	counter := newHeldCounter()
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = "redis://" + s.Addr()
	}
	client, err := redlock.NewFromURLs(urls, redlock.Options{Observer: counter})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	stopChaos := make(chan struct{})
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		chaos(stopChaos, servers)
	}()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				holdOnce(client, fmt.Sprintf("drift:%d:%d", g, i), i%3)
			}
		}()
	}
	wg.Wait()
	close(stopChaos)
	<-chaosDone

	counter.mu.Lock()
	defer counter.mu.Unlock()
	t.Logf("%d locks granted, %d lost, %d renewals, %d keep-alive losses", len(counter.grants), counter.lost, counter.renewals, counter.keep)
	if counter.held != 0 || counter.lowest < 0 {
		t.Fatalf("locks held at the end: %d (want 0); lowest: %d (want ≥ 0)", counter.held, counter.lowest)
	}
	for key, n := range counter.grants {
		if n != 1 || counter.ends[key] != 1 {
			t.Errorf("%s: %d grants, %d ends; want 1 and 1", key, n, counter.ends[key])
		}
	}
	if len(counter.grants) < 20 || counter.lost == 0 {
		t.Fatalf("the faults did not bite: %d grants, %d losses", len(counter.grants), counter.lost)
	}
}

// holdOnce acquires key and releases it: at once (mode 0), kept alive for a while
// (mode 1), or after an Extend (mode 2).
func holdOnce(client *redlock.Client, key string, mode int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	lock, err := client.Acquire(ctx, key, time.Second)
	if err != nil {
		return
	}
	switch mode {
	case 1:
		work, stop := lock.KeepAlive(context.Background())
		select {
		case <-work.Done():
		case <-time.After(time.Duration(200+rand.N(400)) * time.Millisecond): // the work
		}
		stop()
	case 2:
		_ = lock.Extend(context.Background(), time.Second)
	}
	_ = lock.Release(context.Background())
}

// chaos runs faults on the nodes until stop is closed: flushing two nodes (every
// lock is lost), pausing one, pausing two (renewals fail), killing and restarting one.
func chaos(stop <-chan struct{}, servers []*redistest.Server) {
	ctx := context.Background()
	for step := 0; ; step++ {
		select {
		case <-stop:
			return
		case <-time.After(150 * time.Millisecond):
		}
		a, b := servers[step%3], servers[(step+1)%3]
		switch step % 4 {
		case 0:
			for _, s := range []*redistest.Server{a, b} {
				s.Client().FlushAll(ctx)
			}
		case 1:
			a.Pause()
			time.Sleep(200 * time.Millisecond)
			a.Resume()
		case 2:
			a.Pause()
			b.Pause()
			time.Sleep(700 * time.Millisecond)
			a.Resume()
			b.Resume()
		case 3:
			a.Restart()
		}
	}
}

// TestLoggerNodeFailingAndRecovering: a paused node gets one "failing" line and, once
// resumed, one "recovered" line, named by its redacted URL: the password never shows.
func TestLoggerNodeFailingAndRecovering(t *testing.T) {
	const password = "s3cret-pw"
	servers := redistest.StartN(t, 3, redistest.Options{})
	urls := make([]string, len(servers))
	for i, s := range servers {
		admin := s.Client() // redistest's readiness check cannot log in: set it after
		if err := admin.ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
			t.Fatal(err)
		}
		urls[i] = "redis://:" + password + "@" + s.Addr()
	}
	logs := &lineRecorder{}
	client, err := redlock.NewFromURLs(urls, redlock.Options{NodeTimeout: 20 * time.Millisecond, Logger: newLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	step := func() {
		if lock, err := client.TryAcquire(ctx, "log:node", time.Second); err == nil {
			_ = lock.Release(ctx)
		}
	}
	// Only the paused node's lines: on a loaded machine a call to another node can
	// miss the 20 ms node timeout too, and that node then has lines of its own.
	port := fmt.Sprint(servers[1].Port())
	paused := func(lines []record) (out []record) {
		for _, l := range lines {
			if strings.HasSuffix(l.attrs["node"], ":"+port) {
				out = append(out, l)
			}
		}
		return out
	}
	step()
	servers[1].Pause()
	eventually(t, "a failing line", func() bool { step(); return len(paused(logs.with("redlock: node failing"))) > 0 })
	servers[1].Resume()
	eventually(t, "a recovered line", func() bool { step(); return len(paused(logs.with("redlock: node recovered"))) > 0 })

	failing, recovered := paused(logs.with("redlock: node failing")), paused(logs.with("redlock: node recovered"))
	if len(failing) != 1 || len(recovered) != 1 ||
		recovered[0].attrs["node"] != failing[0].attrs["node"] || failing[0].attrs["class"] != redlock.ClassTimeout {
		t.Fatalf("want one failing and one recovered line for the node on port %s: %+v, %+v", port, failing, recovered)
	}
	// A configuration problem is logged under the node's name too.
	admin := redis.NewClient(&redis.Options{Addr: servers[0].Addr(), Password: password})
	defer admin.Close()
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.CheckNodes(ctx); err == nil || logs.count("redlock: node configuration problem") == 0 {
		t.Fatalf("CheckNodes: %v; no configuration line", err)
	}
	if all := fmt.Sprint(logs.all()); strings.Contains(all, password) {
		t.Fatalf("a log line shows the password: %s", all)
	}
}

// TestLoggerLockLost: a lock lost while kept alive gets a line, naming the key by its
// hash; a loss an Extend proved is one Extend event (a renewal) with Lost, and a
// KeepAlive that gave up because renewals failed is one OpKeepAlive event.
func TestLoggerLockLost(t *testing.T) {
	logs := &lineRecorder{}
	counter := newHeldCounter()
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Logger: newLogger(logs), Observer: counter})
	ctx := context.Background()

	lock, err := c.client.Acquire(ctx, "log:lost", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	work, stop := lock.KeepAlive(ctx)
	for _, a := range c.admin {
		a.Del(ctx, "log:lost")
	}
	<-work.Done() // the next renewal finds the token gone
	stop()
	_ = lock.Release(ctx)

	lines := logs.with("redlock: lock lost while kept alive")
	if len(lines) != 1 || lines[0].attrs["key_hash"] == "" || strings.Contains(fmt.Sprint(lines[0].attrs), "log:lost") {
		t.Fatalf("lost-lock lines: %+v", lines)
	}
	counter.mu.Lock()
	if counter.lost != 1 || counter.keep != 0 || counter.held != 0 {
		t.Fatalf("after a loss an Extend proved: %d lost, %d keep-alive events, %d held", counter.lost, counter.keep, counter.held)
	}
	counter.mu.Unlock()

	lock, err = c.client.Acquire(ctx, "log:stalled", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	work, stop = lock.KeepAlive(ctx)
	c.servers[0].Pause()
	c.servers[1].Pause()
	<-work.Done() // no renewal can be confirmed
	stop()
	c.servers[0].Resume()
	c.servers[1].Resume()
	_ = lock.Release(ctx)
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if counter.lost != 2 || counter.keep != 1 || counter.held != 0 {
		t.Fatalf("after renewals failed: %d lost, %d keep-alive events, %d held", counter.lost, counter.keep, counter.held)
	}
}

// TestLoggerConfigProblem: CheckNodes logs the setting it found wrong, per node.
func TestLoggerConfigProblem(t *testing.T) {
	logs := &lineRecorder{}
	c := newCluster(t, 3, redistest.Options{Args: []string{"--maxmemory-policy", "allkeys-lru"}}, redlock.Options{Logger: newLogger(logs)})
	if err := c.client.CheckNodes(context.Background()); err == nil {
		t.Fatal("CheckNodes accepted allkeys-lru")
	}
	lines := logs.with("redlock: node configuration problem")
	if len(lines) != 3 || !strings.Contains(lines[0].attrs["error"], "maxmemory-policy") || lines[0].attrs["node"] == "" {
		t.Fatalf("configuration lines: %+v", lines)
	}
}
