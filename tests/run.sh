#!/usr/bin/env bash
# `make test`: everything the tests need, on a machine that has never seen the project.
# 1. builds the control plane (kubelet and kube-proxy included), opm, OLM v0 and the helm-operator
#    of the nginx-operator image from the Go module proxy (cached in $CAPSTAN_CACHE, outside the repo),
# 2. starts the control plane, the registry and the real node (tests/cluster/up.sh; reuses a running
#    one; installs Debian's docker-registry, containerd, runc, containernetworking-plugins, iptables
#    and iproute2 when missing, and images/build.sh gcc and libc6-dev for the pause image),
# 3. checks the tree with rustfmt and clippy, and runs every Rust test (unit, CLI, end-to-end) with cargo,
#    then a subset of OLM v0's own e2e suite against capstan (tests/conformance/, SUBSET=ci; its
#    build is cached like the rest),
# 4. stops the environment again if this script started it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}

command -v cargo >/dev/null || { echo "cargo is required (rustup, Rust 1.89 or newer)" >&2; exit 1; }
for tool in fmt clippy; do
  cargo "$tool" --version >/dev/null 2>&1 || { echo "cargo $tool is required (rustup component add rustfmt clippy)" >&2; exit 1; }
done
command -v go >/dev/null || { echo "go is required (1.26 or newer) to build the test control plane" >&2; exit 1; }
if ! command -v sccache >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  # Optional: a compile cache outside the repo makes repeated runs faster.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q sccache >/dev/null 2>&1 || true
fi
if command -v sccache >/dev/null 2>&1; then
  export RUSTC_WRAPPER=sccache
  # Bounded: the compile cache is a copy of what target/ holds (sccache's default is 10 GiB).
  export SCCACHE_CACHE_SIZE=${SCCACHE_CACHE_SIZE:-4G}
fi
# One build, no incremental state (it would double target/debug and sccache cannot cache it).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

# Disk: say it before the builds fail half-way with "No space left on device" (a CI run once did).
free_gib() { df -Pk "$1" 2>/dev/null | awk 'NR==2 {printf "%d", $4/1048576}'; }
need=${CAPSTAN_TEST_DISK_GIB:-12}
have=$(free_gib "$root")
echo "== disk: ${have} GiB free where the repository is (target/), $(free_gib "${HOME:-/}") GiB under HOME (caches)"
if [ -n "$have" ] && [ "$have" -lt "$need" ]; then
  # A warning, not a refusal: the estimate is a measurement of one machine (docs/benchmarks.md).
  echo "WARNING: make test needs about ${need} GiB free for target/ and the caches; ${have} GiB are free under $root." >&2
  echo "WARNING: if a build fails with 'No space left on device', free space (cargo clean in other checkouts, rm -rf \$HOME/.cache/sccache)." >&2
fi

started=0
if [ ! -f "$dir/pids/kube-apiserver.pid" ] || ! [ -d "/proc/$(cat "$dir/pids/kube-apiserver.pid")" ]; then started=1; fi
cleanup() { if [ "$started" = 1 ]; then bash "$here/cluster/down.sh" || true; fi; }
trap cleanup EXIT

echo "== building the test control plane (cached after the first run)"
bash "$here/cluster/build.sh" >/dev/null
echo "== building the peer tools for side-by-side checks (opm; cached after the first run)"
export CAPSTAN_OPM=$(bash "$here/peers/build.sh")
if ! python3 -c 'import yaml' 2>/dev/null && command -v apt-get >/dev/null 2>&1; then
  # The OLM differential harness (tests/olm/) reads YAML bundles.
  echo "installing Debian's python3-yaml (the OLM differential harness reads YAML)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-yaml >/dev/null
fi
echo "== building OLM v0 for the differential tests (tests/e2e/compare_olm.rs; cached after the first run)"
bash "$here/peers/build-olm.sh" >/dev/null
echo "== building the helm-operator of the example nginx-operator image (cached after the first run)"
bash "$root/images/helm-operator.sh" >/dev/null
echo "== starting the control plane, the OCI registry and the real node"
bash "$here/cluster/up.sh" all
# capstan deployed by `make demo` (namespace capstan-system) watches every namespace and would fight
# the tests' own controllers, and tests/node/node_cluster.rs deploys capstan there itself: remove it
# (the demo's other objects stay; `make demo` deploys it again).
k() { "$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
if k get namespace capstan-system >/dev/null 2>&1 || k get namespace demo >/dev/null 2>&1; then
  # What `make demo` leaves running (its Nginx, the nginx-operator it installed for all
  # namespaces, capstan itself) would act on the tests' objects: removed in the order the demo
  # prints, while capstan still runs to finalize the CSV and the operator to finalize its Nginx.
  echo "tests: removing what make demo left running (its Nginx, the operator it installed, then capstan)" >&2
  k delete nginx --all -n demo --timeout=60s >/dev/null 2>&1 || true
  k delete subscription,csv --all -n operators --timeout=120s >/dev/null 2>&1 || true
  k delete namespace demo --timeout=120s >/dev/null 2>&1 || true
  # With its APIService first (an aggregated API left registered without its server stalls
  # every namespace deletion of the cluster).
  if [ -d "$dir/capstan-on-real-node" ]; then k delete -k "$dir/capstan-on-real-node" --timeout=120s >/dev/null 2>&1 || true; fi
  k delete apiservice v1.packages.operators.coreos.com --ignore-not-found >/dev/null 2>&1 || true
  k delete namespace capstan-system --timeout=120s >/dev/null 2>&1 || true
fi
# A capstan controller left running by `make demo` watches every namespace and would fight the
# tests' own controllers: stop it (the demo's objects stay; `make demo` starts it again).
ctl="$dir/pids/capstan-controller.pid"
if [ -f "$ctl" ] && pid=$(cat "$ctl") && [ -d "/proc/$pid" ] && grep -qa "controller" "/proc/$pid/cmdline" 2>/dev/null; then
  echo "tests: stopping the demo's capstan controller (pid $pid) so that it does not act on the tests' objects" >&2
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  rm -f "$ctl"
fi
# The tree as rustfmt writes it and clean under clippy (CONTRIBUTING.md). Both are checked before the
# tests and counted with them: a failure here fails the run, after the tests have run.
echo "== cargo fmt --check"
lint_failed=0
if ! cargo fmt --all --check >"$dir/logs/rustfmt.log" 2>&1; then
  lint_failed=$((lint_failed + 1))
  echo "FAILED: the tree is not what rustfmt writes (run cargo fmt --all):" >&2
  head -60 "$dir/logs/rustfmt.log" >&2
fi
echo "== cargo clippy --all-targets -- -D warnings"
# clippy-driver is not run through sccache (it would cache a check that prints no warnings).
if ! RUSTC_WRAPPER= cargo clippy --locked --all-targets -- -D warnings >"$dir/logs/clippy.log" 2>&1; then
  lint_failed=$((lint_failed + 1))
  echo "FAILED: cargo clippy --all-targets -- -D warnings:" >&2
  grep -E '^(error|warning)|^ *--> ' "$dir/logs/clippy.log" | head -80 >&2
fi
echo "== cargo test"
set +e
cargo test --locked --no-fail-fast 2>&1 | tee "$dir/logs/cargo-test.log"
status=${PIPESTATUS[0]}
# OLM v0's own e2e suite, the subset CI runs (tests/conformance/ci-subset.txt; `make conformance`
# runs all of it): on this environment, with the debug build, before OLM is installed below.
echo "== conformance: OLM v0's e2e suite, CI subset (tests/conformance/ci-subset.txt)"
SUBSET=ci PROCS=2 TIMEOUT=20m CAPSTAN="$root/target/debug/capstan" CAPSTAN_CLUSTER_DIR="$dir" \
  bash "$here/conformance/run.sh" 2>&1 | tee "$dir/logs/conformance.log"
if [ "${PIPESTATUS[0]}" != 0 ]; then status=1; fi
# Counted with the Rust tests in the closing line: one "test result" line of the subset's numbers.
sed -n 's/^conformance: \([0-9]*\) passed, \([0-9]*\) failed.*/test result: conformance. \1 passed; \2 failed; 0 ignored/p' \
  "$dir/logs/conformance.log" >> "$dir/logs/cargo-test.log"
# Ignored by `cargo test` because it runs OLM v0 on the cluster (its CRDs replace capstan's, its
# operators watch every namespace): last, so that nothing runs after it on that cluster.
echo "== cargo test --test discovery_packageserver -- --ignored (PackageManifests beside OLM's packageserver)"
cargo test --locked --test discovery_packageserver -- --ignored 2>&1 | tee -a "$dir/logs/cargo-test.log"
if [ "${PIPESTATUS[0]}" != 0 ]; then status=1; fi
set -e
# One closing line for CI: the totals of every test binary, and rustfmt and clippy as one check each.
awk -v lint="$lint_failed" '/^test result:/ {p+=$4; f+=$6; i+=$8}
  END {printf "%d passed, %d failed, %d skipped\n", p + 2 - lint, f + lint, i}' "$dir/logs/cargo-test.log"
if [ "$status" = 0 ] && [ "$lint_failed" != 0 ]; then status=1; fi
echo "== disk after the tests: target/ $(du -sh "$root/target" 2>/dev/null | cut -f1), $(free_gib "$root") GiB free"
exit "$status"
