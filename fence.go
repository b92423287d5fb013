package redlock

import "sync"

// fenceKey names the fencing counter of a lock key.
func fenceKey(key string) string { return key + ":fence" }

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
