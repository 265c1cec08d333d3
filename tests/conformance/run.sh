#!/usr/bin/env bash
# make conformance: OLM v0's own end-to-end suite (test/e2e at the version tests/peers/build-olm.sh
# pins, built by tests/conformance/build.sh) run against capstan on the local environment of
# tests/cluster/up.sh (real node where a pod must serve, kwok elsewhere).
#
# What the suite assumes, set up here as OLM's Makefile target `e2e` and its CI set it up:
#   - namespaces `conformance-olm` (-olmNamespace, -catalogNamespace: the global catalog
#     namespace) and `conformance-e2e` (-namespace), capstan's CRDs (not OLM's `olm`, so that
#     OLM installed on the same environment afterwards, as `make test` does, finds nothing here);
#   - the catalog operator and the OLM operator: one `capstan controller` process on the host with
#     the cluster admin's kubeconfig, the global catalog namespace `olm`, and `--registry-listen`
#     on the host address, so every CatalogSource gets the registry Service and
#     `status.registryService` the suite waits for (docs/controller.md, "Registry Services");
#   - CatalogSource `operatorhubio-catalog` in `olm` (the suite's BeforeSuite waits for it to be
#     READY with a registry Service): the repository's catalog/ pushed to the local registry as
#     a catalog image.
#   - the images the suite names on quay.io (catalogs and bundles), built here by images.sh and
#     pushed to the local registry under their original names; capstan reaches them through
#     --registries-conf (quay.io and docker.io mirrored by the local registry, sources blocked),
#     and the real node's containerd, when this environment has one, through certs.d hosts.toml.
# Every spec is run except those marked [FLAKE] (upstream's own skip) and those listed in
# tests/conformance/out-of-scope.txt (OLM internals, each with its reason). FOCUS=REGEX runs only
# the matching specs (ginkgo's --focus). The report: one line per spec (passed / failed /
# skipped), then `conformance: P passed, F failed, N specs`; the JSON report and the controller's
# log are kept in $CAPSTAN_CLUSTER_DIR/conformance/.
#
# Environment: CAPSTAN_CLUSTER_DIR (default .cluster), CAPSTAN (the capstan binary, default
# target/release/capstan), REGISTRY_HOST (see below), FOCUS, SUBSET (ci: the specs of
# tests/conformance/ci-subset.txt, and any failure fails the run), TIMEOUT (the whole run,
# default 3h), PROCS (ginkgo processes
# running specs at once, default 1; every spec works in its own namespaces, so a full run with
# PROCS=4 takes about a quarter of the time: most of a failing spec is waiting).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/tests/conformance"
capstan=${CAPSTAN:-$root/target/release/capstan}
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
export CAPSTAN_CLUSTER_DIR=$dir
log() { printf '[conformance] %s\n' "$*" >&2; }
[ -x "$capstan" ] || { echo "conformance: $capstan is missing: run make build (or set CAPSTAN)" >&2; exit 2; }

bash "$root/tests/cluster/up.sh" all >&2
dir=$(cd "$dir" && pwd)
suite=$(bash "$here/build.sh")
kubectl() { "$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
state="$dir/conformance"
olm_ns=conformance-olm
test_ns=conformance-e2e
mkdir -p "$state"

log "capstan's CRDs and the suite's namespaces"
kubectl apply --server-side --force-conflicts -f "$root/manifests/crds" >/dev/null
for ns in "$olm_ns" "$test_ns"; do kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null; done

log "the global catalog operatorhubio-catalog: catalog/ as an image in the local registry"
catalog_ref="$(cat "$dir/registry")/conformance/operatorhubio-catalog:latest"
"$capstan" catalog push "$root/catalog" "$catalog_ref" >/dev/null

log "the suite's quay.io images, built here (tests/conformance/images.sh)"
CAPSTAN=$capstan bash "$here/images.sh" >&2
# quay.io and docker.io mirrored by the local registry, under their original names: for capstan a
# registries.conf (the blocked sources are never contacted), for the real node's containerd (if
# this environment has one) a hosts.toml per registry in the certs.d directory it reads per pull.
registry=$(cat "$dir/registry")
: >"$state/registries.conf"
for source in quay.io docker.io; do
  printf '[[registry]]\nlocation = "%s"\nblocked = true\n[[registry.mirror]]\nlocation = "%s/%s"\n\n' \
    "$source" "$registry" "$source" >>"$state/registries.conf"
  if [ -d "$dir/node/containerd/certs.d" ]; then
    mkdir -p "$dir/node/containerd/certs.d/$source"
    printf 'server = "https://%s"\n[host."http://%s/v2/%s"]\n  capabilities = ["pull", "resolve"]\n  override_path = true\n' \
      "$source" "$registry" "$source" >"$dir/node/containerd/certs.d/$source/hosts.toml"
  fi
done

# The address capstan's registry Services point at: EndpointSlices refuse loopback addresses, so
# an environment without the real node (api-host 127.0.0.1) needs REGISTRY_HOST, an address of
# this machine that is not loopback (the real node's bridge address when another environment
# runs the node; nothing dials it from the host, the suite reads the CatalogSource's status).
host=${REGISTRY_HOST:-$(cat "$dir/api-host")}
# PackageManifests (packages.operators.coreos.com, which many specs read) as capstan serves them:
# manifests/packages-api.yaml's APIService, its Service without a selector and an EndpointSlice
# on the host's port (the API server routes to endpoints, up.sh --enable-aggregator-routing).
packages_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
had_capstan_system=$(kubectl get namespace capstan-system -o name 2>/dev/null || true)
kubectl create namespace capstan-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f "$root/manifests/packages-api.yaml" >/dev/null
kubectl patch service -n capstan-system capstan-packages --type=json \
  -p '[{"op":"remove","path":"/spec/selector"}]' >/dev/null 2>&1 || true
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: capstan-packages, namespace: capstan-system}
spec:
  ports: [{name: https, port: 443, targetPort: $packages_port, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: capstan-packages-conformance
  namespace: capstan-system
  labels: {kubernetes.io/service-name: capstan-packages, endpointslice.kubernetes.io/managed-by: capstan-conformance}
addressType: IPv4
endpoints: [{addresses: [$host], conditions: {ready: true}}]
ports: [{name: https, port: $packages_port, protocol: TCP}]
EOF
# The suite's magic catalog (magic_catalog.go) runs `opm serve` in a pod behind a Service and points
# its CatalogSource at <service>.<namespace>.svc:50051: that pod must really serve, so a
# MutatingAdmissionPolicy places pods running quay.io/operator-framework/opm on the real node (its
# selector and toleration; every other pod of the suite keeps landing on kwok's fake node).
# capstan on the host dials the Service's ClusterIP (kube-proxy routes it on the host).
if kubectl get node -l type=real -o name 2>/dev/null | grep -q .; then
  kubectl apply -f - >/dev/null <<'EOF'
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: capstan-conformance-registry-pods}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchConditions:
  - name: runs-opm
    expression: "object.spec.containers.exists(c, c.image == 'quay.io/operator-framework/opm' || c.image.startsWith('quay.io/operator-framework/opm:') || c.image.startsWith('quay.io/operator-framework/opm@'))"
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        [has(object.spec.nodeSelector)
          ? JSONPatch{op: "add", path: "/spec/nodeSelector/type", value: "real"}
          : JSONPatch{op: "add", path: "/spec/nodeSelector", value: {"type": "real"}},
         has(object.spec.tolerations)
          ? JSONPatch{op: "add", path: "/spec/tolerations/-", value: {"key": "capstan.dev/node", "operator": "Equal", "value": "real", "effect": "NoSchedule"}}
          : JSONPatch{op: "add", path: "/spec/tolerations", value: [{"key": "capstan.dev/node", "operator": "Equal", "value": "real", "effect": "NoSchedule"}]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: capstan-conformance-registry-pods}
spec: {policyName: capstan-conformance-registry-pods}
EOF
  # The API server takes the policy in within seconds: wait until a dry-run pod gets the selector.
  probe='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"opm-placement","namespace":"default"},"spec":{"containers":[{"name":"c","image":"quay.io/operator-framework/opm"}]}}'
  for _ in $(seq 60); do
    echo "$probe" | kubectl create --dry-run=server -f - -o jsonpath='{.spec.nodeSelector.type}' 2>/dev/null | grep -q real && break
    sleep 0.5
  done
else
  log "WARNING: no real node in this environment: the magic catalog's opm pods cannot serve (their specs fail)"
fi
# OLM's default, which the suite assumes: the CSVs of AllNamespaces groups copied into every
# namespace (capstan creates the OLMConfig with them off, docs/olm-differences.md `copied-csvs`).
# Back to capstan's default on exit: later tests share this environment.
olm_config() {
  kubectl apply --server-side --force-conflicts --field-manager=capstan-conformance -f - >/dev/null <<EOF
apiVersion: operators.coreos.com/v1
kind: OLMConfig
metadata: {name: cluster}
spec: {features: {disableCopiedCSVs: $1}}
EOF
}
olm_config false
log "capstan controller (global catalog namespace $olm_ns, registries served on $host, packages API on $host:$packages_port, mirrors $state/registries.conf)"
"$capstan" controller --kubeconfig "$dir/kubeconfig" --global-catalog-namespace "$olm_ns" \
  --metrics-addr 0 --registry-listen "$host" --packages-api "$host:$packages_port" \
  --registries-conf "$state/registries.conf" \
  >"$state/controller.log" 2>&1 &
controller=$!
# An aggregated API left registered without its server stalls namespace deletion in the whole
# cluster: it goes with the controller.
stop() {
  olm_config true || true
  kubectl delete apiservice v1.packages.operators.coreos.com --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete mutatingadmissionpolicybinding,mutatingadmissionpolicy capstan-conformance-registry-pods \
    --ignore-not-found >/dev/null 2>&1 || true
  kill "$controller" 2>/dev/null || true
}
trap stop EXIT

kubectl apply -f - >/dev/null <<EOF
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: operatorhubio-catalog, namespace: $olm_ns}
spec: {sourceType: grpc, image: "$catalog_ref", displayName: Community Operators, publisher: OperatorHub.io}
EOF

# The suite's BeforeSuite makes OperatorGroup `opgroup` in -namespace when it has none, on every
# ginkgo process: with PROCS>1 they race and all but one fail "already exists". Made here first.
kubectl apply -f - >/dev/null <<EOF
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: opgroup, namespace: $test_ns}
EOF

skip='\[FLAKE\]'
while IFS= read -r line; do
  spec=${line%%$'\t'*}
  [ -n "$spec" ] && [ "${spec:0:1}" != "#" ] && skip="$skip|$(python3 -c 'import re,sys; print(re.escape(sys.argv[1]))' "$spec")"
done < "$here/out-of-scope.txt"
suite_args=(-kubeconfig "$dir/kubeconfig" -namespace="$test_ns" -olmNamespace="$olm_ns" -catalogNamespace="$olm_ns"
            -test-data-dir=./testdata -gather-artifacts-script-path=)
ginkgo_args=(--skip "$skip" --json-report "$state/report.json" --no-color --timeout "${TIMEOUT:-3h}")
if [ -n "${SUBSET:-}" ]; then
  # A named subset: tests/conformance/SUBSET-subset.txt, one spec's full text a line (as in
  # out-of-scope.txt), run as one focus (matched whole: ginkgo's text of a spec starts with a space).
  FOCUS=$(grep -v '^#' "$here/$SUBSET-subset.txt" | cut -f1 | grep . \
          | python3 -c 'import re,sys; print("|".join("(^|\\s)" + re.escape(l.rstrip("\n")) + "$" for l in sys.stdin))')
fi
[ -n "${FOCUS:-}" ] && ginkgo_args+=(--focus "$FOCUS")
rm -f "$state/report.json"
log "running $suite/e2e.test on ${PROCS:-1} process(es) (output in $state/suite.log)"
set +e
(cd "$suite" && ./ginkgo run --procs "${PROCS:-1}" "${ginkgo_args[@]}" ./e2e.test -- "${suite_args[@]}") \
  >"$state/suite.log" 2>&1
status=$?
set -e
log "suite exit status $status; controller log: $state/controller.log"
# Other tests go on on this environment (CI's, or one's own after a full run): the suite's
# namespaces go, while capstan still runs to finalize what is in them.
kubectl delete namespace "$olm_ns" "$test_ns" --wait --timeout=180s >/dev/null 2>&1 \
  || log "WARNING: the suite's namespaces were not deleted within 180 s"
kubectl delete -f "$root/manifests/packages-api.yaml" --ignore-not-found >/dev/null 2>&1 || true
kubectl delete endpointslice -n capstan-system capstan-packages-conformance --ignore-not-found >/dev/null 2>&1 || true
# (the namespace too when this run made it: later tests deploy capstan there from nothing)
[ -n "$had_capstan_system" ] || kubectl delete namespace capstan-system --wait --timeout=120s >/dev/null 2>&1 || true
# With SUBSET (CI), a failed or unfinished spec fails the run; a full run's numbers are the verdict.
python3 "$here/report.py" ${SUBSET:+--strict} "$state/report.json"
