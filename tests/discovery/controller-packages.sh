#!/usr/bin/env bash
# capstan's own discovery on the local cluster (issue 16, "What must be shown" 1, 3 and 4):
# `capstan controller --packages-api --catalog-content` runs on the host; the API server reaches it
# through manifests/packages-api.yaml's APIService and a Service named as the manifest's whose
# Endpoints/EndpointSlice point at the host address (as tests/discovery/aggregated-packageserver.sh
# does for packageserver). Checks, with the pinned kubectl:
#   - the APIService becomes Available with the caBundle capstan wrote (no insecureSkipTLSVerify);
#   - `kubectl get packagemanifests -n operators` lists the example catalog's and a corpus catalog's
#     packages with packageserver's columns (NAME, CATALOG, AGE);
#   - `kubectl get packagemanifest nginx-operator -o yaml` carries the catalog's values;
#   - a namespace that cannot see a catalog (team-b, for team-a's CatalogSource) does not list it;
#   - a user without RBAC is Forbidden, a user with the aggregated `view` role in one namespace may
#     list there only; `kubectl describe` works;
#   - the content endpoint serves exactly `opm render`'s blobs;
#   - a new catalog image digest shows in `kubectl get packagemanifests` within one poll interval.
# Needs a running kwok cluster: CAPSTAN_REAL_NODE=0 bash tests/cluster/up.sh all. Builds capstan
# (debug) unless CAPSTAN_BIN is set. Leaves nothing running; removes what it created.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cdir=$(cd "${CAPSTAN_CLUSTER_DIR:-$root/.cluster}" && pwd)
kc="$cdir/kubeconfig"
kubectl() { "$cdir/bin/kubectl" --kubeconfig "$kc" "$@"; }
fail() { echo "controller-packages.sh: FAIL: $*" >&2; exit 1; }
say() { echo "controller-packages.sh: $*" >&2; }
reg=$(cat "$cdir/registry")
state="$cdir/discovery-controller"
rm -rf "$state"; mkdir -p "$state"
# The corpus: $CAPSTAN_SHARED, else beside the clone, else /work/shared (as tests/support's shared_dir).
shared=${CAPSTAN_SHARED:-}
if [ -z "$shared" ]; then if [ -d "$root/../shared" ]; then shared=$root/../shared; else shared=/work/shared; fi; fi
corpus_cat="$shared/corpus/community-operators-prod/catalogs/v4.20/rabbitmq-cluster-operator"
opm=${CAPSTAN_OPM:-$(bash "$root/tests/peers/build.sh")}
if [ -z "${CAPSTAN_BIN:-}" ]; then (cd "$root" && cargo build -q --bin capstan); fi
capstan=${CAPSTAN_BIN:-$root/target/debug/capstan}
interval=10

# Catalog images: the example catalog, a corpus catalog, and team-a's catalog first without
# nginx-operator.v0.2.0 (updated below).
"$capstan" catalog push "$root/catalog" "$reg/discovery/capstan-examples:latest" >/dev/null
"$capstan" catalog push "$corpus_cat" "$reg/discovery/community:latest" >/dev/null
mkdir -p "$state/team-v1/nginx-operator"
python3 - "$root/catalog/nginx-operator/catalog.json" "$state/team-v1/nginx-operator/catalog.json" <<'PY'
import json, sys
dec = json.JSONDecoder(); text = open(sys.argv[1]).read(); i = 0; out = []
while i < len(text):
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    b, i = dec.raw_decode(text, i)
    if b.get("name") == "nginx-operator.v0.2.0": continue
    if b["schema"] == "olm.channel": b["entries"] = [e for e in b["entries"] if e["name"] != "nginx-operator.v0.2.0"]
    out.append(b)
open(sys.argv[2], "w").write("\n".join(json.dumps(b) for b in out) + "\n")
PY
"$capstan" catalog push "$state/team-v1" "$reg/discovery/team:latest" >/dev/null

cleanup() {
  set +e
  # The APIService first, while its server still answers: an aggregated API that is registered
  # but down makes the namespace controller fail discovery, and every namespace deletion of the
  # cluster then waits (later tests wait for capstan-system to be gone).
  kubectl delete -f "$root/manifests/packages-api.yaml" --wait=true --timeout=60s >/dev/null 2>&1
  [ -f "$state/controller.pid" ] && kill "$(cat "$state/controller.pid")" 2>/dev/null
  kubectl delete catalogsource -n olm capstan-examples community --wait=false >/dev/null 2>&1
  kubectl delete namespace operators team-a team-b capstan-system --wait=true --timeout=120s >/dev/null 2>&1
}
trap cleanup EXIT

kubectl apply -f "$root/manifests/crds/" >/dev/null
# Namespaces an earlier test (deploy_cluster) or run is still deleting must be gone first.
for ns in capstan-system operators team-a team-b; do
  if [ "$(kubectl get namespace "$ns" -o jsonpath='{.status.phase}' 2>/dev/null)" = Terminating ]; then
    kubectl wait --for=delete "namespace/$ns" --timeout=180s >/dev/null || fail "namespace $ns is still Terminating after 180 s"
  fi
done
kubectl apply -f "$root/manifests/namespace.yaml" >/dev/null
for ns in olm operators team-a team-b; do kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null; done
kubectl apply -f - >/dev/null <<YAML
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: capstan-examples, namespace: olm, labels: {team: platform}}
spec: {sourceType: grpc, image: "$reg/discovery/capstan-examples:latest", displayName: Capstan Examples, publisher: Capstan}
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: community, namespace: olm}
spec: {sourceType: grpc, image: "$reg/discovery/community:latest", displayName: Community Operators, publisher: Red Hat}
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: team-catalog, namespace: team-a}
spec:
  sourceType: grpc
  image: "$reg/discovery/team:latest"
  displayName: Team Catalog
  updateStrategy: {registryPoll: {interval: ${interval}s}}
YAML

# The API server reaches the host (not loopback, which Endpoints may not name).
host=$(hostname -I | tr ' ' '\n' | grep -E '^[0-9.]+$' | grep -v '^10\.0\.2\.' | head -1)
[ -n "$host" ] || fail "no usable host address"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port); cport=$(free_port)
# manifests/packages-api.yaml as shipped (APIService, RBAC), its Service without a selector so that
# the test's Endpoints stay.
kubectl apply -f "$root/manifests/packages-api.yaml" >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: capstan-packages, namespace: capstan-system, labels: {app.kubernetes.io/name: capstan}}
spec:
  ports: [{name: https, port: 443, targetPort: $port, protocol: TCP}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: capstan-packages, namespace: capstan-system, labels: {app.kubernetes.io/part-of: capstan-tests}}
subsets: [{addresses: [{ip: $host}], ports: [{name: https, port: $port}]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: capstan-packages-host
  namespace: capstan-system
  labels: {kubernetes.io/service-name: capstan-packages, endpointslice.kubernetes.io/managed-by: capstan-tests, app.kubernetes.io/part-of: capstan-tests}
addressType: IPv4
endpoints: [{addresses: [$host], conditions: {ready: true}}]
ports: [{name: https, port: $port, protocol: TCP}]
YAML
kubectl patch service -n capstan-system capstan-packages --type=json -p '[{"op":"remove","path":"/spec/selector"}]' >/dev/null 2>&1 || true

RUST_LOG=info,kube=warn "$capstan" controller --kubeconfig "$kc" --global-catalog-namespace olm --metrics-addr 0 \
  --packages-api "$host:$port" --catalog-content "127.0.0.1:$cport" > "$state/controller.log" 2>&1 &
echo $! > "$state/controller.pid"

kubectl wait --for=condition=Available --timeout=120s apiservice/v1.packages.operators.coreos.com >/dev/null \
  || fail "APIService not Available: $(kubectl get apiservice v1.packages.operators.coreos.com -o jsonpath='{.status.conditions}'); log: $(tail -5 "$state/controller.log")"
[ -n "$(kubectl get apiservice v1.packages.operators.coreos.com -o jsonpath='{.spec.caBundle}')" ] || fail "no caBundle on the APIService"
[ "$(kubectl get apiservice v1.packages.operators.coreos.com -o jsonpath='{.spec.insecureSkipTLSVerify}')" != true ] || fail "insecureSkipTLSVerify is set"
say "APIService Available (verified with the caBundle capstan wrote)"

# 1. The lists.
list=""
for _ in $(seq 1 90); do
  list=$(kubectl get packagemanifests -n operators 2>/dev/null || true)
  grep -q '^nginx-operator ' <<<"$list" && grep -q '^kaiwudb-operator ' <<<"$list" && grep -q '^rabbitmq-cluster-operator ' <<<"$list" && break
  sleep 1
done
echo "$list"
head -1 <<<"$list" | grep -Eq '^NAME +CATALOG +AGE$' || fail "columns are not NAME CATALOG AGE: $(head -1 <<<"$list")"
grep -Eq '^nginx-operator +Capstan Examples +[0-9]+[smhd]' <<<"$list" || fail "operators does not list nginx-operator from Capstan Examples with an age"
grep -Eq '^kaiwudb-operator +Capstan Examples ' <<<"$list" || fail "operators does not list kaiwudb-operator"
grep -Eq '^rabbitmq-cluster-operator +Community Operators ' <<<"$list" || fail "operators does not list the corpus catalog's rabbitmq-cluster-operator"
! grep -q 'Team Catalog' <<<"$list" || fail "operators lists team-a's catalog"

# 2. One PackageManifest's fields against the catalog's values.
kubectl get packagemanifest nginx-operator -n operators -o yaml > "$state/nginx-operator.yaml"
kubectl get packagemanifest nginx-operator -n operators -o json > "$state/nginx-operator.json"
python3 - "$state/nginx-operator.json" "$root/catalog/nginx-operator/catalog.json" <<'PY' || fail "nginx-operator's PackageManifest does not carry the catalog's values"
import base64, json, sys
pm = json.load(open(sys.argv[1]))
dec = json.JSONDecoder(); text = open(sys.argv[2]).read(); i = 0; blobs = []
while i < len(text):
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    b, i = dec.raw_decode(text, i); blobs.append(b)
pkg = next(b for b in blobs if b["schema"] == "olm.package")
chans = sorted((b for b in blobs if b["schema"] == "olm.channel"), key=lambda c: c["name"])
bundles = {b["name"]: b for b in blobs if b["schema"] == "olm.bundle"}
def csv_of(bundle):
    for p in bundle["properties"]:
        if p["type"] == "olm.bundle.object":
            o = json.loads(base64.b64decode(p["value"]["data"]))
            if o["kind"] == "ClusterServiceVersion": return o
def version_of(bundle):
    return next(p["value"]["version"] for p in bundle["properties"] if p["type"] == "olm.package")
def head(ch):
    replaced = {e.get("replaces") for e in ch["entries"]} | {s for e in ch["entries"] for s in e.get("skips", [])}
    return next(e["name"] for e in ch["entries"] if e["name"] not in replaced)
st, md = pm["status"], pm["metadata"]
errors = []
def eq(what, got, want):
    if got != want: errors.append(f"{what}: {got!r} != catalog's {want!r}")
eq("kind", pm["kind"], "PackageManifest"); eq("apiVersion", pm["apiVersion"], "packages.operators.coreos.com/v1")
eq("metadata.namespace", md["namespace"], "operators")
eq("labels.catalog", md["labels"].get("catalog"), "capstan-examples")
eq("labels.catalog-namespace", md["labels"].get("catalog-namespace"), "olm")
eq("labels.team (the CatalogSource's)", md["labels"].get("team"), "platform")
eq("catalogSource", st["catalogSource"], "capstan-examples"); eq("catalogSourceNamespace", st["catalogSourceNamespace"], "olm")
eq("catalogSourceDisplayName", st["catalogSourceDisplayName"], "Capstan Examples"); eq("catalogSourcePublisher", st["catalogSourcePublisher"], "Capstan")
eq("packageName", st["packageName"], pkg["name"]); eq("defaultChannel", st["defaultChannel"], pkg["defaultChannel"])
eq("channel names", [c["name"] for c in st["channels"]], [c["name"] for c in chans])
for got, ch in zip(st["channels"], chans):
    h = bundles[head(ch)]; csv = csv_of(h); spec = csv["spec"]; d = got["currentCSVDesc"]
    eq(f"{ch['name']}.currentCSV", got["currentCSV"], csv["metadata"]["name"])
    eq(f"{ch['name']}.version", d["version"], version_of(h))
    eq(f"{ch['name']}.displayName", d["displayName"], spec.get("displayName"))
    eq(f"{ch['name']}.description", d.get("description", ""), spec.get("description", ""))
    eq(f"{ch['name']}.installModes", d["installModes"], spec.get("installModes"))
    eq(f"{ch['name']}.provider", d["provider"].get("name"), spec.get("provider", {}).get("name"))
    eq(f"{ch['name']}.keywords", d.get("keywords", []), spec.get("keywords", []))
    eq(f"{ch['name']}.maintainers", d.get("maintainers", []), spec.get("maintainers", []))
    eq(f"{ch['name']}.links", d.get("links", []), spec.get("links", []))
    eq(f"{ch['name']}.owned CRDs", sorted(c["name"] for c in d.get("customresourcedefinitions", {}).get("owned", [])), sorted(c["name"] for c in spec.get("customresourcedefinitions", {}).get("owned", [])))
    want_entries = sorted(((tuple(int(x) for x in version_of(bundles[e["name"]]).split(".")), e["name"]) for e in ch["entries"]), reverse=True)
    eq(f"{ch['name']}.entries", [e["name"] for e in got["entries"]], [n for _, n in want_entries])
    eq(f"{ch['name']}.entries versions", [e["version"] for e in got["entries"]], [version_of(bundles[n]) for _, n in want_entries])
eq("provider", st["provider"].get("name"), csv_of(bundles[head(next(c for c in chans if c["name"] == pkg["defaultChannel"]))])["spec"]["provider"]["name"])
if errors:
    print("\n".join(errors), file=sys.stderr); sys.exit(1)
print("nginx-operator: status fields equal the catalog's (channels, currentCSV, currentCSVDesc, entries, provider, catalogSource*)")
PY
grep -q 'currentCSV: nginx-operator.v0.2.0' "$state/nginx-operator.yaml" || fail "-o yaml lacks currentCSV"
kubectl describe packagemanifest nginx-operator -n operators > "$state/describe.txt" || fail "kubectl describe failed"
grep -q 'Catalog Source: *capstan-examples' "$state/describe.txt" || fail "kubectl describe lacks the catalog source: $(head -20 "$state/describe.txt")"
say "kubectl get -o yaml and describe: ok"

# 3. Visibility: team-a sees its own catalog and the global ones; team-b only the global ones.
for _ in $(seq 1 60); do kubectl get packagemanifests -n team-a -l catalog=team-catalog 2>/dev/null | grep -q '^nginx-operator ' && break; sleep 1; done
kubectl get packagemanifests -n team-a -l catalog=team-catalog | grep -q '^nginx-operator ' || fail "team-a does not list its own catalog's nginx-operator"
[ "$(kubectl get packagemanifest nginx-operator -n team-a -o jsonpath='{.status.catalogSource}')" = team-catalog ] || fail "get in team-a does not prefer team-a's own catalog"
[ -z "$(kubectl get packagemanifests -n team-b -l catalog=team-catalog -o name)" ] || fail "team-b lists team-a's catalog"
kubectl get packagemanifests -n team-b | grep -q 'Team Catalog' && fail "team-b lists team-a's catalog"
kubectl get packagemanifests -n team-b | grep -q '^rabbitmq-cluster-operator ' || fail "team-b does not list the global catalogs"
[ "$(kubectl get packagemanifests -n operators -l catalog=community -o name)" = packagemanifest.packages.operators.coreos.com/rabbitmq-cluster-operator ] || fail "label selector catalog=community"
[ "$(kubectl get packagemanifests -n operators --field-selector metadata.name=kaiwudb-operator -o name)" = packagemanifest.packages.operators.coreos.com/kaiwudb-operator ] || fail "field selector metadata.name"
say "namespace visibility and selectors: ok"

# 4. RBAC through the aggregator.
if err=$(kubectl get packagemanifests -n operators --as=nobody 2>&1); then fail "a user without RBAC could list packagemanifests"; fi
grep -q 'Forbidden\|forbidden' <<<"$err" || fail "expected Forbidden, got: $err"
if err=$(kubectl get packagemanifest nginx-operator -n operators --as=nobody 2>&1); then fail "a user without RBAC could get a packagemanifest"; fi
kubectl create rolebinding alice-view -n operators --clusterrole=view --user=alice --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# The binding and the aggregation into `view` (kube-controller-manager's clusterrole-aggregation
# controller) reach the authorizer asynchronously: wait up to 60 s for the listing to show nginx,
# and say what was seen if it never does (a CI run saw it fail after 20 s without a reason).
seen=""
for _ in $(seq 1 60); do
  seen=$(kubectl get packagemanifests -n operators --as=alice 2>&1) && grep -q '^nginx-operator ' <<<"$seen" && break
  sleep 1
done
if ! grep -q '^nginx-operator ' <<<"$seen"; then
  echo "last listing as alice: $seen" >&2
  echo "can-i list as alice: $(kubectl auth can-i list packagemanifests.packages.operators.coreos.com -n operators --as=alice 2>&1)" >&2
  echo "view's packagemanifests rules: $(kubectl get clusterrole view -o json | grep -c packagemanifests)" >&2
  fail "alice (view in operators, aggregated capstan-packagemanifests-view) cannot list"
fi
if kubectl get packagemanifests -n team-a --as=alice >/dev/null 2>&1; then fail "alice may list in team-a without a binding there"; fi
say "RBAC: nobody Forbidden; view in one namespace lists there only"

# 5. The content endpoint equals opm render.
curl -fsS "http://127.0.0.1:$cport/catalogs/olm/community/api/v1/all" > "$state/community.jsonl"
"$opm" render "$corpus_cat" -o json > "$state/community.opm.json"
python3 - "$state/community.jsonl" "$state/community.opm.json" <<'PY' || fail "content endpoint != opm render"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
dec = json.JSONDecoder(); text = open(sys.argv[2]).read(); i = 0; want = []
while i < len(text):
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    b, i = dec.raw_decode(text, i); want.append(b)
assert got == want, f"{len(got)} blobs served, {len(want)} rendered by opm; first difference at {next((k for k,(a,b) in enumerate(zip(got,want)) if a!=b), min(len(got),len(want)))}"
print(f"content endpoint: {len(got)} blobs, equal to opm render")
PY
etag=$(curl -fsS -o /dev/null -D - "http://127.0.0.1:$cport/catalogs/olm/community/api/v1/all" | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p')
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "http://127.0.0.1:$cport/catalogs/olm/community/api/v1/all")" = 304 ] || fail "no 304 for the ETag"
[ "$etag" = "\"$(kubectl get catalogsource -n olm community -o jsonpath='{.status.resolvedDigest}')\"" ] || fail "ETag $etag is not the CatalogSource's resolvedDigest"

# 6. A new catalog image digest shows within one poll interval.
[ "$(kubectl get packagemanifest nginx-operator -n team-a -o jsonpath='{.status.channels[0].currentCSV}')" = nginx-operator.v0.1.0 ] || fail "team catalog v1 head"
old_digest=$(kubectl get catalogsource -n team-a team-catalog -o jsonpath='{.status.resolvedDigest}')
mkdir -p "$state/team-v2"; cp -r "$root/catalog/nginx-operator" "$state/team-v2/"
"$capstan" catalog push "$state/team-v2" "$reg/discovery/team:latest" >/dev/null
start=$(date +%s.%N)
seen=""
for _ in $(seq 1 $((interval * 4))); do
  seen=$(kubectl get packagemanifests -n team-a -l catalog=team-catalog -o jsonpath='{.items[0].status.channels[0].currentCSV}' 2>/dev/null || true)
  [ "$seen" = nginx-operator.v0.2.0 ] && break
  sleep 0.5
done
took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
[ "$seen" = nginx-operator.v0.2.0 ] || fail "the new catalog image did not show in ${took}s (poll interval ${interval}s); currentCSV $seen"
new_digest=$(kubectl get catalogsource -n team-a team-catalog -o jsonpath='{.status.resolvedDigest}')
[ "$new_digest" != "$old_digest" ] || fail "digest unchanged"
python3 -c "import sys; sys.exit(0 if $took <= $interval + 3 else 1)" || fail "the update took ${took}s, more than the poll interval ${interval}s (+3s for the pull)"
say "catalog update ($old_digest -> $new_digest) listed after ${took}s (poll interval ${interval}s)"
echo "controller-packages.sh: ok"
