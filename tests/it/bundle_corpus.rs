//! Every bundle of the community-operators-prod corpus loads, validates and renders; renders
//! match the blobs of the published v4.20 catalogs for the packages present in both.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::support::shared_dir;
use capstan::bundle::render::{Migration, render_bundle, render_bundle_with};
use capstan::bundle::{Bundle, Severity, validate};
use capstan::catalog::model;
use serde::Deserialize;
use serde_json::Value;

/// Bundle directories under operators/: `<pkg>/<ver>/` or `<pkg>/<ver>/bundle/`.
fn corpus_bundles() -> Vec<PathBuf> {
    let root = shared_dir().join("corpus/community-operators-prod/operators");
    let mut out = Vec::new();
    for pkg in std::fs::read_dir(&root).expect("corpus operators/ directory") {
        let pkg = pkg.unwrap().path();
        if !pkg.is_dir() {
            continue;
        }
        for ver in std::fs::read_dir(&pkg).unwrap() {
            let ver = ver.unwrap().path();
            for dir in [ver.clone(), ver.join("bundle")] {
                if dir.join("manifests").is_dir() && dir.join("metadata").is_dir() {
                    out.push(dir);
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_corpus_bundle_loads_validates_and_renders() {
    let bundles = corpus_bundles();
    assert!(bundles.len() >= 241, "expected the 241 corpus bundles, found {}", bundles.len());
    let mut failures = Vec::new();
    let mut warnings = 0usize;
    let mut oci_rejected = 0usize;
    for dir in &bundles {
        let bundle = match Bundle::load(dir) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{}: load: {e}", dir.display()));
                continue;
            }
        };
        for f in validate(&bundle) {
            match f.severity {
                // Expected since there is one validation for `bundle validate`, `catalog render`
                // and `catalog add`: every kuadrant-operator CSV lists the related image
                // `oci://quay.io/kuadrant/wasm-shim:…`, which `catalog add` and opm (since
                // operator-registry v1.64.0) reject; this test used to accept it.
                Severity::Error
                    if bundle.package() == "kuadrant-operator"
                        && f.field.starts_with("spec.relatedImages[")
                        && f.message.starts_with("\"oci://quay.io/kuadrant/wasm-shim:") =>
                {
                    oci_rejected += 1
                }
                Severity::Error => failures.push(format!("{}: {f}", dir.display())),
                Severity::Warning => warnings += 1,
            }
        }
        let blob = match render_bundle(&bundle, "quay.io/example/bundle:v1") {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{}: render: {e}", dir.display()));
                continue;
            }
        };
        // The blob says what the bundle says.
        assert_eq!(blob.package, bundle.annotations.package);
        assert_eq!(blob.name, bundle.csv().name());
        let pkg: Vec<_> = blob.properties.iter().filter(|p| p.type_ == "olm.package").collect();
        assert_eq!(pkg.len(), 1, "{}: one olm.package", dir.display());
        assert_eq!(pkg[0].value["version"], Value::from(bundle.csv().version().unwrap_or("")));
        let objects = blob.properties.iter().filter(|p| p.type_ == "olm.bundle.object").count();
        assert_eq!(objects, bundle.objects.len(), "{}: one olm.bundle.object per object", dir.display());
        assert!(blob.related_images.iter().any(|r| r.image == "quay.io/example/bundle:v1"));
        for crd in bundle.csv().owned_crds() {
            assert!(
                blob.properties.iter().any(|p| p.type_ == "olm.gvk"
                    && p.value["kind"] == crd.kind.clone()
                    && p.value["version"] == crd.version.clone()),
                "{}: olm.gvk for owned {}",
                dir.display(),
                crd.name
            );
        }
    }
    eprintln!("{} bundles, {warnings} warnings", bundles.len());
    assert!(
        oci_rejected >= 14,
        "every kuadrant-operator bundle's oci:// related image is an error, found {oci_rejected}"
    );
    assert!(failures.is_empty(), "{} problems:\n{}", failures.len(), failures.join("\n"));
}

/// A version directory whose bundle is one level down gets a hint.
#[test]
fn nested_bundle_directory_hint() {
    let ver =
        shared_dir().join("corpus/community-operators-prod/operators/rabbitmq-messaging-topology-operator/1.19.0");
    let err = Bundle::load(&ver).unwrap_err().to_string();
    assert!(err.ends_with(&format!("did you mean {}?", ver.join("bundle").display())), "{err}");
}

/// The corpus dependencies are rendered into the required properties.
#[test]
fn dependencies_render_as_required_properties() {
    let dir = shared_dir().join("corpus/community-operators-prod/operators/kuadrant-operator");
    let mut checked = 0;
    for ver in std::fs::read_dir(&dir).unwrap() {
        let ver = ver.unwrap().path();
        let deps = ver.join("metadata/dependencies.yaml");
        if !deps.is_file() {
            continue;
        }
        let bundle = Bundle::load(&ver).unwrap();
        let blob = render_bundle(&bundle, "").unwrap();
        for d in bundle.dependencies.iter().filter(|d| d.type_ == "olm.package") {
            assert!(
                blob.properties.iter().any(|p| p.type_ == "olm.package.required"
                    && p.value["packageName"] == d.value["packageName"]
                    && p.value["versionRange"] == d.value["version"]),
                "{}: {:?}",
                ver.display(),
                d
            );
        }
        checked += 1;
    }
    assert!(checked > 0);
}

#[derive(Deserialize)]
struct Blob {
    schema: String,
    #[serde(default)]
    name: String,
}

/// For packages in both operators/ and catalogs/v4.20/, rendering the bundle directory with the
/// catalog's image and opm's `bundle-object-to-csv-metadata` migration gives the published blob:
/// same properties in the same order, same relatedImages.
#[test]
fn renders_match_the_published_catalog() {
    let root = shared_dir().join("corpus/community-operators-prod");
    let mut compared = 0;
    for pkg in ["rabbitmq-cluster-operator", "rabbitmq-messaging-topology-operator"] {
        let text = std::fs::read_to_string(root.join(format!("catalogs/v4.20/{pkg}/catalog.yaml"))).unwrap();
        let mut published: BTreeMap<String, model::Bundle> = BTreeMap::new();
        for doc in serde_norway::Deserializer::from_str(&text) {
            let v = Value::deserialize(doc).unwrap();
            let meta: Blob = serde_json::from_value(v.clone()).unwrap();
            if meta.schema == "olm.bundle" {
                published.insert(meta.name, serde_json::from_value(v).unwrap());
            }
        }
        for dir in corpus_bundles().into_iter().filter(|d| d.starts_with(root.join("operators").join(pkg))) {
            let bundle = Bundle::load(&dir).unwrap();
            let Some(want) = published.get(bundle.name()) else { continue };
            let got = render_bundle_with(&bundle, &want.image, Migration::CsvMetadata).unwrap();
            assert_eq!(got.package, want.package);
            let types = |b: &model::Bundle| b.properties.iter().map(|p| p.type_.clone()).collect::<Vec<_>>();
            assert_eq!(types(&got), types(want), "{}: property order", bundle.name());
            for (g, w) in got.properties.iter().zip(&want.properties) {
                assert_eq!(g.value, w.value, "{}: property {}", bundle.name(), g.type_);
            }
            assert_eq!(got.related_images, want.related_images, "{}: relatedImages", bundle.name());
            compared += 1;
        }
    }
    eprintln!("{compared} bundles compared with the published catalog");
    assert_eq!(compared, 38, "every bundle of the two published rabbitmq catalogs is in operators/");
}
