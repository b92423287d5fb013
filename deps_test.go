package redlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// libraryImports lists the module paths the library packages (redlock and fenced) may
// depend on, directly or through them: go-redis, uuid and go-multierror with what they
// pull in themselves. Nothing of this repository's kit, lab, CLI or benchmarks, no peer
// library and no package "testing" may appear among the library's dependencies.
var libraryImports = []string{
	"github.com/redis/go-redis/v9",       // the clients
	"github.com/google/uuid",             // tokens
	"github.com/hashicorp/go-multierror", // per-node errors
	"github.com/hashicorp/errwrap",       // go-multierror's
	"github.com/cespare/xxhash/v2",       // go-redis's
	"go.uber.org/atomic",                 // go-redis's
	"golang.org/x/sys",                   // go-redis's
	"github.com/dgryski/go-rendezvous",   // go-redis's (Ring)
}

// TestLibraryImports enforces docs/design.md's rule: the library never imports the
// fault kit, the safety lab, the CLI, the benchmarks or the peers, and never links the
// testing package (which a user's binary would then carry).
func TestLibraryImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps",
		"-f", "{{if not .Standard}}{{.ImportPath}}{{end}}{{if eq .ImportPath \"testing\"}}testing{{end}}",
		".", "./fenced").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	own := map[string]bool{"github.com/redlock-go/redlock": true, "github.com/redlock-go/redlock/fenced": true}
	seen := 0
	for _, pkg := range strings.Fields(string(out)) {
		seen++
		if pkg == "testing" {
			t.Errorf("the library links package testing")
			continue
		}
		if strings.HasPrefix(pkg, "github.com/redlock-go/redlock") {
			if !own[pkg] {
				t.Errorf("the library depends on %s, a package of the kit, the lab, the CLI or an internal helper", pkg)
			}
			continue
		}
		allowed := false
		for _, m := range libraryImports {
			if pkg == m || strings.HasPrefix(pkg, m+"/") {
				allowed = true
				break
			}
		}
		if !allowed {
			t.Errorf("the library depends on %s, which is not in libraryImports", pkg)
		}
	}
	if seen < 3 {
		t.Fatalf("go list printed %d packages: %q", seen, out)
	}
}

// maxUserModules is #12's bound on the module graph of a user's module that imports
// the library (redlock and fenced), not counting the user's own module. The floor is 13:
// go-redis, uuid and go-multierror with their own requirements. Above it: this module
// and go.uber.org/goleak, which its tests use.
const maxUserModules = 15

// heavyModules must never enter a user's module graph through the library: the kit's,
// the lab's and the CLI's dependencies live in their own modules.
var heavyModules = []string{
	"github.com/docker/", "github.com/ory/dockertest", "github.com/Shopify/toxiproxy",
	"github.com/alicebob/miniredis", "github.com/yuin/gopher-lua", "github.com/rs/zerolog",
	"github.com/prometheus/", "github.com/anishathalye/porcupine",
	"github.com/go-redsync/", "github.com/bsm/redislock",
}

// TestUserModuleGraph builds the module graph a user gets from `go get` of this module:
// a module of its own that imports redlock and fenced and replaces this module by the
// working tree, outside any workspace. It checks #12's target with `go list -m all`.
func TestUserModuleGraph(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/user\n\ngo 1.26\n\n"+
		"require github.com/redlock-go/redlock v0.0.0-00010101000000-000000000000\n\n"+
		"replace github.com/redlock-go/redlock => "+root+"\n")
	write("main.go", "package main\n\nimport (\n\t_ \"github.com/redlock-go/redlock\"\n"+
		"\t_ \"github.com/redlock-go/redlock/fenced\"\n)\n\nfunc main() {}\n")
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "tidy")
	lines := strings.Split(strings.TrimSpace(goCmd("list", "-m", "all")), "\n")
	deps := lines[1:] // the first line is the user's own module
	for _, d := range deps {
		for _, h := range heavyModules {
			if strings.HasPrefix(d, h) {
				t.Errorf("the user's module graph holds %s", d)
			}
		}
	}
	if len(deps) > maxUserModules {
		t.Errorf("the user's module graph has %d modules besides its own, want at most %d:\n%s",
			len(deps), maxUserModules, strings.Join(deps, "\n"))
	}
	t.Logf("%d modules besides the user's own:\n%s", len(deps), strings.Join(deps, "\n"))
}
