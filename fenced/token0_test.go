package fenced_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/fenced"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestTokenZeroRefused: Lock.Fence is 0 when the Client was made without
// Options.Fencing. Guard, Write and Update refuse 0, naming that likely cause, instead
// of running unprotected.
func TestTokenZeroRefused(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, fenced.ErrNoToken) || !strings.Contains(err.Error(), "Options.Fencing") || strings.Count(err.Error(), "fenced:") != 1 {
			t.Errorf("%s with token 0: got %v, want ErrNoToken naming Options.Fencing", what, err)
		}
	}
	var g fenced.Guard
	ran := false
	check("Guard.Do", g.Do(0, func() error { ran = true; return nil }))
	check("Write", fenced.Write(ctx, rdb, "k", "v", 0))
	_, err := fenced.Update(ctx, rdb, "k", 0, func(string) (string, error) { ran = true; return "v", nil })
	check("Update", err)
	if ran {
		t.Error("a function ran with token 0")
	}
	if n, _ := rdb.Exists(ctx, "k").Result(); n != 0 {
		t.Error("a write with token 0 was stored")
	}
	if g.Highest() != 0 {
		t.Errorf("Guard admitted %d", g.Highest())
	}
}
