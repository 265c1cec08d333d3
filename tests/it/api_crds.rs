//! `manifests/crds/` is exactly what `capstan crds --dir` generates, and `capstan crds` prints the
//! same CRDs as one YAML stream.

use std::path::PathBuf;
use std::process::Command;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;

const REGENERATE: &str = "run `cargo run -- crds --dir manifests/crds` and commit the result";

fn manifests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests/crds")
}

#[test]
fn committed_crd_files_match_the_generated_ones() {
    let dir = manifests_dir();
    let mut expected = Vec::new();
    for crd in capstan::api::crds() {
        let name = capstan::api::crd_file_name(&crd);
        let want = capstan::api::crd_file_content(&crd).expect("CRD serializes");
        let path = dir.join(&name);
        match std::fs::read_to_string(&path) {
            Ok(got) => assert!(got == want, "{} differs from what the code generates; {REGENERATE}", path.display()),
            Err(e) => panic!("{} cannot be read ({e}); {REGENERATE}", path.display()),
        }
        expected.push(name);
    }
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {} ({e}); {REGENERATE}", dir.display()))
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    expected.sort();
    assert_eq!(present, expected, "{} holds files the code does not generate; {REGENERATE}", dir.display());
}

#[test]
fn crds_command_prints_the_eight_crds_and_writes_the_same_files() {
    let bin = env!("CARGO_BIN_EXE_capstan");
    let out = Command::new(bin).arg("crds").output().expect("run capstan crds");
    assert!(out.status.success(), "capstan crds failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let docs: Vec<CustomResourceDefinition> = serde_norway::Deserializer::from_str(&text)
        .map(|d| CustomResourceDefinition::deserialize(d).expect("each document is a CRD"))
        .collect();
    let names: Vec<String> = docs.iter().map(|c| c.metadata.name.clone().unwrap_or_default()).collect();
    assert_eq!(
        names,
        [
            "catalogsources.operators.coreos.com",
            "clusterserviceversions.operators.coreos.com",
            "installplans.operators.coreos.com",
            "olmconfigs.operators.coreos.com",
            "operatorconditions.operators.coreos.com",
            "operatorgroups.operators.coreos.com",
            "operators.operators.coreos.com",
            "subscriptions.operators.coreos.com",
        ]
    );
    assert_eq!(docs, capstan::api::crds());

    let tmp = tempfile::tempdir().expect("tempdir");
    let target = tmp.path().join("nested/crds");
    let out = Command::new(bin).args(["crds", "--dir"]).arg(&target).output().expect("run capstan crds --dir");
    assert!(out.status.success(), "capstan crds --dir failed: {}", String::from_utf8_lossy(&out.stderr));
    for crd in capstan::api::crds() {
        let name = capstan::api::crd_file_name(&crd);
        let written = std::fs::read_to_string(target.join(&name)).expect("file written");
        assert_eq!(written, std::fs::read_to_string(manifests_dir().join(&name)).expect("committed file"));
    }
}

#[test]
fn crds_command_reports_an_unwritable_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, "x").expect("write file");
    let out = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["crds", "--dir"])
        .arg(file.join("crds"))
        .output()
        .expect("run capstan crds --dir");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not-a-dir"), "the message names the path: {err}");
}
