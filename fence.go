package redlock

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// FenceKeys returns the names under which a Client with Options.Fencing keeps key's
// fencing counter on the member rdb, for tools that inspect the nodes (redlock
// status). The counter's value is the largest of them; a missing one counts as 0.
//
// The first name is the same on every kind of member and lies in KEY's Redis Cluster
// hash slot, as a script on a Cluster may only touch keys of one slot: KEY:fence when
// that name is in KEY's slot (always when KEY has a hash tag, a non-empty {...}; by
// chance for a few other keys); otherwise fence:{KEY} when KEY contains no "}" (the
// braces make KEY itself the hash tag), and fence:{T}{KEY} for the remaining keys, where
// T is four characters of "@A-O" chosen so that T hashes to KEY's slot. Different keys
// never get the same counter name. Do not use a counter's name as a lock key.
//
// On a member that is not a Cluster client, and where the first name is not KEY:fence,
// the second is KEY:fence, the only name before Cluster members were handled: every
// fenced step reads both and raises both, so counters kept by earlier versions stay
// valid, and a member may switch between a plain and a cluster client without any
// counter going back.
func FenceKeys(rdb redis.UniversalClient, key string) []string {
	return fenceKeys(key, isCluster(rdb))[1:]
}

// fenceKeys returns the KEYS of a fenced step on a node that is a Redis Cluster client
// (cluster) or not: the lock key, then the counter's names (see FenceKeys).
func fenceKeys(key string, cluster bool) []string {
	name, legacy := fenceName(key), key+":fence"
	if cluster || name == legacy {
		return []string{key, name}
	}
	return []string{key, name, legacy}
}

// fenceName names the fencing counter of a lock key in the key's hash slot. Names end
// in ":fence" or in "}", and the key can be read back from each (fencekey_test.go
// checks it), so two keys never share a counter.
func fenceName(key string) string {
	name := key + ":fence"
	slot := hashSlot(key)
	switch {
	case hashSlot(name) == slot:
		// Every key with a hash tag, and any other key whose counter worked on a
		// Cluster before: its counter keeps its name, and its value.
		return name
	case strings.IndexByte(key, '}') < 0:
		return "fence:{" + key + "}"
	}
	return "fence:{" + slotTag(slot) + "}{" + key + "}"
}

// isCluster reports whether a member is a Redis Cluster client, also one embedded in
// another type (as instrumentation wrappers do).
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(interface{ Options() *redis.ClusterOptions })
	return ok
}

// clusterSlots is the number of hash slots of a Redis Cluster (a power of two).
const clusterSlots = 16384

// hashSlot returns the Redis Cluster hash slot of key as Redis computes it: CRC16 of
// the hash tag, the text between the first "{" and the first "}" after it, if that
// text is not empty, else of the whole key; modulo 16384.
func hashSlot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return crc16(key) & (clusterSlots - 1)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no reflection), the
// checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

// crc16Table holds the CRC of each byte value, for crc16 to go a byte at a time.
var crc16Table = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()

// Slot tags: four characters 0x40|n ("@", "A" to "O"), so a tag carries 16 free bits,
// the low nibbles n, and never a brace. With no initial value, CRC16 of messages of
// one length is linear over GF(2): crc(a XOR b) = crc(a) XOR crc(b). The 16 nibble bits
// map onto the 14 slot bits with rank 14, so every slot has a tag, found by solving
// that linear system once instead of searching.

// tagBase is the tag with all nibbles zero.
const tagBase = "@@@@"

// slotTag returns a four-character hash tag without braces whose slot is slot.
func slotTag(slot uint16) string {
	want := slot ^ (crc16(tagBase) & (clusterSlots - 1))
	var nibbles uint16
	for k := range tagBasis {
		if want>>k&1 != 0 {
			nibbles ^= tagBasis[k]
		}
	}
	var tag [4]byte
	for i := range tag {
		tag[i] = tagBase[i] | byte(nibbles>>(4*i)&0xF)
	}
	return string(tag[:])
}

// tagBasis[k] holds the nibbles whose message (byte i = nibble i) has a CRC16 with only
// slot bit k set among the 14 slot bits: Gauss-Jordan elimination over GF(2) on the
// CRCs of the 16 single-bit messages.
var tagBasis = func() (basis [14]uint16) {
	type row struct{ slot, nibbles uint16 }
	rows := make([]row, 16)
	for j := range rows {
		var m [4]byte
		m[j/4] = 1 << (j % 4)
		rows[j] = row{crc16(string(m[:])) & (clusterSlots - 1), 1 << j}
	}
	for k := range basis {
		p := k
		for p < len(rows) && rows[p].slot>>k&1 == 0 {
			p++
		}
		if p == len(rows) {
			continue // cannot happen (rank 14); fencekey_test.go checks every slot
		}
		rows[k], rows[p] = rows[p], rows[k]
		for i := range rows {
			if i != k && rows[i].slot>>k&1 != 0 {
				rows[i].slot ^= rows[k].slot
				rows[i].nibbles ^= rows[k].nibbles
			}
		}
	}
	for k := range basis {
		basis[k] = rows[k].nibbles // rows[k].slot is now exactly bit k
	}
	return basis
}()

// ErrFenceExhausted means a key's fencing counter has reached 2^63 − 1
// (math.MaxInt64), the largest fencing token: Redis integers are 64-bit signed, so no
// higher token exists, and Acquire on that key fails at once instead of wrapping
// around or granting a token that is not above an earlier one. The error also matches
// ErrUnavailable. Only an operator can go on: delete the key's counters on every node
// (FenceKeys) and reset the highest token every protected resource has accepted, as
// the new tokens start low again. A Client that saw the top asks the nodes again on
// its next Acquire, so it picks up such a reset without a restart.
var ErrFenceExhausted = errors.New("redlock: fencing counter at its maximum")

// nextFence returns the token to propose after a counter of high: high + 1, or an
// error wrapping ErrFenceExhausted and ErrUnavailable when high is the largest token.
func nextFence(key string, high int64) (int64, error) {
	if high < math.MaxInt64 {
		return high + 1, nil
	}
	return 0, &fenceExhaustedError{key: key}
}

// fenceExhaustedError reports a counter at the largest token, naming it.
type fenceExhaustedError struct{ key string }

func (e *fenceExhaustedError) Error() string {
	names := fenceKeys(e.key, false)[1:]
	for i, n := range names {
		names[i] = fmt.Sprintf("%q", n)
	}
	return fmt.Sprintf("redlock: acquire %q: fencing counter %s is at %d on a node, the largest token: no higher one exists (%v)",
		e.key, strings.Join(names, " or "), int64(math.MaxInt64), ErrUnavailable)
}

// Unwrap returns ErrFenceExhausted and ErrUnavailable.
func (e *fenceExhaustedError) Unwrap() []error { return []error{ErrFenceExhausted, ErrUnavailable} }

// fenceCacheSize bounds the keys a Client remembers counters for; past it the cache
// starts afresh (a forgotten key costs one extra round trip: the phase-1 read).
const fenceCacheSize = 4096

// fenceCache remembers, per key, the highest fencing counter a Client has seen, so the
// next Acquire can propose a token in one round trip instead of reading first.
type fenceCache struct {
	mu   sync.Mutex // innermost (see the lock order above Client)
	seen map[string]int64
}

func (f *fenceCache) get(key string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.seen[key]
	return v, ok
}

// forget drops what is known of key's counter.
func (f *fenceCache) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.seen, key)
}

// raise records v for key unless a higher value is known.
func (f *fenceCache) raise(key string, v int64) {
	if v <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil || len(f.seen) >= fenceCacheSize {
		f.seen = make(map[string]int64)
	}
	f.seen[key] = max(f.seen[key], v)
}
