#!/usr/bin/env bash
# Installs the programs the tests start: redis-server and redis-sentinel (real Redis
# nodes) and faketime (server clock faults), from Debian's packages. Go modules come
# through the module proxy when `go test` builds. Fails loudly when something is missing
# and cannot be installed: the integration tests never skip silently.
set -euo pipefail

missing=()
for cmd in redis-server redis-sentinel faketime; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done
[ ${#missing[@]} -eq 0 ] && exit 0

# The Debian package names equal the command names.
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for cmd in "${missing[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || { echo "install-deps: $cmd still missing after apt-get" >&2; exit 1; }
  done
  exit 0
fi

cat >&2 <<MSG
install-deps: missing ${missing[*]}.
  Debian/Ubuntu:  sudo apt-get install -y ${missing[*]}
  macOS:          brew install redis libfaketime
Or run only the tests that need no Redis: REDLOCK_SKIP_INTEGRATION=1 go test ./...
MSG
exit 1
