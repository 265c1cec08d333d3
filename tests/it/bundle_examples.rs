//! The example bundles under bundles/ are valid and render to the edges and dependencies they
//! are meant to show.

use std::path::{Path, PathBuf};

use capstan::bundle::render::{RenderInfo, render_bundle_dir};
use capstan::bundle::{Bundle, validate};
use capstan::catalog::model;
use serde_json::json;

fn example(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles").join(path)
}

fn render(path: &str) -> (model::Bundle, RenderInfo) {
    render_bundle_dir(&example(path), None).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn has(blob: &model::Bundle, type_: &str, value: serde_json::Value) -> bool {
    blob.properties.iter().any(|p| p.type_ == type_ && p.value == value)
}

#[test]
fn every_example_bundle_is_valid_without_warnings() {
    let mut n = 0;
    for pkg in std::fs::read_dir(example("")).unwrap() {
        let pkg = pkg.unwrap().path();
        if !pkg.is_dir() {
            continue;
        }
        for ver in std::fs::read_dir(pkg).unwrap() {
            let dir = ver.unwrap().path();
            let bundle = Bundle::load(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let findings: Vec<String> = validate(&bundle).iter().map(ToString::to_string).collect();
            assert!(findings.is_empty(), "{}: {findings:#?}", dir.display());
            n += 1;
        }
    }
    assert_eq!(n, 5, "nginx-operator 0.1.0, 0.2.0 and kaiwudb-operator 1.0.0, 1.1.0, 1.2.0");
}

#[test]
fn nginx_operator_versions() {
    let (b1, i1) = render("nginx-operator/0.1.0");
    let (b2, i2) = render("nginx-operator/0.2.0");
    assert_eq!(
        (i1.package.as_str(), i1.channels.as_slice(), i1.default_channel.as_deref()),
        ("nginx-operator", &["alpha".to_string()][..], Some("alpha"))
    );
    assert_eq!(i1.replaces, None);
    assert_eq!(i2.replaces.as_deref(), Some("nginx-operator.v0.1.0"));
    for b in [&b1, &b2] {
        assert!(has(b, "olm.gvk", json!({"group": "example.com", "kind": "Nginx", "version": "v1alpha1"})));
    }
    // The chart values are in the CRD's schema: replicaCount >= 0, service.port 1..65535.
    let crd = Bundle::load(&example("nginx-operator/0.2.0")).unwrap();
    let crd = crd.crds().next().unwrap();
    let spec = &crd.value["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["replicaCount"]["minimum"], 0);
    assert_eq!(spec["service"]["properties"]["port"]["maximum"], 65535);
}

#[test]
fn kaiwudb_operator_versions() {
    let (b0, i0) = render("kaiwudb-operator/1.0.0");
    let (b1, i1) = render("kaiwudb-operator/1.1.0");
    let (b2, i2) = render("kaiwudb-operator/1.2.0");
    assert_eq!(i0.default_channel.as_deref(), Some("stable"));
    assert_eq!(i1.replaces.as_deref(), Some("kaiwudb-operator.v1.0.0"));
    assert_eq!(i2.replaces.as_deref(), Some("kaiwudb-operator.v1.1.0"));
    assert_eq!(i2.skip_range.as_deref(), Some(">=1.0.0 <1.2.0"));
    let v1 = json!({"group": "kaiwu.inspur.com", "kind": "KaiwuCluster", "version": "v1"});
    let v2 = json!({"group": "kaiwu.inspur.com", "kind": "KaiwuCluster", "version": "v2alpha1"});
    assert!(has(&b0, "olm.gvk", v1.clone()) && !has(&b0, "olm.gvk", v2.clone()));
    // 1.1.0 adds a CRD version.
    assert!(has(&b1, "olm.gvk", v1) && has(&b1, "olm.gvk", v2));
    // 1.2.0 depends on nginx-operator by package and by GVK.
    assert!(!b1.properties.iter().any(|p| p.type_.ends_with(".required")));
    assert!(has(&b2, "olm.package.required", json!({"packageName": "nginx-operator", "versionRange": ">=0.1.0"})));
    assert!(has(&b2, "olm.gvk.required", json!({"group": "example.com", "kind": "Nginx", "version": "v1alpha1"})));
}

/// The images the example catalog gives the example bundles.
const EXAMPLES: [(&str, &str); 5] = [
    ("nginx-operator/0.1.0", "quay.io/example/nginx-operator-bundle:v0.1.0"),
    ("nginx-operator/0.2.0", "quay.io/example/nginx-operator-bundle:v0.2.0"),
    ("kaiwudb-operator/1.0.0", "quay.io/example/kaiwudb-operator-bundle:v1.0.0"),
    ("kaiwudb-operator/1.1.0", "quay.io/example/kaiwudb-operator-bundle:v1.1.0"),
    ("kaiwudb-operator/1.2.0", "quay.io/example/kaiwudb-operator-bundle:v1.2.0"),
];

/// catalog/ is exactly what `capstan catalog add` builds from bundles/ (in the order of
/// bundles/README.md), and it validates.
#[test]
fn example_catalog_is_built_from_the_example_bundles() {
    let exe = env!("CARGO_BIN_EXE_capstan");
    let t = tempfile::tempdir().unwrap();
    let built = t.path().join("catalog");
    for (dir, image) in EXAMPLES {
        let out = std::process::Command::new(exe)
            .args(["catalog", "add"])
            .arg(&built)
            .arg(example(dir))
            .args(["--image", image])
            .output()
            .unwrap();
        assert!(out.status.success(), "catalog add {dir}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
    for pkg in ["nginx-operator", "kaiwudb-operator"] {
        let want = std::fs::read_to_string(built.join(pkg).join("catalog.json")).unwrap();
        let have = std::fs::read_to_string(repo.join(pkg).join("catalog.json")).unwrap();
        assert!(want == have, "catalog/{pkg}/catalog.json is stale; rebuild it as bundles/README.md says");
    }
    let out = std::process::Command::new(exe).args(["catalog", "validate"]).arg(&repo).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}
