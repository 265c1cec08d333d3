//! Synthetic catalogs for benchmarks and tests (not for users' catalogs).
//!
//! [`generate`] builds a valid File-Based Catalog of a chosen size, deterministic by seed, with
//! the shapes real catalogs have (`olm-v0.md` §3.2–3.4, §2.2): replaces chains, some `skips` and
//! `skipRange`s, `olm.gvk` per package, dependency chains by `olm.package.required` and
//! `olm.gvk.required`, a small `olm.csv.metadata` per bundle, and a second channel per package.
//! The benchmarks of catalog loading and of the resolver use 500 packages × 20 bundles.

use super::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};
use super::property::{self, Gvk, PackageProperty, PackageRequired};

/// SplitMix64: a tiny deterministic generator (no dependency on `rand` for test data).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

const WORDS: &[&str] = &[
    "operator",
    "cluster",
    "database",
    "backup",
    "restore",
    "scaling",
    "metrics",
    "storage",
    "network",
    "secure",
    "manages",
    "lifecycle",
    "upgrades",
    "replicas",
    "automated",
    "monitoring",
    "deploys",
    "kubernetes",
];

fn words(rng: &mut SplitMix64, n: usize) -> String {
    (0..n).map(|_| WORDS[rng.below(WORDS.len() as u64) as usize]).collect::<Vec<_>>().join(" ")
}

/// Version of the `j`-th bundle of a package: `1.0.0`, `1.0.1`, …, `1.0.9`, `1.1.0`, …, `2.0.0` at 100.
fn version_of(j: usize) -> String {
    format!("{}.{}.{}", 1 + j / 100, (j / 10) % 10, j % 10)
}

/// Generates a valid catalog of `packages` packages with `bundles_per_package` bundles each
/// (at least 1), dependency chains at most `max_dependency_depth` packages long, deterministic
/// for a given `seed`. **Benchmark and test data only.**
///
/// Shape, per package `pkg-NNNN` (`NNNN` from 0):
/// - bundles `pkg-NNNN.vX.Y.Z` with versions `1.0.0`, `1.0.1`, … ([`version_of`] order), image
///   `registry.example.com/pkg-NNNN-bundle:vX.Y.Z`;
/// - channel `stable` (the default) lists every bundle; each entry replaces the previous one,
///   about 15% instead replace the one before and skip the previous one (never two in a row, so
///   the channel stays valid), about 30% carry `skipRange: ">=<previous> <<this>"`;
/// - channel `fast` lists the newer half of the bundles, the same edges (its tail replaces a
///   bundle outside the channel, which opm allows);
/// - one to three `olm.gvk` per bundle in group `pkg-NNNN.example.com`, version `v1`;
/// - from package 1 on, with probability 70% a package depends on the previous package (unless
///   that would make a chain longer than `max_dependency_depth`), alternately by
///   `olm.package.required` (`>=1.0.0`) and by `olm.gvk.required` on one of its kinds;
/// - a small `olm.csv.metadata` (display name, description) per bundle.
pub fn generate(
    packages: usize,
    bundles_per_package: usize,
    max_dependency_depth: usize,
    seed: u64,
) -> DeclarativeConfig {
    let mut g = Generator {
        rng: SplitMix64(seed),
        bundles: bundles_per_package.max(1),
        max_dependency_depth,
        depth: Vec::with_capacity(packages),
        kinds_of: Vec::with_capacity(packages),
        cfg: DeclarativeConfig::default(),
    };
    for i in 0..packages {
        g.package(i);
    }
    g.cfg
}

/// The state of one [`generate`]: the generator (drawn from in a fixed order, so that a seed
/// gives one catalog), the sizes, and what earlier packages drew.
struct Generator {
    rng: SplitMix64,
    /// Bundles per package (at least 1).
    bundles: usize,
    max_dependency_depth: usize,
    /// `depth[i]`: length of the dependency chain starting at package `i`.
    depth: Vec<usize>,
    /// `kinds_of[i]`: number of kinds package `i` provides.
    kinds_of: Vec<usize>,
    cfg: DeclarativeConfig,
}

/// One package being generated: its name and index, its number of kinds and the package it
/// depends on.
struct GenPackage {
    name: String,
    index: usize,
    kinds: usize,
    dep: Option<usize>,
}

impl Generator {
    /// Package `i` with its bundles and its `stable` and `fast` channels.
    fn package(&mut self, i: usize) {
        let name = format!("pkg-{i:04}");
        let kinds = 1 + self.rng.below(3) as usize;
        self.kinds_of.push(kinds);
        let depth = &self.depth;
        let dep = if i > 0
            && self.max_dependency_depth > 0
            && depth[i - 1] < self.max_dependency_depth
            && self.rng.chance(70)
        {
            Some(i - 1)
        } else {
            None
        };
        self.depth.push(dep.map_or(0, |d| self.depth[d] + 1));
        self.cfg.packages.push(Package {
            schema: super::model::SCHEMA_PACKAGE.into(),
            name: name.clone(),
            default_channel: Some("stable".into()),
            description: Some(format!("{name}: {}", words(&mut self.rng, 30))),
            ..Default::default()
        });
        let pkg = GenPackage { name, index: i, kinds, dep };
        let n = self.bundles;
        let mut entries = Vec::with_capacity(n);
        let mut prev_was_skip = false;
        for j in 0..n {
            entries.push(self.entry(&pkg.name, j, &mut prev_was_skip));
            let properties = self.properties(&pkg, j);
            self.cfg.bundles.push(Bundle {
                schema: super::model::SCHEMA_BUNDLE.into(),
                package: pkg.name.clone(),
                name: format!("{}.v{}", pkg.name, version_of(j)),
                image: format!("registry.example.com/{}-bundle:v{}", pkg.name, version_of(j)),
                properties,
                ..Default::default()
            });
        }
        let fast: Vec<ChannelEntry> = entries[n / 2..].to_vec();
        self.cfg.channels.push(Channel {
            schema: super::model::SCHEMA_CHANNEL.into(),
            package: pkg.name.clone(),
            name: "fast".into(),
            entries: fast_entries(fast),
            ..Default::default()
        });
        self.cfg.channels.push(Channel {
            schema: super::model::SCHEMA_CHANNEL.into(),
            package: pkg.name,
            name: "stable".into(),
            entries,
            ..Default::default()
        });
    }

    /// The `stable` entry of bundle `j`: it replaces the previous one, or (about 15%, never two
    /// in a row) the one before while skipping the previous; about 30% carry a skipRange.
    fn entry(&mut self, pkg: &str, j: usize, prev_was_skip: &mut bool) -> ChannelEntry {
        let mut e = ChannelEntry { name: format!("{pkg}.v{}", version_of(j)), ..Default::default() };
        if j >= 2 && !*prev_was_skip && self.rng.chance(15) {
            e.replaces = Some(format!("{pkg}.v{}", version_of(j - 2)));
            e.skips = vec![format!("{pkg}.v{}", version_of(j - 1))];
            *prev_was_skip = true;
        } else {
            if j >= 1 {
                e.replaces = Some(format!("{pkg}.v{}", version_of(j - 1)));
            }
            *prev_was_skip = false;
        }
        if j >= 1 && self.rng.chance(30) {
            e.skip_range = Some(format!(">={} <{}", version_of(j - 1), version_of(j)));
        }
        e
    }

    /// The properties of bundle `j`: `olm.package`, the package's `olm.gvk`s, its dependency
    /// (by package or by GVK, alternately by package index) and a small `olm.csv.metadata`.
    fn properties(&mut self, pkg: &GenPackage, j: usize) -> Vec<Property> {
        let name = &pkg.name;
        let mut properties = vec![Property::new(
            property::PACKAGE,
            &PackageProperty { package_name: name.clone(), version: version_of(j), release: None },
        )];
        for k in 0..pkg.kinds {
            properties.push(Property::new(
                property::GVK,
                &Gvk { group: format!("{name}.example.com"), version: "v1".into(), kind: format!("Kind{k}") },
            ));
        }
        if let Some(d) = pkg.dep {
            let dep_pkg = format!("pkg-{d:04}");
            if pkg.index.is_multiple_of(2) {
                properties.push(Property::new(
                    property::PACKAGE_REQUIRED,
                    &PackageRequired { package_name: dep_pkg, version_range: ">=1.0.0".into() },
                ));
            } else {
                let k = self.rng.below(self.kinds_of[d] as u64);
                properties.push(Property::new(
                    property::GVK_REQUIRED,
                    &Gvk { group: format!("{dep_pkg}.example.com"), version: "v1".into(), kind: format!("Kind{k}") },
                ));
            }
        }
        properties.push(Property {
            type_: property::CSV_METADATA.into(),
            value: serde_json::json!({
                "displayName": format!("{name} operator"),
                "description": words(&mut self.rng, 12),
                "provider": {"name": "Example"},
                "installModes": [{"type": "AllNamespaces", "supported": true}],
            }),
        });
        properties
    }
}

/// The `fast` channel keeps the newer half's edges; an entry skipping a bundle outside the
/// channel is fine, but the first entry must not skip its own predecessor-in-channel away.
fn fast_entries(mut entries: Vec<ChannelEntry>) -> Vec<ChannelEntry> {
    if let Some(first) = entries.first_mut() {
        // The tail may replace a bundle absent from the channel; its skips would name absent
        // bundles too, which is allowed but pointless.
        first.skips.clear();
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::validate::validate;
    use crate::catalog::validated::ValidatedCatalog;

    #[test]
    fn generated_catalogs_are_valid_and_deterministic() {
        for (p, b, d, seed) in [(1, 1, 0, 1), (30, 25, 3, 7), (12, 3, 10, 99)] {
            let cfg = generate(p, b, d, seed);
            validate(&cfg).unwrap_or_else(|e| panic!("generate({p}, {b}, {d}, {seed}): {e}"));
            assert_eq!(cfg.packages.len(), p);
            assert_eq!(cfg.bundles.len(), p * b);
            assert_eq!(cfg, generate(p, b, d, seed));
        }
        assert_ne!(generate(10, 10, 2, 1), generate(10, 10, 2, 2));
    }

    #[test]
    fn dependency_chains_respect_max_depth_and_have_edges_of_each_kind() {
        let cfg = generate(200, 12, 3, 5);
        let idx = ValidatedCatalog::new(cfg).unwrap();
        // Follow "depends on the previous package" chains: no longer than 3.
        let deps = |p: &str| -> bool {
            idx.bundles_of(p).next().is_some_and(|b| !b.required_packages.is_empty() || !b.required_gvks.is_empty())
        };
        let mut run = 0;
        let mut max_run = 0;
        for p in idx.packages() {
            run = if deps(&p.name) { run + 1 } else { 0 };
            max_run = max_run.max(run);
        }
        assert!((1..=3).contains(&max_run), "max chain {max_run}");
        let all = idx.all_bundles();
        assert!(all.iter().any(|b| !b.required_packages.is_empty()));
        assert!(all.iter().any(|b| !b.required_gvks.is_empty()));
        let stable = idx.channel("pkg-0000", "stable").unwrap();
        assert_eq!(idx.bundle_at(stable.head).name, "pkg-0000.v1.1.1");
        assert!(idx.packages().iter().flat_map(|p| &p.channels).flat_map(|c| &c.entries).any(|e| !e.skips.is_empty()));
        assert!(
            idx.packages().iter().flat_map(|p| &p.channels).flat_map(|c| &c.entries).any(|e| e.skip_range.is_some())
        );
    }
}
