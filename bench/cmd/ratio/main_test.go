package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

func TestReadPairsLibrariesPerWorkload(t *testing.T) {
	rows, err := read(&benchfmt.Files{Paths: []string{"testdata/two-runs.txt"}}, "redlock", "redsync")
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		workload, unit string
		better         int
		num, den       []float64
	}
	wants := []want{
		{"Uncontended/G=8/N=5", "ns/op", -1, []float64{100000, 100000}, []float64{200000, 200000}},
		{"Uncontended/G=8/N=5", "cycles/s", 1, []float64{12000, 8000}, []float64{5000, 5000}},
		{"Uncontended/G=8/N=5", "allocs/op", -1, []float64{100, 100}, []float64{150, 150}},
		{"HotKey/G=8/N=5", "ns/op", -1, []float64{1e6, 1e6}, []float64{1e6, 1e6}},
		{"HotKey/G=8/N=5", "handoffs/s", 1, []float64{2000, 1000}, []float64{20, 25}},
		{"HotKey/G=8/N=5", "wait-p99-ms", -1, []float64{4, 30}, []float64{1300, 1100}},
	}
	if len(rows) != len(wants) {
		t.Fatalf("got %d rows, want %d (redislock and the Scaling result without a redsync peer must be left out): %+v", len(rows), len(wants), rows)
	}
	for i, w := range wants {
		r := rows[i]
		if r.workload != w.workload || r.unit != w.unit || r.better != w.better ||
			!equal(r.num, w.num) || !equal(r.den, w.den) {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWriteShowsMediansRatiosRunsAndTargets(t *testing.T) {
	rows, err := read(&benchfmt.Files{Paths: []string{"testdata/two-runs.txt"}}, "redlock", "redsync")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	write(&buf, rows, "redlock", "redsync", true)
	out := buf.String()
	for _, line := range []string{
		"| workload | metric | better | redlock | redsync | redlock/redsync | per run | target |",
		// medians 10000 and 5000; runs 2.40 and 1.60; the 2.0× target is met by the medians
		"| Uncontended/G=8/N=5 | cycles/s | higher | 10000 | 5000 | 2.00× | 2.40× 1.60× | ≥ 2.0× met |",
		"| HotKey/G=8/N=5 | handoffs/s | higher | 1500 | 22.5 | 66.67× | 100.00× 40.00× | ≥ 100× MISSED |",
		"| HotKey/G=8/N=5 | wait-p99-ms | lower | 17 | 1200 | 0.01× | 0.00× 0.03× | ≤ 20 ms met |",
		"| Uncontended/G=8/N=5 | allocs/op | lower | 100 | 150 | 0.67× | 0.67× 0.67× | ≤ 1.0× met |",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("output lacks line\n%s\ngot:\n%s", line, out)
		}
	}
}

func TestMedianAndRatio(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if r := ratio(0, 0); r != 1 {
		t.Errorf("ratio(0, 0) = %v, want 1", r)
	}
	if r := ratio(1, 0); !math.IsNaN(r) {
		t.Errorf("ratio(1, 0) = %v, want NaN", r)
	}
	if s := fmtRatio(math.NaN()); s != "n/a" {
		t.Errorf("fmtRatio(NaN) = %q, want n/a", s)
	}
}
