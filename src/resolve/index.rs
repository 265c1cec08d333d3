//! The resolver's view of one catalog: packages, channels ordered the way OLM v0 orders them,
//! bundles with parsed versions, provided APIs and dependencies.
//!
//! Built once per catalog from a [`DeclarativeConfig`] and shared behind an `Arc`; everything
//! the solver asks for is precomputed here so that resolving a Subscription does no parsing.
//! Only what resolution needs is kept (no `olm.bundle.object`, no `olm.csv.metadata`).
//!
//! Channel ordering follows OLM v0's `sortChannel` (`reference/olm-v0.md` §4.2; upstream
//! `pkg/controller/registry/resolver/resolver.go`): entries nobody `replaces` or `skips` are heads,
//! exactly one head is required, its `replaces` chain gives the order (head first), and entries named
//! in some entry's `skips` are never candidates. `skipRange` is an upgrade edge, not an ordering edge.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;

use petgraph::graph::{DiGraph, NodeIndex};
use semver::Version;

use crate::catalog::model::DeclarativeConfig;
use crate::catalog::property::{self, Constraint, Gvk, PackageProperty, PackageRequired};

use crate::catalog::semver_range::{VersionRange, VersionRangeError, parse_version};

/// Index of a package in [`CatalogIndex`].
pub type PackageIdx = u32;
/// Index of a bundle in [`CatalogIndex`].
pub type BundleIdx = u32;

/// A predicate over one candidate bundle: what a dependency asks for
/// (`olm.package.required`, `olm.gvk.required`, `olm.constraint`; `reference/olm-v0.md` §2.2–2.3).
/// Compound forms follow operator-lifecycle-manager `cache/predicates.go`: `all` = every predicate
/// holds for the same bundle, `any` = at least one, `not` = none.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// A bundle of this package whose version lies in the (blang) range.
    Package {
        /// Package name.
        package: String,
        /// Version range (blang/semver syntax).
        range: VersionRange,
    },
    /// A bundle that provides this API.
    Gvk(Gvk),
    /// All nested predicates hold.
    All(Vec<Predicate>),
    /// At least one nested predicate holds.
    Any(Vec<Predicate>),
    /// None of the nested predicates holds.
    Not(Vec<Predicate>),
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn join(f: &mut fmt::Formatter<'_>, ps: &[Predicate], sep: &str) -> fmt::Result {
            for (i, p) in ps.iter().enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                write!(f, "{p}")?;
            }
            Ok(())
        }
        match self {
            Predicate::Package { package, range } => write!(f, "{package} {range}"),
            Predicate::Gvk(g) => write!(f, "an operator providing {}", display_gvk(g)),
            Predicate::All(ps) => {
                f.write_str("(")?;
                join(f, ps, " and ")?;
                f.write_str(")")
            }
            Predicate::Any(ps) => {
                f.write_str("(")?;
                join(f, ps, " or ")?;
                f.write_str(")")
            }
            Predicate::Not(ps) => {
                f.write_str("not (")?;
                join(f, ps, " or ")?;
                f.write_str(")")
            }
        }
    }
}

/// `group/version Kind`, the way the explanations name an API.
pub fn display_gvk(g: &Gvk) -> String {
    if g.group.is_empty() {
        format!("{} {}", g.version, g.kind)
    } else {
        format!("{}/{} {}", g.group, g.version, g.kind)
    }
}

impl Predicate {
    /// Whether `bundle` (of `index`) satisfies the predicate.
    pub fn matches(&self, package: &str, version: &Version, provides: &[Gvk]) -> bool {
        match self {
            Predicate::Package { package: p, range } => p == package && range.matches(version),
            Predicate::Gvk(g) => provides.contains(g),
            Predicate::All(ps) => ps.iter().all(|p| p.matches(package, version, provides)),
            Predicate::Any(ps) => ps.iter().any(|p| p.matches(package, version, provides)),
            Predicate::Not(ps) => !ps.iter().any(|p| p.matches(package, version, provides)),
        }
    }

    /// Packages a matching bundle may belong to, or `None` when any package may match (`not`).
    pub fn packages(&self, gvk_packages: &dyn Fn(&Gvk) -> Vec<String>) -> Option<HashSet<String>> {
        match self {
            Predicate::Package { package, .. } => Some(HashSet::from([package.clone()])),
            Predicate::Gvk(g) => Some(gvk_packages(g).into_iter().collect()),
            Predicate::All(ps) => {
                let mut acc: Option<HashSet<String>> = None;
                for p in ps {
                    if let Some(s) = p.packages(gvk_packages) {
                        acc = Some(match acc {
                            None => s,
                            Some(a) => a.intersection(&s).cloned().collect(),
                        });
                    }
                }
                acc
            }
            Predicate::Any(ps) => {
                let mut acc = HashSet::new();
                for p in ps {
                    acc.extend(p.packages(gvk_packages)?);
                }
                Some(acc)
            }
            Predicate::Not(_) => None,
        }
    }
}

/// One dependency of a bundle: a predicate some installed bundle must satisfy.
#[derive(Debug, Clone, PartialEq)]
pub struct Dependency {
    /// What is required.
    pub predicate: Predicate,
    /// `failureMessage` of an `olm.constraint`, shown when it cannot be satisfied.
    pub failure_message: Option<String>,
}

/// A bundle as the resolver sees it.
#[derive(Debug, Clone)]
pub struct BundleEntry {
    /// Bundle (CSV) name.
    pub name: String,
    /// Owning package.
    pub package: PackageIdx,
    /// Version from the `olm.package` property (`0.0.0` when it is missing or invalid; see `problem`).
    pub version: Version,
    /// Bundle image reference.
    pub image: String,
    /// APIs the bundle provides (`olm.gvk`).
    pub provides: Vec<Gvk>,
    /// Dependencies (`olm.package.required`, `olm.gvk.required`, `olm.constraint`).
    pub dependencies: Vec<Dependency>,
    /// Why the bundle can never be installed (bad properties, `cel` constraint, `olm.deprecated`).
    pub problem: Option<String>,
    /// The bundle's catalog properties other than `olm.bundle.object` and `olm.csv.metadata`, in
    /// catalog order, as the JSON text of a `[{"type","value"}…]` list: what operator-registry's
    /// gRPC API serves as `Bundle.properties` (`pkg/api/model_to_api.go`
    /// `convertModelPropertiesToAPIProperties`) and OLM writes into the CSV annotation
    /// `operatorframework.io/properties` and the bundle lookups. Kept as text: it is only read
    /// for the few bundles a resolution installs.
    pub properties: Box<str>,
    /// Position in OLM's dependency preference order inside this catalog (default channel first,
    /// then package name, then channel name, then head first); `u32::MAX` when the bundle is on no
    /// channel's candidate chain (skipped, stranded, or its channel is broken).
    pub rank: u32,
}

/// The properties of a resolved bundle as OLM writes them into an InstallPlan's bundle lookup
/// and the CSV annotation `operatorframework.io/properties`: the catalog's own
/// ([`BundleEntry::properties`], in catalog order) when the entry has them; otherwise rebuilt
/// from what the index knows: `olm.package`, an `olm.gvk` per provided API,
/// `olm.package.required` / `olm.gvk.required` for plain package and GVK dependencies, and an
/// `olm.constraint` (failure message, description) for compound ones. `entry` is the bundle's
/// catalog entry; without one only `olm.package` is known.
pub fn lookup_properties(package: &str, version: &Version, entry: Option<&BundleEntry>) -> Vec<serde_json::Value> {
    use serde_json::json;
    if let Some(e) = entry
        && let Ok(serde_json::Value::Array(props)) = serde_json::from_str::<serde_json::Value>(&e.properties)
        && !props.is_empty()
    {
        return props;
    }
    let mut props =
        vec![json!({"type": "olm.package", "value": {"packageName": package, "version": version.to_string()}})];
    let Some(e) = entry else { return props };
    for g in &e.provides {
        props.push(json!({"type": "olm.gvk", "value": {"group": g.group, "version": g.version, "kind": g.kind}}));
    }
    for d in &e.dependencies {
        match &d.predicate {
            Predicate::Package { package, range } => props.push(json!({"type": "olm.package.required", "value": {"packageName": package, "versionRange": range.as_str()}})),
            Predicate::Gvk(g) => props.push(json!({"type": "olm.gvk.required", "value": {"group": g.group, "version": g.version, "kind": g.kind}})),
            other => props.push(json!({"type": "olm.constraint", "value": {"failureMessage": d.failure_message, "description": other.to_string()}})),
        }
    }
    props
}

/// One channel entry with its upgrade edges.
#[derive(Debug, Clone)]
pub struct EntryInfo {
    /// Bundle name of the entry.
    pub name: String,
    /// The bundle blob, when the catalog has one.
    pub bundle: Option<BundleIdx>,
    /// `replaces`.
    pub replaces: Option<String>,
    /// `skips`.
    pub skips: Vec<String>,
    /// `skipRange`, parsed (blang); `Err` keeps the parse error for explanations.
    pub skip_range: Option<Result<VersionRange, VersionRangeError>>,
    /// Name of an entry that lists this one in its `skips`.
    pub skipped_by: Option<String>,
}

/// A channel: its entries and the head-first order of its candidate entries.
#[derive(Debug, Clone)]
pub struct ChannelInfo {
    /// Channel name.
    pub name: String,
    /// Entries in file order.
    pub entries: Vec<EntryInfo>,
    /// Candidate entries (indexes into `entries`), head first; `Err` says why the channel cannot be
    /// ordered (no head, several heads, cycle) in OLM's terms plus where the chain breaks.
    pub order: Result<Vec<u32>, ChannelOrderError>,
}

/// A package with its channels (sorted by name).
#[derive(Debug, Clone)]
pub struct PackageInfo {
    /// Package name.
    pub name: String,
    /// `defaultChannel` as written.
    pub default_channel: Option<String>,
    /// Channels sorted by name.
    pub channels: Vec<ChannelInfo>,
    /// Bundles of the package.
    pub bundles: Vec<BundleIdx>,
}

impl PackageInfo {
    /// The channel named `name`.
    pub fn channel(&self, name: &str) -> Option<&ChannelInfo> {
        self.channels.iter().find(|c| c.name == name)
    }

    /// Channel names joined for messages: `fast, stable (default stable)`.
    pub fn channel_list(&self) -> String {
        let names: Vec<&str> = self.channels.iter().map(|c| c.name.as_str()).collect();
        let mut s = join_and(&names);
        if let Some(d) = &self.default_channel {
            s.push_str(&format!(" (default {d})"));
        }
        s
    }
}

/// `a`, `a and b`, `a, b and c`.
pub fn join_and<S: AsRef<str>>(items: &[S]) -> String {
    match items.len() {
        0 => "none".to_string(),
        1 => items[0].as_ref().to_string(),
        n => {
            let head: Vec<&str> = items[..n - 1].iter().map(|s| s.as_ref()).collect();
            format!("{} and {}", head.join(", "), items[n - 1].as_ref())
        }
    }
}

/// The `olm.deprecations` messages of one package (`reference/olm-v0.md` §3.2): of the package
/// itself, of its channels by name, of its bundles by name. Not used by resolution; the
/// Subscription's deprecation conditions read them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PackageDeprecations {
    /// The package's message, when the package is deprecated.
    pub package: Option<String>,
    /// Messages of deprecated channels, by channel name.
    pub channels: HashMap<String, String>,
    /// Messages of deprecated bundles, by bundle name.
    pub bundles: HashMap<String, String>,
}

/// The catalog index: the resolver's view of one catalog, the one the controller keeps per
/// CatalogSource. Never fails to build: broken parts are recorded on the object they belong to.
/// Build it with [`CatalogIndex::from_config`] (or [`CatalogIndex::from_validated`] from a valid
/// catalog's discovery content, [`crate::catalog::validated::ValidatedCatalog`]).
#[derive(Debug, Clone, Default)]
pub struct CatalogIndex {
    packages: Vec<PackageInfo>,
    package_by_name: HashMap<String, PackageIdx>,
    bundles: Vec<BundleEntry>,
    /// The first bundle of each name, whatever its package (for installed CSVs whose package is
    /// not known).
    bundle_by_name: HashMap<String, BundleIdx>,
    /// Bundles by (package, name): a name is unique only within its package, as in opm's model
    /// (operator-registry `alpha/model`: `Package.Bundles` is a map by name).
    bundle_by_key: HashMap<(PackageIdx, String), BundleIdx>,
    gvk_providers: HashMap<Gvk, Vec<BundleIdx>>,
    problems: Vec<String>,
    invalid: Option<String>,
    deprecations: HashMap<String, PackageDeprecations>,
}

impl CatalogIndex {
    /// Builds the index. Never fails: a problem with one bundle, channel or package is recorded on
    /// that object (and in [`CatalogIndex::problems`]) so that the rest of the catalog stays usable
    /// and a Subscription that touches the broken object gets a message naming it.
    pub fn from_config(config: &DeclarativeConfig) -> CatalogIndex {
        let mut idx = CatalogIndex::default();
        for p in &config.packages {
            idx.add_package(p);
        }
        for b in &config.bundles {
            idx.add_bundle(b);
        }
        let mut channels_by_pkg: Vec<Vec<ChannelInfo>> = vec![Vec::new(); idx.packages.len()];
        for c in &config.channels {
            let Some(&pkg) = idx.package_by_name.get(&c.package) else {
                idx.problems.push(format!(
                    "channel {} names package {:?}, which has no olm.package blob; it is ignored",
                    c.name, c.package
                ));
                continue;
            };
            let info = idx.channel_info(pkg, c);
            if let Err(e) = &info.order {
                idx.problems.push(e.to_string());
            }
            channels_by_pkg[pkg as usize].push(info);
        }
        for (pkg, mut chans) in channels_by_pkg.into_iter().enumerate() {
            chans.sort_by(|a, b| a.name.cmp(&b.name));
            idx.packages[pkg].channels = chans;
        }
        idx.assign_ranks();
        for d in &config.deprecations {
            let entry = idx.deprecations.entry(d.package.clone()).or_default();
            for e in &d.entries {
                let message = e.message.clone();
                match e.reference.schema.as_str() {
                    crate::catalog::model::SCHEMA_PACKAGE => entry.package = Some(message),
                    crate::catalog::model::SCHEMA_CHANNEL => {
                        _ = entry.channels.insert(e.reference.name.clone(), message)
                    }
                    crate::catalog::model::SCHEMA_BUNDLE => _ = entry.bundles.insert(e.reference.name.clone(), message),
                    _ => {}
                }
            }
        }
        idx
    }

    /// The deprecation messages of `package` (`olm.deprecations`), if any.
    pub fn deprecations(&self, package: &str) -> Option<&PackageDeprecations> {
        self.deprecations.get(package)
    }

    /// Adds an `olm.package` blob; a second one of the same name is a problem.
    fn add_package(&mut self, p: &crate::catalog::model::Package) {
        if self.package_by_name.contains_key(&p.name) {
            self.problems.push(format!("package {} is declared twice (olm.package)", p.name));
            return;
        }
        self.package_by_name.insert(p.name.clone(), self.packages.len() as PackageIdx);
        self.packages.push(PackageInfo {
            name: p.name.clone(),
            default_channel: p.default_channel.clone().filter(|c| !c.is_empty()),
            channels: Vec::new(),
            bundles: Vec::new(),
        });
    }

    /// Adds an `olm.bundle` blob of a known package, with its problems.
    fn add_bundle(&mut self, b: &crate::catalog::model::Bundle) {
        let Some(&pkg) = self.package_by_name.get(&b.package) else {
            self.problems.push(format!(
                "bundle {} names package {:?}, which has no olm.package blob; it is ignored",
                b.name, b.package
            ));
            return;
        };
        let bi = self.bundles.len() as BundleIdx;
        match self.bundle_by_key.entry((pkg, b.name.clone())) {
            Entry::Occupied(_) => self
                .problems
                .push(format!("package {} has two bundles named {}; lookups by name use the first", b.package, b.name)),
            Entry::Vacant(v) => {
                v.insert(bi);
            }
        }
        self.bundle_by_name.entry(b.name.clone()).or_insert(bi);
        let entry = bundle_entry(b, pkg);
        if let Some(p) = &entry.problem {
            self.problems.push(format!("package {} / bundle {}: {p}", b.package, b.name));
        }
        for g in &entry.provides {
            self.gvk_providers.entry(g.clone()).or_default().push(bi);
        }
        self.packages[pkg as usize].bundles.push(bi);
        self.bundles.push(entry);
    }

    /// An `olm.channel` blob of package `pkg` with its entries linked to their bundles and
    /// ordered.
    fn channel_info(&self, pkg: PackageIdx, c: &crate::catalog::model::Channel) -> ChannelInfo {
        let entries: Vec<EntryInfo> = c
            .entries
            .iter()
            .map(|e| EntryInfo {
                name: e.name.clone(),
                bundle: self.bundle_by_key.get(&(pkg, e.name.clone())).copied(),
                replaces: e.replaces.clone().filter(|r| !r.is_empty()),
                skips: e.skips.clone(),
                skip_range: e.skip_range.as_ref().filter(|r| !r.trim().is_empty()).map(|r| VersionRange::blang(r)),
                skipped_by: None,
            })
            .collect();
        let mut info = ChannelInfo { name: c.name.clone(), entries, order: Ok(Vec::new()) };
        info.order = order_channel(&c.package, &mut info);
        info
    }

    /// Builds the resolver's index from a valid catalog's [`crate::catalog::validated::ValidatedCatalog`]
    /// (discovery's view), for a caller that holds only that and not the source config. Same
    /// semantics as [`CatalogIndex::from_config`].
    pub fn from_validated(ci: &crate::catalog::validated::ValidatedCatalog) -> CatalogIndex {
        use crate::catalog::model::{Bundle, Channel, ChannelEntry, Package};
        let mut cfg = DeclarativeConfig::default();
        for p in ci.packages() {
            cfg.packages.push(Package {
                schema: crate::catalog::model::SCHEMA_PACKAGE.into(),
                name: p.name.clone(),
                default_channel: Some(p.default_channel.clone()).filter(|d| !d.is_empty()),
                ..Default::default()
            });
            for c in &p.channels {
                cfg.channels.push(Channel {
                    schema: crate::catalog::model::SCHEMA_CHANNEL.into(),
                    package: p.name.clone(),
                    name: c.name.clone(),
                    entries: c
                        .entries
                        .iter()
                        .map(|e| ChannelEntry {
                            name: ci.bundle_at(e.bundle).name.clone(),
                            replaces: e.replaces.clone(),
                            skips: e.skips.clone(),
                            skip_range: e.skip_range.as_ref().map(|r| r.as_str().to_string()),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                });
            }
        }
        for p in ci.packages() {
            let mut entries = Vec::new();
            let mut entry = |schema: &str, name: &str, message: &Option<String>| {
                if let Some(m) = message {
                    entries.push(crate::catalog::model::DeprecationEntry {
                        reference: crate::catalog::model::DeprecationReference {
                            schema: schema.into(),
                            name: name.into(),
                        },
                        message: m.clone(),
                    });
                }
            };
            entry(crate::catalog::model::SCHEMA_PACKAGE, "", &p.deprecation);
            for c in &p.channels {
                entry(crate::catalog::model::SCHEMA_CHANNEL, &c.name, &c.deprecation);
            }
            for &b in &p.bundles {
                let b = ci.bundle_at(b);
                entry(crate::catalog::model::SCHEMA_BUNDLE, &b.name, &b.deprecation);
            }
            if !entries.is_empty() {
                cfg.deprecations.push(crate::catalog::model::Deprecation {
                    schema: crate::catalog::model::SCHEMA_DEPRECATIONS.into(),
                    package: p.name.clone(),
                    entries,
                    ..Default::default()
                });
            }
        }
        for b in ci.all_bundles() {
            cfg.bundles.push(Bundle {
                schema: crate::catalog::model::SCHEMA_BUNDLE.into(),
                package: ci.package_of(b).to_string(),
                name: b.name.clone(),
                image: b.image.clone(),
                properties: b
                    .properties
                    .iter()
                    .filter(|p| p.type_ != property::BUNDLE_OBJECT && p.type_ != property::CSV_METADATA)
                    .cloned()
                    .collect(),
                ..Default::default()
            });
        }
        Self::from_config(&cfg)
    }

    /// OLM's dependency order inside one catalog: default channels first, then package name, then
    /// channel name, then head first (`reference/olm-v0.md` §4.5, upstream `sortBundles`).
    fn assign_ranks(&mut self) {
        let mut chans: Vec<(bool, &str, &str, &ChannelInfo)> = Vec::new();
        for p in &self.packages {
            for c in &p.channels {
                let is_default = p.default_channel.as_deref() == Some(c.name.as_str());
                chans.push((!is_default, p.name.as_str(), c.name.as_str(), c));
            }
        }
        chans.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
        let mut ranks = vec![u32::MAX; self.bundles.len()];
        let mut next = 0u32;
        for (_, _, _, c) in chans {
            let Ok(order) = &c.order else { continue };
            for &e in order {
                if let Some(b) = c.entries[e as usize].bundle
                    && ranks[b as usize] == u32::MAX
                {
                    ranks[b as usize] = next;
                    next += 1;
                }
            }
        }
        for (b, r) in self.bundles.iter_mut().zip(ranks) {
            b.rank = r;
        }
    }

    /// Marks the whole catalog invalid (e.g. `opm validate` rules failed, as
    /// [`crate::catalog::validate::validate`] reports them): as for a CatalogSource whose registry
    /// refuses to serve it, no Subscription resolves from it and no dependency is taken from it,
    /// and each such Subscription's error carries `message`.
    pub fn with_invalid(mut self, message: impl Into<String>) -> CatalogIndex {
        self.invalid = Some(message.into());
        self
    }

    /// Why the catalog as a whole is unusable, if it is (see [`CatalogIndex::with_invalid`]).
    pub fn invalid(&self) -> Option<&str> {
        self.invalid.as_deref()
    }

    /// Problems found while indexing (bad properties, channels that cannot be ordered, …), each
    /// naming package / channel / bundle.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// All packages.
    pub fn packages(&self) -> &[PackageInfo] {
        &self.packages
    }

    /// All bundles.
    pub fn bundles(&self) -> &[BundleEntry] {
        &self.bundles
    }

    /// The package named `name`.
    pub fn package(&self, name: &str) -> Option<(PackageIdx, &PackageInfo)> {
        self.package_by_name.get(name).map(|&i| (i, &self.packages[i as usize]))
    }

    /// Package by index.
    pub fn package_at(&self, i: PackageIdx) -> &PackageInfo {
        &self.packages[i as usize]
    }

    /// Bundle by index.
    pub fn bundle(&self, i: BundleIdx) -> &BundleEntry {
        &self.bundles[i as usize]
    }

    /// The bundle named `name` (first one, if a name repeats across packages); prefer
    /// [`CatalogIndex::bundle_in`] when the package is known.
    pub fn bundle_by_name(&self, name: &str) -> Option<BundleIdx> {
        self.bundle_by_name.get(name).copied()
    }

    /// The bundle named `name` in `package`, or, when `package` is `None`, the first of that name.
    /// A bundle name is unique only within its package (opm allows `a.v1` in two packages).
    pub fn bundle_in(&self, package: Option<&str>, name: &str) -> Option<BundleIdx> {
        match package {
            Some(p) => {
                let pkg = *self.package_by_name.get(p)?;
                self.bundle_by_key.get(&(pkg, name.to_string())).copied()
            }
            None => self.bundle_by_name(name),
        }
    }

    /// Package name of a bundle.
    pub fn package_name(&self, b: BundleIdx) -> &str {
        &self.packages[self.bundles[b as usize].package as usize].name
    }

    /// Bundles that provide `gvk`.
    pub fn providers(&self, gvk: &Gvk) -> &[BundleIdx] {
        self.gvk_providers.get(gvk).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether the bundle can be chosen as a dependency: on some channel's candidate chain and
    /// without a problem.
    pub fn is_candidate(&self, b: BundleIdx) -> bool {
        let e = &self.bundles[b as usize];
        e.rank != u32::MAX && e.problem.is_none() && self.invalid.is_none()
    }

    /// Channels (names) whose candidate chain holds bundle `b`, default channel first.
    pub fn channels_of(&self, b: BundleIdx) -> Vec<&str> {
        let bundle = &self.bundles[b as usize];
        let pkg = &self.packages[bundle.package as usize];
        let mut out: Vec<&str> = pkg
            .channels
            .iter()
            .filter(|c| c.order.as_ref().is_ok_and(|o| o.iter().any(|&e| c.entries[e as usize].bundle == Some(b))))
            .map(|c| c.name.as_str())
            .collect();
        if let Some(d) = &pkg.default_channel
            && let Some(pos) = out.iter().position(|c| c == d)
        {
            let d = out.remove(pos);
            out.insert(0, d);
        }
        out
    }

    /// The upgrade graph of one channel (petgraph): a node per entry, an edge `old → new` for every
    /// `replaces`, `skips` and `skipRange` relation, labelled with the kind.
    pub fn upgrade_graph(&self, channel: &ChannelInfo) -> DiGraph<String, EdgeKind> {
        let mut g = DiGraph::new();
        let nodes: Vec<NodeIndex> = channel.entries.iter().map(|e| g.add_node(e.name.clone())).collect();
        let by_name: HashMap<&str, usize> =
            channel.entries.iter().enumerate().map(|(i, e)| (e.name.as_str(), i)).collect();
        for (i, e) in channel.entries.iter().enumerate() {
            if let Some(r) = &e.replaces
                && let Some(&j) = by_name.get(r.as_str())
            {
                g.add_edge(nodes[j], nodes[i], EdgeKind::Replaces);
            }
            for s in &e.skips {
                if let Some(&j) = by_name.get(s.as_str()) {
                    g.add_edge(nodes[j], nodes[i], EdgeKind::Skips);
                }
            }
            if let Some(Ok(range)) = &e.skip_range {
                for (j, other) in channel.entries.iter().enumerate() {
                    if j != i
                        && let Some(b) = other.bundle
                        && range.matches(&self.bundles[b as usize].version)
                    {
                        g.add_edge(nodes[j], nodes[i], EdgeKind::SkipRange);
                    }
                }
            }
        }
        g
    }
}

/// Kind of an upgrade edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeKind {
    /// The newer entry `replaces` the older one.
    Replaces,
    /// The newer entry lists the older one in `skips`.
    Skips,
    /// The older entry's version lies in the newer entry's `skipRange`.
    SkipRange,
}

/// What a bundle's properties say, read one property at a time.
#[derive(Default)]
struct BundleProperties {
    version: Option<Version>,
    provides: Vec<Gvk>,
    dependencies: Vec<Dependency>,
    /// How many `olm.package` properties there are (one is required).
    package_props: usize,
    problems: Vec<String>,
}

impl BundleProperties {
    fn read(&mut self, p: &crate::catalog::model::Property) {
        match p.type_.as_str() {
            property::PACKAGE => {
                self.package_props += 1;
                match p.decode::<PackageProperty>() {
                    Ok(pp) => match parse_version(&pp.version) {
                        Ok(v) => self.version = Some(v),
                        Err(e) => {
                            self.problems.push(format!("olm.package version {:?} is not semver: {e}", pp.version))
                        }
                    },
                    Err(e) => self.problems.push(format!(
                        "{e}; a bundle needs exactly one olm.package property with packageName and version"
                    )),
                }
            }
            property::GVK => match p.decode::<Gvk>() {
                Ok(g) => self.provides.push(g),
                Err(e) => self.problems.push(e.to_string()),
            },
            property::PACKAGE_REQUIRED => match p.decode::<PackageRequired>() {
                Ok(r) => match VersionRange::blang(&r.version_range) {
                    Ok(range) => self.dependencies.push(Dependency {
                        predicate: Predicate::Package { package: r.package_name, range },
                        failure_message: None,
                    }),
                    Err(e) => self.problems.push(format!("olm.package.required on {}: {e}", r.package_name)),
                },
                Err(e) => self.problems.push(e.to_string()),
            },
            property::GVK_REQUIRED => match p.decode::<Gvk>() {
                Ok(g) => self.dependencies.push(Dependency { predicate: Predicate::Gvk(g), failure_message: None }),
                Err(e) => self.problems.push(e.to_string()),
            },
            property::CONSTRAINT => self.constraint(p),
            property::DEPRECATED => self
                .problems
                .push("the bundle carries the olm.deprecated property, so OLM never installs it".to_string()),
            _ => {}
        }
    }

    /// An `olm.constraint` property: a dependency, or a problem when it is too large, does not
    /// decode or is not supported.
    fn constraint(&mut self, p: &crate::catalog::model::Property) {
        let size = serde_json::to_vec(&p.value).map(|v| v.len()).unwrap_or(0);
        if size > property::MAX_CONSTRAINT_SIZE {
            self.problems.push(format!(
                "olm.constraint value is {size} bytes, more than the {} byte limit",
                property::MAX_CONSTRAINT_SIZE
            ));
            return;
        }
        match p.decode::<Constraint>() {
            Ok(c) => match constraint_predicate(&c) {
                Ok(predicate) => {
                    self.dependencies.push(Dependency { predicate, failure_message: c.failure_message.clone() })
                }
                Err(e) => self.problems.push(e.to_string()),
            },
            Err(e) => self.problems.push(e.to_string()),
        }
    }
}

fn bundle_entry(b: &crate::catalog::model::Bundle, package: PackageIdx) -> BundleEntry {
    let mut props = BundleProperties::default();
    for p in &b.properties {
        props.read(p);
    }
    let BundleProperties { version, provides, dependencies, package_props, mut problems } = props;
    if package_props != 1 && problems.is_empty() {
        problems.push(format!(
            "has {package_props} olm.package properties; a bundle needs exactly one olm.package property with packageName and version"
        ));
    }
    if version.is_none() && problems.is_empty() {
        problems.push("has no usable olm.package version".into());
    }
    let served: Vec<serde_json::Value> = b
        .properties
        .iter()
        .filter(|p| p.type_ != property::BUNDLE_OBJECT && p.type_ != property::CSV_METADATA)
        .map(|p| serde_json::json!({"type": p.type_, "value": p.value}))
        .collect();
    BundleEntry {
        properties: serde_json::to_string(&served).unwrap_or_default().into_boxed_str(),
        name: b.name.clone(),
        package,
        version: version.unwrap_or_else(|| Version::new(0, 0, 0)),
        image: b.image.clone(),
        provides,
        dependencies,
        problem: if problems.is_empty() { None } else { Some(problems.join("; ")) },
        rank: u32::MAX,
    }
}

/// Why an `olm.constraint` cannot become a dependency.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ConstraintError {
    /// A `package` constraint whose range does not parse.
    #[error("olm.constraint package {package}: {error}")]
    PackageRange { package: String, error: VersionRangeError },
    /// A `cel` constraint (not supported).
    #[error(
        "olm.constraint with a cel rule ({rule:?}) is not supported yet by capstan; the bundle cannot be installed until the catalog offers it without the cel constraint"
    )]
    Cel { rule: String },
    /// None of the forms.
    #[error("olm.constraint names no constraint (one of gvk, package, cel, all, any, not)")]
    Empty,
    /// Several forms (their number).
    #[error("olm.constraint names {0} constraints; exactly one of gvk, package, cel, all, any, not is allowed")]
    Several(usize),
}

/// Translates an `olm.constraint` value into a predicate; `cel` is refused.
fn constraint_predicate(c: &Constraint) -> Result<Predicate, ConstraintError> {
    let mut found: Vec<Predicate> = Vec::new();
    if let Some(g) = &c.gvk {
        found.push(Predicate::Gvk(g.clone()));
    }
    if let Some(p) = &c.package {
        let range = VersionRange::blang(&p.version_range)
            .map_err(|error| ConstraintError::PackageRange { package: p.package_name.clone(), error })?;
        found.push(Predicate::Package { package: p.package_name.clone(), range });
    }
    if let Some(cel) = &c.cel {
        return Err(ConstraintError::Cel { rule: cel.rule.clone() });
    }
    let nested = |cc: &crate::catalog::property::CompoundConstraint| -> Result<Vec<Predicate>, ConstraintError> {
        cc.constraints.iter().map(constraint_predicate).collect()
    };
    if let Some(a) = &c.all {
        found.push(Predicate::All(nested(a)?));
    }
    if let Some(a) = &c.any {
        found.push(Predicate::Any(nested(a)?));
    }
    if let Some(a) = &c.not {
        found.push(Predicate::Not(nested(a)?));
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(ConstraintError::Empty),
        n => Err(ConstraintError::Several(n)),
    }
}

/// Why a channel cannot be ordered as OLM v0's `sortChannel` orders it; the message says where
/// the chain breaks and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelOrderError {
    /// The channel has no entries.
    NoEntries {
        /// Channel name.
        channel: String,
        /// Package name.
        package: String,
    },
    /// The `replaces` chain loops.
    Cycle {
        /// Channel name.
        channel: String,
        /// Package name.
        package: String,
        /// The entries of the loop in `replaces` order, the first repeated at the end.
        path: Vec<String>,
    },
    /// Every entry is replaced or skipped by another.
    NoHead {
        /// Channel name.
        channel: String,
        /// Package name.
        package: String,
    },
    /// More than one entry is replaced or skipped by none.
    SeveralHeads {
        /// Channel name.
        channel: String,
        /// Package name.
        package: String,
        /// Each head with its `replaces` chain.
        heads: Vec<HeadChain>,
        /// Where a chain ends on a `replaces` naming no entry: (entry, what it replaces).
        breaks: Vec<BrokenLink>,
        /// Heads that have a `skipRange` (which orders nothing).
        with_skip_range: Vec<String>,
    },
}

/// A channel head and the last entry of its `replaces` chain (`None` when it replaces nothing
/// in the channel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadChain {
    /// The head entry.
    pub head: String,
    /// The last entry of its chain, when there is more than the head.
    pub tail: Option<String>,
}

/// An entry whose `replaces` names no entry of its channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenLink {
    /// The entry.
    pub entry: String,
    /// What it replaces.
    pub replaces: String,
}

impl fmt::Display for ChannelOrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelOrderError::NoEntries { channel, package } => {
                write!(f, "channel {channel} of package {package} has no entries")
            }
            ChannelOrderError::Cycle { channel, package, path } => write!(
                f,
                "channel {channel} of package {package} has a cycle in its replaces chain: {}; remove one replaces so the chain ends",
                path.join(" -> ")
            ),
            ChannelOrderError::NoHead { channel, package } => write!(
                f,
                "channel {channel} of package {package} has no head: every entry is replaced or skipped by another"
            ),
            ChannelOrderError::SeveralHeads { channel, package, heads, breaks, with_skip_range } => {
                let parts: Vec<String> = heads
                    .iter()
                    .map(|h| match &h.tail {
                        None => h.head.clone(),
                        Some(t) => format!("{}...{t}", h.head),
                    })
                    .collect();
                write!(
                    f,
                    "channel {channel} of package {package} has {} heads ({}); a channel needs one replaces chain",
                    heads.len(),
                    parts.join(", ")
                )?;
                if !breaks.is_empty() {
                    let breaks: Vec<String> = breaks
                        .iter()
                        .map(|b| format!("{} replaces {}, which is not an entry of this channel", b.entry, b.replaces))
                        .collect();
                    write!(f, "; the chain breaks where {}", breaks.join(" and "))?;
                }
                if !with_skip_range.is_empty() {
                    write!(
                        f,
                        "; skipRange (on {}) does not create an ordering edge, add replaces or skips to link the entries",
                        with_skip_range.join(", ")
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ChannelOrderError {}

/// The `replaces` and `skips` links between a channel's entries (indexes into its entries).
struct Links {
    by_name: HashMap<String, usize>,
    /// The entry each entry replaces.
    replaces: Vec<Option<usize>>,
    /// An entry that replaces or skips each entry.
    replaced_by: Vec<Option<usize>>,
    /// An entry that skips each entry.
    skipped_by: Vec<Option<usize>>,
}

impl Links {
    fn of(ch: &ChannelInfo) -> Links {
        let n = ch.entries.len();
        let by_name: HashMap<String, usize> = ch.entries.iter().enumerate().map(|(i, e)| (e.name.clone(), i)).collect();
        let mut links =
            Links { by_name, replaces: vec![None; n], replaced_by: vec![None; n], skipped_by: vec![None; n] };
        for (i, e) in ch.entries.iter().enumerate() {
            if let Some(r) = &e.replaces
                && let Some(&j) = links.by_name.get(r)
            {
                links.replaced_by[j] = Some(i);
                links.replaces[i] = Some(j);
            }
            for s in &e.skips {
                if let Some(&j) = links.by_name.get(s) {
                    links.replaced_by[j] = Some(i);
                    links.skipped_by[j] = Some(i);
                }
            }
        }
        links
    }

    /// The `replaces` chain from `head`.
    fn chain_of(&self, head: usize) -> Vec<usize> {
        let mut chain = vec![head];
        let mut cur = head;
        while let Some(next) = self.replaces[cur] {
            chain.push(next);
            cur = next;
        }
        chain
    }

    /// A cycle in the `replaces` chain (found with petgraph), as the entries' names in
    /// `replaces` order with the first repeated at the end.
    fn cycle(&self, ch: &ChannelInfo) -> Option<Vec<String>> {
        let mut g: DiGraph<usize, ()> = DiGraph::new();
        let nodes: Vec<NodeIndex> = (0..ch.entries.len()).map(|i| g.add_node(i)).collect();
        for (i, r) in self.replaces.iter().enumerate() {
            if let Some(j) = r {
                g.add_edge(nodes[i], nodes[*j], ());
            }
        }
        let scc =
            petgraph::algo::tarjan_scc(&g).into_iter().find(|scc| scc.len() > 1 || g.contains_edge(scc[0], scc[0]))?;
        // Walk the cycle from its first member to print it in replaces order.
        let start = g[scc[0]];
        let mut path = vec![ch.entries[start].name.clone()];
        let mut cur = start;
        while let Some(next) = self.replaces[cur] {
            path.push(ch.entries[next].name.clone());
            if next == start {
                break;
            }
            cur = next;
        }
        Some(path)
    }

    /// The error for several heads: each head's chain, where the chains break, and the heads
    /// that have a skipRange.
    fn several_heads(&self, package: &str, ch: &ChannelInfo, heads: &[usize]) -> ChannelOrderError {
        let mut chains = Vec::new();
        let mut breaks = Vec::new();
        for &h in heads {
            let chain = self.chain_of(h);
            let tail = *chain.last().unwrap_or(&h);
            chains.push(HeadChain {
                head: ch.entries[h].name.clone(),
                tail: (chain.len() > 1).then(|| ch.entries[tail].name.clone()),
            });
            if let Some(r) = &ch.entries[tail].replaces
                && !self.by_name.contains_key(r)
            {
                breaks.push(BrokenLink { entry: ch.entries[tail].name.clone(), replaces: r.clone() });
            }
        }
        let with_skip_range = heads
            .iter()
            .filter(|&&h| ch.entries[h].skip_range.is_some())
            .map(|&h| ch.entries[h].name.clone())
            .collect();
        ChannelOrderError::SeveralHeads {
            channel: ch.name.clone(),
            package: package.to_string(),
            heads: chains,
            breaks,
            with_skip_range,
        }
    }
}

/// Orders a channel as OLM v0's `sortChannel` does and records `skipped_by` on entries.
fn order_channel(package: &str, ch: &mut ChannelInfo) -> Result<Vec<u32>, ChannelOrderError> {
    let (channel, package) = (ch.name.clone(), package.to_string());
    if ch.entries.is_empty() {
        return Err(ChannelOrderError::NoEntries { channel, package });
    }
    let links = Links::of(ch);
    for (j, s) in links.skipped_by.iter().enumerate() {
        if let Some(i) = s {
            ch.entries[j].skipped_by = Some(ch.entries[*i].name.clone());
        }
    }
    if let Some(path) = links.cycle(ch) {
        return Err(ChannelOrderError::Cycle { channel, package, path });
    }
    let heads: Vec<usize> = (0..ch.entries.len()).filter(|&i| links.replaced_by[i].is_none()).collect();
    if heads.is_empty() {
        return Err(ChannelOrderError::NoHead { channel, package });
    }
    if heads.len() > 1 {
        return Err(links.several_heads(&package, ch, &heads));
    }
    Ok(links.chain_of(heads[0]).into_iter().filter(|&i| links.skipped_by[i].is_none()).map(|i| i as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::{Bundle, Channel, ChannelEntry, Package, Property};

    fn entry(name: &str, replaces: Option<&str>, skips: &[&str], skip_range: Option<&str>) -> ChannelEntry {
        ChannelEntry {
            name: name.into(),
            replaces: replaces.map(Into::into),
            skips: skips.iter().map(|s| s.to_string()).collect(),
            skip_range: skip_range.map(Into::into),
            ..Default::default()
        }
    }

    fn config(entries: Vec<ChannelEntry>) -> DeclarativeConfig {
        let bundles = entries
            .iter()
            .map(|e| Bundle {
                schema: "olm.bundle".into(),
                package: "p".into(),
                name: e.name.clone(),
                image: format!("img/{}", e.name),
                properties: vec![Property::new(
                    property::PACKAGE,
                    &PackageProperty {
                        package_name: "p".into(),
                        version: e.name.trim_start_matches("p.v").into(),
                        release: None,
                    },
                )],
                ..Default::default()
            })
            .collect();
        DeclarativeConfig {
            packages: vec![Package {
                schema: "olm.package".into(),
                name: "p".into(),
                default_channel: Some("s".into()),
                ..Default::default()
            }],
            channels: vec![Channel {
                schema: "olm.channel".into(),
                package: "p".into(),
                name: "s".into(),
                entries,
                ..Default::default()
            }],
            bundles,
            ..Default::default()
        }
    }

    fn order(idx: &CatalogIndex) -> Result<Vec<String>, String> {
        let c = &idx.packages()[0].channels[0];
        c.order
            .clone()
            .map(|o| o.iter().map(|&e| c.entries[e as usize].name.clone()).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn orders_head_first_and_drops_skipped_entries() {
        let idx = CatalogIndex::from_config(&config(vec![
            entry("p.v1.0.0", None, &[], None),
            entry("p.v1.1.0", Some("p.v1.0.0"), &[], None),
            entry("p.v1.1.1", Some("p.v1.0.0"), &["p.v1.1.0"], None),
        ]));
        assert_eq!(order(&idx).unwrap(), vec!["p.v1.1.1", "p.v1.0.0"]);
        assert_eq!(idx.packages()[0].channels[0].entries[1].skipped_by.as_deref(), Some("p.v1.1.1"));
    }

    #[test]
    fn skip_range_alone_gives_two_heads() {
        let idx = CatalogIndex::from_config(&config(vec![
            entry("p.v1.0.0", None, &[], None),
            entry("p.v1.0.1", None, &[], Some("<1.0.1")),
        ]));
        let err = order(&idx).unwrap_err();
        assert!(err.contains("2 heads") && err.contains("p.v1.0.0") && err.contains("p.v1.0.1"), "{err}");
        assert!(err.contains("skipRange"), "{err}");
    }

    #[test]
    fn broken_chain_is_located() {
        let idx = CatalogIndex::from_config(&config(vec![
            entry("p.v1.6.1", None, &[], None),
            entry("p.v1.6.2", Some("p.v1.6.1"), &[], None),
            entry("p.v1.7.0", Some("p.v1.6.3"), &[], None),
            entry("p.v1.7.1", Some("p.v1.7.0"), &[], None),
        ]));
        let err = order(&idx).unwrap_err();
        assert!(err.contains("p.v1.6.2...p.v1.6.1") && err.contains("p.v1.7.1...p.v1.7.0"), "{err}");
        assert!(err.contains("p.v1.7.0 replaces p.v1.6.3, which is not an entry"), "{err}");
    }

    #[test]
    fn replaces_cycle_is_reported_with_its_path() {
        let idx = CatalogIndex::from_config(&config(vec![
            entry("p.v3.0.0", Some("p.v2.0.0"), &[], None),
            entry("p.v2.0.0", Some("p.v1.0.0"), &[], None),
            entry("p.v1.0.0", Some("p.v2.0.0"), &[], None),
        ]));
        let err = order(&idx).unwrap_err();
        assert!(
            err.contains("cycle")
                && (err.contains("p.v2.0.0 -> p.v1.0.0 -> p.v2.0.0")
                    || err.contains("p.v1.0.0 -> p.v2.0.0 -> p.v1.0.0")),
            "{err}"
        );
    }

    #[test]
    fn upgrade_graph_has_skip_range_edges() {
        let idx = CatalogIndex::from_config(&config(vec![
            entry("p.v1.0.0", None, &[], None),
            entry("p.v1.0.1", Some("p.v1.0.0"), &[], None),
            entry("p.v1.1.0", Some("p.v1.0.1"), &[], Some(">=1.0.0 <1.1.0")),
        ]));
        let g = idx.upgrade_graph(&idx.packages()[0].channels[0]);
        let kinds: Vec<EdgeKind> = g.edge_weights().copied().collect();
        assert_eq!(kinds.iter().filter(|k| **k == EdgeKind::SkipRange).count(), 2);
        assert_eq!(kinds.iter().filter(|k| **k == EdgeKind::Replaces).count(), 2);
    }

    #[test]
    fn cel_constraint_is_refused_on_the_bundle() {
        let mut cfg = config(vec![entry("p.v1.0.0", None, &[], None)]);
        cfg.bundles[0]
            .properties
            .push(Property { type_: "olm.constraint".into(), value: serde_json::json!({"cel": {"rule": "true"}}) });
        let idx = CatalogIndex::from_config(&cfg);
        let p = idx.bundle(0).problem.clone().unwrap();
        assert!(p.contains("cel") && p.contains("not supported yet"), "{p}");
        assert!(!idx.is_candidate(0));
    }
}
