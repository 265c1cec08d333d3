//! Resolution on the real corpus (`../shared/corpus/community-operators-prod/operators`): every
//! bundle directory is rendered by capstan (`bundle::render::render_bundle_dir`), channels are
//! built from the bundles' channel annotations and upgrade edges the way each package's `ci.yaml`
//! says (`semver-mode` orders a channel by version; otherwise `replaces-mode` keeps the CSV's
//! `replaces`, `skips` and `olm.skipRange`) — or, for packages published from an FBC template
//! (`catalog-templates/v4.20.yaml`, the rabbitmq operators), taken from that template's
//! `olm.package` and `olm.channel` blobs — and the resolver core runs on the result.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::support::shared_dir;
use capstan::bundle::render::{RenderInfo, render_bundle_dir};
use capstan::catalog::model::{Bundle as CatalogBundle, Channel, ChannelEntry, DeclarativeConfig, Package};
use capstan::resolve::{
    CatalogIndex, CatalogInput, CatalogSourceKey, InstalledBundle, Reason, ResolveInput, ResolveOutput,
    SubscriptionRequest, resolve,
};
use semver::Version;

const PACKAGES: [&str; 9] = [
    "kuadrant-operator",
    "authorino-operator",
    "limitador-operator",
    "dns-operator",
    "rabbitmq-cluster-operator",
    "rabbitmq-messaging-topology-operator",
    "node-healthcheck-operator",
    "self-node-remediation",
    "etcd",
];

/// Renders the packages and builds their channels.
fn corpus_catalog() -> &'static CatalogIndex {
    static INDEX: OnceLock<CatalogIndex> = OnceLock::new();
    INDEX.get_or_init(|| {
        let root = shared_dir().join("corpus/community-operators-prod/operators");
        let mut cfg = DeclarativeConfig::default();
        for pkg in PACKAGES {
            let dir = root.join(pkg);
            let rendered = render_package(&dir);
            let template = dir.join("catalog-templates/v4.20.yaml");
            if template.exists() {
                add_template_package(&mut cfg, &template);
            } else {
                let ci = std::fs::read_to_string(dir.join("ci.yaml")).unwrap_or_default();
                let semver_mode = ci.lines().any(|l| l.trim() == "updateGraph: semver-mode");
                cfg.channels.extend(channels_of(pkg, &rendered, semver_mode));
                cfg.packages.push(package_of(pkg, &rendered));
            }
            cfg.bundles.extend(rendered.into_iter().map(|(b, _)| b));
        }
        CatalogIndex::from_config(&cfg)
    })
}

/// Every bundle directory of package directory `dir`, rendered, in name order.
fn render_package(dir: &Path) -> Vec<(CatalogBundle, RenderInfo)> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("manifests").is_dir())
        .collect();
    versions.sort();
    versions
        .iter()
        .map(|v| render_bundle_dir(v, None).unwrap_or_else(|e| panic!("rendering {}: {e}", v.display())))
        .collect()
}

/// The `olm.package` and `olm.channel` blobs of an FBC template.
fn add_template_package(cfg: &mut DeclarativeConfig, template: &Path) {
    let text = std::fs::read_to_string(template).expect("template");
    let t: serde_json::Value = serde_norway::from_str(&text).expect("template YAML");
    for blob in t["entries"].as_array().into_iter().flatten() {
        match blob["schema"].as_str() {
            Some("olm.package") => cfg.packages.push(serde_json::from_value(blob.clone()).expect("package blob")),
            Some("olm.channel") => cfg.channels.push(serde_json::from_value(blob.clone()).expect("channel blob")),
            _ => {}
        }
    }
}

/// The channels of package `pkg` from its bundles' channel annotations: ordered by version in
/// `semver_mode` (each entry replacing the one before), else with the CSVs' own `replaces`.
fn channels_of(pkg: &str, rendered: &[(CatalogBundle, RenderInfo)], semver_mode: bool) -> Vec<Channel> {
    let mut channels: BTreeMap<String, Vec<(Version, ChannelEntry)>> = BTreeMap::new();
    for (_, info) in rendered {
        let version =
            Version::parse(&info.version).unwrap_or_else(|e| panic!("{}: version {}: {e}", info.name, info.version));
        for ch in &info.channels {
            channels.entry(ch.clone()).or_default().push((
                version.clone(),
                ChannelEntry {
                    name: info.name.clone(),
                    replaces: if semver_mode { None } else { info.replaces.clone() },
                    skips: info.skips.clone(),
                    skip_range: info.skip_range.clone(),
                    ..Default::default()
                },
            ));
        }
    }
    let mut out = Vec::new();
    for (name, mut entries) in channels {
        if semver_mode {
            entries.sort_by(|a, b| a.0.cmp_precedence(&b.0));
            for i in 1..entries.len() {
                let prev = entries[i - 1].1.name.clone();
                entries[i].1.replaces = Some(prev);
            }
        }
        out.push(Channel {
            schema: "olm.channel".into(),
            package: pkg.into(),
            name,
            entries: entries.into_iter().map(|(_, e)| e).collect(),
            ..Default::default()
        });
    }
    out
}

/// The `olm.package` of package `pkg`: the default channel of its newest bundle.
fn package_of(pkg: &str, rendered: &[(CatalogBundle, RenderInfo)]) -> Package {
    let newest = rendered
        .iter()
        .max_by(|a, b| Version::parse(&a.1.version).ok().cmp(&Version::parse(&b.1.version).ok()))
        .map(|(_, i)| i.clone())
        .expect("package has bundles");
    let default_channel = newest.default_channel.clone().or_else(|| newest.channels.first().cloned());
    Package { schema: "olm.package".into(), name: pkg.into(), default_channel, ..Default::default() }
}

fn run(package: &str, channel: Option<&str>, version_range: Option<&str>, installed: &[&str]) -> ResolveOutput {
    let index = corpus_catalog().clone();
    resolve(&ResolveInput {
        catalogs: vec![CatalogInput {
            key: CatalogSourceKey::new("olm", "community"),
            priority: 0,
            index: Arc::new(index),
        }],
        installed: installed
            .iter()
            .map(|n| InstalledBundle { namespace: "operators".into(), name: n.to_string(), ..Default::default() })
            .collect(),
        subscriptions: vec![SubscriptionRequest {
            name: package.into(),
            namespace: "operators".into(),
            package: package.into(),
            channel: channel.map(Into::into),
            source: "community".into(),
            source_namespace: "olm".into(),
            version_range: version_range.map(Into::into),
            ..Default::default()
        }],
    })
}

fn version_of(out: &ResolveOutput, package: &str) -> Option<String> {
    out.resolved.iter().find(|r| r.package == package).map(|r| r.version.to_string())
}

/// The `olm.package` dependencies of a bundle directory's `metadata/dependencies.yaml`.
fn dependencies_yaml(package: &str, version: &str) -> Vec<(String, String)> {
    let path = shared_dir()
        .join(format!("corpus/community-operators-prod/operators/{package}/{version}/metadata/dependencies.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_norway::from_str(&text).expect("dependencies.yaml");
    v["dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["type"] == "olm.package")
        .map(|d| {
            (
                d["value"]["packageName"].as_str().unwrap_or_default().to_string(),
                d["value"]["version"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn kuadrant_brings_its_three_dependencies_at_the_named_versions() {
    let out = run("kuadrant-operator", Some("stable"), None, &[]);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let kuadrant = version_of(&out, "kuadrant-operator").expect("kuadrant resolved");
    assert_eq!(kuadrant, "0.11.1", "the head of stable");
    let deps = dependencies_yaml("kuadrant-operator", &kuadrant);
    assert_eq!(deps.len(), 3);
    for (pkg, version) in deps {
        assert_eq!(version_of(&out, &pkg).as_deref(), Some(version.as_str()), "{pkg}: {out:?}");
        let entry = out.resolved.iter().find(|r| r.package == pkg).expect("entry");
        assert!(
            matches!(&entry.reason, Reason::Dependency { of, requirement, .. } if of == "kuadrant-operator.v0.11.1" && requirement.contains(&pkg)),
            "{:?}",
            entry.reason
        );
    }
    assert_eq!(out.resolved.len(), 4);
}

#[test]
fn kuadrant_dependency_pinned_by_an_installed_bundle_is_explained() {
    // dns-operator 0.2.0 is installed without a Subscription, so it stays; kuadrant 0.11.1 needs 0.6.0.
    let out = run("kuadrant-operator", Some("stable"), Some("0.11.1"), &["dns-operator.v0.2.0"]);
    assert_eq!(out.errors.len(), 1, "{out:?}");
    let m = &out.errors[0].message();
    for fact in ["kuadrant-operator 0.11.1", "requires dns-operator 0.6.0", "installed dns-operator.v0.2.0", "stays"] {
        assert!(m.contains(fact), "missing {fact:?}: {m}");
    }
}

#[test]
fn rabbitmq_topology_brings_the_cluster_operator_by_package_and_gvk() {
    let out = run("rabbitmq-messaging-topology-operator", None, None, &[]);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let topo = out.resolved.iter().find(|r| r.package == "rabbitmq-messaging-topology-operator").expect("topology");
    let deps = dependencies_yaml("rabbitmq-messaging-topology-operator", &topo.version.to_string());
    assert!(deps.iter().any(|(p, _)| p == "rabbitmq-cluster-operator"), "{deps:?}");
    let cluster =
        out.resolved.iter().find(|r| r.package == "rabbitmq-cluster-operator").expect("cluster operator resolved");
    let Reason::Dependency { of, requirement, .. } = &cluster.reason else { panic!("{:?}", cluster.reason) };
    assert_eq!(of, &topo.bundle);
    // Both requirements lead to the same bundle.
    assert!(requirement.contains("rabbitmq-cluster-operator >2.0.0"), "{requirement}");
    assert!(requirement.contains("rabbitmq.com/v1beta1 RabbitmqCluster"), "{requirement}");
}

#[test]
fn node_healthcheck_brings_self_node_remediation_by_gvk() {
    // 0.3.0–0.8.0 require the SelfNodeRemediation API (metadata/dependencies.yaml, olm.gvk).
    let out = run("node-healthcheck-operator", Some("stable"), Some("0.8.0"), &[]);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    assert_eq!(version_of(&out, "node-healthcheck-operator").as_deref(), Some("0.8.0"));
    let snr =
        out.resolved.iter().find(|r| r.package == "self-node-remediation").expect("self-node-remediation resolved");
    let Reason::Dependency { of, requirement, .. } = &snr.reason else { panic!("{:?}", snr.reason) };
    assert_eq!(of, "node-healthcheck-operator.v0.8.0");
    assert!(requirement.contains("self-node-remediation.medik8s.io/v1alpha1 SelfNodeRemediation"), "{requirement}");
    // The newest provider in the default channel.
    let newest = corpus_catalog()
        .package("self-node-remediation")
        .and_then(|(_, p)| {
            p.bundles.iter().map(|&b| corpus_catalog().bundle(b).version.clone()).max_by(|a, b| a.cmp_precedence(b))
        })
        .expect("versions");
    assert_eq!(snr.version, newest);
}

#[test]
fn etcd_upgrades_from_0_9_0_one_edge_at_a_time() {
    let mut installed = "etcdoperator.v0.9.0".to_string();
    let mut path = vec![installed.clone()];
    for _ in 0..5 {
        let out = run("etcd", Some("singlenamespace-alpha"), None, &[&installed]);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        let r = &out.resolved[0];
        match &r.reason {
            Reason::Upgrade { from } => {
                assert_eq!(from, &installed);
                installed = r.bundle.clone();
                path.push(installed.clone());
            }
            Reason::Installed { note } => {
                assert!(
                    note.as_deref().unwrap_or_default().contains("head of channel singlenamespace-alpha"),
                    "{note:?}"
                );
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(path, vec!["etcdoperator.v0.9.0", "etcdoperator.v0.9.2", "etcdoperator.v0.9.4"]);
}

#[test]
fn corpus_channels_order_without_problems() {
    let idx = corpus_catalog();
    for p in idx.packages() {
        for c in &p.channels {
            assert!(c.order.is_ok(), "{} / {}: {:?}", p.name, c.name, c.order);
        }
    }
}
