#!/usr/bin/env bash
# Builds the catalog and bundle images that OLM v0's e2e suite names on quay.io, from content in
# the OLM module (test/images/, test/e2e/data/) and from what the specs assert, and pushes them to
# the local registry under their original names: quay.io/olmtest/x:1 goes to
# $(cat $CAPSTAN_CLUSTER_DIR/registry)/quay.io/olmtest/x:1. run.sh then hands capstan a
# registries.conf whose quay.io and docker.io tables have the local registry as their mirror, so
# the suite's CatalogSources (and the bundle images their catalogs name, also under quay.io/…)
# are pulled from here under the names the suite uses. Nothing here runs as a pod: the suite's
# pods land on kwok's fake node, where only the catalog and bundle content matters.
#
#   CAPSTAN=… CAPSTAN_CLUSTER_DIR=… bash tests/conformance/images.sh [OLM_SOURCE_DIR]
#
# Images and where their content comes from (spec: the suite file that uses the image):
#   quay.io/operator-framework/ci-index:latest       package kiali, channels alpha and stable:
#       test/e2e/data/kiali-image-bundle (kiali-operator.v1.4.2) with its package annotation set
#       to kiali, the package the specs subscribe to (operator_test.go, subscription_e2e_test.go
#       "unpacks bundle image", installplan_e2e_test.go); the specs assert the kiali CSV, the
#       kialis.kiali.io and monitoringdashboards.monitoring.kiali.io CRDs and its RBAC
#   quay.io/olmtest/single-bundle-index:pdb-v2        package busybox, channel alpha:
#       test/images/single-bundle-image as it is (bundle_e2e_test.go: NetworkPolicy, PDB,
#       PriorityClass, VPA objects)
#   quay.io/olmtest/single-bundle-index:objects       busybox.v2.0.0 of single-bundle-image with a
#       Secret mysecret and a ConfigMap special-config (gc_e2e_test.go asserts both by name)
#   quay.io/olmtest/single-bundle-index:objects-upgrade-samename   busybox.v2.0.0 in alpha and
#       beta with ConfigMap special-config, busybox.v3.0.0 (replaces v2.0.0) in beta with the
#       same ConfigMap whose special.how is "updated-very-much" (gc_e2e_test.go)
#   quay.io/olmtest/busybox-dependencies-index:{1.0.0,2.0.0}-with-ListBundles-method
#       test/images/busybox-index: busybox and busybox-dependency 1.0.0, then 1.0.0 and 2.0.0 of
#       both, the channel in version order (catalog_e2e_test.go "Dependency has correct replaces")
#   quay.io/olmtest/catsrc-update-test:{related,old,new,<kube major>.<minor>.<patch>}
#       package etcd-test: etcdoperator.v0.9.4 of the shared corpus (community-operators) with
#       spec.relatedImages the three etcd images packagemanifest_e2e_test.go asserts and its
#       operator image the asserted etcd-operator digest (catalog_e2e_test.go "connects to custom
#       grpc CatalogSources", the polling-interval and image-template specs; packagemanifest specs)
#   quay.io/olmtest/catsrc_dynamic_resources:e2e-test  package etcd, channel
#       singlenamespace-alpha: etcdoperator.v0.9.4 with a PrometheusRule my-prometheusrule and a
#       ServiceMonitor my-servicemonitor (dynamic_resource_e2e_test.go; both Its skip upstream,
#       their BeforeEach still needs the catalog)
#   quay.io/olmtest/example-operator-bundle:{0.1.0,0.2.0,0.3.0}   package test-package (see
#       example_operator below; subscription_e2e_test.go "unpacking bundle", its magic catalog)
#   quay.io/operator-framework/opm:latest          opm and grpc_health_probe (images/build.sh opm):
#       the registry pod of the suite's magic catalog (magic_catalog.go), which must serve: run.sh
#       places it on the real node
# Bundle images are pushed as quay.io/olmtest/<package>-bundle:<version>, names chosen here (the
# catalogs name them so, and capstan pulls them through the same mirror).
# Not built, each with its reason:
#   quay.io/olmtest/webhook-operator-index:v0.0.5   its operator must run and serve webhooks
#       (webhook_e2e_test.go): needs the real node and an operator image; not reconstructed yet
#   quay.io/olmtest/example-operator-bundle:0.1.0, quay.io/skopeo/stable   copied by a skopeo pod
#       into an in-cluster registry (subscription_e2e_test.go unpack retry; catalog_e2e_test.go
#       image update): suite infrastructure that must run as pods
#   quay.io/olmtest/old-opm-catsrc:v1.21.0          the registry pod's securityContext (OLM internal)
#   docker.io/repo/image:tag                        registry pod config (OLM internal; never pulled)
#   quay.io/operator-framework/mock-extension-apiserver:master  an APIService backend that must run
#   quay.io/olmtest/single-bundle-index:objects-upgrade-diffname  only a [FLAKE] spec uses it
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
capstan=${CAPSTAN:-$root/target/release/capstan}
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
reg=$(cat "$dir/registry")
olm=${1:-}
if [ -z "$olm" ]; then
  version=$(sed -n 's/^OLM_VERSION=//p' "$root/tests/peers/build-olm.sh")
  olm=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json \
        "github.com/operator-framework/operator-lifecycle-manager@$version" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
fi
shared=${CAPSTAN_SHARED:-}
[ -n "$shared" ] || { [ -d "$root/../shared" ] && shared="$root/../shared"; } || shared=/work/shared
etcd="$shared/corpus/community-operators-prod/operators/etcd/0.9.4"
[ -d "$etcd" ] || { echo "images.sh: $etcd is missing (set CAPSTAN_SHARED)" >&2; exit 2; }
work="$dir/conformance/images"
rm -rf "$work" && mkdir -p "$work/src" "$work/catalogs"
log() { printf '[conformance images] %s\n' "$*" >&2; }

# bundle SRC REF: pushes the bundle directory SRC to the local registry as REF (quay.io/…).
bundle() { "$capstan" bundle push -q "$1" "$reg/$2" >/dev/null; }
# add CATALOG SRC REF [catalog add flags]: pushes SRC as REF and adds it to catalog CATALOG.
add() {
  local cat="$work/catalogs/$1" src=$2 ref=$3
  shift 3
  bundle "$src" "$ref"
  "$capstan" catalog add "$cat" "$src" --image "$ref" "$@" >/dev/null
}
# catalog CATALOG REF...: pushes catalog CATALOG under each REF.
catalog() {
  local cat="$work/catalogs/$1"
  shift
  for ref in "$@"; do
    "$capstan" catalog push -q "$cat" "$reg/$ref" >/dev/null
    log "$ref"
  done
}
# copy SRC NAME: a writable copy of bundle SRC at $work/src/NAME; prints its path.
copy() { rm -rf "$work/src/$2" && cp -r "$1" "$work/src/$2" && chmod -R u+w "$work/src/$2" && echo "$work/src/$2"; }
# annotate DIR KEY VALUE: sets one bundle annotation in DIR/metadata/annotations.yaml.
annotate() {
  python3 - "$1/metadata/annotations.yaml" "$2" "$3" <<'EOF'
import sys, yaml
path, key, value = sys.argv[1:]
doc = yaml.safe_load(open(path))
doc["annotations"][key] = value
yaml.safe_dump(doc, open(path, "w"), default_flow_style=False)
EOF
}

ci_index() {
  local k
  k=$(copy "$olm/test/e2e/data/kiali-image-bundle" kiali)
  rm -f "$k/Dockerfile" "$k/manifests/kiali.package.yaml"
  annotate "$k" operators.operatorframework.io.bundle.package.v1 kiali
  annotate "$k" operators.operatorframework.io.bundle.manifests.v1 manifests/
  annotate "$k" operators.operatorframework.io.bundle.metadata.v1 metadata/
  add ci-index "$k" quay.io/olmtest/kiali-bundle:1.4.2
  catalog ci-index quay.io/operator-framework/ci-index:latest
}

single_bundle() {
  local s
  s=$(copy "$olm/test/images/single-bundle-image" single-bundle-pdb)
  rm -f "$s/Containerfile"
  add pdb-v2 "$s" quay.io/olmtest/busybox-bundle:2.0.0-pdb
  catalog pdb-v2 quay.io/olmtest/single-bundle-index:pdb-v2

  local o
  o=$(copy "$olm/test/images/single-bundle-image" single-bundle-objects)
  rm -f "$o/Containerfile" "$o"/manifests/{poddisruptionbudget,verticalpodautoscaler,priorityclass,networkpolicy}.yaml
  objects "$o" very
  printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: mysecret\ntype: Opaque\nstringData:\n  username: admin\n' \
    >"$o/manifests/secret.yaml"
  add objects "$o" quay.io/olmtest/busybox-bundle:2.0.0-objects
  catalog objects quay.io/olmtest/single-bundle-index:objects

  local v2 v3
  v2=$(copy "$o" single-bundle-samename-v2)
  rm -f "$v2/manifests/secret.yaml"
  annotate "$v2" operators.operatorframework.io.bundle.channels.v1 alpha,beta
  add samename "$v2" quay.io/olmtest/busybox-bundle:2.0.0-samename
  v3=$(copy "$v2" single-bundle-samename-v3)
  objects "$v3" updated-very-much
  sed -i 's/^  name: busybox.v2.0.0$/  name: busybox.v3.0.0/; s/^  version: 2.0.0$/  version: 3.0.0\n  replaces: busybox.v2.0.0/' \
    "$v3/manifests/csv.yaml"
  annotate "$v3" operators.operatorframework.io.bundle.channels.v1 beta
  add samename "$v3" quay.io/olmtest/busybox-bundle:3.0.0-samename
  catalog samename quay.io/olmtest/single-bundle-index:objects-upgrade-samename
}

# objects DIR VALUE: ConfigMap special-config with special.how: VALUE in bundle DIR.
objects() {
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: special-config\ndata:\n  special.how: %s\n' "$2" \
    >"$1/manifests/configmap.yaml"
}

busybox_dependencies() {
  local p v
  for v in 1.0.0 2.0.0; do
    for p in busybox busybox-dependency; do
      local b
      b=$(copy "$olm/test/images/busybox-index/$p/$v" "$p-$v")
      rm -f "$b/dockerfile"
      add "deps-$v" "$b" "quay.io/olmtest/$p-bundle:$v" --mode semver
      [ "$v" = 1.0.0 ] || continue
      add deps-2.0.0 "$b" "quay.io/olmtest/$p-bundle:$v" --mode semver
    done
  done
  catalog deps-1.0.0 quay.io/olmtest/busybox-dependencies-index:1.0.0-with-ListBundles-method
  catalog deps-2.0.0 quay.io/olmtest/busybox-dependencies-index:2.0.0-with-ListBundles-method
}

catsrc_update_test() {
  local e kube
  e=$(copy "$etcd" etcd-test)
  annotate "$e" operators.operatorframework.io.bundle.package.v1 etcd-test
  python3 - "$e/manifests/etcdoperator.v0.9.4.clusterserviceversion.yaml" <<'EOF'
import sys, yaml
path = sys.argv[1]
csv = yaml.safe_load(open(path))
operator = "quay.io/coreos/etcd-operator@sha256:c0301e4686c3ed4206e370b42de5a3bd2229b9fb4906cf85f3f30650424abec2"
csv["spec"]["relatedImages"] = [
    {"name": "etcd-v3.4.0", "image": "quay.io/coreos/etcd@sha256:3816b6daf9b66d6ced6f0f966314e2d4f894982c6b1493061502f8c2bf86ac84"},
    {"name": "etcd-v3.4.1", "image": "quay.io/coreos/etcd@sha256:49d3d4a81e0d030d3f689e7167f23e120abf955f7d08dbedf3ea246485acee9f"},
    {"name": "etcd-operator", "image": operator},
]
for d in csv["spec"]["install"]["spec"]["deployments"]:
    for c in d["spec"]["template"]["spec"]["containers"]:
        c["image"] = operator
csv["metadata"].setdefault("annotations", {})["containerImage"] = operator
yaml.safe_dump(csv, open(path, "w"), default_flow_style=False)
EOF
  add etcd-test "$e" quay.io/olmtest/etcd-test-bundle:0.9.4
  kube=$("$dir/bin/kubectl" --kubeconfig "$dir/kubeconfig" version -o json \
    | python3 -c 'import json,re,sys; v=json.load(sys.stdin)["serverVersion"]; print("%s.%s.%s" % (v["major"], v["minor"], re.match(r"v\d+\.\d+\.(\d+)", v["gitVersion"]).group(1)))')
  catalog etcd-test quay.io/olmtest/catsrc-update-test:related quay.io/olmtest/catsrc-update-test:old \
    quay.io/olmtest/catsrc-update-test:new "quay.io/olmtest/catsrc-update-test:$kube"
}

dynamic_resources() {
  local e
  e=$(copy "$etcd" etcd-dynamic)
  cat >"$e/manifests/prometheusrule.yaml" <<'EOF'
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: my-prometheusrule
spec:
  groups:
  - name: ./example.rules
    rules:
    - alert: ExampleAlert
      expr: vector(1)
EOF
  cat >"$e/manifests/servicemonitor.yaml" <<'EOF'
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: my-servicemonitor
spec:
  endpoints:
  - port: metrics
  selector:
    matchLabels:
      name: etcd-operator
EOF
  add dynamic "$e" quay.io/olmtest/etcd-bundle:0.9.4-dynamic
  catalog dynamic quay.io/olmtest/catsrc_dynamic_resources:e2e-test
}

# example_operator: quay.io/olmtest/example-operator-bundle:{0.1.0,0.2.0,0.3.0}, package test-package,
# channel stable, CSV example-operator.v<tag> at the version the suite's FBC gives each
# (test/e2e/testdata/subscription/example-operator.v*.yaml: olm.package 1.0.0, 1.0.1, 0.3.0, as
# `opm render` takes it from the CSV), owning CRD testas.example.com (the olm.gvk TestA
# example.com/v1alpha1 they list), each replacing the one before. The operator Deployment's image
# is never pulled: its pod lands on kwok's fake node.
example_operator() {
  local tag version replaces b
  for tag in 0.1.0:1.0.0: 0.2.0:1.0.1:example-operator.v0.1.0 0.3.0:0.3.0:example-operator.v0.2.0; do
    IFS=: read -r tag version replaces <<<"$tag"
    b="$work/src/example-operator-$tag"
    rm -rf "$b" && mkdir -p "$b/manifests" "$b/metadata"
    cat >"$b/metadata/annotations.yaml" <<EOF2
annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: test-package
  operators.operatorframework.io.bundle.channels.v1: stable
  operators.operatorframework.io.bundle.channel.default.v1: stable
EOF2
    cat >"$b/manifests/testas.crd.yaml" <<'EOF2'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: testas.example.com
spec:
  group: example.com
  names: {kind: TestA, listKind: TestAList, plural: testas, singular: testa}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
EOF2
    cat >"$b/manifests/example-operator.clusterserviceversion.yaml" <<EOF2
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: example-operator.v$tag
spec:
  displayName: Example Operator
  version: $version
${replaces:+  replaces: $replaces}
  installModes:
  - {type: OwnNamespace, supported: true}
  - {type: SingleNamespace, supported: true}
  - {type: MultiNamespace, supported: true}
  - {type: AllNamespaces, supported: true}
  customresourcedefinitions:
    owned:
    - {name: testas.example.com, version: v1alpha1, kind: TestA, displayName: TestA}
  install:
    strategy: deployment
    spec:
      deployments:
      - name: example-operator
        spec:
          replicas: 1
          selector: {matchLabels: {app: example-operator}}
          template:
            metadata: {labels: {app: example-operator}}
            spec:
              serviceAccountName: example-operator
              containers:
              - {name: operator, image: "quay.io/olmtest/example-operator:$tag"}
      permissions:
      - serviceAccountName: example-operator
        rules:
        - {apiGroups: [example.com], resources: [testas], verbs: ["*"]}
EOF2
    bundle "$b" "quay.io/olmtest/example-operator-bundle:$tag"
    log "quay.io/olmtest/example-operator-bundle:$tag"
  done
}

# opm: quay.io/operator-framework/opm:latest, the magic catalog's registry pod (images/build.sh opm).
opm_image() {
  IMAGE_REPOSITORY=quay.io/operator-framework IMAGE_TAG=latest CAPSTAN_CLUSTER_DIR=$dir \
    bash "$root/images/build.sh" --push "$reg" opm >/dev/null
  log "quay.io/operator-framework/opm:latest"
}

log "building the suite's images from $olm into $reg"
ci_index
single_bundle
busybox_dependencies
catsrc_update_test
dynamic_resources
example_operator
opm_image
