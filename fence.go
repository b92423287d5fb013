package redlock

import (
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// FenceKey returns the name of the fencing counter that a Client with Options.Fencing
// keeps for key on the member rdb, for tools that inspect the nodes (redlock status).
//
// On a plain, Sentinel-managed or Ring member it is KEY:fence. A script on a Redis
// Cluster may only touch keys of one hash slot, so on a *redis.ClusterClient member the
// counter must share KEY's slot: it is KEY:fence when that name is in KEY's slot
// (always when KEY has a hash tag, a non-empty {...}; by chance for a few other keys);
// otherwise fence:{KEY} when KEY contains no "}" (the braces make KEY itself the hash
// tag), and fence:{T}{KEY} for the remaining keys, where T is four characters of
// "@A-O" chosen so that T hashes to KEY's slot. Different keys never get the same
// counter name on a node. Do not use a counter's name as a lock key. The name depends
// on the kind of client: switching a member between a plain and a cluster client
// (redis.NewFailoverClusterClient is one) renames the counters of keys without a tag,
// which is like replacing the node (docs/safety.md: a new node first gets the highest
// counter of the old set).
func FenceKey(rdb redis.UniversalClient, key string) string {
	return fenceKey(key, isCluster(rdb))
}

// fenceKey names the fencing counter of a lock key on a node that is a Redis Cluster
// (cluster) or not. Names of the first kind end in ":fence", the others in "}", so
// the kinds never meet; within each, the key can be read back from the name
// (fencekey_test.go checks it), so two keys never share a counter.
func fenceKey(key string, cluster bool) string {
	name := key + ":fence"
	if !cluster {
		return name // as before clusters were handled: existing counters stay valid
	}
	slot := hashSlot(key)
	switch {
	case hashSlot(name) == slot:
		// Every key with a hash tag, and any other key whose counter worked before
		// clusters were handled: its counter keeps its name, and its value.
		return name
	case strings.IndexByte(key, '}') < 0:
		return "fence:{" + key + "}"
	}
	return "fence:{" + slotTag(slot) + "}{" + key + "}"
}

// isCluster reports whether a member is a Redis Cluster client.
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
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

// fenceCacheSize bounds the keys a Client remembers counters for; past it the cache
// starts afresh (a forgotten key costs one extra round trip: the phase-1 read).
const fenceCacheSize = 4096

// fenceCache remembers, per key, the highest fencing counter a Client has seen, so the
// next Acquire can propose a token in one round trip instead of reading first.
type fenceCache struct {
	mu   sync.Mutex
	seen map[string]int64
}

func (f *fenceCache) get(key string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.seen[key]
	return v, ok
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
