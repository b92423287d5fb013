package redlocktest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlocktest"
)

// duplicated returns a client of node with a Duplicator installed.
func duplicated(t *testing.T, node *redlocktest.Process, opts redlocktest.DuplicateOptions) (*redis.Client, *redlocktest.Duplicator) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, redlocktest.Duplicate(t, rdb, opts)
}

func TestDuplicateEveryCommand(t *testing.T) {
	node := redlocktest.Start(t, redlocktest.Options{})
	rdb, d := duplicated(t, node, redlocktest.DuplicateOptions{Fraction: 1, MaxDelay: 20 * time.Millisecond, Seed: 1})
	ctx := ctxTimeout(t, 10*time.Second)

	for range 5 { // plain commands
		if err := rdb.Incr(ctx, "plain").Err(); err != nil {
			t.Fatal(err)
		}
	}
	pipe := rdb.Pipeline() // each command of a pipeline is copied on its own
	for range 5 {
		pipe.Incr(ctx, "piped")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	tx := rdb.TxPipeline() // a transaction is never copied
	tx.Incr(ctx, "tx")
	if _, err := tx.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	direct := node.Client()
	for key, want := range map[string]int{"plain": 10, "piped": 10, "tx": 1} {
		if got, err := direct.Get(ctx, key).Int(); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d (every INCR delivered twice, transactions once)", key, got, err, want)
		}
	}
	if copied, sent := d.Counts(); copied != 10 || sent != 10 {
		t.Errorf("Counts() = %d copied, %d sent; want 10, 10", copied, sent)
	}
	for _, c := range d.Copies() {
		if c.Delay < 0 || c.Delay > 20*time.Millisecond || c.Err != nil {
			t.Errorf("copy %v: delay %v, err %v; want a delay within [0, 20ms] and no error", c.Args, c.Delay, c.Err)
		}
	}
}

// TestDuplicateArrivesLate shows the fault a Duplicator stands for: a copy of an
// earlier command lands after a later one and undoes it.
func TestDuplicateArrivesLate(t *testing.T) {
	node := redlocktest.Start(t, redlocktest.Options{})
	first := func(cmd redis.Cmder) bool { return len(cmd.Args()) > 2 && cmd.Args()[2] == "first" }
	rdb, d := duplicated(t, node, redlocktest.DuplicateOptions{Fraction: 1, MaxDelay: 50 * time.Millisecond, Match: first, Seed: 7})
	ctx := ctxTimeout(t, 10*time.Second)
	start := time.Now()
	if err := rdb.Set(ctx, "k", "first", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "k", "second", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	copies := d.Copies()
	if len(copies) != 1 || copies[0].Delay < 10*time.Millisecond {
		t.Fatalf("copies %+v: want one (only the first SET matches), delayed by 10 ms or more (seed 7)", copies)
	}
	if took := time.Since(start); took < copies[0].Delay {
		t.Errorf("drained after %v, before the copy's delay %v", took, copies[0].Delay)
	}
	// The copy is sent long after the second SET has been answered.
	if got := node.Client().Get(ctx, "k").Val(); got != "first" {
		t.Errorf("k = %q after the late copy (delay %v), want %q", got, copies[0].Delay, "first")
	}
}

// TestDuplicateRepeatsWithSeed: the same seed copies the same commands with the same
// delays; another seed differs; about Fraction of the commands are copied.
func TestDuplicateRepeatsWithSeed(t *testing.T) {
	node := redlocktest.Start(t, redlocktest.Options{})
	ctx := ctxTimeout(t, 10*time.Second)
	run := func(seed uint64) []redlocktest.Copy {
		rdb, d := duplicated(t, node, redlocktest.DuplicateOptions{Fraction: 0.3, MaxDelay: 5 * time.Millisecond, Seed: seed})
		for i := range 200 {
			if err := rdb.Set(ctx, "r", i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		copies := d.Copies()
		slices.SortFunc(copies, func(a, b redlocktest.Copy) int { return a.Args[2].(int) - b.Args[2].(int) })
		return copies
	}
	same := func(a, b []redlocktest.Copy) bool {
		return slices.EqualFunc(a, b, func(x, y redlocktest.Copy) bool { return x.Args[2] == y.Args[2] && x.Delay == y.Delay })
	}
	a, b, c := run(42), run(42), run(43)
	if !same(a, b) {
		t.Errorf("seed 42 copied %d and then %d commands, not the same ones with the same delays", len(a), len(b))
	}
	if same(a, c) {
		t.Errorf("seeds 42 and 43 copied the same commands")
	}
	if len(a) < 30 || len(a) > 90 {
		t.Errorf("%d of 200 commands copied with fraction 0.3", len(a))
	}
}

// TestDuplicateEvalshaAfterFlush: a copy of EVALSHA that meets NOSCRIPT (the node lost
// its scripts: a restart, SCRIPT FLUSH) is sent again as EVAL, so it still lands.
func TestDuplicateEvalshaAfterFlush(t *testing.T) {
	node := redlocktest.Start(t, redlocktest.Options{})
	ctx := ctxTimeout(t, 10*time.Second)
	script := redis.NewScript(`return redis.call('INCR', KEYS[1])`)
	evalsha := func(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" }
	rdb, d := duplicated(t, node, redlocktest.DuplicateOptions{Fraction: 1, MaxDelay: 200 * time.Millisecond, Match: evalsha, Seed: 5})
	if err := script.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if err := script.Run(ctx, rdb, []string{"n"}).Err(); err != nil { // EVALSHA, copied
		t.Fatal(err)
	}
	if err := node.Client().ScriptFlush(ctx).Err(); err != nil { // before the copy lands
		t.Fatal(err)
	}
	if err := script.Eval(ctx, rdb, []string{"other"}).Err(); err != nil { // the body, seen by the hook
		t.Fatal(err)
	}
	_ = node.Client().ScriptFlush(ctx).Err()
	if err := d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	copies := d.Copies()
	if len(copies) != 1 || copies[0].Delay < 20*time.Millisecond {
		t.Fatalf("copies %+v: want one, delayed by 20 ms or more (seed 5)", copies)
	}
	if copies[0].Err != nil {
		t.Errorf("the copy failed: %v", copies[0].Err)
	}
	if got, err := node.Client().Get(ctx, "n").Int(); err != nil || got != 2 {
		t.Errorf("n = %d, %v; want 2: the EVALSHA and its copy, resent as EVAL", got, err)
	}
}

// TestDuplicateCloseDropsPending: Close drops the copies still waiting, so nothing
// reaches the server after it.
func TestDuplicateCloseDropsPending(t *testing.T) {
	node := redlocktest.Start(t, redlocktest.Options{})
	ctx := ctxTimeout(t, 10*time.Second)
	rdb, d := duplicated(t, node, redlocktest.DuplicateOptions{Fraction: 1, MaxDelay: time.Hour, Seed: 3})
	if err := rdb.Incr(ctx, "late").Err(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Incr(ctx, "late").Err(); err != nil { // no copy after Close
		t.Fatal(err)
	}
	if copied, sent := d.Counts(); copied != 1 || sent != 0 {
		t.Errorf("Counts() = %d, %d; want 1 drawn, 0 sent", copied, sent)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := d.Drain(short); err != nil {
		t.Errorf("Drain after Close = %v, want nil: nothing is pending", err)
	}
	if got := node.Client().Get(ctx, "late").Val(); got != "2" {
		t.Errorf("late = %q, want 2", got)
	}
}
