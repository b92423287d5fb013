package redlock

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Node URLs carry passwords, and the errors of net/url and go-redis quote the parts of
// a URL they could not parse, parts of the password included ("invalid URL escape
// "%zz""). So no error of NewFromURLs is made from the URL as given: the URL is shown
// redacted, and the cause is found again by parsing the redacted text.

// redacted stands in for a password.
const redacted = "xxxxx"

// RedactURL returns a node URL with its password replaced by "xxxxx", wherever a parser
// could find one, also in a URL that does not parse: the form in which NewFromURLs
// shows URLs in errors and node names. A user name without a password
// ("redis://secret@host", which redis-cli reads as a password) is replaced too. A
// program that prints or logs node URLs, or the errors of parsing them, should print
// this form only.
func RedactURL(raw string) string { return redactURL(raw) }

// redactURL returns raw with its password replaced by "xxxxx", wherever a parser could
// find it. It works on the text, so it also redacts what does not parse, and it
// redacts the union of what two readings call secret:
//   - the text between the first ':' of the user info and the last '@' after the
//     scheme (every '@' of a password that was not percent-encoded included), all the
//     user info when it has no ':' (markUserInfo), the same for the user info up to
//     the first '@', or, when there is no '@', what may be a password where the port
//     goes (secretPort);
//   - the URL's own structure: the password of the user info inside the host part
//     (which ends at the first '/', '?' or '#'), and the value of the first query
//     parameter whose name suggests a secret, with everything after it (an '&', '@'
//     or '#' in the secret would make the rest of it look like something else).
func redactURL(raw string) string {
	secret := make([]bool, len(raw))
	mark := func(from, to int) {
		for i := from; i < to; i++ {
			secret[i] = true
		}
	}
	start := 0 // where the text after the scheme begins
	if i := strings.Index(raw, "://"); i > 0 && isScheme(raw[:i]) {
		start = i + 3
	}
	rest := raw[start:]

	// By the last '@'.
	at := strings.LastIndexByte(rest, '@')
	if at >= 0 {
		markUserInfo(mark, start, rest[:at])
		// And by the first: in "pw@host:port@", the user info up to the last '@'
		// has a ':', but the text before the first '@' may be a password on its own.
		markUserInfo(mark, start, rest[:strings.IndexByte(rest, '@')])
	} else if from, ok := secretPort(rest); ok {
		mark(start+from, len(raw))
	}
	// By the URL's structure.
	hostEnd := strings.IndexAny(rest, "/?#")
	if hostEnd < 0 {
		hostEnd = len(rest)
	}
	if at := strings.LastIndexByte(rest[:hostEnd], '@'); at >= 0 {
		markUserInfo(mark, start, rest[:at])
	}
	for _, from := range []int{0, at + 1} { // the query as either reading finds it
		if q := strings.IndexByte(rest[from:], '?'); q >= 0 {
			if v, ok := secretValue(rest[from+q+1:]); ok {
				mark(start+from+q+1+v, len(raw))
			}
		}
	}

	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if !secret[i] {
			b.WriteByte(raw[i])
			continue
		}
		b.WriteString(redacted)
		for i+1 < len(raw) && secret[i+1] {
			i++
		}
	}
	return b.String()
}

// markUserInfo marks the secret of the user info userinfo, which begins at start: what
// follows its first ':', or, without a ':', all of it. A user name written without a
// password ("redis://secret@host") is taken for a password, as redis-cli takes it.
func markUserInfo(mark func(from, to int), start int, userinfo string) {
	if colon := strings.IndexByte(userinfo, ':'); colon >= 0 {
		mark(start+colon+1, start+len(userinfo))
		return
	}
	mark(start, start+len(userinfo))
}

// secretPort returns where the port of a URL without user info begins (rest starts
// with its host part) if it may be a password: the host is empty ("redis://:secret")
// or the port is not a number ("redis://user:secret", the host forgotten). A password
// there may go on with '/', '?' or '#', so all the rest is secret.
func secretPort(rest string) (int, bool) {
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	host := rest[:end]
	colon := strings.IndexByte(host, ':')
	if strings.HasPrefix(host, "[") { // an IPv6 literal: the port follows "]:"
		colon = -1
		if i := strings.Index(host, "]:"); i >= 0 {
			colon = i + 1
		}
	}
	if colon < 0 || colon > 0 && strings.Trim(host[colon+1:], "0123456789") == "" {
		return 0, false
	}
	return colon + 1, true
}

// secretValue returns where, in a query, the value of the first parameter whose name
// suggests a secret begins.
func secretValue(query string) (int, bool) {
	pos := 0
	for p := range strings.SplitSeq(query, "&") {
		if name, _, ok := strings.Cut(p, "="); ok && secretParam(name) {
			return pos + len(name) + 1, true
		}
		pos += len(p) + 1
	}
	return 0, false
}

// isScheme reports whether s is a URL scheme: a letter, then letters, digits, '+',
// '-' or '.'.
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// secretParam reports whether a query parameter's name suggests a secret. go-redis
// takes no password from the query, but other clients do, and a URL written for them
// must not show it.
func secretParam(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"pass", "pwd", "secret", "token", "auth"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// errPasswordSyntax is the cause given when a URL fails to parse but its redacted form
// parses: the password is at fault, and is not quoted.
var errPasswordSyntax = errors.New("the password does not parse as part of a URL: percent-encode its special characters (% as %25, @ as %40, : as %3A, / as %2F, ? as %3F, # as %23)")

// ErrBadURL is matched, with errors.Is, by every error NewFromURLs returns for a URL
// it cannot use: one that does not parse, or names no server that could listen (a port
// outside 1..65535). Such a URL is a mistake in the configuration, not a node that is
// down, and retrying will not help.
var ErrBadURL = errors.New("redlock: bad node URL")

// badURL is the cause of an unusable URL: its text is the cause's, and it matches
// ErrBadURL too.
type badURL struct{ cause error }

func (e badURL) Error() string   { return e.cause.Error() }
func (e badURL) Unwrap() []error { return []error{ErrBadURL, e.cause} }

// parseNodeURL parses a node URL with redis.ParseURL. Its error never quotes the URL
// as given, only its redacted form: see the top of this file. It matches ErrBadURL.
func parseNodeURL(raw string) (*redis.Options, error) {
	opts, err := parseURL(raw)
	if err == nil {
		return opts, nil
	}
	if _, err := parseURL(redactURL(raw)); err != nil {
		return nil, badURL{err}
	}
	return nil, badURL{errPasswordSyntax}
}

// parseURL is redis.ParseURL with the checks that make the password's boundaries
// certain: no '#' (go-redis ignores a fragment, so "redis://u:12#34@h" would quietly
// dial u:12 without a password) and no '@' after the host (a password's '/' or '?'
// would end the host there, and the rest of it would be read as the path or query).
func parseURL(raw string) (*redis.Options, error) {
	if err := passwordBoundaries(raw); err != nil {
		return nil, err
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // url.Error quotes the whole URL
		}
		return nil, err
	}
	if opts.Network == "tcp" {
		if err := checkPort(opts.Addr); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// passwordBoundaries refuses what would make a password's boundaries uncertain (see
// parseURL), in a node URL of any scheme, cluster URLs included.
func passwordBoundaries(raw string) error {
	if strings.Contains(raw, "#") {
		return errors.New("a '#' has no place in a node URL: write it as %23 in a password")
	}
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		if end := strings.IndexAny(rest, "/?"); end >= 0 && strings.Contains(rest[end:], "@") {
			return errors.New("an '@' after the host: write @, / and ? in a password as %40, %2F and %3F")
		}
	}
	return nil
}

// checkPort rejects a host:port whose port no server can listen on. go-redis takes any
// number, and a typo such as 99999 would only show as a node that never answers.
func checkPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %s outside 1..65535", port)
	}
	return nil
}
