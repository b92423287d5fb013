package bench

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/bench/internal/nodes"
)

// skipEnv opts out of tests that need redis-server, as in the root module.
const skipEnv = "REDLOCK_SKIP_INTEGRATION"

var (
	nodeCount = flag.Int("nodes", 5, "number of redis-server nodes for the Uncontended and HotKey workloads")
	hotMax    = flag.Duration("hotmax", 30*time.Second, "upper bound on one HotKey run, whatever b.N")
)

// servers are started on first use and shared by every test and benchmark of the
// process; TestMain stops them.
var (
	serversMu sync.Mutex
	servers   nodes.Set
)

// units tells benchstat which direction is better for the custom metrics.
var units = []string{
	"Unit cycles/s better=higher",
	"Unit handovers/s better=higher",
	"Unit acq/s better=higher",
	"Unit acq-p50-ms better=lower",
	"Unit acq-p99-ms better=lower",
	"Unit wait-p50-ms better=lower",
	"Unit wait-p99-ms better=lower",
	"Unit wait-max-ms better=lower",
	"Unit self-% better=lower",
	"Unit gaveup better=lower",
	"Unit errors better=lower",
	"Unit violations better=lower assume=exact",
	"Unit client-cpu-us/cycle better=lower",
	"Unit server-cpu-us/cycle better=lower",
}

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		for _, u := range units {
			fmt.Println(u)
		}
	}
	code := m.Run()
	if err := servers.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping redis-server:", err)
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

// startNodes returns the first n shared nodes, starting them if needed. Without
// redis-server it fails, or skips when REDLOCK_SKIP_INTEGRATION=1.
func startNodes(tb testing.TB, n int) []*nodes.Node {
	tb.Helper()
	serversMu.Lock()
	defer serversMu.Unlock()
	ns, err := servers.First(n)
	if errors.Is(err, nodes.ErrNoServer) && os.Getenv(skipEnv) == "1" {
		tb.Skipf("%v; skipping because %s=1", err, skipEnv)
	}
	if err != nil {
		tb.Fatalf("starting redis-server: %v (install it with apt-get install redis-server, or set %s=1 to skip)", err, skipEnv)
	}
	return ns
}

// open opens l on the first n nodes (node 0 only for a single-node library) and
// closes it when tb ends.
func open(tb testing.TB, l lib, ns []*nodes.Node) *setup {
	tb.Helper()
	s, err := l.open(nodes.Addrs(ns))
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
