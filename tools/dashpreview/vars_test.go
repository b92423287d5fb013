package main

import (
	"strings"
	"testing"
	"time"
)

func TestIntervals(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name       string
		span       time.Duration
		points     int
		scrape     time.Duration
		queryMin   time.Duration
		step, rate time.Duration
	}{
		// 90 s over 680 px is 0.13 s a point: the scrape interval is the floor.
		{"short window, 1s scrapes", 90 * time.Second, 680, time.Second, 0, time.Second, 4 * time.Second},
		// 1 h over 1000 px is 3.6 s, rounded to 5 s, raised to the 15 s scrape interval.
		{"hour, 15s scrapes", time.Hour, 1000, 15 * time.Second, 0, 15 * time.Second, time.Minute},
		// 6 h over 700 px is 30.9 s: 30 s; rate = max(30 s + 15 s, 4 × 15 s) = 60 s.
		{"six hours", 6 * time.Hour, 700, 15 * time.Second, 0, 30 * time.Second, time.Minute},
		// 24 h over 500 px is 172.8 s: 2 m; rate = 2 m + 15 s.
		{"a day", 24 * time.Hour, 500, 15 * time.Second, 0, 2 * time.Minute, 2*time.Minute + 15*time.Second},
		// A query's own min step replaces the scrape interval.
		{"query min step", 90 * time.Second, 680, time.Second, 10 * time.Second, 10 * time.Second, 40 * time.Second},
	}
	for _, c := range cases {
		w := window{From: t0, To: t0.Add(c.span), MaxDataPoints: c.points, ScrapeInterval: c.scrape}
		step, rate := intervals(w, c.queryMin)
		if step != c.step || rate != c.rate {
			t.Errorf("%s: step %v, rate %v; want %v, %v", c.name, step, rate, c.step, c.rate)
		}
	}
}

func TestPromDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		4 * time.Second:                  "4s",
		time.Minute:                      "1m",
		time.Minute + 30*time.Second:     "1m30s",
		2*time.Hour + 15*time.Second:     "2h15s",
		250 * time.Millisecond:           "250ms",
		1500 * time.Millisecond:          "1500ms",
		26*time.Hour + 1*time.Minute:     "1d2h1m",
		time.Duration(0):                 "0ms",
		90*time.Second + time.Nanosecond: "90000ms",
	} {
		if got := promDuration(d); got != want {
			t.Errorf("promDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestGrafanaVarsAndSubstitute(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := window{From: t0, To: t0.Add(95*time.Second + 400*time.Millisecond), MaxDataPoints: 680, ScrapeInterval: time.Second}
	vars, step := grafanaVars(w, 0, map[string]string{"datasource": "prometheus"})
	if step != time.Second {
		t.Fatalf("step %v, want 1s", step)
	}
	cases := map[string]string{
		`rate(x[$__rate_interval])`:                                        `rate(x[4s])`,
		`increase(x[$__range]) or vector(0)`:                               `increase(x[95s]) or vector(0)`,
		`rate(x[${__interval}]) + rate(y[[[__interval]]])`:                 `rate(x[1s]) + rate(y[1s])`,
		`x / $__range_s * $__range_ms / $__interval_ms`:                    `x / 95 * 95400 / 1000`,
		`up{ds="${datasource}", d2="$datasource", d3="${datasource:raw}"}`: `up{ds="prometheus", d2="prometheus", d3="prometheus"}`,
		// Not variables of the dashboard: left alone, as Grafana leaves them.
		`label_replace(up, "a", "$1", "job", "(.*)") and x{y=~"a$"}`: `label_replace(up, "a", "$1", "job", "(.*)") and x{y=~"a$"}`,
	}
	for in, want := range cases {
		got, err := substitute(in, vars)
		if err != nil || got != want {
			t.Errorf("substitute(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := substitute(`rate(x[$__rate_intervall])`, vars); err == nil || !strings.Contains(err.Error(), "$__rate_intervall") {
		t.Errorf("an unknown built-in variable: err = %v, want one naming it", err)
	}
}

func TestDataSourceVars(t *testing.T) {
	d := &dashboard{}
	d.Templating.List = []templateVar{{Name: "ds", Type: "datasource", Query: "prometheus"}}
	vars, err := dataSourceVars(d)
	if err != nil || vars["ds"] != "prometheus" {
		t.Fatalf("vars %v, err %v", vars, err)
	}
	if err := checkDataSource(&dataSourceRef{Type: "prometheus", UID: "${ds}"}, vars); err != nil {
		t.Errorf("${ds}: %v", err)
	}
	if err := checkDataSource(&dataSourceRef{Type: "prometheus", UID: "${other}"}, vars); err == nil {
		t.Error("a data source through an undefined variable passed")
	}
	if err := checkDataSource(&dataSourceRef{Type: "loki", UID: "x"}, vars); err == nil {
		t.Error("a loki data source passed")
	}
	d.Templating.List = append(d.Templating.List, templateVar{Name: "job", Type: "query"})
	if _, err := dataSourceVars(d); err == nil || !strings.Contains(err.Error(), "$job") {
		t.Errorf("a query variable: err = %v, want one naming it", err)
	}
	d.Templating.List = []templateVar{{Name: "ds", Type: "datasource", Query: "influxdb"}}
	if _, err := dataSourceVars(d); err == nil {
		t.Error("an influxdb data source variable passed")
	}
}
