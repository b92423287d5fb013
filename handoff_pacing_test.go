package redlock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
	"time"
)

func TestWakePause(t *testing.T) {
	const ms = time.Millisecond
	half := func(n time.Duration) time.Duration { return n / 2 }
	for _, tt := range []struct {
		name     string
		remote   bool
		courtesy time.Duration
		took     time.Duration
		want     time.Duration
	}{
		{name: "woken by this Client's release", remote: false, courtesy: 5 * ms, took: 4 * ms, want: 0},
		{name: "after a capped run of handoffs", remote: true, courtesy: 5 * ms, took: 4 * ms, want: 5 * ms},
		{name: "announced by the nodes", remote: true, took: 4 * ms, want: 2 * ms},
		{name: "announced, no attempt timed yet", remote: true, want: 0},
	} {
		if got := wakePause(tt.remote, tt.courtesy, tt.took, half); got != tt.want {
			t.Errorf("%s: wakePause = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCourtesyFor(t *testing.T) {
	const took = 3 * time.Millisecond
	if got := courtesyFor(true, 2, took); got != courtesyFactor*took {
		t.Errorf("capped, another Client heard: %v, want %v", got, courtesyFactor*took)
	}
	if got := courtesyFor(true, 1, took); got != 0 {
		t.Errorf("capped, nobody else heard: %v, want 0", got)
	}
	if got := courtesyFor(false, 5, took); got != 0 {
		t.Errorf("not capped: %v, want 0", got)
	}
}

func TestYieldFor(t *testing.T) {
	const ms = time.Millisecond
	if got := yieldFor(0, 50*ms); got != 0 {
		t.Errorf("no majority answered: %v, want 0", got)
	}
	if got := yieldFor(2*ms, 50*ms); got != yieldRoundTrips*2*ms+yieldSlack {
		t.Errorf("2 ms round trips: %v, want %v", got, yieldRoundTrips*2*ms+yieldSlack)
	}
	if got := yieldFor(40*ms, 50*ms); got != 50*ms {
		t.Errorf("slow round trips: %v, want the node timeout", got)
	}
}

// TestPacingConstantsHaveReasons keeps handoff_pacing.go's promise: each constant
// there comes with a comment that says why it has its value.
func TestPacingConstantsHaveReasons(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "handoff_pacing.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			n++
			if vs.Doc == nil {
				t.Errorf("constant %s has no comment saying why", vs.Names[0].Name)
			}
		}
	}
	if n < 9 {
		t.Errorf("%d constants in handoff_pacing.go; the fairness constants belong there", n)
	}
}

func TestAgePause(t *testing.T) {
	const ms = time.Millisecond
	for _, tt := range []struct {
		name      string
		winLosses float64
		losses    int
		took      time.Duration
		want      time.Duration
	}{
		{name: "no contention seen", winLosses: 0, losses: 0, took: 2 * ms, want: 0},
		{name: "lost as many as the winners", winLosses: 6, losses: 6, took: 2 * ms, want: 0},
		{name: "lost more than the winners", winLosses: 6, losses: 9, took: 2 * ms, want: 0},
		{name: "two races short", winLosses: 6, losses: 4, took: 2 * ms, want: 2 * ms},
		{name: "half a race short", winLosses: 6.5, losses: 6, took: 2 * ms, want: ms / 2},
		{name: "capped", winLosses: 40, losses: 0, took: 2 * ms, want: maxAgeSteps * ms},
		{name: "no attempt timed yet", winLosses: 6, losses: 0, took: 0, want: 0},
	} {
		if got := agePause(tt.winLosses, tt.losses, tt.took); got != tt.want {
			t.Errorf("%s: agePause = %v, want %v", tt.name, got, tt.want)
		}
	}
	// The more races a head lost, the sooner it attempts.
	for losses := 1; losses <= 8; losses++ {
		if a, b := agePause(6, losses-1, ms), agePause(6, losses, ms); b > a || (b == a && b != 0) {
			t.Errorf("agePause(6, %d) = %v after agePause(6, %d) = %v: want a shorter pause", losses, b, losses-1, a)
		}
	}
}

func TestWinLossesFollowsTheWinners(t *testing.T) {
	kq := &keyQueue{}
	q := &queues{keys: map[string]*keyQueue{"k": kq}}
	for range 20 {
		q.won("k", 6)
	}
	if got := kq.winLosses; got < 5.9 || got > 6 {
		t.Fatalf("after 20 winners that lost 6 races: winLosses %.2f, want about 6", got)
	}
	for range 10 {
		q.won("k", 0) // the other Clients went away: first attempts win
	}
	q.won("gone", 3) // a key without a queue's state: nothing to record
	if got := kq.winLosses; got > 0.5 {
		t.Fatalf("after 10 uncontended winners: winLosses %.2f, want near 0", got)
	}
}
