//! Bundles read as operator-registry and OLM read them — Go's YAML library (`sigs.k8s.io/yaml`,
//! goyaml v2) and `encoding/json` — built from the real community bundles that showed each
//! difference (fixtures and provenance in `tests/fixtures/community-operators-prod/`). The
//! side-by-side render with opm is in `tests/it/catalog_opm.rs`.

use std::path::{Path, PathBuf};

use capstan::bundle::render::{Migration, render_bundle, render_bundle_with};
use capstan::bundle::{Bundle, Finding, Severity, validate};
use capstan::install::{self, InstallTarget};
use serde_json::{Value, json};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/community-operators-prod").join(name)
}

fn load(name: &str) -> Bundle {
    Bundle::load(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn errors(findings: &[Finding]) -> Vec<String> {
    findings.iter().filter(|f| f.severity == Severity::Error).map(ToString::to_string).collect()
}

fn warnings_about(findings: &[Finding], needle: &str) -> Vec<String> {
    findings
        .iter()
        .filter(|f| f.severity == Severity::Warning && f.to_string().contains(needle))
        .map(ToString::to_string)
        .collect()
}

/// Paths of every `<<` key left in a value.
fn merge_keys(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}.{k}");
                if k == "<<" {
                    out.push(p.clone());
                }
                merge_keys(x, &p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                merge_keys(x, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// clickhouse's CRDs use `!!merge <<: *TypeStringBool`: the merge is expanded (as goyaml v2
/// does for opm and OLM), keys written after it win, and no `<<` key reaches the API server.
#[test]
fn clickhouse_merge_keys_are_expanded() {
    let b = load("clickhouse/0.26.0");
    let mut left = Vec::new();
    for m in &b.objects {
        merge_keys(&m.value, &m.path.display().to_string(), &mut left);
    }
    assert_eq!(left, Vec::<String>::new());
    let chi = b.objects.iter().find(|m| m.name() == "clickhouseinstallations.clickhouse.altinity.com").unwrap();
    let props = chi.value.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties").unwrap();
    let suspend = &props["suspend"];
    assert_eq!(suspend["type"], "string");
    assert_eq!(suspend["enum"], props["stop"]["enum"]);
    assert!(suspend["description"].as_str().unwrap().starts_with("Suspend reconciliation"), "{suspend}");
    assert_eq!(errors(&validate(&b)), Vec::<String>::new());
}

/// project-quay writes `- Kind: Job` among its owned CRD's resources; OLM and opm read it as
/// `kind` (Go matches field names case-insensitively), so capstan does, and warns.
#[test]
fn project_quay_kind_is_read_as_kind_with_a_warning() {
    let b = load("project-quay/3.18.0");
    let resources = b.csv().value().pointer("/spec/customresourcedefinitions/owned/0/resources").unwrap();
    assert!(resources.as_array().unwrap().contains(&json!({"kind": "Job"})), "{resources}");
    let findings = validate(&b);
    assert_eq!(errors(&findings), Vec::<String>::new());
    assert_eq!(
        warnings_about(&findings, "Kind"),
        vec![
            "warning: manifests/quay-operator.clusterserviceversion.yaml: spec.customresourcedefinitions.owned[0].resources[4].Kind: \
             key \"Kind\" is not spelled as the field \"kind\"; OLM and opm read it as \
             spec.customresourcedefinitions.owned[0].resources[4].kind (Go matches field names case-insensitively), other tools may not \
             (fix: rename \"Kind\" to \"kind\")"
        ]
    );
    // The olm.csv.metadata migration decodes the CSV as Go does: the resource has its kind.
    let blob = render_bundle_with(&b, "quay.io/example/quay-bundle:v3.18.0", Migration::CsvMetadata).unwrap();
    let meta = &blob.properties.iter().find(|p| p.type_ == "olm.csv.metadata").unwrap().value;
    assert_eq!(
        meta.pointer("/crdDescriptions/owned/0/resources/4"),
        Some(&json!({"kind": "Job", "name": "", "version": ""}))
    );
}

/// strimzi writes `MinKubeVersion:`; it is the CSV's minKubeVersion (validated and checked at
/// install), with a warning.
#[test]
fn strimzi_min_kube_version_is_read_with_a_warning() {
    let b = load("strimzi-kafka-operator/1.2.0");
    assert_eq!(b.csv().value().pointer("/spec/minKubeVersion"), Some(&json!("1.30.0")));
    assert_eq!(b.csv().value().pointer("/spec/MinKubeVersion"), None);
    let findings = validate(&b);
    assert_eq!(errors(&findings), Vec::<String>::new());
    assert_eq!(
        warnings_about(&findings, "MinKubeVersion"),
        vec![
            "warning: manifests/strimzi-cluster-operator.v1.2.0.clusterserviceversion.yaml: spec.MinKubeVersion: \
             key \"MinKubeVersion\" is not spelled as the field \"minKubeVersion\"; OLM and opm read it as spec.minKubeVersion \
             (Go matches field names case-insensitively), other tools may not (fix: rename \"MinKubeVersion\" to \"minKubeVersion\")"
        ]
    );
}

/// automotive-infra's CSV starts with `ApiVersion:`: the bundle loads and validates (it used to
/// be refused with "apiVersion is missing"), the CSV has its apiVersion, and the rendered
/// `olm.bundle.object` keeps the CSV as written, as opm's does.
#[test]
fn automotive_infra_api_version_is_read_and_rendered_as_written() {
    let b = load("automotive-infra/0.0.3");
    let csv = &b.objects[b.csv_index];
    assert_eq!(csv.api_version(), "operators.coreos.com/v1alpha1");
    let findings = validate(&b);
    assert_eq!(errors(&findings), Vec::<String>::new());
    assert_eq!(warnings_about(&findings, "ApiVersion").len(), 1, "{findings:?}");
    let written = b.csv_as_written.as_ref().unwrap();
    assert_eq!(written.get("ApiVersion"), Some(&json!("operators.coreos.com/v1alpha1")));
    let blob = render_bundle(&b, "").unwrap();
    use base64::Engine as _;
    let csv_object = blob
        .properties
        .iter()
        .filter(|p| p.type_ == "olm.bundle.object")
        .map(|p| base64::engine::general_purpose::STANDARD.decode(p.value["data"].as_str().unwrap()).unwrap())
        .map(|bytes| serde_json::from_slice::<Value>(&bytes).unwrap())
        .find(|o| o["kind"] == "ClusterServiceVersion")
        .unwrap();
    assert_eq!(&csv_object, written);
}

/// What the issue saw fail at install time now plans as OLM plans it: no `<<` key in any step
/// (clickhouse), and the CSV applied with its fields under their own names (apiVersion,
/// minKubeVersion, the resource's kind).
#[test]
fn the_install_plan_carries_what_go_would_read() {
    for name in ["clickhouse/0.26.0", "project-quay/3.18.0", "strimzi-kafka-operator/1.2.0", "automotive-infra/0.0.3"] {
        let b = load(name);
        let target = InstallTarget {
            namespace: "operators".into(),
            target_namespaces: vec!["operators".into()],
            package: b.package().into(),
            csv_name: b.name().into(),
            ..Default::default()
        };
        let steps = install::steps(&b, &target).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut left = Vec::new();
        for s in &steps {
            merge_keys(&s.manifest, &s.describe(), &mut left);
        }
        assert_eq!(left, Vec::<String>::new(), "{name}");
        let csv = &steps.iter().find(|s| s.kind == "ClusterServiceVersion").unwrap().manifest;
        assert_eq!(csv["apiVersion"], "operators.coreos.com/v1alpha1", "{name}");
        assert_eq!(csv.get("ApiVersion"), None, "{name}");
        if name.starts_with("strimzi") {
            assert_eq!(csv.pointer("/spec/minKubeVersion"), Some(&json!("1.30.0")));
        }
        if name.starts_with("project-quay") {
            assert_eq!(
                csv.pointer("/spec/customresourcedefinitions/owned/0/resources/4"),
                Some(&json!({"kind": "Job"}))
            );
        }
    }
}
