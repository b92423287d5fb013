#!/usr/bin/env bash
# `make test-docker`: runs the Docker-backend tests of redlocktest against a private
# Docker engine that this script starts and stops itself.
#
#  1. installs docker.io with apt-get when dockerd is missing (root only), with
#     services kept from starting by /usr/sbin/policy-rc.d;
#  2. starts dockerd in a temporary directory, with its own socket and no host
#     networking changes (no iptables, no bridge);
#  3. builds the local Redis image from the host's redis-server (docker/build-image.sh);
#  4. runs the Docker tests with REDLOCKTEST_DOCKER=1, so a missing engine or image
#     fails them instead of skipping them;
#  5. removes the containers, stops dockerd by its PID, unmounts what it left mounted
#     and removes the directory, whatever happened before.
#
# Anything that cannot be done fails loudly: the Docker suite never skips silently here.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "test-docker: $*" >&2; }

if ! command -v dockerd >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "dockerd is missing and cannot be installed here (needs root and apt-get); install docker.io"
    exit 1
  fi
  say "installing docker.io with apt-get"
  made_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    # Keep the package from starting a system-wide engine with default networking.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends docker.io >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends docker.io >/dev/null; }
  if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
  command -v dockerd >/dev/null 2>&1 || { say "dockerd still missing after apt-get"; exit 1; }
fi
command -v docker >/dev/null 2>&1 || { say "the docker client is missing"; exit 1; }

dir="$(mktemp -d "${TMPDIR:-/tmp}/redlock-docker.XXXXXX")"
pid=

cleanup() {
  status=$?
  if [ -n "$pid" ]; then
    ids="$(docker ps -aq --filter label=redlocktest 2>/dev/null || true)"
    [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1 || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      say "dockerd (pid $pid) did not stop; killing it"
      kill -9 "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  fi
  # The engine leaves its network namespace (and, if killed, overlay mounts) mounted.
  grep -o " $dir/[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "cannot unmount $m"
  done
  rm -rf "$dir" || say "cannot remove $dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "starting a private dockerd in $dir"
dockerd --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
  -H "unix://$dir/docker.sock" --iptables=false --ip6tables=false --ip-forward=false \
  --ip-masq=false --bridge=none --storage-driver=overlay2 >"$dir/dockerd.log" 2>&1 &
pid=$!
export DOCKER_HOST="unix://$dir/docker.sock"

for _ in $(seq 150); do
  docker info >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
if ! docker info >/dev/null 2>&1; then
  say "dockerd did not answer; its log:"
  tail -n 30 "$dir/dockerd.log" >&2
  exit 1
fi
say "engine $(docker version --format '{{.Server.Version}}') answers at $DOCKER_HOST (pid $pid)"

./docker/build-image.sh

REDLOCKTEST_DOCKER=1 go test -race -count=1 -run 'Docker' -v ./redlocktest/
