#!/usr/bin/env bash
# Side by side with OLM v0's packageserver (issue 16): starts OLM v0 with package-server
# (tests/peers/olm.sh for OLM and the catalogs; package-server from tests/peers/build-olm.sh) against the
# running local cluster (tests/cluster/up.sh, state in $CAPSTAN_CLUSTER_DIR or <repo>/.cluster),
# one `opm serve` + CatalogSource in `olm` per corpus catalog and the example catalog, waits until
# package-server lists every catalog's packages, dumps each list to $DUMP/NAME.json, runs
# `cargo test --test discovery_packageserver` on it, and stops OLM.
#   OLM_SH=path/to/olm.sh   (default tests/peers/olm.sh; the `olm` branch's script)
#   DUMP=dir                (default a temporary directory)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cdir=$(cd "${CAPSTAN_CLUSTER_DIR:-$root/.cluster}" && pwd)
export CAPSTAN_CLUSTER_DIR=$cdir
olm_sh=${OLM_SH:-$root/tests/peers/olm.sh}
[ -f "$olm_sh" ] || { echo "packageserver.sh: $olm_sh not found (set OLM_SH to the olm branch's tests/peers/olm.sh)" >&2; exit 2; }
# The corpus: $CAPSTAN_SHARED, else beside the clone, else /work/shared (as tests/support's shared_dir).
shared=${CAPSTAN_SHARED:-}
if [ -z "$shared" ]; then if [ -d "$root/../shared" ]; then shared=$root/../shared; else shared=/work/shared; fi; fi
corpus="$shared/corpus/community-operators-prod/catalogs/v4.20"
dump=${DUMP:-$(mktemp -d)}
mkdir -p "$dump"
: > "$dump/catalogs.tsv"
opm=$(bash "$root/tests/peers/build.sh")
specs=()
for d in "$corpus"/*/ "$root/catalog/"; do
  d=${d%/}
  name=$(basename "$d")
  [ "$name" = catalog ] && name=capstan-examples
  # olm.sh reads YAML with PyYAML, which turns unquoted dates into values it cannot write back:
  # hand it opm's JSON rendering of the same catalog.
  mkdir -p "$dump/fbc/$name"
  "$opm" render "$d" -o json > "$dump/fbc/$name/catalog.json"
  specs+=("$name=$dump/fbc/$name")
  printf '%s\t%s\n' "$name" "$d" >> "$dump/catalogs.tsv"
done
trap 'bash "$olm_sh" stop || true' EXIT
bash "$olm_sh" start "${specs[@]}" 2> "$dump/olm-start.log" || { cat "$dump/olm-start.log" >&2; exit 1; }
# package-server outside a Pod needs the delegated authentication/authorization kubeconfigs too
# (olm.sh's OLM_PACKAGESERVER=1 passes --kubeconfig only, and package-server then looks for an
# in-cluster configuration). Started here, stopped by PID on exit.
pkgserver=$(bash "$(dirname "$olm_sh")/build-olm.sh" | sed -n 3p)
kubeconfig="$cdir/kubeconfig"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$pkgserver" --kubeconfig "$kubeconfig" --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
  --global-namespace olm --secure-port "$port" --bind-address 127.0.0.1 --cert-dir "$dump/packageserver-certs" \
  > "$dump/package-server.log" 2>&1 &
ps_pid=$!
trap 'kill "$ps_pid" 2>/dev/null || true; bash "$olm_sh" stop || true' EXIT
pki="$cdir/pki"
get() {
  curl -sS --max-time 60 --cacert /dev/null -k --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://127.0.0.1:$port/apis/packages.operators.coreos.com/v1/namespaces/olm/packagemanifests?labelSelector=catalog%3D$1"
}
for spec in "${specs[@]}"; do
  name=${spec%%=*}
  # Ready when package-server lists packages of that catalog (it connects to each opm serve in turn).
  for _ in $(seq 1 300); do
    if get "$name" > "$dump/$name.json.tmp" 2>/dev/null && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d.get("items") else 1)' "$dump/$name.json.tmp"; then
      break
    fi
    sleep 1
  done
  # One more read a moment later, so that a refresh in progress has finished.
  sleep 1
  get "$name" > "$dump/$name.json"
  rm -f "$dump/$name.json.tmp"
  echo "packageserver: $name $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1])).get("items") or []))' "$dump/$name.json") packages" >&2
done
cd "$root"
CAPSTAN_PACKAGESERVER_DUMP=$dump cargo test --test discovery_packageserver -- --nocapture
