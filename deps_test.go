package redlock_test

import (
	"os/exec"
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
