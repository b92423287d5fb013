package main

import (
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redlock-go/redlock/redlocktest"
)

// demoNode is one Redis node of the demo that can be killed and restarted. It belongs
// to the testing.TB of the demo's redlocktest.Run, whose clean-ups stop it for good.
type demoNode interface {
	Addr() string
	// kill stops the node at once; restart brings it back on the same address with the
	// data it had (miniredis keeps it in memory, redis-server in its append-only file).
	kill() error
	restart() error
	// describe says what the node is, for the demo's first lines.
	describe() string
}

// memNode is an in-process miniredis whose TTLs run on the wall clock.
type memNode struct{ m *miniredis.Miniredis }

// startMemNode starts a miniredis that is closed when t ends.
func startMemNode(t testing.TB) (*memNode, error) {
	m := miniredis.NewMiniRedis()
	// By default miniredis TTLs only move with FastForward; with ClockTTL they follow the
	// real clock (checked on every command), so locks expire as on a real server.
	m.ClockTTL(true)
	if err := m.Start(); err != nil {
		return nil, err
	}
	t.Cleanup(m.Close) // closing a killed node again does nothing
	return &memNode{m: m}, nil
}

func (n *memNode) Addr() string     { return n.m.Addr() }
func (n *memNode) kill() error      { n.m.Close(); return nil }
func (n *memNode) restart() error   { return n.m.Restart() }
func (n *memNode) describe() string { return "in-process miniredis on " + n.Addr() }

// procNode is a redis-server process of the fault kit, with an append-only file fsynced
// on every write, so that a restart brings back every lock key it had acknowledged.
// The kit fails the demo's t (ending the demo) when it cannot kill or restart it, so
// kill and restart return no error of their own.
type procNode struct{ p *redlocktest.Process }

func (n procNode) Addr() string   { return n.p.Addr() }
func (n procNode) kill() error    { n.p.Kill(); return nil }
func (n procNode) restart() error { n.p.Restart(redlocktest.AOFAlways); return nil }
func (n procNode) describe() string {
	return fmt.Sprintf("redis-server pid %d on %s", n.p.PID(), n.p.Addr())
}
