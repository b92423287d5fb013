package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redlock-go/redlock/redlocktest"
)

// demoNode is one Redis node of the demo that can be killed and restarted, and stopped
// for good with close when the demo ends.
type demoNode interface {
	Addr() string
	// kill stops the node at once; restart brings it back on the same address with the
	// data it had (miniredis keeps it in memory, redis-server in its append-only file).
	kill() error
	restart() error
	// close stops the node for good and frees what it holds; it may follow kill.
	close() error
	// describe says what the node is, for the demo's first lines.
	describe() string
}

// close stops every node the demo started, last first, and returns their errors.
func (d *demo) close() error {
	var errs []error
	for i := len(d.nodes) - 1; i >= 0; i-- {
		errs = append(errs, d.nodes[i].close())
	}
	d.nodes = nil
	return errors.Join(errs...)
}

// memNode is an in-process miniredis whose TTLs run on the wall clock.
type memNode struct{ m *miniredis.Miniredis }

// startMemNode starts a miniredis; close stops it.
func startMemNode() (*memNode, error) {
	m := miniredis.NewMiniRedis()
	// By default miniredis TTLs only move with FastForward; with ClockTTL they follow the
	// real clock (checked on every command), so locks expire as on a real server.
	m.ClockTTL(true)
	if err := m.Start(); err != nil {
		return nil, err
	}
	return &memNode{m: m}, nil
}

func (n *memNode) Addr() string     { return n.m.Addr() }
func (n *memNode) kill() error      { n.m.Close(); return nil }
func (n *memNode) restart() error   { return n.m.Restart() }
func (n *memNode) close() error     { n.m.Close(); return nil } // closing a killed node again does nothing
func (n *memNode) describe() string { return "in-process miniredis on " + n.Addr() }

// procNode is a redis-server process of the fault kit's core, with an append-only file
// fsynced on every write, so that a restart brings back every lock key it had
// acknowledged.
type procNode struct{ p *redlocktest.Process }

// startProcNode starts a redis-server with appendonly yes, appendfsync always; close
// kills it by PID and removes its directory.
func startProcNode(ctx context.Context) (procNode, error) {
	p, err := redlocktest.StartProcess(ctx, redlocktest.Options{Persistence: redlocktest.AOFAlways})
	return procNode{p}, err
}

func (n procNode) Addr() string   { return n.p.Addr() }
func (n procNode) kill() error    { return n.p.KillErr() }
func (n procNode) restart() error { return n.p.RestartErr(redlocktest.AOFAlways) }
func (n procNode) close() error   { return n.p.Close() }
func (n procNode) describe() string {
	return fmt.Sprintf("redis-server pid %d on %s", n.p.PID(), n.p.Addr())
}
