#!/usr/bin/env bash
# Installs the programs the tests start: redis-server and redis-sentinel (real Redis
# nodes), faketime (server clock faults) and libtcmalloc-minimal4 (preloaded before
# libfaketime, which deadlocks with the jemalloc redis-server links), from Debian's
# packages. Go modules come through the module proxy when `go test` builds. Fails loudly
# when something is missing and cannot be installed: the integration tests never skip
# silently.
set -euo pipefail

# present PACKAGE: whether what the tests use from the Debian package is there.
present() {
  case "$1" in
    libtcmalloc-minimal4) compgen -G '/usr/lib/*/libtcmalloc_minimal.so.4' >/dev/null ;;
    faketime) command -v faketime >/dev/null 2>&1 && compgen -G '/usr/lib/*/faketime/libfaketime.so.1' >/dev/null ;;
    *) command -v "$1" >/dev/null 2>&1 ;; # the command is named as its package
  esac
}

missing=()
for pkg in redis-server redis-sentinel faketime libtcmalloc-minimal4; do
  present "$pkg" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for pkg in "${missing[@]}"; do
    present "$pkg" || { echo "install-deps: $pkg still missing after apt-get" >&2; exit 1; }
  done
  exit 0
fi

cat >&2 <<MSG
install-deps: missing ${missing[*]}.
  Debian/Ubuntu:  sudo apt-get install -y ${missing[*]}
  macOS:          brew install redis libfaketime gperftools
Or run only the tests that need no Redis: REDLOCK_SKIP_INTEGRATION=1 go test ./...
MSG
exit 1
