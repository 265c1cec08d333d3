//! OperatorGroup reconciler (`reference/olm-v0.md` §1.6): writes `status.namespaces` (the target
//! namespaces, `[""]` for all), `serviceAccountRef` and `lastUpdated`, or condition
//! `OperatorGroupInvalid` when the namespace has no usable group; re-checked every 30 s so that a
//! selector follows namespace labels. Observe (the namespace's group and targets,
//! [`super::operator_groups::operator_group_targets`]; the group's ServiceAccount) → decide
//! ([`decide`], pure) → act (the group's RBAC aggregation, one status write when it changed).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::operator_groups::operator_group_targets;
use super::{Context, Error, kube_err, now_time};
use crate::api::OperatorGroup;
use crate::api::operatorgroup::OperatorGroupStatus;
use crate::install::operator_group::GroupTargets;

/// The ServiceAccount an OperatorGroup's `spec.serviceAccountName` names, as read from the
/// cluster (OLM `pkg/lib/scoped/syncer.go` `SyncOperatorGroup`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GroupServiceAccount {
    /// No `spec.serviceAccountName`.
    Unset,
    /// It exists: `status.serviceAccountRef` refers to it.
    Found(k8s_openapi::api::core::v1::ObjectReference),
    /// It does not exist (its name).
    Missing(String),
}

/// The status of OperatorGroup `og` from its namespace's [`GroupTargets`] (§1.6): the target
/// namespaces when it is the namespace's one group, condition `OperatorGroupInvalid` when the
/// namespace has no usable group; `serviceAccountRef` to the group's ServiceAccount, or OLM's
/// condition `OperatorGroupServiceAccount` (reason `ServiceAccountNotFound`) when it is missing. Pure.
pub(crate) fn group_status(
    og: &str,
    targets: &GroupTargets,
    sa: &GroupServiceAccount,
    now: &Time,
) -> OperatorGroupStatus {
    let mut status = OperatorGroupStatus {
        namespaces: Vec::new(),
        service_account_ref: None,
        last_updated: now.clone(),
        conditions: Vec::new(),
    };
    match sa {
        GroupServiceAccount::Unset => {}
        GroupServiceAccount::Found(r) => status.service_account_ref = Some(r.clone()),
        GroupServiceAccount::Missing(name) => status.conditions.push(Condition {
            type_: "OperatorGroupServiceAccount".into(),
            status: "True".into(),
            reason: "ServiceAccountNotFound".into(),
            message: format!("ServiceAccount {name} not found"),
            last_transition_time: now.clone(),
            observed_generation: None,
        }),
    }
    match targets {
        GroupTargets::Found { name, targets, .. } if name == og => status.namespaces = targets.clone(),
        GroupTargets::Found { .. } => {}
        GroupTargets::Unfit { reason, message } => status.conditions.push(Condition {
            type_: "OperatorGroupInvalid".into(),
            status: "True".into(),
            reason: reason.to_string(),
            message: message.clone(),
            last_transition_time: now.clone(),
            observed_generation: None,
        }),
    }
    status
}

/// Reads the group's ServiceAccount and, when it lacks it, gives it the label `olm.managed=true`
/// as OLM does (so that it shows in the informers of both systems). One GET per look, one
/// server-side apply of the label the first time.
async fn group_service_account(ctx: &Context, og: &OperatorGroup) -> Result<GroupServiceAccount, Error> {
    use k8s_openapi::api::core::v1::{ObjectReference, ServiceAccount};
    let Some(name) = og.spec.service_account_name.clone().filter(|n| !n.is_empty()) else {
        return Ok(GroupServiceAccount::Unset);
    };
    let ns = og.namespace().unwrap_or_default();
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(mut sa) = api
        .get_opt(&name)
        .await
        .map_err(kube_err(format!("reading ServiceAccount {ns}/{name} of OperatorGroup {ns}/{}", og.name_any())))?
    else {
        return Ok(GroupServiceAccount::Missing(name));
    };
    if sa.labels().get(crate::install::LABEL_MANAGED).map(String::as_str) != Some("true") {
        let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns, "labels": {crate::install::LABEL_MANAGED: "true"}}});
        sa = api
            .patch(
                &name,
                &kube::api::PatchParams::apply(crate::install::FIELD_MANAGER),
                &kube::api::Patch::Apply(&body),
            )
            .await
            .map_err(kube_err(format!("labelling ServiceAccount {ns}/{name} olm.managed=true")))?;
    }
    Ok(GroupServiceAccount::Found(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ServiceAccount".into()),
        name: Some(name),
        namespace: Some(ns),
        resource_version: sa.resource_version(),
        uid: sa.uid(),
        ..Default::default()
    }))
}

/// The status to write for OperatorGroup `og` whose status is `old` ([`group_status`]), or `None`
/// when it says the same already: the same namespaces, condition types and ServiceAccount
/// (`lastUpdated` alone is not a change). Pure.
pub(crate) fn decide(
    og: &str,
    old: Option<&OperatorGroupStatus>,
    targets: &GroupTargets,
    sa: &GroupServiceAccount,
    now: &Time,
) -> Option<OperatorGroupStatus> {
    let status = group_status(og, targets, sa, now);
    let condition_types = |c: &[Condition]| c.iter().map(|c| c.type_.clone()).collect::<Vec<_>>();
    let changed = old.map(|o| o.namespaces.as_slice()) != Some(status.namespaces.as_slice())
        || old.map(|o| condition_types(&o.conditions)).unwrap_or_default() != condition_types(&status.conditions)
        || old.and_then(|o| o.service_account_ref.as_ref()) != status.service_account_ref.as_ref();
    changed.then_some(status)
}

/// The OperatorGroup reconciler: observe, [`decide`], act.
pub(super) async fn reconcile(og: Arc<OperatorGroup>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = og.namespace().unwrap_or_default();
    let name = og.name_any();
    let targets = operator_group_targets(&ctx.client, &ns).await?;
    if matches!(&targets, GroupTargets::Found { name: found, .. } if *found == name) {
        // The group's ClusterRoles and `olm.providedAPIs` (OLM operatorgroup.go; install::aggregation).
        ctx.ensure_group_aggregation(&og).await.map_err(|e| Error::Kube { context: e.what, source: e.source })?;
    }
    let sa = group_service_account(&ctx, &og).await?;
    if let Some(status) = decide(&name, og.status.as_ref(), &targets, &sa, &now_time()) {
        write_status(&ctx, &og, &status).await?;
    }
    // Its label on the namespaces it targets (none for all namespaces, or while it does not
    // count). Refused (capstan's ClusterRole without `patch` on namespaces): logged, nothing else.
    if let Some(uid) = og.uid() {
        let labelled = match &targets {
            GroupTargets::Found { name: found, targets, .. } if *found == name => targets.clone(),
            _ => Vec::new(),
        };
        if let Err(e) = crate::install::aggregation::sync_namespace_labels(&ctx.client, &uid, &labelled).await {
            tracing::warn!(operator_group = %format!("{ns}/{name}"), error = %e, "the OperatorGroup's namespace labels");
        }
    }
    Ok(Action::requeue(Duration::from_secs(30)))
}

/// Writes `status` onto OperatorGroup `og`: the whole typed status as one merge patch
/// ([`OperatorGroupStatus::merge_patch`]). Not server-side apply: an OperatorGroup created as
/// v1alpha2 (served, without spec.upgradeStrategy) makes apply's typed conversion fail on the
/// defaulted field.
async fn write_status(ctx: &Context, og: &OperatorGroup, status: &OperatorGroupStatus) -> Result<(), Error> {
    let (ns, name) = (og.namespace().unwrap_or_default(), og.name_any());
    let api: Api<OperatorGroup> = Api::namespaced(ctx.client.clone(), &ns);
    let params = PatchParams { field_manager: Some(crate::install::FIELD_MANAGER.into()), ..Default::default() };
    api.patch_status(&name, &params, &Patch::Merge(&status.merge_patch()))
        .await
        .map_err(kube_err(format!("writing status of OperatorGroup {ns}/{name}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Time {
        Time("2026-01-01T00:00:00Z".parse().unwrap())
    }

    #[test]
    fn operator_group_status_from_its_targets() {
        let found = GroupTargets::Found { name: "og".into(), targets: vec![String::new()], webhook_selector: None };
        assert_eq!(group_status("og", &found, &GroupServiceAccount::Unset, &now()).namespaces, [""]);
        assert!(
            group_status("other", &found, &GroupServiceAccount::Unset, &now()).namespaces.is_empty(),
            "only the namespace's group gets targets"
        );
        let unfit = GroupTargets::Unfit { reason: "TooManyOperatorGroups", message: "keep one".into() };
        let st = group_status("og", &unfit, &GroupServiceAccount::Unset, &now());
        assert_eq!(
            (st.conditions[0].type_.as_str(), st.conditions[0].reason.as_str(), st.conditions[0].message.as_str()),
            ("OperatorGroupInvalid", "TooManyOperatorGroups", "keep one")
        );
        assert!(st.namespaces.is_empty());
        // The group's ServiceAccount, as OLM's scoped syncer reports it.
        let r = k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("ServiceAccount".into()),
            name: Some("installer".into()),
            ..Default::default()
        };
        let st = group_status("og", &found, &GroupServiceAccount::Found(r.clone()), &now());
        assert_eq!((st.service_account_ref, st.conditions.len()), (Some(r), 0));
        let st = group_status("og", &found, &GroupServiceAccount::Missing("installer".into()), &now());
        assert_eq!(st.service_account_ref, None);
        assert_eq!(
            (st.conditions[0].type_.as_str(), st.conditions[0].reason.as_str(), st.conditions[0].message.as_str()),
            ("OperatorGroupServiceAccount", "ServiceAccountNotFound", "ServiceAccount installer not found")
        );
    }

    #[test]
    fn every_unusable_group_is_invalid_with_its_reason() {
        for reason in ["NoOperatorGroup", "TooManyOperatorGroups", "InvalidOperatorGroup"] {
            let st = group_status(
                "og",
                &GroupTargets::Unfit { reason, message: "m".into() },
                &GroupServiceAccount::Unset,
                &now(),
            );
            assert_eq!(
                (st.conditions.len(), st.conditions[0].type_.as_str(), st.conditions[0].reason.as_str()),
                (1, "OperatorGroupInvalid", reason)
            );
        }
    }
}
