//! InstallPlans whose steps someone wrote by hand: no bundle lookups (nothing to pull), the
//! objects listed in `status.plan` with their manifests, approved. OLM's catalog operator applies
//! such a plan's steps as they are (`pkg/controller/operators/catalog/operator.go` `ExecutePlan`);
//! OLM's own e2e suite and tools that prepare plans elsewhere write them. capstan applies them
//! through the same checks and applier as its own plans ([`super::execute`]), as the
//! namespace's OperatorGroup's ServiceAccount when it names one.

use serde_json::Value;

use super::{
    Ending, Error, Hold, PlanPass, Planned, PlannedStep, Stop, claim, execute, operator_group_targets, preflight,
};
use crate::api::InstallPlan;
use crate::api::installplan::{BundleObjectRef, Step as ApiStep};
use crate::install::Step;
use crate::install::operator_group::GroupTargets;

/// Whether `ip` is a plan written by hand that is to be applied now: no bundle lookups, no
/// lookups annotation (checked by the caller), steps listed, not terminal, approved. Pure.
pub(super) fn is_listed(ip: &InstallPlan) -> bool {
    ip.status.as_ref().is_some_and(|s| {
        s.bundle_lookups.is_empty() && !s.plan.is_empty() && !s.phase.is_terminal() && ip.spec.approved
    })
}

/// Applies the hand-written steps of the plan in `pass`: each manifest as listed, in order.
pub(super) async fn execute_listed(pass: &mut PlanPass<'_>) -> Result<Ending, Error> {
    let steps = match steps_of(pass.ctx, &pass.ns, &pass.status.plan).await {
        Ok(steps) => steps,
        Err(hold) => return Ok(pass.hold(hold, Vec::new())),
    };
    let (operator_group, targets) = match operator_group_targets(&pass.ctx.client, &pass.ns).await? {
        GroupTargets::Found { name, targets, .. } => (name, targets),
        // Without an OperatorGroup OLM applies with its own permissions; so does capstan.
        GroupTargets::Unfit { .. } => (String::new(), Vec::new()),
    };
    let planned = Planned { operator_group, targets, steps };
    let installer = match preflight(pass.ctx, &pass.ns, &planned.operator_group, &planned.plain()).await {
        Ok(i) => i,
        Err(Stop::Held(h)) => return Ok(pass.hold(h, Vec::new())),
        Err(Stop::Api(e)) => return Err(e),
    };
    tracing::info!(plan = %pass.key(), steps = planned.steps.len(), "applying the steps listed by hand");
    if !claim(pass, &planned).await? {
        return Ok(Ending::Quiet(kube::runtime::controller::Action::requeue(super::AGAIN)));
    }
    execute(pass, &planned, &installer).await
}

/// The steps of `plan` (listed by hand in a plan of namespace `ns`) as install steps: the
/// manifest of each parsed (JSON or YAML), its scope found by discovery, a namespaced object put
/// in `ns`; then the RBAC checks bundles get ([`check_rbac`]).
///
/// # Errors
/// `InstallCheckFailed`, naming `status.plan[i]`: no manifest, a manifest that does not parse or
/// is a reference to a bundle image, a kind the cluster does not serve. A discovery error is
/// tried again.
async fn steps_of(ctx: &super::Context, ns: &str, plan: &[ApiStep]) -> Result<Vec<PlannedStep>, Hold> {
    let mut out = Vec::new();
    for (i, s) in plan.iter().enumerate() {
        let r = &s.resource;
        let at = |what: &str| format!("status.plan[{i}] ({} {}): {what}", r.kind, r.name);
        let manifest = parse_manifest(r.manifest.as_deref()).map_err(|e| Hold::Fail("InstallCheckFailed", at(&e)))?;
        let gvk = gvk_of(r, &manifest);
        let namespaced = match kube::discovery::pinned_kind(&ctx.client, &gvk).await {
            Ok((_, caps)) => caps.scope == kube::discovery::Scope::Namespaced,
            Err(kube::Error::Discovery(e)) => {
                return Err(Hold::Fail(
                    "InstallCheckFailed",
                    at(&format!("the cluster does not serve this kind: {e}")),
                ));
            }
            // An unknown group/version answers 404 before discovery can say the kind is missing.
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let why = format!("the cluster does not serve {}: create its CRD or fix the step", gvk.api_version());
                return Err(Hold::Fail("InstallCheckFailed", at(&why)));
            }
            Err(e) => return Err(Hold::Retry(at(&format!("discovery failed: {e}")))),
        };
        let mut step = step_of(s, manifest, namespaced.then_some(ns));
        alongside(&mut step, ns, &s.resolving);
        let catalog = (r.source_namespace.clone(), r.source_name.clone());
        out.push(PlannedStep { step, catalog, image: None });
    }
    check_rbac(&out)?;
    Ok(out)
}

/// The RBAC checks every bundle gets ([`crate::install::plan::check_rbac`]: no reserved names,
/// no ClusterRole aggregated beyond the operator's own APIs, no binding of users or groups), on
/// the listed objects, so that a plan written by hand cannot grant what a bundle may not.
fn check_rbac(steps: &[PlannedStep]) -> Result<(), Hold> {
    let mut objects: Vec<(std::path::PathBuf, Value)> = steps
        .iter()
        .enumerate()
        .map(|(i, p)| (std::path::PathBuf::from(format!("status.plan[{i}]")), p.step.manifest.clone()))
        .collect();
    if !steps.iter().any(|p| p.step.kind == "ClusterServiceVersion") {
        // The checks read the CSV's owned APIs; a plan without a CSV owns none.
        let stand_in = serde_json::json!({"kind": "ClusterServiceVersion", "metadata": {"name": "listed-steps"}});
        objects.push((std::path::PathBuf::from("(no CSV)"), stand_in));
    }
    let origin = std::path::Path::new("status.plan");
    let bundle = crate::bundle::Bundle::from_objects(origin, Default::default(), objects)
        .map_err(|e| Hold::Fail("InstallCheckFailed", format!("status.plan: {e}")))?;
    let name = bundle.name().to_string();
    crate::install::plan::check_rbac(&bundle, &name).map_err(|e| Hold::Fail("InstallCheckFailed", e.to_string()))
}

/// A listed step's manifest: JSON or YAML text of one object, not a [`BundleObjectRef`]. Pure.
fn parse_manifest(text: Option<&str>) -> Result<Value, String> {
    let text = text.map(str::trim).filter(|t| !t.is_empty()).ok_or("the step has no manifest; list the object")?;
    if BundleObjectRef::parse(text).is_some() {
        return Err("the manifest refers to a bundle image; a plan without bundle lookups lists its objects".into());
    }
    let value: Value = crate::yaml::from_str(text).map_err(|e| format!("the manifest does not parse: {e}"))?;
    if !value.is_object() {
        return Err("the manifest is not an object".into());
    }
    Ok(value)
}

/// The kind a listed step creates: its manifest's `apiVersion` and `kind` when it has both, as
/// OLM's `ExecutePlan` decodes the manifest and creates what it says (clients write steps with
/// only a version, as OLM's e2e suite does: `{version: v1alpha1, kind: ClusterServiceVersion}`);
/// else the step's `group`, `version` and `kind` — a `version` written as `group/version` split,
/// and a kind OLM decodes by the step's kind alone (CRDs, CSVs, Subscriptions, RBAC;
/// `ExecutePlan` switches on it) in its API group when the step names none. Pure.
fn gvk_of(r: &crate::api::installplan::StepResource, manifest: &Value) -> kube::core::GroupVersionKind {
    let text = |k: &str| manifest.get(k).and_then(Value::as_str).filter(|t| !t.is_empty());
    let known = |kind: &str| match kind {
        "CustomResourceDefinition" => "apiextensions.k8s.io",
        "ClusterServiceVersion" | "Subscription" => "operators.coreos.com",
        "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding" => "rbac.authorization.k8s.io",
        _ => "",
    };
    let (group, version, kind) = match (text("apiVersion"), text("kind")) {
        (Some(api_version), Some(kind)) => {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            (group, version, kind)
        }
        _ => match r.version.split_once('/') {
            Some((group, version)) if r.group.is_empty() => (group, version, r.kind.as_str()),
            _ => (r.group.as_str(), r.version.as_str(), r.kind.as_str()),
        },
    };
    // OLM's suite writes `apiVersion: v1` on a CRD; OLM decodes it as a CRD all the same.
    let group = if group.is_empty() { known(kind) } else { group };
    kube::core::GroupVersionKind::gvk(group, version, kind)
}

/// A CRD step resolving CSV `csv` (listed in a plan of namespace `ns`) gets the annotation that
/// says which CSV it was installed with, as a CRD planned from a bundle
/// (`install::plan::installed_alongside`; OLM annotates every CRD step it applies,
/// `setInstalledAlongsideAnnotation`). A step resolving no CSV is left as written. Pure.
fn alongside(step: &mut Step, ns: &str, csv: &str) {
    if step.kind == "CustomResourceDefinition" && !csv.is_empty() {
        let (key, value) = crate::install::plan::installed_alongside(ns, csv);
        crate::install::plan::annotations_mut(&mut step.manifest).insert(key, Value::String(value));
    }
}

/// The install step of listed step `s` with `manifest`, in `namespace` (namespaced kinds, the
/// plan's namespace): the object's `apiVersion` and `kind` ([`gvk_of`]) and `metadata.name`
/// from the step. Pure.
fn step_of(s: &ApiStep, mut manifest: Value, namespace: Option<&str>) -> Step {
    let r = &s.resource;
    let gvk = gvk_of(r, &manifest);
    let api_version = gvk.api_version();
    let name = manifest.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(&r.name).to_string();
    // A namespaced object goes into the plan's namespace whatever its manifest says, as OLM's
    // `ExecutePlan` puts it there: a plan never writes into another namespace.
    let namespace = namespace.map(str::to_string);
    if let Some(obj) = manifest.as_object_mut() {
        obj.insert("apiVersion".into(), Value::String(api_version));
        obj.insert("kind".into(), Value::String(gvk.kind.clone()));
        let meta = obj.entry("metadata").or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("name".into(), Value::String(name.clone()));
            match &namespace {
                Some(ns) => meta.insert("namespace".into(), Value::String(ns.clone())),
                None => meta.remove("namespace"),
            };
        }
    }
    Step {
        resolving: s.resolving.clone(),
        group: gvk.group,
        version: gvk.version,
        kind: gvk.kind,
        name,
        namespace,
        manifest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::installplan::{StepResource, StepStatus};
    use serde_json::json;

    fn crd_step() -> ApiStep {
        listed("CustomResourceDefinition", "", None)
    }

    fn listed(kind: &str, group: &str, manifest: Option<&str>) -> ApiStep {
        ApiStep {
            resolving: "csv-a".into(),
            resource: StepResource {
                group: group.into(),
                version: "v1".into(),
                kind: kind.into(),
                name: "thing".into(),
                manifest: manifest.map(String::from),
                ..Default::default()
            },
            optional: false,
            status: StepStatus::Unknown,
        }
    }

    #[test]
    fn a_listed_step_is_applied_as_written_in_the_plans_namespace() {
        let s = listed(
            "ConfigMap",
            "",
            Some(r#"{"metadata": {"name": "thing", "namespace": "kube-system"}, "data": {"a": "1"}}"#),
        );
        let m = parse_manifest(s.resource.manifest.as_deref()).expect("JSON");
        let step = step_of(&s, m, Some("ns"));
        assert_eq!((step.namespace.as_deref(), step.api_version().as_str()), (Some("ns"), "v1"));
        assert_eq!(
            step.manifest,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "thing", "namespace": "ns"}, "data": {"a": "1"}})
        );
        let s = listed("ClusterRole", "rbac.authorization.k8s.io", Some("metadata:\n  name: thing\n  namespace: x\n"));
        let step = step_of(&s, parse_manifest(s.resource.manifest.as_deref()).expect("YAML"), None);
        assert_eq!(step.manifest["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert!(step.namespace.is_none() && step.manifest["metadata"].get("namespace").is_none());
    }

    #[test]
    fn a_listed_step_creates_what_its_manifest_says() {
        // OLM's e2e suite: `{version: v1alpha1, kind: ClusterServiceVersion}` and no group.
        let mut s = listed(
            "ClusterServiceVersion",
            "",
            Some(
                r#"{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": "thing"}}"#,
            ),
        );
        s.resource.version = "v1alpha1".into();
        let step = step_of(&s, parse_manifest(s.resource.manifest.as_deref()).expect("JSON"), Some("ns"));
        assert_eq!(
            (step.group.as_str(), step.version.as_str(), step.kind.as_str()),
            ("operators.coreos.com", "v1alpha1", "ClusterServiceVersion")
        );
        assert_eq!(step.manifest["apiVersion"], "operators.coreos.com/v1alpha1");
        // Without apiVersion and kind in the manifest, the step's fields say it.
        let s = listed("Role", "rbac.authorization.k8s.io", Some(r#"{"metadata": {"name": "thing"}}"#));
        assert_eq!(gvk_of(&s.resource, &json!({"metadata": {}})).api_version(), "rbac.authorization.k8s.io/v1");
        // OLM's e2e suite: a CRD step `{version: v1}` whose manifest has no apiVersion, and one
        // whose version is `apiextensions.k8s.io/v1`.
        let mut s = listed("CustomResourceDefinition", "", None);
        assert_eq!(gvk_of(&s.resource, &json!({"metadata": {}})).api_version(), "apiextensions.k8s.io/v1");
        s.resource.version = "apiextensions.k8s.io/v1".into();
        assert_eq!(gvk_of(&s.resource, &json!({"metadata": {}})).api_version(), "apiextensions.k8s.io/v1");
        let s = listed("ConfigMap", "", None);
        assert_eq!(gvk_of(&s.resource, &json!({"metadata": {}})).api_version(), "v1", "the core group stays");
        // …and a CRD manifest that says `apiVersion: v1` (OLM's suite, scoped-client specs).
        let wrong = json!({"apiVersion": "v1", "kind": "CustomResourceDefinition", "metadata": {}});
        assert_eq!(gvk_of(&crd_step().resource, &wrong).api_version(), "apiextensions.k8s.io/v1");
        // A CRD step of a CSV says which CSV it was installed with, as OLM writes it.
        let crd = listed("CustomResourceDefinition", "apiextensions.k8s.io", None);
        let mut step = step_of(&crd, json!({"metadata": {"name": "tests.example.com"}}), None);
        alongside(&mut step, "ns", "csv-a");
        let (key, value) = crate::install::plan::installed_alongside("ns", "csv-a");
        assert_eq!(step.manifest["metadata"]["annotations"][key.as_str()], json!(value));
        assert_eq!(value, "ns/csv-a");
    }

    #[test]
    fn listed_steps_get_the_rbac_checks_of_a_bundle() {
        let planned = |kind: &str, manifest: Value| PlannedStep {
            step: step_of(&listed(kind, "rbac.authorization.k8s.io", None), manifest, None),
            catalog: Default::default(),
            image: None,
        };
        let role = json!({"metadata": {"name": "reader"}, "rules": []});
        assert!(check_rbac(&[planned("ClusterRole", role)]).is_ok());
        let admin = json!({"metadata": {"name": "evil-admin"},
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                           "subjects": [{"kind": "User", "name": "mallory", "apiGroup": "rbac.authorization.k8s.io"}]});
        match check_rbac(&[planned("ClusterRoleBinding", admin)]) {
            Err(Hold::Fail("InstallCheckFailed", m)) => assert!(m.contains("mallory"), "{m}"),
            other => panic!("a binding of a user is refused: {other:?}"),
        }
    }

    #[test]
    fn a_step_without_an_object_is_refused_with_what_to_do() {
        assert!(parse_manifest(None).is_err_and(|e| e.contains("no manifest")));
        let reference = r#"{"kind":"BundleObject","image":"r/b@sha256:00","digest":"sha256:11","size":3}"#;
        assert!(parse_manifest(Some(reference)).is_err_and(|e| e.contains("refers to a bundle image")));
        assert!(parse_manifest(Some("[1]")).is_err_and(|e| e.contains("not an object")));
    }

    #[test]
    fn only_an_approved_plan_with_listed_steps_and_no_lookups_is_applied() {
        let mut ip: InstallPlan = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"approval": "Automatic", "approved": true, "clusterServiceVersionNames": []},
            "status": {"phase": "Installing", "catalogSources": [], "plan": [
                {"resolving": "csv-a", "status": "Unknown",
                 "resource": {"sourceName": "", "sourceNamespace": "", "group": "", "version": "v1", "kind": "ConfigMap", "name": "thing", "manifest": "{}"}}]}
        }))
        .expect("plan");
        assert!(is_listed(&ip));
        ip.spec.approved = false;
        assert!(!is_listed(&ip), "waits for approval");
        ip.spec.approved = true;
        ip.status.as_mut().expect("status").phase = crate::api::installplan::InstallPlanPhase::Complete;
        assert!(!is_listed(&ip), "done");
    }
}
