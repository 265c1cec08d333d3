#!/usr/bin/env bash
# Builds capstan's test images without a container daemon and pushes them to the local registry.
#
#   images/build.sh [--push HOST:PORT] [NAME...]      (`make image` builds and pushes all of them)
#
# NAME is one of:
#   pause   the pod sandbox image the real node's containerd uses (images/pause/pause.c, gcc -static)
#   httpd   a tiny HTTP server and client for tests (images/httpd, Go, CGO_ENABLED=0: static)
# Each image is one layer of static binaries, no base image (none can be pulled here), written as
# an OCI image layout by images/oci.py into $CAPSTAN_CACHE/images/<name>/<hash of its inputs>
# (built again only when an input changes), then pushed as HOST:PORT/capstan/<name>:v1. Without
# --push the registry is the local environment's ($CAPSTAN_CLUSTER_DIR/registry; started with
# `tests/cluster/up.sh registry` when it is not running). For each image one line is printed:
#   NAME HOST:PORT/capstan/NAME:v1@sha256:...
# and the same reference is written to $CAPSTAN_CLUSTER_DIR/images/NAME for tests and scripts.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}/images
registry=
if [ "${1:-}" = --push ]; then registry=$2; shift 2; fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(pause httpd)
if [ -z "$registry" ]; then
  bash "$root/tests/cluster/up.sh" registry
  registry=$(cat "$dir/registry")
fi
mkdir -p "$dir/images"

# build NAME INPUT... -- OCI.PY-BUILD-ARGS...: OCI layout for NAME in the cache, keyed by its inputs.
layout() {
  local name=$1; shift
  local inputs=()
  while [ "$1" != -- ]; do inputs+=("$1"); shift; done; shift
  local key
  key=$(cat "${inputs[@]}" "$here/oci.py" "$here/build.sh" | sha256sum | cut -c1-16)
  out="$cache/$name/$key"
  if [ ! -f "$out/index.json" ]; then
    rm -rf "$out.tmp"; mkdir -p "$out.tmp/rootfs"
    "$@" "$out.tmp"
    rm -rf "$out"; mv "$out.tmp" "$out"
  fi
}

build_pause() {
  local tmp=$1
  gcc -static -O2 -o "$tmp/rootfs/pause" "$here/pause/pause.c"
  python3 "$here/oci.py" build "$tmp" --file "$tmp/rootfs/pause:/pause:0755" \
    --entrypoint '["/pause"]' --user 65535:65535 >/dev/null
}
build_httpd() {
  local tmp=$1
  (cd "$here/httpd" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/rootfs/httpd" .)
  python3 "$here/oci.py" build "$tmp" --file "$tmp/rootfs/httpd:/httpd:0755" \
    --entrypoint '["/httpd"]' --user 65532:65532 >/dev/null
}

for name in "${names[@]}"; do
  case "$name" in
    pause) command -v gcc >/dev/null || { echo "images/build.sh: gcc is required (apt-get install gcc libc6-dev)" >&2; exit 1; }
           layout pause "$here/pause/pause.c" -- build_pause ;;
    httpd) command -v go >/dev/null || { echo "images/build.sh: Go is required" >&2; exit 1; }
           layout httpd "$here/httpd/main.go" "$here/httpd/go.mod" -- build_httpd ;;
    *) echo "images/build.sh: unknown image $name (pause, httpd)" >&2; exit 2 ;;
  esac
  ref="$registry/capstan/$name:v1"
  digest=$(python3 "$here/oci.py" push "$out" "$ref")
  echo "$ref@$digest" > "$dir/images/$name"
  echo "$name $ref@$digest"
done
