#!/usr/bin/env bash
# Stops exactly the processes tests/cluster/up.sh started (their PID files under
# $CAPSTAN_CLUSTER_DIR/pids, default <repo>/.cluster/pids), newest first, and leaves nothing
# running. The real node goes first: its pods are stopped through the kubelet (cordon, delete), then
# kube-proxy (its iptables rules removed with `kube-proxy --cleanup`), the kubelet, containerd and any
# container it leaves, the mounts under the state directory, and the bridge and the filter chain
# tests/cluster/node-net.sh added. With --purge it also removes the state directory (etcd data,
# registry storage, PKI).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
[ -d "$dir/pids" ] || { echo "[cluster] nothing to stop in $dir" >&2; exit 0; }
dir=$(cd "$dir" && pwd)
nd="$dir/node"

alive() {
  local f="$dir/pids/$1.pid"
  [ -f "$f" ] && [ -d "/proc/$(cat "$f")" ] && grep -qa -- "$dir" "/proc/$(cat "$f")/cmdline" 2>/dev/null
}
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
node_parts="kube-proxy kubelet containerd"
components="$node_parts kwok kube-scheduler kube-controller-manager kube-apiserver etcd registry"
# First what runs on top of the environment (e.g. the demo's capstan controller), then the environment.
for f in "$dir"/pids/*.pid; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .pid)
  case " $components " in *" $name "*) ;; *) stop "$name" ;; esac
done

# ---------------------------------------------------------------- the real node
ctr_=(ctr --address "$nd/containerd/containerd.sock" -n k8s.io)
if [ -f "$dir/node-name" ] && alive kubelet && alive kube-apiserver && alive containerd; then
  # The kubelet stops its pods properly (containers, sandboxes, CNI teardown): no new pod is placed
  # on the node, every pod on it is deleted, and we wait (at most 60 s) for their containers to go.
  node=$(cat "$dir/node-name")
  kubectl=("$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig")
  echo "[cluster] stopping the pods on $node" >&2
  "${kubectl[@]}" --request-timeout=10s cordon "$node" >/dev/null 2>&1 || true
  if "${kubectl[@]}" --request-timeout=10s delete pods -A --field-selector "spec.nodeName=$node" \
       --grace-period=1 --wait=false >/dev/null 2>&1; then
    for _ in $(seq 1 120); do
      [ -z "$("${ctr_[@]}" tasks ls -q 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
fi
stop kube-proxy
if [ -x "$dir/bin/kube-proxy" ] && [ -f "$dir/node-name" ]; then
  "$dir/bin/kube-proxy" --cleanup >>"$dir/logs/kube-proxy.log" 2>&1 || true
fi
stop kubelet
if alive containerd; then
  # Whatever is still running (the API server was down, or a pod would not stop): killed and removed,
  # and the network namespaces of its pods noted, to be removed below.
  for c in $("${ctr_[@]}" containers ls -q 2>/dev/null); do
    "${ctr_[@]}" containers info "$c" 2>/dev/null | python3 -c 'import json,sys
for ns in json.load(sys.stdin).get("Spec",{}).get("linux",{}).get("namespaces",[]):
    p = ns.get("path", "")
    if ns.get("type") == "network" and "/netns/cni-" in p: print(p)' || true
  done | sort -u > "$nd/netns"
  for t in $("${ctr_[@]}" tasks ls -q 2>/dev/null); do
    "${ctr_[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
  done
  for _ in $(seq 1 20); do [ -z "$("${ctr_[@]}" tasks ls -q 2>/dev/null | head -1)" ] && break; sleep 0.25; done
  for t in $("${ctr_[@]}" tasks ls -q 2>/dev/null); do "${ctr_[@]}" tasks rm -f "$t" >/dev/null 2>&1 || true; done
fi
stop containerd
# containerd's shims outlive it: stop those of this state directory (their command line names its socket).
for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $nd/containerd/containerd.sock" || true); do
  kill -KILL "$p" 2>/dev/null || true
done
# Mounts under the state directory (the kubelet bind-mounts its root dir; containerd's rootfs and shm
# mounts), deepest first, then the network namespaces of this node's pods.
if [ -d "$nd" ]; then
  awk -v d="$nd/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  if [ -f "$nd/netns" ]; then
    while read -r ns; do
      [ -n "$ns" ] || continue
      umount "$ns" 2>/dev/null || true; rm -f "$ns"
    done < "$nd/netns"
    rm -f "$nd/netns"
  fi
fi
if [ "$("$here/node-net.sh" owner)" = "$dir" ] || [ -f "$nd/ip_forward.orig" ]; then
  "$here/node-net.sh" down "$dir"
fi

for name in $components; do stop "$name"; done
if [ "${1:-}" = "--purge" ]; then rm -rf "$dir"; fi
echo "[cluster] stopped" >&2
