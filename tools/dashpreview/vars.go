package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// window is the time range a panel is drawn for, with what Grafana derives its
// interval variables from: the panel's maximum data points (its width in pixels)
// and the data source's scrape interval (the lowest step Grafana will use).
type window struct {
	From, To       time.Time
	MaxDataPoints  int
	ScrapeInterval time.Duration
}

// niceSteps are the step lengths an interval is rounded to, as a dashboard tool
// picks steps a person can read: the raw range/points is rounded to the nearest.
var niceSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
	15 * time.Second, 20 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute,
	15 * time.Minute, 20 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 7 * 24 * time.Hour,
}

// roundStep rounds d to the nearest of niceSteps (splitting between neighbours at
// their midpoint); anything beyond the last is returned as it is.
func roundStep(d time.Duration) time.Duration {
	for i := 0; i+1 < len(niceSteps); i++ {
		if d < (niceSteps[i]+niceSteps[i+1])/2 {
			return niceSteps[i]
		}
	}
	return d
}

// intervals returns the query step ($__interval) and $__rate_interval for w, given a
// query's own minimum interval (zero: none; it replaces the scrape interval, as a
// query's "Min step" does in Grafana). The step is range/points rounded to a nice
// value, at least the minimum; the rate interval is max(step + min, 4 × min), the
// rule Grafana documents for $__rate_interval.
func intervals(w window, queryMin time.Duration) (step, rate time.Duration) {
	lowest := w.ScrapeInterval
	if queryMin > 0 {
		lowest = queryMin
	}
	points := w.MaxDataPoints
	if points <= 0 {
		points = 1000
	}
	step = roundStep(w.To.Sub(w.From) / time.Duration(points))
	if step < lowest {
		step = lowest
	}
	// Prometheus refuses more than 11,000 points per series.
	for w.To.Sub(w.From)/step > 11000 {
		step *= 2
	}
	rate = max(step+lowest, 4*lowest)
	return step, rate
}

// promDuration writes d the way PromQL reads it: "4s", "1m30s", "250ms".
func promDuration(d time.Duration) string {
	if d%time.Second != 0 || d == 0 {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	s := int64(d / time.Second)
	var b strings.Builder
	for _, u := range []struct {
		n    int64
		name string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if s >= u.n {
			fmt.Fprintf(&b, "%d%s", s/u.n, u.name)
			s %= u.n
		}
	}
	return b.String()
}

// grafanaVars returns the built-in variables a Prometheus query of a panel sees in
// window w, and the query's step. dsVars are the dashboard's data source variables,
// each set to the one Prometheus the preview queries.
func grafanaVars(w window, queryMin time.Duration, dsVars map[string]string) (map[string]string, time.Duration) {
	step, rate := intervals(w, queryMin)
	rangeS := int64(math.Round(w.To.Sub(w.From).Seconds()))
	vars := map[string]string{
		"__interval":         promDuration(step),
		"__interval_ms":      strconv.FormatInt(step.Milliseconds(), 10),
		"__rate_interval":    promDuration(rate),
		"__rate_interval_ms": strconv.FormatInt(rate.Milliseconds(), 10),
		"__range":            strconv.FormatInt(rangeS, 10) + "s",
		"__range_s":          strconv.FormatInt(rangeS, 10),
		"__range_ms":         strconv.FormatInt(w.To.Sub(w.From).Milliseconds(), 10),
	}
	for k, v := range dsVars {
		vars[k] = v
	}
	return vars, step
}

// varRef matches the three ways a Grafana query names a variable: $name, ${name}
// (with an optional :format) and the old [[name]].
var varRef = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)`)

// substitute replaces every known variable in s. Unknown names are left as they are
// (as Grafana leaves them, so "$1" in label_replace survives), except the built-in
// ones (a leading "__"): one of those the preview does not know would send Prometheus
// a query Grafana would not have sent, so it is an error.
func substitute(s string, vars map[string]string) (string, error) {
	var bad []string
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := varRef.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if v, ok := vars[name]; ok {
			return v
		}
		if strings.HasPrefix(name, "__") {
			bad = append(bad, m)
		}
		return m
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("unknown built-in variable %s", strings.Join(bad, ", "))
	}
	return out, nil
}

// dataSourceVars returns the dashboard's data source variables, each bound to the
// value "prometheus" (the one data source there is), or an error for a data source
// variable of another type: its queries could not run on Prometheus.
func dataSourceVars(d *dashboard) (map[string]string, error) {
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			if v.Query != "prometheus" {
				return nil, fmt.Errorf("data source variable $%s is of type %q, not prometheus", v.Name, v.Query)
			}
			vars[v.Name] = "prometheus"
		case "constant", "textbox", "custom", "query", "interval", "adhoc":
			return nil, fmt.Errorf("variable $%s of type %q: the preview substitutes only data source and built-in variables", v.Name, v.Type)
		}
	}
	return vars, nil
}

// checkDataSource fails for a panel or target whose data source is not Prometheus,
// directly or through a data source variable.
func checkDataSource(ref *dataSourceRef, dsVars map[string]string) error {
	if ref == nil {
		return nil
	}
	if ref.Type != "" && ref.Type != "prometheus" {
		return fmt.Errorf("data source of type %q, not prometheus", ref.Type)
	}
	for _, sub := range varRef.FindAllStringSubmatch(ref.UID, -1) {
		if _, ok := dsVars[sub[1]+sub[2]+sub[3]]; !ok {
			return fmt.Errorf("data source %q is not a data source variable of the dashboard", ref.UID)
		}
	}
	return nil
}
