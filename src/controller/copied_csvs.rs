//! Copied CSVs kept in step with their originals, as OLM's olm-operator keeps them
//! (`install::copied_csv` holds the rules; OLM v0.46.0 `syncCopyCSV`, `copyToNamespace`,
//! `syncCopiedCsv`). The CSV reconciler calls [`sync`] for an installed CSV on each of its
//! reconciles, [`reconcile_copy`] for a copy (which it does not otherwise reconcile), and
//! [`sync_after_delete`] when either is gone: a deleted original takes its copies with it, a
//! deleted copy is made again.
//!
//! Copies are read from the CSV controller's watch store (every CSV of the cluster); without it
//! (a reconcile run outside [`super::run`]) nothing is copied. The OLMConfig `cluster` is read
//! from the API server's watch cache.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use super::{Context, Error, kube_err};
use crate::api::ClusterServiceVersion;
use crate::api::olmconfig::{self, OlmConfig};
use crate::install::copied_csv::{copy_namespaces, differences, is_copiable, prototype, stale_copy};
use crate::install::{ANNOTATION_OPERATOR_NAMESPACE, ANNOTATION_TARGET_NAMESPACES, LABEL_COPIED_FROM};

/// Whether CSVs of AllNamespaces groups are copied: the OLMConfig `cluster` as the API server's
/// watch cache has it ([`OlmConfig::copied_csvs_are_enabled`], OLM's meaning). Where it cannot be
/// read — none (capstan creates it at start, `olmconfig::ensure_exists`), no OLMConfig CRD, or no
/// right to read it (an install whose RBAC predates it) — capstan's default: no. So copies of
/// every global operator are never made into every namespace by accident.
pub(crate) async fn all_namespaces_enabled(client: &Client) -> Result<bool, Error> {
    let api: Api<OlmConfig> = Api::all(client.clone());
    match api.get_with(olmconfig::NAME, &kube::api::GetParams::any()).await {
        Ok(c) => Ok(c.copied_csvs_are_enabled()),
        Err(kube::Error::Api(s)) if matches!(s.code, 403 | 404) => Ok(false),
        Err(e) => Err(kube_err(format!("reading OLMConfig {}", olmconfig::NAME))(e)),
    }
}

/// The installed CSVs whose group targets all namespaces, as `store` has them, when `config`
/// (the OLMConfig watch's store) lets them be copied — or also when not, with `any`: what a new
/// namespace (`any` false) or an edit of the OLMConfig (`any` true) must bring up to date.
pub(super) fn global_originals(
    store: &Store<ClusterServiceVersion>,
    config: &Store<OlmConfig>,
    any: bool,
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    let cluster = config.get(&ObjectRef::new(olmconfig::NAME));
    if !any && !cluster.is_some_and(|c| c.copied_csvs_are_enabled()) {
        return Vec::new();
    }
    store
        .state()
        .iter()
        .filter(|c| !crate::install::copied_csv::is_copy(c) && is_copiable(c))
        .filter(|c| c.annotations().get(ANNOTATION_TARGET_NAMESPACES).is_some_and(|t| t.is_empty()))
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// The target namespaces a member CSV's `olm.targetNamespaces` annotation lists (`[""]`: all).
fn annotated_targets(csv: &ClusterServiceVersion) -> Option<Vec<String>> {
    csv.annotations().get(ANNOTATION_TARGET_NAMESPACES).map(|t| t.split(',').map(String::from).collect())
}

/// The copies of the original `csv` (installed in `ns`) in the store.
fn copies_in(store: &Store<ClusterServiceVersion>, csv_name: &str, ns: &str) -> Vec<Arc<ClusterServiceVersion>> {
    store
        .state()
        .into_iter()
        .filter(|c| c.name_any() == csv_name && c.labels().get(LABEL_COPIED_FROM).is_some_and(|f| f == ns))
        .filter(|c| c.namespace().as_deref() != Some(ns))
        .collect()
}

/// Makes the copies of the installed (not copied) `csv` what they should be: one in each
/// namespace [`copy_namespaces`] names while the CSV [`is_copiable`], created or brought back to
/// its [`prototype`]; any other copy of it deleted.
pub(super) async fn sync(ctx: &Context, csv: &ClusterServiceVersion) -> Result<(), Error> {
    let Some(store) = ctx.csv_store.get() else { return Ok(()) };
    let ns = csv.namespace().unwrap_or_default();
    let have = copies_in(store, &csv.name_any(), &ns);
    let targets = annotated_targets(csv).unwrap_or_default();
    let own_only = targets.iter().all(|t| *t == ns);
    if have.is_empty() && (own_only || !is_copiable(csv)) {
        return Ok(());
    }
    let want = wanted(ctx, csv).await?;
    let proto = prototype(csv);
    for to in &want {
        let existing = have.iter().find(|c| c.namespace().as_deref() == Some(to.as_str()));
        put_copy(&ctx.client, &proto, to, existing.map(Arc::as_ref)).await?;
    }
    for copy in have.iter().filter(|c| !want.contains(&c.namespace().unwrap_or_default())) {
        delete_copy(&ctx.client, copy, "its original no longer targets this namespace").await?;
    }
    Ok(())
}

/// The namespaces that should hold a copy of the installed `csv` ([`copy_namespaces`]; none while
/// it is not [`is_copiable`] or is being deleted).
async fn wanted(ctx: &Context, csv: &ClusterServiceVersion) -> Result<BTreeSet<String>, Error> {
    let ns = csv.namespace().unwrap_or_default();
    let targets = annotated_targets(csv).unwrap_or_default();
    if !is_copiable(csv) || csv.metadata.deletion_timestamp.is_some() {
        return Ok(BTreeSet::new());
    }
    if !targets.iter().any(String::is_empty) {
        return Ok(copy_namespaces(&ns, &targets, &targets, false));
    }
    if !all_namespaces_enabled(&ctx.client).await? {
        return Ok(BTreeSet::new());
    }
    Ok(copy_namespaces(&ns, &targets, &active_namespaces(&ctx.client).await?, true))
}

/// A copy: deleted when [`stale_copy`] says so, else brought back to its original's
/// [`prototype`] (a copy changed by hand is reverted, as OLM does).
pub(super) async fn reconcile_copy(ctx: &Context, copy: &ClusterServiceVersion) -> Result<(), Error> {
    let parent = parent_of(ctx, copy).await?;
    let all = parent.as_ref().and_then(annotated_targets).is_some_and(|t| t.iter().any(String::is_empty));
    let enabled = if all { all_namespaces_enabled(&ctx.client).await? } else { true };
    if let Some(why) = stale_copy(copy, parent.as_ref(), enabled) {
        return delete_copy(&ctx.client, copy, why).await;
    }
    match parent {
        Some(p) if is_copiable(&p) => {
            put_copy(&ctx.client, &prototype(&p), &copy.namespace().unwrap_or_default(), Some(copy)).await
        }
        _ => Ok(()),
    }
}

/// After CSV `gone` was deleted: an original's copies go with it, a copy is made again when its
/// original still wants it ([`sync`] of the original).
pub(super) async fn sync_after_delete(ctx: &Context, gone: &ClusterServiceVersion) -> Result<(), Error> {
    let Some(store) = ctx.csv_store.get() else { return Ok(()) };
    if gone.labels().contains_key(LABEL_COPIED_FROM) {
        // Only this copy, when its original still wants it (a sync of the original would, for
        // every copy deleted at once, delete all the others again).
        let Some(parent) = parent_of(ctx, gone).await? else { return Ok(()) };
        let to = gone.namespace().unwrap_or_default();
        if wanted(ctx, &parent).await?.contains(&to) {
            put_copy(&ctx.client, &prototype(&parent), &to, None).await?;
        }
        return Ok(());
    }
    let ns = gone.namespace().unwrap_or_default();
    for copy in copies_in(store, &gone.name_any(), &ns) {
        delete_copy(&ctx.client, &copy, "its original CSV is gone").await?;
    }
    Ok(())
}

/// The original of `copy`: the CSV of its name in the namespace its `olm.operatorNamespace`
/// annotation names (the store's, else the API server's).
async fn parent_of(ctx: &Context, copy: &ClusterServiceVersion) -> Result<Option<ClusterServiceVersion>, Error> {
    let Some(from) = copy.annotations().get(ANNOTATION_OPERATOR_NAMESPACE) else { return Ok(None) };
    let name = copy.name_any();
    if let Some(p) = ctx.csv_store.get().and_then(|s| s.get(&ObjectRef::new(&name).within(from))) {
        return Ok(Some(p.as_ref().clone()));
    }
    Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), from)
        .get_opt(&name)
        .await
        .map_err(kube_err(format!("reading ClusterServiceVersion {from}/{name}")))
}

/// The namespaces of the cluster that are not being deleted (watch cache).
async fn active_namespaces(client: &Client) -> Result<Vec<String>, Error> {
    let list = Api::<Namespace>::all(client.clone())
        .list_metadata(&crate::install::from_watch_cache())
        .await
        .map_err(kube_err("listing Namespaces"))?;
    Ok(list
        .items
        .iter()
        .filter(|n: &&PartialObjectMeta<Namespace>| n.metadata.deletion_timestamp.is_none())
        .map(|n| n.name_any())
        .collect())
}

/// Writes copy `proto` into namespace `to`: created (then its status) when `existing` is none,
/// else its labels, annotations and spec, then its status, each only when they differ (OLM
/// `copyToNamespace`). A namespace being deleted or gone is skipped.
async fn put_copy(
    client: &Client,
    proto: &ClusterServiceVersion,
    to: &str,
    existing: Option<&ClusterServiceVersion>,
) -> Result<(), Error> {
    let api: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), to);
    let name = proto.name_any();
    let mut desired = proto.clone();
    desired.metadata.namespace = Some(to.to_string());
    let what = format!("copying ClusterServiceVersion {name} into {to}");
    let current = match existing {
        Some(e) => e.clone(),
        None => match api.create(&PostParams::default(), &desired).await {
            Ok(created) => created,
            // The namespace is being deleted (403) or is gone (404); it was copied meanwhile (409).
            Err(kube::Error::Api(s)) if matches!(s.code, 403 | 404 | 409) => return Ok(()),
            Err(e) => return Err(kube_err(what)(e)),
        },
    };
    let (object, status) = differences(&current, &desired);
    let mut written = current.clone();
    if object {
        let mut update = desired.clone();
        update.metadata.resource_version = current.metadata.resource_version.clone();
        update.metadata.uid = current.metadata.uid.clone();
        update.status = None;
        written = match api.replace(&name, &PostParams::default(), &update).await {
            Ok(w) => w,
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => return Ok(()),
            Err(e) => return Err(kube_err(what)(e)),
        };
    }
    if status || existing.is_none() {
        let mut update = written;
        update.status = desired.status.clone();
        match api.replace_status(&name, &PostParams::default(), &update).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => {}
            Err(e) => return Err(kube_err(what)(e)),
        }
    }
    Ok(())
}

/// Deletes `copy` (its UID as precondition), logging `why`.
async fn delete_copy(client: &Client, copy: &ClusterServiceVersion, why: &str) -> Result<(), Error> {
    let (ns, name) = (copy.namespace().unwrap_or_default(), copy.name_any());
    tracing::info!(csv = %format!("{ns}/{name}"), "deleting the copied CSV: {why}");
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: copy.uid(), resource_version: None }),
        ..DeleteParams::background()
    };
    match Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns).delete(&name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => Ok(()),
        Err(e) => Err(kube_err(format!("deleting the copied ClusterServiceVersion {ns}/{name}"))(e)),
    }
}
