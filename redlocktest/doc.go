// Package redlocktest runs real Redis nodes for tests and injects faults into them, so
// that code built on github.com/redlock-go/redlock (or on Redis in general) can be
// tested against crashed, stalled, wiped, slow, partitioned and clock-skewed nodes.
//
// # Nodes and backends
//
// A Node is one Redis server owned by a test. Every backend offers the same faults:
//
//   - Kill: the server dies at once (SIGKILL, or docker kill); its port refuses
//     connections.
//   - Pause and Resume: the server is frozen (SIGSTOP/SIGCONT, or docker
//     pause/unpause). The kernel still accepts connections, but nothing is answered.
//   - Restart: kill, then start again on the same port and data directory, with the
//     Persistence chosen for the new run. With AOFAlways (appendonly yes, appendfsync
//     always) every acknowledged write survives; with NoPersistence the node comes
//     back empty.
//   - RestartAfter: the same, but the port stays closed for a given time first (the
//     "delayed restart" of the Redlock description).
//
// Two backends implement Node. Processes (Start, StartN, the Processes backend) runs
// redis-server as a child process on a free loopback port; it needs only redis-server
// on PATH and is the default. Docker (NewDocker) runs each node in its own container
// through github.com/ory/dockertest/v3, on the host's network; tests that use it skip
// with a message when no Docker engine answers (see docs/faultkit.md for the image and
// the `make test-docker` target).
//
// # More faults
//
//   - Network (NewNetwork): an in-process Toxiproxy server; a Proxy in front of a node
//     adds latency with jitter, drops traffic (blackhole), resets connections or
//     refuses them. Give each client its own proxies to show two clients different
//     partitions.
//   - Duplicates (Duplicate, NewDuplicator): a go-redis hook that delivers a drawn
//     share of a client's commands a second time, each copy late (up to a bound) and
//     on a connection of its own, as retransmissions and retries after lost replies do.
//   - Clock (Options.Clock, Process.Jump): a process node runs under libfaketime with
//     a wall-clock offset and rate, and its clock can jump at run time. Redis expires
//     keys on its wall clock, so this is how a node expires a lock early or late.
//   - Replicated (StartReplicated): a master, an asynchronous replica and three real
//     redis-sentinel processes that fail over; its FailoverClient can be one member of
//     a redlock quorum.
//   - Cluster (StartCluster): a small Redis Cluster whose ClusterClient can be one
//     member of a quorum.
//
// # Ownership and clean-up
//
// Everything is started on behalf of a T (the part of testing.TB the kit uses, which
// every test's t satisfies) and stopped by a t.Cleanup registered when it starts:
// processes are killed and reaped by PID (and get SIGKILL from the kernel if the test
// binary dies first), containers are removed, proxies are closed, clients are closed.
// Methods that cannot do their job fail the test with t.Fatalf, so they must be called
// from the test's goroutine.
//
// # Outside tests
//
// The package does not import testing. A program uses the error-returning core:
// StartProcess (or StartProcesses) starts redis-server processes that run until
// Close, and the methods ending in Err (KillErr, RestartErr, ...) return their errors.
// For the rest of the kit (networks, replicated and cluster setups), Run hands a
// function a T that belongs to no test and returns its failures as an error.
//
// Tests fail, rather than skip, when redis-server is not on PATH, unless the
// environment variable named by SkipEnv is "1".
package redlocktest
