package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// fakeClock stands still at now; After fires at once with the time d from now.
type fakeClock struct{ now time.Time }

func (f *fakeClock) Now() time.Time { return f.now }

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- f.now.Add(d)
	return ch
}

// TestPacingDelay checks the head's pacing decision, which is a pure function of
// its inputs: RetryDelay for the attempts failed so far (at least 1); after a lost
// race, one to three round trips when that is sooner; while a lock of this Client
// holds the key, until its validity ends, whatever else says.
func TestPacingDelay(t *testing.T) {
	ms := time.Millisecond
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	now := clock.Now()
	tests := []struct {
		name      string
		p         pacing
		retry     time.Duration // what RetryDelay answers
		jitterTop bool          // jitter answers n−1 (else 0)
		want      time.Duration
		wantRetry int // the attempt RetryDelay is asked about
		wantSpan  time.Duration
	}{
		{name: "no attempt failed yet", p: pacing{}, retry: 40 * ms, want: 40 * ms, wantRetry: 1},
		{name: "after three failures", p: pacing{failed: 3}, retry: 80 * ms, want: 80 * ms, wantRetry: 3},
		{name: "lost race, low jitter", p: pacing{failed: 1, quick: true, took: 10 * ms},
			retry: 200 * ms, want: 10 * ms, wantRetry: 1, wantSpan: 20 * ms},
		{name: "lost race, high jitter", p: pacing{failed: 2, quick: true, took: 10 * ms},
			retry: 200 * ms, jitterTop: true, want: 30*ms - 1, wantRetry: 2, wantSpan: 20 * ms},
		{name: "lost race, RetryDelay sooner", p: pacing{failed: 1, quick: true, took: 10 * ms},
			retry: 5 * ms, jitterTop: true, want: 5 * ms, wantRetry: 1, wantSpan: 20 * ms},
		{name: "held here", p: pacing{failed: 5, held: now.Add(300 * ms)},
			retry: 10 * ms, want: 300 * ms, wantRetry: 5},
		{name: "held here after a lost race", p: pacing{failed: 1, quick: true, took: 10 * ms, held: now.Add(700 * ms)},
			retry: 10 * ms, want: 700 * ms, wantRetry: 1, wantSpan: 20 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked, span := 0, time.Duration(0)
			retry := func(attempt int) time.Duration { asked = attempt; return tt.retry }
			jitter := func(n time.Duration) time.Duration {
				span = n
				if tt.jitterTop {
					return n - 1
				}
				return 0
			}
			if got := tt.p.delay(clock.Now(), retry, jitter); got != tt.want {
				t.Errorf("delay = %v, want %v", got, tt.want)
			}
			if asked != tt.wantRetry {
				t.Errorf("RetryDelay asked about attempt %d, want %d", asked, tt.wantRetry)
			}
			if span != tt.wantSpan {
				t.Errorf("jitter asked for [0, %v), want [0, %v)", span, tt.wantSpan)
			}
		})
	}
}

// TestWaiterVerdict checks how a failed attempt ends Acquire or lets it retry.
func TestWaiterVerdict(t *testing.T) {
	c := &Client{nodes: make([]node, 3), opts: Options{MaxAttempts: 3}}
	qe := func(kind, ctxErr error, refused int) *QuorumError {
		e := c.quorumError("acquire", "k", newTally(3), nil, kind, ctxErr)
		e.Refused = refused
		return e
	}
	w := &waiter{c: c, ctx: context.Background(), key: "k", attempt: 2}
	if err := w.verdict(qe(ErrNotAcquired, nil, 2)); err != nil {
		t.Errorf("attempt 2 of 3, refused: %v, want a retry", err)
	}
	w.attempt = 3
	if err := w.verdict(qe(ErrNotAcquired, nil, 2)); !errors.Is(err, ErrNotAcquired) {
		t.Errorf("attempt 3 of 3: %v, want the attempt's ErrNotAcquired", err)
	}
	w.attempt = 2
	w.last = qe(ErrUnavailable, nil, 0)
	err := w.verdict(qe(ErrNotAcquired, context.DeadlineExceeded, 0))
	if err != error(w.last) || !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cut short by ctx after an unavailable attempt: %v, want the last attempt with the deadline", err)
	}
	w.last = qe(ErrUnavailable, nil, 0)
	cut := qe(ErrNotAcquired, context.DeadlineExceeded, 1)
	if err := w.verdict(cut); err != error(cut) {
		t.Errorf("cut short by ctx with a refusal: %v, want this attempt's error", err)
	}
}

// TestWaiterStopped checks Acquire's error when ctx ends or the Client closes while no
// attempt is out.
func TestWaiterStopped(t *testing.T) {
	c := &Client{nodes: make([]node, 3)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := &waiter{c: c, ctx: ctx, key: "k"}
	if err := w.stopped(); !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("ctx ended before any attempt: %v, want ErrNotAcquired and context.Canceled", err)
	}
	w = &waiter{c: c, ctx: context.Background(), key: "k"}
	if err := w.stopped(); !errors.Is(err, ErrClosed) || strings.Contains(err.Error(), "last attempt") {
		t.Errorf("closed before any attempt: %v, want a plain ErrClosed", err)
	}
	w.last = c.quorumError("acquire", "k", newTally(3), nil, ErrUnavailable, nil)
	if err := w.stopped(); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "last attempt") {
		t.Errorf("closed after an attempt: %v, want ErrClosed naming the last attempt", err)
	}
}

// TestCanLead: only a plain acquire's wake-up goes lead-first and without the jitter;
// with Fencing, Fair or an owner the round asks every node at once, so the head must
// keep its random pause (found in review: a fenced head skipped both).
func TestCanLead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		owner string
		want  bool
	}{
		{"plain", Options{}, "", true},
		{"fencing", Options{Fencing: true}, "", false},
		{"fair", Options{Fair: true}, "", false},
		{"owner", Options{}, "worker-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rdbs []redis.UniversalClient
			for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
				rdb := redis.NewClient(&redis.Options{Addr: addr})
				defer rdb.Close()
				rdbs = append(rdbs, rdb)
			}
			c, err := New(rdbs, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			if tc.owner != "" {
				ctx = WithOwner(ctx, tc.owner)
			}
			w := c.newWaiter(ctx, "job", time.Second)
			if got := w.canLead(); got != tc.want {
				t.Fatalf("canLead = %v, want %v", got, tc.want)
			}
			req := roundRequest{key: "job", owner: tc.owner, token: "t", ttl: time.Second, lead: leadHint{first: true}}
			if tc.opts.Fencing {
				req.fence = 1
			}
			if got := req.stepRequest().leadFirst; got != tc.want && !tc.opts.Fair {
				t.Fatalf("the round's leadFirst = %v, want %v, as canLead", got, tc.want)
			}
		})
	}
}
