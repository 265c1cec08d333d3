//! Errors of registry access. Every variant names the image reference and the registry, and
//! says what to do.

use std::path::PathBuf;

/// An error talking to a registry, reading auth configuration, or using the blob cache.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The text is not an image reference (`[registry/]repository[:tag][@sha256:…]`).
    #[error(
        "invalid image reference {reference:?}: {reason}; write it as registry/repository:tag or registry/repository@sha256:<hex>"
    )]
    InvalidReference {
        /// The text given.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The registry has no manifest for the reference (HTTP 404 / `MANIFEST_UNKNOWN` / `NAME_UNKNOWN`).
    #[error("image {reference} not found in {registry}: check the repository name and the tag or digest")]
    NotFound {
        /// The image reference.
        reference: String,
        /// The registry host (`host[:port]`).
        registry: String,
    },

    /// The registry refused the request (HTTP 401 / 403).
    #[error("not authorized to {action} {reference} at {registry}: {hint}")]
    Unauthorized {
        /// The image reference.
        reference: String,
        /// The registry host.
        registry: String,
        /// `pull` or `push`.
        action: &'static str,
        /// Which credentials were used and where they came from, and what to do.
        hint: String,
    },

    /// The connection failed (refused, TLS handshake, plain HTTP against a TLS port, …).
    #[error("cannot reach {registry} over {scheme} for {reference}: {message}{hint}")]
    Connect {
        /// The image reference.
        reference: String,
        /// The registry host.
        registry: String,
        /// `https` or `http`.
        scheme: &'static str,
        /// The underlying error, with its causes.
        message: String,
        /// A hint about `--plain-http` where a protocol mismatch is likely, else empty.
        hint: String,
    },

    /// A blob or manifest did not hash to the digest that names it.
    #[error(
        "digest mismatch for {what} of {reference} from {registry}: expected {expected}, got {actual}; the registry or the cache is corrupt"
    )]
    DigestMismatch {
        /// The image reference.
        reference: String,
        /// The registry host.
        registry: String,
        /// `manifest`, `config` or `layer`.
        what: &'static str,
        /// Digest named by the manifest or reference.
        expected: String,
        /// Digest of the bytes received.
        actual: String,
    },

    /// Any other error answer from the registry.
    #[error("registry {registry} failed for {reference}: {message}")]
    Registry {
        /// The image reference.
        reference: String,
        /// The registry host.
        registry: String,
        /// The registry's error text.
        message: String,
    },

    /// The image exists but is not something capstan can read (manifest media type, missing
    /// platform in an index, config JSON, layer compression).
    #[error("image {reference}: {reason}")]
    Format {
        /// The image reference.
        reference: String,
        /// What is wrong and what to do.
        reason: String,
    },

    /// A layer could not be unpacked safely (path traversal, absolute paths, escaping symlinks,
    /// corrupt tar).
    #[error("layer {layer} of image {reference}: {reason}")]
    Unpack {
        /// The image reference.
        reference: String,
        /// The layer digest.
        layer: String,
        /// What is wrong.
        reason: String,
    },

    /// A manifest, blob, file or the whole image is over one of the [`super::Limits`]: refused
    /// before it is downloaded when its declared size is over, or as soon as more bytes arrive
    /// than declared or allowed.
    #[error(
        "image {reference}: {object} is {size}, over the limit of {limit} {} ({}, {env}); if you trust the image, raise {env} (e.g. {env}={})",
        if *env == "CAPSTAN_MAX_ENTRIES" { "entries" } else { "bytes" },
        super::limits::show(*limit, env),
        super::limits::show(limit.saturating_mul(2), env)
    )]
    TooLarge {
        /// The image reference.
        reference: String,
        /// What is too large, naming the digest and, in a layer, the entry, e.g.
        /// `file manifests/a.yaml in layer sha256:…`.
        object: String,
        /// How large it is or would be, e.g. `declared as 2000000000 bytes`.
        size: String,
        /// The limit in bytes (or entries).
        limit: u64,
        /// The variable that sets the limit.
        env: &'static str,
    },

    /// A blob sent by the registry is longer than its descriptor declares; reading stopped there.
    #[error(
        "{what} {digest} of image {reference} from {registry}: the registry sent more than the {declared} bytes the manifest declares; reading stopped there (the registry is broken or hostile)"
    )]
    LongerThanDeclared {
        /// The image reference.
        reference: String,
        /// The registry host.
        registry: String,
        /// `config`, `layer` or `manifest`.
        what: &'static str,
        /// The blob digest.
        digest: String,
        /// The size the descriptor declares.
        declared: u64,
    },

    /// A registries.conf file (`--registries-conf`, `CAPSTAN_REGISTRIES_CONF`) cannot be read or
    /// is not a containers-registries.conf v2 file.
    #[error("registries configuration {path}: {reason}")]
    RegistriesConf {
        /// The file (or files) concerned.
        path: String,
        /// What is wrong and what to do.
        reason: String,
    },

    /// The registries.conf table for the reference is `blocked = true` and none of its mirrors
    /// serves this pull (containers-registries.conf(5)).
    #[error(
        "image {reference}: pulls from {prefix} are blocked in {files} and no mirror serves this pull; add a [[registry.mirror]] (pull-from-mirror = \"all\") or remove blocked = true"
    )]
    Blocked {
        /// The image reference.
        reference: String,
        /// The prefix of the blocked table.
        prefix: String,
        /// The registries.conf files read.
        files: String,
    },

    /// Every location of the image (its mirrors, then its source) failed; each is named with
    /// its error.
    #[error("image {reference}: no location could serve it: {}", tried.join("; "))]
    NoLocation {
        /// The image reference as given.
        reference: String,
        /// `mirror|source LOCATION: error` for each location, in the order tried.
        tried: Vec<String>,
    },

    /// A `CAPSTAN_MAX_*` variable does not parse (see [`super::Limits::from_env`]).
    #[error("{0}")]
    InvalidLimit(super::limits::InvalidLimit),

    /// A docker config file or pull secret could not be read or parsed.
    #[error("auth config {source_name}: {reason}")]
    AuthConfig {
        /// The file path or the pull secret's description.
        source_name: String,
        /// What is wrong and what to do.
        reason: String,
    },

    /// Credentials for the registry live in a credential helper, which capstan does not run.
    #[error(
        "credentials for {registry} are kept by credential helper docker-credential-{helper} ({source_name}); capstan does not run credential helpers: put an `auths` entry for {registry} into a config file named by REGISTRY_AUTH_FILE, or use a pull secret"
    )]
    CredentialHelper {
        /// The registry host.
        registry: String,
        /// Helper name, e.g. `desktop`, `pass`, `ecr-login`.
        helper: String,
        /// The config file that names the helper.
        source_name: String,
    },

    /// The cache directory cannot be created or written (checked when a command-line client is
    /// configured, before any registry is contacted).
    #[error(
        "cache directory {path} ({origin}) is not usable: {source}; set CAPSTAN_CACHE to a writable directory, or unset it to use ~/.cache/capstan"
    )]
    CacheUnusable {
        /// The cache directory.
        path: PathBuf,
        /// Where the path came from, e.g. `from $CAPSTAN_CACHE`.
        origin: &'static str,
        /// Why it is not usable.
        #[source]
        source: std::io::Error,
    },

    /// Reading or writing the on-disk cache or the local filesystem failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl OciError {
    /// [`OciError::TooLarge`] for `limit` (its value taken from `limits`).
    pub fn too_large(
        reference: &str,
        object: String,
        size: String,
        limit: super::limits::Limit,
        limits: &super::limits::Limits,
    ) -> Self {
        OciError::TooLarge {
            reference: reference.to_string(),
            object,
            size,
            limit: limits.get(limit),
            env: limit.spec().env,
        }
    }

    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        OciError::Io { path: path.into(), source }
    }
}

/// Result of registry operations.
pub type Result<T, E = OciError> = std::result::Result<T, E>;
