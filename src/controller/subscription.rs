//! Subscription reconciler (`reference/olm-v0.md` §1.3): resolves the Subscription against the
//! catalogs its namespace can see and the CSVs installed there, and creates one InstallPlan per
//! resolution. Status: `state` (UpgradePending / AtLatestKnown / UpgradeFailed), `currentCSV`,
//! `installedCSV`, `installPlanRef`, `installplan`, `catalogHealth`, conditions
//! `CatalogSourcesUnhealthy`, `ResolutionFailed`, `InstallPlanPending`, `InstallPlanMissing`,
//! `InstallPlanFailed`.
//!
//! One reconcile goes through three gates, each an observation, a pure decision and its action:
//! the catalogs ([`decide_catalogs`]: health, wait while the Subscription's own catalog loads,
//! defer while it cannot be loaded), the resolution ([`decide_resolution`]: failed, at the latest
//! known, or bundles to install), and the InstallPlan ([`decide_prior`] for the plan the status
//! points at, [`plan_progress`] for the plan of this resolution). The status is written once, at
//! the end of the gate that stops, and only when it changed ([`SubscriptionStatus::same_as`]).
//! InstallPlan status is written only by the InstallPlan reconciler: this one creates the plan
//! with its bundle lookups in an annotation ([`super::handoff::ANNOTATION_BUNDLE_LOOKUPS`])
//! and marks a superseded plan with an annotation
//! ([`super::handoff::ANNOTATION_SUPERSEDED_BY`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::events::EventType;
use super::handoff::{
    ANNOTATION_BUNDLE_LOOKUPS, ANNOTATION_SUPERSEDED_BY, INSTALL_RETRYING, PlannedLookups, install_plan_name,
};
use super::{CatalogState, Context, Error, apply_typed_status, fresh, kube_err, now_time};
use crate::api::common::ConditionStatus;
use crate::api::installplan::{BundleLookup, InstallPlanPhase, InstallPlanSpec};
use crate::api::subscription::{
    InstallPlanReference, SubscriptionCatalogHealth, SubscriptionConditionType as C, SubscriptionState,
    SubscriptionStatus, reason,
};
use crate::api::{Approval, CatalogSource, ClusterServiceVersion, InstallPlan, Subscription};
use crate::install::from_watch_cache;
use crate::install::plan::{ANNOTATION_GENERATED_BY, DependencySubscription};
use crate::resolve::{
    CatalogInput, CatalogSourceKey, ErrorKind, InstalledBundle, Reason, ResolveError, ResolveInput, ResolveOutput,
    ResolvedBundle, SubscriptionRequest, resolve,
};

/// A CatalogSource's (namespace, name).
type Key = (String, String);

/// What the Subscription reconciler saw of the catalogs its namespace can see (its own and the
/// global catalog namespace, §1.2).
#[derive(Debug, Clone, Default)]
pub(crate) struct CatalogView {
    /// CatalogSources that exist.
    pub existing: BTreeSet<Key>,
    /// The known states of those ([`super::CatalogStore`]); a CatalogSource not listed is not loaded yet.
    pub states: Vec<(Key, CatalogState)>,
}

/// The outcome of the catalog gate.
#[derive(Debug, Clone)]
pub(crate) enum CatalogGate {
    /// The Subscription's own catalog is being loaded: write the status and look again in 2 s
    /// (the CatalogSource reconciler also resyncs Subscriptions once it is loaded).
    Loading,
    /// The Subscription's own catalog cannot be loaded, for this reason.
    SourceFailed(String),
    /// Resolve against these catalogs.
    Resolve(Vec<CatalogInput>),
}

fn catalog_ref(k: &Key) -> ObjectReference {
    ObjectReference {
        api_version: Some("operators.coreos.com/v1alpha1".into()),
        kind: Some("CatalogSource".into()),
        namespace: Some(k.0.clone()),
        name: Some(k.1.clone()),
        ..Default::default()
    }
}

/// Catalog health (§1.3) into `status` — `catalogHealth` (every visible CatalogSource, healthy when
/// loaded) and `CatalogSourcesUnhealthy` — and whether resolution can go on. `source` is the
/// Subscription's `spec.sourceNamespace`/`spec.source`. Pure.
pub(crate) fn decide_catalogs(
    status: &mut SubscriptionStatus,
    source: &Key,
    view: &CatalogView,
    now: &Time,
) -> CatalogGate {
    let visible: Vec<&(Key, CatalogState)> = view.states.iter().filter(|(k, _)| view.existing.contains(k)).collect();
    let mut catalogs: Vec<CatalogInput> = visible
        .iter()
        .filter_map(|(k, st)| {
            st.index().map(|l| CatalogInput {
                key: CatalogSourceKey::new(&k.0, &k.1),
                priority: l.priority,
                index: l.index.clone(),
            })
        })
        .collect();
    catalogs.sort_by(|a, b| (&a.key.namespace, &a.key.name).cmp(&(&b.key.namespace, &b.key.name)));
    let unhealthy: Vec<(&Key, &str)> = visible.iter().filter_map(|(k, st)| st.error().map(|e| (k, e))).collect();
    let health = |k: &Key, healthy: bool| SubscriptionCatalogHealth {
        catalog_source_ref: catalog_ref(k),
        last_updated: now.clone(),
        healthy,
    };
    status.catalog_health =
        visible.iter().filter(|(_, st)| matches!(st, CatalogState::Ready(_))).map(|(k, _)| health(k, true)).collect();
    status.catalog_health.extend(unhealthy.iter().map(|(k, _)| health(k, false)));
    let loaded = visible.iter().any(|(k, st)| k == source && st.index().is_some());
    let source_error = unhealthy.iter().find(|(k, _)| *k == source).map(|(_, e)| e.to_string());
    if view.existing.contains(source) && !loaded && source_error.is_none() {
        status.fail(
            C::CatalogSourcesUnhealthy,
            reason::UNHEALTHY_CATALOG_SOURCE_FOUND,
            &format!("catalog source {}/{} is being loaded", source.0, source.1),
            now,
        );
        return CatalogGate::Loading;
    }
    // The Subscription's own CatalogSource missing (deleted, or never created) makes the catalogs
    // unhealthy, with OLM's message (`UpdateHealth` in
    // pkg/controller/operators/catalog/subscription/state.go).
    let missing =
        (!view.existing.contains(source)).then(|| format!("targeted catalogsource {}/{} missing", source.0, source.1));
    // The Subscription's own catalog unhealthy: OLM's words alone, whatever else is unhealthy
    // (clients match them; why it cannot be loaded is in ResolutionFailed and in the
    // CatalogSource's status). Another catalog unhealthy: capstan names it and why.
    let problems: Vec<String> = match &source_error {
        Some(_) => vec![format!("targeted catalogsource {}/{} unhealthy", source.0, source.1)],
        None => missing
            .into_iter()
            .chain(unhealthy.iter().map(|((n, c), e)| format!("catalog source {n}/{c}: {e}")))
            .collect(),
    };
    if problems.is_empty() {
        status.set_condition(
            C::CatalogSourcesUnhealthy,
            ConditionStatus::False,
            reason::ALL_CATALOG_SOURCES_HEALTHY,
            "all available catalogsources are healthy",
            now,
        );
    } else {
        status.fail(C::CatalogSourcesUnhealthy, reason::UNHEALTHY_CATALOG_SOURCE_FOUND, &problems.join("; "), now);
    }
    match source_error {
        Some(why) => CatalogGate::SourceFailed(why),
        None => CatalogGate::Resolve(catalogs),
    }
}

/// The Subscription's own catalog cannot be loaded (`why`): resolution is deferred until it can;
/// what is installed stays as it is. With an installed CSV `kept` nothing is
/// unresolved — the catalog is — so the catalog condition says so; without one,
/// `ResolutionFailed` does. Pure.
pub(crate) fn defer_for_source(
    status: &mut SubscriptionStatus,
    name: &str,
    source: &Key,
    why: &str,
    kept: Option<&str>,
    now: &Time,
) {
    let (sns, src) = source;
    match kept {
        Some(csv) => {
            let message = format!(
                "catalog source {sns}/{src} (spec.source) cannot be loaded: {why}; resolution of Subscription {name} is deferred and retried every 30 s; the installed {csv} is kept as it is"
            );
            status.fail(C::CatalogSourcesUnhealthy, reason::UNHEALTHY_CATALOG_SOURCE_FOUND, &message, now);
            status.remove_condition(&C::ResolutionFailed);
        }
        None => {
            let message = format!(
                "catalog source {sns}/{src} (spec.source) cannot be loaded, so Subscription {name} is not resolved: {why}; fix what it names in CatalogSource {sns}/{src} (spec.image, spec.secrets or its ConfigMap); capstan retries every 30 s and keeps what is installed"
            );
            status.fail(C::ResolutionFailed, reason::ERROR_PREVENTED_RESOLUTION, &message, now);
        }
    }
}

/// The `ResolutionFailed` reason of a resolver failure, OLM's (§4.7): `ConstraintsNotSatisfiable`
/// when dependencies or uniqueness rules cannot be met and when the Subscription's catalog, package,
/// channel or starting CSV is not found (OLM makes each of those an unsatisfiable subscription
/// variable: `getSubscriptionVariables` in pkg/controller/registry/resolver/resolver.go),
/// `ErrorPreventedResolution` for everything else (a broken channel, a bad range).
pub(crate) fn resolution_reason(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Unsatisfiable
        | ErrorKind::MissingCatalog
        | ErrorKind::MissingPackage
        | ErrorKind::MissingChannel
        | ErrorKind::StartingCsvNotInChannel => reason::CONSTRAINTS_NOT_SATISFIABLE,
        _ => reason::ERROR_PREVENTED_RESOLUTION,
    }
}

/// The outcome of the resolution gate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolution {
    /// The Subscription cannot be resolved; `event` when the message is new (a Warning Event says it).
    Failed {
        /// The resolver's explanation.
        message: String,
        /// Whether to record an Event (the message changed).
        event: bool,
    },
    /// Everything resolved is installed: `AtLatestKnown`.
    AtLatestKnown,
    /// These bundles are to be installed, the Subscription's own first.
    Install(Vec<ResolvedBundle>),
}

/// The resolution of Subscription `ns/name` (`out`: the resolver's output for its namespace;
/// `installed`: the CSVs that exist there) into `status` (`currentCSV`, `installedCSV`,
/// `ResolutionFailed`, `state` when nothing is to install). Pure.
pub(crate) fn decide_resolution(
    status: &mut SubscriptionStatus,
    sub: &Subscription,
    out: &ResolveOutput,
    installed: &[String],
    now: &Time,
) -> Resolution {
    let (ns, name) = (sub.namespace().unwrap_or_default(), sub.name_any());
    if let Some(err) = out.errors.iter().find(|e| e.subscription == name) {
        return resolution_failed(status, err, now);
    }
    status.remove_condition(&C::ResolutionFailed);
    let mine: Vec<&ResolvedBundle> =
        out.resolved.iter().filter(|b| b.subscription == name && b.namespace == ns).collect();
    let is_installed = |csv: &str| installed.iter().any(|i| i == csv);
    if let Some(own) = mine.iter().find(|b| b.package == sub.spec.package) {
        status.current_csv = Some(own.bundle.clone());
        if is_installed(&own.bundle) {
            status.installed_csv = Some(own.bundle.clone());
        } else if let Reason::Upgrade { from } = &own.reason
            && is_installed(from)
        {
            // An upgrade is pending (waiting for approval or an OperatorCondition): as in OLM,
            // installedCSV names what is installed meanwhile, currentCSV the upgrade.
            status.installed_csv = Some(from.clone());
        }
    }
    let to_install: Vec<ResolvedBundle> = mine
        .into_iter()
        .filter(|b| {
            !matches!(b.reason, Reason::Installed { .. } | Reason::Dependency { already_installed: true, .. })
                && !is_installed(&b.bundle)
        })
        .cloned()
        .collect();
    if !to_install.is_empty() {
        return Resolution::Install(to_install);
    }
    status.state = Some(SubscriptionState::AtLatestKnown);
    for c in [C::InstallPlanPending, C::InstallPlanMissing, C::InstallPlanFailed] {
        status.remove_condition(&c);
    }
    Resolution::AtLatestKnown
}

fn resolution_failed(status: &mut SubscriptionStatus, err: &ResolveError, now: &Time) -> Resolution {
    let was = status
        .condition(&C::ResolutionFailed)
        .filter(|c| c.status == ConditionStatus::True)
        .and_then(|c| c.message.clone());
    let message = err.message();
    status.fail(C::ResolutionFailed, resolution_reason(err.kind), &message, now);
    let event = was.as_deref() != Some(message.as_str());
    Resolution::Failed { message, event }
}

/// What to do about the plan `status.installPlanRef` names when it is not this resolution's plan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Prior {
    /// Nothing: it is done, gone, or the same plan.
    Ignore,
    /// It is being applied (or approved and about to be): the next resolution waits for it (CSVs
    /// appear one by one while it runs; a resolution now would ask for the rest in a second plan).
    Wait {
        /// Its phase, as the `InstallPlanPending` reason.
        phase: String,
        /// The condition message.
        message: String,
    },
    /// It waits for approval and the resolution no longer matches it (a newer bundle supersedes
    /// it): it is marked superseded, so that approving it later cannot install what was skipped.
    Supersede {
        /// Why, for the plan's status (written by the InstallPlan reconciler).
        message: String,
    },
}

/// The name of an InstallPlan phase as written (`Installing`, …).
fn phase_name(phase: &InstallPlanPhase) -> String {
    phase.as_str().to_string()
}

/// What to do about `prior` (the plan `status.installPlanRef` names, when it exists and is not
/// `plan_name`) for Subscription `name` whose resolution now installs `csv_names` (§5, the
/// approval flows). Pure.
pub(crate) fn decide_prior(prior: &InstallPlan, plan_name: &str, csv_names: &[String], name: &str) -> Prior {
    let phase = prior.status.as_ref().map(|s| s.phase.clone()).unwrap_or(InstallPlanPhase::Planning);
    let waiting_for_approval = phase == InstallPlanPhase::RequiresApproval && !prior.spec.approved;
    if phase.is_terminal() {
        return Prior::Ignore;
    }
    if !waiting_for_approval {
        let p = phase_name(&phase);
        return Prior::Wait {
            message: format!("InstallPlan {} is {p}; the next resolution waits for it", prior.name_any()),
            phase: p,
        };
    }
    Prior::Supersede {
        message: format!(
            "superseded by InstallPlan {plan_name} ({}): the catalog now resolves Subscription {name} differently; approve {plan_name} instead",
            csv_names.join(", ")
        ),
    }
}

/// `InstallPlanMissing` (§1.3): the plan named in `status.installPlanRef` (`prior`) is gone
/// (`prior_missing`: deleted by hand, or pruned); it is recreated as `plan_name` from the current
/// resolution, and the condition says so. It goes once the plan exists (`plan_exists`). Pure.
pub(crate) fn missing_condition(
    status: &mut SubscriptionStatus,
    ns: &str,
    prior_missing: bool,
    plan_exists: bool,
    plan_name: &str,
    csv_names: &[String],
    now: &Time,
) {
    match status.install_plan_ref.as_ref().and_then(|r| r.name.clone()) {
        Some(p) if prior_missing => {
            let message = format!(
                "InstallPlan {ns}/{p} referenced by status.installPlanRef was not found; capstan creates InstallPlan {plan_name} for {} from the current resolution",
                csv_names.join(", ")
            );
            status.fail(C::InstallPlanMissing, reason::REFERENCED_INSTALL_PLAN_NOT_FOUND, &message, now);
        }
        _ if plan_exists => status.remove_condition(&C::InstallPlanMissing),
        _ => {}
    }
}

/// The status of a Subscription whose resolution is installed by `plan` (§1.3): the plan
/// references, and by the plan's phase `UpgradeFailed` with `InstallPlanFailed`, or
/// `UpgradePending` with `InstallPlanPending` (why it waits; that it supersedes `superseded`).
/// Returns when to look again. Pure.
pub(crate) fn plan_progress(
    status: &mut SubscriptionStatus,
    plan: &InstallPlan,
    superseded: Option<&str>,
    now: &Time,
) -> Duration {
    let (ns, plan_name) = (plan.namespace().unwrap_or_default(), plan.name_any());
    let uid = plan.uid().unwrap_or_default();
    // The reference is taken once per plan, as OLM's `setIPReference` does: its resourceVersion
    // is the one first seen, so the plan's own status writes do not rewrite the Subscription's.
    let resource_version = status
        .install_plan_ref
        .as_ref()
        .filter(|r| r.name.as_deref() == Some(plan_name.as_str()) && r.uid.as_deref() == Some(uid.as_str()))
        .and_then(|r| r.resource_version.clone())
        .unwrap_or_else(|| plan.resource_version().unwrap_or_default());
    status.install_plan_ref = Some(ObjectReference {
        api_version: Some("operators.coreos.com/v1alpha1".into()),
        kind: Some("InstallPlan".into()),
        namespace: Some(ns.clone()),
        name: Some(plan_name.clone()),
        uid: Some(uid.clone()),
        resource_version: Some(resource_version),
        ..Default::default()
    });
    status.installplan = Some(InstallPlanReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "InstallPlan".into(),
        name: plan_name.clone(),
        uuid: uid,
    });
    status.install_plan_generation = Some(plan.spec.generation.unwrap_or(1));
    let phase = plan.status.as_ref().map(|s| s.phase.clone()).unwrap_or(InstallPlanPhase::Planning);
    if phase == InstallPlanPhase::Failed {
        let message = plan
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .unwrap_or_else(|| format!("InstallPlan {plan_name} failed"));
        status.state = Some(SubscriptionState::UpgradeFailed);
        status.remove_condition(&C::InstallPlanPending);
        status.fail(C::InstallPlanFailed, reason::INSTALL_PLAN_FAILED, &message, now);
        return Duration::from_secs(10);
    }
    status.state = Some(SubscriptionState::UpgradePending);
    status.remove_condition(&C::InstallPlanFailed);
    let p = phase_name(&phase);
    let mut message = if phase == InstallPlanPhase::RequiresApproval {
        format!(
            "InstallPlan {plan_name} requires approval: `capstan approve {plan_name} -n {ns}` or set spec.approved=true"
        )
    } else {
        format!("InstallPlan {plan_name} is {p}")
    };
    // A plan held by a transient error says why in its Installed condition: show it here.
    if let Some(why) = plan.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.reason.as_ref().is_some_and(|r| r.as_str() == INSTALL_RETRYING))
            .and_then(|c| c.message.clone())
    }) {
        message = format!("{message}: {why}");
    }
    if let Some(old) = superseded {
        message = format!("{message}; it supersedes InstallPlan {old}, which can no longer be approved");
    }
    status.set_condition(C::InstallPlanPending, ConditionStatus::True, &p, &message, now);
    Duration::from_secs(if phase == InstallPlanPhase::Complete { 1 } else { 10 })
}

/// The InstallPlan conditions of a Subscription with nothing left to install, from the plan its
/// `status.installPlanRef` names (`plan`; `None`: it is gone), as OLM writes them whatever the
/// Subscription's state (`CheckInstallPlanStatus`,
/// `pkg/controller/operators/catalog/subscription/state.go`): a plan with no phase is
/// `InstallPlanPending` reason `InstallPlanNotYetReconciled`, one Planning, RequiresApproval or
/// Installing is `InstallPlanPending` with its phase as reason, a Failed one `InstallPlanFailed`
/// with the reason of its `Installed=False` condition (else `InstallPlanFailed`), a Complete one
/// none; a missing one `InstallPlanMissing`. So a plan edited or deleted after the install shows
/// on its Subscription. Pure.
pub(crate) fn referenced_plan_conditions(
    status: &mut SubscriptionStatus,
    ns: &str,
    name: &str,
    plan: Option<&InstallPlan>,
    now: &Time,
) {
    for c in [C::InstallPlanPending, C::InstallPlanMissing, C::InstallPlanFailed] {
        status.remove_condition(&c);
    }
    let Some(plan) = plan else {
        let message = format!(
            "InstallPlan {ns}/{name} referenced by status.installPlanRef was not found; the operator stays installed (status.installedCSV)"
        );
        status.fail(C::InstallPlanMissing, reason::REFERENCED_INSTALL_PLAN_NOT_FOUND, &message, now);
        return;
    };
    let Some(st) = plan.status.as_ref() else {
        status.set_condition(
            C::InstallPlanPending,
            ConditionStatus::True,
            reason::INSTALL_PLAN_NOT_YET_RECONCILED,
            "",
            now,
        );
        return;
    };
    let installed =
        st.conditions.iter().find(|c| c.type_ == Some(crate::api::installplan::InstallPlanConditionType::Installed));
    let message = installed.and_then(|c| c.message.clone()).or_else(|| st.message.clone()).unwrap_or_default();
    match &st.phase {
        InstallPlanPhase::Complete => {}
        InstallPlanPhase::Failed => {
            let reason = installed
                .filter(|c| c.status == Some(ConditionStatus::False))
                .and_then(|c| c.reason.as_ref().map(|r| r.as_str().to_string()))
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| reason::INSTALL_PLAN_FAILED.to_string());
            status.set_condition(C::InstallPlanFailed, ConditionStatus::True, &reason, &message, now);
        }
        p @ (InstallPlanPhase::Planning | InstallPlanPhase::RequiresApproval | InstallPlanPhase::Installing) => {
            status.set_condition(C::InstallPlanPending, ConditionStatus::True, p.as_str(), &message, now);
        }
        p if p.as_str().is_empty() => {
            let r = reason::INSTALL_PLAN_NOT_YET_RECONCILED;
            status.set_condition(C::InstallPlanPending, ConditionStatus::True, r, &message, now);
        }
        _ => {}
    }
}

/// The InstallPlan of one resolution, before it is created (§1.4): named by
/// [`install_plan_name`], owned by the Subscription, approved when approval is Automatic, with the
/// bundle lookups in annotation [`ANNOTATION_BUNDLE_LOOKUPS`]. Pure.
pub(crate) fn new_plan(
    sub: &Subscription,
    plan_name: &str,
    csv_names: &[String],
    lookups: &PlannedLookups,
    generation: i64,
) -> Result<InstallPlan, Error> {
    let (ns, name) = (sub.namespace().unwrap_or_default(), sub.name_any());
    let approval = sub.spec.install_plan_approval.unwrap_or(Approval::Automatic);
    let owner = OwnerReference {
        api_version: Subscription::api_version(&()).into_owned(),
        kind: Subscription::kind(&()).into_owned(),
        name: name.clone(),
        uid: sub.uid().unwrap_or_default(),
        // OLM's `AddNonBlockingOwner`: not a controller reference (a plan of several
        // Subscriptions is owned by each).
        controller: Some(false),
        block_owner_deletion: Some(false),
    };
    let lookups_json = serde_json::to_string(lookups).map_err(|source| Error::Build {
        what: format!("the bundle lookups of InstallPlan {ns}/{plan_name}"),
        source,
    })?;
    let metadata = ObjectMeta {
        name: Some(plan_name.to_string()),
        namespace: Some(ns.clone()),
        owner_references: Some(vec![owner]),
        // OLM's adoption: the Subscription's latest plan carries its operator's component label,
        // and that of each dependency whose Subscription the plan creates (they refer to it);
        // older plans lose it when the next one is made (`disown`).
        labels: Some(
            std::iter::once(sub.spec.package.as_str())
                .chain(lookups.subscriptions.iter().map(|d| d.package.as_str()))
                .map(|package| (crate::install::component_label_key(package, &ns), String::new()))
                .collect(),
        ),
        annotations: Some([(ANNOTATION_BUNDLE_LOOKUPS.to_string(), lookups_json)].into()),
        ..Default::default()
    };
    let spec = InstallPlanSpec {
        // As OLM: the catalogs are in `status.catalogSources` and the bundle lookups, not here.
        source: None,
        source_namespace: None,
        cluster_service_version_names: csv_names.to_vec(),
        approval,
        approved: approval == Approval::Automatic,
        generation: Some(generation),
    };
    Ok(InstallPlan { metadata, spec, status: None })
}

/// The `spec.generation` of the next InstallPlan of a namespace, as OLM v0 numbers them (\[OLM\]
/// `pkg/controller/operators/catalog/operator.go` `syncResolvingNamespace`: one more than the
/// highest of the namespace's plans' `spec.generation` and its Subscriptions'
/// `status.installPlanGeneration`). Pure.
pub(crate) fn next_plan_generation(plans: &[InstallPlan], subs: &[&Subscription]) -> i64 {
    let plans = plans.iter().filter_map(|p| p.spec.generation);
    let subs = subs.iter().filter_map(|s| s.status.as_ref().and_then(|st| st.install_plan_generation));
    plans.chain(subs).max().unwrap_or(0) + 1
}

/// The Subscriptions a plan installing `to_install` creates, as OLM v0 does (\[OLM\]
/// `resolver/step_resolver.go` `ResolveSteps`): one for each bundle that no Subscription of the
/// namespace (`subscriptions`) matches — same package, same channel when the Subscription names
/// one, same catalog — that is, for each dependency, on the channel and catalog it was resolved
/// from, starting at the resolved CSV. Pure.
pub(crate) fn dependency_subscriptions(
    to_install: &[ResolvedBundle],
    subscriptions: &[SubscriptionRequest],
) -> Vec<DependencySubscription> {
    to_install
        .iter()
        .filter(|b| {
            let channel = b.channel.as_deref().unwrap_or_default();
            !subscriptions.iter().any(|s| {
                s.package == b.package
                    && s.channel.as_deref().is_none_or(|c| c == channel)
                    && b.catalog.as_ref().is_none_or(|c| c.name == s.source && c.namespace == s.source_namespace)
            })
        })
        .map(|b| {
            let catalog = b.catalog.clone().unwrap_or_else(|| CatalogSourceKey::new("", ""));
            DependencySubscription {
                package: b.package.clone(),
                channel: b.channel.clone().unwrap_or_default(),
                catalog_source: catalog.name,
                catalog_source_namespace: catalog.namespace,
                starting_csv: b.bundle.clone(),
            }
        })
        .collect()
}

/// A Subscription an InstallPlan created for a dependency (annotation
/// [`ANNOTATION_GENERATED_BY`] naming `plan`) and that has no plan reference yet points at that
/// plan, `UpgradePending` with `currentCSV` = `spec.startingCSV`, as OLM does
/// (`catalog/operator.go` `ensureSubscriptionInstallPlanState`); once its CSV is there the
/// resolution makes it `AtLatestKnown` with `installedCSV`. Pure.
pub(crate) fn adopt_generating_plan(status: &mut SubscriptionStatus, sub: &Subscription, plan: &InstallPlan) {
    if status.install_plan_ref.is_some() || sub.annotations().get(ANNOTATION_GENERATED_BY) != Some(&plan.name_any()) {
        return;
    }
    let (ns, plan_name, uid) = (plan.namespace().unwrap_or_default(), plan.name_any(), plan.uid().unwrap_or_default());
    status.install_plan_ref = Some(ObjectReference {
        api_version: Some("operators.coreos.com/v1alpha1".into()),
        kind: Some("InstallPlan".into()),
        namespace: Some(ns),
        name: Some(plan_name.clone()),
        uid: Some(uid.clone()),
        resource_version: plan.resource_version(),
        ..Default::default()
    });
    status.installplan = Some(InstallPlanReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "InstallPlan".into(),
        name: plan_name,
        uuid: uid,
    });
    status.state = Some(SubscriptionState::UpgradePending);
    status.current_csv = sub.spec.starting_csv.clone().filter(|c| !c.is_empty());
}

/// Where each bundle of `to_install` comes from, for the InstallPlan reconciler: image, CSV,
/// replaced CSV, catalog and properties — all from the resolver's [`ResolvedBundle`] (the
/// catalogs are not read again); and the Subscriptions the plan creates for dependencies
/// (`subscriptions`, [`dependency_subscriptions`]).
pub(crate) fn planned_lookups(
    to_install: &[ResolvedBundle],
    subscriptions: Vec<DependencySubscription>,
) -> PlannedLookups {
    let bundle_lookups = to_install
        .iter()
        .map(|b| {
            let key = b.catalog.as_ref().map(|c| (c.namespace.clone(), c.name.clone())).unwrap_or_default();
            let mut lookup = BundleLookup {
                path: b.image.clone(),
                identifier: b.bundle.clone(),
                replaces: match &b.reason {
                    Reason::Upgrade { from } => from.clone(),
                    _ => String::new(),
                },
                catalog_source_ref: catalog_ref(&key),
                conditions: Vec::new(),
                properties: None,
            };
            lookup.set_properties(&b.properties);
            lookup
        })
        .collect();
    let mut catalog_sources: Vec<String> =
        to_install.iter().filter_map(|b| b.catalog.as_ref().map(|c| c.name.clone())).collect();
    catalog_sources.sort();
    catalog_sources.dedup();
    PlannedLookups { catalog_sources, bundle_lookups, subscriptions }
}

/// Puts the component label of the Subscription's operator (`operators.coreos.com/<package>.<namespace>`,
/// value `""`) on the Subscription, as OLM's adoption controller does
/// (`pkg/controller/operators/adoption_controller.go` `ReconcileSubscription`), so that
/// `kubectl get subscriptions -l operators.coreos.com/<package>.<namespace>` finds it with the
/// operator's other objects. One merge patch, once; the watch ignores the change
/// (`spec_or_metadata_but_components`).
async fn adopt(ctx: &Context, sub: &Subscription) -> Result<(), Error> {
    let ns = sub.namespace().unwrap_or_default();
    let key = crate::install::component_label_key(&sub.spec.package, &ns);
    if sub.spec.package.is_empty() || sub.labels().contains_key(&key) {
        return Ok(());
    }
    let api: Api<Subscription> = Api::namespaced(ctx.client.clone(), &ns);
    let patch = json!({"metadata": {"labels": {key: ""}}});
    match api.patch(&sub.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!("labelling Subscription {ns}/{}", sub.name_any()))(e)),
    }
}

/// Removes the component label from the Subscription's previous InstallPlan once a new one is
/// made: OLM's adoption keeps it on the latest plan only (`adoptInstallPlan` disowns the others).
async fn disown(plans: &Api<InstallPlan>, prior: &InstallPlan, package: &str) -> Result<(), Error> {
    let (ns, name) = (prior.namespace().unwrap_or_default(), prior.name_any());
    let key = crate::install::component_label_key(package, &ns);
    if !prior.labels().contains_key(&key) {
        return Ok(());
    }
    let patch = json!({"metadata": {"labels": {key: null}}});
    match plans.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!("removing the component label from InstallPlan {ns}/{name}"))(e)),
    }
}

/// Writes `status` onto the Subscription unless it says what its status says already.
async fn write(ctx: &Context, sub: &Subscription, status: &SubscriptionStatus) -> Result<(), Error> {
    let mut status = status.clone();
    let key = (sub.spec.source_namespace.clone(), sub.spec.source.clone());
    if let Some(loaded) = ctx.catalogs.get(&key).and_then(|s| s.index().cloned()) {
        let found = deprecated(&loaded.index, sub, &status);
        deprecation_conditions(&mut status, found, &now_time());
    }
    let status = &status;
    if sub.status.as_ref().is_some_and(|old| old.same_as(status)) {
        return Ok(());
    }
    let ns = sub.namespace().unwrap_or_default();
    let api: Api<Subscription> = Api::namespaced(ctx.client.clone(), &ns);
    apply_typed_status(&api, sub, status).await?;
    // The Operator object lists the Subscription with its state and conditions (`operator.rs`):
    // a condition that changes without the state (the catalog deleted, resolution failing) is
    // shown there too.
    if sub.status.as_ref().map(|s| (&s.state, &s.conditions)) != Some((&status.state, &status.conditions)) {
        ctx.sync_operator(&sub.spec.package, &ns);
    }
    Ok(())
}

/// What of a Subscription's installed bundle its catalog deprecates (`olm.deprecations`), each
/// message prefixed as OLM's resolver cache prefixes it (`olm.package/<name>: `,
/// `olm.channel/<name>: `, `olm.bundle/<name>: `; OLM v0
/// `pkg/controller/registry/resolver/source_registry.go`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Deprecated {
    /// The package's message.
    pub package: Option<String>,
    /// The subscribed channel's message (none when `spec.channel` is empty, as in OLM).
    pub channel: Option<String>,
    /// The installed bundle's message.
    pub bundle: Option<String>,
}

/// [`Deprecated`] of `sub`'s installed CSV in its catalog `index`; `None` when the catalog does
/// not hold that CSV (then OLM leaves the conditions as they are). Pure.
pub(crate) fn deprecated(
    index: &crate::resolve::CatalogIndex,
    sub: &Subscription,
    status: &SubscriptionStatus,
) -> Option<Deprecated> {
    let installed = status.installed_csv.as_deref().filter(|c| !c.is_empty())?;
    let package = sub.spec.package.as_str();
    index.bundle_in(Some(package), installed)?;
    let Some(d) = index.deprecations(package) else { return Some(Deprecated::default()) };
    let channel = sub.spec.channel.as_deref().filter(|c| !c.is_empty());
    Some(Deprecated {
        package: d.package.as_ref().map(|m| format!("olm.package/{package}: {m}")),
        channel: channel.and_then(|c| d.channels.get(c).map(|m| format!("olm.channel/{c}: {m}"))),
        bundle: d.bundles.get(installed).map(|m| format!("olm.bundle/{installed}: {m}")),
    })
}

/// OLM's deprecation conditions (`pkg/controller/operators/catalog/subscription/reconciler.go`,
/// `updateDeprecatedStatus`): `PackageDeprecated`, `ChannelDeprecated`, `BundleDeprecated`
/// (status True, the message, no reason) for each level `found` deprecates, gone for the others,
/// and the roll-up `Deprecated` with their messages joined by `; `. `found` `None` (the installed
/// CSV is not in the catalog): unchanged. Pure.
pub(crate) fn deprecation_conditions(status: &mut SubscriptionStatus, found: Option<Deprecated>, now: &Time) {
    let Some(d) = found else { return };
    let mut rollup = Vec::new();
    for (type_, message) in
        [(C::PackageDeprecated, d.package), (C::ChannelDeprecated, d.channel), (C::BundleDeprecated, d.bundle)]
    {
        match message {
            Some(m) => {
                status.set_condition(type_, ConditionStatus::True, "", &m, now);
                rollup.push(m);
            }
            None => status.remove_condition(&type_),
        }
    }
    if rollup.is_empty() {
        status.remove_condition(&C::Deprecated);
    } else {
        status.set_condition(C::Deprecated, ConditionStatus::True, "", &rollup.join("; "), now);
    }
}

/// The catalogs namespace `ns` can see: the CatalogSources that exist in it and in the global
/// catalog namespace (unless its OperatorGroup excludes global catalogs,
/// [`excludes_global_catalogs`]), and what the [`super::CatalogStore`] knows of them. The
/// CatalogSources come from the CatalogSource controller's reflector store (a deleted one is gone
/// from it before its deletion wakes the Subscriptions), not from the [`super::CatalogStore`],
/// which keeps what it loaded of a deleted CatalogSource; without that store, they are listed.
async fn observe_catalogs(ctx: &Context, ns: &str) -> Result<CatalogView, Error> {
    let mut existing = BTreeSet::new();
    let groups = Api::<crate::api::OperatorGroup>::namespaced(ctx.client.clone(), ns)
        .list(&from_watch_cache())
        .await
        .map_err(kube_err(format!("listing OperatorGroups in {ns}")))?;
    let mut namespaces = vec![ns.to_string()];
    if !excludes_global_catalogs(&groups.items) {
        namespaces.push(ctx.options.global_catalog_namespace.clone());
    }
    if let Some(store) = ctx.catalog_sources.get() {
        existing.extend(
            store
                .state()
                .iter()
                .filter_map(|c| Some((c.metadata.namespace.clone()?, c.name_any())))
                .filter(|(cns, _)| namespaces.contains(cns)),
        );
        let states = ctx.catalogs.states_of(&existing);
        return Ok(CatalogView { existing, states });
    }
    for cns in namespaces {
        let list = Api::<CatalogSource>::namespaced(ctx.client.clone(), &cns)
            .list(&from_watch_cache())
            .await
            .map_err(kube_err(format!("listing CatalogSources in {cns}")))?;
        existing.extend(list.items.iter().map(|c| (cns.clone(), c.name_any())));
    }
    let states = ctx.catalogs.states_of(&existing);
    Ok(CatalogView { existing, states })
}

/// Whether a namespace whose OperatorGroups are `groups` resolves against its own catalogs only:
/// its one OperatorGroup has annotation
/// [`crate::api::operatorgroup::EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION_ANNOTATION`] `"true"` (OLM v0
/// `pkg/controller/registry/resolver/step_resolver.go`, `exclusionAnnotation`; with no or several
/// OperatorGroups OLM does not resolve at all, and capstan's plan says why). Pure.
pub(crate) fn excludes_global_catalogs(groups: &[crate::api::OperatorGroup]) -> bool {
    matches!(groups, [og] if og.annotations().get(crate::api::operatorgroup::EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION_ANNOTATION).map(String::as_str) == Some("true"))
}

/// The installed CSV a Subscription whose catalog cannot be loaded keeps: `status.installedCSV`
/// while that CSV exists.
async fn kept_csv(ctx: &Context, ns: &str, status: &SubscriptionStatus) -> Result<Option<String>, Error> {
    let Some(c) = status.installed_csv.as_deref().filter(|c| !c.is_empty()) else { return Ok(None) };
    let found = Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), ns)
        .get_opt(c)
        .await
        .map_err(kube_err(format!("reading ClusterServiceVersion {ns}/{c}")))?;
    Ok(found.map(|_| c.to_string()))
}

/// What one resolution of a namespace saw and decided.
struct Observed {
    /// The resolver's output.
    out: ResolveOutput,
    /// The CSVs installed in the namespace.
    installed: Vec<String>,
    /// The namespace's Subscriptions, as resolved.
    requests: Vec<SubscriptionRequest>,
}

/// Resolves every Subscription of `ns` together (one bundle per package, §4.6) against
/// `catalogs` and the CSVs installed there. `sub`, the Subscription being reconciled (read from
/// etcd), stands in for its copy in the namespace's list, which comes from the watch cache and
/// may not show it yet.
async fn observe_resolution(
    ctx: &Context,
    ns: &str,
    sub: &Subscription,
    catalogs: Vec<CatalogInput>,
) -> Result<Observed, Error> {
    // From the watch cache, as every list of the install path (`install::from_watch_cache`);
    // `drop_completed` confirms a missing CSV by name before it reinstalls.
    let csvs = Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), ns)
        .list(&from_watch_cache())
        .await
        .map_err(kube_err(format!("listing ClusterServiceVersions in {ns}")))?;
    // A copy of a CSV installed elsewhere is not an install here (OLM's resolver leaves copies
    // out: `resolver/source_csvs.go`, `IsCopied`).
    let installed: Vec<InstalledBundle> = csvs
        .items
        .iter()
        .filter(|c| !crate::install::copied_csv::is_copy(c))
        .map(|c| {
            InstalledBundle::from_csv(
                ns,
                &c.name_any(),
                c.annotations().get(crate::install::ANNOTATION_PROPERTIES).map(String::as_str),
                c.spec.version.as_deref(),
            )
        })
        .collect();
    let mut all_subs = Api::<Subscription>::namespaced(ctx.client.clone(), ns)
        .list(&from_watch_cache())
        .await
        .map_err(kube_err(format!("listing Subscriptions in {ns}")))?
        .items;
    all_subs.retain(|s| s.name_any() != sub.name_any());
    all_subs.push(sub.clone());
    all_subs.sort_by_key(|s| s.name_any());
    // `status.installedCSV` only counts while that CSV exists (after an upgrade it names the
    // replaced one until this reconcile rewrites it); otherwise the package's installed CSV is used.
    let requests: Vec<SubscriptionRequest> = all_subs
        .iter()
        .map(request_of)
        .map(|mut r| {
            r.installed_csv = r.installed_csv.filter(|c| installed.iter().any(|i| i.name == *c));
            r
        })
        .collect();
    let started = std::time::Instant::now();
    let input = ResolveInput { catalogs, installed, subscriptions: requests };
    let out = resolve(&input);
    ctx.metrics.observe_resolution(started.elapsed());
    Ok(Observed {
        out,
        installed: input.installed.into_iter().map(|i| i.name).collect(),
        requests: input.subscriptions,
    })
}

pub(super) async fn reconcile(sub: Arc<Subscription>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(sub) = fresh(&ctx.client, sub.as_ref()).await? else {
        return Ok(Action::await_change());
    };
    // Uninstall on deletion, when the Subscription asks for it (`removal.rs`).
    if let Some(action) = super::removal::reconcile_subscription(&sub, &ctx).await? {
        return Ok(action);
    }
    let ns = sub.namespace().unwrap_or_default();
    let name = sub.name_any();
    adopt(&ctx, &sub).await?;
    let now = now_time();
    let mut status = sub.status.clone().unwrap_or_else(|| SubscriptionStatus::new(now.clone()));
    status.last_updated = now.clone();
    // A dependency's Subscription, created by an InstallPlan: it starts out pointing at that plan.
    if status.install_plan_ref.is_none()
        && let Some(p) = sub.annotations().get(ANNOTATION_GENERATED_BY)
        && let Some(plan) = Api::<InstallPlan>::namespaced(ctx.client.clone(), &ns)
            .get_opt(p)
            .await
            .map_err(kube_err(format!("reading InstallPlan {ns}/{p}")))?
    {
        adopt_generating_plan(&mut status, &sub, &plan);
    }
    let source = (sub.spec.source_namespace.clone(), sub.spec.source.clone());
    let view = observe_catalogs(&ctx, &ns).await?;
    let catalogs = match decide_catalogs(&mut status, &source, &view, &now) {
        CatalogGate::Loading => {
            write(&ctx, &sub, &status).await?;
            return Ok(Action::requeue(Duration::from_secs(2)));
        }
        CatalogGate::SourceFailed(why) => {
            let kept = kept_csv(&ctx, &ns, &status).await?;
            defer_for_source(&mut status, &name, &source, &why, kept.as_deref(), &now);
            write(&ctx, &sub, &status).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
        CatalogGate::Resolve(catalogs) => catalogs,
    };
    let Observed { out, installed, requests } = observe_resolution(&ctx, &ns, &sub, catalogs).await?;
    match decide_resolution(&mut status, &sub, &out, &installed, &now) {
        Resolution::Failed { message, event } => {
            write(&ctx, &sub, &status).await?;
            if event {
                ctx.events.publish_for(&sub, EventType::Warning, "ResolutionFailed", &message).await;
            }
            Ok(Action::requeue(Duration::from_secs(60)))
        }
        Resolution::AtLatestKnown => {
            if let Some(p) = status.install_plan_ref.as_ref().and_then(|r| r.name.clone()) {
                // From the watch cache: an installed Subscription is looked at on every CSV
                // change of its namespace, and a plan seen a moment late is seen next time.
                let plan = match Api::<InstallPlan>::namespaced(ctx.client.clone(), &ns)
                    .get_with(&p, &kube::api::GetParams::any())
                    .await
                {
                    Ok(plan) => Some(plan),
                    Err(kube::Error::Api(e)) if e.code == 404 => None,
                    Err(e) => return Err(kube_err(format!("reading InstallPlan {ns}/{p}"))(e)),
                };
                referenced_plan_conditions(&mut status, &ns, &p, plan.as_ref(), &now);
            }
            write(&ctx, &sub, &status).await?;
            prune_plans(&ctx, &ns, &name).await?;
            Ok(Action::requeue(Duration::from_secs(300)))
        }
        Resolution::Install(to_install) => {
            let deps = dependency_subscriptions(&to_install, &requests);
            install(&ctx, &sub, status, &to_install, deps, &now).await
        }
    }
}

/// The plan gate: this resolution's InstallPlan — created when missing, approved when the
/// Subscription's approval is Automatic — after the plan the status points at (waited for, or
/// superseded); then the status from the plan's phase ([`plan_progress`]).
async fn install(
    ctx: &Context,
    sub: &Subscription,
    mut status: SubscriptionStatus,
    to_install: &[ResolvedBundle],
    deps: Vec<DependencySubscription>,
    now: &Time,
) -> Result<Action, Error> {
    let (ns, name) = (sub.namespace().unwrap_or_default(), sub.name_any());
    let plans: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &ns);
    // One InstallPlan per resolution, named after what it installs (a restart never duplicates it).
    let csv_names: Vec<String> = to_install.iter().map(|b| b.bundle.clone()).collect();
    let bundles: Vec<(String, String)> = to_install.iter().map(|b| (b.bundle.clone(), b.image.clone())).collect();
    let config = sub.spec.config.as_ref().and_then(|c| serde_json::to_string(c).ok()).unwrap_or_default();
    let plan_name = install_plan_name(&name, &bundles, &config);
    let existing = match this_plan(ctx, sub, &plans, &plan_name, &csv_names).await? {
        Ok(existing) => existing,
        Err(action) => return Ok(action),
    };
    let prior_name = status.install_plan_ref.as_ref().and_then(|r| r.name.clone());
    let prior = match prior_name.as_deref().filter(|p| *p != plan_name) {
        Some(p) => plans.get_opt(p).await.map_err(kube_err(format!("reading InstallPlan {ns}/{p}")))?,
        None => None,
    };
    let mut superseded = None;
    match prior.as_ref().map(|p| decide_prior(p, &plan_name, &csv_names, &name)).unwrap_or(Prior::Ignore) {
        Prior::Ignore => {}
        Prior::Wait { phase, message } => {
            status.state = Some(SubscriptionState::UpgradePending);
            status.set_condition(C::InstallPlanPending, ConditionStatus::True, &phase, &message, now);
            write(ctx, sub, &status).await?;
            return Ok(Action::requeue(Duration::from_secs(2)));
        }
        Prior::Supersede { message } => {
            let Some(p) = prior.as_ref() else { return Ok(Action::requeue(Duration::from_millis(200))) };
            if !mark_superseded(&plans, p, &message, &plan_name).await? {
                // Approved or changed meanwhile: decide again on a fresh read.
                return Ok(Action::requeue(Duration::from_millis(200)));
            }
            superseded = prior_name.clone();
        }
    }
    let prior_missing = match &prior_name {
        Some(p) if *p == plan_name => existing.is_none(),
        Some(_) => prior.is_none(),
        None => false,
    };
    missing_condition(&mut status, &ns, prior_missing, existing.is_some(), &plan_name, &csv_names, now);
    let plan = match existing {
        Some(p) => p,
        None => {
            let note = plan_created_note(sub, &plan_name, &csv_names, to_install);
            let created =
                create_plan(ctx, sub, &plans, &plan_name, &csv_names, planned_lookups(to_install, deps.clone()), &note)
                    .await?;
            if let Some(p) = prior.as_ref() {
                disown(&plans, p, &sub.spec.package).await?;
            }
            created
        }
    };
    if !approve_if_automatic(sub, &plans, &plan).await? {
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    ensure_lookups(&plans, &plan, to_install, deps).await?;
    let mut requeue = plan_progress(&mut status, &plan, superseded.as_deref(), now);
    let timeout = if unpack_failure(&plan).is_some() { unpack_timeout(ctx, &ns).await } else { Duration::ZERO };
    if let Some(next) = unpack_progress(&mut status, &plan, timeout, now) {
        requeue = requeue.min(next);
    }
    write(ctx, sub, &status).await?;
    Ok(Action::requeue(requeue))
}

/// The message of `plan` when it is held because its bundle image could not be pulled (phase
/// `Failed`, reason [`super::handoff::BUNDLE_UNAVAILABLE`]: not found, unauthorized,
/// credentials), else `None`. Pure.
fn unpack_failure(plan: &InstallPlan) -> Option<String> {
    let status = plan.status.as_ref().filter(|s| s.phase == InstallPlanPhase::Failed)?;
    status
        .conditions
        .iter()
        .any(|c| c.reason.as_ref().is_some_and(|r| r.as_str() == super::handoff::BUNDLE_UNAVAILABLE))
        .then(|| status.message.clone().unwrap_or_default())
}

/// The bundle unpack timeout of namespace `ns`: its one OperatorGroup's
/// [`crate::api::operatorgroup::BUNDLE_UNPACK_TIMEOUT_ANNOTATION`], else (none, several, not a
/// duration: OLM ignores it then too) [`crate::api::operatorgroup::DEFAULT_BUNDLE_UNPACK_TIMEOUT`].
async fn unpack_timeout(ctx: &Context, ns: &str) -> Duration {
    use crate::api::operatorgroup::{BUNDLE_UNPACK_TIMEOUT_ANNOTATION, DEFAULT_BUNDLE_UNPACK_TIMEOUT};
    let groups =
        Api::<crate::api::OperatorGroup>::namespaced(ctx.client.clone(), ns).list(&ListParams::default()).await;
    match groups.as_ref().map(|l| l.items.as_slice()) {
        Ok([og]) => og
            .annotations()
            .get(BUNDLE_UNPACK_TIMEOUT_ANNOTATION)
            .and_then(|t| crate::api::common::parse_go_duration(t).ok())
            .unwrap_or(DEFAULT_BUNDLE_UNPACK_TIMEOUT),
        _ => DEFAULT_BUNDLE_UNPACK_TIMEOUT,
    }
}

/// OLM's unpack conditions for a Subscription whose plan `plan` cannot pull its bundle
/// ([`unpack_failure`]): OLM unpacks bundles before it makes the plan, so until the bundle is
/// pulled `currentCSV` stays what is installed, `BundleUnpacking` says the pull is being retried,
/// and once `timeout` has passed since the plan was made, `BundleUnpackFailed` (reason
/// `BundleUnpackFailed`, message "Bundle unpacking failed - DeadlineExceeded: …", OLM's words,
/// `pkg/controller/operators/catalog/operator.go` `syncResolvingNamespace`) replaces it. Any
/// other plan: both conditions go. Returns when to look again while the deadline is ahead. Pure.
pub(crate) fn unpack_progress(
    status: &mut SubscriptionStatus,
    plan: &InstallPlan,
    timeout: Duration,
    now: &Time,
) -> Option<Duration> {
    let Some(why) = unpack_failure(plan) else {
        status.remove_condition(&C::BundleUnpacking);
        status.remove_condition(&C::BundleUnpackFailed);
        return None;
    };
    status.current_csv = status.installed_csv.clone();
    let started = plan.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(now.0);
    let elapsed = now.0.duration_since(started).unsigned_abs();
    let limit = format!(
        "the unpack timeout {timeout:?} (OperatorGroup annotation {})",
        crate::api::operatorgroup::BUNDLE_UNPACK_TIMEOUT_ANNOTATION
    );
    if elapsed >= timeout {
        status.remove_condition(&C::BundleUnpacking);
        let message = format!(
            "Bundle unpacking failed - DeadlineExceeded: the bundle of InstallPlan {} was not pulled within {limit}: {why}; capstan keeps trying and installs it once the image can be pulled or the catalog names another one",
            plan.name_any()
        );
        status.fail(C::BundleUnpackFailed, reason::BUNDLE_UNPACK_FAILED, &message, now);
        return None;
    }
    status.remove_condition(&C::BundleUnpackFailed);
    let message = format!(
        "the bundle of InstallPlan {} cannot be pulled yet: {why}; retried until {limit} passes",
        plan.name_any()
    );
    status.fail(C::BundleUnpacking, reason::UNPACKING_IN_PROGRESS, &message, now);
    Some(timeout - elapsed)
}

/// This resolution's InstallPlan `plan_name` as it stands: `None` when it is to be created (a
/// Complete plan whose CSVs are gone is dropped, [`drop_completed`]), or the `Action` to take
/// instead when the namespace's CSV list lagged behind a CSV of the resolution.
async fn this_plan(
    ctx: &Context,
    sub: &Subscription,
    plans: &Api<InstallPlan>,
    plan_name: &str,
    csv_names: &[String],
) -> Result<Result<Option<InstallPlan>, Action>, Error> {
    let (ns, name) = (sub.namespace().unwrap_or_default(), sub.name_any());
    let existing = plans.get_opt(plan_name).await.map_err(kube_err(format!("reading InstallPlan {ns}/{plan_name}")))?;
    // Before a plan is created or a Complete one replaced: read by name (from etcd) whether a CSV
    // of this resolution exists already; the resolution saw the namespace's CSVs in the watch
    // cache, which can lag ([`from_watch_cache`]). When one does, this resolution is not acted
    // on: no plan is created, replaced or superseded.
    let present =
        if existing.as_ref().is_none_or(is_complete) { existing_csv(ctx, &ns, csv_names).await? } else { None };
    Ok(Ok(match (existing, present) {
        (None, Some(c)) => {
            // A dependency's plan, named after a different set of bundles, installed it: resolve
            // again on a list that shows it.
            tracing::debug!(subscription = %format!("{ns}/{name}"), csv = %c, "the CSV list lagged; not creating an InstallPlan");
            return Ok(Err(Action::requeue(Duration::from_secs(1))));
        }
        (Some(done), Some(c)) => {
            tracing::debug!(subscription = %format!("{ns}/{name}"), plan = %plan_name, csv = %c, "the CSV list lagged the Complete plan; not reinstalling");
            Some(done)
        }
        (existing, None) => drop_completed(ctx, sub, plans, existing, csv_names).await?,
    }))
}

/// The same resolution's plan completed, yet its CSVs are not installed: they were deleted. As
/// OLM does, install them again — with a fresh plan, since the Complete one is done: the
/// Complete plan is deleted (and `None` returned).
/// Called once [`existing_csv`] has found none of `csv_names` by name (the resolution's list comes
/// from the watch cache, which can lag the plan's Complete status).
async fn drop_completed(
    ctx: &Context,
    sub: &Subscription,
    plans: &Api<InstallPlan>,
    existing: Option<InstallPlan>,
    csv_names: &[String],
) -> Result<Option<InstallPlan>, Error> {
    let Some(done) = existing.as_ref().filter(|p| is_complete(p)) else { return Ok(existing) };
    let (ns, plan_name) = (done.namespace().unwrap_or_default(), done.name_any());
    let message = format!(
        "InstallPlan {plan_name} completed, but {} no longer exists; capstan installs it again with a new InstallPlan",
        csv_names.join(", ")
    );
    tracing::info!(subscription = %format!("{ns}/{}", sub.name_any()), plan = %plan_name, "{message}");
    ctx.events.publish_for(sub, EventType::Normal, "Reinstalling", &message).await;
    let pre = kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions { uid: done.uid(), resource_version: None }),
        ..Default::default()
    };
    match plans.delete(&plan_name, &pre).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(None),
        Err(e) => Err(kube_err(format!("deleting completed InstallPlan {ns}/{plan_name}"))(e)),
    }
}

/// Whether InstallPlan `p` is Complete.
fn is_complete(p: &InstallPlan) -> bool {
    p.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::Complete)
}

/// The first of `csv_names` that exists in `ns`, each read by name (a GET, which the API server
/// answers from etcd, not from the watch cache the resolution's list came from).
async fn existing_csv(ctx: &Context, ns: &str, csv_names: &[String]) -> Result<Option<String>, Error> {
    let csvs = Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), ns);
    let found = futures::future::try_join_all(csv_names.iter().map(|c| csvs.get_opt(c)))
        .await
        .map_err(kube_err(format!("reading the ClusterServiceVersions {} in {ns}", csv_names.join(", "))))?;
    let installed =
        |f: &Option<ClusterServiceVersion>| f.as_ref().is_some_and(|c| !crate::install::copied_csv::is_copy(c));
    Ok(csv_names.iter().zip(found).find(|(_, f)| installed(f)).map(|(c, _)| c.clone()))
}

/// Marks `prior` superseded (annotation [`ANNOTATION_SUPERSEDED_BY`] with `message`, on the
/// version read: a plan approved meanwhile is not marked). The InstallPlan reconciler fails it.
/// `false` when the plan changed since it was read.
async fn mark_superseded(
    plans: &Api<InstallPlan>,
    prior: &InstallPlan,
    message: &str,
    by: &str,
) -> Result<bool, Error> {
    let (ns, name) = (prior.namespace().unwrap_or_default(), prior.name_any());
    let mark = json!({"metadata": {"resourceVersion": prior.resource_version(), "annotations": {ANNOTATION_SUPERSEDED_BY: message}}});
    match plans.patch(&name, &PatchParams::default(), &Patch::Merge(&mark)).await {
        Ok(_) => {
            tracing::info!(plan = %format!("{ns}/{name}"), by = %by, "pending InstallPlan superseded");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(kube_err(format!("marking InstallPlan {ns}/{name} superseded"))(e)),
    }
}

/// The note of the Subscription's `InstallPlanCreated` Event: the plan, what it installs, its
/// approval, and, when the Subscription's own bundle is not the channel's first choice, which
/// preferred bundles were passed over and why (so that a user sees why, say, eclipse-che 7.41.2
/// and not 7.121.0 is installed; `resolve::ResolvedBundle::passed_over`).
pub(crate) fn plan_created_note(
    sub: &Subscription,
    plan_name: &str,
    csv_names: &[String],
    to_install: &[ResolvedBundle],
) -> String {
    let approval = sub.spec.install_plan_approval.unwrap_or(Approval::Automatic);
    let mut note = format!("InstallPlan {plan_name} created for {} ({approval:?} approval)", csv_names.join(", "));
    let (ns, name) = (sub.namespace().unwrap_or_default(), sub.name_any());
    if let Some(own) =
        to_install.iter().find(|b| b.subscription == name && b.namespace == ns && b.package == sub.spec.package)
        && let Some(passed) = &own.passed_over
    {
        note.push_str(&format!("; {} {}: {passed}", own.bundle, own.reason));
    }
    note
}

/// Creates this resolution's InstallPlan ([`new_plan`]) with Event `InstallPlanCreated` (`note`);
/// one created meanwhile is read instead.
async fn create_plan(
    ctx: &Context,
    sub: &Subscription,
    plans: &Api<InstallPlan>,
    plan_name: &str,
    csv_names: &[String],
    lookups: PlannedLookups,
    note: &str,
) -> Result<InstallPlan, Error> {
    let ns = sub.namespace().unwrap_or_default();
    let existing = plans.list(&from_watch_cache()).await.map_err(kube_err(format!("listing InstallPlans in {ns}")))?;
    let ip = new_plan(sub, plan_name, csv_names, &lookups, next_plan_generation(&existing.items, &[sub]))?;
    tracing::info!(subscription = %format!("{ns}/{}", sub.name_any()), plan = %plan_name, csvs = ?csv_names, "creating InstallPlan");
    match plans.create(&PostParams::default(), &ip).await {
        Ok(p) => {
            ctx.events.publish_for(sub, EventType::Normal, "InstallPlanCreated", note).await;
            Ok(p)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            plans.get(plan_name).await.map_err(kube_err(format!("reading InstallPlan {ns}/{plan_name}")))
        }
        Err(e) => Err(kube_err(format!("creating InstallPlan {ns}/{plan_name}"))(e)),
    }
}

/// Approval is per Subscription: switching it to Automatic approves its pending plan. `false`
/// when the plan changed since it was read (decide again).
async fn approve_if_automatic(sub: &Subscription, plans: &Api<InstallPlan>, plan: &InstallPlan) -> Result<bool, Error> {
    let automatic = sub.spec.install_plan_approval.unwrap_or(Approval::Automatic) == Approval::Automatic;
    if !automatic
        || plan.spec.approved
        || plan.status.as_ref().is_none_or(|s| s.phase != InstallPlanPhase::RequiresApproval)
    {
        return Ok(true);
    }
    let (ns, name) = (plan.namespace().unwrap_or_default(), plan.name_any());
    let approve = json!({"metadata": {"resourceVersion": plan.resource_version()}, "spec": {"approved": true, "approval": "Automatic"}});
    match plans.patch(&name, &PatchParams::default(), &Patch::Merge(&approve)).await {
        Ok(_) => {
            tracing::info!(subscription = %format!("{ns}/{}", sub.name_any()), plan = %name, "approved: the Subscription's installPlanApproval is Automatic");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(kube_err(format!("approving InstallPlan {ns}/{name}"))(e)),
    }
}

/// A plan without bundle lookups in its status or its annotation (created by an earlier capstan
/// that stopped before writing them) gets the annotation, so the InstallPlan reconciler can work.
async fn ensure_lookups(
    plans: &Api<InstallPlan>,
    plan: &InstallPlan,
    to_install: &[ResolvedBundle],
    deps: Vec<DependencySubscription>,
) -> Result<(), Error> {
    let has = plan.status.as_ref().is_some_and(|s| !s.bundle_lookups.is_empty())
        || plan.annotations().contains_key(ANNOTATION_BUNDLE_LOOKUPS);
    if has {
        return Ok(());
    }
    let (ns, name) = (plan.namespace().unwrap_or_default(), plan.name_any());
    let lookups = serde_json::to_string(&planned_lookups(to_install, deps))
        .map_err(|source| Error::Build { what: format!("the bundle lookups of InstallPlan {ns}/{name}"), source })?;
    let patch = json!({"metadata": {"annotations": {ANNOTATION_BUNDLE_LOOKUPS: lookups}}});
    plans
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(kube_err(format!("annotating InstallPlan {ns}/{name} with its bundle lookups")))?;
    Ok(())
}

/// How many terminal (Complete or Failed) InstallPlans are kept per Subscription; older ones are
/// deleted once the Subscription is AtLatestKnown (OLM keeps a bounded history the same way).
pub const KEEP_PLANS: usize = 5;

/// Deletes the Subscription's terminal InstallPlans (those it owns: a label selector cannot
/// name a Subscription whose name is longer than a label value's 63 characters, as OLM's
/// dependency Subscriptions often are) beyond the newest [`KEEP_PLANS`], oldest first.
async fn prune_plans(ctx: &Context, ns: &str, sub: &str) -> Result<(), Error> {
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), ns);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing InstallPlans of Subscription {ns}/{sub}")))?;
    for pname in plans_to_prune(&list.items, sub, KEEP_PLANS) {
        tracing::info!(subscription = %format!("{ns}/{sub}"), plan = %pname, "pruning a completed InstallPlan");
        match api.delete(&pname, &kube::api::DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(kube_err(format!("deleting InstallPlan {ns}/{pname}"))(e)),
        }
    }
    Ok(())
}

/// Names of the terminal plans Subscription `sub` owns beyond the newest `keep` (by
/// creationTimestamp, then name), oldest first. Plans still pending or installing, and plans of
/// other Subscriptions, are never chosen.
pub(crate) fn plans_to_prune(plans: &[InstallPlan], sub: &str, keep: usize) -> Vec<String> {
    let owned = |p: &&InstallPlan| p.owner_references().iter().any(|o| o.kind == "Subscription" && o.name == sub);
    let mut done: Vec<&InstallPlan> =
        plans.iter().filter(owned).filter(|p| p.status.as_ref().is_some_and(|s| s.phase.is_terminal())).collect();
    done.sort_by_key(|p| (p.metadata.creation_timestamp.clone().map(|t| t.0), p.name_any()));
    let extra = done.len().saturating_sub(keep);
    done[..extra].iter().map(|p| p.name_any()).collect()
}

fn request_of(s: &Subscription) -> SubscriptionRequest {
    SubscriptionRequest {
        name: s.name_any(),
        namespace: s.namespace().unwrap_or_default(),
        package: s.spec.package.clone(),
        channel: s.spec.channel.clone().filter(|c| !c.is_empty()),
        source: s.spec.source.clone(),
        source_namespace: s.spec.source_namespace.clone(),
        starting_csv: s.spec.starting_csv.clone().filter(|c| !c.is_empty()),
        version_range: s.spec.version_range.clone().filter(|c| !c.trim().is_empty()),
        installed_csv: s.status.as_ref().and_then(|st| st.installed_csv.clone()).filter(|c| !c.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_keeps_the_newest_terminal_plans_and_every_open_one() {
        let plan = |name: &str, minute: u32, phase: &str| -> InstallPlan {
            serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": name, "namespace": "ns", "creationTimestamp": format!("2026-01-01T00:{minute:02}:00Z"),
                             "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "name": if name == "f" { "other" } else { LONG }, "uid": "u"}]},
                "spec": {"clusterServiceVersionNames": [], "approval": "Automatic", "approved": true},
                "status": {"phase": phase, "catalogSources": []},
            }))
            .unwrap()
        };
        // Owned by a Subscription whose name is longer than a label value may be (OLM's name of
        // a dependency's Subscription); "f" belongs to another Subscription.
        let plans = vec![
            plan("a", 5, "Complete"),
            plan("b", 1, "Complete"),
            plan("c", 3, "Failed"),
            plan("d", 0, "RequiresApproval"),
            plan("e", 4, "Complete"),
            plan("f", 0, "Complete"),
        ];
        assert_eq!(plans_to_prune(&plans, LONG, 2), vec!["b".to_string(), "c".to_string()]);
        assert!(plans_to_prune(&plans, LONG, 5).is_empty());
        assert_eq!(plans_to_prune(&plans, LONG, 0).len(), 4, "never the pending one, nor another Subscription's");
    }

    /// A dependency's Subscription name as OLM makes it, longer than 63 characters.
    const LONG: &str = "strimzi-kafka-operator-stable-community-ctl-scale-catalog-33e5ded4";

    use crate::api::subscription::SubscriptionSpec;
    use crate::resolve::ErrorKind as K;

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn now() -> Time {
        t("2026-01-01T00:00:00Z")
    }

    fn key(ns: &str, n: &str) -> Key {
        (ns.to_string(), n.to_string())
    }

    fn loaded() -> crate::controller::LoadedIndex {
        crate::controller::LoadedIndex {
            image: "r/c:1".into(),
            digest: "sha256:1".into(),
            priority: 0,
            index: Arc::new(crate::resolve::CatalogIndex::default()),
            served: None,
            inline: Default::default(),
            config_map: None,
        }
    }

    fn view(states: Vec<(Key, CatalogState)>, extra: &[Key]) -> CatalogView {
        let mut existing: BTreeSet<Key> = states.iter().map(|(k, _)| k.clone()).collect();
        existing.extend(extra.iter().cloned());
        CatalogView { existing, states }
    }

    fn cond(st: &SubscriptionStatus, c: C) -> (&str, &str, &str) {
        let c = st.condition(&c).unwrap_or_else(|| panic!("no condition {c:?}: {st:?}"));
        (c.status.as_str(), c.reason.as_deref().unwrap_or(""), c.message.as_deref().unwrap_or(""))
    }

    fn sub(name: &str, package: &str) -> Subscription {
        let mut s = Subscription::new(
            name,
            SubscriptionSpec {
                source: "c".into(),
                source_namespace: "ns".into(),
                package: package.into(),
                ..Default::default()
            },
        );
        s.metadata.namespace = Some("ns".into());
        s.metadata.uid = Some("uid-1".into());
        s
    }

    #[test]
    fn catalog_gate_reports_health_and_waits_or_defers() {
        let src = key("ns", "c");
        // The source is listed but not loaded yet: Loading.
        let mut st = SubscriptionStatus::new(now());
        assert!(matches!(
            decide_catalogs(&mut st, &src, &view(vec![], std::slice::from_ref(&src)), &now()),
            CatalogGate::Loading
        ));
        assert_eq!(
            cond(&st, C::CatalogSourcesUnhealthy),
            ("True", reason::UNHEALTHY_CATALOG_SOURCE_FOUND, "catalog source ns/c is being loaded")
        );
        let mut st = SubscriptionStatus::new(now());
        assert!(matches!(
            decide_catalogs(&mut st, &src, &view(vec![(src.clone(), CatalogState::Loading)], &[]), &now()),
            CatalogGate::Loading
        ));
        // Loaded, another one failed: resolve against the loaded one; the failed one is named.
        let mut st = SubscriptionStatus::new(now());
        let v = view(
            vec![
                (src.clone(), CatalogState::Ready(loaded())),
                (key("olm", "g"), CatalogState::Failed { error: "down".into(), last: None }),
            ],
            &[],
        );
        match decide_catalogs(&mut st, &src, &v, &now()) {
            CatalogGate::Resolve(c) => assert_eq!(c.iter().map(|c| c.key.name.as_str()).collect::<Vec<_>>(), ["c"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            cond(&st, C::CatalogSourcesUnhealthy),
            ("True", reason::UNHEALTHY_CATALOG_SOURCE_FOUND, "catalog source olm/g: down")
        );
        assert_eq!(
            st.catalog_health
                .iter()
                .map(|h| (h.catalog_source_ref.name.clone().unwrap(), h.healthy))
                .collect::<Vec<_>>(),
            [("c".to_string(), true), ("g".to_string(), false)]
        );
        // All healthy.
        let mut st = SubscriptionStatus::new(now());
        assert!(matches!(
            decide_catalogs(&mut st, &src, &view(vec![(src.clone(), CatalogState::Ready(loaded()))], &[]), &now()),
            CatalogGate::Resolve(_)
        ));
        assert_eq!(
            cond(&st, C::CatalogSourcesUnhealthy),
            ("False", reason::ALL_CATALOG_SOURCES_HEALTHY, "all available catalogsources are healthy")
        );
        // A CatalogSource that no longer exists does not count, even when the store knows it; when
        // it is the Subscription's own, the catalogs are unhealthy (OLM's message).
        let mut st = SubscriptionStatus::new(now());
        let v = CatalogView { existing: BTreeSet::new(), states: vec![(src.clone(), CatalogState::Ready(loaded()))] };
        assert!(matches!(decide_catalogs(&mut st, &src, &v, &now()), CatalogGate::Resolve(c) if c.is_empty()));
        assert_eq!(
            cond(&st, C::CatalogSourcesUnhealthy),
            ("True", reason::UNHEALTHY_CATALOG_SOURCE_FOUND, "targeted catalogsource ns/c missing")
        );
        // The source failed, with an earlier catalog: deferred, not resolved against the old one.
        let mut st = SubscriptionStatus::new(now());
        let v =
            view(vec![(src.clone(), CatalogState::Failed { error: "unauthorized".into(), last: Some(loaded()) })], &[]);
        assert!(
            matches!(decide_catalogs(&mut st, &src, &v, &now()), CatalogGate::SourceFailed(w) if w == "unauthorized")
        );
    }

    #[test]
    fn a_failed_source_keeps_what_is_installed() {
        let src = key("ns", "c");
        let mut st = SubscriptionStatus::new(now());
        st.fail(C::ResolutionFailed, "x", "old", &now());
        defer_for_source(&mut st, "s", &src, "down", Some("a.v1"), &now());
        let (v, r, m) = cond(&st, C::CatalogSourcesUnhealthy);
        assert_eq!((v, r), ("True", reason::UNHEALTHY_CATALOG_SOURCE_FOUND));
        assert!(m.contains("deferred") && m.contains("a.v1 is kept") && m.contains("down"), "{m}");
        assert!(st.condition(&C::ResolutionFailed).is_none());
        let mut st = SubscriptionStatus::new(now());
        defer_for_source(&mut st, "s", &src, "down", None, &now());
        let (v, r, m) = cond(&st, C::ResolutionFailed);
        assert_eq!((v, r), ("True", reason::ERROR_PREVENTED_RESOLUTION));
        assert!(
            m.contains("Subscription s is not resolved: down") && m.contains("fix what it names in CatalogSource"),
            "{m}"
        );
    }

    #[test]
    fn resolution_reasons_come_from_the_error_kind() {
        for k in [K::Unsatisfiable, K::MissingCatalog, K::MissingPackage, K::MissingChannel, K::StartingCsvNotInChannel]
        {
            assert_eq!(resolution_reason(k), reason::CONSTRAINTS_NOT_SATISFIABLE, "{k:?}");
        }
        for k in [
            K::InvalidCatalog,
            K::MissingDefaultChannel,
            K::BrokenChannel,
            K::InvalidVersionRange,
            K::VersionRangeMatchesNothing,
            K::Unreachable,
        ] {
            assert_eq!(resolution_reason(k), reason::ERROR_PREVENTED_RESOLUTION, "{k:?}");
        }
    }

    fn bundle(sub: &str, package: &str, csv: &str, reason: Reason) -> ResolvedBundle {
        ResolvedBundle {
            subscription: sub.into(),
            namespace: "ns".into(),
            package: package.into(),
            bundle: csv.into(),
            version: crate::resolve::split_csv_name(csv).unwrap().1,
            channel: Some("stable".into()),
            catalog: Some(CatalogSourceKey::new("ns", "c")),
            image: format!("r/{csv}@sha256:1"),
            reason,
            passed_over: None,
            properties: crate::resolve::index::lookup_properties(
                package,
                &crate::resolve::split_csv_name(csv).unwrap().1,
                None,
            ),
        }
    }

    #[test]
    fn the_plan_created_note_says_which_preferred_bundles_were_passed_over() {
        let s = sub("che", "eclipse-che");
        let mut own = bundle("che", "eclipse-che", "eclipse-che.v7.41.2", Reason::Requested);
        let dep = bundle("che", "devworkspace-operator", "devworkspace-operator.v0.9.0", Reason::Requested);
        assert_eq!(
            plan_created_note(&s, "install-x", &["eclipse-che.v7.41.2".into()], &[own.clone()]),
            "InstallPlan install-x created for eclipse-che.v7.41.2 (Automatic approval)"
        );
        own.passed_over = Some(crate::resolve::PassedOver {
            bundles: vec!["eclipse-che.v7.121.0".into()],
            why: crate::resolve::Explanation::fact(
                "eclipse-che.v7.121.0 requires package devworkspace-operator, which no catalog has",
                "",
            ),
        });
        assert_eq!(
            plan_created_note(
                &s,
                "install-x",
                &["eclipse-che.v7.41.2".into(), "devworkspace-operator.v0.9.0".into()],
                &[dep, own]
            ),
            "InstallPlan install-x created for eclipse-che.v7.41.2, devworkspace-operator.v0.9.0 (Automatic approval); eclipse-che.v7.41.2 requested: passed over 1 preferred bundle (eclipse-che.v7.121.0) because they cannot be installed: eclipse-che.v7.121.0 requires package devworkspace-operator, which no catalog has"
        );
    }

    #[test]
    fn resolution_outcomes() {
        let s = sub("s", "a");
        // Failed: the reason by kind, an Event only when the message is new.
        let err = ResolveError {
            subscription: "s".into(),
            namespace: "ns".into(),
            kind: K::Unsatisfiable,
            explanation: crate::resolve::Explanation::fact("a.v1 requires b", ""),
        };
        let out = ResolveOutput { resolved: vec![], errors: vec![err.clone()] };
        let mut st = SubscriptionStatus::new(now());
        assert_eq!(
            decide_resolution(&mut st, &s, &out, &[], &now()),
            Resolution::Failed { message: err.message(), event: true }
        );
        assert_eq!(cond(&st, C::ResolutionFailed), ("True", reason::CONSTRAINTS_NOT_SATISFIABLE, "a.v1 requires b"));
        assert_eq!(
            decide_resolution(&mut st, &s, &out, &[], &now()),
            Resolution::Failed { message: err.message(), event: false }
        );
        // Installed and nothing newer: AtLatestKnown, the plan conditions go.
        st.fail(C::InstallPlanPending, "Installing", "x", &now());
        let out = ResolveOutput {
            resolved: vec![bundle("s", "a", "a.v1.0.0", Reason::Installed { note: None })],
            errors: vec![],
        };
        assert_eq!(decide_resolution(&mut st, &s, &out, &["a.v1.0.0".into()], &now()), Resolution::AtLatestKnown);
        assert!(st.condition(&C::ResolutionFailed).is_none() && st.condition(&C::InstallPlanPending).is_none());
        assert_eq!(
            (st.state.clone(), st.current_csv.as_deref(), st.installed_csv.as_deref()),
            (Some(SubscriptionState::AtLatestKnown), Some("a.v1.0.0"), Some("a.v1.0.0"))
        );
        // An upgrade and a dependency to install; another Subscription's bundle is not ours.
        let out = ResolveOutput {
            resolved: vec![
                bundle("s", "a", "a.v2.0.0", Reason::Upgrade { from: "a.v1.0.0".into() }),
                bundle(
                    "s",
                    "b",
                    "b.v1.0.0",
                    Reason::Dependency { of: "a.v2.0.0".into(), requirement: "b".into(), already_installed: false },
                ),
                bundle(
                    "s",
                    "c",
                    "c.v1.0.0",
                    Reason::Dependency { of: "a.v2.0.0".into(), requirement: "c".into(), already_installed: true },
                ),
                bundle("t", "d", "d.v1.0.0", Reason::Requested),
            ],
            errors: vec![],
        };
        match decide_resolution(&mut st, &s, &out, &["a.v1.0.0".into()], &now()) {
            Resolution::Install(b) => {
                assert_eq!(b.iter().map(|b| b.bundle.as_str()).collect::<Vec<_>>(), ["a.v2.0.0", "b.v1.0.0"])
            }
            other => panic!("{other:?}"),
        }
        assert_eq!((st.current_csv.as_deref(), st.installed_csv.as_deref()), (Some("a.v2.0.0"), Some("a.v1.0.0")));
        // installedCSV empty before (the first plan's reconcile saw the upgrade already): it names
        // the installed CSV the upgrade starts from.
        st.installed_csv = None;
        let _ = decide_resolution(&mut st, &s, &out, &["a.v1.0.0".into()], &now());
        assert_eq!(st.installed_csv.as_deref(), Some("a.v1.0.0"));
    }

    fn plan(name: &str, phase: Option<&str>, approved: bool) -> InstallPlan {
        let mut v = json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "7"},
            "spec": {"clusterServiceVersionNames": ["a.v1.0.0"], "approval": "Manual", "approved": approved},
        });
        if let Some(p) = phase {
            v["status"] = json!({"phase": p, "catalogSources": []});
        }
        serde_json::from_value(v).unwrap()
    }

    /// An installed Subscription follows its referenced plan as OLM's does: edited to no phase,
    /// RequiresApproval, Installing, Failed (with and without an `Installed=False` reason),
    /// Complete, deleted.
    #[test]
    fn an_installed_subscription_shows_what_became_of_its_referenced_plan() {
        let mut st = SubscriptionStatus::new(now());
        let mut p = plan("p", Some(""), true);
        let mut see = |p: Option<&InstallPlan>| {
            referenced_plan_conditions(&mut st, "ns", "p", p, &now());
            [C::InstallPlanPending, C::InstallPlanFailed, C::InstallPlanMissing]
                .iter()
                .filter_map(|c| st.condition(c).map(|x| (format!("{c:?}"), x.reason.clone().unwrap_or_default())))
                .collect::<Vec<_>>()
        };
        let one = |c: &str, r: &str| vec![(c.to_string(), r.to_string())];
        assert_eq!(see(Some(&p)), one("InstallPlanPending", "InstallPlanNotYetReconciled"));
        for phase in ["RequiresApproval", "Installing"] {
            p.status.as_mut().unwrap().phase = InstallPlanPhase::from(phase);
            assert_eq!(see(Some(&p)), one("InstallPlanPending", phase));
        }
        p.status.as_mut().unwrap().phase = InstallPlanPhase::Failed;
        assert_eq!(see(Some(&p)), one("InstallPlanFailed", "InstallPlanFailed"));
        p.status.as_mut().unwrap().fail("InstallComponentFailed", "step 3 failed", &now());
        assert_eq!(see(Some(&p)), one("InstallPlanFailed", "InstallComponentFailed"));
        p.status.as_mut().unwrap().complete(&now());
        assert!(see(Some(&p)).is_empty());
        assert_eq!(see(None), one("InstallPlanMissing", "ReferencedInstallPlanNotFound"));
    }

    /// A plan held because its bundle image cannot be pulled: `currentCSV` stays the installed
    /// CSV, `BundleUnpacking` until the unpack timeout has passed since the plan was made, then
    /// `BundleUnpackFailed` in OLM's words; any other plan clears both.
    #[test]
    fn a_bundle_that_cannot_be_pulled_is_reported_as_olm_reports_a_failed_unpack() {
        let mut held = plan("install-x", Some("Failed"), true);
        held.metadata.creation_timestamp = Some(t("2025-12-31T23:59:50Z"));
        let st = held.status.as_mut().unwrap();
        st.message = Some("bundle a.v2.0.0 (quay.io/a:missing): not found".into());
        st.conditions =
            serde_json::from_value(json!([{"type": "Installed", "status": "False", "reason": "BundleUnavailable"}]))
                .unwrap();
        let fresh = || {
            let mut st = SubscriptionStatus::new(now());
            st.current_csv = Some("a.v2.0.0".into());
            st.installed_csv = Some("a.v1.0.0".into());
            st
        };

        let mut status = fresh();
        assert_eq!(
            unpack_progress(&mut status, &held, Duration::from_secs(600), &now()),
            Some(Duration::from_secs(590))
        );
        assert_eq!(status.current_csv.as_deref(), Some("a.v1.0.0"));
        let (v, r, m) = cond(&status, C::BundleUnpacking);
        assert_eq!((v, r), ("True", "UnpackingInProgress"));
        assert_eq!(
            m,
            "the bundle of InstallPlan install-x cannot be pulled yet: bundle a.v2.0.0 (quay.io/a:missing): not found; retried until the unpack timeout 600s (OperatorGroup annotation operatorframework.io/bundle-unpack-timeout) passes"
        );
        assert!(status.condition(&C::BundleUnpackFailed).is_none());

        assert_eq!(unpack_progress(&mut status, &held, Duration::from_secs(1), &now()), None);
        let (v, r, m) = cond(&status, C::BundleUnpackFailed);
        assert_eq!((v, r), ("True", "BundleUnpackFailed"));
        assert_eq!(
            m,
            "Bundle unpacking failed - DeadlineExceeded: the bundle of InstallPlan install-x was not pulled within the unpack timeout 1s (OperatorGroup annotation operatorframework.io/bundle-unpack-timeout): bundle a.v2.0.0 (quay.io/a:missing): not found; capstan keeps trying and installs it once the image can be pulled or the catalog names another one"
        );
        assert!(status.condition(&C::BundleUnpacking).is_none(), "no contradictory states");

        // The catalog names another image: the new plan is not held; both conditions go.
        assert_eq!(
            unpack_progress(&mut status, &plan("install-y", Some("Installing"), true), Duration::from_secs(1), &now()),
            None
        );
        assert!(status.condition(&C::BundleUnpackFailed).is_none() && status.condition(&C::BundleUnpacking).is_none());
        // A plan failed for another reason is not an unpack failure.
        let mut failed = plan("install-z", Some("Failed"), true);
        failed.status.as_mut().unwrap().conditions = serde_json::from_value(
            json!([{"type": "Installed", "status": "False", "reason": "InstallComponentFailed"}]),
        )
        .unwrap();
        let mut status = fresh();
        assert_eq!(unpack_progress(&mut status, &failed, Duration::from_secs(1), &now()), None);
        assert_eq!(status.current_csv.as_deref(), Some("a.v2.0.0"));
        assert!(status.condition(&C::BundleUnpackFailed).is_none());
    }

    #[test]
    fn an_operator_group_can_exclude_the_global_catalogs() {
        let og = |value: Option<&str>| {
            let mut og = crate::api::OperatorGroup::new("og", Default::default());
            if let Some(v) = value {
                og.metadata.annotations = Some(
                    [("olm.operatorframework.io/exclude-global-namespace-resolution".to_string(), v.to_string())]
                        .into(),
                );
            }
            og
        };
        assert!(excludes_global_catalogs(&[og(Some("true"))]));
        assert!(!excludes_global_catalogs(&[og(Some("false"))]));
        assert!(!excludes_global_catalogs(&[og(Some("True"))]), "OLM compares with \"true\" exactly");
        assert!(!excludes_global_catalogs(&[og(None)]));
        assert!(
            !excludes_global_catalogs(&[og(Some("true")), og(Some("true"))]),
            "several groups: no resolution anyway"
        );
        assert!(!excludes_global_catalogs(&[]));
    }

    /// The installed bundle's deprecations in OLM's words, from the catalog's `olm.deprecations`:
    /// each level with its prefix, the roll-up joining them; a channel only when the
    /// Subscription names one; nothing changes while the catalog does not hold the installed CSV.
    #[test]
    fn an_installed_bundle_the_catalog_deprecates_gets_olms_deprecation_conditions() {
        let catalog = |deprecations: &str| {
            let text = format!(
                r#"{{"schema":"olm.package","name":"etcd","defaultChannel":"alpha"}}
{{"schema":"olm.channel","package":"etcd","name":"alpha","entries":[{{"name":"etcd.v1.0.0"}}]}}
{{"schema":"olm.bundle","package":"etcd","name":"etcd.v1.0.0","image":"quay.io/e:1","properties":[{{"type":"olm.package","value":{{"packageName":"etcd","version":"1.0.0"}}}}]}}
{deprecations}"#
            );
            crate::resolve::CatalogIndex::from_config(
                &crate::catalog::parse::parse_bytes("t", text.as_bytes()).unwrap(),
            )
        };
        let all = catalog(
            r#"{"schema":"olm.deprecations","package":"etcd","entries":[{"reference":{"schema":"olm.package"},"message":"p gone"},{"reference":{"schema":"olm.channel","name":"alpha"},"message":"c gone"},{"reference":{"schema":"olm.bundle","name":"etcd.v1.0.0"},"message":"b gone"}]}"#,
        );
        let mut s = sub("etcd", "etcd");
        s.spec.channel = Some("alpha".into());
        let mut st = SubscriptionStatus::new(now());
        assert_eq!(deprecated(&all, &s, &st), None, "nothing installed");
        st.installed_csv = Some("etcd.v1.0.0".into());
        let found = deprecated(&all, &s, &st);
        deprecation_conditions(&mut st, found, &now());
        assert_eq!(cond(&st, C::PackageDeprecated), ("True", "", "olm.package/etcd: p gone"));
        assert_eq!(cond(&st, C::ChannelDeprecated), ("True", "", "olm.channel/alpha: c gone"));
        assert_eq!(cond(&st, C::BundleDeprecated), ("True", "", "olm.bundle/etcd.v1.0.0: b gone"));
        assert_eq!(
            cond(&st, C::Deprecated),
            ("True", "", "olm.package/etcd: p gone; olm.channel/alpha: c gone; olm.bundle/etcd.v1.0.0: b gone")
        );
        // No channel in the Subscription: no channel condition.
        s.spec.channel = None;
        let found = deprecated(&all, &s, &st);
        deprecation_conditions(&mut st, found, &now());
        assert!(st.condition(&C::ChannelDeprecated).is_none());
        assert_eq!(cond(&st, C::Deprecated).2, "olm.package/etcd: p gone; olm.bundle/etcd.v1.0.0: b gone");
        // A catalog without the installed CSV changes nothing; one that deprecates nothing clears all.
        let mut other = st.clone();
        other.installed_csv = Some("etcd.v9.0.0".into());
        let before = other.conditions.clone();
        let found = deprecated(&all, &s, &other);
        deprecation_conditions(&mut other, found, &now());
        assert_eq!(other.conditions, before);
        let found = deprecated(&catalog(""), &s, &st);
        deprecation_conditions(&mut st, found, &now());
        for c in [C::PackageDeprecated, C::ChannelDeprecated, C::BundleDeprecated, C::Deprecated] {
            assert!(st.condition(&c).is_none(), "{c:?}");
        }
    }

    #[test]
    fn the_prior_plan_is_waited_for_superseded_or_ignored() {
        let csvs = vec!["a.v2.0.0".to_string()];
        assert_eq!(decide_prior(&plan("old", Some("Complete"), true), "new", &csvs, "s"), Prior::Ignore);
        assert_eq!(decide_prior(&plan("old", Some("Failed"), false), "new", &csvs, "s"), Prior::Ignore);
        match decide_prior(&plan("old", Some("Installing"), true), "new", &csvs, "s") {
            Prior::Wait { phase, message } => assert_eq!(
                (phase.as_str(), message.as_str()),
                ("Installing", "InstallPlan old is Installing; the next resolution waits for it")
            ),
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(decide_prior(&plan("old", None, true), "new", &csvs, "s"), Prior::Wait { phase, .. } if phase == "Planning")
        );
        assert!(
            matches!(decide_prior(&plan("old", Some("RequiresApproval"), true), "new", &csvs, "s"), Prior::Wait { .. }),
            "approved: about to run"
        );
        match decide_prior(&plan("old", Some("RequiresApproval"), false), "new", &csvs, "s") {
            Prior::Supersede { message } => assert!(
                message.contains("superseded by InstallPlan new (a.v2.0.0)") && message.contains("approve new instead"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_referenced_plan_is_reported_until_the_new_one_exists() {
        let mut st = SubscriptionStatus::new(now());
        st.install_plan_ref = Some(ObjectReference { name: Some("gone".into()), ..Default::default() });
        missing_condition(&mut st, "ns", true, false, "new", &["a.v1.0.0".into()], &now());
        let (v, r, m) = cond(&st, C::InstallPlanMissing);
        assert_eq!((v, r), ("True", reason::REFERENCED_INSTALL_PLAN_NOT_FOUND));
        assert!(m.contains("InstallPlan ns/gone") && m.contains("creates InstallPlan new for a.v1.0.0"), "{m}");
        missing_condition(&mut st, "ns", false, false, "new", &[], &now());
        assert!(st.condition(&C::InstallPlanMissing).is_some(), "kept while the plan is not there");
        missing_condition(&mut st, "ns", false, true, "new", &[], &now());
        assert!(st.condition(&C::InstallPlanMissing).is_none());
    }

    #[test]
    fn plan_progress_by_phase() {
        let mut st = SubscriptionStatus::new(now());
        let p = plan("p", Some("RequiresApproval"), false);
        assert_eq!(plan_progress(&mut st, &p, Some("old"), &now()), Duration::from_secs(10));
        let (v, r, m) = cond(&st, C::InstallPlanPending);
        assert_eq!((v, r), ("True", "RequiresApproval"));
        assert!(
            m.contains("capstan approve p -n ns")
                && m.ends_with("it supersedes InstallPlan old, which can no longer be approved"),
            "{m}"
        );
        assert_eq!(st.state, Some(SubscriptionState::UpgradePending));
        let r = st.install_plan_ref.as_ref().unwrap();
        assert_eq!(
            (r.name.as_deref(), r.uid.as_deref(), r.resource_version.as_deref()),
            (Some("p"), Some("uid-p"), Some("7"))
        );
        assert_eq!(st.installplan.as_ref().map(|r| r.uuid.as_str()), Some("uid-p"));
        assert_eq!(st.install_plan_generation, Some(1));
        // The reference keeps the resourceVersion first seen while it names the same plan (OLM's
        // setIPReference), so the plan's own writes do not rewrite the Subscription; a new plan
        // gets its own.
        let mut later = plan("p", Some("Installing"), true);
        later.metadata.resource_version = Some("9".into());
        plan_progress(&mut st, &later, None, &now());
        assert_eq!(st.install_plan_ref.as_ref().and_then(|r| r.resource_version.as_deref()), Some("7"));
        let mut other = plan("q", Some("Installing"), true);
        other.metadata.resource_version = Some("11".into());
        plan_progress(&mut st, &other, None, &now());
        assert_eq!(
            st.install_plan_ref.as_ref().map(|r| (r.name.as_deref(), r.resource_version.as_deref())),
            Some((Some("q"), Some("11")))
        );
        // A transient error shows in the pending message.
        let mut p = plan("p", Some("Installing"), true);
        p.status.as_mut().unwrap().set_installed(
            ConditionStatus::False,
            Some(INSTALL_RETRYING),
            Some("registry down"),
            &now(),
        );
        plan_progress(&mut st, &p, None, &now());
        assert_eq!(cond(&st, C::InstallPlanPending).2, "InstallPlan p is Installing: registry down");
        // Complete: looked at again at once (the CSVs appear).
        assert_eq!(plan_progress(&mut st, &plan("p", Some("Complete"), true), None, &now()), Duration::from_secs(1));
        // Failed: UpgradeFailed with the plan's message.
        let mut p = plan("p", Some("Failed"), true);
        p.status.as_mut().unwrap().fail("InstallComponentFailed", "step 3 failed", &now());
        plan_progress(&mut st, &p, None, &now());
        assert_eq!(st.state, Some(SubscriptionState::UpgradeFailed));
        assert_eq!(cond(&st, C::InstallPlanFailed), ("True", reason::INSTALL_PLAN_FAILED, "step 3 failed"));
        assert!(st.condition(&C::InstallPlanPending).is_none());
        plan_progress(&mut st, &plan("p", Some("Installing"), true), None, &now());
        assert!(st.condition(&C::InstallPlanFailed).is_none());
    }

    #[test]
    fn every_plan_phase_is_the_pending_reason_and_only_failed_fails() {
        // (plan phase, state, condition written, its reason, requeue in s)
        let cases = [
            (None, SubscriptionState::UpgradePending, C::InstallPlanPending, "Planning", 10),
            (Some("Planning"), SubscriptionState::UpgradePending, C::InstallPlanPending, "Planning", 10),
            (
                Some("RequiresApproval"),
                SubscriptionState::UpgradePending,
                C::InstallPlanPending,
                "RequiresApproval",
                10,
            ),
            (Some("Installing"), SubscriptionState::UpgradePending, C::InstallPlanPending, "Installing", 10),
            (Some("Complete"), SubscriptionState::UpgradePending, C::InstallPlanPending, "Complete", 1),
            (Some("Failed"), SubscriptionState::UpgradeFailed, C::InstallPlanFailed, reason::INSTALL_PLAN_FAILED, 10),
        ];
        for (phase, state, written, why, requeue) in cases {
            let mut st = SubscriptionStatus::new(now());
            assert_eq!(
                plan_progress(&mut st, &plan("p", phase, true), None, &now()),
                Duration::from_secs(requeue),
                "{phase:?}"
            );
            assert_eq!(st.state.as_ref(), Some(&state), "{phase:?}");
            let c = st.condition(&written).unwrap_or_else(|| panic!("{phase:?}: no {written:?}"));
            assert_eq!((c.status.as_str(), c.reason.as_deref()), ("True", Some(why)), "{phase:?}");
            let other = if written == C::InstallPlanFailed { C::InstallPlanPending } else { C::InstallPlanFailed };
            assert!(st.condition(&other).is_none(), "{phase:?}: {other:?} is not written with {written:?}");
        }
        // A failed plan without a message of its own says which plan failed.
        let mut st = SubscriptionStatus::new(now());
        plan_progress(&mut st, &plan("p", Some("Failed"), true), None, &now());
        assert_eq!(cond(&st, C::InstallPlanFailed).2, "InstallPlan p failed");
    }

    fn request(name: &str, package: &str, channel: Option<&str>) -> SubscriptionRequest {
        SubscriptionRequest {
            name: name.into(),
            namespace: "ns".into(),
            package: package.into(),
            channel: channel.map(String::from),
            source: "c".into(),
            source_namespace: "ns".into(),
            ..Default::default()
        }
    }

    #[test]
    fn dependencies_without_a_subscription_get_one() {
        let own = bundle("mercury", "mercury-operator", "mercury-operator.v1.0.2", Reason::Requested);
        let dep = |p: &str, csv: &str| {
            bundle(
                "mercury",
                p,
                csv,
                Reason::Dependency {
                    of: "mercury-operator.v1.0.2".into(),
                    requirement: p.into(),
                    already_installed: false,
                },
            )
        };
        let to_install = vec![
            own,
            dep("strimzi-kafka-operator", "strimzi-cluster-operator.v0.28.0"),
            dep("camel-k", "camel-k-operator.v1.9.0"),
        ];
        let subs = vec![request("mercury", "mercury-operator", Some("stable"))];
        let deps = dependency_subscriptions(&to_install, &subs);
        assert_eq!(
            deps.iter().map(|d| d.name()).collect::<Vec<_>>(),
            ["strimzi-kafka-operator-stable-c-ns", "camel-k-stable-c-ns"]
        );
        assert_eq!(
            deps[0],
            DependencySubscription {
                package: "strimzi-kafka-operator".into(),
                channel: "stable".into(),
                catalog_source: "c".into(),
                catalog_source_namespace: "ns".into(),
                starting_csv: "strimzi-cluster-operator.v0.28.0".into()
            }
        );
        // A Subscription of the package (any channel when it names none) takes it over; one on
        // another channel or catalog does not (OLM's matching).
        let subs2 = [subs.clone(), vec![request("k", "camel-k", None)]].concat();
        assert_eq!(dependency_subscriptions(&to_install, &subs2).len(), 1);
        let subs3 = [subs.clone(), vec![request("k", "camel-k", Some("stable-1.9"))]].concat();
        assert_eq!(dependency_subscriptions(&to_install, &subs3).len(), 2);
        let mut other_catalog = request("k", "camel-k", None);
        other_catalog.source = "d".into();
        assert_eq!(dependency_subscriptions(&to_install, &[subs, vec![other_catalog]].concat()).len(), 2);
    }

    #[test]
    fn a_generated_subscription_points_at_its_plan_first() {
        let mut s = sub("camel-k-stable-c-ns", "camel-k");
        s.spec.starting_csv = Some("camel-k-operator.v1.9.0".into());
        let p = plan("install-1", Some("Installing"), true);
        let mut st = SubscriptionStatus::new(now());
        adopt_generating_plan(&mut st, &s, &p);
        assert!(st.install_plan_ref.is_none(), "not generated by a plan: untouched");
        s.metadata.annotations = Some([(ANNOTATION_GENERATED_BY.to_string(), "install-1".to_string())].into());
        adopt_generating_plan(&mut st, &s, &p);
        assert_eq!(st.install_plan_ref.as_ref().and_then(|r| r.name.as_deref()), Some("install-1"));
        assert_eq!(st.installplan.as_ref().map(|r| r.name.as_str()), Some("install-1"));
        assert_eq!(
            (st.state.clone(), st.current_csv.as_deref()),
            (Some(SubscriptionState::UpgradePending), Some("camel-k-operator.v1.9.0"))
        );
        // The plan waits to be applied: the next resolution waits for it rather than making a second.
        assert!(matches!(
            decide_prior(&p, "install-2", &["camel-k-operator.v1.9.0".into()], &s.name_any()),
            Prior::Wait { .. }
        ));
        // Once it has a plan reference of its own, the annotation is not looked at again.
        let mut st2 = st.clone();
        st2.install_plan_ref.as_mut().unwrap().name = Some("install-9".into());
        adopt_generating_plan(&mut st2, &s, &p);
        assert_eq!(st2.install_plan_ref.as_ref().and_then(|r| r.name.as_deref()), Some("install-9"));
    }

    #[test]
    fn plans_are_numbered_per_namespace_as_olm_numbers_them() {
        let mut s = sub("s", "a");
        assert_eq!(next_plan_generation(&[], &[&s]), 1, "the namespace's first plan");
        let mut p1 = plan("p1", Some("Complete"), true);
        p1.spec.generation = Some(1);
        let mut p3 = plan("p3", Some("Complete"), true);
        p3.spec.generation = Some(3);
        assert_eq!(next_plan_generation(&[p1.clone(), p3], &[&s]), 4, "one more than the highest plan");
        // A pruned plan still counts through the Subscription that recorded it.
        let mut st = SubscriptionStatus::new(now());
        st.install_plan_generation = Some(7);
        s.status = Some(st);
        assert_eq!(next_plan_generation(&[p1.clone()], &[&s]), 8);
        // The Subscription's status follows its plan's number.
        let mut st = SubscriptionStatus::new(now());
        let mut p = plan("p", Some("Complete"), true);
        p.spec.generation = Some(2);
        plan_progress(&mut st, &p, None, &now());
        assert_eq!(st.install_plan_generation, Some(2));
    }

    #[test]
    fn a_new_plan_is_owned_labelled_and_carries_its_lookups() {
        let mut s = sub("s", "a");
        let lookups =
            planned_lookups(&[bundle("s", "a", "a.v2.0.0", Reason::Upgrade { from: "a.v1.0.0".into() })], vec![]);
        assert_eq!(lookups.catalog_sources, ["c"]);
        assert_eq!(lookups.bundle_lookups[0].replaces, "a.v1.0.0");
        let ip = new_plan(&s, "install-x", &["a.v2.0.0".into()], &lookups, 1).unwrap();
        assert!(ip.spec.approved && ip.spec.approval == Approval::Automatic);
        assert_eq!(ip.owner_references()[0].uid, "uid-1");
        assert_eq!(ip.labels()["operators.coreos.com/a.ns"], "");
        let back: PlannedLookups = serde_json::from_str(&ip.annotations()[ANNOTATION_BUNDLE_LOOKUPS]).unwrap();
        assert_eq!(back, lookups);
        s.spec.install_plan_approval = Some(Approval::Manual);
        assert!(!new_plan(&s, "install-x", &[], &lookups, 1).unwrap().spec.approved);
        // A Subscription name too long for a label value does not matter: the label names the package.
        let long = sub(LONG, "strimzi-kafka-operator");
        assert_eq!(
            new_plan(&long, "install-y", &[], &lookups, 1).unwrap().labels()["operators.coreos.com/strimzi-kafka-operator.ns"],
            ""
        );
        // A plan that creates a dependency's Subscription carries that operator's label too, as
        // OLM's adoption leaves it (the dependency's Subscription refers to the plan).
        let mut with_dep = lookups.clone();
        with_dep.subscriptions.push(crate::install::plan::DependencySubscription {
            package: "dep".into(),
            channel: "stable".into(),
            catalog_source: "c".into(),
            catalog_source_namespace: "olm".into(),
            starting_csv: "dep.v1.0.0".into(),
        });
        let labels = new_plan(&s, "install-z", &[], &with_dep, 1).unwrap().labels().clone();
        assert_eq!(
            labels.keys().filter(|k| k.starts_with("operators.coreos.com/")).collect::<Vec<_>>(),
            ["operators.coreos.com/a.ns", "operators.coreos.com/dep.ns"]
        );
    }
}
