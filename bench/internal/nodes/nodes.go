// Package nodes starts throwaway redis-server processes on loopback for the
// benchmarks: no persistence (no snapshots, no append-only file), each on a free port
// with its own temporary directory, stopped by PID.
package nodes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoServer reports that redis-server is not on PATH.
var ErrNoServer = errors.New("redis-server not found on PATH")

const (
	readyTimeout = 10 * time.Second
	portAttempts = 5
)

// Node is one running redis-server process.
type Node struct {
	addr   string
	cmd    *exec.Cmd
	dir    string
	exited chan struct{} // closed once the process has been reaped
}

// Start starts one redis-server on a free 127.0.0.1 port and returns once it
// answers INFO as the process it started (not some other server that took the
// port). A server that cannot bind its port is retried on another one.
func Start() (*Node, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoServer, err)
	}
	var last error
	for range portAttempts {
		n, err := start(bin)
		if err == nil {
			return n, nil
		}
		last = err
	}
	return nil, last
}

func start(bin string) (*Node, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redlock-bench-")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--protected-mode", "no", "--logfile", logPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile // *os.File: no copying goroutines
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	n := &Node{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(n.exited)
	}()
	if err := n.waitReady(); err != nil {
		log, _ := os.ReadFile(logPath)
		_ = n.Stop()
		return nil, fmt.Errorf("redis-server on port %d: %v\n%s", port, err, lastLines(string(log), 10))
	}
	return n, nil
}

// Addr returns the node's address, "127.0.0.1:PORT".
func (n *Node) Addr() string { return n.addr }

// PID returns the process ID of the redis-server.
func (n *Node) PID() int { return n.cmd.Process.Pid }

// Stop kills the process with SIGKILL, waits until it has been reaped and
// removes its directory. It may be called more than once.
func (n *Node) Stop() error {
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing redis-server pid %d: %w", n.PID(), err)
	}
	<-n.exited
	return os.RemoveAll(n.dir)
}

// CPU returns the user plus system CPU time the process has used so far, read
// from /proc (Linux only; elsewhere it returns an error).
func (n *Node) CPU() (time.Duration, error) {
	return procCPU(n.PID())
}

// waitReady polls the node until INFO names our process, the process exits,
// or readyTimeout passes.
func (n *Node) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		err := n.probe()
		if err == nil {
			return nil
		}
		select {
		case <-n.exited:
			return errors.New("exited before it was ready")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", readyTimeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// probe asks INFO server over a raw connection and checks the process_id line.
func (n *Node) probe() error {
	conn, err := net.DialTimeout("tcp", n.addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := io.WriteString(conn, "INFO server\r\n"); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || size < 0 {
		return fmt.Errorf("INFO replied %q", strings.TrimSpace(head))
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), "process_id:"+strconv.Itoa(n.PID())+"\r\n") {
		return errors.New("another process answers on this port")
	}
	return nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, k int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-k):], "\n")
}

// Set is a growing set of nodes shared by the benchmarks of one process.
type Set struct {
	nodes []*Node
}

// First returns the first n nodes, starting more if fewer are running.
func (s *Set) First(n int) ([]*Node, error) {
	for len(s.nodes) < n {
		nd, err := Start()
		if err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, nd)
	}
	return s.nodes[:n], nil
}

// Stop stops every node of the set.
func (s *Set) Stop() error {
	var errs []error
	for _, n := range s.nodes {
		errs = append(errs, n.Stop())
	}
	s.nodes = nil
	return errors.Join(errs...)
}

// Addrs returns the addresses of nodes, in order.
func Addrs(nodes []*Node) []string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// CPU returns the CPU time used so far by all of nodes together.
func CPU(nodes []*Node) (time.Duration, error) {
	var sum time.Duration
	for _, n := range nodes {
		d, err := n.CPU()
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}
