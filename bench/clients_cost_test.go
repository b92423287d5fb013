package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlocktest"
)

// hotCost is what a multi-Client hot run costs: the CPU of this process (the K
// Clients) and of the nodes, and the script calls (EVAL and EVALSHA) the nodes ran
// with the time the nodes spent running them (INFO commandstats usec: the scripts
// alone, without reading, parsing and answering the commands).
type hotCost struct {
	client, server time.Duration
	scripts        int
	scriptTime     time.Duration
	ok             bool
}

// measureCost reads the costs so far; the difference of two readings is a run's.
func measureCost(ns []*redlocktest.Process) hotCost {
	client, ok := processCPU()
	server, err := serverCPU(ns)
	scripts, scriptTime, serr := scriptCallsOn(ns)
	return hotCost{client: client, server: server, scripts: scripts, scriptTime: scriptTime, ok: ok && err == nil && serr == nil}
}

// reportCost reports the costs between readings from and to per grant.
func reportCost(b *testing.B, from, to hotCost, grants int) {
	if !from.ok || !to.ok || grants == 0 {
		return
	}
	g := float64(grants)
	b.ReportMetric(float64((to.client-from.client).Microseconds())/g, "client-cpu-us/grant")
	b.ReportMetric(float64((to.server-from.server).Microseconds())/g, "server-cpu-us/grant")
	b.ReportMetric(float64(to.scripts-from.scripts)/g, "scripts/grant")
	b.ReportMetric(float64((to.scriptTime-from.scriptTime).Microseconds())/g, "script-us/grant")
}

// scriptCallsOn sums the calls of EVAL and EVALSHA that INFO commandstats counts on
// the nodes (successful or not), and the time the nodes spent in them.
func scriptCallsOn(ns []*redlocktest.Process) (int, time.Duration, error) {
	total, usecs := 0, 0
	for _, n := range ns {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		stats, err := rdb.Info(context.Background(), "commandstats").Result()
		_ = rdb.Close()
		if err != nil {
			return 0, 0, err
		}
		for _, line := range strings.Split(stats, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || (name != "cmdstat_eval" && name != "cmdstat_evalsha") {
				continue
			}
			var calls, usec int
			if _, err := fmt.Sscanf(rest, "calls=%d,usec=%d", &calls, &usec); err == nil {
				total, usecs = total+calls, usecs+usec
			}
		}
	}
	return total, time.Duration(usecs) * time.Microsecond, nil
}
