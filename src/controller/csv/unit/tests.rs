use serde_json::json;

use super::*;

/// A CSV with one Deployment, a permission, a validating webhook and an owned APIService served
/// by that Deployment, as a user applies it by hand.
fn csv_value(image: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": "widgets.v1", "namespace": "ops", "annotations": {"olm.targetNamespaces": "ops"}},
        "spec": {
            "displayName": "Widgets",
            "installModes": [{"type": "OwnNamespace", "supported": true}],
            "install": {"strategy": "deployment", "spec": {
                "permissions": [{"serviceAccountName": "widgets", "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}],
                "deployments": [{"name": "widgets", "spec": {
                    "selector": {"matchLabels": {"app": "widgets"}},
                    "template": {"metadata": {"labels": {"app": "widgets"}}, "spec": {
                        "serviceAccountName": "widgets",
                        "containers": [{"name": "op", "image": image, "ports": [{"containerPort": 8443}],
                                        "env": [{"name": "MODE", "value": "a"}]}]}}}}]}},
            "webhookdefinitions": [{"generateName": "vwidgets.example.com", "type": "ValidatingAdmissionWebhook",
                "deploymentName": "widgets", "containerPort": 443, "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["widgets"]}]}],
            "apiservicedefinitions": {"owned": [{"group": "packages.example.com", "version": "v1", "kind": "Package",
                "name": "packages", "displayName": "Package", "deploymentName": "widgets", "containerPort": 5443}]}
        }
    })
}

fn target() -> InstallTarget {
    InstallTarget {
        namespace: "ops".into(),
        target_namespaces: vec!["ops".into()],
        csv_name: "widgets.v1".into(),
        operator_group: Some("og".into()),
        ..Default::default()
    }
}

fn plan(value: Value, target: &InstallTarget) -> Vec<Step> {
    let origin = std::path::PathBuf::from("ClusterServiceVersion ops/widgets.v1");
    let bundle = crate::bundle::Bundle::from_objects(&origin, Default::default(), vec![(origin.clone(), value)])
        .expect("a bundle of the CSV alone");
    crate::install::plan::steps(&bundle, target).expect("the CSV plans")
}

fn hash_of(steps: &[Step], name: &str) -> String {
    let d = steps.iter().find(|s| s.kind == "Deployment" && s.name == name).expect("the Deployment");
    d.manifest
        .pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL_DEPLOYMENT_SPEC_HASH))
        .unwrap()
        .as_str()
        .unwrap()
        .into()
}

#[test]
fn a_csv_applied_by_hand_gets_what_olms_olm_operator_makes_and_nothing_of_the_plan() {
    let steps = plan(csv_value("op:1"), &target());
    let made: Vec<String> =
        steps.iter().filter(|s| made_by_olm_operator(s)).map(|s| format!("{} {}", s.kind, s.name)).collect();
    assert_eq!(
        made,
        [
            "Role widgets-service-cert",
            "RoleBinding widgets-service-cert",
            "RoleBinding widgets-service-auth-reader",
            "ClusterRoleBinding widgets-service-system:auth-delegator",
            "Service widgets-service",
            "Secret widgets-service-cert",
            "Deployment widgets",
            "ValidatingWebhookConfiguration vwidgets.example.com-8976cb8b6",
            "APIService v1.packages.example.com",
        ]
        .map(String::from),
        "the Deployment, its serving certificate, Service, the Secret's RBAC, the auth bindings, the webhook configuration and the APIService"
    );
    let left: Vec<String> =
        steps.iter().filter(|s| !made_by_olm_operator(s)).map(|s| format!("{} {}", s.kind, s.name)).collect();
    assert!(
        left.iter().any(|s| s == "ClusterServiceVersion widgets.v1")
            && left.iter().any(|s| s == "ServiceAccount widgets")
            && left.iter().filter(|s| s.starts_with("Role ") || s.starts_with("RoleBinding ")).count() == 2,
        "the CSV, its ServiceAccount and the RBAC of its permissions stay the InstallPlan's: {left:?}"
    );
}

#[test]
fn a_plan_installed_csv_gets_from_its_reconciler_exactly_what_its_plan_leaves_out() {
    use crate::install::plan::in_install_plan;
    let steps = plan(csv_value("op:1"), &target());
    let names = |keep: &dyn Fn(&Step) -> bool| -> Vec<String> {
        steps.iter().filter(|s| keep(s)).map(|s| format!("{} {}", s.kind, s.name)).collect()
    };
    assert_eq!(
        names(&|s| by_csv_reconciler(Origin::Plan, s, &steps)),
        ["Secret widgets-service-cert", "Deployment widgets"].map(String::from),
        "the Deployment, with the serving Secret its certificate hash is read from"
    );
    assert_eq!(
        names(&|s| !in_install_plan(s, &steps)),
        ["Deployment widgets"].map(String::from),
        "the InstallPlan lists everything but the Deployment, as OLM's catalog operator"
    );
    assert!(
        steps.iter().all(|s| in_install_plan(s, &steps) || by_csv_reconciler(Origin::Plan, s, &steps)),
        "nothing is left to nobody"
    );
}

#[test]
fn rbac_lifted_to_cluster_scope_or_copied_to_targets_is_the_csv_reconcilers() {
    use crate::install::plan::in_install_plan;
    let mut csv = csv_value("op:1");
    csv["spec"]["installModes"] = json!([{"type": "OwnNamespace", "supported": true}, {"type": "MultiNamespace", "supported": true}, {"type": "AllNamespaces", "supported": true}]);
    let left_out = |targets: &[&str]| -> Vec<String> {
        let mut t = target();
        t.target_namespaces = targets.iter().map(|n| n.to_string()).collect();
        let steps = plan(csv.clone(), &t);
        let left: Vec<String> = steps
            .iter()
            .filter(|s| !in_install_plan(s, &steps) && s.kind != "Deployment")
            .map(|s| {
                format!("{} {}{}", s.kind, s.namespace.as_deref().map(|n| format!("{n}/")).unwrap_or_default(), s.name)
            })
            .collect();
        assert!(
            steps.iter().filter(|s| !in_install_plan(s, &steps)).all(|s| by_csv_reconciler(Origin::Plan, s, &steps)),
            "what the plan leaves out is the CSV reconciler's"
        );
        let role = steps
            .iter()
            .find(|s| s.kind == "Role" && s.namespace.as_deref() == Some("ops") && in_install_plan(s, &steps));
        assert!(role.is_some(), "the Role of the permissions in the operator's namespace stays a plan step");
        left
    };
    let lifted = left_out(&[""]);
    assert_eq!(lifted.len(), 2, "{lifted:?}");
    assert!(
        lifted[0].starts_with("ClusterRole widgets.v1-widgets-")
            && lifted[1].starts_with("ClusterRoleBinding widgets.v1-widgets-"),
        "{lifted:?}"
    );
    let copied = left_out(&["ops", "a", "b"]);
    assert_eq!(copied.len(), 4, "a Role and a RoleBinding in each other target: {copied:?}");
    assert!(copied.iter().all(|c| c.contains(" a/") || c.contains(" b/")), "{copied:?}");
    assert!(left_out(&["ops"]).is_empty(), "OwnNamespace: nothing to lift or copy");
}

#[test]
fn the_csv_on_the_cluster_plans_the_deployment_its_plan_applied() {
    // An InstallPlan plans from the bundle's CSV and applies the CSV as it plans it (OLM's CRD
    // defaults, the target's annotations); planned again from that CSV, the Deployment has the
    // same hash, so a plan-installed CSV is not rolled out for nothing.
    let mut t = target();
    t.package = "widgets".into();
    t.config = serde_json::from_value(json!({"env": [{"name": "FROM_CONFIG", "value": "1"}]})).unwrap();
    let from_bundle = plan(csv_value("op:1"), &t);
    let applied = from_bundle.iter().find(|s| s.kind == "ClusterServiceVersion").unwrap().manifest.clone();
    let from_cluster = plan(applied, &t);
    assert_eq!(hash_of(&from_bundle, "widgets"), hash_of(&from_cluster, "widgets"));
    let dep = from_cluster.iter().find(|s| s.kind == "Deployment").unwrap();
    let env = dep.manifest.pointer("/spec/template/spec/containers/0/env").unwrap().to_string();
    assert!(env.contains("FROM_CONFIG"), "the Subscription's spec.config is applied on top: {env}");
}

#[test]
fn an_edit_of_the_install_strategy_changes_the_deployment_and_nothing_else_does() {
    let before = plan(csv_value("op:1"), &target());
    let found: BTreeMap<String, Option<String>> = [("widgets".to_string(), Some(hash_of(&before, "widgets")))].into();
    assert!(changed_deployments(&before, &found).is_empty(), "as applied: nothing to roll out");
    let mut edited = csv_value("op:1");
    edited["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] =
        json!("b");
    let after = plan(edited, &target());
    assert_eq!(changed_deployments(&after, &found), ["widgets"], "an env var edited in spec.install");
    assert_eq!(changed_deployments(&plan(csv_value("op:2"), &target()), &found), ["widgets"], "a hotfix image");
    let unlabelled: BTreeMap<String, Option<String>> = [("widgets".to_string(), None)].into();
    assert!(changed_deployments(&before, &unlabelled).is_empty(), "no hash: not made from a strategy, left alone");
    assert!(changed_deployments(&before, &BTreeMap::new()).is_empty(), "a missing Deployment is not a change");
}

#[test]
fn what_is_applied_for_each_origin() {
    let (none, one) = (Vec::<String>::new(), vec!["widgets".to_string()]);
    assert_eq!(to_apply(Origin::Csv, true, &none, &none), Apply::Everything, "by hand, installing");
    assert_eq!(to_apply(Origin::Csv, false, &one, &none), Apply::Everything, "by hand, a Deployment deleted");
    assert_eq!(to_apply(Origin::Csv, false, &none, &one), Apply::Everything, "by hand, strategy edited");
    assert_eq!(to_apply(Origin::Csv, false, &none, &none), Apply::Nothing, "by hand, installed and unchanged");
    assert_eq!(to_apply(Origin::Plan, true, &none, &none), Apply::Everything, "planned, installing");
    assert_eq!(to_apply(Origin::Plan, false, &one, &none), Apply::Everything, "planned, a Deployment deleted");
    assert_eq!(to_apply(Origin::Plan, false, &none, &one), Apply::Deployments(one.clone()), "rolled out");
}

#[test]
fn webhook_definitions_olm_refuses_are_named_with_olms_message() {
    let csv = |rules: Value, twice: bool| {
        let mut v = csv_value("op:1");
        v["spec"]["webhookdefinitions"][0]["rules"] = rules;
        if twice {
            let w = v["spec"]["webhookdefinitions"][0].clone();
            v["spec"]["webhookdefinitions"].as_array_mut().unwrap().push(w);
        }
        serde_json::from_value::<ClusterServiceVersion>(v).unwrap()
    };
    let rule = |groups: &str, resources: &str| json!([{"apiGroups": [groups], "apiVersions": ["*"], "resources": [resources]}]);
    assert_eq!(invalid_webhooks(&csv(rule("example.com", "widgets"), false)), None);
    assert_eq!(
        invalid_webhooks(&csv(rule("*", "*"), false)).as_deref(),
        Some("webhook rules cannot include all groups")
    );
    assert_eq!(
        invalid_webhooks(&csv(rule("operators.coreos.com", "*"), false)).as_deref(),
        Some("webhook rules cannot include the OLM group")
    );
    assert_eq!(
        invalid_webhooks(&csv(rule("admissionregistration.k8s.io", "*"), false)).as_deref(),
        Some("webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources")
    );
    assert_eq!(
        invalid_webhooks(&csv(rule("admissionregistration.k8s.io", "validatingadmissionpolicies"), false)),
        None,
        "other resources of the admission group are allowed"
    );
    assert_eq!(
        invalid_webhooks(&csv(rule("example.com", "widgets"), true)).as_deref(),
        Some("CSV contains repeated WebhookDescription name")
    );
}

#[test]
fn the_package_is_read_from_the_component_label() {
    let mut v = csv_value("op:1");
    v["metadata"]["labels"] = json!({"operators.coreos.com/widgets.ops": "", "olm.managed": "true"});
    let csv: ClusterServiceVersion = serde_json::from_value(v).unwrap();
    assert_eq!(package_of(&csv, "ops").as_deref(), Some("widgets"));
    assert_eq!(package_of(&csv, "other"), None, "the label of another namespace's install");
    let hand: ClusterServiceVersion = serde_json::from_value(csv_value("op:1")).unwrap();
    assert_eq!(package_of(&hand, "ops"), None);
}

#[test]
fn webhooks_missing_or_described_anew_are_applied_and_the_ones_no_longer_described_removed() {
    let steps = plan(csv_value("op:1"), &target());
    let planned: Vec<Found> = steps
        .iter()
        .filter(|s| s.kind.ends_with("WebhookConfiguration") || s.kind == "APIService")
        .map(|s| {
            let hash = s.manifest.pointer("/metadata/labels").and_then(|l| l.get(webhook::LABEL_WEBHOOK_HASH));
            (s.kind.clone(), s.name.clone(), hash.and_then(Value::as_str).map(String::from))
        })
        .collect();
    assert_eq!(planned.len(), 2, "{planned:?}");
    assert_eq!(webhooks_due(&steps, &planned), (false, vec![]), "all there as planned");
    assert_eq!(webhooks_due(&steps, &planned[..1]), (true, vec![]), "the APIService deleted");
    let mut old = planned.clone();
    old[0].2 = Some("an older description".into());
    assert_eq!(webhooks_due(&steps, &old), (true, vec![]), "the description changed: applied again");
    let renamed = ("ValidatingWebhookConfiguration".to_string(), "vold.example.com-1".to_string(), Some("h".into()));
    let mut found = planned.clone();
    found.push(renamed.clone());
    assert_eq!(webhooks_due(&steps, &found), (false, vec![renamed]), "a generateName no longer described");
}

#[test]
fn an_apiservice_is_adopted_only_from_the_csv_itself_the_one_it_replaces_or_a_leaving_owner() {
    let labels = |ns: &str, name: &str| -> BTreeMap<String, String> {
        [("olm.owner.kind", "ClusterServiceVersion"), ("olm.owner.namespace", ns), ("olm.owner", name)]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into()
    };
    let target = ("ops", "widgets.v2");
    assert!(apiservice_adoptable(&labels("ops", "widgets.v2"), target, None, false), "its own");
    assert!(
        apiservice_adoptable(&labels("ops", "widgets.v1"), target, Some("widgets.v1"), false),
        "the one it replaces"
    );
    assert!(
        !apiservice_adoptable(&labels("other", "widgets.v1"), target, Some("widgets.v1"), false),
        "same name elsewhere"
    );
    assert!(!apiservice_adoptable(&labels("ops", "gadgets.v1"), target, None, false), "another CSV's: OwnerConflict");
    assert!(
        apiservice_adoptable(&labels("ops", "gadgets.v1"), target, None, true),
        "its owner is Replacing or Deleting"
    );
    assert!(!apiservice_adoptable(&BTreeMap::new(), target, None, true), "no owner labels: not adoptable, as in OLM");
}

#[test]
fn a_deployment_renamed_in_the_strategy_leaves_the_old_one_orphaned() {
    let steps = plan(csv_value("op:1"), &target());
    let found = ["widgets".to_string(), "widgets-old".to_string()];
    assert_eq!(orphaned_deployments(&steps, &found), ["widgets-old"]);
    assert!(orphaned_deployments(&steps, &found[..1]).is_empty());
}

/// OLM's `ensureSingletonRBAC`: a Role the CSV owns becomes a ClusterRole of its name, labels and
/// rules plus the namespaces it may now read; its binding binds that ClusterRole.
#[test]
fn owned_rbac_is_lifted_under_its_own_name() {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let labels = serde_json::json!({"olm.owner": "a.v1", "olm.owner.namespace": "ops", "olm.owner.kind": "ClusterServiceVersion"});
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sa-role", "namespace": "ops", "labels": labels},
        "rules": [{"verbs": ["*"], "apiGroups": ["cluster.com"], "resources": ["opgroups"]}]
    }))
    .unwrap();
    let cr = serde_json::to_value(super::lifted_role(&role)).unwrap();
    assert_eq!(cr["metadata"], serde_json::json!({"name": "sa-role", "labels": labels}));
    assert_eq!(
        cr["rules"],
        serde_json::json!([
            {"verbs": ["*"], "apiGroups": ["cluster.com"], "resources": ["opgroups"]},
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]}
        ])
    );
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sa-rb", "namespace": "ops", "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sa-role"},
        "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ops"}]
    }))
    .unwrap();
    let crb = serde_json::to_value(super::lifted_binding(&binding)).unwrap();
    assert_eq!(crb["metadata"]["name"], "sa-rb");
    assert_eq!(
        crb["roleRef"],
        serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sa-role"})
    );
    assert_eq!(crb["subjects"], serde_json::json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "ops"}]));
}
