#!/usr/bin/env bash
# Builds the peer tools used for side-by-side checks (`opm` from operator-registry, pinned below)
# from the Go module proxy into $CAPSTAN_CACHE/peers/<version>/bin (default ~/.cache/capstan),
# outside the repository, once per version, and links it as $CAPSTAN_CACHE/peers/bin/opm where
# the tests and benchmarks look for it. Prints the path of opm.
set -euo pipefail
OPM_VERSION=v1.74.0
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
dest="$cache/peers/$OPM_VERSION/bin"
if [ ! -x "$dest/opm" ]; then
  command -v go >/dev/null || { echo "peers/build.sh: Go is required to build opm" >&2; exit 1; }
  echo "building opm $OPM_VERSION (cgo, tag containers_image_openpgp; a few minutes, once)" >&2
  mkdir -p "$dest"
  # `go install pkg@version` asks the proxy for the module's version list (deprecation check), which
  # the proxy here refuses; download the pinned module and build it inside its own module instead,
  # with its own go.mod and go.sum.
  src=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/operator-framework/operator-registry@$OPM_VERSION" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  (cd "$src" && CGO_ENABLED=1 GOFLAGS="-mod=mod -buildvcs=false" \
     go build -tags containers_image_openpgp -o "$dest/opm" ./cmd/opm) >&2
fi
mkdir -p "$cache/peers/bin"
ln -sfn "$dest/opm" "$cache/peers/bin/opm"
echo "$dest/opm"
