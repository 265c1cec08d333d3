//! CatalogSource reconciler (`reference/olm-v0.md` §1.2): pulls `spec.image` by digest (pull
//! secrets from `spec.secrets` in the CatalogSource's namespace), keeps the loaded index in the
//! [`Context`], and writes `status.connectionState.lastObservedState` (CONNECTING while the first
//! pull runs, then READY or TRANSIENT_FAILURE) with `message`, `resolvedImage`, `resolvedDigest`,
//! `packageCount`, once per reconcile (the first contact writes CONNECTING and requeues at once;
//! the next pass pulls). Requeued every
//! `spec.updateStrategy.registryPoll.interval` (15m by default); a new digest re-reconciles every
//! Subscription.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;

use super::catalogs::inline_bundles;
use super::configmap_catalogs::{ConfigMapLoadError, config_map_name};
use super::registries::{PullSecretError, registry_for};
use super::registry_services;
use super::{CatalogChange, Context, Error, LoadedIndex, apply_typed_status, now_time};
use crate::api::CatalogSource;
use crate::api::catalogsource::{CatalogSourceStatus, GrpcConnectionState, RegistryServiceStatus, SourceType, reason};
use crate::catalog::grpc::GrpcCatalogError;
use crate::catalog::image::{CatalogCache, CatalogImageError, load_catalog_image};
use crate::catalog::validate::PackageNames;
use crate::oci::{OciError, parse_reference};
use crate::resolve::CatalogIndex;

/// What the CatalogSource reconciler writes and does after a load ([`decide`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CatalogDecision {
    /// The status to write.
    pub status: CatalogSourceStatus,
    /// When to look again.
    pub requeue: Duration,
}

/// Why a CatalogSource's catalog was not loaded; the status message (after `catalog source
/// NS/NAME: `) and the store's error are its text.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CatalogLoadError {
    /// The spec names nothing capstan can load (the sentence says what to set).
    #[error("{0}")]
    Unsupported(String),
    /// `spec.image` is not an image reference.
    #[error("spec.image {image:?}: {source}")]
    Reference {
        /// The reference as written.
        image: String,
        /// Why it does not parse.
        source: OciError,
    },
    /// The pull secrets of `spec.secrets` give no credentials.
    #[error(transparent)]
    PullSecret(#[from] PullSecretError),
    /// The catalog image could not be pulled or read.
    #[error(transparent)]
    Image(#[from] CatalogImageError),
    /// The running registry at `spec.address` could not be read.
    #[error(transparent)]
    Registry(#[from] GrpcCatalogError),
    /// The ConfigMap of a `configmap` / `internal` source could not be read as a catalog.
    #[error(transparent)]
    ConfigMap(#[from] ConfigMapLoadError),
}

impl CatalogLoadError {
    /// `status.reason` for this failure (OLM's `CatalogSource*Error` names, §1.2; capstan's
    /// `ImagePullFailed` for an image or registry that could not be read).
    fn reason(&self) -> &'static str {
        match self {
            CatalogLoadError::Unsupported(_) => reason::SPEC_INVALID_ERROR,
            CatalogLoadError::ConfigMap(_) => reason::CONFIG_MAP_ERROR,
            _ => "ImagePullFailed",
        }
    }
}

/// Where a CatalogSource's catalog comes from, by its spec.
#[derive(Debug, PartialEq)]
enum Source<'a> {
    /// Nothing capstan can load; the sentence says what to set.
    Unsupported(String),
    /// A running registry (`opm serve`) at `spec.address`.
    Address(&'a str),
    /// The ConfigMap `spec.configMap` in the CatalogSource's namespace.
    ConfigMap(&'a str),
    /// The catalog image `spec.image`.
    Image(&'a str),
}

/// Where `cs`'s catalog comes from (§1.2): a `configmap` / `internal` source from its ConfigMap;
/// a `grpc` / `image` source from `spec.image`, else (grpc) `spec.address`. Pure.
fn source(cs: &CatalogSource) -> Source<'_> {
    let image = cs.spec.image.as_deref().map(str::trim).filter(|i| !i.is_empty());
    match &cs.spec.source_type {
        SourceType::ConfigMap | SourceType::Internal => match config_map_name(cs) {
            Some(name) => Source::ConfigMap(name),
            None => Source::Unsupported(
                "spec.configMap is empty; set it to the name of the ConfigMap holding the catalog, in the CatalogSource's namespace".into(),
            ),
        },
        SourceType::Grpc | SourceType::Image => match (image, registry_address(cs)) {
            (Some(image), _) => Source::Image(image),
            (None, Some(address)) => Source::Address(address),
            (None, None) => Source::Unsupported(
                "spec.image is empty; set it to the catalog image reference, or (sourceType grpc) spec.address to a running registry's host:port".into(),
            ),
        },
        other => Source::Unsupported(format!(
            "spec.sourceType {:?} is not supported by capstan; use grpc or image with spec.image, or configmap with spec.configMap",
            serde_json::to_value(other).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
        )),
    }
}

/// The running registry a CatalogSource points at: `spec.address` of a `grpc` source without
/// `spec.image` (OLM ignores the address when an image is set). Pure.
pub(crate) fn registry_address(cs: &CatalogSource) -> Option<&str> {
    let image_set = cs.spec.image.as_deref().is_some_and(|i| !i.trim().is_empty());
    (cs.spec.source_type == SourceType::Grpc && !image_set)
        .then(|| cs.spec.address.as_deref().map(str::trim).filter(|a| !a.is_empty()))
        .flatten()
}

/// The CatalogSources of `sources` whose `spec.address` names Service `namespace/service`
/// ([`super::registry_services::service_address`]): reloaded when that Service's endpoints change, so that a registry
/// pod replaced behind it (OLM's e2e `MagicCatalog.UpdateCatalog`) is read again at once, as
/// OLM's catalog operator does on its gRPC connection's state change.
pub fn sources_at_service(
    sources: &kube::runtime::reflector::Store<CatalogSource>,
    namespace: &str,
    service: &str,
) -> Vec<kube::runtime::reflector::ObjectRef<CatalogSource>> {
    sources
        .state()
        .iter()
        .filter(|cs| {
            registry_address(cs)
                .and_then(super::registry_services::service_address)
                .is_some_and(|s| s.service == service && s.namespace == namespace)
        })
        .map(|cs| kube::runtime::reflector::ObjectRef::from_obj(cs.as_ref()))
        .collect()
}

fn connection(state: &str, now: &Time, connected: bool) -> Option<GrpcConnectionState> {
    Some(GrpcConnectionState {
        address: None,
        last_observed_state: state.into(),
        last_connect: connected.then(|| now.clone()),
    })
}

/// The status while the first pull of `image` runs: `CONNECTING` (§1.2), so that a slow pull is
/// visible. Pure.
pub(crate) fn connecting(image: &str, now: &Time) -> CatalogSourceStatus {
    CatalogSourceStatus {
        message: Some(format!("pulling {image}")),
        connection_state: connection("CONNECTING", now, true),
        ..Default::default()
    }
}

/// The status of CatalogSource `ns/name` after a load that gave `loaded` (a catalog, or the
/// error), with the poll interval's problem `interval_error` (then the message is it, with
/// reason `InvalidIntervalError`, as OLM writes them), and when to poll again: every
/// `interval`, a failing image sooner (at most 30 s) but not in a tight loop. Pure.
pub(crate) fn decide(
    ns: &str,
    name: &str,
    loaded: &Result<LoadedIndex, CatalogLoadError>,
    interval: Duration,
    interval_error: Option<&str>,
    now: &Time,
) -> CatalogDecision {
    match loaded {
        Ok(l) => {
            let count = l.index.packages().len();
            let mut message = match interval_error {
                Some(e) => e.to_string(),
                None => format!("{count} packages from {}@{}", l.image, l.digest),
            };
            if let Some(invalid) = l.index.invalid() {
                message = format!("{message}; the catalog is invalid: {invalid}");
            }
            let status = CatalogSourceStatus {
                message: Some(message),
                connection_state: connection("READY", now, true),
                latest_image_registry_poll: Some(now.clone()),
                resolved_image: l.config_map.is_none().then(|| format!("{}@{}", image_repository(&l.image), l.digest)),
                config_map_reference: l.config_map.clone(),
                resolved_digest: Some(l.digest.clone()),
                package_count: Some(count as i64),
                reason: interval_error.map(|_| reason::INVALID_INTERVAL_ERROR.to_string()),
                ..Default::default()
            };
            CatalogDecision { status, requeue: interval }
        }
        Err(error) => {
            let status = CatalogSourceStatus {
                message: Some(format!("catalog source {ns}/{name}: {error}")),
                reason: Some(error.reason().into()),
                connection_state: connection("TRANSIENT_FAILURE", now, false),
                latest_image_registry_poll: Some(now.clone()),
                ..Default::default()
            };
            CatalogDecision { status, requeue: interval.min(Duration::from_secs(30)) }
        }
    }
}

/// Whether this pass only says `CONNECTING`: the first contact with an image source (no status
/// yet, nothing known in the store), so that a slow first pull is visible (§1.2). The next pass,
/// requeued at once, pulls. Pure.
fn first_contact(cs: &CatalogSource, known: bool) -> Option<&str> {
    let Source::Image(image) = source(cs) else { return None };
    let connected = cs.status.as_ref().and_then(|s| s.connection_state.as_ref()).is_some();
    (!connected && !known).then_some(image)
}

/// Loads the catalog, records it in the store (telling the Subscriptions when it changed) and
/// writes the status once: `CONNECTING` on first contact ([`first_contact`]), else the result.
pub(super) async fn reconcile(cs: Arc<CatalogSource>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = cs.metadata.namespace.clone().unwrap_or_default();
    let name = cs.metadata.name.clone().unwrap_or_default();
    let key = (ns.clone(), name.clone());
    let api: Api<CatalogSource> = Api::namespaced(ctx.client.clone(), &ns);
    if let Some(image) = first_contact(&cs, ctx.catalogs.get(&key).is_some()) {
        apply_typed_status(&api, &cs, &connecting(image, &now_time())).await?;
        ctx.catalogs.loading(&key);
        return Ok(Action::requeue(Duration::ZERO));
    }
    let (interval, interval_error) = cs.poll_period();
    let interval_error = interval_error.map(|e| e.olm_message());
    let loaded = match source(&cs) {
        Source::Unsupported(message) => Err(CatalogLoadError::Unsupported(message)),
        // A running registry (`opm serve`): read it through OLM's gRPC API.
        Source::Address(address) => load_address(&ctx, &key, &cs, address).await,
        Source::ConfigMap(name) => load_config_map(&ctx, &key, &cs, name).await,
        Source::Image(image) => load(&ctx, &key, &cs, &ns, image).await,
    };
    record(&ctx, &key, &loaded);
    let registry = registry(&ctx, &cs, &key).await?;
    let decision = decide(&ns, &name, &loaded, interval, interval_error.as_deref(), &now_time());
    apply_typed_status(&api, &cs, &with_registry(decision.status, registry)).await?;
    Ok(Action::requeue(decision.requeue))
}

/// What serving a CatalogSource's registry gives its status ([`registry`], [`with_registry`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RegistryOutcome {
    /// Not served (`--registry-listen` unset, nothing loaded, an invalid catalog).
    Off,
    /// `status.registryService` and `connectionState.address` to write.
    Served {
        /// `status.registryService`.
        status: RegistryServiceStatus,
        /// `status.connectionState.address`.
        address: String,
    },
    /// Not served, for the reason given (added to `status.message`).
    Failed(String),
}

/// Serves `cs`'s loaded catalog (key `key`) over gRPC when [`super::Options::registry`] is on:
/// its listener, Service and EndpointSlice ([`super::registry_services`]); for a `spec.address`
/// source only the status OLM writes.
///
/// # Errors
/// An API call failed (the reconcile is retried).
async fn registry(ctx: &Context, cs: &CatalogSource, key: &(String, String)) -> Result<RegistryOutcome, Error> {
    let Some(opts) = ctx.options.registry else { return Ok(RegistryOutcome::Off) };
    let served = match source(cs) {
        Source::Unsupported(_) => return Ok(RegistryOutcome::Off),
        Source::Address(address) => {
            let previous = cs.status.as_ref().and_then(|s| s.registry_service.as_ref());
            let status = registry_services::address_status(previous, &now_time());
            return Ok(RegistryOutcome::Served { status, address: address.to_string() });
        }
        Source::ConfigMap(_) | Source::Image(_) => {
            ctx.catalogs.get(key).and_then(|s| s.index().and_then(|l| l.served.as_ref().and_then(|s| s.index.clone())))
        }
    };
    let Some(catalog) = served else { return Ok(RegistryOutcome::Off) };
    let port = match ctx.registry_servers.ensure(opts.listen, key, catalog).await {
        Ok(port) => port,
        Err(e) => return Ok(RegistryOutcome::Failed(format!("cannot serve the registry on {}: {e}", opts.listen))),
    };
    match registry_services::apply_objects(&ctx.client, cs, opts.advertise, port).await {
        Ok(created) => {
            let (status, address) = registry_services::registry_status(cs, created);
            Ok(RegistryOutcome::Served { status, address })
        }
        Err(registry_services::RegistryServiceError::Api(e)) => Err(e),
        Err(e) => Ok(RegistryOutcome::Failed(e.to_string())),
    }
}

/// `status` with what [`registry`] gave: `registryService` and `connectionState.address`, or
/// the reason in the message. Pure.
pub(crate) fn with_registry(mut status: CatalogSourceStatus, registry: RegistryOutcome) -> CatalogSourceStatus {
    match registry {
        RegistryOutcome::Off => {}
        RegistryOutcome::Served { status: service, address } => {
            status.registry_service = Some(service);
            if let Some(c) = status.connection_state.as_mut() {
                c.address = Some(address);
            }
        }
        RegistryOutcome::Failed(reason) => {
            status.message = Some(match status.message.take() {
                Some(m) => format!("{m}; registry not served: {reason}"),
                None => format!("registry not served: {reason}"),
            });
        }
    }
    status
}

/// Records a load of `key` in the store, and re-reconciles the Subscriptions when what they show
/// or resolve against changed.
fn record(ctx: &Context, key: &(String, String), loaded: &Result<LoadedIndex, CatalogLoadError>) {
    let catalog = format!("{}/{}", key.0, key.1);
    let change = match loaded {
        Ok(l) => ctx.catalogs.ready(key, l.clone()),
        Err(error) => {
            tracing::warn!(%catalog, message = %error, "catalog not loaded");
            ctx.catalogs.failed(key, error.to_string())
        }
    };
    if let (Ok(l), CatalogChange::NewContent) = (loaded, change) {
        tracing::info!(%catalog, digest = %l.digest, packages = l.index.packages().len(), "catalog loaded");
    }
    if change != CatalogChange::None {
        ctx.resync_subscriptions();
    }
}

fn image_repository(image: &str) -> String {
    parse_reference(image).map(|r| format!("{}/{}", r.registry(), r.repository())).unwrap_or_else(|_| image.to_string())
}

/// Loads a catalog from a running registry at `address` ([`crate::catalog::grpc::load_registry`]),
/// a Service in the cluster DNS form dialed at its ClusterIP
/// ([`super::registry_services::dial_address`]); the "image" shown is `grpc://<address>` and the
/// digest is that of the catalog's content.
async fn load_address(
    ctx: &Context,
    key: &(String, String),
    cs: &CatalogSource,
    address: &str,
) -> Result<LoadedIndex, CatalogLoadError> {
    let dial = super::registry_services::dial_address(&ctx.client, address).await;
    let loaded = crate::catalog::grpc::load_registry_at(address, &dial).await?;
    let read = Read::address(address, loaded.digest);
    Ok(loaded_index(ctx, key, cs, read, loaded.config).await)
}

/// Loads a ConfigMap catalog (`configmap` / `internal` source) from ConfigMap `name` in the
/// CatalogSource's namespace ([`super::configmap_catalogs::read`]); the "image" shown is
/// `configmap://<namespace>/<name>` and the digest is that of its data.
async fn load_config_map(
    ctx: &Context,
    key: &(String, String),
    cs: &CatalogSource,
    name: &str,
) -> Result<LoadedIndex, CatalogLoadError> {
    let owner = super::configmap_catalogs::source_owner(cs);
    let read = super::configmap_catalogs::read(&ctx.client, &key.0, name, &owner, now_time()).await?;
    // `lastConnect` (now, when the status is written) must come after the ConfigMap's change in
    // the status' whole seconds, as clients compare them (OLM's e2e suite waits for
    // `lastConnect` after `configMapReference.lastUpdateTime`): a change seen within its own
    // second is loaded at the next one.
    if let Some(changed) = read.reference.last_update_time.as_ref() {
        let next = changed.0.as_second() + 1;
        let wait_ms = (next * 1000 - jiff::Timestamp::now().as_millisecond()).clamp(0, 1000);
        tokio::time::sleep(std::time::Duration::from_millis(wait_ms as u64)).await;
    }
    let read_as = Read::config_map(&key.0, name, read.digest, read.reference);
    Ok(loaded_index(ctx, key, cs, read_as, read.config).await)
}

/// Where a catalog was read from: the image shown, the content digest, the ConfigMap, and the
/// package names the server OLM runs for such a source accepts ([`PackageNames`]).
struct Read {
    image: String,
    digest: String,
    config_map: Option<crate::api::catalogsource::ConfigMapResourceReference>,
    package_names: PackageNames,
}

impl Read {
    /// A file-based catalog image: opm serve refuses a package name that is not a DNS-1123 label.
    fn image(image: &str, digest: String) -> Read {
        Read { image: image.to_string(), digest, config_map: None, package_names: PackageNames::Dns1123Label }
    }

    /// A `spec.address` registry (shown as `grpc://<address>`): it serves what it holds, a
    /// SQLite-backed one any package name.
    fn address(address: &str, digest: String) -> Read {
        let image = format!("grpc://{address}");
        Read { image, digest, config_map: None, package_names: PackageNames::NonEmpty }
    }

    /// ConfigMap `namespace/name` (shown as `configmap://<namespace>/<name>`): OLM's
    /// configmap-server loads its packages into SQLite whatever their names.
    fn config_map(
        namespace: &str,
        name: &str,
        digest: String,
        reference: crate::api::catalogsource::ConfigMapResourceReference,
    ) -> Read {
        let image = format!("configmap://{namespace}/{name}");
        Read { image, digest, config_map: Some(reference), package_names: PackageNames::NonEmpty }
    }
}

/// The resolver's index of catalog `config` read as `read`: marked invalid, with every
/// validation error, when the catalog breaks a rule of the server OLM runs for such a source.
/// Pure.
fn resolver_index(config: &crate::catalog::model::DeclarativeConfig, read: &Read) -> CatalogIndex {
    let index = CatalogIndex::from_config(config);
    match crate::catalog::validate::validate_with(config, read.package_names) {
        Ok(()) => index,
        Err(errors) => index.with_invalid(format!("{}@{}: {errors}", read.image, read.digest)),
    }
}

/// The [`LoadedIndex`] of a catalog `config` read as `read` for CatalogSource `cs` (key `key`):
/// its resolver index (marked invalid with the validation errors, if any), its image-less
/// bundles, its discovery view; freed memory is returned afterwards.
async fn loaded_index(
    ctx: &Context,
    key: &(String, String),
    cs: &CatalogSource,
    read: Read,
    config: crate::catalog::model::DeclarativeConfig,
) -> LoadedIndex {
    let index = resolver_index(&config, &read);
    let inline = Arc::new(inline_bundles(&config));
    let served = served(ctx, key, &read, config);
    let _ = tokio::task::spawn_blocking(crate::memory::return_freed_memory).await;
    LoadedIndex {
        image: read.image,
        digest: read.digest,
        priority: priority(cs),
        index: Arc::new(index),
        served,
        inline,
        config_map: read.config_map,
    }
}

/// The discovery view of a loaded catalog (when [`super::Options::discovery`] is on): the one
/// already held when the digest `read` is what `key` has loaded, else built from `config`
/// (consumed) with the package names `read` allows.
fn served(
    ctx: &Context,
    key: &(String, String),
    read: &Read,
    config: crate::catalog::model::DeclarativeConfig,
) -> Option<Arc<crate::discovery::served::ServedCatalog>> {
    let digest = read.digest.as_str();
    if !ctx.options.discovery && ctx.options.registry.is_none() {
        return None;
    }
    if let Some(held) = ctx
        .catalogs
        .get(key)
        .and_then(|s| s.index().and_then(|l| l.served.clone()))
        .filter(|s| s.content.digest() == digest)
    {
        return Some(held);
    }
    let name = format!("{}/{}", key.0, key.1);
    let keep_index = ctx.options.registry.is_some();
    Some(Arc::new(crate::discovery::served::ServedCatalog::build_keeping(
        &name,
        config,
        digest,
        std::time::SystemTime::now(),
        keep_index,
        read.package_names,
    )))
}

/// What `key` holds loaded when it was read from `image` at `digest`: a poll that finds the tag
/// unchanged (and a retry after a failed status write) reuses it instead of reading and parsing
/// the catalog again from the cache, which cost a full parse per poll.
fn held_load(ctx: &Context, key: &(String, String), image: &str, digest: &str) -> Option<LoadedIndex> {
    ctx.catalogs.get(key)?.index().filter(|l| l.image == image && l.digest == digest).cloned()
}

/// `spec.priority` as [`LoadedIndex::priority`] (0 when unset, clamped to `i32`).
fn priority(cs: &CatalogSource) -> i32 {
    cs.spec.priority.unwrap_or(0).clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// Loads CatalogSource `cs` (key `ns/name`) from `image` into a [`LoadedIndex`]: the reconciler
/// with `spec.image`, a standby replica with `status.resolvedImage` ([`mirror`]).
async fn load(
    ctx: &Context,
    key: &(String, String),
    cs: &CatalogSource,
    ns: &str,
    image: &str,
) -> Result<LoadedIndex, CatalogLoadError> {
    let reference =
        parse_reference(image).map_err(|source| CatalogLoadError::Reference { image: image.to_string(), source })?;
    let registry = registry_for(ctx, ns, cs.spec.secrets.as_deref().unwrap_or(&[])).await?;
    // The tag still at the digest loaded: keep what is held (one HEAD request, no parse).
    let digest = registry.resolve_digest(&reference).await.map_err(CatalogImageError::from)?;
    if let Some(held) = held_load(ctx, key, image, &digest) {
        return Ok(LoadedIndex { priority: priority(cs), ..held });
    }
    let cache = ctx.options.catalog_cache.as_ref().map(CatalogCache::new);
    let started = std::time::Instant::now();
    let loaded = load_catalog_image(&registry, &reference, cache.as_ref()).await?;
    ctx.metrics.observe_catalog_pull(
        &format!("{ns}/{}", cs.metadata.name.as_deref().unwrap_or("")),
        started.elapsed(),
        loaded.size_bytes,
    );
    let read = Read::image(image, loaded.digest);
    Ok(loaded_index(ctx, key, cs, read, loaded.config).await)
}

/// What a standby replica loads to serve discovery ([`mirror_once`]): the CatalogSources whose
/// `status.resolvedDigest` (written by the leader) is not the digest `have` holds for them. Pure.
pub(crate) fn to_mirror(
    sources: &[Arc<CatalogSource>],
    have: impl Fn(&(String, String)) -> Option<String>,
) -> Vec<&Arc<CatalogSource>> {
    sources
        .iter()
        .filter(|cs| {
            let key = (cs.metadata.namespace.clone().unwrap_or_default(), cs.metadata.name.clone().unwrap_or_default());
            let want = cs.status.as_ref().and_then(|s| s.resolved_digest.as_deref()).filter(|d| !d.is_empty());
            want.is_some_and(|w| have(&key).as_deref() != Some(w))
        })
        .collect()
}

/// A standby replica's catalog loading (`capstan controller --leader-elect` while another
/// replica leads), so that every replica serves the same discovery content: each CatalogSource
/// whose `status.resolvedDigest` differs from what `ctx.catalogs` holds is loaded by that digest
/// (`status.resolvedImage`, or `spec.address` for a running registry) into `ctx.catalogs`.
/// Writes nothing to the API server; a failed load is logged and tried again on the next call.
pub async fn mirror_once(ctx: &Context, sources: &[Arc<CatalogSource>]) {
    for cs in to_mirror(sources, |k| ctx.catalogs.get(k).and_then(|s| s.index().map(|l| l.digest.clone()))) {
        let key = (cs.metadata.namespace.clone().unwrap_or_default(), cs.metadata.name.clone().unwrap_or_default());
        let status = cs.status.clone().unwrap_or_default();
        let loaded = match source(cs) {
            Source::Address(address) => load_address(ctx, &key, cs, address).await,
            Source::ConfigMap(name) => load_config_map(ctx, &key, cs, name).await,
            _ => {
                let image = status.resolved_image.clone().unwrap_or_default();
                load(ctx, &key, cs, &key.0, &image).await
            }
        };
        match loaded {
            Ok(l) => {
                tracing::info!(catalog = %format!("{}/{}", key.0, key.1), digest = %l.digest, "catalog loaded (standby: the leader's resolvedDigest)");
                ctx.catalogs.ready(&key, l);
            }
            Err(message) => {
                tracing::warn!(catalog = %format!("{}/{}", key.0, key.1), %message, "standby could not load the leader's catalog digest; retrying")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogSourceSpec;

    fn cs() -> CatalogSource {
        CatalogSource::new("c", CatalogSourceSpec::default())
    }

    #[test]
    fn an_address_is_used_only_by_grpc_sources_without_an_image() {
        let mut c = cs();
        c.spec.source_type = SourceType::Grpc;
        c.spec.address = Some(" 127.0.0.1:50051 ".into());
        assert_eq!(registry_address(&c), Some("127.0.0.1:50051"));
        assert_eq!(source(&c), Source::Address("127.0.0.1:50051"));
        c.spec.image = Some("quay.io/x/catalog:latest".into());
        assert_eq!(registry_address(&c), None, "OLM ignores the address when an image is set");
        c.spec.image = None;
        c.spec.address = Some("".into());
        assert!(matches!(source(&c), Source::Unsupported(m) if m.contains("spec.address")));
    }

    #[test]
    fn a_standby_loads_what_the_leader_resolved_and_it_lacks() {
        let with = |name: &str, digest: Option<&str>| {
            let mut c = cs();
            c.metadata.name = Some(name.into());
            c.metadata.namespace = Some("olm".into());
            c.status = Some(CatalogSourceStatus { resolved_digest: digest.map(String::from), ..Default::default() });
            Arc::new(c)
        };
        let sources = vec![
            with("same", Some("sha256:a")),
            with("new", Some("sha256:b")),
            with("unloaded", Some("sha256:c")),
            with("failing", None),
        ];
        let have = |k: &(String, String)| match k.1.as_str() {
            "same" => Some("sha256:a".to_string()),
            "new" => Some("sha256:old".to_string()),
            _ => None,
        };
        let names: Vec<&str> =
            to_mirror(&sources, have).iter().map(|c| c.metadata.name.as_deref().unwrap_or("")).collect();
        assert_eq!(names, ["new", "unloaded"]);
    }

    #[test]
    fn only_the_first_contact_with_an_image_says_connecting() {
        let mut c = cs();
        c.spec.source_type = SourceType::Grpc;
        c.spec.image = Some("r/c:1".into());
        assert_eq!(first_contact(&c, false), Some("r/c:1"));
        assert_eq!(first_contact(&c, true), None, "the store knows it: this pass pulls");
        let mut seen = c.clone();
        seen.status = Some(connecting("r/c:1", &Time("2026-01-01T00:00:00Z".parse().unwrap())));
        assert_eq!(first_contact(&seen, false), None, "a restarted controller pulls at once");
        let mut address = cs();
        address.spec.source_type = SourceType::Grpc;
        address.spec.address = Some("127.0.0.1:50051".into());
        assert_eq!(first_contact(&address, false), None, "a running registry is read, not pulled");
        assert_eq!(first_contact(&cs(), false), None, "nothing to pull: the status says why at once");
    }

    #[test]
    fn the_registry_adds_its_service_and_address_or_says_why_not() {
        let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let ready = CatalogSourceStatus {
            message: Some("2 packages".into()),
            connection_state: connection("READY", &now, true),
            ..Default::default()
        };
        assert_eq!(with_registry(ready.clone(), RegistryOutcome::Off), ready, "off: the status as before");
        let mut c = cs();
        c.metadata.namespace = Some("olm".into());
        let (service, address) = registry_services::registry_status(&c, Some(now.clone()));
        let served = with_registry(ready.clone(), RegistryOutcome::Served { status: service.clone(), address });
        assert_eq!(served.registry_service, Some(service));
        assert_eq!(served.connection_state.and_then(|c| c.address).as_deref(), Some("c.olm.svc:50051"));
        let failed = with_registry(ready, RegistryOutcome::Failed("Service olm/c exists".into()));
        assert_eq!(failed.message.as_deref(), Some("2 packages; registry not served: Service olm/c exists"));
        assert!(failed.registry_service.is_none());
    }

    #[test]
    fn resolved_image_drops_tag() {
        assert_eq!(image_repository("127.0.0.1:5000/x/catalog:latest"), "127.0.0.1:5000/x/catalog");
    }

    #[test]
    fn catalog_status_after_a_load() {
        let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let l = LoadedIndex {
            image: "127.0.0.1:5000/c:latest".into(),
            digest: "sha256:ab".into(),
            priority: 0,
            index: Arc::new(CatalogIndex::default()),
            served: None,
            inline: Default::default(),
            config_map: None,
        };
        let from_config_map = LoadedIndex {
            image: "configmap://ns/cat".into(),
            config_map: Some(crate::api::catalogsource::ConfigMapResourceReference {
                name: "cat".into(),
                namespace: "ns".into(),
                resource_version: Some("7".into()),
                ..Default::default()
            }),
            ..l.clone()
        };
        let d = decide("ns", "c", &Ok(from_config_map), Duration::from_secs(600), None, &now);
        assert_eq!(d.status.resolved_image, None, "a ConfigMap is no image");
        assert_eq!(
            d.status.config_map_reference.as_ref().map(|r| (r.name.as_str(), r.resource_version.as_deref())),
            Some(("cat", Some("7")))
        );
        let d = decide("ns", "c", &Ok(l), Duration::from_secs(600), Some("bad interval"), &now);
        assert_eq!(d.requeue, Duration::from_secs(600));
        assert_eq!(d.status.connection_state.as_ref().map(|c| c.last_observed_state.as_str()), Some("READY"));
        assert_eq!(d.status.resolved_image.as_deref(), Some("127.0.0.1:5000/c@sha256:ab"));
        assert_eq!(d.status.package_count, Some(0));
        assert_eq!(d.status.message.as_deref(), Some("bad interval"), "OLM's message alone, as OLM writes it");
        assert_eq!(d.status.reason.as_deref(), Some("InvalidIntervalError"));
        let unauthorized: Result<LoadedIndex, _> = Err(CatalogLoadError::Unsupported("unauthorized".into()));
        let d = decide("ns", "c", &unauthorized, Duration::from_secs(600), None, &now);
        assert_eq!(d.requeue, Duration::from_secs(30), "a failing image is retried sooner");
        assert_eq!(
            d.status.connection_state.as_ref().map(|c| c.last_observed_state.as_str()),
            Some("TRANSIENT_FAILURE")
        );
        assert_eq!(
            (d.status.reason.as_deref(), d.status.message.as_deref()),
            (Some("SpecInvalidError"), Some("catalog source ns/c: unauthorized"))
        );
        assert!(d.status.resolved_digest.is_none(), "a failed load writes no digest (apply removes the old one)");
        assert_eq!(
            decide("ns", "c", &unauthorized, Duration::from_secs(10), None, &now).requeue,
            Duration::from_secs(10)
        );
        let c = connecting("r/c:1", &now);
        assert_eq!(
            (c.connection_state.as_ref().map(|c| c.last_observed_state.as_str()), c.message.as_deref()),
            (Some("CONNECTING"), Some("pulling r/c:1"))
        );
        assert!(c.reason.is_none() && c.resolved_digest.is_none());
        let bad = CatalogSource::new(
            "c",
            CatalogSourceSpec { source_type: SourceType::from("configmap"), ..Default::default() },
        );
        assert!(matches!(source(&bad), Source::Unsupported(m) if m.contains("spec.configMap is empty")));
        let unknown =
            CatalogSource::new("c", CatalogSourceSpec { source_type: SourceType::from("ftp"), ..Default::default() });
        assert!(matches!(source(&unknown), Source::Unsupported(m) if m.contains("not supported")));
        assert!(matches!(source(&cs()), Source::Unsupported(m) if m.contains("spec.image is empty")));
        let mut cm = bad.clone();
        cm.spec.config_map = Some("catalog".into());
        assert_eq!(source(&cm), Source::ConfigMap("catalog"));
        assert_eq!(first_contact(&cm, false), None, "a ConfigMap is read at once, not pulled");
    }

    /// The ConfigMap catalog of one package with one CSV (`version` 0.1.0) in channel `channel`:
    /// the CSV owns CRD `inses.example.com` when `owns`, else requires it (OLM's e2e `newCSV`).
    fn config_map_catalog(
        package: &str,
        csv: &str,
        channel: &str,
        owns: bool,
    ) -> crate::catalog::model::DeclarativeConfig {
        let crds = "- apiVersion: apiextensions.k8s.io/v1\n  kind: CustomResourceDefinition\n  metadata: {name: inses.example.com}\n  spec:\n    group: example.com\n    names: {kind: Ins, plural: inses, singular: ins, listKind: InsList}\n    scope: Namespaced\n    versions:\n    - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}\n";
        let crd_ref = "[{name: inses.example.com, version: v1, kind: Ins}]";
        let (owned, required) = if owns { (crd_ref, "[]") } else { ("[]", crd_ref) };
        let csvs = format!(
            "- apiVersion: operators.coreos.com/v1alpha1\n  kind: ClusterServiceVersion\n  metadata: {{name: {csv}}}\n  spec:\n    version: 0.1.0\n    installModes: [{{type: AllNamespaces, supported: true}}]\n    install: {{strategy: deployment, spec: {{deployments: []}}}}\n    customresourcedefinitions: {{owned: {owned}, required: {required}}}\n"
        );
        let packages = format!(
            "- {{packageName: {package}, defaultChannel: {channel}, channels: [{{name: {channel}, currentCSV: {csv}}}]}}"
        );
        let data = [
            (crate::bundle::configmap::KEY_CRDS, if owns { crds } else { "[]" }.to_string()),
            (crate::bundle::configmap::KEY_CSVS, csvs),
            (crate::bundle::configmap::KEY_PACKAGES, packages),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        crate::bundle::configmap::from_config_map(&data).expect("a valid ConfigMap catalog")
    }

    /// OLM's e2e "to an operator with dependencies from different CatalogSources with
    /// priorities": package names that are not DNS-1123 labels (`PkgMain-…`,
    /// `PackageDependent`) in ConfigMap catalogs, which OLM's configmap-server serves. The
    /// dependency comes from the catalog first by name, and gets OLM's Subscription name; the same
    /// catalog as a file-based image is invalid, as `opm serve` refuses it.
    #[test]
    fn config_map_catalogs_serve_package_names_that_are_not_dns_labels() {
        use crate::resolve::{CatalogInput, CatalogSourceKey, ResolveInput, SubscriptionRequest, resolve};
        let catalogs = [
            ("catsrc-main", config_map_catalog("PkgMain-x7k2q", "csv-main", "stable", false)),
            ("catsrc1", config_map_catalog("PackageDependent", "csv-right", "alpha", true)),
            ("catsrc2", config_map_catalog("PackageDependent", "csv-wrong", "alpha", true)),
        ];
        let reference = crate::api::catalogsource::ConfigMapResourceReference::default();
        let inputs = catalogs
            .iter()
            .map(|(name, cfg)| {
                let read = Read::config_map("ns", name, "sha256:1".into(), reference.clone());
                let index = resolver_index(cfg, &read);
                assert_eq!(index.invalid(), None, "{name}");
                CatalogInput { key: CatalogSourceKey::new("ns", *name), priority: 0, index: Arc::new(index) }
            })
            .collect();
        let sub = SubscriptionRequest {
            name: "sub-main".into(),
            namespace: "ns".into(),
            package: "PkgMain-x7k2q".into(),
            channel: Some("stable".into()),
            source: "catsrc-main".into(),
            source_namespace: "ns".into(),
            ..Default::default()
        };
        let out = resolve(&ResolveInput { catalogs: inputs, installed: vec![], subscriptions: vec![sub.clone()] });
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        let mut got: Vec<(&str, &str)> = out
            .resolved
            .iter()
            .map(|r| (r.bundle.as_str(), r.catalog.as_ref().map_or("", |c| c.name.as_str())))
            .collect();
        got.sort();
        assert_eq!(got, [("csv-main", "catsrc-main"), ("csv-right", "catsrc1")]);
        let deps = crate::controller::subscription::dependency_subscriptions(&out.resolved, &[sub]);
        assert_eq!(deps.iter().map(|d| d.name()).collect::<Vec<_>>(), ["PackageDependent-alpha-catsrc1-ns"]);
        assert_eq!(
            crate::install::component_label_key("PackageDependent", "ns"),
            "operators.coreos.com/PackageDependent.ns",
            "a label key may hold capitals, as OLM's does"
        );

        // Served as a PackageManifest named after the package, as packageserver does.
        let read = Read::config_map("ns", "catsrc1", "sha256:1".into(), reference);
        let served = crate::discovery::served::ServedCatalog::build_keeping(
            "ns/catsrc1",
            catalogs[1].1.clone(),
            "sha256:1",
            std::time::SystemTime::now(),
            true,
            read.package_names,
        );
        assert_eq!(served.packages.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["PackageDependent"]);
        assert!(served.index.is_some());

        // The same catalog in a file-based catalog image: refused, as `opm serve` refuses it.
        let image = resolver_index(&catalogs[1].1, &Read::image("r/catalog:1", "sha256:2".into()));
        let why = image.invalid().expect("invalid as an image");
        assert!(why.starts_with("r/catalog:1@sha256:2: invalid catalog: 1 error in 1 package"), "{why}");
        assert!(why.contains("invalid package name \"PackageDependent\""), "{why}");
        // A `spec.address` registry serves what it holds.
        let address = resolver_index(&catalogs[1].1, &Read::address("10.0.0.1:50051", "sha256:3".into()));
        assert_eq!(address.invalid(), None);
    }
}
