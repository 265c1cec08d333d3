//! Operator objects (`operators.coreos.com/v1`, cluster-scoped, named `<package>.<namespace>`):
//! what `kubectl get operators` shows of each installed operator, as OLM v0's operator controller
//! keeps it (upstream `pkg/controller/operators/operator_controller.go`, `decorators/operator.go`,
//! `components.go`; [`crate::api::operator`]).
//!
//! OLM lists every object of 16 kinds that carries the component label
//! `operators.coreos.com/<package>.<namespace>`, watching all of them cluster-wide. capstan knows
//! what makes up an install without that: the operator's Subscription, its latest InstallPlan and
//! the steps that plan applied for the installed CSV, the CSV and its OperatorCondition. The
//! status is computed from those ([`components`], pure) and written once per change, when a CSV
//! reaches a phase a user acts on or a Subscription's state or conditions change ([`Context::sync_operator`]):
//! a handful of reads per install, not a cluster-wide watch per kind. Objects someone else labels
//! by hand are not listed (Operators someone else made are kept from their labels:
//! [`super::operator_labels`]); the conditions are those at the last change. When neither a
//! Subscription nor a CSV of the package is left in the namespace, the Operator is deleted (OLM
//! keeps it, listing what is left, until someone deletes it).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::{Context, Error, kube_err};
use crate::api::clusterserviceversion::ClusterServiceVersionStatus;
use crate::api::operator::{ComponentCondition, Components, Operator, OperatorStatus, RichReference};
use crate::api::{ClusterServiceVersion, InstallPlan, Subscription};

/// The kinds OLM counts as components (\[OLM\] `pkg/controller/operators/components.go`
/// `componentLists`), as `(apiVersion, kind, namespaced)`.
pub(crate) const COMPONENT_KINDS: &[(&str, &str, bool)] = &[
    ("apps/v1", "Deployment", true),
    ("v1", "Service", true),
    ("v1", "Namespace", false),
    ("apiregistration.k8s.io/v1", "APIService", false),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", false),
    ("operators.coreos.com/v1alpha1", "Subscription", true),
    ("operators.coreos.com/v1alpha1", "InstallPlan", true),
    ("operators.coreos.com/v1alpha1", "ClusterServiceVersion", true),
    ("operators.coreos.com/v2", "OperatorCondition", true),
    ("v1", "Secret", true),
    ("v1", "ConfigMap", true),
    ("v1", "ServiceAccount", true),
    ("rbac.authorization.k8s.io/v1", "Role", true),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", true),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", false),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", false),
];

/// A component reference with its conditions.
pub(crate) fn reference(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    conditions: Vec<ComponentCondition>,
) -> RichReference {
    RichReference {
        object: ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            namespace: namespace.filter(|n| !n.is_empty()).map(String::from),
            name: Some(name.into()),
            ..Default::default()
        },
        conditions,
    }
}

/// The status of Operator `name` listing `refs`: the component selector (the label exists) and
/// the references sorted by kind, apiVersion, namespace and name, duplicates dropped, as OLM
/// sorts them (`decorators/operator.go` `AddComponents`). Pure.
pub(crate) fn components(name: &str, mut refs: Vec<RichReference>) -> OperatorStatus {
    let key = |r: &RichReference| {
        let o = &r.object;
        (
            o.kind.clone().unwrap_or_default(),
            o.api_version.clone().unwrap_or_default(),
            o.namespace.clone().unwrap_or_default(),
            o.name.clone().unwrap_or_default(),
        )
    };
    refs.sort_by_key(key);
    refs.dedup_by(|a, b| key(a) == key(b));
    let selector = LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: format!("{}{name}", crate::install::COMPONENT_LABEL_PREFIX),
            operator: "Exists".into(),
            values: None,
        }]),
        match_labels: None,
    };
    OperatorStatus { components: Some(Components { label_selector: Some(selector), refs }) }
}

/// A component's conditions as OLM copies them (`.status.conditions`, each decoded into
/// `operators/v1.Condition`: type, status, reason, message, lastUpdateTime, lastTransitionTime;
/// other keys such as `lastHeartbeatTime` or `observedGeneration` dropped). Pure.
pub(crate) fn conditions_of(object: &Value) -> Vec<ComponentCondition> {
    let keep = ["type", "status", "reason", "message", "lastUpdateTime", "lastTransitionTime"];
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let c: serde_json::Map<String, Value> = c
                .as_object()?
                .iter()
                .filter(|(k, _)| keep.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            serde_json::from_value(Value::Object(c)).ok()
        })
        .collect()
}

/// A CSV's one condition as OLM writes it into its Operator: type = the phase, status `True`,
/// the CSV's reason, message and times (`decorators/operator.go` `csvConditionsJQ`). Pure.
pub(crate) fn csv_conditions(status: Option<&ClusterServiceVersionStatus>) -> Vec<ComponentCondition> {
    let Some(s) = status else { return Vec::new() };
    let Some(phase) = &s.phase else { return Vec::new() };
    vec![ComponentCondition {
        type_: phase.to_string(),
        status: "True".into(),
        reason: s.reason.as_ref().map(|r| r.to_string()),
        message: s.message.clone(),
        last_update_time: s.last_update_time.clone(),
        last_transition_time: s.last_transition_time.clone(),
    }]
}

/// The objects `plan` applied (steps `Created` or `Present`) for CSV `csv` that are components (of [`COMPONENT_KINDS`]), as
/// `(apiVersion, kind, namespace, name)`; the CSV itself is left out (its reference carries its
/// conditions), and the Deployments of its strategy (not plan steps) are added, from the CSV
/// step's manifest. A serving Secret (step kind `BundleSecret`) counts as a Secret. The
/// `kube-system` auth-reader RoleBinding is left out: OLM labels it with nothing but
/// `olm.managed`, so it is none of OLM's components. Pure.
pub(crate) fn plan_components(plan: &InstallPlan, csv: &str) -> Vec<(String, String, Option<String>, String)> {
    let ns = plan.namespace().unwrap_or_default();
    // Only what the plan has applied: a plan awaiting approval lists steps not created yet.
    let applied = |s: &&crate::api::installplan::Step| {
        matches!(s.status, crate::api::installplan::StepStatus::Created | crate::api::installplan::StepStatus::Present)
    };
    let steps = plan.status.iter().flat_map(|s| s.plan.iter()).filter(|s| s.resolving == csv).filter(applied);
    let mut out = Vec::new();
    // Not plan steps (`install::plan::in_install_plan`), made by the CSV reconciler: the
    // Deployments of the CSV's strategy and, for an AllNamespaces install, the ClusterRoles and
    // ClusterRoleBindings its permissions' Roles are lifted to (same names; OLM copies the
    // Role's labels, component label included, so its Operator lists them).
    let mut deployments = Vec::new();
    let mut all_namespaces = false;
    let mut lifted = Vec::new();
    for st in steps {
        let r = &st.resource;
        let kind = if r.kind == "BundleSecret" { "Secret" } else { r.kind.as_str() };
        let manifest: Option<Value> = r.manifest.as_deref().and_then(|m| serde_json::from_str(m).ok());
        let label =
            |l: &str| manifest.as_ref().and_then(|m| m.pointer("/metadata/labels")).and_then(|x| x.get(l)).is_some();
        if kind == "ClusterServiceVersion" {
            let m = manifest.as_ref();
            all_namespaces = m
                .and_then(|m| m.pointer("/metadata/annotations"))
                .and_then(|a| a.get(crate::install::ANNOTATION_TARGET_NAMESPACES))
                .is_some_and(|t| t == "");
            deployments.extend(
                m.and_then(|m| m.pointer("/spec/install/spec/deployments"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d["name"].as_str().map(String::from)),
            );
            continue;
        }
        if matches!(kind, "Role" | "RoleBinding")
            && label(crate::install::LABEL_PERMISSIONS_HASH)
            && !label(crate::install::LABEL_COPIED_FROM)
        {
            lifted.push((format!("Cluster{kind}"), r.name.clone()));
        }
        let Some((api_version, _, namespaced)) = COMPONENT_KINDS.iter().find(|(_, k, _)| *k == kind) else { continue };
        let manifest: Option<Value> = r.manifest.as_deref().and_then(|m| serde_json::from_str(m).ok());
        let namespace = namespaced.then(|| {
            manifest
                .as_ref()
                .and_then(|m| m.pointer("/metadata/namespace"))
                .and_then(Value::as_str)
                .unwrap_or(&ns)
                .to_string()
        });
        if kind == "RoleBinding"
            && namespace.as_deref() == Some(crate::install::webhook::KUBE_SYSTEM)
            && r.name.ends_with("-auth-reader")
        {
            continue;
        }
        out.push((api_version.to_string(), kind.to_string(), namespace, r.name.clone()));
    }
    let rbac = "rbac.authorization.k8s.io/v1".to_string();
    let lifted = lifted.into_iter().filter(|_| all_namespaces).map(|(kind, name)| (rbac.clone(), kind, None, name));
    let deployments =
        deployments.into_iter().map(|name| ("apps/v1".to_string(), "Deployment".to_string(), Some(ns.clone()), name));
    for entry in lifted.chain(deployments) {
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

/// Of `plans`, the latest (by `spec.generation`) that applied steps for `csv`: the plan that
/// installed it. Pure.
pub(crate) fn installing_plan(plans: Vec<InstallPlan>, csv: &str) -> Option<InstallPlan> {
    plans
        .into_iter()
        .filter(|p| {
            p.spec.cluster_service_version_names.iter().any(|n| n == csv) && !plan_components(p, csv).is_empty()
        })
        .max_by_key(|p| p.spec.generation.unwrap_or(0))
}

/// The package a CSV installs: `packageName` of its `olm.package` property (annotation
/// `operatorframework.io/properties`), else the name part of its component label. Pure.
pub(crate) fn package_of(csv: &ClusterServiceVersion) -> Option<String> {
    let from_properties = csv
        .annotations()
        .get(crate::install::ANNOTATION_PROPERTIES)
        .and_then(|a| serde_json::from_str::<Value>(a).ok())
        .and_then(|v| {
            v.get("properties")?
                .as_array()?
                .iter()
                .find(|p| p.get("type").and_then(Value::as_str) == Some("olm.package"))?
                .pointer("/value/packageName")?
                .as_str()
                .map(String::from)
        });
    let ns = csv.namespace().unwrap_or_default();
    from_properties.or_else(|| {
        let suffix = format!(".{ns}");
        csv.labels().keys().find_map(|k| {
            k.strip_prefix(crate::install::COMPONENT_LABEL_PREFIX)?.strip_suffix(&suffix).map(String::from)
        })
    })
}

/// The name of the Operator of `package` installed in `namespace` (the component label's name
/// part, cut as OLM cuts it).
pub(crate) fn operator_name(package: &str, namespace: &str) -> String {
    crate::install::component_label_key(package, namespace)
        .trim_start_matches(crate::install::COMPONENT_LABEL_PREFIX)
        .to_string()
}

/// How long changes of one Operator are gathered into one write ([`run`]).
const COALESCE: Duration = Duration::from_secs(2);
/// How long a failed Operator sync waits before it is tried again ([`run`]).
const RETRY: Duration = Duration::from_secs(10);

/// When an Operator asked for at `now` is to be written ([`run`]): at once the first time this
/// process writes it (so that it exists as soon as its Subscription has a state, as OLM's does:
/// its e2e suite reads it right after the first plan completes), else after [`COALESCE`], or
/// when it was already due (`pending`), then. Pure.
fn due_at(
    now: tokio::time::Instant,
    pending: Option<tokio::time::Instant>,
    written_before: bool,
) -> tokio::time::Instant {
    let wanted = if written_before { now + COALESCE } else { now };
    pending.map_or(wanted, |p| p.min(wanted))
}

/// Receives Operator names to bring up to date and syncs each when it is due ([`due_at`]):
/// changes that come together — a CSV and its Subscription — make one write, and one Operator
/// waiting does not hold back another. A failed sync is tried again after [`RETRY`]; failures
/// are logged as reconcile failures are (one line per [`super::ERROR_LOG_INTERVAL`], with the
/// count of those left out).
pub(super) async fn run(ctx: Arc<Context>, mut rx: mpsc::UnboundedReceiver<(String, String)>) {
    let mut pending: std::collections::BTreeMap<(String, String), tokio::time::Instant> = Default::default();
    let mut written: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    loop {
        let next = pending.values().min().copied();
        let received = match next {
            None => match rx.next().await {
                Some(key) => Some(key),
                None => return,
            },
            Some(at) => tokio::time::timeout_at(at, rx.next()).await.ok().flatten(),
        };
        let now = tokio::time::Instant::now();
        for key in received.into_iter().chain(std::iter::from_fn(|| rx.try_recv().ok())) {
            let at = due_at(now, pending.get(&key).copied(), written.contains(&key));
            pending.insert(key, at);
        }
        let due: Vec<(String, String)> = pending.iter().filter(|(_, at)| **at <= now).map(|(k, _)| k.clone()).collect();
        for key in due {
            pending.remove(&key);
            let (package, namespace) = &key;
            match sync(&ctx, package, namespace).await {
                Ok(()) => {
                    written.insert(key);
                }
                Err(e) => {
                    // One line per 10 s for all Operators (an API outage fails every one of them).
                    if let Some(skipped) = super::log_due(&ctx.error_log, "Operator", std::time::Instant::now()) {
                        tracing::warn!(operator = %operator_name(package, namespace), error = %e, unlogged_since_last = skipped, "could not update the Operator; trying again in 10 s");
                    }
                    pending.insert(key, tokio::time::Instant::now() + RETRY);
                }
            }
        }
    }
}

/// Brings Operator `<package>.<namespace>` up to date: reads the package's Subscription, its
/// latest InstallPlan, the installed CSV and the Deployments, CRDs and APIServices that plan
/// applied (for their conditions), and applies the Operator and its status; deletes it when no
/// Subscription or CSV of the package is left.
async fn sync(ctx: &Context, package: &str, namespace: &str) -> Result<(), Error> {
    let name = operator_name(package, namespace);
    let (sub, csv, csv_name) = package_objects(ctx, package, namespace).await?;
    if sub.is_none() && csv.is_none() {
        return delete_operator(ctx, &name).await;
    }
    let mut refs = Vec::new();
    if let Some(s) = &sub {
        let v = serde_json::to_value(s).unwrap_or_default();
        refs.push(reference(
            "operators.coreos.com/v1alpha1",
            "Subscription",
            Some(namespace),
            &s.name_any(),
            conditions_of(&v),
        ));
    }
    if let Some(c) = &csv {
        refs.push(reference(
            "operators.coreos.com/v1alpha1",
            "ClusterServiceVersion",
            Some(namespace),
            &c.name_any(),
            csv_conditions(c.status.as_ref()),
        ));
        refs.push(reference(
            "operators.coreos.com/v2",
            "OperatorCondition",
            Some(namespace),
            &c.name_any(),
            Vec::new(),
        ));
    }
    let plan_name = sub
        .as_ref()
        .and_then(|s| s.status.as_ref())
        .and_then(|st| st.install_plan_ref.as_ref())
        .and_then(|r| r.name.clone());
    let plan = match &plan_name {
        Some(p) => Api::<InstallPlan>::namespaced(ctx.client.clone(), namespace)
            .get_opt(p)
            .await
            .map_err(kube_err(format!("reading InstallPlan {namespace}/{p}")))?,
        None => None,
    };
    if let Some(p) = &plan {
        let v = serde_json::to_value(p).unwrap_or_default();
        refs.push(reference(
            "operators.coreos.com/v1alpha1",
            "InstallPlan",
            Some(namespace),
            &p.name_any(),
            conditions_of(&v),
        ));
    }
    if let (Some(p), Some(c)) = (&plan, &csv_name) {
        refs.extend(installed_components(ctx, namespace, p, c).await?);
    }
    write_operator(ctx, &name, &components(&name, refs)).await
}

/// The package's live Subscription in `namespace`, its CSV (the installed or current one; without
/// a Subscription, the package's CSV that is not a copy), and that CSV's name.
async fn package_objects(
    ctx: &Context,
    package: &str,
    namespace: &str,
) -> Result<(Option<Subscription>, Option<ClusterServiceVersion>, Option<String>), Error> {
    let subs = Api::<Subscription>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing Subscriptions in {namespace}")))?;
    let sub = subs.items.into_iter().find(|s| s.spec.package == package && s.metadata.deletion_timestamp.is_none());
    let csv_name =
        sub.as_ref().and_then(|s| s.status.as_ref()).and_then(|st| st.installed_csv.clone().or(st.current_csv.clone()));
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), namespace);
    let csv = match &csv_name {
        Some(c) => csvs.get_opt(c).await.map_err(kube_err(format!("reading ClusterServiceVersion {namespace}/{c}")))?,
        // Without a Subscription (deleted; the CSV keeps running, as in OLM): the package's CSV.
        None => csvs
            .list(&ListParams::default())
            .await
            .map_err(kube_err(format!("listing ClusterServiceVersions in {namespace}")))?
            .items
            .into_iter()
            .find(|c| {
                c.metadata.deletion_timestamp.is_none()
                    && !c.labels().contains_key(crate::install::LABEL_COPIED_FROM)
                    && package_of(c).as_deref() == Some(package)
            }),
    };
    let csv_name = csv_name.or_else(|| csv.as_ref().map(|c| c.name_any()));
    Ok((sub, csv, csv_name))
}

/// Deletes Operator `name`: no Subscription or CSV of its package is left.
async fn delete_operator(ctx: &Context, name: &str) -> Result<(), Error> {
    match Api::<Operator>::all(ctx.client.clone()).delete(name, &DeleteParams::background()).await {
        Ok(_) => tracing::info!(operator = %name, "no Subscription or CSV of the package is left: Operator deleted"),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(kube_err(format!("deleting Operator {name}"))(e)),
    }
    Ok(())
}

/// Applies `status` to Operator `name`, creating the Operator first when it does not exist.
pub(super) async fn write_operator(ctx: &Context, name: &str, status: &OperatorStatus) -> Result<(), Error> {
    let operators: Api<Operator> = Api::all(ctx.client.clone());
    let pp = PatchParams::apply(crate::install::FIELD_MANAGER).force();
    let body = json!({"apiVersion": Operator::api_version(&()), "kind": Operator::kind(&()), "metadata": {"name": name}, "status": status});
    // The status first: one request when the Operator exists (every sync but the first).
    match operators.patch_status(name, &pp, &Patch::Apply(&body)).await {
        Ok(_) => return Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(kube_err(format!("writing status of Operator {name}"))(e)),
    }
    let object = json!({"apiVersion": Operator::api_version(&()), "kind": Operator::kind(&()), "metadata": {"name": name}, "spec": {}});
    operators.patch(name, &pp, &Patch::Apply(&object)).await.map_err(kube_err(format!("creating Operator {name}")))?;
    operators
        .patch_status(name, &pp, &Patch::Apply(&body))
        .await
        .map_err(kube_err(format!("writing status of Operator {name}")))?;
    Ok(())
}

/// The references of what CSV `csv` was installed with, from `latest` (the Subscription's
/// latest InstallPlan) or, while an upgrade waits for approval and `latest` is the next
/// version's, from the plan that installed `csv` (OLM lists those objects by their component
/// label, which they keep). Deployments, CRDs and APIServices carry their conditions.
async fn installed_components(
    ctx: &Context,
    namespace: &str,
    latest: &InstallPlan,
    csv: &str,
) -> Result<Vec<RichReference>, Error> {
    let installing = if latest.spec.cluster_service_version_names.iter().any(|n| n == csv) {
        None
    } else {
        let plans = Api::<InstallPlan>::namespaced(ctx.client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map_err(kube_err(format!("listing InstallPlans in {namespace}")))?;
        installing_plan(plans.items, csv)
    };
    let mut refs = Vec::new();
    for (api_version, kind, ns, obj) in plan_components(installing.as_ref().unwrap_or(latest), csv) {
        let conditions = match kind.as_str() {
            "Deployment" | "CustomResourceDefinition" | "APIService" => {
                object_conditions(ctx, &api_version, &kind, ns.as_deref(), &obj).await?
            }
            _ => Vec::new(),
        };
        refs.push(reference(&api_version, &kind, ns.as_deref(), &obj, conditions));
    }
    Ok(refs)
}

/// The conditions of one component read from the API server (none when it is gone).
async fn object_conditions(
    ctx: &Context,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<Vec<ComponentCondition>, Error> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let plural = match kind {
        "Deployment" => "deployments",
        "CustomResourceDefinition" => "customresourcedefinitions",
        _ => "apiservices",
    };
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<kube::api::DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &ar),
        None => Api::all_with(ctx.client.clone(), &ar),
    };
    let found = api.get_opt(name).await.map_err(kube_err(format!("reading {kind} {name}")))?;
    Ok(found.map(|o| conditions_of(&serde_json::to_value(&o).unwrap_or_default())).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::installplan::{InstallPlanPhase, InstallPlanStatus, Step, StepResource, StepStatus};

    #[test]
    fn an_operator_is_written_at_once_the_first_time_then_changes_gather_for_two_seconds() {
        let now = tokio::time::Instant::now();
        assert_eq!(due_at(now, None, false), now, "never written by this process: at once");
        assert_eq!(due_at(now, None, true), now + COALESCE, "written before: changes gather");
        let earlier = now + Duration::from_millis(500);
        assert_eq!(due_at(now, Some(earlier), true), earlier, "already due sooner: kept");
        assert_eq!(due_at(now, Some(now + RETRY), true), now + COALESCE, "a retry waiting: the change comes first");
    }

    fn step(csv: &str, kind: &str, name: &str, manifest: Option<Value>) -> Step {
        Step {
            resolving: csv.into(),
            resource: StepResource {
                kind: kind.into(),
                name: name.into(),
                manifest: manifest.map(|m| m.to_string()),
                ..Default::default()
            },
            optional: false,
            status: StepStatus::Created,
        }
    }

    #[test]
    fn plan_components_are_olms_kinds_of_this_csv() {
        let mut plan = InstallPlan::new("install-1", Default::default());
        plan.metadata.namespace = Some("ops".into());
        let mut st = InstallPlanStatus::new(InstallPlanPhase::Complete);
        st.plan = vec![
            step("op.v1", "CustomResourceDefinition", "things.example.com", None),
            step("op.v1", "ServiceAccount", "op", None),
            step("op.v1", "Role", "op.v1-op-x", Some(json!({"metadata": {"labels": {"olm.permissions.hash": "h"}}}))),
            step(
                "op.v1",
                "Role",
                "op.v1-op-x",
                Some(
                    json!({"metadata": {"namespace": "b", "labels": {"olm.permissions.hash": "h", "olm.copiedFrom": "ops"}}}),
                ),
            ),
            step(
                "op.v1",
                "RoleBinding",
                "op-service-auth-reader",
                Some(json!({"metadata": {"namespace": "kube-system"}})),
            ),
            step("op.v1", "BundleSecret", "op-service-cert", None),
            step(
                "op.v1",
                "ClusterServiceVersion",
                "op.v1",
                Some(json!({"metadata": {"annotations": {"olm.targetNamespaces": ""}},
                            "spec": {"install": {"spec": {"deployments": [{"name": "op"}, {"name": "op-webhook"}]}}}})),
            ),
            step("op.v1", "ValidatingWebhookConfiguration", "vop-abc", None),
            step("dep.v1", "Deployment", "dep", None),
            step("op.v1", "Deployment", "op", None),
            Step { status: StepStatus::Unknown, ..step("op.v1", "Service", "not-applied-yet", None) },
        ];
        plan.status = Some(st);
        let got: Vec<(String, Option<String>, String)> =
            plan_components(&plan, "op.v1").into_iter().map(|(_, k, ns, n)| (k, ns, n)).collect();
        assert_eq!(
            got,
            vec![
                ("CustomResourceDefinition".into(), None, "things.example.com".into()),
                ("ServiceAccount".into(), Some("ops".into()), "op".into()),
                ("Role".into(), Some("ops".into()), "op.v1-op-x".into()),
                ("Role".into(), Some("b".into()), "op.v1-op-x".into()),
                ("Secret".into(), Some("ops".into()), "op-service-cert".into()),
                ("Deployment".into(), Some("ops".into()), "op".into()),
                ("ClusterRole".into(), None, "op.v1-op-x".into()),
                ("Deployment".into(), Some("ops".into()), "op-webhook".into()),
            ],
            "no CSV (listed apart), no kube-system auth-reader, no webhook configuration, nothing of another CSV, nothing not applied yet; what the CSV reconciler makes for an AllNamespaces install (the lifted ClusterRole, the Deployments) once"
        );
    }

    #[test]
    fn while_an_upgrade_awaits_approval_the_installed_csvs_objects_come_from_the_plan_that_installed_it() {
        let plan = |name: &str, generation: i64, csv: &str, phase: InstallPlanPhase, applied: bool| {
            let mut p = InstallPlan::new(name, Default::default());
            p.metadata.namespace = Some("ops".into());
            p.spec.generation = Some(generation);
            p.spec.cluster_service_version_names = vec![csv.into()];
            let mut st = InstallPlanStatus::new(phase);
            st.plan = vec![Step {
                status: if applied { StepStatus::Created } else { StepStatus::Unknown },
                ..step(csv, "Deployment", "op", None)
            }];
            p.status = Some(st);
            p
        };
        let plans = vec![
            plan("install-a", 1, "op.v1", InstallPlanPhase::Complete, true),
            plan("install-c", 3, "op.v2", InstallPlanPhase::RequiresApproval, false),
            plan("install-b", 2, "op.v1", InstallPlanPhase::Complete, true),
        ];
        assert_eq!(installing_plan(plans.clone(), "op.v1").map(|p| p.name_any()).as_deref(), Some("install-b"));
        assert!(plan_components(&plans[1], "op.v1").is_empty(), "the plan awaiting approval lists nothing of op.v1");
        assert_eq!(installing_plan(plans, "op.v3"), None);
    }

    #[test]
    fn refs_are_sorted_and_deduplicated_as_olm_sorts_them() {
        let r = |k: &str, n: &str| reference("v1", k, Some("ops"), n, Vec::new());
        let s = components(
            "op.ops",
            vec![r("Subscription", "op"), r("ClusterRole", "b"), r("ClusterRole", "a"), r("Subscription", "op")],
        );
        let c = s.components.unwrap();
        let names: Vec<(String, String)> =
            c.refs.iter().map(|r| (r.object.kind.clone().unwrap(), r.object.name.clone().unwrap())).collect();
        assert_eq!(
            names,
            [
                ("ClusterRole".into(), "a".into()),
                ("ClusterRole".into(), "b".into()),
                ("Subscription".into(), "op".into())
            ]
        );
        let e = &c.label_selector.unwrap().match_expressions.unwrap()[0];
        assert_eq!((e.key.as_str(), e.operator.as_str()), ("operators.coreos.com/op.ops", "Exists"));
    }

    #[test]
    fn conditions_keep_olms_fields_and_a_csv_shows_its_phase() {
        let v = json!({"status": {"conditions": [{"type": "Available", "status": "True", "reason": "R", "message": "m", "lastHeartbeatTime": "2020-01-01T00:00:00Z", "observedGeneration": 3}]}});
        let c = conditions_of(&v);
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!([{"type": "Available", "status": "True", "reason": "R", "message": "m"}])
        );
        let st: ClusterServiceVersionStatus = serde_json::from_value(json!({"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed with no errors"})).unwrap();
        let c = csv_conditions(Some(&st));
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!([{"type": "Succeeded", "status": "True", "reason": "InstallSucceeded", "message": "install strategy completed with no errors"}])
        );
        assert!(csv_conditions(None).is_empty());
    }

    #[test]
    fn a_csv_names_its_package() {
        let mut csv = ClusterServiceVersion::new("op.v1", Default::default());
        csv.metadata.namespace = Some("ops".into());
        csv.metadata.labels = Some([("operators.coreos.com/my-op.ops".to_string(), String::new())].into());
        assert_eq!(package_of(&csv).as_deref(), Some("my-op"));
        csv.metadata.annotations = Some([(crate::install::ANNOTATION_PROPERTIES.to_string(), r#"{"properties":[{"type":"olm.gvk","value":{}},{"type":"olm.package","value":{"packageName":"real","version":"1.0.0"}}]}"#.to_string())].into());
        assert_eq!(package_of(&csv).as_deref(), Some("real"));
    }

    #[test]
    fn operator_names_are_component_label_names() {
        assert_eq!(operator_name("etcd", "ops"), "etcd.ops");
        assert!(operator_name(&"x".repeat(80), "ops").len() <= 63);
    }
}
