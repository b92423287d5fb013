package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestStatus: the table and the verdict for a key held by a majority (with its fencing
// counter), free, split between two tokens, and hidden by silent nodes.
func TestStatus(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	c, err := redlock.New(redistest.Clients(servers), redlock.Options{Fencing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status := func(key string) result {
		return runInProcess(t, nil, "status", "--nodes", urls, key)
	}

	lock, err := c.TryAcquire(t.Context(), "job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, servers, "job", true)
	r := status("job")
	if r.code != 0 || !strings.Contains(r.stdout, "verdict: held by a majority: token "+lock.Token()[:8]+"… on 3 of 3 nodes") {
		t.Errorf("held: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	row := regexp.MustCompile(`(?m)^redis://127\.0\.0\.1:\d+ +yes +` + lock.Token()[:8] + `… +(\d+(?:\.\d+)?)s +1$`)
	if m := row.FindAllStringSubmatch(r.stdout, -1); len(m) != 3 {
		t.Errorf("held: want 3 rows with reachable, holder, PTTL and fence 1:\n%s", r.stdout)
	} else if pttl, _ := strconv.ParseFloat(m[0][1], 64); pttl <= 9 || pttl > 10 {
		t.Errorf("held: PTTL %vs, want just under 10s", pttl)
	}

	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	settle(t, servers, "job", false)
	r = status("job")
	if r.code != 0 || !strings.Contains(r.stdout, "verdict: free: no node that answered has the key (3 of 3 answered)") {
		t.Errorf("free: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	ctx := t.Context()
	servers[0].Client().Set(ctx, "split", "token-a-0123456789", 10*time.Second)
	servers[1].Client().Set(ctx, "split", "token-b-0123456789", 0)
	r = status("split")
	want := "verdict: split: no token on a majority (token-a-… on 1, token-b-… on 1; 2 needed), so nobody holds the lock"
	if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "no TTL") {
		t.Errorf("split: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	servers[1].Kill()
	servers[2].Kill()
	r = status("split")
	if r.code != exitUnavailable || !strings.Contains(r.stdout, "verdict: unknown: 2 of 3 nodes could not be read") ||
		!regexp.MustCompile(`(?m)^redis://\S+ +no +- +- +- +.*connection refused`).MatchString(r.stdout) {
		t.Errorf("unknown: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestPasswordsNeverShown: node URLs carry passwords (the default user's and an ACL
// user's); no output of redlock shows them, whether the password is right, wrong, or the
// URL does not parse.
func TestPasswordsNeverShown(t *testing.T) {
	const (
		pw      = "s3cret-pass-word" // the default user's
		alicePW = "al1ce-p@ss"       // an ACL user's; in URLs as al1ce-p%40ss
		wrong   = "wr0ng-pass-word"
	)
	servers := redistest.StartN(t, 3, redistest.Options{})
	var right, acl, bad, userField []string
	for _, s := range servers {
		rdb := s.Client()
		if err := rdb.Do(t.Context(), "ACL", "SETUSER", "alice", "on", ">"+alicePW, "~*", "&*", "+@all").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ConfigSet(t.Context(), "requirepass", pw).Err(); err != nil {
			t.Fatal(err)
		}
		right = append(right, "redis://:"+pw+"@"+s.Addr())
		acl = append(acl, "redis://alice:al1ce-p%40ss@"+s.Addr())
		bad = append(bad, "redis://:"+wrong+"@"+s.Addr())
		userField = append(userField, "redis://"+pw+"@"+s.Addr()) // no colon: go-redis sends it as a user name
	}
	secrets := []string{pw, alicePW, "al1ce-p%40ss", wrong}
	check := func(name string, r result, code int) {
		t.Helper()
		if r.code != code {
			t.Errorf("%s: exit %d, want %d\n%s%s", name, r.code, code, r.stdout, r.stderr)
		}
		for _, s := range secrets {
			if strings.Contains(r.stdout+r.stderr, s) {
				t.Errorf("%s: output shows the password %q:\n%s%s", name, s, r.stdout, r.stderr)
			}
		}
	}
	join := func(urls []string) string { return strings.Join(urls, ",") }

	check("status", runInProcess(t, nil, "status", "--nodes", join(right), "k"), 0)
	check("status, ACL user", runInProcess(t, nil, "status", "--nodes", join(acl), "k"), 0)
	r := runInProcess(t, nil, "status", "--nodes", join(bad), "k")
	check("status, wrong password", r, exitUnavailable)
	if !regexp.MustCompile(`(?m)^redis://:xxxxx@\S+ +yes +- +- +- +WRONGPASS`).MatchString(r.stdout) {
		t.Errorf("status, wrong password: want the node's error and the redacted URL:\n%s", r.stdout)
	}
	check("status, REDLOCK_NODES", runInProcess(t, map[string]string{"REDLOCK_NODES": join(right)}, "status", "k"), 0)
	r = runInProcess(t, nil, "status", "--nodes", join(userField), "k")
	check("status, password in the user field", r, exitUnavailable)
	if !regexp.MustCompile(`(?m)^redis://xxxxx@\S+ +yes +- +- +- +NOAUTH`).MatchString(r.stdout) {
		t.Errorf("status, password in the user field: want the node's error and the redacted URL:\n%s", r.stdout)
	}
	check("bad port, password in the user field", runInProcess(t, nil, "status", "--nodes", "redis://"+pw+"@h:99999", "k"), exitUsage)
	check("unparsable URL", runInProcess(t, nil, "status", "--nodes", "redis://u:"+pw+"@host:port", "k"), exitUsage)
	check("bad database", runInProcess(t, nil, "status", "--nodes", "redis://u:"+pw+"@host:1/db", "k"), exitUsage)
	// Parsers quote what they cannot parse: a bad escape or a '/' inside the password
	// must not bring a piece of it into the message.
	for _, u := range []string{"redis://u:pa%zzword@h:1", "redis://u:12/3456789@h:1", "redis+cluster://u:pa%zzword@h:1"} {
		r := runInProcess(t, nil, "status", "--nodes", u, "k")
		check("password that does not parse: "+u, r, exitUsage)
		for _, piece := range []string{"%zz", "3456789", "pa%"} {
			if strings.Contains(r.stderr, piece) {
				t.Errorf("%s: the error quotes %q of the password:\n%s", u, piece, r.stderr)
			}
		}
	}
	check("duplicate node", runInProcess(t, nil, "status", "--nodes", right[0]+","+right[0], "k"), exitUsage)

	c := newCLI(t)
	r = c.run("", "exec", "--verbose", "--nodes", join(right), "--key", "k", "--", "true")
	check("exec --verbose", r, 0)
	if !strings.Contains(r.stderr, "redis://:xxxxx@") {
		t.Errorf("exec --verbose: want the nodes with redacted passwords:\n%s", r.stderr)
	}
	check("exec, ACL user", c.run("", "exec", "--verbose", "--nodes", join(acl), "--key", "k", "--", "true"), 0)
	check("exec, wrong password", c.run("", "exec", "--verbose", "--nodes", join(bad), "--key", "k", "--nonblock", "--", "true"), exitUnavailable)
	check("exec, REDLOCK_NODES", newCLI(t, "REDLOCK_NODES="+join(bad)).run("", "exec", "--key", "k", "--wait", "200ms", "--", "true"), exitUnavailable)
	check("exec, password in the user field", c.run("", "exec", "--verbose", "--nodes", join(userField), "--key", "k", "--nonblock", "--", "true"), exitUnavailable)
}

// TestRedactor: the second line of defence replaces passwords, raw and percent-decoded,
// taken from URLs that need not parse.
func TestRedactor(t *testing.T) {
	r := &redactor{}
	r.addFromURL("redis://user:p%40ss-word@host:port/0?x=1")
	r.addFromURL("rediss://:second-one@h")
	r.addFromURL("redis://in-the-user-field@h") // redis-cli reads it as a password (#15)
	r.addFromURL("redis://:ab@h")               // too short to redact usefully
	got := r.redact("a p@ss-word, p%40ss-word, second-one and in-the-user-field; ab stays")
	if want := "a xxxxx, xxxxx, xxxxx and xxxxx; ab stays"; got != want {
		t.Errorf("redact: got %q, want %q", got, want)
	}
}

// TestStatusTLS: rediss:// nodes with the --tls-* flags against a redis-server that
// requires client certificates.
func TestStatusTLS(t *testing.T) {
	dir := t.TempDir()
	pki := newPKI(t, dir)
	port := freeTestPort(t)
	redistest.Start(t, redistest.Options{Args: []string{
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", pki.serverCert, "--tls-key-file", pki.serverKey,
		"--tls-ca-cert-file", pki.ca, "--tls-auth-clients", "yes",
	}})
	url := "rediss://127.0.0.1:" + strconv.Itoa(port)
	tests := []struct {
		name  string
		flags []string
		code  int
		want  string
	}{
		{"CA and client certificate", []string{"--tls-ca", pki.ca, "--tls-cert", pki.clientCert, "--tls-key", pki.clientKey}, 0, "verdict: free"},
		{"server name checked", []string{"--tls-ca", pki.ca, "--tls-cert", pki.clientCert, "--tls-key", pki.clientKey, "--tls-server-name", "other.example"}, exitUnavailable, "other.example"},
		{"unknown CA", []string{"--tls-cert", pki.clientCert, "--tls-key", pki.clientKey}, exitUnavailable, "certificate signed by unknown authority"},
		{"no client certificate", []string{"--tls-ca", pki.ca}, exitUnavailable, "verdict: unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"status", "--nodes", url, "--timeout", "2s"}, tc.flags...)
			r := runInProcess(t, nil, append(args, "k")...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.want) {
				t.Errorf("exit %d (want %d), want %q in:\n%s%s", r.code, tc.code, tc.want, r.stdout, r.stderr)
			}
		})
	}
}

func freeTestPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pki is a test CA with a server certificate for 127.0.0.1 and a client certificate.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T, dir string) pki {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redlock test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage, name string) (string, string) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "EC PRIVATE KEY", kder)
	}
	p := pki{ca: write("ca.crt", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf(2, x509.ExtKeyUsageServerAuth, "server")
	p.clientCert, p.clientKey = leaf(3, x509.ExtKeyUsageClientAuth, "client")
	return p
}

// settle waits until every server holds key (held) or none does. Acquire and Release
// return once a majority has answered, so the last call may still be on its way; no
// signal of that leaves the library, hence the polling (bounded).
func settle(t *testing.T, servers []*redistest.Server, key string, held bool) {
	t.Helper()
	want := int64(0)
	if held {
		want = 1
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, s := range servers {
		for s.Client().Exists(t.Context(), key).Val() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: key %q still not in its final state (held %v)", s.Addr(), key, held)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestStatusFenceOfWrongType (#15 section 5): a KEY:fence that is not a string (here a
// hash, next to a good fence:{KEY}) makes its GET fail; that must not hide the node's
// lock key. The row shows the holder, PTTL and the good counter, and the bad one's
// problem on its own.
func TestStatusFenceOfWrongType(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	c, err := redlock.New(redistest.Clients(servers), redlock.Options{Fencing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lock, err := c.TryAcquire(t.Context(), "job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(context.WithoutCancel(t.Context()))
	settle(t, servers, "job", true)
	if err := servers[0].Client().Del(t.Context(), "job:fence").Err(); err != nil {
		t.Fatal(err)
	}
	if err := servers[0].Client().HSet(t.Context(), "job:fence", "f", "1").Err(); err != nil {
		t.Fatal(err)
	}
	r := runInProcess(t, nil, "status", "--nodes", urls, "job")
	if r.code != 0 || !strings.Contains(r.stdout, "verdict: held by a majority: token "+lock.Token()[:8]+"… on 3 of 3 nodes") {
		t.Errorf("exit %d, want the lock held on all 3 nodes:\n%s%s", r.code, r.stdout, r.stderr)
	}
	bad := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta("redis://"+servers[0].Addr()) + ` +yes +` + lock.Token()[:8] + `… +\d+(?:\.\d+)?s +1 +fencing counter job:fence: WRONGTYPE`)
	if !bad.MatchString(r.stdout) {
		t.Errorf("want node 1's holder and PTTL, and the counter's error apart:\n%s", r.stdout)
	}
}

// TestStatusOneNode: counts read as English with a single node ("on 1 node").
func TestStatusOneNode(t *testing.T) {
	_, urls := nodes(t, 1, redistest.Options{})
	r := runInProcess(t, nil, "status", "--nodes", urls, "job")
	if r.code != 0 || !strings.Contains(r.stdout, `key "job" on 1 node (1 needed for a majority)`) {
		t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
