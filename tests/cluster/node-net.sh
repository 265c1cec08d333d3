#!/usr/bin/env bash
# The real node's host networking, shared by up.sh and down.sh:
#   node-net.sh up DIR     creates the bridge with the node's address, turns IPv4 forwarding on, and adds
#                          one filter chain, first in FORWARD, that lets pod traffic reach only the bridge
#                          and the host itself (idempotent)
#   node-net.sh down DIR   removes exactly what `up` added (chain, bridge) and restores ip_forward
#   node-net.sh owner      prints the state directory that owns the node network on this machine, if any
#
# There is one real node per machine: the bridge, the pod range and kube-proxy's iptables chains are
# machine-wide. The owner is recorded in /run/capstan-node/owner; a second environment on the same
# machine starts without a real node (up.sh says so). The addresses are the environment's own:
#   bridge capstan0, node (bridge gateway) 10.0.2.1, pods 10.0.2.0/24, Services 10.0.0.0/24.
# Nothing is masqueraded to the outside, pod traffic to any other address is dropped, and the host's
# own packets to the Service or pod range never leave the machine (CAPSTAN-NODE-OUT in OUTPUT).
set -euo pipefail
BRIDGE=capstan0
NODE_IP=10.0.2.1
POD_CIDR=10.0.2.0/24
SERVICE_CIDR=10.0.0.0/24
CHAIN=CAPSTAN-NODE
OUT_CHAIN=CAPSTAN-NODE-OUT
# Services, kwok's fake node and pods (up.sh), real pods: 10.0.0.0 – 10.0.3.255.
ENV_RANGES=10.0.0.0/22
run=/run/capstan-node
cmd=${1:-}
dir=${2:-}

chain_rules() {
  # Pods may talk to each other on the bridge, to the host (INPUT, not forwarded) and to Services
  # (DNAT'd by kube-proxy to pods on the bridge). Anything else a pod sends is dropped here.
  iptables -w -A "$CHAIN" -s "$POD_CIDR" -o "$BRIDGE" -j ACCEPT
  iptables -w -A "$CHAIN" -d "$POD_CIDR" -o "$BRIDGE" -j ACCEPT
  iptables -w -A "$CHAIN" -s "$POD_CIDR" -j DROP
  iptables -w -A "$CHAIN" -i "$BRIDGE" -j DROP
}

out_rules() {
  # The host's own packets (filter OUTPUT runs after kube-proxy's DNAT) to the environment's ranges
  # — Services 10.0.0.0/24, kwok's fake pods and node 10.0.1.0/24, pods 10.0.2.0/24 — may only go
  # over the bridge or to the node's own address: a Service IP with no Service behind it, or one
  # DNAT'd to a kwok pod (an address nobody has), is rejected here instead of leaving the machine.
  # A packet kube-proxy DNAT'd to a real pod is let through first: for the host's own packets `-o`
  # is the device routed BEFORE the DNAT (eth0 for a Service IP), although the kernel re-routes
  # it over the bridge. Without this the API server cannot reach any Service on the real node
  # (webhooks, aggregated APIs: "dial tcp <cluster IP>:443: connect: connection refused").
  iptables -w -A "$OUT_CHAIN" -d "$POD_CIDR" -m conntrack --ctstate DNAT -j RETURN
  iptables -w -A "$OUT_CHAIN" -d "$ENV_RANGES" -m addrtype ! --dst-type LOCAL ! -o "$BRIDGE" -j REJECT
}

case "$cmd" in
  owner)
    [ -f "$run/owner" ] && cat "$run/owner"
    exit 0 ;;
  up)
    mkdir -p "$run" "$dir/node"
    echo "$dir" > "$run/owner"
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
      ip link add "$BRIDGE" type bridge
    fi
    # (not `ip | grep -q`: with pipefail, grep's early exit can fail the pipeline)
    addrs=$(ip -o -4 addr show dev "$BRIDGE")
    case "$addrs" in *"inet $NODE_IP/"*) ;; *) ip addr add "$NODE_IP/24" dev "$BRIDGE" ;; esac
    ip link set "$BRIDGE" up
    [ -f "$dir/node/ip_forward.orig" ] || cat /proc/sys/net/ipv4/ip_forward > "$dir/node/ip_forward.orig"
    echo 1 > /proc/sys/net/ipv4/ip_forward
    # Pod-to-pod traffic through a Service crosses the bridge twice; br_netfilter lets kube-proxy's
    # DNAT see it (already on in this kernel; best effort elsewhere).
    [ -w /proc/sys/net/bridge/bridge-nf-call-iptables ] && echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables || true
    if ! iptables -w -S "$CHAIN" >/dev/null 2>&1; then
      iptables -w -N "$CHAIN"
      chain_rules
    fi
    if ! iptables -w -S "$OUT_CHAIN" >/dev/null 2>&1; then
      iptables -w -N "$OUT_CHAIN"
      out_rules
    fi
    iptables -w -C OUTPUT -j "$OUT_CHAIN" 2>/dev/null || iptables -w -I OUTPUT 1 -j "$OUT_CHAIN"
    # First in FORWARD, before the ACCEPT rules kube-proxy inserts (up.sh runs `up` again once
    # kube-proxy has synced): Service traffic, too, may only go to the bridge.
    if [ "$(iptables -w -S FORWARD | sed -n 2p)" != "-A FORWARD -j $CHAIN" ]; then
      while iptables -w -D FORWARD -j "$CHAIN" 2>/dev/null; do :; done
      iptables -w -I FORWARD 1 -j "$CHAIN"
    fi
    ;;
  down)
    # The kubelet's own chains (its iptables canary, and KUBE-FIREWALL, which drops connections from
    # outside to 127.0.0.0/8), in both families; `kube-proxy --cleanup` (down.sh) removed kube-proxy's.
    for ipt in iptables ip6tables; do
      command -v "$ipt" >/dev/null || continue
      for chain_ in KUBE-FIREWALL; do
        for hook in INPUT OUTPUT; do while "$ipt" -w -D "$hook" -j "$chain_" 2>/dev/null; do :; done; done
        "$ipt" -w -F "$chain_" 2>/dev/null && "$ipt" -w -X "$chain_" 2>/dev/null || true
      done
      for table in filter nat mangle; do
        "$ipt" -w -t "$table" -X KUBE-KUBELET-CANARY 2>/dev/null || true
        [ "$table" != mangle ] || "$ipt" -w -t mangle -X KUBE-IPTABLES-HINT 2>/dev/null || true
      done
    done
    if iptables -w -S "$CHAIN" >/dev/null 2>&1; then
      while iptables -w -D FORWARD -j "$CHAIN" 2>/dev/null; do :; done
      iptables -w -F "$CHAIN"; iptables -w -X "$CHAIN"
    fi
    if iptables -w -S "$OUT_CHAIN" >/dev/null 2>&1; then
      while iptables -w -D OUTPUT -j "$OUT_CHAIN" 2>/dev/null; do :; done
      iptables -w -F "$OUT_CHAIN"; iptables -w -X "$OUT_CHAIN"
    fi
    # Host ends of any pod veths left on the bridge (their peers go with them), then the bridge.
    for l in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
      ip link del "$l" 2>/dev/null || true
    done
    ip link del "$BRIDGE" 2>/dev/null || true
    if [ -f "$dir/node/ip_forward.orig" ]; then
      cat "$dir/node/ip_forward.orig" > /proc/sys/net/ipv4/ip_forward
      rm -f "$dir/node/ip_forward.orig"
    fi
    if [ -f "$run/owner" ] && [ "$(cat "$run/owner")" = "$dir" ]; then rm -rf "$run"; fi
    ;;
  *) echo "usage: $0 up|down DIR | owner" >&2; exit 2 ;;
esac
