#!/usr/bin/env bash
# `make demo`, on the local environment's real node: capstan deployed from its own image with
# `kubectl apply -k` (manifests/, two replicas, leader election, its ServiceAccount), the example
# catalog published to the local registry, a Subscription to nginx-operator, its CSV Succeeded, an
# `Nginx` object, and a `curl` of the page the operator's chart serves. `make demo` has already built
# capstan (release) and started the environment (`make cluster-up`). Prints each step and its time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
capstan=${CAPSTAN:-$root/target/release/capstan}
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
dir=$(cd "$dir" && pwd)
export CAPSTAN_CLUSTER_DIR=$dir
reg=$(cat "$dir/registry")
export KUBECONFIG="$dir/kubeconfig"
# kubectl from the pinned build (tests/cluster/build.sh, linked as $dir/bin by up.sh), not the machine's.
[ -x "$dir/bin/kubectl" ] || { echo "demo: $dir/bin/kubectl missing: run make cluster-up first" >&2; exit 1; }
[ -f "$dir/node-name" ] && [ -f "$dir/registry-node" ] || {
  echo "demo: this environment has no real node (another one on this machine may own it, or CAPSTAN_REAL_NODE=0); see make cluster-up's output" >&2
  exit 1
}
node_reg=$(cat "$dir/registry-node")
export PATH="$dir/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s.%N)
elapsed() { awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }'; }
step() { printf '\n\033[1m== %s\033[0m  (at %s s)\n' "$*" "$(elapsed)"; }
# wait_until WHAT SECONDS CMD...: retries CMD every second; on timeout prints WHAT and fails.
wait_until() {
  local what=$1 secs=$2; shift 2
  for _ in $(seq 1 "$secs"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "demo: timed out after ${secs}s waiting for $what" >&2
  return 1
}
real_node='{"nodeSelector": {"type": "real"}, "tolerations": [{"key": "capstan.dev/node", "operator": "Equal", "value": "real", "effect": "NoSchedule"}]}'

step "the local environment: a real node (containerd) beside kwok's fake one"
kubectl get nodes -o wide

step "images built here without a container daemon (make image; cached by their inputs)"
CAPSTAN_BIN=$capstan bash images/build.sh pause httpd capstan nginx-operator

step "publish the example bundles and their catalog to the local registry (examples/publish.sh)"
catalog_ref="$node_reg/capstan-examples/catalog:latest"
CAPSTAN=$capstan bash examples/publish.sh "$catalog_ref"

step "what capstan would install (offline what-if: capstan resolve)"
# (the same image through the registry's loopback address)
"$capstan" resolve --catalog "olm/capstan-examples=$reg/capstan-examples/catalog:latest" -f examples/subscription.yaml || true

step "deploy capstan from its image: kubectl apply -k $dir/capstan-on-real-node (manifests/ + that image)"
sed -n '/^images:/,$p' "$dir/capstan-on-real-node/kustomization.yaml"
kubectl apply -k "$dir/capstan-on-real-node"
kubectl rollout status deployment/capstan -n capstan-system --timeout=120s
kubectl get pods -n capstan-system -o wide
leader_is_a_pod() { kubectl get lease capstan -n capstan-system -o jsonpath='{.spec.holderIdentity}' | grep -q '^capstan-'; }
wait_until "a capstan replica to hold the Lease" 60 leader_is_a_pod
echo "leader (Lease capstan-system/capstan): $(kubectl get lease capstan -n capstan-system -o jsonpath='{.spec.holderIdentity}'); identity: ServiceAccount capstan-system/$(kubectl get deploy capstan -n capstan-system -o jsonpath='{.spec.template.spec.serviceAccountName}')"

step "a CatalogSource, an OperatorGroup and a Subscription written for OLM (examples/), the Subscription placing the operator on the real node"
kubectl create namespace olm --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl create namespace operators --dry-run=client -o yaml | kubectl apply -f - >/dev/null
sed "s#REGISTRY#$node_reg#" examples/catalogsource.yaml | kubectl apply -f -
kubectl apply -f examples/operatorgroup.yaml
kubectl patch --local -f examples/subscription.yaml --type=merge -p "{\"spec\": {\"config\": $real_node}}" -o yaml | kubectl apply -f -

step "wait for the ClusterServiceVersion to succeed"
csv=nginx-operator.v0.2.0
csv_succeeded() { [ "$(kubectl get csv "$csv" -n operators -o jsonpath='{.status.phase}')" = Succeeded ]; }
if ! wait_until "CSV $csv Succeeded" 120 csv_succeeded; then
  kubectl get catalogsource,subscription,installplan,csv -A >&2 || true
  kubectl logs -n capstan-system deploy/capstan --tail=30 >&2 || true
  exit 1
fi
kubectl get catalogsource -n olm
kubectl get subscription,installplan,csv,deployment -n operators
kubectl get pods -n operators -o wide

step "an Nginx object: nginx-operator (helm-operator) installs its chart"
kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
cat > "$work/nginx.yaml" <<EOF
apiVersion: example.com/v1alpha1
kind: Nginx
metadata: {name: hello, namespace: demo}
spec:
  replicaCount: 1
  page: "Hello from the capstan demo: nginx-operator, installed by capstan, serves this page"
  nodeSelector: {type: real}
  tolerations: [{key: capstan.dev/node, operator: Equal, value: real, effect: NoSchedule}]
EOF
cat "$work/nginx.yaml"
kubectl apply -f "$work/nginx.yaml"
kubectl rollout status deployment/hello -n demo --timeout=120s 2>/dev/null || {
  wait_until "Deployment demo/hello" 60 kubectl get deployment hello -n demo
  kubectl rollout status deployment/hello -n demo --timeout=120s
}
kubectl get nginx,deployment,service,pods -n demo -o wide
echo "release: $(kubectl get nginx hello -n demo -o jsonpath='{.status.deployedRelease.name} {range .status.conditions[?(@.type=="Deployed")]}{.type}={.status} ({.reason}){end}')"

step "curl the page (the chart's pod on the real node)"
ip=$(kubectl get pods -n demo -l app.kubernetes.io/instance=hello -o jsonpath='{.items[0].status.podIP}')
echo "\$ curl http://$ip:8080/"
curl -fsS --retry 10 --retry-delay 1 --retry-all-errors "http://$ip:8080/"

leader=$(kubectl get lease capstan -n capstan-system -o jsonpath='{.spec.holderIdentity}')
step "the leader's metrics (pod $leader, port 8080, through the API server's pod proxy)"
kubectl get --raw "/api/v1/namespaces/capstan-system/pods/$leader:8080/proxy/metrics" 2>/dev/null \
  | grep -E '^capstan_(leader|csvs\{phase="Succeeded"\}|install_duration_seconds_count|resolution_duration_seconds_count)' || true

step "what the operator's ServiceAccount may do (the RBAC capstan made from the CSV) and may not"
sa=system:serviceaccount:operators:nginx-operator-controller-manager
for check in "list nginxes.example.com" "create deployments.apps" "delete pods" "list nodes" "create clusterroles.rbac.authorization.k8s.io"; do
  printf '%-55s %s\n' "kubectl auth can-i $check -n demo" "$(kubectl auth can-i $check -n demo --as=$sa 2>/dev/null || true)"
done

printf '\n\033[1mdemo done in %s s.\033[0m capstan and the operator keep running; remove them with\n' "$(elapsed)"
echo "  kubectl delete nginx hello -n demo && kubectl delete subscription,csv --all -n operators && kubectl delete -k $dir/capstan-on-real-node"
echo "or stop everything with: make cluster-down"
