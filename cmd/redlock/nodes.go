package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
)

// nodeSpec is one parsed node URL: a plain server (opts) or a Redis Cluster (cluster).
type nodeSpec struct {
	name    string                // the URL with its password replaced by "xxxxx": safe to print
	opts    *redis.Options        // a plain server, or nil
	cluster *redis.ClusterOptions // a Redis Cluster serving as one member, or nil
}

// client returns a new go-redis client for the node.
func (s nodeSpec) client() redis.UniversalClient {
	if s.cluster != nil {
		return redis.NewClusterClient(s.cluster)
	}
	return redis.NewClient(s.opts)
}

// tlsConfig returns where the node's TLS configuration is kept.
func (s nodeSpec) tlsConfig() **tls.Config {
	if s.cluster != nil {
		return &s.cluster.TLSConfig
	}
	return &s.opts.TLSConfig
}

// tlsFiles are the --tls-* flags, applied to every rediss:// node.
type tlsFiles struct {
	ca, cert, key, serverName string
}

func (t tlsFiles) given() bool {
	return t.ca != "" || t.cert != "" || t.key != "" || t.serverName != ""
}

// parseNodes parses node URLs (redis:// or rediss://, with an optional ACL user and
// password, database number and go-redis query options; redis+cluster:// or
// rediss+cluster:// for a Redis Cluster as one member, more seed nodes in ?addr=) and
// applies the TLS files to the rediss ones. Errors name a node by its position and
// redacted URL, never its password.
func parseNodes(urls []string, tf tlsFiles) ([]nodeSpec, error) {
	specs := make([]nodeSpec, 0, len(urls))
	seen := make(map[string]int, len(urls))
	anyTLS := false
	for i, raw := range urls {
		// Parsers quote what they could not parse, parts of a password included: every
		// message below shows the redacted URL, and a cause found by parsing that.
		name := redlock.RedactURL(raw)
		u, err := url.Parse(raw)
		if err != nil {
			return nil, usagef("node %d (%s): not a URL: %v", i+1, name, safeCause(name, func(s string) error {
				_, err := url.Parse(s)
				return err
			}))
		}
		scheme, cluster := strings.CutSuffix(u.Scheme, "+cluster")
		if scheme != "redis" && scheme != "rediss" {
			return nil, usagef("node %d (%s): scheme must be redis://, rediss://, redis+cluster:// or rediss+cluster://", i+1, name)
		}
		if u.Host == "" {
			return nil, usagef("node %d (%s): no host", i+1, name)
		}
		spec := nodeSpec{name: name}
		var addrs []string
		// As NewFromURLs does, unless the URL says otherwise: no command retries (the
		// next attempt is the retry, and go-redis's own retries would only turn a node's
		// error into a timeout), and one dial (go-redis dials a refused connection 5
		// times, 100 ms apart: a dead node would hold each step to the node timeout).
		ownRetries := u.Query().Has("max_retries")
		if cluster {
			if db := strings.TrimPrefix(u.Path, "/"); db != "" && db != "0" {
				return nil, usagef("node %d (%s): a Redis Cluster has only database 0", i+1, name)
			}
			parse := func(s string) error {
				_, err := redis.ParseClusterURL(scheme + s[len(u.Scheme):])
				return err
			}
			opts, err := redis.ParseClusterURL(scheme + raw[len(u.Scheme):])
			if err != nil {
				return nil, usagef("node %d (%s): %v", i+1, name, safeCause(name, parse))
			}
			if !ownRetries {
				opts.MaxRetries = -1
			}
			opts.DialerRetries = 1
			spec.cluster, addrs = opts, opts.Addrs
		} else {
			opts, err := redis.ParseURL(raw)
			if err != nil {
				return nil, usagef("node %d (%s): %v", i+1, name, safeCause(name, func(s string) error {
					_, err := redis.ParseURL(s)
					return err
				}))
			}
			if !ownRetries {
				opts.MaxRetries = -1
			}
			opts.DialerRetries = 1
			spec.opts, addrs = opts, []string{opts.Addr}
		}
		for _, addr := range addrs {
			if err := checkPort(addr); err != nil {
				return nil, usagef("node %d (%s): %v", i+1, name, err)
			}
			server := strings.ToLower(addr)
			if j, dup := seen[server]; dup && j != i {
				return nil, usagef("node %d (%s) is the same server as node %d: one server must not vote twice", i+1, name, j+1)
			}
			seen[server] = i
		}
		anyTLS = anyTLS || *spec.tlsConfig() != nil
		specs = append(specs, spec)
	}
	if !tf.given() {
		return specs, nil
	}
	if !anyTLS {
		return nil, usagef("--tls-* flags given but no node is a rediss:// URL")
	}
	base, err := tf.config()
	if err != nil {
		return nil, err
	}
	for _, s := range specs {
		own := s.tlsConfig()
		if *own == nil {
			continue
		}
		cfg := base.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = (*own).ServerName
		}
		cfg.InsecureSkipVerify = (*own).InsecureSkipVerify // ?skip_verify=true
		*own = cfg
	}
	return specs, nil
}

// checkPort rejects a host:port whose port no server can listen on: without it, a
// typo such as port 99999 would be dialled, fail, and look like a node that is down.
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

// config loads the TLS files into a base configuration.
func (t tlsFiles) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.serverName}
	if t.ca != "" {
		pem, err := os.ReadFile(t.ca)
		if err != nil {
			return nil, usagef("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--tls-ca %s: no PEM certificate found", t.ca)
		}
		cfg.RootCAs = pool
	}
	if (t.cert == "") != (t.key == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if t.cert != "" {
		pair, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return nil, usagef("--tls-cert/--tls-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// dial makes one go-redis client per node and a redlock.Client over them. close
// closes both.
func dial(specs []nodeSpec, opts redlock.Options) (c *redlock.Client, close func(), err error) {
	rdbs := make([]redis.UniversalClient, len(specs))
	for i, s := range specs {
		rdbs[i] = s.client()
	}
	closeNodes := func() {
		for _, r := range rdbs {
			_ = r.Close()
		}
	}
	c, err = redlock.New(rdbs, opts)
	if err != nil {
		closeNodes()
		return nil, nil, err
	}
	return c, func() { _ = c.Close(); closeNodes() }, nil
}

// redactor replaces known passwords with "xxxxx" in what redlock prints. Passwords are
// never formatted on purpose; this is the second line of defence, for text that comes
// from elsewhere (an error of a library that quotes its input).
type redactor struct {
	mu      sync.Mutex
	secrets []string
}

// minSecret is the shortest password the redactor replaces: replacing every "a" in the
// output would make it unreadable while protecting nothing worth the name.
const minSecret = 3

// add registers a secret.
func (r *redactor) add(s string) {
	if len(s) < minSecret {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = append(r.secrets, s)
}

// addFromURL registers the password of a URL's user information, raw and decoded,
// without needing the URL to parse. User information without a ':' counts as a
// password, as for redlock.RedactURL: redis-cli reads "redis://secret@host" so.
func (r *redactor) addFromURL(raw string) {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		rest = raw
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	// As for RedactURL: the user info up to the last '@', and up to the first.
	for _, at := range []int{strings.LastIndex(rest, "@"), strings.Index(rest, "@")} {
		if at < 0 {
			return
		}
		pw := rest[:at]
		if _, after, ok := strings.Cut(pw, ":"); ok {
			pw = after
		}
		r.add(pw)
		if dec, err := url.PathUnescape(pw); err == nil && dec != pw {
			r.add(dec)
		}
	}
}

// redact returns s with every registered secret replaced.
func (r *redactor) redact(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, "xxxxx")
	}
	return s
}

// writer returns w behind the redactor. Each Write is redacted on its own, so a secret
// must not be split across two writes (fmt's Fprint functions write once).
func (r *redactor) writer(w io.Writer) io.Writer { return redactWriter{r, w} }

type redactWriter struct {
	r *redactor
	w io.Writer
}

func (rw redactWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(rw.w, rw.r.redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// safeCause returns why a node URL does not parse without quoting its password: parse's
// error for the redacted URL (without the url.Error wrapper, which repeats the whole
// URL), or, when the redacted URL parses, that the password is at fault.
func safeCause(redacted string, parse func(string) error) error {
	err := parse(redacted)
	if err == nil {
		return errors.New("the password does not parse as part of a URL: percent-encode its special characters")
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// describeNodes returns "N nodes (a, b, c)" with redacted names.
func describeNodes(specs []nodeSpec) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	if len(specs) == 1 {
		return "1 node (" + names[0] + ")"
	}
	return fmt.Sprintf("%d nodes (%s)", len(specs), strings.Join(names, ", "))
}
