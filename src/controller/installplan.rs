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
use crate::install::{ApplyOptions, InstallTarget, Step, StepStatus, SubscriptionConfig, apply, plan};
use crate::oci::cache::ScratchDir;
use crate::oci::parse_reference;

/// The InstallPlan name for `subscription` installing `csv_names`: `install-` and the first 10 hex
/// digits of a SHA-256 over both, so that the same resolution always maps to the same plan (a
/// restart never creates a second one).
pub fn install_plan_name(subscription: &str, csv_names: &[String]) -> String {
    let mut names = csv_names.to_vec();
    names.sort();
    let mut h = Sha256::new();
    h.update(subscription.as_bytes());
    for n in &names {
        h.update([0]);
        h.update(n.as_bytes());
    }
    format!("install-{}", &hex::encode(h.finalize())[..10])
}

/// Condition reason of a plan refused by the CRD upgrade check ([`check_plan_crds`]); such a plan
/// is checked again every [`CRD_RECHECK`] and applied once the check passes.
pub const CRD_UPGRADE_BLOCKED: &str = "CRDUpgradeBlocked";
/// Condition reason of a plan whose installer ServiceAccount is missing or lacks permissions;
/// checked again every [`CRD_RECHECK`] like [`CRD_UPGRADE_BLOCKED`].
pub const INSTALLER_BLOCKED: &str = "InstallerPermissionsMissing";

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

/// Pulls every bundle of the plan and plans its steps; also returns the namespace's OperatorGroup
/// name. `Err` is a message naming the bundle.
#[allow(clippy::type_complexity)]
async fn plan_steps(ctx: &Context, ip: &InstallPlan, ns: &str) -> Result<Result<(String, Vec<(Step, (String, String))>), String>, Error> {
    let (og, targets) = match operator_group_targets(&ctx.client, ns).await? {
        Ok(t) => t,
        Err((reason, message)) => return Ok(Err(format!("{reason}: {message}"))),
    };
    // The owning Subscription's spec.config goes into its own package's Deployments (§1.3).
    let sub = match ip.owner_references().iter().find(|o| o.kind == "Subscription") {
        Some(o) => Api::<Subscription>::namespaced(ctx.client.clone(), ns).get_opt(&o.name).await.ok().flatten(),
        None => None,
    };
    let mut out = Vec::new();
    for lookup in ip.status.iter().flat_map(|s| s.bundle_lookups.iter()) {
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
            Err(e) => return Ok(Err(at(e))),
        };
        let reference = match parse_reference(&lookup.path) {
            Ok(r) => r,
            Err(e) => return Ok(Err(at(format!("the image reference is invalid: {e}")))),
        };
        let dir = match ScratchDir::new("capstan-bundle") {
            Ok(d) => d,
            Err(e) => return Ok(Err(at(e.to_string()))),
        };
        if let Err(e) = crate::bundle::image::pull_bundle(&registry, &reference, dir.path()).await {
            return Ok(Err(at(format!("pulling the bundle image failed: {e}"))));
        }
        let bundle = match Bundle::load(dir.path()) {
            Ok(b) => b,
            Err(e) => return Ok(Err(at(format!("the bundle is invalid: {e}")))),
        };
        let modes: Vec<(String, bool)> = bundle.csv().install_modes().into_iter().map(|m| (m.type_, m.supported)).collect();
        if let Err(e) = check_install_mode(ns, &targets, &modes) {
            return Ok(Err(at(format!("{}: {}", e.reason, e.message))));
        }
        let config = match sub.as_ref().filter(|s| s.spec.package == bundle.package()).and_then(|s| s.spec.config.as_ref()) {
            Some(c) => match serde_json::to_value(c).map_err(|e| e.to_string()).and_then(|v| SubscriptionConfig::from_value(&v).map_err(|e| e.to_string())) {
                Ok(c) => c,
                Err(e) => return Ok(Err(format!("Subscription spec.config: {e}"))),
            },
            None => SubscriptionConfig::default(),
        };
        let properties: Vec<Value> = lookup
            .properties
            .as_deref()
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
            .and_then(|v| v["properties"].as_array().cloned())
            .unwrap_or_default();
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
            Err(e) => return Ok(Err(at(e.to_string()))),
        }
    }
    Ok(Ok((og, out)))
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
    // A plan refused by the CRD upgrade check is looked at again: once the objects are fixed or the
    // stored versions migrated, it proceeds (case-21: recovering needs no uninstall) — as long as
    // it is still the plan its Subscription points at.
    let blocked = current.phase == InstallPlanPhase::Failed
        && current.conditions.iter().any(|c| c.reason.as_ref().is_some_and(|r| r.as_str() == CRD_UPGRADE_BLOCKED || r.as_str() == INSTALLER_BLOCKED));
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
    let (og, steps) = match plan_steps(&ctx, &ip, &ns).await? {
        Ok(s) => s,
        Err(message) => {
            tracing::warn!(plan = %format!("{ns}/{name}"), %message, "InstallPlan failed");
            status["phase"] = json!("Failed");
            status["message"] = json!(message);
            status["conditions"] = json!([{"type": "Installed", "status": "False", "reason": "InstallCheckFailed", "message": message, "lastUpdateTime": super::now(), "lastTransitionTime": super::now()}]);
            apply_status(&api, &ip, status).await?;
            return Ok(Action::await_change());
        }
    };
    let listed = |status: &str| -> Vec<Value> { steps.iter().map(|(s, c)| step_json(s, (&c.0, &c.1), status)).collect() };
    if !ip.spec.approved {
        status["phase"] = json!("RequiresApproval");
        status["plan"] = json!(listed("Unknown"));
        apply_status(&api, &ip, status).await?;
        let note = format!("{} steps wait for approval: `capstan approve {name} -n {ns}` or set spec.approved=true", steps.len());
        events::publish_for(&ctx.client, &ip, EventType::Normal, "RequiresApproval", &note).await;
        return Ok(Action::await_change());
    }
    // CRD upgrade safety (issue 6, case-21): before any step, every existing object must fit the
    // new schema and no stored version may disappear; otherwise nothing is applied.
    let plain: Vec<Step> = steps.iter().map(|(s, _)| s.clone()).collect();
    if let Err(errors) = check_plan_crds(&ctx.client, &plain).await {
        return block(&ctx, &api, &ip, status, &listed("NotCreated"), CRD_UPGRADE_BLOCKED, describe_all(&errors), blocked).await;
    }
    // Scoped installs (issue 7, case-25): the OperatorGroup's ServiceAccount applies the plan, and
    // must hold everything the plan needs before the first step.
    let installer = match scoped::installer(&ctx, &ns, &og).await? {
        Ok(i) => i,
        Err(message) => return block(&ctx, &api, &ip, status, &listed("NotCreated"), INSTALLER_BLOCKED, message, blocked).await,
    };
    if let scoped::Installer::ServiceAccount { account, name: sa, .. } = &installer {
        let missing = scoped::missing_permissions(&ctx.client, &ns, sa, &plain).await?;
        if !missing.is_empty() {
            let list: Vec<String> = missing.iter().enumerate().map(|(i, m)| format!("({}) {m}", i + 1)).collect();
            let message = format!(
                "the installer account {account} (OperatorGroup {ns}/{og} spec.serviceAccountName) lacks {} permission{} needed by this plan; nothing was applied: {}; grant them to {account}",
                missing.len(),
                if missing.len() == 1 { "" } else { "s" },
                list.join("; ")
            );
            return block(&ctx, &api, &ip, status, &listed("NotCreated"), INSTALLER_BLOCKED, message, blocked).await;
        }
    }
    if blocked {
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
    let claim = json!({"metadata": {"resourceVersion": ip.resource_version()}, "status": status});
    match api.patch_status(&name, &PatchParams { field_manager: Some(crate::install::FIELD_MANAGER.into()), ..Default::default() }, &Patch::Merge(&claim)).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Action::requeue(Duration::from_millis(200))),
        Err(e) => return Err(kube_err(format!("writing status of InstallPlan {ns}/{name}"))(e)),
    }

    tracing::info!(plan = %format!("{ns}/{name}"), steps = plain.len(), "applying InstallPlan");
    events::publish_for(&ctx.client, &ip, EventType::Normal, "Installing", &format!("applying {} steps for {}", plain.len(), ip.spec.cluster_service_version_names.join(", "))).await;
    let started = std::time::Instant::now();
    let apply_client = match &installer {
        scoped::Installer::ServiceAccount { client, .. } => client.clone(),
        scoped::Installer::Controller => ctx.client.clone(),
    };
    let results = apply(&apply_client, &plain, &ApplyOptions::default()).await;
    let mut failed = None;
    let plan_status: Vec<Value> = steps
        .iter()
        .zip(results.iter())
        .map(|((s, c), r)| {
            let st = match &r.status {
                StepStatus::Created => "Created",
                StepStatus::Present { .. } => "Present",
                StepStatus::Failed(_) => {
                    failed.get_or_insert_with(|| format!("step {} ({}) failed: {r}", r.index + 1, s.describe()));
                    "NotCreated"
                }
                StepStatus::NotApplied { .. } => "NotCreated",
            };
            step_json(s, (&c.0, &c.1), st)
        })
        .collect();
    if failed.is_none() && results.len() < steps.len() {
        failed = Some(format!("only {} of {} steps were applied", results.len(), steps.len()));
    }
    status["plan"] = json!(plan_status);
    let now = super::now();
    match &failed {
        Some(message) => {
            tracing::warn!(plan = %format!("{ns}/{name}"), %message, "InstallPlan failed");
            status["phase"] = json!("Failed");
            status["message"] = json!(message);
            status["conditions"] = json!([{"type": "Installed", "status": "False", "reason": "InstallComponentFailed", "message": message, "lastUpdateTime": now, "lastTransitionTime": now}]);
        }
        None => {
            status["phase"] = json!("Complete");
            status["conditions"] = json!([{"type": "Installed", "status": "True", "lastUpdateTime": now, "lastTransitionTime": now}]);
        }
    }
    apply_status(&api, &ip, status).await?;
    crate::metrics::global().observe_install(started.elapsed(), if failed.is_some() { "failed" } else { "succeeded" });
    match &failed {
        Some(message) => events::publish_for(&ctx.client, &ip, EventType::Warning, "InstallFailed", message).await,
        None => events::publish_for(&ctx.client, &ip, EventType::Normal, "Complete", &format!("applied {} steps", plain.len())).await,
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_name_is_deterministic_and_order_independent() {
        let a = install_plan_name("sub", &["b.v1".into(), "a.v1".into()]);
        assert_eq!(a, install_plan_name("sub", &["a.v1".into(), "b.v1".into()]));
        assert_ne!(a, install_plan_name("other", &["a.v1".into(), "b.v1".into()]));
        assert_ne!(a, install_plan_name("sub", &["a.v1".into()]));
        assert!(a.starts_with("install-") && a.len() == "install-".len() + 10);
    }
}
