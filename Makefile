# The test command of the README: installs what the tests need, then runs every test
# with the race detector against real redis-server processes the tests start themselves.
.PHONY: test deps check

test: deps
	go test -race -count=1 ./...

deps:
	./tools/install-deps.sh

# Formatting and vet, as CI runs them before the tests.
check:
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...

# Benchmarks against go-redsync/redsync and bsm/redislock, in the separate module bench/
# (see docs/performance.md): real redis-server nodes started by the benchmarks, all
# libraries alternating in one run, then the redlock/redsync ratio table. The results
# stay in bench/bench.txt. BENCHFLAGS sets the run length, BENCH selects workloads.
.PHONY: bench bench-test
BENCH ?= .
BENCHFLAGS ?= -benchtime=2s -count=2
bench: SHELL := /bin/bash
bench: deps
	cd bench && set -o pipefail && go test -run '^$$' -bench '$(BENCH)' -benchmem $(BENCHFLAGS) . | tee bench.txt
	cd bench && go run ./cmd/ratio bench.txt

# The bench module's own tests: each workload for a moment, the harness and the ratio command.
bench-test: deps
	cd bench && go vet ./... && go test -race -count=1 ./...
