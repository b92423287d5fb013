// Command mutants is the negative control of the randomized nemesis: it applies each
// known-bad change (a mutant) to a temporary copy of the repository (never to the
// working tree), runs the nemesis soak of the mutant's schedule family on the copy
// within a budget, and reports each mutant CAUGHT (the checker found a violation) or
// SURVIVED. It exits non-zero if any mutant survived or could not be run: a checker
// that catches none of them proves nothing.
//
//	go run ./cmd/mutants [-budget 90s] [-only name] [-runs n]
//
// Run it from anywhere inside the repository (make mutants does).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// edit replaces Old with New in File, where Old must occur exactly once; an empty Old
// replaces the whole file.
type edit struct {
	File, Old, New string
}

// mutant is one known-bad change, the schedule family that shows it, and the check
// that must see it (a violation of another check does not count as catching it).
type mutant struct {
	Name   string
	What   string
	Family string
	Check  string // "lease mutex", "availability", ...: nemesis.Violation.Check
	Edits  []edit
	// Budgets is how many of the run's budgets the mutant gets (0 means one): more
	// for a defect whose condition few schedules of its family bring about.
	Budgets int
}

// oldHandoff is scripts/handoff.lua before the fix: it sets the key again with PX ttl
// when the key already holds the new token, so a late copy of a handoff shortens the
// TTL that an Extend had raised.
const oldHandoff = `local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] or cur == ARGV[2] or not cur then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
`

var mutants = []mutant{{
	Name:   "old-handoff",
	What:   "handoff.lua re-SETs with PX when the key already holds the new token",
	Family: "handoff",
	Check:  "lease mutex",
	Edits:  []edit{{File: "scripts/handoff.lua", New: oldHandoff}},
}, {
	Name:   "drift-0",
	What:   "drift factor 0 (only the fixed 2 ms allowance), with node clocks running fast",
	Family: "drift",
	Check:  "lease mutex",
	Edits: []edit{{File: "options.go",
		Old: "o.DriftFactor = DefaultDriftFactor",
		New: "o.DriftFactor = 0"}},
}, {
	Name:   "quorum-n/2",
	What:   "quorum N/2 instead of N/2+1",
	Family: "mixed",
	Check:  "lease mutex",
	Edits: []edit{{File: "quorum.go",
		Old: "func (t tally) quorum() int { return t.n/2 + 1 }",
		New: "func (t tally) quorum() int { return t.n / 2 }"}},
}, {
	Name:   "no-cleanup",
	What:   "no clean-up after a failed attempt",
	Family: "cleanup",
	Check:  "availability",
	Edits: []edit{{File: "acquire.go",
		Old: "\tc.cleanup(ctx, req.key, req.owner, req.token, req.fair.waiterID(), r)\n\tkind := ErrUnavailable",
		New: "\tkind := ErrUnavailable"}},
}, {
	Name:   "extend-recreates",
	What:   "Extend re-creates a missing key",
	Family: "late-extend",
	Check:  "lease mutex",
	Edits: []edit{{File: "scripts/extend.lua",
		Old: "if redis.call('GET', KEYS[1]) ~= ARGV[1] then\n  return 0\nend",
		New: "local cur = redis.call('GET', KEYS[1])\nif not cur then\n  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n  return 1\nend\nif cur ~= ARGV[1] then\n  return 0\nend"}},
}, {
	Name:   "reentrant-any-owner",
	What:   "reentrant_acquire.lua adds a hold to another owner's key",
	Family: "reentrant",
	Check:  "lease mutex",
	Edits: []edit{{File: "scripts/reentrant_acquire.lua",
		Old: "if string.sub(cur, 1, #head) ~= head then\n  return 0\nend\n",
		New: ""}},
}, {
	Name:   "reentrant-release-all",
	What:   "reentrant_release.lua deletes the key with the first hold released",
	Family: "reentrant",
	Check:  "lease mutex",
	Edits: []edit{{File: "scripts/reentrant_release.lua",
		Old: "if left ~= '' then",
		New: "if false then"}},
}, {
	Name:   "fenced-no-check",
	What:   "fenced_acquire.lua takes the key with a proposal at or below the counter",
	Family: "fenced", // every Client fences on one key: stale proposals are common
	Check:  "fencing order",
	Edits: []edit{{File: "scripts/fenced_acquire.lua",
		Old: "if less(t, c) or (c == t and not mine) then\n  return '-' .. c\nend\n",
		New: ""}},
}, {
	Name: "reentrant-fence-no-check",
	What: "reentrant_fenced_acquire.lua starts a lease with a proposal at or below the counter",
	// A stale proposal needs a Client whose last counter fell behind other Clients'
	// leases. The reentrant family makes that likely: the owners of each worker's own
	// (most Clients) fence with a chance of 0.75 and few Clients share an owner, so
	// fenced leases change hands between Clients. (In Mixed it took from 17 s to over
	// 5 minutes.)
	Family: "reentrant",
	Check:  "fencing order",
	// Three budgets: in 8 runs of up to 4 minutes (2026-12-07) it was caught in
	// schedule 2, 2, 3, 2, 10, 3, 11 and 3 (about 8.5 s each), so one budget of 90 s
	// would have let it survive about one run in four. A third of the schedules
	// cannot catch it (no Client of the per-worker owner fences), and a third of
	// the others did. Within three budgets (about 31 schedules) it survives about
	// one run in 2,000.
	Budgets: 3,
	Edits: []edit{{File: "scripts/reentrant_fenced_acquire.lua",
		Old: "  if not less(c, t) then\n    return '-' .. c\n  end\n  redis.call('SET'",
		New: "  redis.call('SET'"}},
}, {
	Name:   "lead-grants",
	What:   "a lead-first attempt counts the lead's yes for the nodes it did not ask yet",
	Family: "handoff", // many waiters of several Clients: most attempts follow a wake-up
	Check:  "lease mutex",
	Edits: []edit{{File: "quorum.go",
		Old: "\t\tdefault:\n\t\t\th.s.enqueue(h.c, nil)\n",
		New: "\t\tcase out == outYes:\n\t\t\th.s.deliver(h.c, outYes, 0, nil)\n\t\tdefault:\n\t\t\th.s.enqueue(h.c, nil)\n"}},
}, {
	Name: "line-turn-grants",
	What: "acquire.lua answers yes to the line's head during its turn without taking the key",
	// The turn only refuses others (docs/design.md, "The line of a plain key"): taken
	// for a grant, the line node counts for a head that holds nothing there, and once
	// the turn is over another Client wins that node and the nodes the head missed.
	// A head cut off from two nodes other than the line node wins with the line
	// node's yes and the two left; another Client then gets the line node and the two
	// cut off. (In mixed it survived two runs of three, 13 and 14 schedules; in
	// handoff, where holders extend, three of three.)
	Family: "line",
	Check:  "lease mutex",
	// Two budgets: in 11 runs (CI and `-runs`, 2026-12-07) it was caught in 12 of 47
	// schedules of about 7.5 s, the latest in schedule 8 (66 s), so one budget lets
	// it survive about one run in 35; two, about one in 1,200.
	Budgets: 2,
	Edits: []edit{{File: "scripts/acquire.lua",
		Old: "if line then\n  local turn = redis.pcall('GET', KEYS[4])\n",
		New: "if line then\n  local turn = redis.pcall('GET', KEYS[4])\n  if turn == 'turn:' .. ARGV[4] then\n    return 1\n  end\n"}},
}, {
	Name:   "fair-set-no-nx",
	What:   "fair_acquire.lua's head takes the key with SET without NX",
	Family: "fair",
	Check:  "lease mutex",
	Edits: []edit{{File: "scripts/fair_acquire.lua",
		Old: "if redis.call('SET', key, value, 'NX', 'PX', ARGV[2]) then",
		New: "if redis.call('SET', key, value, 'PX', ARGV[2]) then"}},
}, {
	Name:   "fair-owner-release-all",
	What:   "fair_owner.lua frees an owner's fair key with the first of its holds released",
	Family: "fair", // a third of its Clients acquire for an owner, with nested holds
	Check:  "lease mutex",
	// Two budgets: in 8 runs (CI and `-runs`, 2026-12-07) it was caught in 8 of 26
	// schedules of about 9 s, the latest in schedule 7 (58 s), so one budget lets it
	// survive about one run in 40; two, about one in 1,700.
	Budgets: 2,
	Edits: []edit{{File: "scripts/fair_owner.lua",
		Old: "  if left == '' then\n",
		New: "  if true then\n"}},
}, {
	Name:   "fair-owner-any-key",
	What:   "fair_owner.lua adds an owner's hold to a key held by anyone, ahead of the queue",
	Family: "fair",
	Check:  "lease mutex",
	Edits: []edit{{File: "scripts/fair_owner.lua",
		Old: "  if not cur or string.sub(cur, 1, #head) ~= head then\n",
		New: "  if not cur then\n"}},
}, {
	Name:   "fair-any-waiter",
	What:   "fair_queue.lua lets any queued waiter take a free key, not only the head",
	Family: "fair",
	Check:  "fairness",
	Edits: []edit{{File: "scripts/fair_queue.lua",
		Old: "  if ahead > 0 then\n    return -(BEHIND - ahead)\n  end\n",
		New: ""}},
}, {
	Name:   "fair-hand-one-node",
	What:   "a fair waiter takes a lock that the nodes hand over on one node's notice",
	Family: "fair",
	Check:  "lease mutex",
	Edits: []edit{{File: "fair_hand.go",
		Old: "w.t.handedPX(e.id, e.hand, len(c.nodes)/2+1)",
		New: "w.t.handedPX(e.id, e.hand, 1)"}},
}, {
	Name:   "fair-hand-held-key",
	What:   "fair_queue.lua hands the key to the head of the queue even while it is held",
	Family: "fair",
	Check:  "lease mutex",
	Edits: []edit{{File: "scripts/fair_queue.lua",
		Old: "  if HANDS and redis.call('EXISTS', key) == 0 then\n",
		New: "  if HANDS then\n"}, {File: "scripts/fair_queue.lua",
		Old: "redis.call('SET', key, token, 'NX', 'PX', px)",
		New: "redis.call('SET', key, token, 'PX', px)"}},
}}

func main() {
	budget := flag.Duration("budget", 90*time.Second, "how long each mutant's randomized run may take to catch it")
	only := flag.String("only", "", "run only the mutant with this name")
	runs := flag.Int("runs", 1, "independent randomized runs per mutant (each from a fresh seed); every one must catch it")
	flag.Parse()
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(2)
	}
	files, err := trackedFiles(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(2)
	}
	failed := 0
	var summary []string
	for _, m := range mutants {
		if *only != "" && m.Name != *only {
			continue
		}
		for i := range *runs {
			line, ok := run(root, files, m, *budget*time.Duration(max(m.Budgets, 1)))
			if *runs > 1 {
				line = fmt.Sprintf("%s run %d/%d: %s", m.Name, i+1, *runs, line[len(fmt.Sprintf("%-17s ", m.Name)):])
			}
			summary = append(summary, line)
			if !ok {
				failed++
			}
		}
	}
	fmt.Println("\nmutants:")
	for _, l := range summary {
		fmt.Println("  " + l)
	}
	if len(summary) == 0 {
		fmt.Fprintln(os.Stderr, "mutants: no mutant named", *only)
		os.Exit(2)
	}
	if failed > 0 {
		fmt.Printf("%d of %d mutant runs did not catch their mutant\n", failed, len(summary))
		os.Exit(1)
	}
	fmt.Printf("all %d mutant runs caught their mutant\n", len(summary))
}

var (
	seedLine      = regexp.MustCompile(`^nemesis: seed (\d+) family `)
	violationLine = regexp.MustCompile(`^NEMESIS VIOLATION seed=(\d+) family=(\S+): (.*)$`)
)

// run applies m to a fresh copy of the repository and runs its family's soak there.
// It returns the summary line and whether m was caught.
func run(root string, files []string, m mutant, budget time.Duration) (string, bool) {
	fmt.Printf("=== mutant %s: %s (family %s, budget %v)\n", m.Name, m.What, m.Family, budget)
	tmp, err := os.MkdirTemp("", "redlock-mutant-")
	if err != nil {
		return fmt.Sprintf("%-17s ERROR: %v", m.Name, err), false
	}
	defer os.RemoveAll(tmp)
	if err := copyFiles(root, tmp, files); err != nil {
		return fmt.Sprintf("%-17s ERROR: copying the tree: %v", m.Name, err), false
	}
	note := ""
	for _, e := range m.Edits {
		same, err := apply(tmp, e)
		if err != nil {
			return fmt.Sprintf("%-17s ERROR: %v (update the mutant to the code)", m.Name, err), false
		}
		if same {
			note = " (note: the tree itself still has this defect)"
		}
	}
	// A soak stops at its first violation. One of another check (a side effect of
	// the mutant, say a fairness violation of a mutant that breaks mutual exclusion)
	// is not this mutant's proof, so the search goes on from a fresh seed with what is
	// left of the budget.
	start := time.Now()
	schedules, caught, seed, what, other := 0, false, "", "", ""
	var log bytes.Buffer
	for {
		left := budget - time.Since(start)
		if left < time.Second {
			break
		}
		var r soakResult
		r, err = soak(tmp, m, left, &log)
		schedules += r.schedules
		if r.other != "" && other == "" {
			other = r.other
		}
		if r.caught {
			caught, seed, what = true, r.seed, r.what
			break
		}
		if r.other == "" {
			break // survived what was left of the budget, or failed without a violation
		}
	}
	took := time.Since(start).Round(time.Second)
	switch {
	case caught:
		if other != "" {
			note += " (another check fired first: " + other[:min(len(other), 60)] + "…)"
		}
		if len(what) > 160 {
			what = what[:160] + "…"
		}
		return fmt.Sprintf("%-17s CAUGHT in schedule %d after %v (seed %d, replay: make soak SEED=%s FAMILY=%s): %s%s",
			m.Name, schedules, took, mustAtoi(seed), seed, m.Family, what, note), true
	case other != "" && err != nil:
		// Another check fired, and this one never: a false alarm or a side effect,
		// not this mutant's proof.
		return fmt.Sprintf("%-17s NOT CAUGHT by the %s check in %d schedules (%v); another check fired: %s%s",
			m.Name, m.Check, schedules, took, other, note), false
	case err == nil:
		return fmt.Sprintf("%-17s SURVIVED %d schedules in %v%s", m.Name, schedules, took, note), false
	}
	tail := log.String()
	if len(tail) > 3000 {
		tail = tail[len(tail)-3000:]
	}
	fmt.Println(tail)
	return fmt.Sprintf("%-17s ERROR: the run failed without a violation (%v)", m.Name, err), false
}

// soakResult is what one soak run of a mutated copy showed.
type soakResult struct {
	schedules         int
	caught            bool
	seed, what, other string
}

// soak runs the soak of m's family in the mutated copy tmp for budget, from a fresh
// seed, and reports the schedules it ran and the first violation of m's check (or of
// another check, other), appending its output to log. The run stops at the first
// schedule with a violation; err is the go test's result.
func soak(tmp string, m mutant, budget time.Duration, log *bytes.Buffer) (soakResult, error) {
	var r soakResult
	out := filepath.Join(tmp, "nemesis-out")
	cmd := exec.Command("go", "test", "-count=1", "-timeout", (budget + 5*time.Minute).String(), "-run", "^TestSoak$", "-v", ".")
	cmd.Dir = filepath.Join(tmp, "nemesis")
	cmd.Env = append(os.Environ(), "NEMESIS_FAMILY="+m.Family, "NEMESIS_DURATION="+budget.String(), "NEMESIS_OUT="+out, "NEMESIS_SEED=")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return r, err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait(); pw.Close() }()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		log.WriteString(l + "\n")
		if seedLine.MatchString(l) {
			r.schedules++
			fmt.Println("  " + l)
		}
		if v := violationLine.FindStringSubmatch(l); v != nil && !r.caught {
			fmt.Println("  " + l)
			if strings.HasPrefix(v[3], m.Check+" on ") {
				r.caught, r.seed, r.what = true, v[1], v[3]
			} else if r.other == "" {
				r.other = v[3]
			}
		}
	}
	return r, <-waited
}

func mustAtoi(s string) int {
	n := 0
	fmt.Sscanf(s, "%d", &n)
	return n
}

// repoRoot returns the top of the git work tree around the current directory.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not inside the repository: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// trackedFiles lists the files of the work tree as it is (committed or not, but not
// ignored), relative to root.
func trackedFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// copyFiles copies files from root into dst, keeping their paths and modes.
func copyFiles(root, dst string, files []string) error {
	for _, f := range files {
		src := filepath.Join(root, f)
		info, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) { // deleted in the work tree, not yet in git
			continue
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// apply makes one edit in the copy at dir; same reports that the file already was as
// the mutant wants it.
func apply(dir string, e edit) (same bool, err error) {
	path := filepath.Join(dir, e.File)
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	text := string(b)
	var next string
	if e.Old == "" {
		// Keep the file's leading comment block, replace the code after it.
		header := commentHeader(text)
		next = header + e.New
		same = strings.TrimSpace(text[len(header):]) == strings.TrimSpace(e.New)
	} else {
		if n := strings.Count(text, e.Old); n != 1 {
			return false, fmt.Errorf("%s: the text to replace occurs %d times, want once: %q", e.File, n, e.Old)
		}
		next = strings.Replace(text, e.Old, e.New, 1)
	}
	return same, os.WriteFile(path, []byte(next), 0o644)
}

// commentHeader returns the leading lines of a Lua file that are comments.
func commentHeader(text string) string {
	end := 0
	for _, line := range strings.SplitAfter(text, "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		end += len(line)
	}
	return text[:end]
}
