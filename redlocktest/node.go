package redlocktest

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// SkipEnv names the environment variable that opts out of integration tests: when it
// is "1", starting a process node skips the test (t.Skip) instead of failing it when
// redis-server is not on PATH.
const SkipEnv = "REDLOCK_SKIP_INTEGRATION"

// Persistence selects what a node keeps across a crash.
type Persistence int

const (
	// NoPersistence runs the server with `--save "" --appendonly no`: a node that is
	// killed and restarted comes back empty.
	NoPersistence Persistence = iota

	// AOFAlways runs the server with `--appendonly yes --appendfsync always`: Redis
	// writes each command to its append-only file and fsyncs it before replying, so a
	// node that is killed and restarted still has every key it acknowledged (with its
	// absolute expiry time, which kept running while the node was down).
	AOFAlways
)

// String returns "none" or "aof-always".
func (p Persistence) String() string {
	switch p {
	case NoPersistence:
		return "none"
	case AOFAlways:
		return "aof-always"
	}
	return "Persistence(?)"
}

// args returns the redis-server arguments for p (the container backend's; processes
// get theirs from redisproc.ServerArgs).
func (p Persistence) args() []string {
	if p == AOFAlways {
		return []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	return []string{"--appendonly", "no"}
}

// Options configures a node.
type Options struct {
	// Persistence is the persistence of the first run; Restart chooses it anew for
	// each later run. The zero value is NoPersistence.
	Persistence Persistence

	// Args holds extra redis-server arguments, appended after the ones this package
	// generates (so they can override them).
	Args []string

	// Clock, when not nil, runs the server under libfaketime with this wall-clock
	// offset and rate, and enables Process.Jump. Only the process backend supports it.
	Clock *Clock

	// Cluster starts the server with cluster mode enabled and its cluster bus on a
	// second free port. StartCluster sets it; a node started with it answers nothing
	// useful until it is given slots.
	Cluster bool
}

// Node is one Redis server owned by a test, with the faults every backend offers.
// Its methods fail the test (t.Fatalf) when they cannot do their job, so they must be
// called from the test's goroutine.
type Node interface {
	// Addr returns the address clients dial, "127.0.0.1:PORT". It stays the same
	// across Kill and Restart.
	Addr() string

	// Client returns a new go-redis client with default options connected to Addr;
	// it is closed when the test ends.
	Client() *redis.Client

	// Kill stops the server at once (SIGKILL or docker kill) and waits until it is
	// gone. Writes not yet in the append-only file are lost. It does nothing when the
	// server is already stopped.
	Kill()

	// Pause freezes the server (SIGSTOP or docker pause). Connections are still
	// accepted by the kernel, but nothing is answered until Resume. Pausing a stopped
	// server fails the test; pausing a paused one does nothing.
	Pause()

	// Resume continues a server frozen by Pause. It does nothing otherwise.
	Resume()

	// Restart kills the server if it runs and starts it again on the same port and
	// data directory with persistence p, returning once it answers PING (and not
	// with LOADING). With AOFAlways after a run with AOFAlways, every acknowledged
	// write is loaded again; with NoPersistence the server starts empty.
	Restart(p Persistence)

	// RestartAfter kills the server if it runs, keeps its port closed for down, then
	// restarts it as Restart does. It blocks for the whole time.
	RestartAfter(down time.Duration, p Persistence)
}

// Backend starts nodes of one kind. Processes and *Docker implement it, so a scenario
// can be written once and run on both.
type Backend interface {
	// Start starts one node on a free port and returns once it answers PING. The
	// node is stopped when the test ends.
	Start(t T, opts Options) Node
}

// StartNodes starts n nodes on backend b with the same options, one after another, and
// returns them in start order.
func StartNodes(t T, b Backend, n int, opts Options) []Node {
	t.Helper()
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = b.Start(t, opts)
	}
	return nodes
}

// Addrs returns the address of each node, in the same order.
func Addrs[N Node](nodes []N) []string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Clients returns a new client for each node, in the same order, as returned by
// Node.Client. The result can be passed to redlock.New.
func Clients[N Node](nodes []N) []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		clients[i] = n.Client()
	}
	return clients
}

// newClient returns a go-redis client for addr that is closed when t ends; without a
// test (t nil) the caller closes it.
func newClient(t T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	if t != nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c
}
