// Command ratio reads `go test -bench` output of the bench module (one or more
// runs, from files or standard input) and prints, per workload and metric, the
// median of each library and the ratio of two of them (redlock/redsync by
// default), with the ratio of each run beside it and the targets. The
// multi-Client workloads (Clients/...) then get a second table with every library
// side by side, the ratios to redsync and to bsm/redislock on one node, and the
// targets of issue #13 marked met or MISSED.
//
// Usage:
//
//	go run ./cmd/ratio [-num redlock] [-den redsync] [-md] [file ...]
//
// A workload is a benchmark name without its lib=NAME part and GOMAXPROCS suffix,
// such as Uncontended/G=8/N=5. Run i of a library is its i-th result for that
// workload in input order, so pass the runs in the order they were made.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
)

func main() {
	num := flag.String("num", "redlock", "library in the numerator")
	den := flag.String("den", "redsync", "library in the denominator")
	md := flag.Bool("md", false, "print a Markdown table")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: ratio [flags] [file ...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	files := &benchfmt.Files{Paths: flag.Args(), AllowStdin: true}
	all, units, err := collect(files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratio:", err)
		os.Exit(1)
	}
	rows := pair(all, units, *num, *den)
	cw := clientWorkloads(all, units)
	if len(rows) == 0 && len(cw) == 0 {
		fmt.Fprintf(os.Stderr, "ratio: no workload has results for both lib=%s and lib=%s\n", *num, *den)
		os.Exit(1)
	}
	if len(rows) > 0 {
		write(os.Stdout, rows, *num, *den, *md)
	}
	if len(cw) > 0 {
		fmt.Println()
		writeClients(os.Stdout, cw, *md)
	}
}

// row is one workload and metric, with the values of both libraries in run order.
type row struct {
	workload, unit string
	better         int // +1 higher is better, −1 lower, 0 unknown
	num, den       []float64
}

// result is one value of one benchmark result.
type result struct {
	workload, lib, unit string
	value               float64
}

// collect reads every value of every result, in input order, and the units'
// metadata (which direction is better).
func collect(r *benchfmt.Files) ([]result, benchfmt.UnitMetadataMap, error) {
	var all []result
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue // a syntax error in a line that is not ours; benchfmt skips it too
		}
		workload, lib := split(res.Name)
		for _, v := range res.Values {
			unit, value := v.Unit, v.Value
			if v.OrigUnit != "" {
				unit, value = v.OrigUnit, v.OrigValue
			}
			all = append(all, result{workload, lib, unit, value})
		}
	}
	if err := r.Err(); err != nil {
		return nil, nil, err
	}
	return all, benchfmt.UnitMetadataMap(r.Units()), nil
}

// read collects the rows for which both libraries have results, in the order the
// workloads and metrics first appear.
func read(r *benchfmt.Files, num, den string) ([]row, error) {
	all, units, err := collect(r)
	if err != nil {
		return nil, err
	}
	return pair(all, units, num, den), nil
}

// pair returns the rows of all for which both num and den have results.
func pair(all []result, units benchfmt.UnitMetadataMap, num, den string) []row {
	type key struct{ workload, unit string }
	index := map[key]int{}
	var rows []row
	for _, res := range all {
		if res.lib != num && res.lib != den {
			continue
		}
		k := key{res.workload, res.unit}
		i, seen := index[k]
		if !seen {
			i = len(rows)
			index[k] = i
			rows = append(rows, row{workload: res.workload, unit: res.unit})
		}
		if res.lib == num {
			rows[i].num = append(rows[i].num, res.value)
		} else {
			rows[i].den = append(rows[i].den, res.value)
		}
	}
	both := rows[:0]
	for _, rw := range rows {
		if len(rw.num) > 0 && len(rw.den) > 0 {
			rw.better = units.GetBetter(rw.unit)
			both = append(both, rw)
		}
	}
	return both
}

// split returns a benchmark name without "Benchmark", its lib=NAME part and its
// GOMAXPROCS suffix, and the library's name.
func split(name benchfmt.Name) (workload, lib string) {
	base, parts := name.Parts()
	var b strings.Builder
	b.WriteString(strings.TrimPrefix(string(base), "Benchmark"))
	for _, p := range parts {
		s := string(p)
		switch {
		case strings.HasPrefix(s, "/lib="):
			lib = strings.TrimPrefix(s, "/lib=")
		case strings.HasPrefix(s, "-"): // GOMAXPROCS
		default:
			b.WriteString(s)
		}
	}
	return b.String(), lib
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio returns a/b, or NaN when b is 0 (and a is not).
func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return math.NaN()
	}
	return a / b
}

// target is a goal of issue #6 (or #13) for one workload and metric, on the ratio of
// the two libraries of the table.
type target struct {
	workload, unit string
	text           string
	met            func(num, den float64) bool
}

var targets = []target{
	{"Uncontended/G=8/N=5", "cycles/s", "≥ 2.0×", func(n, d float64) bool { return n >= 2*d }},
	{"Uncontended/G=1/N=5", "cycles/s", "≥ 1.3×", func(n, d float64) bool { return n >= 1.3*d }},
	{"HotKey/G=8/N=5", "handoffs/s", "≥ 100×", func(n, d float64) bool { return n >= 100*d }},
	{"HotKey/G=8/N=5", "wait-p99-ms", "≤ 20 ms", func(n, _ float64) bool { return n <= 20 }},
	{"Uncontended/G=1/N=5", "allocs/op", "≤ 1.0×", func(n, d float64) bool { return n <= d }},
	{"Uncontended/G=8/N=5", "allocs/op", "≤ 1.0×", func(n, d float64) bool { return n <= d }},
	{"Clients/hot/K=8/N=5", "handoffs/s", "≥ 50× (#13)", func(n, d float64) bool { return n >= 50*d }},
}

// verdict returns the target for the row, if any, and whether the medians meet it.
func verdict(rw row, num, den float64) string {
	for _, t := range targets {
		if t.workload == rw.workload && t.unit == rw.unit {
			if t.met(num, den) {
				return t.text + " met"
			}
			return t.text + " MISSED"
		}
	}
	return ""
}

// write prints the table, as aligned text or Markdown.
func write(w io.Writer, rows []row, num, den string, md bool) {
	header := []string{"workload", "metric", "better", num, den, num + "/" + den, "per run", "target"}
	lines := [][]string{header}
	for _, rw := range rows {
		n, d := median(rw.num), median(rw.den)
		var runs []string
		for i := range min(len(rw.num), len(rw.den)) {
			runs = append(runs, fmtRatio(ratio(rw.num[i], rw.den[i])))
		}
		lines = append(lines, []string{
			rw.workload, rw.unit, betterText(rw.better),
			fmtValue(n), fmtValue(d), fmtRatio(ratio(n, d)),
			strings.Join(runs, " "), verdict(rw, n, d),
		})
	}
	printTable(w, lines, md)
}

// printTable prints lines, the first of them the header, as aligned text or Markdown.
func printTable(w io.Writer, lines [][]string, md bool) {
	if md {
		for i, l := range lines {
			fmt.Fprintf(w, "| %s |\n", strings.Join(l, " | "))
			if i == 0 {
				fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(l)))
			}
		}
		return
	}
	widths := make([]int, len(lines[0]))
	for _, l := range lines {
		for i, c := range l {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, l := range lines {
		var b strings.Builder
		for i, c := range l {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if i < len(l)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(c))))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func betterText(b int) string {
	switch b {
	case 1:
		return "higher"
	case -1:
		return "lower"
	}
	return "?"
}

// fmtValue prints whole numbers as such and others with about four significant
// digits, without exponents.
func fmtValue(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 1000 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}

func fmtRatio(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", r)
}
