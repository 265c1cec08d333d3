//! The CSV's workload once it may install (phases InstallReady and after): its Deployments
//! (which are not Available, [`deployments_waiting`]; those deleted by hand created again from the
//! InstallPlan that installed them), its webhooks and owned APIServices (which cannot be served,
//! what someone deleted or changed put back, [`restore_webhooks`]), its serving certificates
//! (rotated when due, [`webhooks_and_certificates`]), and what is removed while the CSV may not
//! own its APIs ([`remove_refused`]).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::api::ClusterServiceVersion;
use crate::api::clusterserviceversion::CsvPhase;
use crate::api::installplan::BundleObjectRef;
use crate::controller::events::EventType;
use crate::controller::{Context, Error, kube_err};

/// A CSV just refused for its provided APIs (OLM `cleanupCSVDeployments`): its webhook
/// configurations and APIServices, and its CRDs' conversion where it points at the CSV's own
/// Service, are removed first (so that nothing calls a webhook without pods), then its
/// Deployments; its subjects of the shared auth bindings stay (it may install again). Each removal is in an Event `ConflictCleanup`.
pub(super) async fn remove_refused(ctx: &Context, csv: &ClusterServiceVersion, ns: &str) -> Result<(), Error> {
    let mut removed = crate::controller::removal::remove_webhooks_of(ctx, csv, true).await?;
    crate::controller::removal::delete_labelled::<Deployment>(
        ctx,
        &crate::controller::removal::owner_selector(ns, &csv.name_any()),
        &mut removed,
    )
    .await?;
    if !removed.is_empty() {
        let message = format!("removed {} while the CSV cannot own its APIs", removed.join(", "));
        tracing::info!(csv = %format!("{ns}/{}", csv.name_any()), "{message}");
        ctx.events.publish_for(csv, EventType::Warning, "ConflictCleanup", &message).await;
    }
    Ok(())
}

/// The CSV's Deployments that are not Available; those deleted by hand are created again first
/// ([`recreate_deployments`]).
pub(super) async fn deployments_waiting(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
) -> Result<Vec<String>, Error> {
    let deployments: Vec<String> =
        csv.spec.install.spec.iter().flat_map(|s| s.deployments.iter().map(|d| d.name.clone())).collect();
    let dapi: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let mut waiting = Vec::new();
    let mut gone = Vec::new();
    for d in &deployments {
        let found = dapi.get_opt(d).await.map_err(kube_err(format!("reading Deployment {ns}/{d}")))?;
        if found.is_none() {
            gone.push(d.clone());
        }
        let available = found
            .and_then(|d| d.status)
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
        if !available {
            waiting.push(d.clone());
        }
    }
    // A Deployment deleted under an installed CSV is created again, as OLM's CSV controller does
    // (its install strategy is re-run when a component is missing).
    if !gone.is_empty() && csv.metadata.deletion_timestamp.is_none() {
        recreate_deployments(ctx, csv, &gone).await?;
    }
    Ok(waiting)
}

/// For a CSV with webhook or APIService definitions: which of them cannot be served while
/// Deployments `waiting` are not available, and its serving certificates' times after
/// rotating those that are due (`install::rotation::rotate_due`, each rotation an Event).
pub(super) async fn webhooks_and_certificates(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    waiting: &[String],
) -> Result<(Option<String>, Option<(Time, Time)>), Error> {
    use crate::install::webhook;
    // Most CSVs declare neither: no JSON copy of the CSV on every reconcile for them.
    if !csv.serves_webhooks_or_apiservices() {
        return Ok(Default::default());
    }
    let name = csv.name_any();
    let value = serde_json::to_value(csv)
        .map_err(|source| Error::Build { what: format!("ClusterServiceVersion {ns}/{name} as JSON"), source })?;
    let Ok(defs) = webhook::Definitions::read(&value) else { return Ok((None, None)) };
    if defs.is_empty() {
        return Ok((None, None));
    }
    let strategy: Vec<&str> =
        csv.spec.install.spec.iter().flat_map(|s| s.deployments.iter().map(|d| d.name.as_str())).collect();
    let mut unavailable: Vec<String> =
        webhook::unavailable(&defs, |d| strategy.contains(&d).then(|| !waiting.iter().any(|w| w == d)))
            .into_iter()
            .collect();
    // An owned APIService must also be Available (the API server reaches it), as OLM's
    // `isAPIServiceAvailable` before Succeeded.
    for a in defs
        .apiservices
        .iter()
        .filter(|a| a.deployment_name.as_deref().is_some_and(|d| !waiting.iter().any(|w| w == d)))
    {
        let name = format!("{}.{}", a.version, a.group);
        // Two owned descriptions (two kinds) of one group and version are one APIService.
        let message = format!("APIService {name} is not Available");
        if !unavailable.contains(&message) && !super::requirements::apiservice_available(&ctx.client, &name).await?.0 {
            unavailable.push(message);
        }
    }
    // Only at the look of an installed CSV (Succeeded or Failed, every 30 s), not on the 1 s
    // requeues while Installing waits for its Deployments.
    // Also once all Deployments are ready while Installing: a CSV that was refused for its APIs
    // and may own them now gets the webhooks its InstallPlan held back.
    let installed =
        csv.status.as_ref().is_some_and(|s| matches!(s.phase, Some(CsvPhase::Succeeded | CsvPhase::Failed)))
            || waiting.is_empty();
    if installed && csv.metadata.deletion_timestamp.is_none() {
        unavailable.extend(restore_webhooks(ctx, csv, ns).await?);
    }
    let unavailable = (!unavailable.is_empty()).then(|| unavailable.join("; "));
    let certs = rotate_certificates(ctx, csv, ns, &defs).await?;
    Ok((unavailable, certs))
}

/// Rotates the serving certificates of `csv` (webhook and APIService definitions `defs`) that
/// are due (`install::rotation::rotate_due`; a missing Secret is created with the CSV's component
/// labels and owner), each rotation an Event `CertsRotated`. Returns `(certsLastUpdated,
/// certsRotateAt)` when the CSV has certificates.
async fn rotate_certificates(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    defs: &crate::bundle::webhooks::Definitions,
) -> Result<Option<(Time, Time)>, Error> {
    use crate::install::rotation;
    let name = csv.name_any();
    let opts = ctx.apply_options();
    let owner = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "ClusterServiceVersion".into(),
        name: name.clone(),
        uid: csv.uid().unwrap_or_default(),
        controller: Some(false),
        block_owner_deletion: Some(false),
    };
    let labels = csv
        .labels()
        .iter()
        .filter(|(k, _)| k.starts_with(crate::install::COMPONENT_LABEL_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let missing = rotation::MissingSecret { labels, owner: Some(&owner) };
    let times = rotation::rotate_due(&ctx.client, &name, ns, defs, &missing, &opts, time::OffsetDateTime::now_utc())
        .await
        .map_err(|e| Error::Certificates { csv: format!("{ns}/{name}"), message: e.to_string() })?;
    for (secret, reason) in &times.rotated {
        let message = format!(
            "serving certificate in Secret {secret} issued again ({reason}); webhook configurations, CRD conversion, APIServices and Deployment now use the new CA"
        );
        tracing::info!(csv = %format!("{ns}/{name}"), "{message}");
        ctx.events.publish_for(csv, EventType::Normal, "CertsRotated", &message).await;
    }
    let to_time =
        |t: time::OffsetDateTime| k8s_openapi::jiff::Timestamp::from_second(t.unix_timestamp()).ok().map(Time);
    let certs = match (times.last_updated.and_then(to_time), times.rotate_at.and_then(to_time)) {
        (Some(l), Some(r)) => Some((l, r)),
        _ => None,
    };
    Ok(certs)
}

/// Creates again the Deployments `names` of `csv` that were deleted under it, from its install
/// strategy ([`super::unit::recreate`]), unless its namespace is being deleted (which takes its
/// Deployments with it).
async fn recreate_deployments(ctx: &Context, csv: &ClusterServiceVersion, names: &[String]) -> Result<(), Error> {
    let ns = csv.namespace().unwrap_or_default();
    let terminating = Api::<Namespace>::all(ctx.client.clone())
        .get_opt(&ns)
        .await
        .map_err(kube_err(format!("reading Namespace {ns}")))?
        .is_none_or(|n| n.metadata.deletion_timestamp.is_some());
    if terminating {
        return Ok(());
    }
    super::unit::recreate(ctx, csv, &ns, names).await
}

/// The steps of `csv` in the Complete InstallPlans among `plans`: what was applied to install it.
fn installed_steps<'a>(
    plans: &'a [crate::api::InstallPlan],
    csv: &'a str,
) -> impl Iterator<Item = &'a crate::api::installplan::Step> + 'a {
    plans
        .iter()
        .filter(move |p| p.spec.cluster_service_version_names.iter().any(|n| n == csv))
        .filter(|p| p.status.as_ref().is_some_and(|s| s.phase == crate::api::installplan::InstallPlanPhase::Complete))
        .flat_map(|p| p.status.iter().flat_map(|s| s.plan.iter()))
        .filter(move |st| st.resolving == csv)
}

/// An InstallPlan step as the install step it applied, with the CSV's uid in its
/// ownerReferences; `None` for a step listed by reference to its bundle
/// ([`BundleObjectRef`]) or without a manifest.
fn as_install_step(st: &crate::api::installplan::Step, csv: &ClusterServiceVersion) -> Option<crate::install::Step> {
    let text = st.resource.manifest.as_deref()?;
    if BundleObjectRef::parse(text).is_some() {
        return None;
    }
    let mut manifest: Value = serde_json::from_str(text).ok()?;
    let csv_name = csv.name_any();
    if let Some(refs) = manifest.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut) {
        for r in refs.iter_mut().filter(|r| r["kind"] == "ClusterServiceVersion" && r["name"] == csv_name.as_str()) {
            r["uid"] = json!(csv.uid().unwrap_or_default());
        }
    }
    Some(crate::install::Step {
        resolving: st.resolving.clone(),
        group: st.resource.group.clone(),
        version: st.resource.version.clone(),
        // The plan shows a Secret as OLM's synthetic kind `BundleSecret` (`step_entry`).
        kind: if st.resource.kind == "BundleSecret" { "Secret".into() } else { st.resource.kind.clone() },
        name: st.resource.name.clone(),
        namespace: manifest.pointer("/metadata/namespace").and_then(Value::as_str).map(String::from),
        manifest,
    })
}

/// Puts back what an installed CSV's webhooks and owned APIServices need and someone deleted or
/// changed: the webhook configurations, APIServices and CRD conversions its Complete
/// InstallPlan applied, each checked with [`crate::install::webhook::restore_reason`]
/// ([`to_restore`]), are applied again from that plan together with the plan's serving Secrets,
/// through [`crate::install::apply::apply`], so they get the serving certificate the Secret holds
/// (kept while valid) as `caBundle`. Each restore is an Event `WebhooksRestored`. OLM v0's CSV
/// controller reinstalls in the same case (`areWebhooksAvailable`, `checkAPIServiceResources`).
///
/// Returns what is missing and cannot be restored here (a CRD the plan lists by reference to its
/// bundle, [`unrestorable_conversions`]), for the CSV's status.
pub(super) async fn restore_webhooks(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
) -> Result<Vec<String>, Error> {
    let csv_name = csv.name_any();
    let plans = Api::<crate::api::InstallPlan>::namespaced(ctx.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing InstallPlans in {ns}")))?;
    // The plan's serving Secrets, and the Services they serve (`<service>-cert`).
    let secrets: Vec<crate::install::Step> = installed_steps(&plans.items, &csv_name)
        .filter(|st| st.resource.kind == "BundleSecret" || st.resource.kind == "Secret")
        .filter_map(|st| as_install_step(st, csv))
        .filter(crate::install::webhook::is_planned_serving_secret)
        .collect();
    let (restore, reasons) = to_restore(ctx, csv, &plans.items, &secrets).await?;
    let unrestorable = unrestorable_conversions(ctx, csv, &plans.items).await?;
    if restore.is_empty() {
        return Ok(unrestorable);
    }
    // With the plan's serving Secrets: apply keeps their certificate and fills in the caBundle.
    let mut steps = secrets;
    steps.extend(restore);
    for r in crate::install::apply::apply(&ctx.client, &steps, &ctx.apply_options()).await {
        if let crate::install::apply::StepStatus::Failed(e) = &r.status {
            return Err(Error::Certificates {
                csv: format!("{ns}/{csv_name}"),
                message: format!("applying {} {} again: {e}", r.kind, r.name),
            });
        }
    }
    let message = format!(
        "{}; capstan applied them again from the InstallPlan of {csv_name}, with the serving certificate of its Secret",
        reasons.join("; ")
    );
    tracing::info!(csv = %format!("{ns}/{csv_name}"), "{message}");
    ctx.events.publish_for(csv, EventType::Normal, "WebhooksRestored", &message).await;
    Ok(unrestorable)
}

/// The webhook configurations, APIServices and CRDs the Complete InstallPlans among `plans`
/// applied for `csv` that must be applied again ([`crate::install::webhook::restore_reason`],
/// `secrets`: the plan's serving Secrets), each with why. Compared with the controller's watch of
/// labelled objects when it has listed them, else with one GET each; an object labelled for
/// another CSV (the next version of the operator took it over) is not `csv`'s.
async fn to_restore(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    plans: &[crate::api::InstallPlan],
    secrets: &[crate::install::Step],
) -> Result<(Vec<crate::install::Step>, Vec<String>), Error> {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    const KINDS: [(&str, &str); 4] = [
        ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
        ("APIService", "apiservices"),
        ("CustomResourceDefinition", "customresourcedefinitions"),
    ];
    let csv_name = csv.name_any();
    let has_certificate =
        |service: &str| secrets.iter().any(|s| s.name == crate::install::webhook::secret_name(service));
    let (mut restore, mut reasons) = (Vec::new(), Vec::new());
    for st in installed_steps(plans, &csv_name) {
        let Some(&(kind, plural)) = KINDS.iter().find(|(k, _)| *k == st.resource.kind) else { continue };
        let Some(step) = as_install_step(st, csv) else {
            // Only conversion CRDs matter here, and only when their conversion is gone.
            continue;
        };
        let found = match ctx.webhook_stores.get().and_then(|s| s.lookup(kind, &step.name)) {
            Some(found) => found,
            None => {
                let ar =
                    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&step.group, &step.version, kind), plural);
                let found = Api::<DynamicObject>::all_with(ctx.client.clone(), &ar)
                    .get_opt(&step.name)
                    .await
                    .map_err(kube_err(format!("reading {kind} {}", step.name)))?;
                found.map(|f| serde_json::to_value(f).unwrap_or_default())
            }
        };
        if found
            .as_ref()
            .and_then(|f| f.pointer("/metadata/labels"))
            .and_then(|l| l.get(crate::install::LABEL_OWNER))
            .and_then(Value::as_str)
            .is_some_and(|o| o != csv_name)
        {
            continue;
        }
        if let Some(reason) = crate::install::webhook::restore_reason(&step, found.as_ref(), has_certificate) {
            reasons.push(format!("{kind} {} {reason}", step.name));
            restore.push(step);
        }
    }
    Ok((restore, reasons))
}

/// The conversion CRDs of `csv` that the Complete InstallPlans among `plans` list by reference to
/// their bundle and whose conversion was reset: checked from the cluster alone, and named with
/// what to do (they cannot be applied again from the plan).
async fn unrestorable_conversions(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    plans: &[crate::api::InstallPlan],
) -> Result<Vec<String>, Error> {
    let csv_name = csv.name_any();
    let mut unrestorable = Vec::new();
    for st in installed_steps(plans, &csv_name).filter(|st| st.resource.kind == "CustomResourceDefinition") {
        if st.resource.manifest.as_deref().and_then(BundleObjectRef::parse).is_none() {
            continue;
        }
        let converted = csv
            .spec
            .webhookdefinitions
            .iter()
            .flatten()
            .any(|w| w.conversion_crds.iter().flatten().any(|c| *c == st.resource.name));
        if !converted {
            continue;
        }
        let crd = Api::<CustomResourceDefinition>::all(ctx.client.clone())
            .get_opt(&st.resource.name)
            .await
            .map_err(kube_err(format!("reading CustomResourceDefinition {}", st.resource.name)))?;
        if crd.is_some_and(|c| c.spec.conversion.is_none_or(|cv| cv.strategy != "Webhook")) {
            unrestorable.push(format!("CustomResourceDefinition {} had its spec.conversion reset and is too large for the InstallPlan to hold; delete and recreate the Subscription's InstallPlan to apply it again", st.resource.name));
        }
    }
    Ok(unrestorable)
}
