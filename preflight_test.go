package redlock_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// compliant returns a Client over the servers whose go-redis clients do not retry, as
// CheckNodes wants them.
func compliant(t *testing.T, servers []*redistest.Server, opts redlock.Options) *redlock.Client {
	t.Helper()
	return compliantAt(t, redistest.Addrs(servers), opts)
}

// compliantAt is compliant over addresses.
func compliantAt(t *testing.T, addrs []string, opts redlock.Options) *redlock.Client {
	t.Helper()
	rdbs := make([]redis.UniversalClient, len(addrs))
	for i, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		rdbs[i] = rdb
	}
	client, err := redlock.New(rdbs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// nodeErrors returns the *NodeError members of a CheckNodes error, in order.
func nodeErrors(t *testing.T, err error) []*redlock.NodeError {
	t.Helper()
	var me *multierror.Error
	if err == nil || !errors.As(err, &me) {
		return nil
	}
	out := make([]*redlock.NodeError, len(me.Errors))
	for i, err := range me.Errors {
		if !errors.As(err, &out[i]) {
			t.Fatalf("not a *NodeError: %v", err)
		}
	}
	return out
}

// TestCheckNodes (T21): an eviction policy other than noeviction is reported per node;
// with fencing, so is a node without appendfsync always.
func TestCheckNodes(t *testing.T) {
	ctx := t.Context()
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	client := compliant(t, c.servers, redlock.Options{})
	if err := client.CheckNodes(ctx); err != nil {
		t.Fatalf("default nodes: %v", err)
	}
	c.admin[1].ConfigSet(ctx, "maxmemory-policy", "allkeys-lru")
	err := client.CheckNodes(ctx)
	var ne *redlock.NodeError
	if !errors.Is(err, redlock.ErrNodeConfig) || !errors.As(err, &ne) || ne.Node != c.servers[1].Addr() ||
		!strings.Contains(err.Error(), `maxmemory-policy is "allkeys-lru"`) {
		t.Fatalf("allkeys-lru on node 2: got %v", err)
	}

	fenced := compliant(t, c.servers, redlock.Options{Fencing: true})
	c.admin[1].ConfigSet(ctx, "maxmemory-policy", "noeviction")
	if err := fenced.CheckNodes(ctx); !errors.Is(err, redlock.ErrNodeConfig) || !strings.Contains(err.Error(), "appendfsync") {
		t.Fatalf("fencing without appendfsync always: got %v", err)
	}
	durable := newCluster(t, 3, redistest.Options{Persistent: true}, redlock.Options{Fencing: true})
	if err := compliant(t, durable.servers, redlock.Options{Fencing: true}).CheckNodes(ctx); err != nil {
		t.Fatalf("fencing on durable nodes: %v", err)
	}
}

// TestCheckNodesClientSettings (#11 item 6c): go-redis clients that retry (the default,
// MaxRetries 3) are reported per node, with what to set and why, read from the client
// without a round trip: also for a node that is down.
func TestCheckNodesClientSettings(t *testing.T) {
	ctx := t.Context()
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{}) // c.client: default go-redis clients
	err := c.client.CheckNodes(ctx)
	got := nodeErrors(t, err)
	if !errors.Is(err, redlock.ErrNodeConfig) || len(got) != 3 {
		t.Fatalf("default clients (MaxRetries 3): got %d node errors: %v", len(got), err)
	}
	for i, ne := range got {
		if ne.Node != c.servers[i].Addr() || !errors.Is(ne, redlock.ErrNodeConfig) ||
			!strings.Contains(ne.Error(), "MaxRetries is on") || !strings.Contains(ne.Error(), "set MaxRetries: -1") {
			t.Fatalf("node %d: got %v", i+1, ne)
		}
	}

	c.servers[2].Kill()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // go-redis would retry the dial
	defer cancel()
	err = c.client.CheckNodes(short)
	var config, down int
	for _, ne := range nodeErrors(t, err) {
		switch {
		case errors.Is(ne, redlock.ErrNodeConfig) && strings.Contains(ne.Error(), "MaxRetries"):
			config++
		case ne.Node == c.servers[2].Addr() && strings.Contains(ne.Error(), "CONFIG GET"):
			down++
		default:
			t.Errorf("unexpected: %v", ne)
		}
	}
	if config != 3 || down != 1 {
		t.Fatalf("node 3 down: %d setting errors (want 3, the down node's too), %d unreachable (want 1): %v", config, down, err)
	}
}

// TestCheckNodesOneServer (#11 item 7): two members that reach one server under
// addresses New cannot tell apart (here directly and through a TCP proxy) are reported,
// by the run_id each server draws at start-up.
func TestCheckNodesOneServer(t *testing.T) {
	ctx := t.Context()
	servers := redistest.StartN(t, 2, redistest.Options{})
	proxy := tcpProxy(t, servers[0].Addr())
	addrs := append(redistest.Addrs(servers), proxy)
	err := compliantAt(t, addrs, redlock.Options{}).CheckNodes(ctx)
	got := nodeErrors(t, err)
	if len(got) != 1 || got[0].Node != proxy || !errors.Is(err, redlock.ErrNodeConfig) ||
		!strings.Contains(err.Error(), "the same server (run_id ") ||
		!strings.Contains(err.Error(), "as node 1 ("+servers[0].Addr()+")") {
		t.Fatalf("node 3 is node 1 through a proxy: got %v", err)
	}
	if err := compliantAt(t, addrs[:2], redlock.Options{}).CheckNodes(ctx); err != nil {
		t.Fatalf("two servers: %v", err)
	}
}

// tcpProxy forwards the connections made to the address it returns to upstream, until
// the test ends; it waits for its goroutines before the test's leak check.
func tcpProxy(t *testing.T, upstream string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
	)
	track := func(c net.Conn) { // closes c at once when the test has ended
		mu.Lock()
		defer mu.Unlock()
		if closed {
			_ = c.Close()
		}
		conns = append(conns, c)
	}
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			down, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = down.Close()
				continue
			}
			track(down)
			track(up)
			wg.Add(2)
			go pipe(up, down)
			go pipe(down, up)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// TestCheckNodesPausedMajority (#15 §3): with 3 of 5 nodes paused, CheckNodes asks all
// nodes at once and returns within its bound (20 × NodeTimeout) instead of one
// go-redis read timeout per paused node (15 s when asked one after another), and it
// blames exactly the paused nodes, also when the caller's context is the shorter
// bound (1 s, which once ran out on the paused nodes and blamed the healthy ones).
func TestCheckNodesPausedMajority(t *testing.T) {
	const nodeTimeout = 25 * time.Millisecond // a bound of 500 ms
	servers := redistest.StartN(t, 5, redistest.Options{})
	client := compliant(t, servers, redlock.Options{NodeTimeout: nodeTimeout})
	if err := client.CheckNodes(t.Context()); err != nil {
		t.Fatalf("all nodes up: %v", err)
	}
	for _, s := range servers[:3] {
		s.Pause()
	}
	defer func() {
		for _, s := range servers[:3] {
			s.Resume()
		}
	}()
	blamed := func(err error) []string {
		var names []string
		for _, ne := range nodeErrors(t, err) {
			if !errors.Is(ne, context.DeadlineExceeded) {
				t.Errorf("not a timeout: %v", ne)
			}
			names = append(names, ne.Node)
		}
		return names
	}
	want := strings.Join(redistest.Addrs(servers[:3]), " ")
	start := time.Now()
	err := client.CheckNodes(t.Context())
	took := time.Since(start)
	t.Logf("CheckNodes with 3 of 5 paused took %v: %v", took, err)
	if got := strings.Join(blamed(err), " "); got != want {
		t.Errorf("blamed %q, want the paused nodes %q", got, want)
	}
	if limit := 20*nodeTimeout + 500*time.Millisecond; took > limit {
		t.Errorf("CheckNodes took %v, want at most %v", took, limit)
	}

	client = compliant(t, servers, redlock.Options{}) // a bound of 1 s
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	err = client.CheckNodes(short)
	took = time.Since(start)
	t.Logf("CheckNodes with a 300 ms context took %v: %v", took, err)
	if got := strings.Join(blamed(err), " "); got != want {
		t.Errorf("with a 300 ms context: blamed %q, want the paused nodes %q", got, want)
	}
	if limit := 300*time.Millisecond + 500*time.Millisecond; took > limit {
		t.Errorf("with a 300 ms context: CheckNodes took %v, want at most %v", took, limit)
	}
}
