package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childServers returns the PIDs of the redis-server processes whose parent is pid.
func childServers(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < 0 || s[open+1:end] != "redis-server" {
			continue
		}
		fields := strings.Fields(s[end+1:]) // state, ppid, ...
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(strings.Fields(s)[0])
			out = append(out, child)
		}
	}
	return out
}

// TestSafetyInterrupted: SIGINT while a scenario runs ends the command with 130 after
// stopping the scenario's nodes.
func TestSafetyInterrupted(t *testing.T) {
	needRedisServer(t)
	cmd := newCLI(t).command("", "safety", "--run", "Redlock N=5/kill 3 of 5")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var servers []int
	for deadline := time.Now().Add(10 * time.Second); len(servers) < 5 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		servers = childServers(cmd.Process.Pid) // polled: nothing tells us from outside
	}
	if len(servers) < 5 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the scenario's 5 nodes never ran (saw %v)", servers)
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, stderr.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v to stop after SIGINT", took)
	}
	for _, pid := range servers {
		if processRunning(pid) {
			t.Errorf("redis-server pid %d still runs after the command", pid)
		}
	}
}
