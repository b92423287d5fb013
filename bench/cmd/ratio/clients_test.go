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

// TestClientWorkloadsDropNodeCounts: the one-node library's results (N=1) join the
// others' (N=5) under one workload name; the other workloads stay out.
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
		"| Clients/hot/K=8 | handoffs/s | higher | 1100 (N=5) | 1400 (N=5) | 25 (N=5) | 1500 (N=1) | 44.00× | 56.00× | 0.93× |",
		"| Clients/uncontended/K=8 | cycles/s | higher | 11000 (N=5) | 10000 (N=5) | 5000 (N=5) | 50000 (N=1) | 2.20× | 2.00× | 0.20× |",
		"| Clients/hot/K=8 | fair: hand-overs/s ≥ redislock's on one node | 1400 / 1500 = 0.93× | MISSED |",
		"| Clients/hot/K=8 | fair: waiter p99 ≤ 10 ms | 9 wait-p99-ms | met |",
		"| Clients/hot/K=8 | fair: Jain's index ≥ 0.99 | 0.9970 jain | met |",
		"| Clients/hot/K=8 | fair: longest wait ≤ 2 × (waiters × cycle) | 11 ms, bound 11 ms | met |",
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
