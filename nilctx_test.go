package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestNilContextRefused: every call that takes a context answers a nil one with an
// error, without a panic and without registering anything: TryAcquire and Release
// used to panic inside a step that Close then waited for forever (found in review).
// A lock given Release(nil) or Extend(nil) is still held and can be released; the
// Client then closes at once.
func TestNilContextRefused(t *testing.T) {
	var nilCtx context.Context
	servers := redistest.StartN(t, 3, redistest.Options{})
	for _, fair := range []bool{false, true} {
		c, err := redlock.New(redistest.Clients(servers), redlock.Options{Fair: fair})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		l, err := c.TryAcquire(ctx, "nil-ctx", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		refused := func(what string, err error) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), "nil context") {
				t.Errorf("fair=%v: %s(nil ctx) = %v, want a nil context error", fair, what, err)
			}
		}
		noPanic(t, "calls", func() {
			_, err := c.TryAcquire(nilCtx, "nil-ctx-2", time.Second)
			refused("TryAcquire", err)
			_, err = c.Acquire(nilCtx, "nil-ctx-2", time.Second)
			refused("Acquire", err)
			_, err = c.AcquireUnlessHeld(nilCtx, "nil-ctx-2", time.Second)
			refused("AcquireUnlessHeld", err)
			err = c.Do(nilCtx, "nil-ctx-2", time.Second, func(context.Context) error { return nil })
			refused("Do", err)
			if !errors.Is(err, redlock.ErrNotRun) {
				t.Errorf("Do(nil ctx) = %v, want it to match ErrNotRun", err)
			}
			refused("CheckNodes", c.CheckNodes(nilCtx))
			refused("Extend", l.Extend(nilCtx, time.Second))
			refused("Release", l.Release(nilCtx))
			kctx, stop := l.KeepAlive(nilCtx)
			stop()
			if kctx.Err() == nil {
				t.Error("KeepAlive(nil ctx) returned a live context")
			}
			refused("KeepAlive's cause", context.Cause(kctx))
			refused("Shutdown", c.Shutdown(nilCtx))
			if owner, ok := redlock.OwnerFrom(nilCtx); ok || owner != "" {
				t.Errorf("OwnerFrom(nil ctx) = %q, %v; want none", owner, ok)
			}
		})
		// The lock is still held, and its Release works.
		if _, err := c.TryAcquire(ctx, "nil-ctx", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
			t.Errorf("fair=%v: the lock given nil contexts no longer holds the key: TryAcquire = %v", fair, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("fair=%v: Release after Release(nil ctx): %v", fair, err)
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := c.Shutdown(sctx); err != nil {
			t.Errorf("fair=%v: Shutdown after the nil contexts: %v", fair, err)
		}
		cancel()
	}
}

// noPanic runs f and fails t if it panicked.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}
