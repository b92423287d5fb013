package main

import (
	"fmt"
	"io"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// The multi-Client workloads (BenchmarkClients, named Clients/WORKLOAD/lib=NAME/K=8/N=…)
// get a table of their own: every library's median per metric side by side, the
// ratios issue #13 asks for (to redsync, and to bsm/redislock on one node), and the
// issue's targets, each marked met or MISSED.

// clientsPrefix starts the name of every multi-Client workload.
const clientsPrefix = "Clients/"

// The libraries that the ratios and targets of the multi-Client workloads name.
const (
	libDefault = "redlock"
	libFair    = "redlock-fair"
	libRedsync = "redsync"
	libOneNode = "redislock"
)

// clientWorkload is a multi-Client workload without its node count (the one-node
// library runs with N=1, the others with N=5, and they are compared all the same),
// with each library's values per metric in run order.
type clientWorkload struct {
	name   string               // such as Clients/hot/K=8
	libs   []string             // in order of appearance
	nodes  map[string]string    // lib → its node count part, such as N=5
	units  []string             // in order of appearance
	better map[string]int       // unit → +1 higher is better, −1 lower, 0 unknown
	values map[string][]float64 // lib + "\x00" + unit → values in run order
}

// median returns the median of lib's values of unit, if it has any.
func (w *clientWorkload) median(lib, unit string) (float64, bool) {
	xs := w.values[lib+"\x00"+unit]
	if len(xs) == 0 {
		return 0, false
	}
	return median(xs), true
}

// clientWorkloads gathers the multi-Client workloads of all, in order of appearance.
func clientWorkloads(all []result, units benchfmt.UnitMetadataMap) []*clientWorkload {
	var list []*clientWorkload
	byName := map[string]*clientWorkload{}
	for _, res := range all {
		if !strings.HasPrefix(res.workload, clientsPrefix) || res.lib == "" {
			continue
		}
		name, nodes := dropNodes(res.workload)
		w := byName[name]
		if w == nil {
			w = &clientWorkload{name: name, nodes: map[string]string{}, better: map[string]int{}, values: map[string][]float64{}}
			byName[name] = w
			list = append(list, w)
		}
		if _, seen := w.nodes[res.lib]; !seen {
			w.nodes[res.lib] = nodes
			w.libs = append(w.libs, res.lib)
		}
		if _, seen := w.better[res.unit]; !seen {
			w.better[res.unit] = units.GetBetter(res.unit)
			w.units = append(w.units, res.unit)
		}
		k := res.lib + "\x00" + res.unit
		w.values[k] = append(w.values[k], res.value)
	}
	return list
}

// dropNodes splits a workload name into the name without its /N=… part and that part.
func dropNodes(workload string) (name, nodes string) {
	parts := strings.Split(workload, "/")
	kept := parts[:0]
	for _, p := range parts {
		if strings.HasPrefix(p, "N=") {
			nodes = p
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "/"), nodes
}

// clientRatios are the ratio columns of the multi-Client table: numerator and
// denominator library.
var clientRatios = [][2]string{{libDefault, libRedsync}, {libFair, libRedsync}, {libFair, libOneNode}}

// writeClients prints the multi-Client table and then its targets.
func writeClients(w io.Writer, list []*clientWorkload, md bool) {
	fmt.Fprintln(w, "Multi-Client workloads (K Clients, one worker each): medians per library")
	var libs []string // every library of any workload, in order of appearance
	for _, cw := range list {
		for _, l := range cw.libs {
			if !contains(libs, l) {
				libs = append(libs, l)
			}
		}
	}
	header := []string{"workload", "metric", "better"}
	for _, l := range libs {
		header = append(header, l)
	}
	for _, r := range clientRatios {
		header = append(header, r[0]+"/"+r[1])
	}
	lines := [][]string{header}
	for _, cw := range list {
		for _, u := range cw.units {
			line := []string{cw.name, u, betterText(cw.better[u])}
			for _, l := range libs {
				line = append(line, cell(cw, l, u))
			}
			for _, r := range clientRatios {
				line = append(line, ratioCell(cw, r[0], r[1], u))
			}
			lines = append(lines, line)
		}
	}
	printTable(w, lines, md)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Targets of issue #13 (8 Clients, 5 nodes, 100 µs critical section), on the medians (the longest wait: on each run's own bound)")
	printTable(w, targetLines(list), md)
}

// cell is lib's median of unit in cw with its node count, or "—".
func cell(cw *clientWorkload, lib, unit string) string {
	v, ok := cw.median(lib, unit)
	if !ok {
		return "—"
	}
	return fmtValue(v) + " (" + nodesText(cw.nodes[lib]) + ")"
}

// nodesText spells a workload's node count part for a cell: "N=5" is "5 nodes", so
// that it is not read as a count of runs.
func nodesText(part string) string {
	n := strings.TrimPrefix(part, "N=")
	switch {
	case part == "" || n == part:
		return part
	case n == "1":
		return "1 node"
	}
	return n + " nodes"
}

// ratioCell is the ratio of the medians of num and den for unit in cw, or "—".
func ratioCell(cw *clientWorkload, num, den, unit string) string {
	n, ok1 := cw.median(num, unit)
	d, ok2 := cw.median(den, unit)
	if !ok1 || !ok2 {
		return "—"
	}
	return fmtRatio(ratio(n, d))
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
