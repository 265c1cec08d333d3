//! case-21 of `../shared/cases/olm-cases.yaml`, read from the file: the CRDs of its bundles and
//! the cluster's `status.storedVersions` go through `install::crd_safety::check_crd_upgrade`, and
//! the refusal mentions everything the case's `error_must_mention` lists. (The same upgrade on
//! the real control plane is in `tests/e2e/install_crd_safety.rs`.)

use crate::support::shared_dir;
use capstan::install::crd_safety::{CrdUpgradeError, check_crd_upgrade};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

fn case(id: &str) -> Value {
    let text = std::fs::read_to_string(shared_dir().join("cases/olm-cases.yaml")).expect("olm-cases.yaml");
    let cases: Vec<Value> = serde_norway::from_str(&text).expect("olm-cases.yaml parses");
    cases.into_iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("{id} not in olm-cases.yaml"))
}

/// A v1 CRD from a case's `crd: {name, versions: [{name, served, storage}]}` fragment, with a
/// permissive schema per version and the given `status.storedVersions`.
fn crd(fragment: &Value, stored: &Value) -> CustomResourceDefinition {
    let name = fragment["name"].as_str().expect("crd.name");
    let (plural, group) = name.split_once('.').expect("crd name is <plural>.<group>");
    let versions: Vec<Value> = fragment["versions"]
        .as_array()
        .expect("crd.versions")
        .iter()
        .map(|v| {
            json!({"name": v["name"], "served": v["served"], "storage": v["storage"],
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": "Agent", "listKind": "AgentList"},
            "versions": versions},
        "status": {"storedVersions": stored}
    }))
    .expect("case CRD")
}

#[test]
fn case_21_a_crd_dropping_a_stored_version_is_refused_with_the_expected_message() {
    let c = case("case-21");
    assert_eq!(c["expected"]["outcome"], "install_blocked");
    let installed = c["cluster_state"]["installed"][0]["bundle"].as_str().expect("installed bundle");
    let upgrade = c["catalog"]
        .as_array()
        .expect("catalog")
        .iter()
        .filter_map(|b| b["entries"].as_array())
        .flatten()
        .find(|e| e["replaces"] == installed)
        .and_then(|e| e["name"].as_str())
        .expect("the bundle that replaces the installed one");
    let stored = &c["cluster_state"]["crds"][0]["status"]["storedVersions"];
    let old = crd(&c["bundle_manifests"][installed]["crd"], stored);
    let new = crd(&c["bundle_manifests"][upgrade]["crd"], &json!([]));
    // The case's object exists, read at a version both CRDs serve.
    let cr = &c["cluster_state"]["crs"][0];
    let version =
        cr["apiVersion"].as_str().and_then(|a| a.rsplit_once('/')).map(|(_, v)| v.to_string()).expect("cr version");
    let object = json!({"apiVersion": cr["apiVersion"], "kind": cr["kind"],
        "metadata": {"namespace": cr["namespace"], "name": cr["name"]}});

    let errors =
        check_crd_upgrade(Some(&old), &new, &[(version, object.clone())]).expect_err("case-21 must be blocked");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(matches!(&errors[0], CrdUpgradeError::StoredVersionRemoved { version, .. } if version == "v1alpha1"));
    let message = errors[0].to_string();
    for mention in c["expected"]["error_must_mention"].as_array().expect("error_must_mention") {
        let mention = mention.as_str().expect("mention");
        // "remediation (rewrite stored objects, then drop v1alpha1 from storedVersions)": each step.
        let needles: Vec<&str> = match mention.strip_prefix("remediation (").and_then(|m| m.strip_suffix(')')) {
            Some(steps) => steps.split(", then ").collect(),
            None => vec![mention],
        };
        for needle in needles {
            assert!(message.contains(needle), "message lacks {needle:?} (from {mention:?}): {message}");
        }
    }
    // must_not: require uninstalling the operator to recover.
    assert!(message.contains("Uninstalling the operator is not needed"), "{message}");

    // The case's second step: the admin migrated and set storedVersions to [v2alpha1].
    let migrated = crd(&c["bundle_manifests"][installed]["crd"], &json!(["v2alpha1"]));
    assert_eq!(check_crd_upgrade(Some(&migrated), &new, &[("v2alpha1".into(), object)]), Ok(()));
}
