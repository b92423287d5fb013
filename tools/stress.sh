#!/usr/bin/env bash
# stress.sh: hunt flaky tests. Builds the race-enabled test binaries of the packages
# that start redis-server (the root package, cmd/redlock, redlocktest, cmd/redlock/safety,
# redlockotel; through go.work, one command builds packages of every module), then
# runs each RUNS times in turn while LOAD busy loops take CPU away, as a loaded CI
# machine does. Prints one line per run and the failing tests of each failed run;
# exits 1 if any run failed. The busy loops are stopped by PID on every exit.
#
#   RUNS=5 LOAD=1 tools/stress.sh            # or: make stress RUNS=5 LOAD=1
#   PKGS="./cmd/redlock/safety" RUN='TestMatrix' tools/stress.sh
set -euo pipefail

RUNS=${RUNS:-5}
LOAD=${LOAD:-1}
PKGS=${PKGS:-". ./cmd/redlock ./redlocktest ./cmd/redlock/safety ./redlockotel"}
RUN=${RUN:-.}

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
burners=()
cleanup() {
	for pid in "${burners[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
declare -A bin
for pkg in $PKGS; do
	name=$(echo "$pkg" | tr -c 'a-zA-Z0-9\n' '_')
	go test -race -c -o "$work/$name.test" "$pkg"
	bin[$pkg]=$work/$name.test
done

for _ in $(seq "$LOAD"); do
	sh -c 'while :; do :; done' &
	burners+=($!)
done

failed=0
for run in $(seq "$RUNS"); do
	for pkg in $PKGS; do
		log=$work/out.txt
		start=$(date +%s)
		# A test binary runs in its package's directory, as go test runs it.
		if (cd "$root/$pkg" && "${bin[$pkg]}" -test.count=1 -test.run "$RUN" >"$log" 2>&1); then
			echo "ok   run $run $pkg ($(($(date +%s) - start)) s)"
		else
			failed=1
			echo "FAIL run $run $pkg ($(($(date +%s) - start)) s)"
			grep -E -- '--- FAIL|_test\.go:[0-9]+:' "$log" | head -20 | sed 's/^/     /' || true
		fi
	done
done
exit "$failed"
