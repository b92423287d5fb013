package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/redlocktest"
)

var (
	nodeCount = flag.Int("nodes", 5, "number of redis-server nodes for the Uncontended and HotKey workloads")
	hotMax    = flag.Duration("hotmax", 30*time.Second, "upper bound on one HotKey run, whatever b.N")
)

// servers are started on first use and shared by every test and benchmark of the
// process. They are started with the kit's core (redlocktest.StartProcess), so they
// belong to no test, and TestMain closes them (by PID) when the tests are done.
var (
	serversMu sync.Mutex
	servers   []*redlocktest.Process
)

// units tells benchstat which direction is better for the custom metrics.
var units = []string{
	"Unit cycles/s better=higher",
	"Unit handoffs/s better=higher",
	"Unit acq/s better=higher",
	"Unit acq-p50-ms better=lower",
	"Unit acq-p99-ms better=lower",
	"Unit wait-p50-ms better=lower",
	"Unit wait-p99-ms better=lower",
	"Unit wait-max-ms better=lower",
	"Unit wait-max-late-ms better=lower",
	"Unit last-p50-ms better=lower",
	"Unit last-p90-ms better=lower",
	"Unit last-max-ms better=lower",
	"Unit per-grant-ms better=lower",
	"Unit box-stall-ms better=lower",
	"Unit self-% better=lower",
	"Unit jain better=higher",
	"Unit cycle-us better=lower",
	"Unit gaveup better=lower",
	"Unit errors better=lower",
	"Unit violations better=lower assume=exact",
	"Unit client-cpu-us/cycle better=lower",
	"Unit server-cpu-us/cycle better=lower",
	"Unit client-cpu-us/grant better=lower",
	"Unit server-cpu-us/grant better=lower",
	"Unit scripts/grant better=lower",
	"Unit script-us/grant better=lower",
	"Unit overtakes-% better=lower",
	// A lower bound means a shorter cycle; the ratio tool compares it like the waits.
	"Unit wait-bound-ms better=lower",
}

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		for _, u := range units {
			fmt.Println(u)
		}
	}
	code := m.Run()
	serversMu.Lock()
	err := redlocktest.CloseAll(servers)
	servers = nil
	serversMu.Unlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "redis-server nodes:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left running:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startNodes returns the first n shared nodes, starting more if fewer run. Without
// redis-server it fails tb, or skips it when REDLOCK_SKIP_INTEGRATION=1
// (redlocktest.SkipEnv).
func startNodes(tb testing.TB, n int) []*redlocktest.Process {
	tb.Helper()
	serversMu.Lock()
	defer serversMu.Unlock()
	for len(servers) < n {
		p, err := redlocktest.StartProcess(context.Background(), redlocktest.Options{})
		if err != nil {
			if errors.Is(err, exec.ErrNotFound) && os.Getenv(redlocktest.SkipEnv) == "1" {
				tb.Skipf("%v; skipping because %s=1", err, redlocktest.SkipEnv)
			}
			tb.Fatalf("%v", err)
		}
		servers = append(servers, p)
	}
	return servers[:n]
}

// open opens l on the first n nodes (node 0 only for a single-node library) and
// closes it when tb ends.
func open(tb testing.TB, l lib, ns []*redlocktest.Process) *setup {
	tb.Helper()
	s, err := l.open(redlocktest.Addrs(ns))
	if err != nil {
		tb.Fatalf("opening %s: %v", l.name, err)
	}
	tb.Cleanup(func() {
		if err := s.close(); err != nil {
			tb.Errorf("closing %s: %v", l.name, err)
		}
	})
	return s
}

// nodesOf returns how many nodes l runs on when the workload asks for n.
func nodesOf(l lib, n int) int {
	if l.single {
		return 1
	}
	return n
}
