//! The registry client: resolve a tag to a digest, pull an image by digest with every blob
//! verified, push blobs and a manifest. Built on `oci-client`; one `oci_client::Client` per
//! registry host so that each host gets its own protocol (HTTPS or plain HTTP, see
//! [`ClientConfig::uses_plain_http`]) and its own credentials.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::future::try_join_all;
use oci_client::client::{ClientConfig as OciClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE,
    OciDescriptor, OciImageIndex, OciImageManifest,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Serialize;

use super::cache::sha256_digest;
use super::config::ClientConfig;
use super::error::{OciError, Result};
use super::progress::{BarWriter, Progress};

const MANIFEST_TYPES: &[&str] =
    &[OCI_IMAGE_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE, IMAGE_MANIFEST_LIST_MEDIA_TYPE];

/// Parses an image reference (`[registry/]repository[:tag][@sha256:…]`; no registry means
/// Docker Hub, as docker and containers/image read it).
///
/// Errors: [`OciError::InvalidReference`].
pub fn parse_reference(text: &str) -> Result<Reference> {
    text.parse::<Reference>()
        .map_err(|e| OciError::InvalidReference { reference: text.to_string(), reason: e.to_string() })
}

/// A blob with its descriptor: a config or a layer.
#[derive(Debug, Clone)]
pub struct Blob {
    /// Media type, digest, size (and annotations) as they appear in the manifest.
    pub descriptor: OciDescriptor,
    /// The blob's bytes (compressed, for a compressed layer).
    pub data: Vec<u8>,
}

impl Blob {
    /// Wraps `data` with a descriptor of `media_type`, computing digest and size.
    pub fn new(media_type: &str, data: Vec<u8>) -> Self {
        Blob {
            descriptor: OciDescriptor {
                media_type: media_type.to_string(),
                digest: sha256_digest(&data),
                size: data.len() as i64,
                urls: None,
                annotations: None,
                artifact_type: None,
            },
            data,
        }
    }
}

/// An image pulled by digest: the manifest exactly as the registry served it, the config and
/// every layer, all verified against their digests.
#[derive(Debug, Clone)]
pub struct PulledImage {
    /// The reference as given (tag or digest).
    pub reference: String,
    /// Digest of the image manifest (for a multi-platform index, of the chosen platform's
    /// manifest).
    pub digest: String,
    /// The manifest's raw bytes.
    pub manifest_bytes: Vec<u8>,
    /// The parsed manifest.
    pub manifest: OciImageManifest,
    /// The image config blob's raw bytes (JSON).
    pub config: Vec<u8>,
    /// Layers in manifest order.
    pub layers: Vec<Blob>,
}

impl PulledImage {
    /// `config.Labels` of the image config (empty when absent).
    ///
    /// Errors: the config is not JSON ([`OciError::Format`]).
    pub fn labels(&self) -> Result<BTreeMap<String, String>> {
        let v: serde_json::Value = serde_json::from_slice(&self.config).map_err(|e| OciError::Format {
            reference: self.reference.clone(),
            reason: format!("image config {} is not JSON: {e}", self.manifest.config.digest),
        })?;
        let mut out = BTreeMap::new();
        if let Some(labels) = v.get("config").and_then(|c| c.get("Labels")).and_then(|l| l.as_object()) {
            for (k, v) in labels {
                if let Some(s) = v.as_str() {
                    out.insert(k.clone(), s.to_string());
                }
            }
        }
        Ok(out)
    }

    /// Total bytes: manifest + config + layers (compressed).
    pub fn size(&self) -> u64 {
        (self.manifest_bytes.len() + self.config.len() + self.layers.iter().map(|l| l.data.len()).sum::<usize>()) as u64
    }
}

/// An image ready to push: its config and layers; the manifest is built from them.
#[derive(Debug, Clone)]
pub struct ImageToPush {
    /// The config blob (media type `application/vnd.oci.image.config.v1+json`).
    pub config: Blob,
    /// Layers in order.
    pub layers: Vec<Blob>,
    /// Manifest annotations (e.g. `org.opencontainers.image.created`); empty for none.
    pub annotations: BTreeMap<String, String>,
}

impl ImageToPush {
    /// The OCI image manifest (`application/vnd.oci.image.manifest.v1+json`) as compact JSON with
    /// a fixed key order, so that the same content always gives the same digest.
    pub fn manifest_bytes(&self) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Manifest<'a> {
            schema_version: u8,
            media_type: &'a str,
            config: &'a OciDescriptor,
            layers: Vec<&'a OciDescriptor>,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            annotations: &'a BTreeMap<String, String>,
        }
        let m = Manifest {
            schema_version: 2,
            media_type: OCI_IMAGE_MEDIA_TYPE,
            config: &self.config.descriptor,
            layers: self.layers.iter().map(|l| &l.descriptor).collect(),
            annotations: &self.annotations,
        };
        // Serializing these plain structs cannot fail.
        serde_json::to_vec(&m).unwrap_or_default()
    }
}

/// The result of a push, printed by `-o json|yaml` as `{reference, digest, size}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PushedImage {
    /// The reference pushed to (as given).
    pub reference: String,
    /// Digest of the manifest: pull `repository@digest` to get exactly this image.
    pub digest: String,
    /// Bytes of the manifest, as `docker push` reports it.
    pub size: u64,
}

/// Bearer tokens (None: no token needed) for manifest requests and when they were fetched, by
/// registry, repository and credential source.
type TokenCache = HashMap<String, (Option<String>, std::time::Instant)>;

/// A registry client with per-host protocol and credentials, a blob cache and progress bars.
#[derive(Clone)]
pub struct Registry {
    config: Arc<ClientConfig>,
    /// For manifests (see `manifest_request`); blobs go through oci-client.
    http: reqwest::Client,
    /// Bearer tokens for manifest requests by registry, repository and credential source.
    tokens: Arc<Mutex<TokenCache>>,
    clients: Arc<Mutex<HashMap<String, Client>>>,
    progress: Progress,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("config", &self.config).finish_non_exhaustive()
    }
}

enum Op {
    Pull,
    Push,
}

impl Op {
    fn name(&self) -> &'static str {
        match self {
            Op::Pull => "pull",
            Op::Push => "push",
        }
    }
}

/// How long a registry token fetched for manifest requests is reused (registries issue tokens
/// valid for 60 s or more; docker's and distribution's default is 300 s).
pub const TOKEN_TTL: std::time::Duration = std::time::Duration::from_secs(50);

/// How long to wait for a TCP/TLS connection to a registry.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// How long one read from a registry may wait for bytes before the request fails (an idle
/// timeout per read, so large blobs still download as long as data keeps flowing).
pub const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Registry {
    /// A client with the given configuration.
    pub fn new(config: ClientConfig) -> Self {
        // reqwest is built without a default rustls provider (the crate uses ring only); install
        // it once per process. An error only means a provider is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let progress = Progress::new(config.quiet);
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(config.read_timeout.unwrap_or(READ_TIMEOUT))
            .build()
            .unwrap_or_default();
        Registry { http, tokens: Arc::default(), config: Arc::new(config), clients: Arc::default(), progress }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The client for `registry` and one set of credentials (`auth_key`): repositories of one
    /// registry may have different credentials (docker config keys with a path).
    fn client_for(&self, registry: &str, auth_key: &str) -> Client {
        let mut clients = match self.clients.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        clients
            .entry(format!("{registry}\u{0}{auth_key}"))
            .or_insert_with(|| {
                let protocol =
                    if self.config.uses_plain_http(registry) { ClientProtocol::Http } else { ClientProtocol::Https };
                Client::new(OciClientConfig {
                    protocol,
                    platform_resolver: None,
                    connect_timeout: Some(CONNECT_TIMEOUT),
                    // A registry that accepts the connection but never answers must not hang
                    // capstan: every read waits at most this long for bytes.
                    read_timeout: Some(self.config.read_timeout.unwrap_or(READ_TIMEOUT)),
                    ..Default::default()
                })
            })
            .clone()
    }

    fn scheme(&self, registry: &str) -> &'static str {
        if self.config.uses_plain_http(registry) { "http" } else { "https" }
    }

    fn auth_for(&self, reference: &Reference) -> Result<(RegistryAuth, Option<String>)> {
        match &self.config.auth {
            None => Ok((RegistryAuth::Anonymous, None)),
            Some(cfg) => {
                let r = cfg.resolve(reference.resolve_registry(), reference.repository())?;
                Ok((r.auth, r.source))
            }
        }
    }

    /// A client for the reference's registry with its credentials stored; oci-client fetches a
    /// token (or applies basic credentials) lazily on the first request that needs one.
    async fn ready(&self, reference: &Reference) -> Result<Client> {
        let (auth, source) = self.auth_for(reference)?;
        let auth_key = match &auth {
            RegistryAuth::Anonymous => String::new(),
            RegistryAuth::Basic(user, _) => format!("basic:{user}:{}", source.unwrap_or_default()),
            RegistryAuth::Bearer(_) => format!("bearer:{}", source.unwrap_or_default()),
        };
        let client = self.client_for(reference.resolve_registry(), &auth_key);
        client.store_auth_if_needed(reference.resolve_registry(), &auth).await;
        Ok(client)
    }

    /// [`Self::resolve_digest`] at one location: `reference` as rewritten for it.
    async fn resolve_digest_at(&self, reference: &Reference) -> Result<String> {
        if let Some(d) = reference.digest() {
            return Ok(d.to_string());
        }
        let head = self.manifest_request(reference, reqwest::Method::HEAD).await?;
        if let Some(d) = head
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|v| v.to_str().ok())
            .filter(|d| super::cache::sha256_hex(d).is_some())
        {
            return Ok(d.to_string());
        }
        let tag = format!("tag {}", reference.tag().unwrap_or("latest"));
        let response = self.manifest_request(reference, reqwest::Method::GET).await?;
        let body = self.read_manifest(reference, response, &tag).await?;
        let digest = sha256_digest(&body);
        if let Some(cache) = &self.config.cache {
            cache.put(&digest, &body)?;
        }
        Ok(digest)
    }

    /// [`Self::pull_manifest`] at one location.
    async fn pull_manifest_at(&self, reference: &Reference) -> Result<(String, OciImageManifest, Vec<u8>)> {
        let digest = self.resolve_digest_at(reference).await?;
        let by_digest = reference.clone_with_digest(digest.clone());
        let bytes = self.manifest_bytes(&by_digest, &digest).await?;
        match parse_manifest(&bytes, reference)? {
            Parsed::Image(m) => Ok((digest, *m, bytes)),
            Parsed::Index(index) => {
                let entry = choose_platform(&index).ok_or_else(|| OciError::Format {
                    reference: reference.whole(),
                    reason: "the image index lists no manifests".into(),
                })?;
                let child_digest = entry.digest.clone();
                let child = reference.clone_with_digest(child_digest.clone());
                let bytes = self.manifest_bytes(&child, &child_digest).await?;
                match parse_manifest(&bytes, reference)? {
                    Parsed::Image(m) => Ok((child_digest, *m, bytes)),
                    Parsed::Index(_) => Err(OciError::Format {
                        reference: reference.whole(),
                        reason: format!(
                            "index entry {child_digest} is itself an index; nested indexes are not supported"
                        ),
                    }),
                }
            }
        }
    }

    async fn manifest_bytes(&self, by_digest: &Reference, digest: &str) -> Result<Vec<u8>> {
        if let Some(cache) = &self.config.cache
            && let Some(bytes) = cache.get(digest)
            && bytes.len() as u64 <= self.config.limits.manifest_bytes
        {
            tracing::debug!(digest, "manifest served from the blob cache");
            return Ok(bytes);
        }
        tracing::debug!(reference = %by_digest.whole(), "pulling manifest");
        let body = self.get_manifest_bounded(by_digest, digest).await?;
        let actual = sha256_digest(&body);
        if actual != digest {
            return Err(OciError::DigestMismatch {
                reference: by_digest.whole(),
                registry: by_digest.resolve_registry().to_string(),
                what: "manifest",
                expected: digest.to_string(),
                actual,
            });
        }
        if let Some(cache) = &self.config.cache {
            cache.put(digest, &body)?;
        }
        Ok(body)
    }

    /// GETs the manifest `by_digest` (a digest reference); see [`Self::read_manifest`].
    async fn get_manifest_bounded(&self, by_digest: &Reference, digest: &str) -> Result<Vec<u8>> {
        let response = self.manifest_request(by_digest, reqwest::Method::GET).await?;
        self.read_manifest(by_digest, response, digest).await
    }

    /// Sends `method` for the manifest of `reference` (by digest, else by tag) and returns the
    /// response after checking its status. oci-client's `pull_manifest_raw` and
    /// `fetch_manifest_digest` read a body of any size into memory, so manifest requests are made
    /// here, with the same reqwest, protocol, timeouts and the credentials oci-client resolves (its
    /// token flow; the token is kept for [`TOKEN_TTL`] and fetched again after a 401).
    ///
    /// Errors: the registry errors, as for blobs.
    async fn manifest_request(&self, reference: &Reference, method: reqwest::Method) -> Result<reqwest::Response> {
        let registry = reference.resolve_registry();
        let target = reference.digest().or(reference.tag()).unwrap_or("latest");
        let url = format!("{}://{registry}/v2/{}/manifests/{target}", self.scheme(registry), reference.repository());
        let (auth, source) = self.auth_for(reference)?;
        let key = format!("{registry}\u{0}{}\u{0}{}", reference.repository(), source.unwrap_or_default());
        let as_oci = |e: reqwest::Error| self.map_err(OciDistributionError::RequestError(e), reference, &Op::Pull);
        let mut retried = false;
        loop {
            let token = self.token(reference, &auth, &key).await?;
            let mut request =
                self.http.request(method.clone(), &url).header(reqwest::header::ACCEPT, MANIFEST_TYPES.join(", "));
            request = match (&token, &auth) {
                (Some(t), _) => request.bearer_auth(t),
                (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
                (None, _) => request,
            };
            let mut response = request.send().await.map_err(as_oci)?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            if status == reqwest::StatusCode::UNAUTHORIZED && !retried {
                retried = true;
                self.lock_tokens().remove(&key);
                continue;
            }
            let mut message = String::new();
            if let Ok(Some(chunk)) = response.chunk().await {
                message = String::from_utf8_lossy(&chunk[..chunk.len().min(4096)]).into_owned();
            }
            return Err(self.map_err(
                OciDistributionError::ServerError { code: status.as_u16(), url, message },
                reference,
                &Op::Pull,
            ));
        }
    }

    /// The bearer token for `reference` (None: basic or anonymous access), from oci-client's
    /// token flow, kept under `key` for [`TOKEN_TTL`].
    async fn token(&self, reference: &Reference, auth: &RegistryAuth, key: &str) -> Result<Option<String>> {
        if let Some((token, at)) = self.lock_tokens().get(key)
            && at.elapsed() < TOKEN_TTL
        {
            return Ok(token.clone());
        }
        let client = self.ready(reference).await?;
        let token = client
            .auth(reference, auth, oci_client::RegistryOperation::Pull)
            .await
            .map_err(|e| self.map_err(e, reference, &Op::Pull))?;
        self.lock_tokens().insert(key.to_string(), (token.clone(), std::time::Instant::now()));
        Ok(token)
    }

    fn lock_tokens(&self) -> std::sync::MutexGuard<'_, TokenCache> {
        match self.tokens.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Reads a manifest response body in chunks, failing with [`OciError::TooLarge`] (naming
    /// `what`, a digest or a tag) as soon as it passes [`super::Limits::manifest_bytes`], or at
    /// once when `Content-Length` says it would.
    async fn read_manifest(
        &self,
        reference: &Reference,
        mut response: reqwest::Response,
        what: &str,
    ) -> Result<Vec<u8>> {
        let limit = self.config.limits.manifest_bytes;
        let too_large = |size: String| {
            OciError::too_large(
                &reference.whole(),
                format!("manifest {what}"),
                size,
                super::limits::Limit::Manifest,
                &self.config.limits,
            )
        };
        if let Some(len) = response.content_length()
            && len > limit
        {
            return Err(too_large(format!("declared as {len} bytes (Content-Length)")));
        }
        let as_oci = |e: reqwest::Error| self.map_err(OciDistributionError::RequestError(e), reference, &Op::Pull);
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(as_oci)? {
            if (body.len() + chunk.len()) as u64 > limit {
                return Err(too_large(format!("more than {limit} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The size `descriptor` declares, after checking it against the limit for `what` (`config`:
    /// [`super::Limits::config_bytes`], else [`super::Limits::layer_bytes`]).
    ///
    /// Errors: [`OciError::TooLarge`]; [`OciError::Format`] for a negative size.
    fn check_declared(&self, reference: &Reference, descriptor: &OciDescriptor, what: &str) -> Result<u64> {
        let limit = if what == "config" { super::limits::Limit::Config } else { super::limits::Limit::Layer };
        let declared = u64::try_from(descriptor.size).map_err(|_| OciError::Format {
            reference: reference.whole(),
            reason: format!("{what} {} has a negative size {} in the manifest", descriptor.digest, descriptor.size),
        })?;
        if declared > self.config.limits.get(limit) {
            return Err(OciError::too_large(
                &reference.whole(),
                format!("{what} {}", descriptor.digest),
                format!("declared as {declared} bytes"),
                limit,
                &self.config.limits,
            ));
        }
        Ok(declared)
    }

    /// [`Self::pull_blob`] at one location.
    async fn pull_blob_at(
        &self,
        reference: &Reference,
        descriptor: &OciDescriptor,
        what: &'static str,
    ) -> Result<Vec<u8>> {
        let declared = self.check_declared(reference, descriptor, what)?;
        if let Some(cache) = &self.config.cache
            && let Some(bytes) = cache.get_sized(&descriptor.digest, declared)
        {
            tracing::debug!(digest = %descriptor.digest, what, "blob served from the blob cache");
            return Ok(bytes);
        }
        tracing::debug!(digest = %descriptor.digest, what, size = descriptor.size, "pulling blob");
        let client = self.ready(reference).await?;
        let short = short_digest(&descriptor.digest);
        let bar = self.progress.bytes_bar(declared, format!("pull {what} {short}"));
        let mut sink = BarWriter {
            buf: Vec::with_capacity(declared.min(64 << 20) as usize),
            bar: bar.clone(),
            limit: declared,
            overflowed: false,
        };
        let pulled = client.pull_blob(reference, descriptor, &mut sink).await;
        bar.finish_and_clear();
        if sink.overflowed {
            return Err(OciError::LongerThanDeclared {
                reference: reference.whole(),
                registry: reference.resolve_registry().to_string(),
                what,
                digest: descriptor.digest.clone(),
                declared,
            });
        }
        pulled.map_err(|e| match e {
            OciDistributionError::DigestError(d) => OciError::DigestMismatch {
                reference: reference.whole(),
                registry: reference.resolve_registry().to_string(),
                what,
                expected: descriptor.digest.clone(),
                actual: d.to_string(),
            },
            e => self.map_err(e, reference, &Op::Pull),
        })?;
        let data = sink.buf;
        let actual = sha256_digest(&data);
        if actual != descriptor.digest || data.len() as u64 != declared {
            return Err(OciError::DigestMismatch {
                reference: reference.whole(),
                registry: reference.resolve_registry().to_string(),
                what,
                expected: format!("{} ({} bytes)", descriptor.digest, descriptor.size),
                actual: format!("{actual} ({} bytes)", data.len()),
            });
        }
        if let Some(cache) = &self.config.cache {
            cache.put(&descriptor.digest, &data)?;
        }
        Ok(data)
    }

    /// [`Self::pull`] at one location.
    async fn pull_at(&self, reference: &Reference) -> Result<PulledImage> {
        let (digest, manifest, manifest_bytes) = self.pull_manifest_at(reference).await?;
        let by_digest = reference.clone_with_digest(digest.clone());
        let mut declared: u64 = self.check_declared(&by_digest, &manifest.config, "config")?;
        for layer in &manifest.layers {
            declared = declared.saturating_add(self.check_declared(&by_digest, layer, "layer")?);
        }
        if declared > self.config.limits.image_bytes {
            return Err(OciError::too_large(
                &by_digest.whole(),
                format!("image {digest} (config and {} layers)", manifest.layers.len()),
                format!("declared as {declared} bytes"),
                super::limits::Limit::Image,
                &self.config.limits,
            ));
        }
        let config = self.pull_blob_at(&by_digest, &manifest.config, "config").await?;
        let layers = try_join_all(manifest.layers.iter().map(|d| {
            let by_digest = &by_digest;
            async move {
                let data = self.pull_blob_at(by_digest, d, "layer").await?;
                Ok::<_, OciError>(Blob { descriptor: d.clone(), data })
            }
        }))
        .await?;
        Ok(PulledImage { reference: reference.whole(), digest, manifest_bytes, manifest, config, layers })
    }

    /// Resolves `reference` to its manifest digest at the first of its locations that answers
    /// (its registries.conf mirrors, then its source; see [`Self::each_location`]): a digest
    /// reference is returned as is; a tag is looked up with one `HEAD` request (its
    /// `Docker-Content-Digest`), or, when the registry sends no sha256 digest header, with a `GET`
    /// whose body is bounded as in [`Self::pull_manifest`] and hashed (and then cached, so that
    /// it is not fetched again).
    ///
    /// Errors: not found, unauthorized, unreachable ([`OciError`] variants name the reference and
    /// registry); [`OciError::TooLarge`] for a manifest over the limit; with mirrors,
    /// [`OciError::NoLocation`] naming every location tried and its error.
    pub async fn resolve_digest(&self, reference: &Reference) -> Result<String> {
        if let Some(d) = reference.digest() {
            return Ok(d.to_string());
        }
        self.each_location(reference, |r| async move { self.resolve_digest_at(&r).await }).await
    }

    /// Pulls the image manifest for `reference` from the first of its locations that serves it,
    /// following a multi-platform index to one platform's manifest (the running platform, else
    /// `linux/amd64`, else the first entry — bundle and catalog content does not depend on the
    /// platform). Returns `(digest, manifest, raw bytes)`. Served from the cache when the digest
    /// is known.
    ///
    /// Errors: as [`Self::resolve_digest`], plus [`OciError::Format`] for a manifest that is
    /// neither an OCI/Docker v2 image manifest nor an index.
    pub async fn pull_manifest(&self, reference: &Reference) -> Result<(String, OciImageManifest, Vec<u8>)> {
        self.each_location(reference, |r| async move { self.pull_manifest_at(&r).await }).await
    }

    /// Pulls one blob of `reference` by its descriptor from the first of the reference's
    /// locations that serves it, verifying size and sha256; served from (and stored into) the
    /// cache. `what` is `config` or `layer`: the declared size must be within
    /// [`super::Limits::config_bytes`] or [`super::Limits::layer_bytes`], checked before anything
    /// is read, and the download stops as soon as the registry sends more than the declared size.
    ///
    /// Errors: [`OciError::TooLarge`], [`OciError::LongerThanDeclared`],
    /// [`OciError::DigestMismatch`], [`OciError::Format`] for a negative size, plus the registry
    /// errors.
    pub async fn pull_blob(
        &self,
        reference: &Reference,
        descriptor: &OciDescriptor,
        what: &'static str,
    ) -> Result<Vec<u8>> {
        self.each_location(reference, |r| async move { self.pull_blob_at(&r, descriptor, what).await }).await
    }

    /// Pulls the whole image by digest from the first of its locations that serves all of it:
    /// manifest, config and all layers, each verified (so a mirror cannot change the content of
    /// a digest). When every blob is cached, a digest reference makes no request and a tag
    /// reference makes one (`HEAD` of the tag).
    ///
    /// The declared sizes of config and layers together must be within
    /// [`super::Limits::image_bytes`] (checked before any blob is pulled): the pulled image is
    /// held in memory.
    ///
    /// Errors: see [`Self::pull_manifest`] and [`Self::pull_blob`]; [`OciError::TooLarge`].
    pub async fn pull(&self, reference: &Reference) -> Result<PulledImage> {
        let mut image = self.each_location(reference, |r| async move { self.pull_at(&r).await }).await?;
        image.reference = reference.whole();
        Ok(image)
    }

    /// Runs `attempt` against each location of `reference` in turn — the mirrors of its
    /// registries.conf table that serve this kind of pull, then its source unless blocked
    /// ([`super::mirrors::RegistriesConf::pull_sources`]; containers/image tries them so) — and
    /// returns the first success. With a single location its error is returned as it is.
    ///
    /// Errors: [`OciError::Blocked`]; [`OciError::NoLocation`] naming each location and its error.
    async fn each_location<T, F, Fut>(&self, reference: &Reference, attempt: F) -> Result<T>
    where
        F: Fn(Reference) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let sources = match &self.config.registries {
            Some(conf) => conf.pull_sources(reference)?,
            None => return attempt(reference.clone()).await,
        };
        if let [only] = sources.as_slice() {
            return attempt(only.reference.clone()).await;
        }
        let mut tried = Vec::new();
        for source in sources {
            match attempt(source.reference.clone()).await {
                Ok(value) => return Ok(value),
                Err(e) => {
                    tracing::debug!(location = %source.reference.whole(), error = %e, "image location failed; trying the next");
                    tried.push(format!("{} {}: {e}", source.kind(), source.reference.whole()));
                }
            }
        }
        Err(OciError::NoLocation { reference: reference.whole(), tried })
    }

    /// Pushes the image's layers and config (skipping blobs the repository already has) and then
    /// its manifest under the reference's tag (or digest).
    ///
    /// Errors: unauthorized, unreachable, or the registry rejecting a blob or the manifest.
    pub async fn push(&self, reference: &Reference, image: &ImageToPush) -> Result<PushedImage> {
        let manifest = image.manifest_bytes();
        self.push_manifest_and_blobs(
            reference,
            image.layers.iter().chain(std::iter::once(&image.config)),
            manifest,
            OCI_IMAGE_MEDIA_TYPE,
        )
        .await
    }

    /// Pushes `blobs` and then `manifest` (raw bytes, sent as `media_type`) to `reference`.
    /// Lower level than [`Self::push`], for manifests built elsewhere.
    ///
    /// Errors: as [`Self::push`].
    pub async fn push_manifest_and_blobs<'a>(
        &self,
        reference: &Reference,
        blobs: impl Iterator<Item = &'a Blob>,
        manifest: Vec<u8>,
        media_type: &str,
    ) -> Result<PushedImage> {
        let client = self.ready(reference).await?;
        let blobs: Vec<&Blob> = blobs.collect();
        let total: u64 = blobs.iter().map(|b| b.data.len() as u64).sum();
        let bar = self.progress.bytes_bar(total, format!("push {}", reference.whole()));
        for blob in blobs {
            let exists = client
                .blob_exists(reference, &blob.descriptor.digest)
                .await
                .map_err(|e| self.map_err(e, reference, &Op::Push))?;
            if !exists {
                client
                    .push_blob(reference, blob.data.clone(), &blob.descriptor.digest)
                    .await
                    .map_err(|e| self.map_err(e, reference, &Op::Push))?;
            }
            bar.inc(blob.data.len() as u64);
        }
        let content_type = media_type.parse().map_err(|_| OciError::Format {
            reference: reference.whole(),
            reason: format!("media type {media_type:?} is not a valid header value"),
        })?;
        let digest = sha256_digest(&manifest);
        let size = manifest.len() as u64;
        client
            .push_manifest_raw(reference, manifest, content_type)
            .await
            .map_err(|e| self.map_err(e, reference, &Op::Push))?;
        bar.finish_and_clear();
        Ok(PushedImage { reference: reference.whole(), digest, size })
    }

    fn unauthorized_hint(&self, reference: &Reference) -> String {
        let registry = reference.resolve_registry();
        match (&self.config.auth, self.auth_for(reference)) {
            (_, Ok((_, Some(source)))) => format!(
                "the credentials for {registry} from {source} were rejected; check them (docker login {registry} rewrites them)"
            ),
            (Some(cfg), _) => format!(
                "no credentials for {registry} in {}; add an auths entry for {registry} (docker login {registry}) or point REGISTRY_AUTH_FILE at a file that has one",
                cfg.sources().join(", ")
            ),
            (None, _) => {
                let mut looked: Vec<String> = vec!["$REGISTRY_AUTH_FILE (unset)".into()];
                looked.extend(super::auth::DockerConfig::default_paths().iter().map(|p| p.display().to_string()));
                format!(
                    "no credentials: no docker config file found (looked at {}); run docker login {registry} or set REGISTRY_AUTH_FILE",
                    looked.join(", ")
                )
            }
        }
    }

    fn map_err(&self, e: OciDistributionError, reference: &Reference, op: &Op) -> OciError {
        let registry = reference.resolve_registry().to_string();
        let whole = reference.whole();
        let unauthorized = || OciError::Unauthorized {
            reference: whole.clone(),
            registry: registry.clone(),
            action: op.name(),
            hint: self.unauthorized_hint(reference),
        };
        let not_found = || OciError::NotFound { reference: whole.clone(), registry: registry.clone() };
        match e {
            OciDistributionError::UnauthorizedError { .. } | OciDistributionError::AuthenticationFailure(_) => {
                unauthorized()
            }
            OciDistributionError::RegistryError { envelope, .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                if codes.iter().any(|c| {
                    matches!(c, OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound)
                }) {
                    not_found()
                } else if codes.iter().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                    unauthorized()
                } else {
                    OciError::Registry { reference: whole, registry, message: envelope.to_string() }
                }
            }
            OciDistributionError::ServerError { code, message, .. } => match code {
                404 => not_found(),
                401 | 403 => unauthorized(),
                400 if message.to_ascii_lowercase().contains("https") => OciError::Connect {
                    reference: whole,
                    registry: registry.clone(),
                    scheme: self.scheme(&registry),
                    message: format!("HTTP 400: {}", message.trim()),
                    hint: format!("; {registry} serves HTTPS: drop --plain-http / --insecure-registry for it"),
                },
                _ => OciError::Registry {
                    reference: whole,
                    registry,
                    message: format!("HTTP {code}: {}", message.trim()),
                },
            },
            OciDistributionError::RequestError(err)
                if err.status().is_some_and(|s| s.as_u16() == 401 || s.as_u16() == 403) =>
            {
                unauthorized()
            }
            OciDistributionError::RequestError(err) if err.status().is_some_and(|s| s.as_u16() == 404) => not_found(),
            OciDistributionError::RequestError(err) => self.connect_error(&err, whole, registry),
            OciDistributionError::DigestError(d) => OciError::DigestMismatch {
                reference: whole,
                registry,
                what: "blob",
                expected: "the digest named by the manifest".into(),
                actual: d.to_string(),
            },
            other => OciError::Registry { reference: whole, registry, message: other.to_string() },
        }
    }

    /// A request that got no answer from the registry, with a hint at the likely cause: TLS
    /// spoken to a plain-HTTP registry or the reverse, or a registry that is not there.
    fn connect_error(&self, err: &dyn std::error::Error, whole: String, registry: String) -> OciError {
        let message = error_chain(err);
        let lower = message.to_ascii_lowercase();
        let scheme = self.scheme(&registry);
        let hint = if scheme == "https"
            && ["tls", "certificate", "corrupt", "invalidcontenttype", "handshake", "ssl"]
                .iter()
                .any(|w| lower.contains(w))
        {
            format!("; if {registry} serves plain HTTP, pass --insecure-registry {registry} (or --plain-http)")
        } else if scheme == "http" && !self.config.plain_http && !super::config::is_loopback_registry(&registry) {
            format!(
                "; {registry} is reached over plain HTTP because of --insecure-registry: check that it does not serve HTTPS"
            )
        } else if lower.contains("connection refused") || lower.contains("dns") {
            format!("; check that the registry at {registry} is running and the address is right")
        } else {
            String::new()
        };
        OciError::Connect { reference: whole, registry, scheme, message, hint }
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

fn short_digest(d: &str) -> &str {
    let hex = d.strip_prefix("sha256:").unwrap_or(d);
    &hex[..hex.len().min(12)]
}

enum Parsed {
    Image(Box<OciImageManifest>),
    Index(OciImageIndex),
}

fn parse_manifest(bytes: &[u8], reference: &Reference) -> Result<Parsed> {
    let bad = |reason: String| OciError::Format { reference: reference.whole(), reason };
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| bad(format!("manifest is not JSON: {e}")))?;
    let media_type = v.get("mediaType").and_then(|m| m.as_str()).unwrap_or("");
    let is_index = v.get("manifests").is_some()
        || media_type == OCI_IMAGE_INDEX_MEDIA_TYPE
        || media_type == IMAGE_MANIFEST_LIST_MEDIA_TYPE;
    if v.get("schemaVersion").and_then(|s| s.as_i64()) != Some(2) {
        return Err(bad(
            "manifest schemaVersion is not 2 (Docker schema 1 images are not supported; push the image again with a current tool)".into(),
        ));
    }
    if is_index {
        serde_json::from_value(v).map(Parsed::Index).map_err(|e| bad(format!("malformed image index: {e}")))
    } else {
        if v.get("config").is_none() {
            return Err(bad(format!("manifest of media type {media_type:?} has no config; it is not an image")));
        }
        serde_json::from_value(v)
            .map(|m| Parsed::Image(Box::new(m)))
            .map_err(|e| bad(format!("malformed image manifest: {e}")))
    }
}

fn choose_platform(index: &OciImageIndex) -> Option<&oci_client::manifest::ImageIndexEntry> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    };
    let matches = |os: &str, a: &str| {
        index
            .manifests
            .iter()
            .find(|e| e.platform.as_ref().is_some_and(|p| p.os.to_string() == os && p.architecture.to_string() == a))
    };
    matches("linux", arch).or_else(|| matches("linux", "amd64")).or_else(|| index.manifests.first())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_is_deterministic_and_named_by_content() {
        let layer = Blob::new("application/vnd.oci.image.layer.v1.tar+gzip", b"layer".to_vec());
        let config = Blob::new("application/vnd.oci.image.config.v1+json", b"{}".to_vec());
        let img = ImageToPush { config, layers: vec![layer], annotations: BTreeMap::new() };
        let a = img.manifest_bytes();
        assert_eq!(a, img.clone().manifest_bytes());
        let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
        assert_eq!(v["schemaVersion"], 2);
        assert_eq!(v["mediaType"], OCI_IMAGE_MEDIA_TYPE);
        assert_eq!(v["layers"][0]["digest"], sha256_digest(b"layer"));
        assert_eq!(v["layers"][0]["size"], 5);
        assert!(v.get("annotations").is_none());
    }

    #[test]
    fn registry_errors_become_actionable() {
        let reg =
            Registry::new(ClientConfig { insecure_registries: vec!["reg.example.com".into()], ..Default::default() });
        let r = parse_reference("reg.example.com/ns/app:v1").unwrap();
        let e = reg.map_err(
            OciDistributionError::ServerError {
                code: 400,
                url: "http://reg.example.com/v2/".into(),
                message: "Client sent an HTTP request to an HTTPS server.\n".into(),
            },
            &r,
            &Op::Pull,
        );
        let text = e.to_string();
        assert!(text.contains("serves HTTPS") && text.contains("--insecure-registry"), "{text}");
        let e = reg.map_err(
            OciDistributionError::ServerError { code: 404, url: String::new(), message: String::new() },
            &r,
            &Op::Pull,
        );
        assert_eq!(
            e.to_string(),
            "image reg.example.com/ns/app:v1 not found in reg.example.com: check the repository name and the tag or digest"
        );
        let envelope: oci_client::errors::OciEnvelope =
            serde_json::from_str(r#"{"errors":[{"code":"DENIED","message":"no"}]}"#).unwrap();
        let e = reg.map_err(OciDistributionError::RegistryError { envelope, url: String::new() }, &r, &Op::Push);
        let text = e.to_string();
        assert!(text.starts_with("not authorized to push reg.example.com/ns/app:v1 at reg.example.com"), "{text}");
    }

    #[test]
    fn references() {
        let r = parse_reference("127.0.0.1:5000/ns/bundle:v1").unwrap();
        assert_eq!(r.resolve_registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "ns/bundle");
        assert!(parse_reference("UPPER/Case:x").is_err());
        let err = parse_reference("a b").unwrap_err().to_string();
        assert!(err.contains("\"a b\""), "{err}");
    }

    #[test]
    fn schema1_and_non_images_are_rejected() {
        let r = parse_reference("localhost/x:y").unwrap();
        let err = match parse_manifest(br#"{"schemaVersion":1,"fsLayers":[]}"#, &r) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("schema 1 accepted"),
        };
        assert!(err.contains("schema 1") && err.contains("localhost/x:y"), "{err}");
        assert!(parse_manifest(b"not json", &r).is_err());
        assert!(parse_manifest(br#"{"schemaVersion":2,"layers":[]}"#, &r).is_err());
    }
}
