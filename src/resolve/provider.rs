//! The resolvo encoding of one namespace: the [`Provider`] answering resolvo's questions
//! (`DependencyProvider`: candidates of a name, their order, their dependencies; `Interner`: how
//! names, solvables and version sets read).
//!
//! A resolvo *name* is a package (one bundle per name ⇒ one bundle per package), an API (one
//! provider solvable per name ⇒ one provider per GVK), or a requirement nothing can meet. Every
//! bundle requires "its package provides API G" for each API it provides, so two packages
//! providing one API conflict. `olm.gvk.required` and `any` become resolvo *union* requirements
//! across packages; candidates come back in OLM's order of preference, so resolvo's first choice
//! is OLM's.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Display;

use indexmap::IndexSet;
use resolvo::utils::{Pool, VersionSet};
use resolvo::{
    Candidates, Condition, ConditionId, ConditionalRequirement, Dependencies, DependencyProvider, Interner,
    KnownDependencies, NameId, Requirement, SolvableId, SolverCache, StringId, VersionSetId, VersionSetUnionId,
};
use semver::Version;

use crate::catalog::property::Gvk;

use super::index::{BundleIdx, CatalogIndex, Dependency, Predicate, display_gvk, join_and};
use super::namespace::{Namespace, PrefKey, Record, RecordInfo};

/// A resolvo name: a package, an API (GVK), or a requirement nothing can meet.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) enum SolverName {
    Package(String),
    Gvk(u32),
    Nothing,
}

/// A resolvo version set.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) enum VsKey {
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

/// Bundles of one package, channel and catalog, described together.
#[derive(PartialEq)]
struct BundleGroup {
    package: String,
    channel: String,
    catalog: String,
}

/// resolvo's view of a [`Namespace`]: the pool of names, solvables and version sets, and the
/// APIs and packages interned for provider records.
pub(super) struct Provider<'c, 'a> {
    pub(super) ctx: &'c Namespace<'a>,
    pub(super) pool: Pool<VsKey, SolverName>,
    records: RefCell<HashMap<Record, SolvableId>>,
    pub(super) gvks: RefCell<IndexSet<Gvk>>,
    pub(super) pkgs: RefCell<IndexSet<String>>,
}

impl<'c, 'a> Provider<'c, 'a> {
    pub(super) fn new(ctx: &'c Namespace<'a>) -> Self {
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
            other => SolverName::Package(self.ctx.info(other).map(|i| i.package.to_string()).unwrap_or_default()),
        };
        self.pool.intern_package_name(n)
    }

    fn gvk_id(&self, g: &Gvk) -> u32 {
        self.gvks.borrow_mut().insert_full(g.clone()).0 as u32
    }

    fn pkg_id(&self, p: &str) -> u32 {
        self.pkgs.borrow_mut().insert_full(p.to_string()).0 as u32
    }

    /// The record behind a solvable.
    pub(super) fn record(&self, s: SolvableId) -> Record {
        self.pool.resolve_solvable(s).record
    }

    /// One record in a phrase ([`Namespace::describe`]).
    pub(super) fn describe(&self, r: Record) -> String {
        self.ctx.describe(r, &self.gvks.borrow(), &self.pkgs.borrow())
    }

    /// Several records in one phrase: `foo 1.0.0, 1.1.0 and 1.2.0 (stable, catalog olm/cat)`.
    pub(super) fn describe_group(&self, rs: &[Record]) -> String {
        let mut groups: Vec<(BundleGroup, Vec<String>)> = Vec::new();
        let mut singles: Vec<String> = Vec::new();
        for &r in rs {
            match r {
                Record::Bundle { cat, b } => {
                    let idx = self.ctx.index(cat);
                    let key = BundleGroup {
                        package: idx.package_name(b).to_string(),
                        channel: self.ctx.channel_of(r).unwrap_or_else(|| "no channel".into()),
                        catalog: self.ctx.catalogs[cat as usize].key.to_string(),
                    };
                    let v = idx.bundle(b).version.to_string();
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, vs)) => vs.push(v),
                        None => groups.push((key, vec![v])),
                    }
                }
                other => singles.push(self.describe(other)),
            }
        }
        let mut parts: Vec<String> = groups.into_iter().map(|(g, vs)| self.describe_versions(rs, g, vs)).collect();
        parts.extend(singles);
        join_and(&parts)
    }

    /// The versions `vs` of one [`BundleGroup`] in a phrase; a single version reads as the
    /// record of `rs` it comes from.
    fn describe_versions(&self, rs: &[Record], group: BundleGroup, mut vs: Vec<String>) -> String {
        let BundleGroup { package: pkg, channel: ch, catalog: cat } = group;
        vs.sort_by(|a, b| match (Version::parse(a), Version::parse(b)) {
            (Ok(x), Ok(y)) => x.cmp_precedence(&y),
            _ => a.cmp(b),
        });
        vs.dedup();
        if vs.len() == 1 {
            let r = rs.iter().copied().find(|r| {
                matches!(r, Record::Bundle { .. })
                    && self.ctx.info(*r).is_some_and(|i| i.package == pkg && i.version.to_string() == vs[0])
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
    }

    /// A version set in a phrase: a Subscription's request, a record, or a requirement.
    pub(super) fn describe_vs(&self, vs: VersionSetId) -> String {
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
                .and_then(|i| i.dependencies.get(*dep as usize))
                .map(|d| d.predicate.to_string())
                .unwrap_or_default(),
        }
    }

    /// Dependency `k` of `owner` as a requirement: one version set per package that can meet it,
    /// best package (by its best record) first.
    fn dep_requirement(&self, owner: Record, k: u32, dep: &Dependency) -> ConditionalRequirement {
        let ctx = self.ctx;
        let owner_cat = ctx.info(owner).and_then(|i| i.catalog);
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

    /// The records of package `p` as candidates; bundles off their channel's candidate chain are
    /// excluded with the reason, unless a Subscription names them (OLM installs a skipped
    /// startingCSV).
    fn package_candidates(&self, p: &str) -> Candidates<SolvableId> {
        let mut c = Candidates::default();
        for r in self.ctx.package_records(p) {
            let id = self.solvable(r);
            c.candidates.push(id);
            if let Record::Bundle { cat, b } = r {
                let idx = self.ctx.index(cat);
                let chosen =
                    || idx.bundle(b).problem.is_none() && idx.invalid().is_none() && self.ctx.requested.contains(&r);
                if !idx.is_candidate(b) && !chosen() {
                    c.excluded.push((id, self.pool.intern_string(non_candidate_reason(idx, b))));
                }
            }
        }
        c
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
                    let owner_cat = self.ctx.info(*owner).and_then(|i| i.catalog);
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
        match self.pool.resolve_package_name(name).clone() {
            SolverName::Package(p) => Some(self.package_candidates(&p)),
            SolverName::Gvk(g) => {
                let gvk = self.gvks.borrow().get_index(g as usize).cloned()?;
                let mut c = Candidates::default();
                for p in self.ctx.packages_providing(&gvk) {
                    let pkg = self.pkg_id(&p);
                    c.candidates.push(self.solvable(Record::GvkProvider { gvk: g, pkg }));
                }
                Some(c)
            }
            SolverName::Nothing => None,
        }
    }

    async fn sort_candidates(&self, _solver: &SolverCache<Self>, _solvables: &mut [SolvableId]) {
        // filter_candidates already returns candidates in OLM's preference order.
    }

    async fn get_dependencies(&self, solvable: SolvableId) -> Dependencies {
        let r = self.record(solvable);
        let Some(RecordInfo { package, provides, dependencies, .. }) = self.ctx.info(r) else {
            return Dependencies::Known(KnownDependencies::default());
        };
        let mut known = KnownDependencies::default();
        let pkg_id = self.pkg_id(package);
        for g in provides {
            let gid = self.gvk_id(g);
            let name = self.pool.intern_package_name(SolverName::Gvk(gid));
            let vs = self.pool.intern_version_set(name, VsKey::Exact(Record::GvkProvider { gvk: gid, pkg: pkg_id }));
            known.requirements.push(Requirement::Single(vs).into());
        }
        for (k, d) in dependencies.iter().enumerate() {
            known.requirements.push(self.dep_requirement(r, k as u32, d));
        }
        Dependencies::Known(known)
    }
}
