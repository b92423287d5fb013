package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// acquireNoDeadline runs Acquire on a context without a deadline, as
// context.Background() would be, and returns its error and how long it took. The
// context is cancelled only to end the test if Acquire is still retrying after 10 s.
func acquireNoDeadline(t *testing.T, c *redlock.Client, key string) (error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		lock, err := c.Acquire(ctx, key, time.Second)
		if lock != nil {
			_ = lock.Release(ctx)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("Acquire without a deadline still retrying after 10 s; cancelled: %v", <-done)
		return nil, 0
	}
}

// wantPermanent checks that Acquire ended promptly with ErrUnavailable and the cause
// on the named nodes.
func wantPermanent(t *testing.T, err error, took time.Duration, cause string, nodes ...string) {
	t.Helper()
	if !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if took > 2*time.Second {
		t.Errorf("Acquire took %v to give up, want at once", took)
	}
	var ne *redlock.NodeError
	if !errors.As(err, &ne) {
		t.Fatalf("no *NodeError in %v", err)
	}
	wantNodeErrors(t, err, cause, nodes...)
}

// TestPermanentErrorsEndAcquire: a reply no retry can fix, from a majority, ends an
// Acquire without a deadline at once, with that cause.
func TestPermanentErrorsEndAcquire(t *testing.T) {
	t.Run("NOPERM", func(t *testing.T) {
		// An ACL user without the right to run scripts on nodes 1 and 2.
		servers := redistest.StartN(t, 3, redistest.Options{})
		rdbs := make([]redis.UniversalClient, 3)
		for i, s := range servers {
			if i == 2 {
				rdbs[i] = s.Client()
				continue
			}
			err := s.Client().Do(t.Context(), "ACL", "SETUSER", "locker", "on", ">secret", "~*", "&*", "+@all", "-evalsha", "-eval").Err()
			if err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "locker", Password: "secret"})
			t.Cleanup(func() { rdb.Close() })
			rdbs[i] = rdb
		}
		c, err := redlock.New(rdbs, redlock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err, took := acquireNoDeadline(t, c, "noperm")
		c.Close() // waits for the clean-up on node 3
		wantPermanent(t, err, took, "NOPERM", servers[0].Addr(), servers[1].Addr())
		if n := servers[2].Client().Exists(t.Context(), "noperm").Val(); n != 0 {
			t.Errorf("node 3 still holds the key")
		}
	})
	t.Run("WRONGPASS", func(t *testing.T) {
		// A wrong password for nodes 1 and 2: refused when the connection is set up.
		servers := redistest.StartN(t, 3, redistest.Options{})
		rdbs := make([]redis.UniversalClient, 3)
		for i, s := range servers {
			opts := &redis.Options{Addr: s.Addr()}
			if i < 2 {
				err := s.Client().Do(t.Context(), "ACL", "SETUSER", "locker", "on", ">secret", "~*", "&*", "+@all").Err()
				if err != nil {
					t.Fatal(err)
				}
				opts.Username, opts.Password = "locker", "wrong"
			}
			rdb := redis.NewClient(opts)
			t.Cleanup(func() { rdb.Close() })
			rdbs[i] = rdb
		}
		c, err := redlock.New(rdbs, redlock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err, took := acquireNoDeadline(t, c, "wrongpass")
		wantPermanent(t, err, took, "WRONGPASS", servers[0].Addr(), servers[1].Addr())
	})
	t.Run("WRONGTYPE", func(t *testing.T) {
		c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
		c.admin[0].HSet(t.Context(), "hash", "f", "v")
		c.admin[1].HSet(t.Context(), "hash", "f", "v")
		err, took := acquireNoDeadline(t, c.client, "hash")
		wantPermanent(t, err, took, "WRONGTYPE", c.servers[0].Addr(), c.servers[1].Addr())
	})
	t.Run("CROSSSLOT", func(t *testing.T) {
		// Cluster-enabled servers given as plain clients: the library cannot tell, names
		// the counter KEY:fence, and the servers refuse the two-slot script.
		var rdbs []redis.UniversalClient
		var names []string
		for range 2 {
			m := redistest.StartCluster(t, 1, redistest.Options{}).Masters[0]
			rdbs = append(rdbs, m.Client())
			names = append(names, m.Addr())
		}
		rdbs = append(rdbs, redistest.Start(t, redistest.Options{}).Client())
		c, err := redlock.New(rdbs, redlock.Options{Fencing: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err, took := acquireNoDeadline(t, c, "job")
		wantPermanent(t, err, took, "CROSSSLOT", names...)
	})
	t.Run("minority", func(t *testing.T) {
		// One node of three with a WRONGTYPE key: the lock is still granted.
		c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
		c.admin[0].HSet(t.Context(), "hash", "f", "v")
		err, _ := acquireNoDeadline(t, c.client, "hash")
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestTransientErrorsRetry: a majority of nodes failing for a reason a retry can fix
// (here READONLY, a replica that may be promoted) does not end Acquire before its
// deadline.
func TestTransientErrorsRetry(t *testing.T) {
	servers := redistest.StartN(t, 4, redistest.Options{})
	var urls []string
	for i, s := range servers[:3] {
		if i < 2 {
			err := s.Client().SlaveOf(t.Context(), "127.0.0.1", strconv.Itoa(servers[3].Port())).Err()
			if err != nil {
				t.Fatal(err)
			}
		}
		urls = append(urls, "redis://"+s.Addr())
	}
	c, err := redlock.NewFromURLs(urls, redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Acquire(ctx, "replicas", time.Second)
	if !errors.Is(err, redlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrUnavailable and the deadline", err)
	}
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Fatalf("Acquire gave up after %v, before its deadline", took)
	}
	wantNodeErrors(t, err, "READONLY", urls[0], urls[1])
}
