package redlock

import (
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"
)

// connTimeoutFactor sets the go-redis timeouts of the clients NewFromURLs makes:
// dialling, reading and writing each get connTimeoutFactor × NodeTimeout (500 ms with
// the default NodeTimeout).
//
// The library's own timer bounds every step at NodeTimeout, so these timeouts do not
// decide how long a caller waits for a node. They bound how long a call to a stalled
// node stays in flight, and with it how long the release parked behind it (sender.go)
// and Close wait. Shorter is not safer: a call given up by go-redis may still run on
// the node once it resumes, possibly after the release that followed it on another
// connection, and then leaves a key of a failed attempt there until its TTL ends (a
// cost in liveness, never a second holder). Ten node timeouts keep the connection, and
// that order, through the latency spikes a healthy Redis has (a fork, a slow fsync, an
// expiry cycle: tens to hundreds of milliseconds), while a node stalled for longer
// costs Close two or three of them (the call out when it stalled, the release parked
// behind it, and at times the release of an attempt sent while the first was out)
// instead of as many of go-redis's 5 s default.
const connTimeoutFactor = 10

// setConnTimeouts gives a client made from a node URL its dial, read and write timeouts:
// connTimeoutFactor × nodeTimeout each, except those the URL sets itself
// (dial_timeout, read_timeout, write_timeout), which win. A URL that sets read_timeout
// but not write_timeout leaves the write timeout to follow it, as go-redis does.
func setConnTimeouts(o *redis.Options, query url.Values, nodeTimeout time.Duration) {
	d := connTimeoutFactor * nodeTimeout
	if !query.Has("dial_timeout") {
		o.DialTimeout = d
	}
	if !query.Has("read_timeout") {
		o.ReadTimeout = d
	}
	if !query.Has("write_timeout") && !query.Has("read_timeout") {
		o.WriteTimeout = d
	}
}
