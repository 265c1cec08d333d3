#!/usr/bin/env bash
# Builds the local control plane's binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok), the real node's kubelet and kube-proxy, and kubectl (with its built-in kustomize, for `kubectl apply -k`) from
# the pins in go.mod / go.sum into a cache directory outside the repository, keyed by a hash of
# those pins, and prints that directory. A second run with the same pins builds nothing. Scripts
# and tests use this kubectl, never one the machine may or may not have: tests/cluster/up.sh
# links the directory as $CAPSTAN_CLUSTER_DIR/bin, examples/demo.sh puts that first on PATH,
# and tests call support::kubectl().
#
# Environment: CAPSTAN_CACHE (default ~/.cache/capstan). Go's own module and build caches
# (GOMODCACHE, GOCACHE) live outside the repository too, so a rebuild after a pin change is
# incremental.
#
# The Kubernetes binaries report the pinned release as their version (`kubectl version` shows the
# server as v1.36.3, so minKubeVersion checks work): the -X flags hack/lib/version.sh sets, with the
# version and date of the pinned k8s.io/kubernetes module. The module has no git commit: gitCommit
# says where the source came from instead.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
key=$(cat "$here/go.mod" "$here/go.sum" "$here/etcd/main.go" "$here/build.sh" | sha256sum | cut -c1-16)
bin="$cache/cluster/$key/bin"
tools=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kwok kubectl)
missing=0
for t in "${tools[@]}"; do [ -x "$bin/$t" ] || missing=1; done
if [ "$missing" = 1 ]; then
  command -v go >/dev/null || { echo "build.sh: Go is required to build the test control plane (go 1.26 or newer)" >&2; exit 1; }
  echo "building the control plane into $bin (cold: about 20 minutes on 2 cores; only once per pin)" >&2
  tmp="$cache/cluster/$key/tmp.$$"
  mkdir -p "$tmp"
  start=$(date +%s)
  read -r version date < <(cd "$here" && go list -m -f '{{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
  major=${version#v}; major=${major%%.*}
  minor=${version#v*.}; minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitCommit=module-k8s.io/kubernetes@$version -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$tmp/" \
      ./etcd \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kubelet \
      k8s.io/kubernetes/cmd/kube-proxy \
      k8s.io/kubernetes/cmd/kubectl \
      sigs.k8s.io/kwok/cmd/kwok) >&2
  rm -rf "$bin"; mv "$tmp" "$bin"
  echo "built in $(( $(date +%s) - start ))s" >&2
fi
echo "$bin"
