//! CatalogSource reconciler (`reference/olm-v0.md` §1.2): pulls `spec.image` by digest (pull
//! secrets from `spec.secrets` in the CatalogSource's namespace), keeps the loaded index in the
//! [`Context`], and writes `status.connectionState.lastObservedState` (CONNECTING while the first
//! pull runs, then READY or TRANSIENT_FAILURE) with `message`, `resolvedImage`, `resolvedDigest`,
//! `packageCount`. Requeued every
//! `spec.updateStrategy.registryPoll.interval` (15m by default); a new digest re-reconciles every
//! Subscription.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::Action;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{CatalogChange, Context, Error, LoadedIndex, apply_typed_status, now_time};
use crate::api::CatalogSource;
use crate::api::catalogsource::{CatalogSourceStatus, DEFAULT_REGISTRY_POLL, GrpcConnectionState, SourceType};
use crate::catalog::image::{CatalogCache, load_catalog_image};
use crate::oci::{BlobCache, ClientConfig, DockerConfig, Registry, parse_reference};
use crate::resolve::CatalogIndex;

/// The poll interval of a CatalogSource: `spec.updateStrategy.registryPoll.interval`, or 15m when
/// unset or invalid (the error message says so and is shown in status).
pub fn poll_interval(cs: &CatalogSource) -> (Duration, Option<String>) {
    match cs.spec.update_strategy.as_ref().and_then(|u| u.registry_poll.as_ref()) {
        Some(p) if p.interval.as_deref().is_some_and(|i| !i.trim().is_empty()) => match p.parse_interval() {
            Ok(d) => (d, None),
            Err(e) => (DEFAULT_REGISTRY_POLL, Some(e.to_string())),
        },
        _ => (DEFAULT_REGISTRY_POLL, None),
    }
}

/// Builds a registry client for `namespace` with the credentials of the named pull secrets
/// (plain HTTP is automatic for loopback registries).
pub(crate) async fn registry_for(ctx: &Context, namespace: &str, secrets: &[String]) -> Result<Registry, String> {
    let mut auth: Option<DockerConfig> = None;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    for name in secrets {
        let source = format!("secret {namespace}/{name}");
        let secret = match api.get_opt(name).await {
            Ok(Some(s)) => s,
            Ok(None) => return Err(format!("pull {source} (spec.secrets) does not exist; create it or remove it from spec.secrets")),
            Err(e) => return Err(format!("reading pull {source}: {e}")),
        };
        let data = secret.data.unwrap_or_default();
        let cfg = DockerConfig::from_pull_secret(secret.type_.as_deref().unwrap_or(""), |k| data.get(k).map(|b| b.0.as_slice()), &source)
            .map_err(|e| e.to_string())?;
        match &mut auth {
            Some(a) => a.merge(cfg),
            None => auth = Some(cfg),
        }
    }
    Ok(Registry::new(ClientConfig {
        auth,
        cache: Some(BlobCache::new(BlobCache::default_root())),
        quiet: true,
        insecure_registries: ctx.options.insecure_registries.clone(),
        ..Default::default()
    }))
}

/// What the CatalogSource reconciler writes and does after a load ([`decide`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CatalogDecision {
    /// The status to write.
    pub status: CatalogSourceStatus,
    /// When to look again.
    pub requeue: Duration,
}

/// Why a CatalogSource's spec cannot be loaded at all (nothing to pull), as the status message.
fn unsupported(cs: &CatalogSource) -> Option<String> {
    if !matches!(cs.spec.source_type, SourceType::Grpc | SourceType::Image) {
        return Some(format!(
            "spec.sourceType {:?} is not supported by capstan; use grpc or image with spec.image",
            serde_json::to_value(&cs.spec.source_type).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
        ));
    }
    if cs.spec.image.as_deref().unwrap_or("").trim().is_empty() {
        return Some("spec.image is empty; set it to the catalog image reference (address-only grpc sources are not supported)".into());
    }
    None
}

fn connection(state: &str, now: &Time, connected: bool) -> Option<GrpcConnectionState> {
    Some(GrpcConnectionState { address: None, last_observed_state: state.into(), last_connect: connected.then(|| now.clone()) })
}

/// The status of CatalogSource `ns/name` after a load that gave `loaded` (a catalog, or the
/// error), with the poll interval's problem `interval_error`, and when to poll again: every
/// `interval`, a failing image sooner (at most 30 s) but not in a tight loop. Pure.
pub(crate) fn decide(ns: &str, name: &str, loaded: &Result<LoadedIndex, String>, interval: Duration, interval_error: Option<&str>, now: &Time) -> CatalogDecision {
    match loaded {
        Ok(l) => {
            let count = l.index.packages().len();
            let mut message = format!("{count} packages from {}@{}", l.image, l.digest);
            if let Some(e) = interval_error {
                message = format!("{message}; {e}");
            }
            if let Some(invalid) = l.index.invalid() {
                message = format!("{message}; the catalog is invalid: {invalid}");
            }
            let status = CatalogSourceStatus {
                message: Some(message),
                connection_state: connection("READY", now, true),
                latest_image_registry_poll: Some(now.clone()),
                resolved_image: Some(format!("{}@{}", image_repository(&l.image), l.digest)),
                resolved_digest: Some(l.digest.clone()),
                package_count: Some(count as i64),
                ..Default::default()
            };
            CatalogDecision { status, requeue: interval }
        }
        Err(message) => {
            let status = CatalogSourceStatus {
                message: Some(format!("catalog source {ns}/{name}: {message}")),
                reason: Some("ImagePullFailed".into()),
                connection_state: connection("TRANSIENT_FAILURE", now, false),
                latest_image_registry_poll: Some(now.clone()),
                ..Default::default()
            };
            CatalogDecision { status, requeue: interval.min(Duration::from_secs(30)) }
        }
    }
}

pub(super) async fn reconcile(cs: Arc<CatalogSource>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = cs.metadata.namespace.clone().unwrap_or_default();
    let name = cs.metadata.name.clone().unwrap_or_default();
    let key = (ns.clone(), name.clone());
    let api: Api<CatalogSource> = Api::namespaced(ctx.client.clone(), &ns);
    let (interval, interval_error) = poll_interval(&cs);
    let loaded = match unsupported(&cs) {
        Some(message) => Err(message),
        None => {
            let image = cs.spec.image.clone().unwrap_or_default();
            // First contact: say CONNECTING while the image is pulled (§1.2), so a slow pull is visible.
            if cs.status.as_ref().and_then(|s| s.connection_state.as_ref()).is_none() {
                ctx.catalogs.loading(&key);
                let now = now_time();
                let connecting = CatalogSourceStatus { message: Some(format!("pulling {image}")), connection_state: connection("CONNECTING", &now, true), ..Default::default() };
                apply_typed_status(&api, &cs, &connecting).await?;
            }
            load(&ctx, &cs, &ns, &image).await
        }
    };
    let change = match &loaded {
        Ok(l) => ctx.catalogs.ready(&key, l.clone()),
        Err(message) => {
            tracing::warn!(catalog = %format!("{ns}/{name}"), %message, "catalog not loaded");
            ctx.catalogs.failed(&key, message.clone())
        }
    };
    if let (Ok(l), CatalogChange::NewContent) = (&loaded, change) {
        tracing::info!(catalog = %format!("{ns}/{name}"), digest = %l.digest, packages = l.index.packages().len(), "catalog loaded");
    }
    // Subscriptions report catalog health and resolve against the content: tell them.
    if change != CatalogChange::None {
        ctx.resync_subscriptions();
    }
    let decision = decide(&ns, &name, &loaded, interval, interval_error.as_deref(), &now_time());
    apply_typed_status(&api, &cs, &decision.status).await?;
    Ok(Action::requeue(decision.requeue))
}

fn image_repository(image: &str) -> String {
    parse_reference(image).map(|r| format!("{}/{}", r.registry(), r.repository())).unwrap_or_else(|_| image.to_string())
}

async fn load(ctx: &Context, cs: &CatalogSource, ns: &str, image: &str) -> Result<LoadedIndex, String> {
    let reference = parse_reference(image).map_err(|e| format!("spec.image {image:?}: {e}"))?;
    let registry = registry_for(ctx, ns, cs.spec.secrets.as_deref().unwrap_or(&[])).await?;
    let cache = ctx.options.catalog_cache.as_ref().map(CatalogCache::new);
    let started = std::time::Instant::now();
    let loaded = load_catalog_image(&registry, &reference, cache.as_ref()).await.map_err(|e| e.to_string())?;
    ctx.metrics.observe_catalog_pull(&format!("{ns}/{}", cs.metadata.name.as_deref().unwrap_or("")), started.elapsed(), loaded.size_bytes);
    let index = CatalogIndex::from_config(&loaded.config);
    let index = match crate::catalog::validate::validate(&loaded.config) {
        Ok(()) => index,
        Err(errors) => index.with_invalid(format!("{image}@{}: {errors}", loaded.digest)),
    };
    Ok(LoadedIndex {
        image: image.to_string(),
        digest: loaded.digest,
        priority: cs.spec.priority.unwrap_or(0).clamp(i32::MIN as i64, i32::MAX as i64) as i32,
        index: Arc::new(index),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogSourceSpec;
    use crate::api::catalogsource::{RegistryPoll, UpdateStrategy};

    fn cs(interval: Option<&str>) -> CatalogSource {
        CatalogSource::new(
            "c",
            CatalogSourceSpec {
                update_strategy: interval.map(|i| UpdateStrategy { registry_poll: Some(RegistryPoll { interval: Some(i.into()) }) }),
                ..Default::default()
            },
        )
    }

    #[test]
    fn poll_interval_defaults_to_15m_and_reports_bad_values() {
        assert_eq!(poll_interval(&cs(None)), (Duration::from_secs(900), None));
        assert_eq!(poll_interval(&cs(Some("10m"))), (Duration::from_secs(600), None));
        let (d, e) = poll_interval(&cs(Some("soon")));
        assert_eq!(d, Duration::from_secs(900));
        assert!(e.is_some_and(|e| e.contains("soon")));
    }

    #[test]
    fn resolved_image_drops_tag() {
        assert_eq!(image_repository("127.0.0.1:5000/x/catalog:latest"), "127.0.0.1:5000/x/catalog");
    }

    #[test]
    fn catalog_status_after_a_load() {
        let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let l = LoadedIndex { image: "127.0.0.1:5000/c:latest".into(), digest: "sha256:ab".into(), priority: 0, index: Arc::new(CatalogIndex::default()) };
        let d = decide("ns", "c", &Ok(l), Duration::from_secs(600), Some("bad interval"), &now);
        assert_eq!(d.requeue, Duration::from_secs(600));
        assert_eq!(d.status.connection_state.as_ref().map(|c| c.last_observed_state.as_str()), Some("READY"));
        assert_eq!(d.status.resolved_image.as_deref(), Some("127.0.0.1:5000/c@sha256:ab"));
        assert_eq!(d.status.package_count, Some(0));
        assert_eq!(d.status.message.as_deref(), Some("0 packages from 127.0.0.1:5000/c:latest@sha256:ab; bad interval"));
        assert!(d.status.reason.is_none());
        let d = decide("ns", "c", &Err("unauthorized".into()), Duration::from_secs(600), None, &now);
        assert_eq!(d.requeue, Duration::from_secs(30), "a failing image is retried sooner");
        assert_eq!(d.status.connection_state.as_ref().map(|c| c.last_observed_state.as_str()), Some("TRANSIENT_FAILURE"));
        assert_eq!((d.status.reason.as_deref(), d.status.message.as_deref()), (Some("ImagePullFailed"), Some("catalog source ns/c: unauthorized")));
        assert!(d.status.resolved_digest.is_none(), "a failed load writes no digest (apply removes the old one)");
        assert_eq!(decide("ns", "c", &Err("x".into()), Duration::from_secs(10), None, &now).requeue, Duration::from_secs(10));
        let bad = CatalogSource::new("c", CatalogSourceSpec { source_type: SourceType::from("configmap"), ..Default::default() });
        assert!(unsupported(&bad).is_some_and(|m| m.contains("not supported")));
        assert!(unsupported(&cs(None)).is_some_and(|m| m.contains("spec.image is empty")));
    }
}
