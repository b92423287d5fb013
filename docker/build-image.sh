#!/usr/bin/env bash
# Builds a local Redis image from this machine's redis-server binary, for the Docker
# backend of redlocktest, without any image registry: a minimal root filesystem (the
# binary, the libraries ldd lists, the loader, /tmp and /data) imported with
# `docker import`.
#
#   docker/build-image.sh [IMAGE]      (default local/redis:7; DOCKER_HOST is honoured)
#
# The image holds redis-server and redis-sentinel (both names of one binary, which picks
# its mode from the name it was started under). It has no shell.
set -euo pipefail

image="${1:-${REDLOCKTEST_DOCKER_IMAGE:-local/redis:7}}"

server="$(command -v redis-server || true)"
if [ -z "$server" ]; then
  echo "build-image: redis-server not found on PATH (apt-get install -y redis-server)" >&2
  exit 1
fi
binary="$(readlink -f "$server")"

rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT

mkdir -p "$rootfs/usr/bin" "$rootfs/data"
install -d -m 1777 "$rootfs/tmp"
cp "$binary" "$rootfs/usr/bin/$(basename "$binary")"
for name in redis-server redis-sentinel; do
  [ "$(basename "$binary")" = "$name" ] || ln -s "$(basename "$binary")" "$rootfs/usr/bin/$name"
done

# Every shared library the binary needs, and the dynamic loader, at their own paths.
ldd "$binary" | awk '/=> \// { print $3 } /^[[:space:]]*\// { print $1 }' | sort -u |
  while read -r lib; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done

tar -C "$rootfs" -c . |
  docker import -c 'ENV PATH=/usr/bin' -c 'WORKDIR /data' -c 'CMD ["redis-server"]' - "$image" >/dev/null
echo "build-image: built $image from $binary ($("$server" --version | grep -o 'v=[^ ]*'))"
