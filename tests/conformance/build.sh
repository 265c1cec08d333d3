#!/usr/bin/env bash
# Builds OLM v0's own end-to-end suite (test/e2e of operator-lifecycle-manager, `go test -c`) from
# the Go module proxy, cached outside the repository once per version, and prints the directory
# that holds the test binary `e2e.test` and the suite's `testdata/` (the suite reads it with
# -test-data-dir). The version is build-olm.sh's pin (one pin of OLM for the whole repository).
# Upstream: OLM's Makefile target `e2e` builds the same package (`go test ./test/e2e`).
# The same directory gets the ginkgo CLI at the version OLM's go.mod requires (`ginkgo`), which
# runs the compiled suite on several processes (run.sh PROCS=N).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OLM_VERSION=$(sed -n 's/^OLM_VERSION=//p' "$here/../peers/build-olm.sh")
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
dest="$cache/peers/olm-e2e-$OLM_VERSION"
if [ ! -x "$dest/e2e.test" ] || [ ! -x "$dest/ginkgo" ]; then
  command -v go >/dev/null || { echo "conformance/build.sh: Go is required to build OLM's e2e suite" >&2; exit 1; }
  echo "building OLM $OLM_VERSION test/e2e (go test -c; several minutes, once)" >&2
  mod=github.com/operator-framework/operator-lifecycle-manager
  src=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$mod@$OLM_VERSION" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  work="$dest.src"
  rm -rf "$work" "$dest" && mkdir -p "$(dirname "$work")"
  cp -r "$src" "$work" && chmod -R u+w "$work"
  (cd "$work" && GOFLAGS="-mod=mod -buildvcs=false" go test -c -o "$dest.tmp/e2e.test" ./test/e2e) >&2
  cp -r "$work/test/e2e/testdata" "$dest.tmp/testdata"
  ginkgo=$(sed -n 's#^\s*github.com/onsi/ginkgo/v2 \(v[0-9.]*\)$#\1#p' "$work/go.mod")
  (cd "$work" && GOBIN="$dest.tmp" GOFLAGS=-mod=mod go install "github.com/onsi/ginkgo/v2/ginkgo@$ginkgo") >&2
  rm -rf "$work"
  mv "$dest.tmp" "$dest"
fi
echo "$dest"
