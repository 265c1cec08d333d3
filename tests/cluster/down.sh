#!/usr/bin/env bash
# Stops exactly the processes tests/cluster/up.sh started (their PID files under
# $CAPSTAN_CLUSTER_DIR/pids, default <repo>/.cluster/pids), newest first, and leaves nothing
# running. With --purge it also removes the state directory (etcd data, registry storage, PKI).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
[ -d "$dir/pids" ] || { echo "[cluster] nothing to stop in $dir" >&2; exit 0; }
dir=$(cd "$dir" && pwd)

stop() {
  local name=$1 f="$dir/pids/$1.pid" pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  # Only signal the process if it is still the one we started (its command line names our state dir).
  if [ -d "/proc/$pid" ] && grep -qa -- "$dir" "/proc/$pid/cmdline" 2>/dev/null; then
    echo "[cluster] stopping $name ($pid)" >&2
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    if [ -d "/proc/$pid" ]; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$f"
}
components="kwok kube-scheduler kube-controller-manager kube-apiserver etcd registry"
# First what runs on top of the environment (e.g. the demo's capstan controller), then the environment.
for f in "$dir"/pids/*.pid; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .pid)
  case " $components " in *" $name "*) ;; *) stop "$name" ;; esac
done
for name in $components; do stop "$name"; done
if [ "${1:-}" = "--purge" ]; then rm -rf "$dir"; fi
echo "[cluster] stopped" >&2
