package fenced_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/redlock-go/redlock/fenced"
	"github.com/redlock-go/redlock/internal/redistest"
)

// FuzzWriteOrder: for any two tokens, a Write with the second after a Write with the
// first is accepted exactly when second ≥ first (as integers), and the stored token is
// then the larger one, digit for digit; a stored fence field in any other form than
// the canonical decimal of a token is refused. Runs on a real redis-server.
func FuzzWriteOrder(f *testing.F) {
	rdb := redistest.Start(f, redistest.Options{}).Client()
	f.Add(uint64(1)<<53+1, uint64(1)<<53, "007")
	f.Add(uint64(1)<<63, uint64(1)<<63-1, "-3")
	f.Add(^uint64(0), ^uint64(0)-1, "0x10")
	f.Add(uint64(9), uint64(10), "18446744073709551616")
	f.Add(uint64(10), uint64(9), "10")
	f.Fuzz(func(t *testing.T, first, then uint64, field string) {
		if first == 0 || then == 0 {
			return
		}
		ctx := t.Context()
		const key = "order"
		rdb.Del(ctx, key)
		if err := fenced.Write(ctx, rdb, key, "first", first); err != nil {
			t.Fatalf("write %d on an empty key: %v", first, err)
		}
		err := fenced.Write(ctx, rdb, key, "then", then)
		switch {
		case then >= first && err != nil:
			t.Fatalf("%d after %d: %v, want accepted", then, first, err)
		case then < first && !errors.Is(err, fenced.ErrStale):
			t.Fatalf("%d after %d: %v, want ErrStale", then, first, err)
		}
		if _, tok, err := fenced.Read(ctx, rdb, key); err != nil || tok != max(first, then) {
			t.Fatalf("%d after %d: stored token %d (%v), want %d", then, first, tok, err, max(first, then))
		}

		// A fence field set by hand: accepted as a token only in canonical form.
		rdb.HSet(ctx, key, "value", "kept", "fence", field)
		n, perr := strconv.ParseUint(field, 10, 64)
		canonical := perr == nil && strconv.FormatUint(n, 10) == field
		err = fenced.Write(ctx, rdb, key, "then", then)
		switch {
		case !canonical && !errors.Is(err, fenced.ErrBadFence):
			t.Fatalf("fence field %q: write got %v, want ErrBadFence", field, err)
		case canonical && then >= n && err != nil:
			t.Fatalf("fence field %q: write %d got %v, want accepted", field, then, err)
		case canonical && then < n && !errors.Is(err, fenced.ErrStale):
			t.Fatalf("fence field %q: write %d got %v, want ErrStale", field, then, err)
		}
		if _, tok, err := fenced.Read(ctx, rdb, key); canonical != (err == nil) || canonical && tok != max(n, then) {
			t.Fatalf("fence field %q: read got %d, %v", field, tok, err)
		}
	})
}
