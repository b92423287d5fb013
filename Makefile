# The test command of the README: installs what the tests need, then runs every test of
# every module with the race detector against real redis-server processes the tests
# start themselves (docs/design.md, "Modules"). The library's module is tested outside
# the workspace (GOWORK=off), with exactly the dependencies a user's build gets; the
# others through go.work.
.PHONY: test deps check test-docker stress

# The modules beside the library's, each a directory with its own go.mod.
MODULES := redlocktest cmd/redlock nemesis bench redlockotel tools/dashpreview

test: deps
	GOWORK=off go test -race -count=1 -p 1 ./...
	go test -race -count=1 -p 1 ./redlocktest/... ./cmd/redlock/...
	cd nemesis && go test -race -count=1 ./...
	cd bench && go test -race -count=1 ./...
	cd redlockotel && go test -race -count=1 ./...
	cd tools/dashpreview && go test -race -count=1 ./...

deps:
	./tools/install-deps.sh

# Formatting and vet, as CI runs them before the tests.
check:
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	GOWORK=off go vet ./...
	for m in $(MODULES); do (cd $$m && go vet ./...) || exit 1; done

# The release path of docs/design.md ("Modules"): the library, redlocktest, redlockotel and the CLI
# packed from the working tree into a module proxy on disk at one version, then
# `go install .../cmd/redlock@VERSION` from it outside any workspace (tools/install-check.py).
.PHONY: install-check
install-check:
	python3 tools/install-check.py

# Benchmarks against go-redsync/redsync and bsm/redislock, in the separate module bench/
# (see docs/performance.md): real redis-server nodes started by the benchmarks, the
# libraries alternating workload by workload, BENCHRUNS whole runs one after another
# (so a drifting box hits every library alike), then the redlock/redsync ratio table.
# The results stay in bench/bench.txt; BENCH selects workloads, BENCHFLAGS the length.
.PHONY: bench bench-test
BENCH ?= .
BENCHFLAGS ?= -benchtime=2s
BENCHRUNS ?= 2
bench: SHELL := /bin/bash
bench: deps
	cd bench && set -o pipefail && rm -f bench.txt && \
	for run in $$(seq $(BENCHRUNS)); do \
		go test -run '^$$' -bench '$(BENCH)' -benchmem $(BENCHFLAGS) . | tee -a bench.txt || exit 1; \
	done
	cd bench && go run ./cmd/ratio bench.txt

# The bench module's own tests alone (make test runs them too): each workload for a
# moment, the harness and the ratio command.
bench-test: deps
	cd bench && go vet ./... && go test -race -count=1 ./...

# The Docker backend of redlocktest against a private Docker engine that the script
# starts (installing docker.io if needed), then stops and cleans up.
test-docker: deps
	./docker/test-docker.sh

# Flake hunting: the packages that start redis-server, RUNS times each under LOAD busy
# loops (tools/stress.sh). Not part of CI.
RUNS ?= 5
LOAD ?= 1
stress: deps
	RUNS=$(RUNS) LOAD=$(LOAD) ./tools/stress.sh

# The randomized nemesis (the separate module nemesis/, see docs/safety.md): schedules of
# faults drawn from seeds, run on real redis-server nodes with worker processes, every
# history checked with porcupine. DURATION is how long to soak; SEED=N replays one seed
# (FAMILY=name narrows it to one family); a failing run prints where its pictures are.
# Without the race detector, so that a run does as many operations as it can.
.PHONY: soak
DURATION ?= 60s
SEED ?=
FAMILY ?=
soak: deps
	cd nemesis && NEMESIS_DURATION=$(DURATION) NEMESIS_SEED=$(SEED) NEMESIS_FAMILY=$(FAMILY) \
		go test -count=1 -timeout 0 -run '^TestSoak$$' -v .

# Negative controls for the nemesis (nemesis/cmd/mutants): each known-bad change is
# applied to a temporary copy of the tree and must be caught by the randomized run of
# its schedule family within MUTANT_BUDGET; exits non-zero if any mutant survives.
.PHONY: mutants
MUTANT_BUDGET ?= 90s
mutants: deps
	cd nemesis && go run ./cmd/mutants -budget $(MUTANT_BUDGET)

# Fuzzing: each fuzz target of the root package for FUZZTIME, one after another (go
# test takes one -fuzz target per run), then how many inputs each one executed. A
# failing input is written to testdata/fuzz/<target>/ and stops the run.
# FuzzKeysAndTTLs starts redis-server processes (three per fuzzing process).
# Go before 1.27 may fail a run that found nothing with a bare "context deadline
# exceeded" at the end of FUZZTIME, a race in its fuzzing coordinator
# (go.dev/issue/75804); such a run, with no failing input written, counts as passed
# and says so.
.PHONY: fuzz
FUZZTIME ?= 10s
FUZZTARGETS ?= FuzzNewFromURLs FuzzJudge FuzzKeysAndTTLs FuzzFenceKey
fuzz: SHELL := /bin/bash
fuzz: deps
	@summary=""; \
	for target in $(FUZZTARGETS); do \
		echo "== $$target for $(FUZZTIME)"; \
		log=$$(mktemp); \
		go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s . 2>&1 | tee $$log; \
		status=$${PIPESTATUS[0]}; \
		if [ $$status -ne 0 ] && grep -q '^    context deadline exceeded$$' $$log && ! grep -q 'Failing input written' $$log; then \
			echo "== $$target: the end-of-fuzztime race of Go's fuzzing coordinator (go.dev/issue/75804), no failing input: passed"; \
			status=0; \
		fi; \
		execs=$$(grep -o 'execs: [0-9]*' $$log | tail -1 | cut -d' ' -f2); \
		rm -f $$log; \
		summary+="$$(printf '%-18s %12s executions' $$target "$${execs:-0}")"$$'\n'; \
		if [ $$status -ne 0 ]; then printf '\n%s' "$$summary"; exit $$status; fi; \
	done; \
	printf '\nfuzzed %s each:\n%s' "$(FUZZTIME)" "$$summary"
