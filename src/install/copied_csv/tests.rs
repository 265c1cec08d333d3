use serde_json::json;

use super::*;

fn csv(ns: &str, metadata: serde_json::Value, status: serde_json::Value) -> ClusterServiceVersion {
    let mut m = json!({"name": "etcd.v1", "namespace": ns});
    for (k, v) in metadata.as_object().unwrap() {
        m[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": m,
        "spec": {"displayName": "etcd", "install": {"strategy": "deployment", "spec": {"deployments": []}}},
        "status": status,
    }))
    .unwrap()
}

fn installed(targets: &str) -> ClusterServiceVersion {
    csv(
        "ops",
        json!({
            "labels": {"team": "a", "operators.coreos.com/etcd.ops": "", "olm.managed": "true"},
            "annotations": {"olm.operatorGroup": "og", "olm.operatorNamespace": "ops", "olm.targetNamespaces": targets,
                "kubectl.kubernetes.io/last-applied-configuration": "{}", "alm-examples": "[]"},
        }),
        json!({"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed with no errors"}),
    )
}

fn names(s: &BTreeSet<String>) -> Vec<&str> {
    s.iter().map(String::as_str).collect()
}

#[test]
fn the_copy_is_olms_prototype() {
    let copy = serde_json::to_value(prototype(&installed("a,b"))).unwrap();
    assert_eq!(copy["metadata"]["name"], "etcd.v1");
    assert!(copy["metadata"].get("namespace").is_none());
    assert_eq!(
        copy["metadata"]["labels"],
        json!({"team": "a", "olm.managed": "true", "olm.copiedFrom": "ops"}),
        "component labels left out, the copy label added"
    );
    assert_eq!(
        copy["metadata"]["annotations"],
        json!({"olm.operatorGroup": "og", "olm.operatorNamespace": "ops", "alm-examples": "[]"}),
        "olm.targetNamespaces and kubectl's last applied object left out"
    );
    assert_eq!(copy["spec"]["displayName"], "etcd");
    let status = &copy["status"];
    assert_eq!(
        (&status["phase"], &status["reason"], &status["message"]),
        (
            &json!("Succeeded"),
            &json!("Copied"),
            &json!("The operator is running in ops but is managing this namespace")
        )
    );
}

#[test]
fn a_copy_is_known_by_its_label_reason_or_operator_namespace() {
    assert!(!is_copy(&installed("")));
    assert!(is_copy(&csv("a", json!({"labels": {"olm.copiedFrom": "ops"}}), json!({}))));
    assert!(is_copy(&csv("a", json!({}), json!({"phase": "Succeeded", "reason": "Copied"}))));
    assert!(is_copy(&csv("a", json!({"annotations": {"olm.operatorNamespace": "nonexistent"}}), json!({}))));
    assert!(!is_copy(&csv("a", json!({"annotations": {"olm.operatorNamespace": "a"}}), json!({}))));
}

#[test]
fn only_a_member_with_a_phase_is_copied() {
    assert!(is_copiable(&installed("")));
    assert!(!is_copiable(&csv("ops", json!({}), json!({}))), "no phase yet");
    for reason in
        ["NoOperatorGroup", "TooManyOperatorGroups", "UnsupportedOperatorGroup", "InterOperatorGroupOwnerConflict"]
    {
        assert!(!is_copiable(&csv("ops", json!({}), json!({"phase": "Failed", "reason": reason}))), "{reason}");
    }
    assert!(is_copiable(&csv("ops", json!({}), json!({"phase": "Pending", "reason": "RequirementsNotMet"}))));
}

#[test]
fn copies_go_to_the_other_targets_or_everywhere_while_enabled() {
    let cluster: Vec<String> = ["ops", "a", "b", "c"].map(String::from).to_vec();
    let list = vec!["ops".to_string(), "a".into(), "gone".into()];
    assert_eq!(names(&copy_namespaces("ops", &list, &cluster, false)), ["a"], "a list: always, existing only");
    assert_eq!(names(&copy_namespaces("ops", &["ops".into()], &cluster, true)), Vec::<&str>::new());
    assert_eq!(names(&copy_namespaces("ops", &["".into()], &cluster, true)), ["a", "b", "c"]);
    assert!(copy_namespaces("ops", &["".into()], &cluster, false).is_empty(), "AllNamespaces, disabled");
}

#[test]
fn a_copy_goes_with_its_original_or_its_target() {
    let copy = |ns: &str| {
        let mut c = prototype(&installed("a,b"));
        c.metadata.namespace = Some(ns.into());
        c
    };
    assert_eq!(stale_copy(&copy("a"), Some(&installed("a,b")), false), None);
    assert_eq!(stale_copy(&copy("a"), None, true), Some("its original CSV is gone"));
    assert_eq!(
        stale_copy(&copy("c"), Some(&installed("a,b")), true),
        Some("its original CSV's group no longer targets this namespace")
    );
    assert_eq!(stale_copy(&copy("c"), Some(&installed("")), true), None);
    assert_eq!(
        stale_copy(&copy("c"), Some(&installed("")), false),
        Some("copied CSVs are disabled (OLMConfig spec.features.disableCopiedCSVs)")
    );
    let mut conflict = installed("a,b");
    conflict.status =
        Some(serde_json::from_value(json!({"phase": "Failed", "reason": "InterOperatorGroupOwnerConflict"})).unwrap());
    assert!(stale_copy(&copy("a"), Some(&conflict), true).is_some());
    let bad = csv("a", json!({"labels": {"olm.copiedFrom": "ops"}}), json!({}));
    assert_eq!(stale_copy(&bad, None, true), Some("it has no olm.operatorNamespace annotation"));
}

#[test]
fn a_copy_changed_by_hand_differs_in_status_only() {
    let desired = {
        let mut c = prototype(&installed("a"));
        c.metadata.namespace = Some("a".into());
        c
    };
    let mut existing = desired.clone();
    existing.metadata.resource_version = Some("7".into());
    assert_eq!(differences(&existing, &desired), (false, false), "metadata the server sets is not compared");
    existing.status.as_mut().unwrap().last_update_time = Some(Time(epoch()));
    assert_eq!(differences(&existing, &desired), (false, true));
    existing.spec.replaces = Some("etcd.v0".into());
    assert_eq!(differences(&existing, &desired), (true, true));
}

fn epoch() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::UNIX_EPOCH
}

#[test]
fn the_condition_is_olms() {
    let t = Time(epoch());
    let c = copied_csvs_condition(false, false, t.clone());
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("DisabledCopiedCSVs", "True", "CopiedCSVsDisabled")
    );
    assert_eq!(
        c.message,
        "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode"
    );
    let c = copied_csvs_condition(true, false, t.clone());
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "CopiedCSVsEnabled"));
    assert_eq!(c.message, "Copied CSVs are enabled and present across the cluster");
    assert_eq!(
        copied_csvs_condition(true, true, t.clone()).message,
        "Copied CSVs are enabled and at least one copied CSVs is missing"
    );
    assert_eq!(copied_csvs_condition(false, true, t).status, "False");
    assert!(copies_settled(true, 3, 4) && !copies_settled(true, 2, 4));
    assert!(copies_settled(false, 0, 4) && !copies_settled(false, 1, 4));
}
