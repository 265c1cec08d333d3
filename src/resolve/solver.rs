//! The resolvo encoding of one namespace, the per-Subscription preflight checks and the
//! explanations built from resolvo's conflict graph.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::{self, Display};

use indexmap::{IndexMap, IndexSet};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use resolvo::conflict::{ConflictCause, ConflictEdge, ConflictGraph, ConflictNode};
use resolvo::utils::{Pool, VersionSet};
use resolvo::{
    Candidates, Condition, ConditionId, ConditionalRequirement, Dependencies, DependencyProvider, Interner,
    KnownDependencies, NameId, Problem, Requirement, SolvableId, Solver, SolverCache, StringId, UnsolvableOrCancelled,
    VersionSetId, VersionSetUnionId,
};
use semver::Version;

use crate::catalog::property::Gvk;

use super::explain::{Cause, Explanation, Operator, PassedOver};
use super::index::{BundleIdx, CatalogIndex, ChannelInfo, Dependency, Predicate, display_gvk, join_and};
use super::{
    CatalogInput, CatalogSourceKey, ErrorKind, InstalledBundle, Reason, ResolveError, ResolvedBundle,
    SubscriptionRequest, split_csv_name,
};
use crate::catalog::semver_range::VersionRange;

/// A solvable: a catalog bundle, an installed bundle, or "package P provides API G".
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Record {
    Bundle { cat: u32, b: BundleIdx },
    Installed(u32),
    GvkProvider { gvk: u32, pkg: u32 },
}

impl Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// A resolvo name: a package, an API (GVK), or a requirement nothing can meet.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum SolverName {
    Package(String),
    Gvk(u32),
    Nothing,
}

/// A resolvo version set.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum VsKey {
    /// The candidates of Subscription plan `i`, in preference order.
    Sub(u32),
    /// Exactly this solvable.
    Exact(Record),
    /// Dependency `dep` of `owner`, restricted to the version set's package.
    Dep { owner: Record, dep: u32 },
}

impl VersionSet for VsKey {
    type V = Record;
}

/// An installed bundle with what the resolver knows about it.
#[derive(Clone)]
struct InstalledInfo {
    name: String,
    package: String,
    version: Version,
    catalog: Option<usize>,
    bundle: Option<BundleIdx>,
    provides: Vec<Gvk>,
    dependencies: Vec<Dependency>,
    image: String,
}

/// A Subscription that passed the preflight checks.
#[derive(Clone)]
struct SubPlan {
    input: usize,
    catalog: usize,
    package: String,
    channel_label: String,
    candidates: HashMap<Record, usize>,
    candidate_channel: HashMap<Record, String>,
    current: Option<u32>,
    note: Option<String>,
}

struct Ctx<'a> {
    catalogs: &'a [CatalogInput],
    namespace: &'a str,
    installed: Vec<InstalledInfo>,
    plans: Vec<SubPlan>,
    subs: &'a [SubscriptionRequest],
    /// Every record some plan has as a candidate (the union of `plans[..].candidates`), so that
    /// `get_candidates` asks one set, not every plan, whether an off-chain bundle is requested.
    requested: HashSet<Record>,
}

type PrefKey<'a> = (u8, i64, u8, &'a str, &'a str, u32);

/// (package, version, provides, dependencies, catalog) of a bundle or installed record.
type RecordInfo<'a> = (&'a str, &'a Version, &'a [Gvk], &'a [Dependency], Option<usize>);

/// Resolved entries and errors, each tagged with the Subscription's input position.
type NamespaceResult = (Vec<(usize, Vec<ResolvedBundle>)>, Vec<(usize, ResolveError)>);

impl<'a> Ctx<'a> {
    fn new(
        catalogs: &'a [CatalogInput],
        namespace: &'a str,
        installed: Vec<InstalledInfo>,
        plans: Vec<SubPlan>,
        subs: &'a [SubscriptionRequest],
    ) -> Self {
        let requested = plans.iter().flat_map(|p| p.candidates.keys().copied()).collect();
        Ctx { catalogs, namespace, installed, plans, subs, requested }
    }

    fn index(&self, cat: u32) -> &CatalogIndex {
        &self.catalogs[cat as usize].index
    }

    /// (package, version, provides, dependencies, catalog) of a bundle or installed record.
    fn info(&self, r: Record) -> Option<RecordInfo<'_>> {
        match r {
            Record::Bundle { cat, b } => {
                let idx = self.index(cat);
                let e = idx.bundle(b);
                Some((idx.package_name(b), &e.version, &e.provides, &e.dependencies, Some(cat as usize)))
            }
            Record::Installed(i) => {
                let e = &self.installed[i as usize];
                Some((&e.package, &e.version, &e.provides, &e.dependencies, e.catalog))
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
    fn pref_key(&self, r: Record, owner_cat: Option<usize>) -> PrefKey<'_> {
        match r {
            Record::Installed(i) => (0, 0, 0, "", "", i),
            Record::Bundle { cat, b } => {
                let c = &self.catalogs[cat as usize];
                let tier = if Some(cat as usize) == owner_cat { 1 } else { 2 };
                let other_ns = u8::from(c.key.namespace != self.namespace);
                (
                    tier,
                    -i64::from(c.priority),
                    other_ns,
                    c.key.name.as_str(),
                    c.key.namespace.as_str(),
                    c.index.bundle(b).rank,
                )
            }
            Record::GvkProvider { .. } => (3, 0, 0, "", "", u32::MAX),
        }
    }

    fn dep_matches(&self, owner: Record, dep: u32, r: Record) -> bool {
        let Some((_, _, _, deps, _)) = self.info(owner) else { return false };
        let Some(d) = deps.get(dep as usize) else { return false };
        if !self.is_dep_candidate(r) {
            return false;
        }
        self.info(r).is_some_and(|(p, v, provides, _, _)| d.predicate.matches(p, v, provides))
    }

    fn packages_providing(&self, g: &Gvk) -> Vec<String> {
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

    fn all_packages(&self) -> Vec<String> {
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
    fn package_records(&self, p: &str) -> Vec<Record> {
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

    fn channel_of(&self, r: Record) -> Option<String> {
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
    fn describe(&self, r: Record, gvks: &IndexSet<Gvk>, pkgs: &IndexSet<String>) -> String {
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

    fn bundle_name(&self, r: Record) -> String {
        match r {
            Record::Bundle { cat, b } => self.index(cat).bundle(b).name.clone(),
            Record::Installed(i) => self.installed[i as usize].name.clone(),
            Record::GvkProvider { .. } => String::new(),
        }
    }

    /// What catalogs offer for a requirement nothing satisfies.
    fn availability(&self, pred: &Predicate) -> String {
        match pred {
            Predicate::Package { package, .. } => {
                let mut parts = Vec::new();
                for c in self.catalogs {
                    if let Some((_, p)) = c.index.package(package) {
                        if let Some(m) = c.index.invalid() {
                            parts.push(format!("catalog {} has package {package} but the catalog is invalid, so it serves nothing: {m}", c.key));
                            continue;
                        }
                        let mut versions: Vec<&Version> = p
                            .bundles
                            .iter()
                            .filter(|&&b| c.index.is_candidate(b))
                            .map(|&b| &c.index.bundle(b).version)
                            .collect();
                        versions.sort_by(|a, b| a.cmp_precedence(b));
                        versions.dedup();
                        let vs: Vec<String> = versions.iter().map(|v| v.to_string()).collect();
                        if vs.is_empty() {
                            parts.push(format!(
                                "catalog {} has package {package} but no installable bundle of it",
                                c.key
                            ));
                        } else {
                            parts.push(format!("catalog {} offers {package} {} only", c.key, join_and(&vs)));
                        }
                    }
                }
                let inst: Vec<String> = self
                    .installed
                    .iter()
                    .filter(|i| &i.package == package)
                    .map(|i| format!("{} {} is installed", i.name, i.version))
                    .collect();
                parts.extend(inst);
                if parts.is_empty() {
                    let keys: Vec<String> = self.catalogs.iter().map(|c| c.key.to_string()).collect();
                    format!("no visible catalog ({}) has package {package}", join_and(&keys))
                } else {
                    parts.join("; ")
                }
            }
            Predicate::Gvk(g) => {
                let keys: Vec<String> = self.catalogs.iter().map(|c| c.key.to_string()).collect();
                format!(
                    "no installable bundle in catalogs {} provides {}{}",
                    join_and(&keys),
                    display_gvk(g),
                    self.invalid_note()
                )
            }
            _ => {
                let keys: Vec<String> = self.catalogs.iter().map(|c| c.key.to_string()).collect();
                format!("no installable bundle in catalogs {} satisfies it{}", join_and(&keys), self.invalid_note())
            }
        }
    }

    /// `" (catalog X is invalid and serves nothing: …)"` for every invalid catalog, or "".
    fn invalid_note(&self) -> String {
        let notes: Vec<String> = self
            .catalogs
            .iter()
            .filter_map(|c| c.index.invalid().map(|m| format!("catalog {} is invalid and serves nothing: {m}", c.key)))
            .collect();
        if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) }
    }
}

/// Why a catalog bundle is not a candidate, for resolvo's `excluded` list.
fn non_candidate_reason(idx: &CatalogIndex, b: BundleIdx) -> String {
    if let Some(m) = idx.invalid() {
        return format!("its catalog is invalid: {m}");
    }
    let e = idx.bundle(b);
    if let Some(p) = &e.problem {
        return p.clone();
    }
    let pkg = idx.package_at(e.package);
    let mut reasons = Vec::new();
    for c in &pkg.channels {
        if let Some(entry) = c.entries.iter().find(|x| x.bundle == Some(b)) {
            match &c.order {
                Err(err) => reasons.push(err.to_string()),
                Ok(_) => match &entry.skipped_by {
                    Some(by) => reasons.push(format!("it is skipped by {by} in channel {}", c.name)),
                    None => reasons.push(format!("it is not on the replaces chain of channel {}", c.name)),
                },
            }
        }
    }
    if reasons.is_empty() { "it is in no channel".into() } else { reasons.join("; ") }
}

struct Provider<'c, 'a> {
    ctx: &'c Ctx<'a>,
    pool: Pool<VsKey, SolverName>,
    records: RefCell<HashMap<Record, SolvableId>>,
    gvks: RefCell<IndexSet<Gvk>>,
    pkgs: RefCell<IndexSet<String>>,
}

impl<'c, 'a> Provider<'c, 'a> {
    fn new(ctx: &'c Ctx<'a>) -> Self {
        Provider {
            ctx,
            pool: Pool::new(),
            records: RefCell::new(HashMap::new()),
            gvks: RefCell::new(IndexSet::new()),
            pkgs: RefCell::new(IndexSet::new()),
        }
    }

    fn solvable(&self, r: Record) -> SolvableId {
        let name = self.name_of(r);
        *self.records.borrow_mut().entry(r).or_insert_with(|| self.pool.intern_solvable(name, r))
    }

    fn name_of(&self, r: Record) -> NameId {
        let n = match r {
            Record::GvkProvider { gvk, .. } => SolverName::Gvk(gvk),
            other => SolverName::Package(self.ctx.info(other).map(|i| i.0.to_string()).unwrap_or_default()),
        };
        self.pool.intern_package_name(n)
    }

    fn gvk_id(&self, g: &Gvk) -> u32 {
        self.gvks.borrow_mut().insert_full(g.clone()).0 as u32
    }

    fn pkg_id(&self, p: &str) -> u32 {
        self.pkgs.borrow_mut().insert_full(p.to_string()).0 as u32
    }

    fn record(&self, s: SolvableId) -> Record {
        self.pool.resolve_solvable(s).record
    }

    fn describe(&self, r: Record) -> String {
        self.ctx.describe(r, &self.gvks.borrow(), &self.pkgs.borrow())
    }

    /// Several records in one phrase: `foo 1.0.0, 1.1.0 and 1.2.0 (stable, catalog olm/cat)`.
    fn describe_group(&self, rs: &[Record]) -> String {
        let mut groups: Vec<((String, String, String), Vec<String>)> = Vec::new();
        let mut singles: Vec<String> = Vec::new();
        for &r in rs {
            match r {
                Record::Bundle { cat, b } => {
                    let idx = self.ctx.index(cat);
                    let key = (
                        idx.package_name(b).to_string(),
                        self.ctx.channel_of(r).unwrap_or_else(|| "no channel".into()),
                        self.ctx.catalogs[cat as usize].key.to_string(),
                    );
                    let v = idx.bundle(b).version.to_string();
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, vs)) => vs.push(v),
                        None => groups.push((key, vec![v])),
                    }
                }
                other => singles.push(self.describe(other)),
            }
        }
        let mut parts: Vec<String> = groups
            .into_iter()
            .map(|((pkg, ch, cat), mut vs)| {
                vs.sort_by(|a, b| match (Version::parse(a), Version::parse(b)) {
                    (Ok(x), Ok(y)) => x.cmp_precedence(&y),
                    _ => a.cmp(b),
                });
                vs.dedup();
                if vs.len() == 1 {
                    let r = rs.iter().copied().find(|r| {
                        matches!(r, Record::Bundle { .. })
                            && self.ctx.info(*r).is_some_and(|i| i.0 == pkg && i.1.to_string() == vs[0])
                    });
                    r.map(|r| self.describe(r)).unwrap_or_else(|| format!("{pkg} {} ({ch}, catalog {cat})", vs[0]))
                } else if vs.len() > 6 {
                    // Long runs of versions read as the first three, the last two and a count.
                    let n = vs.len();
                    format!(
                        "{pkg} {}, {}, {}, …, {} and {} ({n} versions; {ch}, catalog {cat})",
                        vs[0],
                        vs[1],
                        vs[2],
                        vs[n - 2],
                        vs[n - 1]
                    )
                } else {
                    format!("{pkg} {} ({ch}, catalog {cat})", join_and(&vs))
                }
            })
            .collect();
        parts.extend(singles);
        join_and(&parts)
    }

    fn describe_vs(&self, vs: VersionSetId) -> String {
        match self.pool.resolve_version_set(vs) {
            VsKey::Sub(i) => {
                let plan = &self.ctx.plans[*i as usize];
                let sub = &self.ctx.subs[plan.input];
                let mut s = format!(
                    "subscription {} asks for package {} from {} of catalog {}",
                    sub.name, plan.package, plan.channel_label, self.ctx.catalogs[plan.catalog].key
                );
                if let Some(r) = &sub.version_range {
                    s.push_str(&format!(" with versionRange {r}"));
                }
                s
            }
            VsKey::Exact(r) => self.describe(*r),
            VsKey::Dep { owner, dep } => self
                .ctx
                .info(*owner)
                .and_then(|i| i.3.get(*dep as usize))
                .map(|d| d.predicate.to_string())
                .unwrap_or_default(),
        }
    }

    fn dep_requirement(&self, owner: Record, k: u32, dep: &Dependency) -> ConditionalRequirement {
        let ctx = self.ctx;
        let owner_cat = ctx.info(owner).and_then(|i| i.4);
        let packages: Vec<String> = match dep.predicate.packages(&|g| ctx.packages_providing(g)) {
            Some(set) => {
                let mut v: Vec<String> = set.into_iter().collect();
                v.sort();
                v
            }
            None => ctx.all_packages(),
        };
        let mut ranked: Vec<(PrefKey<'_>, String)> = Vec::new();
        for p in packages {
            let best = ctx
                .package_records(&p)
                .into_iter()
                .filter(|&r| ctx.dep_matches(owner, k, r))
                .map(|r| ctx.pref_key(r, owner_cat))
                .min();
            if let Some(best) = best {
                ranked.push((best, p));
            }
        }
        ranked.sort();
        let key = VsKey::Dep { owner, dep: k };
        let sets: Vec<VersionSetId> = if ranked.is_empty() {
            let name = match &dep.predicate {
                Predicate::Package { package, .. } => SolverName::Package(package.clone()),
                _ => SolverName::Nothing,
            };
            vec![self.pool.intern_version_set(self.pool.intern_package_name(name), key)]
        } else {
            ranked
                .into_iter()
                .map(|(_, p)| {
                    self.pool.intern_version_set(self.pool.intern_package_name(SolverName::Package(p)), key.clone())
                })
                .collect()
        };
        if sets.len() == 1 {
            Requirement::Single(sets[0]).into()
        } else {
            Requirement::Union(self.pool.intern_version_set_union(sets[0], sets[1..].iter().copied())).into()
        }
    }
}

impl Interner for Provider<'_, '_> {
    type NameId = NameId;
    type SolvableId = SolvableId;

    fn display_solvable(&self, solvable: SolvableId) -> impl Display + '_ {
        self.describe(self.record(solvable))
    }

    fn display_name(&self, name: NameId) -> impl Display + '_ {
        match self.pool.resolve_package_name(name) {
            SolverName::Package(p) => p.clone(),
            SolverName::Gvk(g) => self.gvks.borrow().get_index(*g as usize).map(display_gvk).unwrap_or_default(),
            SolverName::Nothing => "(nothing)".to_string(),
        }
    }

    fn display_version_set(&self, version_set: VersionSetId) -> impl Display + '_ {
        self.describe_vs(version_set)
    }

    fn display_string(&self, string_id: StringId) -> impl Display + '_ {
        self.pool.resolve_string(string_id).to_string()
    }

    fn version_set_name(&self, version_set: VersionSetId) -> NameId {
        self.pool.resolve_version_set_package_name(version_set)
    }

    fn solvable_name(&self, solvable: SolvableId) -> NameId {
        self.pool.resolve_solvable(solvable).name
    }

    fn version_sets_in_union(&self, version_set_union: VersionSetUnionId) -> impl Iterator<Item = VersionSetId> {
        self.pool.resolve_version_set_union(version_set_union)
    }

    fn resolve_condition(&self, condition: ConditionId) -> Condition {
        self.pool.resolve_condition(condition).clone()
    }
}

impl DependencyProvider for Provider<'_, '_> {
    async fn filter_candidates(
        &self,
        candidates: &[SolvableId],
        version_set: VersionSetId,
        inverse: bool,
    ) -> Vec<SolvableId> {
        let key = self.pool.resolve_version_set(version_set).clone();
        let matches = |s: &SolvableId| -> bool {
            let r = self.record(*s);
            match &key {
                VsKey::Sub(i) => self.ctx.plans[*i as usize].candidates.contains_key(&r),
                VsKey::Exact(x) => *x == r,
                VsKey::Dep { owner, dep } => self.ctx.dep_matches(*owner, *dep, r),
            }
        };
        let mut out: Vec<SolvableId> = candidates.iter().copied().filter(|s| matches(s) != inverse).collect();
        if !inverse {
            match &key {
                VsKey::Sub(i) => {
                    let plan = &self.ctx.plans[*i as usize];
                    out.sort_by_key(|s| plan.candidates.get(&self.record(*s)).copied().unwrap_or(usize::MAX));
                }
                VsKey::Dep { owner, .. } => {
                    let owner_cat = self.ctx.info(*owner).and_then(|i| i.4);
                    out.sort_by(|a, b| {
                        self.ctx
                            .pref_key(self.record(*a), owner_cat)
                            .cmp(&self.ctx.pref_key(self.record(*b), owner_cat))
                    });
                }
                VsKey::Exact(_) => {}
            }
        }
        out
    }

    async fn get_candidates(&self, name: NameId) -> Option<Candidates<SolvableId>> {
        let mut c = Candidates::default();
        match self.pool.resolve_package_name(name).clone() {
            SolverName::Package(p) => {
                for r in self.ctx.package_records(&p) {
                    let id = self.solvable(r);
                    c.candidates.push(id);
                    if let Record::Bundle { cat, b } = r {
                        let idx = self.ctx.index(cat);
                        // Off the candidate chain, unless a Subscription names it as its
                        // startingCSV (OLM installs a skipped startingCSV; `subscription_plan`).
                        let chosen = || {
                            idx.bundle(b).problem.is_none()
                                && idx.invalid().is_none()
                                && self.ctx.requested.contains(&r)
                        };
                        if !idx.is_candidate(b) && !chosen() {
                            c.excluded.push((id, self.pool.intern_string(non_candidate_reason(idx, b))));
                        }
                    }
                }
            }
            SolverName::Gvk(g) => {
                let gvk = self.gvks.borrow().get_index(g as usize).cloned()?;
                for p in self.ctx.packages_providing(&gvk) {
                    let pkg = self.pkg_id(&p);
                    c.candidates.push(self.solvable(Record::GvkProvider { gvk: g, pkg }));
                }
            }
            SolverName::Nothing => return None,
        }
        Some(c)
    }

    async fn sort_candidates(&self, _solver: &SolverCache<Self>, _solvables: &mut [SolvableId]) {
        // filter_candidates already returns candidates in OLM's preference order.
    }

    async fn get_dependencies(&self, solvable: SolvableId) -> Dependencies {
        let r = self.record(solvable);
        let Some((pkg, _, provides, deps, _)) = self.ctx.info(r) else {
            return Dependencies::Known(KnownDependencies::default());
        };
        let mut known = KnownDependencies::default();
        let pkg_id = self.pkg_id(pkg);
        for g in provides {
            let gid = self.gvk_id(g);
            let name = self.pool.intern_package_name(SolverName::Gvk(gid));
            let vs = self.pool.intern_version_set(name, VsKey::Exact(Record::GvkProvider { gvk: gid, pkg: pkg_id }));
            known.requirements.push(Requirement::Single(vs).into());
        }
        for (k, d) in deps.iter().enumerate() {
            known.requirements.push(self.dep_requirement(r, k as u32, d));
        }
        Dependencies::Known(known)
    }
}

/// Solves the given plans together; installed bundles not claimed by one of them stay.
fn solve(ctx: &Ctx<'_>, active: &[usize]) -> Result<Vec<Record>, Explanation> {
    solve_involved(ctx, active).map_err(|(e, _)| e)
}

/// As [`solve`]; a failure also names the plans whose requests are in the conflict.
fn solve_involved(ctx: &Ctx<'_>, active: &[usize]) -> Result<Vec<Record>, (Explanation, Vec<usize>)> {
    let provider = Provider::new(ctx);
    let claimed: HashSet<u32> = active.iter().filter_map(|&i| ctx.plans[i].current).collect();
    let mut reqs: Vec<ConditionalRequirement> = Vec::new();
    for &i in active {
        let name = provider.pool.intern_package_name(SolverName::Package(ctx.plans[i].package.clone()));
        reqs.push(Requirement::Single(provider.pool.intern_version_set(name, VsKey::Sub(i as u32))).into());
    }
    for (j, inst) in ctx.installed.iter().enumerate() {
        if !claimed.contains(&(j as u32)) {
            let name = provider.pool.intern_package_name(SolverName::Package(inst.package.clone()));
            reqs.push(
                Requirement::Single(provider.pool.intern_version_set(name, VsKey::Exact(Record::Installed(j as u32))))
                    .into(),
            );
        }
    }
    let mut solver = Solver::new(provider);
    match solver.solve(Problem::new().requirements(reqs)) {
        Ok(ids) => Ok(ids.iter().map(|&id| solver.provider().record(id)).collect()),
        Err(UnsolvableOrCancelled::Unsolvable(conflict)) => {
            let graph = conflict.graph(&solver);
            let p = solver.provider();
            let mut involved: Vec<usize> = graph
                .graph
                .edges(graph.root_node)
                .filter_map(|e| match e.weight() {
                    ConflictEdge::Requires(Requirement::Single(vs)) => match p.pool.resolve_version_set(*vs) {
                        VsKey::Sub(i) => Some(*i as usize),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            involved.sort_unstable();
            involved.dedup();
            Err((explain(&graph, p), involved))
        }
        Err(UnsolvableOrCancelled::Cancelled(_)) => {
            Err((Explanation::fact("resolution was cancelled", ""), Vec::new()))
        }
    }
}

/// Turns resolvo's conflict graph into an [`Explanation`]: the Subscriptions' requests, the
/// unmet or narrowly met dependencies, then one cause per conflict (a pair of operators with the
/// APIs both provide, or a package needed at two versions), each conflict with its hint.
fn explain(graph: &ConflictGraph<SolvableId>, p: &Provider<'_, '_>) -> Explanation {
    let g = &graph.graph;
    let ns = p.ctx.namespace;
    let mut out = Explanation::default();
    let mut tail: Vec<Cause> = Vec::new();
    // Breadth-first from the root so that the chain reads from the Subscription downwards.
    let mut order: Vec<NodeIndex> = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([graph.root_node]);
    while let Some(n) = queue.pop_front() {
        if !seen.insert(n) {
            continue;
        }
        order.push(n);
        for e in g.edges(n) {
            queue.push_back(e.target());
        }
    }
    for n in g.node_indices() {
        if !seen.contains(&n) {
            order.push(n);
        }
    }
    let solvable_of = |n: NodeIndex| match g[n] {
        ConflictNode::Solvable(s) => Some(s),
        _ => None,
    };
    let unresolved = graph.unresolved_node;
    // Unmet dependencies, grouped by what is required so that many candidates read as one cause.
    struct DepLine {
        requirement: String,
        met_by: String,
        unmet: bool,
        failure_message: Option<String>,
        missing_package: Option<String>,
        by: Vec<Record>,
    }
    let mut dep_lines: Vec<DepLine> = Vec::new();
    for &n in &order {
        let mut groups: Vec<(Requirement, Vec<NodeIndex>)> = Vec::new();
        for e in g.edges(n) {
            if let ConflictEdge::Requires(req) = e.weight() {
                match groups.iter_mut().find(|(r, _)| r == req) {
                    Some((_, t)) => t.push(e.target()),
                    None => groups.push((*req, vec![e.target()])),
                }
            }
        }
        for (req, targets) in groups {
            let first_vs = match req {
                Requirement::Single(vs) => vs,
                Requirement::Union(u) => match p.pool.resolve_version_set_union(u).next() {
                    Some(vs) => vs,
                    None => continue,
                },
            };
            let key = p.pool.resolve_version_set(first_vs).clone();
            let no_candidates = targets.iter().all(|t| Some(*t) == unresolved);
            let cands =
                || -> Vec<Record> { targets.iter().filter_map(|&t| solvable_of(t)).map(|s| p.record(s)).collect() };
            match (&g[n], &key) {
                (_, VsKey::Exact(Record::GvkProvider { .. })) => {} // "provides" edges: used below
                (ConflictNode::Root, VsKey::Sub(_)) => {
                    out.cause(Cause::Request {
                        request: p.describe_vs(first_vs),
                        candidates: p.describe_group(&cands()),
                    });
                }
                (ConflictNode::Root, VsKey::Exact(r)) => {
                    let c = Cause::InstalledStays { bundle: p.describe(*r) };
                    if !tail.contains(&c) {
                        tail.push(c);
                    }
                    if let Some((pkg, ..)) = p.ctx.info(*r) {
                        out.hint(format!(
                            "subscribe to package {pkg} in namespace {ns} to let {} upgrade",
                            p.ctx.bundle_name(*r)
                        ));
                    }
                }
                (ConflictNode::Solvable(s), VsKey::Dep { owner, dep }) => {
                    let Some(d) = p.ctx.info(*owner).and_then(|i| i.3.get(*dep as usize).cloned()) else { continue };
                    let (met_by, missing_package) = if no_candidates {
                        let missing = match &d.predicate {
                            Predicate::Package { package, .. } => Some(package.clone()),
                            _ => None,
                        };
                        (p.ctx.availability(&d.predicate), missing)
                    } else {
                        (p.describe_group(&cands()), None)
                    };
                    let requirement = d.predicate.to_string();
                    let src = p.record(*s);
                    match dep_lines.iter_mut().find(|l| l.requirement == requirement && l.met_by == met_by) {
                        Some(l) => l.by.push(src),
                        None => dep_lines.push(DepLine {
                            requirement,
                            met_by,
                            unmet: no_candidates,
                            failure_message: d.failure_message.clone(),
                            missing_package,
                            by: vec![src],
                        }),
                    }
                }
                _ => {}
            }
        }
    }
    for l in dep_lines {
        if l.unmet {
            out.hint(match &l.missing_package {
                Some(pkg) => format!(
                    "make a catalog that offers {} visible to namespace {ns}, or choose a bundle that does not need {pkg}",
                    l.requirement
                ),
                None => format!("make a catalog whose bundles meet {} visible to namespace {ns}", l.requirement),
            });
        }
        out.cause(Cause::Requires {
            by: p.describe_group(&l.by),
            several: l.by.len() > 1,
            requirement: l.requirement,
            met_by: l.met_by,
            unmet: l.unmet,
            failure_message: l.failure_message,
        });
    }
    // Conflicts: providers of one API grouped by the pair of packages; bundles of one package.
    let mut api_pairs: IndexMap<(u32, u32), (Vec<String>, Vec<NodeIndex>, Vec<NodeIndex>)> = IndexMap::new();
    let mut same_package: IndexMap<String, Vec<Record>> = IndexMap::new();
    for e in g.edge_references() {
        let ConflictEdge::Conflict(cause) = e.weight() else { continue };
        match cause {
            ConflictCause::ForbidMultipleInstances => {
                let (Some(a), Some(b)) = (solvable_of(e.source()), solvable_of(e.target())) else { continue };
                match (p.record(a), p.record(b)) {
                    (Record::GvkProvider { gvk, pkg: pa }, Record::GvkProvider { pkg: pb, .. }) if pa != pb => {
                        let (key, na, nb) = if pa < pb {
                            ((pa, pb), e.source(), e.target())
                        } else {
                            ((pb, pa), e.target(), e.source())
                        };
                        let api = p.gvks.borrow().get_index(gvk as usize).map(display_gvk).unwrap_or_default();
                        let entry = api_pairs.entry(key).or_default();
                        if !entry.0.contains(&api) {
                            entry.0.push(api);
                        }
                        entry.1.push(na);
                        entry.2.push(nb);
                    }
                    (Record::GvkProvider { .. }, _) | (_, Record::GvkProvider { .. }) => {}
                    (ra, rb) => {
                        let pkg = p.ctx.info(ra).map(|i| i.0.to_string()).unwrap_or_default();
                        let list = same_package.entry(pkg).or_default();
                        for r in [ra, rb] {
                            if !list.contains(&r) {
                                list.push(r);
                            }
                        }
                    }
                }
            }
            ConflictCause::Excluded => {
                let Some(s) = solvable_of(e.source()) else { continue };
                if let ConflictNode::Excluded(reason) = g[e.target()] {
                    out.cause(Cause::Excluded {
                        bundle: p.describe(p.record(s)),
                        why: p.pool.resolve_string(reason).to_string(),
                    });
                }
            }
            ConflictCause::Locked(s) => out.cause(Cause::Fact(format!("{} is locked", p.describe(p.record(*s))))),
            ConflictCause::Constrains(_) => {}
        }
    }
    // The bundles behind provider nodes: the solvables whose "provides" requirement points at them.
    let operator = |pkg: u32, nodes: &[NodeIndex]| -> Operator {
        let mut owners: Vec<Record> = Vec::new();
        for &n in nodes {
            for x in g.edges_directed(n, petgraph::Direction::Incoming) {
                if let Some(s) = solvable_of(x.source()) {
                    let r = p.record(s);
                    if !matches!(r, Record::GvkProvider { .. }) && !owners.contains(&r) {
                        owners.push(r);
                    }
                }
            }
        }
        let package = p.pkgs.borrow().get_index(pkg as usize).cloned().unwrap_or_default();
        let installed: Vec<Record> = owners.iter().copied().filter(|r| matches!(r, Record::Installed(_))).collect();
        let bundles = if !installed.is_empty() {
            p.describe_group(&installed)
        } else if owners.is_empty() {
            format!("package {package}")
        } else {
            p.describe_group(&owners)
        };
        Operator { package, bundles, installed: !installed.is_empty() }
    };
    for ((pa, pb), (apis, na, nb)) in api_pairs {
        let (mut first, mut second) = (operator(pa, &na), operator(pb, &nb));
        if second.installed && !first.installed {
            std::mem::swap(&mut first, &mut second);
        }
        let hint = match (first.installed, second.installed) {
            (true, false) | (false, true) => {
                let (inst, other) = if first.installed { (&first, &second) } else { (&second, &first) };
                format!(
                    "install {} in a namespace of its own (with its own OperatorGroup), or remove {} from namespace {ns} first",
                    other.package, inst.package
                )
            }
            _ => format!(
                "keep only one of {} and {} in namespace {ns}; install the other in a namespace of its own (with its own OperatorGroup)",
                first.package, second.package
            ),
        };
        out.cause(Cause::ApiConflict { apis, first, second, namespace: ns.to_string() });
        out.hint(hint);
    }
    for (package, bundles) in same_package {
        out.cause(Cause::SamePackage {
            package: package.clone(),
            bundles: p.describe_group(&bundles),
            namespace: ns.to_string(),
        });
        out.hint(format!(
            "make what asks for {package} in namespace {ns} (its Subscription's channel, startingCSV or versionRange, and the bundles that depend on it) agree on one version"
        ));
    }
    for c in tail {
        out.cause(c);
    }
    out
}

fn err(sub: &SubscriptionRequest, kind: ErrorKind, explanation: Explanation) -> ResolveError {
    ResolveError { subscription: sub.name.clone(), namespace: sub.namespace.clone(), kind, explanation }
}

/// Describes the installed bundles of a namespace with what the catalogs know about them.
fn installed_infos(catalogs: &[CatalogInput], installed: &[&InstalledBundle]) -> Vec<InstalledInfo> {
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
            let inferred = split_csv_name(&ib.name);
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
                None => InstalledInfo {
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
                },
            }
        })
        .collect()
}

/// Checks one Subscription against its catalog and computes its ordered candidates.
fn preflight(
    catalogs: &[CatalogInput],
    installed: &[InstalledInfo],
    sub: &SubscriptionRequest,
    input: usize,
) -> Result<SubPlan, ResolveError> {
    let key = CatalogSourceKey::new(&sub.source_namespace, &sub.source);
    let Some(cat) = catalogs.iter().position(|c| c.key == key) else {
        let known: Vec<String> = catalogs.iter().map(|c| c.key.to_string()).collect();
        let elsewhere: Vec<String> =
            catalogs.iter().filter(|c| c.index.package(&sub.package).is_some()).map(|c| c.key.to_string()).collect();
        let mut m = format!(
            "catalog {key} (spec.sourceNamespace/spec.source of subscription {}) does not exist; visible catalogs: {}",
            sub.name,
            join_and(&known)
        );
        if !elsewhere.is_empty() {
            m.push_str(&format!("; package {} is offered by {}", sub.package, join_and(&elsewhere)));
        }
        return Err(err(
            sub,
            ErrorKind::MissingCatalog,
            Explanation::fact(m, "fix spec.source and spec.sourceNamespace or create the CatalogSource"),
        ));
    };
    let idx = &catalogs[cat].index;
    if let Some(m) = idx.invalid() {
        return Err(err(
            sub,
            ErrorKind::InvalidCatalog,
            Explanation::fact(
                format!(
                    "catalog {key} is invalid, so subscription {} cannot resolve from it until the catalog is fixed: {m}",
                    sub.name
                ),
                "",
            ),
        ));
    }
    let Some((_, pkg)) = idx.package(&sub.package) else {
        let elsewhere: Vec<String> =
            catalogs.iter().filter(|c| c.index.package(&sub.package).is_some()).map(|c| c.key.to_string()).collect();
        let m = format!("package {} (spec.name) is not in catalog {key}", sub.package);
        let e = if !elsewhere.is_empty() {
            // Another catalog has it: pointing the Subscription there is the fix, empty or not.
            let empty = if idx.packages().is_empty() { " (the catalog has no packages at all)" } else { "" };
            Explanation::fact(
                format!("{m}{empty}; it is offered by {}", join_and(&elsewhere)),
                "set spec.source/spec.sourceNamespace to that catalog",
            )
        } else if idx.packages().is_empty() {
            Explanation::fact(
                format!("{m}: the catalog has no packages at all"),
                "check that the CatalogSource points at the catalog meant (an empty FBC directory or image serves nothing)",
            )
        } else {
            // A near name (a typo) is named — within two edits, and at most a third of the
            // longer name, so that a short name is not "near" every other short name; else the
            // package name is to be checked.
            let near_enough = |p: &str| {
                let d = strsim::levenshtein(p, &sub.package);
                d <= 2 && d * 3 <= p.chars().count().max(sub.package.chars().count())
            };
            let near: Vec<&str> = catalogs
                .iter()
                .flat_map(|c| c.index.packages().iter().map(|p| p.name.as_str()))
                .filter(|p| near_enough(p))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let hint = match near[..] {
                [] => "check the package name in spec.name".to_string(),
                [one] => format!("did you mean package {one}? check the package name in spec.name"),
                _ => format!(
                    "check the package name in spec.name; near names: {}",
                    join_and(&near.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                ),
            };
            Explanation::fact(format!("{m}; no visible catalog offers it"), hint)
        };
        return Err(err(sub, ErrorKind::MissingPackage, e));
    };
    // Channels to consider.
    let mut channels: Vec<&ChannelInfo> = Vec::new();
    let channel_label = match sub.channel.as_deref().filter(|c| !c.is_empty()) {
        Some(name) => {
            let Some(ch) = pkg.channel(name) else {
                return Err(err(
                    sub,
                    ErrorKind::MissingChannel,
                    Explanation::fact(
                        format!(
                            "channel {name} does not exist in package {} of catalog {key}; the available channels are {}",
                            pkg.name,
                            pkg.channel_list()
                        ),
                        "set spec.channel to one of them",
                    ),
                ));
            };
            channels.push(ch);
            format!("channel {name}")
        }
        None => {
            let names: Vec<&str> = pkg.channels.iter().map(|c| c.name.as_str()).collect();
            let Some(default) = &pkg.default_channel else {
                return Err(err(
                    sub,
                    ErrorKind::MissingDefaultChannel,
                    Explanation::fact(
                        format!(
                            "package {} has no defaultChannel in catalog {key} and subscription {} names no channel",
                            pkg.name, sub.name
                        ),
                        format!("set spec.channel to one of {}", join_and(&names)),
                    ),
                ));
            };
            let Some(d) = pkg.channel(default) else {
                return Err(err(
                    sub,
                    ErrorKind::MissingDefaultChannel,
                    Explanation::fact(
                        format!(
                            "defaultChannel {default:?} of package {} (catalog {key}) does not name any channel; the existing channels are {}",
                            pkg.name,
                            join_and(&names)
                        ),
                        "set spec.channel to one of them, or fix defaultChannel in the catalog",
                    ),
                ));
            };
            channels.push(d);
            channels.extend(pkg.channels.iter().filter(|c| c.name != *default));
            format!("the default channel {default} (then the other channels)")
        }
    };
    let first = channels[0];
    if let Err(e) = &first.order {
        return Err(err(
            sub,
            ErrorKind::BrokenChannel,
            Explanation::fact(
                format!(
                    "catalog {key}: {e}; until the catalog is fixed, subscription {} cannot resolve from this channel",
                    sub.name
                ),
                "",
            ),
        ));
    }
    let range = match sub.version_range.as_deref().filter(|r| !r.trim().is_empty()) {
        Some(r) => Some(VersionRange::olm_v1(r).map_err(|e| {
            err(
                sub,
                ErrorKind::InvalidVersionRange,
                Explanation::fact(
                    format!("spec.versionRange of subscription {}: {e}", sub.name),
                    "use forms such as \">=1.2 <2\", \"~1.4\", \"1.2.x\" or an exact version",
                ),
            )
        })?),
        None => None,
    };
    let current = match &sub.installed_csv {
        Some(name) => installed.iter().position(|i| &i.name == name),
        None => installed.iter().position(|i| i.package == sub.package),
    };
    let mut plan = SubPlan {
        input,
        catalog: cat,
        package: pkg.name.clone(),
        channel_label,
        candidates: HashMap::new(),
        candidate_channel: HashMap::new(),
        current: current.map(|c| c as u32),
        note: None,
    };
    let push = |plan: &mut SubPlan, r: Record, ch: &str| {
        if !plan.candidates.contains_key(&r) {
            let n = plan.candidates.len();
            plan.candidates.insert(r, n);
            plan.candidate_channel.insert(r, ch.to_string());
        }
    };
    let ordered = |ch: &ChannelInfo| -> Vec<(BundleIdx, usize)> {
        match &ch.order {
            Ok(o) => o.iter().filter_map(|&e| ch.entries[e as usize].bundle.map(|b| (b, e as usize))).collect(),
            Err(_) => Vec::new(),
        }
    };
    let versions_in = |ch: &ChannelInfo| -> String {
        let mut vs: Vec<&Version> = ordered(ch).iter().map(|(b, _)| &idx.bundle(*b).version).collect();
        vs.sort_by(|a, b| a.cmp_precedence(b));
        let s: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
        join_and(&s)
    };
    match current {
        None => {
            for ch in &channels {
                for (b, _) in ordered(ch) {
                    let e = idx.bundle(b);
                    if sub.starting_csv.as_deref().is_some_and(|s| s != e.name) {
                        continue;
                    }
                    if range.as_ref().is_some_and(|r| !r.matches(&e.version)) {
                        continue;
                    }
                    push(&mut plan, Record::Bundle { cat: cat as u32, b }, &ch.name);
                }
            }
            // A startingCSV that another entry skips is not on the channel's candidate chain, yet
            // OLM v0 installs it (its resolver filters every entry of the channel by CSV name) and
            // then upgrades along `skips` to the entry that skips it (`make compare-olm`,
            // upgrade-skips scenario).
            if plan.candidates.is_empty()
                && let Some(s) = &sub.starting_csv
            {
                for ch in &channels {
                    let Some(b) = ch.entries.iter().find(|e| &e.name == s).and_then(|e| e.bundle) else { continue };
                    if range.as_ref().is_none_or(|r| r.matches(&idx.bundle(b).version)) {
                        push(&mut plan, Record::Bundle { cat: cat as u32, b }, &ch.name);
                    }
                }
            }
            if plan.candidates.is_empty() {
                if let Some(s) = &sub.starting_csv {
                    let in_channel = first.entries.iter().find(|e| &e.name == s);
                    let m = match in_channel {
                        Some(e) if e.skipped_by.is_some() => Explanation::fact(
                            format!(
                                "startingCSV {s} is in channel {} of package {} (catalog {key}) but is skipped by {}, so OLM never installs it",
                                first.name,
                                pkg.name,
                                e.skipped_by.as_deref().unwrap_or_default(),
                            ),
                            format!("pick one of the channel's bundles instead ({})", versions_in(first)),
                        ),
                        Some(_) if range.is_some() => Explanation::fact(
                            format!(
                                "startingCSV {s} is outside spec.versionRange {}",
                                sub.version_range.as_deref().unwrap_or_default()
                            ),
                            "make them agree",
                        ),
                        _ => {
                            let names: Vec<String> =
                                ordered(first).iter().map(|(b, _)| idx.bundle(*b).name.clone()).collect();
                            Explanation::fact(
                                format!(
                                    "startingCSV {s} is not in channel {} of package {} (catalog {key}); the channel offers {}",
                                    first.name,
                                    pkg.name,
                                    join_and(&names)
                                ),
                                "fix spec.startingCSV",
                            )
                        }
                    };
                    return Err(err(sub, ErrorKind::StartingCsvNotInChannel, m));
                }
                if let Some(r) = &range {
                    return Err(err(
                        sub,
                        ErrorKind::VersionRangeMatchesNothing,
                        Explanation::fact(
                            format!(
                                "versionRange {r} matches no bundle in channel {} of package {} (catalog {key}); the channel has versions {}",
                                first.name,
                                pkg.name,
                                versions_in(first)
                            ),
                            "widen spec.versionRange or choose another channel",
                        ),
                    ));
                }
                return Err(err(
                    sub,
                    ErrorKind::BrokenChannel,
                    Explanation::fact(
                        format!(
                            "channel {} of package {} (catalog {key}) has no installable bundle",
                            first.name, pkg.name
                        ),
                        "",
                    ),
                ));
            }
        }
        Some(ci) => {
            let cur = &installed[ci];
            let mut edges_outside_range: Vec<String> = Vec::new();
            for ch in &channels {
                for (b, e) in ordered(ch) {
                    let entry = &ch.entries[e];
                    if entry.name == cur.name {
                        continue;
                    }
                    let edge = entry.replaces.as_deref() == Some(cur.name.as_str())
                        || entry.skips.iter().any(|s| s == &cur.name)
                        || matches!(&entry.skip_range, Some(Ok(r)) if r.matches(&cur.version));
                    if !edge {
                        continue;
                    }
                    if range.as_ref().is_some_and(|r| !r.matches(&idx.bundle(b).version)) {
                        edges_outside_range.push(format!("{} ({})", entry.name, idx.bundle(b).version));
                        continue;
                    }
                    push(&mut plan, Record::Bundle { cat: cat as u32, b }, &ch.name);
                }
            }
            let stay_ok = range.as_ref().is_none_or(|r| r.matches(&cur.version));
            if plan.candidates.is_empty() && !stay_ok {
                let r = range.as_ref().map(|r| r.to_string()).unwrap_or_default();
                let path = path_to_range(idx, first, &cur.name, &cur.version, range.as_ref());
                let mut m = format!(
                    "versionRange {r} excludes the installed {} ({}) and no bundle it admits in channel {} of package {} (catalog {key}) upgrades from {} directly; OLM moves one upgrade edge at a time",
                    cur.name, cur.version, first.name, pkg.name, cur.name
                );
                let hint = match path {
                    Some(p) if p.len() > 1 => {
                        m.push_str(&format!("; the channel reaches it as {}", p.join(" -> ")));
                        format!("set spec.versionRange to admit {} first, then widen it", p[1])
                    }
                    _ => {
                        m.push_str(&format!(
                            "; no path of upgrade edges leads from {} to a version in {r} (versions in the channel: {})",
                            cur.name,
                            versions_in(first)
                        ));
                        String::new()
                    }
                };
                return Err(err(sub, ErrorKind::Unreachable, Explanation::fact(m, hint)));
            }
            if stay_ok {
                push(&mut plan, Record::Installed(ci as u32), "");
            }
            if plan.candidates.len() == 1 && stay_ok {
                plan.note = no_upgrade_note(idx, first, cur, &edges_outside_range, sub);
            }
        }
    }
    Ok(plan)
}

/// Why an installed bundle has no upgrade, when the channel has something newer.
fn no_upgrade_note(
    idx: &CatalogIndex,
    ch: &ChannelInfo,
    cur: &InstalledInfo,
    outside_range: &[String],
    sub: &SubscriptionRequest,
) -> Option<String> {
    let Ok(order) = &ch.order else { return None };
    let head = order.first().and_then(|&e| ch.entries[e as usize].bundle)?;
    let head_entry = idx.bundle(head);
    if head_entry.name == cur.name {
        return Some(format!("at the head of channel {}", ch.name));
    }
    if !outside_range.is_empty() {
        return Some(format!(
            "the upgrades from {} ({}) lie outside spec.versionRange {}; widen it to move on",
            cur.name,
            join_and(outside_range),
            sub.version_range.as_deref().unwrap_or_default()
        ));
    }
    let newer = head_entry.version.cmp_precedence(&cur.version) == std::cmp::Ordering::Greater;
    if !newer {
        return None;
    }
    let mut m = format!("no upgrade edge from the installed {} ({}) in channel {}", cur.name, cur.version, ch.name);
    if !ch.entries.iter().any(|e| e.name == cur.name) {
        m.push_str(" (it is not an entry of the channel)");
    }
    let mut pre_notes = Vec::new();
    if !cur.version.pre.is_empty() {
        for e in &ch.entries {
            if let Some(Ok(r)) = &e.skip_range
                && !r.matches(&cur.version)
                && r.matches_release_of(&cur.version)
            {
                let mut release = cur.version.clone();
                release.pre = semver::Prerelease::EMPTY;
                release.build = semver::BuildMetadata::EMPTY;
                pre_notes.push(format!(
                    "its version {} is a pre-release that sorts below {release}, so it is outside the skipRange {r} of {}; the catalog can admit pre-releases with a -0 floor (e.g. >={release}-0), or reinstall {} directly",
                    cur.version, e.name, e.name
                ));
            }
        }
    }
    if pre_notes.is_empty() {
        m.push_str(&format!(
            ": no entry replaces it, skips it, or has a skipRange that holds {}; the channel head is {} ({}); reinstall at the head or ask the catalog author for an edge",
            cur.version, head_entry.name, head_entry.version
        ));
    } else {
        m.push_str(": ");
        m.push_str(&pre_notes.join("; "));
    }
    Some(m)
}

/// Shortest path of upgrade edges (petgraph) from `from` to the first entry in `range`.
fn path_to_range(
    idx: &CatalogIndex,
    ch: &ChannelInfo,
    from: &str,
    from_version: &Version,
    range: Option<&VersionRange>,
) -> Option<Vec<String>> {
    let range = range?;
    let g: DiGraph<String, _> = idx.upgrade_graph(ch);
    let candidates: HashSet<usize> = ch.order.as_ref().ok()?.iter().map(|&e| e as usize).collect();
    // Start: the node of `from`, or (when it is not an entry) every entry with an edge from it.
    let mut queue: VecDeque<NodeIndex> = VecDeque::new();
    let mut prev: HashMap<NodeIndex, Option<NodeIndex>> = HashMap::new();
    match g.node_indices().find(|&n| g[n] == from) {
        Some(n) => {
            prev.insert(n, None);
            queue.push_back(n);
        }
        None => {
            for (i, e) in ch.entries.iter().enumerate() {
                let edge = e.replaces.as_deref() == Some(from)
                    || e.skips.iter().any(|s| s == from)
                    || matches!(&e.skip_range, Some(Ok(r)) if r.matches(from_version));
                if edge && candidates.contains(&i) {
                    let n = NodeIndex::new(i);
                    prev.insert(n, None);
                    queue.push_back(n);
                }
            }
        }
    }
    while let Some(n) = queue.pop_front() {
        let i = n.index();
        let is_target = candidates.contains(&i)
            && g[n] != from
            && ch.entries[i].bundle.is_some_and(|b| range.matches(&idx.bundle(b).version));
        if is_target {
            let mut path = vec![g[n].clone()];
            let mut cur = n;
            while let Some(Some(p)) = prev.get(&cur) {
                path.push(g[*p].clone());
                cur = *p;
            }
            if g[cur] != from {
                path.push(from.to_string());
            }
            path.reverse();
            return Some(path);
        }
        for next in g.neighbors(n) {
            if candidates.contains(&next.index()) && !prev.contains_key(&next) {
                prev.insert(next, Some(n));
                queue.push_back(next);
            }
        }
    }
    None
}

/// Resolves the Subscriptions `subs` (indexes into `all_subs`) of namespace `ns`.
pub(super) fn resolve_namespace(
    catalogs: &[CatalogInput],
    ns: &str,
    installed: &[&InstalledBundle],
    subs: &[usize],
    all_subs: &[SubscriptionRequest],
) -> NamespaceResult {
    let infos = installed_infos(catalogs, installed);
    let mut errors: Vec<(usize, ResolveError)> = Vec::new();
    let mut plans = Vec::new();
    for &i in subs {
        match preflight(catalogs, &infos, &all_subs[i], i) {
            Ok(p) => plans.push(p),
            Err(e) => errors.push((i, e)),
        }
    }
    let ctx = Ctx::new(catalogs, ns, infos, plans, all_subs);
    let all: Vec<usize> = (0..ctx.plans.len()).collect();
    let (accepted, solution) = match solve_involved(&ctx, &all) {
        Ok(sol) => (all, sol),
        Err(first) => {
            // Add the Subscriptions one at a time: one that cannot be satisfied (alone or with the
            // ones already accepted) fails with its own explanation; the others still resolve.
            let mut accepted = Vec::new();
            let mut solution = match solve(&ctx, &[]) {
                Ok(s) => s,
                Err(e) => {
                    for p in &ctx.plans {
                        let sub = &all_subs[p.input];
                        errors.push((
                            p.input,
                            err(
                                sub,
                                ErrorKind::Unsatisfiable,
                                e.clone().with_summary(format!(
                                    "the bundles installed in namespace {ns} are already inconsistent"
                                )),
                            ),
                        ));
                    }
                    return (Vec::new(), errors);
                }
            };
            // The result is that of adding the Subscriptions one at a time, in order (one that cannot
            // be satisfied with the ones accepted before it fails with its own explanation), found
            // with few solves: a Subscription that fails alone fails first; then the longest prefix
            // of the rest that solves with the accepted ones is searched for (a failing set keeps
            // failing as Subscriptions are added), its first failing Subscription fails, and the
            // search goes on after it. A namespace of 331 Subscriptions took 331 growing solves.
            let with =
                |accepted: &[usize], more: &[usize]| -> Vec<usize> { accepted.iter().chain(more).copied().collect() };
            let fail = |errors: &mut Vec<(usize, ResolveError)>, i: usize, e: Explanation| {
                let sub = &all_subs[ctx.plans[i].input];
                errors.push((
                    ctx.plans[i].input,
                    err(
                        sub,
                        ErrorKind::Unsatisfiable,
                        e.with_summary(format!("subscription {} cannot be resolved", sub.name)),
                    ),
                ));
            };
            // The position in `rest` of the last of the conflict's Subscriptions.
            let last_involved = |rest: &[usize], involved: &[usize]| -> Option<usize> {
                involved.iter().filter_map(|i| rest.iter().position(|r| r == i)).max()
            };
            let mut rest: Vec<usize> = (0..ctx.plans.len()).collect();
            let mut screened: HashSet<usize> = HashSet::new();
            let mut current = true; // `solution` is the solution of `accepted`
            // The first solve of the loop is the one just made (accepted is empty, rest is all).
            let mut known_failure = Some(first);
            while !rest.is_empty() {
                let attempt = match known_failure.take() {
                    Some(f) => Err(f),
                    None => solve_involved(&ctx, &with(&accepted, &rest)),
                };
                let (e_all, involved) = match attempt {
                    Ok(s) => {
                        accepted.extend(rest.drain(..));
                        solution = s;
                        current = true;
                        break;
                    }
                    Err(x) => x,
                };
                current = false;
                // The Subscriptions in the conflict that fail even alone fail now (usually a
                // dependency no catalog has); then solve the rest again.
                let mut failed_alone = false;
                let involved: Vec<usize> = involved.into_iter().filter(|i| rest.contains(i)).collect();
                let mut hint = last_involved(&rest, &involved);
                for &i in &involved {
                    if !screened.insert(i) {
                        continue;
                    }
                    if let Err(e) = solve(&ctx, &[i]) {
                        fail(&mut errors, i, e);
                        rest.retain(|&r| r != i);
                        failed_alone = true;
                    }
                }
                if failed_alone {
                    continue;
                }
                // accepted + rest[..=hi] fails; accepted + rest[..lo] solves. The first failing
                // Subscription is the one at hi once lo == hi. The conflict of each failing solve
                // names its Subscriptions: the last of them (`hint`) is where the prefix is tried
                // next — at it, or just before it when it is hi already — so that a conflict
                // between two Subscriptions is found in about two solves; bisection otherwise.
                // Whichever prefixes are tried, the failure found is the first one and its
                // explanation that of solving accepted + rest[..=hi], as with plain bisection.
                let (mut lo, mut hi, mut e_hi) = (0usize, rest.len() - 1, e_all);
                while lo < hi {
                    let mid = match hint.take() {
                        Some(g) if g >= lo && g < hi => g,
                        Some(g) if g == hi && hi > lo => hi - 1,
                        _ => (lo + hi) / 2,
                    };
                    match solve_involved(&ctx, &with(&accepted, &rest[..=mid])) {
                        Ok(_) => lo = mid + 1,
                        Err((e, inv)) => {
                            hi = mid;
                            e_hi = e;
                            hint = last_involved(&rest[..=mid], &inv);
                        }
                    }
                }
                accepted.extend(rest.drain(..lo));
                let failed = rest.remove(0);
                fail(&mut errors, failed, e_hi);
            }
            if !current {
                // accepted solved as a prefix during the search; solve it once more for its plan.
                solution = solve(&ctx, &accepted).unwrap_or_default();
            }
            (accepted, solution)
        }
    };
    let blocked = blocked_upgrade_notes(&ctx, &accepted, &solution);
    let passed = passed_over(&ctx, &accepted, &solution);
    (assemble(&ctx, &accepted, &solution, &blocked, &passed), errors)
}

/// For Subscriptions that stay on their installed bundle although upgrade candidates exist, the
/// reason the upgrade cannot be installed (found by solving again without the option to stay).
fn blocked_upgrade_notes(ctx: &Ctx<'_>, accepted: &[usize], solution: &[Record]) -> HashMap<usize, String> {
    let mut notes = HashMap::new();
    for &i in accepted {
        let plan = &ctx.plans[i];
        let Some(c) = plan.current else { continue };
        let cur = Record::Installed(c);
        if !solution.contains(&cur) || plan.candidates.len() < 2 {
            continue;
        }
        let mut plans = ctx.plans.clone();
        plans[i].candidates.remove(&cur);
        let mut targets: Vec<(usize, Record)> = plans[i].candidates.iter().map(|(r, p)| (*p, *r)).collect();
        targets.sort_by_key(|(p, _)| *p);
        let ctx2 = Ctx::new(ctx.catalogs, ctx.namespace, ctx.installed.clone(), plans, ctx.subs);
        if let Err(e) = solve(&ctx2, accepted) {
            let names: Vec<String> = targets.iter().map(|(_, r)| ctx.bundle_name(*r)).collect();
            notes.insert(
                i,
                format!(
                    "the upgrade from {} to {} cannot be installed, so it stays: {e}",
                    ctx.installed[c as usize].name,
                    join_and(&names)
                ),
            );
        }
    }
    notes
}

/// For Subscriptions that got a bundle other than their first candidate (the channel head, or for
/// an upgrade the newest edge): the candidates preferred to it and why none of them can be
/// installed, found by solving again with only those candidates — first the Subscription alone
/// (its own dependencies), then with the other accepted Subscriptions (a conflict with them).
fn passed_over(ctx: &Ctx<'_>, accepted: &[usize], solution: &[Record]) -> HashMap<usize, PassedOver> {
    let mut out = HashMap::new();
    for &i in accepted {
        let plan = &ctx.plans[i];
        let Some((&chosen, &rank)) = solution.iter().find_map(|r| plan.candidates.get_key_value(r)) else { continue };
        if rank == 0 || matches!(chosen, Record::Installed(_)) {
            continue;
        }
        let mut preferred: Vec<(usize, Record)> =
            plan.candidates.iter().filter(|(_, p)| **p < rank).map(|(r, p)| (*p, *r)).collect();
        preferred.sort_by_key(|(p, _)| *p);
        let mut plans = ctx.plans.clone();
        plans[i].candidates.retain(|_, p| *p < rank);
        let ctx2 = Ctx::new(ctx.catalogs, ctx.namespace, ctx.installed.clone(), plans, ctx.subs);
        let why = match solve(&ctx2, &[i]) {
            Err(e) => e,
            Ok(_) => match solve(&ctx2, accepted) {
                Err(e) => e,
                Ok(_) => continue,
            },
        };
        let bundles = preferred.iter().map(|(_, r)| ctx.bundle_name(*r)).collect();
        out.insert(i, PassedOver { bundles, why });
    }
    out
}

/// Builds the plan: each Subscription's bundle, then the dependencies reached from it (petgraph
/// breadth-first over "requires" edges), each with its reason.
fn assemble(
    ctx: &Ctx<'_>,
    accepted: &[usize],
    solution: &[Record],
    blocked: &HashMap<usize, String>,
    passed: &HashMap<usize, PassedOver>,
) -> Vec<(usize, Vec<ResolvedBundle>)> {
    let chosen: Vec<Record> = solution.iter().copied().filter(|r| !matches!(r, Record::GvkProvider { .. })).collect();
    let mut g: DiGraph<Record, String> = DiGraph::new();
    let nodes: HashMap<Record, NodeIndex> = chosen.iter().map(|&r| (r, g.add_node(r))).collect();
    for &r in &chosen {
        let Some((_, _, _, deps, owner_cat)) = ctx.info(r) else { continue };
        for (k, d) in deps.iter().enumerate() {
            let best = chosen
                .iter()
                .copied()
                .filter(|&s| ctx.dep_matches(r, k as u32, s))
                .min_by(|a, b| ctx.pref_key(*a, owner_cat).cmp(&ctx.pref_key(*b, owner_cat)));
            if let Some(s) = best {
                g.add_edge(nodes[&r], nodes[&s], d.predicate.to_string());
            }
        }
    }
    let sub_choice: HashMap<usize, Record> = accepted
        .iter()
        .filter_map(|&i| chosen.iter().copied().find(|r| ctx.plans[i].candidates.contains_key(r)).map(|r| (i, r)))
        .collect();
    let sub_records: HashSet<Record> = sub_choice.values().copied().collect();
    let mut assigned: HashSet<Record> = HashSet::new();
    let mut out = Vec::new();
    for &i in accepted {
        let plan = &ctx.plans[i];
        let sub = &ctx.subs[plan.input];
        let Some(&r) = sub_choice.get(&i) else { continue };
        let mut entries = Vec::new();
        let reason = match (r, plan.current) {
            (Record::Installed(_), _) => {
                Reason::Installed { note: blocked.get(&i).cloned().or_else(|| plan.note.clone()) }
            }
            (_, Some(c)) => Reason::Upgrade { from: ctx.installed[c as usize].name.clone() },
            _ => Reason::Requested,
        };
        assigned.insert(r);
        let mut own = resolved_bundle(ctx, sub, r, reason);
        own.passed_over = passed.get(&i).cloned();
        entries.push(own);
        let mut queue = VecDeque::from([nodes[&r]]);
        let mut seen = HashSet::from([nodes[&r]]);
        while let Some(n) = queue.pop_front() {
            for e in g.edges(n) {
                let t = e.target();
                if !seen.insert(t) {
                    continue;
                }
                queue.push_back(t);
                let dep = g[t];
                if sub_records.contains(&dep) || !assigned.insert(dep) {
                    continue;
                }
                let requirement: Vec<String> = g.edges_connecting(n, t).map(|x| x.weight().clone()).collect();
                let reason = Reason::Dependency {
                    of: ctx.bundle_name(g[n]),
                    requirement: join_and(&requirement),
                    already_installed: matches!(dep, Record::Installed(_)),
                };
                entries.push(resolved_bundle(ctx, sub, dep, reason));
            }
        }
        out.push((plan.input, entries));
    }
    out
}

fn resolved_bundle(ctx: &Ctx<'_>, sub: &SubscriptionRequest, r: Record, reason: Reason) -> ResolvedBundle {
    let (package, bundle, version, catalog, image, entry) = match r {
        Record::Bundle { cat, b } => {
            let idx = ctx.index(cat);
            let e = idx.bundle(b);
            (
                idx.package_name(b).to_string(),
                e.name.clone(),
                e.version.clone(),
                Some(ctx.catalogs[cat as usize].key.clone()),
                e.image.clone(),
                Some(e),
            )
        }
        Record::Installed(i) => {
            let e = &ctx.installed[i as usize];
            let entry = e.catalog.zip(e.bundle).map(|(c, b)| ctx.catalogs[c].index.bundle(b));
            (
                e.package.clone(),
                e.name.clone(),
                e.version.clone(),
                e.catalog.map(|c| ctx.catalogs[c].key.clone()),
                e.image.clone(),
                entry,
            )
        }
        Record::GvkProvider { .. } => (String::new(), String::new(), Version::new(0, 0, 0), None, String::new(), None),
    };
    let properties = crate::resolve::index::lookup_properties(&package, &version, entry);
    ResolvedBundle {
        subscription: sub.name.clone(),
        namespace: sub.namespace.clone(),
        package,
        bundle,
        version,
        channel: ctx.channel_of(r).filter(|c| !c.is_empty()),
        catalog,
        image,
        reason,
        passed_over: None,
        properties,
    }
}
