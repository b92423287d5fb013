package redlockotel_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/redlockotel"
)

// TestPrometheusExposition: through the OpenTelemetry Prometheus exporter, a scrape of
// /metrics shows the redlock_ metrics of a Client's steps under Prometheus names.
func TestPrometheusExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(mp),
		redlockotel.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	servers := redistest.StartN(t, 3, redistest.Options{})
	client, err := redlock.New(clients(t, servers), redlock.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	lock, err := client.TryAcquire(ctx, "otel:p", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Node errors, for a counter in the scrape: with two nodes killed, the acquire
	// is decided only once both have failed, so both failures are in its event.
	servers[1].Kill()
	servers[2].Kill()
	if _, err := client.TryAcquire(ctx, "otel:p2", 10*time.Second); !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatal(err)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %v, %s", err, resp.Status)
	}
	text := string(body)
	for _, want := range []string{
		"# TYPE redlock_acquire_duration_seconds histogram",
		`redlock_acquire_duration_seconds_count{otel_scope_name="` + redlockotel.ScopeName,
		`redlock_outcome="ok"`,
		"# TYPE redlock_acquire_attempts histogram",
		"# TYPE redlock_extend_duration_seconds histogram",
		"# TYPE redlock_locks_held gauge",
		"redlock_locks_held{",
		"# TYPE redlock_node_errors_total counter",
		`redlock_outcome="unavailable"`,
		`redlock_node_errors_total{error_type="`,
		`redlock_node="` + servers[2].Addr() + `"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "redlock_locks_held{") && !strings.HasSuffix(line, " 0") {
			t.Errorf("locks held after release: %s", line)
		}
	}
}
