#!/usr/bin/env bash
# Runs `redlock safety --html` and takes a screenshot of the page in headless Chromium,
# to look at the timelines by eye. Opt-in: neither `go test` nor CI runs it.
#
#   tools/safety-screenshot.sh [OUTDIR [RUN-REGEXP]]
#
# OUTDIR (default: a new temporary directory) gets safety.html, safety.md and safety.png;
# RUN-REGEXP is passed to --run (default: the whole matrix, about a minute). Installs
# Debian's chromium with apt-get when it is missing and we are root. Exits with the
# code of `redlock safety`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d -t redlock-safety-XXXXXX)}
run=${2:-}

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "safety-screenshot: chromium not found (Debian: apt-get install chromium)" >&2
    exit 1
  fi
fi

mkdir -p "$out"
go build -o "$out/redlock" ./cmd/redlock
args=(safety --html "$out/safety.html" --md "$out/safety.md")
[ -n "$run" ] && args+=(--run "$run")
code=0
"$out/redlock" "${args[@]}" >/dev/null || code=$?

# One tall window for the whole page: the header and table, then ~300 px a timeline.
timelines=$(grep -o '<svg' "$out/safety.html" | wc -l)
height=$((900 + 300 * timelines))
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size="1100,$height" \
  --screenshot="$out/safety.png" "file://$(realpath "$out/safety.html")" 2>/dev/null
echo "$out/safety.png ($timelines timelines; redlock safety exited $code)"
exit "$code"
