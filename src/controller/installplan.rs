//! InstallPlan reconciler (`reference/olm-v0.md` §1.4, §5): from `status.bundleLookups` (written by
//! the Subscription reconciler) pull each bundle image, plan its steps with the namespace's
//! OperatorGroup targets ([`crate::install::plan::steps`]) and write them to `status.plan`; phase
//! `RequiresApproval` while `spec.approved` is false (nothing applied), else `Installing`, then
//! [`crate::install::apply::apply`] and `Complete`, or `Failed` with a message naming the step and why.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::catalogsource::registry_for;
use super::csv::{check_install_mode, operator_group_targets};
use super::events::{self, EventType};
use super::{Context, Error, apply_status, kube_err, scoped};
use crate::api::installplan::InstallPlanPhase;
use crate::api::{CatalogSource, InstallPlan, Subscription};
use crate::bundle::Bundle;
use crate::install::crd_safety::{check_plan_crds, describe_all};
use crate::bundle::image::BundleImageError;
use crate::install::{ApplyOptions, InstallTarget, Step, StepError, StepStatus, SubscriptionConfig, apply, plan};
use crate::oci::cache::ScratchDir;
use crate::oci::parse_reference;

/// The InstallPlan name for `subscription` installing `bundles` (`(CSV name, bundle image)`
/// pairs) with the Subscription's `spec.config` as JSON (`config`, `""` when unset): `install-`
/// and the first 10 hex digits of a SHA-256 over all of them, so that the same resolution always
/// maps to the same plan (a restart never creates a second one), and a changed input — a bundle
/// re-published under another digest, a corrected `spec.config` — gets a new plan instead of
/// being blocked by the plan that failed before it (issue 11).
pub fn install_plan_name(subscription: &str, bundles: &[(String, String)], config: &str) -> String {
    let mut bundles = bundles.to_vec();
    bundles.sort();
    let mut h = Sha256::new();
    h.update(subscription.as_bytes());
    for (csv, image) in &bundles {
        h.update([0]);
        h.update(csv.as_bytes());
        h.update([1]);
        h.update(image.as_bytes());
    }
    if !config.is_empty() {
        h.update([2]);
        h.update(config.as_bytes());
    }
    format!("install-{}", &hex::encode(h.finalize())[..10])
}

/// Condition reason of a plan refused by the CRD upgrade check ([`check_plan_crds`]); such a plan
/// is checked again every [`CRD_RECHECK`] and applied once the check passes.
pub const CRD_UPGRADE_BLOCKED: &str = "CRDUpgradeBlocked";
/// Condition reason of a plan whose installer ServiceAccount is missing or lacks permissions;
/// checked again every [`CRD_RECHECK`] like [`CRD_UPGRADE_BLOCKED`].
pub const INSTALLER_BLOCKED: &str = "InstallerPermissionsMissing";
/// Condition reason of a plan whose bundle image cannot be pulled for a reason a person fixes
/// (not found, unauthorized, a pull secret missing); checked again like [`CRD_UPGRADE_BLOCKED`].
pub const BUNDLE_UNAVAILABLE: &str = "BundleUnavailable";
/// Condition reason (with phase unchanged) of a plan that hit an error that goes away by itself
/// (a registry or the API server unreachable or failing): tried again after a backoff, doubling
/// from [`RETRY_FIRST`] up to [`RETRY_MAX`].
pub const INSTALL_RETRYING: &str = "InstallRetrying";
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
        BundleImageError::Oci(E::Connect { .. } | E::Registry { .. } | E::Io { .. } | E::CacheUnusable { .. }) => Hold::Retry(message),
        BundleImageError::Oci(E::NotFound { .. } | E::Unauthorized { .. } | E::AuthConfig { .. } | E::CredentialHelper { .. }) => Hold::Blocked(BUNDLE_UNAVAILABLE, message),
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

/// The wait before try `attempt` (1-based) of a plan held by [`Hold::Retry`]: [`RETRY_FIRST`]
/// doubled per earlier try, at most [`RETRY_MAX`].
pub(crate) fn retry_backoff(attempt: u32) -> Duration {
    RETRY_FIRST.saturating_mul(1u32 << attempt.saturating_sub(1).min(16)).min(RETRY_MAX)
}

/// Marks the plan Failed with `reason` and `message` (unless it already says exactly that),
/// nothing applied, and requeues it for another check.
#[allow(clippy::too_many_arguments)]
async fn block(ctx: &Context, api: &Api<InstallPlan>, ip: &InstallPlan, mut status: Value, steps: &[Value], reason: &str, message: String, blocked: bool) -> Result<Action, Error> {
    let message = format!("{message} (capstan checks again every {} s)", CRD_RECHECK.as_secs());
    if status["message"] != message.as_str() || !blocked {
        tracing::warn!(plan = %format!("{}/{}", ip.namespace().unwrap_or_default(), ip.name_any()), %message, "InstallPlan refused before any step");
        status["phase"] = json!("Failed");
        status["message"] = json!(message);
        status["plan"] = json!(steps);
        status["conditions"] = json!([{"type": "Installed", "status": "False", "reason": reason, "message": message, "lastUpdateTime": super::now(), "lastTransitionTime": super::now()}]);
        apply_status(api, ip, status).await?;
        events::publish_for(&ctx.client, ip, EventType::Warning, reason, &message).await;
    }
    Ok(Action::requeue(CRD_RECHECK))
}

/// Keeps the plan's phase and says in condition `Installed=False` ([`INSTALL_RETRYING`]) what
/// failed and when capstan tries again; requeues after [`retry_backoff`].
async fn retry_later(ctx: &Context, api: &Api<InstallPlan>, ip: &InstallPlan, mut status: Value, message: String) -> Result<Action, Error> {
    let key = (ip.namespace().unwrap_or_default(), ip.name_any());
    let attempt = {
        let mut retries = ctx.plan_retries.lock().unwrap_or_else(|e| e.into_inner());
        let n = retries.entry(key).or_insert(0);
        *n += 1;
        *n
    };
    let wait = retry_backoff(attempt);
    let message = format!("{message}; this can pass by itself: capstan tries again in {} s (attempt {attempt})", wait.as_secs());
    tracing::warn!(plan = %format!("{}/{}", ip.namespace().unwrap_or_default(), ip.name_any()), %message, "InstallPlan held by a transient error");
    let now = super::now();
    status["conditions"] = json!([{"type": "Installed", "status": "False", "reason": INSTALL_RETRYING, "message": message, "lastUpdateTime": now, "lastTransitionTime": now}]);
    apply_status(api, ip, status).await?;
    if attempt == 1 {
        events::publish_for(&ctx.client, ip, EventType::Warning, INSTALL_RETRYING, &message).await;
    }
    Ok(Action::requeue(wait))
}

/// Writes a plan's [`Hold`]: [`retry_later`], [`block`], or Failed for good.
#[allow(clippy::too_many_arguments)]
async fn hold(ctx: &Context, api: &Api<InstallPlan>, ip: &InstallPlan, mut status: Value, steps: &[Value], hold: Hold, blocked: bool) -> Result<Action, Error> {
    match hold {
        Hold::Again => Ok(Action::requeue(Duration::from_millis(200))),
        Hold::Retry(message) => retry_later(ctx, api, ip, status, message).await,
        Hold::Blocked(reason, message) => block(ctx, api, ip, status, steps, reason, message, blocked).await,
        Hold::Fail(reason, message) => {
            tracing::warn!(plan = %format!("{}/{}", ip.namespace().unwrap_or_default(), ip.name_any()), %message, "InstallPlan failed");
            let now = super::now();
            status["phase"] = json!("Failed");
            status["message"] = json!(message);
            if !steps.is_empty() {
                status["plan"] = json!(steps);
            }
            status["conditions"] = json!([{"type": "Installed", "status": "False", "reason": reason, "message": message, "lastUpdateTime": now, "lastTransitionTime": now}]);
            apply_status(api, ip, status).await?;
            events::publish_for(&ctx.client, ip, EventType::Warning, "InstallFailed", &message).await;
            Ok(Action::await_change())
        }
    }
}

/// Largest `status.plan` (JSON bytes) capstan writes: below etcd's default request limit of
/// 1.5 MiB, leaving room for the rest of the InstallPlan.
pub const MAX_PLAN_STATUS_BYTES: usize = 1_300_000;

/// [`Hold::Fail`] when `steps` (the `status.plan` entries) exceed [`MAX_PLAN_STATUS_BYTES`].
fn oversized(steps: &[Value]) -> Option<Hold> {
    let size = serde_json::to_vec(steps).map(|v| v.len()).unwrap_or(0);
    (size > MAX_PLAN_STATUS_BYTES).then(|| {
        Hold::Fail(
            "InstallCheckFailed",
            format!(
                "the plan's {} steps take {:.1} MiB in status.plan, more than the API server stores in one object (about {:.1} MiB with etcd's default limit); capstan cannot install bundles this large yet: ask the author to slim the bundle (its largest objects are usually CRDs with long descriptions)",
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
        Some(c) => serde_json::to_value(c)
            .map_err(|e| e.to_string())
            .and_then(|v| SubscriptionConfig::from_value(&v).map_err(|e| e.to_string()))
            .map_err(|e| Hold::Fail("InstallCheckFailed", format!("Subscription spec.config: {e}"))),
        None => Ok(SubscriptionConfig::default()),
    }
}

/// How often a plan refused by the CRD upgrade check is checked again.
pub const CRD_RECHECK: Duration = Duration::from_secs(10);

/// Whether `ip` is still the plan its owning Subscription's `status.installPlanRef` names.
async fn still_current(ctx: &Context, ip: &InstallPlan, ns: &str) -> Result<bool, Error> {
    let Some(owner) = ip.owner_references().iter().find(|o| o.kind == "Subscription") else { return Ok(false) };
    let sub = Api::<Subscription>::namespaced(ctx.client.clone(), ns).get_opt(&owner.name).await.map_err(kube_err(format!("reading Subscription {ns}/{}", owner.name)))?;
    Ok(sub.and_then(|s| s.status).and_then(|s| s.install_plan_ref).and_then(|r| r.name).is_some_and(|n| n == ip.name_any()))
}

/// The `status.plan[]` entry (OLM `Step`) of one planned step with status `status`.
pub(crate) fn step_json(step: &Step, lookup_catalog: (&str, &str), status: &str) -> Value {
    json!({
        "resolving": step.resolving,
        "resource": {
            "sourceName": lookup_catalog.1, "sourceNamespace": lookup_catalog.0,
            "group": step.group, "version": step.version,
            "kind": if step.kind == "Secret" { "BundleSecret" } else { step.kind.as_str() },
            "name": step.name,
            "manifest": step.manifest.to_string(),
        },
        "optional": false,
        "status": status,
    })
}

/// The planned steps of an InstallPlan, each with its catalog `(namespace, name)`, and the
/// namespace's OperatorGroup name.
type Planned = (String, Vec<(Step, (String, String))>);

/// Pulls every bundle of the plan and plans its steps; also returns the namespace's OperatorGroup
/// name. `Err` is how the plan is held, with a message naming the bundle.
/// `rv` is the plan's resourceVersion as read, updated when this writes the plan's status.
async fn plan_steps(ctx: &Context, api: &Api<InstallPlan>, ip: &InstallPlan, ns: &str, status: &mut Value, rv: &mut Option<String>) -> Result<Result<Planned, Hold>, Error> {
    let (og, targets) = match operator_group_targets(&ctx.client, ns).await? {
        Ok(t) => t,
        Err((reason, message)) => return Ok(Err(Hold::Blocked(reason, format!("{reason}: {message}")))),
    };
    // The owning Subscription's spec.config goes into its own package's Deployments (§1.3).
    let sub = match ip.owner_references().iter().find(|o| o.kind == "Subscription") {
        Some(o) => Api::<Subscription>::namespaced(ctx.client.clone(), ns).get_opt(&o.name).await.ok().flatten(),
        None => None,
    };
    let mut out = Vec::new();
    let lookups = ip.status.as_ref().map(|s| s.bundle_lookups.clone()).unwrap_or_default();
    for (i, lookup) in lookups.iter().enumerate() {
        let csv_name = &lookup.identifier;
        let at = |what: String| format!("bundle {csv_name} ({}): {what}", lookup.path);
        let cref = &lookup.catalog_source_ref;
        let cns = cref.namespace.clone().unwrap_or_default();
        let cname = cref.name.clone().unwrap_or_default();
        let secrets = match Api::<CatalogSource>::namespaced(ctx.client.clone(), &cns).get_opt(&cname).await {
            Ok(Some(cs)) => cs.spec.secrets.unwrap_or_default(),
            _ => Vec::new(),
        };
        let registry = match registry_for(ctx, &cns, &secrets).await {
            Ok(r) => r,
            Err(e) => return Ok(Err(Hold::Blocked(BUNDLE_UNAVAILABLE, at(e)))),
        };
        let reference = match parse_reference(&lookup.path) {
            Ok(r) => r,
            Err(e) => return Ok(Err(Hold::Fail("InstallCheckFailed", at(format!("the image reference is invalid: {e}"))))),
        };
        let dir = match ScratchDir::new("capstan-bundle") {
            Ok(d) => d,
            Err(e) => return Ok(Err(Hold::Retry(at(e.to_string())))),
        };
        if let Some(hold) = mark_pulling(ctx, api, ip, status, rv, i, &lookup.path).await? {
            return Ok(Err(hold));
        }
        let pulled = crate::bundle::image::pull_bundle(&registry, &reference, dir.path()).await;
        clear_pulling(status, i);
        if let Err(e) = pulled {
            return Ok(Err(pull_hold(&e, at(format!("pulling the bundle image failed: {e}")))));
        }
        let bundle = match Bundle::load(dir.path()) {
            Ok(b) => b,
            Err(e) => return Ok(Err(Hold::Fail("InstallCheckFailed", at(format!("the bundle is invalid: {e}"))))),
        };
        let modes: Vec<(String, bool)> = bundle.csv().install_modes().into_iter().map(|m| (m.type_, m.supported)).collect();
        if let Err(e) = check_install_mode(ns, &targets, &modes) {
            let message = at(format!("{}: {}", e.reason, e.message));
            return Ok(Err(if e.reason == "InvalidInstallModes" { Hold::Fail("InstallCheckFailed", message) } else { Hold::Blocked(e.reason, message) }));
        }
        let config = match subscription_config(sub.as_ref(), bundle.package()) {
            Ok(c) => c,
            Err(h) => return Ok(Err(h)),
        };
        let properties: Vec<Value> = lookup.properties.as_deref().and_then(|p| serde_json::from_str::<Value>(p).ok()).and_then(|v| v["properties"].as_array().cloned()).unwrap_or_default();
        let mut target = InstallTarget {
            namespace: ns.to_string(),
            target_namespaces: targets.clone(),
            package: bundle.package().to_string(),
            csv_name: csv_name.clone(),
            config,
            operator_group: Some(og.clone()),
            properties,
            replaces: Some(lookup.replaces.clone()).filter(|r| !r.is_empty()),
            ..Default::default()
        };
        target.owner = Some(target.csv_owner_reference());
        match plan::steps(&bundle, &target) {
            Ok(steps) => out.extend(steps.into_iter().map(|s| (s, (cns.clone(), cname.clone())))),
            Err(e) => return Ok(Err(Hold::Fail("InstallCheckFailed", at(e.to_string())))),
        }
    }
    Ok(Ok((og, out)))
}

/// How many times the controller may stop (crash, out of memory) while pulling one bundle before
/// the plan is failed instead of pulled again.
pub const PULL_CRASH_LIMIT: u32 = 3;

/// Before bundle lookup `i` is pulled: records in the plan's status which image is being pulled
/// (condition `BundleLookupPending`, reason `Pulling`), so that a controller that dies while
/// pulling — killed for its memory by a hostile image, say — leaves the culprit in the status.
/// A marker left by an earlier process counts as one such stop; after [`PULL_CRASH_LIMIT`] the
/// plan is failed with a message naming the image rather than pulled again. Returns that hold, or
/// [`Hold::Again`] when the plan changed since `rv` (the write's precondition; `rv` is updated).
async fn mark_pulling(ctx: &Context, api: &Api<InstallPlan>, ip: &InstallPlan, status: &mut Value, rv: &mut Option<String>, i: usize, image: &str) -> Result<Option<Hold>, Error> {
    let key = (ip.namespace().unwrap_or_default(), ip.name_any(), i);
    let mine = ctx.pulls_started.lock().unwrap_or_else(|e| e.into_inner()).contains(&key);
    let conds = &status["bundleLookups"][i]["conditions"];
    let left = conds.as_array().and_then(|c| c.iter().find(|c| c["type"] == "BundleLookupPending" && c["reason"] == "Pulling"));
    let stops = match left {
        Some(c) if !mine => c["message"].as_str().and_then(|m| m.rsplit_once("stops: ")).and_then(|(_, n)| n.trim_end_matches(')').parse::<u32>().ok()).unwrap_or(0) + 1,
        Some(_) => return Ok(None),
        None => 0,
    };
    if stops >= PULL_CRASH_LIMIT {
        return Ok(Some(Hold::Fail(
            "InstallCheckFailed",
            format!("bundle image {image}: the controller stopped {stops} times while pulling it (a crash or its memory limit); it is not pulled again: check the image against the pull limits in docs/deploy.md, then delete this InstallPlan to try again"),
        )));
    }
    if !status["bundleLookups"][i].is_object() {
        return Ok(None);
    }
    let now = super::now();
    status["bundleLookups"][i]["conditions"] = json!([{
        "type": "BundleLookupPending", "status": "True", "reason": "Pulling",
        "message": format!("pulling bundle image {image} (controller stops while pulling it: {stops})"),
        "lastUpdateTime": now, "lastTransitionTime": now,
    }]);
    let patch = json!({"metadata": {"resourceVersion": rv}, "status": {"bundleLookups": status["bundleLookups"]}});
    let params = PatchParams { field_manager: Some(crate::install::FIELD_MANAGER.into()), ..Default::default() };
    match api.patch_status(&ip.name_any(), &params, &Patch::Merge(&patch)).await {
        Ok(updated) => *rv = updated.resource_version(),
        Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Some(Hold::Again)),
        Err(e) => return Err(kube_err(format!("writing status of InstallPlan {}/{}", key.0, key.1))(e)),
    }
    ctx.pulls_started.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
    Ok(None)
}

/// Removes the marker [`mark_pulling`] wrote (it goes with the next status write).
fn clear_pulling(status: &mut Value, i: usize) {
    if let Some(l) = status["bundleLookups"][i].as_object_mut() {
        l.remove("conditions");
    }
}

pub(super) async fn reconcile(ip: Arc<InstallPlan>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = ip.namespace().unwrap_or_default();
    let name = ip.name_any();
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &ns);
    // Decide on a fresh read, never on the watch cache: a reconcile queued by an earlier event may
    // carry a plan that has since been approved, applied or completed.
    let Some(ip) = api.get_opt(&name).await.map_err(kube_err(format!("reading InstallPlan {ns}/{name}")))? else {
        return Ok(Action::await_change());
    };
    // The Subscription reconciler writes status.bundleLookups right after creating the plan; a
    // status write does not trigger this controller, so look again shortly.
    let Some(current) = ip.status.as_ref() else {
        return Ok(Action::requeue(Duration::from_millis(500)));
    };
    // A plan refused by a check before its first step is looked at again: once the cause is fixed
    // (the objects, the OperatorGroup, the installer's permissions, the image) it proceeds
    // (case-21: recovering needs no uninstall) — as long as it is still the plan its Subscription
    // points at.
    let blocked = current.phase == InstallPlanPhase::Failed
        && current.conditions.iter().any(|c| c.reason.as_ref().is_some_and(|r| RECHECKED_REASONS.contains(&r.as_str())));
    if blocked && !still_current(&ctx, &ip, &ns).await? {
        return Ok(Action::await_change());
    }
    if current.phase.is_terminal() && !blocked {
        return Ok(Action::await_change());
    }
    if current.bundle_lookups.is_empty() {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    if current.phase == InstallPlanPhase::RequiresApproval && !ip.spec.approved && !current.plan.is_empty() {
        return Ok(Action::await_change());
    }
    let mut status = serde_json::to_value(current).unwrap_or(json!({}));
    let mut rv = ip.resource_version();
    let (og, steps) = match plan_steps(&ctx, &api, &ip, &ns, &mut status, &mut rv).await? {
        Ok(s) => s,
        Err(h) => return hold(&ctx, &api, &ip, status, &[], h, blocked).await,
    };
    let listed = |status: &str| -> Vec<Value> { steps.iter().map(|(s, c)| step_json(s, (&c.0, &c.1), status)).collect() };
    // The steps inline every manifest (as OLM's do); past what etcd stores in one object the
    // status write would fail on every try with "request is too large" and the plan would stall
    // without a word. Say so once instead.
    if let Some(h) = oversized(&listed("Unknown")) {
        return hold(&ctx, &api, &ip, status, &[], h, blocked).await;
    }
    if !ip.spec.approved {
        status["phase"] = json!("RequiresApproval");
        status["plan"] = json!(listed("Unknown"));
        status["conditions"] = json!([]);
        status["message"] = json!("");
        apply_status(&api, &ip, status).await?;
        let note = format!("{} steps wait for approval: `capstan approve {name} -n {ns}` or set spec.approved=true", steps.len());
        events::publish_for(&ctx.client, &ip, EventType::Normal, "RequiresApproval", &note).await;
        return Ok(Action::await_change());
    }
    let plain: Vec<Step> = steps.iter().map(|(s, _)| s.clone()).collect();
    // An OperatorCondition Upgradeable=False on the CSV being replaced holds the upgrade (OLM
    // `isOperatorUpgradeable`); checked again like the other blocks until it clears (issue 13).
    for (csv_ns, replaced) in crate::install::operator_condition::replaced_csvs(&plain) {
        let may = crate::install::operator_condition::may_replace(&ctx.client, &csv_ns, &replaced).await.map_err(|e| Error::Kube { context: e.what, source: e.source })?;
        if let Err(message) = may {
            return block(&ctx, &api, &ip, status, &listed("NotCreated"), crate::install::operator_condition::NOT_UPGRADEABLE, message, blocked).await;
        }
    }
    let installer = match preflight(&ctx, &ns, &og, &plain).await? {
        Ok(i) => i,
        Err((reason, message)) => return block(&ctx, &api, &ip, status, &listed("NotCreated"), reason, message, blocked).await,
    };
    if blocked || current.conditions.iter().any(|c| c.reason.as_ref().is_some_and(|r| r.as_str() == INSTALL_RETRYING)) {
        tracing::info!(plan = %format!("{ns}/{name}"), "the checks before the first step pass now; applying the plan");
        status["message"] = json!("");
        status["conditions"] = json!([]);
    }
    // Claim the plan: Installing is written only if nobody changed the plan since the read above
    // (the resourceVersion is a precondition), so a plan is never applied twice at once.
    status["phase"] = json!("Installing");
    if status["startTime"].is_null() {
        status["startTime"] = json!(super::now());
    }
    status["plan"] = json!(listed("Unknown"));
    let claim = json!({"metadata": {"resourceVersion": rv}, "status": status});
    match api.patch_status(&name, &PatchParams { field_manager: Some(crate::install::FIELD_MANAGER.into()), ..Default::default() }, &Patch::Merge(&claim)).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Action::requeue(Duration::from_millis(200))),
        Err(e) => return Err(kube_err(format!("writing status of InstallPlan {ns}/{name}"))(e)),
    }
    execute(&ctx, &api, &ip, status, &steps, &installer).await
}

/// The checks before the first step: the CRD upgrade check (issue 6, case-21: every existing
/// object must fit the new schema and no stored version may disappear) and, for a scoped install
/// (issue 7, case-25), the OperatorGroup's ServiceAccount holding everything the plan needs.
/// Returns who applies the plan, or the blocking `(reason, message)`.
async fn preflight(ctx: &Context, ns: &str, og: &str, plain: &[Step]) -> Result<Result<scoped::Installer, (&'static str, String)>, Error> {
    if let Err(errors) = check_plan_crds(&ctx.client, plain).await {
        return Ok(Err((CRD_UPGRADE_BLOCKED, describe_all(&errors))));
    }
    let installer = match scoped::installer(ctx, ns, og).await? {
        Ok(i) => i,
        Err(message) => return Ok(Err((INSTALLER_BLOCKED, message))),
    };
    if let scoped::Installer::ServiceAccount { account, name: sa, .. } = &installer {
        let missing = scoped::missing_permissions(&ctx.client, ns, sa, plain).await?;
        if !missing.is_empty() {
            let list: Vec<String> = missing.iter().enumerate().map(|(i, m)| format!("({}) {m}", i + 1)).collect();
            let message = format!(
                "the installer account {account} (OperatorGroup {ns}/{og} spec.serviceAccountName) lacks {} permission{} needed by this plan; nothing was applied: {}; grant them to {account}",
                missing.len(),
                if missing.len() == 1 { "" } else { "s" },
                list.join("; ")
            );
            return Ok(Err((INSTALLER_BLOCKED, message)));
        }
    }
    Ok(Ok(installer))
}

/// Applies a claimed plan and writes the outcome: `Complete`, or the [`Hold`] of its first failed
/// step ([`step_hold`]).
async fn execute(ctx: &Context, api: &Api<InstallPlan>, ip: &InstallPlan, mut status: Value, steps: &[(Step, (String, String))], installer: &scoped::Installer) -> Result<Action, Error> {
    let (ns, name) = (ip.namespace().unwrap_or_default(), ip.name_any());
    let plain: Vec<Step> = steps.iter().map(|(s, _)| s.clone()).collect();
    tracing::info!(plan = %format!("{ns}/{name}"), steps = plain.len(), "applying InstallPlan");
    events::publish_for(&ctx.client, ip, EventType::Normal, "Installing", &format!("applying {} steps for {}", plain.len(), ip.spec.cluster_service_version_names.join(", "))).await;
    let started = std::time::Instant::now();
    let apply_client = match installer {
        scoped::Installer::ServiceAccount { client, .. } => client.clone(),
        scoped::Installer::Controller => ctx.client.clone(),
    };
    let results = apply(&apply_client, &plain, &ApplyOptions::default()).await;
    let mut failed: Option<Hold> = None;
    let plan_status: Vec<Value> = steps
        .iter()
        .zip(results.iter())
        .map(|((s, c), r)| {
            let st = match &r.status {
                StepStatus::Created => "Created",
                StepStatus::Present { .. } => "Present",
                StepStatus::Failed(e) => {
                    failed.get_or_insert_with(|| step_hold(e, format!("step {} ({}) failed: {r}", r.index + 1, s.describe())));
                    "NotCreated"
                }
                StepStatus::NotApplied { .. } => "NotCreated",
            };
            step_json(s, (&c.0, &c.1), st)
        })
        .collect();
    if failed.is_none() && results.len() < steps.len() {
        failed = Some(Hold::Fail("InstallComponentFailed", format!("only {} of {} steps were applied", results.len(), steps.len())));
    }
    crate::metrics::global().observe_install(started.elapsed(), if failed.is_some() { "failed" } else { "succeeded" });
    if let Some(h) = failed {
        return hold(ctx, api, ip, status, &plan_status, h, false).await;
    }
    ctx.plan_retries.lock().unwrap_or_else(|e| e.into_inner()).remove(&(ns.clone(), name.clone()));
    let now = super::now();
    status["plan"] = json!(plan_status);
    status["phase"] = json!("Complete");
    status["message"] = json!("");
    status["conditions"] = json!([{"type": "Installed", "status": "True", "lastUpdateTime": now, "lastTransitionTime": now}]);
    apply_status(api, ip, status).await?;
    events::publish_for(&ctx.client, ip, EventType::Normal, "Complete", &format!("applied {} steps", plain.len())).await;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(csv: &str, image: &str) -> (String, String) {
        (csv.into(), image.into())
    }

    #[test]
    fn plan_name_is_deterministic_and_order_independent() {
        let a = install_plan_name("sub", &[b("b.v1", "r/b@sha256:1"), b("a.v1", "r/a@sha256:1")], "");
        assert_eq!(a, install_plan_name("sub", &[b("a.v1", "r/a@sha256:1"), b("b.v1", "r/b@sha256:1")], ""));
        assert_ne!(a, install_plan_name("other", &[b("a.v1", "r/a@sha256:1"), b("b.v1", "r/b@sha256:1")], ""));
        assert_ne!(a, install_plan_name("sub", &[b("a.v1", "r/a@sha256:1")], ""));
        assert!(a.starts_with("install-") && a.len() == "install-".len() + 10);
    }

    #[test]
    fn changed_inputs_get_a_new_plan_name() {
        let base = install_plan_name("sub", &[b("a.v1", "r/a@sha256:1")], "");
        assert_ne!(base, install_plan_name("sub", &[b("a.v1", "r/a@sha256:2")], ""), "a re-published bundle");
        assert_ne!(base, install_plan_name("sub", &[b("a.v1", "r/a@sha256:1")], r#"{"env":[]}"#), "a changed spec.config");
    }
}
