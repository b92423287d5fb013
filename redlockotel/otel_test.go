package redlockotel_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
)

// TestAcquireOutcomes: a granted and a contended TryAcquire are counted by outcome, with
// their attempts; the lock counts as held until its Release, and then not.
func TestAcquireOutcomes(t *testing.T) {
	r := newRig(t, 3, redlock.Options{})
	ctx := context.Background()
	lock, err := r.client.TryAcquire(ctx, "otel:a", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.TryAcquire(ctx, "otel:a", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatal(err)
	}
	rm := r.metrics()
	for _, out := range []string{"ok", "not_acquired"} {
		by := map[string]string{"redlock.outcome": out}
		if n, secs := count(t, rm, redlockotel.MetricAcquireDuration, by); n != 1 || secs <= 0 || secs > 5 {
			t.Errorf("acquire duration, %s: %d values, %g s", out, n, secs)
		}
		if n, attempts := count(t, rm, redlockotel.MetricAcquireAttempts, by); n != 1 || attempts != 1 {
			t.Errorf("acquire attempts, %s: %d values, sum %g", out, n, attempts)
		}
	}
	if n, _ := count(t, rm, redlockotel.MetricAcquireDuration, nil); n != 2 {
		t.Errorf("acquire duration: %d values, want 2", n)
	}
	if held := sum(t, rm, redlockotel.MetricLocksHeld, nil); held != 1 {
		t.Errorf("locks held while held: %d", held)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("second release: %v", err)
	}
	rm = r.metrics()
	if held := sum(t, rm, redlockotel.MetricLocksHeld, nil); held != 0 {
		t.Errorf("locks held after release: %d", held)
	}
	if lost := sum(t, rm, redlockotel.MetricLocksLost, nil); lost != 0 {
		t.Errorf("a released lock counted lost: %d", lost)
	}
	spans := r.ended("redlock.acquire")
	if len(spans) != 2 {
		t.Fatalf("%d acquire spans", len(spans))
	}
	for i, want := range []string{"ok", "not_acquired"} {
		s := spans[i]
		if got, _ := attr(s.Attributes(), redlockotel.AttrOutcome); got != want || s.Status().Code != codes.Unset {
			t.Errorf("acquire span %d: outcome %q, status %v; want %q, unset", i, got, s.Status(), want)
		}
	}
	if et, ok := attr(spans[1].Attributes(), redlockotel.AttrErrorType); et != "not_acquired" || !ok {
		t.Errorf("contended acquire span's error.type: %q", et)
	}
	if _, ok := attr(spans[0].Attributes(), redlockotel.AttrErrorType); ok {
		t.Error("granted acquire span has error.type")
	}
}

// TestUnavailableNodeErrors: with one node killed and one paused, a TryAcquire is
// unavailable; each failing node's error is counted under its name and class, and the
// span says Error with one event per node.
func TestUnavailableNodeErrors(t *testing.T) {
	r := newRig(t, 3, redlock.Options{})
	ctx := context.Background()
	killed, paused := r.servers[0], r.servers[1]
	killed.Kill() // before the Client ever dialled it: the connection is refused
	paused.Pause()
	defer paused.Resume()
	if _, err := r.client.TryAcquire(ctx, "otel:u", time.Second); !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatal(err)
	}
	rm := r.metrics()
	if n, _ := count(t, rm, redlockotel.MetricAcquireDuration, map[string]string{"redlock.outcome": "unavailable"}); n != 1 {
		t.Errorf("unavailable acquires: %d", n)
	}
	for _, c := range []struct{ node, class string }{{killed.Addr(), redlock.ClassRefused}, {paused.Addr(), redlock.ClassTimeout}} {
		by := map[string]string{"redlock.node": c.node, "error.type": c.class, "redlock.op": "acquire"}
		if n := sum(t, rm, redlockotel.MetricNodeErrors, by); n != 1 {
			t.Errorf("node errors %v: %d, want 1; events %+v", by, n, r.events.take())
		}
	}
	if n := sum(t, rm, redlockotel.MetricNodeErrors, nil); n != 2 {
		t.Errorf("node errors: %d, want 2", n)
	}
	if held := sum(t, rm, redlockotel.MetricLocksHeld, nil); held != 0 {
		t.Errorf("locks held after a failed acquire: %d", held)
	}
	spans := r.ended("redlock.acquire")
	if len(spans) != 1 {
		t.Fatalf("%d acquire spans", len(spans))
	}
	s := spans[0]
	if s.Status().Code != codes.Error || s.Status().Description == "" {
		t.Errorf("unavailable acquire span status: %+v", s.Status())
	}
	classes := map[string]string{}
	for _, ev := range s.Events() {
		node, _ := attr(ev.Attributes, redlockotel.AttrNode)
		class, _ := attr(ev.Attributes, redlockotel.AttrErrorType)
		classes[node] = class
	}
	if len(s.Events()) != 3 || classes[killed.Addr()] != redlock.ClassRefused || classes[paused.Addr()] != redlock.ClassTimeout {
		t.Errorf("span events: %+v", s.Events())
	}
}

// TestLostLockCounted: KeepAlive finds the lock's key gone; the renewal that proved it
// counts a lost lock and ends it, so locks held is back to zero, and the Release that
// follows does not count it again.
func TestLostLockCounted(t *testing.T) {
	r := newRig(t, 3, redlock.Options{})
	ctx := context.Background()
	lock, err := r.client.Acquire(ctx, "otel:lost", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	work, stop := lock.KeepAlive(ctx)
	defer stop()
	if held := sum(t, r.metrics(), redlockotel.MetricLocksHeld, nil); held != 1 {
		t.Fatalf("locks held: %d", held)
	}
	for _, a := range r.admin {
		if err := a.Del(ctx, "otel:lost").Err(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-work.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("KeepAlive did not notice the loss")
	}
	if !errors.Is(context.Cause(work), redlock.ErrLockLost) {
		t.Fatalf("cause: %v", context.Cause(work))
	}
	_ = lock.Release(ctx)
	rm := r.metrics()
	if lost := sum(t, rm, redlockotel.MetricLocksLost, map[string]string{"redlock.op": "extend"}); lost != 1 {
		t.Errorf("locks lost: %d, want 1", lost)
	}
	if held := sum(t, rm, redlockotel.MetricLocksHeld, nil); held != 0 {
		t.Errorf("locks held after the loss: %d", held)
	}
	by := map[string]string{"redlock.outcome": "lost", "redlock.renewal": "true"}
	if n, _ := count(t, rm, redlockotel.MetricExtendDuration, by); n != 1 {
		t.Errorf("lost renewals: %d", n)
	}
	var lostSpans int
	for _, s := range r.ended("redlock.extend") {
		if v, _ := attr(s.Attributes(), redlockotel.AttrLost); v == "true" {
			lostSpans++
			if s.Status().Code != codes.Error {
				t.Errorf("lost renewal's span status: %+v", s.Status())
			}
		}
	}
	if lostSpans != 1 {
		t.Errorf("%d extend spans marked lost", lostSpans)
	}
}

// TestSpansJoinCallerTrace: each step's span is a child of the caller's span, runs
// from the event's Start for its Duration, and has one event per node.
func TestSpansJoinCallerTrace(t *testing.T) {
	r := newRig(t, 3, redlock.Options{})
	ctx, caller := r.tp.Tracer("test").Start(context.Background(), "caller")
	lock, err := r.client.TryAcquire(ctx, "otel:s", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	caller.End()
	events := r.events.take()
	spans := r.spans.Ended()
	if len(spans) != 4 || len(events) != 3 {
		t.Fatalf("%d spans, %d events", len(spans), len(events))
	}
	for i, e := range events {
		s := spans[i]
		if s.Name() != "redlock."+e.Op.String() || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %d: %s %v for a %s", i, s.Name(), s.SpanKind(), e.Op)
		}
		if s.Parent().SpanID() != caller.SpanContext().SpanID() || s.SpanContext().TraceID() != caller.SpanContext().TraceID() {
			t.Errorf("%s: parent %v, trace %v; want the caller's %v", s.Name(), s.Parent().SpanID(), s.SpanContext().TraceID(), caller.SpanContext())
		}
		if !s.StartTime().Equal(e.Start) || !s.EndTime().Equal(e.Start.Add(e.Duration)) {
			t.Errorf("%s: %v to %v; event %v for %v", s.Name(), s.StartTime(), s.EndTime(), e.Start, e.Duration)
		}
		if s.Status().Code != codes.Unset {
			t.Errorf("%s: status %+v", s.Name(), s.Status())
		}
		if len(s.Events()) != len(e.Nodes) || len(e.Nodes) != 3 {
			t.Fatalf("%s: %d span events for %d nodes", s.Name(), len(s.Events()), len(e.Nodes))
		}
		for j, ev := range s.Events() {
			n := e.Nodes[j]
			node, _ := attr(ev.Attributes, redlockotel.AttrNode)
			result, _ := attr(ev.Attributes, redlockotel.AttrResult)
			if ev.Name != "redlock.node" || node != n.Node || node != r.servers[j].Addr() || result != n.Result.String() {
				t.Errorf("%s: span event %d: %s %v for %+v", s.Name(), j, ev.Name, ev.Attributes, n)
			}
			if n.Result != redlock.ResultPending && !ev.Time.Equal(e.Start.Add(n.At)) {
				t.Errorf("%s: node %d's event at %v, answered at %v", s.Name(), j, ev.Time, e.Start.Add(n.At))
			}
		}
	}
}

// TestKeysOnlyWithOption: no metric point or span carries the key by default; with
// WithKeys(true), the acquire duration, locks held and the spans do.
func TestKeysOnlyWithOption(t *testing.T) {
	names := []string{redlockotel.MetricAcquireDuration, redlockotel.MetricAcquireAttempts,
		redlockotel.MetricLocksHeld, redlockotel.MetricExtendDuration}
	for _, keys := range []bool{false, true} {
		r := newRig(t, 3, redlock.Options{}, redlockotel.WithKeys(keys))
		ctx := context.Background()
		lock, err := r.client.TryAcquire(ctx, "otel:k", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := lock.Extend(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		rm := r.metrics()
		for _, name := range names {
			sets := attrSets(t, rm, name)
			if len(sets) == 0 {
				t.Fatalf("%s has no points", name)
			}
			for _, set := range sets {
				if v, ok := set.Value(redlockotel.AttrKey); ok != keys || (keys && v.Emit() != "otel:k") {
					t.Errorf("keys %v: %s point %v", keys, name, set.ToSlice())
				}
			}
		}
		for _, s := range r.spans.Ended() {
			if v, ok := attr(s.Attributes(), redlockotel.AttrKey); ok != keys || (keys && v != "otel:k") {
				t.Errorf("keys %v: span %s attributes %v", keys, s.Name(), s.Attributes())
			}
		}
	}
}

// TestFenceRefusalsCounted: fencing counters moved on by another writer make nodes
// refuse the proposed token; the refusals are counted although the Acquire succeeds.
func TestFenceRefusalsCounted(t *testing.T) {
	r := newRig(t, 3, redlock.Options{Fencing: true})
	ctx := context.Background()
	lock, err := r.client.Acquire(ctx, "otel:f", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range r.admin[:2] {
		if err := a.Set(ctx, redlock.FenceKeys(a, "otel:f")[1], 100, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lock, err = r.client.TryAcquire(ctx, "otel:f", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(ctx)
	rm := r.metrics()
	if n := sum(t, rm, redlockotel.MetricFenceRefusals, nil); n < 2 {
		t.Errorf("fence refusals: %d, want at least 2", n)
	}
	if n := sum(t, rm, redlockotel.MetricNodeErrors, nil); n != 0 {
		t.Errorf("refusals counted as node errors: %d", n)
	}
	spans := r.ended("redlock.acquire")
	if fence, _ := attr(spans[len(spans)-1].Attributes(), redlockotel.AttrFence); fence != strconv.FormatUint(lock.Fence(), 10) {
		t.Errorf("span's fence %s, lock's %d", fence, lock.Fence())
	}
}
