package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/redlocktest"
)

// TestStatusClusterMember: with a Redis Cluster of two masters as one of three members
// (redis+cluster:// with a second seed in addr=), status shows the holder, PTTL and
// fencing counter on the cluster row too, read from the counter name the library uses,
// for a key without a hash tag (counter fence:{KEY} there) and one with a tag.
func TestStatusClusterMember(t *testing.T) {
	cluster := redlocktest.StartCluster(t, 2, redlocktest.Options{})
	servers, plainURLs := nodes(t, 2, redistest.Options{})
	addrs := cluster.Addrs()
	clusterURL := "redis+cluster://" + addrs[0] + "?addr=" + addrs[1]
	urls := clusterURL + "," + plainURLs

	cc := cluster.ClusterClient()
	rdbs := append([]redis.UniversalClient{cc}, redistest.Clients(servers)...)
	c, err := redlock.New(rdbs, redlock.Options{Fencing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, key := range []string{"job", "{user1000}.job"} {
		lock, err := c.TryAcquire(t.Context(), key, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		settle(t, servers, key, true)
		deadline := time.Now().Add(5 * time.Second) // the cluster's SET may still be out too
		for cc.Exists(t.Context(), key).Val() != 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		r := runInProcess(t, nil, "status", "--nodes", urls, key)
		if r.code != 0 || !strings.Contains(r.stdout, "verdict: held by a majority: token "+lock.Token()[:8]+"… on 3 of 3 nodes") {
			t.Errorf("%s: exit %d\n%s%s", key, r.code, r.stdout, r.stderr)
		}
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(clusterURL) + ` +yes +` + lock.Token()[:8] + `… +\d+(?:\.\d+)?s +1$`)
		if !row.MatchString(r.stdout) {
			t.Errorf("%s: want the cluster's row with holder, PTTL and fence 1:\n%s", key, r.stdout)
		}
		if got := len(regexp.MustCompile(`(?m)… +\d+(?:\.\d+)?s +1$`).FindAllString(r.stdout, -1)); got != 3 {
			t.Errorf("%s: %d rows with PTTL and fence 1, want 3:\n%s", key, got, r.stdout)
		}
		if counter := redlock.FenceKeys(cc, key)[0]; cc.Get(t.Context(), counter).Val() != "1" {
			t.Errorf("%s: the cluster's counter %s is not 1", key, counter)
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
