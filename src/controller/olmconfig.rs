//! OLMConfig reconciler: writes the `DisabledCopiedCSVs` condition of the OLMConfig `cluster`
//! as OLM's `syncOLMConfig` does (OLM v0.46.0 `pkg/controller/operators/olm/operator.go`): whether
//! each CSV installed in an OperatorGroup that targets all namespaces has the copies the
//! OLMConfig asks for — one in every other active namespace, or none
//! ([`crate::install::copied_csv::copies_settled`]). The copies themselves are the CSV
//! reconciler's (`copied_csvs.rs`).
//!
//! Observe (the OperatorGroups and CSVs from the watch cache, the active namespaces) → decide
//! ([`unsettled`], pure; [`copied_csvs_condition`]) → write the condition only when its type,
//! status, reason or message changed. Looked at again every [`SETTLED_EVERY`], or
//! [`UNSETTLED_EVERY`] while copies are being made or removed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;

use super::{Context, Error, kube_err, now_time};
use crate::api::olmconfig::{DISABLED_COPIED_CSVS, OlmConfig, OlmConfigStatus};
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::install::copied_csv::{copied_csvs_condition, copies_settled};
use crate::install::{FIELD_MANAGER, LABEL_COPIED_FROM, from_watch_cache};

/// How often a settled OLMConfig is looked at again.
const SETTLED_EVERY: Duration = Duration::from_secs(60);
/// How often while some copies are missing or unexpected (OLM requeues 5 s after each copy sync).
const UNSETTLED_EVERY: Duration = Duration::from_secs(5);

/// The OLMConfig capstan creates when the cluster has none (OLM ships one, `spec: {}`, in its
/// manifests): copies of CSVs of AllNamespaces groups off (`docs/olm-differences.md`,
/// `copied-csvs`). An administrator who wants OLM's copies sets `disableCopiedCSVs: false`.
fn shipped() -> OlmConfig {
    let features = crate::api::olmconfig::Features { disable_copied_csvs: Some(true), ..Default::default() };
    OlmConfig::new(crate::api::olmconfig::NAME, crate::api::olmconfig::OlmConfigSpec { features: Some(features) })
}

/// Creates the OLMConfig `cluster` ([`shipped`]) when there is none; one that exists is left as
/// it is. Without the OLMConfig CRD (an older install) nothing is created: copies are made as
/// OLM makes them without one.
pub(super) async fn ensure_exists(client: &kube::Client) {
    let api: Api<OlmConfig> = Api::all(client.clone());
    match api.create(&kube::api::PostParams::default(), &shipped()).await {
        Ok(_) => tracing::info!("created OLMConfig cluster: copies of CSVs of AllNamespaces groups off"),
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => tracing::warn!("could not create OLMConfig cluster: {e}"),
    }
}

/// Whether some installed CSV of an AllNamespaces group lacks copies or has unexpected ones.
/// `originals`: (namespace, name) of every installed CSV of such a group; `copies`: how many
/// copies each (namespace, name) has; `active`: how many namespaces are not being deleted. Pure.
pub(super) fn unsettled(
    enabled: bool,
    originals: &[(String, String)],
    copies: &HashMap<(String, String), usize>,
    active: usize,
) -> bool {
    originals.iter().any(|k| !copies_settled(enabled, copies.get(k).copied().unwrap_or(0), active))
}

/// Reconciles the OLMConfig: its `DisabledCopiedCSVs` condition.
pub(super) async fn reconcile(config: Arc<OlmConfig>, ctx: Arc<Context>) -> Result<Action, Error> {
    let client = &ctx.client;
    let name = config.name_any();
    let enabled = config.copied_csvs_are_enabled();
    let groups = Api::<OperatorGroup>::all(client.clone())
        .list(&from_watch_cache())
        .await
        .map_err(kube_err("listing OperatorGroups"))?;
    let global: Vec<String> = groups
        .items
        .iter()
        .filter(|g| g.status.as_ref().is_some_and(|s| s.namespaces.iter().any(String::is_empty)))
        .filter_map(|g| g.namespace())
        .collect();
    let csvs = Api::<ClusterServiceVersion>::all(client.clone())
        .list_metadata(&from_watch_cache())
        .await
        .map_err(kube_err("listing ClusterServiceVersions"))?;
    let mut copies: HashMap<(String, String), usize> = HashMap::new();
    let mut originals = Vec::new();
    for c in &csvs.items {
        let (ns, csv_name) = (c.namespace().unwrap_or_default(), c.name_any());
        match c.labels().get(LABEL_COPIED_FROM) {
            Some(from) if global.contains(from) => *copies.entry((from.clone(), csv_name)).or_default() += 1,
            None if global.contains(&ns) && !copied_by_annotation(c) => originals.push((ns, csv_name)),
            _ => {}
        }
    }
    let namespaces = Api::<Namespace>::all(client.clone())
        .list_metadata(&from_watch_cache())
        .await
        .map_err(kube_err("listing Namespaces"))?;
    let active = namespaces.items.iter().filter(|n| n.metadata.deletion_timestamp.is_none()).count();
    let unsettled = unsettled(enabled, &originals, &copies, active);
    let condition = copied_csvs_condition(enabled, unsettled, now_time());
    let current = config.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == DISABLED_COPIED_CSVS));
    let same = current.is_some_and(|c| {
        (&c.status, &c.reason, &c.message) == (&condition.status, &condition.reason, &condition.message)
    });
    if !same {
        let mut conditions: Vec<_> = config.status.clone().unwrap_or_default().conditions;
        conditions.retain(|c| c.type_ != DISABLED_COPIED_CSVS);
        conditions.push(condition);
        let status = OlmConfigStatus { conditions };
        let patch = serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "status": status,
        });
        Api::<OlmConfig>::all(client.clone())
            .patch_status(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
            .await
            .map_err(kube_err(format!("writing the status of OLMConfig {name}")))?;
    }
    Ok(Action::requeue(if unsettled { UNSETTLED_EVERY } else { SETTLED_EVERY }))
}

/// A CSV that is a copy by its `olm.operatorNamespace` annotation (as `install::copied_csv::is_copy` reads it).
fn copied_by_annotation(meta: &kube::core::PartialObjectMeta<ClusterServiceVersion>) -> bool {
    let ns = meta.namespace().unwrap_or_default();
    meta.annotations().get(crate::install::ANNOTATION_OPERATOR_NAMESPACE).is_some_and(|o| *o != ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_means_a_copy_in_every_other_namespace_or_none() {
        let originals = vec![("ops".to_string(), "etcd.v1".to_string())];
        let mut copies = HashMap::new();
        assert!(unsettled(true, &originals, &copies, 4), "enabled, no copies yet");
        assert!(!unsettled(false, &originals, &copies, 4), "disabled, none");
        copies.insert(("ops".to_string(), "etcd.v1".to_string()), 3);
        assert!(!unsettled(true, &originals, &copies, 4), "enabled, one in each of the 3 others");
        assert!(unsettled(false, &originals, &copies, 4), "disabled, 3 unexpected");
        assert!(!unsettled(true, &[], &copies, 4), "no AllNamespaces operator");
    }
}
