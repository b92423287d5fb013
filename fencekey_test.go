package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestCRC16 checks the checksum against the published check value of CRC-16/XMODEM and
// against a bit-by-bit computation.
func TestCRC16(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#04x, want 0x31c3", got)
	}
	bitwise := func(s string) uint16 {
		var crc uint16
		for i := 0; i < len(s); i++ {
			crc ^= uint16(s[i]) << 8
			for range 8 {
				if crc&0x8000 != 0 {
					crc = crc<<1 ^ 0x1021
				} else {
					crc <<= 1
				}
			}
		}
		return crc
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		if got, want := crc16(string(b)), bitwise(string(b)); got != want {
			t.Fatalf("crc16(%q) = %#04x, bit by bit %#04x", b, got, want)
		}
	}
}

// TestHashSlotTags: which part of a key is hashed, by Redis' rules.
func TestHashSlotTags(t *testing.T) {
	tests := []struct{ key, hashed string }{
		{"job", "job"},                                     // no tag
		{"{user1000}.following", "user1000"},               // a tag
		{"foo{bar}{zap}", "bar"},                           // only the first tag counts
		{"foo{}{bar}", "foo{}{bar}"},                       // the first "{}" is empty: whole key
		{"foo{{bar}}zap", "{bar"},                          // from the first "{" to the first "}"
		{"foo{bar}{zap}", "bar"},                           // again, with the later tag ignored
		{"a{b", "a{b"},                                     // "{" without "}": whole key
		{"}x{", "}x{"},                                     // "}" before "{": whole key
		{"a}b{c}", "c"},                                    // a "}" before the first "{" does not matter
		{"{", "{"}, {"}", "}"}, {"{}", "{}"}, {"{a}", "a"}, // short cases
	}
	for _, tt := range tests {
		if got, want := hashSlot(tt.key), crc16(tt.hashed)&(clusterSlots-1); got != want {
			t.Errorf("hashSlot(%q) = %d, want %d (the slot of %q)", tt.key, got, want, tt.hashed)
		}
	}
}

// TestSlotTagEverySlot: each of the 16384 slots has a tag of four characters without
// braces that hashes to it.
func TestSlotTagEverySlot(t *testing.T) {
	for slot := range uint16(clusterSlots) {
		tag := slotTag(slot)
		if len(tag) != 4 || strings.ContainsAny(tag, "{}") {
			t.Fatalf("slotTag(%d) = %q: want four characters without braces", slot, tag)
		}
		if got := hashSlot("{" + tag + "}"); got != slot {
			t.Fatalf("slotTag(%d) = %q hashes to slot %d", slot, tag, got)
		}
	}
}

// chanceKey returns a key without a hash tag whose KEY:fence happens to share its slot.
func chanceKey(t *testing.T) string {
	for i := range 1 << 20 {
		k := fmt.Sprintf("k%d", i)
		if hashSlot(k) == hashSlot(k+":fence") {
			return k
		}
	}
	t.Fatal("no key found whose KEY:fence shares its slot by chance")
	return ""
}

// TestFenceKeyNames: the counter's name for each kind of key, on a plain node and on a
// Cluster member.
func TestFenceKeyNames(t *testing.T) {
	chance := chanceKey(t)
	tests := []struct{ key, cluster string }{
		{"job", "fence:{job}"},                                      // no tag: the key becomes the tag
		{"{user1000}.lock", "{user1000}.lock:fence"},                // a tag: the name of plain nodes
		{"a{b", "fence:{a{b}"},                                      // "{" without a "}" after it
		{"a{}b", "fence:{" + slotTag(hashSlot("a{}b")) + "}{a{}b}"}, // empty tag
		{"}x{", "fence:{" + slotTag(hashSlot("}x{")) + "}{}x{}"},    // a "}" but no tag
		{chance, chance + ":fence"},                                 // no tag, but KEY:fence in its slot
	}
	for _, tt := range tests {
		if got := fenceKeys(tt.key, true); !slices.Equal(got, []string{tt.key, tt.cluster}) {
			t.Errorf("cluster: fenceKeys(%q) = %q, want the key and %q", tt.key, got, tt.cluster)
		}
		// A plain node keeps the older name KEY:fence too, where it differs.
		want := []string{tt.key, tt.cluster}
		if tt.cluster != tt.key+":fence" {
			want = append(want, tt.key+":fence")
		}
		if got := fenceKeys(tt.key, false); !slices.Equal(got, want) {
			t.Errorf("plain node: fenceKeys(%q) = %q, want %q", tt.key, got, want)
		}
	}
}

// keyOfCounter reads the lock key back from a counter name made by fenceKey on a
// Cluster member. That it always finds the key proves that two keys never share a
// counter name: the name determines the key.
func keyOfCounter(name string) (string, bool) {
	if key, ok := strings.CutSuffix(name, ":fence"); ok {
		return key, true
	}
	body, ok := strings.CutPrefix(name, "fence:{")
	if !ok {
		return "", false
	}
	body, ok = strings.CutSuffix(body, "}")
	if !ok {
		return "", false
	}
	tag, rest, two := strings.Cut(body, "}")
	if !two {
		return tag, true // fence:{KEY}
	}
	key, ok := strings.CutPrefix(rest, "{")
	return key, ok // fence:{T}{KEY}
}

// checkFenceKey checks the properties of one key's counter names.
func checkFenceKey(t *testing.T, key string) {
	t.Helper()
	name := fenceName(key)
	if hashSlot(name) != hashSlot(key) {
		t.Fatalf("fenceName(%q) = %q is in slot %d, the key in %d", key, name, hashSlot(name), hashSlot(key))
	}
	if back, ok := keyOfCounter(name); !ok || back != key {
		t.Fatalf("fenceName(%q) = %q reads back as %q, %v", key, name, back, ok)
	}
	if plain := fenceKeys(key, false); plain[1] != name || plain[len(plain)-1] != key+":fence" {
		t.Fatalf("plain node: fenceKeys(%q) = %q, want %q and %q", key, plain, name, key+":fence")
	}
}

// FuzzFenceKey: for any key, the counter on a Cluster member is in the key's slot (by
// this package's CRC16) and names no other key's counter; on a plain node it is
// KEY:fence. CLUSTER KEYSLOT checks the CRC16 in TestFenceKeySlotsOnRedis.
func FuzzFenceKey(f *testing.F) {
	for _, key := range []string{"job", "{user1000}.lock", "a{b", "a{}b", "}x{", "{}", "}:fence", "x{y}:fence"} {
		f.Add(key)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if key == "" {
			return // Acquire refuses an empty key
		}
		checkFenceKey(t, key)
	})
}

// sampleKeys returns keys of every kind: the table's, random bytes with many braces,
// and keys shaped like counter names.
func sampleKeys(r *rand.Rand, n int) []string {
	keys := []string{"job", "{user1000}.lock", "a{b", "a{}b", "}x{", "{}", "{", "}", "}:fence", "fence:{job}", "{a}:fence"}
	const alphabet = "{}{}:abc\x00\xff"
	for len(keys) < n {
		b := make([]byte, 1+r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	return keys
}

// TestFenceKeyRandom: the properties of FuzzFenceKey over many random keys, and no two
// of them share a counter name.
func TestFenceKeyRandom(t *testing.T) {
	names := make(map[string]string)
	for _, key := range sampleKeys(rand.New(rand.NewPCG(3, 4)), 100000) {
		checkFenceKey(t, key)
		name := fenceName(key)
		if other, ok := names[name]; ok && other != key {
			t.Fatalf("keys %q and %q share the counter %q", key, other, name)
		}
		names[name] = key
	}
}

// TestFenceKeySlotsOnRedis: Redis' own CLUSTER KEYSLOT agrees with hashSlot for a sample
// of keys and their counter names, and the names are in their keys' slots.
func TestFenceKeySlotsOnRedis(t *testing.T) {
	node := redistest.StartCluster(t, 1, redistest.Options{}).Masters[0].Client()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	keys := sampleKeys(rand.New(rand.NewPCG(5, 6)), 2000)
	for i := range 64 { // a few keys whose counter is fence:{T}{KEY}, with many tags
		keys = append(keys, fmt.Sprintf("}%d", i))
	}
	var names []string
	for _, k := range keys {
		names = append(names, k, fenceName(k))
	}
	pipe := node.Pipeline()
	for _, name := range names {
		pipe.ClusterKeySlot(ctx, name)
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		slot, err := cmd.(interface{ Result() (int64, error) }).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(hashSlot(names[i])); slot != want {
			t.Fatalf("CLUSTER KEYSLOT %q = %d, hashSlot says %d", names[i], slot, want)
		}
		if i%2 == 1 && slot != int64(hashSlot(names[i-1])) {
			t.Fatalf("counter %q of key %q: slot %d, the key's %d", names[i], names[i-1], slot, hashSlot(names[i-1]))
		}
	}
}
