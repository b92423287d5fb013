package main

import (
	"math"
	"strconv"
	"strings"
)

// formatValue writes v in the panel's unit, the Grafana unit ids the dashboard uses:
// "s" (seconds, shown as µs, ms, s, m or h), "ms", "reqps" (req/s), "percent",
// "percentunit", "none" and "short" (plain numbers, k and M for large ones). Any
// other unit id is written after the number as it is.
func formatValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	switch unit {
	case "s":
		return formatSeconds(v)
	case "ms":
		return formatSeconds(v / 1000)
	case "reqps":
		return shortNumber(v) + " req/s"
	case "percent":
		return shortNumber(v) + "%"
	case "percentunit":
		return shortNumber(v*100) + "%"
	case "", "none", "short":
		return shortNumber(v)
	}
	return shortNumber(v) + " " + unit
}

// formatSeconds writes a duration in seconds with the unit that reads best.
func formatSeconds(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0 s"
	case a < 1e-3:
		return trimNumber(v*1e6) + " µs"
	case a < 1:
		return trimNumber(v*1e3) + " ms"
	case a < 60:
		return trimNumber(v) + " s"
	case a < 3600:
		return trimNumber(v/60) + " min"
	}
	return trimNumber(v/3600) + " hour"
}

// shortNumber writes v with three significant digits, k, M or G for large values.
func shortNumber(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trimNumber(v/1e9) + " G"
	case a >= 1e6:
		return trimNumber(v/1e6) + " M"
	case a >= 1e4:
		return trimNumber(v/1e3) + " k"
	}
	return trimNumber(v)
}

// trimNumber writes v with up to three significant digits (more before the point
// when it has them), without trailing zeros.
func trimNumber(v float64) string {
	if v == 0 {
		return "0"
	}
	decimals := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	decimals = max(decimals, 0)
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// legendName is a series' name in the legend: legendFormat with each {{label}}
// replaced by the series' value of it (missing labels become empty); without a
// legendFormat, the label set as {a="b", ...}, or the query when it has no labels.
func legendName(format string, labels map[string]string, expr string) string {
	if format != "" {
		var b strings.Builder
		rest := format
		for {
			i := strings.Index(rest, "{{")
			j := strings.Index(rest, "}}")
			if i < 0 || j < i {
				b.WriteString(rest)
				return strings.TrimSpace(b.String())
			}
			b.WriteString(rest[:i])
			b.WriteString(labels[strings.TrimSpace(rest[i+2:j])])
			rest = rest[j+2:]
		}
	}
	if len(labels) == 0 {
		return expr
	}
	keys := sortedKeys(labels)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(labels[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
