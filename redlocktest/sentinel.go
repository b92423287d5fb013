package redlocktest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// sentinelDownAfter is how long a master must be unreachable before a sentinel
	// thinks it down; short, so failover tests are quick, and long enough that a
	// loaded machine does not trigger a failover by itself.
	sentinelDownAfter = 1000 * time.Millisecond
	sentinelCount     = 3
	sentinelQuorum    = 2
	setupTimeout      = 20 * time.Second
	setupPoll         = 20 * time.Millisecond
)

// Replicated is a "node" made of a master, one asynchronous replica and three real
// redis-sentinel processes (quorum 2) that promote the replica when the master fails:
// the usual high-availability setup, to show what replication-based safety does and
// does not give. Its FailoverClient can be one member of a redlock quorum.
//
// Replication is asynchronous: a lock written to the master and acknowledged may not
// have reached the replica when the master dies, and the promoted replica then grants
// the lock again. That is why Redlock wants independent masters.
type Replicated struct {
	// Name is the master name the sentinels monitor.
	Name string
	// Master and Replica are the data nodes as started; after a failover their roles
	// are swapped (or the old master is down).
	Master, Replica *Process
	// Sentinels are the three redis-sentinel processes.
	Sentinels []*Process

	t T
}

// StartReplicated starts the master (with opts), its replica (with opts, replicating
// from the master) and three sentinels, and returns once the replica is in sync and
// every sentinel knows the replica and the other two sentinels, so that a failover can
// happen. Everything is stopped when the test ends.
func StartReplicated(t T, opts Options) *Replicated {
	t.Helper()
	r := &Replicated{Name: "redlocktest", t: t}
	mopts := opts
	// Start the first full sync at once instead of waiting 5 s for more replicas.
	mopts.Args = append([]string{"--repl-diskless-sync-delay", "0"}, opts.Args...)
	r.Master = Start(t, mopts)

	ropts := opts
	ropts.Args = append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(r.Master.Port())}, opts.Args...)
	r.Replica = Start(t, ropts)

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	replica := r.Replica.Client()
	waitFor(t, ctx, "the replica to sync with the master", func() error {
		info, err := replica.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("master link not up yet")
		}
		return nil
	})

	for range sentinelCount {
		r.Sentinels = append(r.Sentinels, r.startSentinel())
	}
	for _, s := range r.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		waitFor(t, ctx, "sentinel "+s.Addr()+" to see the replica and the other sentinels", func() error {
			m, err := sc.Master(ctx, r.Name).Result()
			if err != nil {
				return err
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != strconv.Itoa(sentinelCount-1) {
				return fmt.Errorf("num-slaves %s, num-other-sentinels %s", m["num-slaves"], m["num-other-sentinels"])
			}
			return nil
		})
		_ = sc.Close()
	}
	return r
}

// startSentinel writes a sentinel configuration that monitors the master and starts
// redis-sentinel with it.
func (r *Replicated) startSentinel() *Process {
	r.t.Helper()
	p := newProcess(r.t, sentinelBinary, Options{})
	p.conf = filepath.Join(p.dir, "sentinel.conf")
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s 10000\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		r.Name, r.Master.Port(), sentinelQuorum, sentinelDownAfter.Milliseconds())
	if err := os.WriteFile(p.conf, []byte(conf), 0o644); err != nil {
		r.t.Fatalf("redlocktest: writing %s: %v", p.conf, err)
	}
	p.startFirst()
	return p
}

// SentinelAddrs returns the sentinels' addresses.
func (r *Replicated) SentinelAddrs() []string { return Addrs(r.Sentinels) }

// FailoverClient returns a new go-redis client that asks the sentinels for the
// current master and follows failovers. It is closed when the test ends. Pass it to
// redlock.New as one member of the quorum.
func (r *Replicated) FailoverClient() *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    r.Name,
		SentinelAddrs: r.SentinelAddrs(),
		// A short dial timeout, so that the client gives up on a dead master quickly
		// and asks the sentinels again.
		DialTimeout: 250 * time.Millisecond,
	})
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}

// MasterAddr asks the first sentinel that answers for the current master's address.
func (r *Replicated) MasterAddr(ctx context.Context) (string, error) {
	var last error
	for _, s := range r.Sentinels {
		if s.PID() == 0 {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		hp, err := sc.GetMasterAddrByName(ctx, r.Name).Result()
		_ = sc.Close()
		if err == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
		last = err
	}
	return "", fmt.Errorf("no sentinel told the master of %s: %v", r.Name, last)
}

// WaitFailover subscribes to the sentinels' +switch-master events, runs fault (for
// example r.Master.Kill or r.Master.Pause), and waits until a sentinel announces that
// the master moved. It returns the new master's address, or an error when ctx ends
// first.
func (r *Replicated) WaitFailover(ctx context.Context, fault func()) (string, error) {
	r.t.Helper()
	var clients []*redis.SentinelClient
	var subs []*redis.PubSub
	defer func() {
		for _, s := range subs {
			_ = s.Close()
		}
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	switched := make(chan string, len(r.Sentinels))
	for _, s := range r.Sentinels {
		if s.PID() == 0 {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		clients = append(clients, c)
		sub := c.Subscribe(ctx, "+switch-master")
		// Receive blocks until the subscription is confirmed, so no event is missed.
		if _, err := sub.Receive(ctx); err != nil {
			_ = sub.Close()
			return "", fmt.Errorf("subscribing to sentinel %s: %v", s.Addr(), err)
		}
		subs = append(subs, sub)
		go func() {
			for {
				msg, err := sub.ReceiveMessage(ctx)
				if err != nil {
					return
				}
				// "<name> <old-ip> <old-port> <new-ip> <new-port>"
				f := strings.Fields(msg.Payload)
				if len(f) == 5 && f[0] == r.Name {
					switched <- net.JoinHostPort(f[3], f[4])
					return
				}
			}
		}()
	}
	fault()
	select {
	case addr := <-switched:
		return addr, nil
	case <-ctx.Done():
		return "", fmt.Errorf("no failover of %s announced: %w", r.Name, ctx.Err())
	}
}

// waitFor calls check every setupPoll until it returns nil, and fails the test with
// its last error when ctx ends first.
func waitFor(t T, ctx context.Context, what string, check func() error) {
	t.Helper()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("redlocktest: waiting for %s: %v (last check: %v)", what, ctx.Err(), err)
		case <-time.After(setupPoll):
		}
	}
}
