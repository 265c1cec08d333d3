//! One namespace's resolution problem as the solver sees it: the records that may be installed
//! (catalog bundles, installed bundles, "package P provides API G"), the installed bundles with
//! what the catalogs know about them, each Subscription's candidates, and the questions the
//! provider, the conflict explanation and the plan ask of them (what a record is, whether it meets
//! a dependency, OLM's order of preference between dependency candidates).

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Display};

use indexmap::IndexSet;
use semver::Version;

use crate::catalog::property::Gvk;

use super::index::{BundleIdx, CatalogIndex, Dependency, display_gvk};
use super::{CatalogInput, InstalledBundle, SubscriptionRequest, split_csv_name};

/// A solvable: a catalog bundle, an installed bundle, or "package P provides API G".
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Record {
    /// Bundle `b` of catalog `cat` (an index into the namespace's catalogs).
    Bundle { cat: u32, b: BundleIdx },
    /// Installed bundle `i` (an index into [`Namespace::installed`]).
    Installed(u32),
    /// Package `pkg` as the provider of API `gvk` (both interned by the provider).
    GvkProvider { gvk: u32, pkg: u32 },
}

impl Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// An installed bundle with what the resolver knows about it.
#[derive(Clone)]
pub(super) struct InstalledInfo {
    pub(super) name: String,
    pub(super) package: String,
    pub(super) version: Version,
    pub(super) catalog: Option<usize>,
    pub(super) bundle: Option<BundleIdx>,
    pub(super) provides: Vec<Gvk>,
    pub(super) dependencies: Vec<Dependency>,
    pub(super) image: String,
}

/// A Subscription that passed candidate selection: its catalog, package and candidates.
#[derive(Clone)]
pub(super) struct SubPlan {
    /// Position of the Subscription in the input.
    pub(super) input: usize,
    /// Its catalog (an index into the namespace's catalogs).
    pub(super) catalog: usize,
    pub(super) package: String,
    /// `channel stable` or `the default channel … (then the other channels)`, for explanations.
    pub(super) channel_label: String,
    /// Candidates and their position in OLM's order of preference (0 first).
    pub(super) candidates: HashMap<Record, usize>,
    /// The channel each candidate was taken from (empty for the installed bundle).
    pub(super) candidate_channel: HashMap<Record, String>,
    /// The installed bundle it upgrades from (an index into [`Namespace::installed`]).
    pub(super) current: Option<u32>,
    /// Why there is no upgrade, when staying is the only candidate.
    pub(super) note: Option<String>,
}

/// One namespace's resolution: the catalogs it sees, its installed bundles, the candidates of its
/// Subscriptions.
pub(super) struct Namespace<'a> {
    pub(super) catalogs: &'a [CatalogInput],
    pub(super) namespace: &'a str,
    pub(super) installed: Vec<InstalledInfo>,
    pub(super) plans: Vec<SubPlan>,
    pub(super) subs: &'a [SubscriptionRequest],
    /// Every record some plan has as a candidate (the union of `plans[..].candidates`), so that
    /// `get_candidates` asks one set, not every plan, whether an off-chain bundle is requested.
    pub(super) requested: HashSet<Record>,
}

/// OLM's order of preference between dependency candidates (`reference/olm-v0.md` §4.5), compared
/// field by field: installed first, then the dependent's catalog, higher priority, the namespace's
/// own catalogs, catalog name and namespace, then the in-catalog rank.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) struct PrefKey<'a> {
    /// 0 installed, 1 the dependent's catalog, 2 another catalog, 3 not a bundle.
    tier: u8,
    /// The catalog's `spec.priority`, negated (higher first).
    priority: i64,
    /// 1 when the catalog is in another namespace.
    other_namespace: u8,
    catalog_name: &'a str,
    catalog_namespace: &'a str,
    /// [`super::index::BundleEntry::rank`], or the installed bundle's position.
    rank: u32,
}

/// What a bundle or installed record is: package, version, provided APIs, dependencies and
/// catalog (an index into the namespace's catalogs).
#[derive(Clone, Copy)]
pub(super) struct RecordInfo<'a> {
    pub(super) package: &'a str,
    pub(super) version: &'a Version,
    pub(super) provides: &'a [Gvk],
    pub(super) dependencies: &'a [Dependency],
    pub(super) catalog: Option<usize>,
}

impl<'a> Namespace<'a> {
    pub(super) fn new(
        catalogs: &'a [CatalogInput],
        namespace: &'a str,
        installed: Vec<InstalledInfo>,
        plans: Vec<SubPlan>,
        subs: &'a [SubscriptionRequest],
    ) -> Self {
        let requested = plans.iter().flat_map(|p| p.candidates.keys().copied()).collect();
        Namespace { catalogs, namespace, installed, plans, subs, requested }
    }

    pub(super) fn index(&self, cat: u32) -> &CatalogIndex {
        &self.catalogs[cat as usize].index
    }

    /// What a bundle or installed record is; `None` for a provider record.
    pub(super) fn info(&self, r: Record) -> Option<RecordInfo<'_>> {
        match r {
            Record::Bundle { cat, b } => {
                let idx = self.index(cat);
                let e = idx.bundle(b);
                Some(RecordInfo {
                    package: idx.package_name(b),
                    version: &e.version,
                    provides: &e.provides,
                    dependencies: &e.dependencies,
                    catalog: Some(cat as usize),
                })
            }
            Record::Installed(i) => {
                let e = &self.installed[i as usize];
                Some(RecordInfo {
                    package: &e.package,
                    version: &e.version,
                    provides: &e.provides,
                    dependencies: &e.dependencies,
                    catalog: e.catalog,
                })
            }
            Record::GvkProvider { .. } => None,
        }
    }

    fn is_dep_candidate(&self, r: Record) -> bool {
        match r {
            Record::Bundle { cat, b } => self.index(cat).is_candidate(b),
            Record::Installed(_) => true,
            Record::GvkProvider { .. } => false,
        }
    }

    /// OLM's dependency preference (`reference/olm-v0.md` §4.5): installed first, then the
    /// dependent's catalog, higher priority, the namespace's own catalogs, catalog name; then the
    /// in-catalog rank.
    pub(super) fn pref_key(&self, r: Record, owner_cat: Option<usize>) -> PrefKey<'_> {
        let key = |tier, priority, other_namespace, catalog_name, catalog_namespace, rank| PrefKey {
            tier,
            priority,
            other_namespace,
            catalog_name,
            catalog_namespace,
            rank,
        };
        match r {
            Record::Installed(i) => key(0, 0, 0, "", "", i),
            Record::Bundle { cat, b } => {
                let c = &self.catalogs[cat as usize];
                let tier = if Some(cat as usize) == owner_cat { 1 } else { 2 };
                let other_ns = u8::from(c.key.namespace != self.namespace);
                key(
                    tier,
                    -i64::from(c.priority),
                    other_ns,
                    c.key.name.as_str(),
                    c.key.namespace.as_str(),
                    c.index.bundle(b).rank,
                )
            }
            Record::GvkProvider { .. } => key(3, 0, 0, "", "", u32::MAX),
        }
    }

    /// Whether `r` meets dependency `dep` of `owner`.
    pub(super) fn dep_matches(&self, owner: Record, dep: u32, r: Record) -> bool {
        let Some(RecordInfo { dependencies, .. }) = self.info(owner) else { return false };
        let Some(d) = dependencies.get(dep as usize) else { return false };
        if !self.is_dep_candidate(r) {
            return false;
        }
        self.info(r).is_some_and(|i| d.predicate.matches(i.package, i.version, i.provides))
    }

    /// Packages of the installed bundles and catalog bundles that provide `g`.
    pub(super) fn packages_providing(&self, g: &Gvk) -> Vec<String> {
        let mut out: IndexSet<String> = IndexSet::new();
        for inst in &self.installed {
            if inst.provides.contains(g) {
                out.insert(inst.package.clone());
            }
        }
        for c in self.catalogs {
            for &b in c.index.providers(g) {
                out.insert(c.index.package_name(b).to_string());
            }
        }
        out.into_iter().collect()
    }

    /// Every package installed or in a visible catalog.
    pub(super) fn all_packages(&self) -> Vec<String> {
        let mut out: IndexSet<String> = IndexSet::new();
        for inst in &self.installed {
            out.insert(inst.package.clone());
        }
        for c in self.catalogs {
            for p in c.index.packages() {
                out.insert(p.name.clone());
            }
        }
        out.into_iter().collect()
    }

    /// Records of package `p`: installed ones, then every catalog's bundles.
    pub(super) fn package_records(&self, p: &str) -> Vec<Record> {
        let mut out = Vec::new();
        for (i, inst) in self.installed.iter().enumerate() {
            if inst.package == p {
                out.push(Record::Installed(i as u32));
            }
        }
        for (c, cat) in self.catalogs.iter().enumerate() {
            if let Some((_, pkg)) = cat.index.package(p) {
                out.extend(pkg.bundles.iter().map(|&b| Record::Bundle { cat: c as u32, b }));
            }
        }
        out
    }

    /// The channel a record is taken from: the one a Subscription took it from, else the first
    /// channel whose candidate chain holds it.
    pub(super) fn channel_of(&self, r: Record) -> Option<String> {
        for p in &self.plans {
            if let Some(c) = p.candidate_channel.get(&r)
                && !c.is_empty()
            {
                return Some(c.clone());
            }
        }
        match r {
            Record::Bundle { cat, b } => self.index(cat).channels_of(b).first().map(|s| s.to_string()),
            Record::Installed(i) => {
                let inst = &self.installed[i as usize];
                match (inst.catalog, inst.bundle) {
                    (Some(c), Some(b)) => self.catalogs[c].index.channels_of(b).first().map(|s| s.to_string()),
                    _ => None,
                }
            }
            Record::GvkProvider { .. } => None,
        }
    }

    /// `dns-operator 0.6.0 (stable, catalog olm/community)` / `installed dns-operator.v0.5.0 (dns-operator 0.5.0)`.
    pub(super) fn describe(&self, r: Record, gvks: &IndexSet<Gvk>, pkgs: &IndexSet<String>) -> String {
        match r {
            Record::Bundle { cat, b } => {
                let idx = self.index(cat);
                let e = idx.bundle(b);
                let ch = self.channel_of(r).unwrap_or_else(|| "no channel".into());
                format!(
                    "{} {} ({}, {}, catalog {})",
                    idx.package_name(b),
                    e.version,
                    e.name,
                    ch,
                    self.catalogs[cat as usize].key
                )
            }
            Record::Installed(i) => {
                let e = &self.installed[i as usize];
                format!("installed {} ({} {})", e.name, e.package, e.version)
            }
            Record::GvkProvider { gvk, pkg } => format!(
                "package {} as provider of {}",
                pkgs.get_index(pkg as usize).map(String::as_str).unwrap_or("?"),
                gvks.get_index(gvk as usize).map(display_gvk).unwrap_or_default()
            ),
        }
    }

    /// The CSV name of a bundle or installed record (empty for a provider record).
    pub(super) fn bundle_name(&self, r: Record) -> String {
        match r {
            Record::Bundle { cat, b } => self.index(cat).bundle(b).name.clone(),
            Record::Installed(i) => self.installed[i as usize].name.clone(),
            Record::GvkProvider { .. } => String::new(),
        }
    }
}

/// Describes the installed bundles of a namespace with what the catalogs know about them.
pub(super) fn installed_infos(catalogs: &[CatalogInput], installed: &[&InstalledBundle]) -> Vec<InstalledInfo> {
    installed
        .iter()
        .map(|ib| {
            let preferred = ib.catalog.as_ref().and_then(|k| catalogs.iter().position(|c| &c.key == k));
            let found = preferred
                .and_then(|c| catalogs[c].index.bundle_in(ib.package.as_deref(), &ib.name).map(|b| (c, b)))
                .or_else(|| {
                    catalogs
                        .iter()
                        .enumerate()
                        .find_map(|(c, cat)| cat.index.bundle_in(ib.package.as_deref(), &ib.name).map(|b| (c, b)))
                })
                // A name the catalogs know only in another package: that bundle (what the CSV
                // provides is the bundle's, whatever package its annotation names).
                .or_else(|| {
                    catalogs.iter().enumerate().find_map(|(c, cat)| cat.index.bundle_by_name(&ib.name).map(|b| (c, b)))
                });
            match found {
                Some((c, b)) => {
                    let idx = &catalogs[c].index;
                    let e = idx.bundle(b);
                    InstalledInfo {
                        name: ib.name.clone(),
                        package: ib.package.clone().unwrap_or_else(|| idx.package_name(b).to_string()),
                        version: ib.version.clone().unwrap_or_else(|| e.version.clone()),
                        catalog: Some(c),
                        bundle: Some(b),
                        provides: e.provides.clone(),
                        dependencies: e.dependencies.clone(),
                        image: e.image.clone(),
                    }
                }
                None => not_in_catalogs(ib, preferred),
            }
        })
        .collect()
}

/// An installed bundle no catalog has: package and version from the CSV, else from its name.
fn not_in_catalogs(ib: &InstalledBundle, preferred: Option<usize>) -> InstalledInfo {
    let inferred = split_csv_name(&ib.name);
    InstalledInfo {
        name: ib.name.clone(),
        package: ib
            .package
            .clone()
            .or_else(|| inferred.as_ref().map(|(p, _)| p.clone()))
            .unwrap_or_else(|| ib.name.clone()),
        version: ib
            .version
            .clone()
            .or_else(|| inferred.as_ref().map(|(_, v)| v.clone()))
            .unwrap_or_else(|| Version::new(0, 0, 0)),
        catalog: preferred,
        bundle: None,
        provides: Vec::new(),
        dependencies: Vec::new(),
        image: String::new(),
    }
}
