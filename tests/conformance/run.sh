#!/usr/bin/env bash
# make conformance: OLM v0's own end-to-end suite (test/e2e at the version tests/peers/build-olm.sh
# pins, built by tests/conformance/build.sh) run against capstan on the local environment of
# tests/cluster/up.sh (real node where a pod must serve, kwok elsewhere).
#
# What the suite assumes, set up here as OLM's Makefile target `e2e` and its CI set it up:
#   - namespaces `olm` (-olmNamespace, -catalogNamespace: the global catalog namespace) and
#     `olm-e2e` (-namespace), capstan's CRDs;
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
# target/release/capstan), REGISTRY_HOST (see below), FOCUS, TIMEOUT (the whole run, default 3h), PROCS (ginkgo processes
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
mkdir -p "$state"

log "capstan's CRDs and the suite's namespaces"
kubectl apply --server-side --force-conflicts -f "$root/manifests/crds" >/dev/null
for ns in olm olm-e2e; do kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null; done

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
log "capstan controller (global catalog namespace olm, registries served on $host, mirrors $state/registries.conf)"
"$capstan" controller --kubeconfig "$dir/kubeconfig" --global-catalog-namespace olm \
  --metrics-addr 0 --registry-listen "$host" --registries-conf "$state/registries.conf" >"$state/controller.log" 2>&1 &
controller=$!
trap 'kill "$controller" 2>/dev/null || true' EXIT

kubectl apply -f - >/dev/null <<EOF
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: operatorhubio-catalog, namespace: olm}
spec: {sourceType: grpc, image: "$catalog_ref", displayName: Community Operators, publisher: OperatorHub.io}
EOF

skip='\[FLAKE\]'
while IFS= read -r line; do
  spec=${line%%$'\t'*}
  [ -n "$spec" ] && [ "${spec:0:1}" != "#" ] && skip="$skip|$(python3 -c 'import re,sys; print(re.escape(sys.argv[1]))' "$spec")"
done < "$here/out-of-scope.txt"
suite_args=(-kubeconfig "$dir/kubeconfig" -namespace=olm-e2e -olmNamespace=olm -catalogNamespace=olm
            -test-data-dir=./testdata -gather-artifacts-script-path=)
ginkgo_args=(--skip "$skip" --json-report "$state/report.json" --no-color --timeout "${TIMEOUT:-3h}")
[ -n "${FOCUS:-}" ] && ginkgo_args+=(--focus "$FOCUS")
rm -f "$state/report.json"
log "running $suite/e2e.test on ${PROCS:-1} process(es) (output in $state/suite.log)"
set +e
(cd "$suite" && ./ginkgo run --procs "${PROCS:-1}" "${ginkgo_args[@]}" ./e2e.test -- "${suite_args[@]}") \
  >"$state/suite.log" 2>&1
status=$?
set -e
python3 "$here/report.py" "$state/report.json"
log "suite exit status $status; controller log: $state/controller.log"
