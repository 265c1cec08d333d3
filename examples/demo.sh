#!/usr/bin/env bash
# `make demo`: publish the example bundles into a catalog image on the local registry with capstan,
# then show what capstan does with it on the local control plane. `make demo` has already built
# capstan (release) and started the environment (`make cluster-up`).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
capstan=${CAPSTAN:-$root/target/release/capstan}
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
reg=$(cat "$dir/registry")
export KUBECONFIG="$dir/kubeconfig"
# kubectl from the pinned build (tests/cluster/build.sh, linked as $dir/bin by up.sh), not the machine's.
[ -x "$dir/bin/kubectl" ] || { echo "demo: $dir/bin/kubectl missing: run make cluster-up first" >&2; exit 1; }
export PATH="$dir/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "publish every bundle under bundles/ to $reg and add it to a catalog"
for pkg in bundles/*/; do
  pkg=$(basename "$pkg")
  for ver in $(ls "bundles/$pkg" | sort -V); do
    ref="$reg/capstan-examples/$pkg-bundle:v$ver"
    "$capstan" bundle validate "bundles/$pkg/$ver" >/dev/null
    digest=$("$capstan" bundle push -q "bundles/$pkg/$ver" "$ref")
    echo "pushed $ref@$digest"
    "$capstan" catalog add "$work/catalog" "$ref" >/dev/null
  done
done

step "validate the catalog and push it as a catalog image"
"$capstan" catalog validate "$work/catalog"
catalog_ref="$reg/capstan-examples/catalog:latest"
"$capstan" catalog push -q "$work/catalog" "$catalog_ref"
"$capstan" catalog validate "$catalog_ref"

step "resolve examples/subscription.yaml against the catalog image (what-if, offline)"
"$capstan" resolve --catalog "olm/capstan-examples=$catalog_ref" -f examples/subscription.yaml || true

step "a Subscription that depends on another package: kaiwudb-operator"
cat > "$work/kaiwudb-sub.yaml" <<SUB
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: kaiwudb-operator, namespace: operators}
spec: {name: kaiwudb-operator, channel: stable, source: capstan-examples, sourceNamespace: olm}
SUB
"$capstan" resolve --catalog "olm/capstan-examples=$catalog_ref" -f "$work/kaiwudb-sub.yaml" || true

step "a Subscription to a channel that does not exist"
sed 's/channel: alpha/channel: stable/' examples/subscription.yaml > "$work/bad-sub.yaml"
"$capstan" resolve --catalog "olm/capstan-examples=$catalog_ref" -f "$work/bad-sub.yaml" || true

step "the local control plane"
kubectl get nodes -o wide
kubectl apply --server-side -f manifests/crds >/dev/null
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
kubectl create namespace olm --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl create namespace operators --dry-run=client -o yaml | kubectl apply -f - >/dev/null

step "start capstan controller in the background (stopped by make cluster-down)"
dir=$(cd "$dir" && pwd)
pidfile="$dir/pids/capstan-controller.pid"
log="$dir/capstan-controller.log"
mkdir -p "$dir/pids"
# A controller left from an earlier demo run: stop that one process (only if it is ours).
if [ -f "$pidfile" ]; then
  old=$(cat "$pidfile")
  if [ -d "/proc/$old" ] && grep -qa -- "$dir" "/proc/$old/cmdline" 2>/dev/null; then kill -TERM "$old" 2>/dev/null || true; sleep 1; fi
  rm -f "$pidfile"
fi
# --kubeconfig names the state directory, which is how tests/cluster/down.sh recognises the process.
# Metrics on a free loopback port (the default 0.0.0.0:8080 may be taken on a shared machine).
metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
nohup "$capstan" controller --kubeconfig "$dir/kubeconfig" --metrics-addr "127.0.0.1:$metrics_port" >"$log" 2>&1 &
echo $! > "$pidfile"
echo "capstan controller running as pid $(cat "$pidfile"), log: $log, metrics: http://127.0.0.1:$metrics_port/metrics"

step "apply examples/: a CatalogSource, an OperatorGroup and a Subscription written for OLM"
sed "s#REGISTRY#$reg#" examples/catalogsource.yaml | kubectl apply -f -
kubectl apply -f examples/operatorgroup.yaml -f examples/subscription.yaml

step "wait for the ClusterServiceVersion to succeed"
csv=nginx-operator.v0.2.0
for i in $(seq 1 120); do
  phase=$(kubectl get csv "$csv" -n operators -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [ "$phase" = Succeeded ] && break
  if [ "$i" = 120 ]; then
    echo "CSV $csv did not succeed (phase: ${phase:-none}); controller log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  sleep 1
done
echo "CSV $csv: Succeeded"
kubectl get catalogsource,subscription,installplan,csv,deploy -A

step "capstan's metrics (http://127.0.0.1:$metrics_port/metrics)"
curl -fsS "http://127.0.0.1:$metrics_port/metrics" | grep -E '^capstan_(leader|csvs\{phase="Succeeded"\}|install_duration_seconds_count|resolution_duration_seconds_count)' || true

step "what the operator's ServiceAccount may do"
kubectl auth can-i --list -n operators --as=system:serviceaccount:operators:nginx-operator-controller-manager > "$work/can-i.txt"
head -n 30 "$work/can-i.txt"

echo
echo "The controller keeps running (pid $(cat "$pidfile")); stop everything with: make cluster-down"
