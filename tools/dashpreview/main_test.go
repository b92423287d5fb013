package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// fakeProm stands in for Prometheus's HTTP API: it records each query it gets and
// answers with reply(path, query).
type fakeProm struct {
	mu      sync.Mutex
	queries []string // "path query"
	reply   func(path, query string) (int, string)
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// As Prometheus: the status endpoints take GET only, the queries GET or POST.
	if r.URL.Path == "/api/v1/status/buildinfo" {
		if r.Method != http.MethodGet {
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		fmt.Fprint(w, `{"status":"success","data":{"version":"9.9.9-fake"}}`)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.Path+" "+q)
	f.mu.Unlock()
	code, body := f.reply(r.URL.Path, q)
	w.WriteHeader(code)
	fmt.Fprint(w, body)
}

// okReply answers every query with one series: a matrix of three points for a range
// query, a vector for an instant one.
func okReply(path, query string) (int, string) {
	if path == "/api/v1/query" {
		return 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1800000090,"0.25"]}]}}`
	}
	return 200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"redlock_outcome":"ok","redlock_node":"127.0.0.1:1","error_type":"refused","redlock_renewal":"true","redlock_op":"extend"},
		"values":[[1800000000,"1"],[1800000001,"NaN"],[1800000002,"3"]]}]}}`
}

// runWith runs the command against a fake Prometheus answering with reply, on the
// project's dashboard, and returns the exit code, stderr and the page.
func runWith(t *testing.T, reply func(path, query string) (int, string), extra ...string) (int, string, string, *fakeProm) {
	t.Helper()
	fp := &fakeProm{reply: reply}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "page.html")
	args := append([]string{"-dashboard", "../../docs/grafana-redlock.json", "-prometheus", srv.URL,
		"-from", "1800000000", "-to", "1800000090", "-scrape-interval", "1s", "-out", out}, extra...)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	page, err := os.ReadFile(out)
	if err != nil && code != 2 {
		t.Fatalf("no page written (exit %d): %v; stderr:\n%s", code, err, stderr.String())
	}
	return code, stderr.String(), string(page), fp
}

func TestRunDrawsEveryPanel(t *testing.T) {
	code, stderr, page, fp := runWith(t, okReply)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	want := "rendered from ../../docs/grafana-redlock.json by tools/dashpreview with Prometheus 9.9.9-fake evaluating every query; not Grafana"
	if !strings.Contains(page, want) {
		t.Errorf("the page lacks the header %q", want)
	}
	d, err := loadDashboard("../../docs/grafana-redlock.json")
	if err != nil {
		t.Fatal(err)
	}
	instant, ranged := 0, 0
	for _, p := range d.Panels {
		if !strings.Contains(page, `id="panel-`+fmt.Sprint(p.ID)+`"`) {
			t.Errorf("panel %q missing from the page", p.Title)
		}
		for range p.Targets {
			if p.Type == "stat" {
				instant++
			} else {
				ranged++
			}
		}
	}
	var gotInstant, gotRange int
	for _, q := range fp.queries {
		if strings.Contains(q, "$") {
			t.Errorf("a query sent with a variable left in it: %s", q)
		}
		switch {
		case strings.HasPrefix(q, "/api/v1/query_range "):
			gotRange++
		case strings.HasPrefix(q, "/api/v1/query "):
			gotInstant++
		}
	}
	if gotInstant != instant || gotRange != ranged {
		t.Errorf("sent %d instant and %d range queries, want %d and %d", gotInstant, gotRange, instant, ranged)
	}
	// A legend from legendFormat, with the unit of the panel.
	for _, s := range []string{"refused", "renewal=true", "lost by extend", "250 ms", "0.25 req/s"} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	if strings.Contains(page, "<script") {
		t.Error("the page has a script")
	}
}

func TestRunFailsOnErroringQuery(t *testing.T) {
	broken := func(path, query string) (int, string) {
		if strings.Contains(query, "redlock_extend_duration_seconds_bucket") {
			return 400, `{"status":"error","errorType":"bad_data","error":"1:12: parse error: unexpected thing"}`
		}
		return okReply(path, query)
	}
	code, stderr, page, _ := runWith(t, broken)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	re := regexp.MustCompile(`FAIL: panel "Extend latency p99" \(id 10\) query A "histogram_quantile\(0.99, .*redlock_extend_duration_seconds_bucket\[4s\].*": prometheus: bad_data: 1:12: parse error`)
	if !re.MatchString(stderr) {
		t.Errorf("stderr does not name the panel, query and error:\n%s", stderr)
	}
	if n := strings.Count(stderr, "FAIL:"); n != 1 {
		t.Errorf("%d failures reported, want 1:\n%s", n, stderr)
	}
	if !strings.Contains(page, "query A failed: prometheus: bad_data") {
		t.Error("the page does not show the failure in the panel")
	}
}

func TestRunFailsOnNoData(t *testing.T) {
	emptyOrNaN := func(path, query string) (int, string) {
		switch {
		case strings.Contains(query, "redlock_handoffs_total"):
			return 200, `{"status":"success","data":{"resultType":"matrix","result":[]}}`
		case strings.Contains(query, "histogram_quantile(0.5,"):
			return 200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1800000000,"NaN"]]}]}}`
		}
		return okReply(path, query)
	}
	code, stderr, _, _ := runWith(t, emptyOrNaN)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		`panel "Hand-overs and fencing refusals" (id 12) query A "sum(rate(redlock_handoffs_total[4s]))": returned no series`,
		`panel "Acquire latency (ok)" (id 6) query A "histogram_quantile(0.5,`,
		`returned only NaN`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// -optional lets exactly the named queries come back empty.
	code, stderr, page, _ := runWith(t, emptyOrNaN, "-optional", `^(Hand-overs and fencing refusals/A|Acquire latency \(ok\)/A)$`)
	if code != 0 {
		t.Fatalf("with -optional: exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(page, "no data (allowed") {
		t.Error("the page does not say which queries returned no data")
	}
}

// TestRunFailsOnLegendWithoutLabel: a query that lost the label its legendFormat
// names (a "by" clause with a wrong label) still has data, but a blank legend.
func TestRunFailsOnLegendWithoutLabel(t *testing.T) {
	lostLabel := func(path, query string) (int, string) {
		if strings.Contains(query, "sum by (redlock_node, error_type)") {
			return 200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"error_type":"refused"},"values":[[1800000000,"1"]]}]}}`
		}
		return okReply(path, query)
	}
	code, stderr, _, _ := runWith(t, lostLabel)
	want := `panel "Node errors by node and class" (id 7) query A "sum by (redlock_node, error_type) (rate(redlock_node_errors_total[4s]))": legendFormat names redlock_node, which no series has`
	if code != 1 || !strings.Contains(stderr, want) || strings.Count(stderr, "FAIL:") != 1 {
		t.Errorf("exit %d, stderr:\n%s\nwant exactly: %s", code, stderr, want)
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-from", "100", "-to", "50"},
		{"-to", "50"},
		{"-from", "yesterday"},
		{"-from", "1", "-optional", "("},
		{"-from", "1", "stray"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	// A server that reports no version needs -prometheus-version.
	noVersion := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"success","data":{"version":""}}`)
	}))
	defer noVersion.Close()
	var so, se bytes.Buffer
	args := []string{"-dashboard", "../../docs/grafana-redlock.json", "-prometheus", noVersion.URL, "-from", "1", "-out", filepath.Join(t.TempDir(), "x.html")}
	if code := run(context.Background(), args, &so, &se); code != 2 || !strings.Contains(se.String(), "-prometheus-version") {
		t.Errorf("no version: exit %d, stderr %q", code, se.String())
	}
	// Prometheus not there: exit 2, before any page.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	var stdout, stderr bytes.Buffer
	args = []string{"-dashboard", "../../docs/grafana-redlock.json", "-prometheus", srv.URL, "-from", "1", "-out", filepath.Join(t.TempDir(), "x.html")}
	if code := run(context.Background(), args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "version") {
		t.Errorf("no Prometheus: exit %d, stderr %q", code, stderr.String())
	}
}
