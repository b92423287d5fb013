package redlockotel_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
)

// scrape hands events to an Observer whose meter provider feeds the Prometheus
// exporter, and returns what an HTTP scrape of the exporter's registry shows.
func scrape(t *testing.T, events ...redlock.Event) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(mp), redlockotel.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		obs.Observe(context.Background(), e)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// everyInstrument are events that record on every instrument at least once.
func everyInstrument() []redlock.Event {
	start := time.Now()
	failed := []redlock.NodeReply{{Node: "127.0.0.1:7001", Result: redlock.ResultFailed, Class: redlock.ClassTimeout}}
	return []redlock.Event{
		{Op: redlock.OpAcquire, Start: start, Duration: time.Millisecond, Attempts: 2, FenceRefusals: 1, Nodes: failed},
		{Op: redlock.OpExtend, Start: start, Duration: time.Millisecond, Renewal: true, Outcome: redlock.OutcomeLost, Ended: true, Lost: true},
		{Op: redlock.OpAcquire, Start: start, Duration: time.Millisecond, Attempts: 1},
		{Op: redlock.OpRelease, Start: start, Duration: time.Millisecond, Handoff: true, Ended: true},
	}
}

// TestDashboardUsesExportedNames: every metric and label that a query of the Grafana
// dashboard (docs/grafana-redlock.json) names appears in a Prometheus scrape of the
// exporter, so a renamed instrument or attribute cannot leave the dashboard blank.
func TestDashboardUsesExportedNames(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-redlock.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, everyInstrument()...)
	metricName := regexp.MustCompile(`redlock_[a-z_]+`)
	labelPart := regexp.MustCompile(`by \([^)]*\)|\{[^}]*\}`) // where label names are
	labelName := regexp.MustCompile(`by \(([a-z_, ]+)\)|([a-z_]+)(?:=|!=|=~)"`)
	queries := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			queries++
			for _, name := range metricName.FindAllString(labelPart.ReplaceAllString(target.Expr, ""), -1) {
				if !strings.Contains(text, "\n"+name+"{") {
					t.Errorf("panel %q: no %s in the scrape", p.Title, name)
				}
			}
			for _, m := range labelName.FindAllStringSubmatch(target.Expr, -1) {
				for _, l := range strings.Split(m[1]+","+m[2], ",") {
					if l = strings.TrimSpace(l); l != "" && l != "le" && !strings.Contains(text, ","+l+`="`) && !strings.Contains(text, "{"+l+`="`) {
						t.Errorf("panel %q: no label %s in the scrape", p.Title, l)
					}
				}
			}
		}
	}
	if queries < 10 {
		t.Fatalf("%d queries in the dashboard", queries)
	}
}
