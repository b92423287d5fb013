package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestStatusOwnerKeyParse: the owner, the head and the hold count of owner's keys
// as the library writes them (with and without the lease's fencing token, with
// owners that contain the format's own separators), and values that are not one.
func TestStatusOwnerKeyParse(t *testing.T) {
	const id1, id2 = "0b9e15c2-58a4-4c7b-9f42-3d2f1f6a9e01", "61f0a3de-1c1b-4e0e-8a41-7d2b9c3e4f55"
	tests := []struct {
		value        string
		owner, fence string
		holds        int
		ok           bool
	}{
		{"owner 5:job-1|" + id1 + "|", "job-1", "", 1, true},
		{"owner 5:job-1|" + id1 + "|" + id2 + "|", "job-1", "", 2, true},
		{"owner 5:job-1|#17|" + id1 + "|" + id2 + "|", "job-1", "17", 2, true},
		{"owner 8:a|b:#c|d|" + id1 + "|", "a|b:#c|d", "", 1, true},
		{"owner 13:owner 3:x|#1||#4|" + id2 + "|", "owner 3:x|#1|", "4", 1, true},
		{"owner 5:job-1|", "job-1", "", 0, true},
		{id1, "", "", 0, false},
		{"owner 05:job-1|" + id1 + "|", "", "", 0, false},
		{"owner 0:|" + id1 + "|", "", "", 0, false},
		{"owner 6:job-1|" + id1 + "|", "", "", 0, false},
		{"owner 5:job-1|" + id1, "", "", 0, false},
		{"owner 99:job-1|", "", "", 0, false},
	}
	for _, tc := range tests {
		k, ok := parseOwnerKey(tc.value)
		if ok != tc.ok || k.owner != tc.owner || k.holds != tc.holds || k.fence != tc.fence {
			t.Errorf("parseOwnerKey(%q) = %+v, %v; want owner %q, %d holds, fence %q, %v", tc.value, k, ok, tc.owner, tc.holds, tc.fence, tc.ok)
		}
		if ok && !strings.HasPrefix(tc.value, k.head) {
			t.Errorf("parseOwnerKey(%q): head %q is not the value's start", tc.value, k.head)
		}
	}
}

// TestStatusOwnerHolds: an owner with two holds taken by the library (with fencing),
// one of which a node missed. Status shows the owner and each node's count (2, 2, 1),
// PTTL and the fencing counter, and counts every node for the owner: held.
func TestStatusOwnerHolds(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	c, err := redlock.New(redistest.Clients(servers), redlock.Options{Fencing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const key, owner = "ledger", "invoice run|1130"
	ctx := redlock.WithOwner(t.Context(), owner)
	outer, err := c.TryAcquire(ctx, key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Acquire(ctx, key, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Release(t.Context())
	defer inner.Release(t.Context())
	// A grant needs two nodes; the third call may still be on its way.
	hold := inner.Token() + "|"
	waitFor(t, "the second hold on every node", func() bool {
		for _, v := range keyValues(t, servers, key) {
			if !strings.Contains(v, hold) {
				return false
			}
		}
		return true
	})
	// The third node missed the second hold (as one that was down during its acquire).
	rdb := servers[2].Client()
	if err := rdb.Do(t.Context(), "SET", key, strings.Replace(rdb.Get(t.Context(), key).Val(), hold, "", 1), "KEEPTTL").Err(); err != nil {
		t.Fatal(err)
	}

	r := runInProcess(t, nil, "status", "--nodes", urls, key)
	t.Logf("status:\n%s", r.stdout)
	row := regexp.MustCompile(`(?m)^redis://\S+ +yes +owner "invoice run\|1130" +(\d) +(\d+(?:\.\d+)?)s +1$`)
	var holds []string
	for _, m := range row.FindAllStringSubmatch(r.stdout, -1) {
		holds = append(holds, m[1])
	}
	if strings.Join(holds, ",") != "2,2,1" {
		t.Errorf("holds per node %q, want 2,2,1 (rows with the owner, PTTL and fence 1):\n%s", holds, r.stdout)
	}
	if want := `verdict: held by a majority: owner "invoice run|1130" on 3 of 3 nodes (2 needed)`; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("exit %d, want the verdict %q:\n%s", r.code, want, r.stdout)
	}
	if strings.Contains(r.stdout, "fair queue") {
		t.Errorf("a fair queue shown for a key without one:\n%s", r.stdout)
	}
}

// keyValues returns key's value on each server ("" when absent).
func keyValues(t *testing.T, servers []*redistest.Server, key string) []string {
	t.Helper()
	vals := make([]string, len(servers))
	for i, s := range servers {
		vals[i] = s.Client().Get(t.Context(), key).Val()
	}
	return vals
}

// TestStatusFairQueueOfWrongType: a fair queue name that holds another type is shown
// as the queue's problem; the lock key's row and the verdict are as without it.
func TestStatusFairQueueOfWrongType(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	q, _, _ := redlock.FairKeys("odd")
	servers[0].Client().Set(t.Context(), "odd", "some-token-0123", 10*time.Second)
	servers[1].Client().Set(t.Context(), "odd", "some-token-0123", 10*time.Second)
	servers[0].Client().Set(t.Context(), q, "not a sorted set", 0)
	r := runInProcess(t, nil, "status", "--nodes", urls, "odd")
	if r.code != 0 || !strings.Contains(r.stdout, "verdict: held by a majority: token some-tok… on 2 of 3 nodes") ||
		!regexp.MustCompile(`(?m)^redis://`+regexp.QuoteMeta(servers[0].Addr())+` +\? +- +- +- +- +.*WRONGTYPE`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^redis://`+regexp.QuoteMeta(servers[1].Addr())+` +- +- +- +- +- +no queue$`).MatchString(r.stdout) {
		t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if v := servers[0].Client().Get(t.Context(), q).Val(); v != "not a sorted set" {
		t.Errorf("status changed the queue's key: %q", v)
	}
}
