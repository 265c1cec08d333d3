//! `install::crd_safety` over every CRD of the community-operators-prod corpus (no cluster):
//! every real v1 schema translates into a validator, every CRD upgrades to itself, the bundle's own
//! `alm-examples` are validated against it, and every upgrade between consecutive bundles of a
//! package is checked the way an InstallPlan would be. Findings in the real data (examples that
//! do not validate, upgrades OLM would refuse) are printed, not hidden.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use crate::support::shared_dir;
use capstan::bundle::Bundle;
use capstan::install::crd_safety::{CrdUpgradeCheck, CrdUpgradeError};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionStatus,
};
use serde_json::Value;

/// Bundles per package directory, in CSV `spec.version` order (loaded once per test binary).
fn corpus_packages() -> &'static BTreeMap<String, Vec<Bundle>> {
    static PACKAGES: OnceLock<BTreeMap<String, Vec<Bundle>>> = OnceLock::new();
    PACKAGES.get_or_init(load_packages)
}

fn load_packages() -> BTreeMap<String, Vec<Bundle>> {
    let root = shared_dir().join("corpus/community-operators-prod/operators");
    let mut out = BTreeMap::new();
    for pkg in std::fs::read_dir(&root).expect("corpus operators/ directory").flatten() {
        let mut bundles = Vec::new();
        for ver in std::fs::read_dir(pkg.path()).into_iter().flatten().flatten() {
            for dir in [ver.path(), ver.path().join("bundle")] {
                if dir.join("manifests").is_dir() && dir.join("metadata").is_dir() {
                    bundles.push(Bundle::load(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())));
                }
            }
        }
        let version = |b: &Bundle| {
            b.csv()
                .value()
                .pointer("/spec/version")
                .and_then(Value::as_str)
                .and_then(|v| semver::Version::parse(v).ok())
        };
        bundles.sort_by(|a, b| version(a).cmp(&version(b)).then_with(|| a.name().cmp(b.name())));
        out.insert(pkg.file_name().to_string_lossy().into_owned(), bundles);
    }
    out
}

/// The bundle's v1 CRDs, typed; v1beta1 ones are counted in `skipped`.
fn v1_crds(b: &Bundle, skipped: &mut usize) -> Vec<CustomResourceDefinition> {
    b.crds()
        .filter_map(|m| {
            if m.api_version() != "apiextensions.k8s.io/v1" {
                *skipped += 1;
                return None;
            }
            Some(
                serde_json::from_value(m.value.clone())
                    .unwrap_or_else(|e| panic!("{}: {}: {e}", b.dir.display(), m.location())),
            )
        })
        .collect()
}

/// The CRD as it would be on the cluster: `status.storedVersions` = its storage version.
fn as_installed(crd: &CustomResourceDefinition) -> CustomResourceDefinition {
    let mut c = crd.clone();
    let storage: Vec<String> = c.spec.versions.iter().filter(|v| v.storage).map(|v| v.name.clone()).collect();
    c.status = Some(CustomResourceDefinitionStatus { stored_versions: Some(storage), ..Default::default() });
    c
}

/// The CSV's `alm-examples` annotation, parsed; empty when absent or not JSON.
fn alm_examples(b: &Bundle) -> Vec<Value> {
    b.csv()
        .value()
        .pointer("/metadata/annotations/alm-examples")
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str::<Vec<Value>>(s).ok())
        .unwrap_or_default()
}

#[test]
fn every_corpus_crd_compiles_upgrades_to_itself_and_checks_its_examples() {
    let packages = corpus_packages();
    let (mut crds, mut v1beta1, mut examples, mut failing) = (0usize, 0usize, 0usize, 0usize);
    let mut broken = Vec::new();
    let mut invalid_examples = Vec::new();
    for bundles in packages.values() {
        for b in bundles {
            let found = alm_examples(b);
            for crd in v1_crds(b, &mut v1beta1) {
                crds += 1;
                let mut check = CrdUpgradeCheck::new(Some(&as_installed(&crd)), &crd);
                for ex in &found {
                    let api_version = ex.get("apiVersion").and_then(Value::as_str).unwrap_or("");
                    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                    if group == crd.spec.group && ex.get("kind").and_then(Value::as_str) == Some(&crd.spec.names.kind) {
                        examples += 1;
                        check.add_object(version, ex);
                    }
                }
                for e in check.finish().errors {
                    match e {
                        CrdUpgradeError::InvalidObjects { total, .. } => {
                            failing += total;
                            invalid_examples.push(format!("{}: {e}", b.name()));
                        }
                        other => broken.push(format!("{}: {other}", b.dir.display())),
                    }
                }
            }
        }
    }
    eprintln!(
        "{crds} v1 CRDs checked ({v1beta1} v1beta1 skipped); {examples} alm-examples validated, {failing} do not \
         validate ({} CRDs):\n{}",
        invalid_examples.len(),
        invalid_examples.join("\n")
    );
    assert!(crds >= 500, "expected the corpus's v1 CRDs, found {crds}");
    assert!(examples >= 300, "expected the corpus's alm-examples, found {examples}");
    // Every real schema must compile and every CRD must be a valid upgrade of itself: otherwise
    // capstan would refuse upgrades that OLM lets through.
    assert!(broken.is_empty(), "{} CRDs refused against themselves:\n{}", broken.len(), broken.join("\n"));
    // Real examples are often partial (required fields left out), but a wrong translation (types,
    // nullable, int-or-string, patterns) would make most of them fail.
    assert!(failing * 2 <= examples, "too many examples fail: {failing} of {examples}");
}

#[test]
fn consecutive_corpus_bundles_are_checked_like_install_plans() {
    let packages = corpus_packages();
    let (mut pairs, mut skipped) = (0usize, 0usize);
    let mut refused = Vec::new();
    let mut broken = Vec::new();
    for bundles in packages.values() {
        for w in bundles.windows(2) {
            let old: BTreeMap<String, CustomResourceDefinition> = v1_crds(&w[0], &mut skipped)
                .into_iter()
                .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
                .collect();
            for new in v1_crds(&w[1], &mut skipped) {
                let Some(existing) = old.get(new.metadata.name.as_deref().unwrap_or_default()) else { continue };
                pairs += 1;
                let outcome = CrdUpgradeCheck::new(Some(&as_installed(existing)), &new).finish();
                for e in outcome.errors {
                    match &e {
                        CrdUpgradeError::StoredVersionRemoved { version, kept_versions, .. } => {
                            // Refused only when the version is really gone from the new CRD.
                            assert!(!kept_versions.contains(version), "{e}");
                            refused.push(format!("{} → {}: {e}", w[0].name(), w[1].name()));
                        }
                        _ => broken.push(format!("{} → {}: {e}", w[0].name(), w[1].name())),
                    }
                }
            }
        }
    }
    eprintln!("{pairs} CRD upgrades checked; {} refused for stored versions:\n{}", refused.len(), refused.join("\n"));
    assert!(pairs >= 100, "expected the corpus's CRD upgrades, found {pairs}");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The project's own example bundles (`bundles/`): each upgrade along a package's versions keeps
/// the stored versions and accepts the previous version's `alm-examples` as existing objects.
#[test]
fn the_example_bundles_upgrade_cleanly_with_their_examples_as_existing_objects() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles");
    let mut checked = 0;
    for pkg in std::fs::read_dir(&root).expect("bundles/").flatten().filter(|e| e.path().is_dir()) {
        let mut bundles: Vec<Bundle> = std::fs::read_dir(pkg.path())
            .expect("package dir")
            .flatten()
            .filter(|e| e.path().join("manifests").is_dir())
            .map(|e| Bundle::load(&e.path()).unwrap_or_else(|err| panic!("{}: {err}", e.path().display())))
            .collect();
        bundles.sort_by_key(|b| {
            b.csv()
                .value()
                .pointer("/spec/version")
                .and_then(Value::as_str)
                .and_then(|v| semver::Version::parse(v).ok())
        });
        let mut skipped = 0;
        for w in bundles.windows(2) {
            let examples = alm_examples(&w[0]);
            for new in v1_crds(&w[1], &mut skipped) {
                let Some(old) = v1_crds(&w[0], &mut skipped).into_iter().find(|c| c.metadata.name == new.metadata.name)
                else {
                    continue;
                };
                let mut check = CrdUpgradeCheck::new(Some(&as_installed(&old)), &new);
                for ex in &examples {
                    let api_version = ex.get("apiVersion").and_then(Value::as_str).unwrap_or("");
                    if let Some((group, version)) = api_version.rsplit_once('/')
                        && group == new.spec.group
                    {
                        check.add_object(version, ex);
                        checked += 1;
                    }
                }
                let outcome = check.finish();
                assert!(outcome.errors.is_empty(), "{} → {}: {:#?}", w[0].name(), w[1].name(), outcome.errors);
            }
        }
    }
    assert!(checked >= 2, "expected examples of the kaiwudb-operator and nginx-operator upgrades, checked {checked}");
}
