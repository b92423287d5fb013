package fenced_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fenced"
	"github.com/redlock-go/redlock/internal/redistest"
)

func TestMain(m *testing.M) {
	redistest.SkipExamplesWithoutServer()
	goleak.VerifyTestMain(m)
}

func TestGuard(t *testing.T) {
	var g fenced.Guard
	ran := 0
	run := func() error { ran++; return nil }
	for _, tok := range []uint64{3, 3, 7} { // equal tokens: the same holder writing again
		if err := g.Do(tok, run); err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	if err := g.Do(5, run); !errors.Is(err, fenced.ErrStale) {
		t.Fatalf("stale token: got %v, want ErrStale", err)
	}
	if ran != 3 || g.Highest() != 7 {
		t.Fatalf("ran %d times, highest %d; want 3 and 7", ran, g.Highest())
	}
}

func TestWriteRead(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	if v, tok, err := fenced.Read(ctx, rdb, "account"); err != nil || v != "" || tok != 0 {
		t.Fatalf("empty read: %q %d %v", v, tok, err)
	}
	for _, w := range []struct {
		value string
		token uint64
	}{{"a", 5}, {"b", 5}, {"c", 6}} {
		if err := fenced.Write(ctx, rdb, "account", w.value, w.token); err != nil {
			t.Fatalf("write %q with %d: %v", w.value, w.token, err)
		}
	}
	if err := fenced.Write(ctx, rdb, "account", "stale", 4); !errors.Is(err, fenced.ErrStale) {
		t.Fatalf("stale write: got %v, want ErrStale", err)
	}
	if v, tok, err := fenced.Read(ctx, rdb, "account"); err != nil || v != "c" || tok != 6 {
		t.Fatalf("read: %q %d %v; want c 6", v, tok, err)
	}
}

// TestPausedHolderIsFenced: holder A stops (a GC pause, SIGSTOP) past its TTL; B takes
// the lock and writes; A wakes up and writes with its old token: the resource refuses
// it. Without the fence A's write would overwrite B's.
func TestPausedHolderIsFenced(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{Persistent: true})
	resource := redistest.Start(t, redistest.Options{}).Client()
	newClient := func() *redlock.Client {
		c, err := redlock.New(redistest.Clients(servers), redlock.Options{Fencing: true, RetryDelay: redlock.ExponentialJitter(time.Millisecond, 5*time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := t.Context()
	a, err := newClient().TryAcquire(ctx, "{account}", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// A is paused here, beyond its TTL; B waits for the lock and gets it.
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := newClient().Acquire(wait, "{account}", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if b.Fence() <= a.Fence() {
		t.Fatalf("B's token %d not above A's %d", b.Fence(), a.Fence())
	}
	if err := fenced.Write(ctx, resource, "balance", "written by B", b.Fence()); err != nil {
		t.Fatal(err)
	}
	if err := fenced.Write(ctx, resource, "balance", "written by A", a.Fence()); !errors.Is(err, fenced.ErrStale) {
		t.Fatalf("A's late write: got %v, want ErrStale", err)
	}
	if v, _, _ := fenced.Read(ctx, resource, "balance"); v != "written by B" {
		t.Fatalf("resource holds %q", v)
	}
}
