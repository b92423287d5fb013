package redlock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fuzz targets (make fuzz runs each for FUZZTIME). Their seed corpora are in
// testdata/fuzz/<name>/ and in the f.Add calls; a plain go test runs the seeds.

// noDNS makes host name lookups fail at once for the rest of the test, so that fuzzed
// URLs with host names cost no lookups (a name then stands for itself).
func noDNS(f *testing.F) {
	lookupNetIP = func(context.Context, string, string) ([]netip.Addr, error) {
		return nil, errors.New("no lookups while fuzzing")
	}
	f.Cleanup(func() { lookupNetIP = defaultLookupNetIP })
}

var defaultLookupNetIP = lookupNetIP

// passwordPlaces are the ways a password can sit in a node URL: %[1]s is the password
// as written (raw, path-escaped user info or query-escaped), %[2]s a fuzzed tail.
var passwordPlaces = []struct {
	format string
	escape func(string) string
	noAt   bool // an '@' in the password makes what follows it the host
}{
	{"redis://user:%s@127.0.0.1:6379%s", nil, false},
	{"redis://:%s@127.0.0.1:6379/0%s", nil, false},
	{"rediss://%s@127.0.0.1:6379%s", func(p string) string { return url.UserPassword("user", p).String() }, false},
	{"unix://user:%s@/tmp/redis.sock%s", nil, false},
	{"redis+cluster://user:%s@127.0.0.1:7000?addr=127.0.0.1:7001%s", nil, false},
	{"rediss+cluster://%s@127.0.0.1:7000%s", func(p string) string { return url.UserPassword("user", p).String() }, false},
	{"unix://%s@/tmp/redis.sock%s", func(p string) string { return url.UserPassword("u", p).String() }, false},
	{"redis://127.0.0.1:6379/0?password=%s%s", nil, false},
	{"redis://127.0.0.1:6379/0?db=1&password=%s%s", url.QueryEscape, false},
	{"user:%s@127.0.0.1:6379%s", nil, false},
	{"redis://:%s%s", nil, true}, // no '@': the password is read as the port
	{"redis://user:%s@[::1]:6379%s", nil, false},
	// User info without a ':': go-redis reads it as a user name, redis-cli as a password.
	{"redis://%s@127.0.0.1:6379%s", func(p string) string { return url.User(p).String() }, false},
}

// isPort reports whether s, up to its first '/', '?' or '#' and after its last ':', is
// digits only: what follows the authority's last ':' in a URL is a port ("::0000" is
// host ":" and port 0000), checked for its range.
func isPort(s string) bool {
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		s = s[i+1:]
	}
	return strings.Trim(s, "0123456789") == ""
}

// otherPassword maps each letter and digit of p to another of its class (hex letters
// to hex letters), leaving every other byte alone: the URL keeps its structure, and
// an error or name that depends on the password's characters changes.
func otherPassword(p string) string {
	b := []byte(p)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'f':
			b[i] = 'a' + (c-'a'+1)%6
		case 'A' <= c && c <= 'F':
			b[i] = 'A' + (c-'A'+1)%6
		case 'g' <= c && c <= 'z':
			b[i] = 'g' + (c-'g'+1)%20
		case 'G' <= c && c <= 'Z':
			b[i] = 'G' + (c-'G'+1)%20
		case '0' <= c && c <= '9':
			b[i] = '0' + (c-'0'+1)%10
		}
	}
	return string(b)
}

// outcomeOfURLs is what NewFromURLs said about urls: its error text, or the nodes'
// names (each with the addresses its client dials) and passwords.
func outcomeOfURLs(urls []string) (errText string, names, passwords []string) {
	c, err := NewFromURLs(urls, Options{})
	if err != nil {
		if c != nil {
			panic("NewFromURLs returned a Client and an error")
		}
		return err.Error(), nil, nil
	}
	defer c.Close()
	for _, n := range c.nodes {
		switch rdb := n.rdb.(type) {
		case *redis.Client:
			names = append(names, n.name+" "+rdb.Options().Addr)
			passwords = append(passwords, rdb.Options().Password)
		case *redis.ClusterClient:
			names = append(names, n.name+" "+strings.Join(rdb.Options().Addrs, ","))
			passwords = append(passwords, rdb.Options().Password)
		default:
			panic(fmt.Sprintf("NewFromURLs made a %T", n.rdb))
		}
	}
	return "", names, passwords
}

// FuzzNewFromURLs: no input makes NewFromURLs panic (raw holds one URL per line), and
// no error, node name or address dialled depends on the characters of a password of 4
// or more bytes,
// wherever it sits: the URL with the password and the URL with otherPassword of it give
// the same error text and names. A password written correctly escaped in the user info
// reaches go-redis whole (go-redis takes none from the query).
func FuzzNewFromURLs(f *testing.F) {
	noDNS(f)
	f.Add("redis://u:pa%zzss@h:1", "pa%zzss", uint8(0), "")
	f.Add("redis://127.0.0.1:7001\nredis://localhost:7001", "hunter2", uint8(1), "/1")
	f.Add("rediss://:x@[::ffff:127.0.0.1]:1?dial_timeout=1s", "p@ss/w?rd#1", uint8(2), "?db=2")
	f.Add("unix://u:p@/tmp/r.sock?db=x", "12/3456", uint8(3), "?foo=1")
	f.Add("redis://h:1/?password=secret&x=1", "s3cr&t=1#x", uint8(5), "&max_retries=2")
	f.Add("u:secret@h:1", "%4G%zz%", uint8(7), "")
	f.Add("redis://:secret", "secret", uint8(8), "/0")
	f.Add("redis://secret@h:1", "s3cr:t@x", uint8(10), "/0")
	f.Add("redis+cluster://u:1234#abc@h:1", "1234#abc", uint8(4), "") // a '#' ended the host
	f.Fuzz(func(t *testing.T, raw, password string, place uint8, tail string) {
		outcomeOfURLs(strings.Split(raw, "\n")) // must not panic

		pl := passwordPlaces[int(place)%len(passwordPlaces)]
		if len(password) < 4 || otherPassword(password) == password {
			return // too short to be a password, or nothing the comparison can see
		}
		if pl.noAt && strings.Contains(password, "@") {
			return // what follows the password's '@' is the host
		}
		if pl.noAt && isPort(password+tail) {
			return // digits where the port goes are a port, checked for its range
		}
		embed := func(p string) string {
			if pl.escape != nil {
				p = pl.escape(p)
			}
			return fmt.Sprintf(pl.format, p, tail)
		}
		u1, u2 := embed(password), embed(otherPassword(password))
		err1, names1, pass1 := outcomeOfURLs([]string{u1})
		err2, names2, _ := outcomeOfURLs([]string{u2})
		if err1 != err2 {
			t.Fatalf("the error depends on the password:\n%s\n  %s\n%s\n  %s", u1, err1, u2, err2)
		}
		if strings.Join(names1, " ") != strings.Join(names2, " ") {
			t.Fatalf("the node name or address depends on the password:\n%s\n  %q\n%s\n  %q", u1, names1, u2, names2)
		}
		asUser := strings.HasPrefix(pl.format, "redis://%s@")
		inUserInfo := pl.escape != nil && !strings.Contains(pl.format, "?") && !asUser
		if err1 == "" && inUserInfo && !strings.Contains(tail, "@") && pass1[0] != password {
			t.Fatalf("%s: go-redis got password %q, want %q", u1, pass1[0], password)
		}
	})
}

// decodeReply makes a script reply out of fuzz bytes: any value go-redis can hand to
// judge (nil, integers, strings, nested arrays, maps, booleans, doubles, big numbers)
// or an error. It returns the value, its error, and the bytes it did not use.
func decodeReply(data []byte, depth int) (any, error, []byte) {
	if len(data) == 0 {
		return nil, nil, nil
	}
	tag, data := data[0], data[1:]
	kind, arg := tag&0x0f, int(tag>>4) // what to make, and a small number for it
	take := func(n int) []byte {
		n = min(n, len(data))
		b := data[:n]
		data = data[n:]
		return b
	}
	word := func() uint64 {
		var b [8]byte
		copy(b[:], take(8))
		return binary.LittleEndian.Uint64(b[:])
	}
	switch kind {
	case 0:
		return nil, nil, data
	case 1:
		return int64(word()), nil, data
	case 2, 11, 12, 13, 14, 15:
		return int64(arg) - 8, nil, data // -8..7: the replies judged most
	case 3:
		n := 0
		if b := take(1); len(b) > 0 {
			n = int(b[0])
		}
		return string(take(n)), nil, data
	case 4:
		if depth >= 4 {
			return []any{}, nil, data
		}
		var arr []any
		for range arg % 5 {
			var v any
			v, _, data = decodeReply(data, depth+1)
			arr = append(arr, v)
		}
		return arr, nil, data
	case 5:
		n := 0
		if b := take(1); len(b) > 0 {
			n = int(b[0])
		}
		return nil, replyError(take(n)), data
	case 6:
		return arg&1 != 0, nil, data
	case 7:
		return math.Float64frombits(word()), nil, data
	case 8:
		if depth >= 4 {
			return map[any]any{}, nil, data
		}
		m := map[any]any{}
		for range arg % 4 {
			var k, v any
			k, _, data = decodeReply(data, depth+1)
			v, _, data = decodeReply(data, depth+1)
			if _, ok := k.([]any); ok {
				k = fmt.Sprint(k) // map keys must be comparable
			}
			if _, ok := k.(map[any]any); ok {
				k = fmt.Sprint(k)
			}
			m[k] = v
		}
		return m, nil, data
	case 9:
		return new(big.Int).SetBytes(take(arg)), nil, data
	default:
		return nil, redis.Nil, data
	}
}

// FuzzJudge: every reply a node can give, for every step, gets an outcome without a
// panic; a reply that is not an integer (for the fencing steps: nor a decimal string
// of one), or an error, is a failed node with an error that says so, never a yes; an integer is judged by the step's own judge function
// (whatever the step table says it means).
func FuzzJudge(f *testing.F) {
	steps := []struct {
		name string
		st   step
	}{
		{"acquire", stepAcquire}, {"release", stepRelease}, {"extend", stepExtend},
		{"fence read", stepFenceRead}, {"fenced acquire", stepFencedAcquire}, {"handoff", stepHandoff},
		{"fair acquire", stepFairAcquire}, {"fair fenced acquire", stepFairFencedAcquire},
	}
	f.Add([]byte{})
	f.Add([]byte{0x92})                                            // int64 1
	f.Add([]byte{0x82})                                            // int64 0
	f.Add([]byte{0x72})                                            // int64 -1
	f.Add([]byte{0x01, 0, 0, 0, 0, 0, 0, 0, 0x80})                 // math.MinInt64
	f.Add([]byte{0x03, 1, '1'})                                    // "1"
	f.Add([]byte{0x03, 2, '-', '7'})                               // "-7"
	f.Add([]byte{0x24, 0x92, 0x92})                                // [1 1]
	f.Add([]byte{0x05, 8, 'N', 'O', 'S', 'C', 'R', 'I', 'P', 'T'}) // an error reply
	f.Add([]byte{0x16})                                            // true
	f.Add([]byte{0x07, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f})              // 1.0
	f.Add([]byte{0x18, 0x92, 0x92})                                // {1: 1}
	f.Add([]byte{0x19, 1})                                         // big 1
	f.Add([]byte{0x0a})                                            // redis.Nil
	f.Fuzz(func(t *testing.T, data []byte) {
		val, replyErr, _ := decodeReply(data, 0)
		for _, s := range steps {
			cmd := redis.NewCmd(context.Background())
			if replyErr != nil {
				cmd.SetErr(replyErr)
			} else {
				cmd.SetVal(val)
			}
			out, v, err := judge(s.st, cmd)
			switch out {
			case outYes, outNo, outRefused, outFailed:
			default:
				t.Fatalf("%s, reply %#v: outcome %d", s.name, val, out)
			}
			// An error reply passes through as the node's own words (even empty ones);
			// every other failure must say what went wrong.
			if (out == outFailed) != (err != nil) || err != nil && replyErr == nil && err.Error() == "" {
				t.Fatalf("%s, reply %#v, error %v: outcome %d with error %v", s.name, val, replyErr, out, err)
			}
			iv, isInt := val.(int64)
			if text, ok := val.(string); ok && s.st.fencing && replyErr == nil {
				// The fencing scripts answer counters as decimal strings.
				n, err := strconv.ParseInt(text, 10, 64)
				iv, isInt = n, err == nil
			}
			switch {
			case replyErr != nil:
				if out != outFailed || !errors.Is(err, replyErr) {
					t.Fatalf("%s, error reply %v: outcome %d, error %v", s.name, replyErr, out, err)
				}
			case !isInt:
				if out != outFailed || !strings.Contains(err.Error(), "unexpected script reply") {
					t.Fatalf("%s, reply %#v: outcome %d, error %v; want a failed node", s.name, val, out, err)
				}
			default:
				want := s.st.judge(iv)
				if _, isText := val.(string); isText && s.st.text != nil {
					want = s.st.text(iv) // fair fenced: a text reply is a counter's
				}
				if out != want || v != iv {
					t.Fatalf("%s, reply %d: outcome %d, value %d; want %d, %d", s.name, iv, out, v, want, iv)
				}
			}
			tl := newTally(1) // and the count takes it
			tl.add(out, v)
		}
	})
}

// keyNodes is FuzzKeysAndTTLs's set of nodes and Clients.
type keyNodes struct {
	admin         []*redis.Client // for the checks: KEYS and FLUSHALL
	plain, fenced *Client
}

func newKeyNodes(tb testing.TB) *keyNodes {
	nodes, admin := plainNodes(tb, 3)
	opts := Options{
		MaxAttempts: 2,
		NodeTimeout: time.Second, // nodes under a busy fuzzer
		RetryDelay:  func(int) time.Duration { return time.Millisecond },
	}
	plain, err := New(nodes, opts)
	if err != nil {
		tb.Fatal(err)
	}
	opts.Fencing = true
	fenced, err := New(nodes, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		plain.Close()
		fenced.Close()
	})
	return &keyNodes{admin: admin, plain: plain, fenced: fenced}
}

// run takes key with ttl through one operation (op selects TryAcquire or Acquire,
// an Extend to ext, and fencing), releases any lock it got, and checks that each
// failure is a clear error and that no lock key is left on the nodes.
func (k *keyNodes) run(t *testing.T, key string, ttl, ext time.Duration, op uint8) {
	c := k.plain
	if op&1 != 0 {
		c = k.fenced
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var l *Lock
	var err error
	if op&2 != 0 {
		l, err = c.Acquire(ctx, key, ttl)
	} else {
		l, err = c.TryAcquire(ctx, key, ttl)
	}
	clear := func(err error) {
		t.Helper()
		if !strings.HasPrefix(err.Error(), "redlock: ") {
			t.Fatalf("key %q, ttl %v: unclear error %q", key, ttl, err)
		}
	}
	switch {
	case err != nil:
		if l != nil {
			t.Fatalf("key %q, ttl %v: a lock and an error %v", key, ttl, err)
		}
		clear(err)
	case l == nil:
		t.Fatalf("key %q, ttl %v: neither a lock nor an error", key, ttl)
	default:
		if l.Key() != key {
			t.Fatalf("lock key %q, want %q", l.Key(), key)
		}
		if op&4 != 0 {
			if err := l.Extend(ctx, ext); err != nil {
				clear(err)
			}
		}
		if err := l.Release(ctx); err != nil {
			clear(err) // ErrLockLost if its validity ran out: the keys go all the same
		}
		l.WaitForCalls()
	}
	c.inFlight.Wait() // every node call, a failed attempt's clean-up included
	for i, s := range k.admin {
		keys, err := s.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatalf("KEYS on node %d: %v", i+1, err)
		}
		for _, left := range keys {
			if c == k.fenced && slices.Contains(fenceKeys(key, false)[1:], left) {
				continue // the fencing counter stays by design
			}
			t.Fatalf("key %q, ttl %v, op %d: %q left on node %d", key, ttl, op, left, i+1)
		}
		if err := s.FlushAll(ctx).Err(); err != nil {
			t.Fatalf("FLUSHALL on node %d: %v", i+1, err)
		}
	}
}

// FuzzKeysAndTTLs: any key (empty, huge, binary, with braces) and any TTL given to
// Acquire, TryAcquire and Extend gives either a clear error or a lock that is then
// released; nothing panics and no lock key stays on the nodes (three redis-servers,
// started once per fuzzing process).
func FuzzKeysAndTTLs(f *testing.F) {
	k := newKeyNodes(f)
	ms := int64(time.Millisecond)
	f.Add("lock", 10*time.Second.Nanoseconds(), 20*time.Second.Nanoseconds(), uint8(6))
	f.Add("", ms*1000, ms*1000, uint8(0))
	f.Add("{}", ms*1000, ms*1000, uint8(1))
	f.Add("{user1}:lock", ms*1000, ms*1000, uint8(7))
	f.Add("a{b}c{d}", ms*3, ms*3, uint8(4))
	f.Add("\x00\xff\xfe binary\r\n", ms*5000, -ms, uint8(5))
	f.Add("redlock:released:x", ms*1000, 1500*int64(time.Microsecond), uint8(4))
	f.Add("x:fence", ms*1000, ms*1000, uint8(3))
	f.Add(strings.Repeat("k", 300), ms*1000, ms*1000, uint8(2)) // long keys: TestOddKeys (real nodes)
	f.Add("huge ttl", math.MaxInt64/ms*ms, int64(math.MaxInt64), uint8(4))
	f.Add("min ttl", int64(math.MinInt64), int64(math.MinInt64), uint8(4))
	f.Fuzz(func(t *testing.T, key string, ttl, ext int64, op uint8) {
		k.run(t, key, time.Duration(ttl), time.Duration(ext), op)
	})
}
