package bench

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlocktest"
)

// TestCommandsPerCycle counts what each library really sends to a node in an
// uncontended cycle (acquire and release of a fresh key), with K Clients of one
// worker each: the commands, from MONITOR (a script's own calls are listed apart),
// and the round trips, from the node's count of replies written (INFO stats
// total_writes_processed; pipelined commands are answered with one write). It is the
// measured side of "the physical limit of an uncontended cycle" in
// docs/performance.md: this library must send at most one command per node per
// step, two per cycle, and with one Client make two round trips per node per cycle. Run with
// -v for the figures of every library.
func TestCommandsPerCycle(t *testing.T) {
	const cycles = 64
	for _, k := range []int{1, clientsK} {
		for _, l := range clientLibs {
			n := nodesOf(l, 3)
			t.Run(fmt.Sprintf("lib=%s/K=%d/N=%d", l.name, k, n), func(t *testing.T) {
				ns := startNodes(t, n)
				cmds, inner := monitorCycles(t, l, ns, k, cycles)
				rounds := roundTrips(t, l, ns, k, cycles)
				per := func(x int) float64 { return float64(x) / float64(cycles*n) }
				total := sum(slices.Collect(maps.Values(cmds)))
				t.Logf("per node per cycle: commands %s (%.2f), in scripts %s, round trips %.2f",
					perCycle(cmds, cycles*n), per(total), perCycle(inner, cycles*n), per(rounds))
				if l.name != "redlock" && l.name != "redlock-fair" {
					return
				}
				// Two per node per cycle, fewer when a release finds its lock's SET to a
				// node still queued there (Lock.skipUnsent drops both); never fewer than
				// a majority's SETs and releases.
				if total > 2*cycles*n || total < 2*cycles*(n/2+1) {
					t.Errorf("%d commands on %d nodes for %d cycles, want at most 2 per node per cycle, and 2 per majority node: %v", total, n, cycles, cmds)
				}
				// The two steps of a cycle are two round trips at most; a release still
				// out to the last node when the next acquire comes shares its write.
				// Allow one more per node, for a release of the warm-up still out when the
				// count began.
				if k == 1 && rounds > 2*cycles*n+n {
					t.Errorf("%d round trips on %d nodes for %d cycles with one Client, want at most 2 per node per cycle", rounds, n, cycles)
				}
			})
		}
	}
}

// openCounted opens l k times on ns, as prepareClients does, but without closing them
// at the end of the test: the caller closes them, and so waits for every node call
// they have out.
func openCounted(t *testing.T, l lib, ns []*redlocktest.Process, k int) (*clientsRun, func()) {
	t.Helper()
	run := &clientsRun{l: l}
	closeAll := func() {
		for _, s := range run.setups {
			if err := s.close(); err != nil {
				t.Errorf("closing %s: %v", l.name, err)
			}
		}
	}
	for range k {
		s, err := l.open(redlocktest.Addrs(ns))
		if err != nil {
			closeAll()
			t.Fatalf("opening %s: %v", l.name, err)
		}
		run.setups = append(run.setups, s)
	}
	run.all = &setup{newLocker: roundRobin(run.setups)}
	if st := runCycles(context.Background(), run.all, k, freshKeys("count-warm:"+l.name, 4*k)); st.Errors() != 0 {
		closeAll()
		t.Fatalf("warm-up: %d failed calls, first: %v", st.Errors(), st.FirstErr)
	}
	return run, closeAll
}

// perCycle formats counts divided by div, by command name.
func perCycle(counts map[string]int, div int) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(counts[name])/float64(div)))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// monitorCycles opens k Clients of l on ns and runs cycles uncontended cycles with
// one worker each while MONITOR listens on every node; it returns the commands sent
// for the cycles' keys, by name, over all nodes, and those that scripts ran. The
// Clients are closed (their calls still out to the slower nodes done) before the
// count ends, and commands for other keys (the warm-up's) are not counted.
func monitorCycles(t *testing.T, l lib, ns []*redlocktest.Process, k, cycles int) (sent, inner map[string]int) {
	t.Helper()
	run, closeAll := openCounted(t, l, ns, k)
	var mons []*monitor
	for _, p := range ns {
		m, err := startMonitor(p.Addr())
		if err != nil {
			closeAll()
			t.Fatal(err)
		}
		defer m.conn.Close()
		mons = append(mons, m)
	}
	keys := freshKeys("count:"+l.name, cycles)
	st := runCycles(context.Background(), run.all, k, keys)
	closeAll()
	if st.Errors() != 0 {
		t.Fatalf("%d failed calls; first: %v", st.Errors(), st.FirstErr)
	}
	prefix := strings.TrimSuffix(keys[0], "0") // count:LIB:RUN:
	sent, inner = map[string]int{}, map[string]int{}
	for i, m := range mons {
		if err := m.drain(ns[i].Addr(), prefix, sent, inner); err != nil {
			t.Fatal(err)
		}
	}
	return sent, inner
}

// monitor is a MONITOR connection to one node.
type monitor struct {
	conn net.Conn
	r    *bufio.Reader
}

// startMonitor opens a connection to addr and turns it into a monitor.
func startMonitor(addr string) (*monitor, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	m := &monitor{conn: conn, r: bufio.NewReader(conn)}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	if line, err := m.r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		conn.Close()
		return nil, fmt.Errorf("MONITOR on %s: %q, %v", addr, line, err)
	}
	return m, nil
}

// drain sends a marker to the node on a connection of its own and counts the
// commands the monitor lists until the marker that name a key starting with prefix
// (or a channel that ends with one): by name, in sent when a client sent them, in
// inner when a script ran them.
func (m *monitor) drain(addr, prefix string, sent, inner map[string]int) error {
	marker := "bench-monitor-end-" + strconv.FormatInt(runSeq.Add(1), 10)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	err := rdb.Echo(context.Background(), marker).Err()
	rdb.Close()
	if err != nil {
		return err
	}
	for {
		line, err := m.r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("monitor of %s: %w", addr, err)
		}
		source, name, ok := parseMonitorLine(line)
		if !ok {
			continue
		}
		if name == "echo" && strings.Contains(line, marker) {
			return nil
		}
		switch {
		case !strings.Contains(line, prefix):
		case source == "lua":
			inner[name]++
		default:
			sent[name]++
		}
	}
}

// parseMonitorLine splits a MONITOR line, +TIME [DB SOURCE] "cmd" "arg"..., into its
// source (an address, or lua for a script's call) and the command's name.
func parseMonitorLine(line string) (source, name string, ok bool) {
	open := strings.IndexByte(line, '[')
	end := strings.IndexByte(line, ']')
	if !strings.HasPrefix(line, "+") || open < 0 || end < open {
		return "", "", false
	}
	fields := strings.Fields(line[open+1 : end])
	rest := strings.TrimSpace(line[end+1:])
	q := strings.IndexByte(rest[min(1, len(rest)):], '"')
	if len(fields) != 2 || !strings.HasPrefix(rest, `"`) || q < 0 {
		return "", "", false
	}
	return fields[1], strings.ToLower(rest[1 : 1+q]), true
}

// roundTrips opens k Clients of l on ns, runs cycles uncontended cycles with one
// worker each, and returns the replies the nodes wrote meanwhile, together: one per
// round trip, as a pipeline's replies go out in one write. The Clients are closed
// before the count ends.
func roundTrips(t *testing.T, l lib, ns []*redlocktest.Process, k, cycles int) int {
	t.Helper()
	run, closeAll := openCounted(t, l, ns, k)
	rdbs := make([]*redis.Client, len(ns))
	before := make([]int, len(ns))
	for i, p := range ns {
		rdbs[i] = redis.NewClient(&redis.Options{Addr: p.Addr()})
		defer rdbs[i].Close()
		before[i] = writesProcessed(t, rdbs[i])
	}
	st := runCycles(context.Background(), run.all, k, freshKeys("rounds:"+l.name, cycles))
	closeAll()
	if st.Errors() != 0 {
		t.Fatalf("%d failed calls; first: %v", st.Errors(), st.FirstErr)
	}
	total := 0
	for i, r := range rdbs {
		// Less the reply to the first INFO, written after its snapshot.
		total += writesProcessed(t, r) - before[i] - 1
	}
	return total
}

// writesProcessed returns the node's total_writes_processed.
func writesProcessed(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_writes_processed:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no total_writes_processed in INFO stats:\n%s", info)
	return 0
}
