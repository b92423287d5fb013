package redlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redlock-go/redlock"
)

// TestClusterURLPasswordBoundaries: a cluster URL whose password holds a '#',
// or an '@' after the host, is refused as the same URL with the plain scheme is. Before
// the fix, ParseNodeURL (and so NewFromURLs, which #12 made accept cluster URLs) took
// "redis+cluster://admin:1234#abc@host:6379" for a cluster seeded at "admin:1234" with
// no password: it dialled a host made of the password's first part, and every dial
// error quoted it.
func TestClusterURLPasswordBoundaries(t *testing.T) {
	for _, raw := range []string{
		"redis+cluster://admin:1234#abc@host:6379",
		"rediss+cluster://:5678#abc@host:6379",
		"redis+cluster://:9012?addr=x@host:6379",
		"redis+cluster://u:3456/x@host:6379?addr=h2:7000",
	} {
		plain := strings.Replace(strings.Replace(raw, "+cluster", "", 1), "?addr=", "?x=", 1)
		for _, u := range []string{raw, plain} {
			n, err := redlock.ParseNodeURL(u, redlock.Options{})
			if !errors.Is(err, redlock.ErrBadURL) {
				t.Errorf("%s: got %v (addrs %q), want ErrBadURL", redlock.RedactURL(u), err, n.Addrs())
				continue
			}
			for _, part := range []string{"1234", "5678", "9012", "3456"} {
				if strings.Contains(err.Error(), part) {
					t.Errorf("%s: the error quotes the password: %v", redlock.RedactURL(u), err)
				}
			}
		}
		if c, err := redlock.NewFromURLs([]string{raw}, redlock.Options{}); !errors.Is(err, redlock.ErrBadURL) {
			if c != nil {
				c.Close()
			}
			t.Errorf("NewFromURLs(%s): %v, want ErrBadURL", redlock.RedactURL(raw), err)
		}
	}
}

// TestZeroNodeURL: the NodeURL that ParseNodeURL returns with an error (the
// zero value) has no addresses; Addrs used to panic on it (a nil *redis.Options).
func TestZeroNodeURL(t *testing.T) {
	n, err := redlock.ParseNodeURL("http://h:1", redlock.Options{})
	if err == nil {
		t.Fatal("http://h:1 parsed")
	}
	if addrs := n.Addrs(); addrs != nil {
		t.Errorf("zero NodeURL: Addrs() = %q, want none", addrs)
	}
}
