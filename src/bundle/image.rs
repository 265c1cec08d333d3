//! Bundle images: build a registry+v1 bundle image from a directory and push it; pull one by
//! digest and unpack it.
//!
//! Layout, as operator-sdk's `bundle.Dockerfile` (`FROM scratch`, `COPY manifests /manifests/`,
//! `COPY metadata /metadata/`, one `LABEL` per annotation) produces it
//! (`../shared/reference/olm-v0.md` §2.1, §2.4; operator-registry `docs/design/operator-bundle.md`):
//! - one gzip tar layer holding `manifests/` and `metadata/` (deterministic: sorted entries,
//!   mtime 0, uid/gid 0, so the same directory always gives the same digest);
//! - an OCI image config whose `config.Labels` are the `metadata/annotations.yaml` annotations
//!   (`operators.operatorframework.io.bundle.mediatype.v1` defaulting to `registry+v1`,
//!   `…manifests.v1` to `manifests/`, `…metadata.v1` to `metadata/` when the file omits them);
//! - OCI media types (`application/vnd.oci.image.manifest.v1+json`, `…config.v1+json`,
//!   `…layer.v1.tar+gzip`). opm reads images through containers/image, which accepts both OCI and
//!   Docker v2 manifests; OCI is the standard format and what podman/buildah push by default.
//!   The extra `tests/scorecard/` directory operator-sdk also copies is not part of a bundle's
//!   registry content and is not included.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::oci::layer::{self, LayerEntry, UnpackOptions};
use crate::oci::{ImageToPush, OciError, PushedImage, Reference, Registry};

/// Label (and annotation) naming the bundle media type.
pub const LABEL_MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";
/// Label naming the manifests directory.
pub const LABEL_MANIFESTS: &str = "operators.operatorframework.io.bundle.manifests.v1";
/// Label naming the metadata directory.
pub const LABEL_METADATA: &str = "operators.operatorframework.io.bundle.metadata.v1";
/// Label naming the package.
pub const LABEL_PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";

/// An error building, pushing, pulling or unpacking a bundle image.
#[derive(Debug, thiserror::Error)]
pub enum BundleImageError {
    /// Registry access failed.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The bundle directory lacks something an image needs.
    #[error("bundle {dir}: {reason}")]
    Layout {
        /// The bundle directory.
        dir: PathBuf,
        /// What is missing or wrong, and what to do.
        reason: String,
    },
    /// `metadata/annotations.yaml` is missing or malformed.
    #[error("{path}: {reason}")]
    Annotations {
        /// The annotations file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The pulled image is not a registry+v1 bundle.
    #[error("image {reference} is not a registry+v1 bundle: {reason}")]
    NotABundle {
        /// The image reference.
        reference: String,
        /// Why.
        reason: String,
    },
    /// The destination of a pull is not empty.
    #[error(
        "{dir} is not empty; pull a bundle into a new or empty directory so that no file is mixed with or lost to the pulled ones"
    )]
    DestinationNotEmpty {
        /// The destination directory.
        dir: PathBuf,
    },
}

/// The labels a bundle image gets: every annotation of `metadata/annotations.yaml` (scalar
/// values as text), with the media type, manifests and metadata labels filled in when absent.
///
/// Errors: [`BundleImageError::Annotations`] when the file is missing, not YAML, or has no
/// top-level `annotations` map.
pub fn bundle_labels(dir: &Path) -> Result<BTreeMap<String, String>, BundleImageError> {
    let path = dir.join("metadata").join("annotations.yaml");
    let bad = |reason: String| BundleImageError::Annotations { path: path.clone(), reason };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        bad(format!("cannot read ({e}); a bundle needs metadata/annotations.yaml with an `annotations:` map"))
    })?;
    crate::yaml::check_flow_depth(&text).map_err(|e| bad(e.to_string()))?;
    let doc: serde_json::Value = crate::yaml::from_str(&text).map_err(|e| bad(format!("not YAML: {e}")))?;
    let map = doc
        .get("annotations")
        .and_then(|a| a.as_object())
        .ok_or_else(|| bad("no top-level `annotations:` map".into()))?;
    let mut labels = BTreeMap::new();
    for (k, v) in map {
        let value = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => String::new(),
            serde_json::Value::Bool(_) | serde_json::Value::Number(_) => v.to_string(),
            _ => {
                return Err(bad(format!("annotation {k:?} is not a scalar; image labels are text")));
            }
        };
        labels.insert(k.clone(), value);
    }
    labels.entry(LABEL_MEDIATYPE.to_string()).or_insert_with(|| "registry+v1".to_string());
    labels.entry(LABEL_MANIFESTS.to_string()).or_insert_with(|| "manifests/".to_string());
    labels.entry(LABEL_METADATA.to_string()).or_insert_with(|| "metadata/".to_string());
    Ok(labels)
}

/// Builds the bundle image for `dir` (see the module docs for the layout) without pushing it.
///
/// Errors: no `manifests/` or `metadata/` directory, unreadable files, symlinks inside them,
/// malformed annotations.
pub fn build_bundle_image(dir: &Path) -> Result<ImageToPush, BundleImageError> {
    let mut entries: Vec<LayerEntry> = Vec::new();
    for sub in ["manifests", "metadata"] {
        let p = dir.join(sub);
        if !p.is_dir() {
            return Err(BundleImageError::Layout {
                dir: dir.to_path_buf(),
                reason: format!("no {sub}/ directory; a registry+v1 bundle holds manifests/ and metadata/"),
            });
        }
        entries.extend(layer::entries_from_dir(&p, sub)?);
    }
    let labels = bundle_labels(dir)?;
    let built = layer::build_layer(entries)?;
    let config = layer::image_config(&labels, std::slice::from_ref(&built.diff_id));
    Ok(ImageToPush { config, layers: vec![built.blob], annotations: BTreeMap::new() })
}

/// Builds the bundle image for `dir` and pushes it to `reference`.
///
/// Errors: see [`build_bundle_image`] and [`Registry::push`].
pub async fn push_bundle(
    registry: &Registry,
    dir: &Path,
    reference: &Reference,
) -> Result<PushedImage, BundleImageError> {
    let image = build_bundle_image(dir)?;
    Ok(registry.push(reference, &image).await?)
}

/// A bundle image pulled and unpacked.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PulledBundle {
    /// The reference as given.
    pub reference: String,
    /// Digest of the image manifest that was unpacked.
    pub digest: String,
    /// The image's labels.
    pub labels: BTreeMap<String, String>,
    /// Regular files written.
    pub files: usize,
}

/// Resolves `reference` to a digest, pulls the image by digest (every blob verified, cached),
/// and unpacks all its layers into `dest` (created if missing; must be empty). Later layers
/// overwrite earlier ones and whiteouts delete, as a container runtime applies them.
///
/// Errors: registry errors; [`BundleImageError::DestinationNotEmpty`]; unsafe layer entries
/// ([`OciError::Unpack`]); [`BundleImageError::NotABundle`] when the image has neither the
/// bundle media type label nor `metadata/annotations.yaml`.
pub async fn pull_bundle(
    registry: &Registry,
    reference: &Reference,
    dest: &Path,
) -> Result<PulledBundle, BundleImageError> {
    let not_empty = || BundleImageError::DestinationNotEmpty { dir: dest.to_path_buf() };
    layer::into_empty_dir(dest, not_empty, pull_bundle_into(registry, reference, dest)).await
}

/// [`pull_bundle`] after the destination check; on error the caller removes what was written.
async fn pull_bundle_into(
    registry: &Registry,
    reference: &Reference,
    dest: &Path,
) -> Result<PulledBundle, BundleImageError> {
    let image = registry.pull(reference).await?;
    let labels = image.labels()?;
    let summary = layer::unpack_layers(
        &image.reference,
        &image.layers,
        dest,
        &UnpackOptions { subdir: None, limits: registry.config().limits },
    )?;
    let metadata_dir =
        labels.get(LABEL_METADATA).map(|m| m.trim_matches('/').to_string()).unwrap_or_else(|| "metadata".to_string());
    if !labels.contains_key(LABEL_MEDIATYPE) && !dest.join(&metadata_dir).join("annotations.yaml").is_file() {
        return Err(BundleImageError::NotABundle {
            reference: image.reference,
            reason: format!(
                "it has no {LABEL_MEDIATYPE} label and no {metadata_dir}/annotations.yaml (nothing was kept in {}; if it is a catalog image, use `capstan catalog pull`)",
                dest.display()
            ),
        });
    }
    Ok(PulledBundle { reference: image.reference, digest: image.digest, labels, files: summary.files })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn image_has_labels_and_one_layer_and_is_reproducible() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "manifests/csv.yaml", "kind: ClusterServiceVersion\n");
        write(
            dir.path(),
            "metadata/annotations.yaml",
            "annotations:\n  operators.operatorframework.io.bundle.package.v1: demo\n  operators.operatorframework.io.bundle.channels.v1: alpha\n",
        );
        write(dir.path(), "README.md", "not in the image");
        let a = build_bundle_image(dir.path()).unwrap();
        let b = build_bundle_image(dir.path()).unwrap();
        assert_eq!(a.manifest_bytes(), b.manifest_bytes());
        assert_eq!(a.layers.len(), 1);
        let cfg: serde_json::Value = serde_json::from_slice(&a.config.data).unwrap();
        let labels = &cfg["config"]["Labels"];
        assert_eq!(labels[LABEL_PACKAGE], "demo");
        assert_eq!(labels[LABEL_MEDIATYPE], "registry+v1");
        assert_eq!(labels[LABEL_MANIFESTS], "manifests/");
        assert_eq!(cfg["rootfs"]["diff_ids"].as_array().unwrap().len(), 1);
        let out = tempfile::tempdir().unwrap();
        layer::unpack_layers("t", &a.layers, out.path(), &UnpackOptions::default()).unwrap();
        assert!(out.path().join("manifests/csv.yaml").is_file());
        assert!(out.path().join("metadata/annotations.yaml").is_file());
        assert!(!out.path().join("README.md").exists());
    }

    #[test]
    fn missing_parts_are_named() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "manifests/csv.yaml", "kind: X\n");
        let err = build_bundle_image(dir.path()).unwrap_err().to_string();
        assert!(err.contains("metadata/"), "{err}");
        write(dir.path(), "metadata/annotations.yaml", "annotations: [1]\n");
        let err = build_bundle_image(dir.path()).unwrap_err().to_string();
        assert!(err.contains("annotations.yaml") && err.contains("annotations:"), "{err}");
    }
}
