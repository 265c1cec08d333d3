#!/usr/bin/env bash
# The aggregation path on the local cluster with OLM v0's packageserver as the API's server: the
# API server's front-proxy flags (tests/cluster/up.sh), an APIService + Service whose endpoints
# are on the host address (the server runs outside the cluster), requestheader authentication and
# SubjectAccessReview authorization in the aggregated server. This is the path capstan's own
# PackageManifest server will take; it checks the cluster side and `capstan search/show` against a
# cluster. Needs a running cluster (CAPSTAN_REAL_NODE=0 bash tests/cluster/up.sh all).
#   OLM_SH=path/to/olm.sh (default tests/peers/olm.sh; the `olm` branch's script)
# Leaves OLM running until `bash $OLM_SH stop`; package-server's PID is in $state/package-server.pid.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cdir=$(cd "${CAPSTAN_CLUSTER_DIR:-$root/.cluster}" && pwd)
export CAPSTAN_CLUSTER_DIR=$cdir
olm_sh=${OLM_SH:-$root/tests/peers/olm.sh}
kubectl() { "$cdir/bin/kubectl" --kubeconfig "$cdir/kubeconfig" "$@"; }
state="$cdir/discovery"
mkdir -p "$state"
# The corpus: $CAPSTAN_SHARED, else beside the clone, else /work/shared (as tests/support's shared_dir).
shared=${CAPSTAN_SHARED:-}
if [ -z "$shared" ]; then if [ -d "$root/../shared" ]; then shared=$root/../shared; else shared=/work/shared; fi; fi
corpus_cat="$shared/corpus/community-operators-prod/catalogs/v4.20/rabbitmq-cluster-operator"
opm=$(bash "$root/tests/peers/build.sh")
for spec in "capstan-examples=$root/catalog" "community=$corpus_cat"; do
  mkdir -p "$state/fbc/${spec%%=*}"
  "$opm" render "${spec#*=}" -o json > "$state/fbc/${spec%%=*}/catalog.json"
done
bash "$olm_sh" start "capstan-examples=$state/fbc/capstan-examples" "community=$state/fbc/community"
# The host's own address, which the API server can reach and an Endpoints object may name
# (loopback may not): the first IPv4 address of the machine that is not the node bridge's.
host=$(hostname -I | tr ' ' '\n' | grep -E '^[0-9.]+$' | grep -v '^10\.0\.2\.' | head -1)
[ -n "$host" ] || { echo "aggregated-packageserver.sh: no usable host address" >&2; exit 2; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pkgserver=$(bash "$(dirname "$olm_sh")/build-olm.sh" | sed -n 3p)
"$pkgserver" --kubeconfig "$cdir/kubeconfig" --authentication-kubeconfig "$cdir/kubeconfig" --authorization-kubeconfig "$cdir/kubeconfig" \
  --global-namespace olm --secure-port "$port" --bind-address "$host" --cert-dir "$state/packageserver-certs" \
  > "$state/package-server.log" 2>&1 &
echo $! > "$state/package-server.pid"
kubectl apply -f - <<YAML
apiVersion: v1
kind: Service
metadata: {name: packageserver, namespace: olm}
spec:
  ports: [{name: https, port: 443, targetPort: $port}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: packageserver, namespace: olm}
subsets: [{addresses: [{ip: $host}], ports: [{name: https, port: $port}]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: packageserver-host
  namespace: olm
  labels: {kubernetes.io/service-name: packageserver, endpointslice.kubernetes.io/managed-by: capstan-tests}
addressType: IPv4
endpoints: [{addresses: [$host], conditions: {ready: true}}]
ports: [{name: https, port: $port, protocol: TCP}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.packages.operators.coreos.com}
spec:
  group: packages.operators.coreos.com
  version: v1
  service: {namespace: olm, name: packageserver, port: 443}
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 2000
  versionPriority: 15
YAML
kubectl wait --for=condition=Available --timeout=120s apiservice/v1.packages.operators.coreos.com
# What a user sees through the aggregator.
fail() { echo "aggregated-packageserver.sh: $*" >&2; exit 1; }
for _ in $(seq 1 60); do
  list=$(kubectl get packagemanifests -n operators 2>/dev/null || true)
  grep -q nginx-operator <<<"$list" && grep -q rabbitmq-cluster-operator <<<"$list" && break
  sleep 1
done
echo "$list"
grep -q nginx-operator <<<"$list" && grep -q rabbitmq-cluster-operator <<<"$list" || fail "operators does not list both catalogs' packages"
[ "$(kubectl get packagemanifest nginx-operator -n operators -o jsonpath='{.status.channels[0].currentCSV}')" = nginx-operator.v0.2.0 ] || fail "nginx-operator currentCSV"
if err=$(kubectl get packagemanifests -n operators --as=nobody 2>&1); then fail "a user without RBAC could list packagemanifests"; fi
grep -q Forbidden <<<"$err" || fail "expected Forbidden, got: $err"
capstan=${CAPSTAN_BIN:-$root/target/debug/capstan}
"$capstan" search rabbit -n operators --kubeconfig "$cdir/kubeconfig" | grep -q rabbitmq-cluster-operator || fail "capstan search over the cluster"
"$capstan" show nginx-operator -n operators --kubeconfig "$cdir/kubeconfig" -o json | grep -q '"currentCSV": "nginx-operator.v0.2.0"' || fail "capstan show over the cluster"
echo "aggregated-packageserver.sh: ok (kubectl and capstan through the aggregator; RBAC refuses a user without get/list)"
