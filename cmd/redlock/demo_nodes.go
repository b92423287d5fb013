package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// demoNode is one Redis node of the demo that can be killed and restarted.
type demoNode interface {
	Addr() string
	// kill stops the node at once; restart brings it back on the same address with the
	// data it had (miniredis keeps it in memory, redis-server in its append-only file).
	kill() error
	restart() error
	// describe says what the node is, for the demo's first lines.
	describe() string
	// stop ends the node for good (a killed node too).
	stop()
}

// memNode is an in-process miniredis whose TTLs run on the wall clock.
type memNode struct{ m *miniredis.Miniredis }

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
func (n *memNode) describe() string { return "in-process miniredis on " + n.Addr() }
func (n *memNode) stop()            { n.m.Close() }

// procNode is a redis-server process. With persist it keeps an append-only file
// fsynced on every write, so that a restart brings back every lock key it had
// acknowledged (the demo); without, it keeps nothing (the benchmark).
type procNode struct {
	bin, dir string
	persist  bool
	port     int
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been reaped
}

func startProcNode(bin, dir string, persist bool) (*procNode, error) {
	var lastErr error
	for range 5 { // another process may take the free port before redis-server binds it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		n := &procNode{bin: bin, dir: dir, persist: persist, port: port}
		if lastErr = n.launch(); lastErr == nil {
			return n, nil
		}
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (n *procNode) launch() error {
	aof := []string{"--appendonly", "no"}
	if n.persist {
		aof = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	cmd := exec.Command(n.bin, append([]string{
		"--port", strconv.Itoa(n.port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--dir", n.dir, "--save", "", "--daemonize", "no", "--logfile", filepath.Join(n.dir, "redis.log")},
		aof...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	setPdeathsig(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return err
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(n.exited)
	if err := n.waitReady(10 * time.Second); err != nil {
		_ = n.kill()
		log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
		return fmt.Errorf("redis-server on port %d: %v\n%s", n.port, err, tail(string(log), 10))
	}
	return nil
}

// waitReady polls the server until it answers PING (not LOADING), or it exits.
func (n *procNode) waitReady(limit time.Duration) error {
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-n.exited:
			return errors.New("exited before answering PING")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", limit, err)
		}
	}
}

func (n *procNode) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

func (n *procNode) kill() error {
	if n.cmd == nil {
		return nil
	}
	err := n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	n.cmd = nil
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	return err
}

func (n *procNode) restart() error { return n.launch() }

func (n *procNode) describe() string {
	return fmt.Sprintf("redis-server pid %d on %s", n.cmd.Process.Pid, n.Addr())
}

func (n *procNode) stop() { _ = n.kill() }

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' && i < len(s)-1 {
			if lines++; lines == n {
				return s[i+1:]
			}
		}
	}
	return s
}
