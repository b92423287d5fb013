package redlockotel_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
)

// An Observer goes into redlock.Options.Observer; here it is handed two events by hand
// (a granted Acquire and its Release) to show what it records, without a server.
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	obs, err := redlockotel.New(redlockotel.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	// With servers: client, err := redlock.New(nodes, redlock.Options{Observer: obs})
	ctx := context.Background()
	start := time.Now()
	obs.Observe(ctx, redlock.Event{Op: redlock.OpAcquire, Key: "report", TTL: 10 * time.Second,
		Start: start, Duration: 2 * time.Millisecond, Attempts: 1})
	obs.Observe(ctx, redlock.Event{Op: redlock.OpRelease, Key: "report",
		Start: start.Add(time.Second), Duration: time.Millisecond, Ended: true})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			p := d.DataPoints[0]
			outcome, _ := p.Attributes.Value(redlockotel.AttrOutcome)
			fmt.Printf("%s (%s): %d value, outcome %s\n", m.Name, m.Unit, p.Count, outcome.AsString())
		case metricdata.Sum[int64]:
			fmt.Printf("%s (%s): %d\n", m.Name, m.Unit, d.DataPoints[0].Value)
		}
	}
	// Output:
	// redlock.acquire.duration (s): 1 value, outcome ok
	// redlock.locks.held ({lock}): 0
	// redlock.locks.lost ({lock}): 0
	// redlock.handoffs ({handoff}): 0
	// redlock.fence.refusals ({refusal}): 0
}

// The wiring docs/observability.md shows (TestDocShowsWiring keeps the two the same):
// metrics to Prometheus through the OpenTelemetry exporter, spans to the global tracer
// provider, log lines to a slog handler. It needs the nodes of the README's quick start.
func Example_wiring() {
	// Metrics: an OpenTelemetry meter provider whose reader is the Prometheus exporter,
	// registered on the default Prometheus registry, which promhttp.Handler serves.
	exporter, err := otelprom.New()
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	http.Handle("/metrics", promhttp.Handler())
	go http.ListenAndServe("127.0.0.1:9464", nil)

	// Spans go to the global tracer provider (otel.SetTracerProvider), as nothing else
	// is given; WithKeys(true) would add the lock keys to metrics and spans.
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	client, err := redlock.NewFromURLs([]string{
		"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003",
		"redis://127.0.0.1:7004", "redis://127.0.0.1:7005",
	}, redlock.Options{
		Observer: obs,
		Logger:   slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// Pass the request's context: each step's span becomes a child of its span.
	ctx := context.Background()
	lock, err := client.Acquire(ctx, "report:2026-12", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
}
