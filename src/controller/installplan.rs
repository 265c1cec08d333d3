//! InstallPlan reconciler (`reference/olm-v0.md` §1.4, §5), the only writer of InstallPlan status:
//! copies the bundle lookups the Subscription reconciler put in annotation
//! [`ANNOTATION_BUNDLE_LOOKUPS`] into `status.bundleLookups`, fails a plan marked
//! [`ANNOTATION_SUPERSEDED_BY`], and from `status.bundleLookups` pulls each bundle image, plan its steps with the namespace's
//! OperatorGroup targets ([`crate::install::plan::steps`]) and write them to `status.plan`; phase
//! `RequiresApproval` while `spec.approved` is false (nothing applied), else `Installing`, then
//! [`crate::install::apply::apply`] and `Complete`, or `Failed` with a message naming the step and why.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use sha2::{Digest, Sha256};

use super::events::EventType;
use super::handoff::{
    ANNOTATION_BUNDLE_LOOKUPS, ANNOTATION_SUPERSEDED_BY, INSTALL_RETRYING, PlannedLookups, SUPERSEDED,
};
use super::operator_groups::{api_ownership, operator_group_targets};
use super::registries::registry_for;
use super::{Context, Error, fresh, kube_err, now_time, scoped};
use crate::api::common::ConditionStatus;
use crate::api::installplan::{
    BUNDLE_OBJECT_REF_KIND, BundleLookup, BundleLookupCondition, BundleLookupConditionType, BundleObjectRef,
    InstallPlanPhase, InstallPlanStatus, Step as ApiStep, StepResource, StepStatus as ApiStepStatus,
};
use crate::api::{CatalogSource, InstallPlan, Subscription};
use crate::bundle::Bundle;
use crate::bundle::image::BundleImageError;
use crate::install::crd_safety::{check_plan_crds, describe_all};
use crate::install::operator_group::{GroupTargets, InstallModeError, check_install_mode};
use crate::install::preflight;
use crate::install::{InstallTarget, Step, StepError, StepStatus, SubscriptionConfig, apply_as, plan};
use crate::oci::cache::scratch_dir;
use crate::oci::parse_reference;

mod listed;

/// Condition reason of a plan refused by the CRD upgrade check ([`check_plan_crds`]); such a plan
/// is checked again every [`CRD_RECHECK`] and applied once the check passes.
pub const CRD_UPGRADE_BLOCKED: &str = "CRDUpgradeBlocked";
/// Condition reason of a plan whose installer ServiceAccount is missing or lacks permissions;
/// checked again every [`CRD_RECHECK`] like [`CRD_UPGRADE_BLOCKED`].
pub const INSTALLER_BLOCKED: &str = "InstallerPermissionsMissing";
pub use super::handoff::BUNDLE_UNAVAILABLE;
/// First wait before a plan that hit a transient error is tried again.
pub const RETRY_FIRST: Duration = Duration::from_secs(2);
/// Longest wait between tries of a plan that keeps hitting transient errors.
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// Reasons of a Failed plan that capstan checks again (every [`CRD_RECHECK`], while the plan is
/// its Subscription's current one): each names a cause a person fixes outside the plan — the
/// OperatorGroup (OLM's CSV reasons `NoOperatorGroup`, `TooManyOperatorGroups`,
/// `UnsupportedOperatorGroup`, `NoTargetNamespaces`, `InvalidOperatorGroup`), the objects a CRD
/// upgrade would break, the installer's permissions, the bundle image's availability, an API the
/// bundle needs, a permission of capstan's own.
pub const RECHECKED_REASONS: &[&str] = &[
    CRD_UPGRADE_BLOCKED,
    INSTALLER_BLOCKED,
    BUNDLE_UNAVAILABLE,
    "NoOperatorGroup",
    "TooManyOperatorGroups",
    "UnsupportedOperatorGroup",
    "NoTargetNamespaces",
    "InvalidOperatorGroup",
    "APINotAvailable",
    "Forbidden",
    crate::install::operator_condition::NOT_UPGRADEABLE,
];

/// Why a plan cannot go on now, and so what capstan does with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Hold {
    /// Goes away by itself: the phase stays, condition `Installed=False` with
    /// [`INSTALL_RETRYING`] says what failed, and the plan is tried again after a backoff.
    Retry(String),
    /// A person fixes it outside the plan: phase `Failed` with this reason (one of
    /// [`RECHECKED_REASONS`]), nothing applied, checked again every [`CRD_RECHECK`].
    Blocked(&'static str, String),
    /// The bundle or the Subscription is wrong: `Failed` for good with this reason
    /// (`InstallCheckFailed` before any step, `InstallComponentFailed` for a failed step). A
    /// fixed bundle or `spec.config` gets a new plan ([`install_plan_name`]).
    Fail(&'static str, String),
    /// The plan changed since it was read (a write with its resourceVersion as precondition
    /// failed): nothing is written, the plan is decided again shortly.
    Again,
}

/// How a failed bundle pull is held: registry errors that pass (unreachable, 5xx, a local I/O
/// error) are retried, errors a person fixes (not found, unauthorized, credentials) block, and
/// what is wrong with the image itself (digest mismatch, format, a refused layer) fails.
pub(crate) fn pull_hold(err: &BundleImageError, message: String) -> Hold {
    use crate::oci::OciError as E;
    match err {
        BundleImageError::Oci(E::Connect { .. } | E::Registry { .. } | E::Io { .. } | E::CacheUnusable { .. }) => {
            Hold::Retry(message)
        }
        BundleImageError::Oci(
            E::NotFound { .. } | E::Unauthorized { .. } | E::AuthConfig { .. } | E::CredentialHelper { .. },
        ) => Hold::Blocked(BUNDLE_UNAVAILABLE, message),
        _ => Hold::Fail("InstallCheckFailed", message),
    }
}

/// How a failed step is held: transient API errors past the retry window are retried later, an
/// API the cluster does not serve yet or a permission capstan lacks block (a person installs the
/// CRD or grants the permission), anything else — the API server rejecting the object, a CRD that
/// is not Established, an object capstan may not take over — fails the plan.
pub(crate) fn step_hold(err: &StepError, message: String) -> Hold {
    match err {
        StepError::RetriesExhausted { .. } => Hold::Retry(message),
        StepError::ApiNotAvailable { .. } => Hold::Blocked("APINotAvailable", message),
        StepError::Forbidden { .. } => Hold::Blocked("Forbidden", message),
        _ => Hold::Fail("InstallComponentFailed", message),
    }
}

/// How a bundle whose install modes do not fit the OperatorGroup is held: the OperatorGroup is
/// what a person changes (`UnsupportedOperatorGroup`, `NoTargetNamespaces`: blocked, checked
/// again), except a group whose targets mix all namespaces with named ones
/// (`InvalidInstallModes`), which fails the plan as OLM fails the CSV.
pub(crate) fn install_mode_hold(err: &InstallModeError, message: String) -> Hold {
    if err.reason == "InvalidInstallModes" {
        Hold::Fail("InstallCheckFailed", message)
    } else {
        Hold::Blocked(err.reason, message)
    }
}

/// The wait before try `attempt` (1-based) of a plan held by [`Hold::Retry`]: [`RETRY_FIRST`]
/// doubled per earlier try, at most [`RETRY_MAX`].
pub(crate) fn retry_backoff(attempt: u32) -> Duration {
    RETRY_FIRST.saturating_mul(1u32 << attempt.saturating_sub(1).min(16)).min(RETRY_MAX)
}

/// How a plan stops short of being applied: held ([`Hold`], written to its status) or an API
/// failure (the reconcile fails and is retried).
#[derive(Debug)]
enum Stop {
    /// Held.
    Held(Hold),
    /// An API failure.
    Api(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Api(e)
    }
}

impl From<Hold> for Stop {
    fn from(h: Hold) -> Self {
        Stop::Held(h)
    }
}

/// One reconcile of an InstallPlan: the plan as read and the status as decided so far, carried
/// through the reconcile's steps (start, pull and plan, the checks before the first step, claim,
/// apply) and written once at the end ([`PlanPass::finish`]). Two writes on the way are part of
/// the protocol, not of the decision, and go through the same writer ([`PlanPass::write`]) with
/// the plan's resourceVersion as precondition: the `Pulling` marker before a pull
/// ([`mark_pulling`]) and the claim before the first step ([`claim`]).
struct PlanPass<'a> {
    ctx: &'a Context,
    api: Api<InstallPlan>,
    ip: &'a InstallPlan,
    /// The plan's namespace.
    ns: String,
    /// The plan's name.
    name: String,
    /// The status as decided so far.
    status: InstallPlanStatus,
    /// The plan's resourceVersion as read, then as the last write of this reconcile left it.
    rv: Option<String>,
    /// The plan was refused by a check before its first step ([`Start::Recheck`]).
    blocked: bool,
}

/// How a reconcile of a plan ends ([`PlanPass::finish`]).
#[derive(Debug)]
enum Ending {
    /// Nothing written; look again as `Action` says.
    Quiet(Action),
    /// The status as decided is written, then `note` is recorded as an Event.
    Write {
        /// Write only if the plan is still at the resourceVersion as read (a conflict writes
        /// nothing and looks again shortly).
        precondition: bool,
        /// The Event: its type, reason and message.
        note: Option<(EventType, String, String)>,
        /// When to look again.
        action: Action,
    },
}

/// What one [`PlanPass::write`] writes of the status.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scope {
    /// The whole status ([`InstallPlanStatus::merge_patch`]).
    Whole,
    /// `status.bundleLookups` alone (`status.plan` may be large).
    BundleLookups,
}

/// The wait before a plan whose write met a conflict (it changed since it was read) is decided
/// again.
const AGAIN: Duration = Duration::from_millis(200);

impl<'a> PlanPass<'a> {
    fn new(ctx: &'a Context, ip: &'a InstallPlan, status: InstallPlanStatus, blocked: bool) -> PlanPass<'a> {
        let (ns, name) = (ip.namespace().unwrap_or_default(), ip.name_any());
        PlanPass {
            api: Api::namespaced(ctx.client.clone(), &ns),
            ctx,
            ip,
            ns,
            name,
            status,
            rv: ip.resource_version(),
            blocked,
        }
    }

    /// The one writer of InstallPlan status: the typed status as a JSON merge patch (`scope`), on
    /// the resourceVersion as last seen when `precondition`. A merge patch, not server-side apply:
    /// a claim must remove the message and conditions of the hold before it, which earlier
    /// writes by other means (and older capstan versions' merge patches) may co-own, and which an
    /// apply that leaves them out removes only when it alone owns them; the whole typed status
    /// with `null` for what it lacks removes them always. `Ok(false)`: the plan changed since
    /// (409 Conflict), nothing was written.
    async fn write(&mut self, scope: Scope, precondition: bool) -> Result<bool, Error> {
        let rv = self.rv.as_deref().filter(|_| precondition);
        let patch = match scope {
            Scope::Whole => self.status.merge_patch(rv),
            Scope::BundleLookups => self.status.bundle_lookups_patch(rv),
        };
        let params = PatchParams { field_manager: Some(crate::install::FIELD_MANAGER.into()), ..Default::default() };
        match self.api.patch_status(&self.name, &params, &Patch::Merge(&patch)).await {
            Ok(updated) => {
                self.rv = updated.resource_version();
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 && precondition => Ok(false),
            Err(e) => Err(kube_err(format!("writing status of InstallPlan {}/{}", self.ns, self.name))(e)),
        }
    }

    /// Ends the reconcile: writes the status as decided (once), records the Event.
    async fn finish(mut self, ending: Ending) -> Result<Action, Error> {
        match ending {
            Ending::Quiet(action) => Ok(action),
            Ending::Write { precondition, note, action } => {
                if !self.write(Scope::Whole, precondition).await? {
                    return Ok(Action::requeue(AGAIN));
                }
                if let Some((type_, reason, message)) = note {
                    self.ctx.events.publish_for(self.ip, type_, &reason, &message).await;
                }
                Ok(action)
            }
        }
    }

    /// `namespace/name` of the plan, for log lines.
    fn key(&self) -> String {
        format!("{}/{}", self.ns, self.name)
    }

    /// How a [`Hold`] ends the reconcile: [`PlanPass::retry_later`], [`PlanPass::block`], or
    /// Failed for good (`steps`, when any, as `status.plan`).
    fn hold(&mut self, hold: Hold, steps: Vec<ApiStep>) -> Ending {
        match hold {
            Hold::Again => Ending::Quiet(Action::requeue(AGAIN)),
            Hold::Retry(message) => self.retry_later(message),
            Hold::Blocked(reason, message) => self.block(steps, reason, message),
            Hold::Fail(reason, message) => {
                tracing::warn!(plan = %self.key(), %message, "InstallPlan failed");
                self.status.fail(reason, &message, &now_time());
                if !steps.is_empty() {
                    self.status.plan = steps;
                }
                Ending::Write {
                    precondition: false,
                    note: Some((EventType::Warning, "InstallFailed".into(), message)),
                    action: Action::await_change(),
                }
            }
        }
    }

    /// Marks the plan Failed with `reason` and `message` (unless it already says exactly that),
    /// `steps` listed and nothing applied, and requeues it for another check. With no `steps`
    /// (refused before they were planned) the steps the plan already lists stay: they name the
    /// bundle digest the plan was planned from ([`pinned_image`]), which the next check pulls.
    fn block(&mut self, steps: Vec<ApiStep>, reason: &str, message: String) -> Ending {
        let message = format!("{message} (capstan checks again every {} s)", CRD_RECHECK.as_secs());
        let action = Action::requeue(CRD_RECHECK);
        if self.status.message.as_deref() == Some(message.as_str()) && self.blocked {
            return Ending::Quiet(action);
        }
        tracing::warn!(plan = %self.key(), %message, "InstallPlan refused before any step");
        self.status.fail(reason, &message, &now_time());
        if !steps.is_empty() {
            self.status.plan = steps;
        }
        Ending::Write { precondition: false, note: Some((EventType::Warning, reason.into(), message)), action }
    }

    /// Keeps the plan's phase and says in condition `Installed=False` ([`INSTALL_RETRYING`]) what
    /// failed and when capstan tries again; requeues after [`retry_backoff`]. The Event is
    /// recorded at the first try only.
    fn retry_later(&mut self, message: String) -> Ending {
        let attempt = {
            let mut retries = self.ctx.plan_retries.lock().unwrap_or_else(|e| e.into_inner());
            let n = retries.entry((self.ns.clone(), self.name.clone())).or_insert(0);
            *n += 1;
            *n
        };
        let wait = retry_backoff(attempt);
        let message = format!(
            "{message}; this can pass by itself: capstan tries again in {} s (attempt {attempt})",
            wait.as_secs()
        );
        tracing::warn!(plan = %self.key(), %message, "InstallPlan held by a transient error");
        self.status.set_installed(ConditionStatus::False, Some(INSTALL_RETRYING), Some(&message), &now_time());
        let note = (attempt == 1).then(|| (EventType::Warning, INSTALL_RETRYING.to_string(), message));
        Ending::Write { precondition: false, note, action: Action::requeue(wait) }
    }
}

/// Largest `status.plan` (JSON bytes) capstan writes: below etcd's default request limit of
/// 1.5 MiB, leaving room for the rest of the InstallPlan.
pub const MAX_PLAN_STATUS_BYTES: usize = 1_300_000;

/// [`Hold::Fail`] when `steps` (the `status.plan` entries, large objects already written as
/// [`BundleObjectRef`]s) exceed [`MAX_PLAN_STATUS_BYTES`]: only a bundle of thousands of objects
/// gets there.
fn oversized(steps: &[ApiStep]) -> Option<Hold> {
    let size = serde_json::to_vec(steps).map(|v| v.len()).unwrap_or(0);
    (size > MAX_PLAN_STATUS_BYTES).then(|| {
        Hold::Fail(
            "InstallCheckFailed",
            format!(
                "the plan's {} steps take {:.1} MiB in status.plan even with their large objects as references to the bundle image, more than the API server stores in one object (about {:.1} MiB with etcd's default limit): the bundle holds too many objects for one InstallPlan; ask its author to ship fewer",
                steps.len(),
                size as f64 / 1048576.0,
                MAX_PLAN_STATUS_BYTES as f64 / 1048576.0
            ),
        )
    })
}

/// The `spec.config` of the owning Subscription `sub` for `package`'s Deployments (§1.3); a
/// Subscription of another package (a dependency in its plan) gives none.
fn subscription_config(sub: Option<&Subscription>, package: &str) -> Result<SubscriptionConfig, Hold> {
    match sub.filter(|s| s.spec.package == package).and_then(|s| s.spec.config.as_ref()) {
        Some(c) => match c.check_names() {
            Ok(()) => Ok(c.clone()),
            // The error names the field already ("Subscription spec.config: …; fix the field").
            Err(e) => Err(Hold::Fail("InstallCheckFailed", e.to_string())),
        },
        None => Ok(SubscriptionConfig::default()),
    }
}

/// How often a plan refused by the CRD upgrade check is checked again.
pub const CRD_RECHECK: Duration = Duration::from_secs(10);

/// Whether `ip` is still the plan its owning Subscription's `status.installPlanRef` names.
async fn still_current(ctx: &Context, ip: &InstallPlan, ns: &str) -> Result<bool, Error> {
    let Some(owner) = ip.owner_references().iter().find(|o| o.kind == "Subscription") else { return Ok(false) };
    let sub = Api::<Subscription>::namespaced(ctx.client.clone(), ns)
        .get_opt(&owner.name)
        .await
        .map_err(kube_err(format!("reading Subscription {ns}/{}", owner.name)))?;
    Ok(sub
        .and_then(|s| s.status)
        .and_then(|s| s.install_plan_ref)
        .and_then(|r| r.name)
        .is_some_and(|n| n == ip.name_any()))
}

/// The `status.plan[]` entry (OLM `Step`) of one planned step with status `status`, its object
/// written as `manifest` (the object's JSON, or a [`BundleObjectRef`]'s).
pub(crate) fn step_entry(
    step: &Step,
    lookup_catalog: (&str, &str),
    manifest: String,
    status: ApiStepStatus,
) -> ApiStep {
    ApiStep {
        resolving: step.resolving.clone(),
        resource: StepResource {
            source_name: lookup_catalog.1.to_string(),
            source_namespace: lookup_catalog.0.to_string(),
            group: step.group.clone(),
            version: step.version.clone(),
            kind: if step.kind == "Secret" { "BundleSecret".into() } else { step.kind.clone() },
            name: step.name.clone(),
            manifest: Some(manifest),
        },
        optional: false,
        status,
    }
}

/// Largest step manifest (compact JSON, bytes) written into `status.plan` as the object itself;
/// a larger one is written as a [`BundleObjectRef`].
pub const INLINE_MANIFEST_MAX: usize = 64 * 1024;

/// Most bytes of objects one plan's `status.plan` holds inline; past it the other steps are
/// [`BundleObjectRef`]s, in step order.
pub const INLINE_PLAN_BUDGET: usize = 512 * 1024;

/// One planned step: the object, its catalog `(namespace, name)`, and the bundle image by digest
/// it was planned from (`None` for steps not planned from a bundle: dependency Subscriptions).
#[derive(Debug, Clone)]
pub(crate) struct PlannedStep {
    pub step: Step,
    pub catalog: (String, String),
    pub image: Option<String>,
}

/// The `status.plan` entries of `steps`, entry `i` with `statuses[i]`: each object inline, or as
/// a [`BundleObjectRef`] when it is larger than [`INLINE_MANIFEST_MAX`] or does not fit in what
/// is left of [`INLINE_PLAN_BUDGET`] (in step order). Steps without a bundle image are always
/// inline (they are small). Pure.
pub(crate) fn plan_entries(steps: &[PlannedStep], statuses: &[ApiStepStatus]) -> Vec<ApiStep> {
    let json: Vec<String> = steps.iter().map(|p| p.step.manifest.to_string()).collect();
    let mut inline: Vec<bool> = steps.iter().map(|p| p.image.is_none()).collect();
    let mut left = INLINE_PLAN_BUDGET;
    for i in 0..steps.len() {
        if !inline[i] && json[i].len() <= INLINE_MANIFEST_MAX && json[i].len() <= left {
            inline[i] = true;
            left -= json[i].len();
        }
    }
    steps
        .iter()
        .zip(json)
        .zip(inline)
        .enumerate()
        .map(|(i, ((p, text), inline))| {
            let manifest = match (&p.image, inline) {
                (Some(image), false) => {
                    let r = BundleObjectRef {
                        kind: BUNDLE_OBJECT_REF_KIND.into(),
                        image: image.clone(),
                        digest: format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes()))),
                        size: text.len(),
                    };
                    serde_json::to_string(&r).unwrap_or(text)
                }
                _ => text,
            };
            step_entry(
                &p.step,
                (&p.catalog.0, &p.catalog.1),
                manifest,
                statuses.get(i).cloned().unwrap_or(ApiStepStatus::Unknown),
            )
        })
        .collect()
}

/// The planned steps of an InstallPlan.
struct Planned {
    /// The namespace's OperatorGroup.
    operator_group: String,
    /// Its target namespaces (`[""]` for all).
    targets: Vec<String>,
    /// The steps, in order.
    steps: Vec<PlannedStep>,
}

impl Planned {
    /// The `status.plan` entries ([`plan_entries`]), each with `status`.
    fn listed(&self, status: ApiStepStatus) -> Vec<ApiStep> {
        plan_entries(&self.steps, &vec![status; self.steps.len()])
    }

    fn plain(&self) -> Vec<Step> {
        self.steps.iter().map(|p| p.step.clone()).collect()
    }
}

/// The bundle image (by digest) that the steps of `csv` listed in `plan` were planned from, when
/// any of them is a [`BundleObjectRef`]: the plan is planned again from that very image.
fn pinned_image(plan: &[ApiStep], csv: &str) -> Option<String> {
    plan.iter()
        .filter(|s| s.resolving == csv)
        .find_map(|s| s.resource.manifest.as_deref().and_then(BundleObjectRef::parse))
        .map(|r| r.image)
}

/// Pulls every bundle of the plan and plans its steps. Stops with how the plan is held, with a
/// message naming the bundle.
async fn plan_steps(pass: &mut PlanPass<'_>) -> Result<Planned, Stop> {
    let (ctx, ip, ns) = (pass.ctx, pass.ip, pass.ns.clone());
    let ns = ns.as_str();
    let (og, targets, webhook_selector) = match operator_group_targets(&ctx.client, ns).await? {
        GroupTargets::Found { name, targets, webhook_selector } => (name, targets, webhook_selector),
        GroupTargets::Unfit { reason, message } => {
            return Err(Hold::Blocked(reason, format!("{reason}: {message}")).into());
        }
    };
    // The owning Subscription's spec.config goes into its own package's Deployments (§1.3).
    let sub = match ip.owner_references().iter().find(|o| o.kind == "Subscription") {
        Some(o) => Api::<Subscription>::namespaced(ctx.client.clone(), ns).get_opt(&o.name).await.ok().flatten(),
        None => None,
    };
    let mut steps = Vec::new();
    let lookups = pass.status.bundle_lookups.clone();
    for (i, lookup) in lookups.iter().enumerate() {
        let (bundle, image) = pull(pass, i, lookup).await?;
        let at = |what: String| format!("bundle {} ({}): {what}", lookup.identifier, lookup.path);
        let modes: Vec<(String, bool)> =
            bundle.csv().install_modes().into_iter().map(|m| (m.type_.as_str().to_string(), m.supported)).collect();
        if let Err(e) = check_install_mode(ns, &targets, &modes) {
            return Err(install_mode_hold(&e, at(format!("{}: {}", e.reason, e.message))).into());
        }
        let config = subscription_config(sub.as_ref(), bundle.package())?;
        let properties = lookup.property_list();
        let mut target = InstallTarget {
            namespace: ns.to_string(),
            target_namespaces: targets.clone(),
            package: bundle.package().to_string(),
            csv_name: lookup.identifier.clone(),
            config,
            operator_group: Some(og.clone()),
            properties,
            webhook_selector: webhook_selector.clone(),
            replaces: Some(lookup.replaces.clone()).filter(|r| !r.is_empty()),
            ..Default::default()
        };
        target.owner = Some(target.csv_owner_reference());
        let catalog = (
            lookup.catalog_source_ref.namespace.clone().unwrap_or_default(),
            lookup.catalog_source_ref.name.clone().unwrap_or_default(),
        );
        match plan::steps(&bundle, &target) {
            Ok(planned) => {
                steps.extend(planned.iter().filter(|s| plan::in_install_plan(s, &planned)).map(|step| PlannedStep {
                    step: step.clone(),
                    catalog: catalog.clone(),
                    image: image.clone(),
                }))
            }
            Err(e) => return Err(Hold::Fail("InstallCheckFailed", at(e.to_string())).into()),
        }
    }
    // The dependencies' Subscriptions, last: their CSVs exist by the time they appear (OLM).
    let planned_lookups = ip
        .annotations()
        .get(ANNOTATION_BUNDLE_LOOKUPS)
        .and_then(|a| serde_json::from_str::<PlannedLookups>(a).ok())
        .unwrap_or_default();
    for dep in &planned_lookups.subscriptions {
        steps.push(PlannedStep {
            step: dep.step(ns, &ip.name_any()),
            catalog: (dep.catalog_source_namespace.clone(), dep.catalog_source.clone()),
            image: None,
        });
    }
    Ok(Planned { operator_group: og, targets, steps })
}

/// Pulls the bundle of lookup `i` (pull secrets of its CatalogSource) — by the digest the plan's
/// listed steps were planned from ([`pinned_image`]), else `path` — marking the pull in the
/// plan's status while it runs ([`mark_pulling`]). Returns the bundle and its image by digest.
async fn pull(pass: &mut PlanPass<'_>, i: usize, lookup: &BundleLookup) -> Result<(Bundle, Option<String>), Stop> {
    let ctx = pass.ctx;
    let at = |what: String| format!("bundle {} ({}): {what}", lookup.identifier, lookup.path);
    let cns = lookup.catalog_source_ref.namespace.clone().unwrap_or_default();
    let cname = lookup.catalog_source_ref.name.clone().unwrap_or_default();
    if lookup.path.is_empty() {
        return inline_bundle(ctx, (cns, cname), &lookup.identifier, at).map(|b| (b, None)).map_err(Stop::from);
    }
    let secrets = match Api::<CatalogSource>::namespaced(ctx.client.clone(), &cns).get_opt(&cname).await {
        Ok(Some(cs)) => cs.spec.secrets.unwrap_or_default(),
        _ => Vec::new(),
    };
    let registry =
        registry_for(ctx, &cns, &secrets).await.map_err(|e| Hold::Blocked(BUNDLE_UNAVAILABLE, at(e.to_string())))?;
    let listed = parse_reference(&lookup.path)
        .map_err(|e| Hold::Fail("InstallCheckFailed", at(format!("the image reference is invalid: {e}"))))?;
    // The pin is taken only for the lookup's own repository (status is not where a bundle's
    // origin is decided).
    let reference = pinned_image(&pass.status.plan, &lookup.identifier)
        .and_then(|p| parse_reference(&p).ok())
        .filter(|p| p.registry() == listed.registry() && p.repository() == listed.repository() && p.digest().is_some())
        .unwrap_or(listed);
    let dir = scratch_dir("capstan-bundle").map_err(|e| Hold::Retry(at(e.to_string())))?;
    if let Some(hold) = mark_pulling(pass, i, &lookup.path).await? {
        return Err(hold.into());
    }
    let pulled = crate::bundle::image::pull_bundle(&registry, &reference, dir.path()).await;
    clear_pulling(&mut pass.status, i);
    let pulled = pulled.map_err(|e| pull_hold(&e, at(format!("pulling the bundle image failed: {e}"))))?;
    let bundle = Bundle::load(dir.path())
        .map_err(|e| Hold::Fail("InstallCheckFailed", at(format!("the bundle is invalid: {e}"))))?;
    Ok((bundle, Some(reference.clone_with_digest(pulled.digest).whole())))
}

/// The bundle `name` of catalog `catalog` that has no image, made from its `olm.bundle.object`s
/// as the catalog holds them ([`super::LoadedIndex::inline`]), as OLM installs a bundle of a
/// ConfigMap catalog: tried again while the catalog is not loaded; the plan fails when the
/// catalog no longer has it or it is invalid (`at` names the bundle in the message).
fn inline_bundle(
    ctx: &Context,
    catalog: (String, String),
    name: &str,
    at: impl Fn(String) -> String,
) -> Result<Bundle, Hold> {
    let Some(loaded) = ctx.catalogs.get(&catalog).and_then(|s| s.index().cloned()) else {
        return Err(Hold::Retry(at(format!("catalog source {}/{} is not loaded yet", catalog.0, catalog.1))));
    };
    let Some(blob) = loaded.inline.get(name) else {
        return Err(Hold::Fail(
            "InstallCheckFailed",
            at(format!(
                "catalog source {}/{} holds no bundle {name} without an image; it changed since the plan was made",
                catalog.0, catalog.1
            )),
        ));
    };
    Bundle::from_blob(blob).map_err(|e| Hold::Fail("InstallCheckFailed", at(format!("the bundle is invalid: {e}"))))
}

/// How many times the controller may stop (crash, out of memory) while pulling one bundle before
/// the plan is failed instead of pulled again.
pub const PULL_CRASH_LIMIT: u32 = 3;

/// How many times a controller stopped while pulling lookup `lookup`, from the `Pulling` marker
/// an earlier process left (`None`: there is no marker).
fn stops_left(lookup: &BundleLookup) -> Option<u32> {
    let c = lookup.conditions.iter().find(|c| {
        c.type_ == BundleLookupConditionType::BundleLookupPending && c.reason.as_deref() == Some("Pulling")
    })?;
    // The count ends the marker's message: "… (controller stops while pulling it: N)".
    Some(
        c.message
            .as_deref()
            .and_then(|m| m.rsplit_once("pulling it: "))
            .and_then(|(_, n)| n.trim_end_matches(')').parse::<u32>().ok())
            .unwrap_or(0),
    )
}

/// Before bundle lookup `i` is pulled: records in the plan's status which image is being pulled
/// (condition `BundleLookupPending`, reason `Pulling`), so that a controller that dies while
/// pulling — killed for its memory by a hostile image, say — leaves the culprit in the status.
/// A marker left by an earlier process counts as one such stop; after [`PULL_CRASH_LIMIT`] the
/// plan is failed with a message naming the image rather than pulled again. Returns that hold, or
/// [`Hold::Again`] when the plan changed since it was read (the write's precondition).
async fn mark_pulling(pass: &mut PlanPass<'_>, i: usize, image: &str) -> Result<Option<Hold>, Error> {
    let key = (pass.ns.clone(), pass.name.clone(), i);
    let mine = pass.ctx.pulls_started.lock().unwrap_or_else(|e| e.into_inner()).contains(&key);
    let Some(lookup) = pass.status.bundle_lookups.get_mut(i) else { return Ok(None) };
    let stops = match stops_left(lookup) {
        Some(n) if !mine => n + 1,
        Some(_) => return Ok(None),
        None => 0,
    };
    if stops >= PULL_CRASH_LIMIT {
        return Ok(Some(Hold::Fail(
            "InstallCheckFailed",
            format!(
                "bundle image {image}: the controller stopped {stops} times while pulling it (a crash or its memory limit); it is not pulled again: check the image against the pull limits in docs/deploy.md, then delete this InstallPlan to try again"
            ),
        )));
    }
    lookup.conditions = vec![pulling_marker(image, stops, now_time())];
    // On a plan whose lookups are not on the server yet (seen for the first time) this write
    // also initializes it: the whole status; else the lookups alone (`status.plan` may be large).
    let initializes = pass.ip.status.as_ref().is_none_or(|s| s.bundle_lookups.is_empty());
    let scope = if initializes { Scope::Whole } else { Scope::BundleLookups };
    if !pass.write(scope, true).await? {
        return Ok(Some(Hold::Again));
    }
    pass.ctx.pulls_started.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
    Ok(None)
}

/// The `Pulling` marker of a bundle lookup whose `image` is being pulled, after `stops` earlier
/// processes stopped while pulling it ([`stops_left`] reads the count back). Pure.
fn pulling_marker(image: &str, stops: u32, now: Time) -> BundleLookupCondition {
    BundleLookupCondition {
        type_: BundleLookupConditionType::BundleLookupPending,
        status: ConditionStatus::True,
        reason: Some("Pulling".into()),
        message: Some(format!("pulling bundle image {image} (controller stops while pulling it: {stops})")),
        last_update_time: Some(now.clone()),
        last_transition_time: Some(now),
    }
}

/// Removes the marker [`mark_pulling`] wrote (it goes with the next status write).
fn clear_pulling(status: &mut InstallPlanStatus, i: usize) {
    if let Some(l) = status.bundle_lookups.get_mut(i) {
        l.conditions.clear();
    }
}

/// What the InstallPlan reconciler does with a plan as read, before any bundle is pulled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Start {
    /// Nothing now: the plan is done, or waits for approval with its steps listed.
    Idle,
    /// Look again after this (the plan has no bundle lookups yet).
    Later(Duration),
    /// The Subscription reconciler marked the plan superseded: fail it with this message.
    Supersede(String),
    /// Copy the bundle lookups of the annotation into the status.
    Initialize(PlannedLookups),
    /// A plan refused by a check before its first step: checked again while its Subscription
    /// still points at it.
    Recheck,
    /// Pull, plan, and (when approved) apply.
    Go,
    /// Apply the steps listed by hand in a plan without bundle lookups ([`listed`]).
    Listed,
}

/// The first decision on plan `ip` (§1.4). Pure.
pub(crate) fn decide_start(ip: &InstallPlan) -> Start {
    let phase = ip.status.as_ref().map(|s| &s.phase);
    if let Some(why) = ip.annotations().get(ANNOTATION_SUPERSEDED_BY)
        && !phase.is_some_and(|p| p.is_terminal())
    {
        return Start::Supersede(why.clone());
    }
    let Some(current) = ip.status.as_ref().filter(|s| !s.bundle_lookups.is_empty()) else {
        return match ip
            .annotations()
            .get(ANNOTATION_BUNDLE_LOOKUPS)
            .and_then(|a| serde_json::from_str::<PlannedLookups>(a).ok())
        {
            Some(l) if !l.bundle_lookups.is_empty() && !phase.is_some_and(|p| p.is_terminal()) => Start::Initialize(l),
            _ if phase.is_some_and(|p| p.is_terminal()) => Start::Idle,
            None if listed::is_listed(ip) => Start::Listed,
            // Steps listed by hand, not approved yet: nothing to do until the plan changes.
            None if ip.status.as_ref().is_some_and(|s| !s.plan.is_empty()) => Start::Idle,
            _ => Start::Later(Duration::from_millis(500)),
        };
    };
    // A plan refused by a check before its first step is looked at again: once the cause is fixed
    // (the objects, the OperatorGroup, the installer's permissions, the image) it proceeds:
    // recovering needs no uninstall.
    if is_blocked(current) {
        return Start::Recheck;
    }
    if current.phase.is_terminal() {
        return Start::Idle;
    }
    if current.phase == InstallPlanPhase::RequiresApproval && !ip.spec.approved && !current.plan.is_empty() {
        return Start::Idle;
    }
    Start::Go
}

/// Whether the plan is Failed with one of the [`RECHECKED_REASONS`].
fn is_blocked(status: &InstallPlanStatus) -> bool {
    status.phase == InstallPlanPhase::Failed
        && status.conditions.iter().any(|c| c.reason.as_ref().is_some_and(|r| RECHECKED_REASONS.contains(&r.as_str())))
}

/// The InstallPlan reconciler: [`decide_start`] on the plan as read, then [`proceed`] over one
/// [`PlanPass`], whose status is written once at the end ([`PlanPass::finish`]).
pub(super) async fn reconcile(ip: Arc<InstallPlan>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(ip) = fresh(&ctx.client, ip.as_ref()).await? else {
        return Ok(Action::await_change());
    };
    let ns = ip.namespace().unwrap_or_default();
    let current = || ip.status.clone().unwrap_or_else(|| InstallPlanStatus::new(InstallPlanPhase::Planning));
    // A plan seen for the first time gets its bundle lookups from the annotation. They are not
    // written on their own: the first write of this reconcile carries them — the Pulling marker of
    // the first bundle ([`mark_pulling`], right before its pull), or a hold — on the plan's
    // resourceVersion as read, which stays the precondition of the claim.
    let mut pass = match decide_start(&ip) {
        Start::Idle => return Ok(Action::await_change()),
        Start::Later(wait) => return Ok(Action::requeue(wait)),
        Start::Supersede(message) => {
            let mut pass = PlanPass::new(&ctx, &ip, current(), false);
            let ending = pass.supersede(message);
            return pass.finish(ending).await;
        }
        Start::Initialize(lookups) => {
            let mut status = current();
            status.phase = InstallPlanPhase::Planning;
            status.catalog_sources = lookups.catalog_sources;
            status.bundle_lookups = lookups.bundle_lookups;
            status.plan = Vec::new();
            PlanPass::new(&ctx, &ip, status, false)
        }
        Start::Recheck if !still_current(&ctx, &ip, &ns).await? => return Ok(Action::await_change()),
        Start::Recheck => PlanPass::new(&ctx, &ip, current(), true),
        Start::Go => PlanPass::new(&ctx, &ip, current(), false),
        Start::Listed => {
            let mut pass = PlanPass::new(&ctx, &ip, current(), false);
            let ending = listed::execute_listed(&mut pass).await?;
            return pass.finish(ending).await;
        }
    };
    let ending = proceed(&mut pass).await?;
    pass.finish(ending).await
}

/// Pulls and plans the bundles, lists the steps (waiting for approval when the plan is not
/// approved), runs the checks before the first step, claims the plan and applies it: how the
/// reconcile ends, its status decided on `pass`.
async fn proceed(pass: &mut PlanPass<'_>) -> Result<Ending, Error> {
    let planned = match plan_steps(pass).await {
        Ok(p) => p,
        Err(Stop::Held(h)) => return Ok(pass.hold(h, Vec::new())),
        Err(Stop::Api(e)) => return Err(e),
    };
    // Large objects are listed as references (`plan_entries`); should the plan still be past what
    // etcd stores in one object, the status write would fail on every try with "request is too
    // large" and the plan would stall without a word. Say so once instead.
    if let Some(h) = oversized(&planned.listed(ApiStepStatus::Unknown)) {
        return Ok(pass.hold(h, Vec::new()));
    }
    if !pass.ip.spec.approved {
        pass.status.phase = InstallPlanPhase::RequiresApproval;
        pass.status.plan = planned.listed(ApiStepStatus::Unknown);
        pass.status.conditions = Vec::new();
        pass.status.message = None;
        let note = format!(
            "{} steps wait for approval: `capstan approve {} -n {}` or set spec.approved=true",
            planned.steps.len(),
            pass.name,
            pass.ns
        );
        let note = Some((EventType::Normal, "RequiresApproval".to_string(), note));
        return Ok(Ending::Write { precondition: false, note, action: Action::await_change() });
    }
    let installer = match preflight(pass.ctx, &pass.ns, &planned.operator_group, &planned.plain()).await {
        Ok(i) => i,
        Err(Stop::Held(Hold::Blocked(reason, message))) => {
            // Nothing was attempted (not upgradeable, a CRD upgrade that would break objects,
            // the installer's permissions): the steps stay `Unknown`, as OLM leaves them while
            // its installer account is refused (test/e2e/user_defined_sa_test.go).
            return Ok(pass.block(planned.listed(ApiStepStatus::Unknown), reason, message));
        }
        Err(Stop::Held(h)) => return Ok(pass.hold(h, Vec::new())),
        Err(Stop::Api(e)) => return Err(e),
    };
    if !claim(pass, &planned).await? {
        return Ok(Ending::Quiet(Action::requeue(AGAIN)));
    }
    execute(pass, &planned, &installer).await
}

impl PlanPass<'_> {
    /// Fails a plan the Subscription reconciler marked superseded ([`ANNOTATION_SUPERSEDED_BY`]).
    /// On the version read: approved meanwhile or not, a superseded plan is never applied, and a
    /// plan being claimed at the same time (see [`claim`]) loses one of the two writes.
    fn supersede(&mut self, message: String) -> Ending {
        self.status.fail(SUPERSEDED, &message, &now_time());
        let note = Some((EventType::Warning, SUPERSEDED.to_string(), message));
        Ending::Write { precondition: true, note, action: Action::await_change() }
    }
}

/// Claims the plan: `Installing`, with its steps listed, is written only if nobody changed the
/// plan since it was read (the resourceVersion is a precondition), so a plan is never applied
/// twice at once; the message and conditions of a hold before it are removed. `false` when it
/// changed.
async fn claim(pass: &mut PlanPass<'_>, planned: &Planned) -> Result<bool, Error> {
    let retrying = pass.status.installed_reason() == Some(INSTALL_RETRYING);
    if pass.blocked || retrying {
        tracing::info!(plan = %pass.key(), "the checks before the first step pass now; applying the plan");
        pass.status.message = None;
        pass.status.conditions = Vec::new();
    }
    pass.status.phase = InstallPlanPhase::Installing;
    if pass.status.start_time.is_none() {
        pass.status.start_time = Some(now_time());
    }
    pass.status.plan = planned.listed(ApiStepStatus::Unknown);
    pass.write(Scope::Whole, true).await
}

/// The checks before the first step: an OperatorCondition holding the upgrade, the CRD upgrade
/// check (every existing object must fit the new schema and no stored version may disappear)
/// and, for a scoped install, the OperatorGroup's ServiceAccount holding everything it applies:
/// every step but the CRDs, which capstan applies with its own identity as OLM v0.46.0's
/// `ExecutePlan` does (`pkg/controller/operators/catalog/operator.go`;
/// [`scoped::applied_by_account`]). Returns who applies the plan, or the blocking hold.
async fn preflight(ctx: &Context, ns: &str, og: &str, plain: &[Step]) -> Result<scoped::Installer, Stop> {
    // An OperatorCondition Upgradeable=False on the CSV being replaced holds the upgrade (OLM
    // `isOperatorUpgradeable`); checked again like the other blocks until it clears.
    for (csv_ns, replaced) in crate::install::operator_condition::replaced_csvs(plain) {
        let may = crate::install::operator_condition::may_replace(&ctx.client, &csv_ns, &replaced)
            .await
            .map_err(|e| Error::Kube { context: e.what, source: e.source })?;
        if let Err(message) = may {
            return Err(Hold::Blocked(crate::install::operator_condition::NOT_UPGRADEABLE, message).into());
        }
    }
    if let Err(errors) = check_plan_crds(&ctx.client, plain).await {
        return Err(Hold::Blocked(CRD_UPGRADE_BLOCKED, describe_all(&errors)).into());
    }
    let installer = match scoped::installer(ctx, ns, og).await? {
        scoped::InstallerCheck::Ready(i) => i,
        scoped::InstallerCheck::Blocked(message) => return Err(Hold::Blocked(INSTALLER_BLOCKED, message).into()),
    };
    if let scoped::Installer::ServiceAccount { account, .. } = &installer {
        let subject = preflight::Subject::ServiceAccount(account.clone());
        let findings = preflight::findings(&ctx.client, &subject, &scoped::applied_by_account(plain))
            .await
            .map_err(|e| Error::Kube { context: format!("RBAC pre-check: {}", e.what), source: e.source })?;
        if !findings.is_empty() {
            let sa = format!("{}/{}", account.namespace, account.name);
            let who = format!("the installer account {sa} (OperatorGroup {ns}/{og} spec.serviceAccountName)");
            return Err(Hold::Blocked(INSTALLER_BLOCKED, preflight::describe(&who, &sa, &findings)).into());
        }
    }
    Ok(installer)
}

/// The `status.plan` entries after applying: each step's outcome, and the [`Hold`] of the first
/// failed one ([`step_hold`]), or of a short apply. Pure.
pub(crate) fn applied(planned: &[PlannedStep], results: &[crate::install::StepResult]) -> (Vec<ApiStep>, Option<Hold>) {
    let mut failed: Option<Hold> = None;
    let statuses: Vec<ApiStepStatus> = planned
        .iter()
        .zip(results.iter())
        .map(|(p, r)| match &r.status {
            StepStatus::Created => ApiStepStatus::Created,
            StepStatus::Present { .. } => ApiStepStatus::Present,
            StepStatus::Failed(e) => {
                failed.get_or_insert_with(|| {
                    step_hold(e, format!("step {} ({}) failed: {r}", r.index + 1, p.step.describe()))
                });
                ApiStepStatus::NotCreated
            }
            StepStatus::NotApplied { .. } => ApiStepStatus::NotCreated,
        })
        .collect();
    let mut entries = plan_entries(planned, &statuses);
    entries.truncate(statuses.len());
    if failed.is_none() && results.len() < planned.len() {
        failed = Some(Hold::Fail(
            "InstallComponentFailed",
            format!("only {} of {} steps were applied", results.len(), planned.len()),
        ));
    }
    (entries, failed)
}

/// Applies a claimed plan: how the reconcile ends, `Complete` or the [`Hold`] of its first failed
/// step ([`step_hold`]).
async fn execute(pass: &mut PlanPass<'_>, planned: &Planned, installer: &scoped::Installer) -> Result<Ending, Error> {
    let (ctx, ip) = (pass.ctx, pass.ip);
    let plain = planned.plain();
    tracing::info!(plan = %pass.key(), steps = plain.len(), "applying InstallPlan");
    ctx.events
        .publish_for(
            ip,
            EventType::Normal,
            "Installing",
            &format!("applying {} steps for {}", plain.len(), ip.spec.cluster_service_version_names.join(", ")),
        )
        .await;
    let started = std::time::Instant::now();
    if let scoped::Installer::ServiceAccount { reference, .. } = installer {
        pass.status.attenuated_service_account_ref = Some(reference.clone());
    }
    let appliers = installer.appliers(&ctx.client);
    let held = held_for_apis(ctx, ip, &pass.ns, planned).await?;
    let results = if held.iter().any(|h| *h) {
        let kept: Vec<Step> = plain.iter().zip(&held).filter(|(_, h)| !**h).map(|(s, _)| s.clone()).collect();
        merge_held(&plain, &held, apply_as(appliers, &kept, &ctx.apply_options()).await)
    } else {
        apply_as(appliers, &plain, &ctx.apply_options()).await
    };
    let (entries, failed) = applied(&planned.steps, &results);
    ctx.metrics.observe_install(started.elapsed(), if failed.is_some() { "failed" } else { "succeeded" });
    if let Some(h) = failed {
        // Held after the claim: not a recheck of an earlier block.
        pass.blocked = false;
        return Ok(pass.hold(h, entries));
    }
    ctx.plan_retries.lock().unwrap_or_else(|e| e.into_inner()).remove(&(pass.ns.clone(), pass.name.clone()));
    pass.status.plan = entries;
    pass.status.complete(&now_time());
    let note = Some((EventType::Normal, "Complete".to_string(), format!("applied {} steps", plain.len())));
    Ok(Ending::Write { precondition: false, note, action: Action::await_change() })
}

/// The step kinds of a CSV refused for its provided APIs that the plan does not apply: what
/// would take over what the other OperatorGroup's operator serves (its CRDs and their
/// conversion, webhook configurations, APIServices). The operator's Deployments are not plan
/// steps: the CSV reconciler makes them once the CSV may own its APIs.
pub(crate) const HELD_FOR_APIS: [&str; 4] =
    ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService", "CustomResourceDefinition"];

/// Which steps of `planned` are held because their CSV may not own the APIs it provides
/// ([`api_ownership`]: another OperatorGroup whose targets intersect provides them):
/// that CSV's [`HELD_FOR_APIS`] steps. The CSV itself is still created, and its reconciler fails
/// it with OLM's reason; when the conflict ends it makes the Deployments and applies the held
/// webhooks from this plan. Each held CSV is an Event `HeldForConflict` on the plan.
async fn held_for_apis(ctx: &Context, ip: &InstallPlan, ns: &str, planned: &Planned) -> Result<Vec<bool>, Error> {
    let mut held = vec![false; planned.steps.len()];
    for csv_step in planned.steps.iter().map(|p| &p.step).filter(|s| s.kind == "ClusterServiceVersion") {
        let Ok(spec) = serde_json::from_value::<crate::api::clusterserviceversion::ClusterServiceVersionSpec>(
            csv_step.manifest["spec"].clone(),
        ) else {
            continue;
        };
        let (ownership, _) =
            api_ownership(&ctx.client, ns, &planned.operator_group, &planned.targets, &csv_step.name, &spec, false)
                .await?;
        let crate::install::aggregation::ApiOwnership::Refused { message, .. } = ownership else { continue };
        let mut names = Vec::new();
        for (i, p) in planned.steps.iter().enumerate() {
            if p.step.resolving == csv_step.name && HELD_FOR_APIS.contains(&p.step.kind.as_str()) {
                held[i] = true;
                names.push(format!("{} {}", p.step.kind, p.step.name));
            }
        }
        let note = format!("not applied: {}; {message}", names.join(", "));
        tracing::warn!(plan = %format!("{ns}/{}", ip.name_any()), csv = %csv_step.name, "{note}");
        ctx.events.publish_for(ip, EventType::Warning, "HeldForConflict", &note).await;
    }
    Ok(held)
}

/// The results of applying the steps of `plain` not `held`, in the order of `plain`: a held step
/// is `NotApplied` (blocked by itself). Pure.
pub(crate) fn merge_held(
    plain: &[Step],
    held: &[bool],
    applied: Vec<crate::install::StepResult>,
) -> Vec<crate::install::StepResult> {
    let mut applied = applied.into_iter();
    let mut out = Vec::new();
    for (i, (step, h)) in plain.iter().zip(held).enumerate() {
        if *h {
            out.push(crate::install::StepResult {
                index: i,
                kind: step.kind.clone(),
                name: step.name.clone(),
                namespace: step.namespace.clone(),
                status: StepStatus::NotApplied { blocked_by: i },
                uid: None,
            });
        } else if let Some(r) = applied.next() {
            out.push(crate::install::StepResult { index: i, ..r });
        } else {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ip(status: Option<serde_json::Value>, annotations: serde_json::Value, approved: bool) -> InstallPlan {
        let mut v = json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
            "spec": {"clusterServiceVersionNames": ["a.v1"], "approval": "Manual", "approved": approved},
        });
        if let Some(s) = status {
            v["status"] = s;
        }
        serde_json::from_value(v).unwrap()
    }

    fn lookup() -> serde_json::Value {
        json!({"path": "r/a@sha256:1", "identifier": "a.v1", "replaces": "", "catalogSourceRef": {"namespace": "ns", "name": "c"}})
    }

    #[test]
    fn first_decision_on_a_plan() {
        let planned = PlannedLookups {
            catalog_sources: vec!["c".into()],
            bundle_lookups: vec![serde_json::from_value(lookup()).unwrap()],
            subscriptions: vec![],
        };
        let ann = json!({ANNOTATION_BUNDLE_LOOKUPS: serde_json::to_string(&planned).unwrap()});
        assert_eq!(decide_start(&ip(None, ann.clone(), true)), Start::Initialize(planned.clone()));
        assert_eq!(
            decide_start(&ip(None, json!({}), true)),
            Start::Later(Duration::from_millis(500)),
            "no lookups anywhere yet"
        );
        let with = |phase: &str, extra: serde_json::Value| {
            let mut s = json!({"phase": phase, "catalogSources": ["c"], "bundleLookups": [lookup()]});
            if let (Some(o), Some(e)) = (s.as_object_mut(), extra.as_object()) {
                o.extend(e.clone());
            }
            Some(s)
        };
        assert_eq!(decide_start(&ip(with("Planning", json!({})), ann.clone(), true)), Start::Go);
        assert_eq!(
            decide_start(&ip(with("Installing", json!({})), json!({}), true)),
            Start::Go,
            "a claim lost by a stopped controller is taken again"
        );
        assert_eq!(decide_start(&ip(with("Complete", json!({})), json!({}), true)), Start::Idle);
        let steps = json!({"plan": [{"resolving": "a.v1", "resource": {"sourceName": "c", "sourceNamespace": "ns", "group": "", "version": "v1", "kind": "ServiceAccount", "name": "a"}, "status": "Unknown"}]});
        assert_eq!(
            decide_start(&ip(with("RequiresApproval", steps.clone()), json!({}), false)),
            Start::Idle,
            "waits for approval"
        );
        assert_eq!(decide_start(&ip(with("RequiresApproval", steps), json!({}), true)), Start::Go, "approved");
        assert_eq!(
            decide_start(&ip(with("RequiresApproval", json!({})), json!({}), false)),
            Start::Go,
            "steps not listed yet"
        );
        for reason in RECHECKED_REASONS {
            let failed =
                with("Failed", json!({"conditions": [{"type": "Installed", "status": "False", "reason": reason}]}));
            assert_eq!(decide_start(&ip(failed, json!({}), true)), Start::Recheck, "{reason}");
        }
        let failed = with(
            "Failed",
            json!({"conditions": [{"type": "Installed", "status": "False", "reason": "InstallComponentFailed"}]}),
        );
        assert_eq!(decide_start(&ip(failed.clone(), json!({}), true)), Start::Idle);
        // Superseded: failed unless it is terminal already.
        let sup = json!({ANNOTATION_SUPERSEDED_BY: "superseded by InstallPlan q"});
        assert_eq!(
            decide_start(&ip(with("RequiresApproval", json!({})), sup.clone(), true)),
            Start::Supersede("superseded by InstallPlan q".into())
        );
        assert_eq!(decide_start(&ip(failed, sup, true)), Start::Idle);
    }

    #[test]
    fn the_installed_condition_and_phases() {
        let now = now_time();
        let mut st = InstallPlanStatus::new(InstallPlanPhase::Installing);
        st.fail(SUPERSEDED, "why", &now);
        assert_eq!(
            (st.phase.clone(), st.message.as_deref(), st.installed_reason()),
            (InstallPlanPhase::Failed, Some("why"), Some(SUPERSEDED))
        );
        st.complete(&now);
        assert_eq!(
            (st.phase.clone(), st.message.as_deref(), st.installed_reason(), st.conditions.len()),
            (InstallPlanPhase::Complete, None, None, 1)
        );
        assert_eq!(st.conditions[0].status, Some(ConditionStatus::True));
    }

    #[test]
    fn pull_markers_count_stops() {
        let mut l: BundleLookup = serde_json::from_value(lookup()).unwrap();
        assert_eq!(stops_left(&l), None);
        l.conditions.push(BundleLookupCondition {
            type_: BundleLookupConditionType::BundleLookupPending,
            status: ConditionStatus::True,
            reason: Some("Pulling".into()),
            message: Some("pulling bundle image r/a@sha256:1 (controller stops while pulling it: 2)".into()),
            last_update_time: None,
            last_transition_time: None,
        });
        assert_eq!(stops_left(&l), Some(2));
    }

    #[test]
    fn a_failed_pull_is_retried_blocked_or_failed_by_its_cause() {
        use crate::oci::OciError as E;
        let r = || "r/a@sha256:1".to_string();
        let reg = || "r".to_string();
        let io = || std::io::Error::other("disk");
        let cases: Vec<(BundleImageError, Hold)> = vec![
            (
                E::Connect {
                    reference: r(),
                    registry: reg(),
                    scheme: "https",
                    message: "refused".into(),
                    hint: String::new(),
                }
                .into(),
                Hold::Retry("m".into()),
            ),
            (E::Registry { reference: r(), registry: reg(), message: "503".into() }.into(), Hold::Retry("m".into())),
            (E::Io { path: "/tmp/x".into(), source: io() }.into(), Hold::Retry("m".into())),
            (
                E::CacheUnusable { path: "/tmp/x".into(), origin: "default", source: io() }.into(),
                Hold::Retry("m".into()),
            ),
            (E::NotFound { reference: r(), registry: reg() }.into(), Hold::Blocked(BUNDLE_UNAVAILABLE, "m".into())),
            (
                E::Unauthorized { reference: r(), registry: reg(), action: "pull", hint: String::new() }.into(),
                Hold::Blocked(BUNDLE_UNAVAILABLE, "m".into()),
            ),
            (
                E::AuthConfig { source_name: "secret ns/s".into(), reason: "bad".into() }.into(),
                Hold::Blocked(BUNDLE_UNAVAILABLE, "m".into()),
            ),
            (
                E::CredentialHelper { registry: reg(), helper: "h".into(), source_name: "s".into() }.into(),
                Hold::Blocked(BUNDLE_UNAVAILABLE, "m".into()),
            ),
            (
                E::DigestMismatch {
                    reference: r(),
                    registry: reg(),
                    what: "layer",
                    expected: "a".into(),
                    actual: "b".into(),
                }
                .into(),
                Hold::Fail("InstallCheckFailed", "m".into()),
            ),
            (
                E::Format { reference: r(), reason: "no layers".into() }.into(),
                Hold::Fail("InstallCheckFailed", "m".into()),
            ),
            (
                BundleImageError::NotABundle { reference: r(), reason: "no manifests/".into() },
                Hold::Fail("InstallCheckFailed", "m".into()),
            ),
        ];
        for (err, want) in cases {
            assert_eq!(pull_hold(&err, "m".into()), want, "{err:?}");
        }
    }

    #[test]
    fn a_failed_step_is_retried_blocked_or_failed_by_its_cause() {
        let o = || "Deployment ns/op".to_string();
        let cases = [
            (
                StepError::RetriesExhausted {
                    object: o(),
                    verb: "patch".into(),
                    attempts: 9,
                    elapsed: Duration::from_secs(60),
                    last: "503".into(),
                },
                Hold::Retry("m".into()),
            ),
            (
                StepError::ApiNotAvailable { object: o(), api_version: "example.com/v1".into(), kind: "Widget".into() },
                Hold::Blocked("APINotAvailable", "m".into()),
            ),
            (
                StepError::Forbidden {
                    object: o(),
                    verb: "patch".into(),
                    resource: "deployments".into(),
                    namespace: Some("ns".into()),
                    identity: "capstan".into(),
                    message: "no".into(),
                },
                Hold::Blocked("Forbidden", "m".into()),
            ),
            (
                StepError::Invalid { object: o(), reason: "Invalid".into(), message: "bad".into() },
                Hold::Fail("InstallComponentFailed", "m".into()),
            ),
            (
                StepError::NotEstablished {
                    crd: "widgets.example.com".into(),
                    waited: Duration::from_secs(30),
                    message: "".into(),
                },
                Hold::Fail("InstallComponentFailed", "m".into()),
            ),
            (
                StepError::OwnerMissing { object: o(), owner: "csv".into() },
                Hold::Fail("InstallComponentFailed", "m".into()),
            ),
            (
                StepError::BadStep { object: o(), message: "no kind".into() },
                Hold::Fail("InstallComponentFailed", "m".into()),
            ),
            (
                StepError::Conflict { object: o(), owner: "is owned by x".into(), label: "l".into() },
                Hold::Fail("InstallComponentFailed", "m".into()),
            ),
            (
                StepError::Api { object: o(), verb: "patch".into(), message: "x".into() },
                Hold::Fail("InstallComponentFailed", "m".into()),
            ),
        ];
        for (err, want) in cases {
            assert_eq!(step_hold(&err, "m".into()), want, "{err:?}");
        }
        // Every reason a plan is blocked with is one that is checked again.
        for h in [
            step_hold(
                &StepError::ApiNotAvailable { object: o(), api_version: "v1".into(), kind: "K".into() },
                String::new(),
            ),
            Hold::Blocked(BUNDLE_UNAVAILABLE, String::new()),
        ] {
            let Hold::Blocked(reason, _) = h else { panic!("{h:?}") };
            assert!(RECHECKED_REASONS.contains(&reason), "{reason}");
        }
    }

    #[test]
    fn install_modes_that_do_not_fit_block_or_fail_the_plan() {
        let cases = [
            ("UnsupportedOperatorGroup", Hold::Blocked("UnsupportedOperatorGroup", "m".into())),
            ("NoTargetNamespaces", Hold::Blocked("NoTargetNamespaces", "m".into())),
            ("InvalidInstallModes", Hold::Fail("InstallCheckFailed", "m".into())),
        ];
        for (reason, want) in cases {
            let e = InstallModeError { reason, message: String::new() };
            assert_eq!(install_mode_hold(&e, "m".into()), want, "{reason}");
            if let Hold::Blocked(r, _) = want {
                assert!(RECHECKED_REASONS.contains(&r), "{r} is checked again");
            }
        }
    }

    #[test]
    fn transient_holds_back_off_to_the_maximum() {
        let waits: Vec<u64> = (1..=7).map(|n| retry_backoff(n).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(retry_backoff(0), RETRY_FIRST);
        assert_eq!(retry_backoff(u32::MAX), RETRY_MAX);
    }

    #[test]
    fn the_subscription_config_goes_only_into_its_own_package() {
        let sub: Subscription = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "metadata": {"name": "s", "namespace": "ns"},
            "spec": {"name": "a", "source": "c", "sourceNamespace": "ns", "config": {"env": [{"name": "", "value": "x"}]}},
        }))
        .unwrap();
        match subscription_config(Some(&sub), "a") {
            Err(Hold::Fail("InstallCheckFailed", m)) => assert_eq!(
                m,
                "Subscription spec.config: env[0] has no name; every entry needs a name; fix the field (see `kubectl explain subscription.spec.config`)"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            subscription_config(Some(&sub), "dependency").unwrap(),
            SubscriptionConfig::default(),
            "a dependency's bundle gets none"
        );
        assert_eq!(subscription_config(None, "a").unwrap(), SubscriptionConfig::default());
    }

    #[test]
    fn a_plan_too_large_for_one_object_fails_with_the_sizes() {
        let big = Step {
            resolving: "a.v1".into(),
            group: "".into(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "cm".into(),
            namespace: None,
            manifest: json!({"data": "x".repeat(MAX_PLAN_STATUS_BYTES)}),
        };
        let steps = plan_entries(
            &[PlannedStep { step: big, catalog: ("olm".into(), "c".into()), image: None }],
            &[ApiStepStatus::Unknown],
        );
        match oversized(&steps) {
            Some(Hold::Fail("InstallCheckFailed", m)) => assert!(
                m.starts_with("the plan's 1 steps take 1.2 MiB in status.plan")
                    && m.contains("ask its author to ship fewer"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn applied_steps_and_the_first_failure() {
        use crate::install::StepResult;
        let step = |name: &str, kind: &str| Step {
            resolving: "a.v1".into(),
            group: "".into(),
            version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            namespace: Some("ns".into()),
            manifest: json!({}),
        };
        let p = |s: Step| PlannedStep {
            step: s,
            catalog: ("ns".to_string(), "c".to_string()),
            image: Some("r/a@sha256:1".into()),
        };
        let planned = vec![p(step("s", "Secret")), p(step("b", "ConfigMap"))];
        let res = |i: usize| StepResult {
            index: i,
            kind: "Secret".into(),
            name: "s".into(),
            namespace: None,
            status: StepStatus::Created,
            uid: None,
        };
        let results = vec![res(0)];
        let (entries, failed) = applied(&planned, &results);
        assert_eq!(entries.len(), 1);
        assert_eq!(
            (entries[0].resource.kind.as_str(), entries[0].status.clone()),
            ("BundleSecret", ApiStepStatus::Created)
        );
        assert_eq!(failed, Some(Hold::Fail("InstallComponentFailed", "only 1 of 2 steps were applied".into())));
        let results = vec![res(0), res(1)];
        assert_eq!(applied(&planned, &results).1, None);
    }

    #[test]
    fn large_objects_are_listed_as_references_to_the_bundle() {
        let obj = |kind: &str, name: &str, bytes: usize| Step {
            resolving: "a.v1".into(),
            group: "".into(),
            version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            namespace: None,
            manifest: json!({"metadata": {"name": name}, "data": "x".repeat(bytes)}),
        };
        let image = "reg/a-bundle@sha256:abc";
        let p = |s: Step| PlannedStep { step: s, catalog: ("olm".into(), "c".into()), image: Some(image.into()) };
        // A 2 MB CRD (argocd's argocds is 1.1 MB as JSON), small objects, a CSV after enough
        // mid-sized ones to spend the budget, and a Subscription not from the bundle.
        let mut steps = vec![p(obj("CustomResourceDefinition", "big", 2_000_000)), p(obj("ServiceAccount", "sa", 100))];
        steps.extend((0..10).map(|i| p(obj("ConfigMap", &format!("cm{i}"), 60_000))));
        steps.push(p(obj("ClusterServiceVersion", "a.v1", 5_000)));
        steps.push(PlannedStep {
            step: obj("Subscription", "dep", 200),
            catalog: ("olm".into(), "c".into()),
            image: None,
        });
        let entries = plan_entries(&steps, &vec![ApiStepStatus::Unknown; steps.len()]);
        let refs: Vec<&str> = entries
            .iter()
            .filter(|e| e.resource.manifest.as_deref().and_then(BundleObjectRef::parse).is_some())
            .map(|e| e.resource.name.as_str())
            .collect();
        assert_eq!(refs, ["big", "cm8", "cm9"], "over 64 KiB, or past the 512 KiB budget");
        let r = BundleObjectRef::parse(entries[0].resource.manifest.as_deref().unwrap()).unwrap();
        let planned_json = steps[0].step.manifest.to_string();
        assert_eq!((r.image.as_str(), r.size), (image, planned_json.len()));
        assert_eq!(r.digest, format!("sha256:{}", hex::encode(Sha256::digest(planned_json.as_bytes()))));
        assert_eq!(
            (entries[0].resource.kind.as_str(), entries[0].resource.name.as_str()),
            ("CustomResourceDefinition", "big"),
            "the step still names the object"
        );
        let inline: serde_json::Value =
            serde_json::from_str(entries[12].resource.manifest.as_deref().unwrap()).unwrap();
        assert_eq!(inline["metadata"]["name"], "a.v1", "a later step that fits what is left of the budget is inline");
        // The whole listing stays small for any bundle size, and the image is found again.
        assert!(oversized(&entries).is_none());
        assert!(serde_json::to_vec(&entries).unwrap().len() < INLINE_PLAN_BUDGET + 64 * 1024);
        assert_eq!(pinned_image(&entries, "a.v1").as_deref(), Some(image));
        assert_eq!(pinned_image(&entries, "b.v1"), None);
        // An ordinary object is not mistaken for a reference.
        assert!(BundleObjectRef::parse(r#"{"kind":"BundleObject","metadata":{}}"#).is_none());
        assert!(BundleObjectRef::parse(r#"{"apiVersion":"v1","kind":"ConfigMap"}"#).is_none());
    }

    #[test]
    fn held_steps_are_not_applied_and_the_rest_keep_their_place() {
        use crate::install::{StepResult, StepStatus};
        let step = |kind: &str, name: &str| Step {
            resolving: "op.v1".into(),
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            namespace: None,
            manifest: serde_json::json!({}),
        };
        let plain = vec![
            step("CustomResourceDefinition", "widgets"),
            step("ServiceAccount", "op"),
            step("ValidatingWebhookConfiguration", "vop"),
            step("ClusterServiceVersion", "op.v1"),
        ];
        let held = vec![true, false, true, false];
        let result = |i: usize, s: &Step| StepResult {
            index: i,
            kind: s.kind.clone(),
            name: s.name.clone(),
            namespace: None,
            status: StepStatus::Created,
            uid: None,
        };
        let applied = vec![result(0, &plain[1]), result(1, &plain[3])];
        let merged = merge_held(&plain, &held, applied);
        let got: Vec<(usize, &str, bool)> = merged.iter().map(|r| (r.index, r.name.as_str(), r.applied())).collect();
        assert_eq!(got, [(0, "widgets", false), (1, "op", true), (2, "vop", false), (3, "op.v1", true)]);
        assert!(
            HELD_FOR_APIS.contains(&"ValidatingWebhookConfiguration")
                && !HELD_FOR_APIS.contains(&"ClusterServiceVersion")
        );
    }
}
