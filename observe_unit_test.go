package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logRecorder is a slog.Handler that keeps every record, for the Logger tests.
type logRecorder struct {
	mu      sync.Mutex
	records []logLine
}

// logLine is one recorded record: its level, message and attributes as text.
type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	line := logLine{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		line.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, line)
	return nil
}

// lines returns the records so far.
func (h *logRecorder) lines() []logLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logLine(nil), h.records...)
}

// steppingClock is a Clock the test moves by hand.
type steppingClock struct{ now time.Time }

func (c *steppingClock) Now() time.Time                       { return c.now }
func (c *steppingClock) After(time.Duration) <-chan time.Time { return nil }

// TestLogRateLimit: at most one line per kind and node each logEvery; the next line
// of that slot counts the ones left out; other nodes and kinds have slots of their own.
func TestLogRateLimit(t *testing.T) {
	rec := &logRecorder{}
	clock := &steppingClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := newLogState(Options{Logger: slog.New(rec), Clock: clock})
	for range 5 {
		s.lockLost("k", errors.New("gone"))
	}
	s.emit(slog.LevelWarn, logConfig, "node-a", "a")
	s.emit(slog.LevelWarn, logConfig, "node-b", "b")
	s.emit(slog.LevelWarn, logConfig, "node-a", "a again") // left out
	if got := len(rec.lines()); got != 3 {
		t.Fatalf("%d lines within one second, want 3 (one lost-lock line, one per node): %+v", got, rec.lines())
	}
	clock.now = clock.now.Add(logEvery)
	s.lockLost("k", errors.New("gone"))
	lines := rec.lines()
	if len(lines) != 4 || lines[3].attrs["suppressed"] != "4" {
		t.Fatalf("after a second: want a 4th line saying 4 were suppressed, got %+v", lines)
	}
}

// TestLogKeyHash: without LogKeys a line names the key by a hash, never by itself.
func TestLogKeyHash(t *testing.T) {
	for _, logKeys := range []bool{false, true} {
		rec := &logRecorder{}
		s := newLogState(Options{Logger: slog.New(rec), Clock: systemClock{}, LogKeys: logKeys})
		s.lockLost("orders:customer-4711", errors.New("gone"))
		line := rec.lines()[0]
		_, hasKey := line.attrs["key"]
		hash := line.attrs["key_hash"]
		if logKeys != hasKey || logKeys == (hash != "") {
			t.Errorf("LogKeys %v: attributes %v", logKeys, line.attrs)
		}
		if !logKeys && (len(hash) != 12 || strings.Contains(fmt.Sprint(line.attrs), "4711")) {
			t.Errorf("LogKeys false: the key shows, or the hash is not 12 hex digits: %v", line.attrs)
		}
	}
}

// TestErrorClass: each kind of node error gets its class.
func TestErrorClass(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{ErrNodeTimeout, ClassTimeout},
		{context.DeadlineExceeded, ClassTimeout},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), ClassRefused},
		{replyError("READONLY You can't write against a read only replica."), ClassReadonly},
		{replyError("LOADING Redis is loading the dataset in memory"), ClassLoading},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), ClassPermanent},
		{errNodeBusy, ClassBusy},
		{errors.New("EOF"), ClassOther},
	} {
		if got := errorClass(tc.err); got != tc.want {
			t.Errorf("errorClass(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// fixedClock is a Clock that always reads t.
type fixedClock struct{ t time.Time }

func (f fixedClock) Now() time.Time                     { return f.t }
func (fixedClock) After(time.Duration) <-chan time.Time { return nil }

// nopObserver is an Observer that does nothing, for a Client made in a unit test.
type nopObserver struct{}

func (nopObserver) Observe(context.Context, Event) {}

// TestNodeRepliesFromRound: what gather saw becomes one NodeReply per node, in node
// order, with a refused fencing token as ResultNo of class fence-refused and the
// nodes silent at the node timeout as failed with class timeout.
func TestNodeRepliesFromRound(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &Client{nodes: []node{{name: "a"}, {name: "b"}, {name: "c"}, {name: "d"}}, opts: Options{Clock: fixedClock{start}, Observer: nopObserver{}}}
	r := c.newRound(stepFencedAcquire, 4)
	r.saw(0, time.Millisecond, outYes, nil)
	r.saw(1, 2*time.Millisecond, outRefused, nil)
	r.timedOut([]bool{true, true, false, false}, 3*time.Millisecond)
	got := c.nodeReplies(r, start)
	want := []NodeReply{
		{Node: "a", At: time.Millisecond, Result: ResultYes},
		{Node: "b", At: 2 * time.Millisecond, Result: ResultNo, Class: ClassFenceRefused},
		{Node: "c", At: 3 * time.Millisecond, Result: ResultFailed, Class: ClassTimeout, Err: ErrNodeTimeout},
		{Node: "d", At: 3 * time.Millisecond, Result: ResultFailed, Class: ClassTimeout, Err: ErrNodeTimeout},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replies:\n got %v\nwant %v", got, want)
	}
	// A handoff round is reported by two events, from two goroutines: each gets its
	// own slice with the same replies (run with -race), and only one of them is
	// allocated (the other is the round's own room).
	again := make(chan []NodeReply)
	go func() { again <- c.nodeReplies(r, start) }()
	third := c.nodeReplies(r, start)
	second := <-again
	if &second[0] == &got[0] || &third[0] == &got[0] || &second[0] == &third[0] {
		t.Fatal("two events share one Nodes slice")
	}
	if fmt.Sprint(second) != fmt.Sprint(want) || fmt.Sprint(third) != fmt.Sprint(want) {
		t.Fatalf("replies reported again:\n got %v and %v\nwant %v", second, third, want)
	}
	if n := testing.AllocsPerRun(10, func() { c.nodeReplies(c.newRound(stepAcquire, 4), start) }); n != 1 {
		t.Errorf("a round reported once: %v allocations, want 1 (the round with its record)", n)
	}
	if n := testing.AllocsPerRun(10, func() {
		r := c.newRound(stepAcquire, 4)
		c.nodeReplies(r, start)
		c.nodeReplies(r, start)
	}); n != 2 {
		t.Errorf("a round reported twice: %v allocations, want 2", n)
	}
	// An event whose step began before the round (an Acquire's earlier attempts)
	// counts the replies' times from its own start.
	if got := c.nodeReplies(r, start.Add(-time.Second)); got[0].At != time.Second+time.Millisecond || got[2].At != time.Second+3*time.Millisecond {
		t.Errorf("replies of a round that began 1s after its step: at %v and %v", got[0].At, got[2].At)
	}
	if c.nodeReplies(&round{}, start) != nil {
		t.Fatal("a round without a record gives replies")
	}
}

// TestOutcomeOf: every error a step returns falls in its outcome.
func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, OutcomeOK},
		{closedError("k"), OutcomeClosed},
		{lostError("extend", "k", "already released"), OutcomeLost},
		{&QuorumError{kind: ErrNotAcquired}, OutcomeNotAcquired},
		{&QuorumError{kind: ErrUnavailable}, OutcomeUnavailable},
		{&QuorumError{kind: ErrNotAcquired, ctxErr: context.DeadlineExceeded}, OutcomeCanceled},
		{&fenceExhaustedError{key: "k"}, OutcomeInvalid},
		{errEmptyKey, OutcomeInvalid},
	} {
		if got := outcomeOf(tc.err); got != tc.want {
			t.Errorf("outcomeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestNodeHealthLines: a node's change of state is printed at once, unless the node
// had a line within logEvery; then with the first call after that, if the state still
// differs from the last line, counting the changes left out. No call, no line.
func TestNodeHealthLines(t *testing.T) {
	rec := &logRecorder{}
	clock := &steppingClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h := newLogState(Options{Logger: slog.New(rec), Clock: clock}).node("n1")
	msgs := func() (out []string) {
		for _, l := range rec.lines() {
			out = append(out, l.msg+" "+l.attrs["suppressed"])
		}
		return out
	}
	h.note(outYes, nil) // up, as assumed: nothing to say
	h.note(outFailed, ErrNodeTimeout)
	h.note(outFailed, ErrNodeTimeout) // still down: nothing new
	h.note(outYes, nil)               // up within the second: held back
	h.note(outFailed, errNodeBusy)    // not the node's fault: up still
	if got := fmt.Sprint(msgs()); got != "[redlock: node failing ]" {
		t.Fatalf("lines: %s", got)
	}
	h.note(outFailed, ErrNodeTimeout) // down again: the state printed holds
	clock.now = clock.now.Add(logEvery)
	h.note(outFailed, ErrNodeTimeout)
	h.note(outYes, nil) // up: printed, having left out two changes
	if got := fmt.Sprint(msgs()); got != "[redlock: node failing  redlock: node recovered 2]" {
		t.Fatalf("lines: %s", got)
	}
}

// TestObservedStepAllocations: what an Observer costs a successful step besides the
// Nodes it keeps: classifying a nil error allocates nothing, and a round's record is
// one allocation for up to 5 nodes, made with the round (three beyond).
func TestObservedStepAllocations(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		if outcomeOf(nil) != OutcomeOK || asQuorumError(nil) != nil {
			t.Fatal("nil error misclassified")
		}
	}); n != 0 {
		t.Errorf("classifying a nil error: %v allocations, want 0", n)
	}
	qe := &QuorumError{kind: ErrNotAcquired}
	if got := asQuorumError(fmt.Errorf("wrapped: %w", qe)); got != qe {
		t.Errorf("asQuorumError of a wrapped QuorumError: %v", got)
	}
	obs := Options{Clock: systemClock{}, Observer: nopObserver{}}
	for _, tc := range []struct{ nodes, allocs int }{{1, 1}, {3, 1}, {5, 1}, {6, 3}} {
		c := &Client{opts: obs}
		var r *round
		if n := testing.AllocsPerRun(100, func() { r = c.newRound(stepAcquire, tc.nodes) }); int(n) != tc.allocs {
			t.Errorf("%d nodes: %v allocations, want %d", tc.nodes, n, tc.allocs)
		}
		if len(r.obs.seen) != tc.nodes || r.obs.handoff {
			t.Errorf("%d nodes: %d replies kept, handoff %v", tc.nodes, len(r.obs.seen), r.obs.handoff)
		}
	}
	c := &Client{opts: obs}
	if !c.newRound(stepHandoff, 3).obs.handoff {
		t.Error("a handoff round not marked")
	}
	if (&Client{}).newRound(stepAcquire, 3).obs != nil {
		t.Error("a round of a Client without an Observer keeps a record")
	}
}
