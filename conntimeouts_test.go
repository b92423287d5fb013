package redlock

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestNewFromURLsTimeouts: the clients NewFromURLs makes time out at 10 × NodeTimeout
// (dial, read, write) unless the URL sets a timeout itself; a read_timeout alone also
// sets the write timeout, as in go-redis.
func TestNewFromURLsTimeouts(t *testing.T) {
	type timeouts struct{ dial, read, write time.Duration }
	for _, tc := range []struct {
		url  string
		opts Options
		want timeouts
	}{
		{"redis://127.0.0.1:1", Options{}, timeouts{500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}},
		{"redis://127.0.0.1:1", Options{NodeTimeout: 20 * time.Millisecond}, timeouts{200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}},
		{"redis://127.0.0.1:1?read_timeout=2s", Options{}, timeouts{500 * time.Millisecond, 2 * time.Second, 2 * time.Second}},
		{"redis://127.0.0.1:1?write_timeout=3s&dial_timeout=1s", Options{}, timeouts{time.Second, 500 * time.Millisecond, 3 * time.Second}},
		{"redis://127.0.0.1:1?read_timeout=-1", Options{}, timeouts{500 * time.Millisecond, 0, 0}}, // go-redis: no timeout
	} {
		c, err := NewFromURLs([]string{tc.url}, tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		o := c.nodes[0].rdb.(*redis.Client).Options()
		if got := (timeouts{o.DialTimeout, o.ReadTimeout, o.WriteTimeout}); got != tc.want {
			t.Errorf("%s with NodeTimeout %v: dial, read, write timeouts %v, want %v", tc.url, tc.opts.NodeTimeout, got, tc.want)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
