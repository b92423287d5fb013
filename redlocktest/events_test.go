package redlocktest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// eventLog is a testing.TB that records the kit's events.
type eventLog struct {
	testing.TB
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) RecordEvent(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// lines returns the events as "kind node-index detail" lines, with nodes numbered in
// the order of their first event and proxies named after their upstream.
func (l *eventLog) lines(t *testing.T) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	index := map[string]int{}
	var out []string
	var last time.Time
	for _, e := range l.events {
		if e.At.Before(last) {
			t.Errorf("event %v at %v is before the one before it (%v)", e.Kind, e.At, last)
		}
		last = e.At
		if _, ok := index[e.Node]; !ok {
			index[e.Node] = len(index) + 1
		}
		s := fmt.Sprintf("%s n%d", e.Kind, index[e.Node])
		if e.Proxy != "" {
			s += " via proxy"
		}
		if e.Detail != "" {
			s += " " + e.Detail
		}
		out = append(out, s)
	}
	return out
}

// TestEventsAreRecorded: a t that is a Recorder hears of every start and fault, in the
// order they took effect; a t that is not one changes nothing (every other test).
func TestEventsAreRecorded(t *testing.T) {
	log := &eventLog{TB: t}
	nodes := StartN(log, 2, Options{})
	nodes[0].Pause()
	nodes[0].Resume()
	nodes[1].RestartAfter(10*time.Millisecond, AOFAlways)
	nodes[1].Kill()
	nodes[1].Kill() // already stopped: no event
	proxy := NewNetwork(log).Proxy(nodes[0].Addr())
	proxy.Latency(Replies, 20*time.Millisecond, 0)
	proxy.Blackhole(BothWays)
	proxy.Heal()
	proxy.Down()
	proxy.Up()
	got := strings.Join(log.lines(t), "\n")
	want := strings.Join([]string{
		"start n1", "start n2", "pause n1", "resume n1",
		"kill n2", "restart n2 persistence aof-always", "kill n2",
		"proxy n1 via proxy", "latency n1 via proxy 20ms ± 0s, replies", "blackhole n1 via proxy both ways",
		"heal n1 via proxy", "down n1 via proxy", "up n1 via proxy",
	}, "\n")
	if got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if b := log.events[0].Binary; b != "redis-server" {
		t.Errorf("Binary = %q, want redis-server", b)
	}
	// The restart's kill comes at least the 10 ms down time before the restart.
	if gap := log.events[5].At.Sub(log.events[4].At); gap < 10*time.Millisecond {
		t.Errorf("restart %v after its kill, want ≥ 10ms", gap)
	}
}

func TestClockEvents(t *testing.T) {
	log := &eventLog{TB: t}
	p := Start(log, Options{Clock: &Clock{Rate: 1.5}})
	p.Jump(time.Second)
	got := strings.Join(log.lines(t), "\n")
	if want := "start n1 clock +0.000000 x1.5\njump n1 +1s"; got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}
