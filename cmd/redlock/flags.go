package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/redlock-go/redlock"
)

// flagSet is a subcommand's flags with a usage text that spells flags the GNU way
// (--name), as the documentation does; the flag package accepts both -name and --name.
type flagSet struct {
	*flag.FlagSet
	synopsis string // "redlock status [flags] KEY"
	about    string // a paragraph on what the command does
}

func newFlagSet(name, synopsis, about string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse errors are printed by parse, once
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, synopsis: synopsis, about: about}
}

// usage prints the synopsis, the description and every flag.
func (f *flagSet) usage(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\n%s\n\nFlags:\n", f.synopsis, strings.TrimSpace(f.about))
	f.VisitAll(func(fl *flag.Flag) {
		kind, text := flag.UnquoteUsage(fl)
		head := "  --" + fl.Name
		if kind != "" {
			head += " " + kind
		}
		fmt.Fprintf(&b, "%-28s %s", head, strings.ReplaceAll(text, "\n", "\n"+strings.Repeat(" ", 29)))
		if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "0" && fl.DefValue != "0s" {
			fmt.Fprintf(&b, " (default %s)", fl.DefValue)
		}
		b.WriteByte('\n')
	})
	io.WriteString(w, b.String())
}

// parse parses args. With interleaved, flags may also follow positional arguments
// (redlock status KEY --nodes ...); everything after "--" is positional. It returns the
// positional arguments, or done with the exit code when the caller must stop: after
// --help (0) or a parse error (2).
func (f *flagSet) parse(e *env, args []string, interleaved bool) (pos []string, done bool, code int) {
	for {
		err := f.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			f.usage(e.out())
			return nil, true, exitOK
		}
		if err != nil {
			fmt.Fprintf(e.errw(), "redlock %s: %v\nRun 'redlock %s --help' for usage.\n", f.Name(), err, f.Name())
			return nil, true, exitUsage
		}
		rest := f.Args()
		if !interleaved || len(rest) == 0 || (len(args) > len(rest) && args[len(args)-len(rest)-1] == "--") {
			return append(pos, rest...), false, 0
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// connFlags are the flags that say which nodes to use and how to reach them, and, for
// the subcommands that take locks, the algorithm's timing options.
type connFlags struct {
	nodes       string
	tls         tlsFiles
	nodeTimeout time.Duration
	driftFactor float64
}

// addConnFlags registers the node and connection flags on fs, and with locking also
// --node-timeout and --drift-factor.
func addConnFlags(fs *flagSet, locking bool) *connFlags {
	c := &connFlags{}
	fs.StringVar(&c.nodes, "nodes", "", "comma-separated node `URLs`: redis://[user:password@]host:port[/db] or rediss://...;\na Redis Cluster as one node: redis+cluster://host:port[?addr=host:port...]\n(default from $REDLOCK_NODES)")
	fs.StringVar(&c.tls.ca, "tls-ca", "", "PEM `file` of the CAs that sign the rediss:// nodes' certificates\n(default: the system's CAs)")
	fs.StringVar(&c.tls.cert, "tls-cert", "", "PEM `file` of the client certificate for rediss:// nodes (with --tls-key)")
	fs.StringVar(&c.tls.key, "tls-key", "", "PEM `file` of the client certificate's private key (with --tls-cert)")
	fs.StringVar(&c.tls.serverName, "tls-server-name", "", "the `name` to verify in the rediss:// nodes' certificates\n(default: each URL's host)")
	c.nodeTimeout, c.driftFactor = redlock.DefaultNodeTimeout, redlock.DefaultDriftFactor
	if locking {
		fs.DurationVar(&c.nodeTimeout, "node-timeout", c.nodeTimeout, "how long one step waits for a node before counting it as failed (at least 1ms)")
		fs.Float64Var(&c.driftFactor, "drift-factor", c.driftFactor, "share of the TTL set aside for clock drift:\nvalidity = ttl − elapsed − (ttl × factor + 2ms); exec needs a validity\nabove ttl/3 + ttl/10 + 2 × node-timeout, to renew in time")
	}
	return c
}

// urls returns the node URLs from --nodes, else from REDLOCK_NODES. Every password in
// them is registered with the redactor before anything can print it.
func (c *connFlags) urls(e *env) ([]string, error) {
	list, from := c.nodes, "--nodes"
	if strings.TrimSpace(list) == "" {
		list, from = e.getenv("REDLOCK_NODES"), "REDLOCK_NODES"
	}
	if strings.TrimSpace(list) == "" {
		return nil, usagef("no nodes: give --nodes URL,URL,... or set REDLOCK_NODES")
	}
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		e.secrets.addFromURL(parts[i])
	}
	for i, p := range parts {
		if p == "" {
			return nil, usagef("%s: node %d of %d is empty (stray comma?)", from, i+1, len(parts))
		}
	}
	return parts, nil
}

// minNodeTimeout is the shortest --node-timeout accepted. No node answers a step
// faster than a loopback round trip and a scheduler's wake-up; below this every step
// would count every node as failed, and an Acquire would retry for ever.
const minNodeTimeout = time.Millisecond

// check validates the connection flags that do not depend on the nodes.
func (c *connFlags) check() error {
	if c.nodeTimeout <= 0 {
		return usagef("--node-timeout %v must be positive", c.nodeTimeout)
	}
	if c.nodeTimeout < minNodeTimeout {
		return usagef("--node-timeout %v is below %v: no node answers that fast, so every step would fail and the lock would never be taken", c.nodeTimeout, minNodeTimeout)
	}
	if c.driftFactor <= 0 || c.driftFactor >= 1 { // Options reads 0 as "the default"
		return usagef("--drift-factor %v must lie in (0, 1)", c.driftFactor)
	}
	return nil
}

// driftOf returns the drift allowance the library sets aside for ttl: ttl × factor + 2 ms
// (the formula of Options.DriftFactor).
func driftOf(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + 2*time.Millisecond
}

// The room exec asks of each validity, in shares of the TTL: a renewal every
// ttl/renewDivisor at the latest, and the last ttl/stopDivisor kept for stopping the
// command (SIGTERM, --grace, SIGKILL ttl/40 before the validity ends; see maxGrace).
// KeepAlive itself counts in the validity a renewal gives, V = ttl − drift (a renewal
// every V/3, the work stopped at Until − V/10); as V < ttl, exec's rule is the stricter
// one, and Options.CheckKeepAliveTTL, the library's own, is checked as well.
const (
	renewDivisor = 3
	stopDivisor  = 10
)

// checkTTL rejects a TTL that cannot give a useful lock: not whole milliseconds (Redis
// takes milliseconds), not above the drift allowance, or, with keepAlive, one that
// KeepAlive cannot keep (see checkRenewal).
func (c *connFlags) checkTTL(ttl time.Duration, keepAlive bool) error {
	if ttl <= 0 || ttl%time.Millisecond != 0 {
		return usagef("--ttl %v must be a positive whole number of milliseconds", ttl)
	}
	if d := driftOf(ttl, c.driftFactor); ttl <= d {
		return usagef("--ttl %v is too small: the drift allowance alone is %v", ttl, d)
	}
	if !keepAlive {
		return nil
	}
	if min := 20 * c.nodeTimeout; ttl < min {
		return usagef("--ttl %v is too small to renew safely: use at least 20 × --node-timeout (%v)", ttl, min)
	}
	if err := c.checkRenewal(ttl); err != nil {
		return err
	}
	opts := redlock.Options{NodeTimeout: c.nodeTimeout, DriftFactor: c.driftFactor}
	if err := opts.CheckKeepAliveTTL(ttl); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// checkRenewal rejects a TTL and drift factor whose validity is too short for even one
// renewal. A step (acquire or extend) that may take the node timeout leaves a validity
// of ttl − (ttl × factor + 2 ms); the next renewal starts ttl/3 after the step ended,
// may take the node timeout itself, and must be confirmed before the last ttl/10, which
// belongs to the command's stop. Without room for that, KeepAlive gives the lock up
// before its first renewal and exec kills the command as soon as it has started.
func (c *connFlags) checkRenewal(ttl time.Duration) error {
	validity := ttl - driftOf(ttl, c.driftFactor)
	renew, stop := ttl/renewDivisor, ttl/stopDivisor
	need := renew + stop + 2*c.nodeTimeout
	if validity > need {
		return nil
	}
	fix := "raise --ttl"
	// The largest factor that would do, in thousandths.
	f := math.Floor(float64(ttl-2*time.Millisecond-need)/float64(ttl)*1000) / 1000
	for f > 0 && ttl-driftOf(ttl, f) <= need {
		f = math.Round(f*1000-1) / 1000
	}
	if f > 0 {
		fix = fmt.Sprintf("use a --drift-factor of at most %v", f)
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return usagef("--ttl %v with --drift-factor %v cannot be kept alive: a renewal leaves a validity of %v "+
		"(ttl − ttl × factor − 2ms), and exec needs more than %v (the next renewal ttl/3 = %v later, "+
		"2 × --node-timeout = %v for two steps, and the last ttl/10 = %v to stop the command); %s",
		ttl, c.driftFactor, ms(validity), ms(need), ms(renew), 2*c.nodeTimeout, ms(stop), fix)
}

// checkKey rejects a lock name exec cannot have meant: empty, or beginning with '-',
// which is a flag or the "--" before the command taken as --key's value
// ("--key -- cmd" would lock the key "--").
func checkKey(key string) error {
	switch {
	case key == "":
		return usagef("missing --key")
	case strings.HasPrefix(key, "-"):
		return usagef("--key %q begins with '-': most likely a flag or the \"--\" before the command took the key's place; exec takes no key beginning with '-'", key)
	}
	return nil
}
