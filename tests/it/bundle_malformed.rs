//! Malformed bundles give errors that name the file and the field, never a panic; validation
//! findings say what is wrong; the CLI's exit codes follow its contract.

use std::fs;
use std::path::Path;
use std::process::Command;

use capstan::bundle::render::{render_bundle, render_bundle_dir};
use capstan::bundle::{Bundle, BundleError, Severity, validate};

const CSV: &str = r#"apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: demo-operator.v1.0.0
  annotations:
    olm.skipRange: ">=0.9.0 <1.0.0"
spec:
  version: 1.0.0
  displayName: Demo
  replaces: demo-operator.v0.9.0
  installModes:
    - {type: OwnNamespace, supported: true}
    - {type: SingleNamespace, supported: true}
    - {type: MultiNamespace, supported: false}
    - {type: AllNamespaces, supported: true}
  customresourcedefinitions:
    owned:
      - {name: demos.example.com, version: v1, kind: Demo}
  install:
    strategy: deployment
    spec:
      deployments:
        - name: demo-operator
          spec:
            selector: {matchLabels: {app: demo}}
            template:
              metadata: {labels: {app: demo}}
              spec:
                containers:
                  - {name: manager, image: "quay.io/example/demo:v1.0.0"}
"#;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: demos.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Demo, plural: demos, singular: demo, listKind: DemoList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object}}
"#;

const ANNOTATIONS: &str = r#"annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: demo-operator
  operators.operatorframework.io.bundle.channels.v1: stable
  operators.operatorframework.io.bundle.channel.default.v1: stable
"#;

fn write_bundle(dir: &Path, files: &[(&str, &[u8])]) {
    fs::create_dir_all(dir.join("manifests")).unwrap();
    fs::create_dir_all(dir.join("metadata")).unwrap();
    for (name, body) in files {
        fs::write(dir.join(name), body).unwrap();
    }
}

fn good(dir: &Path) {
    write_bundle(
        dir,
        &[
            ("manifests/demo.clusterserviceversion.yaml", CSV.as_bytes()),
            ("manifests/demos.crd.yaml", CRD.as_bytes()),
            ("metadata/annotations.yaml", ANNOTATIONS.as_bytes()),
        ],
    );
}

/// Replaces the good bundle's CSV in `dir` with `csv` and loads the bundle.
fn with_csv(dir: &Path, csv: &str) -> Bundle {
    fs::write(dir.join("manifests/demo.clusterserviceversion.yaml"), csv).unwrap();
    Bundle::load(dir).unwrap()
}

fn errors(b: &Bundle) -> Vec<String> {
    validate(b).into_iter().filter(|f| f.severity == Severity::Error).map(|f| f.to_string()).collect()
}

#[test]
fn a_good_bundle_has_no_findings_and_renders_its_edges() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let b = Bundle::load(t.path()).unwrap();
    assert_eq!(validate(&b), vec![]);
    let (blob, info) = render_bundle_dir(t.path(), None).unwrap();
    assert_eq!(blob.image, "capstan.invalid/demo-operator/bundle:v1.0.0");
    assert_eq!(info.replaces.as_deref(), Some("demo-operator.v0.9.0"));
    assert_eq!(info.skip_range.as_deref(), Some(">=0.9.0 <1.0.0"));
    assert_eq!(info.channels, vec!["stable"]);
    let types: Vec<&str> = blob.properties.iter().map(|p| p.type_.as_str()).collect();
    assert_eq!(types, ["olm.gvk", "olm.package", "olm.bundle.object", "olm.bundle.object"]);
    assert_eq!(blob.properties[0].value, serde_json::json!({"group": "example.com", "kind": "Demo", "version": "v1"}));
    // The bundle image and the operator image are related images, sorted by image.
    let imgs: Vec<&str> = blob.related_images.iter().map(|r| r.image.as_str()).collect();
    assert_eq!(imgs, ["capstan.invalid/demo-operator/bundle:v1.0.0", "quay.io/example/demo:v1.0.0"]);
}

#[test]
fn no_csv_is_an_error_naming_manifests() {
    let t = tempfile::tempdir().unwrap();
    write_bundle(
        t.path(),
        &[("manifests/demos.crd.yaml", CRD.as_bytes()), ("metadata/annotations.yaml", ANNOTATIONS.as_bytes())],
    );
    let err = Bundle::load(t.path()).unwrap_err();
    assert!(matches!(err, BundleError::NoCsv { .. }), "{err}");
    assert!(err.to_string().contains("manifests: no csv in bundle"), "{err}");
}

/// Empty files are named as empty, not reported as missing; a file given as the bundle is
/// named as a file.
#[test]
fn an_empty_csv_or_annotations_file_and_a_file_for_a_bundle_are_named() {
    let t = tempfile::tempdir().unwrap();
    write_bundle(
        t.path(),
        &[
            ("manifests/demo.csv.yaml", b"# nothing yet\n"),
            ("manifests/demos.crd.yaml", CRD.as_bytes()),
            ("metadata/annotations.yaml", ANNOTATIONS.as_bytes()),
        ],
    );
    let err = Bundle::load(t.path()).unwrap_err().to_string();
    assert!(
        err.ends_with("manifests: no csv in bundle; manifests/demo.csv.yaml is empty (no YAML or JSON document) and no other manifest is one: write the operator's ClusterServiceVersion (kind: ClusterServiceVersion) into manifests/ — into that file if it was meant to hold it"),
        "{err}"
    );
    let t = tempfile::tempdir().unwrap();
    write_bundle(
        t.path(),
        &[
            ("manifests/demo.csv.yaml", CSV.as_bytes()),
            ("manifests/demos.crd.yaml", CRD.as_bytes()),
            ("metadata/annotations.yaml", b""),
        ],
    );
    let err = Bundle::load(t.path()).unwrap_err();
    assert!(matches!(err, BundleError::BadAnnotations { .. }), "{err}");
    assert!(err.to_string().starts_with("metadata/annotations.yaml: the file is empty (no YAML document); the file must look like:\n  annotations:\n"), "{err}");
    let file = t.path().join("manifests/demo.csv.yaml");
    let err = Bundle::load(&file).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: a file, not a bundle directory; give the directory that holds manifests/ and metadata/",
            file.display()
        )
    );
}

#[test]
fn a_csv_whose_top_level_kind_key_is_capitalised_is_named_in_the_no_csv_error() {
    let t = tempfile::tempdir().unwrap();
    let csv = CSV.replacen("\nkind: ClusterServiceVersion", "\nKind: ClusterServiceVersion", 1);
    assert_ne!(csv, CSV, "the fixture has a top-level kind line");
    write_bundle(
        t.path(),
        &[
            ("manifests/demo.csv.yaml", csv.as_bytes()),
            ("manifests/demos.crd.yaml", CRD.as_bytes()),
            ("metadata/annotations.yaml", ANNOTATIONS.as_bytes()),
        ],
    );
    let err = Bundle::load(t.path()).unwrap_err();
    assert!(matches!(err, BundleError::NoCsv { spelled_kind: Some(_), .. }), "{err}");
    assert!(
        err.to_string().ends_with("manifests: no csv in bundle; manifests/demo.csv.yaml says `Kind: ClusterServiceVersion`, but an object's top-level `kind` is matched exactly (by the API server, opm and OLM): write `kind: ClusterServiceVersion`"),
        "{err}"
    );
}

#[test]
fn truncated_yaml_names_the_file() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    fs::write(t.path().join("manifests/demo.clusterserviceversion.yaml"), &CSV.as_bytes()[..CSV.len() / 2]).unwrap();
    let err = Bundle::load(t.path()).unwrap_err().to_string();
    assert!(err.starts_with("manifests/demo.clusterserviceversion.yaml: "), "{err}");
}

#[test]
fn non_utf8_names_the_file() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let mut bytes = CRD.as_bytes().to_vec();
    bytes.extend_from_slice(b"  extra: \xc3\x28\n");
    fs::write(t.path().join("manifests/demos.crd.yaml"), bytes).unwrap();
    let err = Bundle::load(t.path()).unwrap_err();
    assert!(matches!(err, BundleError::NotUtf8 { .. }));
    assert!(err.to_string().starts_with("manifests/demos.crd.yaml: not valid UTF-8"), "{err}");
}

#[test]
fn fifty_megabyte_description_is_refused_naming_the_file() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let huge = CSV.replace("displayName: Demo", &format!("displayName: Demo\n  description: {}", "x".repeat(50 << 20)));
    fs::write(t.path().join("manifests/demo.clusterserviceversion.yaml"), huge).unwrap();
    let err = Bundle::load(t.path()).unwrap_err();
    assert!(matches!(err, BundleError::TooLarge { .. }), "{err}");
    assert!(err.to_string().starts_with("manifests/demo.clusterserviceversion.yaml: file is "), "{err}");
}

#[test]
fn two_megabyte_description_is_a_validation_error_naming_the_field() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let big = CSV.replace("displayName: Demo", &format!("displayName: Demo\n  description: {}", "x".repeat(2 << 20)));
    fs::write(t.path().join("manifests/demo.clusterserviceversion.yaml"), big).unwrap();
    let b = Bundle::load(t.path()).unwrap();
    let errs = errors(&b);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("manifests/demo.clusterserviceversion.yaml: spec.description:"), "{errs:?}");
}

#[test]
fn missing_annotations_and_directories() {
    let t = tempfile::tempdir().unwrap();
    write_bundle(t.path(), &[("manifests/demo.clusterserviceversion.yaml", CSV.as_bytes())]);
    let err = Bundle::load(t.path()).unwrap_err();
    assert!(matches!(err, BundleError::NoAnnotations { .. }), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let err = Bundle::load(empty.path()).unwrap_err();
    assert!(err.to_string().contains("no manifests/ directory"), "{err}");
}

#[test]
fn a_list_document_is_not_an_object() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    fs::write(t.path().join("manifests/list.yaml"), "- a\n- b\n").unwrap();
    let err = Bundle::load(t.path()).unwrap_err().to_string();
    assert!(err.starts_with("manifests/list.yaml (document 1): expected a Kubernetes object"), "{err}");
}

#[test]
fn csv_field_errors_name_file_and_field() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let bad = CSV
        .replace("version: 1.0.0\n", "version: 1.0\n")
        .replace("replaces: demo-operator.v0.9.0", "replaces: Demo_Operator")
        .replace("\">=0.9.0 <1.0.0\"", "\">=0.9 <1.0.0\"")
        .replace("{type: OwnNamespace, supported: true}", "{type: OwnNamespaces, supported: true}")
        .replace("    olm.skipRange:", "    alm-examples: '[{\"kind\": \"Demo\",}]'\n    olm.skipRange:");
    fs::write(t.path().join("manifests/demo.clusterserviceversion.yaml"), bad).unwrap();
    let b = Bundle::load(t.path()).unwrap();
    let errs = errors(&b).join("\n");
    let f = "error: manifests/demo.clusterserviceversion.yaml";
    for want in [
        format!("{f}: spec.version: must be a string"),
        format!("{f}: spec.replaces: \"Demo_Operator\" is invalid"),
        format!("{f}: metadata.annotations[olm.skipRange]: \">=0.9 <1.0.0\" is not a semver range"),
        format!("{f}: spec.installModes[0].type: \"OwnNamespaces\" is not an install mode type"),
        format!("{f}: metadata.annotations[alm-examples]: is not a JSON list"),
    ] {
        assert!(errs.contains(&want), "missing {want:?} in\n{errs}");
    }
    // opm cannot render a numeric version either; the error names the file and field.
    let err = render_bundle(&b, "").unwrap_err().to_string();
    assert!(err.contains("manifests/demo.clusterserviceversion.yaml: spec.version: must be a string"), "{err}");
}

#[test]
fn annotations_errors() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let bad =
        ANNOTATIONS.replace("channels.v1: stable", "channels.v1: \"stable, fast\"").replace("registry+v1", "plain+v0");
    fs::write(t.path().join("metadata/annotations.yaml"), bad).unwrap();
    let b = Bundle::load(t.path()).unwrap();
    let errs = errors(&b).join("\n");
    assert!(errs.contains("channel \" fast\" is empty or has surrounding spaces"), "{errs}");
    assert!(errs.contains("media type \"plain+v0\" is not registry+v1"), "{errs}");
}

#[test]
fn owned_crd_without_file_and_unsupported_kind() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    fs::remove_file(t.path().join("manifests/demos.crd.yaml")).unwrap();
    fs::write(t.path().join("manifests/deploy.yaml"), "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
        .unwrap();
    fs::write(t.path().join("manifests/job.yaml"), "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n").unwrap();
    let b = Bundle::load(t.path()).unwrap();
    let errs = errors(&b).join("\n");
    assert!(
        errs.contains(
            "spec.customresourcedefinitions.owned[0].name: owned CRD demos.example.com has no file in manifests/"
        ),
        "{errs}"
    );
    assert!(errs.contains("manifests/deploy.yaml: kind: a bundle cannot carry a Deployment"), "{errs}");
    assert!(errs.contains("manifests/job.yaml: kind: Job is not a kind OLM installs"), "{errs}");
}

#[test]
fn owned_version_not_served_by_the_crd() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    fs::write(
        t.path().join("manifests/demo.clusterserviceversion.yaml"),
        CSV.replace("version: v1, kind: Demo", "version: v2, kind: Demo"),
    )
    .unwrap();
    let b = Bundle::load(t.path()).unwrap();
    let errs = errors(&b).join("\n");
    assert!(errs.contains("owned API example.com v2 Demo is not served by the CRD demos.example.com"), "{errs}");
}

#[test]
fn later_documents_and_second_csv_are_reported_and_not_rendered() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let crd_and_cm = format!("{CRD}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm}}\n");
    fs::write(t.path().join("manifests/demos.crd.yaml"), crd_and_cm).unwrap();
    fs::write(
        t.path().join("manifests/zz-second.csv.yaml"),
        CSV.replace("demo-operator.v1.0.0", "demo-operator.v1.0.1"),
    )
    .unwrap();
    let b = Bundle::load(t.path()).unwrap();
    assert_eq!(b.objects.len(), 2);
    assert_eq!(b.ignored.len(), 2);
    let findings = validate(&b);
    let text: Vec<String> = findings.iter().map(|f| f.to_string()).collect();
    assert!(
        text.iter().any(|f| f.starts_with("error: manifests/zz-second.csv.yaml: kind: a second ClusterServiceVersion")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|f| f.starts_with("warning: manifests/demos.crd.yaml (document 2): ConfigMap cm")),
        "{text:?}"
    );
    let blob = render_bundle(&b, "").unwrap();
    assert_eq!(blob.properties.iter().filter(|p| p.type_ == "olm.bundle.object").count(), 2);
}

#[test]
fn dependencies_and_properties_are_checked_and_rendered() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    fs::write(
        t.path().join("metadata/dependencies.yaml"),
        r#"dependencies:
  - type: olm.package
    value: {packageName: nginx-operator, version: ">=0.1.0"}
  - type: olm.gvk
    value: {group: example.com, version: v1alpha1, kind: Nginx}
  - type: olm.constraint
    value:
      failureMessage: needs a cache
      any:
        constraints:
          - gvk: {group: cache.example.com, version: v1, kind: Redis}
          - package: {packageName: memcached, versionRange: ">=1.0.0"}
"#,
    )
    .unwrap();
    fs::write(t.path().join("metadata/properties.yaml"), "properties:\n  - type: custom.tier\n    value: gold\n")
        .unwrap();
    let b = Bundle::load(t.path()).unwrap();
    assert_eq!(errors(&b), Vec::<String>::new());
    let blob = render_bundle(&b, "").unwrap();
    let types: Vec<&str> = blob.properties.iter().map(|p| p.type_.as_str()).collect();
    assert_eq!(
        types,
        [
            "custom.tier",
            "olm.constraint",
            "olm.gvk",
            "olm.gvk.required",
            "olm.package",
            "olm.package.required",
            "olm.bundle.object",
            "olm.bundle.object"
        ]
    );
    let req = blob.properties.iter().find(|p| p.type_ == "olm.package.required").unwrap();
    assert_eq!(req.value, serde_json::json!({"packageName": "nginx-operator", "versionRange": ">=0.1.0"}));

    fs::write(
        t.path().join("metadata/dependencies.yaml"),
        "dependencies:\n  - type: olm.package\n    value: {packageName: nginx-operator, version: \"~>x\"}\n  - type: olm.constraint\n    value: {gvk: {group: a, version: v1, kind: K}, package: {packageName: p, versionRange: \">=1.0.0\"}}\n",
    )
    .unwrap();
    let b = Bundle::load(t.path()).unwrap();
    let errs = errors(&b).join("\n");
    assert!(
        errs.contains("metadata/dependencies.yaml: dependencies[0].value.version: \"~>x\" is not a semver range"),
        "{errs}"
    );
    assert!(errs.contains("metadata/dependencies.yaml: dependencies[1].value: has 2 constraints"), "{errs}");
}

#[test]
fn cli_exit_codes() {
    let exe = env!("CARGO_BIN_EXE_capstan");
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let run = |dir: &Path, fmt: &str| {
        Command::new(exe).args(["bundle", "validate"]).arg(dir).args(["-o", fmt]).output().unwrap()
    };
    let ok = run(t.path(), "json");
    assert_eq!(ok.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(report["valid"], true);

    fs::write(t.path().join("manifests/job.yaml"), "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n").unwrap();
    let bad = run(t.path(), "yaml");
    assert_eq!(bad.status.code(), Some(1));
    let report: serde_json::Value = serde_norway::from_slice(&bad.stdout).unwrap();
    assert_eq!(report["findings"][0]["file"], "manifests/job.yaml");
    assert_eq!(report["findings"][0]["field"], "kind");

    fs::remove_dir_all(t.path().join("metadata")).unwrap();
    let unreadable = run(t.path(), "text");
    assert_eq!(unreadable.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unreadable.stderr).contains("no metadata/ directory"));
}

#[test]
fn what_keeps_opm_from_rendering_is_a_validation_error() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let csv = CSV.replace(
        "    olm.skipRange:",
        "    olm.properties: '[{\"type\":\"olm.gvk\",\"value\":\"example.com/v1/Demo\"}]'\n    olm.skipRange:",
    );
    fs::write(t.path().join("manifests/demo.clusterserviceversion.yaml"), csv).unwrap();
    let b = Bundle::load(t.path()).unwrap();
    let field = "manifests/demo.clusterserviceversion.yaml: metadata.annotations[olm.properties][0].value";
    let err = render_bundle(&b, "").unwrap_err().to_string();
    assert!(err.contains(field), "{err}");
    let errs = errors(&b);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains(field) && errs[0].contains("olm.gvk value must be {group, version, kind}"), "{errs:?}");
}

/// `bundle validate` checks related images as `catalog add` and `opm validate` do
/// (kuadrant-operator's `oci://…` and a `name@` with no digest were accepted here and rejected
/// there).
#[test]
fn related_image_references_are_checked_as_the_catalog_checks_them() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let csv = format!(
        "{CSV}  relatedImages:\n    - {{name: wasm-shim, image: \"oci://quay.io/kuadrant/wasm-shim:v0.1.0\"}}\n    - {{name: manager, image: \"quay.io/example/demo@\"}}\n"
    );
    let b = with_csv(t.path(), &csv);
    assert_eq!(
        errors(&b),
        vec![
            "error: manifests/demo.clusterserviceversion.yaml: spec.relatedImages[0].image: \"oci://quay.io/kuadrant/wasm-shim:v0.1.0\" is not a valid image reference (invalid reference format); the catalog rejects it (fix: write a pull spec such as quay.io/org/image:v1.0.0 or quay.io/org/image@sha256:<digest>; drop the scheme (oci://, docker://, https://))",
            "error: manifests/demo.clusterserviceversion.yaml: spec.relatedImages[1].image: \"quay.io/example/demo@\" is not a valid image reference (invalid reference format); the catalog rejects it (fix: write a pull spec such as quay.io/org/image:v1.0.0 or quay.io/org/image@sha256:<digest>; give the digest after '@' (…@sha256:<64 hex digits>) or drop the '@')",
        ]
    );
    // The catalog's own check of the rendered blob rejects the same two references.
    let blob = render_bundle(&b, "quay.io/example/demo-bundle:v1.0.0").unwrap();
    let catalog: Vec<String> =
        capstan::catalog::validate::check_bundle_blob(&blob).into_iter().map(|e| e.message).collect();
    assert_eq!(catalog.len(), 2, "{catalog:?}");
    assert!(catalog.iter().all(|m| m.contains("invalid image pull spec")), "{catalog:?}");
}

/// `catalog render` and `catalog add` run the one bundle validation `bundle validate`
/// runs: a bundle it rejects is neither rendered nor added (exit 1, nothing written), as the
/// README promises. (A Job is a kind OLM does not install from a bundle; opm renders it.)
#[test]
fn catalog_render_and_add_refuse_what_bundle_validate_rejects() {
    let exe = env!("CARGO_BIN_EXE_capstan");
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    fs::write(t.path().join("manifests/job.yaml"), "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n").unwrap();
    let expected = format!(
        "bundle demo-operator.v1.0.0 ({}) is invalid: 1 error; nothing was rendered\n  error: manifests/job.yaml: kind: Job is not a kind OLM installs from a bundle (the InstallPlan fails with UnsupportedResource) (fix: remove it or use one of {})",
        t.path().display(),
        capstan::bundle::ALLOWED_KINDS.join(", ")
    );
    let validate = Command::new(exe).args(["bundle", "validate"]).arg(t.path()).output().unwrap();
    assert_eq!(validate.status.code(), Some(1));

    let render = Command::new(exe).args(["catalog", "render"]).arg(t.path()).output().unwrap();
    assert_eq!(render.status.code(), Some(1));
    assert_eq!(render.stdout, b"");
    assert_eq!(String::from_utf8_lossy(&render.stderr), format!("error: render {}: {expected}\n", t.path().display()));

    let catalog = tempfile::tempdir().unwrap();
    let add = Command::new(exe)
        .args(["catalog", "add"])
        .arg(catalog.path())
        .arg(t.path())
        .args(["--image", "quay.io/example/demo-bundle:v1.0.0"])
        .output()
        .unwrap();
    assert_eq!(add.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&add.stderr), format!("error: {expected}\n"));
    assert_eq!(fs::read_dir(catalog.path()).unwrap().count(), 0, "nothing written");
}

/// A manifest without apiVersion is invalid content (exit 1, a finding naming file and
/// field), not unreadable input (exit 2); an empty `alm-examples` annotation is a warning, as in
/// opm and operator-sdk (operator-framework/api `validateExamplesAnnotations`).
#[test]
fn missing_api_version_is_invalid_content_and_empty_alm_examples_a_warning() {
    let exe = env!("CARGO_BIN_EXE_capstan");
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let csv = CSV.replace("    olm.skipRange:", "    alm-examples: \"\"\n    olm.skipRange:");
    let b = with_csv(t.path(), &csv);
    let findings: Vec<String> = validate(&b).iter().map(ToString::to_string).collect();
    assert_eq!(
        findings,
        vec![
            "warning: manifests/demo.clusterserviceversion.yaml: metadata.annotations[alm-examples]: is empty: consoles offer no example for the APIs the operator provides (fix: write a JSON array of example custom resources, or remove the annotation)"
        ]
    );
    let ok = Command::new(exe).args(["bundle", "validate"]).arg(t.path()).output().unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stdout));

    fs::write(t.path().join("manifests/sa.yaml"), "kind: ServiceAccount\nmetadata: {name: demo}\n").unwrap();
    fs::write(t.path().join("manifests/cm.yaml"), "ApiVersion: v1\nkind: ConfigMap\nmetadata: {name: demo}\n").unwrap();
    let b = Bundle::load(t.path()).unwrap();
    assert_eq!(
        errors(&b),
        vec![
            "error: manifests/cm.yaml: apiVersion: missing (there is \"ApiVersion\"; the API server matches field names exactly) (fix: rename \"ApiVersion\" to \"apiVersion\")",
            "error: manifests/sa.yaml: apiVersion: missing; every manifest needs apiVersion and kind (fix: set apiVersion, e.g. apiVersion: v1)",
        ]
    );
    let bad = Command::new(exe).args(["bundle", "validate"]).arg(t.path()).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
}

/// Wrongly typed install-strategy fields, which OLM's decoding into the Kubernetes types
/// rejects only at install time, are validation errors naming file, field path and the type.
#[test]
fn wrongly_typed_install_strategy_fields_are_errors_naming_the_field_and_type() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let csv = CSV
        .replace(
            "            selector: {matchLabels: {app: demo}}",
            "            replicas: \"2\"\n            selector: {matchLabels: {app: demo}}",
        )
        .replace(
            "                  - {name: manager, image: \"quay.io/example/demo:v1.0.0\"}",
            "                  - {name: manager, image: \"quay.io/example/demo:v1.0.0\", ports: [{containerPort: http}]}",
        )
        + "      permissions:\n        - serviceAccountName: demo\n          rules: everything\n      clusterPermissions:\n        - serviceAccountName: demo\n          rules:\n            - {apiGroups: [\"\"], resources: [pods], verbs: get}\n";
    let b = with_csv(t.path(), &csv);
    assert_eq!(
        errors(&b),
        vec![
            "error: manifests/demo.clusterserviceversion.yaml: spec.install.spec.permissions[0].rules: invalid type: string \"everything\", expected a sequence; spec.install.spec.permissions[0].rules must be a list of rbac/v1 PolicyRule ({apiGroups, resources, verbs, …}, each a list of strings), and OLM fails the install otherwise (fix: write the field with the type the Kubernetes API gives it)",
            "error: manifests/demo.clusterserviceversion.yaml: spec.install.spec.clusterPermissions[0].rules[0].verbs: invalid type: string \"get\", expected a sequence; spec.install.spec.clusterPermissions[0].rules must be a list of rbac/v1 PolicyRule ({apiGroups, resources, verbs, …}, each a list of strings), and OLM fails the install otherwise (fix: write the field with the type the Kubernetes API gives it)",
            "error: manifests/demo.clusterserviceversion.yaml: spec.install.spec.deployments[0].spec.replicas: invalid type: string \"2\", expected i32; spec.install.spec.deployments[0].spec must be an apps/v1 DeploymentSpec, and OLM fails the install otherwise (fix: write the field with the type the Kubernetes API gives it)",
        ]
    );
    // The first type error of each entry is reported; fixing replicas shows the port.
    let b = with_csv(t.path(), &csv.replace("replicas: \"2\"", "replicas: 2"));
    let errs = errors(&b);
    assert!(
        errs.iter().any(|e| e.starts_with("error: manifests/demo.clusterserviceversion.yaml: spec.install.spec.deployments[0].spec.template.spec.containers[0].ports[0].containerPort: invalid type: string \"http\", expected i32;")),
        "{errs:?}"
    );
}

/// What only the catalog's per-bundle rules catch (here a `spec.release` longer than opm's 20
/// characters) is a `bundle validate` error too, so `catalog add` never meets a bundle that
/// `bundle validate` passed.
#[test]
fn the_catalogs_bundle_rules_run_on_the_rendered_blob() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let b = with_csv(
        t.path(),
        &CSV.replace("  version: 1.0.0\n", "  version: 1.0.0\n  release: a-release-of-more-than-20\n"),
    );
    let errs = errors(&b);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("error: manifests/demo.clusterserviceversion.yaml: the bundle's catalog entry (olm.bundle blob) is invalid: ")
            && errs[0].contains("invalid release \"a-release-of-more-than-20\": exceeds maximum length of 20 characters"),
        "{errs:?}"
    );
}
