package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestUsage: bad input gets a clear message and exit code 2, --help works everywhere,
// and nothing is contacted before the command line is known to be good.
func TestUsage(t *testing.T) {
	const nodes = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3"
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string // in stderr (or stdout for --help)
	}{
		{"no command", nil, nil, 2, "Commands:"},
		{"unknown command", nil, []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"help", nil, []string{"--help"}, 0, "exec"},
		{"help topic", nil, []string{"help", "status"}, 0, "Usage: redlock status"},
		{"demo help", nil, []string{"demo", "--help"}, 0, "--redis-server"},
		{"exec help", nil, []string{"exec", "-h"}, 0, "--conflict-exit-code"},
		{"status help", nil, []string{"status", "--help"}, 0, "--tls-server-name"},
		{"unknown flag", nil, []string{"exec", "--frob"}, 2, "flag provided but not defined: -frob"},
		{"bad duration", nil, []string{"exec", "--ttl", "ten"}, 2, `invalid value "ten" for flag -ttl`},
		{"no nodes", nil, []string{"exec", "--key", "k", "--", "true"}, 2, "no nodes: give --nodes"},
		{"missing key", nil, []string{"exec", "--nodes", nodes, "--", "true"}, 2, "missing --key"},
		{"missing command", nil, []string{"exec", "--nodes", nodes, "--key", "k"}, 2, "missing command"},
		{"missing command after --", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--"}, 2, "missing command"},
		{"empty node", nil, []string{"exec", "--nodes", nodes + ",", "--key", "k", "--", "true"}, 2, "node 4 of 4 is empty"},
		{"bad scheme", nil, []string{"exec", "--nodes", "http://h:1", "--key", "k", "--", "true"}, 2, "scheme must be redis://, rediss://, unix://, redis+cluster:// or rediss+cluster://"},
		{"cluster db", nil, []string{"status", "--nodes", "redis+cluster://h:1/2", "k"}, 2, "node 1 (redis+cluster://h:1/2): a Redis Cluster has only database 0"},
		{"cluster bad seed", nil, []string{"status", "--nodes", "redis+cluster://h:1?addr=h", "k"}, 2, "unable to parse addr param: h"},
		{"cluster seed twice", nil, []string{"status", "--nodes", "redis+cluster://h:1?addr=h:2,redis://h:2", "k"}, 2, "node 2 (redis://h:2) is the same server as node 1"},
		{"bad port", nil, []string{"exec", "--nodes", "redis://h:port", "--key", "k", "--", "true"}, 2, "node 1 (redis://h:xxxxx): invalid port"},
		{"bad db", nil, []string{"exec", "--nodes", "redis://h:1/x", "--key", "k", "--", "true"}, 2, "invalid database number"},
		{"duplicate node", nil, []string{"exec", "--nodes", nodes + ",redis://127.0.0.1:2/3", "--key", "k", "--", "true"}, 2, "node 4 (redis://127.0.0.1:2/3) is the same server as node 2"},
		{"ttl below drift", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--ttl", "2ms", "--", "true"}, 2, "drift allowance alone is 2.02ms"},
		{"ttl fraction of ms", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--ttl", "1500us", "--", "true"}, 2, "whole number of milliseconds"},
		{"ttl too short to renew", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--ttl", "500ms", "--", "true"}, 2, "at least 20 × --node-timeout (1s)"},
		{"grace too long", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--grace", "5s", "--", "true"}, 2, "at most 750ms"},
		{"nonblock and wait", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--wait", "1s", "--", "true"}, 2, "exclude each other"},
		{"drift factor zero", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--drift-factor", "0", "--", "true"}, 2, "must lie in (0, 1)"},
		{"tls flags without rediss", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--tls-ca", "ca.pem", "--", "true"}, 2, "no node is a rediss:// URL"},
		{"tls cert without key", nil, []string{"status", "--nodes", "rediss://h:1", "--tls-cert", "c.pem", "k"}, 2, "go together"},
		{"tls ca missing", nil, []string{"status", "--nodes", "rediss://h:1", "--tls-ca", "/nonexistent/ca.pem", "k"}, 2, "--tls-ca: open /nonexistent/ca.pem"},
		{"command not found", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--", "no-such-command-redlock"}, 127, "executable file not found"},
		// #15 section 5: settings that cannot work are refused before anything runs.
		{"drift leaves no renewal, 1s", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--ttl", "1s", "--drift-factor", "0.9", "--", "true"}, 2, "a renewal leaves a validity of 98ms (ttl − ttl × factor − 2ms), and exec needs more than 533ms"},
		{"drift leaves no renewal, 10s", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--ttl", "10s", "--drift-factor", "0.95", "--", "true"}, 2, "a renewal leaves a validity of 498ms"},
		{"drift leaves no renewal, numbers", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--ttl", "10s", "--drift-factor", "0.95", "--", "true"}, 2, "needs more than 4.433s (the next renewal ttl/3 = 3.333s later, 2 × --node-timeout = 100ms for two steps, and the last ttl/10 = 1s to stop the command); use a --drift-factor of at most 0.556"},
		{"node timeout below 1ms", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--ttl", "3ms", "--node-timeout", "1ns", "--", "true"}, 2, "--node-timeout 1ns is below 1ms"},
		{"port above 65535", nil, []string{"exec", "--nodes", "redis://127.0.0.1:99999", "--key", "k", "--nonblock", "--", "true"}, 2, "node 1 (redis://127.0.0.1:99999): port 99999 outside 1..65535"},
		{"status timeout below 1ms", nil, []string{"status", "--nodes", nodes, "--timeout", "10us", "k"}, 2, "--timeout 10µs is below 1ms"},
		{"port 0", nil, []string{"status", "--nodes", "redis://127.0.0.1:0", "k"}, 2, "port 0 outside 1..65535"},
		{"cluster seed port", nil, []string{"status", "--nodes", "redis+cluster://h:1?addr=h:70000", "k"}, 2, "port 70000 outside 1..65535"},
		{"key --", nil, []string{"exec", "--nodes", nodes, "--nonblock", "--key", "--", "true"}, 2, `--key "--" begins with '-'`},
		{"key like a flag", nil, []string{"exec", "--nodes", nodes, "--nonblock", "--key", "--ttl", "1s", "--", "true"}, 2, `--key "--ttl" begins with '-'`},
		{"owner empty", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--owner", "", "--", "true"}, 2, "--owner is empty"},
		{"owner --", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--owner", "--", "true"}, 2, `--owner "--" begins with '-'`},
		{"owner from the environment like a flag", map[string]string{"REDLOCK_OWNER": "--nonblock"}, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--", "true"}, 2, `REDLOCK_OWNER "--nonblock" begins with '-'`},
		{"fair lease without fair", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--fair-lease", "2s", "--", "true"}, 2, "--fair-lease 2s needs --fair"},
		{"fair lease fraction of ms", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--fair", "--fair-lease", "1500500us", "--", "true"}, 2, "--fair-lease 1.5005s must be a positive whole number of milliseconds"},
		{"fair lease negative", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--fair", "--fair-lease", "-1s", "--", "true"}, 2, "must be a positive whole number"},
		{"fair lease below the library's floor", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--fair", "--fair-lease", "100ms", "--", "true"}, 2, "FairLease 100ms must be whole milliseconds and at least 10 × NodeTimeout (500ms)"},
		{"command is a directory", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--", "/"}, 126, "is a directory"},
		{"command path not found", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--nonblock", "--", "/no/such/command"}, 127, "no such file"},
		{"nodes from the environment", map[string]string{"REDLOCK_NODES": "redis://h:1,redis://h:1"}, []string{"status", "k"}, 2, "node 2 (redis://h:1) is the same server as node 1"},
		{"status without key", nil, []string{"status", "--nodes", nodes}, 2, "missing KEY"},
		{"status two keys", nil, []string{"status", "--nodes", nodes, "a", "b"}, 2, "one KEY expected"},
		{"demo argument", nil, []string{"demo", "now"}, 2, `unexpected argument "now"`},
		{"demo workers", nil, []string{"demo", "--workers", "1"}, 2, "--workers 1 outside 2..16"},
		{"safety help", nil, []string{"safety", "--help"}, 0, "--html"},
		{"bench help", nil, []string{"bench", "--help"}, 0, "--local"},
		{"bench argument", nil, []string{"bench", "now"}, 2, `unexpected argument "now"`},
		{"bench local zero", nil, []string{"bench", "--local", "0"}, 2, "--local 0 outside 1..15"},
		{"bench local and nodes", nil, []string{"bench", "--local", "3", "--nodes", nodes}, 2, "exclude each other"},
		{"bench duration", nil, []string{"bench", "--duration", "1ms"}, 2, "--duration 1ms outside"},
		{"bench hold", nil, []string{"bench", "--hold", "1s"}, 2, "--hold 1s outside"},
		{"bench ttl", nil, []string{"bench", "--ttl", "2ms"}, 2, "drift allowance alone"},
		{"bench tls without nodes", nil, []string{"bench", "--tls-ca", "ca.pem"}, 2, "without --nodes"},
		{"bench bad node", nil, []string{"bench", "--nodes", "http://h:1"}, 2, "scheme must be redis://"},
		{"exec metrics addr", nil, []string{"exec", "--nodes", nodes, "--key", "k", "--metrics-addr", "localhost", "--", "true"}, 2, `--metrics-addr "localhost": want HOST:PORT`},
		{"demo metrics port", nil, []string{"demo", "--metrics-addr", "127.0.0.1:no-such-port"}, 2, `--metrics-addr "127.0.0.1:no-such-port": listen tcp`},
		{"bench metrics addr", nil, []string{"bench", "--metrics-addr", "9464"}, 2, `--metrics-addr "9464": want HOST:PORT`},
		{"safety argument", nil, []string{"safety", "all"}, 2, `unexpected argument "all"`},
		{"safety bad regexp", nil, []string{"safety", "--run", "("}, 2, "--run: error parsing regexp"},
		{"safety no match", nil, []string{"safety", "--run", "no such scenario"}, 2, "matches no scenario"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runInProcess(t, tc.env, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if got := r.stdout + r.stderr; !strings.Contains(got, tc.want) {
				t.Errorf("output does not contain %q:\n%s", tc.want, got)
			}
			if tc.code == 2 && !strings.Contains(r.stderr, "--help") && !strings.Contains(r.stderr, "Commands:") {
				t.Errorf("a usage error should point to --help:\n%s", r.stderr)
			}
		})
	}
}

// TestInterleavedFlags: status takes flags after its KEY too, and "--" ends the flags.
func TestInterleavedFlags(t *testing.T) {
	r := runInProcess(t, nil, "status", "k", "--nodes", "redis://h:1,redis://h:1")
	if r.code != 2 || !strings.Contains(r.stderr, "same server") {
		t.Fatalf("flags after KEY were not parsed: %d %s", r.code, r.stderr)
	}
	r = runInProcess(t, nil, "status", "--nodes", "redis://h:1,redis://h:1", "--", "--odd-key")
	if r.code != 2 || !strings.Contains(r.stderr, "same server") {
		t.Fatalf("-- did not end the flags: %d %s", r.code, r.stderr)
	}
}

// TestRenewalRuleAcceptsWhatWorks: the TTL and drift factor that checkRenewal lets
// through at its edge really are kept alive. With --ttl 1s and --drift-factor 0.46 a
// renewal leaves 538 ms of validity, just above the 533 ms the rule asks for; a
// command that runs 1.5 s (several renewals) must finish with its own exit code.
func TestRenewalRuleAcceptsWhatWorks(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	r := newCLI(t).run("", "exec", "--nodes", urls, "--key", "edge", "--ttl", "1s", "--drift-factor", "0.46",
		"--", "sleep", "1.5")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (renewed for 1.5 s):\n%s", r.code, r.stderr)
	}
}

// TestPlural: counts in messages read as English.
func TestPlural(t *testing.T) {
	for n, want := range map[int64]string{0: "0 nodes", 1: "1 node", 2: "2 nodes"} {
		if got := plural(n, "node"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestRenewalRuleSuggestion: the drift factor a refusal suggests is accepted, and one
// thousandth more is not, for several TTLs and node timeouts.
func TestRenewalRuleSuggestion(t *testing.T) {
	re := regexp.MustCompile(`use a --drift-factor of at most ([0-9.]+)`)
	for _, ttl := range []time.Duration{20 * time.Millisecond, 333 * time.Millisecond, time.Second, 10 * time.Second, time.Hour} {
		for _, nt := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 50 * time.Millisecond} {
			c := &connFlags{nodeTimeout: nt, driftFactor: 0.8}
			if ttl < 20*nt {
				continue
			}
			err := c.checkTTL(ttl, true)
			m := re.FindStringSubmatch(fmt.Sprint(err))
			if m == nil {
				if err == nil || !strings.Contains(err.Error(), "raise --ttl") {
					t.Errorf("ttl %v, node timeout %v: %v", ttl, nt, err)
				}
				continue
			}
			f, _ := strconv.ParseFloat(m[1], 64)
			if c.driftFactor = f; c.checkTTL(ttl, true) != nil {
				t.Errorf("ttl %v, node timeout %v: suggested factor %v refused: %v", ttl, nt, f, c.checkTTL(ttl, true))
			}
			if c.driftFactor = f + 0.001; c.checkTTL(ttl, true) == nil {
				t.Errorf("ttl %v, node timeout %v: factor %v above the suggestion %v accepted", ttl, nt, c.driftFactor, f)
			}
		}
	}
}
