package fenced_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/fenced"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestWriteComparesExactly: tokens are compared as integers over the whole uint64 range.
// Lua's numbers are doubles, so a script that converts tokens to numbers takes 2^53 for
// 2^53 + 1, and 2^63 − 1 for 2^63: a lower token would be accepted after a higher one,
// and the stored fence would go down.
func TestWriteComparesExactly(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	const (
		p53    = uint64(1) << 53
		p63    = uint64(1) << 63
		maxU64 = ^uint64(0)
	)
	for i, c := range []struct {
		first, then uint64
		accepted    bool
	}{
		{p53 + 1, p53, false},
		{p53 + 1, p53 - 1, false},
		{p53, p53 + 1, true},
		{p53 + 1, p53 + 1, true},
		{p53 + 2, p53 + 1, false},
		{p63, p63 - 1, false},
		{p63 - 1, p63, true},
		{p63 + 1, p63, false},
		{maxU64, maxU64 - 1, false},
		{maxU64, maxU64, true},
		{maxU64 - 1, maxU64, true},
		{1e19, 9999999999999999999, false}, // 20 digits against 19
	} {
		key := "exact:" + strconv.Itoa(i)
		if err := fenced.Write(ctx, rdb, key, "first", c.first); err != nil {
			t.Fatalf("write with %d: %v", c.first, err)
		}
		err := fenced.Write(ctx, rdb, key, "then", c.then)
		want, wantToken := "first", c.first
		if c.accepted {
			want, wantToken = "then", c.then
			if err != nil {
				t.Errorf("%d after %d: %v, want accepted", c.then, c.first, err)
			}
		} else if !errors.Is(err, fenced.ErrStale) {
			t.Errorf("%d after %d: got %v, want ErrStale", c.then, c.first, err)
		}
		if v, tok, err := fenced.Read(ctx, rdb, key); err != nil || v != want || tok != wantToken {
			t.Errorf("%d after %d: stored %q with %d (%v); want %q with %d", c.then, c.first, v, tok, err, want, wantToken)
		}
	}
}

// TestBadFenceField: a fence field that is not a decimal token (written by something
// other than this package) is an error for Read, Write and Update, never taken as 0,
// and no write replaces it.
func TestBadFenceField(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	for i, bad := range []string{"garbage", "-3", "0x10", "007", "1e3", " 5", "5 ", "+5", "", "18446744073709551616", "3.0"} {
		key := "bad:" + strconv.Itoa(i)
		if err := rdb.HSet(ctx, key, "value", "kept", "fence", bad).Err(); err != nil {
			t.Fatal(err)
		}
		if err := fenced.Write(ctx, rdb, key, "lost", 1<<62); err == nil || errors.Is(err, fenced.ErrStale) {
			t.Errorf("fence %q: Write got %v, want an error about the field", bad, err)
		} else if !errors.Is(err, fenced.ErrBadFence) || strings.Count(err.Error(), "fenced:") != 1 {
			t.Errorf("fence %q: Write got %v, want ErrBadFence, its text saying \"fenced:\" once", bad, err)
		}
		if _, err := fenced.Update(ctx, rdb, key, 1<<62, func(string) (string, error) { return "lost", nil }); !errors.Is(err, fenced.ErrBadFence) {
			t.Errorf("fence %q: Update got %v, want ErrBadFence", bad, err)
		}
		if v, tok, err := fenced.Read(ctx, rdb, key); !errors.Is(err, fenced.ErrBadFence) {
			t.Errorf("fence %q: Read got %q %d %v, want ErrBadFence", bad, v, tok, err)
		}
		if got, _ := rdb.HGet(ctx, key, "value").Result(); got != "kept" {
			t.Errorf("fence %q: value replaced by %q", bad, got)
		}
	}
}

// TestNilContextRefused: Write, Update and Read given a nil context return an error
// instead of panicking inside go-redis, which also left the client's pool counting a
// request that never ended (found in review).
func TestNilContextRefused(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	var nilCtx context.Context
	err := fenced.Write(nilCtx, rdb, "k", "v", 1)
	_, uerr := fenced.Update(nilCtx, rdb, "k", 1, func(old string) (string, error) { return old + "x", nil })
	_, _, rerr := fenced.Read(nilCtx, rdb, "k")
	for name, err := range map[string]error{"Write": err, "Update": uerr, "Read": rerr} {
		if err == nil || !strings.Contains(err.Error(), "nil context") {
			t.Errorf("%s(nil ctx) = %v, want a nil context error", name, err)
		}
	}
	if n := rdb.PoolStats().PendingRequests; n != 0 {
		t.Errorf("go-redis counts %d pending requests after the refused calls", n)
	}
}
