//! Catalog images: build a File-Based Catalog image and push it, pull one into a directory, and
//! load one into memory by digest with a disk cache keyed by digest.
//!
//! Layout, as `opm generate dockerfile` builds it (`../shared/reference/olm-v0.md` §3.6;
//! operator-registry `alpha/action/generate_dockerfile.go`): the FBC under `/configs` and the
//! image config label `operators.operatorframework.io.index.configs.v1=/configs`. capstan's image
//! holds only that directory (no `opm` binary, no pre-built serving cache): capstan pulls catalogs
//! itself, and OLM v0 would need `grpcPodConfig.extractContent` for such a `scratch`-based image.
//! Readers find the FBC through the label, as operator-controller and `opm render` do; a missing
//! label means `/configs`.
//!
//! The loaded-catalog cache is `<cache>/catalogs/<hex>.json` (the FBC as a JSON stream, which
//! `opm` can read too) plus `<hex>.meta.json` (`{reference, digest, sizeBytes, streamDigest}`),
//! keyed by the image manifest digest; an image digest names its content, so an entry never goes
//! stale. The stream is checked against `streamDigest` (sha256) on every load; an entry that does
//! not match is discarded and the catalog derived again from the image's verified blobs.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::CatalogError;
use super::model::DeclarativeConfig;
use super::parse;
use super::validate::{ValidationErrors, validate};
use crate::oci::cache::{scratch_dir, sha256_hex, write_atomic};
use crate::oci::layer::{self, UnpackOptions};
use crate::oci::{ImageToPush, OciError, PushedImage, Reference, Registry};

/// Image label naming the FBC directory inside a catalog image.
pub const LABEL_CONFIGS: &str = "operators.operatorframework.io.index.configs.v1";
/// Label of legacy SQLite index images (deprecated upstream; not readable by capstan).
pub const LABEL_DATABASE: &str = "operators.operatorframework.io.index.database.v1";
/// Directory capstan puts the FBC in, and the default when the label is absent.
pub const DEFAULT_CONFIGS_DIR: &str = "/configs";

/// An error building, pushing, pulling or loading a catalog image.
#[derive(Debug, thiserror::Error)]
pub enum CatalogImageError {
    /// Registry access failed.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The catalog directory could not be read or parsed.
    #[error(transparent)]
    Catalog(#[from] Box<CatalogError>),
    /// The catalog directory does not validate; nothing was pushed.
    #[error("catalog {dir} is not valid, not pushing it:\n{errors}")]
    Invalid {
        /// The catalog directory.
        dir: PathBuf,
        /// Every validation error.
        errors: ValidationErrors,
    },
    /// The FBC inside an image does not parse.
    #[error("catalog image {reference} ({digest}): {message}")]
    Content {
        /// The image reference.
        reference: String,
        /// The image manifest digest.
        digest: String,
        /// The parse error, with file names as they are in the image (`/configs/…`).
        message: String,
    },
    /// The image is not a File-Based Catalog image.
    #[error("image {reference} is not a File-Based Catalog image: {reason}")]
    NotACatalog {
        /// The image reference.
        reference: String,
        /// Why, and what to do.
        reason: String,
    },
    /// The destination of a pull is not empty.
    #[error(
        "{dir} is not empty; pull a catalog into a new or empty directory so that no file is mixed with or lost to the pulled ones"
    )]
    DestinationNotEmpty {
        /// The destination directory.
        dir: PathBuf,
    },
}

impl From<CatalogError> for CatalogImageError {
    fn from(e: CatalogError) -> Self {
        CatalogImageError::Catalog(Box::new(e))
    }
}

/// Builds the catalog image for the FBC directory `dir`: one layer with `configs/…` and the
/// configs label. The catalog is parsed and validated first (as `opm validate` does).
///
/// Errors: [`CatalogImageError::Catalog`] for unreadable or malformed files,
/// [`CatalogImageError::Invalid`] with every validation error.
pub fn build_catalog_image(dir: &Path) -> Result<ImageToPush, CatalogImageError> {
    build_catalog_image_reporting(dir).map(|(image, _)| image)
}

/// [`build_catalog_image`], plus the warnings about a valid catalog: bundles whose image is a
/// placeholder ([`crate::catalog::placeholder::placeholder_warnings`]).
///
/// Errors: as [`build_catalog_image`].
pub fn build_catalog_image_reporting(dir: &Path) -> Result<(ImageToPush, Vec<String>), CatalogImageError> {
    let cfg = parse::load_path(dir)?;
    validate(&cfg).map_err(|errors| CatalogImageError::Invalid { dir: dir.to_path_buf(), errors })?;
    if !dir.is_dir() {
        return Err(CatalogImageError::Oci(OciError::io(
            dir,
            std::io::Error::other("a catalog image is built from a directory; put the file in one"),
        )));
    }
    let warnings = super::placeholder::placeholder_warnings(&cfg);
    drop(cfg);
    let entries = layer::entries_from_dir(dir, DEFAULT_CONFIGS_DIR.trim_start_matches('/'))?;
    let built = layer::build_layer(entries)?;
    let labels = [(LABEL_CONFIGS.to_string(), DEFAULT_CONFIGS_DIR.to_string())].into_iter().collect();
    let image = ImageToPush {
        config: layer::image_config(&labels, std::slice::from_ref(&built.diff_id)),
        layers: vec![built.blob],
        annotations: Default::default(),
    };
    Ok((image, warnings))
}

/// Validates the FBC directory `dir`, builds its image and pushes it to `reference`.
///
/// Errors: see [`build_catalog_image`] and [`Registry::push`].
pub async fn push_catalog(
    registry: &Registry,
    dir: &Path,
    reference: &Reference,
) -> Result<PushedImage, CatalogImageError> {
    let image = build_catalog_image(dir)?;
    Ok(registry.push(reference, &image).await?)
}

/// A catalog image pulled into a directory.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PulledCatalog {
    /// The reference as given.
    pub reference: String,
    /// Digest of the image manifest.
    pub digest: String,
    /// The FBC directory inside the image (from the label, default `/configs`).
    pub configs_dir: String,
    /// Files written.
    pub files: usize,
}

/// The FBC directory an image's labels name, after rejecting SQLite index images.
fn configs_dir_of(
    reference: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> Result<String, CatalogImageError> {
    match labels.get(LABEL_CONFIGS) {
        Some(dir) if !dir.trim_matches('/').is_empty() => Ok(dir.clone()),
        Some(_) => Err(CatalogImageError::NotACatalog {
            reference: reference.to_string(),
            reason: format!(
                "label {LABEL_CONFIGS} names the root directory; it must name the FBC directory, e.g. /configs"
            ),
        }),
        None if labels.contains_key(LABEL_DATABASE) => Err(CatalogImageError::NotACatalog {
            reference: reference.to_string(),
            reason: format!(
                "it is a SQLite index image (label {LABEL_DATABASE}), a format deprecated upstream; convert it with `opm migrate` and push the File-Based Catalog"
            ),
        }),
        None => Ok(DEFAULT_CONFIGS_DIR.to_string()),
    }
}

/// Pulls `reference` by digest and writes the content of its FBC directory into `dest`
/// (created if missing; must be empty).
///
/// Errors: registry and unpack errors; [`CatalogImageError::DestinationNotEmpty`];
/// [`CatalogImageError::NotACatalog`] when the image has no FBC directory.
pub async fn pull_catalog(
    registry: &Registry,
    reference: &Reference,
    dest: &Path,
) -> Result<PulledCatalog, CatalogImageError> {
    let not_empty = || CatalogImageError::DestinationNotEmpty { dir: dest.to_path_buf() };
    layer::into_empty_dir(dest, not_empty, pull_catalog_into(registry, reference, dest)).await
}

/// [`pull_catalog`] after the destination check; on error the caller removes what was written.
async fn pull_catalog_into(
    registry: &Registry,
    reference: &Reference,
    dest: &Path,
) -> Result<PulledCatalog, CatalogImageError> {
    let image = registry.pull(reference).await?;
    let configs_dir = configs_dir_of(&image.reference, &image.labels()?)?;
    let summary = layer::unpack_layers(
        &image.reference,
        &image.layers,
        dest,
        &UnpackOptions { subdir: Some(configs_dir.clone()), limits: registry.config().limits },
    )?;
    if summary.files == 0 {
        return Err(CatalogImageError::NotACatalog {
            reference: image.reference,
            reason: format!("it has no files under {configs_dir}"),
        });
    }
    Ok(PulledCatalog { reference: image.reference, digest: image.digest, configs_dir, files: summary.files })
}

/// A catalog loaded into memory.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedCatalog {
    /// The reference as given.
    pub reference: String,
    /// Digest of the image manifest the catalog came from.
    pub digest: String,
    /// The parsed catalog.
    pub config: DeclarativeConfig,
    /// Bytes of the FBC files in the image (uncompressed).
    pub size_bytes: u64,
    /// True when the catalog came from the on-disk catalog cache without reading image blobs.
    pub from_cache: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CacheMeta {
    reference: String,
    digest: String,
    size_bytes: u64,
    /// `sha256:` of `<hex>.json` as written; an entry whose stream does not hash to it (edited,
    /// truncated, or written by a capstan that did not record it) is discarded and derived again
    /// from the image's verified blobs.
    stream_digest: String,
}

/// The on-disk cache of parsed catalogs: `<root>/catalogs/<hex>.json` + `<hex>.meta.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogCache {
    root: PathBuf,
}

impl CatalogCache {
    /// A cache under `root` (the capstan cache directory, e.g. [`crate::oci::BlobCache::default_root`]).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        CatalogCache { root: root.into() }
    }

    fn paths(&self, digest: &str) -> Option<(PathBuf, PathBuf)> {
        let hex = sha256_hex(digest)?;
        let dir = self.root.join("catalogs");
        Some((dir.join(format!("{hex}.json")), dir.join(format!("{hex}.meta.json"))))
    }

    /// The cached catalog for `digest`, or `None` when absent, unreadable or not the stream that
    /// was stored (its sha256 differs from the one recorded in the meta file): such an entry is
    /// removed so that the catalog is derived again from the image.
    ///
    /// The check guards against corruption and against an edit of the stream alone; whoever can
    /// write both files of an entry can also rewrite the recorded digest, so the cache directory
    /// must be writable only by capstan (docs/deploy.md).
    pub fn get(&self, digest: &str) -> Option<(DeclarativeConfig, u64)> {
        let (stream, meta) = self.paths(digest)?;
        let meta_bytes = std::fs::read(&meta).ok()?;
        let parsed = serde_json::from_slice::<CacheMeta>(&meta_bytes)
            .ok()
            .filter(|m| m.digest == digest)
            .and_then(|m| {
                let bytes = std::fs::read(&stream).ok()?;
                if crate::oci::cache::sha256_digest(&bytes) != m.stream_digest {
                    tracing::warn!(digest, path = %stream.display(), "catalog cache entry does not match its recorded sha256");
                    return None;
                }
                let cfg = parse::parse_bytes(&stream.display().to_string(), &bytes).ok()?;
                Some((cfg, m.size_bytes))
            });
        if parsed.is_none() {
            tracing::warn!(digest, "unreadable or altered catalog cache entry removed");
            let _ = std::fs::remove_file(&meta);
            let _ = std::fs::remove_file(&stream);
        }
        parsed
    }

    /// Stores `config` for `digest`.
    ///
    /// Errors: the cache directory is not writable.
    pub fn put(
        &self,
        reference: &str,
        digest: &str,
        config: &DeclarativeConfig,
        size_bytes: u64,
    ) -> Result<(), OciError> {
        let Some((stream, meta)) = self.paths(digest) else {
            return Ok(());
        };
        let text = parse::to_json_stream(config);
        write_atomic(&stream, text.as_bytes()).map_err(|e| OciError::io(&stream, e))?;
        let m = CacheMeta {
            reference: reference.to_string(),
            digest: digest.to_string(),
            size_bytes,
            stream_digest: crate::oci::cache::sha256_digest(text.as_bytes()),
        };
        write_atomic(&meta, &serde_json::to_vec(&m).unwrap_or_default()).map_err(|e| OciError::io(&meta, e))
    }
}

/// Loads the catalog image `reference` into memory: resolves a tag to its digest, and when
/// `cache` holds that digest returns the cached catalog without reading image blobs; otherwise
/// pulls the image by digest (blobs verified, and cached by the registry's blob cache), reads the
/// configs label (default `/configs`), extracts only files under that directory, parses them
/// with [`parse::load_path`] and stores the result in `cache`.
///
/// This is what the resolver (`capstan resolve --catalog NS/NAME=REF`) and the CatalogSource
/// controller use; it replaces OLM v0's registry pod (`olm-v0.md` §3.6, DESIGN "No catalog pods").
///
/// Errors: registry errors; [`CatalogImageError::NotACatalog`]; [`CatalogImageError::Content`]
/// when the FBC does not parse (file names as in the image, `/configs/…`).
pub async fn load_catalog_image(
    registry: &Registry,
    reference: &Reference,
    cache: Option<&CatalogCache>,
) -> Result<LoadedCatalog, CatalogImageError> {
    let digest = registry.resolve_digest(reference).await?;
    if let Some(cache) = cache
        && let Some((config, size_bytes)) = cache.get(&digest)
    {
        return Ok(LoadedCatalog { reference: reference.whole(), digest, config, size_bytes, from_cache: true });
    }
    let by_digest = reference.clone_with_digest(digest.clone());
    let mut image = registry.pull(&by_digest).await?;
    image.reference = reference.whole();
    let configs_dir = configs_dir_of(&image.reference, &image.labels()?)?;
    let tmp = scratch_dir("capstan-catalog")?;
    let summary = layer::unpack_layers(
        &image.reference,
        &image.layers,
        tmp.path(),
        &UnpackOptions { subdir: Some(configs_dir.clone()), limits: registry.config().limits },
    )?;
    if summary.files == 0 {
        return Err(CatalogImageError::NotACatalog {
            reference: image.reference,
            reason: format!(
                "it has no files under {configs_dir} (label {LABEL_CONFIGS}: {})",
                if configs_dir == DEFAULT_CONFIGS_DIR { "absent, so /configs" } else { configs_dir.as_str() }
            ),
        });
    }
    let config = parse::load_path(tmp.path()).map_err(|e| {
        let shown = format!("{}/", configs_dir.trim_end_matches('/'));
        let message = e
            .to_string()
            .replace(&format!("{}/", tmp.path().display()), &shown)
            .replace(&tmp.path().display().to_string(), &configs_dir);
        CatalogImageError::Content { reference: image.reference.clone(), digest: digest.clone(), message }
    })?;
    if let Some(cache) = cache {
        cache.put(&image.reference, &digest, &config, summary.bytes)?;
    }
    Ok(LoadedCatalog { reference: image.reference, digest, config, size_bytes: summary.bytes, from_cache: false })
}

/// True when `arg` names an image rather than a local bundle or catalog: it does not
/// [`look like a local path`](looks_like_local_path) and parses as an image reference. This is
/// how every `DIR|REF` argument of the CLI is told apart (`catalog validate`, `catalog add`,
/// `catalog render`, `resolve --catalog`, `search`/`show --catalog`).
pub fn is_image_reference(arg: &str) -> bool {
    !looks_like_local_path(arg) && crate::oci::parse_reference(arg).is_ok()
}

/// True when a `PATH|REF` argument is meant as a file or directory, whether or not it exists,
/// so that a mistyped path (`./bundels/foo`, `bundels/foo`) is reported as missing instead of
/// being pulled from Docker Hub. A path is:
///
/// - anything that exists on disk;
/// - anything starting with `/`, `./`, `../` or `~`, `.` and `..`, or ending with `/` (none of
///   them is an image reference in the distribution grammar, so docker and podman refuse them
///   with "invalid reference format");
/// - a name without a registry host (a first `/`-separated component with a `.` or `:`, or
///   `localhost`) and without a tag or digest (no `:` or `@`): `bundels/foo`, `catalog`.
///   docker reads these as `docker.io/library/…:latest`; an operator bundle or catalog image is
///   pulled by a full reference, and one on Docker Hub is written `docker.io/org/name` or
///   `org/name:tag`, both still images here.
///
/// Images: `quay.io/x/y:1`, `quay.io/x/y`, `localhost:5000/a/b@sha256:…`, `localhost/a`,
/// `org/name:tag`, `docker.io/org/name`. (opm's `render` stats the argument and pulls
/// anything that does not exist, `alpha/action/render.go` `renderReference`.)
pub fn looks_like_local_path(arg: &str) -> bool {
    if Path::new(arg).exists() {
        return true;
    }
    if arg.is_empty()
        || arg == "."
        || arg == ".."
        || arg.starts_with('/')
        || arg.starts_with("./")
        || arg.starts_with("../")
        || arg.starts_with('~')
        || arg.ends_with('/')
    {
        return true;
    }
    let has_registry_host = arg
        .split_once('/')
        .is_some_and(|(first, _)| first.contains('.') || first.contains(':') || first == "localhost");
    !has_registry_host && !arg.contains(':') && !arg.contains('@')
}

/// The message for a `PATH|REF` argument that [looks like a local path](looks_like_local_path)
/// but does not exist: `"bundels/foo does not exist (no such file or directory)"`, plus, when
/// the argument could be a Docker Hub image, how to write it as one.
pub fn missing_path_message(arg: &str) -> String {
    let mut m = format!("{arg} does not exist (no such file or directory)");
    if crate::oci::parse_reference(arg).is_ok() {
        m.push_str(&format!("; for an image on Docker Hub, write docker.io/{arg} or give a tag ({arg}:TAG)"));
    }
    m
}

/// Blocking form of [`load_catalog_image`] for command-line code: parses `reference`, builds a
/// [`Registry`] from `config`, and uses the catalog cache under `config.cache`'s root (none when
/// `config.cache` is `None`). Runs its own single-threaded Tokio runtime, so it must not be
/// called from inside an async context.
///
/// Errors: as [`load_catalog_image`], plus [`OciError::InvalidReference`] and a failure to start
/// the runtime ([`OciError::Io`]).
pub fn load_catalog_image_blocking(
    reference: &str,
    config: crate::oci::ClientConfig,
) -> Result<LoadedCatalog, CatalogImageError> {
    let reference = crate::oci::parse_reference(reference)?;
    let cache = config.cache.as_ref().map(|c| CatalogCache::new(c.root()));
    let registry = Registry::new(config);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| OciError::io("(tokio runtime)", e))?;
    runtime.block_on(load_catalog_image(&registry, &reference, cache.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATALOG: &str = r#"{"schema":"olm.package","name":"demo","defaultChannel":"alpha"}
{"schema":"olm.channel","package":"demo","name":"alpha","entries":[{"name":"demo.v1.0.0"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.0.0","image":"quay.io/x/demo-bundle:v1.0.0","properties":[{"type":"olm.package","value":{"packageName":"demo","version":"1.0.0"}}]}
"#;

    #[test]
    fn local_paths_are_told_from_image_references() {
        let dir = tempfile::tempdir().unwrap();
        let existing = dir.path().join("org:odd");
        std::fs::create_dir_all(&existing).unwrap();
        let existing = existing.to_str().unwrap().to_string();
        for path in [
            "./bundels/foo",
            "../bundels/foo",
            "/no/such/dir",
            "~/bundles/foo",
            "bundels/foo",
            "bundels",
            "catalgo.yaml",
            "bundles/foo/",
            ".",
            "..",
            existing.as_str(),
        ] {
            assert!(looks_like_local_path(path), "{path} should be a path");
            assert!(!is_image_reference(path), "{path} should not be an image");
        }
        for image in [
            "quay.io/x/y:1",
            "quay.io/x/y",
            "localhost:5000/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "localhost/a",
            "127.0.0.1:5000/cat:latest",
            "org/name:tag",
            "ubuntu:22.04",
            "docker.io/org/name",
            "registry.example.com:8443/ns/op-bundle@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(!looks_like_local_path(image), "{image} should be an image");
            assert!(is_image_reference(image), "{image} should parse as an image");
        }
        assert_eq!(
            missing_path_message("bundels/foo"),
            "bundels/foo does not exist (no such file or directory); for an image on Docker Hub, write docker.io/bundels/foo or give a tag (bundels/foo:TAG)"
        );
        assert_eq!(missing_path_message("./bundels/foo"), "./bundels/foo does not exist (no such file or directory)");
    }

    #[test]
    fn image_has_configs_layer_and_label() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("demo")).unwrap();
        std::fs::write(dir.path().join("demo/catalog.json"), CATALOG).unwrap();
        let image = build_catalog_image(dir.path()).unwrap();
        let cfg: serde_json::Value = serde_json::from_slice(&image.config.data).unwrap();
        assert_eq!(cfg["config"]["Labels"][LABEL_CONFIGS], "/configs");
        let out = tempfile::tempdir().unwrap();
        layer::unpack_layers("t", &image.layers, out.path(), &UnpackOptions::default()).unwrap();
        assert_eq!(std::fs::read_to_string(out.path().join("configs/demo/catalog.json")).unwrap(), CATALOG);
    }

    #[test]
    fn invalid_catalog_is_not_built() {
        let dir = tempfile::tempdir().unwrap();
        // defaultChannel names a channel that does not exist.
        std::fs::write(
            dir.path().join("c.json"),
            CATALOG.replace(r#""defaultChannel":"alpha""#, r#""defaultChannel":"stable""#),
        )
        .unwrap();
        let err = build_catalog_image(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not valid") && err.contains("stable"), "{err}");
    }

    #[test]
    fn cache_round_trips_and_drops_bad_entries() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CatalogCache::new(dir.path());
        let cfg = parse::parse_bytes("c.json", CATALOG.as_bytes()).unwrap();
        let digest = crate::oci::cache::sha256_digest(b"image");
        assert!(cache.get(&digest).is_none());
        cache.put("r", &digest, &cfg, 42).unwrap();
        assert_eq!(cache.get(&digest), Some((cfg.clone(), 42)));
        let (stream, meta) = cache.paths(&digest).unwrap();
        std::fs::write(&stream, "{not json").unwrap();
        assert!(cache.get(&digest).is_none());
        assert!(!stream.exists());
        // An edit that still parses (another image for the bundle) is caught by the recorded sha256.
        cache.put("r", &digest, &cfg, 42).unwrap();
        let edited =
            std::fs::read_to_string(&stream).unwrap().replace("quay.io/x/demo-bundle:v1.0.0", "evil.example/x:1");
        std::fs::write(&stream, edited).unwrap();
        assert!(cache.get(&digest).is_none());
        assert!(!stream.exists() && !meta.exists());
        // An entry from before the sha256 was recorded is derived again too.
        cache.put("r", &digest, &cfg, 42).unwrap();
        std::fs::write(&meta, format!(r#"{{"reference":"r","digest":"{digest}","sizeBytes":42}}"#)).unwrap();
        assert!(cache.get(&digest).is_none());
    }

    #[test]
    fn sqlite_index_images_are_named() {
        let labels = [(LABEL_DATABASE.to_string(), "/database/index.db".to_string())].into_iter().collect();
        let err = configs_dir_of("quay.io/x/index:v1", &labels).unwrap_err().to_string();
        assert!(err.contains("SQLite") && err.contains("opm migrate"), "{err}");
        assert_eq!(configs_dir_of("r", &Default::default()).unwrap(), "/configs");
    }

    /// Times [`CatalogCache::get`] on the corpus catalog (about 15 MB of FBC): run with
    /// `cargo test --lib catalog::image::tests::cache_load_time -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn cache_load_time() {
        let corpus = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/corpus/community-operators-prod/catalogs/v4.20");
        let cfg = parse::load_path(&corpus).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = CatalogCache::new(dir.path());
        let digest = crate::oci::cache::sha256_digest(b"corpus");
        cache.put("r", &digest, &cfg, 1).unwrap();
        let mut times = Vec::new();
        for _ in 0..5 {
            let t = std::time::Instant::now();
            assert!(cache.get(&digest).is_some());
            times.push(t.elapsed());
        }
        times.sort();
        eprintln!("catalog cache get: median {:?} (min {:?})", times[2], times[0]);
    }
}
