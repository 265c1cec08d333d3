#!/usr/bin/env bash
# Benchmark of discovery served by `capstan controller`: the
# controller's resident memory with every catalog of ../shared/corpus (community-operators-prod
# v4.20, one CatalogSource each) loaded, without and with discovery (--packages-api,
# --catalog-content), the catalog content endpoint's throughput and the packages API's list latency
# (straight to the server with the front proxy's client certificate, as the aggregator calls it;
# each request includes capstan's SubjectAccessReview).
# Needs a running cluster (CAPSTAN_REAL_NODE=0 bash tests/cluster/up.sh all) and a capstan binary:
#   CAPSTAN_BIN (default target/release/capstan; `cargo build --release` first), CAPSTAN_BENCH_SECS (5).
# Prints a Markdown table. Removes what it created.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cdir=$(cd "${CAPSTAN_CLUSTER_DIR:-$root/.cluster}" && pwd)
kc="$cdir/kubeconfig"
kubectl() { "$cdir/bin/kubectl" --kubeconfig "$kc" "$@"; }
capstan=${CAPSTAN_BIN:-$root/target/release/capstan}
secs=${CAPSTAN_BENCH_SECS:-5}
reg=$(cat "$cdir/registry")
# The corpus: $CAPSTAN_SHARED, else beside the clone, else /work/shared (as tests/support's shared_dir).
shared=${CAPSTAN_SHARED:-}
if [ -z "$shared" ]; then if [ -d "$root/../shared" ]; then shared=$root/../shared; else shared=/work/shared; fi; fi
corpus="$shared/corpus/community-operators-prod/catalogs/v4.20"
state=$(mktemp -d)
ns=bench-discovery
cleanup() {
  set +e
  [ -f "$state/pid" ] && kill "$(cat "$state/pid")" 2>/dev/null
  kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1
  kubectl delete secret -n capstan-system capstan-bench-packages-cert >/dev/null 2>&1
  rm -rf "$state"
}
trap cleanup EXIT
kubectl apply -f "$root/manifests/crds/" >/dev/null
kubectl apply -f "$root/manifests/namespace.yaml" >/dev/null
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
n=0; bytes=0
for d in "$corpus"/*/; do
  name=$(basename "$d")
  "$capstan" catalog push "$d" "$reg/bench-discovery/$name:latest" >/dev/null
  kubectl apply -f - >/dev/null <<YAML
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: $name, namespace: $ns}
spec: {sourceType: grpc, image: "$reg/bench-discovery/$name:latest", displayName: "$name"}
YAML
  n=$((n + 1)); bytes=$((bytes + $(du -sb "$d" | cut -f1)))
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }

# Runs the controller until it has loaded every catalog; prints "seconds rss_mib".
run() {
  RUST_LOG=info,kube=warn "$capstan" controller --kubeconfig "$kc" --global-catalog-namespace "$ns" --metrics-addr 0 "$@" > "$state/log" 2>&1 &
  echo $! > "$state/pid"
  local t0; t0=$(date +%s.%N)
  for _ in $(seq 1 600); do
    [ "$(grep -c 'catalog loaded' "$state/log" || true)" -ge "$n" ] && break
    sleep 0.2
  done
  [ "$(grep -c 'catalog loaded' "$state/log" || true)" -ge "$n" ] || { echo "controller did not load $n catalogs: $(tail -3 "$state/log")" >&2; exit 1; }
  local t1; t1=$(date +%s.%N)
  sleep 3 # discovery snapshots follow within 0.5 s; let allocations settle
  echo "$(python3 -c "print(f'{$t1 - $t0:.1f}')") $(rss "$(cat "$state/pid")")"
}
stop() { kill "$(cat "$state/pid")"; wait "$(cat "$state/pid")" 2>/dev/null || true; rm -f "$state/pid"; }

# A first run fills the on-disk caches (blobs, parsed catalogs) so that both measured runs start alike.
run >/dev/null; stop
read -r off_s off_rss < <(run); stop
pport=$(free_port); cport=$(free_port)
read -r on_s on_rss < <(run --packages-api "127.0.0.1:$pport" --catalog-content "127.0.0.1:$cport" --packages-service capstan-system/capstan-bench-packages --packages-apiservice -)
pid=$(cat "$state/pid")
largest=$(for d in "$corpus"/*/; do echo "$(du -sb "$d" | cut -f1) $(basename "$d")"; done | sort -n | tail -1 | cut -d' ' -f2)
python3 - "$cport" "$pport" "$cdir/pki" "$ns" "$largest" "$secs" "$n" "$bytes" "$off_s" "$off_rss" "$on_s" "$on_rss" <<'PY'
import http.client, json, ssl, statistics, sys, threading, time
cport, pport, pki, ns, largest, secs, n, nbytes = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
off_s, off_rss, on_s, on_rss = sys.argv[9:13]
def load(path, gzip=False, clients=4):
    reqs, total, stop = [0], [0], time.time() + secs
    lock = threading.Lock()
    def worker():
        c = http.client.HTTPConnection("127.0.0.1", int(cport))
        while time.time() < stop:
            c.request("GET", path, headers={"Accept-Encoding": "gzip"} if gzip else {})
            r = c.getresponse(); b = r.read(); assert r.status == 200, r.status
            with lock: reqs[0] += 1; total[0] += len(b)
    ts = [threading.Thread(target=worker) for _ in range(clients)]
    [t.start() for t in ts]; [t.join() for t in ts]
    return reqs[0] / secs, total[0] / secs / 1048576, total[0] // max(reqs[0], 1)
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.load_cert_chain(f"{pki}/front-proxy-client.crt", f"{pki}/front-proxy-client.key")
def api(path, table):
    lat = []
    c = http.client.HTTPSConnection("127.0.0.1", pport, context=ctx)
    stop = time.time() + secs
    while time.time() < stop or len(lat) < 5:
        t = time.perf_counter()
        c.request("GET", path, headers={"X-Remote-User": "bench", "X-Remote-Group": "system:masters", "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" if table else "application/json"})
        r = c.getresponse(); b = r.read(); assert r.status == 200, (r.status, b[:300])
        lat.append(time.perf_counter() - t)
    return statistics.median(lat) * 1000, len(lat), len(b)
print("## Discovery served by `capstan controller`\n")
print(f"{n} corpus catalogs ({nbytes / 1048576:.1f} MiB of FBC files), one CatalogSource each, loaded from the local registry.\n")
print("| controller | all catalogs loaded after | resident memory (VmRSS) |")
print("| --- | ---: | ---: |")
print(f"| without discovery | {off_s} s | {off_rss} MiB |")
print(f"| with `--packages-api` and `--catalog-content` | {on_s} s | {on_rss} MiB |\n")
print(f"| request (4 clients, {secs} s each) | requests/s | body MiB/s | bytes per answer |")
print("| --- | ---: | ---: | ---: |")
for name, path, gz in [(f"content /api/v1/all, largest ({largest})", f"/catalogs/{ns}/{largest}/api/v1/all", False),
                       (f"content /api/v1/all, largest, gzip", f"/catalogs/{ns}/{largest}/api/v1/all", True),
                       (f"content metas?schema=olm.package, {largest}", f"/catalogs/{ns}/{largest}/api/v1/metas?schema=olm.package", False)]:
    rps, mibs, per = load(path, gz)
    print(f"| {name} | {rps:.0f} | {mibs:.0f} | {per} |")
print(f"\n| packages API request (1 client, sequential, {secs} s) | median latency | requests | bytes per answer |")
print("| --- | ---: | ---: | ---: |")
for name, path, table in [(f"list Table in {ns} ({n} catalogs' packages; what `kubectl get` asks)", f"/apis/packages.operators.coreos.com/v1/namespaces/{ns}/packagemanifests", True),
                   ("list JSON, all namespaces", "/apis/packages.operators.coreos.com/v1/packagemanifests", False),
                   (f"get one JSON (the package of {largest})", None, False)]:
    if path is None:
        c = http.client.HTTPConnection("127.0.0.1", int(cport)); c.request("GET", f"/catalogs/{ns}/{largest}/api/v1/metas?schema=olm.package")
        pkg = json.loads(c.getresponse().read().splitlines()[0])["name"]
        path = f"/apis/packages.operators.coreos.com/v1/namespaces/{ns}/packagemanifests/{pkg}"
    ms, k, per = api(path, table)
    print(f"| {name} | {ms:.1f} ms | {k} | {per} |")
PY
echo
echo "Resident memory after the requests: $(rss "$pid") MiB."
