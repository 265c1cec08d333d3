use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;
use crate::install::SubscriptionConfig;

fn bundle_dir(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn nginx() -> Bundle {
    Bundle::load(&bundle_dir("bundles/nginx-operator/0.2.0")).expect("nginx bundle")
}

fn target(ns: &str) -> InstallTarget {
    InstallTarget {
        namespace: ns.into(),
        target_namespaces: vec![ns.into()],
        package: "nginx-operator".into(),
        csv_name: "nginx-operator.v0.2.0".into(),
        ..Default::default()
    }
}

fn find<'a>(steps: &'a [Step], kind: &str) -> Vec<&'a Step> {
    steps.iter().filter(|s| s.kind == kind).collect()
}

fn label<'a>(s: &'a Step, key: &str) -> Option<&'a str> {
    s.manifest.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
}

#[test]
fn steps_are_ordered_by_kind_as_issue_5_says() {
    let steps = steps(&nginx(), &target("ops")).expect("plan");
    let kinds: Vec<&str> = steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "CustomResourceDefinition",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "Service",
            "ClusterServiceVersion",
            "Deployment"
        ]
    );
    assert!(steps.iter().all(|s| s.resolving == "nginx-operator.v0.2.0"));
    let crd = &steps[0];
    assert_eq!(
        (crd.group.as_str(), crd.version.as_str(), crd.namespace.as_deref()),
        ("apiextensions.k8s.io", "v1", None)
    );
    let svc = find(&steps, "Service")[0];
    assert_eq!((svc.group.as_str(), svc.version.as_str(), svc.namespace.as_deref()), ("", "v1", Some("ops")));
    assert_eq!(svc.manifest.pointer("/metadata/namespace"), Some(&json!("ops")));
}

#[test]
fn generated_rbac_names_are_deterministic_bounded_and_bind_the_service_account() {
    let a = steps(&nginx(), &target("ops")).expect("plan");
    let b = steps(&nginx(), &target("ops")).expect("plan");
    assert_eq!(a, b, "planning twice gives the same steps");

    let role = find(&a, "Role")[0];
    let rb = find(&a, "RoleBinding")[0];
    // OLM's cut: the base keeps 63 - len(hash) - 1 characters (the hash is 37 or 38 long).
    assert!(role.name.starts_with("nginx-operator.v0.2.0-n"), "{}", role.name);
    assert!(role.name.len() <= 63, "{} is {} chars", role.name, role.name.len());
    assert_eq!(rb.name, role.name);
    assert_eq!(
        rb.manifest["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.name})
    );
    assert_eq!(
        rb.manifest["subjects"],
        json!([{"kind": "ServiceAccount", "name": "nginx-operator-controller-manager", "namespace": "ops"}])
    );
    assert_eq!(role.manifest["rules"].as_array().map(Vec::len), Some(7));

    let cr = find(&a, "ClusterRole")[0];
    assert!(cr.name.starts_with("nginx-operator.v0.2.0-") && cr.name.len() <= 63, "{}", cr.name);
    assert_eq!(find(&a, "ClusterRoleBinding")[0].manifest["roleRef"]["name"], json!(cr.name));

    // Cluster-scoped names differ between namespaces, namespaced ones need not.
    let other = steps(&nginx(), &target("other")).expect("plan");
    assert_ne!(find(&other, "ClusterRole")[0].name, cr.name);
    assert_eq!(find(&other, "Role")[0].name, role.name);
}

#[test]
fn service_account_generated_unless_shipped() {
    let s = steps(&nginx(), &target("ops")).expect("plan");
    let sas = find(&s, "ServiceAccount");
    assert_eq!(sas.len(), 1);
    assert_eq!(sas[0].name, "nginx-operator-controller-manager");
    assert_eq!(sas[0].namespace.as_deref(), Some("ops"));

    let dir = copy_bundle("bundles/nginx-operator/0.2.0");
    std::fs::write(
        dir.path().join("manifests/sa.yaml"),
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: nginx-operator-controller-manager\n  annotations: {shipped: 'yes'}\n",
    )
    .expect("write sa");
    let b = Bundle::load(dir.path()).expect("bundle");
    let s = steps(&b, &target("ops")).expect("plan");
    let sas = find(&s, "ServiceAccount");
    assert_eq!(sas.len(), 1, "the bundle's own ServiceAccount is used, none generated");
    assert_eq!(sas[0].manifest.pointer("/metadata/annotations/shipped"), Some(&json!("yes")));
}

#[test]
fn owner_labels_and_component_label_on_generated_objects() {
    let mut t = target("ops");
    t.owner = Some(t.csv_owner_reference());
    let s = steps(&nginx(), &t).expect("plan");
    for st in s.iter().filter(|st| {
        ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Deployment"].contains(&st.kind.as_str())
    }) {
        assert_eq!(label(st, "olm.owner"), Some("nginx-operator.v0.2.0"), "{}", st.describe());
        assert_eq!(label(st, "olm.owner.namespace"), Some("ops"), "{}", st.describe());
        assert_eq!(label(st, "olm.owner.kind"), Some("ClusterServiceVersion"), "{}", st.describe());
    }
    // A generated ServiceAccount is owned by reference only, as OLM makes it (`rbac.go`).
    for st in find(&s, "ServiceAccount") {
        assert_eq!(label(st, "olm.owner"), None, "{}", st.describe());
    }
    for st in &s {
        assert_eq!(label(st, "olm.managed"), Some("true"), "{}", st.describe());
        assert_eq!(label(st, "operators.coreos.com/nginx-operator.ops"), Some(""), "{}", st.describe());
        let refs = st.manifest.pointer("/metadata/ownerReferences");
        let owned = matches!(st.kind.as_str(), "ServiceAccount" | "Role" | "RoleBinding" | "Service" | "Deployment");
        assert_eq!(refs.is_some(), owned, "ownerReferences on {}", st.describe());
        if let Some(r) = refs {
            assert_eq!(r[0]["kind"], json!("ClusterServiceVersion"));
            assert_eq!(r[0]["blockOwnerDeletion"], json!(false));
            assert_eq!(r[0]["controller"], json!(false));
        }
    }
    let role = find(&s, "Role")[0];
    assert!(label(role, "olm.permissions.hash").is_some_and(|h| h.len() > 30));
    // Bundle-shipped cluster RBAC stays unowned (OLM keeps it when the CSV goes).
    let kaiwu = Bundle::load(&bundle_dir("bundles/kaiwudb-operator/1.0.0")).expect("kaiwudb");
    let kt = InstallTarget { package: "kaiwudb-operator".into(), csv_name: kaiwu.name().into(), ..target("ops") };
    let ks = steps(&kaiwu, &kt).expect("plan");
    let shipped =
        ks.iter().find(|s| s.name == "kaiwudb-operator-kaiwucluster-editor-role").expect("shipped ClusterRole");
    assert_eq!(label(shipped, "olm.owner"), None);
    assert_eq!(label(shipped, "rbac.authorization.k8s.io/aggregate-to-edit"), Some("true"));
}

/// The operand image the example CSV names by digest (bundles/nginx-operator/0.2.0).
const HTTPD: &str = "quay.io/example/httpd@sha256:89aa4fca0fc5694d3332dd74194f88554c630c0a28f240fb459d1f0eb45ea1a5";

#[test]
fn deployment_carries_olm_labels_annotations_and_defaults() {
    let mut t = target("ops");
    t.operator_group = Some("og".into());
    let s = steps(&nginx(), &t).expect("plan");
    let d = find(&s, "Deployment")[0];
    assert_eq!(d.name, "nginx-operator-controller-manager");
    assert_eq!((d.group.as_str(), d.version.as_str()), ("apps", "v1"));
    assert_eq!(label(d, "control-plane"), Some("controller-manager"), "the entry's own label");
    assert!(label(d, LABEL_DEPLOYMENT_SPEC_HASH).is_some());
    let ann = &d.manifest["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(ann["olm.targetNamespaces"], json!("ops"));
    assert_eq!(ann["olm.operatorGroup"], json!("og"));
    assert_eq!(ann["capabilities"], json!("Basic Install"), "CSV annotations are projected onto the pod template");
    assert_eq!(d.manifest["spec"]["revisionHistoryLimit"], json!(1));
    let env = &d.manifest["spec"]["template"]["spec"]["containers"][0]["env"];
    // The bundle's own env first (examples/nginx-operator's CSV), then OPERATOR_CONDITION_NAME, as OLM.
    assert_eq!(
        env,
        &json!([{"name": "WATCH_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}}, {"name": "RELATED_IMAGE_NGINX", "value": HTTPD}, {"name": "OPERATOR_CONDITION_NAME", "value": "nginx-operator.v0.2.0"}])
    );

    let csv = find(&s, "ClusterServiceVersion")[0];
    assert_eq!(csv.namespace.as_deref(), Some("ops"));
    assert_eq!(csv.manifest["metadata"]["annotations"]["olm.targetNamespaces"], json!("ops"));
    assert_eq!(csv.manifest["metadata"]["annotations"]["olm.operatorNamespace"], json!("ops"));
    assert!(csv.manifest["spec"].get("replaces").is_none(), "nothing replaced on this cluster: spec.replaces cleared");
    let mut t2 = target("ops");
    t2.replaces = Some("nginx-operator.v0.1.0".into());
    t2.properties =
        vec![json!({"type": "olm.package", "value": {"packageName": "nginx-operator", "version": "0.2.0"}})];
    let s2 = steps(&nginx(), &t2).expect("plan");
    let csv2 = find(&s2, "ClusterServiceVersion")[0];
    assert_eq!(csv2.manifest["spec"]["replaces"], json!("nginx-operator.v0.1.0"));
    assert_eq!(
        csv2.manifest["metadata"]["annotations"]["operatorframework.io/properties"],
        json!(r#"{"properties":[{"type":"olm.package","value":{"packageName":"nginx-operator","version":"0.2.0"}}]}"#)
    );
}

#[test]
fn subscription_config_is_merged_and_resources_untouched_when_unset() {
    let mut t = target("ops");
    t.config = SubscriptionConfig::from_value(&json!({
        "env": [{"name": "HTTP_PROXY", "value": "http://proxy"}],
        "nodeSelector": {"zone": "a"},
        "tolerations": [{"key": "k", "operator": "Exists"}]
    }))
    .expect("config");
    let s = steps(&nginx(), &t).expect("plan");
    let pod = &find(&s, "Deployment")[0].manifest["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["env"],
        json!([{"name": "WATCH_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}}, {"name": "RELATED_IMAGE_NGINX", "value": HTTPD}, {"name": "HTTP_PROXY", "value": "http://proxy"}, {"name": "OPERATOR_CONDITION_NAME", "value": "nginx-operator.v0.2.0"}])
    );
    assert_eq!(pod["nodeSelector"], json!({"zone": "a"}));
    assert_eq!(pod["tolerations"], json!([{"key": "k", "operator": "Exists"}]));
    assert_eq!(
        pod["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "10m", "memory": "64Mi"}}),
        "OLM #1912: resources from the CSV stay when the config sets none"
    );
    t.config.resources = serde_json::from_value(json!({"limits": {"memory": "1Gi"}})).expect("resources");
    let s = steps(&nginx(), &t).expect("plan");
    let pod = &find(&s, "Deployment")[0].manifest["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["resources"], json!({"limits": {"memory": "1Gi"}}));
}

#[test]
fn multi_namespace_copies_roles_and_all_namespaces_lifts_them() {
    let mut t = target("ops");
    t.target_namespaces = vec!["b".into(), "a".into(), "ops".into()];
    let s = steps(&nginx(), &t).expect("plan");
    let roles: Vec<_> = find(&s, "Role").iter().map(|r| r.namespace.clone().unwrap_or_default()).collect();
    assert_eq!(roles, vec!["ops", "a", "b"]);
    let rbs = find(&s, "RoleBinding");
    assert_eq!(rbs.len(), 3);
    for rb in &rbs {
        assert_eq!(
            rb.manifest["subjects"][0]["namespace"],
            json!("ops"),
            "the subject is the operator's ServiceAccount"
        );
    }
    let copied = rbs.iter().find(|r| r.namespace.as_deref() == Some("a")).expect("copy in a");
    assert_eq!(label(copied, "olm.copiedFrom"), Some("ops"));
    assert!(copied.manifest.pointer("/metadata/ownerReferences").is_none());
    let d = find(&s, "Deployment")[0];
    assert_eq!(d.manifest["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"], json!("a,b,ops"));

    t.target_namespaces = vec!["".into()];
    let s = steps(&nginx(), &t).expect("plan");
    assert_eq!(find(&s, "Role").len(), 1);
    let role = find(&s, "Role")[0];
    let namespaces_rule = json!({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]});
    let lifted = find(&s, "ClusterRole")
        .into_iter()
        .find(|c| c.manifest["rules"].as_array().and_then(|r| r.last()) == Some(&namespaces_rule))
        .expect("lifted ClusterRole");
    assert_eq!(
        lifted.manifest["rules"].as_array().map(|r| r.len()),
        role.manifest["rules"].as_array().map(|r| r.len() + 1),
        "the Role's rules plus namespaces"
    );
    let crb = find(&s, "ClusterRoleBinding")
        .into_iter()
        .find(|c| c.manifest["roleRef"]["name"] == json!(lifted.name))
        .expect("lifted binding");
    assert_eq!(crb.manifest["roleRef"]["kind"], json!("ClusterRole"));
    // Lifted under the Role's own name, as OLM's ensureSingletonRBAC names them (an OLM
    // install's ClusterRole is adopted, not duplicated).
    assert_eq!(lifted.name, role.name);
    assert_eq!(crb.name, role.name);

    t.target_namespaces = vec!["".into(), "a".into()];
    assert!(matches!(steps(&nginx(), &t), Err(PlanError::InvalidTargetNamespaces { .. })));
}

fn copy_bundle(rel: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        for e in std::fs::read_dir(bundle_dir(rel).join(sub)).expect("read bundle") {
            let e = e.expect("entry");
            std::fs::copy(e.path(), dir.path().join(sub).join(e.file_name())).expect("copy");
        }
    }
    dir
}

#[test]
fn server_owned_metadata_is_dropped_from_bundle_objects() {
    let dir = copy_bundle("bundles/nginx-operator/0.2.0");
    std::fs::write(
        dir.path().join("manifests/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: exported\n  namespace: elsewhere\n  resourceVersion: '42'\n  uid: abc\n  creationTimestamp: null\ndata: {k: v}\n",
    )
    .expect("write");
    let s = steps(&Bundle::load(dir.path()).expect("bundle"), &target("ops")).expect("plan");
    let cm = find(&s, "ConfigMap")[0];
    let meta = cm.manifest["metadata"].as_object().expect("metadata");
    assert!(
        !meta.contains_key("resourceVersion") && !meta.contains_key("uid") && !meta.contains_key("creationTimestamp"),
        "{meta:?}"
    );
    assert_eq!(cm.namespace.as_deref(), Some("ops"), "installed into the target namespace, not the exported one");
    assert_eq!(cm.manifest["data"], json!({"k": "v"}));
    let kinds: Vec<&str> = s.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds[kinds.iter().position(|k| *k == "ConfigMap").expect("cm") - 1],
        "Service",
        "ConfigMaps after Services"
    );
}

#[test]
fn unsupported_kinds_are_named() {
    let dir = copy_bundle("bundles/nginx-operator/0.2.0");
    std::fs::write(
        dir.path().join("manifests/job.yaml"),
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("manifests/dep.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: extra\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("manifests/pdb.yaml"),
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: pdb\n",
    )
    .expect("write");
    let b = Bundle::load(dir.path()).expect("bundle");
    let err = steps(&b, &target("ops")).expect_err("Job is not installable");
    let PlanError::UnsupportedResource { objects, .. } = &err else { panic!("wrong error {err}") };
    assert_eq!(
        objects,
        &vec!["Deployment extra (manifests/dep.yaml)".to_string(), "Job migrate (manifests/job.yaml)".to_string()]
    );
    assert!(err.to_string().contains("UnsupportedResource"), "{err}");

    // A supported §2.5 kind is planned after Secrets and before the CSV, owned in the namespace.
    std::fs::remove_file(dir.path().join("manifests/job.yaml")).expect("rm");
    std::fs::remove_file(dir.path().join("manifests/dep.yaml")).expect("rm");
    let mut t = target("ops");
    t.owner = Some(t.csv_owner_reference());
    let s = steps(&Bundle::load(dir.path()).expect("bundle"), &t).expect("plan");
    let kinds: Vec<&str> = s.iter().map(|s| s.kind.as_str()).collect();
    let pdb = kinds.iter().position(|k| *k == "PodDisruptionBudget").expect("pdb step");
    assert_eq!(kinds[pdb - 1], "Service");
    assert_eq!(kinds[pdb + 1], "ClusterServiceVersion");
    assert!(s[pdb].manifest.pointer("/metadata/ownerReferences/0").is_some());
}

#[test]
fn bad_targets_and_strategies_are_errors() {
    let mut t = target("ops");
    t.csv_name = "other.v1".into();
    let e = steps(&nginx(), &t).expect_err("mismatch");
    assert!(e.to_string().contains("other.v1") && e.to_string().contains("nginx-operator.v0.2.0"), "{e}");
    let mut t = target("");
    t.target_namespaces.clear();
    assert!(matches!(steps(&nginx(), &t), Err(PlanError::NoNamespace)));

    let dir = copy_bundle("bundles/nginx-operator/0.2.0");
    let csv_path = dir.path().join("manifests/nginx-operator.clusterserviceversion.yaml");
    let text = std::fs::read_to_string(&csv_path).expect("read csv");
    std::fs::write(&csv_path, text.replace("strategy: deployment", "strategy: helm")).expect("write");
    let e = steps(&Bundle::load(dir.path()).expect("bundle"), &target("ops")).expect_err("unknown strategy");
    assert!(e.to_string().contains("spec.install.strategy") && e.to_string().contains("helm"), "{e}");

    std::fs::write(
        &csv_path,
        text.replace(
            "      permissions:\n        - serviceAccountName: nginx-operator-controller-manager\n",
            "      permissions:\n        - serviceAccount: x\n",
        ),
    )
    .expect("write");
    let e = steps(&Bundle::load(dir.path()).expect("bundle"), &target("ops")).expect_err("bad permission");
    assert!(
        e.to_string().contains("spec.install.spec.permissions[0]") && e.to_string().contains("serviceAccountName"),
        "{e}"
    );
}

#[test]
fn hashes_match_go_encoding_json_and_big_int_base62() {
    // Expected values computed with Go 1.x: json.Marshal of []rbacv1.PolicyRule-shaped structs /
    // of struct{RoleRef; Subjects}, sha256.Sum224, big.Int.Text(62) — as OLM's rbac.go does.
    let rules: Vec<PolicyRule> = serde_json::from_value(json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["example.com"], "resources": ["nginxes<&>"], "resourceNames": ["x"], "verbs": ["create"]}
    ]))
    .expect("rules");
    assert_eq!(permissions_hash(&rules), "64yWLwnxXTSTWKctkZ6Q4u1ty022shhevNEM84");
    let h = binding_hash(
        &json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}),
        &json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]),
    );
    assert_eq!(h, "5xasUEoevBXLH8uOQsXTr3GPmeI0H06RYE4fKm");
}

#[test]
fn long_names_are_cut_as_olm_cuts_them() {
    let base = "a-very-long-operator-name-that-goes-on.v1.2.3-and-a-long-service-account-name";
    let n = generate_name(base, &json!({"x": 1}));
    let hash = deep_hash_object(&json!({"x": 1}));
    assert_eq!(n, format!("{}-{hash}", &base[..63 - hash.len() - 1]));
    assert!(n.len() <= 63, "{n}");
    assert_ne!(n, generate_name(base, &json!({"x": 2})));
    assert_eq!(base62(&[0, 0, 61]), "Z");
    assert_eq!(base62(&[0, 62]), "10");
}

/// The Role name OLM v0.38.0 gave the compare-olm fixture `auto-op.v1.0.0` (install-automatic
/// scenario of `make compare-olm`, 2026-12-02): the same CSV permission gets the same name from
/// capstan, so capstan finds (and adopts) what an OLM install made.
#[test]
fn rbac_names_are_olms() {
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let all = ["get", "list", "watch", "create", "update", "patch", "delete"];
    let p = Permission {
        service_account_name: "auto-op-controller-manager".into(),
        rules: vec![
            rule(&[""], &["configmaps", "events"], &all),
            rule(&["coordination.k8s.io"], &["leases"], &all),
            rule(&["compare.capstan.dev"], &["autothings", "autothings/status"], &["*"]),
        ],
    };
    let name = generate_name(
        "auto-op.v1.0.0-auto-op-controller-manager",
        &json!({"name": "auto-op.v1.0.0", "permission": permission_json(&p)}),
    );
    assert_eq!(name, "auto-op.v1.0.0-auto-op-c-4gplMLyIN8id2fRibphSmRTNmwdAY08IDVbaLQ");
}

#[test]
fn component_label_is_cut_like_olm() {
    let t = InstallTarget { package: "p".repeat(60), namespace: "n-space".into(), ..Default::default() };
    let key = t.component_label();
    let name = key.strip_prefix("operators.coreos.com/").expect("prefix");
    assert!(name.len() <= 63 && !name.ends_with(['.', '-', '_']), "{name}");
    assert_eq!(target("ops").component_label(), "operators.coreos.com/nginx-operator.ops");
}

#[test]
fn reserved_rbac_names_are_refused_with_every_object_named() {
    let dir = copy_bundle("bundles/nginx-operator/0.2.0");
    std::fs::write(
        dir.path().join("manifests/takeover.yaml"),
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: system:basic-user\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("manifests/admin.yaml"),
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: cluster-admin\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: Group, name: system:authenticated, apiGroup: rbac.authorization.k8s.io}]\n",
    )
    .expect("write");
    let err = steps(&Bundle::load(dir.path()).expect("bundle"), &target("ops")).expect_err("reserved names");
    assert_eq!(
        err.to_string(),
        "bundle nginx-operator.v0.2.0: ClusterRoleBinding cluster-admin (manifests/admin.yaml), ClusterRole system:basic-user (manifests/takeover.yaml) reserved by Kubernetes for its own RBAC (names starting with system: and the roles cluster-admin, admin, edit, view); an operator may not ship or replace them: rename the object in the bundle"
    );
    // Names that merely contain the words are fine; non-RBAC kinds are not concerned.
    assert!(!is_reserved_rbac_name("ClusterRole", "my-admin"));
    assert!(!is_reserved_rbac_name("ConfigMap", "system:x"));
    assert!(is_reserved_rbac_name("Role", "system:controller:bootstrap-signer"));
    assert!(is_reserved_rbac_name("ClusterRole", "view"));
    assert!(!is_reserved_rbac_name("Role", "view"), "a namespaced Role named view is the bundle's own");
}

#[test]
fn crds_carry_olms_installed_alongside_annotation() {
    // The key OLM v0.38.0 wrote in compare-olm's install-automatic scenario for s-auto/auto-op.v1.0.0.
    assert_eq!(
        installed_alongside("s-auto", "auto-op.v1.0.0"),
        ("operatorframework.io/installed-alongside-2de3f66bbecf289f".to_string(), "s-auto/auto-op.v1.0.0".to_string())
    );
}

#[test]
fn a_crd_reapplied_keeps_the_installed_alongside_annotations_of_other_namespaces() {
    let (a_key, a_value) = installed_alongside("ns-a", "op.v1");
    let (old_key, old_value) = installed_alongside("ns-b", "op.v1");
    let annotations: std::collections::BTreeMap<String, String> = [
        (a_key.clone(), a_value),
        (old_key, old_value),
        ("operatorframework.io/installed-alongside-0000".to_string(), "not-a-reference".to_string()),
        ("operatorframework.io/installed-alongside-0001".to_string(), "a/b/c".to_string()),
        ("description".to_string(), "ns-c/x".to_string()),
    ]
    .into();
    // ns-b's plan (upgrading op.v1 to op.v2 there): ns-a's install is kept for its CSV check,
    // ns-b's older CSV gives way to the plan's own annotation, malformed values are dropped.
    assert_eq!(
        installed_alongside_elsewhere(&annotations, "ns-b"),
        vec![(a_key, "ns-a".to_string(), "op.v1".to_string())]
    );
    assert!(installed_alongside_elsewhere(&annotations, "ns-a").iter().all(|(_, ns, _)| ns == "ns-b"));
}

#[test]
fn a_dependency_subscription_step_is_olms_subscription() {
    let dep = DependencySubscription {
        package: "strimzi-kafka-operator".into(),
        channel: "stable".into(),
        catalog_source: "community".into(),
        catalog_source_namespace: "olm".into(),
        starting_csv: "strimzi-cluster-operator.v0.28.0".into(),
    };
    // OLM's name: package-channel-catalog-catalogNamespace.
    assert_eq!(dep.name(), "strimzi-kafka-operator-stable-community-olm");
    let s = dep.step("apps", "install-abc");
    assert_eq!(
        (s.kind.as_str(), s.group.as_str(), s.version.as_str(), s.namespace.as_deref()),
        ("Subscription", "operators.coreos.com", "v1alpha1", Some("apps"))
    );
    assert_eq!(s.resolving, "strimzi-cluster-operator.v0.28.0");
    let m = &s.manifest;
    assert_eq!(
        m["spec"],
        json!({"name": "strimzi-kafka-operator", "channel": "stable", "source": "community", "sourceNamespace": "olm", "startingCSV": "strimzi-cluster-operator.v0.28.0", "installPlanApproval": "Automatic"})
    );
    assert_eq!(m["metadata"]["annotations"]["olm.generated-by"], "install-abc");
    assert_eq!(m["metadata"]["labels"]["olm.managed"], "true");
    assert_eq!(m["metadata"]["labels"]["operators.coreos.com/strimzi-kafka-operator.apps"], "");
    assert!(m["metadata"].get("ownerReferences").is_none(), "outlives the plan");
    // Applied after everything else of the plan (the CSV exists when the Subscription appears).
    assert!(KINDS.iter().all(|k| k.kind == "Subscription" || k.rank < kind_info("Subscription").unwrap().rank));
}

#[test]
fn a_bundle_may_not_ship_a_subscription() {
    let dir = copy_bundle("bundles/nginx-operator/0.2.0");
    std::fs::write(dir.path().join("manifests/sub.yaml"), "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: x}\nspec: {name: p, source: c, sourceNamespace: olm}\n").unwrap();
    let b = Bundle::load(dir.path()).unwrap();
    let err = steps(&b, &target("ns")).unwrap_err();
    assert!(matches!(err, PlanError::UnsupportedResource { .. }), "{err}");
}

#[test]
fn aggregated_cluster_roles_beyond_the_bundles_own_groups_are_refused() {
    let dir = copy_bundle("bundles/nginx-operator/0.2.0");
    // On the bundle's own group (example.com, of its Nginx CRD): fine, as cert-manager does.
    std::fs::write(
        dir.path().join("manifests/edit.yaml"),
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: nginx-edit\n  labels: {rbac.authorization.k8s.io/aggregate-to-edit: 'true'}\nrules:\n- apiGroups: [example.com]\n  resources: ['*']\n  verbs: ['*']\n",
    )
    .expect("write");
    let bundle = Bundle::load(dir.path()).expect("bundle");
    assert!(steps(&bundle, &target("ops")).is_ok());
    assert!(crate::bundle::validate(&bundle).iter().all(|f| f.severity != crate::bundle::Severity::Error));
    // Secrets of every namespace to every namespace admin: refused, by the plan and by validate.
    std::fs::write(
        dir.path().join("manifests/secrets.yaml"),
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: nginx-secrets\n  labels: {rbac.authorization.k8s.io/aggregate-to-admin: 'true'}\nrules:\n- apiGroups: ['', example.com]\n  resources: [secrets]\n  verbs: [get, list]\n",
    )
    .expect("write");
    let bundle = Bundle::load(dir.path()).expect("bundle");
    let err = steps(&bundle, &target("ops")).expect_err("aggregated beyond own APIs");
    assert!(matches!(err, PlanError::AggregatedBeyondOwnApis { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "bundle nginx-operator.v0.2.0: ClusterRole nginx-secrets (manifests/secrets.yaml): aggregated into admin (every user holding that role gets its rules) with rules on \"\", beyond the bundle's own API groups; fix: keep aggregated ClusterRoles to the API groups of the bundle's own CRDs and APIServices, or drop the aggregate-to label and let the cluster admin bind the role"
    );
    let errors: Vec<String> = crate::bundle::validate(&bundle)
        .iter()
        .filter(|f| f.severity == crate::bundle::Severity::Error)
        .map(|f| f.to_string())
        .collect();
    assert_eq!(errors, vec!["error: manifests/secrets.yaml: metadata.labels: ClusterRole nginx-secrets: aggregated into admin (every user holding that role gets its rules) with rules on \"\", beyond the bundle's own API groups (fix: keep aggregated ClusterRoles to the API groups of the bundle's own CRDs and APIServices, or drop the aggregate-to label and let the cluster admin bind the role)".to_string()]);
}

#[test]
fn bindings_of_users_or_groups_are_refused() {
    let dir = copy_bundle("bundles/nginx-operator/0.2.0");
    // Not a reserved name, but every authenticated user bound to cluster-admin.
    std::fs::write(
        dir.path().join("manifests/everyone.yaml"),
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: nginx-everyone\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects:\n- {kind: ServiceAccount, name: nginx-operator, namespace: ops}\n- {kind: Group, name: system:authenticated, apiGroup: rbac.authorization.k8s.io}\n- {kind: User, name: system:anonymous, apiGroup: rbac.authorization.k8s.io}\n",
    )
    .expect("write");
    let bundle = Bundle::load(dir.path()).expect("bundle");
    let err = steps(&bundle, &target("ops")).expect_err("binds people");
    assert_eq!(
        err.to_string(),
        "bundle nginx-operator.v0.2.0: ClusterRoleBinding nginx-everyone (manifests/everyone.yaml): binds Group system:authenticated, User system:anonymous; a bundle may bind only ServiceAccounts; fix: bind the operator's ServiceAccounts only and leave binding users and groups to the cluster admin"
    );
    let errors: Vec<String> = crate::bundle::validate(&bundle)
        .iter()
        .filter(|f| f.severity == crate::bundle::Severity::Error)
        .map(|f| f.field.clone())
        .collect();
    assert_eq!(errors, vec!["subjects".to_string()]);
}
