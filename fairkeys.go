package redlock

import (
	"strings"
	"sync/atomic"
)

// The names of a fair key's companion keys on the nodes (docs/design.md, "Fair locks
// across processes").

// FairKeys returns the names under which Clients with Options.Fair keep key's queue on
// every node, for tools that inspect the nodes (redlock status): the waiter queue (a
// sorted set of waiter ids scored by ticket, the head first), the waiters' leases (a
// sorted set of the same ids scored by the end of their lease in milliseconds of the
// node's clock) and the ticket counter. All three lie in key's Redis Cluster hash
// slot: KEY:fairq (and so on) when that name is in the slot, as it is for every key
// with a hash tag; otherwise fairq:{KEY} when KEY has no "}", else fairq:{T}{KEY}
// with a four-character tag T of KEY's slot, as for FenceKeys. A fourth companion,
// the waiters' hand registrations (docs/design.md, "Hand-over by the nodes"), is named
// the same way with "fairh". Do not use these names as lock keys.
func FairKeys(key string) (queue, leases, counter string) {
	return slotName(key, "fairq"), slotName(key, "fairl"), slotName(key, "fairn")
}

// fairKeys returns the KEYS of every fair step: the lock key, then FairKeys, then the
// hand registrations. The slice may be shared: callers must not modify it (a caller
// that adds KEYS appends to a clipped copy, as Client.start does).
func fairKeys(key string) []string {
	entry := &recentFairKeys[hashSlot(key)%uint16(len(recentFairKeys))]
	if last := entry.Load(); last != nil && last.key == key {
		return last.keys
	}
	q, l, n := FairKeys(key)
	keys := []string{key, q, l, n, slotName(key, "fairh")}
	entry.Store(&fairKeySet{key: key, keys: keys})
	return keys
}

// fairKeySet is fairKeys's answer for one key.
type fairKeySet struct {
	key  string
	keys []string
}

// recentFairKeys remembers fairKeys's recent answers, one per entry, chosen by the
// key's hash slot: a hot key's waiters, draws and releases ask for the same names again
// and again, and making them was a tenth of a fair grant's allocations
// (docs/performance.md). A fixed number of entries, so memory stays flat however many
// keys a process locks.
var recentFairKeys [16]atomic.Pointer[fairKeySet]

// slotName names a companion key of kind for key in key's hash slot (see FairKeys).
func slotName(key, kind string) string {
	name := key + ":" + kind
	slot := hashSlot(key)
	switch {
	case hashSlot(name) == slot:
		return name
	case strings.IndexByte(key, '}') < 0:
		return kind + ":{" + key + "}"
	}
	return kind + ":{" + slotTag(slot) + "}{" + key + "}"
}
