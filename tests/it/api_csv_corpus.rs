//! Every real CSV of the corpus (`shared/corpus/community-operators-prod/operators/*/*/manifests/
//! *clusterserviceversion.yaml`) deserializes into `capstan::api::ClusterServiceVersion` and
//! serializes back to exactly the same JSON value: no field is lost or changed.

use std::path::{Path, PathBuf};

use capstan::api::ClusterServiceVersion;
use capstan::api::clusterserviceversion::InstallModeType;
use serde_json::Value;

fn corpus_csvs() -> Vec<PathBuf> {
    let root = crate::support::shared_dir().join("corpus/community-operators-prod/operators");
    let mut out = Vec::new();
    let entries = |p: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(p)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
            .map(|e| e.expect("dir entry").path())
            .collect();
        v.sort();
        v
    };
    for pkg in entries(&root).into_iter().filter(|p| p.is_dir()) {
        for version in entries(&pkg).into_iter().filter(|p| p.is_dir()) {
            let manifests = version.join("manifests");
            if !manifests.is_dir() {
                continue;
            }
            out.extend(entries(&manifests).into_iter().filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with("clusterserviceversion.yaml"))
            }));
        }
    }
    out
}

/// The first path at which `a` and `b` differ, with both values, or `None` when equal.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                match y.get(k) {
                    None => return Some(format!("{path}.{k}: lost (was {va})")),
                    Some(vb) => {
                        if let Some(d) = first_difference(va, vb, &format!("{path}.{k}")) {
                            return Some(d);
                        }
                    }
                }
            }
            y.keys().find(|k| !x.contains_key(*k)).map(|k| format!("{path}.{k}: added ({})", y[k]))
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!("{path}: {} items became {}", x.len(), y.len()));
            }
            x.iter().zip(y).enumerate().find_map(|(i, (va, vb))| first_difference(va, vb, &format!("{path}[{i}]")))
        }
        _ if a == b => None,
        _ => Some(format!("{path}: {a} became {b}")),
    }
}

#[test]
fn every_corpus_csv_round_trips_without_losing_a_field() {
    let files = corpus_csvs();
    assert!(files.len() >= 100, "expected the corpus CSVs, found {}", files.len());
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        let before: Value =
            serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{} is not YAML: {e}", f.display()));
        let csv: ClusterServiceVersion = match serde_json::from_value(before.clone()) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{}: does not deserialize: {e}", f.display()));
                continue;
            }
        };
        // Typed fields hold the CSV's values.
        assert_eq!(Some(csv.spec.display_name.as_str()), before["spec"]["displayName"].as_str(), "{}", f.display());
        assert_eq!(csv.metadata.name.as_deref(), before["metadata"]["name"].as_str(), "{}", f.display());
        // Every Deployment of the install strategy converts to a typed DeploymentSpec.
        for d in csv.spec.install.spec.iter().flat_map(|s| &s.deployments) {
            if let Err(e) = d.deployment_spec() {
                failures.push(format!("{}: {e}", f.display()));
            }
        }
        let after = serde_json::to_value(&csv).expect("serialize CSV");
        if let Some(d) = first_difference(&before, &after, "") {
            failures.push(format!("{}: {d}", f.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} CSVs do not round-trip:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn typed_fields_of_a_real_csv() {
    let files = corpus_csvs();
    let etcd =
        files.iter().find(|p| p.to_string_lossy().contains("/etcd/0.9.4/")).expect("etcd 0.9.4 CSV in the corpus");
    let csv: ClusterServiceVersion =
        serde_norway::from_str(&std::fs::read_to_string(etcd).expect("read etcd CSV")).expect("etcd CSV parses");
    assert_eq!(csv.metadata.name.as_deref(), Some("etcdoperator.v0.9.4"));
    assert_eq!(csv.spec.version.as_deref(), Some("0.9.4"));
    assert_eq!(csv.spec.replaces.as_deref(), Some("etcdoperator.v0.9.2"));
    let owned: Vec<&str> = csv.owned_crd_names().collect();
    assert!(owned.contains(&"etcdclusters.etcd.database.coreos.com"), "{owned:?}");
    let strategy = csv.spec.install.spec.as_ref().expect("install spec");
    assert_eq!(csv.spec.install.strategy, "deployment");
    assert_eq!(strategy.deployments[0].name, "etcd-operator");
    assert!(strategy.deployments[0].spec["template"]["spec"]["containers"].is_array());
    assert!(strategy.permissions.as_ref().is_some_and(|p| !p[0].rules.is_empty()));
    assert!(csv.supports_install_mode(&InstallModeType::OwnNamespace));
}

#[test]
fn a_csv_without_display_name_is_rejected_naming_the_field() {
    let doc = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "x.v1.0.0"},
        "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}}
    });
    let err = serde_json::from_value::<ClusterServiceVersion>(doc).expect_err("displayName is required");
    assert!(err.to_string().contains("displayName"), "{err}");
}
