#!/usr/bin/env bash
# Builds capstan's test images without a container daemon and pushes them to the local registry.
#
#   images/build.sh [--push HOST:PORT] [NAME...]      (`make image` builds and pushes all of them)
#
# NAME is one of:
#   pause   the pod sandbox image the real node's containerd uses (images/pause/pause.c, gcc -static)
#   httpd   a tiny HTTP server and client for tests (images/httpd, Go, CGO_ENABLED=0: static)
#   webhook-operator  the test operator of the webhook tests: /validate and /convert over TLS with the
#           certificate mounted by capstan (images/webhook-operator, Go, static; not built by default)
#   capstan capstan itself: target/release/capstan, debug sections stripped (`cargo build --release --locked`, built when
#           missing or older than src/; CAPSTAN_BIN=PATH takes that binary instead, as the tests do
#           with the binary cargo built for them) with the shared libraries `ldd` names, /etc/passwd and /etc/group with the
#           nonroot user 65532, the machine's CA bundle; no shell; runs as 65532 (not built by default:
#           name it, or `make image`, which builds all three). Pushing it also writes the kustomization
#           $CAPSTAN_CLUSTER_DIR/capstan-on-real-node/ (git-ignored): manifests/ with that image, on the
#           real node: `kubectl apply -k .cluster/capstan-on-real-node`
#   nginx-operator
#           the example Helm-based operator as operator-sdk lays it out: the helm-operator binary
#           (images/helm-operator.sh: helm-operator-plugins from the Go module proxy, pinned in
#           images/pins.sh, static, cached) at /usr/local/bin/helm-operator, and
#           examples/nginx-operator/ (watches.yaml, helm-charts/nginx) under /opt/helm, its working
#           directory; entrypoint `helm-operator run --watches-file=./watches.yaml`; runs as 65532.
#           Reproducible: bundles/nginx-operator/*/ name it (and httpd, its operand) by digest, as
#           quay.io/example/NAME@sha256:...; examples/publish.sh relocates them to the registry it
#           publishes to and fails when a digest is not the one built here.
#           `images/build.sh --pin-bundles` (after changing the chart or a pin) builds both and writes
#           their digests into those CSVs; then rebuild catalog/ (bundles/README.md).
#   opm     operator-registry's `opm` (pin of tests/peers/build.sh) and `grpc_health_probe`
#           (images/pins.sh), static (images/opm.sh, cached), in /bin, as quay.io/operator-framework/opm
#           lays them out: what OLM's registry pods and its e2e suite's magic catalog run
#           (`opm serve DIR`, probe `grpc_health_probe -addr=:50051`); /tmp for opm's cache; the
#           user is the pod's (the suite sets runAsUser 1001). Not built by default:
#           tests/conformance/images.sh pushes it under its original name.
# Each image is one layer of static binaries, no base image (none can be pulled here), written as
# an OCI image layout by images/oci.py into $CAPSTAN_CACHE/images/<name>/<hash of its inputs>
# (built again only when an input changes), then pushed as HOST:PORT/capstan/<name>:v1. Without
# --push the registry is the local environment's ($CAPSTAN_CLUSTER_DIR/registry; started with
# `tests/cluster/up.sh registry` when it is not running). For each image one line is printed:
#   NAME HOST:PORT/capstan/NAME:v1@sha256:...
# and the same reference is written to $CAPSTAN_CLUSTER_DIR/images/NAME for tests and scripts.
# IMAGE_REPOSITORY and IMAGE_TAG replace `capstan` and `v1` in that reference (images.sh of the
# conformance suite pushes opm as quay.io/operator-framework/opm:latest).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/pins.sh"
dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}/images
registry=
pin_bundles=
if [ "${1:-}" = --pin-bundles ]; then pin_bundles=1; shift; set -- httpd nginx-operator; fi
if [ "${1:-}" = --push ]; then registry=$2; shift 2; fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(pause httpd capstan nginx-operator)
if [ -z "$registry" ]; then
  bash "$root/tests/cluster/up.sh" registry
  registry=$(cat "$dir/registry")
fi
mkdir -p "$dir/images"

# build NAME INPUT... -- OCI.PY-BUILD-ARGS...: OCI layout for NAME in the cache, keyed by its inputs.
layout() {
  local name=$1; shift
  local inputs=()
  while [ "$1" != -- ]; do inputs+=("$1"); shift; done; shift
  local key
  key=$(cat "${inputs[@]}" "$here/oci.py" "$here/build.sh" | sha256sum | cut -c1-16)
  out="$cache/$name/$key"
  if [ ! -f "$out/index.json" ]; then
    rm -rf "$out.tmp"; mkdir -p "$out.tmp/rootfs"
    "$@" "$out.tmp"
    rm -rf "$out"; mv "$out.tmp" "$out"
  fi
}

build_pause() {
  local tmp=$1
  gcc -static -O2 -o "$tmp/rootfs/pause" "$here/pause/pause.c"
  python3 "$here/oci.py" build "$tmp" --file "$tmp/rootfs/pause:/pause:0755" \
    --entrypoint '["/pause"]' --user 65535:65535 >/dev/null
}
# nonroot_etc TMP: /etc/passwd and /etc/group with the nonroot user 65532, /etc/nsswitch.conf; adds
# their --file arguments to the caller's `args`.
nonroot_etc() {
  local tmp=$1
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$tmp/rootfs/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$tmp/rootfs/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$tmp/rootfs/nsswitch.conf"
  args+=(--file "$tmp/rootfs/passwd:/etc/passwd:0644" --file "$tmp/rootfs/group:/etc/group:0644"
         --file "$tmp/rootfs/nsswitch.conf:/etc/nsswitch.conf:0644")
}
build_capstan() {
  local tmp=$1 args=() lib
  # Without its debug sections (the release profile keeps them: a quarter of a gigabyte).
  cp "$capstan_bin" "$tmp/rootfs/capstan"
  if command -v objcopy >/dev/null; then objcopy --strip-debug "$tmp/rootfs/capstan"; fi
  args+=(--file "$tmp/rootfs/capstan:/usr/local/bin/capstan:0755")
  # The dynamic loader and every library the binary needs, at the paths ldd names (real files).
  for lib in $(ldd "$capstan_bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u); do
    args+=(--file "$(readlink -f "$lib"):$lib:0755")
  done
  nonroot_etc "$tmp"
  [ -f /etc/ssl/certs/ca-certificates.crt ] && args+=(--file "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:0644")
  python3 "$here/oci.py" build "$tmp" "${args[@]}" --dir /tmp:1777 --dir /home/nonroot:0755 \
    --entrypoint '["/usr/local/bin/capstan"]' --cmd '["controller", "--leader-elect"]' --user 65532:65532 \
    --label org.opencontainers.image.source=images/build.sh >/dev/null
}
build_httpd() {
  local tmp=$1
  (cd "$here/httpd" && GOTOOLCHAIN=$IMAGES_GO CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/rootfs/httpd" .)
  python3 "$here/oci.py" build "$tmp" --file "$tmp/rootfs/httpd:/httpd:0755" \
    --entrypoint '["/httpd"]' --user 65532:65532 >/dev/null
}
build_nginx_operator() {
  local tmp=$1 args=() f
  args+=(--file "$helm_operator_bin:/usr/local/bin/helm-operator:0755")
  for f in "${operator_files[@]}"; do
    args+=(--file "$f:/opt/helm/${f#"$root/examples/nginx-operator/"}:0644")
  done
  nonroot_etc "$tmp"
  # /tmp 0755, as the image has always had it (oci.py gave every --dir 0755 until the opm image
  # needed a writable /tmp): the committed bundles name this image by digest, and the operator
  # (user 65532) writes nothing there.
  python3 "$here/oci.py" build "$tmp" "${args[@]}" --dir /tmp:0755 --dir /opt/helm:0755 \
    --env PATH=/usr/local/bin:/usr/bin:/bin --env HOME=/opt/helm --workdir /opt/helm \
    --entrypoint '["/usr/local/bin/helm-operator", "run", "--watches-file=./watches.yaml"]' --user 65532:65532 \
    --label org.opencontainers.image.source=examples/nginx-operator >/dev/null
}

build_opm() {
  local tmp=$1
  printf 'hosts: files dns\n' > "$tmp/rootfs/nsswitch.conf"
  python3 "$here/oci.py" build "$tmp" --file "$opm_dir/opm:/bin/opm:0755" \
    --file "$tmp/rootfs/nsswitch.conf:/etc/nsswitch.conf:0644" \
    --file "$opm_dir/grpc_health_probe:/bin/grpc_health_probe:0755" --dir /tmp:1777 \
    --env PATH=/bin --entrypoint '["/bin/opm"]' --cmd '["serve", "/configs"]' --user 1001:1001 \
    --label org.opencontainers.image.source=images/opm.sh >/dev/null
}

build_webhook_operator() {
  local tmp=$1
  (cd "$here/webhook-operator" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/rootfs/webhook-operator" .)
  python3 "$here/oci.py" build "$tmp" --file "$tmp/rootfs/webhook-operator:/webhook-operator:0755" \
    --entrypoint '["/webhook-operator"]' --user 65532:65532 >/dev/null
}

for name in "${names[@]}"; do
  case "$name" in
    pause)
      # gcc -static needs libc.a (libc6-dev): installed from Debian when missing, like up.sh's packages.
      if ! command -v gcc >/dev/null || [ "$(gcc -print-file-name=libc.a)" = libc.a ]; then
        echo "images/build.sh: installing Debian's gcc and libc6-dev" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q gcc libc6-dev >&2 || {
          apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q gcc libc6-dev >&2
        } || { echo "images/build.sh: gcc and libc6-dev are required" >&2; exit 1; }
      fi
           layout pause "$here/pause/pause.c" -- build_pause ;;
    httpd) command -v go >/dev/null || { echo "images/build.sh: Go is required" >&2; exit 1; }
           layout httpd "$here/httpd/main.go" "$here/httpd/go.mod" -- build_httpd ;;
    webhook-operator) command -v go >/dev/null || { echo "images/build.sh: Go is required" >&2; exit 1; }
           layout webhook-operator "$here/webhook-operator/main.go" "$here/webhook-operator/go.mod" -- build_webhook_operator ;;
    opm)   opm_dir=$(bash "$here/opm.sh")
           layout opm "$opm_dir/opm" "$opm_dir/grpc_health_probe" -- build_opm ;;
    capstan)
      capstan_bin=${CAPSTAN_BIN:-$root/target/release/capstan}
      if [ -z "${CAPSTAN_BIN:-}" ] && { [ ! -x "$capstan_bin" ] || [ -n "$(find "$root/src" "$root/Cargo.toml" "$root/Cargo.lock" -newer "$capstan_bin" -print -quit)" ]; }; then
        (cd "$root" && cargo build --release --locked --bin capstan)
      fi
      [ -x "$capstan_bin" ] || { echo "images/build.sh: $capstan_bin is missing" >&2; exit 1; }
      layout capstan "$capstan_bin" -- build_capstan ;;
    nginx-operator)
      helm_operator_bin=$(bash "$here/helm-operator.sh")
      mapfile -t operator_files < <(find "$root/examples/nginx-operator/watches.yaml" "$root/examples/nginx-operator/helm-charts" -type f | LC_ALL=C sort)
      # The files' names are inputs too (a renamed template is another image).
      names_file=$(mktemp); printf '%s\n' "${operator_files[@]#"$root/"}" > "$names_file"
      layout nginx-operator "$names_file" "$helm_operator_bin" "${operator_files[@]}" -- build_nginx_operator
      rm -f "$names_file" ;;
    *) echo "images/build.sh: unknown image $name (pause, httpd, capstan, nginx-operator, webhook-operator, opm)" >&2; exit 2 ;;
  esac
  ref="$registry/${IMAGE_REPOSITORY:-capstan}/$name:${IMAGE_TAG:-v1}"
  digest=$(python3 "$here/oci.py" push "$out" "$ref")
  echo "$ref@$digest" > "$dir/images/$name"
  echo "$name $ref@$digest"
  if [ "$name" = capstan ]; then
    # manifests/ as they are, with this image, placed on the real node (its selector and toleration).
    mkdir -p "$dir/capstan-on-real-node"
    # In a pod 127.0.0.1 is the pod itself: capstan pulls catalogs and bundles from the registry at
    # the node's address (tests/cluster/up.sh, registry-node), which speaks plain HTTP.
    insecure=
    if [ -f "$dir/registry-node" ]; then
      insecure=$'\n'"    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --insecure-registry=$(cat "$dir/registry-node")}"
    fi
    rel=$(python3 -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$root/manifests" "$dir/capstan-on-real-node")
    cat > "$dir/capstan-on-real-node/kustomization.yaml" <<EOF
# Written by images/build.sh: capstan's manifests with the image built here, on the real node.
#   kubectl apply -k $dir/capstan-on-real-node
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel]
images:
- {name: capstan, newName: $registry/capstan/capstan, digest: "$digest"}
patches:
- target: {kind: Deployment, name: capstan}
  patch: |-
    - {op: add, path: /spec/template/spec/nodeSelector/type, value: real}
    - {op: add, path: /spec/template/spec/tolerations, value: [{key: capstan.dev/node, operator: Equal, value: real, effect: NoSchedule}]}$insecure
EOF
  fi
done
if [ -n "$pin_bundles" ]; then
  # The committed CSVs name the images built here under quay.io/example/, by digest.
  for name in httpd nginx-operator; do
    digest=$(cut -d@ -f2 "$dir/images/$name")
    sed -i -E "s#quay\.io/example/$name@sha256:[0-9a-zA-Z_]+#quay.io/example/$name@$digest#g" \
      "$root"/bundles/nginx-operator/*/manifests/*.clusterserviceversion.yaml
    echo "pinned quay.io/example/$name@$digest in bundles/nginx-operator/*/manifests"
  done
fi
