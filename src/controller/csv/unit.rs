//! The CSV as the unit of install, as OLM v0's olm-operator treats it
//! (`pkg/controller/operators/olm/operator.go` `syncClusterServiceVersion`,
//! `pkg/controller/install/deployment.go`, `certresources.go`, `webhook.go`, `apiservice.go`):
//! once its requirements are met, any CSV in a namespace with a fitting OperatorGroup gets what
//! its own spec plans — Deployments, serving Secrets and Services with the Secret's
//! Role/RoleBinding and the auth bindings, webhook configurations, owned APIServices — and an edit
//! of its `spec.install` is rolled out (OLM compares each Deployment's `olm.deployment-spec-hash`
//! with the hash of the Deployment the strategy makes now, `checkForDeployments`).
//!
//! The objects are planned by [`crate::install::plan::steps`] from the CSV alone (with the
//! Subscription's `spec.config` when one installed it, as the InstallPlan plans them) and applied
//! by [`crate::install::apply::apply`], the InstallPlan's applier. A CSV an InstallPlan installed
//! has those objects from its plan already: here it only gets the Deployments whose strategy
//! changed; a CSV applied by hand or by GitOps ([`Origin::Csv`]) gets all of them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::Value;

use crate::api::clusterserviceversion::CsvReason;
use crate::api::{ClusterServiceVersion, Subscription};
use crate::controller::events::EventType;
use crate::controller::{Context, Error, kube_err};
use crate::install::operator_group::GroupTargets;
use crate::install::plan::LABEL_DEPLOYMENT_SPEC_HASH;
use crate::install::{
    COMPONENT_LABEL_PREFIX, InstallTarget, LABEL_PERMISSIONS_HASH, Step, SubscriptionConfig, webhook,
};

/// Who makes a CSV's Deployments, webhooks, APIServices and certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// An InstallPlan: one names the CSV, or the CSV carries the catalog's properties
    /// (`operatorframework.io/properties`, written by the plan).
    Plan,
    /// The CSV reconciler, from the CSV alone: it was applied by hand or by GitOps, as OLM's
    /// olm-operator installs any CSV.
    Csv,
}

/// Whether `step` (planned by [`crate::install::plan::steps`] from a CSV alone) is one OLM's
/// olm-operator makes for the CSV: the Deployments, the serving Services and Secrets, the
/// Secret's Role and RoleBinding (`<service>-cert`), the auth-delegator and auth-reader bindings,
/// the webhook configurations and the APIServices (OLM `certresources.go`, `webhook.go`,
/// `apiservice.go`). Not the CSV itself, its ServiceAccounts or the RBAC of its permissions:
/// those are the InstallPlan's (OLM's catalog operator), and a CSV applied by hand must find them
/// (its requirements). Pure.
pub(crate) fn made_by_olm_operator(step: &Step) -> bool {
    let permission = step.manifest.pointer("/metadata/labels").and_then(|l| l.get(LABEL_PERMISSIONS_HASH)).is_some();
    match step.kind.as_str() {
        "Deployment" | "Service" | "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" | "APIService" => {
            true
        }
        "Secret" => webhook::is_planned_serving_secret(step),
        "Role" | "RoleBinding" if !permission && step.name.ends_with("-cert") => true,
        "RoleBinding" | "ClusterRoleBinding" => webhook::is_shared_binding(step),
        _ => false,
    }
}

/// The Deployments among `planned` that exist (`found`: name → its `olm.deployment-spec-hash`
/// label, `None` without one) with another hash than the planned one: their strategy (or the
/// Subscription's `spec.config`, or the CSV's annotations) changed since they were applied
/// (OLM `StrategyErrDeploymentUpdated`). Missing Deployments are not listed, nor those without
/// the label (not made from a strategy: left as they are, where OLM would take them over). Pure.
pub(crate) fn changed_deployments(planned: &[Step], found: &BTreeMap<String, Option<String>>) -> Vec<String> {
    planned
        .iter()
        .filter(|s| s.kind == "Deployment")
        .filter_map(|s| {
            let hash = s.manifest.pointer("/metadata/labels").and_then(|l| l.get(LABEL_DEPLOYMENT_SPEC_HASH));
            let existing = found.get(&s.name)?.as_deref()?;
            (hash.and_then(Value::as_str) != Some(existing)).then(|| s.name.clone())
        })
        .collect()
}

/// A webhook configuration or APIService of a CSV as found on the cluster: kind, name and its
/// `olm.webhook-description-hash` label (none for an APIService).
pub(crate) type Found = (String, String, Option<String>);

/// Whether the webhook configurations and APIServices among `planned` are on the cluster as
/// planned (`found`: the CSV's, by its owner labels, and the planned APIServices that exist;
/// [`Found`]), and which of the CSV's webhook configurations are no longer planned (an edited
/// `generateName`, a definition removed): `(apply, stale)`. OLM reinstalls a CSV whose webhook
/// is missing or whose description changed (`areWebhooksAvailable`, `NeedsReinstall`) and
/// removes the configurations it no longer describes. Pure.
pub(crate) fn webhooks_due(planned: &[Step], found: &[Found]) -> (bool, Vec<Found>) {
    const KINDS: [&str; 3] = ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService"];
    let hash = |s: &Step| {
        s.manifest
            .pointer("/metadata/labels")
            .and_then(|l| l.get(webhook::LABEL_WEBHOOK_HASH))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let wanted: Vec<Found> = planned
        .iter()
        .filter(|s| KINDS.contains(&s.kind.as_str()))
        .map(|s| (s.kind.clone(), s.name.clone(), hash(s)))
        .collect();
    let apply = wanted.iter().any(|w| !found.contains(w));
    let stale = found
        .iter()
        .filter(|f| f.0 != "APIService" && !wanted.iter().any(|w| (&w.0, &w.1) == (&f.0, &f.1)))
        .cloned()
        .collect();
    (apply, stale)
}

/// A CSV as an owner of objects: its namespace and name.
pub(crate) type CsvRef<'a> = (&'a str, &'a str);

/// Whether an existing APIService with `labels` may be taken over by CSV `target` (OLM
/// `install.IsAPIServiceAdoptable`): its owner labels name a ClusterServiceVersion, and that is
/// `target`, the CSV `target` replaces (`replaced`), or its current owner while that owner is
/// Replacing or Deleting (`owner_leaving`). An APIService without owner labels is not adoptable.
/// Pure.
pub(crate) fn apiservice_adoptable(
    labels: &BTreeMap<String, String>,
    target: CsvRef<'_>,
    replaced: Option<&str>,
    owner_leaving: bool,
) -> bool {
    let get = |k: &str| labels.get(k).map(String::as_str).unwrap_or_default();
    let (kind, ns, name) = (
        get(crate::install::LABEL_OWNER_KIND),
        get(crate::install::LABEL_OWNER_NAMESPACE),
        get(crate::install::LABEL_OWNER),
    );
    if kind != "ClusterServiceVersion" || ns.is_empty() || name.is_empty() {
        return false;
    }
    (ns, name) == target || (ns == target.0 && replaced == Some(name)) || owner_leaving
}

/// The Deployments of a CSV (`found`: those labelled as its own) that its strategy no longer
/// names, among `planned`: removed after its strategy is applied (OLM
/// `cleanupOrphanedDeployments`, after a Deployment was renamed in `spec.install`). Pure.
pub(crate) fn orphaned_deployments(planned: &[Step], found: &[String]) -> Vec<String> {
    found.iter().filter(|f| !planned.iter().any(|s| s.kind == "Deployment" && s.name == **f)).cloned().collect()
}

/// What the CSV reconciler applies for a CSV ([`to_apply`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Apply {
    /// Nothing.
    Nothing,
    /// Every object OLM's olm-operator makes ([`made_by_olm_operator`]).
    Everything,
    /// These Deployments (with the serving Secrets, so that their certificate hash is filled in).
    Deployments(Vec<String>),
}

/// What to apply for a CSV of `origin` whose Deployments `missing` are gone and `changed`
/// ([`changed_deployments`]) differ from its strategy; `installing`: the CSV is InstallReady,
/// where OLM runs its install strategy. Everything ([`by_csv_reconciler`]) on the way from
/// InstallReady and whenever a Deployment is missing; when only Deployments changed, a CSV an
/// InstallPlan installed gets those Deployments and a CSV applied by hand everything (the apply
/// is idempotent: objects that are as planned are left as they are). Pure.
pub(crate) fn to_apply(origin: Origin, installing: bool, missing: &[String], changed: &[String]) -> Apply {
    match origin {
        _ if installing || !missing.is_empty() => Apply::Everything,
        Origin::Csv if !changed.is_empty() => Apply::Everything,
        Origin::Plan if !changed.is_empty() => Apply::Deployments(changed.to_vec()),
        _ => Apply::Nothing,
    }
}

/// Whether the CSV reconciler applies `step`, one of `planned` (planned from the CSV alone), for
/// a CSV of `origin` when it applies everything ([`Apply::Everything`]): for a CSV applied by
/// hand what OLM's olm-operator makes ([`made_by_olm_operator`]) and the RBAC it copies into
/// target namespaces or lifts to cluster scope; for one an InstallPlan installed what is not a
/// plan step (`install::plan::in_install_plan`: the Deployments and that RBAC), with the serving
/// Secrets the Deployments' certificate hash is read from (the plan applied the rest). Pure.
pub(crate) fn by_csv_reconciler(origin: Origin, step: &Step, planned: &[Step]) -> bool {
    let after_the_plan = !crate::install::plan::in_install_plan(step, planned);
    match origin {
        Origin::Csv => made_by_olm_operator(step) || after_the_plan,
        Origin::Plan => after_the_plan || webhook::is_planned_serving_secret(step),
    }
}

/// The package of a CSV an InstallPlan installed: from its component label
/// `operators.coreos.com/<package>.<namespace>` (the plan puts it on everything it applies).
/// `None` for a CSV without one. Pure.
pub(crate) fn package_of(csv: &ClusterServiceVersion, ns: &str) -> Option<String> {
    let suffix = format!(".{ns}");
    csv.labels().keys().find_map(|k| k.strip_prefix(COMPONENT_LABEL_PREFIX)?.strip_suffix(&suffix).map(String::from))
}

/// Why OLM fails `csv` for its webhook definitions before it installs anything
/// (`syncClusterServiceVersion` in Pending, reason `InvalidWebhookDescription`): a repeated
/// `generateName`, or rules that intercept all groups, OLM's own group or the admission webhook
/// configurations (`install.ValidWebhookRules`), with OLM's message. Pure.
pub(crate) fn invalid_webhooks(csv: &ClusterServiceVersion) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for w in csv.spec.webhookdefinitions.iter().flatten() {
        if seen.contains(&w.generate_name.as_str()) {
            return Some("CSV contains repeated WebhookDescription name".into());
        }
        seen.push(&w.generate_name);
        if let Some(message) = webhook::invalid_rules(w.rules.as_deref().unwrap_or_default()) {
            return Some(message);
        }
    }
    None
}

/// Installs what OLM's olm-operator makes for `csv` ([`to_apply`]; `installing`: the CSV is
/// InstallReady), through the InstallPlan's applier. Returns why the CSV fails, with OLM's reason
/// (`InvalidInstallStrategy` when a CSV applied by hand, or any CSV on its way from
/// InstallReady, does not plan, `InstallComponentFailed`
/// when an object is refused), or `None`. Each apply is in an Event (`InstallStrategyApplied`,
/// `DeploymentUpdated`).
pub(super) async fn install(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    installing: bool,
) -> Result<Option<(CsvReason, String)>, Error> {
    if !installs_workload(csv) {
        return Ok(None);
    }
    // A CSV an InstallPlan installed is planned and its Deployments read once per spec (the
    // strategy changes only with it; a change of its Subscription's spec forgets the mark, for a
    // new spec.config), not at every look of the CSV reconciler.
    let checked = csv.uid().zip(csv.metadata.generation);
    if let Some((uid, generation)) = &checked
        && !installing
        && ctx.strategy_checked.lock().unwrap_or_else(|e| e.into_inner()).get(uid) == Some(generation)
    {
        return Ok(None);
    }
    let origin = origin(ctx, csv, ns).await?;
    let remember = || {
        if let (Origin::Plan, Some((uid, generation))) = (origin, &checked) {
            ctx.strategy_checked.lock().unwrap_or_else(|e| e.into_inner()).insert(uid.clone(), *generation);
        }
    };
    let planned = match planned(ctx, csv, ns).await? {
        None => return Ok(None),
        Some(Ok(steps)) => steps,
        // Installing, the Deployments come from nowhere else: the CSV says why they cannot.
        Some(Err(message)) if origin == Origin::Csv || installing => {
            return Ok(Some((CsvReason::InvalidInstallStrategy, format!("install strategy invalid: {message}"))));
        }
        Some(Err(message)) => {
            tracing::warn!(csv = %format!("{ns}/{}", csv.name_any()), error = %message, "the install strategy of the CSV does not plan; its Deployments stay as its InstallPlan made them");
            remember();
            return Ok(None);
        }
    };
    let found = deployment_hashes(ctx, ns, &planned).await?;
    let missing: Vec<String> = planned
        .iter()
        .filter(|s| s.kind == "Deployment" && !found.contains_key(&s.name))
        .map(|s| s.name.clone())
        .collect();
    let changed = changed_deployments(&planned, &found);
    let (hooks_due, stale) = match origin {
        Origin::Csv => webhooks_due(&planned, &webhooks_found(ctx, csv, ns, &planned).await?),
        Origin::Plan => (false, Vec::new()),
    };
    let deployments_planned: Vec<Step> = planned.iter().filter(|s| s.kind == "Deployment").cloned().collect();
    let (steps, what) = match to_apply(origin, installing || hooks_due, &missing, &changed) {
        Apply::Nothing => {
            remember();
            return Ok(None);
        }
        Apply::Everything if origin == Origin::Csv && !apiservices_adoptable(ctx, csv, ns, &planned).await? => {
            return Ok(Some((CsvReason::OwnerConflict, "unable to adopt APIService".into())));
        }
        Apply::Everything => {
            (planned.iter().filter(|s| by_csv_reconciler(origin, s, &planned)).cloned().collect::<Vec<_>>(), None)
        }
        Apply::Deployments(names) => {
            let keep =
                |s: &Step| webhook::is_planned_serving_secret(s) || (s.kind == "Deployment" && names.contains(&s.name));
            (planned.into_iter().filter(keep).collect(), Some(names))
        }
    };
    let results = match apply_as_installer(ctx, ns, steps).await? {
        Ok(results) => results,
        Err(failure) => return Ok(Some(failure)),
    };
    if let Some(failed) = results.iter().find(|r| matches!(r.status, crate::install::apply::StepStatus::Failed(_))) {
        return Ok(Some((CsvReason::InstallComponentFailed, format!("install strategy failed: {failed}"))));
    }
    remove_stale(ctx, &stale).await?;
    remove_orphaned_deployments(ctx, csv, ns, &deployments_planned).await?;
    announce(ctx, csv, ns, what, &results).await;
    remember();
    Ok(None)
}

/// Applies `steps`: the RBAC copied into other target namespaces or lifted to cluster scope with
/// capstan's own identity (OLM's `ensureTenantRBAC` / `ensureSingletonRBAC` use its own client),
/// the rest as [`installing_client`] says. `Err` is the CSV's failure when nobody may install.
async fn apply_as_installer(
    ctx: &Context,
    ns: &str,
    steps: Vec<Step>,
) -> Result<Result<Vec<crate::install::apply::StepResult>, (CsvReason, String)>, Error> {
    let client = match installing_client(ctx, ns).await? {
        Ok(client) => client,
        Err(failure) => return Ok(Err(failure)),
    };
    let rbac = |s: &Step| matches!(s.kind.as_str(), "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding");
    let (tenant, rest): (Vec<Step>, Vec<Step>) = steps.into_iter().partition(rbac);
    let opts = ctx.apply_options();
    let mut results = crate::install::apply::apply(&ctx.client, &tenant, &opts).await;
    results.extend(crate::install::apply::apply(&client, &rest, &opts).await);
    Ok(Ok(results))
}

/// Who applies the CSV's objects, as OLM's olm-operator: the identity of its group's
/// ServiceAccount when the group names one (`parseStrategiesAndUpdateStatus`,
/// `AttenuateToServiceAccount`), so that an operator is installed only with what its
/// administrator granted, else capstan's own. `Err` is the CSV's failure when nobody can (the
/// ServiceAccount is missing); that, or a refusal of the API server, fails the CSV, which starts over from Pending
/// after 30 s (OLM: when the namespace's RBAC changes).
async fn installing_client(ctx: &Context, ns: &str) -> Result<Result<kube::Client, (CsvReason, String)>, Error> {
    use crate::controller::scoped::{InstallerCheck, installer};
    // The namespace's group (the CSV reconciler has checked there is exactly one), never the
    // CSV's own annotation, which anyone who may edit the CSV can write.
    let groups = Api::<crate::api::OperatorGroup>::namespaced(ctx.client.clone(), ns)
        .list(&crate::install::from_watch_cache())
        .await
        .map_err(kube_err(format!("listing OperatorGroups in {ns}")))?;
    let og = match groups.items.as_slice() {
        [og] => og.name_any(),
        _ => {
            let message = format!("namespace {ns} has not exactly one OperatorGroup");
            return Ok(Err((CsvReason::InstallComponentFailed, format!("install strategy failed: {message}"))));
        }
    };
    Ok(match installer(ctx, ns, &og).await? {
        InstallerCheck::Ready(installer) => Ok(installer.appliers(&ctx.client).steps.clone()),
        InstallerCheck::Blocked(message) => {
            Err((CsvReason::InstallComponentFailed, format!("install strategy failed: {message}")))
        }
    })
}

/// For a CSV whose group targets all namespaces: each Role and RoleBinding of its namespace it
/// owns (owner labels) lifted to a ClusterRole / ClusterRoleBinding of the same name, created when
/// missing and never changed after, as OLM's olm-operator does at each look of such a CSV
/// (`ensureSingletonRBAC`, `pkg/controller/operators/olm/operatorgroup.go`): Roles a CSV applied by
/// hand came with, besides those its InstallPlan made (which the plan lifts under the same names).
pub(super) async fn lift_owned_rbac(ctx: &Context, csv: &ClusterServiceVersion, ns: &str) -> Result<(), Error> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let all = csv.annotations().get(crate::install::ANNOTATION_TARGET_NAMESPACES).is_some_and(|t| t.is_empty());
    if !all || csv.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let owned =
        crate::install::from_watch_cache().labels(&crate::controller::removal::owner_selector(ns, &csv.name_any()));
    let roles = Api::<Role>::namespaced(ctx.client.clone(), ns)
        .list(&owned)
        .await
        .map_err(kube_err(format!("listing the Roles of ClusterServiceVersion {ns}/{}", csv.name_any())))?;
    for role in &roles.items {
        create_missing::<ClusterRole>(&ctx.client, &lifted_role(role)).await?;
    }
    let bindings = Api::<RoleBinding>::namespaced(ctx.client.clone(), ns)
        .list(&owned)
        .await
        .map_err(kube_err(format!("listing the RoleBindings of ClusterServiceVersion {ns}/{}", csv.name_any())))?;
    for binding in &bindings.items {
        create_missing::<ClusterRoleBinding>(&ctx.client, &lifted_binding(binding)).await?;
    }
    Ok(())
}

/// Creates cluster-scoped `obj` unless an object of its name exists (OLM creates the lifted RBAC
/// once and leaves it).
async fn create_missing<K>(client: &kube::Client, obj: &K) -> Result<(), Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let name = obj.name_any();
    let what = format!("{} {name}", K::kind(&()));
    if api.get_metadata_opt(&name).await.map_err(kube_err(format!("reading {what}")))?.is_some() {
        return Ok(());
    }
    match api.create(&kube::api::PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(kube_err(format!("creating {what}"))(e)),
    }
}

/// The ClusterRole a Role is lifted to: its name and labels, its rules and `get`/`list`/`watch` of
/// namespaces (OLM `ensureSingletonRBAC`). Pure.
pub(crate) fn lifted_role(role: &k8s_openapi::api::rbac::v1::Role) -> k8s_openapi::api::rbac::v1::ClusterRole {
    use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
    let mut rules = role.rules.clone().unwrap_or_default();
    rules.push(PolicyRule {
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["namespaces".into()]),
        ..Default::default()
    });
    ClusterRole {
        metadata: kube::api::ObjectMeta {
            name: role.metadata.name.clone(),
            labels: role.metadata.labels.clone(),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    }
}

/// The ClusterRoleBinding a RoleBinding is lifted to: its name, labels and subjects, bound to the
/// ClusterRole of its Role's name (OLM `ensureSingletonRBAC`). Pure.
pub(crate) fn lifted_binding(
    binding: &k8s_openapi::api::rbac::v1::RoleBinding,
) -> k8s_openapi::api::rbac::v1::ClusterRoleBinding {
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef};
    ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: binding.metadata.name.clone(),
            labels: binding.metadata.labels.clone(),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: binding.role_ref.api_group.clone(),
            kind: "ClusterRole".into(),
            name: binding.role_ref.name.clone(),
        },
        subjects: binding.subjects.clone(),
    }
}

/// Whether the CSV reconciler makes `csv`'s workload: it has Deployments in its strategy and is
/// neither being deleted nor on its way out (`Replacing`, `Deleting`: its successor's
/// Deployments, often of the same names, must not be put back to its strategy). Pure.
pub(crate) fn installs_workload(csv: &ClusterServiceVersion) -> bool {
    use crate::api::clusterserviceversion::CsvPhase;
    let leaving = csv
        .status
        .as_ref()
        .and_then(|s| s.phase.as_ref())
        .is_some_and(|p| matches!(p, CsvPhase::Replacing | CsvPhase::Deleting));
    csv.metadata.deletion_timestamp.is_none()
        && !leaving
        && csv.spec.install.spec.iter().any(|s| !s.deployments.is_empty())
}

/// Applies again the Deployments `names` of `csv` that were deleted under it, planned from the
/// CSV ([`planned`]; with the serving Secrets, so that their certificate hash is filled in),
/// each an Event `DeploymentRecreated`, as OLM's CSV controller re-runs the install strategy
/// when a component is missing. A CSV that does not plan is left (and logged): it stays
/// `Failed/ComponentUnhealthy` naming the Deployment.
pub(super) async fn recreate(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    names: &[String],
) -> Result<(), Error> {
    let csv_name = csv.name_any();
    if !installs_workload(csv) {
        return Ok(());
    }
    let planned = match planned(ctx, csv, ns).await? {
        Some(Ok(steps)) => steps,
        None => return Ok(()),
        Some(Err(message)) => {
            tracing::warn!(csv = %format!("{ns}/{csv_name}"), error = %message, "Deployments are gone and the install strategy of the CSV does not plan; they are not created again");
            return Ok(());
        }
    };
    let steps: Vec<Step> = planned
        .into_iter()
        .filter(|s| webhook::is_planned_serving_secret(s) || (s.kind == "Deployment" && names.contains(&s.name)))
        .collect();
    let results = crate::install::apply::apply(&ctx.client, &steps, &ctx.apply_options()).await;
    if let Some(failed) = results.iter().find(|r| matches!(r.status, crate::install::apply::StepStatus::Failed(_))) {
        return Err(Error::Workload {
            csv: format!("{ns}/{csv_name}"),
            message: format!("creating the Deployments of its install strategy again: {failed}"),
        });
    }
    for name in names.iter().filter(|n| steps.iter().any(|s| s.kind == "Deployment" && s.name == **n)) {
        let message =
            format!("Deployment {name} is missing; capstan created it from the install strategy of {csv_name}");
        tracing::info!(csv = %format!("{ns}/{csv_name}"), deployment = %name, "{message}");
        ctx.events.publish_for(csv, EventType::Normal, "DeploymentRecreated", &message).await;
    }
    Ok(())
}

/// Says in an Event on `csv` and in the log what [`install`] applied: `DeploymentUpdated` with
/// the Deployments `updated` when only they were applied again, else `InstallStrategyApplied`
/// with every object `results` applied.
async fn announce(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    updated: Option<Vec<String>>,
    results: &[crate::install::apply::StepResult],
) {
    let csv_name = csv.name_any();
    let (reason, message) = match updated {
        Some(names) => (
            "DeploymentUpdated",
            format!("the install strategy of {csv_name} changed; Deployment {} applied again", names.join(", ")),
        ),
        None => {
            let made: Vec<String> =
                results.iter().filter(|r| r.applied()).map(|r| format!("{} {}", r.kind, r.name)).collect();
            ("InstallStrategyApplied", format!("applied from the CSV's own spec: {}", made.join(", ")))
        }
    };
    tracing::info!(csv = %format!("{ns}/{csv_name}"), "{message}");
    ctx.events.publish_for(csv, EventType::Normal, reason, &message).await;
}

/// The webhook configurations of `csv` (by its owner labels) and the APIServices among `planned`
/// that exist ([`Found`]).
async fn webhooks_found(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    planned: &[Step],
) -> Result<Vec<Found>, Error> {
    use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let selector =
        format!("{}={},{}={ns}", crate::install::LABEL_OWNER, csv.name_any(), crate::install::LABEL_OWNER_NAMESPACE);
    let params = ListParams::default().labels(&selector);
    let hash = |labels: &BTreeMap<String, String>| labels.get(webhook::LABEL_WEBHOOK_HASH).cloned();
    let mut found: Vec<Found> = Vec::new();
    if planned.iter().any(|s| s.kind == "ValidatingWebhookConfiguration") || csv.spec.webhookdefinitions.is_some() {
        let list = Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone())
            .list(&params)
            .await
            .map_err(kube_err("listing ValidatingWebhookConfigurations".to_string()))?;
        found.extend(
            list.items.iter().map(|w| ("ValidatingWebhookConfiguration".into(), w.name_any(), hash(w.labels()))),
        );
        let list = Api::<MutatingWebhookConfiguration>::all(ctx.client.clone())
            .list(&params)
            .await
            .map_err(kube_err("listing MutatingWebhookConfigurations".to_string()))?;
        found
            .extend(list.items.iter().map(|w| ("MutatingWebhookConfiguration".into(), w.name_any(), hash(w.labels()))));
    }
    let apiservices = Api::<APIService>::all(ctx.client.clone());
    for s in planned.iter().filter(|s| s.kind == "APIService") {
        if apiservices.get_opt(&s.name).await.map_err(kube_err(format!("reading APIService {}", s.name)))?.is_some() {
            found.push(("APIService".into(), s.name.clone(), None));
        }
    }
    Ok(found)
}

/// Whether every existing APIService among `planned` may be taken over by `csv`
/// ([`apiservice_adoptable`]; OLM `apiServiceOwnerConflicts`, which fails the CSV with
/// `OwnerConflict` otherwise).
async fn apiservices_adoptable(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    planned: &[Step],
) -> Result<bool, Error> {
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let apiservices = Api::<APIService>::all(ctx.client.clone());
    let name = csv.name_any();
    for s in planned.iter().filter(|s| s.kind == "APIService") {
        let Some(found) =
            apiservices.get_opt(&s.name).await.map_err(kube_err(format!("reading APIService {}", s.name)))?
        else {
            continue;
        };
        let labels = found.labels();
        let owner = (
            labels.get(crate::install::LABEL_OWNER_NAMESPACE).cloned().unwrap_or_default(),
            labels.get(crate::install::LABEL_OWNER).cloned().unwrap_or_default(),
        );
        let leaving = if owner.0.is_empty() || owner.1.is_empty() || (owner.0.as_str(), owner.1.as_str()) == (ns, &name)
        {
            false
        } else {
            let other = Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), &owner.0)
                .get_opt(&owner.1)
                .await
                .map_err(kube_err(format!("reading ClusterServiceVersion {}/{}", owner.0, owner.1)))?;
            other.and_then(|c| c.status).and_then(|s| s.phase).is_some_and(|p| {
                matches!(
                    p,
                    crate::api::clusterserviceversion::CsvPhase::Replacing
                        | crate::api::clusterserviceversion::CsvPhase::Deleting
                )
            })
        };
        if !apiservice_adoptable(labels, (ns, &name), csv.spec.replaces.as_deref(), leaving) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Deletes the Deployments labelled as `csv`'s that `planned` no longer names
/// ([`orphaned_deployments`]); one already gone is fine.
async fn remove_orphaned_deployments(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    planned: &[Step],
) -> Result<(), Error> {
    let selector =
        format!("{}={},{}={ns}", crate::install::LABEL_OWNER, csv.name_any(), crate::install::LABEL_OWNER_NAMESPACE);
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let found = api
        .list_metadata(&ListParams::default().labels(&selector))
        .await
        .map_err(kube_err(format!("listing the Deployments of CSV {ns}/{}", csv.name_any())))?;
    let names: Vec<String> = found.items.iter().map(|d| d.name_any()).collect();
    for name in orphaned_deployments(planned, &names) {
        match api.delete(&name, &Default::default()).await {
            Ok(_) => {
                tracing::info!(csv = %format!("{ns}/{}", csv.name_any()), deployment = %name, "removed a Deployment the install strategy no longer names")
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(kube_err(format!("deleting Deployment {ns}/{name}"))(e)),
        }
    }
    Ok(())
}

/// Deletes the webhook configurations `stale` ([`webhooks_due`]); one already gone is fine.
async fn remove_stale(ctx: &Context, stale: &[Found]) -> Result<(), Error> {
    use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
    for (kind, name, _) in stale {
        let deleted = match kind.as_str() {
            "ValidatingWebhookConfiguration" => Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone())
                .delete(name, &Default::default())
                .await
                .map(|_| ()),
            _ => Api::<MutatingWebhookConfiguration>::all(ctx.client.clone())
                .delete(name, &Default::default())
                .await
                .map(|_| ()),
        };
        match deleted {
            Ok(()) => tracing::info!(webhook = %name, "removed a webhook configuration its CSV no longer describes"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(kube_err(format!("deleting {kind} {name}"))(e)),
        }
    }
    Ok(())
}

/// Whether an InstallPlan installed `csv` ([`Origin`]).
async fn origin(ctx: &Context, csv: &ClusterServiceVersion, ns: &str) -> Result<Origin, Error> {
    if csv.annotations().contains_key(crate::install::ANNOTATION_PROPERTIES) {
        return Ok(Origin::Plan);
    }
    let name = csv.name_any();
    let plans = Api::<crate::api::InstallPlan>::namespaced(ctx.client.clone(), ns)
        .list(&crate::install::from_watch_cache())
        .await
        .map_err(kube_err(format!("listing InstallPlans in {ns}")))?;
    let listed = plans.items.iter().any(|p| p.spec.cluster_service_version_names.contains(&name));
    Ok(if listed { Origin::Plan } else { Origin::Csv })
}

/// The `olm.deployment-spec-hash` of each Deployment of `planned` that exists (`None`: it has no
/// such label).
async fn deployment_hashes(
    ctx: &Context,
    ns: &str,
    planned: &[Step],
) -> Result<BTreeMap<String, Option<String>>, Error> {
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let mut found = BTreeMap::new();
    for s in planned.iter().filter(|s| s.kind == "Deployment") {
        if let Some(d) = api.get_opt(&s.name).await.map_err(kube_err(format!("reading Deployment {ns}/{}", s.name)))? {
            found.insert(s.name.clone(), d.labels().get(LABEL_DEPLOYMENT_SPEC_HASH).cloned());
        }
    }
    Ok(found)
}

/// The steps [`crate::install::plan::steps`] gives for `csv` alone, in its namespace with the
/// OperatorGroup's targets, owned by the CSV, with the package of its component label and the
/// Subscription's `spec.config` of that package ([`package_of`]) as the InstallPlan plans them.
/// `None` when the namespace's OperatorGroup does not fit (the CSV fails for that first);
/// `Some(Err(message))` when the CSV does not plan.
pub(super) async fn planned(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
) -> Result<Option<Result<Vec<Step>, String>>, Error> {
    let csv_name = csv.name_any();
    let (og, targets, webhook_selector) = match super::operator_group_targets(&ctx.client, ns).await? {
        GroupTargets::Found { name, targets, webhook_selector } => (name, targets, webhook_selector),
        GroupTargets::Unfit { .. } => return Ok(None),
    };
    let package = package_of(csv, ns).unwrap_or_default();
    let config = subscription_config(ctx, ns, &package).await?;
    let mut value = serde_json::to_value(csv).unwrap_or_default();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("status");
    }
    let origin = std::path::PathBuf::from(format!("ClusterServiceVersion {ns}/{csv_name}"));
    let mut objects = vec![(origin.clone(), value)];
    objects.extend(conversion_crds(ctx, csv).await?);
    let planned = crate::bundle::Bundle::from_objects(&origin, Default::default(), objects)
        .map_err(|e| e.to_string())
        .and_then(|bundle| {
            let mut target = InstallTarget {
                namespace: ns.to_string(),
                target_namespaces: targets,
                package,
                csv_name: csv_name.clone(),
                config,
                operator_group: Some(og),
                webhook_selector,
                ..Default::default()
            };
            let mut owner = target.csv_owner_reference();
            owner.uid = csv.metadata.uid.clone().unwrap_or_default();
            target.owner = Some(owner);
            crate::install::plan::steps(&bundle, &target).map_err(|e| e.to_string())
        });
    Ok(Some(planned))
}

/// The CRDs the conversion webhooks of `csv` list (`conversionCRDs`) as they are on the cluster
/// (name and spec), each named by where it was read: planning needs them beside the CSV (a
/// conversion webhook's CRDs must be in the bundle), as the bundle had them. One not on the
/// cluster is left out (planning then says it is missing).
async fn conversion_crds(
    ctx: &Context,
    csv: &ClusterServiceVersion,
) -> Result<Vec<(std::path::PathBuf, Value)>, Error> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let names: std::collections::BTreeSet<&String> =
        csv.spec.webhookdefinitions.iter().flatten().flat_map(|w| w.conversion_crds.iter().flatten()).collect();
    let api = Api::<CustomResourceDefinition>::all(ctx.client.clone());
    let mut out = Vec::new();
    for name in names {
        let Some(crd) =
            api.get_opt(name).await.map_err(kube_err(format!("reading CustomResourceDefinition {name}")))?
        else {
            continue;
        };
        let value = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name}, "spec": crd.spec,
        });
        out.push((std::path::PathBuf::from(format!("CustomResourceDefinition {name}")), value));
    }
    Ok(out)
}

/// The `spec.config` of the Subscription of `package` in `ns` (none, or one whose names do not
/// check, as the InstallPlan refuses it: the empty config).
async fn subscription_config(ctx: &Context, ns: &str, package: &str) -> Result<SubscriptionConfig, Error> {
    if package.is_empty() {
        return Ok(SubscriptionConfig::default());
    }
    let subs = Api::<Subscription>::namespaced(ctx.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing Subscriptions in {ns}")))?;
    Ok(subs
        .items
        .into_iter()
        .find(|s| s.spec.package == package)
        .and_then(|s| s.spec.config)
        .filter(|c| c.check_names().is_ok())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests;
