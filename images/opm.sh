#!/usr/bin/env bash
# Builds the two programs of the opm image (images/build.sh opm): `opm` of operator-registry at the
# pin of tests/peers/build.sh and `grpc_health_probe` (images/pins.sh), both from the Go module
# proxy, static (CGO_ENABLED=0: `opm serve` of a file-based catalog needs no SQLite), with the
# pinned Go toolchain, into $CAPSTAN_CACHE/opm-image/<opm>-<probe>-<go>/ (default ~/.cache/capstan),
# outside the repository, once per pin. Prints that directory.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/pins.sh"
OPM_VERSION=$(sed -n 's/^OPM_VERSION=//p' "$here/../tests/peers/build.sh")
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
dest="$cache/opm-image/$OPM_VERSION-$GRPC_HEALTH_PROBE_VERSION-$IMAGES_GO"
if [ ! -x "$dest/opm" ] || [ ! -x "$dest/grpc_health_probe" ]; then
  command -v go >/dev/null || { echo "opm.sh: Go is required" >&2; exit 1; }
  echo "building opm $OPM_VERSION and grpc_health_probe $GRPC_HEALTH_PROBE_VERSION (static; a few minutes, once)" >&2
  export GOTOOLCHAIN=$IMAGES_GO GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
  mkdir -p "$dest"
  # As tests/peers/build.sh: each module downloaded at its pin and built inside its own module.
  dir_of() { (cd /tmp && go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'); }
  src=$(dir_of "github.com/operator-framework/operator-registry@$OPM_VERSION")
  (cd "$src" && go build -trimpath -ldflags='-s -w' -tags containers_image_openpgp -o "$dest/opm.tmp" ./cmd/opm) >&2
  src=$(dir_of "github.com/grpc-ecosystem/grpc-health-probe@$GRPC_HEALTH_PROBE_VERSION")
  (cd "$src" && go build -trimpath -ldflags='-s -w' -o "$dest/grpc_health_probe.tmp" .) >&2
  mv "$dest/opm.tmp" "$dest/opm" && mv "$dest/grpc_health_probe.tmp" "$dest/grpc_health_probe"
fi
echo "$dest"
