package redlock

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"
)

// captureHook answers every command without sending it and keeps its arguments.
type captureHook struct{ args [][]any }

func (h *captureHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *captureHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *captureHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		h.args = append(h.args, cmd.Args())
		return nil
	}
}

// TestEvalShaArgsAsGoRedis: the EVALSHA a node call sends with its step's shared
// argument vector is, argument for argument, the one go-redis's Script.EvalSha sends
// for the same keys and arguments, for every kind of step's arguments (tokens, numbers,
// an empty string, no arguments, one key, a fenced step's seven keys).
func TestEvalShaArgsAsGoRedis(t *testing.T) {
	h := &captureHook{}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: the hook answers
	defer rdb.Close()
	rdb.AddHook(h)
	ctx := t.Context()
	cases := []struct {
		st   step
		keys []string
		args []any
	}{
		{stepAcquire, []string{"k"}, []any{"token", int64(30000)}},
		{stepRelease, []string{"k"}, []any{"token"}},
		{stepRelease, []string{"k"}, []any{"a", "b", "c"}},
		{stepFairRelease, fairKeys("{tag}k"), []any{"", "id"}},
		{stepFairTicket, fairKeys("k"), []any{int64(2000), "id", int64(1000), "", "hand", int64(3)}},
		{stepFencedAcquire, append(copied(fairKeys("k")[:1]), fenceKeys("k", true)[1:]...), []any{"t", int64(5), int64(7)}},
		{stepExtend, []string{"k"}, nil},
	}
	for i, tc := range cases {
		h.args = nil
		want := tc.st.script.EvalSha(ctx, rdb, tc.keys, tc.args...)
		call := &nodeCall{st: tc.st, keys: tc.keys, args: tc.args, vector: evalShaArgs(tc.st.script, tc.keys, tc.args)}
		got := call.evalSha(ctx, rdb, true)
		if len(h.args) != 2 {
			t.Fatalf("case %d: %d commands reached the hook, want 2", i, len(h.args))
		}
		if !reflect.DeepEqual(h.args[0], h.args[1]) {
			t.Errorf("case %d: sent %v, go-redis sends %v", i, h.args[1], h.args[0])
		}
		if !reflect.DeepEqual(got.Args(), want.Args()) {
			t.Errorf("case %d: command %v, go-redis's %v", i, got.Args(), want.Args())
		}
	}
}

// copied returns a copy of s, so that appending to it leaves s alone.
func copied(s []string) []string { return append([]string(nil), s...) }

// TestFairKeysRemembered: fairKeys answers every key as a fresh computation would,
// also when keys that share an entry of its memory take turns, and a hot key's
// repeated asks return the remembered slice without allocating.
func TestFairKeysRemembered(t *testing.T) {
	fresh := func(key string) []string {
		q, l, n := FairKeys(key)
		return []string{key, q, l, n, slotName(key, "fairh")}
	}
	// Keys that land in the same entry (hash slot modulo the number of entries).
	entry := hashSlot("base") % uint16(len(recentFairKeys))
	same := []string{"base"}
	for i := 0; len(same) < 4; i++ {
		k := fmt.Sprintf("k%d", i)
		if hashSlot(k)%uint16(len(recentFairKeys)) == entry {
			same = append(same, k)
		}
	}
	for round := 0; round < 3; round++ {
		for _, k := range append(same, "{x}y", "a}b{c", "") {
			if got, want := fairKeys(k), fresh(k); !reflect.DeepEqual(got, want) {
				t.Fatalf("fairKeys(%q) = %v, want %v", k, got, want)
			}
		}
	}
	fairKeys("hot")
	if n := testing.AllocsPerRun(100, func() { fairKeys("hot") }); n != 0 {
		t.Errorf("a remembered key's fairKeys allocates %v times, want 0", n)
	}
}
