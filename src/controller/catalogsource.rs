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
use serde_json::json;

use super::{Context, Error, LoadedIndex, apply_status, now};
use crate::api::CatalogSource;
use crate::api::catalogsource::{DEFAULT_REGISTRY_POLL, SourceType};
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
        ..Default::default()
    }))
}

pub(super) async fn reconcile(cs: Arc<CatalogSource>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = cs.metadata.namespace.clone().unwrap_or_default();
    let name = cs.metadata.name.clone().unwrap_or_default();
    let key = (ns.clone(), name.clone());
    let api: Api<CatalogSource> = Api::namespaced(ctx.client.clone(), &ns);
    let (interval, interval_error) = poll_interval(&cs);
    let image = cs.spec.image.clone().unwrap_or_default();
    let loaded = if !matches!(cs.spec.source_type, SourceType::Grpc | SourceType::Image) {
        Err(format!(
            "spec.sourceType {:?} is not supported by capstan; use grpc or image with spec.image",
            serde_json::to_value(&cs.spec.source_type).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
        ))
    } else if image.trim().is_empty() && cs.spec.source_type == SourceType::Grpc && cs.spec.address.as_deref().is_some_and(|a| !a.trim().is_empty()) {
        // A running registry (`opm serve`): read it through OLM's gRPC API (issue 13).
        load_address(&cs, cs.spec.address.as_deref().unwrap_or_default().trim()).await
    } else if image.trim().is_empty() {
        Err("spec.image is empty; set it to the catalog image reference, or (sourceType grpc) spec.address to a running registry's host:port".into())
    } else {
        // First contact: say CONNECTING while the image is pulled (§1.2), so a slow pull is visible.
        let connected = cs.status.as_ref().and_then(|s| serde_json::to_value(s).ok()).is_some_and(|s| s["connectionState"]["lastObservedState"].is_string());
        if !connected {
            apply_status(&api, &cs, json!({"message": format!("pulling {image}"), "connectionState": {"lastObservedState": "CONNECTING", "lastConnect": now()}})).await?;
        }
        load(&ctx, &cs, &ns, &image).await
    };
    let status = match loaded {
        Ok(l) => {
            let count = l.index.packages().len();
            let new_digest = {
                let mut map = ctx.catalogs.lock().unwrap_or_else(|e| e.into_inner());
                let old = map.insert(key.clone(), l.clone());
                old.map(|o| o.digest != l.digest || o.priority != l.priority).unwrap_or(true)
            };
            let recovered = ctx.catalog_errors.lock().unwrap_or_else(|e| e.into_inner()).remove(&key).is_some();
            if recovered && !new_digest {
                let _ = ctx.resync_subscriptions.unbounded_send(());
            }
            if new_digest {
                tracing::info!(catalog = %format!("{ns}/{name}"), digest = %l.digest, packages = count, "catalog loaded");
                let _ = ctx.resync_subscriptions.unbounded_send(());
            }
            let mut message = format!("{count} packages from {}@{}", l.image, l.digest);
            if let Some(e) = &interval_error {
                message = format!("{message}; {e}");
            }
            if let Some(invalid) = l.index.invalid() {
                message = format!("{message}; the catalog is invalid: {invalid}");
            }
            json!({
                "message": message,
                "connectionState": {"lastObservedState": "READY", "lastConnect": now()},
                "latestImageRegistryPoll": now(),
                "resolvedImage": format!("{}@{}", image_repository(&l.image), l.digest),
                "resolvedDigest": l.digest,
                "packageCount": count,
            })
        }
        Err(message) => {
            tracing::warn!(catalog = %format!("{ns}/{name}"), %message, "catalog not loaded");
            // Subscriptions report catalog health: tell them when it changes.
            let changed = ctx.catalog_errors.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone(), message.clone()).as_ref() != Some(&message);
            if changed {
                let _ = ctx.resync_subscriptions.unbounded_send(());
            }
            json!({
                "message": format!("catalog source {ns}/{name}: {message}"),
                "reason": "ImagePullFailed",
                "connectionState": {"lastObservedState": "TRANSIENT_FAILURE"},
                "latestImageRegistryPoll": now(),
            })
        }
    };
    let failed = status["connectionState"]["lastObservedState"] != "READY";
    apply_status(&api, &cs, status).await?;
    // A failing image is retried sooner than the poll interval, but not in a tight loop.
    Ok(Action::requeue(if failed { interval.min(Duration::from_secs(30)) } else { interval }))
}

fn image_repository(image: &str) -> String {
    parse_reference(image).map(|r| format!("{}/{}", r.registry(), r.repository())).unwrap_or_else(|_| image.to_string())
}

/// Loads a catalog from a running registry at `address` ([`crate::catalog::grpc::load_registry`]);
/// the "image" shown is `grpc://<address>` and the digest is that of the catalog's content.
async fn load_address(cs: &CatalogSource, address: &str) -> Result<LoadedIndex, String> {
    let loaded = crate::catalog::grpc::load_registry(address).await.map_err(|e| e.to_string())?;
    let index = CatalogIndex::from_config(&loaded.config);
    let index = match crate::catalog::validate::validate(&loaded.config) {
        Ok(()) => index,
        Err(errors) => index.with_invalid(format!("{address}: {errors}")),
    };
    Ok(LoadedIndex {
        image: format!("grpc://{address}"),
        digest: loaded.digest,
        priority: cs.spec.priority.unwrap_or(0).clamp(i32::MIN as i64, i32::MAX as i64) as i32,
        index: Arc::new(index),
    })
}

async fn load(ctx: &Context, cs: &CatalogSource, ns: &str, image: &str) -> Result<LoadedIndex, String> {
    let reference = parse_reference(image).map_err(|e| format!("spec.image {image:?}: {e}"))?;
    let registry = registry_for(ctx, ns, cs.spec.secrets.as_deref().unwrap_or(&[])).await?;
    let cache = ctx.options.catalog_cache.as_ref().map(CatalogCache::new);
    let started = std::time::Instant::now();
    let loaded = load_catalog_image(&registry, &reference, cache.as_ref()).await.map_err(|e| e.to_string())?;
    crate::metrics::global().observe_catalog_pull(&format!("{ns}/{}", cs.metadata.name.as_deref().unwrap_or("")), started.elapsed(), loaded.size_bytes);
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
}
