#!/usr/bin/env bash
# Builds the Helm operator that operator-sdk's Helm-based projects run (`main.go` of
# github.com/operator-framework/helm-operator-plugins, pinned in images/pins.sh) from the Go module proxy into
# $CAPSTAN_CACHE/helm-operator/<version>-<go>/helm-operator (default ~/.cache/capstan), outside the
# repository, once per pin, and prints its path. images/build.sh puts it into the nginx-operator image.
#
# The build is reproducible: CGO_ENABLED=0 (static), -trimpath, no VCS stamp, and the Go toolchain is
# pinned too (GOTOOLCHAIN=$IMAGES_GO: a machine with another Go fetches that toolchain from the module
# proxy as the module golang.org/toolchain). The same pins give the same bytes, so the nginx-operator
# image has the digest the committed bundles name (images/build.sh, docs/deploy.md).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/pins.sh"
GO_VERSION=$IMAGES_GO
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
dest="$cache/helm-operator/$HELM_OPERATOR_VERSION-$GO_VERSION"
if [ ! -x "$dest/helm-operator" ]; then
  command -v go >/dev/null || { echo "helm-operator.sh: Go is required to build helm-operator" >&2; exit 1; }
  echo "building helm-operator $HELM_OPERATOR_VERSION with $GO_VERSION (static; a few minutes, once)" >&2
  export GOTOOLCHAIN=$GO_VERSION GOFLAGS="-mod=mod -buildvcs=false"
  # As tests/peers/build.sh does for opm: `go install pkg@version` asks the proxy for the module's
  # version list, which the proxy here refuses; download the pinned module and build it inside its
  # own module, with its own go.mod and go.sum.
  src=$(cd /tmp && go mod download -json "github.com/operator-framework/helm-operator-plugins@$HELM_OPERATOR_VERSION" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  mkdir -p "$dest"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$dest/helm-operator.tmp" .) >&2
  mv "$dest/helm-operator.tmp" "$dest/helm-operator"
fi
echo "$dest/helm-operator"
