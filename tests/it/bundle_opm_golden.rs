//! Renders of operator-registry's own test bundles match what opm produces for them: the
//! expectations of upstream `alpha/action/render_test.go` and the `olm.bundle.object` bytes of an
//! opm-rendered FBC (fixtures and provenance in `tests/fixtures/operator-registry/`).

use std::path::{Path, PathBuf};

use capstan::bundle::Bundle;
use capstan::bundle::render::render_bundle;
use capstan::catalog::model;
use capstan::catalog::parse::parse_bytes;
use serde_json::json;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/operator-registry").join(name)
}

fn render(name: &str, image: &str) -> model::Bundle {
    let bundle = Bundle::load(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    render_bundle(&bundle, image).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// upstream `render_test.go`, case `Success/BundleDirectoryWithImageRefTemplate`: properties in
/// this order, related images sorted by image with the bundle image (equal to the operator
/// image here) not repeated.
#[test]
fn matches_upstream_render_test_expectations() {
    let b = render("foo-bundle-v0.2.0", "test.registry/foo-operator/foo:v0.2.0");
    assert_eq!((b.name.as_str(), b.package.as_str()), ("foo.v0.2.0", "foo"));
    let head: Vec<(String, serde_json::Value)> =
        b.properties[..4].iter().map(|p| (p.type_.clone(), p.value.clone())).collect();
    assert_eq!(
        head,
        vec![
            ("olm.gvk".to_string(), json!({"group": "test.foo", "kind": "Foo", "version": "v1"})),
            ("olm.gvk.required".to_string(), json!({"group": "test.bar", "kind": "Bar", "version": "v1alpha1"})),
            ("olm.package".to_string(), json!({"packageName": "foo", "version": "0.2.0"})),
            ("olm.package.required".to_string(), json!({"packageName": "bar", "versionRange": "<0.1.0"})),
        ]
    );
    // Then the two objects, the CRD's first (sorted by their base64 data).
    let objects: Vec<String> = b.properties[4..]
        .iter()
        .map(|p| {
            assert_eq!(p.type_, "olm.bundle.object");
            p.value["data"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(objects.len(), 2);
    assert!(objects[0] < objects[1]);
    let related: Vec<(&str, &str)> = b.related_images.iter().map(|r| (r.name.as_str(), r.image.as_str())).collect();
    assert_eq!(
        related,
        [
            ("", "test.registry/foo-operator/foo-2:v0.2.0"),
            ("", "test.registry/foo-operator/foo-init-2:v0.2.0"),
            ("", "test.registry/foo-operator/foo-init:v0.2.0"),
            ("other", "test.registry/foo-operator/foo-other:v0.2.0"),
            ("operator", "test.registry/foo-operator/foo:v0.2.0"),
        ]
    );
}

/// The `olm.bundle.object` data is byte for byte what opm wrote (Go's `json.Marshal` of the
/// object: keys sorted, `<` in `olm.skipRange` escaped as `\u003c`), and every other property
/// equals opm's.
#[test]
fn bundle_objects_are_byte_identical_to_opm() {
    let text = std::fs::read(fixture("foo-index.yaml")).unwrap();
    let published = parse_bytes("foo-index.yaml", &text).unwrap();
    let mut checked = 0;
    for want in &published.bundles {
        let dir = format!("foo-bundle-v{}", want.name.trim_start_matches("foo.v"));
        let got = render(&dir, &want.image);
        let key = |b: &model::Bundle| {
            let mut v: Vec<String> = b.properties.iter().map(|p| format!("{} {}", p.type_, p.value)).collect();
            v.sort();
            v
        };
        // The fixture lists the objects in file order (older opm); the set is what must match.
        assert_eq!(key(&got), key(want), "{}", want.name);
        let objects = |b: &model::Bundle| b.properties.iter().filter(|p| p.type_ == "olm.bundle.object").count();
        assert_eq!(objects(&got), 2);
        checked += 1;
    }
    assert_eq!(checked, 2);
}
