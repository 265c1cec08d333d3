#!/usr/bin/env bash
# Publishes the example bundles and their catalog to a registry, as a user publishes a mirrored
# catalog: every bundle under bundles/ is validated, relocated, pushed, and added to a catalog, which
# is validated and pushed as a catalog image.
#
#   examples/publish.sh CATALOG_REF         e.g. 127.0.0.1:5000/capstan-examples/catalog:latest
#
# Bundles go next to the catalog: CATALOG_REF's repository directory + /PACKAGE-bundle:vVERSION.
# A catalog registry that is not loopback (the node's address, 10.0.2.1:PORT, for capstan running in
# a pod) is spoken to over plain HTTP (--insecure-registry).
# Relocation: the committed CSVs name the images built here (images/build.sh) by digest under
# quay.io/example/NAME@sha256:...; published, each becomes IMAGES/capstan/NAME@sha256:... — the same
# digest, another registry, as a mirror does (`oc adm catalog mirror`, ImageDigestMirrorSet). IMAGES
# is the registry the node's containerd pulls from: $CAPSTAN_IMAGE_REGISTRY, default the local
# environment's ($CAPSTAN_CLUSTER_DIR/registry). Each relocated image must exist there with that
# digest (images/build.sh pushes them): if not, nothing is pushed and the error names the bundle,
# the image and what to do.
# Tags (quay.io/example/kaiwudb-...:vX) are left as they are: those operators only ever run on kwok.
# CAPSTAN names the capstan binary (default target/release/capstan). Prints one line per step.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
capstan=${CAPSTAN:-$root/target/release/capstan}
catalog_ref=${1:?usage: examples/publish.sh CATALOG_REF}
cluster_dir=${CAPSTAN_CLUSTER_DIR:-$root/.cluster}
reg=${CAPSTAN_IMAGE_REGISTRY:-$(cat "$cluster_dir/registry")}
catalog_reg=${catalog_ref%%/*}
repo_dir=${catalog_ref%/*}
flags=()
case "$catalog_reg" in 127.*|localhost|localhost:*) ;; *) flags=(--insecure-registry "$catalog_reg") ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Relocate every bundle into $work/bundles and check the images it names by digest.
missing=0
for dir in "$root"/bundles/*/*/; do
  ver=$(basename "$dir"); pkg=$(basename "$(dirname "$dir")")
  mkdir -p "$work/bundles/$pkg"
  cp -r "$dir" "$work/bundles/$pkg/$ver"
  find "$work/bundles/$pkg/$ver" -type f -name '*.yaml' -exec \
    sed -i -E "s#quay\.io/example/([a-z0-9._-]+)@sha256:#$reg/capstan/\1@sha256:#g" {} +
  for ref in $(grep -rhoE "$reg/capstan/[a-z0-9._-]+@sha256:[0-9a-f]{64}" "$work/bundles/$pkg/$ver" | sort -u); do
    name=${ref#"$reg/capstan/"}; name=${name%@*}; digest=${ref#*@}
    if ! curl -fsS -o /dev/null -I \
         -H 'Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json' \
         "http://$reg/v2/capstan/$name/manifests/$digest" 2>/dev/null; then
      built=$(cat "$cluster_dir/images/$name" 2>/dev/null || echo "not built: run images/build.sh $name")
      echo "publish: bundles/$pkg/$ver names quay.io/example/$name@$digest, which is not in $reg" >&2
      echo "publish:   the image built here is $built" >&2
      echo "publish:   build it (make image), or after changing its inputs pin the bundles to it:" >&2
      echo "publish:   images/build.sh --pin-bundles, then rebuild catalog/ (bundles/README.md)" >&2
      missing=1
    fi
  done
done
[ "$missing" = 0 ] || exit 1

for dir in "$work"/bundles/*/; do
  pkg=$(basename "$dir")
  for ver in $(ls "$dir" | sort -V); do
    ref="$repo_dir/$pkg-bundle:v$ver"
    "$capstan" bundle validate "$dir/$ver" >/dev/null
    digest=$("$capstan" bundle push -q "${flags[@]}" "$dir/$ver" "$ref")
    echo "pushed bundle $ref@$digest"
    "$capstan" catalog add "${flags[@]}" "$work/catalog" "$ref@$digest" >/dev/null
  done
done
"$capstan" catalog validate "$work/catalog" >/dev/null
"$capstan" catalog push -q "${flags[@]}" "$work/catalog" "$catalog_ref" >/dev/null
"$capstan" catalog validate "${flags[@]}" "$catalog_ref" >/dev/null
echo "pushed catalog $catalog_ref ($(ls "$work/catalog" | wc -l) packages, validated)"
