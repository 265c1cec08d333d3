#!/usr/bin/env bash
# Builds OLM v0 (operator-lifecycle-manager, pinned below) from the Go module proxy — `olm`, `catalog`
# and `package-server` — into $CAPSTAN_CACHE/peers/olm-<version>/bin (default ~/.cache/capstan),
# outside the repository, once per version, and links them as $CAPSTAN_CACHE/peers/bin/{olm,catalog,
# package-server}. Prints the three binary paths, one a line, in that order.
#
# The module is built from a writable copy made here, never from this repository:
# pkg/package-server/server/server.go (v0.38.0, still so in v0.46.0) sets
# `authenticationOptions.RemoteKubeConfigFile` a second time where
# `authorizationOptions.RemoteKubeConfigFile` is meant, so a packageserver run outside a Pod (with
# --kubeconfig) has no authorization kubeconfig and fails; the copy gets that one line fixed.
# Upstream sources: tests/peers/build.sh (same way for opm), OLM's Makefile (tags json1, version ldflags).
set -euo pipefail
OLM_VERSION=v0.46.0
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
dest="$cache/peers/olm-$OLM_VERSION/bin"
bins=(olm catalog package-server)
missing=0
for b in "${bins[@]}"; do [ -x "$dest/$b" ] || missing=1; done
if [ "$missing" = 1 ]; then
  command -v go >/dev/null || { echo "peers/build-olm.sh: Go is required to build OLM v0" >&2; exit 1; }
  echo "building OLM $OLM_VERSION (olm, catalog, package-server; several minutes, once)" >&2
  mod=github.com/operator-framework/operator-lifecycle-manager
  src=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$mod@$OLM_VERSION" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  work="$cache/peers/olm-$OLM_VERSION/src"
  rm -rf "$work" && mkdir -p "$(dirname "$work")"
  cp -r "$src" "$work" && chmod -R u+w "$work"
  server="$work/pkg/package-server/server/server.go"
  # The one-line fix: the second assignment (after the authorization options are made) must set the
  # authorization options' kubeconfig. Fail loudly when the source no longer has that shape.
  python3 - "$server" <<'EOF'
import re, sys
p = sys.argv[1]
s = open(p).read()
needle = "authenticationOptions.RemoteKubeConfigFile = o.Kubeconfig"
first = s.find(needle)
second = s.find(needle, first + 1)
if first < 0 or second < 0 or "authorizationOptions :=" not in s[first:second]:
    sys.exit(f"peers/build-olm.sh: {p} no longer has the authentication/authorization kubeconfig mix-up; check the patch")
s = s[:second] + "authorizationOptions.RemoteKubeConfigFile = o.Kubeconfig" + s[second + len(needle):]
open(p, "w").write(s)
EOF
  mkdir -p "$dest"
  ldflags="-s -w -X '$mod/pkg/version.OLMVersion=$OLM_VERSION' -X '$mod/pkg/version.GitCommit=$OLM_VERSION'"
  for b in "${bins[@]}"; do
    (cd "$work" && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" \
       go build -tags json1 -ldflags "$ldflags" -o "$dest/$b" "./cmd/$b") >&2
  done
  # deploy/chart/crds stays in the copy for tests/peers/olm.sh; the rest of the source can go.
  mkdir -p "$cache/peers/olm-$OLM_VERSION/crds"
  cp "$work"/deploy/chart/crds/*.yaml "$cache/peers/olm-$OLM_VERSION/crds/"
fi
mkdir -p "$cache/peers/bin"
for b in "${bins[@]}"; do
  ln -sfn "$dest/$b" "$cache/peers/bin/$b"
  echo "$dest/$b"
done
