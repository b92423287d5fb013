package redisproc

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestProbeChecksTheProcess: probe accepts the server it started only under that
// server's pid, so that another server that took the port does not count as ready.
// Nothing of the go-redis client outlives a probe.
func TestProbeChecksTheProcess(t *testing.T) {
	addr, pid := launchServer(t)
	before := goleak.IgnoreCurrent()
	if err := Probe(addr, pid); err != nil {
		t.Errorf("probe with the server's pid: %v", err)
	}
	if err := Probe(addr, 0); err != nil {
		t.Errorf("probe without a pid: %v", err)
	}
	err := Probe(addr, pid+100000)
	if err == nil || !strings.Contains(err.Error(), "other than pid") {
		t.Errorf("probe with another pid = %v, want an error naming the other process", err)
	}
	goleak.VerifyNone(t, before)
}

// TestProbeLoading: a server that answers every command with LOADING (as one loading
// its append-only file does) is not ready.
func TestProbeLoading(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		for readCommand(r) == nil {
			if _, err := io.WriteString(conn, "-LOADING Redis is loading the dataset in memory\r\n"); err != nil {
				return
			}
		}
	}()
	err = Probe(l.Addr().String(), 0)
	if err == nil || !strings.Contains(err.Error(), "LOADING") {
		t.Errorf("probe of a loading server = %v, want the LOADING error", err)
	}
	<-served // probe closed its connection
}

// readCommand reads one RESP command (an array of bulk strings).
func readCommand(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return err
	}
	for range 2 * n { // "$len" and the argument
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
	}
	return nil
}
