//! The catalog that `catalog add` builds from the 13 corpus
//! packages validates, and each package's channel heads are what its `ci.yaml` update mode
//! implies.
//!
//! Update modes (`operators/<package>/ci.yaml`): `updateGraph: semver-mode` → semver mode;
//! `updateGraph: replaces-mode` or none → replaces mode; packages published from FBC catalog
//! templates (`fbc: enabled`, the two rabbitmq operators, whose CSVs carry no `replaces` after
//! 2.10.0 / 1.13.0) → semver mode, which reproduces their templates' version-ordered chains
//! (checked against the heads of their `catalogs/v4.20` catalogs below).
//!
//! kuadrant-operator cannot be added: every one of its CSVs lists a related image
//! `oci://quay.io/kuadrant/wasm-shim:…`, which is not an image pull spec; opm rejects it too
//! since operator-registry v1.64.0 (`validateImagePullSpec`, operator-registry#1905).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::support::shared_dir;
use capstan::bundle::render::render_bundle_dir;
use capstan::catalog::add::{AddError, AddInput, AddOptions, UpdateMode, add_bundle};
use capstan::catalog::model::DeclarativeConfig;
use capstan::catalog::property::PackageProperty;
use capstan::catalog::{parse, validate};

fn mode_of(ci_yaml: &str) -> UpdateMode {
    let has = |line: &str| ci_yaml.lines().any(|l| l.trim_end() == line);
    if has("updateGraph: semver-mode") || (!has("updateGraph: replaces-mode") && has("fbc:")) {
        UpdateMode::Semver
    } else {
        UpdateMode::Replaces
    }
}

/// The heads `catalog add` must produce: (package, channel) → head.
const EXPECTED_HEADS: &[(&str, &str, &str)] = &[
    ("authorino-operator", "alpha", "authorino-operator.v0.8.0"),
    ("authorino-operator", "stable", "authorino-operator.v0.16.0"),
    ("cert-manager", "candidate", "cert-manager.v1.16.5"),
    ("cert-manager", "stable", "cert-manager.v1.16.5"),
    ("dns-operator", "stable", "dns-operator.v0.6.0"),
    ("etcd", "alpha", "etcdoperator.v0.6.1"),
    ("etcd", "clusterwide-alpha", "etcdoperator.v0.9.4-clusterwide"),
    ("etcd", "singlenamespace-alpha", "etcdoperator.v0.9.4"),
    ("jaeger", "stable", "jaeger-operator.v1.65.0"),
    ("keda", "alpha", "keda.v2.7.1"),
    ("limitador-operator", "alpha", "limitador-operator.v0.5.0"),
    ("limitador-operator", "stable", "limitador-operator.v0.11.0"),
    ("node-healthcheck-operator", "alpha", "node-healthcheck-operator.v0.1.1"),
    ("node-healthcheck-operator", "candidate", "node-healthcheck-operator.v0.3.0"),
    ("node-healthcheck-operator", "stable", "node-healthcheck-operator.v0.12.0"),
    ("prometheus", "beta", "prometheusoperator.0.56.3"),
    ("rabbitmq-cluster-operator", "stable", "rabbitmq-cluster-operator.v2.22.3"),
    ("rabbitmq-messaging-topology-operator", "stable", "rabbitmq-messaging-topology-operator.v1.19.3"),
    ("self-node-remediation", "stable", "self-node-remediation.v0.13.0"),
];

fn heads(cfg: &DeclarativeConfig) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for ch in &cfg.channels {
        let incoming: Vec<&str> = ch
            .entries
            .iter()
            .flat_map(|e| e.replaces.iter().map(String::as_str).chain(e.skips.iter().map(String::as_str)))
            .collect();
        for e in ch.entries.iter().filter(|e| !incoming.contains(&e.name.as_str())) {
            out.insert((ch.package.clone(), ch.name.clone()), e.name.clone());
        }
    }
    out
}

fn version(cfg: &DeclarativeConfig, package: &str, bundle: &str) -> semver::Version {
    let b = cfg.bundles.iter().find(|b| b.package == package && b.name == bundle).unwrap();
    let p: PackageProperty = b.properties.iter().find(|p| p.type_ == "olm.package").unwrap().decode().unwrap();
    semver::Version::parse(&p.version).unwrap()
}

#[test]
fn catalog_add_builds_a_valid_catalog_from_the_13_corpus_packages() {
    let ops = shared_dir().join("corpus/community-operators-prod/operators");
    let mut packages: Vec<PathBuf> =
        std::fs::read_dir(&ops).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    packages.sort();
    assert_eq!(packages.len(), 13);
    let mut cfg = DeclarativeConfig::default();
    let mut modes = BTreeMap::new();
    let mut rejected: Vec<String> = Vec::new();
    for pkg_dir in &packages {
        let package = pkg_dir.file_name().unwrap().to_string_lossy().to_string();
        let mode = mode_of(&std::fs::read_to_string(pkg_dir.join("ci.yaml")).unwrap());
        modes.insert(package.clone(), mode);
        let mut bundles: Vec<(semver::Version, PathBuf)> = std::fs::read_dir(pkg_dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("manifests").is_dir())
            .filter_map(|p| Some((semver::Version::parse(p.file_name()?.to_str()?.split('-').next()?).ok()?, p)))
            .collect();
        bundles.sort();
        for (v, dir) in bundles {
            let image = format!("quay.io/community-operators/{package}-bundle:v{v}");
            let (blob, info) =
                render_bundle_dir(&dir, Some(&image)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let input = AddInput {
                bundle: blob,
                replaces: info.replaces,
                skips: info.skips,
                skip_range: info.skip_range,
                channels: info.channels,
                default_channel: info.default_channel,
            };
            let mut attempt = cfg.clone();
            match add_bundle(&mut attempt, input, &AddOptions { mode, ..Default::default() }) {
                Ok(_) => cfg = attempt,
                Err(AddError::Invalid { bundle, errors, .. }) if package == "kuadrant-operator" => {
                    let text = errors.to_string();
                    assert!(text.contains("invalid image pull spec \"oci://quay.io/kuadrant/wasm-shim"), "{text}");
                    rejected.push(bundle);
                }
                Err(e) => panic!("{}: {e}", dir.display()),
            }
        }
    }
    assert!(!rejected.is_empty() && cfg.packages.iter().all(|p| p.name != "kuadrant-operator"));
    validate::validate(&cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.packages.len(), 12);

    let got = heads(&cfg);
    let expected: BTreeMap<(String, String), String> =
        EXPECTED_HEADS.iter().map(|(p, c, h)| ((p.to_string(), c.to_string()), h.to_string())).collect();
    assert_eq!(got, expected);

    // Semver mode: every head is the highest version of its channel.
    for ch in &cfg.channels {
        if modes[&ch.package] == UpdateMode::Semver {
            let max = ch
                .entries
                .iter()
                .map(|e| version(&cfg, &ch.package, &e.name))
                .max_by(|a, b| a.cmp_precedence(b))
                .unwrap();
            assert_eq!(
                version(&cfg, &ch.package, &got[&(ch.package.clone(), ch.name.clone())]),
                max,
                "{}/{}",
                ch.package,
                ch.name
            );
        }
    }
    // The template-published packages end where their published v4.20 catalogs end.
    for p in ["rabbitmq-cluster-operator", "rabbitmq-messaging-topology-operator"] {
        let published =
            parse::load_path(&shared_dir().join("corpus/community-operators-prod/catalogs/v4.20").join(p)).unwrap();
        for ((pp, ch), head) in heads(&published) {
            assert_eq!(got.get(&(pp.clone(), ch.clone())), Some(&head), "{pp}/{ch}");
        }
    }
}
