//! Conflict explanation: resolvo's conflict graph turned into an [`Explanation`] — the
//! Subscriptions' requests, the unmet or narrowly met dependencies (with what the catalogs offer
//! instead), then one cause per conflict (a pair of operators with the APIs both provide, or a
//! package needed at two versions), each with its hint. Like uv's resolver report, the graph is
//! read into data ([`Cause`]s and hints); the text is made only when the explanation is shown.

use std::collections::{HashSet, VecDeque};

use indexmap::IndexMap;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use resolvo::conflict::{ConflictCause, ConflictEdge, ConflictGraph, ConflictNode};
use resolvo::{Requirement, SolvableId};
use semver::Version;

use super::explain::{Cause, Explanation, Operator};
use super::index::{Predicate, display_gvk, join_and};
use super::namespace::{Namespace, Record};
use super::provider::{Provider, VsKey};

/// The Subscription plans (indexes into [`Namespace::plans`]) whose requests are in the conflict.
pub(super) fn involved_plans(graph: &ConflictGraph<SolvableId>, p: &Provider<'_, '_>) -> Vec<usize> {
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
    involved
}

/// Turns resolvo's conflict graph into an [`Explanation`]: the Subscriptions' requests, the
/// unmet or narrowly met dependencies, then one cause per conflict (a pair of operators with the
/// APIs both provide, or a package needed at two versions), each conflict with its hint.
pub(super) fn explain(graph: &ConflictGraph<SolvableId>, p: &Provider<'_, '_>) -> Explanation {
    let mut report = Report { graph, p, ns: p.ctx.namespace, out: Explanation::default(), tail: Vec::new() };
    let mut dep_lines = Vec::new();
    for n in report.breadth_first() {
        for (req, targets) in report.requirement_groups(n) {
            report.requirement(n, req, &targets, &mut dep_lines);
        }
    }
    for l in dep_lines {
        report.dependency(l);
    }
    let conflicts = report.conflicts();
    for (pair, apis) in conflicts.api_pairs {
        report.api_conflict(pair, apis);
    }
    for (package, bundles) in conflicts.same_package {
        report.same_package(package, &bundles);
    }
    for c in std::mem::take(&mut report.tail) {
        report.out.cause(c);
    }
    report.out
}

/// The explanation being built from one conflict graph.
struct Report<'g, 'p, 'c, 'a> {
    graph: &'g ConflictGraph<SolvableId>,
    p: &'p Provider<'c, 'a>,
    /// The namespace being resolved.
    ns: &'a str,
    out: Explanation,
    /// Causes that close the chain (installed bundles that stay).
    tail: Vec<Cause>,
}

/// An unmet or narrowly met dependency; the bundles with the same requirement met the same way
/// are grouped so that many candidates read as one cause.
struct DepLine {
    requirement: String,
    met_by: String,
    unmet: bool,
    failure_message: Option<String>,
    missing_package: Option<String>,
    by: Vec<Record>,
}

/// Two packages both providing some APIs: the APIs, and the provider nodes of each package.
#[derive(Default)]
struct ApiPair {
    apis: Vec<String>,
    first: Vec<NodeIndex>,
    second: Vec<NodeIndex>,
}

/// The conflicts of the graph: API providers by pair of packages (interned package ids, lower
/// first), bundles of one package by package.
#[derive(Default)]
struct Conflicts {
    api_pairs: IndexMap<(u32, u32), ApiPair>,
    same_package: IndexMap<String, Vec<Record>>,
}

impl Report<'_, '_, '_, '_> {
    /// Every node, breadth-first from the root so that the chain reads from the Subscription
    /// downwards, then the nodes the root does not reach.
    fn breadth_first(&self) -> Vec<NodeIndex> {
        let g = &self.graph.graph;
        let mut order: Vec<NodeIndex> = Vec::new();
        let mut seen = HashSet::new();
        let mut queue = VecDeque::from([self.graph.root_node]);
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
        order
    }

    fn solvable_of(&self, n: NodeIndex) -> Option<SolvableId> {
        match self.graph.graph[n] {
            ConflictNode::Solvable(s) => Some(s),
            _ => None,
        }
    }

    /// The requirements of node `n`, each with the nodes it points at.
    fn requirement_groups(&self, n: NodeIndex) -> Vec<(Requirement, Vec<NodeIndex>)> {
        let mut groups: Vec<(Requirement, Vec<NodeIndex>)> = Vec::new();
        for e in self.graph.graph.edges(n) {
            if let ConflictEdge::Requires(req) = e.weight() {
                match groups.iter_mut().find(|(r, _)| r == req) {
                    Some((_, t)) => t.push(e.target()),
                    None => groups.push((*req, vec![e.target()])),
                }
            }
        }
        groups
    }

    /// One requirement of node `n`: a Subscription's request, an installed bundle that stays, or
    /// a bundle's dependency (added to `dep_lines`).
    fn requirement(&mut self, n: NodeIndex, req: Requirement, targets: &[NodeIndex], dep_lines: &mut Vec<DepLine>) {
        let (p, graph) = (self.p, self.graph);
        let first_vs = match req {
            Requirement::Single(vs) => vs,
            Requirement::Union(u) => match p.pool.resolve_version_set_union(u).next() {
                Some(vs) => vs,
                None => return,
            },
        };
        let unresolved = graph.unresolved_node;
        let no_candidates = targets.iter().all(|t| Some(*t) == unresolved);
        let cands =
            || -> Vec<Record> { targets.iter().filter_map(|&t| self.solvable_of(t)).map(|s| p.record(s)).collect() };
        match (&graph.graph[n], p.pool.resolve_version_set(first_vs)) {
            (_, VsKey::Exact(Record::GvkProvider { .. })) => {} // "provides" edges: used below
            (ConflictNode::Root, VsKey::Sub(_)) => {
                let cause = Cause::Request { request: p.describe_vs(first_vs), candidates: p.describe_group(&cands()) };
                self.out.cause(cause);
            }
            (ConflictNode::Root, VsKey::Exact(r)) => self.installed_stays(*r),
            (ConflictNode::Solvable(s), VsKey::Dep { owner, dep }) => {
                let met_by = if no_candidates { None } else { Some(p.describe_group(&cands())) };
                self.dependency_line(p.record(*s), *owner, *dep, met_by, dep_lines);
            }
            _ => {}
        }
    }

    /// An installed bundle that no Subscription being resolved may change.
    fn installed_stays(&mut self, r: Record) {
        let c = Cause::InstalledStays { bundle: self.p.describe(r) };
        if !self.tail.contains(&c) {
            self.tail.push(c);
        }
        if let Some(info) = self.p.ctx.info(r) {
            self.out.hint(format!(
                "subscribe to package {} in namespace {} to let {} upgrade",
                info.package,
                self.ns,
                self.p.ctx.bundle_name(r)
            ));
        }
    }

    /// Dependency `dep` of `owner`, required by `src` and met by `met_by` (`None`: by nothing),
    /// added to the line of the same requirement met the same way.
    fn dependency_line(
        &self,
        src: Record,
        owner: Record,
        dep: u32,
        met_by: Option<String>,
        dep_lines: &mut Vec<DepLine>,
    ) {
        let Some(d) = self.p.ctx.info(owner).and_then(|i| i.dependencies.get(dep as usize).cloned()) else { return };
        let unmet = met_by.is_none();
        let (met_by, missing_package) = match met_by {
            None => {
                let missing = match &d.predicate {
                    Predicate::Package { package, .. } => Some(package.clone()),
                    _ => None,
                };
                (availability(self.p.ctx, &d.predicate), missing)
            }
            Some(m) => (m, None),
        };
        let requirement = d.predicate.to_string();
        match dep_lines.iter_mut().find(|l| l.requirement == requirement && l.met_by == met_by) {
            Some(l) => l.by.push(src),
            None => dep_lines.push(DepLine {
                requirement,
                met_by,
                unmet,
                failure_message: d.failure_message.clone(),
                missing_package,
                by: vec![src],
            }),
        }
    }

    /// A dependency line as a cause, with a hint when nothing meets it.
    fn dependency(&mut self, l: DepLine) {
        let ns = self.ns;
        if l.unmet {
            self.out.hint(match &l.missing_package {
                Some(pkg) => format!(
                    "make a catalog that offers {} visible to namespace {ns}, or choose a bundle that does not need {pkg}",
                    l.requirement
                ),
                None => format!("make a catalog whose bundles meet {} visible to namespace {ns}", l.requirement),
            });
        }
        self.out.cause(Cause::Requires {
            by: self.p.describe_group(&l.by),
            several: l.by.len() > 1,
            requirement: l.requirement,
            met_by: l.met_by,
            unmet: l.unmet,
            failure_message: l.failure_message,
        });
    }

    /// The conflict edges: providers of one API grouped by the pair of packages and bundles of
    /// one package (returned), excluded and locked bundles (added as causes).
    fn conflicts(&mut self) -> Conflicts {
        let (p, graph) = (self.p, self.graph);
        let g = &graph.graph;
        let mut conflicts = Conflicts::default();
        for e in g.edge_references() {
            let ConflictEdge::Conflict(cause) = e.weight() else { continue };
            match cause {
                ConflictCause::ForbidMultipleInstances => {
                    let (Some(a), Some(b)) = (self.solvable_of(e.source()), self.solvable_of(e.target())) else {
                        continue;
                    };
                    self.multiple_instances((a, e.source()), (b, e.target()), &mut conflicts);
                }
                ConflictCause::Excluded => {
                    let Some(s) = self.solvable_of(e.source()) else { continue };
                    if let ConflictNode::Excluded(reason) = g[e.target()] {
                        self.out.cause(Cause::Excluded {
                            bundle: p.describe(p.record(s)),
                            why: p.pool.resolve_string(reason).to_string(),
                        });
                    }
                }
                ConflictCause::Locked(s) => {
                    self.out.cause(Cause::Fact(format!("{} is locked", p.describe(p.record(*s)))))
                }
                ConflictCause::Constrains(_) => {}
            }
        }
        conflicts
    }

    /// Two solvables of one resolvo name: two packages providing one API, or two bundles of one
    /// package.
    fn multiple_instances(
        &self,
        (a, na): (SolvableId, NodeIndex),
        (b, nb): (SolvableId, NodeIndex),
        conflicts: &mut Conflicts,
    ) {
        let p = self.p;
        match (p.record(a), p.record(b)) {
            (Record::GvkProvider { gvk, pkg: pa }, Record::GvkProvider { pkg: pb, .. }) if pa != pb => {
                let (key, na, nb) = if pa < pb { ((pa, pb), na, nb) } else { ((pb, pa), nb, na) };
                let api = p.gvks.borrow().get_index(gvk as usize).map(display_gvk).unwrap_or_default();
                let entry = conflicts.api_pairs.entry(key).or_default();
                if !entry.apis.contains(&api) {
                    entry.apis.push(api);
                }
                entry.first.push(na);
                entry.second.push(nb);
            }
            (Record::GvkProvider { .. }, _) | (_, Record::GvkProvider { .. }) => {}
            (ra, rb) => {
                let pkg = p.ctx.info(ra).map(|i| i.package.to_string()).unwrap_or_default();
                let list = conflicts.same_package.entry(pkg).or_default();
                for r in [ra, rb] {
                    if !list.contains(&r) {
                        list.push(r);
                    }
                }
            }
        }
    }

    /// Package `pkg` (interned) as an operator in a conflict: the bundles behind its provider
    /// nodes, i.e. the solvables whose "provides" requirement points at them.
    fn operator(&self, pkg: u32, nodes: &[NodeIndex]) -> Operator {
        let p = self.p;
        let mut owners: Vec<Record> = Vec::new();
        for &n in nodes {
            for x in self.graph.graph.edges_directed(n, petgraph::Direction::Incoming) {
                if let Some(s) = self.solvable_of(x.source()) {
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
    }

    /// Two operators providing the same APIs, the installed one first, with the hint.
    fn api_conflict(&mut self, (pa, pb): (u32, u32), pair: ApiPair) {
        let ns = self.ns;
        let (mut first, mut second) = (self.operator(pa, &pair.first), self.operator(pb, &pair.second));
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
        self.out.cause(Cause::ApiConflict { apis: pair.apis, first, second, namespace: ns.to_string() });
        self.out.hint(hint);
    }

    /// Several bundles of one package, with the hint.
    fn same_package(&mut self, package: String, bundles: &[Record]) {
        let ns = self.ns;
        self.out.cause(Cause::SamePackage {
            package: package.clone(),
            bundles: self.p.describe_group(bundles),
            namespace: ns.to_string(),
        });
        self.out.hint(format!(
            "make what asks for {package} in namespace {ns} (its Subscription's channel, startingCSV or versionRange, and the bundles that depend on it) agree on one version"
        ));
    }
}

/// What catalogs offer for a requirement nothing satisfies.
fn availability(ctx: &Namespace<'_>, pred: &Predicate) -> String {
    let keys = || -> Vec<String> { ctx.catalogs.iter().map(|c| c.key.to_string()).collect() };
    match pred {
        Predicate::Package { package, .. } => package_availability(ctx, package),
        Predicate::Gvk(g) => {
            format!(
                "no installable bundle in catalogs {} provides {}{}",
                join_and(&keys()),
                display_gvk(g),
                invalid_note(ctx)
            )
        }
        _ => format!("no installable bundle in catalogs {} satisfies it{}", join_and(&keys()), invalid_note(ctx)),
    }
}

/// What the catalogs offer of `package`, and which of its bundles are installed.
fn package_availability(ctx: &Namespace<'_>, package: &str) -> String {
    let mut parts = Vec::new();
    for c in ctx.catalogs {
        if let Some((_, p)) = c.index.package(package) {
            if let Some(m) = c.index.invalid() {
                parts.push(format!(
                    "catalog {} has package {package} but the catalog is invalid, so it serves nothing: {m}",
                    c.key
                ));
                continue;
            }
            let mut versions: Vec<&Version> =
                p.bundles.iter().filter(|&&b| c.index.is_candidate(b)).map(|&b| &c.index.bundle(b).version).collect();
            versions.sort_by(|a, b| a.cmp_precedence(b));
            versions.dedup();
            let vs: Vec<String> = versions.iter().map(|v| v.to_string()).collect();
            if vs.is_empty() {
                parts.push(format!("catalog {} has package {package} but no installable bundle of it", c.key));
            } else {
                parts.push(format!("catalog {} offers {package} {} only", c.key, join_and(&vs)));
            }
        }
    }
    let inst: Vec<String> = ctx
        .installed
        .iter()
        .filter(|i| i.package == package)
        .map(|i| format!("{} {} is installed", i.name, i.version))
        .collect();
    parts.extend(inst);
    if parts.is_empty() {
        let keys: Vec<String> = ctx.catalogs.iter().map(|c| c.key.to_string()).collect();
        format!("no visible catalog ({}) has package {package}", join_and(&keys))
    } else {
        parts.join("; ")
    }
}

/// `" (catalog X is invalid and serves nothing: …)"` for every invalid catalog, or "".
fn invalid_note(ctx: &Namespace<'_>) -> String {
    let notes: Vec<String> = ctx
        .catalogs
        .iter()
        .filter_map(|c| c.index.invalid().map(|m| format!("catalog {} is invalid and serves nothing: {m}", c.key)))
        .collect();
    if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) }
}
