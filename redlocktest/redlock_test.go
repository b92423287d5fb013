package redlocktest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// testRedlockFaults is the kit used with redlock: it runs on any backend.
func testRedlockFaults(t *testing.T, b redlocktest.Backend) {
	t.Run("KillMinority", func(t *testing.T) {
		nodes := redlocktest.StartNodes(t, b, 5, redlocktest.Options{})
		rl := newRedlock(t, redlocktest.Clients(nodes), redlock.Options{})
		ctx := ctxTimeout(t, 30*time.Second)

		nodes[0].Kill()
		nodes[1].Kill()
		lock, err := rl.Acquire(ctx, "job", 5*time.Second)
		if err != nil {
			t.Fatalf("Acquire with 2 of 5 nodes killed: %v", err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Errorf("Release with 2 of 5 nodes killed: %v", err)
		}

		// A third kill leaves no majority: the infrastructure failed, nobody holds it.
		nodes[2].Kill()
		_, err = rl.TryAcquire(ctx, "job", 5*time.Second)
		if !errors.Is(err, redlock.ErrUnavailable) {
			t.Errorf("TryAcquire with 3 of 5 nodes killed = %v, want ErrUnavailable", err)
		}
	})

	// A node of a held lock restarted without persistence comes back without the key;
	// with appendfsync always it keeps it. A minority losing the key still leaves the
	// lock held on a majority, so a second client is refused.
	for _, tc := range []struct {
		p       redlocktest.Persistence
		keyKept bool
	}{{redlocktest.NoPersistence, false}, {redlocktest.AOFAlways, true}} {
		t.Run("RestartHolder/"+tc.p.String(), func(t *testing.T) {
			nodes := redlocktest.StartNodes(t, b, 5, redlocktest.Options{Persistence: tc.p})
			clients := redlocktest.Clients(nodes)
			a := newRedlock(t, clients, redlock.Options{})
			ctx := ctxTimeout(t, 30*time.Second)
			lock, err := a.Acquire(ctx, "job", 10*time.Second)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			// The acquire step ends at a majority; wait until node 2 has the key
			// before restarting it.
			waitKey(t, nodes[2].Client(), "job", lock.Token())

			nodes[2].Restart(tc.p)

			got, err := nodes[2].Client().Get(ctx, "job").Result()
			switch {
			case tc.keyKept && (err != nil || got != lock.Token()):
				t.Errorf("GET job on the restarted node = %q, %v; want the token", got, err)
			case !tc.keyKept && !errors.Is(err, redis.Nil):
				t.Errorf("GET job on the node restarted empty = %q, %v; want redis.Nil", got, err)
			}
			b := newRedlock(t, redlocktest.Clients(nodes), redlock.Options{})
			if _, err := b.TryAcquire(ctx, "job", 10*time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
				t.Errorf("second client's TryAcquire = %v, want ErrNotAcquired", err)
			}
			if err := lock.Release(ctx); err != nil {
				t.Errorf("Release: %v", err)
			}
		})
	}
}

// waitKey waits until key holds want on the node behind c.
func waitKey(t *testing.T, c *redis.Client, key, want string) {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Second)
	for {
		got, err := c.Get(ctx, key).Result()
		if err == nil && got == want {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("GET %s = %q, %v; want %q", key, got, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRedlockFaultsProcesses(t *testing.T) {
	testRedlockFaults(t, redlocktest.Processes)
}

func TestRedlockFaultsDocker(t *testing.T) {
	testRedlockFaults(t, redlocktest.NewDocker(t))
}
