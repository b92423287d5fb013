package redlock

import (
	"errors"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Node URLs carry passwords, and the errors of net/url and go-redis quote the parts of
// a URL they could not parse, parts of the password included ("invalid URL escape
// "%zz""). So no error of NewFromURLs is made from the URL as given: the URL is shown
// redacted, and the cause is found again by parsing the redacted text.

// redacted stands in for a password.
const redacted = "xxxxx"

// redactURL returns raw with its password replaced by "xxxxx": the text between the
// first ':' of the user info and the last '@' after the scheme (every '@' of a
// password that was not percent-encoded included), a port that is not a number when
// there is no '@', and the values of query parameters whose names suggest a secret. It
// works on the text, so it also redacts what does not parse.
func redactURL(raw string) string {
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i > 0 && isScheme(raw[:i]) {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user := rest[:at]
		if colon := strings.IndexByte(user, ':'); colon >= 0 {
			user = user[:colon+1] + redacted
		}
		prefix, rest = prefix+user+"@", rest[at+1:]
	} else {
		rest = redactPort(rest)
	}
	base, query, ok := strings.Cut(rest, "?")
	if !ok {
		return prefix + rest
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	params := strings.Split(query, "&")
	for i, p := range params {
		if name, _, ok := strings.Cut(p, "="); ok && secretParam(name) {
			params[i] = name + "=" + redacted
		}
	}
	out := prefix + base + "?" + strings.Join(params, "&")
	if hasFragment {
		out += "#" + fragment
	}
	return out
}

// redactPort redacts the port of a URL's host part (rest starts with it) unless it is
// a number: without an '@', "redis://:secret" reads the password as the port.
func redactPort(rest string) string {
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
	if colon < 0 {
		return rest
	}
	port := host[colon+1:]
	if strings.Trim(port, "0123456789") == "" {
		return rest
	}
	return host[:colon+1] + redacted + rest[end:]
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

// parseNodeURL parses a node URL with redis.ParseURL. Its error never quotes the URL
// as given, only its redacted form: see the top of this file.
func parseNodeURL(raw string) (*redis.Options, error) {
	opts, err := parseURL(raw)
	if err == nil {
		return opts, nil
	}
	if _, err := parseURL(redactURL(raw)); err != nil {
		return nil, err
	}
	return nil, errPasswordSyntax
}

// parseURL is redis.ParseURL with the checks that make the password's boundaries
// certain: no '#' (go-redis ignores a fragment, so "redis://u:12#34@h" would quietly
// dial u:12 without a password) and no '@' after the host (a password's '/' or '?'
// would end the host there, and the rest of it would be read as the path or query).
func parseURL(raw string) (*redis.Options, error) {
	if strings.Contains(raw, "#") {
		return nil, errors.New("a '#' has no place in a node URL: write it as %23 in a password")
	}
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		if end := strings.IndexAny(rest, "/?"); end >= 0 && strings.Contains(rest[end:], "@") {
			return nil, errors.New("an '@' after the host: write @, / and ? in a password as %40, %2F and %3F")
		}
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // url.Error quotes the whole URL
		}
		return nil, err
	}
	return opts, nil
}
