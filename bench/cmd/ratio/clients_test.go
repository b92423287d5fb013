package main

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

func readClients(t *testing.T) []*clientWorkload {
	t.Helper()
	all, units, err := collect(&benchfmt.Files{Paths: []string{"testdata/clients.txt", "testdata/two-runs.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	return clientWorkloads(all, units)
}

// TestClientWorkloadsDropNodeCounts: the one-node library's results (1 node) join the
// others' (5 nodes) under one workload name; the other workloads stay out.
func TestClientWorkloadsDropNodeCounts(t *testing.T) {
	list := readClients(t)
	if len(list) != 2 || list[0].name != "Clients/hot/K=8" || list[1].name != "Clients/uncontended/K=8" {
		t.Fatalf("workloads %v, want Clients/hot/K=8 and Clients/uncontended/K=8 only", names(list))
	}
	hot := list[0]
	if got := strings.Join(hot.libs, " "); got != "redlock redlock-fair redsync redislock" {
		t.Errorf("libraries %q", got)
	}
	if hot.nodes["redislock"] != "N=1" || hot.nodes["redlock-fair"] != "N=5" {
		t.Errorf("node counts %v", hot.nodes)
	}
	if v, ok := hot.median("redislock", "handoffs/s"); !ok || v != 1500 {
		t.Errorf("redislock's median handoffs/s = %v, %v; want 1500", v, ok)
	}
	if _, ok := hot.median("redsync", "wait-bound-ms"); ok {
		t.Error("redsync has no wait bound, yet a median was found")
	}
}

func names(list []*clientWorkload) []string {
	var s []string
	for _, w := range list {
		s = append(s, w.name)
	}
	return s
}

// TestWriteClientsRatiosAndTargets: medians side by side, the ratios to redsync and
// to one-node redislock, and each target marked on the medians.
func TestWriteClientsRatiosAndTargets(t *testing.T) {
	var buf bytes.Buffer
	writeClients(&buf, readClients(t), true)
	out := buf.String()
	for _, line := range []string{
		"| workload | metric | better | redlock | redlock-fair | redsync | redislock | redlock/redsync | redlock-fair/redsync | redlock-fair/redislock |",
		// fair 1400 (1500, 1300), redislock 1500 (1400, 1600), redsync 25
		"| Clients/hot/K=8 | handoffs/s | higher | 1100 (5 nodes) | 1400 (5 nodes) | 25 (5 nodes) | 1500 (1 node) | 44.00× | 56.00× | 0.93× |",
		"| Clients/uncontended/K=8 | cycles/s | higher | 11000 (5 nodes) | 10000 (5 nodes) | 5000 (5 nodes) | 50000 (1 node) | 2.20× | 2.00× | 0.20× |",
		"| Clients/hot/K=8 | fair: hand-overs/s ≥ redislock's on one node | 1400 / 1500 = 0.93× | MISSED |",
		"| Clients/hot/K=8 | fair: waiter p99 ≤ 10 ms | 9 wait-p99-ms | met |",
		"| Clients/hot/K=8 | fair: Jain's index ≥ 0.99 | 0.9970 jain | met |",
		"| Clients/hot/K=8 | fair: longest wait ≤ 2 × (waiters × cycle) | per run ms 9/10, 13/12: median 0.99×, held in 1 of 2 runs | met |",
		"| Clients/hot/K=8 | default: hand-overs/s ≥ 50 × redsync's | 1100 / 25 = 44.00× | MISSED |",
		"| Clients/hot/K=8 | default: waiter p99 ≤ 15 ms | 15 wait-p99-ms | met |",
		"| Clients/uncontended/K=8 | default: cycles/s ÷ redsync's (1.42× before #13) | 11000 / 5000 = 2.20× | reported |",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("output lacks line\n%s\ngot:\n%s", line, out)
		}
	}
}

func TestDropNodes(t *testing.T) {
	for _, c := range []struct{ in, name, nodes string }{
		{"Clients/hot/K=8/N=5", "Clients/hot/K=8", "N=5"},
		{"Clients/hot/K=8", "Clients/hot/K=8", ""},
		{"Uncontended/G=1/N=1", "Uncontended/G=1", "N=1"},
	} {
		if name, nodes := dropNodes(c.in); name != c.name || nodes != c.nodes {
			t.Errorf("dropNodes(%q) = %q, %q; want %q, %q", c.in, name, nodes, c.name, c.nodes)
		}
	}
}

// TestLongestWaitHeldToItsOwnRun: the longest wait is compared with the bound of the
// same run, and the verdict is on the median of those ratios; the medians of the two
// columns, taken apart, pair one run's wait with another run's cycle and can say
// either thing wrongly.
func TestLongestWaitHeldToItsOwnRun(t *testing.T) {
	check := withinOwn(libFair, "wait-max-ms", "wait-bound-ms")
	for _, c := range []struct {
		name         string
		waits, bound []float64
		met          bool
	}{
		// medians 12 and 13 would say met; the runs held it once in three
		{"medians hide misses", []float64{10, 12, 14}, []float64{5, 20, 13}, false},
		// medians 12 and 11 would say missed; the runs held it twice in three
		{"medians hide a hold", []float64{8, 12, 14}, []float64{9, 11, 15}, true},
		{"every run held", []float64{8, 9}, []float64{9, 9}, true},
	} {
		cw := &clientWorkload{values: map[string][]float64{
			libFair + "\x00wait-max-ms":   c.waits,
			libFair + "\x00wait-bound-ms": c.bound,
		}}
		shown, met, ok := check(cw)
		if !ok || met != c.met {
			t.Errorf("%s: met %v, ok %v (%s); want met %v", c.name, met, ok, shown, c.met)
		}
	}
	for _, bound := range [][]float64{{9}, {9, 0}, nil} {
		cw := &clientWorkload{values: map[string][]float64{
			libFair + "\x00wait-max-ms":   {8, 9},
			libFair + "\x00wait-bound-ms": bound,
		}}
		if _, _, ok := check(cw); ok {
			t.Errorf("bounds %v for 2 runs: a verdict, want none", bound)
		}
	}
}

func TestNodesText(t *testing.T) {
	for in, want := range map[string]string{"N=5": "5 nodes", "N=1": "1 node", "": "", "G=8": "G=8"} {
		if got := nodesText(in); got != want {
			t.Errorf("nodesText(%q) = %q, want %q", in, got, want)
		}
	}
}
