//! Subscription reconciler (`reference/olm-v0.md` §1.3): resolves the Subscription against the
//! catalogs its namespace can see and the CSVs installed there, and creates one InstallPlan per
//! resolution. Status: `state` (UpgradePending / AtLatestKnown / UpgradeFailed), `currentCSV`,
//! `installedCSV`, `installPlanRef`, `installplan`, `catalogHealth`, conditions
//! `CatalogSourcesUnhealthy`, `ResolutionFailed`, `InstallPlanPending`, `InstallPlanFailed`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::events::{self, EventType};
use super::{Context, Error, apply_status, installplan::install_plan_name, kube_err, now};
use crate::api::installplan::InstallPlanPhase;
use crate::api::subscription::reason;
use crate::api::{Approval, CatalogSource, ClusterServiceVersion, InstallPlan, Subscription};
use crate::resolve::{CatalogInput, CatalogSourceKey, InstalledBundle, Reason, ResolveInput, SubscriptionRequest, resolve};

/// Sets condition `type_` in `status.conditions` (a JSON array), keeping `lastTransitionTime` when
/// the status value does not change.
pub(crate) fn set_condition(status: &mut Value, type_: &str, value: &str, reason: &str, message: &str) {
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let Some(list) = status["conditions"].as_array_mut() else { return };
    let now = now();
    let existing = list.iter_mut().find(|c| c["type"] == type_);
    match existing {
        Some(c) => {
            if c["status"] != value {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(value);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
            c["lastHeartbeatTime"] = json!(now);
        }
        None => list.push(json!({
            "type": type_, "status": value, "reason": reason, "message": message,
            "lastTransitionTime": now, "lastHeartbeatTime": now,
        })),
    }
}

/// Removes condition `type_` from `status.conditions`.
pub(crate) fn remove_condition(status: &mut Value, type_: &str) {
    if let Some(list) = status["conditions"].as_array_mut() {
        list.retain(|c| c["type"] != type_);
    }
}

pub(super) async fn reconcile(sub: Arc<Subscription>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Uninstall on deletion, when the Subscription asks for it (issue 6, `removal.rs`).
    if let Some(action) = super::removal::reconcile_subscription(&sub, &ctx).await? {
        return Ok(action);
    }
    let ns = sub.namespace().unwrap_or_default();
    let name = sub.name_any();
    let subs: Api<Subscription> = Api::namespaced(ctx.client.clone(), &ns);
    // Decide on a fresh read: the watch cache may lag behind this controller's own status writes.
    let Some(sub) = subs.get_opt(&name).await.map_err(kube_err(format!("reading Subscription {ns}/{name}")))? else {
        return Ok(Action::await_change());
    };
    let mut status = serde_json::to_value(&sub.status).unwrap_or(Value::Null);
    if !status.is_object() {
        status = json!({});
    }
    status["lastUpdated"] = json!(now());

    // Catalogs visible to the namespace: its own and the global catalog namespace (§1.2). Only
    // CatalogSources that still exist count (a deleted one stays in the Context until then).
    let global = ctx.options.global_catalog_namespace.clone();
    let mut existing = std::collections::BTreeSet::new();
    for cns in [ns.clone(), global.clone()] {
        let list = Api::<CatalogSource>::namespaced(ctx.client.clone(), &cns)
            .list(&ListParams::default())
            .await
            .map_err(kube_err(format!("listing CatalogSources in {cns}")))?;
        existing.extend(list.items.iter().map(|c| (cns.clone(), c.name_any())));
    }
    let mut catalogs = Vec::new();
    {
        let map = ctx.catalogs.lock().unwrap_or_else(|e| e.into_inner());
        for (key, l) in map.iter() {
            if existing.contains(key) {
                catalogs.push(CatalogInput { key: CatalogSourceKey::new(&key.0, &key.1), priority: l.priority, index: l.index.clone() });
            }
        }
    }
    catalogs.sort_by(|a, b| (&a.key.namespace, &a.key.name).cmp(&(&b.key.namespace, &b.key.name)));
    let unhealthy: Vec<((String, String), String)> = {
        let errors = ctx.catalog_errors.lock().unwrap_or_else(|e| e.into_inner());
        existing.iter().filter_map(|k| errors.get(k).map(|e| (k.clone(), e.clone()))).collect()
    };

    // Catalog health (§1.3): every visible CatalogSource, healthy when loaded.
    let source_ns = sub.spec.source_namespace.clone();
    let source = sub.spec.source.clone();
    let source_key = (source_ns.clone(), source.clone());
    let ref_of = |k: &(String, String)| json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource", "namespace": k.0, "name": k.1});
    let mut health = Vec::new();
    for c in &catalogs {
        health.push(json!({"catalogSourceRef": ref_of(&(c.key.namespace.clone(), c.key.name.clone())), "healthy": true, "lastUpdated": now()}));
    }
    for (k, _) in &unhealthy {
        health.push(json!({"catalogSourceRef": ref_of(k), "healthy": false, "lastUpdated": now()}));
    }
    let loaded = catalogs.iter().any(|c| c.key.namespace == source_ns && c.key.name == source);
    let source_failed = unhealthy.iter().any(|(k, _)| *k == source_key);
    if existing.contains(&source_key) && !loaded && !source_failed {
        // Not loaded yet: wait for the CatalogSource reconciler, which resyncs Subscriptions.
        set_condition(&mut status, "CatalogSourcesUnhealthy", "True", reason::UNHEALTHY_CATALOG_SOURCE_FOUND, &format!("catalog source {source_ns}/{source} is being loaded"));
        status["catalogHealth"] = json!(health);
        apply_status(&subs, &sub, status).await?;
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    if unhealthy.is_empty() {
        set_condition(&mut status, "CatalogSourcesUnhealthy", "False", reason::ALL_CATALOG_SOURCES_HEALTHY, "all available catalogsources are healthy");
    } else {
        let list: Vec<String> = unhealthy.iter().map(|((n, c), e)| format!("catalog source {n}/{c}: {e}")).collect();
        set_condition(&mut status, "CatalogSourcesUnhealthy", "True", reason::UNHEALTHY_CATALOG_SOURCE_FOUND, &list.join("; "));
    }
    status["catalogHealth"] = json!(health);
    // The Subscription's own catalog cannot be loaded: resolution is deferred until it can; what
    // is installed stays as it is (case-27).
    if source_failed {
        let why = unhealthy.iter().find(|(k, _)| *k == source_key).map(|(_, e)| e.clone()).unwrap_or_default();
        let message = format!(
            "catalog source {source_ns}/{source} (spec.source) cannot be loaded, so Subscription {name} is not resolved: {why}; fix spec.image or spec.secrets of CatalogSource {source_ns}/{source}; capstan retries every 30 s and keeps what is installed"
        );
        // With an installed CSV nothing is unresolved: the catalog is (case-27). Say that in the
        // catalog condition and leave the install reported as it is.
        let kept = match status["installedCSV"].as_str().filter(|c| !c.is_empty()) {
            Some(c) => Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), &ns)
                .get_opt(c)
                .await
                .map_err(kube_err(format!("reading ClusterServiceVersion {ns}/{c}")))?
                .map(|_| c.to_string()),
            None => None,
        };
        match kept {
            Some(csv) => {
                let message = format!(
                    "catalog source {source_ns}/{source} (spec.source) cannot be loaded: {why}; resolution of Subscription {name} is deferred and retried every 30 s; the installed {csv} is kept as it is"
                );
                set_condition(&mut status, "CatalogSourcesUnhealthy", "True", reason::UNHEALTHY_CATALOG_SOURCE_FOUND, &message);
                remove_condition(&mut status, "ResolutionFailed");
            }
            None => set_condition(&mut status, "ResolutionFailed", "True", reason::ERROR_PREVENTED_RESOLUTION, &message),
        }
        apply_status(&subs, &sub, status).await?;
        return Ok(Action::requeue(Duration::from_secs(30)));
    }

    // Installed CSVs of the namespace.
    let csvs = Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing ClusterServiceVersions in {ns}")))?;
    let installed: Vec<InstalledBundle> = csvs
        .items
        .iter()
        .map(|c| InstalledBundle::from_csv(&ns, &c.name_any(), c.annotations().get(crate::install::ANNOTATION_PROPERTIES).map(String::as_str), c.spec.version.as_deref()))
        .collect();

    // Every Subscription of the namespace is resolved together (one bundle per package, §4.6).
    let all_subs = subs.list(&ListParams::default()).await.map_err(kube_err(format!("listing Subscriptions in {ns}")))?;
    // `status.installedCSV` only counts while that CSV exists (after an upgrade it names the
    // replaced one until this reconcile rewrites it); otherwise the package's installed CSV is used.
    let requests: Vec<SubscriptionRequest> = all_subs
        .items
        .iter()
        .map(request_of)
        .map(|mut r| {
            r.installed_csv = r.installed_csv.filter(|c| installed.iter().any(|i| i.name == *c));
            r
        })
        .collect();
    let started = std::time::Instant::now();
    let out = resolve(&ResolveInput { catalogs, installed: installed.clone(), subscriptions: requests });
    crate::metrics::global().observe_resolution(started.elapsed());

    if let Some(err) = out.errors.iter().find(|e| e.subscription == name) {
        let why = if err.message.contains("requires") || err.message.contains("conflict") { reason::CONSTRAINTS_NOT_SATISFIABLE } else { reason::ERROR_PREVENTED_RESOLUTION };
        let was = sub.status.as_ref().and_then(|s| serde_json::to_value(s).ok()).and_then(|v| {
            v["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "ResolutionFailed" && c["status"] == "True").map(|c| c["message"].clone()))
        });
        set_condition(&mut status, "ResolutionFailed", "True", why, &err.message);
        apply_status(&subs, &sub, status).await?;
        if was.as_ref().and_then(|m| m.as_str()) != Some(err.message.as_str()) {
            events::publish_for(&ctx.client, &sub, EventType::Warning, "ResolutionFailed", &err.message).await;
        }
        return Ok(Action::requeue(Duration::from_secs(60)));
    }
    remove_condition(&mut status, "ResolutionFailed");

    let mine: Vec<_> = out.resolved.iter().filter(|b| b.subscription == name && b.namespace == ns).collect();
    let own = mine.iter().find(|b| b.package == sub.spec.package);
    if let Some(own) = own {
        status["currentCSV"] = json!(own.bundle);
    }
    let is_installed = |csv: &str| installed.iter().any(|i| i.name == csv);
    if let Some(own) = own
        && is_installed(&own.bundle)
    {
        status["installedCSV"] = json!(own.bundle);
    } else if !status["installedCSV"].as_str().is_some_and(is_installed) {
        // An upgrade is pending (e.g. waiting for approval): as in OLM, installedCSV names what is
        // installed of the package meanwhile, currentCSV the upgrade (issue 13).
        let mut of_package = installed.iter().filter(|i| i.package.as_deref() == Some(sub.spec.package.as_str()));
        if let (Some(i), None) = (of_package.next(), of_package.next()) {
            status["installedCSV"] = json!(i.name);
        }
    }
    let to_install: Vec<_> = mine
        .iter()
        .filter(|b| !matches!(b.reason, Reason::Installed { .. } | Reason::Dependency { already_installed: true, .. }) && !is_installed(&b.bundle))
        .collect();

    if to_install.is_empty() {
        status["state"] = json!("AtLatestKnown");
        remove_condition(&mut status, "InstallPlanPending");
        remove_condition(&mut status, "InstallPlanMissing");
        remove_condition(&mut status, "InstallPlanFailed");
        apply_status(&subs, &sub, status).await?;
        prune_plans(&ctx, &ns, &name).await?;
        return Ok(Action::requeue(Duration::from_secs(300)));
    }

    // One InstallPlan per resolution, named after what it installs (a restart never duplicates it).
    let csv_names: Vec<String> = to_install.iter().map(|b| b.bundle.clone()).collect();
    let bundles: Vec<(String, String)> = to_install.iter().map(|b| (b.bundle.clone(), b.image.clone())).collect();
    let config = sub.spec.config.as_ref().and_then(|c| serde_json::to_string(c).ok()).unwrap_or_default();
    let plan_name = install_plan_name(&name, &bundles, &config);
    let plans: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), &ns);
    let approval = sub.spec.install_plan_approval.unwrap_or(Approval::Automatic);
    let mut existing_plan = plans.get_opt(&plan_name).await.map_err(kube_err(format!("reading InstallPlan {ns}/{plan_name}")))?;
    // The same resolution's plan completed, yet its CSVs are not installed: they were deleted.
    // As OLM does, install them again — with a fresh plan, since the Complete one is done.
    if let Some(done) = existing_plan.as_ref().filter(|p| p.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::Complete)) {
        let message = format!("InstallPlan {plan_name} completed, but {} no longer exists; capstan installs it again with a new InstallPlan", csv_names.join(", "));
        tracing::info!(subscription = %format!("{ns}/{name}"), plan = %plan_name, "{message}");
        events::publish_for(&ctx.client, &sub, EventType::Normal, "Reinstalling", &message).await;
        let pre = kube::api::DeleteParams { preconditions: Some(kube::api::Preconditions { uid: done.uid(), resource_version: None }), ..Default::default() };
        match plans.delete(&plan_name, &pre).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(kube_err(format!("deleting completed InstallPlan {ns}/{plan_name}"))(e)),
        }
        existing_plan = None;
    }
    // The plan in status.installPlanRef comes first (§5, issue 6 "approval flows"): while it is
    // being applied, CSVs appear one by one and a resolution now would ask for the rest in a
    // second plan, so wait for it. A plan still waiting for approval that the resolution no longer
    // matches (a newer bundle supersedes it) is marked Failed with the reason, so that approving
    // it later cannot install what was skipped, and a new plan replaces it.
    let mut superseded = None;
    if let Some(prior) = status["installPlanRef"]["name"].as_str().filter(|p| *p != plan_name).map(String::from)
        && let Some(pp) = plans.get_opt(&prior).await.map_err(kube_err(format!("reading InstallPlan {ns}/{prior}")))?
    {
        let phase = pp.status.as_ref().map(|s| s.phase.clone()).unwrap_or(InstallPlanPhase::Planning);
        let waiting_for_approval = phase == InstallPlanPhase::RequiresApproval && !pp.spec.approved;
        if !phase.is_terminal() && !waiting_for_approval {
            let phase_name = serde_json::to_value(&phase).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
            status["state"] = json!("UpgradePending");
            set_condition(&mut status, "InstallPlanPending", "True", &phase_name, &format!("InstallPlan {prior} is {phase_name}; the next resolution waits for it"));
            apply_status(&subs, &sub, status).await?;
            return Ok(Action::requeue(Duration::from_secs(2)));
        }
        if waiting_for_approval {
            let message = format!(
                "superseded by InstallPlan {plan_name} ({}): the catalog now resolves Subscription {name} differently; approve {plan_name} instead",
                csv_names.join(", ")
            );
            let mark = json!({
                "metadata": {"resourceVersion": pp.resource_version()},
                "status": {"phase": "Failed", "message": message,
                           "conditions": [{"type": "Installed", "status": "False", "reason": "Superseded", "message": message, "lastUpdateTime": now(), "lastTransitionTime": now()}]},
            });
            let pparams = kube::api::PatchParams { field_manager: Some(crate::install::FIELD_MANAGER.into()), ..Default::default() };
            match plans.patch_status(&prior, &pparams, &kube::api::Patch::Merge(&mark)).await {
                Ok(_) => {
                    tracing::info!(subscription = %format!("{ns}/{name}"), superseded = %prior, by = %plan_name, "pending InstallPlan superseded");
                    events::publish_for(&ctx.client, &pp, EventType::Warning, "Superseded", &message).await;
                }
                // Approved or changed meanwhile: decide again on a fresh read.
                Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Action::requeue(Duration::from_millis(200))),
                Err(e) => return Err(kube_err(format!("marking InstallPlan {ns}/{prior} superseded"))(e)),
            }
            superseded = Some(prior);
        }
    }
    // InstallPlanMissing (§1.3): the plan named in status.installPlanRef is gone (deleted by hand,
    // or pruned). It is recreated from the current resolution below; the condition says so.
    let prior = status["installPlanRef"]["name"].as_str().map(String::from);
    let prior_missing = match &prior {
        Some(p) if *p == plan_name => existing_plan.is_none(),
        Some(p) => plans.get_opt(p).await.map_err(kube_err(format!("reading InstallPlan {ns}/{p}")))?.is_none(),
        None => false,
    };
    if let Some(p) = prior.as_ref().filter(|_| prior_missing) {
        set_condition(
            &mut status,
            "InstallPlanMissing",
            "True",
            reason::REFERENCED_INSTALL_PLAN_NOT_FOUND,
            &format!("InstallPlan {ns}/{p} referenced by status.installPlanRef was not found; capstan creates InstallPlan {plan_name} for {} from the current resolution", csv_names.join(", ")),
        );
    } else if existing_plan.is_some() {
        remove_condition(&mut status, "InstallPlanMissing");
    }
    let plan = match existing_plan {
        Some(p) => p,
        None => {
            let owner = OwnerReference {
                api_version: Subscription::api_version(&()).into_owned(),
                kind: Subscription::kind(&()).into_owned(),
                name: name.clone(),
                uid: sub.uid().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(false),
            };
            let ip: InstallPlan = serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": plan_name, "namespace": ns, "ownerReferences": [owner],
                             "labels": {"operators.coreos.com/subscription": name}},
                "spec": {
                    "clusterServiceVersionNames": csv_names,
                    "approval": approval,
                    "approved": approval == Approval::Automatic,
                    "generation": 1,
                    "source": source, "sourceNamespace": source_ns,
                },
            }))
            .map_err(|e| Error::Kube { context: format!("building InstallPlan {plan_name}"), source: kube::Error::SerdeError(e) })?;
            tracing::info!(subscription = %format!("{ns}/{name}"), plan = %plan_name, csvs = ?csv_names, "creating InstallPlan");
            match plans.create(&PostParams::default(), &ip).await {
                Ok(p) => {
                    let note = format!("InstallPlan {plan_name} created for {} ({approval:?} approval)", csv_names.join(", "));
                    events::publish_for(&ctx.client, &sub, EventType::Normal, "InstallPlanCreated", &note).await;
                    p
                }
                Err(kube::Error::Api(s)) if s.code == 409 => plans.get(&plan_name).await.map_err(kube_err(format!("reading InstallPlan {ns}/{plan_name}")))?,
                Err(e) => return Err(kube_err(format!("creating InstallPlan {ns}/{plan_name}"))(e)),
            }
        }
    };
    // Approval is per Subscription: switching it to Automatic approves its pending plan.
    if approval == Approval::Automatic
        && !plan.spec.approved
        && plan.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::RequiresApproval)
    {
        let approve = json!({"metadata": {"resourceVersion": plan.resource_version()}, "spec": {"approved": true, "approval": "Automatic"}});
        match plans.patch(&plan_name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&approve)).await {
            Ok(_) => tracing::info!(subscription = %format!("{ns}/{name}"), plan = %plan_name, "approved: the Subscription's installPlanApproval is Automatic"),
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Action::requeue(Duration::from_millis(200))),
            Err(e) => return Err(kube_err(format!("approving InstallPlan {ns}/{plan_name}"))(e)),
        }
    }
    // The plan's bundle lookups tell the InstallPlan reconciler where each bundle comes from.
    if plan.status.as_ref().is_none_or(|s| s.bundle_lookups.is_empty()) {
        let lookups: Vec<Value> = to_install
            .iter()
            .map(|b| {
                let (cns, cname) = b.catalog.as_ref().map(|c| (c.namespace.clone(), c.name.clone())).unwrap_or_default();
                let replaces = match &b.reason {
                    Reason::Upgrade { from } => from.clone(),
                    _ => String::new(),
                };
                json!({
                    "path": b.image, "identifier": b.bundle, "replaces": replaces,
                    "catalogSourceRef": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource", "namespace": cns, "name": cname},
                    "properties": bundle_properties(&ctx, b).to_string(),
                })
            })
            .collect();
        let catalog_sources: Vec<String> = {
            let mut v: Vec<String> = to_install.iter().filter_map(|b| b.catalog.as_ref().map(|c| c.name.clone())).collect();
            v.sort();
            v.dedup();
            v
        };
        apply_status(&plans, &plan, json!({"phase": "Planning", "catalogSources": catalog_sources, "bundleLookups": lookups, "plan": []})).await?;
    }
    let plan_ref = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "namespace": ns, "name": plan_name,
        "uid": plan.uid().unwrap_or_default(), "resourceVersion": plan.resource_version().unwrap_or_default(),
    });
    status["installPlanRef"] = plan_ref;
    status["installplan"] = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "name": plan_name, "uuid": plan.uid().unwrap_or_default()});
    status["installPlanGeneration"] = json!(1);
    let phase = plan.status.as_ref().map(|s| s.phase.clone()).unwrap_or(InstallPlanPhase::Planning);
    let phase_name = serde_json::to_value(&phase).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
    match phase {
        InstallPlanPhase::Failed => {
            let message = plan.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_else(|| format!("InstallPlan {plan_name} failed"));
            status["state"] = json!("UpgradeFailed");
            remove_condition(&mut status, "InstallPlanPending");
            set_condition(&mut status, "InstallPlanFailed", "True", reason::INSTALL_PLAN_FAILED, &message);
        }
        _ => {
            status["state"] = json!("UpgradePending");
            remove_condition(&mut status, "InstallPlanFailed");
            let mut message = if phase == InstallPlanPhase::RequiresApproval {
                format!("InstallPlan {plan_name} requires approval: `capstan approve {plan_name} -n {ns}` or set spec.approved=true")
            } else {
                format!("InstallPlan {plan_name} is {phase_name}")
            };
            // A plan held by a transient error says why in its Installed condition: show it here.
            if let Some(why) = plan.status.as_ref().and_then(|s| {
                s.conditions.iter().find(|c| c.reason.as_ref().is_some_and(|r| r.as_str() == super::installplan::INSTALL_RETRYING)).and_then(|c| c.message.clone())
            }) {
                message = format!("{message}: {why}");
            }
            if let Some(old) = &superseded {
                message = format!("{message}; it supersedes InstallPlan {old}, which can no longer be approved");
            }
            set_condition(&mut status, "InstallPlanPending", "True", &phase_name, &message);
        }
    }
    apply_status(&subs, &sub, status).await?;
    Ok(Action::requeue(Duration::from_secs(if phase == InstallPlanPhase::Complete { 1 } else { 10 })))
}

/// How many terminal (Complete or Failed) InstallPlans are kept per Subscription; older ones are
/// deleted once the Subscription is AtLatestKnown (OLM keeps a bounded history the same way).
pub const KEEP_PLANS: usize = 5;

/// Deletes the Subscription's terminal InstallPlans (label `operators.coreos.com/subscription`)
/// beyond the newest [`KEEP_PLANS`], oldest first.
async fn prune_plans(ctx: &Context, ns: &str, sub: &str) -> Result<(), Error> {
    let api: Api<InstallPlan> = Api::namespaced(ctx.client.clone(), ns);
    let list = api
        .list(&ListParams::default().labels(&format!("operators.coreos.com/subscription={sub}")))
        .await
        .map_err(kube_err(format!("listing InstallPlans of Subscription {ns}/{sub}")))?;
    for pname in plans_to_prune(&list.items, KEEP_PLANS) {
        tracing::info!(subscription = %format!("{ns}/{sub}"), plan = %pname, "pruning a completed InstallPlan");
        match api.delete(&pname, &kube::api::DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(kube_err(format!("deleting InstallPlan {ns}/{pname}"))(e)),
        }
    }
    Ok(())
}

/// Names of the terminal plans beyond the newest `keep` (by creationTimestamp, then name), oldest
/// first. Plans still pending or installing are never chosen.
pub(crate) fn plans_to_prune(plans: &[InstallPlan], keep: usize) -> Vec<String> {
    let mut done: Vec<&InstallPlan> = plans.iter().filter(|p| p.status.as_ref().is_some_and(|s| s.phase.is_terminal())).collect();
    done.sort_by_key(|p| (p.metadata.creation_timestamp.clone().map(|t| t.0), p.name_any()));
    let extra = done.len().saturating_sub(keep);
    done[..extra].iter().map(|p| p.name_any()).collect()
}

/// The `properties` of a bundle lookup (`{"properties": [...]}` as OLM writes it): `olm.package`,
/// an `olm.gvk` per provided API, and `olm.package.required` / `olm.gvk.required` for plain
/// package and GVK dependencies, taken from the catalog the bundle was resolved from.
fn bundle_properties(ctx: &Context, b: &crate::resolve::ResolvedBundle) -> Value {
    use crate::resolve::index::Predicate;
    let mut props = vec![json!({"type": "olm.package", "value": {"packageName": b.package, "version": b.version.to_string()}})];
    let catalogs = ctx.catalogs.lock().unwrap_or_else(|e| e.into_inner());
    let entry = b.catalog.as_ref().and_then(|c| catalogs.get(&(c.namespace.clone(), c.name.clone()))).and_then(|l| {
        let i = l.index.bundle_by_name(&b.bundle)?;
        Some(l.index.bundle(i).clone())
    });
    if let Some(e) = entry {
        for g in &e.provides {
            props.push(json!({"type": "olm.gvk", "value": {"group": g.group, "version": g.version, "kind": g.kind}}));
        }
        for d in &e.dependencies {
            match &d.predicate {
                Predicate::Package { package, range } => props.push(json!({"type": "olm.package.required", "value": {"packageName": package, "versionRange": range.as_str()}})),
                Predicate::Gvk(g) => props.push(json!({"type": "olm.gvk.required", "value": {"group": g.group, "version": g.version, "kind": g.kind}})),
                other => props.push(json!({"type": "olm.constraint", "value": {"failureMessage": d.failure_message, "description": other.to_string()}})),
            }
        }
    }
    json!({"properties": props})
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
                "metadata": {"name": name, "namespace": "ns", "creationTimestamp": format!("2026-01-01T00:{minute:02}:00Z")},
                "spec": {"clusterServiceVersionNames": [], "approval": "Automatic", "approved": true},
                "status": {"phase": phase, "catalogSources": []},
            }))
            .unwrap()
        };
        let plans = vec![plan("a", 5, "Complete"), plan("b", 1, "Complete"), plan("c", 3, "Failed"), plan("d", 0, "RequiresApproval"), plan("e", 4, "Complete")];
        assert_eq!(plans_to_prune(&plans, 2), vec!["b".to_string(), "c".to_string()]);
        assert!(plans_to_prune(&plans, 5).is_empty());
        assert_eq!(plans_to_prune(&plans, 0).len(), 4, "never the pending one");
    }

    #[test]
    fn conditions_keep_transition_time_while_status_is_unchanged() {
        let mut st = json!({});
        set_condition(&mut st, "ResolutionFailed", "True", "r", "m1");
        st["conditions"][0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
        set_condition(&mut st, "ResolutionFailed", "True", "r", "m2");
        assert_eq!(st["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(st["conditions"][0]["message"], "m2");
        set_condition(&mut st, "ResolutionFailed", "False", "r", "ok");
        assert_ne!(st["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        remove_condition(&mut st, "ResolutionFailed");
        assert_eq!(st["conditions"], json!([]));
    }
}
