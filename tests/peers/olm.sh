#!/usr/bin/env bash
# Starts or stops OLM v0 (built by tests/peers/build-olm.sh) against a cluster of tests/cluster/,
# outside the cluster, the way its upstream manifests (deploy/chart of the version build-olm.sh pins)
# run it:
#
#   olm.sh start [CATALOG_NAME=FBC_DIR ...]   CRDs from deploy/chart/crds, namespaces `olm` and
#                    `operators`, OperatorGroups `global-operators` (operators, all namespaces) and
#                    `olm-operators` (olm, own namespace), OLMConfig `cluster`; the `catalog` and `olm`
#                    controllers with --kubeconfig (flags of the chart's Deployments); for each
#                    NAME=DIR an `opm serve DIR` on a free loopback port and a CatalogSource NAME in
#                    `olm` with `spec.address` (OLM unpacks no bundle: `capstan catalog add` and
#                    `opm render` write the olm.bundle.object properties it reads instead).
#                    OLM_PACKAGESERVER=1 also starts package-server (the packages API) — not needed
#                    for installs.
#   olm.sh catalog [NAMESPACE/]NAME=FBC_DIR ...  adds catalogs to a running OLM (CatalogSource NAME in
#                    NAMESPACE, default `olm`).
#   olm.sh stop      stops exactly the processes this script started (PID files), leaves the cluster.
#
# State: $CAPSTAN_CLUSTER_DIR/olm/ (pids/, logs/, catalogs.env). The cluster's kubeconfig is
# $CAPSTAN_CLUSTER_DIR/kubeconfig (default cluster dir: <repo>/.cluster).
# Two things no Pod-less setup can give OLM: its /healthz,/metrics server binds :8080 in both
# controllers (hard-coded in pkg/lib/server; the second bind fails and is only logged, nothing else
# depends on it), and no catalog Pods run (address CatalogSources need none).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cdir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
cdir=$(cd "$cdir" && pwd)
kubeconfig="$cdir/kubeconfig"
state="$cdir/olm"
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
# The one pin of OLM's version is build-olm.sh's; its CRDs and util image follow it.
olm_version=$(sed -n 's/^OLM_VERSION=//p' "$here/build-olm.sh")
kubectl() { "$cdir/bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
log() { printf '[olm] %s\n' "$*" >&2; }

stop() {
  for f in "$state"/pids/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if [ -d "/proc/$pid" ] && grep -qa -- "$state" "/proc/$pid/environ" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
      [ -d "/proc/$pid" ] && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run NAME CMD...: background process with log and PID file; OLM_STATE marks it as ours.
run() {
  local name=$1; shift
  OLM_STATE="$state" setsid "$@" >>"$state/logs/$name.log" 2>&1 </dev/null &
  echo $! > "$state/pids/$name.pid"
}

catalogs() {
  local opm
  opm=$(bash "$here/build.sh")
  for spec in "$@"; do
    local name=${spec%%=*} dir=${spec#*=} ns=olm
    if [[ $name == */* ]]; then ns=${name%%/*}; name=${name#*/}; fi
    # the state of a catalog outside `olm` is kept under NAMESPACE-NAME
    local id=$name; [ "$ns" = olm ] || id="$ns-$name"
    [ -d "$dir" ] || { echo "olm.sh: catalog $name: $dir is not a directory" >&2; exit 2; }
    # OLM reads a bundle's manifests from the catalog (olm.bundle.object) only when its image is
    # empty (pkg/controller/registry/resolver/source_registry.go: BundlePath == ""), as `opm render`
    # of a bundle directory writes it; otherwise it runs an unpack Job. Serve a copy without images.
    local served="$state/catalogs/$id"
    rm -rf "$served" && mkdir -p "$served"
    python3 - "$dir" "$served/catalog.json" <<'PY'
import json, os, sys, yaml
src, out = sys.argv[1], sys.argv[2]
docs = []
for base, _, files in sorted(os.walk(src)):
    for f in sorted(files):
        p = os.path.join(base, f)
        if f.endswith((".yaml", ".yml")):
            docs += [d for d in yaml.load_all(open(p), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
        elif f.endswith(".json"):
            dec, text, i = json.JSONDecoder(), open(p).read(), 0
            while True:
                while i < len(text) and text[i].isspace():
                    i += 1
                if i >= len(text):
                    break
                d, i = dec.raw_decode(text, i)
                docs.append(d)
with open(out, "w") as w:
    for d in docs:
        if d.get("schema") == "olm.bundle" and any(p.get("type") == "olm.bundle.object" for p in d.get("properties", [])):
            d["image"] = ""
        w.write(json.dumps(d, default=str) + "\n")
PY
    local port; port=$(free_port)
    run "opm-$id" "$opm" serve "$served" -p "$port" --pprof-addr "" --termination-log /dev/null
    echo "$id=127.0.0.1:$port" >> "$state/catalogs.env"
    for _ in $(seq 1 300); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
      [ -d "/proc/$(cat "$state/pids/opm-$id.pid")" ] || { tail -20 "$state/logs/opm-$id.log" >&2; exit 1; }
      sleep 0.1
    done
    kubectl apply -f - >/dev/null <<EOF
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: $name, namespace: $ns}
spec: {sourceType: grpc, address: "127.0.0.1:$port", displayName: $name}
EOF
    log "catalog $ns/$name: opm serve $dir on 127.0.0.1:$port"
  done
}

start() {
  mapfile -t bins < <(bash "$here/build-olm.sh")
  local olm=${bins[0]} catalog=${bins[1]} pkgserver=${bins[2]}
  local crds="$cache/peers/olm-$olm_version/crds"
  mkdir -p "$state/pids" "$state/logs"
  : > "$state/catalogs.env"
  kubectl apply --server-side --force-conflicts -f "$crds" >/dev/null
  kubectl wait --for condition=Established --timeout=60s -f "$crds" >/dev/null
  kubectl apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: olm}
---
apiVersion: v1
kind: Namespace
metadata: {name: operators}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: global-operators, namespace: operators}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: olm-operators, namespace: olm}
spec: {targetNamespaces: [olm]}
---
apiVersion: operators.coreos.com/v1
kind: OLMConfig
metadata: {name: cluster}
EOF
  # The chart's flags: catalog --namespace olm --configmapServerImage --util-image
  # --set-workload-user-id; olm --namespace $(OPERATOR_NAMESPACE) with OPERATOR_NAME.
  run catalog "$catalog" --kubeconfig "$kubeconfig" --namespace olm \
    --configmapServerImage=quay.io/operator-framework/configmap-operator-registry:latest \
    --util-image "quay.io/operator-framework/olm:$olm_version" --set-workload-user-id=true
  KUBECONFIG="$kubeconfig" OPERATOR_NAMESPACE=olm OPERATOR_NAME=olm-operator \
    run olm "$olm" --namespace olm
  if [ "${OLM_PACKAGESERVER:-0}" = 1 ]; then
    local port; port=$(free_port)
    run package-server "$pkgserver" --kubeconfig "$kubeconfig" --global-namespace olm \
      --secure-port "$port" --cert-dir "$state/packageserver-certs"
    log "package-server on 127.0.0.1:$port (no APIService registered)"
  fi
  # Ready when the olm operator has reconciled the global OperatorGroup (status.namespaces set).
  for _ in $(seq 1 600); do
    kubectl -n operators get operatorgroup global-operators -o jsonpath='{.status.lastUpdated}' 2>/dev/null | grep -q . && break
    for p in olm catalog; do
      [ -d "/proc/$(cat "$state/pids/$p.pid")" ] || { log "$p exited"; tail -30 "$state/logs/$p.log" >&2; exit 1; }
    done
    sleep 0.1
  done
  catalogs "$@"
  log "OLM v0 running (logs in $state/logs)"
}

case "${1:-}" in
  start) shift; stop; start "$@" ;;
  catalog) shift; catalogs "$@" ;;
  stop) stop; log "stopped" ;;
  *) echo "usage: $0 start [NAME=FBC_DIR ...] | catalog NAME=FBC_DIR ... | stop" >&2; exit 2 ;;
esac
