package redlocktest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestClockSpec(t *testing.T) {
	for _, tc := range []struct {
		c      Clock
		offset time.Duration
		want   string
	}{
		{Clock{}, 0, "+0.000000"},
		{Clock{Rate: 1}, time.Hour, "+3600.000000"},
		{Clock{Rate: 1.1}, -1500 * time.Millisecond, "-1.500000 x1.1"},
	} {
		if got := tc.c.spec(tc.offset); got != tc.want {
			t.Errorf("%+v.spec(%v) = %q, want %q", tc.c, tc.offset, got, tc.want)
		}
	}
}

// serverTime returns the node's wall clock, read with TIME.
func serverTime(t *testing.T, c *redis.Client) time.Time {
	t.Helper()
	now, err := c.Time(ctxTimeout(t, 5*time.Second)).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

func TestClockOffsetAndJump(t *testing.T) {
	skewed := Start(t, Options{Clock: &Clock{Offset: time.Hour}})
	c := skewed.Client()
	ctx := ctxTimeout(t, 10*time.Second)

	if skew := serverTime(t, c).Sub(time.Now()); skew < time.Hour-5*time.Second || skew > time.Hour+5*time.Second {
		t.Errorf("TIME on a node started with +1h is %v from ours, want about 1h", skew)
	}

	// A key with 10 s to live expires at once when the node's clock jumps 30 s ahead.
	if err := c.Set(ctx, "lock", "token", 10*time.Second).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	skewed.Jump(30 * time.Second)
	if skew := serverTime(t, c).Sub(time.Now()); skew < time.Hour+25*time.Second {
		t.Errorf("TIME after a 30 s jump is %v from ours, want about 1h30s", skew)
	}
	if got, err := c.Get(ctx, "lock").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET lock after the jump = %q, %v; want redis.Nil (expired)", got, err)
	}

	// The offset survives a restart.
	skewed.Restart(NoPersistence)
	if skew := serverTime(t, c).Sub(time.Now()); skew < time.Hour+25*time.Second {
		t.Errorf("TIME after restart is %v from ours, want about 1h30s", skew)
	}
}

func TestClockRate(t *testing.T) {
	const rate = 2.0
	fast := Start(t, Options{Clock: &Clock{Rate: rate}})
	normal := Start(t, Options{})
	fc, nc := fast.Client(), normal.Client()
	ctx := ctxTimeout(t, 10*time.Second)
	for _, c := range []*redis.Client{fc, nc} {
		if err := c.Set(ctx, "lock", "token", 10*time.Second).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
	}
	start := time.Now()
	time.Sleep(500 * time.Millisecond) // the skew needs real time to show

	fastTTL, err1 := fc.PTTL(ctx, "lock").Result()
	normalTTL, err2 := nc.PTTL(ctx, "lock").Result()
	elapsed := time.Since(start)
	if err1 != nil || err2 != nil {
		t.Fatalf("PTTL: %v, %v", err1, err2)
	}
	// The fast node's key lost about rate × real; the normal one's about real.
	fastLost, normalLost := 10*time.Second-fastTTL, 10*time.Second-normalTTL
	t.Logf("after %v: PTTL %v on the x%v node, %v on the normal one", elapsed, fastTTL, rate, normalTTL)
	if fastLost < time.Duration(1.6*float64(normalLost)) {
		t.Errorf("the x%v node's key lost %v of its TTL, the normal one's %v; want about %v times as much", rate, fastLost, normalLost, rate)
	}
}

func TestJumpNeedsClock(t *testing.T) {
	fake := &fakeTB{TB: t}
	var s *Process
	fake.run(func() { s = Start(fake, Options{}) })
	fake.run(func() { s.Jump(time.Second) })
	if !strings.Contains(fake.fatal, "Options.Clock") {
		t.Errorf("Jump on a node without a clock: Fatalf message = %q, want it to name Options.Clock", fake.fatal)
	}
	fake.runCleanups()
}
