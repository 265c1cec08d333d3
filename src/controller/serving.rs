//! The discovery servers of `capstan controller` fed from the controllers' [`CatalogStore`]
//! (moved here from `discovery::served`, which no longer imports the controller): the serving
//! certificate, the packages API and catalog content listeners ([`crate::discovery::apiserver`],
//! [`crate::discovery::content`]), a CatalogSource reflector, and a new
//! [`crate::discovery::served::snapshot`] whenever a CatalogSource or a held digest changes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};

use super::{CatalogStore, Context};
use crate::api::CatalogSource;
use crate::discovery::ServeError;
use crate::discovery::apiserver::{self, PackageCatalogs, ServingIdentity};
use crate::discovery::content::ContentCatalogs;
use crate::discovery::served::{self, DiscoveryOptions};

/// What changes a snapshot: each CatalogSource's resourceVersion and the digest held for it.
fn fingerprint(sources: &[Arc<CatalogSource>], store: &CatalogStore) -> Vec<(String, String, String, String)> {
    let mut fp: Vec<_> = sources
        .iter()
        .map(|cs| {
            let key = (cs.metadata.namespace.clone().unwrap_or_default(), cs.metadata.name.clone().unwrap_or_default());
            let digest = store
                .get(&key)
                .and_then(|s| s.index().and_then(|l| l.served.as_ref().map(|s| s.content.digest().to_string())))
                .unwrap_or_default();
            (key.0, key.1, cs.metadata.resource_version.clone().unwrap_or_default(), digest)
        })
        .collect();
    fp.sort();
    fp
}

/// Serves discovery until the process ends: the serving certificate and the APIService's
/// `caBundle` (when the packages API is on), the two listeners, the CatalogSource reflector and
/// the snapshot swaps; while `leading` is false, standby loading into `ctx.catalogs`
/// ([`super::mirror_once`]). `ctx` is a context over the store the controllers fill.
///
/// # Errors
/// [`ServeError`] when the certificate cannot be had or a listener cannot start; nothing is served then.
pub async fn serve_discovery(
    ctx: Arc<Context>,
    opts: DiscoveryOptions,
    leading: Arc<AtomicBool>,
) -> Result<(), ServeError> {
    let client = ctx.client.clone();
    let packages = PackageCatalogs::default();
    let content = ContentCatalogs::default();
    if let Some(addr) = opts.packages_api {
        let cert = served::ensure_serving_cert(&client, &opts.service_namespace, &opts.service_name).await?;
        if let Some(name) = &opts.api_service {
            match served::set_ca_bundle(&client, name, &cert.ca_pem).await {
                Ok(()) => tracing::info!(apiservice = %name, "APIService caBundle is the packages API's CA"),
                Err(e) => {
                    tracing::warn!(error = %e, "the API server cannot verify the packages API until the APIService has its caBundle")
                }
            }
        }
        let identity = ServingIdentity::Pem { cert_pem: cert.cert_pem.clone(), key_pem: cert.key_pem.clone() };
        let bound =
            apiserver::serve(addr, identity, client.clone(), packages.clone(), opts.global_namespace.clone()).await?;
        tracing::info!(addr = %bound, service = %format!("{}/{}", opts.service_namespace, opts.service_name), "serving packages.operators.coreos.com/v1");
    }
    if let Some(addr) = opts.catalog_content {
        let bound = crate::discovery::content::serve(addr, content.clone()).await.map_err(ServeError::Content)?;
        tracing::info!(addr = %bound, "serving catalog content (/catalogs/NAMESPACE/NAME/api/v1/all, …/metas)");
    }
    let (reader, writer) = reflector::store();
    let watch = watcher(Api::<CatalogSource>::all(client.clone()), watcher::Config::default())
        .backoff(super::watch_backoff())
        .reflect(writer);
    tokio::spawn(watch.for_each(|_| futures::future::ready(())));
    let mut last = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let sources = reader.state();
        if !leading.load(Ordering::Relaxed) {
            super::mirror_once(&ctx, &sources).await;
        }
        let fp = fingerprint(&sources, &ctx.catalogs);
        if fp == last {
            continue;
        }
        let (p, c) =
            served::snapshot(&sources, |k| ctx.catalogs.get(k).and_then(|s| s.index().and_then(|l| l.served.clone())));
        tracing::debug!(catalogs = p.len(), "discovery snapshot");
        packages.set(p);
        content.replace_all(c);
        last = fp;
    }
}
