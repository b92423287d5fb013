// Command redlock runs commands under a Redlock lock held across N independent Redis
// masters, shows who holds a lock, and demonstrates the algorithm on five local nodes.
//
//	redlock demo                                  # zero setup: five in-process nodes
//	redlock exec --nodes URL,... --key K -- cmd   # run cmd while holding the lock
//	redlock status --nodes URL,... KEY            # who holds KEY on each node
//	redlock safety --html report.html             # the fault matrix, with timelines
//	redlock bench                                 # this library's benchmarks on 5 local nodes
//
// Every subcommand takes --help. The flags, environment variables and exit codes are
// documented in docs/cli.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/cmd/redlock/safety"
)

// Exit codes shared by the subcommands. exec also passes its command's own code through;
// see docs/cli.md for the full table.
const (
	exitOK          = 0
	exitError       = 1   // status and demo: an error other than the ones below
	exitUsage       = 2   // bad flags, arguments or environment
	exitUnavailable = 69  // too few nodes answered for a majority (sysexits EX_UNAVAILABLE)
	exitNotAcquired = 75  // exec: the lock is held elsewhere (sysexits EX_TEMPFAIL)
	exitLost        = 122 // exec: the lock was lost while the command ran; it was killed
	exitExecFailure = 125 // exec: an error of redlock itself, not of the command
	exitCannotRun   = 126 // exec: the command was found but could not be started
	exitNotFound    = 127 // exec: the command was not found
)

// env is what a subcommand may touch of the outside world, so tests can run it in process.
type env struct {
	stdin  io.Reader
	stdout io.Writer // for results; also the command's stdout under exec
	stderr io.Writer // for diagnostics; also the command's stderr under exec
	getenv func(string) string
	// secrets redacts passwords from everything redlock itself prints; subcommands
	// register the passwords they parse.
	secrets *redactor
}

// out and errw return stdout and stderr with known passwords redacted.
func (e *env) out() io.Writer  { return e.secrets.writer(e.stdout) }
func (e *env) errw() io.Writer { return e.secrets.writer(e.stderr) }

// command is one subcommand. Adding one is adding an entry to commands.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) int
}

// commands lists the subcommands in the order the help shows them.
func commands() []command {
	return []command{
		{"demo", "five local nodes, contending workers, nodes killed and restored (zero setup)", runDemo},
		{"exec", "run a command while holding a lock, renewing it; kill the command if the lock is lost", runExec},
		{"status", "show each node's holder, TTL and fencing counter for a key, and the verdict", runStatus},
		{"bench", "benchmark this library: uncontended cycles and a hot key, on local nodes or yours", runBench},
		{"safety", "run the fault matrix (single node vs replication vs quorum); table, JSON and HTML timelines", runSafety},
	}
}

func main() {
	safety.RunWorkerIfAsked() // `redlock safety` starts itself again as a lock holder
	runReaperIfAsked()        // `redlock exec` starts itself again as its command's reaper
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, secrets: &redactor{}}
	os.Exit(run(context.Background(), e, os.Args[1:]))
}

// run dispatches to the subcommand named by args[0] and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	// go-redis logs failed dials to stderr on its own; redlock reports node failures in
	// its errors, where they belong.
	redis.SetLogger(quietLogger{})
	if e.secrets == nil {
		e.secrets = &redactor{}
	}
	if len(args) == 0 {
		mainUsage(e.errw())
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			return run(ctx, e, []string{args[1], "--help"})
		}
		mainUsage(e.out())
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(e.errw(), "redlock: unknown command %q\n\n", args[0])
	mainUsage(e.errw())
	return exitUsage
}

func mainUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("redlock: a lock held across N independent Redis masters (the Redlock algorithm)\n\n")
	b.WriteString("Usage:\n  redlock <command> [flags] [arguments]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'redlock <command> --help' for a command's flags. Start with: redlock demo\n")
	b.WriteString("Nodes come from --nodes or REDLOCK_NODES: redis://[user:password@]host:port[/db]\n")
	b.WriteString("or rediss://... for TLS, separated by commas. Documentation: docs/cli.md\n")
	io.WriteString(w, b.String())
}

// usageError is a mistake in the command line: reported with exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// reportSetup prints err for a subcommand and returns the exit code: 2 for usage
// errors (with a pointer to --help), other otherwise.
func reportSetup(e *env, name string, err error, other int) int {
	fmt.Fprintf(e.errw(), "redlock %s: %v\n", name, err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(e.errw(), "Run 'redlock %s --help' for usage.\n", name)
		return exitUsage
	}
	return other
}

// plural returns n with the noun, in the plural unless n is 1: "1 node", "3 nodes".
// Every noun it is given takes a plain "s".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// quietLogger discards go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
