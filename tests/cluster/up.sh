#!/usr/bin/env bash
# Starts capstan's local test environment on this machine (loopback, and the real node's own bridge
# addresses) and waits until it is ready:
#   all (default)  etcd, kube-apiserver (RBAC, client-cert admin, service-account signing keys),
#                  kube-controller-manager, kube-scheduler, kwok with one fake Node, the OCI registry,
#                  and one real node: containerd + runc (Debian), kubelet and kube-proxy (pinned, built
#                  by build.sh), CNI bridge networking (tests/cluster/node-net.sh). CAPSTAN_REAL_NODE=0
#                  leaves the real node out.
#   registry       only the OCI registry (Debian's docker-registry, the CNCF distribution registry)
#
# State lives in $CAPSTAN_CLUSTER_DIR (default <repo>/.cluster, git-ignored):
#   kubeconfig       admin kubeconfig (system:masters client certificate)
#   bin/             link to the pinned binaries tests/cluster/build.sh built, kubectl included
#   registry         the registry's address, host:port
#   registry-node    with the real node: the same registry at the node's address, for pods
#   ports.env        the ports chosen for this copy (free ports picked at start, so copies never collide)
#   pids/NAME.pid    one PID file per started process; tests/cluster/down.sh stops exactly those
#   logs/NAME.log    each component's log; printed when a start fails
#   pki/, etcd/, registry-data/
#   node/            the real node: containerd/ (config, root, state, socket), kubelet/ (root dir,
#                    config), kube-proxy.yaml, cni/ (bridge config, IPAM state)
#   images/NAME      references (with digest) of the images images/build.sh pushed (pause, httpd)
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

# write FILE: writes stdin to FILE only when the content differs (a running kube-proxy exits when
# its configuration file is written, and a restart must not disturb what runs).
write() {
  local tmp="$1.tmp.$$"
  cat > "$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

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

# Ports: chosen once per state directory, reused on restart (a port added later is appended).
# Each is free on every address (the API server may listen on the node's bridge address, not only
# on loopback; a port free on 127.0.0.1 alone could collide with another environment's).
# The missing ones are picked together, every socket held until all are chosen: picked one at a
# time, a port closed after it was chosen could be handed out again for the next name (ETCD_PORT and
# API_PORT once got the same port, and the API server could not listen).
touch "$dir/ports.env"
missing=()
for p in ETCD_PORT ETCD_PEER_PORT API_PORT KCM_PORT SCHED_PORT KWOK_PORT REGISTRY_PORT \
         KUBELET_PORT KUBELET_HEALTHZ_PORT PROXY_HEALTHZ_PORT PROXY_METRICS_PORT; do
  grep -q "^$p=" "$dir/ports.env" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  python3 - "$dir/ports.env" "${missing[@]}" >> "$dir/ports.env" <<'PY'
import re, socket, sys
taken = {int(v) for v in re.findall(r"=(\d+)$", open(sys.argv[1]).read(), re.M)}
held = []
for name in sys.argv[2:]:
    while True:
        s = socket.socket()
        s.bind(("0.0.0.0", 0))
        port = s.getsockname()[1]
        held.append(s)  # kept open until every name has its port, so none is handed out twice
        if port not in taken:
            taken.add(port)
            print(f"{name}={port}")
            break
PY
fi
# shellcheck disable=SC1091
. "$dir/ports.env"

# ---------------------------------------------------------------- the real node: is it ours to run?
# One real node per machine (its bridge, pod range and kube-proxy's iptables chains are machine-wide):
# a second environment on the same machine runs without one, and says so.
real_node=${CAPSTAN_REAL_NODE:-1}
node_name=capstan-node
if [ "$what" = all ] && [ "$real_node" = 1 ]; then
  owner=$("$here/node-net.sh" owner)
  if [ -n "$owner" ] && [ "$owner" != "$dir" ] && [ -f "$owner/pids/kubelet.pid" ] \
     && grep -qa -- "$owner" "/proc/$(cat "$owner/pids/kubelet.pid")/cmdline" 2>/dev/null; then
    log "WARNING: the real node of $owner is running on this machine; starting without a real node"
    real_node=0
  fi
fi
if [ "$what" = all ] && [ "$real_node" = 1 ]; then
  # shellcheck disable=SC1090
  eval "$(grep -E '^(BRIDGE|NODE_IP|POD_CIDR|SERVICE_CIDR)=' "$here/node-net.sh")"
  api_host=$NODE_IP
else
  # (`up.sh registry` leaves a running environment's node alone)
  [ "$what" = registry ] || rm -f "$dir/node-name" "$dir/registry-node"
  api_host=127.0.0.1
fi

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

# ---------------------------------------------------------------- node network (before the API server binds to it)
if [ "$real_node" = 1 ]; then
  # The real node's Debian packages, installed when missing, before node-net.sh needs ip and
  # iptables (a fresh machine has neither iptables nor, at times, iproute2).
  need=()
  command -v containerd >/dev/null 2>&1 || need+=(containerd)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing Debian's ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q "${need[@]}" >>"$dir/logs/apt.log" 2>&1 || {
      apt-get update -q >>"$dir/logs/apt.log" 2>&1 && apt-get install -y -q "${need[@]}" >>"$dir/logs/apt.log" 2>&1
    } || fail apt "could not install ${need[*]} (see $dir/logs/apt.log)"
  fi
  "$here/node-net.sh" up "$dir" || fail all "could not set up the node network (bridge $BRIDGE)"
fi
# The address the API server listens on: the one it was started with while it runs.
if alive kube-apiserver && [ -f "$dir/api-host" ]; then api_host=$(cat "$dir/api-host"); fi

# ---------------------------------------------------------------- PKI (throw-away, per state dir)
pki="$dir/pki"
# cert NAME SUBJECT EXT: a key and a certificate signed by the throw-away CA.
cert() {
  (cd "$pki" && printf '%b' "$3" > "$1.ext" \
    && openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null \
    && openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 365 -extfile "$1.ext" 2>/dev/null)
}
if [ ! -f "$pki/admin.crt" ]; then
  log "creating a throw-away CA, serving and admin certificates, and service-account keys"
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 365 -subj "/CN=capstan-test-ca" 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
  cert admin "/O=system:masters/CN=capstan-admin" 'extendedKeyUsage=clientAuth\n'
fi
# The serving certificate names the node address too (pods reach the API server there); made again
# for a state directory from before the real node.
if ! grep -q "IP:10.0.2.1" "$pki/apiserver.ext" 2>/dev/null; then
  cert apiserver "/CN=kube-apiserver" 'subjectAltName=IP:127.0.0.1,IP:10.0.2.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n'
fi
if [ ! -f "$pki/kubelet.crt" ]; then
  # The kubelet's client identity (system:node:NAME, for the Node authorizer) and serving certificate;
  # kube-proxy's (the user the default system:node-proxier binding names); the API server's client
  # certificate for kubelets (logs, exec).
  cert kubelet "/O=system:nodes/CN=system:node:$node_name" "subjectAltName=IP:10.0.2.1,DNS:$node_name\nextendedKeyUsage=serverAuth,clientAuth\n"
  cert kube-proxy "/CN=system:kube-proxy" 'extendedKeyUsage=clientAuth\n'
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" 'extendedKeyUsage=clientAuth\n'
fi
if [ ! -f "$pki/front-proxy-client.crt" ]; then
  # The aggregation layer (aggregated APIs such as packages.operators.coreos.com): its own CA, apart
  # from the client CA, so that no ordinary client certificate can pass for the front proxy; the
  # API server proxies to an APIService with front-proxy-client and X-Remote-User/-Group headers.
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout front-proxy-ca.key -out front-proxy-ca.crt -days 365 -subj "/CN=capstan-test-front-proxy-ca" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' > front-proxy-client.ext
    openssl req -newkey rsa:2048 -nodes -keyout front-proxy-client.key -out front-proxy-client.csr -subj "/CN=front-proxy-client" 2>/dev/null
    openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key -CAcreateserial -out front-proxy-client.crt -days 365 -extfile front-proxy-client.ext 2>/dev/null
  )
fi
# kubeconfig_for FILE CERT USER: a kubeconfig for the client certificate pki/CERT.{crt,key}.
kubeconfig_for() {
  write "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: capstan-test
  cluster:
    server: https://$api_host:$API_PORT
    certificate-authority: $pki/ca.crt
users:
- name: $3
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: capstan-test
  context: {cluster: capstan-test, user: $3}
current-context: capstan-test
EOF
}
kubeconfig="$dir/kubeconfig"
kubeconfig_for "$kubeconfig" admin capstan-admin
apiurl="https://$api_host:$API_PORT"
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
  --bind-address="$api_host" --advertise-address="$api_host" --secure-port="$API_PORT" \
  --cert-dir="$dir/apiserver-certs" \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" \
  --requestheader-client-ca-file="$pki/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$pki/front-proxy-client.crt" --proxy-client-key-file="$pki/front-proxy-client.key" \
  --enable-aggregator-routing=true \
  --authorization-mode=Node,RBAC \
  --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$pki/ca.crt" --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --allow-privileged=true \
  --enable-priority-and-fairness=false \
  --profiling=false \
  --v=1
echo "$api_host" > "$dir/api-host"
wait_for kube-apiserver 120 "${api[@]}" "$apiurl/readyz"

# ---------------------------------------------------------------- controller manager, scheduler, kwok
# --node-monitor-grace-period: the node-lifecycle controller times node heartbeats by when it saw
# them. After an API server outage longer than the grace period (controller_outage_e2e stops it
# for 90 s) it saw none, marks every node Unknown and every pod on them NotReady ("all Nodes are
# not-Ready. Entering master disruption mode") before kwok and the kubelet have renewed their
# leases; kwok never makes a Running pod Ready again, so the Deployments on the fake node stayed
# unavailable. 5 minutes outlasts the outages the tests make.
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
  --controllers=garbage-collector-controller,deployment-controller,replicaset-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,statefulset-controller,job-controller,endpointslice-controller,clusterrole-aggregation-controller,root-ca-certificate-publisher-controller,pod-garbage-collector-controller,ttl-after-finished-controller,node-lifecycle-controller \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --use-service-account-credentials=false \
  --node-monitor-grace-period=5m \
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
if ! "${api[@]}" "$apiurl/api/v1/nodes/kwok-node-0" >/dev/null 2>&1; then
  "${api[@]}" -X POST -H 'Content-Type: application/json' --data "$node_json" \
    "$apiurl/api/v1/nodes" >/dev/null || fail all "could not create the fake Node"
fi
node_ready() {
  "${api[@]}" "$apiurl/api/v1/nodes/$1" \
    | python3 -c 'import json,sys; n=json.load(sys.stdin); ready=any(c["type"]=="Ready" and c["status"]=="True" for c in n.get("status",{}).get("conditions",[])); tainted=any(t["key"].startswith("node.kubernetes.io/") for t in n.get("spec",{}).get("taints",[]) or []); sys.exit(0 if ready and not tainted else 1)'
}
# Ready, and the node-lifecycle controller has lifted the not-ready taint the API server puts on new nodes.
wait_for kwok 60 node_ready kwok-node-0
# The default ServiceAccount must exist before Pods can be created in a namespace.
sa_ready() { "${api[@]}" "$apiurl/api/v1/namespaces/default/serviceaccounts/default"; }
wait_for kube-controller-manager 60 sa_ready

# ---------------------------------------------------------------- the real node
# containerd + runc from Debian (installed when missing), CNI bridge networking, kubelet and
# kube-proxy (pinned, from build.sh). The node is labelled type=real and tainted
# capstan.dev/node=real:NoSchedule: only pods that tolerate that taint run here (tests that want a
# real pod select it; everything else keeps landing on kwok's fake node).
if [ "$real_node" = 1 ]; then
  nd="$dir/node"
  # The pause image (the pod sandbox) and the test image, built here and pushed to the registry.
  bash "$root/images/build.sh" --push "127.0.0.1:$REGISTRY_PORT" pause httpd >"$dir/logs/images.log" 2>&1 \
    || fail images "images/build.sh failed"
  pause_image=$(cut -d@ -f1 "$dir/images/pause")
  mkdir -p "$nd/containerd/certs.d/127.0.0.1:$REGISTRY_PORT" "$nd/cni/net.d" "$nd/kubelet" "$dir/pod-logs"
  # containerd pulls from the local registry over plain HTTP.
  write "$nd/containerd/certs.d/127.0.0.1:$REGISTRY_PORT/hosts.toml" <<EOF
server = "http://127.0.0.1:$REGISTRY_PORT"
[host."http://127.0.0.1:$REGISTRY_PORT"]
  capabilities = ["pull", "resolve"]
EOF
  write "$nd/containerd/config.toml" <<EOF
version = 2
root = "$nd/containerd/root"
state = "$nd/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$nd/containerd/containerd.sock"
[ttrpc]
  address = "$nd/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # Root here may not lower oom_score_adj (no CAP_SYS_RESOURCE): without this runc fails every
  # sandbox with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$nd/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$nd/containerd/certs.d"
EOF
  write "$nd/cni/net.d/10-capstan.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "capstan",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$nd/cni/ipam"}},
    {"type": "loopback"}
  ]
}
EOF
  start containerd "$(command -v containerd)" --config "$nd/containerd/config.toml"
  wait_for containerd 60 ctr --address "$nd/containerd/containerd.sock" version

  kubeconfig_for "$nd/kubelet.kubeconfig" kubelet "system:node:$node_name"
  kubeconfig_for "$nd/kube-proxy.kubeconfig" kube-proxy system:kube-proxy
  write "$nd/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# What this machine needs (cgroup v1 hybrid, a VM without systemd, root without CAP_SYS_RESOURCE):
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://$nd/containerd/containerd.sock
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
# No cluster DNS: pods reach the API server by KUBERNETES_SERVICE_HOST and Services by ClusterIP.
# An empty resolvConf gives pods no resolver at all (nothing to send DNS queries outside to).
resolvConf: ""
podLogsDir: $dir/pod-logs
registerWithTaints:
- {key: capstan.dev/node, value: real, effect: NoSchedule}
# A shared build machine: never evict or garbage-collect images because the disk is busy.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 50
nodeStatusReportFrequency: 10s
EOF
  start kubelet "$bin/kubelet" --config="$nd/kubelet.yaml" --kubeconfig="$nd/kubelet.kubeconfig" \
    --root-dir="$nd/kubelet" --cert-dir="$nd/kubelet/pki" --hostname-override="$node_name" \
    --node-ip="$NODE_IP" --node-labels=type=real --v=1
  # Ready, and the node-lifecycle controller has lifted the not-ready taint; schedulable again
  # after down.sh cordoned it (the Node object outlives a restart).
  real_node_ready() {
    "${api[@]}" -X PATCH -H 'Content-Type: application/merge-patch+json' --data '{"spec":{"unschedulable":null}}' \
      "$apiurl/api/v1/nodes/$node_name" >/dev/null 2>&1 || return 1
    node_ready "$node_name"
  }
  wait_for kubelet 120 real_node_ready

  write "$nd/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $nd/kube-proxy.kubeconfig}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
nodePortAddresses: ["$NODE_IP/32"]
# Service traffic is masqueraded to the bridge address, so a pod reaching a pod on the same bridge
# through a Service gets its answers back through the host (de-NAT) instead of straight over the bridge.
iptables: {masqueradeAll: true, localhostNodePorts: false}
# Leave the machine's conntrack sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  start kube-proxy "$bin/kube-proxy" --config="$nd/kube-proxy.yaml" --v=1
  wait_for kube-proxy 60 curl -fsS "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz"
  # kube-proxy inserted its FORWARD rules at the top: put the node's own filter chain back first.
  "$here/node-net.sh" up "$dir" || fail all "could not set up the node network (bridge $BRIDGE)"
  # The registry on the node's address too, for what runs in a pod and pulls images itself (capstan
  # from its image pulls catalogs and bundles; 127.0.0.1 in a pod is the pod's own loopback): a
  # second docker-registry serving the same storage at $NODE_IP:$REGISTRY_PORT, plain HTTP (so
  # `capstan controller --insecure-registry $NODE_IP:$REGISTRY_PORT`). Pushes go to 127.0.0.1.
  sed "s#addr: 127.0.0.1:#addr: $NODE_IP:#" "$dir/registry.yml" | write "$dir/registry-node.yml"
  start registry-node "$(command -v docker-registry)" serve "$dir/registry-node.yml"
  wait_for registry-node 30 curl -fsS "http://$NODE_IP:$REGISTRY_PORT/v2/"
  echo "$NODE_IP:$REGISTRY_PORT" > "$dir/registry-node"
  echo "$node_name" > "$dir/node-name"
  node_msg=", real node $node_name ($NODE_IP, pods $POD_CIDR; registry for pods $NODE_IP:$REGISTRY_PORT)"
fi

log "ready: kubeconfig $kubeconfig, API $apiurl, registry 127.0.0.1:$REGISTRY_PORT${node_msg:-}"
