package redlock

import (
	"testing"
)

// TestFairDrawBehindHolder: fair_ticket.lua with a waiter id on an empty queue queues
// the waiter when the key is held (first in line for the holder's release; the reply
// is v: it attempts at once and so learns that it is the head) and queues nobody when
// the key is free (v: it attempts at once); a waiter behind that one is queued with
// −v (it waits to be named). Until the key being held counted, every draw on a fresh
// key queued nobody, and the holder's next Acquire took the key again ahead of them.
func TestFairDrawBehindHolder(t *testing.T) {
	nodes, admin := plainNodes(t, 1)
	ctx := t.Context()
	keys := fairKeys("k")
	draw := func(id string) int64 {
		t.Helper()
		v, err := stepFairTicket.script.Run(ctx, nodes[0], keys, 2000, id, 1000).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := draw("C/free"); v != 1 {
		t.Errorf("draw on a free key, empty queue: %d, want 1 (attempt at once)", v)
	}
	if n := admin[0].ZCard(ctx, keys[1]).Val(); n != 0 {
		t.Fatalf("the draw on a free key queued %d entries, want none", n)
	}
	if err := admin[0].Set(ctx, "k", "holder", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v := draw("C/a"); v != 2 {
		t.Errorf("draw on a held key, empty queue: %d, want 2 (queued, first in line)", v)
	}
	if s, err := admin[0].ZScore(ctx, keys[1], "C/a").Result(); err != nil || s != 2 {
		t.Errorf("C/a's score %v (%v), want 2", s, err)
	}
	if v := draw("C/b"); v != -3 {
		t.Errorf("draw behind C/a: %d, want -3 (queued behind others)", v)
	}
	if v := draw("C/a"); v != 4 {
		t.Errorf("a second draw of a queued waiter: %d, want 4 (attempt: it is queued here)", v)
	}
}
