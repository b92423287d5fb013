package redlocktest

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// timeoutClient returns a client that gives up at its context's deadline, so a command
// to a paused node ends on time.
func timeoutClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// isTimeout reports whether err is a deadline or network timeout.
func isTimeout(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout())
}

// testBackend runs the fault operations every backend must offer. The Docker backend
// runs the same function.
func testBackend(t *testing.T, b Backend) {
	t.Run("StartNodes", func(t *testing.T) {
		nodes := StartNodes(t, b, 3, Options{})
		ctx := ctxTimeout(t, 10*time.Second)
		seen := map[string]bool{}
		clients := Clients(nodes)
		for i, n := range nodes {
			if seen[n.Addr()] {
				t.Errorf("node %d: address %s used twice", i, n.Addr())
			}
			seen[n.Addr()] = true
			if err := clients[i].Set(ctx, "id", i, 0).Err(); err != nil {
				t.Fatalf("node %d: SET: %v", i, err)
			}
		}
		for i, addr := range Addrs(nodes) {
			c := newClient(t, addr)
			if got, err := c.Get(ctx, "id").Int(); err != nil || got != i {
				t.Errorf("node %d: GET id = %d, %v; want %d", i, got, err, i)
			}
		}
	})

	t.Run("KillAndRestartEmpty", func(t *testing.T) {
		n := b.Start(t, Options{})
		c := n.Client()
		ctx := ctxTimeout(t, 10*time.Second)
		if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
		n.Kill()
		n.Kill() // a no-op
		if _, err := net.DialTimeout("tcp", n.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial after Kill = %v, want connection refused", err)
		}
		n.Resume() // a no-op on a stopped node
		n.Restart(NoPersistence)
		if got, err := c.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
			t.Errorf("GET k after a restart without persistence = %q, %v; want redis.Nil", got, err)
		}
	})

	t.Run("RestartKeepsAOF", func(t *testing.T) {
		n := b.Start(t, Options{Persistence: AOFAlways})
		c := n.Client()
		ctx := ctxTimeout(t, 10*time.Second)
		if err := c.Set(ctx, "k", "v", 10*time.Second).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
		n.Restart(AOFAlways)
		if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
			t.Fatalf("GET k after a restart with AOF = %q, %v; want \"v\"", got, err)
		}
		pttl, err := c.PTTL(ctx, "k").Result()
		if err != nil || pttl <= 0 || pttl > 10*time.Second {
			t.Errorf("PTTL k after restart = %v, %v; want in (0, 10s]", pttl, err)
		}
		// Switching persistence off for the next run loses the data.
		n.Restart(NoPersistence)
		if got, err := c.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
			t.Errorf("GET k after a restart switched to no persistence = %q, %v; want redis.Nil", got, err)
		}
	})

	t.Run("PauseResume", func(t *testing.T) {
		n := b.Start(t, Options{})
		c := timeoutClient(t, n.Addr())
		if err := c.Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
		n.Pause()
		n.Pause() // a no-op
		start := time.Now()
		err := c.Ping(ctxTimeout(t, 200*time.Millisecond)).Err()
		if !isTimeout(err) {
			t.Errorf("PING while paused = %v, want a timeout", err)
		}
		if elapsed := time.Since(start); elapsed > 3*time.Second {
			t.Errorf("PING while paused took %v, want about 200ms", elapsed)
		}
		n.Resume()
		n.Resume() // a no-op
		if err := c.Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
			t.Errorf("PING after Resume: %v", err)
		}
		// A paused node can be killed and restarted.
		n.Pause()
		n.Restart(NoPersistence)
		if err := c.Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
			t.Errorf("PING after Pause and Restart: %v", err)
		}
	})

	t.Run("RestartAfter", func(t *testing.T) {
		n := b.Start(t, Options{})
		const down = 400 * time.Millisecond
		refused, back := watchPort(t, n.Addr())
		start := time.Now()
		n.RestartAfter(down, NoPersistence)
		if elapsed := time.Since(start); elapsed < down {
			t.Errorf("RestartAfter returned after %v, want at least %v", elapsed, down)
		}
		r, a := <-refused, <-back
		if r.IsZero() || a.IsZero() {
			t.Fatalf("port watcher saw refused=%v, back=%v", r, a)
		}
		// The port was refusing connections for about down.
		if closed := a.Sub(r); closed < down-50*time.Millisecond {
			t.Errorf("port was closed for %v, want about %v", closed, down)
		}
		if err := n.Client().Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
			t.Errorf("PING after RestartAfter: %v", err)
		}
	})
}

// watchPort dials addr in a loop and reports when it first saw the connection refused
// and when, after that, it first saw it accepted again.
func watchPort(t *testing.T, addr string) (refused, back <-chan time.Time) {
	r, b := make(chan time.Time, 1), make(chan time.Time, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(wg.Wait)
	go func() {
		defer wg.Done()
		var firstRefused time.Time
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
			now := time.Now()
			if err == nil {
				_ = conn.Close()
				if !firstRefused.IsZero() {
					r <- firstRefused
					b <- now
					return
				}
			} else if firstRefused.IsZero() {
				firstRefused = now
			}
			time.Sleep(2 * time.Millisecond)
		}
		r <- time.Time{}
		b <- time.Time{}
	}()
	return r, b
}

func TestProcessBackend(t *testing.T) {
	testBackend(t, Processes)
}

func TestDockerBackend(t *testing.T) {
	testBackend(t, NewDocker(t))
}
