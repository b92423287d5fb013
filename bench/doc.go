// Package bench compares this module's Redlock client with
// github.com/go-redsync/redsync/v4 (a Redlock peer) and github.com/bsm/redislock
// (a single-node lock, as a reference) on the same real redis-server nodes in the
// same run. It is a separate module so that the peers never enter the library's
// go.mod.
//
// The workloads are Go benchmarks; run them from this directory with
//
//	go test -run '^$' -bench . -benchmem -benchtime=2s -count=2 | tee bench.txt
//	go run ./cmd/ratio bench.txt
//
// Sub-benchmarks are named Workload/lib=NAME/G=GOROUTINES/N=NODES so benchstat can
// compare the libraries (benchstat -col /lib bench.txt); the multi-Client workloads,
// K independent Clients with one worker each, Clients/WORKLOAD/lib=NAME/K=K/N=NODES,
// and the same hot key with one operating-system process per Client,
// Processes/hot/lib=NAME/K=K/N=NODES. See docs/performance.md in the repository root
// for the workloads, their metrics and the figures.
package bench
