//! Whole resolver messages, as snapshots (insta), on catalogs built with `catalog add`'s library
//! from real community-operators-prod bundles in `tests/fixtures/community-operators-prod/`:
//! a channel head that cannot be installed says which newer bundles were
//! passed over and why; conflicts read one sentence per conflict naming both operators, the API
//! and what to do. `cargo insta review` (or `INSTA_UPDATE=always`) accepts a changed message.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capstan::bundle::render::render_bundle_dir;
use capstan::catalog::add::{AddInput, AddOptions, UpdateMode, add_bundle};
use capstan::catalog::model::DeclarativeConfig;
use capstan::resolve::{
    CatalogIndex, CatalogInput, CatalogSourceKey, ErrorKind, ResolveInput, SubscriptionRequest, resolve,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/community-operators-prod")
}

/// Adds bundle directories `package/version` of the fixtures, in order, as `capstan catalog add` does.
fn add(cfg: &mut DeclarativeConfig, mode: UpdateMode, dirs: &[&str]) {
    for d in dirs {
        let dir = fixtures().join(d);
        let (package, version) = d.split_once('/').unwrap();
        let image = format!("quay.io/community-operator-pipeline-prod/{package}:{version}");
        let (blob, info) = render_bundle_dir(&dir, Some(&image)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let input = AddInput {
            bundle: blob,
            replaces: info.replaces,
            skips: info.skips,
            skip_range: info.skip_range,
            channels: info.channels,
            default_channel: info.default_channel,
        };
        add_bundle(cfg, input, &AddOptions { mode, ..Default::default() }).unwrap_or_else(|e| panic!("{d}: {e}"));
    }
}

fn catalog(cfg: &DeclarativeConfig) -> CatalogInput {
    CatalogInput {
        key: CatalogSourceKey::new("olm", "community"),
        priority: 0,
        index: Arc::new(CatalogIndex::from_config(cfg)),
    }
}

fn sub(package: &str) -> SubscriptionRequest {
    SubscriptionRequest {
        name: package.into(),
        namespace: "operators".into(),
        package: package.into(),
        source: "community".into(),
        source_namespace: "olm".into(),
        ..Default::default()
    }
}

fn che() -> DeclarativeConfig {
    let mut cfg = DeclarativeConfig::default();
    add(&mut cfg, UpdateMode::Semver, &["eclipse-che/7.41.2", "eclipse-che/7.42.0", "eclipse-che/7.44.0"]);
    cfg
}

/// eclipse-che 7.42.0 and later need devworkspace-operator, which community-operators-prod lacks:
/// the Subscription gets 7.41.2, and its entry says which bundles were passed over and why.
#[test]
fn an_older_bundle_says_which_newer_ones_were_passed_over_and_why() {
    let out = resolve(&ResolveInput {
        catalogs: vec![catalog(&che())],
        installed: vec![],
        subscriptions: vec![sub("eclipse-che")],
    });
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let got = &out.resolved[0];
    assert_eq!(got.bundle, "eclipse-che.v7.41.2");
    let passed = got.passed_over.as_ref().expect("7.44.0 and 7.42.0 were passed over");
    assert_eq!(passed.bundles, ["eclipse-che.v7.44.0", "eclipse-che.v7.42.0"]);
    insta::assert_snapshot!("eclipse_che_passed_over", format!("{}; {passed}", got.reason));
}

/// Subscribing to the channel head only (startingCSV) fails with the same cause as data.
#[test]
fn a_head_whose_dependency_no_catalog_has_fails_with_cause_and_hint() {
    let mut s = sub("eclipse-che");
    s.starting_csv = Some("eclipse-che.v7.44.0".into());
    let out = resolve(&ResolveInput { catalogs: vec![catalog(&che())], installed: vec![], subscriptions: vec![s] });
    assert!(out.resolved.is_empty());
    let e = &out.errors[0];
    assert_eq!(e.kind, ErrorKind::Unsatisfiable);
    assert_eq!(e.explanation.hints.len(), 1, "{:?}", e.explanation);
    insta::assert_snapshot!("eclipse_che_head_unmet_dependency", e.message());
}
