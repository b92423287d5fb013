package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMutantsApply checks every mutant against the tree as it is: each text it
// replaces occurs exactly once, and a mutant that replaces a whole script does not
// find the tree already broken that way. When the code moves on, this fails first,
// rather than make mutants.
func TestMutantsApply(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, m := range mutants {
		if !slices.Contains([]string{"lease mutex", "fenced register", "fencing order", "availability", "fairness"}, m.Check) {
			t.Errorf("%s: the check that must catch it is %q, not one of the nemesis' checks", m.Name, m.Check)
		}
		for _, e := range m.Edits {
			b, err := os.ReadFile(filepath.Join(root, e.File))
			if err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
			text := string(b)
			if e.Old == "" {
				header := commentHeader(text)
				if header == "" {
					t.Errorf("%s: %s has no comment header to keep", m.Name, e.File)
				}
				if strings.TrimSpace(text[len(header):]) == strings.TrimSpace(e.New) {
					t.Errorf("%s: %s already is the mutant", m.Name, e.File)
				}
				continue
			}
			if n := strings.Count(text, e.Old); n != 1 {
				t.Errorf("%s: %q occurs %d times in %s, want once", m.Name, e.Old, n, e.File)
			}
		}
	}
}

func TestApplyKeepsTheHeader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.lua")
	if err := os.WriteFile(path, []byte("-- a\n-- b\nreturn 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	same, err := apply(dir, edit{File: "s.lua", New: "return 0\n"})
	if err != nil || same {
		t.Fatalf("apply = %v, %v", same, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "-- a\n-- b\nreturn 0\n" {
		t.Errorf("got %q", b)
	}
	if _, err := apply(dir, edit{File: "s.lua", Old: "missing", New: "x"}); err == nil {
		t.Error("a missing anchor was not reported")
	}
}
