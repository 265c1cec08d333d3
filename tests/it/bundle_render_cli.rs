//! `capstan catalog render`: bundle directories, catalog directories and bundle images into one
//! FBC stream; a pushed bundle image renders to the same blob as its directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use capstan::catalog::model::DeclarativeConfig;
use capstan::catalog::parse::parse_bytes;

fn example(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles").join(path)
}

fn capstan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capstan")).args(args).output().expect("run capstan")
}

fn stream(out: &Output, name: &str) -> DeclarativeConfig {
    assert!(out.status.success(), "capstan failed: {}", String::from_utf8_lossy(&out.stderr));
    parse_bytes(name, &out.stdout).unwrap_or_else(|e| panic!("output does not parse: {e}"))
}

#[test]
fn renders_bundle_directories_as_a_json_and_yaml_stream() {
    let nginx = example("nginx-operator/0.1.0");
    let kaiwu = example("kaiwudb-operator/1.2.0");
    let (nginx, kaiwu) = (nginx.to_str().unwrap(), kaiwu.to_str().unwrap());
    let args = [
        "catalog",
        "render",
        nginx,
        kaiwu,
        "--image",
        "quay.io/example/nginx-operator-bundle:v0.1.0",
        "--image",
        "quay.io/example/kaiwudb-operator-bundle:v1.2.0",
    ];
    let json = capstan(&args);
    let cfg = stream(&json, "out.json");
    // opm order: grouped by package name.
    let names: Vec<(&str, &str)> = cfg.bundles.iter().map(|b| (b.name.as_str(), b.image.as_str())).collect();
    assert_eq!(
        names,
        [
            ("kaiwudb-operator.v1.2.0", "quay.io/example/kaiwudb-operator-bundle:v1.2.0"),
            ("nginx-operator.v0.1.0", "quay.io/example/nginx-operator-bundle:v0.1.0"),
        ]
    );
    // JSON objects indented by four spaces, opm's key order.
    let text = String::from_utf8(json.stdout).unwrap();
    assert!(
        text.starts_with(
            "{\n    \"schema\": \"olm.bundle\",\n    \"name\": \"kaiwudb-operator.v1.2.0\",\n    \"package\""
        ),
        "{}",
        &text[..200]
    );

    let mut yaml_args = args.to_vec();
    yaml_args.extend(["-o", "yaml"]);
    let yaml = stream(&capstan(&yaml_args), "out.yaml");
    assert_eq!(yaml.bundles, cfg.bundles);
}

#[test]
fn image_template_migration_and_catalog_directories() {
    let t = tempfile::tempdir().unwrap();
    let fbc = t.path().join("fbc");
    std::fs::create_dir(&fbc).unwrap();
    // The package and its channel; the bundle blob comes from the bundle directory (a catalog
    // in the output must be valid as a whole).
    std::fs::write(
        fbc.join("pkg.yaml"),
        "schema: olm.package\nname: nginx-operator\ndefaultChannel: alpha\n---\nschema: olm.channel\npackage: nginx-operator\nname: alpha\nentries:\n- name: nginx-operator.v0.2.0\n",
    )
    .unwrap();
    let dir = example("nginx-operator/0.2.0");
    let out = capstan(&[
        "catalog",
        "render",
        fbc.to_str().unwrap(),
        dir.to_str().unwrap(),
        "--image-template",
        "registry.local/{{.Package}}-bundle:{{.Version}}",
        "--migrate-level",
        "bundle-object-to-csv-metadata",
    ]);
    let cfg = stream(&out, "out.json");
    assert_eq!(cfg.packages.len(), 1);
    assert_eq!(cfg.bundles[0].image, "registry.local/nginx-operator-bundle:0.2.0");
    let types: Vec<&str> = cfg.bundles[0].properties.iter().map(|p| p.type_.as_str()).collect();
    assert_eq!(types, ["olm.gvk", "olm.package", "olm.csv.metadata"]);
}

#[test]
fn exit_codes() {
    let missing = capstan(&["catalog", "render", "/nonexistent/bundle"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/bundle"));

    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("manifests")).unwrap();
    std::fs::create_dir_all(t.path().join("metadata")).unwrap();
    let empty = capstan(&["catalog", "render", t.path().to_str().unwrap()]);
    assert_eq!(empty.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("no csv in bundle"));
    assert!(empty.stdout.is_empty(), "nothing is printed when a reference fails");

    let dir = example("nginx-operator/0.1.0");
    let two_images = capstan(&["catalog", "render", dir.to_str().unwrap(), "--image", "a/b:c", "--image", "d/e:f"]);
    assert_eq!(two_images.status.code(), Some(2));
}

/// A bundle pushed with `capstan bundle push` renders from the registry exactly as its directory
/// renders with that image reference (the opm side of this comparison is in the docs).
#[test]
fn pushed_bundle_image_renders_like_its_directory() {
    let addr = crate::support::registry();
    for (dir, tag) in [
        ("nginx-operator/0.2.0", "nginx-operator-bundle:v0.2.0"),
        ("kaiwudb-operator/1.2.0", "kaiwudb-operator-bundle:v1.2.0"),
    ] {
        let dir = example(dir);
        let reference = format!("{addr}/capstan-test/{tag}");
        let push = capstan(&["bundle", "push", dir.to_str().unwrap(), &reference]);
        assert!(push.status.success(), "push: {}", String::from_utf8_lossy(&push.stderr));
        let from_image = capstan(&["catalog", "render", &reference]);
        let from_dir = capstan(&["catalog", "render", dir.to_str().unwrap(), "--image", &reference]);
        let (a, b) = (stream(&from_image, "image.json"), stream(&from_dir, "dir.json"));
        assert_eq!(a.bundles.len(), 1);
        assert_eq!(a, b);
        assert_eq!(from_image.stdout, from_dir.stdout, "byte-identical streams");
    }
}
