package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

const statusAbout = `
Shows, for KEY on every node: whether the node answered, the token of the holder
(shortened), the key's remaining time to live (PTTL) and the fencing counter (written
when locks are taken with --fence: a name in KEY's hash slot such as fence:{KEY}, and
on a plain node also KEY:fence; the larger is shown). The last line is the verdict:

  held     one token is on a majority of the nodes
  free     no node that answered has the key, and too few could not be read to hide
           a holder
  split    tokens are present but none on a majority: nobody holds the lock; the keys
           expire by their TTL
  unknown  too many nodes could not be read to tell (exit code 69)

The view is a snapshot taken on each node at about the same time; a holder's own
validity is shorter than the PTTL shown (it subtracts the time its acquire took and the
drift allowance).

An owner's key (exec --owner) shows "owner NAME" as the holder and a HOLDS column with
the holds each node lists; the verdict counts a node for the owner whatever holds it
lists. A fair key (exec --fair) gets a second table: each node's ticket counter and its
waiters in the order they get the lock, with ticket and remaining entry lease.`

// runStatus is the status subcommand.
func runStatus(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet("status", "redlock status [flags] KEY", statusAbout)
	cf := addConnFlags(fs, false)
	timeout := fs.Duration("timeout", time.Second, "how long to wait for each node (at least 1ms)")
	pos, done, code := fs.parse(e, args, true)
	if done {
		return code
	}
	specs, key, err := statusSetup(e, cf, *timeout, pos)
	if err != nil {
		return reportSetup(e, "status", err, exitError)
	}
	rows := queryStatus(ctx, specs, key, *timeout)
	v := judge(rows)
	printStatus(e.out(), key, rows, v)
	if v.kind == verdictUnknown {
		return exitUnavailable
	}
	return exitOK
}

func statusSetup(e *env, cf *connFlags, timeout time.Duration, pos []string) ([]nodeSpec, string, error) {
	urls, err := cf.urls(e)
	if err != nil {
		return nil, "", err
	}
	switch {
	case len(pos) == 0:
		return nil, "", usagef("missing KEY")
	case len(pos) > 1:
		return nil, "", usagef("one KEY expected, got %d arguments", len(pos))
	case pos[0] == "":
		return nil, "", usagef("empty KEY")
	case timeout <= 0:
		return nil, "", usagef("--timeout %v must be positive", timeout)
	case timeout < minNodeTimeout:
		return nil, "", usagef("--timeout %v is below %v: no node answers that fast, so every node would read as unreachable", timeout, minNodeTimeout)
	}
	specs, err := parseNodes(urls, cf.tls, cf.nodeTimeout)
	return specs, pos[0], err
}

// nodeStatus is what one node said about the key.
type nodeStatus struct {
	name  string
	err   error  // the node did not answer, or answered with an error
	token string // "" when the key does not exist
	pttl  time.Duration
	fence string // "" when the counter does not exist
	// fenceErr is why a counter could not be read (a key of another type): a problem
	// of the counter alone, shown apart from the lock key's state.
	fenceErr error
	// fair is the key's fair queue (redlock.FairKeys), nil when the node has none;
	// fairErr is why it could not be read, shown apart like fenceErr.
	fair    *fairQueue
	fairErr error
}

// queryStatus reads the key, its PTTL and its fencing counter from every node at once.
func queryStatus(ctx context.Context, specs []nodeSpec, key string, timeout time.Duration) []nodeStatus {
	rows := make([]nodeStatus, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Go(func() { rows[i] = queryNode(ctx, s, key, timeout) })
	}
	wg.Wait()
	return rows
}

func queryNode(ctx context.Context, s nodeSpec, key string, timeout time.Duration) nodeStatus {
	rdb := snapshotClient(s, timeout)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	st := nodeStatus{name: s.name}
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	names := redlock.FenceKeys(rdb, key)
	fences := make([]*redis.StringCmd, len(names))
	var fair *redis.Cmd
	// On a Cluster member the commands go to the master of KEY's slot, which also
	// holds the counter (redlock.FenceKeys keeps it in that slot). The pipeline's own
	// error is its first failed command's: each command is judged on its own instead,
	// so that a counter of the wrong type does not hide the lock key.
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		pttl = p.PTTL(ctx, key)
		for i, name := range names {
			fences[i] = p.Get(ctx, name)
		}
		fair = queueFairRead(ctx, p, key)
		return nil
	})
	// A failure of the connection itself (refused, WRONGPASS at the handshake) may
	// be returned without being set on any command.
	carried := get.Err() != nil || pttl.Err() != nil || fair.Err() != nil
	for _, f := range fences {
		carried = carried || f.Err() != nil
	}
	if err != nil && !carried {
		st.err = err
		return st
	}
	for _, err := range []error{get.Err(), pttl.Err()} {
		if err != nil && !errors.Is(err, redis.Nil) {
			st.err = err
			return st
		}
	}
	st.token, _ = get.Result()
	st.pttl = pttl.Val()
	st.fence, st.fenceErr = highest(names, fences)
	st.fair, st.fairErr = fairResult(fair)
	return st
}

// highest returns the counter kept under several names: the largest value, "" when
// none exists, and a value that is not a number as it is (the key is not a counter);
// and the errors of the names that could not be read.
func highest(names []string, cmds []*redis.StringCmd) (string, error) {
	best := int64(-1)
	var errs []error
	for i, cmd := range cmds {
		v, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", printable(names[i]), err))
			continue
		}
		// As fence_read.lua: a counter is a decimal integer from 0 to 2^63 − 1 without
		// leading zeros; anything else makes every fenced acquire on the node fail.
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != v {
			if len(v) > 40 {
				v = v[:40] + "..."
			}
			errs = append(errs, fmt.Errorf("%s holds %q, not a decimal integer from 0 to %d", printable(names[i]), v, int64(math.MaxInt64)))
			continue
		}
		best = max(best, n)
	}
	if best < 0 {
		return "", errors.Join(errs...)
	}
	return strconv.FormatInt(best, 10), errors.Join(errs...)
}

// snapshotClient returns a client for a read-only snapshot of the node: every phase
// bounded by the timeout, and a read ended by the context's deadline (no write here can
// land late and matter).
func snapshotClient(s nodeSpec, timeout time.Duration) redis.UniversalClient {
	if s.cluster != nil {
		o := *s.cluster
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = timeout, timeout, timeout
		o.ContextTimeoutEnabled = true
		return redis.NewClusterClient(&o)
	}
	o := *s.opts
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = timeout, timeout, timeout
	o.ContextTimeoutEnabled = true
	return redis.NewClient(&o)
}

type verdictKind string

const (
	verdictHeld    verdictKind = "held"
	verdictFree    verdictKind = "free"
	verdictSplit   verdictKind = "split"
	verdictUnknown verdictKind = "unknown"
)

// verdict is the conclusion drawn from all nodes.
type verdict struct {
	kind verdictKind
	text string
}

// judge decides whether the key is held by a majority, free, split or unknown.
func judge(rows []nodeStatus) verdict {
	n := len(rows)
	quorum := n/2 + 1
	silent := 0
	count := map[string]int{}
	shown := map[string]string{} // how each holder is shown
	for _, r := range rows {
		switch {
		case r.err != nil:
			silent++
		case r.token != "":
			id, s := holderOf(r.token)
			count[id]++
			shown[id] = s
		}
	}
	tokens := make([]string, 0, len(count))
	for t := range count {
		tokens = append(tokens, t)
	}
	sort.Slice(tokens, func(i, j int) bool {
		if count[tokens[i]] != count[tokens[j]] {
			return count[tokens[i]] > count[tokens[j]]
		}
		return tokens[i] < tokens[j]
	})
	best := 0
	if len(tokens) > 0 {
		best = count[tokens[0]]
	}
	switch {
	case best >= quorum:
		return verdict{verdictHeld, fmt.Sprintf("held by a majority: %s on %d of %d nodes (%d needed)", tokenOrOwner(shown[tokens[0]]), best, n, quorum)}
	case best+silent >= quorum:
		return verdict{verdictUnknown, fmt.Sprintf("unknown: %d of %d nodes could not be read, enough to hide a majority (%d needed)", silent, n, quorum)}
	case len(tokens) == 0:
		return verdict{verdictFree, fmt.Sprintf("free: no node that answered has the key (%d of %d answered)", n-silent, n)}
	}
	parts := make([]string, len(tokens))
	for i, t := range tokens {
		parts[i] = fmt.Sprintf("%s on %d", shown[t], count[t])
	}
	return verdict{verdictSplit, fmt.Sprintf("split: no token on a majority (%s; %d needed), so nobody holds the lock; the keys expire by their TTL", strings.Join(parts, ", "), quorum)}
}

// printStatus writes the table, the fair queues if any, and the verdict. A HOLDS
// column (an owner's hold count) appears only when a node has an owner's key.
func printStatus(w io.Writer, key string, rows []nodeStatus, v verdict) {
	fmt.Fprintf(w, "key %q on %s (%d needed for a majority)\n", key, plural(int64(len(rows)), "node"), len(rows)/2+1)
	owners := anyOwner(rows)
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	cells := func(c []string) string {
		if !owners {
			c = append(c[:3:3], c[4:]...) // no HOLDS
		}
		return strings.Join(c, "\t")
	}
	fmt.Fprintln(tw, cells([]string{"NODE", "REACHABLE", "HOLDER", "HOLDS", "PTTL", "FENCE", ""}))
	for _, r := range rows {
		fmt.Fprintln(tw, cells(statusCells(r)))
	}
	tw.Flush()
	for line := range strings.Lines(table.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
	printQueues(w, rows)
	fmt.Fprintf(w, "verdict: %s\n", v.text)
}

// statusCells returns a node's row: node, reachable, holder, holds, PTTL, fence and a
// note.
func statusCells(r nodeStatus) []string {
	if r.err != nil {
		reachable := "no"
		var reply redis.Error
		if errors.As(r.err, &reply) {
			reachable = "yes" // it answered, with an error (WRONGPASS, WRONGTYPE, LOADING, ...)
		}
		return []string{r.name, reachable, "-", "-", "-", "-", r.err.Error()}
	}
	holder, ttl := "-", "-"
	if r.token != "" {
		_, holder = holderOf(r.token)
		switch {
		case r.pttl >= 0:
			ttl = r.pttl.Round(time.Millisecond).String()
		case r.pttl == -1: // go-redis passes Redis's -1 (no TTL) through as a Duration of -1
			ttl = "no TTL"
		}
	}
	fence, note := "-", ""
	if r.fence != "" {
		fence = printable(r.fence)
	}
	if r.fenceErr != nil {
		if r.fence == "" {
			fence = "?"
		}
		note = "fencing counter " + strings.ReplaceAll(r.fenceErr.Error(), "\n", "; ")
	}
	return []string{r.name, "yes", holder, ownerCell(r), ttl, fence, note}
}

// tokenOrOwner returns how the verdict names a holder: "token X…" or "owner NAME".
func tokenOrOwner(shown string) string {
	if strings.HasPrefix(shown, "owner ") {
		return shown
	}
	return "token " + shown
}

// short returns the first 8 characters of a token, quoted if it is not printable text.
func short(token string) string { return clip(token, 8) }

// clip returns the first keep characters of s, quoted if it is not printable text.
func clip(s string, keep int) string {
	t := printable(s)
	if utf8.RuneCountInString(t) <= keep+1 {
		return t
	}
	return string([]rune(t)[:keep]) + "…"
}

// printable returns s, or s quoted when it holds bytes that are not printable text.
func printable(s string) string {
	q := strconv.Quote(s)
	if q[1:len(q)-1] == s && !strings.ContainsAny(s, " \t") {
		return s
	}
	return q
}
