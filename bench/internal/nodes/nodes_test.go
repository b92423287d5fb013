package nodes

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestStartServesAndStopKills(t *testing.T) {
	defer goleak.VerifyNone(t)
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("REDLOCK_SKIP_INTEGRATION") == "1" {
		t.Skip("redis-server not installed; REDLOCK_SKIP_INTEGRATION=1")
	}
	var set Set
	ns, err := set.First(2)
	if err != nil {
		t.Fatal(err)
	}
	if got, again := ns, mustFirst(t, &set, 1); len(got) != 2 || again[0] != got[0] {
		t.Fatalf("First(1) after First(2) started new nodes")
	}
	a, b := ns[0], ns[1]
	if a.Addr() == b.Addr() || a.PID() == b.PID() {
		t.Fatalf("two nodes share %s / pid %d", a.Addr(), a.PID())
	}
	if err := a.probe(); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if cpu, err := CPU(ns); err != nil || cpu < 0 {
		t.Errorf("CPU() = %v, %v", cpu, err)
	}
	pids := []int{a.PID(), b.PID()}
	if err := set.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		// Reaped by Stop: the PID is no longer ours to signal.
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after Stop (kill -0: %v)", pid, err)
		}
	}
	if c, err := net.DialTimeout("tcp", a.Addr(), 100*time.Millisecond); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Stop", a.Addr())
	}
	if _, err := os.Stat(a.dir); !os.IsNotExist(err) {
		t.Errorf("directory %s not removed: %v", a.dir, err)
	}
}

func mustFirst(t *testing.T, s *Set, n int) []*Node {
	t.Helper()
	ns, err := s.First(n)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}
