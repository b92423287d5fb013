package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

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

// parseNodes parses node URLs as the library does (redlock.ParseNodeURL: redis://,
// rediss:// or unix://, with an optional ACL user and password, database number and
// go-redis query options; redis+cluster:// or rediss+cluster:// for a Redis Cluster as
// one member, more seed nodes in ?addr=; no command retries, one dial, and timeouts of
// 10 × nodeTimeout unless the URL says otherwise), refuses a server named twice, and
// applies the TLS files to the rediss ones. Errors name a node by its position and
// redacted URL, never its password.
func parseNodes(urls []string, tf tlsFiles, nodeTimeout time.Duration) ([]nodeSpec, error) {
	specs := make([]nodeSpec, 0, len(urls))
	seen := make(map[string]int, len(urls))
	anyTLS := false
	for i, raw := range urls {
		n, err := redlock.ParseNodeURL(raw, redlock.Options{NodeTimeout: nodeTimeout})
		if err != nil {
			return nil, usagef("node %d (%s): %v", i+1, redlock.RedactURL(raw), err)
		}
		spec := nodeSpec{name: n.Name, opts: n.Server, cluster: n.Cluster}
		for _, addr := range n.Addrs() {
			server := addr // a unix socket's path: case matters
			if n.Server == nil || n.Server.Network != "unix" {
				server = strings.ToLower(addr) // a host name: case does not
			}
			if j, dup := seen[server]; dup && j != i {
				return nil, usagef("node %d (%s) is the same server as node %d: one server must not vote twice", i+1, n.Name, j+1)
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
