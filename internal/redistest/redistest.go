// Package redistest starts real redis-server processes on loopback for the tests of
// this module, with the fault operations they need. It is a thin layer over the
// exported package redlocktest (which users import), kept so that the tests written
// against it need not change: a Server remembers whether it was started persistent and
// restarts the same way.
package redistest

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/redlocktest"
)

// SkipEnv names the environment variable that opts out of integration tests: when it
// is "1", Start skips the test (t.Skip) if redis-server is not on PATH.
const SkipEnv = redlocktest.SkipEnv

// Options configures the redis-server processes started by Start and StartN.
type Options struct {
	// Persistent enables the append-only file with "appendfsync always", so every
	// acknowledged write survives Kill followed by Restart. By default the server
	// runs without any persistence.
	Persistent bool

	// Args holds extra redis-server arguments, appended to the generated ones.
	Args []string
}

// Server is a redis-server process owned by a test: a redlocktest.Process whose
// Restart keeps the persistence it was started with.
type Server struct {
	*redlocktest.Process
	persistence redlocktest.Persistence
}

// Start starts one redis-server on a free loopback port and returns once it answers
// PING. The server is killed and reaped when the test and its subtests complete.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	p := redlocktest.NoPersistence
	if opts.Persistent {
		p = redlocktest.AOFAlways
	}
	return &Server{
		Process:     redlocktest.Start(t, redlocktest.Options{Persistence: p, Args: opts.Args}),
		persistence: p,
	}
}

// StartN starts n redis-servers with the same options and returns them in start order.
func StartN(t testing.TB, n int, opts Options) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = Start(t, opts)
	}
	return servers
}

// Restart kills the server if it is running and starts it again on the same port and
// data directory with the persistence it was started with. With Options.Persistent
// the data written before the kill is loaded again.
func (s *Server) Restart() {
	s.Process.Restart(s.persistence)
}

// Addrs returns the address of each server, in the same order.
func Addrs(servers []*Server) []string { return redlocktest.Addrs(processes(servers)) }

// Clients returns a new client for each server, in the same order.
func Clients(servers []*Server) []redis.UniversalClient {
	return redlocktest.Clients(processes(servers))
}

// processes returns the redlocktest processes behind servers.
func processes(servers []*Server) []*redlocktest.Process {
	ps := make([]*redlocktest.Process, len(servers))
	for i, s := range servers {
		ps[i] = s.Process
	}
	return ps
}
