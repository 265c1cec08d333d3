#!/usr/bin/env bash
# Starts capstan's local test environment on 127.0.0.1 and waits until it is ready:
#   all (default)  etcd, kube-apiserver (RBAC, client-cert admin, service-account signing keys),
#                  kube-controller-manager, kube-scheduler, kwok with one fake Node, and the OCI registry
#   registry       only the OCI registry (Debian's docker-registry, the CNCF distribution registry)
#
# State lives in $CAPSTAN_CLUSTER_DIR (default <repo>/.cluster, git-ignored):
#   kubeconfig       admin kubeconfig (system:masters client certificate)
#   bin/             link to the pinned binaries tests/cluster/build.sh built, kubectl included
#   registry         the registry's address, host:port
#   ports.env        the ports chosen for this copy (free ports picked at start, so copies never collide)
#   pids/NAME.pid    one PID file per started process; tests/cluster/down.sh stops exactly those
#   logs/NAME.log    each component's log; printed when a start fails
#   pki/, etcd/, registry-data/
# Running it again while the environment is up does nothing and exits 0.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
what=${1:-all}
case "$what" in all|registry) ;; *) echo "usage: $0 [all|registry]" >&2; exit 2 ;; esac
mkdir -p "$dir/pids" "$dir/logs"
dir=$(cd "$dir" && pwd)

log() { printf '[cluster] %s\n' "$*" >&2; }

# alive NAME: the process recorded in pids/NAME.pid is running and is the one we started.
alive() {
  local f="$dir/pids/$1.pid" pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -d "/proc/$pid" ] || return 1
  grep -qa -- "$dir" "/proc/$pid/cmdline" 2>/dev/null
}

fail() {
  local name=$1; shift
  log "FAILED: $*"
  for f in "$dir"/logs/*.log; do
    [ -f "$f" ] || continue
    if [ "$(basename "$f" .log)" = "$name" ] || [ "$name" = all ]; then
      echo "----- last lines of $f -----" >&2
      tail -n 40 "$f" >&2
    fi
  done
  exit 1
}

# start NAME CMD...: starts CMD in the background with its log and PID file.
start() {
  local name=$1; shift
  if alive "$name"; then return 0; fi
  log "starting $name"
  setsid "$@" >>"$dir/logs/$name.log" 2>&1 < /dev/null &
  local pid=$!
  echo "$pid" > "$dir/pids/$name.pid"
  # Until the background child has exec'd, /proc/PID/cmdline is this script's: wait for the
  # exec so that `alive` (which checks the command line) does not mistake a slow start for an exit.
  for _ in $(seq 1 100); do
    grep -qa -- "$dir" "/proc/$pid/cmdline" 2>/dev/null && return 0
    [ -d "/proc/$pid" ] || return 0
    sleep 0.05
  done
}

# wait_for NAME SECONDS CMD...: retries CMD until it succeeds, or fails with NAME's log.
wait_for() {
  local name=$1 secs=$2; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    alive "$name" || fail "$name" "$name exited during start"
    [ "$(date +%s)" -lt "$deadline" ] || fail "$name" "$name not ready after ${secs}s"
    sleep 0.3
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Ports: chosen once per state directory, reused on restart.
if [ ! -f "$dir/ports.env" ]; then
  {
    echo "ETCD_PORT=$(free_port)"; echo "ETCD_PEER_PORT=$(free_port)"; echo "API_PORT=$(free_port)"
    echo "KCM_PORT=$(free_port)"; echo "SCHED_PORT=$(free_port)"; echo "KWOK_PORT=$(free_port)"
    echo "REGISTRY_PORT=$(free_port)"
  } > "$dir/ports.env"
fi
# shellcheck disable=SC1091
. "$dir/ports.env"

# ---------------------------------------------------------------- OCI registry
if ! command -v docker-registry >/dev/null 2>&1; then
  log "installing Debian's docker-registry package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q docker-registry >"$dir/logs/apt.log" 2>&1 || {
    apt-get update -q >>"$dir/logs/apt.log" 2>&1 && apt-get install -y -q docker-registry >>"$dir/logs/apt.log" 2>&1
  } || fail apt "could not install docker-registry (see $dir/logs/apt.log)"
fi
mkdir -p "$dir/registry-data"
cat > "$dir/registry.yml" <<EOF
version: 0.1
log: {level: info, fields: {service: registry}}
storage:
  filesystem: {rootdirectory: $dir/registry-data}
  delete: {enabled: true}
http:
  addr: 127.0.0.1:$REGISTRY_PORT
  headers: {X-Content-Type-Options: [nosniff]}
EOF
start registry "$(command -v docker-registry)" serve "$dir/registry.yml"
wait_for registry 30 curl -fsS "http://127.0.0.1:$REGISTRY_PORT/v2/"
echo "127.0.0.1:$REGISTRY_PORT" > "$dir/registry"
[ "$what" = registry ] && { log "registry ready at 127.0.0.1:$REGISTRY_PORT"; exit 0; }

# ---------------------------------------------------------------- binaries
bin=$("$here/build.sh")
# $dir/bin: the pinned binaries, kubectl among them, for the demo and tests (never the machine's kubectl).
ln -sfn "$bin" "$dir/bin"

# ---------------------------------------------------------------- PKI (throw-away, per state dir)
pki="$dir/pki"
if [ ! -f "$pki/admin.crt" ]; then
  log "creating a throw-away CA, serving and admin certificates, and service-account keys"
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 365 -subj "/CN=capstan-test-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1\nextendedKeyUsage=serverAuth\n' > apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 365 -extfile apiserver.ext 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=capstan-admin" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' > admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 365 -extfile admin.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
fi
kubeconfig="$dir/kubeconfig"
cat > "$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: capstan-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $pki/ca.crt
users:
- name: capstan-admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: capstan-test
  context: {cluster: capstan-test, user: capstan-admin}
current-context: capstan-test
EOF
api=(curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key")

# ---------------------------------------------------------------- etcd
start etcd "$bin/etcd" --name capstan --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "capstan=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync --quota-backend-bytes=4294967296 --log-level=warn
wait_for etcd 60 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

# ---------------------------------------------------------------- kube-apiserver
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
  --cert-dir="$dir/apiserver-certs" \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" \
  --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --allow-privileged=true \
  --enable-priority-and-fairness=false \
  --profiling=false \
  --v=1
wait_for kube-apiserver 120 "${api[@]}" "https://127.0.0.1:$API_PORT/readyz"

# ---------------------------------------------------------------- controller manager, scheduler, kwok
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
  --controllers=garbage-collector-controller,deployment-controller,replicaset-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,statefulset-controller,job-controller,endpointslice-controller,clusterrole-aggregation-controller,root-ca-certificate-publisher-controller,pod-garbage-collector-controller,ttl-after-finished-controller,node-lifecycle-controller \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --use-service-account-credentials=false \
  --concurrent-gc-syncs=5 --v=1
start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --leader-elect=false --v=1
# kwok's own stage definitions from the pinned release (node initialize + lease heartbeat, pod
# lifecycle). Pods use the "fast" stages: Ready at once. The "general" ones add a random 1–6 s
# simulated start-up to every pod, which only adds noise to tests and to the install benchmark.
kwok_dir=$(cd "$here" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
: > "$dir/kwok-stages.yaml"
for f in "$kwok_dir"/kustomize/stage/node/fast/node-initialize.yaml \
         "$kwok_dir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
         "$kwok_dir"/kustomize/stage/pod/fast/pod-*.yaml; do
  { echo "---"; cat "$f"; } >> "$dir/kwok-stages.yaml"
done
start kwok "$bin/kwok" \
  --kubeconfig="$kubeconfig" --config="$dir/kwok-stages.yaml" \
  --node-lease-duration-seconds=40 \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --cidr=10.0.1.0/24 --node-ip=10.0.1.1 \
  --server-address="127.0.0.1:$KWOK_PORT"
wait_for kube-controller-manager 60 curl -fsSk "https://127.0.0.1:$KCM_PORT/healthz"
wait_for kube-scheduler 60 curl -fsSk "https://127.0.0.1:$SCHED_PORT/healthz"

# ---------------------------------------------------------------- one fake Node, Ready
node_json='{"apiVersion":"v1","kind":"Node","metadata":{"name":"kwok-node-0",
 "annotations":{"node.alpha.kubernetes.io/ttl":"0","kwok.x-k8s.io/node":"fake"},
 "labels":{"kubernetes.io/hostname":"kwok-node-0","kubernetes.io/os":"linux","kubernetes.io/arch":"amd64","type":"kwok"}},
 "spec":{},
 "status":{"allocatable":{"cpu":"32","memory":"256Gi","pods":"250"},"capacity":{"cpu":"32","memory":"256Gi","pods":"250"}}}'
if ! "${api[@]}" "https://127.0.0.1:$API_PORT/api/v1/nodes/kwok-node-0" >/dev/null 2>&1; then
  "${api[@]}" -X POST -H 'Content-Type: application/json' --data "$node_json" \
    "https://127.0.0.1:$API_PORT/api/v1/nodes" >/dev/null || fail all "could not create the fake Node"
fi
node_ready() {
  "${api[@]}" "https://127.0.0.1:$API_PORT/api/v1/nodes/kwok-node-0" \
    | python3 -c 'import json,sys; n=json.load(sys.stdin); ready=any(c["type"]=="Ready" and c["status"]=="True" for c in n.get("status",{}).get("conditions",[])); tainted=any(t["key"].startswith("node.kubernetes.io/") for t in n.get("spec",{}).get("taints",[]) or []); sys.exit(0 if ready and not tainted else 1)'
}
# Ready, and the node-lifecycle controller has lifted the not-ready taint the API server puts on new nodes.
wait_for kwok 60 node_ready
# The default ServiceAccount must exist before Pods can be created in a namespace.
sa_ready() { "${api[@]}" "https://127.0.0.1:$API_PORT/api/v1/namespaces/default/serviceaccounts/default"; }
wait_for kube-controller-manager 60 sa_ready

log "ready: kubeconfig $kubeconfig, API https://127.0.0.1:$API_PORT, registry 127.0.0.1:$REGISTRY_PORT"
