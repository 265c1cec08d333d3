//! Solving one namespace: each Subscription's candidates ([`candidates`]), the resolvo problem
//! over them ([`provider`]), the search that lets a Subscription that cannot be satisfied fail
//! alone with its own explanation ([`conflict`]), and the plan built from the solution.

use std::collections::{HashMap, HashSet, VecDeque};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use resolvo::{ConditionalRequirement, Problem, Requirement, Solver, UnsolvableOrCancelled};
use semver::Version;

use super::explain::{Explanation, PassedOver};
use super::index::join_and;
use super::namespace::{Namespace, Record, RecordInfo, installed_infos};
use super::provider::{Provider, SolverName, VsKey};
use super::{CatalogInput, ErrorKind, InstalledBundle, Reason, ResolveError, ResolvedBundle, SubscriptionRequest};
use super::{candidates, conflict};

/// A failed solve: its explanation and the plans whose requests are in the conflict.
type Failure = (Explanation, Vec<usize>);

/// The result of one namespace, each entry tagged with the Subscription's input position.
#[derive(Default)]
pub(super) struct NamespaceResult {
    /// Bundles per Subscription that resolved.
    pub(super) resolved: Vec<(usize, Vec<ResolvedBundle>)>,
    /// Subscriptions that did not.
    pub(super) errors: Vec<(usize, ResolveError)>,
}

/// Solves the given plans together; installed bundles not claimed by one of them stay.
fn solve(ctx: &Namespace<'_>, active: &[usize]) -> Result<Vec<Record>, Explanation> {
    solve_involved(ctx, active).map_err(|(e, _)| e)
}

/// As [`solve`]; a failure also names the plans whose requests are in the conflict.
fn solve_involved(ctx: &Namespace<'_>, active: &[usize]) -> Result<Vec<Record>, Failure> {
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
            Err((conflict::explain(&graph, p), conflict::involved_plans(&graph, p)))
        }
        Err(UnsolvableOrCancelled::Cancelled(_)) => {
            Err((Explanation::fact("resolution was cancelled", ""), Vec::new()))
        }
    }
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
        match candidates::select(catalogs, &infos, &all_subs[i], i) {
            Ok(p) => plans.push(p),
            Err(r) => errors.push((i, ResolveError::of(&all_subs[i], r.kind, r.explanation))),
        }
    }
    let ctx = Namespace::new(catalogs, ns, infos, plans, all_subs);
    let all: Vec<usize> = (0..ctx.plans.len()).collect();
    let (accepted, solution) = match solve_involved(&ctx, &all) {
        Ok(sol) => (all, sol),
        // Add the Subscriptions one at a time: one that cannot be satisfied (alone or with the
        // ones already accepted) fails with its own explanation; the others still resolve.
        Err(first) => match solve(&ctx, &[]) {
            Ok(solution) => {
                let mut search = Search::new(&ctx, solution);
                search.run(first);
                errors.extend(search.errors);
                (search.accepted, search.solution)
            }
            Err(e) => {
                for p in &ctx.plans {
                    let sub = &all_subs[p.input];
                    let summary = format!("the bundles installed in namespace {ns} are already inconsistent");
                    let err = ResolveError::of(sub, ErrorKind::Unsatisfiable, e.clone().with_summary(summary));
                    errors.push((p.input, err));
                }
                return NamespaceResult { resolved: Vec::new(), errors };
            }
        },
    };
    let blocked = blocked_upgrade_notes(&ctx, &accepted, &solution);
    let passed = passed_over(&ctx, &accepted, &solution);
    NamespaceResult { resolved: assemble(&ctx, &accepted, &solution, &blocked, &passed), errors }
}

/// The search for the Subscriptions that fail when all of a namespace's cannot be solved
/// together.
///
/// The result is that of adding the Subscriptions one at a time, in order (one that cannot be
/// satisfied with the ones accepted before it fails with its own explanation), found with few
/// solves: a Subscription that fails alone fails first; then the longest prefix of the rest that
/// solves with the accepted ones is searched for (a failing set keeps failing as Subscriptions are
/// added), its first failing Subscription fails, and the search goes on after it. A namespace of
/// 331 Subscriptions took 331 growing solves when each was added in turn.
struct Search<'c, 'a> {
    ctx: &'c Namespace<'a>,
    /// Plans accepted so far, in order.
    accepted: Vec<usize>,
    /// Plans not yet decided, in order.
    rest: Vec<usize>,
    /// Plans already solved alone.
    screened: HashSet<usize>,
    /// The solution of `accepted` when `current`.
    solution: Vec<Record>,
    current: bool,
    errors: Vec<(usize, ResolveError)>,
}

impl<'c, 'a> Search<'c, 'a> {
    /// A search starting with nothing accepted; `solution` is that of no plan (the installed
    /// bundles).
    fn new(ctx: &'c Namespace<'a>, solution: Vec<Record>) -> Self {
        let rest = (0..ctx.plans.len()).collect();
        Search {
            ctx,
            accepted: Vec::new(),
            rest,
            screened: HashSet::new(),
            solution,
            current: true,
            errors: Vec::new(),
        }
    }

    fn with(&self, more: &[usize]) -> Vec<usize> {
        self.accepted.iter().chain(more).copied().collect()
    }

    /// Runs the search; `first` is the failure of solving every plan (accepted is empty, rest is
    /// all), the first solve of the loop.
    fn run(&mut self, first: Failure) {
        let mut known_failure = Some(first);
        while !self.rest.is_empty() {
            let attempt = match known_failure.take() {
                Some(f) => Err(f),
                None => solve_involved(self.ctx, &self.with(&self.rest)),
            };
            let (e_all, involved) = match attempt {
                Ok(s) => {
                    self.accepted.append(&mut self.rest);
                    self.solution = s;
                    self.current = true;
                    break;
                }
                Err(x) => x,
            };
            self.current = false;
            let involved: Vec<usize> = involved.into_iter().filter(|i| self.rest.contains(i)).collect();
            let hint = last_involved(&self.rest, &involved);
            if self.screen(&involved) {
                continue;
            }
            self.first_failure(e_all, hint);
        }
        if !self.current {
            // accepted solved as a prefix during the search; solve it once more for its plan.
            self.solution = solve(self.ctx, &self.accepted).unwrap_or_default();
        }
    }

    /// The Subscriptions in the conflict that fail even alone fail now (usually a dependency no
    /// catalog has); whether one did (then the rest is solved again).
    fn screen(&mut self, involved: &[usize]) -> bool {
        let mut failed_alone = false;
        for &i in involved {
            if !self.screened.insert(i) {
                continue;
            }
            if let Err(e) = solve(self.ctx, &[i]) {
                self.fail(i, e);
                self.rest.retain(|&r| r != i);
                failed_alone = true;
            }
        }
        failed_alone
    }

    /// Finds the first Subscription of `rest` that fails with the accepted ones before it; those
    /// before it are accepted, it fails. `e_all` is the failure of accepted + all of rest.
    ///
    /// accepted + rest[..=hi] fails; accepted + rest[..lo] solves. The first failing
    /// Subscription is the one at hi once lo == hi. The conflict of each failing solve names its
    /// Subscriptions: the last of them (`hint`) is where the prefix is tried next — at it, or just
    /// before it when it is hi already — so that a conflict between two Subscriptions is found in
    /// about two solves; bisection otherwise. Whichever prefixes are tried, the failure found is
    /// the first one and its explanation that of solving accepted + rest[..=hi], as with plain
    /// bisection.
    fn first_failure(&mut self, e_all: Explanation, mut hint: Option<usize>) {
        let (mut lo, mut hi, mut e_hi) = (0usize, self.rest.len() - 1, e_all);
        while lo < hi {
            let mid = match hint.take() {
                Some(g) if g >= lo && g < hi => g,
                Some(g) if g == hi && hi > lo => hi - 1,
                _ => (lo + hi) / 2,
            };
            match solve_involved(self.ctx, &self.with(&self.rest[..=mid])) {
                Ok(_) => lo = mid + 1,
                Err((e, inv)) => {
                    hi = mid;
                    e_hi = e;
                    hint = last_involved(&self.rest[..=mid], &inv);
                }
            }
        }
        self.accepted.extend(self.rest.drain(..lo));
        let failed = self.rest.remove(0);
        self.fail(failed, e_hi);
    }

    /// Plan `i` fails with explanation `e`.
    fn fail(&mut self, i: usize, e: Explanation) {
        let input = self.ctx.plans[i].input;
        let sub = &self.ctx.subs[input];
        let e = e.with_summary(format!("subscription {} cannot be resolved", sub.name));
        self.errors.push((input, ResolveError::of(sub, ErrorKind::Unsatisfiable, e)));
    }
}

/// The position in `rest` of the last of the conflict's Subscriptions.
fn last_involved(rest: &[usize], involved: &[usize]) -> Option<usize> {
    involved.iter().filter_map(|i| rest.iter().position(|r| r == i)).max()
}

/// For Subscriptions that stay on their installed bundle although upgrade candidates exist, the
/// reason the upgrade cannot be installed (found by solving again without the option to stay).
fn blocked_upgrade_notes(ctx: &Namespace<'_>, accepted: &[usize], solution: &[Record]) -> HashMap<usize, String> {
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
        let ctx2 = Namespace::new(ctx.catalogs, ctx.namespace, ctx.installed.clone(), plans, ctx.subs);
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
fn passed_over(ctx: &Namespace<'_>, accepted: &[usize], solution: &[Record]) -> HashMap<usize, PassedOver> {
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
        let ctx2 = Namespace::new(ctx.catalogs, ctx.namespace, ctx.installed.clone(), plans, ctx.subs);
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
    ctx: &Namespace<'_>,
    accepted: &[usize],
    solution: &[Record],
    blocked: &HashMap<usize, String>,
    passed: &HashMap<usize, PassedOver>,
) -> Vec<(usize, Vec<ResolvedBundle>)> {
    let chosen: Vec<Record> = solution.iter().copied().filter(|r| !matches!(r, Record::GvkProvider { .. })).collect();
    let mut g: DiGraph<Record, String> = DiGraph::new();
    let nodes: HashMap<Record, NodeIndex> = chosen.iter().map(|&r| (r, g.add_node(r))).collect();
    for &r in &chosen {
        let Some(RecordInfo { dependencies: deps, catalog: owner_cat, .. }) = ctx.info(r) else { continue };
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

fn resolved_bundle(ctx: &Namespace<'_>, sub: &SubscriptionRequest, r: Record, reason: Reason) -> ResolvedBundle {
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
