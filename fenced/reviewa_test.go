package fenced_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/fenced"
	"github.com/redlock-go/redlock/internal/redistest"
)

// replyLoss is a connection that, once armed, loses the reply to the first command
// that contains marker: it reads the reply from the server (so the command has run
// there), then closes the connection and reports io.EOF, as a connection reset just
// after the server answered would.
type replyLoss struct {
	net.Conn
	marker []byte
	armed  *atomic.Bool
	hit    bool
}

func (c *replyLoss) Write(p []byte) (int, error) {
	if c.armed.Load() && bytes.Contains(bytes.ToLower(p), c.marker) {
		c.armed.Store(false)
		c.hit = true
	}
	return c.Conn.Write(p)
}

func (c *replyLoss) Read(p []byte) (int, error) {
	if !c.hit {
		return c.Conn.Read(p)
	}
	if _, err := c.Conn.Read(p); err != nil { // the reply arrived: the command ran
		return 0, err
	}
	c.Conn.Close()
	return 0, io.EOF
}

// TestReviewAUpdateAppliedOnceAfterLostReply: the reply to Update's write is lost after
// the server ran it. go-redis's default retries (MaxRetries 3, which the resource's own
// client usually has) send the write again; that copy finds the hash changed (by the
// first copy) and Update reads again and applies fn a second time. A counter
// incremented by one Update call that returned nil must be 1, not 2.
func TestReviewAUpdateAppliedOnceAfterLostReply(t *testing.T) {
	server := redistest.Start(t, redistest.Options{})
	addr := redistest.Addrs([]*redistest.Server{server})[0]
	var armed atomic.Bool
	rdb := redis.NewClient(&redis.Options{
		Addr: addr,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &replyLoss{Conn: conn, marker: []byte("evalsha"), armed: &armed}, nil
		},
	})
	defer rdb.Close()
	ctx := t.Context()
	// Load the script, so that the lost reply is EVALSHA's and not the NOSCRIPT one.
	if err := fenced.Write(ctx, rdb, "{count}", "0", 1); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	calls := 0
	got, err := fenced.Update(ctx, rdb, "{count}", 1, func(old string) (string, error) {
		calls++
		n, err := strconv.Atoi(old)
		return strconv.Itoa(n + 1), err
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if armed.Load() {
		t.Fatal("no reply was lost: the test did not run its case")
	}
	stored, _, err := fenced.Read(ctx, rdb, "{count}")
	if err != nil {
		t.Fatal(err)
	}
	if stored != "1" || got != "1" {
		t.Errorf("one increment by Update stored %q (returned %q, fn called %d times), want \"1\"", stored, got, calls)
	}
}

// TestReviewAUpdateUnderContention: one holder's workers (one token) decrement a stock
// at once, each a few times. Update's documentation says that when another writer
// changed the value in between, Update reads again and calls fn again, and that it
// fails only with ErrStale when the token has become stale; with one token nothing is
// stale, so every Update must succeed and the stock must drop by exactly their number.
func TestReviewAUpdateUnderContention(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	if err := rdb.HSet(ctx, "stock", "value", "100000").Err(); err != nil {
		t.Fatal(err)
	}
	const workers, each = 48, 10
	var failed atomic.Int64
	var first atomic.Value
	start := make(chan struct{})
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			<-start
			for range each {
				if _, err := fenced.Update(ctx, rdb, "stock", 7, decrement); err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	close(start)
	for range workers {
		<-done
	}
	v, _, err := fenced.Read(ctx, rdb, "stock")
	if err != nil {
		t.Fatal(err)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d Updates with one token failed (stock %s), e.g.: %v", n, workers*each, v, first.Load())
	}
}

// writeRecorder records the EVALSHA and EVAL calls sent through a client.
type writeRecorder struct {
	mu    sync.Mutex
	calls [][]any
}

func (*writeRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *writeRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
			r.mu.Lock()
			r.calls = append(r.calls, slices.Clone(cmd.Args()))
			r.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (*writeRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestReviewALateWriteCopies replays every write.lua call of a run (two holders, each
// with Write and Update; the older holder's last Update conflicts once) again, as
// sent, reversed and shuffled, and checks after each copy what the late-copy rule asks
// of the resource: the fence field never goes down, a copy with a token below the
// stored one changes nothing, and a copy of an Update's write changes nothing unless
// the hash is exactly as that Update read it. A copy of a plain Write with the stored
// token may rewrite the value (and so bring back a state an Update read): documented
// in docs/safety.md, and not counted here.
func TestReviewALateWriteCopies(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	rec := &writeRecorder{}
	rdb.AddHook(rec)
	ctx := t.Context()
	inc := func(old string) (string, error) {
		n, _ := strconv.Atoi(old)
		return strconv.Itoa(n + 1), nil
	}
	steps := []func() error{
		func() error { return fenced.Write(ctx, rdb, "{r}", "10", 3) },
		func() error { _, err := fenced.Update(ctx, rdb, "{r}", 3, inc); return err },
		func() error {
			first := true
			_, err := fenced.Update(ctx, rdb, "{r}", 3, func(old string) (string, error) {
				if first { // another worker of the holder writes in between
					first = false
					if err := fenced.Write(ctx, rdb, "{r}", "100", 3); err != nil {
						return "", err
					}
				}
				return inc(old)
			})
			return err
		},
		func() error { return fenced.Write(ctx, rdb, "{r}", "500", 5) },
		func() error { _, err := fenced.Update(ctx, rdb, "{r}", 5, inc); return err },
		func() error { _, err := fenced.Update(ctx, rdb, "{r}", 5, inc); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
	}
	rec.mu.Lock()
	calls := slices.Clone(rec.calls)
	rec.mu.Unlock()
	state := func() map[string]string {
		h, err := rdb.HGetAll(ctx, "{r}").Result()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	reversed := slices.Clone(calls)
	slices.Reverse(reversed)
	shuffled := slices.Clone(calls)
	rng := rand.New(rand.NewPCG(15, 4))
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, order := range [][][]any{calls, reversed, shuffled} {
		for _, call := range order {
			before := state()
			_ = rdb.Do(ctx, call...).Err()
			after := state()
			// EVALSHA sha 1 key value token [present read-value read-fence id]
			token, _ := strconv.ParseUint(fmt.Sprint(call[5]), 10, 64)
			stored, _ := strconv.ParseUint(before["fence"], 10, 64)
			now, _ := strconv.ParseUint(after["fence"], 10, 64)
			// An Update's copy may land only on the hash exactly as that Update read it
			// (which a same-token Write copy can bring back).
			asRead := len(call) > 6 && fmt.Sprint(call[7]) == before["value"] && fmt.Sprint(call[8]) == before["fence"]
			switch {
			case now < stored:
				t.Errorf("copy %v lowered the fence from %d to %d", call[3:], stored, now)
			case (token < stored || len(call) > 6 && !asRead) && !maps.Equal(before, after):
				t.Errorf("copy %v changed the hash from %v to %v", call[3:], before, after)
			}
		}
	}
	t.Logf("%d write.lua calls, each delivered again 3 times; final %v", len(calls), state())
}
