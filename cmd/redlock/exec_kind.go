//go:build unix

package main

import (
	"context"
	"flag"
	"strings"
	"time"

	"github.com/redlock-go/redlock"
)

// kindFlags are exec's flags for the kind of lock: fair (Options.Fair) and reentrant
// (redlock.WithOwner).
type kindFlags struct {
	fair      bool
	fairLease time.Duration
	owner     string
}

// addKindFlags registers --fair, --fair-lease and --owner on fs.
func addKindFlags(fs *flagSet) *kindFlags {
	k := &kindFlags{}
	fs.BoolVar(&k.fair, "fair", false, "take the lock in arrival order among every exec and Client that uses --fair\n(Options.Fair) on KEY: a queue on every node, no overtaking")
	fs.DurationVar(&k.fairLease, "fair-lease", 0, "with --fair: how long a waiter's queue entry lives unless renewed, whole\nmilliseconds; a waiter that died holds up the queue about this long\n(default: the library's, 1s or 10 × --node-timeout if more)")
	fs.StringVar(&k.owner, "owner", "", "take a reentrant hold for owner `name` (redlock.WithOwner): an exec with the\nsame owner gets KEY at once while another holds it; execs that share an\nowner do NOT exclude each other (default from $REDLOCK_OWNER)")
	return k
}

// resolve applies the kind flags to cfg: the fair options, and the owner from --owner
// or, when that flag was not given, from REDLOCK_OWNER. An empty --owner, an owner
// beginning with '-' (most likely a flag or the "--" before the command) and
// --fair-lease without --fair or not in whole milliseconds are usage errors. The
// combinations the library refuses (--fair with --fence, for now) are left to it:
// execSetup asks it (checkOptions).
func (k *kindFlags) resolve(e *env, fs *flagSet, cfg *execConfig) error {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "owner" })
	owner, from := k.owner, "--owner"
	if !given {
		owner, from = e.getenv("REDLOCK_OWNER"), "REDLOCK_OWNER"
	}
	switch {
	case given && owner == "":
		return usagef("--owner is empty: give the owner's name, or leave --owner out for a lock without owner")
	case strings.HasPrefix(owner, "-"):
		return usagef("%s %q begins with '-': most likely a flag or the \"--\" before the command took the owner's place", from, owner)
	case k.fairLease != 0 && !k.fair:
		return usagef("--fair-lease %v needs --fair", k.fairLease)
	case k.fairLease < 0 || k.fairLease%time.Millisecond != 0:
		return usagef("--fair-lease %v must be a positive whole number of milliseconds", k.fairLease)
	}
	cfg.owner = owner
	cfg.opts.Fair, cfg.opts.FairLease = k.fair, k.fairLease
	return nil
}

// checkOptions asks the library whether it takes opts, by making a Client over the
// nodes and closing it at once (go-redis connects only when a command is sent, so no
// node is contacted). Its refusal (for example Options.Fair with Options.Fencing,
// while the library does not support the pair) is a usage error, reported in the
// library's words.
func checkOptions(specs []nodeSpec, opts redlock.Options) error {
	_, closeAll, err := dial(specs, opts)
	if err != nil {
		return usagef("%v", err)
	}
	closeAll()
	return nil
}

// withOwner returns ctx carrying cfg's owner for the library (WithOwner), or ctx as it
// is for a lock without owner.
func (cfg execConfig) withOwner(ctx context.Context) context.Context {
	if cfg.owner == "" {
		return ctx
	}
	return redlock.WithOwner(ctx, cfg.owner)
}

// describeKind returns how --verbose names the lock's kind: "" for a plain lock.
func (cfg execConfig) describeKind() string {
	var parts []string
	if cfg.opts.Fair {
		parts = append(parts, "fair")
	}
	if cfg.owner != "" {
		parts = append(parts, "a hold of owner "+printable(cfg.owner))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
