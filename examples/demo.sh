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
if [ -d manifests/crds ]; then
  kubectl apply --server-side -f manifests/crds >/dev/null
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
  kubectl create namespace olm --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create namespace operators --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  sed "s#REGISTRY#$reg#" examples/catalogsource.yaml | kubectl apply -f -
  kubectl apply -f examples/operatorgroup.yaml -f examples/subscription.yaml
  kubectl get catalogsource -A; kubectl get subscription -A
fi
echo
echo "The controller that turns this Subscription into an InstallPlan and a running operator is issue 5;"
echo "until it lands, the demo stops at resolution. Stop the environment with: make cluster-down"
