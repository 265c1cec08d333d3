//! `capstan catalog validate` and `capstan catalog add` as a user runs them: exit codes
//! (0 valid, 1 invalid with every error listed, 2 unreadable input), `-o json`, and adding the
//! corpus bundles of one replaces-mode and one semver-mode package.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::shared_dir;
use capstan::catalog::parse;

fn capstan(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_capstan")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const TWO_BROKEN: &str = r#"{"schema":"olm.package","name":"a","defaultChannel":"stabel"}
{"schema":"olm.channel","package":"a","name":"stable","entries":[{"name":"a.v1.0.0"},{"name":"a.v1.1.0","skipRange":"<1.1.0"}]}
{"schema":"olm.bundle","package":"a","name":"a.v1.0.0","image":"r.local/a:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"a","version":"1.0.0"}}]}
{"schema":"olm.bundle","package":"a","name":"a.v1.1.0","image":"r.local/a:1.1.0","properties":[{"type":"olm.package","value":{"packageName":"a","version":"1.1.0"}}]}
{"schema":"olm.package","name":"b","defaultChannel":"s"}
{"schema":"olm.channel","package":"b","name":"s","entries":[{"name":"b.v1"}]}
"#;

#[test]
fn validate_exit_codes_and_outputs() {
    let corpus = shared_dir().join("corpus/community-operators-prod/catalogs/v4.20");
    let (code, out, _) = capstan(&["catalog", "validate", corpus.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("valid (37 packages"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("catalog.json");
    std::fs::write(&file, TWO_BROKEN).unwrap();
    let (code, _, err) = capstan(&["catalog", "validate", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    // Every error, grouped by package: wrong default channel and two heads in a, missing bundle in b.
    assert!(err.contains("package a:") && err.contains("package b:"), "{err}");
    assert!(err.contains("\"stabel\"") && err.contains("two heads") && err.contains("b.v1"), "{err}");

    let (code, out, _) = capstan(&["catalog", "validate", "-o", "json", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["valid"], false);
    let kinds: Vec<&str> = v["errors"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["default-channel", "multiple-heads", "missing-bundle"], "{out}");

    let (code, _, err) = capstan(&["catalog", "validate", "/nonexistent/catalog"]);
    assert_eq!(code, 2, "{err}");
    std::fs::write(&file, b"{\"schema\": \"olm.package\", \"name\": ").unwrap();
    let (code, _, err) = capstan(&["catalog", "validate", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("catalog.json"), "{err}");
}

/// Adds every bundle of a corpus package in version order; returns the catalog directory.
fn add_all(package: &str, mode: &str, catalog: &Path) {
    let root = shared_dir().join("corpus/community-operators-prod/operators").join(package);
    let mut versions: Vec<(semver::Version, PathBuf)> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("manifests").is_dir())
        .filter_map(|p| {
            let v = p.file_name()?.to_str()?.split('-').next()?.to_string();
            Some((semver::Version::parse(&v).ok()?, p))
        })
        .collect();
    versions.sort();
    for (v, dir) in versions {
        let image = format!("quay.io/community-operators/{package}-bundle:v{v}");
        let (code, out, err) = capstan(&[
            "catalog",
            "add",
            catalog.to_str().unwrap(),
            dir.to_str().unwrap(),
            "--mode",
            mode,
            "--image",
            &image,
        ]);
        assert_eq!(code, 0, "add {}: {out}{err}", dir.display());
    }
}

fn heads(catalog: &Path, package: &str) -> Vec<(String, String)> {
    let cfg = parse::load_path(catalog).unwrap();
    let mut out = Vec::new();
    for ch in cfg.channels.iter().filter(|c| c.package == package) {
        let incoming: Vec<&str> = ch
            .entries
            .iter()
            .flat_map(|e| e.replaces.iter().map(String::as_str).chain(e.skips.iter().map(String::as_str)))
            .collect();
        let head = ch.entries.iter().find(|e| !incoming.contains(&e.name.as_str())).unwrap();
        out.push((ch.name.clone(), head.name.clone()));
    }
    out.sort();
    out
}

#[test]
fn add_corpus_packages_in_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    // etcd: replaces-mode (ci.yaml); edges from the CSVs. 0.6.1 alone is in `alpha` (its
    // annotations); 0.9.x are in singlenamespace-alpha / clusterwide-alpha, replacing 0.9.0.
    add_all("etcd", "replaces", dir.path());
    // dns-operator: semver-mode; the head of each channel is its highest version.
    add_all("dns-operator", "semver", dir.path());
    let (code, out, err) = capstan(&["catalog", "validate", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        heads(dir.path(), "etcd"),
        [
            ("alpha".to_string(), "etcdoperator.v0.6.1".to_string()),
            ("clusterwide-alpha".to_string(), "etcdoperator.v0.9.4-clusterwide".to_string()),
            ("singlenamespace-alpha".to_string(), "etcdoperator.v0.9.4".to_string()),
        ]
    );
    let cfg = parse::load_path(dir.path()).unwrap();
    let etcd = cfg.packages.iter().find(|p| p.name == "etcd").unwrap();
    assert_eq!(etcd.default_channel.as_deref(), Some("singlenamespace-alpha"));
    let dns_heads = heads(dir.path(), "dns-operator");
    let max = cfg
        .bundles
        .iter()
        .filter(|b| b.package == "dns-operator")
        .max_by(|a, b| {
            let v = |x: &capstan::catalog::model::Bundle| {
                let prop = x.properties.iter().find(|p| p.type_ == "olm.package").unwrap();
                let p: capstan::catalog::property::PackageProperty = prop.decode().unwrap();
                semver::Version::parse(&p.version).unwrap()
            };
            v(a).cmp_precedence(&v(b))
        })
        .unwrap()
        .name
        .clone();
    assert!(dns_heads.iter().any(|(_, h)| *h == max), "{dns_heads:?} vs {max}");
    // Re-adding a published bundle is refused, naming it; --force replaces it.
    let etcd094 = shared_dir().join("corpus/community-operators-prod/operators/etcd/0.9.4");
    let (code, _, err) =
        capstan(&["catalog", "add", dir.path().to_str().unwrap(), etcd094.to_str().unwrap(), "--image", "q.io/e:1"]);
    assert_eq!(code, 1);
    assert!(err.contains("already has bundle etcdoperator.v0.9.4") && err.contains("--force"), "{err}");
    let (code, out, err) = capstan(&[
        "catalog",
        "add",
        dir.path().to_str().unwrap(),
        etcd094.to_str().unwrap(),
        "--image",
        "q.io/e:1",
        "--force",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["replaced_existing"], true);
}
