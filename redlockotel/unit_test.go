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
