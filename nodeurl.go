package redlock

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NodeURL is one node URL parsed as NewFromURLs parses it: a plain server or a Redis
// Cluster serving as one member. Programs that build their clients themselves (to add
// TLS files, say) use it to read node URLs exactly as the library does.
type NodeURL struct {
	// Name is the URL with its password replaced by "xxxxx" (RedactURL): safe to print.
	Name string
	// Server holds the options of a plain server (redis://, rediss://, unix://), or nil.
	Server *redis.Options
	// Cluster holds the options of a Redis Cluster that is one member of the quorum
	// (redis+cluster://, rediss+cluster://, more seed nodes in ?addr=), or nil.
	Cluster *redis.ClusterOptions
}

// Client returns a new go-redis client for the node; the caller closes it.
func (n NodeURL) Client() redis.UniversalClient {
	if n.Cluster != nil {
		return redis.NewClusterClient(n.Cluster)
	}
	return redis.NewClient(n.Server)
}

// Addrs returns the addresses the node's client dials: one for a server, the seeds
// for a cluster, none for the zero NodeURL (which ParseNodeURL returns with an error).
func (n NodeURL) Addrs() []string {
	switch {
	case n.Cluster != nil:
		return n.Cluster.Addrs
	case n.Server != nil:
		return []string{n.Server.Addr}
	}
	return nil
}

// ParseNodeURL parses one node URL as NewFromURLs does and gives it NewFromURLs's
// client settings: no command retries unless the URL sets max_retries, one dial per
// connection attempt, and dial, read and write timeouts of 10 × opts.NodeTimeout
// unless the URL sets them. A Redis Cluster is written redis+cluster://host:port (or
// rediss+cluster://) with more seeds in ?addr=host:port and database 0 only. Errors
// match ErrBadURL, show the URL only redacted, and never quote any part of a password.
func ParseNodeURL(raw string, opts Options) (NodeURL, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return NodeURL{}, err
	}
	n := NodeURL{Name: redactURL(raw)}
	u, err := url.Parse(raw)
	if err != nil {
		return NodeURL{}, badURL{safeURLCause(raw, func(s string) error { _, err := url.Parse(s); return err })}
	}
	scheme, cluster := strings.CutSuffix(u.Scheme, "+cluster")
	switch {
	case scheme != "redis" && scheme != "rediss" && (scheme != "unix" || cluster):
		return NodeURL{}, badURL{errors.New("scheme must be redis://, rediss://, unix://, redis+cluster:// or rediss+cluster://")}
	case u.Host == "" && scheme != "unix":
		return NodeURL{}, badURL{errors.New("no host")}
	case cluster:
		n.Cluster, err = parseClusterURL(raw, scheme, u)
		if err != nil {
			return NodeURL{}, err
		}
		applyClusterDefaults(n.Cluster, u.Query(), o)
	default:
		if n.Server, err = parseNodeURL(raw); err != nil {
			return NodeURL{}, err
		}
		applyNodeDefaults(n.Server, u.Query(), o)
	}
	return n, nil
}

// parseClusterURL parses a redis+cluster:// or rediss+cluster:// URL with go-redis's
// ParseClusterURL, after the checks that make its password's boundaries certain, and
// checks every seed's port.
func parseClusterURL(raw, scheme string, u *url.URL) (*redis.ClusterOptions, error) {
	// The boundaries first: until they hold, the path may be part of a password
	// ("user:/1#1@host"), and an error about its database would tell what it holds.
	if err := passwordBoundaries(raw); err != nil {
		if passwordBoundaries(redactURL(raw)) == nil {
			err = errPasswordSyntax // as parseNodeURL says it
		}
		return nil, badURL{err}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" && db != "0" {
		return nil, badURL{errors.New("a Redis Cluster has only database 0")}
	}
	plain := scheme + raw[len(u.Scheme):]
	co, err := redis.ParseClusterURL(plain)
	if err != nil {
		return nil, badURL{safeURLCause(plain, func(s string) error { _, err := redis.ParseClusterURL(s); return err })}
	}
	for _, addr := range co.Addrs {
		if err := checkPort(addr); err != nil {
			return nil, badURL{err}
		}
	}
	return co, nil
}

// applyNodeDefaults gives a server's options NewFromURLs's settings, except those the
// URL's query sets itself.
func applyNodeDefaults(ro *redis.Options, query url.Values, o Options) {
	// ContextTimeoutEnabled stays off on purpose: a call abandoned at a context
	// deadline may still execute later (its bytes wait in a stalled server's socket),
	// so its done channel would no longer mean "no longer in flight", and a release
	// could overtake its SET. go-redis's ReadTimeout ends such calls.
	if !query.Has("max_retries") {
		// go-redis would retry READONLY, LOADING and network errors with back-off,
		// which inside a node timeout only hides the cause; the quorum is the retry.
		ro.MaxRetries = -1
	}
	// go-redis dials a refused connection 5 times, 100 ms apart, by default: longer
	// than a node timeout, and a release to that node would wait behind it.
	ro.DialerRetries = 1
	setConnTimeouts(ro, query, o.NodeTimeout)
}

// applyClusterDefaults is applyNodeDefaults for a cluster's options.
func applyClusterDefaults(co *redis.ClusterOptions, query url.Values, o Options) {
	if !query.Has("max_retries") {
		co.MaxRetries = -1
	}
	co.DialerRetries = 1
	ro := &redis.Options{DialTimeout: co.DialTimeout, ReadTimeout: co.ReadTimeout, WriteTimeout: co.WriteTimeout}
	setConnTimeouts(ro, query, o.NodeTimeout)
	co.DialTimeout, co.ReadTimeout, co.WriteTimeout = ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout
}

// safeURLCause returns why raw does not parse without quoting its password: parse's
// error for the redacted URL (without the url.Error wrapper, which repeats the whole
// URL), or, when the redacted URL parses, that the password is at fault.
func safeURLCause(raw string, parse func(string) error) error {
	err := parse(redactURL(raw))
	if err == nil {
		return errPasswordSyntax
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return fmt.Errorf("%w", err)
}
