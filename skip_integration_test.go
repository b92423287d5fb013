package redlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestSkipWithoutRedis: the root module's packages pass without redis-server
// when REDLOCK_SKIP_INTEGRATION=1, as README and tools/install-deps.sh promise ("run
// only the tests that need no Redis"). Before #12 the examples ran on miniredis; since
// they start redis-server, a missing binary made their log.Fatal fail the whole root
// package and fenced, and internal/redisproc's tests failed instead of skipping. It
// runs `go test ./...` with a PATH that holds only the go command. Inside that run
// redis-server is missing, and this test skips itself there.
func TestSkipWithoutRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on PATH: this run is the check")
	}
	if testing.Short() {
		t.Skip("builds the module's test binaries")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	bin := t.TempDir()
	if err := os.Symlink(goBin, filepath.Join(bin, "go")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), goBin, "test", "-count=1", "./...")
	cmd.Env = append(os.Environ(), "PATH="+bin, "GOWORK=off", redistest.SkipEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test ./... without redis-server, %s=1: %v\n%s", redistest.SkipEnv, err, out)
	}
	if !strings.Contains(string(out), "ok  \tgithub.com/redlock-go/redlock\t") {
		t.Errorf("the root package did not run:\n%s", out)
	}
}
