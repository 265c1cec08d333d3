//! Property tests of the resolver core on generated catalogs:
//! - every plan satisfies every constraint (dependencies, one bundle per package, one provider per
//!   API), for one and for several Subscriptions in a namespace;
//! - a failure names at least one unsatisfiable requirement, and a lone Subscription fails only
//!   when no valid plan exists (checked by brute force over the small catalog);
//! - several Subscriptions resolve as if added one at a time, in order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use capstan::catalog::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};
use capstan::catalog::property::{self, Gvk, PackageProperty, PackageRequired};
use capstan::resolve::{
    CatalogIndex, CatalogInput, CatalogSourceKey, ErrorKind, InstalledBundle, Reason, ResolveInput, ResolveOutput,
    SubscriptionRequest, resolve,
};
use proptest::prelude::*;
use semver::Version;

#[derive(Debug, Clone)]
enum Dep {
    /// Package (index mod N) with versions from `lo` (inclusive) to `hi` (exclusive), as minor numbers.
    Pkg(usize, u8, u8),
    /// API from the pool.
    Gvk(u8),
}

#[derive(Debug, Clone)]
struct BundleSpec {
    provides: Vec<u8>,
    deps: Vec<Dep>,
}

type CatalogSpec = Vec<Vec<BundleSpec>>;

const GVK_POOL: u8 = 4;

fn gvk(i: u8) -> Gvk {
    Gvk { group: "x.io".into(), version: "v1".into(), kind: format!("K{i}") }
}

fn version(minor: usize) -> Version {
    Version::new(1, minor as u64, 0)
}

fn catalog_spec() -> impl Strategy<Value = CatalogSpec> {
    let dep = prop_oneof![
        (0usize..5, 0u8..3, 1u8..4).prop_map(|(p, lo, hi)| Dep::Pkg(p, lo, hi.max(lo + 1))),
        (0u8..GVK_POOL).prop_map(Dep::Gvk),
    ];
    let bundle = (prop::collection::vec(0u8..(GVK_POOL + 3), 0..2), prop::collection::vec(dep, 0..3))
        .prop_map(|(p, deps)| BundleSpec { provides: p.into_iter().filter(|g| *g < GVK_POOL).collect(), deps });
    prop::collection::vec(prop::collection::vec(bundle, 1..=3), 2..=5)
}

fn pkg_name(i: usize) -> String {
    format!("p{i}")
}

fn build(spec: &CatalogSpec) -> DeclarativeConfig {
    let n = spec.len();
    let mut cfg = DeclarativeConfig::default();
    for (pi, bundles) in spec.iter().enumerate() {
        let pkg = pkg_name(pi);
        cfg.packages.push(Package {
            schema: "olm.package".into(),
            name: pkg.clone(),
            default_channel: Some("stable".into()),
            ..Default::default()
        });
        let mut entries = Vec::new();
        for (bi, b) in bundles.iter().enumerate() {
            let name = format!("{pkg}.v{}", version(bi));
            entries.push(ChannelEntry {
                name: name.clone(),
                replaces: (bi > 0).then(|| format!("{pkg}.v{}", version(bi - 1))),
                ..Default::default()
            });
            let mut props = vec![Property::new(
                property::PACKAGE,
                &PackageProperty { package_name: pkg.clone(), version: version(bi).to_string(), release: None },
            )];
            for g in &b.provides {
                props.push(Property::new(property::GVK, &gvk(*g)));
            }
            for d in &b.deps {
                match d {
                    Dep::Pkg(p, lo, hi) => props.push(Property::new(
                        property::PACKAGE_REQUIRED,
                        &PackageRequired {
                            package_name: pkg_name(p % n),
                            version_range: format!(">={} <{}", version(*lo as usize), version(*hi as usize)),
                        },
                    )),
                    Dep::Gvk(g) => props.push(Property::new(property::GVK_REQUIRED, &gvk(*g))),
                }
            }
            cfg.bundles.push(Bundle {
                schema: "olm.bundle".into(),
                package: pkg.clone(),
                name,
                image: format!("reg/{pkg}:{}", version(bi)),
                properties: props,
                ..Default::default()
            });
        }
        cfg.channels.push(Channel {
            schema: "olm.channel".into(),
            package: pkg,
            name: "stable".into(),
            entries,
            ..Default::default()
        });
    }
    cfg
}

fn input(spec: &CatalogSpec, subs: &[usize]) -> ResolveInput {
    let index = CatalogIndex::from_config(&build(spec));
    assert!(index.problems().is_empty(), "{:?}", index.problems());
    ResolveInput {
        catalogs: vec![CatalogInput { key: CatalogSourceKey::new("olm", "gen"), priority: 0, index: Arc::new(index) }],
        installed: vec![],
        subscriptions: subs
            .iter()
            .map(|&p| SubscriptionRequest {
                name: format!("sub-{}", pkg_name(p)),
                namespace: "ns".into(),
                package: pkg_name(p),
                channel: Some("stable".into()),
                source: "gen".into(),
                source_namespace: "olm".into(),
                ..Default::default()
            })
            .collect(),
    }
}

/// A chosen set: package index → bundle index. Checks every constraint; returns what is violated.
fn violations(spec: &CatalogSpec, chosen: &HashMap<usize, usize>) -> Vec<String> {
    let n = spec.len();
    let mut out = Vec::new();
    let mut providers: HashMap<u8, usize> = HashMap::new();
    for (&p, &b) in chosen {
        let bundle = &spec[p][b];
        for g in &bundle.provides {
            if let Some(other) = providers.insert(*g, p)
                && other != p
            {
                out.push(format!("K{g} provided by p{other} and p{p}"));
            }
        }
        for d in &bundle.deps {
            let ok = match d {
                Dep::Pkg(t, lo, hi) => {
                    chosen.get(&(t % n)).is_some_and(|&tb| (*lo as usize) <= tb && tb < (*hi as usize))
                }
                Dep::Gvk(g) => chosen.iter().any(|(&q, &qb)| spec[q][qb].provides.contains(g)),
            };
            if !ok {
                out.push(format!("p{p} v{b}: {d:?} unmet"));
            }
        }
    }
    out
}

fn plan_of(out: &ResolveOutput) -> HashMap<usize, usize> {
    let mut chosen = HashMap::new();
    for r in &out.resolved {
        let p: usize = r.package.trim_start_matches('p').parse().expect("generated package name");
        let previous = chosen.insert(p, r.version.minor as usize);
        assert!(previous.is_none(), "two bundles of {} in the plan: {out:?}", r.package);
    }
    chosen
}

/// Whether some valid plan contains a bundle of package `want` (brute force).
fn satisfiable(spec: &CatalogSpec, want: usize) -> bool {
    let n = spec.len();
    let mut choice = vec![0usize; n]; // 0 = none, k = bundle k-1
    loop {
        if choice[want] > 0 {
            let chosen: HashMap<usize, usize> =
                choice.iter().enumerate().filter(|(_, c)| **c > 0).map(|(p, c)| (p, c - 1)).collect();
            if violations(spec, &chosen).is_empty() {
                return true;
            }
        }
        // Next assignment.
        let mut i = 0;
        loop {
            if i == n {
                return false;
            }
            choice[i] += 1;
            if choice[i] <= spec[i].len() {
                break;
            }
            choice[i] = 0;
            i += 1;
        }
    }
}

fn names_a_requirement(message: &str) -> bool {
    message.contains(" requires ")
        || message.contains(" each require ")
        || message.contains(" both provide API")
        || message.contains("they are bundles of one package")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn one_subscription_plan_is_valid_and_failure_only_when_nothing_works(spec in catalog_spec(), pick in 0usize..5) {
        let want = pick % spec.len();
        let out = resolve(&input(&spec, &[want]));
        let exists = satisfiable(&spec, want);
        if out.errors.is_empty() {
            let plan = plan_of(&out);
            prop_assert!(plan.contains_key(&want), "{out:?}");
            let v = violations(&spec, &plan);
            prop_assert!(v.is_empty(), "plan violates {v:?}: {out:?}");
            prop_assert!(exists);
        } else {
            prop_assert_eq!(out.errors.len(), 1);
            prop_assert!(out.resolved.is_empty());
            let e = &out.errors[0];
            prop_assert_eq!(e.kind, ErrorKind::Unsatisfiable);
            prop_assert!(!exists, "resolver failed although a plan exists: {}", e.message());
            prop_assert!(names_a_requirement(&e.message()), "{}", e.message());
            let named: HashSet<usize> = (0..spec.len()).filter(|p| e.message().contains(&format!("p{p} "))).collect();
            prop_assert!(!named.is_empty(), "names no package: {}", e.message());
        }
    }

    #[test]
    fn several_subscriptions_each_resolve_or_fail_alone(spec in catalog_spec(), picks in prop::collection::vec(0usize..5, 2..4)) {
        let mut wanted: Vec<usize> = picks.iter().map(|p| p % spec.len()).collect();
        wanted.sort();
        wanted.dedup();
        let out = resolve(&input(&spec, &wanted));
        let plan = plan_of(&out);
        let v = violations(&spec, &plan);
        prop_assert!(v.is_empty(), "plan violates {v:?}: {out:?}");
        let failed: HashSet<String> = out.errors.iter().map(|e| e.subscription.clone()).collect();
        for &w in &wanted {
            let name = format!("sub-{}", pkg_name(w));
            if failed.contains(&name) {
                let e = out.errors.iter().find(|e| e.subscription == name).expect("error");
                prop_assert!(names_a_requirement(&e.message()), "{}", e.message());
            } else {
                prop_assert!(plan.contains_key(&w), "{name} neither resolved nor failed: {out:?}");
                prop_assert!(out.resolved.iter().any(|r| r.subscription == name && r.package == pkg_name(w)));
            }
            // A Subscription that is satisfiable alone is never dropped when it is the only one asking.
            if wanted.len() == 1 {
                prop_assert_eq!(failed.contains(&name), !satisfiable(&spec, w));
            }
        }
        // Every failing Subscription would also fail alone or conflicts with what was accepted.
        for e in &out.errors {
            prop_assert_eq!(e.kind, ErrorKind::Unsatisfiable);
        }
    }

    /// The namespace's result is that of adding its Subscriptions one at a time, in order, each
    /// kept when it solves with the ones kept before it (the reference here, one `resolve` per
    /// Subscription), however few solves `resolve` makes to find it (`resolve::solver`: the
    /// conflict-guided search for the first failing prefix).
    #[test]
    fn several_subscriptions_resolve_as_if_added_one_at_a_time(spec in catalog_spec(), picks in prop::collection::vec(0usize..5, 2..6)) {
        let mut wanted: Vec<usize> = Vec::new();
        for p in picks.iter().map(|p| p % spec.len()) {
            if !wanted.contains(&p) {
                wanted.push(p);
            }
        }
        let out = resolve(&input(&spec, &wanted));
        let mut kept: Vec<usize> = Vec::new();
        let mut failed_reference: Vec<String> = Vec::new();
        for &w in &wanted {
            let mut with = kept.clone();
            with.push(w);
            let name = format!("sub-{}", pkg_name(w));
            if resolve(&input(&spec, &with)).errors.iter().any(|e| e.subscription == name) {
                failed_reference.push(name);
            } else {
                kept.push(w);
            }
        }
        let failed: Vec<String> = out.errors.iter().map(|e| e.subscription.clone()).collect();
        prop_assert_eq!(&failed, &failed_reference, "{:?}", out);
        let reference = resolve(&input(&spec, &kept));
        prop_assert!(reference.errors.is_empty(), "{:?}", reference);
        let bundles = |o: &ResolveOutput| -> Vec<(String, String)> { o.resolved.iter().map(|r| (r.subscription.clone(), r.bundle.clone())).collect() };
        prop_assert_eq!(bundles(&out), bundles(&reference));
    }

    #[test]
    fn an_installed_bundle_moves_at_most_one_edge(spec in catalog_spec(), pick in 0usize..5, at in 0usize..3) {
        let want = pick % spec.len();
        let k = at % spec[want].len();
        let mut inp = input(&spec, &[want]);
        let name = format!("{}.v{}", pkg_name(want), version(k));
        inp.installed.push(InstalledBundle { namespace: "ns".into(), name: name.clone(), ..Default::default() });
        let out = resolve(&inp);
        if let Some(r) = out.resolved.iter().find(|r| r.package == pkg_name(want)) {
            match &r.reason {
                Reason::Upgrade { from } => {
                    prop_assert_eq!(from, &name);
                    // The generated channels are plain replaces chains: the only edge from k leads to k + 1.
                    prop_assert_eq!(r.version.minor as usize, k + 1);
                }
                Reason::Installed { .. } => prop_assert_eq!(&r.bundle, &name),
                other => prop_assert!(false, "unexpected reason {other:?}"),
            }
            let v = violations(&spec, &plan_of(&out));
            prop_assert!(v.is_empty(), "plan violates {v:?}: {out:?}");
        } else {
            prop_assert_eq!(out.errors.len(), 1, "{:?}", out);
            prop_assert!(names_a_requirement(&out.errors[0].message()), "{}", out.errors[0].message());
        }
    }

    #[test]
    fn arbitrary_channel_edges_never_panic_and_errors_name_the_channel(
        edges in prop::collection::vec((prop::option::of(0usize..6), prop::collection::vec(0usize..6, 0..2), prop::option::of((0u8..6, 0u8..7))), 1..6),
        installed_at in prop::option::of(0usize..6),
    ) {
        let n = edges.len();
        let name = |i: usize| format!("p.v1.{i}.0");
        let mut cfg = DeclarativeConfig::default();
        cfg.packages.push(Package { schema: "olm.package".into(), name: "p".into(), default_channel: Some("stable".into()), ..Default::default() });
        let entries = edges
            .iter()
            .enumerate()
            .map(|(i, (rep, skips, range))| ChannelEntry {
                name: name(i),
                replaces: rep.map(|r| name(r % (n + 1))),
                skips: skips.iter().map(|s| name(s % (n + 1))).collect(),
                skip_range: range.map(|(lo, hi)| format!(">=1.{lo}.0 <1.{hi}.0")),
                ..Default::default()
            })
            .collect();
        cfg.channels.push(Channel { schema: "olm.channel".into(), package: "p".into(), name: "stable".into(), entries, ..Default::default() });
        for i in 0..n {
            cfg.bundles.push(Bundle {
                schema: "olm.bundle".into(),
                package: "p".into(),
                name: name(i),
                image: format!("reg/p:{i}"),
                properties: vec![Property::new(property::PACKAGE, &PackageProperty { package_name: "p".into(), version: version(i).to_string(), release: None })],
                ..Default::default()
            });
        }
        let index = CatalogIndex::from_config(&cfg);
        let mut inp = ResolveInput {
            catalogs: vec![CatalogInput { key: CatalogSourceKey::new("olm", "gen"), priority: 0, index: Arc::new(index) }],
            installed: vec![],
            subscriptions: vec![SubscriptionRequest {
                name: "s".into(), namespace: "ns".into(), package: "p".into(), channel: Some("stable".into()),
                source: "gen".into(), source_namespace: "olm".into(), ..Default::default()
            }],
        };
        if let Some(k) = installed_at {
            inp.installed.push(InstalledBundle { namespace: "ns".into(), name: name(k % (n + 1)), ..Default::default() });
        }
        let out = resolve(&inp);
        prop_assert_eq!(out.resolved.len() + out.errors.len(), 1, "{:?}", out);
        if let Some(e) = out.errors.first() {
            prop_assert!(e.message().contains("channel stable") && e.message().contains("package p"), "{}", e.message());
        } else {
            let r = &out.resolved[0];
            // Never a skipped entry unless it is what is installed.
            let skipped: Vec<String> = edges.iter().flat_map(|(_, s, _)| s.iter().map(|x| name(x % (n + 1)))).collect();
            prop_assert!(!skipped.contains(&r.bundle) || matches!(r.reason, Reason::Installed { .. }), "{:?}", out);
        }
    }
}
