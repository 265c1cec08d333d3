#!/usr/bin/env bash
# Builds one File-Based Catalog from every bundle of community-operators-prod with `capstan catalog add`
# (the workload of benches/resolve_full.rs), cached outside the repository.
#
#   benches/full_catalog.sh [SOURCE]     prints the catalog directory on stdout
#
# SOURCE: a checkout of github.com/redhat-openshift-ecosystem/community-operators-prod, or its git
# directory (e.g. a bare mirror); default $CAPSTAN_COP_SOURCE. Nothing is downloaded: without a
# source the script exits 3 with a message (benches skip the workload then).
# Output: $CAPSTAN_CACHE/full-catalog/<commit>/catalog (default CAPSTAN_CACHE=~/.cache/capstan),
# one directory per package (`catalog add` into a per-package directory, so each add reads only its
# own package; the union of the directories is the catalog). Bundles are added in version order,
# with the package's ci.yaml `updateGraph` (semver-mode → --mode semver, else replaces), and the
# image name the community pipeline publishes (quay.io/community-operator-pipeline-prod/PKG:VERSION).
# Bundles `catalog add` refuses are listed in rejected.txt next to the catalog, with the reason.
set -euo pipefail
src=${1:-${CAPSTAN_COP_SOURCE:-}}
cache=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
if [[ -z "$src" || ! -e "$src" ]]; then
    echo "full_catalog.sh: no community-operators-prod source (pass a checkout or git dir, or set CAPSTAN_COP_SOURCE)" >&2
    exit 3
fi
root=$(cd "$(dirname "$0")/.." && pwd)
capstan=${CAPSTAN_BIN:-$root/target/release/capstan}
[[ -x "$capstan" ]] || { echo "full_catalog.sh: $capstan missing; run cargo build --release" >&2; exit 2; }

if [[ -d "$src/operators" ]]; then
    # A checkout names its commit; an exported tree is named by its directory (e.g. the commit).
    commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || basename "$src")
    tree="$src"
else
    commit=$(git --git-dir="$src" rev-parse HEAD)
    tree="$cache/full-catalog/$commit/source"
    if [[ ! -d "$tree/operators" ]]; then
        # A partial mirror may lack some blobs outside operators/ (git archive then complains and
        # exits non-zero after writing operators/); what counts is that operators/ came out.
        mkdir -p "$tree.tmp"
        git --git-dir="$src" archive HEAD operators | tar -x -C "$tree.tmp" || true
        [[ -d "$tree.tmp/operators" ]] || { echo "full_catalog.sh: no operators/ in $src" >&2; exit 2; }
        mv "$tree.tmp" "$tree"
    fi
fi
out="$cache/full-catalog/$commit"
if [[ -f "$out/done" ]]; then
    echo "$out/catalog"
    exit 0
fi
rm -rf "$out/catalog" "$out/parts"
mkdir -p "$out/catalog" "$out/parts"

add_package() {  # $1 package dir
    local pkg_dir=$1 pkg mode v dir log
    pkg=$(basename "$pkg_dir")
    mode=replaces
    # As tests/it/catalog_add_corpus.rs: semver-mode, or an FBC-template package (fbc:) not marked replaces-mode.
    if grep -qs "^updateGraph: *semver-mode" "$pkg_dir/ci.yaml" || { grep -qs "^fbc:" "$pkg_dir/ci.yaml" && ! grep -qs "^updateGraph: *replaces-mode" "$pkg_dir/ci.yaml"; }; then mode=semver; fi
    log="$out/parts/$pkg.rejected"
    : >"$log"
    # Version-named bundle directories, lowest version first (sort -V).
    for v in $(find "$pkg_dir" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort -V); do
        dir="$pkg_dir/$v"
        [[ -d "$dir/manifests" ]] || continue
        if ! msg=$("$capstan" catalog add "$out/catalog/$pkg" "$dir" --mode "$mode" \
            --image "quay.io/community-operator-pipeline-prod/$pkg:$v" 2>&1 >/dev/null); then
            printf '%s/%s: %s\n' "$pkg" "$v" "$(printf '%s' "$msg" | tr '\n' ' ' | cut -c1-400)" >>"$log"
        fi
    done
}
export -f add_package
export out capstan
find "$tree/operators" -mindepth 1 -maxdepth 1 -type d | sort | xargs -P "${CAPSTAN_JOBS:-2}" -I{} bash -c 'add_package "$1"' _ {}
cat "$out"/parts/*.rejected >"$out/rejected.txt"
rm -rf "$out/parts"
# Packages none of whose bundles could be added leave an empty directory.
find "$out/catalog" -mindepth 1 -maxdepth 1 -type d -empty -delete
touch "$out/done"
echo "$out/catalog"
