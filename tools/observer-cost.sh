#!/usr/bin/env bash
# The cost of Options.Observer (issue #14): BenchmarkObserver's obs=off and obs=otel
# sides of one G, as separate processes in ABBA order (off otel, otel off, ...), PAIRS
# pairs of BENCHTIME each, so that a box whose speed drifts hits both sides alike.
# Prints benchstat's table (medians, p-values) and, per pair, the ratio otel/off of
# cycles/s; the median of those ratios is the figure docs/observability.md reports.
#
#   tools/observer-cost.sh [PAIRS [G [BENCHTIME]]]     # defaults: 30 8 1500ms
#
# Keep the box otherwise idle while it runs: 30 pairs take 3-4 minutes at G=8.
set -euo pipefail
cd "$(dirname "$0")/../bench"
pairs=${1:-30}
g=${2:-8}
benchtime=${3:-1500ms}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go test -c -o "$work/obs.test" .
out="$work/obs.txt"
for p in $(seq "$pairs"); do
  if (( p % 2 )); then order="off otel"; else order="otel off"; fi
  for side in $order; do
    "$work/obs.test" -test.run '^$' -test.bench "Observer/obs=$side/G=$g/" \
      -test.benchmem -test.benchtime="$benchtime" | grep '^Benchmark' >> "$out"
  done
done
go run golang.org/x/perf/cmd/benchstat -col /obs "$out"
# cycles/s of each run, in run order; pair k is runs 2k-1 and 2k.
awk '
  { for (i = 2; i <= NF; i++) if ($i == "cycles/s") v = $(i - 1)
    side = ($1 ~ /obs=off/) ? "off" : "otel"
    run++; val[run] = v; sd[run] = side }
  END {
    n = 0
    for (k = 1; k + 1 <= run; k += 2) {
      off = (sd[k] == "off") ? val[k] : val[k + 1]
      on = (sd[k] == "off") ? val[k + 1] : val[k]
      r[++n] = on / off
    }
    # insertion sort, then the median
    for (i = 2; i <= n; i++) { x = r[i]; j = i - 1; while (j > 0 && r[j] > x) { r[j + 1] = r[j]; j-- } r[j + 1] = x }
    m = (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
    printf "pairs %d: otel/off cycles/s, median of the pair ratios %.3f (lowest %.3f, highest %.3f)\n", n, m, r[1], r[n]
  }' "$out"
