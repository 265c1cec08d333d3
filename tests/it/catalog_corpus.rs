//! Every File-Based Catalog of the community-operators corpus (`catalogs/v4.20`) loads and
//! validates, and survives a write/read round trip.

use std::path::PathBuf;

use crate::support::shared_dir;
use capstan::catalog::{parse, validate};

/// Catalogs of the corpus that opm also rejects, with the reason both give. Empty: every
/// catalog in the corpus is valid for opm and for capstan.
const REJECTED_BY_OPM_TOO: &[(&str, &str)] = &[];

fn catalog_dirs() -> Vec<PathBuf> {
    let root = shared_dir().join("corpus/community-operators-prod/catalogs/v4.20");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_v4_20_catalog_loads_and_validates() {
    let dirs = catalog_dirs();
    assert!(dirs.len() >= 37, "expected the 37 corpus catalogs, found {}", dirs.len());
    let mut failures = Vec::new();
    let mut bundles = 0;
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let cfg = match parse::load_path(dir) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{name}: load: {e}"));
                continue;
            }
        };
        assert!(!cfg.packages.is_empty() && !cfg.bundles.is_empty(), "{name}: no package or bundles");
        bundles += cfg.bundles.len();
        let expected = REJECTED_BY_OPM_TOO.iter().find(|(n, _)| *n == name);
        match (validate::validate(&cfg), expected) {
            (Ok(()), None) => {}
            (Err(e), Some((_, reason))) if e.to_string().contains(reason) => {}
            (Err(e), _) => failures.push(format!("{name}: {e}")),
            (Ok(()), Some((_, reason))) => {
                failures.push(format!("{name}: expected rejection ({reason}) but it validated"))
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(bundles > 500, "only {bundles} bundles loaded");
}

#[test]
fn corpus_catalogs_round_trip_through_json_and_yaml() {
    for dir in catalog_dirs().iter().take(8) {
        let cfg = parse::load_path(dir).unwrap();
        let json = parse::to_json_stream(&cfg);
        let back = parse::parse_bytes("round-trip.json", json.as_bytes()).unwrap();
        assert_eq!(parse::to_json_stream(&back), json, "{}", dir.display());
        let yaml = parse::to_yaml_stream(&cfg);
        let back = parse::parse_bytes("round-trip.yaml", yaml.as_bytes()).unwrap();
        assert_eq!(parse::to_json_stream(&back), json, "{}", dir.display());
        let out = tempfile::tempdir().unwrap();
        parse::write_dir(&cfg, out.path()).unwrap();
        let reloaded = parse::load_path(out.path()).unwrap();
        assert_eq!(parse::to_json_stream(&reloaded), json);
        validate::validate(&reloaded).unwrap();
    }
}
