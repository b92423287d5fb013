package redlockotel_test

import (
	"context"
	"fmt"
	"time"

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
}
