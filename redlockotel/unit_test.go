package redlockotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
)

// observeAll hands events to a new Observer and returns what its reader collects.
func observeAll(t *testing.T, events ...redlock.Event) metricdata.ResourceMetrics {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		obs.Observe(context.Background(), e)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// TestHandoffsCountedOnce: a handoff is counted once, on the Release that made it,
// not again on the waiter's Acquire; a Release that failed counts none.
func TestHandoffsCountedOnce(t *testing.T) {
	start := time.Now()
	rm := observeAll(t,
		redlock.Event{Op: redlock.OpAcquire, Key: "k", Start: start, Duration: time.Millisecond, Attempts: 1},
		redlock.Event{Op: redlock.OpRelease, Key: "k", Start: start, Handoff: true, Ended: true},
		redlock.Event{Op: redlock.OpAcquire, Key: "k", Start: start, Attempts: 2, Handoff: true},
		redlock.Event{Op: redlock.OpRelease, Key: "k", Start: start, Handoff: true, Outcome: redlock.OutcomeUnavailable},
	)
	if n := sum(t, rm, redlockotel.MetricHandoffs, nil); n != 1 {
		t.Errorf("handoffs: %d, want 1", n)
	}
	if n := sum(t, rm, redlockotel.MetricLocksHeld, nil); n != 1 {
		t.Errorf("locks held: %d, want 1 (the handed-over lock)", n)
	}
	if n, total := count(t, rm, redlockotel.MetricAcquireAttempts, map[string]string{"redlock.outcome": "ok"}); n != 2 || total != 3 {
		t.Errorf("attempts: %d values, sum %g", n, total)
	}
}

// TestKeepAliveLossCounted: a KeepAlive that gave up without an Extend proving the loss
// (OpKeepAlive, Ended and Lost) counts a lost lock under op keepalive and ends it.
func TestKeepAliveLossCounted(t *testing.T) {
	rm := observeAll(t,
		redlock.Event{Op: redlock.OpAcquire, Key: "k", Start: time.Now(), Attempts: 1},
		redlock.Event{Op: redlock.OpKeepAlive, Key: "k", Start: time.Now(), Outcome: redlock.OutcomeLost,
			Renewal: true, Ended: true, Lost: true},
	)
	if n := sum(t, rm, redlockotel.MetricLocksLost, map[string]string{"redlock.op": "keepalive"}); n != 1 {
		t.Errorf("locks lost by keepalive: %d", n)
	}
	if n := sum(t, rm, redlockotel.MetricLocksHeld, nil); n != 0 {
		t.Errorf("locks held: %d", n)
	}
}

// TestDefaultsAreTheGlobals: without provider options, New records on the global meter
// and tracer providers as they are when it is called.
func TestDefaultsAreTheGlobals(t *testing.T) {
	prevMP, prevTP := otel.GetMeterProvider(), otel.GetTracerProvider()
	defer func() {
		otel.SetMeterProvider(prevMP)
		otel.SetTracerProvider(prevTP)
	}()
	reader, spans := sdkmetric.NewManualReader(), tracetest.NewSpanRecorder()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(nil))
	if err != nil {
		t.Fatal(err)
	}
	obs.Observe(context.Background(), redlock.Event{Op: redlock.OpAcquire, Start: time.Now(), Attempts: 1})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if n := sum(t, rm, redlockotel.MetricLocksHeld, nil); n != 1 {
		t.Errorf("locks held on the global meter provider: %d", n)
	}
	if got := spans.Ended(); len(got) != 1 || got[0].Name() != "redlock.acquire" {
		t.Errorf("spans on the global tracer provider: %v", got)
	}
}

// TestCycleAllocatesNothing: with metrics on an SDK provider and spans off (a no-op
// tracer provider), the events of an acquire-release cycle cost no allocation, and the
// metrics are still recorded; with a recording tracer provider the spans still come.
func TestCycleAllocatesNothing(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		redlockotel.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, start := context.Background(), time.Now()
	nodes := []redlock.NodeReply{{Node: "a", Result: redlock.ResultYes}, {Node: "b", Result: redlock.ResultYes}}
	acquire := redlock.Event{Op: redlock.OpAcquire, Key: "k", TTL: time.Second, Start: start, Attempts: 1, Nodes: nodes}
	release := redlock.Event{Op: redlock.OpRelease, Key: "k", TTL: time.Second, Start: start, Nodes: nodes, Ended: true}
	if n := testing.AllocsPerRun(100, func() {
		obs.Observe(ctx, acquire)
		obs.Observe(ctx, release)
	}); n != 0 {
		t.Errorf("%v allocations per cycle, want 0", n)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if got := histogramCount(rm, "redlock.acquire.duration"); got != 101 {
		t.Errorf("acquire.duration counted %d events, want 101 (AllocsPerRun runs once more)", got)
	}

	rec := tracetest.NewSpanRecorder()
	traced, err := redlockotel.New(redlockotel.WithMeterProvider(sdkmetric.NewMeterProvider()),
		redlockotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	if err != nil {
		t.Fatal(err)
	}
	traced.Observe(ctx, acquire)
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans with a recording provider, want 1", n)
	}
}

// histogramCount returns the number of values recorded in the histogram name.
func histogramCount(rm metricdata.ResourceMetrics, name string) uint64 {
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, dp := range h.DataPoints {
					n += dp.Count
				}
			}
		}
	}
	return n
}

// TestAlertCountersStartAtZero: before any event, the counters that alerts watch
// (locks lost by op, handoffs, fencing refusals) already have a point at zero, so the
// first lost lock is an increase from 0 to 1 that increase() sees, not a new series.
func TestAlertCountersStartAtZero(t *testing.T) {
	rm := observeAll(t)
	points := func(name string) int {
		m := find(rm, name)
		data, ok := m.Data.(metricdata.Sum[int64])
		if !ok {
			return 0
		}
		for _, p := range data.DataPoints {
			if p.Value != 0 {
				t.Errorf("%s starts at %d", name, p.Value)
			}
		}
		return len(data.DataPoints)
	}
	if n := points(redlockotel.MetricLocksLost); n != 4 {
		t.Errorf("locks lost: %d points at zero, want one per op (4)", n)
	}
	for _, name := range []string{redlockotel.MetricHandoffs, redlockotel.MetricFenceRefusals} {
		if n := points(name); n != 1 {
			t.Errorf("%s: %d points at zero, want 1", name, n)
		}
	}
}
