package redlock

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestNewFromURLsRedactsPasswords (#11 item 8): no error of NewFromURLs quotes any part
// of a password, wherever the password sits and whatever makes the URL fail. Each
// password here is made of fragments ("Qp", "Qq", ...) that appear nowhere else.
func TestNewFromURLsRedactsPasswords(t *testing.T) {
	tests := []struct {
		url     string
		secrets []string // fragments that must not appear
		want    string   // in the error
	}{
		{"redis://u:pa%zzss@h:1", []string{"%zz", "pa%", "zss"}, "percent-encode"}, // the example
		{"redis://u:Qp%zzQq@h:1", []string{"%zz", "Qp", "Qq"}, "(redis://u:xxxxx@h:1): the password does not parse"},
		{"redis://u:Qp/Qq@h:1", []string{"Qp", "Qq"}, "the password does not parse"},
		{"redis://u:Qp#Qq@h:1", []string{"Qp", "Qq"}, "the password does not parse"},
		{"redis://u:Qp?Qq=1@h:1", []string{"Qp", "Qq"}, "the password does not parse"},
		{"redis://u:12/3456@h:1", []string{"3456", "12/"}, "the password does not parse"},
		{"redis://u:12#3456@h:1", []string{"3456", "12#"}, "the password does not parse"},
		{"redis://h:1/#Qp@Qq", []string{"Qp"}, "the password does not parse"}, // what follows the last '@' is the host
		{"redis://h:1/0?x=Qp@Qq", []string{"Qp"}, "the password does not parse"},
		{"redis://h:1#frag", nil, "a '#' has no place"},
		{"redis://:QpQq", []string{"QpQq"}, `invalid port ":xxxxx"`},
		{"redis://[::1]:QpQq/0", []string{"QpQq"}, `invalid port`},
		{"redis://u:Qp Qq@h:1", []string{"Qp", "Qq"}, "the password does not parse"},
		{"redis://u:Qp:Qq@h:bad", []string{"Qp", "Qq"}, `invalid port ":bad"`},
		{"redis://u:QpQq@h:1/notanumber", []string{"QpQq"}, "invalid database number"},
		{"redis://QpQq@h:1/notanumber", []string{"QpQq"}, "(redis://xxxxx@h:1/notanumber): redis: invalid database number"},
		{"redis://QpQq@h:99999", []string{"QpQq"}, "port 99999 outside"},
		{"redis://u:QpQq@h:1?foo=1", []string{"QpQq"}, "unexpected option: foo"},
		{"redis://h:1/?password=QpQq", []string{"QpQq"}, "unexpected option: password"},
		{"redis://h:1/?db=0&Auth_Token=QpQq&x=1", []string{"QpQq"}, "unexpected option: Auth_Token"},
		{"redis://h:1/?password=Qp&Qq=1#Qr", []string{"Qp", "Qq", "Qr"}, "unexpected option: password"},
		{"redis://h:1/?password=Qp&Qq=1", []string{"Qp", "Qq"}, "unexpected option: password"},
		{"http://u:QpQq@h:1", []string{"QpQq"}, "scheme must be redis://, rediss://, unix://"},
		{"u:QpQq@h:1", []string{"QpQq"}, "node URL 1 (u:xxxxx@h:1)"},
		{"unix://u:Qp%zzQq@/tmp/redis.sock", []string{"%zz", "Qp", "Qq"}, "the password does not parse"},
		{"unix://u:QpQq@", []string{"QpQq"}, "empty unix socket path"},
		{"redis://u:Qp%4", []string{"Qp", "%4"}, "node URL 1"},
		{"redis://u:Qp@Qq@h:1/x", []string{"Qp", "Qq"}, "invalid database number"},
		{"rediss://:QpQq@[::1:1", []string{"QpQq"}, "node URL 1"},
	}
	for _, tt := range tests {
		c, err := NewFromURLs([]string{"redis://127.0.0.1:1", tt.url}, Options{})
		if c != nil {
			c.Close()
			t.Errorf("%s: accepted", tt.url)
			continue
		}
		if !errors.Is(err, ErrBadURL) {
			t.Errorf("%s: error %q does not match ErrBadURL", tt.url, err)
		}
		msg := strings.Replace(err.Error(), "node URL 2", "node URL 1", 1)
		for _, s := range tt.secrets {
			if strings.Contains(msg, s) {
				t.Errorf("%s: the error quotes %q: %s", tt.url, s, msg)
			}
		}
		if !strings.Contains(msg, tt.want) || !strings.HasPrefix(msg, "redlock: node URL 1 (") {
			t.Errorf("%s: error %q, want it to contain %q", tt.url, msg, tt.want)
		}
	}
}

// TestNewFromURLsRefusesBadPorts (#15 section 5): a port no server can listen on is a
// configuration error matching ErrBadURL, found before anything is dialled, not a node
// that looks down; the message names the port, never the password.
func TestNewFromURLsRefusesBadPorts(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"redis://127.0.0.1:99999", "node URL 2 (redis://127.0.0.1:99999): port 99999 outside 1..65535"},
		{"redis://127.0.0.1:0", "port 0 outside 1..65535"},
		{"rediss://u:QpQq@h:65536/1", "node URL 2 (rediss://u:xxxxx@h:65536/1): port 65536 outside 1..65535"},
	} {
		c, err := NewFromURLs([]string{"redis://127.0.0.1:1", tt.url}, Options{})
		if c != nil {
			c.Close()
			t.Errorf("%s: accepted", tt.url)
			continue
		}
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "QpQq") {
			t.Errorf("%s: error %q, want one matching ErrBadURL with %q", tt.url, err, tt.want)
		}
	}
	for _, ok := range []string{"redis://127.0.0.1:65535", "redis://127.0.0.1", "unix:///tmp/redis.sock"} {
		c, err := NewFromURLs([]string{ok}, Options{})
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		c.Close()
	}
}

// TestNewFromURLsPasswordCharacters: a password with an '@' (the last one ends it, as
// for net/url) or percent-encoded special characters reaches go-redis whole, and the
// node's name shows it redacted.
func TestNewFromURLsPasswordCharacters(t *testing.T) {
	c, err := NewFromURLs([]string{
		"redis://u:Qp@Qq@127.0.0.1:1/2",
		"redis://:Qp%2FQq%23%3F%25@127.0.0.1:2",
		"unix://u:Qp%40Qq@/tmp/redis.sock?db=3",
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, want := range []struct{ password, name string }{
		{"Qp@Qq", "redis://u:xxxxx@127.0.0.1:1/2"},
		{"Qp/Qq#?%", "redis://:xxxxx@127.0.0.1:2"},
		{"Qp@Qq", "unix://u:xxxxx@/tmp/redis.sock?db=3"},
	} {
		n := c.nodes[i]
		if got := n.rdb.(*redis.Client).Options().Password; got != want.password || n.name != want.name {
			t.Errorf("node %d: password %q, name %q; want %q, %q", i+1, got, n.name, want.password, want.name)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://h:1":                     "redis://h:1",
		"redis://u@h:1":                   "redis://xxxxx@h:1", // a password in the user field (#15)
		"redis://s3cret@h:6379/0":         "redis://xxxxx@h:6379/0",
		"rediss://p%40ss@h":               "rediss://xxxxx@h",
		"redis://p@ss@h:1":                "redis://xxxxx@h:1",
		"redis://u:@h:1":                  "redis://u:@h:1",
		"redis://pw@h:1@":                 "redis://xxxxx@h:xxxxx@",
		"redis://@h:1":                    "redis://@h:1",
		"redis://u:p@h:1/0":               "redis://u:xxxxx@h:1/0",
		"redis://u:p@q@h:1":               "redis://u:xxxxx@h:1",
		"redis://u:a://b@h:1":             "redis://u:xxxxx@h:1",
		"u:a://b@h":                       "u:xxxxx@h",
		"redis://h:1?password=p&db=1#f":   "redis://h:1?password=xxxxx",
		"redis://h:1?db=1&PassWord=p&x=t": "redis://h:1?db=1&PassWord=xxxxx",
		"redis://h:1?db=1&x_token=p#q":    "redis://h:1?db=1&x_token=xxxxx",
		"redis://h:1?pwd&db=1":            "redis://h:1?pwd&db=1",
		"redis://u:p@h:1?db=1&secret=s":   "redis://u:xxxxx@h:1?db=1&secret=xxxxx",
		"redis://:secret":                 "redis://:xxxxx",
		"redis://h:6379/0":                "redis://h:6379/0",
		"redis://[::1]:p/0":               "redis://[::1]:xxxxx",
		"redis://[::1]:6379":              "redis://[::1]:6379",
	} {
		if got := redactURL(raw); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
