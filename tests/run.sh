#!/usr/bin/env bash
# `make test`: everything the tests need, on a machine that has never seen the project.
# 1. builds the control plane and opm from the Go module proxy (cached in $CAPSTAN_CACHE, outside the repo),
# 2. starts the control plane and the registry (tests/cluster/up.sh; reuses a running one),
# 3. runs every Rust test (unit, CLI, end-to-end) with cargo,
# 4. stops the environment again if this script started it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}

command -v cargo >/dev/null || { echo "cargo is required (rustup, Rust 1.89 or newer)" >&2; exit 1; }
command -v go >/dev/null || { echo "go is required (1.26 or newer) to build the test control plane" >&2; exit 1; }
if ! command -v sccache >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  # Optional: a compile cache outside the repo makes repeated runs faster.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q sccache >/dev/null 2>&1 || true
fi
if command -v sccache >/dev/null 2>&1; then export RUSTC_WRAPPER=sccache; fi

started=0
if [ ! -f "$dir/pids/kube-apiserver.pid" ] || ! [ -d "/proc/$(cat "$dir/pids/kube-apiserver.pid")" ]; then started=1; fi
cleanup() { if [ "$started" = 1 ]; then bash "$here/cluster/down.sh" || true; fi; }
trap cleanup EXIT

echo "== building the test control plane (cached after the first run)"
bash "$here/cluster/build.sh" >/dev/null
echo "== building the peer tools for side-by-side checks (opm; cached after the first run)"
export CAPSTAN_OPM=$(bash "$here/peers/build.sh")
# Side-by-side tests and benchmarks fail, rather than skip, when a peer is missing.
export CAPSTAN_REQUIRE_PEERS=1
echo "== starting the control plane and the OCI registry"
bash "$here/cluster/up.sh" all
# A capstan controller left running by `make demo` watches every namespace and would fight the
# tests' own controllers: stop it (the demo's objects stay; `make demo` starts it again).
ctl="$dir/pids/capstan-controller.pid"
if [ -f "$ctl" ] && pid=$(cat "$ctl") && [ -d "/proc/$pid" ] && grep -qa "controller" "/proc/$pid/cmdline" 2>/dev/null; then
  echo "tests: stopping the demo's capstan controller (pid $pid) so that it does not act on the tests' objects" >&2
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  rm -f "$ctl"
fi
echo "== cargo test"
set +e
cargo test --locked --no-fail-fast 2>&1 | tee "$dir/logs/cargo-test.log"
status=${PIPESTATUS[0]}
set -e
# One closing line for CI: the totals of every test binary.
awk '/^test result:/ {p+=$4; f+=$6; i+=$8} END {printf "%d passed, %d failed, %d skipped\n", p, f, i}' "$dir/logs/cargo-test.log"
exit "$status"
