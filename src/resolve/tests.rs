//! Unit tests of the resolver core.

use std::sync::Arc;

use super::*;
use crate::catalog::model::DeclarativeConfig;

/// Builds a catalog from a YAML list of FBC blobs (serde; tiny stand-in until `catalog::parse` lands).
fn dc(yaml: &str) -> DeclarativeConfig {
    let blobs: Vec<serde_json::Value> = serde_norway::from_str(yaml).expect("test YAML parses");
    let mut cfg = DeclarativeConfig::default();
    for b in blobs {
        match b["schema"].as_str() {
            Some("olm.package") => cfg.packages.push(serde_json::from_value(b).expect("package")),
            Some("olm.channel") => cfg.channels.push(serde_json::from_value(b).expect("channel")),
            Some("olm.bundle") => cfg.bundles.push(serde_json::from_value(b).expect("bundle")),
            _ => cfg.others.push(b),
        }
    }
    cfg
}

fn cat(ns: &str, name: &str, priority: i32, yaml: &str) -> CatalogInput {
    CatalogInput {
        key: CatalogSourceKey::new(ns, name),
        priority,
        index: Arc::new(CatalogIndex::from_config(&dc(yaml))),
    }
}

fn sub(package: &str, channel: Option<&str>, source: &str) -> SubscriptionRequest {
    SubscriptionRequest {
        name: package.into(),
        namespace: "operators".into(),
        package: package.into(),
        channel: channel.map(Into::into),
        source: source.into(),
        source_namespace: "olm".into(),
        ..Default::default()
    }
}

fn installed(name: &str) -> InstalledBundle {
    InstalledBundle { namespace: "operators".into(), name: name.into(), ..Default::default() }
}

/// A bundle blob line.
fn b(pkg: &str, version: &str, extra: &str) -> String {
    format!(
        "- {{schema: olm.bundle, name: {pkg}.v{version}, package: {pkg}, image: reg/{pkg}:{version}, properties: [{{type: olm.package, value: {{packageName: {pkg}, version: {version}}}}}{extra}]}}\n"
    )
}

/// A package with one channel `stable` that is a replaces chain over `versions` (oldest first).
fn chain(pkg: &str, versions: &[&str], extra: &dyn Fn(&str) -> String) -> String {
    let mut y = format!("- {{schema: olm.package, name: {pkg}, defaultChannel: stable}}\n");
    y.push_str(&format!("- schema: olm.channel\n  package: {pkg}\n  name: stable\n  entries:\n"));
    let mut prev: Option<&str> = None;
    for v in versions {
        match prev {
            Some(p) => y.push_str(&format!("    - {{name: {pkg}.v{v}, replaces: {pkg}.v{p}}}\n")),
            None => y.push_str(&format!("    - {{name: {pkg}.v{v}}}\n")),
        }
        prev = Some(v);
    }
    for v in versions {
        y.push_str(&b(pkg, v, &extra(v)));
    }
    y
}

fn none(_: &str) -> String {
    String::new()
}

fn bundles(out: &ResolveOutput) -> Vec<String> {
    out.resolved.iter().map(|r| r.bundle.clone()).collect()
}

#[test]
fn fresh_install_takes_the_channel_head() {
    let c = cat("olm", "cat", 0, &chain("foo", &["1.0.0", "1.1.0", "1.2.0"], &none));
    let out = resolve(&ResolveInput {
        catalogs: vec![c],
        installed: vec![],
        subscriptions: vec![sub("foo", Some("stable"), "cat")],
    });
    assert_eq!(bundles(&out), vec!["foo.v1.2.0"]);
    assert_eq!(out.resolved[0].reason, Reason::Requested);
    assert_eq!(out.resolved[0].channel.as_deref(), Some("stable"));
    assert!(out.errors.is_empty());
}

#[test]
fn upgrade_moves_one_edge_at_a_time() {
    let c = cat("olm", "cat", 0, &chain("foo", &["1.0.0", "1.1.0", "1.2.0"], &none));
    let out = resolve(&ResolveInput {
        catalogs: vec![c],
        installed: vec![installed("foo.v1.0.0")],
        subscriptions: vec![sub("foo", Some("stable"), "cat")],
    });
    assert_eq!(bundles(&out), vec!["foo.v1.1.0"]);
    assert_eq!(out.resolved[0].reason, Reason::Upgrade { from: "foo.v1.0.0".into() });
}

#[test]
fn version_range_pins_and_explains_unreachable_targets() {
    let c = cat("olm", "cat", 0, &chain("foo", &["1.0.0", "1.0.1", "1.0.2"], &none));
    let mut s = sub("foo", Some("stable"), "cat");
    s.version_range = Some("1.0.0".into());
    let out = resolve(&ResolveInput { catalogs: vec![c.clone()], installed: vec![], subscriptions: vec![s.clone()] });
    assert_eq!(bundles(&out), vec!["foo.v1.0.0"]);

    s.version_range = Some("1.0.2".into());
    let out = resolve(&ResolveInput {
        catalogs: vec![c.clone()],
        installed: vec![installed("foo.v1.0.0")],
        subscriptions: vec![s.clone()],
    });
    assert_eq!(out.errors.len(), 1, "{out:?}");
    let e = &out.errors[0];
    assert_eq!(e.kind, ErrorKind::Unreachable);
    assert!(e.message().contains("foo.v1.0.0 -> foo.v1.0.1 -> foo.v1.0.2"), "{}", e.message());

    s.version_range = Some(">=3".into());
    let out = resolve(&ResolveInput { catalogs: vec![c], installed: vec![], subscriptions: vec![s] });
    assert_eq!(out.errors[0].kind, ErrorKind::VersionRangeMatchesNothing);
    assert!(out.errors[0].message().contains("1.0.0, 1.0.1 and 1.0.2"), "{}", out.errors[0].message());
}

#[test]
fn package_dependency_is_pulled_at_the_required_version() {
    let mut y = chain("app", &["1.0.0"], &|_| {
        ", {type: olm.package.required, value: {packageName: lib, versionRange: '>=1.0.0 <2.0.0'}}".into()
    });
    y.push_str(&chain("lib", &["0.9.0", "1.0.0", "1.5.0", "2.0.0"], &none));
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "cat", 0, &y)],
        installed: vec![],
        subscriptions: vec![sub("app", None, "cat")],
    });
    assert_eq!(bundles(&out), vec!["app.v1.0.0", "lib.v1.5.0"]);
    assert!(matches!(&out.resolved[1].reason, Reason::Dependency { of, .. } if of == "app.v1.0.0"));
}

#[test]
fn missing_dependency_version_is_explained() {
    let mut y = chain("kuadrant-operator", &["0.11.1"], &|_| {
        ", {type: olm.package.required, value: {packageName: dns-operator, versionRange: '0.6.0'}}".into()
    });
    y.push_str(&chain("dns-operator", &["0.4.0", "0.5.0"], &none));
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "community", 0, &y)],
        installed: vec![],
        subscriptions: vec![sub("kuadrant-operator", Some("stable"), "community")],
    });
    assert!(out.resolved.is_empty());
    let m = &out.errors[0].message();
    assert!(m.contains("kuadrant-operator 0.11.1"), "{m}");
    assert!(m.contains("requires dns-operator 0.6.0"), "{m}");
    assert!(m.contains("catalog olm/community offers dns-operator 0.4.0 and 0.5.0 only"), "{m}");
}

#[test]
fn gvk_dependency_prefers_the_same_catalog_then_priority() {
    let app =
        chain("app", &["1.0.0"], &|_| ", {type: olm.gvk.required, value: {group: x.io, version: v1, kind: Db}}".into());
    let db =
        |p: &str| chain(p, &["1.0.0"], &|_| ", {type: olm.gvk, value: {group: x.io, version: v1, kind: Db}}".into());
    // Same catalog wins over a higher-priority one.
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "a", 0, &format!("{app}{}", db("db-a"))), cat("olm", "b", 10, &db("db-b"))],
        installed: vec![],
        subscriptions: vec![sub("app", None, "a")],
    });
    assert_eq!(bundles(&out), vec!["app.v1.0.0", "db-a.v1.0.0"]);
    // Otherwise the higher priority wins.
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "a", 0, &app), cat("olm", "b", 10, &db("db-b")), cat("olm", "c", 5, &db("db-c"))],
        installed: vec![],
        subscriptions: vec![sub("app", None, "a")],
    });
    assert_eq!(bundles(&out), vec!["app.v1.0.0", "db-b.v1.0.0"]);
    // An installed provider wins over everything.
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "a", 0, &app), cat("olm", "b", 10, &db("db-b")), cat("olm", "c", 5, &db("db-c"))],
        installed: vec![installed("db-c.v1.0.0")],
        subscriptions: vec![sub("app", None, "a")],
    });
    assert_eq!(bundles(&out), vec!["app.v1.0.0", "db-c.v1.0.0"]);
    assert!(matches!(&out.resolved[1].reason, Reason::Dependency { already_installed: true, .. }));
}

#[test]
fn one_provider_per_gvk_and_one_failing_subscription_fails_alone() {
    let gvk = ", {type: olm.gvk, value: {group: x.io, version: v1, kind: Shared}}";
    let mut y = chain("one", &["1.0.0"], &|_| gvk.into());
    y.push_str(&chain("two", &["1.0.0"], &|_| gvk.into()));
    y.push_str(&chain("three", &["1.0.0"], &none));
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "cat", 0, &y)],
        installed: vec![],
        subscriptions: vec![sub("one", None, "cat"), sub("two", None, "cat"), sub("three", None, "cat")],
    });
    assert_eq!(bundles(&out), vec!["one.v1.0.0", "three.v1.0.0"]);
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].subscription, "two");
    assert!(out.errors[0].message().contains("x.io/v1 Shared"), "{}", out.errors[0].message());
}

#[test]
fn missing_package_channel_and_catalog_have_their_own_messages() {
    let c = cat("olm", "cat", 0, &chain("foo", &["1.0.0"], &none));
    let mut missing_pkg = sub("bar", None, "cat");
    missing_pkg.name = "bar".into();
    let missing_ch = sub("foo", Some("fast"), "cat");
    let mut missing_cat = sub("foo", None, "nope");
    missing_cat.name = "foo2".into();
    let out = resolve(&ResolveInput {
        catalogs: vec![c],
        installed: vec![],
        subscriptions: vec![missing_pkg, missing_ch, missing_cat],
    });
    let kinds: Vec<ErrorKind> = out.errors.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![ErrorKind::MissingPackage, ErrorKind::MissingChannel, ErrorKind::MissingCatalog]);
    assert!(out.errors[1].message().contains("stable (default stable)"), "{}", out.errors[1].message());
    assert!(out.errors[2].message().contains("olm/cat"), "{}", out.errors[2].message());
}

#[test]
fn a_missing_package_names_a_near_name_or_an_empty_catalog() {
    let c = cat(
        "olm",
        "cat",
        0,
        &format!("{}{}", chain("foo-operator", &["1.0.0"], &none), chain("bar", &["1.0.0"], &none)),
    );
    let empty = cat("olm", "empty", 0, "[]");
    let typo = sub("foo-operatr", None, "cat");
    let far = sub("zzz", None, "cat");
    // "baz" is one edit from "bar" (near); "ab" two, too many for names this short.
    let short = sub("baz", None, "cat");
    let short_far = sub("ab", None, "cat");
    let from_empty = sub("foo-operator", None, "empty");
    let nowhere_empty = sub("qux", None, "empty");
    let out = resolve(&ResolveInput {
        catalogs: vec![c, empty],
        installed: vec![],
        subscriptions: vec![typo, far, short, short_far, from_empty, nowhere_empty],
    });
    let messages: Vec<String> = out.errors.iter().map(|e| e.message()).collect();
    assert_eq!(
        messages,
        [
            "package foo-operatr (spec.name) is not in catalog olm/cat; no visible catalog offers it; hint: did you mean package foo-operator? check the package name in spec.name",
            "package zzz (spec.name) is not in catalog olm/cat; no visible catalog offers it; hint: check the package name in spec.name",
            "package baz (spec.name) is not in catalog olm/cat; no visible catalog offers it; hint: did you mean package bar? check the package name in spec.name",
            "package ab (spec.name) is not in catalog olm/cat; no visible catalog offers it; hint: check the package name in spec.name",
            "package foo-operator (spec.name) is not in catalog olm/empty (the catalog has no packages at all); it is offered by olm/cat; hint: set spec.source/spec.sourceNamespace to that catalog",
            "package qux (spec.name) is not in catalog olm/empty: the catalog has no packages at all; hint: check that the CatalogSource points at the catalog meant (an empty FBC directory or image serves nothing)",
        ]
    );
}

#[test]
fn constraint_any_all_not_and_cel() {
    let cons = |v: &str| format!(", {{type: olm.constraint, value: {v}}}");
    let mut y = chain("app", &["1.0.0"], &|_| {
        cons(
            "{any: {constraints: [{package: {packageName: lib-a, versionRange: '>=9.0.0'}}, {all: {constraints: [{package: {packageName: lib-b, versionRange: '>=1.0.0'}}, {not: {constraints: [{package: {packageName: lib-b, versionRange: '1.2.0'}}]}}]}}]}}",
        )
    });
    y.push_str(&chain("lib-a", &["1.0.0"], &none));
    y.push_str(&chain("lib-b", &["1.1.0", "1.2.0"], &none));
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "cat", 0, &y)],
        installed: vec![],
        subscriptions: vec![sub("app", None, "cat")],
    });
    assert_eq!(bundles(&out), vec!["app.v1.0.0", "lib-b.v1.1.0"], "{out:?}");

    let y = chain("celapp", &["1.0.0"], &|_| cons("{cel: {rule: 'true'}}"));
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "cat", 0, &y)],
        installed: vec![],
        subscriptions: vec![sub("celapp", None, "cat")],
    });
    assert!(
        out.errors[0].message().contains("cel") && out.errors[0].message().contains("not supported yet"),
        "{}",
        out.errors[0].message()
    );
}

#[test]
fn installed_pre_release_outside_skip_range_is_explained() {
    let y = "- {schema: olm.package, name: ptp, defaultChannel: '4.3'}\n- {schema: olm.channel, package: ptp, name: '4.3', entries: [{name: ptp.v4.3.1, skipRange: '>=4.3.0 <4.3.1'}]}\n".to_string()
        + &b("ptp", "4.3.1", "");
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "cat", 0, &y)],
        installed: vec![installed("ptp.v4.3.0-201911201000")],
        subscriptions: vec![sub("ptp", Some("4.3"), "cat")],
    });
    assert_eq!(bundles(&out), vec!["ptp.v4.3.0-201911201000"]);
    let Reason::Installed { note: Some(n) } = &out.resolved[0].reason else { panic!("{out:?}") };
    assert!(n.contains("pre-release") && n.contains(">=4.3.0 <4.3.1") && n.contains("ptp.v4.3.1"), "{n}");
}

#[test]
fn split_csv_name_finds_the_version() {
    assert_eq!(
        split_csv_name("ptp.v4.3.0-201911201000").map(|(p, v)| (p, v.to_string())),
        Some(("ptp".into(), "4.3.0-201911201000".into()))
    );
    assert_eq!(split_csv_name("etcdoperator.v0.9.0").map(|(p, _)| p), Some("etcdoperator".into()));
    assert!(split_csv_name("no-version").is_none());
}

#[test]
fn blocked_upgrade_stays_and_says_why() {
    // foo 1.1.0 needs bar >=2, but bar 1.0.0 is installed without a Subscription and stays.
    let mut y = chain("foo", &["1.0.0", "1.1.0"], &|v| {
        if v == "1.1.0" {
            ", {type: olm.package.required, value: {packageName: bar, versionRange: '>=2.0.0'}}".into()
        } else {
            String::new()
        }
    });
    y.push_str(&chain("bar", &["1.0.0", "2.0.0"], &none));
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "cat", 0, &y)],
        installed: vec![installed("foo.v1.0.0"), installed("bar.v1.0.0")],
        subscriptions: vec![sub("foo", Some("stable"), "cat")],
    });
    assert!(out.errors.is_empty(), "{out:?}");
    assert_eq!(bundles(&out), vec!["foo.v1.0.0"]);
    let Reason::Installed { note: Some(n) } = &out.resolved[0].reason else { panic!("{out:?}") };
    assert!(n.contains("upgrade from foo.v1.0.0 to foo.v1.1.0 cannot be installed"), "{n}");
    assert!(n.contains("requires bar >=2.0.0") && n.contains("installed bar.v1.0.0"), "{n}");
}

#[test]
fn starting_csv_first_install_and_its_errors() {
    let y = "- {schema: olm.package, name: app, defaultChannel: stable}\n- schema: olm.channel\n  package: app\n  name: stable\n  entries:\n    - {name: app.v1.0.0}\n    - {name: app.v1.1.0, replaces: app.v1.0.0}\n    - {name: app.v1.1.1, replaces: app.v1.0.0, skips: [app.v1.1.0]}\n".to_string()
        + &b("app", "1.0.0", "")
        + &b("app", "1.1.0", "")
        + &b("app", "1.1.1", "");
    let c = cat("olm", "cat", 0, &y);
    let mut s = sub("app", Some("stable"), "cat");
    s.starting_csv = Some("app.v1.0.0".into());
    let out = resolve(&ResolveInput { catalogs: vec![c.clone()], installed: vec![], subscriptions: vec![s.clone()] });
    assert_eq!(bundles(&out), vec!["app.v1.0.0"]);
    // startingCSV only applies to a first install: with 1.0.0 installed the upgrade goes to 1.1.1.
    let out = resolve(&ResolveInput {
        catalogs: vec![c.clone()],
        installed: vec![installed("app.v1.0.0")],
        subscriptions: vec![s.clone()],
    });
    assert_eq!(bundles(&out), vec!["app.v1.1.1"]);
    // A startingCSV that another entry skips is installed all the same, as OLM v0.38.0 does
    // (`make compare-olm`, upgrade-skips), and the next resolution upgrades along `skips`.
    s.starting_csv = Some("app.v1.1.0".into());
    let out = resolve(&ResolveInput { catalogs: vec![c.clone()], installed: vec![], subscriptions: vec![s.clone()] });
    assert_eq!(bundles(&out), vec!["app.v1.1.0"], "{:?}", out.errors.iter().map(|e| e.message()).collect::<Vec<_>>());
    let out = resolve(&ResolveInput {
        catalogs: vec![c.clone()],
        installed: vec![installed("app.v1.1.0")],
        subscriptions: vec![s.clone()],
    });
    assert_eq!(bundles(&out), vec!["app.v1.1.1"]);
    s.starting_csv = Some("app.v9.9.9".into());
    let out = resolve(&ResolveInput { catalogs: vec![c], installed: vec![], subscriptions: vec![s] });
    assert_eq!(out.errors[0].kind, ErrorKind::StartingCsvNotInChannel);
    assert!(out.errors[0].message().contains("app.v9.9.9 is not in channel stable"), "{}", out.errors[0].message());
}

#[test]
fn no_channel_uses_the_default_and_a_bad_default_is_reported() {
    let mut y = "- {schema: olm.package, name: foo, defaultChannel: fast}\n- {schema: olm.channel, package: foo, name: stable, entries: [{name: foo.v1.0.0}]}\n- {schema: olm.channel, package: foo, name: fast, entries: [{name: foo.v1.0.0}, {name: foo.v2.0.0, replaces: foo.v1.0.0}]}\n".to_string();
    y.push_str(&b("foo", "1.0.0", ""));
    y.push_str(&b("foo", "2.0.0", ""));
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "cat", 0, &y)],
        installed: vec![],
        subscriptions: vec![sub("foo", None, "cat")],
    });
    assert_eq!(bundles(&out), vec!["foo.v2.0.0"]);
    assert_eq!(out.resolved[0].channel.as_deref(), Some("fast"));
    let bad = y.replace("defaultChannel: fast", "defaultChannel: stabel");
    let out = resolve(&ResolveInput {
        catalogs: vec![cat("olm", "cat", 0, &bad)],
        installed: vec![],
        subscriptions: vec![sub("foo", None, "cat")],
    });
    assert_eq!(out.errors[0].kind, ErrorKind::MissingDefaultChannel);
    assert!(
        out.errors[0].message().contains("defaultChannel \"stabel\" of package foo")
            && out.errors[0].message().contains("fast and stable"),
        "{}",
        out.errors[0].message()
    );
}

#[test]
fn index_from_a_catalogs_content_resolves_the_same() {
    let mut y = chain("app", &["1.0.0", "1.1.0"], &|_| {
        ", {type: olm.gvk.required, value: {group: x.io, version: v1, kind: Db}}".into()
    });
    y.push_str(&chain("db", &["1.0.0", "2.0.0"], &|_| {
        ", {type: olm.gvk, value: {group: x.io, version: v1, kind: Db}}".into()
    }));
    let cfg = dc(&y);
    let ci = crate::catalog::validated::ValidatedCatalog::new(cfg.clone()).expect("valid catalog");
    let a = CatalogIndex::from_config(&cfg);
    let b = CatalogIndex::from_validated(&ci);
    let run = |idx: CatalogIndex| {
        resolve(&ResolveInput {
            catalogs: vec![CatalogInput {
                key: CatalogSourceKey::new("olm", "cat"),
                priority: 0,
                index: Arc::new(idx),
            }],
            installed: vec![installed("app.v1.0.0")],
            subscriptions: vec![sub("app", None, "cat")],
        })
    };
    let (ra, rb) = (run(a), run(b));
    assert_eq!(ra, rb);
    assert_eq!(bundles(&ra), vec!["app.v1.1.0", "db.v2.0.0"]);
}

#[test]
fn an_invalid_catalog_serves_nothing() {
    let app = chain("app", &["1.0.0"], &|_| {
        ", {type: olm.package.required, value: {packageName: lib, versionRange: '>=1.0.0'}}".into()
    });
    let good = cat("olm", "good", 0, &app);
    let mut bad = cat("olm", "bad", 0, &chain("lib", &["1.0.0"], &none));
    bad.index = Arc::new((*bad.index).clone().with_invalid("package lib: broken"));
    let mut s = sub("lib", None, "bad");
    s.name = "lib".into();
    let out = resolve(&ResolveInput {
        catalogs: vec![good, bad],
        installed: vec![],
        subscriptions: vec![sub("app", None, "good"), s],
    });
    assert_eq!(out.errors.len(), 2, "{out:?}");
    assert!(
        out.errors[0].message().contains(
            "catalog olm/bad has package lib but the catalog is invalid, so it serves nothing: package lib: broken"
        ),
        "{}",
        out.errors[0].message()
    );
    assert_eq!(out.errors[1].kind, ErrorKind::InvalidCatalog);
}

#[test]
fn an_installed_dependency_whose_name_is_not_its_package_keeps_the_namespace_resolvable() {
    // strimzi's bundles are named strimzi-cluster-operator.v… in package strimzi-kafka-operator.
    let mut y = "- {schema: olm.package, name: strimzi-kafka-operator, defaultChannel: stable}\n".to_string();
    y.push_str("- {schema: olm.channel, package: strimzi-kafka-operator, name: stable, entries: [{name: strimzi-cluster-operator.v0.45.0}]}\n");
    y.push_str("- {schema: olm.bundle, name: strimzi-cluster-operator.v0.45.0, package: strimzi-kafka-operator, image: reg/strimzi:0.45.0, properties: [{type: olm.package, value: {packageName: strimzi-kafka-operator, version: 0.45.0}}, {type: olm.gvk, value: {group: kafka.strimzi.io, kind: Kafka, version: v1beta2}}]}\n");
    y.push_str(&chain("other", &["1.0.0"], &none));
    let c = cat("olm", "cat", 0, &y);
    // As the controller sees it: the CSV with its properties annotation and spec.version.
    let props = r#"{"properties":[{"type":"olm.package","value":{"packageName":"strimzi-kafka-operator","version":"0.45.0"}}]}"#;
    let from_cluster =
        InstalledBundle::from_csv("operators", "strimzi-cluster-operator.v0.45.0", Some(props), Some("0.45.0"));
    assert_eq!(from_cluster.package.as_deref(), Some("strimzi-kafka-operator"));
    // As `capstan resolve --installed` sees it: only the name.
    let from_name = InstalledBundle::from_csv("operators", "strimzi-cluster-operator.v0.45.0", None, None);
    assert_eq!(from_name.package, None, "the package is left to the catalog, not guessed from the name");
    for ib in [from_cluster, from_name] {
        let out = resolve(&ResolveInput {
            catalogs: vec![c.clone()],
            installed: vec![ib],
            subscriptions: vec![sub("strimzi-kafka-operator", None, "cat"), sub("other", None, "cat")],
        });
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert!(bundles(&out).contains(&"other.v1.0.0".to_string()), "{:?}", bundles(&out));
    }
    // The package guessed from the name (what the controller did before) breaks the namespace.
    let guessed = InstalledBundle {
        package: Some("strimzi-cluster-operator".into()),
        ..installed("strimzi-cluster-operator.v0.45.0")
    };
    let out = resolve(&ResolveInput {
        catalogs: vec![c],
        installed: vec![guessed],
        subscriptions: vec![sub("strimzi-kafka-operator", None, "cat"), sub("other", None, "cat")],
    });
    assert!(!out.errors.is_empty(), "the wrong package should conflict: {:?}", bundles(&out));
}

#[test]
fn resolved_bundles_carry_their_lookup_properties() {
    // What the controller writes into the InstallPlan's bundle lookup comes from the resolver.
    let provides = |_: &str| {
        ", {type: olm.gvk, value: {group: example.com, version: v1, kind: Foo}}, {type: olm.package.required, value: {packageName: bar, versionRange: '>=1.0.0'}}".to_string()
    };
    let mut y = chain("foo", &["1.0.0"], &provides);
    y.push_str(&chain("bar", &["1.0.0"], &none));
    let c = cat("olm", "cat", 0, &y);
    let out = resolve(&ResolveInput {
        catalogs: vec![c],
        installed: vec![],
        subscriptions: vec![sub("foo", Some("stable"), "cat")],
    });
    let foo = out.resolved.iter().find(|r| r.bundle == "foo.v1.0.0").expect("foo resolved");
    let types: Vec<&str> = foo.properties.iter().filter_map(|p| p["type"].as_str()).collect();
    assert_eq!(types, ["olm.package", "olm.gvk", "olm.package.required"]);
    assert_eq!(foo.properties[0]["value"], serde_json::json!({"packageName": "foo", "version": "1.0.0"}));
    assert_eq!(foo.properties[1]["value"], serde_json::json!({"group": "example.com", "version": "v1", "kind": "Foo"}));
    assert_eq!(foo.properties[2]["value"], serde_json::json!({"packageName": "bar", "versionRange": ">=1.0.0"}));
    // A bundle in no catalog: only what its name says.
    assert_eq!(
        index::lookup_properties("x", &semver::Version::new(1, 2, 3), None),
        vec![serde_json::json!({"type": "olm.package", "value": {"packageName": "x", "version": "1.2.3"}})]
    );
}

/// A bundle name is unique only within its package (opm accepts `shared.v1.0.0` in two packages):
/// each package's channel finds its own bundle, and an installed CSV whose package is known is
/// matched with that package's bundle.
#[test]
fn same_bundle_name_in_two_packages_stays_apart() {
    let pkg = |p: &str, image: &str| {
        format!(
            "- {{schema: olm.package, name: {p}, defaultChannel: stable}}\n- {{schema: olm.channel, package: {p}, name: stable, entries: [{{name: shared.v1.0.0}}]}}\n- {{schema: olm.bundle, name: shared.v1.0.0, package: {p}, image: {image}, properties: [{{type: olm.package, value: {{packageName: {p}, version: 1.0.0}}}}]}}\n"
        )
    };
    let y = pkg("alpha", "reg/alpha:1") + &pkg("beta", "reg/beta:1");
    let c = cat("olm", "cat", 0, &y);
    assert!(c.index.problems().is_empty(), "{:?}", c.index.problems());
    let out = resolve(&ResolveInput {
        catalogs: vec![c.clone()],
        installed: vec![],
        subscriptions: vec![sub("beta", None, "cat")],
    });
    assert!(out.errors.is_empty(), "{out:?}");
    assert_eq!((out.resolved[0].package.as_str(), out.resolved[0].image.as_str()), ("beta", "reg/beta:1"));

    let mut inst = installed("shared.v1.0.0");
    inst.package = Some("beta".into());
    let out = resolve(&ResolveInput {
        catalogs: vec![c],
        installed: vec![inst],
        subscriptions: vec![sub("beta", None, "cat")],
    });
    assert!(out.errors.is_empty(), "{out:?}");
    assert!(matches!(out.resolved[0].reason, Reason::Installed { .. }), "{out:?}");
    assert_eq!(out.resolved[0].image, "reg/beta:1");
}
