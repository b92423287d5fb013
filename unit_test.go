package redlock

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/redis/go-redis/v9"
)

func TestValidity(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		ttl, elapsed time.Duration
		factor       float64
		want         time.Duration
	}{
		{10 * time.Second, 0, 0.01, 10*time.Second - 100*ms - 2*ms},
		{10 * time.Second, 50 * ms, 0.01, 10*time.Second - 50*ms - 100*ms - 2*ms},
		{100 * ms, 0, 0.01, 100*ms - 1*ms - 2*ms},
		{100 * ms, 97 * ms, 0.01, 0}, // exactly used up: not held
		{100 * ms, 98 * ms, 0.01, -1 * ms},
		{1 * time.Second, 10 * ms, 0.1, 1*time.Second - 10*ms - 100*ms - 2*ms},
		{3 * ms, 0, 0, 1 * ms}, // the 2 ms minimum applies even with a zero factor
	}
	for _, tt := range tests {
		if got := validity(tt.ttl, tt.elapsed, tt.factor); got != tt.want {
			t.Errorf("validity(%v, %v, %v) = %v, want %v", tt.ttl, tt.elapsed, tt.factor, got, tt.want)
		}
	}
}

// TestTallyEverySubset walks every subset of nodes answering "no" (held elsewhere) or
// failing, for N = 1..5, and checks the majority rule and the error class.
func TestTallyEverySubset(t *testing.T) {
	for n := 1; n <= 5; n++ {
		for taken := 0; taken < 1<<n; taken++ {
			for failed := 0; failed < 1<<n; failed++ {
				if taken&failed != 0 {
					continue
				}
				tl := newTally(n)
				for i := range n {
					switch {
					case taken&(1<<i) != 0:
						tl.add(outNo, 0)
					case failed&(1<<i) != 0:
						tl.add(outFailed, 0)
					default:
						tl.add(outYes, 1)
					}
				}
				yes := n - bits.OnesCount(uint(taken)) - bits.OnesCount(uint(failed))
				if got, want := tl.won(), yes >= n/2+1; got != want {
					t.Fatalf("N=%d taken=%b failed=%b: won=%v, want %v", n, taken, failed, got, want)
				}
				// Contention is the class only when the "no" answers alone rule out a majority.
				if got, want := tl.contended(), n-bits.OnesCount(uint(taken)) < n/2+1; got != want {
					t.Fatalf("N=%d taken=%b failed=%b: contended=%v, want %v", n, taken, failed, got, want)
				}
			}
		}
	}
}

func TestTallyWinsOnMajority(t *testing.T) {
	tl := newTally(5)
	for range 3 {
		if tl.won() {
			t.Fatalf("won too early: %+v", tl)
		}
		tl.add(outYes, 1)
	}
	if !tl.won() || tl.pending != 2 {
		t.Fatalf("3 of 5 yes must win with 2 pending: %+v", tl)
	}
	tl = newTally(3)
	tl.add(outRefused, -7)
	tl.add(outFailed, 0)
	tl.add(outYes, 1)
	if tl.won() || tl.no != 1 || tl.refused != 1 || tl.failed != 1 || tl.high != 7 {
		t.Fatalf("refusal counts as no and reports its counter: %+v", tl)
	}
}

func TestExponentialJitter(t *testing.T) {
	ms := time.Millisecond
	f := ExponentialJitter(10*ms, 200*ms)
	for attempt, want := range map[int]time.Duration{0: 10 * ms, 1: 10 * ms, 2: 20 * ms, 5: 160 * ms, 6: 200 * ms, 1 << 40: 200 * ms} {
		for range 100 {
			if d := f(attempt); d < want/2 || d > want {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
	if d := ExponentialJitter(0, -1)(3); d < 0 || d > ms {
		t.Fatalf("degenerate bounds: delay %v outside [0, 1ms]", d)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2"})
	sameServer := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DB: 3})
	t.Cleanup(func() { a.Close(); b.Close(); sameServer.Close() })
	var typedNil *redis.Client
	tests := []struct {
		name  string
		nodes []redis.UniversalClient
		opts  Options
		want  string
	}{
		{"no nodes", nil, Options{}, "no nodes"},
		{"nil node", []redis.UniversalClient{a, nil}, Options{}, "node 2 is nil"},
		{"typed nil node", []redis.UniversalClient{typedNil}, Options{}, "node 1 is nil"},
		{"same client", []redis.UniversalClient{a, b, a}, Options{}, "nodes 1 and 3 are the same client"},
		{"same server", []redis.UniversalClient{a, sameServer}, Options{}, "same server 127.0.0.1:1"},
		{"drift 1", []redis.UniversalClient{a}, Options{DriftFactor: 1}, "DriftFactor"},
		{"negative drift", []redis.UniversalClient{a}, Options{DriftFactor: -0.1}, "DriftFactor"},
		{"negative timeout", []redis.UniversalClient{a}, Options{NodeTimeout: -time.Second}, "NodeTimeout"},
		{"negative attempts", []redis.UniversalClient{a}, Options{MaxAttempts: -1}, "MaxAttempts"},
	}
	for _, tt := range tests {
		c, err := New(tt.nodes, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) || c != nil {
			t.Errorf("%s: New = %v, %v; want nil and an error containing %q", tt.name, c, err, tt.want)
		}
	}
	// Wrappers of an uncomparable type must not make New panic.
	w1, w2 := wrapped{a, nil}, wrapped{b, nil}
	if c, err := New([]redis.UniversalClient{w1, w2}, Options{}); err != nil {
		t.Fatalf("wrapped clients: %v", err)
	} else {
		c.Close()
	}
	c, err := New([]redis.UniversalClient{a, b}, Options{})
	if err != nil {
		t.Fatalf("valid nodes: %v", err)
	}
	if c.opts.DriftFactor != DefaultDriftFactor || c.opts.NodeTimeout != DefaultNodeTimeout || c.opts.RetryDelay == nil {
		t.Fatalf("defaults not applied: %+v", c.opts)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// wrapped is a client wrapper whose values cannot be compared with ==.
type wrapped struct {
	redis.UniversalClient
	tags []string
}

func TestBadKeyAndTTL(t *testing.T) {
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { a.Close() })
	c, err := New([]redis.UniversalClient{a}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		key  string
		ttl  time.Duration
		want string
	}{
		{"", time.Second, "empty key"},
		{"k", 0, "positive whole number of milliseconds"},
		{"k", -time.Second, "positive whole number of milliseconds"},
		{"k", 1500 * time.Microsecond, "positive whole number of milliseconds"},
		{"k", 2 * time.Millisecond, "no validity after the drift allowance"},
	} {
		l, err := c.TryAcquire(t.Context(), tc.key, tc.ttl)
		if err == nil || l != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TryAcquire(%q, %v) = %v, %v; want an error containing %q", tc.key, tc.ttl, l, err, tc.want)
		}
	}
}

func TestNewFromURLs(t *testing.T) {
	c, err := NewFromURLs([]string{
		"redis://127.0.0.1:7001",
		"redis://app:s3cret@127.0.0.1:7002/2",
		"rediss://:hunter2@127.0.0.1:7003",
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.name
	}
	joined := strings.Join(names, " ")
	if strings.Contains(joined, "s3cret") || strings.Contains(joined, "hunter2") {
		t.Fatalf("password in node names: %q", joined)
	}
	o := c.nodes[1].rdb.(*redis.Client).Options()
	if o.Username != "app" || o.Password != "s3cret" || o.DB != 2 || o.MaxRetries != 0 || o.ContextTimeoutEnabled {
		t.Fatalf("node 2 options: user %q db %d retries %d ctxTimeout %v", o.Username, o.DB, o.MaxRetries, o.ContextTimeoutEnabled)
	}
	if c.nodes[2].rdb.(*redis.Client).Options().TLSConfig == nil {
		t.Fatal("rediss:// must enable TLS")
	}

	for _, tc := range []struct {
		urls []string
		want string
	}{
		{[]string{"http://u:topsecret@h:1"}, "node URL 1"},
		{[]string{"redis://u:topsecret@h:bad"}, "node URL 1"},
		{[]string{"redis://u:topsecret@h:1/notanumber"}, "node URL 1"},
		{[]string{"redis://h:1", "redis://u:topsecret@h:1/1"}, "same server"},
		{nil, "no nodes"},
	} {
		_, err := NewFromURLs(tc.urls, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewFromURLs(%q) = %v, want an error containing %q", tc.urls, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("NewFromURLs(%q): error shows the password: %v", tc.urls, err)
		}
	}
}

func TestQuorumErrorMatching(t *testing.T) {
	cause := errors.New("READONLY You can't write against a read only replica.")
	errs := multierror.Append(nil, &NodeError{Node: "127.0.0.1:7001", Err: cause}, &NodeError{Node: "127.0.0.1:7002", Err: ErrNodeTimeout})
	finish(&errs)
	qe := &QuorumError{Op: "acquire", Key: "k", Nodes: 3, Needed: 2, Agreed: 1, Failed: 2, Errors: errs, kind: ErrUnavailable}
	var err error = qe
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrLockLost) {
		t.Fatalf("sentinels: %v", err)
	}
	if !errors.Is(err, cause) || !errors.Is(err, ErrNodeTimeout) {
		t.Fatalf("per-node causes not reachable: %v", err)
	}
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Node != "127.0.0.1:7001" {
		t.Fatalf("errors.As NodeError = %v", ne)
	}
	want := `redlock: quorum unavailable: acquire "k": 1 of 3 nodes agreed, 2 needed, 2 failed: node 127.0.0.1:7001: READONLY You can't write against a read only replica.; node 127.0.0.1:7002: redlock: no reply within the node timeout`
	if got := err.Error(); got != want {
		t.Fatalf("message\n got %s\nwant %s", got, want)
	}
}

func TestClockGap(t *testing.T) {
	for _, tc := range []struct{ wall, mono, want time.Duration }{
		{time.Second, time.Second, 0},
		{6 * time.Second, time.Second, 5 * time.Second}, // suspended for 5 s
		{time.Second, 3 * time.Second, 2 * time.Second}, // wall clock stepped back
	} {
		if got := absDiff(tc.wall, tc.mono); got != tc.want {
			t.Errorf("absDiff(%v, %v) = %v, want %v", tc.wall, tc.mono, got, tc.want)
		}
	}
	start := time.Now()
	if g := clockGap(start, time.Now()); g > time.Millisecond {
		t.Fatalf("real clock readings: gap %v", g)
	}
	if g := clockGap(start.Round(0), start.Round(0).Add(time.Hour)); g != 0 {
		t.Fatalf("readings without a monotonic part: gap %v, want 0", g)
	}
}

// TestFairAhead: a failed fair attempt's tally gives the fewest entries ahead of the
// waiter on any node that answered; a node that said yes had none ahead (the waiter
// was its head), also when every other node failed.
func TestFairAhead(t *testing.T) {
	behind := func(a int64) int64 { return -(fairBehind - a) }
	for _, tc := range []struct {
		name string
		outs []outcome
		vals []int64
		want int64
	}{
		{"three ahead and five ahead", []outcome{outNo, outNo, outFailed}, []int64{behind(3), behind(5), 0}, 3},
		{"head with the key held", []outcome{outNo, outNo}, []int64{behind(0), behind(2)}, 0},
		{"yes on a minority, the rest failed", []outcome{outYes, outFailed, outFailed}, []int64{1, 0, 0}, 0},
		{"yes beside two ahead", []outcome{outYes, outNo, outFailed}, []int64{1, behind(2), 0}, 0},
		{"every node failed", []outcome{outFailed, outFailed, outFailed}, []int64{0, 0, 0}, 0},
	} {
		tl := newTally(len(tc.outs))
		for i, o := range tc.outs {
			tl.add(o, tc.vals[i])
		}
		if got := fairAhead(tl); got != tc.want {
			t.Errorf("%s: fairAhead = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestAgainBuf: againBuf marks each call that a later call of its batch for the same
// key must follow, alike in the pairwise scan of small batches and through the map of
// large ones.
func TestAgainBuf(t *testing.T) {
	var a againBuf
	for _, n := range []int{0, 1, 5, againScan, againScan + 1, 200} {
		calls := make([]*nodeCall, n)
		want := make([]bool, n)
		for k := range calls {
			calls[k] = &nodeCall{keys: []string{fmt.Sprintf("k%d", k%7), "other"}}
			want[k] = k+7 < n
		}
		if got := a.of(calls); !slices.Equal(got, want) {
			t.Errorf("%d calls: again = %v, want %v", n, got, want)
		}
	}
}
