#!/usr/bin/env bash
# Draws docs/grafana-redlock.json from real data and takes a screenshot of it, without
# Grafana (AGPL, and not installable here): a real Prometheus server scrapes the
# `redlock` CLI's --metrics-addr endpoints while the CLI runs load, then
# tools/dashpreview runs every query of every panel through Prometheus's HTTP API and
# writes an HTML page, and headless Chromium takes the screenshot. dashpreview exits
# non-zero, naming the panel and query, when a query errors or returns no data, so
# this also checks the dashboard's queries against a real PromQL engine. Opt-in:
# neither `go test` nor CI runs it. Takes about 2 minutes once Prometheus is built.
#
#   tools/dashboard-screenshot.sh [OUTDIR]
#
# OUTDIR (default: a new temporary directory) gets dashboard.html, the logs of every
# process and prometheus.yml; the PNG goes to $PNG (default docs/dashboard.png).
# LOAD_SECONDS (default 90) is the window drawn; DASHBOARD (default
# docs/grafana-redlock.json) the dashboard evaluated; OPTIONAL, if set, is passed to
# dashpreview's -optional (queries allowed to return no data; none needs it today). Installs Debian's chromium with
# apt-get when it is missing and we are root, and Prometheus with `go install` into
# ${XDG_CACHE_HOME:-~/.cache}/redlock-tools. The load, all on loopback:
#   - `redlock demo --redis-server`: contention, node errors (nodes killed), a phase
#     without quorum (unavailable acquires), fencing tokens;
#   - `redlock bench` on two redis-server nodes and one dead address: a refused node
#     on every step, and hand-overs on the hot key (node timeout 250 ms, so that a
#     busy machine does not fail its calls);
#   - `redlock exec` holding a lock on three nodes with KeepAlive renewals; two of
#     them are paused (SIGSTOP) until the lock is lost: renewals that time out, and
#     a lost lock.
# Every process it starts is stopped by PID on exit, and its files removed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${1:-$(mktemp -d -t redlock-dash-XXXXXX)}
mkdir -p "$out"
out=$(realpath "$out")
png=${PNG:-docs/dashboard.png}
window=${LOAD_SECONDS:-90}
dashboard=${DASHBOARD:-docs/grafana-redlock.json}
promver=v0.316.0
cache=${XDG_CACHE_HOME:-$HOME/.cache}/redlock-tools
t0=$(date +%s)
step() { echo "[$(($(date +%s) - t0))s] $*"; }

pids=()    # every process started here, stopped by PID on exit
paused=()  # redis-server processes under SIGSTOP
work=$(mktemp -d -t redlock-dash-work-XXXXXX)
cleanup() {
  for pid in "${paused[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "dashboard-screenshot: chromium not found (Debian: apt-get install chromium)" >&2
    exit 1
  fi
fi

# A real Prometheus server, built from its Go module once and kept in the cache.
prom=$cache/prometheus-$promver/prometheus
if [ ! -x "$prom" ]; then
  step "go install github.com/prometheus/prometheus/cmd/prometheus@$promver (a few minutes)"
  if ! GOBIN=$cache/prometheus-$promver GOWORK=off go install "github.com/prometheus/prometheus/cmd/prometheus@$promver"; then
    newest=$(GOWORK=off go list -m -versions github.com/prometheus/prometheus | tr ' ' '\n' | tail -1)
    echo "dashboard-screenshot: $promver refused; trying the newest listed, $newest" >&2
    prom=$cache/prometheus-$newest/prometheus
    GOBIN=$cache/prometheus-$newest GOWORK=off go install "github.com/prometheus/prometheus/cmd/prometheus@$newest" || {
      echo "dashboard-screenshot: cannot install Prometheus ($promver, $newest) from the Go module proxy" >&2
      exit 1
    }
  fi
fi

# A go install build has no version stamped in (its buildinfo says ""): name the
# module version it was built from.
promname="$(go version -m "$prom" | awk '$1 == "mod" {print $3}') (Go module version)"

step "building redlock and dashpreview"
go build -o "$work/redlock" ./cmd/redlock
(cd tools/dashpreview && go build -o "$work/dashpreview" .)

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
startredis() { # startredis NAME PORT: a redis-server without persistence, in $work/NAME
  mkdir -p "$work/$1"
  redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/$1" \
    --logfile "$out/$1.log" &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$2" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "dashboard-screenshot: redis-server on port $2 did not start" >&2
  exit 1
}

promport=$(freeport) demoport=$(freeport) benchport=$(freeport) execport=$(freeport)
cat >"$out/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: redlock-demo
    static_configs: [{targets: ['127.0.0.1:$demoport']}]
  - job_name: redlock-bench
    static_configs: [{targets: ['127.0.0.1:$benchport']}]
  - job_name: redlock-exec
    static_configs: [{targets: ['127.0.0.1:$execport']}]
EOF
step "Prometheus on 127.0.0.1:$promport, scraping every second"
"$prom" --config.file="$out/prometheus.yml" --storage.tsdb.path="$work/prometheus" \
  --web.listen-address="127.0.0.1:$promport" >"$out/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$promport/-/ready" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$promport/-/ready" >/dev/null || { echo "dashboard-screenshot: Prometheus did not start (see $out/prometheus.log)" >&2; exit 1; }

# Nodes for bench (two, plus a port nothing listens on) and for exec (three).
b1=$(freeport) b2=$(freeport) dead=$(freeport) e1=$(freeport) e2=$(freeport) e3=$(freeport)
startredis bench1 "$b1"; startredis bench2 "$b2"
startredis exec1 "$e1"; startredis exec2 "$e2"; startredis exec3 "$e3"
exec2pid=${pids[-2]} exec3pid=${pids[-1]}

from=$(date +%s.%N)
step "load for ${window}s: demo, bench (one dead node of three), exec (its lock lost on purpose)"
phase=$(((window + 12) / 4))
"$work/redlock" demo --redis-server --phase "${phase}s" --metrics-addr "127.0.0.1:$demoport" \
  >"$out/demo.log" 2>&1 &
demo=$!; pids+=($demo)
"$work/redlock" bench --nodes "redis://127.0.0.1:$b1,redis://127.0.0.1:$b2,redis://127.0.0.1:$dead" \
  --duration "$((window / 4))s" --node-timeout 250ms --metrics-addr "127.0.0.1:$benchport" >"$out/bench.log" 2>&1 &
bench=$!; pids+=($bench)
# TTL 30 s with a 1 s node timeout: renewals every ~10 s; the lock is declared lost
# ~27 s after the last renewal that got through, and exec then gives the command the
# longest --grace (2.25 s) and waits 1 s on the paused nodes' release, so its metrics
# page outlives the loss by a few scrapes.
"$work/redlock" exec --nodes "redis://127.0.0.1:$e1,redis://127.0.0.1:$e2,redis://127.0.0.1:$e3" \
  --key dashboard-demo --ttl 30s --node-timeout 1s --grace 2250ms \
  --metrics-addr "127.0.0.1:$execport" -- sh -c 'trap "" TERM; sleep 600' >"$out/exec.log" 2>&1 &
execpid=$!; pids+=($execpid)

sleep $((window * 2 / 5))
step "pausing two of exec's three nodes (SIGSTOP)"
kill -STOP "$exec2pid" "$exec3pid"; paused=("$exec2pid" "$exec3pid")
deadline=$(($(date +%s) + window * 3 / 5))
execcode=running
while [ "$(date +%s)" -lt "$deadline" ]; do
  if [ "$execcode" = running ] && ! kill -0 "$execpid" 2>/dev/null; then
    execcode=0; wait "$execpid" || execcode=$?
    step "exec exited $execcode (122: lock lost); continuing its nodes"
    kill -CONT "$exec2pid" "$exec3pid"; paused=()
  fi
  sleep 1
done
to=$(date +%s.%N)

# Draw while the demo still runs: its page is still scraped at the window's end.
step "dashpreview: every query of $dashboard on Prometheus"
code=0
"$work/dashpreview" -dashboard "$dashboard" -prometheus "http://127.0.0.1:$promport" \
  -from "$from" -to "$to" -scrape-interval 1s -width 1400 -out "$out/dashboard.html" -prometheus-version "$promname" \
  ${OPTIONAL:+-optional "$OPTIONAL"} || code=$?

step "waiting for the demo and bench to finish"
democode=0; wait "$demo" || democode=$?
benchcode=0; wait "$bench" || benchcode=$?
echo "demo exited $democode, bench exited $benchcode, exec exited $execcode; logs in $out"
if [ "$code" -ne 0 ]; then
  echo "dashboard-screenshot: dashpreview failed (exit $code); $png not updated; page: $out/dashboard.html" >&2
  exit "$code"
fi

# One window for the header, the grid (1360 px) and the table of queries under it.
queries=$(grep -c '<td><code>' "$out/dashboard.html")
height=$((1510 + 22 * (queries + 1)))
profile=$(mktemp -d)
trap 'cleanup; rm -rf "$profile"' EXIT
step "chromium --screenshot (1428 x $height)"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size="1428,$height" \
  --screenshot="$root/$png" "file://$out/dashboard.html" 2>/dev/null
step "wrote $png"
