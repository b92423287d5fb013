package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
)

// addMetricsFlag registers --metrics-addr on fs (exec, demo and bench), stored in p.
func addMetricsFlag(fs *flagSet, p *string) {
	fs.StringVar(p, "metrics-addr", "", "serve the lock steps' Prometheus metrics on http://`HOST:PORT`/metrics while\nthe command runs (redlockotel's instruments; port 0 picks a free port and prints it on stderr)")
}

// metricsServer serves /metrics for --metrics-addr: the redlockotel instruments of the
// subcommand's Clients, through an OpenTelemetry meter provider whose reader is the
// Prometheus exporter, on a Prometheus registry of its own (not the global default).
type metricsServer struct {
	obs  *redlockotel.Observer
	mp   *sdkmetric.MeterProvider
	srv  *http.Server
	done chan struct{} // closed once Serve has returned
}

// startMetrics listens on addr and serves /metrics until close. With addr empty it
// returns nil, and nothing listens. A listen error is a usage error: the subcommand
// reports it before it touches a node. When the port was 0, the address bound is
// printed on stderr, so that a scraper can find it.
func startMetrics(e *env, name, addr string) (*metricsServer, error) {
	if addr == "" {
		return nil, nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("--metrics-addr %q: want HOST:PORT: %v", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usagef("--metrics-addr %q: %v", addr, err)
	}
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	// Spans are not served: a noop tracer provider keeps the observer off the globals.
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(mp),
		redlockotel.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		_ = ln.Close()
		_ = mp.Shutdown(context.Background())
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{obs: obs, mp: mp, done: make(chan struct{}), srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// The HTTP server's own complaints (a scraper that hung up) would land in the
		// stderr that exec shares with its command.
		ErrorLog: log.New(io.Discard, "", 0),
	}}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	if port == "" || port == "0" {
		fmt.Fprintf(e.errw(), "redlock %s: serving metrics on http://%s/metrics\n", name, ln.Addr())
	}
	return m, nil
}

// observer returns what goes into the Clients' Options.Observer: nil (no observer at
// all, not a typed nil) without --metrics-addr.
func (m *metricsServer) observer() redlock.Observer {
	if m == nil {
		return nil
	}
	return m.obs
}

// close stops serving: it closes the listener, lets a scrape in progress finish (for
// a second at most) and waits for the server's goroutine, then shuts the meter
// provider down. It does nothing on nil.
func (m *metricsServer) close() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if m.srv.Shutdown(ctx) != nil {
		_ = m.srv.Close()
	}
	<-m.done
	_ = m.mp.Shutdown(context.Background())
}
