package redlockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
)

// BenchmarkObserve: the Observer's own cost per event, metrics on an SDK provider with
// a ManualReader and spans off (a no-op tracer provider), for the events of one
// acquire-release cycle on three nodes and for an acquire that found nodes failing.
// The cost inside a Client is measured by BenchmarkObserver in bench/.
func BenchmarkObserve(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(mp), redlockotel.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	yes := []redlock.NodeReply{{Node: "127.0.0.1:7001", Result: redlock.ResultYes, At: time.Millisecond},
		{Node: "127.0.0.1:7002", Result: redlock.ResultYes, At: time.Millisecond},
		{Node: "127.0.0.1:7003", Result: redlock.ResultPending}}
	acquire := redlock.Event{Op: redlock.OpAcquire, Key: "k", TTL: 10 * time.Second, Start: start,
		Duration: time.Millisecond, Attempts: 1, Nodes: yes}
	release := redlock.Event{Op: redlock.OpRelease, Key: "k", TTL: 10 * time.Second, Start: start,
		Duration: time.Millisecond, Nodes: yes, Ended: true}
	failing := acquire
	failing.Outcome, failing.Err = redlock.OutcomeUnavailable, errors.New("unavailable")
	failing.Nodes = []redlock.NodeReply{{Node: "127.0.0.1:7001", Result: redlock.ResultYes, At: time.Millisecond},
		{Node: "127.0.0.1:7002", Result: redlock.ResultFailed, Class: redlock.ClassTimeout, At: 50 * time.Millisecond},
		{Node: "127.0.0.1:7003", Result: redlock.ResultFailed, Class: redlock.ClassRefused, At: time.Millisecond}}
	b.Run("cycle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obs.Observe(ctx, acquire)
			obs.Observe(ctx, release)
		}
	})
	b.Run("unavailable", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obs.Observe(ctx, failing)
		}
	})
}
