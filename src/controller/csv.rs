//! ClusterServiceVersion reconciler (minimal; `reference/olm-v0.md` §1.5 "Transition rules"):
//! OperatorGroup membership and install mode first (Failed with `NoOperatorGroup`,
//! `TooManyOperatorGroups`, `UnsupportedOperatorGroup`), then None → Pending
//! (`RequirementsUnknown`) → InstallReady (`AllRequirementsMet`) → Installing (`InstallWaiting`)
//! → Succeeded (`InstallSucceeded`) once every Deployment of the install strategy is Available;
//! a Succeeded CSV whose Deployment is no longer Available goes back to Failed
//! (`ComponentUnhealthy`), one that lost a CRD it owns or requires to Failed
//! (`RequirementsNotMet`) and from there to Pending until the CRD is back. A Succeeded CSV
//! deletes the CSV named in its `spec.replaces`.
//! In Pending the requirements are checked and written to `status.requirementStatus`
//! ([`requirements::requirement_status`]); the CSV stays Pending (`RequirementsNotMet`) until
//! all are met. What the CSV's workload needs from InstallReady on — its Deployments, webhooks,
//! APIServices and serving certificates — is observed and put back by [`workload`].
//!
//! The reconcile is observe ([`operator_group_fit`], then what [`need`] asks) → decide
//! ([`decide`], pure) → act, over one [`Pass`] whose status is written once ([`write_status`]).

mod requirements;
mod unit;
mod workload;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};

use self::requirements::requirement_status;
use self::workload::{deployments_waiting, remove_refused, webhooks_and_certificates};
use super::copied_csvs;
use super::events::EventType;
use super::operator_groups::{api_ownership, operator_group_targets};
use super::{Context, Error, apply_typed_status, fresh, kube_err, now_time};
use crate::api::clusterserviceversion::{ClusterServiceVersionStatus, CsvPhase, CsvReason, RequirementStatus};
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::install::copied_csv::is_copy;
use crate::install::from_watch_cache;
use crate::install::operator_group::{GroupTargets, check_install_mode, member_annotations};

/// Writes the CSV's status once for the phase steps one reconcile took (`phases`: each status
/// the steps decided, in order; the last is written). Each change of phase or reason is recorded
/// as an Event (reason and message of that step; Warning for Failed), in order, as OLM's
/// `SetPhaseWithEventIfChanged` does for the reasons within one phase (Pending:
/// `RequirementsUnknown` → `RequirementsNotMet`). Returns the CSV as written.
async fn write_status(
    ctx: &Context,
    api: &Api<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
    phases: &[ClusterServiceVersionStatus],
) -> Result<ClusterServiceVersion, Error> {
    let Some(status) = phases.last() else { return Ok(csv.clone()) };
    let written = apply_typed_status(api, csv, status).await?;
    for (type_, reason, message) in phase_events(csv.status.as_ref(), phases) {
        ctx.events.publish_for(csv, type_, &reason, &message).await;
    }
    // The Operator object follows the phases a user acts on (`operator.rs`); the
    // `capstan_csvs{phase}` gauge follows the CSV watch (`track_csvs`).
    if status.phase != csv.status.as_ref().and_then(|s| s.phase.clone())
        && matches!(status.phase, Some(CsvPhase::Succeeded | CsvPhase::Failed))
    {
        ctx.sync_operator_of(&written);
    }
    Ok(written)
}

/// The Events of the phase steps `phases` taken from status `old`: one per change of phase or
/// reason, in order, as (type, reason, message): Warning for Failed, the reason (the phase when
/// none), and `PHASE: message`. Pure.
fn phase_events(
    old: Option<&ClusterServiceVersionStatus>,
    phases: &[ClusterServiceVersionStatus],
) -> Vec<(EventType, String, String)> {
    let mut last = old.map(|s| (s.phase.clone(), s.reason.clone())).unwrap_or_default();
    let mut out = Vec::new();
    for step in phases {
        if (&step.phase, &step.reason) == (&last.0, &last.1) {
            continue;
        }
        last = (step.phase.clone(), step.reason.clone());
        let phase = step.phase.as_ref().map(|p| p.as_str().to_string()).unwrap_or_default();
        let reason = step.reason.as_ref().map(|r| r.as_str().to_string()).unwrap_or_default();
        let message = step.message.clone().unwrap_or_default();
        let type_ = if step.phase == Some(CsvPhase::Failed) { EventType::Warning } else { EventType::Normal };
        out.push((type_, if reason.is_empty() { phase.clone() } else { reason }, format!("{phase}: {message}")));
    }
    out
}

/// Whether `csv` fits its namespace's OperatorGroup (§1.5): `Some((reason, message))` with OLM's
/// reason when there is none, several, its targets need an install mode the CSV lacks, or another
/// OperatorGroup whose targets intersect provides the same APIs ([`api_ownership`]:
/// `InterOperatorGroupOwnerConflict`, `CannotModifyStaticOperatorGroupProvidedAPIs`). A CSV that
/// may own its APIs gets them into its group's `olm.providedAPIs` (OLM `AddAPIs`): that write is
/// returned as a task of its own (the group's resourceVersion as read is its precondition), so
/// that the CSV's next steps need not wait for it; the caller joins it before anything that
/// reads the annotation and before the CSV's status is written.
async fn operator_group_fit(
    client: &Client,
    csv: &ClusterServiceVersion,
    ns: &str,
) -> Result<(Option<(CsvReason, String)>, Option<Beside>, Option<Vec<String>>), Error> {
    let (og, targets) = match operator_group_targets(client, ns).await? {
        GroupTargets::Unfit { reason, message } => return Ok((Some((CsvReason::from(reason), message)), None, None)),
        GroupTargets::Found { name, targets, .. } => (name, targets),
    };
    let copied = is_copy(csv);
    if !copied && let Some(want) = member_annotations(csv.annotations(), ns, &og, &targets) {
        annotate_member(client, csv, ns, &want).await?;
    }
    let modes: Vec<(String, bool)> = csv
        .spec
        .install_modes
        .iter()
        .flatten()
        .map(|m| {
            (
                serde_json::to_value(&m.type_).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
                m.supported,
            )
        })
        .collect();
    if let Err(e) = check_install_mode(ns, &targets, &modes) {
        let message = format!("CSV {ns}/{}: {}", csv.name_any(), e.message);
        return Ok((Some((CsvReason::from(e.reason), message)), None, Some(targets)));
    }
    use crate::install::aggregation::{self, ApiOwnership};
    let agg = |e: aggregation::AggregationError| Error::Kube { context: e.what, source: e.source };
    let (ownership, read_at) = api_ownership(client, ns, &og, &targets, &csv.name_any(), &csv.spec, copied).await?;
    match ownership {
        ApiOwnership::Free => Ok((None, None, Some(targets))),
        ApiOwnership::Claim(value) => {
            let (client, ns) = (client.clone(), ns.to_string());
            let claim = Beside::spawn(async move {
                aggregation::write_provided_apis(&client, &ns, &og, &value, read_at.as_deref()).await.map_err(agg)
            });
            Ok((None, Some(claim), Some(targets)))
        }
        ApiOwnership::Refused { reason, message, release } => {
            if let Some(value) = release {
                aggregation::write_provided_apis(client, ns, &og, &value, read_at.as_deref()).await.map_err(agg)?;
            }
            // OLM keeps InterOperatorGroupOwnerConflict over the static-group reason.
            let (reason, status) = (CsvReason::from(reason), csv.status.as_ref());
            let conflict = CsvReason::InterOperatorGroupOwnerConflict;
            if reason == CsvReason::CannotModifyStaticOperatorGroupProvidedApis
                && status.is_some_and(|s| failed_with(s, &conflict))
            {
                let message = status.and_then(|s| s.message.clone()).unwrap_or_default();
                return Ok((Some((conflict, message)), None, Some(targets)));
            }
            Ok((Some((reason, message)), None, Some(targets)))
        }
    }
}

/// Writes the OperatorGroup annotations `want` ([`member_annotations`]) on `csv`, a member of
/// the group made by hand or whose group's targets changed (a merge patch of those three keys).
async fn annotate_member(
    client: &Client,
    csv: &ClusterServiceVersion,
    ns: &str,
    want: &std::collections::BTreeMap<String, String>,
) -> Result<(), Error> {
    let name = csv.name_any();
    let patch = serde_json::json!({"metadata": {"annotations": want}});
    Api::<ClusterServiceVersion>::namespaced(client.clone(), ns)
        .patch(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await
        .map_err(kube_err(format!("writing the OperatorGroup annotations of ClusterServiceVersion {ns}/{name}")))?;
    Ok(())
}

/// A write the CSV's phase steps do not wait for — the group's `olm.providedAPIs` claim
/// ([`operator_group_fit`]), the OperatorCondition — running as a task of its own; joined before
/// anything that needs it and before the CSV's status is written.
struct Beside(tokio::task::JoinHandle<Result<(), Error>>);

impl Beside {
    fn spawn(write: impl std::future::Future<Output = Result<(), Error>> + Send + 'static) -> Beside {
        Beside(tokio::spawn(write))
    }

    /// Waits for the write; its error (a 409 of the claim when the group changed since it was
    /// read is retried by the requeue). The task is never aborted: a JoinError is its panic,
    /// passed on as if it ran inline.
    async fn done(self) -> Result<(), Error> {
        self.0.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

/// Once the new CSV succeeded, the one it replaces is deleted (OLM: Replacing → Deleting, §1.5);
/// objects only it owns are garbage-collected with it.
async fn delete_replaced(api: &Api<ClusterServiceVersion>, csv: &ClusterServiceVersion, ns: &str) -> Result<(), Error> {
    let name = csv.name_any();
    let Some(old) = csv.spec.replaces.as_deref().filter(|r| !r.is_empty() && *r != name) else { return Ok(()) };
    if api.get_opt(old).await.map_err(kube_err(format!("reading ClusterServiceVersion {ns}/{old}")))?.is_none() {
        return Ok(());
    }
    tracing::info!(csv = %format!("{ns}/{name}"), replaced = %old, "deleting the replaced CSV");
    match api.delete(old, &kube::api::DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!("deleting replaced ClusterServiceVersion {ns}/{old}"))(e)),
    }
}

/// The requeue [`decide`] asks for after entering a phase whose next step needs no wait (Pending
/// from None, InstallReady): the reconciler takes that step at once on the status as decided
/// (written once, after the last step), and this requeue is only the fallback when it stops (at
/// most three steps per reconcile).
pub(crate) const NEXT_STEP_AT_ONCE: Duration = Duration::from_millis(100);

/// What the CSV reconciler must look at next, by the CSV's phase (§1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Nothing more: the phase moves on as it is (None / Failed → Pending).
    Nothing,
    /// The requirements (Pending).
    Requirements,
    /// The Deployments (InstallReady, Installing, Succeeded, Failed/ComponentUnhealthy).
    Deployments,
}

/// What the CSV reconciler observed, as far as [`Need`] asked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CsvView {
    /// The CSV does not fit its OperatorGroup: OLM's reason and the message.
    Unfit(CsvReason, String),
    /// The phase's own step needs nothing more.
    Fresh,
    /// The requirement entries and a description of each unmet one.
    Requirements(Vec<RequirementStatus>, Vec<String>),
    /// The Deployments of the install strategy, the webhooks they serve, their certificates.
    Deployments(DeploymentsView),
}

/// What [`decide`] sees of an installed CSV's workload (phases InstallReady and after).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DeploymentsView {
    /// The Deployments of the install strategy that are not Available.
    pub waiting: Vec<String>,
    /// Each webhook and APIService that cannot be served, naming its Deployment
    /// (`install::webhook::unavailable`).
    pub webhooks: Option<String>,
    /// `(certsLastUpdated, certsRotateAt)` of the serving certificates, when the CSV has any.
    pub certs: Option<(Time, Time)>,
    /// This process applied the CSV's RBAC aggregation already ([`Context::aggregated`]).
    pub aggregated: bool,
    /// Why the objects OLM's olm-operator makes for the CSV could not be made ([`unit::install`]):
    /// OLM's reason (`InvalidInstallStrategy`, `InstallComponentFailed`) and message.
    pub failed: Option<(CsvReason, String)>,
    /// The CRDs a Succeeded CSV owns or requires that are gone ([`requirements::crds_lost`]).
    pub lost: Vec<String>,
}

impl DeploymentsView {
    /// A view of a CSV without webhooks whose Deployments `waiting` are not Available.
    #[cfg(test)]
    fn waiting(waiting: Vec<String>) -> DeploymentsView {
        DeploymentsView { waiting, ..Default::default() }
    }
}

/// What to do with a CSV: the status to write (`None`: unchanged), when to look again, and
/// whether to delete the CSV it replaces (once it succeeded).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CsvDecision {
    /// The new status, when it changed.
    pub status: Option<ClusterServiceVersionStatus>,
    /// When to look again.
    pub requeue: Duration,
    /// Delete the CSV named in `spec.replaces`.
    pub delete_replaced: bool,
    /// Create the CSV's OperatorCondition (first sight of the CSV; OLM's generator).
    pub ensure_operator_condition: bool,
    /// Apply the RBAC aggregation of the CSV ([`aggregation_due`]: as it leaves InstallReady, or
    /// on its way into Succeeded).
    pub ensure_aggregation: bool,
}

/// Whether `reason` is one of the two a CSV is refused with for its provided APIs.
fn refused_for_apis(reason: &CsvReason) -> bool {
    matches!(
        reason,
        CsvReason::InterOperatorGroupOwnerConflict | CsvReason::CannotModifyStaticOperatorGroupProvidedApis
    )
}

/// The phase of `status` as written: `None` when there is none (absent, or OLM's empty phase).
fn phase_of(status: &ClusterServiceVersionStatus) -> Option<&CsvPhase> {
    status.phase.as_ref().filter(|p| !p.as_str().is_empty())
}

/// Whether `status` is Failed with `reason`.
fn failed_with(status: &ClusterServiceVersionStatus, reason: &CsvReason) -> bool {
    phase_of(status) == Some(&CsvPhase::Failed) && status.reason.as_ref() == Some(reason)
}

/// What [`decide`] needs observed for a CSV with `status`. Pure.
pub(crate) fn need(status: &ClusterServiceVersionStatus) -> Need {
    match phase_of(status) {
        None => Need::Nothing,
        // A Succeeded CSV that lost a requirement: Pending until it is back (OLM's Failed case).
        Some(CsvPhase::Pending) => Need::Requirements,
        Some(CsvPhase::Failed) if failed_with(status, &CsvReason::RequirementsNotMet) => Need::Requirements,
        Some(CsvPhase::Failed) if !failed_with(status, &CsvReason::ComponentUnhealthy) => Need::Nothing,
        _ => Need::Deployments,
    }
}

impl CsvDecision {
    /// Nothing to write; look again after `requeue`.
    fn keep(requeue: Duration) -> CsvDecision {
        CsvDecision {
            status: None,
            requeue,
            delete_replaced: false,
            ensure_operator_condition: false,
            ensure_aggregation: false,
        }
    }

    /// Write `next`; look again after `requeue`.
    fn write(next: ClusterServiceVersionStatus, requeue: Duration) -> CsvDecision {
        CsvDecision { status: Some(next), ..CsvDecision::keep(requeue) }
    }
}

/// The CSV transition rules (§1.5) from `status` given `view`, at `now`: OperatorGroup membership
/// and install mode come before any phase logic. Pure.
pub(crate) fn decide(status: &ClusterServiceVersionStatus, view: CsvView, now: &Time) -> CsvDecision {
    match view {
        CsvView::Unfit(reason, message) => {
            if failed_with(status, &reason) {
                return CsvDecision::keep(Duration::from_secs(30));
            }
            let mut next = status.clone();
            next.fail(reason, &message, now);
            CsvDecision::write(next, Duration::from_secs(30))
        }
        CsvView::Fresh => decide_fresh(status, now),
        CsvView::Requirements(entries, missing) => decide_requirements(status, entries, missing, now),
        CsvView::Deployments(view) => decide_deployments(status, view, now),
    }
}

/// None, or a Failed CSV whose OperatorGroup fits now → Pending/RequirementsUnknown, with OLM's
/// message for each way it did not fit; the OperatorCondition is created at first sight.
fn decide_fresh(status: &ClusterServiceVersionStatus, now: &Time) -> CsvDecision {
    let failed = |reason: &CsvReason| failed_with(status, reason);
    let message = match status.reason.as_ref() {
        Some(r @ CsvReason::InterOperatorGroupOwnerConflict) if failed(r) => {
            "OperatorGroup no longer intersecting with conflicting owner"
        }
        Some(r @ CsvReason::CannotModifyStaticOperatorGroupProvidedApis) if failed(r) => {
            "static OperatorGroup and intersecting groups now support providedAPIs"
        }
        Some(
            r @ (CsvReason::NoTargetNamespaces
            | CsvReason::NoOperatorGroup
            | CsvReason::TooManyOperatorGroups
            | CsvReason::UnsupportedOperatorGroup),
        ) if failed(r) => "InstallModes now support target namespaces",
        _ => "requirements not yet checked",
    };
    let mut next = status.clone();
    next.set_phase(CsvPhase::Pending, CsvReason::RequirementsUnknown, message, now);
    CsvDecision { ensure_operator_condition: phase_of(status).is_none(), ..CsvDecision::write(next, NEXT_STEP_AT_ONCE) }
}

/// Pending: InstallReady when every requirement is met, else RequirementsNotMet naming what is
/// missing (written when it changes); `status.requirementStatus` is `entries`.
fn decide_requirements(
    status: &ClusterServiceVersionStatus,
    entries: Vec<RequirementStatus>,
    missing: Vec<String>,
    now: &Time,
) -> CsvDecision {
    let mut next = status.clone();
    next.requirement_status = entries;
    if missing.is_empty() {
        next.set_phase(
            CsvPhase::InstallReady,
            CsvReason::AllRequirementsMet,
            "all requirements found, attempting install",
            now,
        );
        return CsvDecision::write(next, NEXT_STEP_AT_ONCE);
    }
    let message = format!("one or more requirements couldn't be found: {}", missing.join("; "));
    if status.reason == Some(CsvReason::RequirementsNotMet) && status.message.as_deref() == Some(message.as_str()) {
        return CsvDecision::keep(Duration::from_secs(2));
    }
    next.set_phase(CsvPhase::Pending, CsvReason::RequirementsNotMet, &message, now);
    CsvDecision::write(next, Duration::from_secs(2))
}

/// InstallReady and after: Installing while a Deployment, webhook or APIService is not
/// available, Succeeded once all are (then the replaced CSV is deleted), Failed/ComponentUnhealthy
/// when a Succeeded CSV's Deployment is no longer Available, Failed/RequirementsNotMet when it
/// lost an owned or required CRD; the certificates' times written when
/// they change, and a look again when their rotation is due.
fn decide_deployments(status: &ClusterServiceVersionStatus, view: DeploymentsView, now: &Time) -> CsvDecision {
    let DeploymentsView { waiting, webhooks, certs, aggregated, failed, lost } = view;
    if let Some((reason, message)) = failed {
        return decide_install_failed(status, reason, &message, now);
    }
    let phase = phase_of(status);
    if phase == Some(&CsvPhase::Succeeded) && !lost.is_empty() {
        // OLM's words; the Failed CSV goes back to Pending while they are missing (`need`).
        let mut next = status.clone();
        next.fail(CsvReason::RequirementsNotMet, "requirements no longer met", now);
        return CsvDecision::write(next, NEXT_STEP_AT_ONCE);
    }
    let (p, r, mut m) = if waiting.is_empty() && webhooks.is_some() {
        (CsvPhase::Installing, CsvReason::InstallWaiting, "installing".to_string())
    } else if waiting.is_empty() {
        (CsvPhase::Succeeded, CsvReason::InstallSucceeded, "install strategy completed with no errors".to_string())
    } else if phase == Some(&CsvPhase::Succeeded) || failed_with(status, &CsvReason::ComponentUnhealthy) {
        (
            CsvPhase::Failed,
            CsvReason::ComponentUnhealthy,
            format!("installing: Deployment {} is not available", waiting.join(", ")),
        )
    } else {
        (
            CsvPhase::Installing,
            CsvReason::InstallWaiting,
            format!("installing: waiting for deployment {} to become ready", waiting.join(", ")),
        )
    };
    if let Some(w) = webhooks {
        m = format!("{m}: {w}");
    }
    let succeeded = p == CsvPhase::Succeeded;
    let mut requeue = Duration::from_secs(if succeeded { 30 } else { 1 });
    let mut next = status.clone();
    let mut changed = status.phase.as_ref() != Some(&p) || status.message.as_deref() != Some(m.as_str());
    if changed {
        next.set_phase(p, r, &m, now);
    }
    // OLM's certsLastUpdated / certsRotateAt; look again when the rotation is due.
    if let Some((last, at)) = certs {
        if status.certs_last_updated.as_ref() != Some(&last) || status.certs_rotate_at.as_ref() != Some(&at) {
            next.certs_last_updated = Some(last);
            next.certs_rotate_at = Some(at.clone());
            changed = true;
        }
        let until = at.0.duration_since(now.0).unsigned_abs();
        if at.0 > now.0 {
            requeue = requeue.min(until.max(Duration::from_secs(1)));
        }
    }
    CsvDecision {
        status: changed.then_some(next),
        requeue,
        delete_replaced: succeeded,
        ensure_operator_condition: false,
        ensure_aggregation: aggregation_due(phase, succeeded, aggregated),
    }
}

/// The CSV's objects could not be made (OLM's `InstallReady` → `Failed` with
/// `InvalidInstallStrategy` or `InstallComponentFailed`): Failed with `reason` and `message`,
/// written when it changes; looked at again after 30 s, when a Failed CSV starts over from
/// Pending as OLM's does. Pure.
fn decide_install_failed(
    status: &ClusterServiceVersionStatus,
    reason: CsvReason,
    message: &str,
    now: &Time,
) -> CsvDecision {
    if failed_with(status, &reason) && status.message.as_deref() == Some(message) {
        return CsvDecision::keep(Duration::from_secs(30));
    }
    let mut next = status.clone();
    next.fail(reason, message, now);
    CsvDecision::write(next, Duration::from_secs(30))
}

/// Whether the RBAC aggregation (namespace users may use the operator's APIs) is applied now, for
/// a CSV leaving `phase` (`succeeded`: for Succeeded; `aggregated`: this process did it already).
/// It is in place before the CSV says Succeeded: applied as the CSV leaves InstallReady, while
/// its Deployments start, so that it is not on the path from Available to Succeeded; from
/// Installing into Succeeded again unless this process did it for the CSV already (with every
/// API found); on any other way into Succeeded (Failed → Succeeded) always. Pure.
fn aggregation_due(phase: Option<&CsvPhase>, succeeded: bool, aggregated: bool) -> bool {
    match phase {
        Some(CsvPhase::InstallReady) => true,
        Some(CsvPhase::Succeeded) => false,
        Some(CsvPhase::Installing) => succeeded && !aggregated,
        _ => succeeded,
    }
}

/// The RBAC aggregation of a CSV ([`aggregation_due`]; OLM `ensureClusterRolesForCSV`, then the
/// OperatorGroup's `olm.providedAPIs` and ClusterRoles; `install::aggregation`).
/// Returns whether every API the CSV provides had its roles (`false`: some were not on the
/// cluster yet, named in a warning).
async fn ensure_aggregation(ctx: &Context, csv: &ClusterServiceVersion, ns: &str) -> Result<bool, Error> {
    let client = &ctx.client;
    use crate::install::aggregation;
    let e = |e: aggregation::AggregationError| Error::Kube { context: e.what, source: e.source };
    let missing = aggregation::ensure_for_csv(client, csv).await.map_err(e)?;
    if !missing.is_empty() {
        tracing::warn!(csv = %format!("{ns}/{}", csv.name_any()), missing = %missing.join(", "), "no aggregated ClusterRoles for APIs not on the cluster");
    }
    let ogs = Api::<OperatorGroup>::namespaced(client.clone(), ns)
        .list(&from_watch_cache())
        .await
        .map_err(kube_err(format!("listing OperatorGroups in {ns}")))?;
    if let [og] = ogs.items.as_slice() {
        ctx.ensure_group_aggregation(og).await.map_err(e)?;
    }
    Ok(missing.is_empty())
}

pub(super) async fn reconcile(csv: Arc<ClusterServiceVersion>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = csv.namespace().unwrap_or_default();
    // A deleted CSV: the CSV watch's Delete event makes the context forget it and takes its
    // copies with it (`track_csvs`).
    let Some(csv) = fresh(&ctx.client, csv.as_ref()).await? else {
        return Ok(Action::await_change());
    };
    // Finalizer and removal of a deleted CSV (`removal.rs`).
    if let Some(action) = super::removal::reconcile_csv(&csv, &ctx).await? {
        return Ok(action);
    }
    // A copy is not installed: it follows its original (OLM skips copies' transitions).
    if is_copy(&csv) {
        copied_csvs::reconcile_copy(&ctx, &csv).await?;
        return Ok(Action::await_change());
    }
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &ns);
    let (fit, claim, group_targets) = operator_group_fit(&ctx.client, &csv, &ns).await?;
    // OLM fails a CSV whose webhook definitions it refuses before installing anything.
    let fit = fit.or_else(|| unit::invalid_webhooks(&csv).map(|m| (CsvReason::InvalidWebhookDescription, m)));
    // The phase steps whose next one needs no wait (None → Pending → InstallReady →
    // Installing/Succeeded) are taken in this reconcile, on the status as decided, and written
    // once at the end (`status.conditions` keeps each phase it passed, with its time, as OLM's
    // do; an Event is recorded for each). On an API error of a step half-way the steps decided
    // so far are written before the error is returned, so the CSV never shows less than was
    // decided. The OperatorCondition and the group's olm.providedAPIs claim are written beside
    // the steps; when either fails nothing is written (the CSV stays where it was, so the next
    // reconcile creates the OperatorCondition, or claims, again): a CSV never says more than
    // what was done for it.
    let mut pass = Pass {
        status: csv.status.clone().unwrap_or_default(),
        phases: Vec::new(),
        claim,
        claim_failed: false,
        condition: None,
        requeue: NEXT_STEP_AT_ONCE,
        delete_replaced: false,
    };
    let stepped = steps(&ctx, &csv, &ns, fit.as_ref(), &mut pass).await;
    let condition = match pass.condition.take() {
        Some(task) => task.done().await,
        None => Ok(()),
    };
    let claimed = pass.join_claim().await;
    if !pass.phases.is_empty() && !pass.claim_failed && condition.is_ok() && claimed.is_ok() {
        let written = write_status(&ctx, &api, &csv, &pass.phases).await?;
        if written.status.as_ref().is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
            && let Some(uid) = csv.uid()
        {
            // Only needed between InstallReady and Succeeded (`aggregation_due`).
            ctx.aggregated.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
        }
    }
    stepped?;
    condition?;
    claimed?;
    if pass.delete_replaced {
        delete_replaced(&api, &csv, &ns).await?;
    }
    group_work(&ctx, &csv, &ns, &pass, fit.is_none(), group_targets).await?;
    Ok(Action::requeue(pass.requeue))
}

/// What a member CSV brings to its group's other namespaces: its copies ([`copied_csvs::sync`]),
/// with the status just written, and for an AllNamespaces group its owned RBAC lifted
/// ([`unit::lift_owned_rbac`]) while it fits (`fits`). Both follow the group's targets as this
/// reconcile read them (`targets`; `None`: no usable group), never the CSV's own
/// `olm.targetNamespaces`, which anyone who may edit the CSV can write. A copy that cannot be
/// written is logged and tried again at the next look, without failing the CSV's reconcile.
async fn group_work(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    pass: &Pass,
    fits: bool,
    targets: Option<Vec<String>>,
) -> Result<(), Error> {
    let mut shown = csv.clone();
    if let Some(status) = pass.phases.last() {
        shown.status = Some(status.clone());
    }
    let annotations = shown.annotations_mut();
    match &targets {
        Some(t) => annotations.insert(crate::install::ANNOTATION_TARGET_NAMESPACES.into(), t.join(",")),
        None => annotations.remove(crate::install::ANNOTATION_TARGET_NAMESPACES),
    };
    if let Err(e) = copied_csvs::sync(ctx, &shown).await {
        tracing::warn!(csv = %format!("{ns}/{}", csv.name_any()), "copied CSVs: {e}");
    }
    if fits && targets.is_some() {
        unit::lift_owned_rbac(ctx, &shown, ns).await?;
    }
    Ok(())
}

/// What a CSV from InstallReady on has of its workload: the objects OLM's olm-operator makes for
/// it made first ([`unit::install`]: all of them for a CSV applied by hand, on its way from
/// InstallReady; the Deployments whose strategy changed for any CSV), then its Deployments,
/// webhooks and certificates observed ([`workload`]).
async fn deployments_view(ctx: &Arc<Context>, csv: &ClusterServiceVersion, ns: &str) -> Result<CsvView, Error> {
    let installing = csv.status.as_ref().and_then(phase_of) == Some(&CsvPhase::InstallReady);
    let failed = unit::install(ctx, csv, ns, installing).await?;
    if failed.is_some() {
        return Ok(CsvView::Deployments(DeploymentsView { failed, ..Default::default() }));
    }
    let succeeded = csv.status.as_ref().and_then(phase_of) == Some(&CsvPhase::Succeeded);
    let lost = if succeeded { requirements::crds_lost(&ctx.client, csv).await? } else { Vec::new() };
    let waiting = deployments_waiting(ctx, csv, ns).await?;
    let (webhooks, certs) = webhooks_and_certificates(ctx, csv, ns, &waiting).await?;
    let aggregated =
        csv.uid().is_some_and(|uid| ctx.aggregated.lock().unwrap_or_else(|e| e.into_inner()).contains(&uid));
    Ok(CsvView::Deployments(DeploymentsView { waiting, webhooks, certs, aggregated, failed: None, lost }))
}

/// The state of one CSV reconcile across its phase steps ([`steps`]).
struct Pass {
    /// The status as decided so far.
    status: ClusterServiceVersionStatus,
    /// Each status a step decided (not yet written), in order.
    phases: Vec<ClusterServiceVersionStatus>,
    /// The group's `olm.providedAPIs` claim being written ([`operator_group_fit`]).
    claim: Option<Beside>,
    /// The claim failed ([`Pass::join_claim`]): nothing is written.
    claim_failed: bool,
    /// The OperatorCondition being created beside the steps (first sight of the CSV).
    condition: Option<Beside>,
    /// When to look again.
    requeue: Duration,
    /// Delete the CSV named in `spec.replaces` after the write.
    delete_replaced: bool,
}

impl Pass {
    /// Waits for the claim, if it is still being written; a failure is remembered (nothing of
    /// the CSV's status is written then) and returned once.
    async fn join_claim(&mut self) -> Result<(), Error> {
        let Some(claim) = self.claim.take() else { return Ok(()) };
        let done = claim.done().await;
        self.claim_failed = done.is_err();
        done
    }
}

/// Takes the CSV's phase steps on `pass` ([`decide`] over what [`need`] asks observed), at most
/// three in a row while the next needs no wait. Writes nothing of the CSV's status.
async fn steps(
    ctx: &Arc<Context>,
    csv: &ClusterServiceVersion,
    ns: &str,
    fit: Option<&(CsvReason, String)>,
    pass: &mut Pass,
) -> Result<(), Error> {
    // Each step observes the CSV with the status the steps before it decided, as if written.
    let mut current = csv.clone();
    for _ in 0..3 {
        current.status = Some(pass.status.clone());
        let csv = &current;
        let view = match fit {
            Some((reason, message)) => CsvView::Unfit(reason.clone(), message.clone()),
            None => match need(&pass.status) {
                Need::Nothing => CsvView::Fresh,
                Need::Requirements => {
                    let (entries, missing) = requirement_status(&ctx.client, csv, ns).await?;
                    CsvView::Requirements(entries, missing)
                }
                Need::Deployments => deployments_view(ctx, csv, ns).await?,
            },
        };
        let decision = decide(&pass.status, view, &now_time());
        if decision.status.is_some() && fit.is_some_and(|(r, _)| refused_for_apis(r)) {
            remove_refused(ctx, csv, ns).await?;
        }
        if decision.ensure_operator_condition {
            // Needed by the operator, not by the next steps: created beside them.
            let (client, csv) = (ctx.client.clone(), csv.clone());
            pass.condition = Some(Beside::spawn(async move {
                crate::install::operator_condition::ensure(&client, &csv)
                    .await
                    .map(|_| ())
                    .map_err(|e| Error::Kube { context: e.what, source: e.source })
            }));
        }
        if decision.ensure_aggregation {
            pass.join_claim().await?;
            // Marked done only when every API had its roles: an APIService the plan has not
            // applied yet gets them on the way into Succeeded.
            if ensure_aggregation(ctx, csv, ns).await?
                && let Some(uid) = csv.uid()
            {
                ctx.aggregated.lock().unwrap_or_else(|e| e.into_inner()).insert(uid);
            }
        }
        pass.requeue = decision.requeue;
        pass.delete_replaced |= decision.delete_replaced;
        match decision.status {
            Some(next) => {
                pass.status = next.clone();
                pass.phases.push(next);
                if decision.requeue != NEXT_STEP_AT_ONCE {
                    return Ok(());
                }
            }
            None => return Ok(()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::clusterserviceversion::RequirementStatusReason;

    fn st(phase: Option<&str>, reason: Option<&str>, message: Option<&str>) -> ClusterServiceVersionStatus {
        ClusterServiceVersionStatus {
            phase: phase.map(CsvPhase::from),
            reason: reason.map(CsvReason::from),
            message: message.map(String::from),
            ..Default::default()
        }
    }

    fn now() -> Time {
        Time("2026-01-01T00:00:00Z".parse().unwrap())
    }

    #[test]
    fn an_event_for_each_change_of_phase_or_reason() {
        let unknown = st(Some("Pending"), Some("RequirementsUnknown"), Some("requirements not yet checked"));
        let not_met =
            st(Some("Pending"), Some("RequirementsNotMet"), Some("one or more requirements couldn't be found: x"));
        let not_met_y =
            st(Some("Pending"), Some("RequirementsNotMet"), Some("one or more requirements couldn't be found: y"));
        let met =
            st(Some("InstallReady"), Some("AllRequirementsMet"), Some("all requirements found, attempting install"));
        let failed = st(Some("Failed"), Some("ComponentUnhealthy"), Some("down"));
        let reasons = |old: Option<&ClusterServiceVersionStatus>, phases: &[ClusterServiceVersionStatus]| {
            phase_events(old, phases).into_iter().map(|(t, r, _)| (t == EventType::Warning, r)).collect::<Vec<_>>()
        };
        assert_eq!(
            reasons(None, &[unknown.clone(), not_met.clone()]),
            [(false, "RequirementsUnknown".into()), (false, "RequirementsNotMet".into())],
            "a new reason within Pending is an Event, as in OLM"
        );
        assert!(reasons(Some(&not_met), std::slice::from_ref(&not_met_y)).is_empty(), "a new message alone is not");
        assert_eq!(
            reasons(Some(&not_met), &[met, failed]),
            [(false, "AllRequirementsMet".into()), (true, "ComponentUnhealthy".into())]
        );
        assert_eq!(phase_events(None, std::slice::from_ref(&unknown))[0].2, "Pending: requirements not yet checked");
    }

    fn written(d: &CsvDecision) -> (String, String, String) {
        let s = d.status.as_ref().expect("a status to write");
        (
            phase_of(s).map(|p| p.as_str()).unwrap_or("").to_string(),
            s.reason.as_ref().map(|r| r.as_str().to_string()).unwrap_or_default(),
            s.message.clone().unwrap_or_default(),
        )
    }

    #[test]
    fn what_each_phase_needs() {
        assert_eq!(need(&st(None, None, None)), Need::Nothing);
        assert_eq!(need(&st(Some("Failed"), Some("NoOperatorGroup"), None)), Need::Nothing);
        assert_eq!(need(&st(Some("Pending"), Some("RequirementsUnknown"), None)), Need::Requirements);
        for p in ["InstallReady", "Installing", "Succeeded"] {
            assert_eq!(need(&st(Some(p), None, None)), Need::Deployments, "{p}");
        }
        assert_eq!(need(&st(Some("Failed"), Some("ComponentUnhealthy"), None)), Need::Deployments);
        assert_eq!(need(&st(Some("Failed"), Some("RequirementsNotMet"), None)), Need::Requirements);
    }

    #[test]
    fn a_succeeded_csv_that_loses_a_crd_fails_then_waits_in_pending_for_it() {
        // OLM: Succeeded → Failed "requirements no longer met" → Pending → … → Succeeded again.
        let succeeded =
            st(Some("Succeeded"), Some("InstallSucceeded"), Some("install strategy completed with no errors"));
        let lost = DeploymentsView { lost: vec!["ins.cluster.com".into()], ..DeploymentsView::waiting(vec![]) };
        let d = decide(&succeeded, CsvView::Deployments(lost.clone()), &now());
        assert_eq!(written(&d), ("Failed".into(), "RequirementsNotMet".into(), "requirements no longer met".into()));
        assert_eq!(d.requeue, NEXT_STEP_AT_ONCE);
        let failed = d.status.unwrap();
        assert_eq!(need(&failed), Need::Requirements);
        let entries = vec![];
        let missing =
            vec!["CustomResourceDefinition ins.cluster.com (version v1alpha1): CRD is not present".to_string()];
        let d = decide(&failed, CsvView::Requirements(entries, missing), &now());
        assert_eq!((written(&d).0, written(&d).1), ("Pending".into(), "RequirementsNotMet".into()));
        // Only a Succeeded CSV is failed for it: one still installing goes on installing.
        let installing = st(Some("Installing"), Some("InstallWaiting"), Some("installing"));
        let d = decide(&installing, CsvView::Deployments(lost), &now());
        assert_eq!(written(&d).0, "Succeeded");
    }

    #[test]
    fn an_unfit_csv_fails_once_with_the_operator_group_reason() {
        // Unfit: Failed with the OperatorGroup reason, written once.
        let d = decide(
            &st(Some("Succeeded"), None, None),
            CsvView::Unfit("TooManyOperatorGroups".into(), "m".into()),
            &now(),
        );
        assert_eq!(
            (written(&d), d.requeue),
            (("Failed".into(), "TooManyOperatorGroups".into(), "m".into()), Duration::from_secs(30))
        );
        let d = decide(
            &st(Some("Failed"), Some("TooManyOperatorGroups"), Some("m")),
            CsvView::Unfit("TooManyOperatorGroups".into(), "m".into()),
            &now(),
        );
        assert!(d.status.is_none());
    }

    #[test]
    fn a_new_or_fixed_csv_is_pending_with_olms_message() {
        // None and a fixed Failed → Pending/RequirementsUnknown, with OLM's message for what was fixed.
        for (from, message) in [
            (st(None, None, None), "requirements not yet checked"),
            (st(Some("Failed"), Some("NoOperatorGroup"), None), "InstallModes now support target namespaces"),
            (
                st(Some("Failed"), Some("InterOperatorGroupOwnerConflict"), None),
                "OperatorGroup no longer intersecting with conflicting owner",
            ),
            (
                st(Some("Failed"), Some("CannotModifyStaticOperatorGroupProvidedAPIs"), None),
                "static OperatorGroup and intersecting groups now support providedAPIs",
            ),
        ] {
            let d = decide(&from, CsvView::Fresh, &now());
            assert_eq!(written(&d), ("Pending".into(), "RequirementsUnknown".into(), message.into()));
            assert_eq!(d.requeue, NEXT_STEP_AT_ONCE);
        }
    }

    #[test]
    fn a_csv_refused_for_its_apis_fails_and_creates_nothing() {
        // Refused for its APIs: Failed with the reason, once; nothing to watch until it changes but the 30 s look.
        let d = decide(
            &st(Some("Installing"), None, None),
            CsvView::Unfit("InterOperatorGroupOwnerConflict".into(), "m".into()),
            &now(),
        );
        assert_eq!(written(&d).1, "InterOperatorGroupOwnerConflict");
        assert!(
            refused_for_apis(&"InterOperatorGroupOwnerConflict".into())
                && refused_for_apis(&"CannotModifyStaticOperatorGroupProvidedAPIs".into())
                && !refused_for_apis(&"NoOperatorGroup".into())
        );
        assert_eq!(need(d.status.as_ref().unwrap()), Need::Nothing, "no Deployment is created again while refused");
    }

    #[test]
    fn a_pending_csv_is_install_ready_when_its_requirements_are_met() {
        // Pending: InstallReady when all is met, else RequirementsNotMet (written when it changes).
        let pending = st(Some("Pending"), Some("RequirementsUnknown"), None);
        let d = decide(
            &pending,
            CsvView::Requirements(
                vec![requirements::requirement("", "ServiceAccount", "a", RequirementStatusReason::Present, "ok")],
                vec![],
            ),
            &now(),
        );
        assert_eq!(written(&d).1, "AllRequirementsMet");
        assert_eq!(d.status.as_ref().unwrap().requirement_status.len(), 1);
        let d = decide(&pending, CsvView::Requirements(vec![], vec!["CRD x: missing".into()]), &now());
        assert_eq!(
            written(&d),
            (
                "Pending".into(),
                "RequirementsNotMet".into(),
                "one or more requirements couldn't be found: CRD x: missing".into()
            )
        );
        assert_eq!(d.requeue, Duration::from_secs(2));
        let again =
            decide(d.status.as_ref().unwrap(), CsvView::Requirements(vec![], vec!["CRD x: missing".into()]), &now());
        assert!(again.status.is_none());
    }

    #[test]
    fn deployments_take_a_csv_through_installing_succeeded_and_unhealthy() {
        // Deployments: Installing → Succeeded (deletes the replaced CSV) → ComponentUnhealthy → Succeeded.
        let d = decide(
            &st(Some("InstallReady"), None, None),
            CsvView::Deployments(DeploymentsView::waiting(vec!["op".into()])),
            &now(),
        );
        assert_eq!(
            written(&d),
            (
                "Installing".into(),
                "InstallWaiting".into(),
                "installing: waiting for deployment op to become ready".into()
            )
        );
        assert!(!d.delete_replaced && d.requeue == Duration::from_secs(1));
        assert!(d.ensure_aggregation, "aggregated as it leaves InstallReady, while the Deployment starts");
        let installing = d.status.clone().unwrap();
        let done = DeploymentsView { aggregated: true, ..DeploymentsView::waiting(vec![]) };
        let d = decide(&installing, CsvView::Deployments(done), &now());
        assert_eq!(written(&d).1, "InstallSucceeded");
        assert!(d.delete_replaced && d.requeue == Duration::from_secs(30));
        assert!(!d.ensure_aggregation, "not again on the way from Available to Succeeded");
        // A CSV this process did not aggregate (it was Installing when capstan restarted) is
        // aggregated before it says Succeeded; so is one straight from InstallReady.
        assert!(decide(&installing, CsvView::Deployments(DeploymentsView::waiting(vec![])), &now()).ensure_aggregation);
        assert!(
            decide(
                &st(Some("InstallReady"), None, None),
                CsvView::Deployments(DeploymentsView::waiting(vec![])),
                &now()
            )
            .ensure_aggregation
        );
        let d = decide(&installing, CsvView::Deployments(DeploymentsView::waiting(vec![])), &now());
        let ok = d.status.unwrap();
        let same = decide(&ok, CsvView::Deployments(DeploymentsView::waiting(vec![])), &now());
        assert!(same.status.is_none() && same.delete_replaced);
        let d = decide(&ok, CsvView::Deployments(DeploymentsView::waiting(vec!["op".into()])), &now());
        assert_eq!(
            written(&d),
            ("Failed".into(), "ComponentUnhealthy".into(), "installing: Deployment op is not available".into())
        );
        let history = d.status.as_ref().unwrap().conditions.len();
        let d = decide(
            d.status.as_ref().unwrap(),
            CsvView::Deployments(DeploymentsView::waiting(vec!["op".into()])),
            &now(),
        );
        assert!(d.status.is_none(), "unchanged");
        assert_eq!(history, 3, "one history entry per phase entered");
    }

    #[test]
    fn every_operator_group_misfit_fails_the_csv_with_its_reason() {
        // The reasons of `operator_group_targets` (the namespace's groups) and of
        // `check_install_mode` (the CSV's install modes against the group's targets); the
        // OperatorGroup's own status for the first three: `operatorgroup::tests`.
        for reason in [
            "NoOperatorGroup",
            "TooManyOperatorGroups",
            "InvalidOperatorGroup",
            "UnsupportedOperatorGroup",
            "NoTargetNamespaces",
            "InvalidInstallModes",
        ] {
            for from in [
                st(None, None, None),
                st(Some("Pending"), Some("RequirementsNotMet"), Some("x")),
                st(Some("Succeeded"), Some("InstallSucceeded"), Some("ok")),
            ] {
                let d = decide(&from, CsvView::Unfit(reason.into(), "m".into()), &now());
                assert_eq!(written(&d), ("Failed".into(), reason.into(), "m".into()), "{reason} from {from:?}");
                assert!(!d.delete_replaced && !d.ensure_aggregation && !d.ensure_operator_condition, "{reason}");
            }
        }
    }

    #[test]
    fn webhooks_that_cannot_be_served_are_named_and_rotation_is_scheduled() {
        let webhook = "webhook vwidgets.webhook.capstan.dev (ValidatingAdmissionWebhook) is served by Deployment op, which is not available";
        let view = DeploymentsView {
            waiting: vec!["op".into()],
            webhooks: Some(webhook.into()),
            certs: None,
            aggregated: false,
            failed: None,
            lost: vec![],
        };
        let d = decide(&st(Some("InstallReady"), None, None), CsvView::Deployments(view), &now());
        assert_eq!(
            written(&d),
            (
                "Installing".into(),
                "InstallWaiting".into(),
                format!("installing: waiting for deployment op to become ready: {webhook}")
            )
        );
        // Deployments ready, an owned APIService not Available: not Succeeded, and why.
        let view = DeploymentsView {
            waiting: vec![],
            webhooks: Some("APIService v1.packages.example.com is not Available".into()),
            certs: None,
            aggregated: false,
            failed: None,
            lost: vec![],
        };
        let d = decide(&st(Some("InstallReady"), None, None), CsvView::Deployments(view), &now());
        assert_eq!(
            written(&d),
            (
                "Installing".into(),
                "InstallWaiting".into(),
                "installing: APIService v1.packages.example.com is not Available".into()
            )
        );
        assert!(!d.delete_replaced);
        // Succeeded with certificates: their times in status, a look again when the rotation is
        // due (sooner than the usual 30 s), and none later than 30 s.
        let last = Time("2025-12-31T00:00:00Z".parse().unwrap());
        let soon = Time("2026-01-01T00:00:10Z".parse().unwrap());
        let view = DeploymentsView {
            waiting: vec![],
            webhooks: None,
            certs: Some((last.clone(), soon.clone())),
            aggregated: false,
            failed: None,
            lost: vec![],
        };
        let d = decide(&st(Some("Installing"), None, None), CsvView::Deployments(view.clone()), &now());
        let written_status = d.status.clone().unwrap();
        assert_eq!(
            (written_status.certs_last_updated, written_status.certs_rotate_at),
            (Some(last.clone()), Some(soon))
        );
        assert_eq!(d.requeue, Duration::from_secs(10));
        let same = decide(d.status.as_ref().unwrap(), CsvView::Deployments(view), &now());
        assert!(same.status.is_none(), "unchanged times are not written again");
        let later = Time("2028-01-01T00:00:00Z".parse().unwrap());
        let d = decide(
            d.status.as_ref().unwrap(),
            CsvView::Deployments(DeploymentsView {
                waiting: vec![],
                webhooks: None,
                certs: Some((last, later.clone())),
                aggregated: false,
                failed: None,
                lost: vec![],
            }),
            &now(),
        );
        assert_eq!(d.status.unwrap().certs_rotate_at, Some(later), "rotated: the new time is written");
        assert_eq!(d.requeue, Duration::from_secs(30));
    }

    #[test]
    fn phase_history_is_bounded() {
        let mut s = ClusterServiceVersionStatus::default();
        for i in 0..30 {
            let p = if i % 2 == 0 { CsvPhase::Installing } else { CsvPhase::Succeeded };
            s.set_phase(p, CsvReason::InstallWaiting, "m", &now());
        }
        assert_eq!(s.conditions.len(), crate::api::clusterserviceversion::CSV_CONDITION_HISTORY);
    }
}
