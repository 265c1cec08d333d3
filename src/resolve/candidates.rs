//! Candidate selection: one Subscription checked against its catalog (catalog, package, channel,
//! `versionRange`, `startingCSV`) and its candidates listed in OLM's order of preference, or the
//! reason it has none.
//!
//! A first install takes the channel's entries head first (the named channel, or the default
//! channel then the others), filtered by `startingCSV` and `versionRange`; an installed bundle moves
//! one upgrade edge at a time (`replaces`, `skips`, `skipRange`), newest first, staying put as the
//! last resort (`reference/olm-v0.md` §4.3–4.4).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use petgraph::graph::{DiGraph, NodeIndex};
use semver::Version;

use crate::catalog::semver_range::VersionRange;

use super::explain::Explanation;
use super::index::{BundleIdx, CatalogIndex, ChannelInfo, PackageInfo, join_and};
use super::namespace::{InstalledInfo, Record, SubPlan};
use super::{CatalogInput, CatalogSourceKey, ErrorKind, SubscriptionRequest};

/// Why a Subscription has no candidates: the kind of failure and its explanation (the
/// resolver adds the Subscription's name and namespace).
pub(super) struct Refusal {
    pub(super) kind: ErrorKind,
    pub(super) explanation: Explanation,
}

impl Refusal {
    fn new(kind: ErrorKind, explanation: Explanation) -> Refusal {
        Refusal { kind, explanation }
    }
}

/// Checks one Subscription (at position `input` of the input) against its catalog and selects
/// its candidates in OLM's order of preference. `installed` are the namespace's installed
/// bundles. The error names what is wrong (catalog, package, channel, range, startingCSV, an
/// unreachable version) and what to do.
pub(super) fn select(
    catalogs: &[CatalogInput],
    installed: &[InstalledInfo],
    sub: &SubscriptionRequest,
    input: usize,
) -> Result<SubPlan, Refusal> {
    let key = CatalogSourceKey::new(&sub.source_namespace, &sub.source);
    let cat = find_catalog(catalogs, sub, &key)?;
    let idx = &catalogs[cat].index;
    let pkg = find_package(catalogs, idx, sub, &key)?;
    let (channels, channel_label) = channels_to_consider(pkg, sub, &key)?;
    if let Err(e) = &channels[0].order {
        let m = format!(
            "catalog {key}: {e}; until the catalog is fixed, subscription {} cannot resolve from this channel",
            sub.name
        );
        return Err(Refusal::new(ErrorKind::BrokenChannel, Explanation::fact(m, "")));
    }
    let range = version_range(sub)?;
    let current = match &sub.installed_csv {
        Some(name) => installed.iter().position(|i| &i.name == name),
        None => installed.iter().position(|i| i.package == sub.package),
    };
    let plan = SubPlan {
        input,
        catalog: cat,
        package: pkg.name.clone(),
        channel_label,
        candidates: HashMap::new(),
        candidate_channel: HashMap::new(),
        current: current.map(|c| c as u32),
        note: None,
    };
    let mut selection = Selection { sub, key, cat: cat as u32, idx, pkg, channels, range, plan };
    match current {
        None => selection.first_install()?,
        Some(ci) => selection.upgrade(&installed[ci], ci as u32)?,
    }
    Ok(selection.plan)
}

/// The Subscription's catalog (an index into `catalogs`), which must exist and be valid.
fn find_catalog(
    catalogs: &[CatalogInput],
    sub: &SubscriptionRequest,
    key: &CatalogSourceKey,
) -> Result<usize, Refusal> {
    let Some(cat) = catalogs.iter().position(|c| &c.key == key) else {
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
        return Err(Refusal::new(
            ErrorKind::MissingCatalog,
            Explanation::fact(m, "fix spec.source and spec.sourceNamespace or create the CatalogSource"),
        ));
    };
    if let Some(m) = catalogs[cat].index.invalid() {
        return Err(Refusal::new(
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
    Ok(cat)
}

/// The Subscription's package in its catalog; when missing, where else it is offered or which
/// near names exist.
fn find_package<'i>(
    catalogs: &[CatalogInput],
    idx: &'i CatalogIndex,
    sub: &SubscriptionRequest,
    key: &CatalogSourceKey,
) -> Result<&'i PackageInfo, Refusal> {
    if let Some((_, pkg)) = idx.package(&sub.package) {
        return Ok(pkg);
    }
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
        Explanation::fact(format!("{m}; no visible catalog offers it"), near_names_hint(catalogs, &sub.package))
    };
    Err(Refusal::new(ErrorKind::MissingPackage, e))
}

/// The hint for a package no catalog offers: a near name (a typo) is named — within two edits,
/// and at most a third of the longer name, so that a short name is not "near" every other short
/// name; else the package name is to be checked.
fn near_names_hint(catalogs: &[CatalogInput], package: &str) -> String {
    let near_enough = |p: &str| {
        let d = strsim::levenshtein(p, package);
        d <= 2 && d * 3 <= p.chars().count().max(package.chars().count())
    };
    let near: Vec<&str> = catalogs
        .iter()
        .flat_map(|c| c.index.packages().iter().map(|p| p.name.as_str()))
        .filter(|p| near_enough(p))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    match near[..] {
        [] => "check the package name in spec.name".to_string(),
        [one] => format!("did you mean package {one}? check the package name in spec.name"),
        _ => format!(
            "check the package name in spec.name; near names: {}",
            join_and(&near.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        ),
    }
}

/// The channels to take candidates from, in order, and how explanations name them: the named
/// channel, or the default channel and then the others.
fn channels_to_consider<'i>(
    pkg: &'i PackageInfo,
    sub: &SubscriptionRequest,
    key: &CatalogSourceKey,
) -> Result<(Vec<&'i ChannelInfo>, String), Refusal> {
    if let Some(name) = sub.channel.as_deref().filter(|c| !c.is_empty()) {
        let Some(ch) = pkg.channel(name) else {
            let m = format!(
                "channel {name} does not exist in package {} of catalog {key}; the available channels are {}",
                pkg.name,
                pkg.channel_list()
            );
            let e = Explanation::fact(m, "set spec.channel to one of them");
            return Err(Refusal::new(ErrorKind::MissingChannel, e));
        };
        return Ok((vec![ch], format!("channel {name}")));
    }
    let names: Vec<&str> = pkg.channels.iter().map(|c| c.name.as_str()).collect();
    let Some(default) = &pkg.default_channel else {
        let m = format!(
            "package {} has no defaultChannel in catalog {key} and subscription {} names no channel",
            pkg.name, sub.name
        );
        let e = Explanation::fact(m, format!("set spec.channel to one of {}", join_and(&names)));
        return Err(Refusal::new(ErrorKind::MissingDefaultChannel, e));
    };
    let Some(d) = pkg.channel(default) else {
        let m = format!(
            "defaultChannel {default:?} of package {} (catalog {key}) does not name any channel; the existing channels are {}",
            pkg.name,
            join_and(&names)
        );
        let e = Explanation::fact(m, "set spec.channel to one of them, or fix defaultChannel in the catalog");
        return Err(Refusal::new(ErrorKind::MissingDefaultChannel, e));
    };
    let mut channels = vec![d];
    channels.extend(pkg.channels.iter().filter(|c| c.name != *default));
    Ok((channels, format!("the default channel {default} (then the other channels)")))
}

/// `spec.versionRange`, parsed (OLM v1 syntax); `None` when empty.
fn version_range(sub: &SubscriptionRequest) -> Result<Option<VersionRange>, Refusal> {
    let Some(r) = sub.version_range.as_deref().filter(|r| !r.trim().is_empty()) else { return Ok(None) };
    VersionRange::olm_v1(r).map(Some).map_err(|e| {
        Refusal::new(
            ErrorKind::InvalidVersionRange,
            Explanation::fact(
                format!("spec.versionRange of subscription {}: {e}", sub.name),
                "use forms such as \">=1.2 <2\", \"~1.4\", \"1.2.x\" or an exact version",
            ),
        )
    })
}

/// The candidate entries of a channel, head first: (bundle, entry index).
fn ordered(ch: &ChannelInfo) -> Vec<(BundleIdx, usize)> {
    match &ch.order {
        Ok(o) => o.iter().filter_map(|&e| ch.entries[e as usize].bundle.map(|b| (b, e as usize))).collect(),
        Err(_) => Vec::new(),
    }
}

/// Adds a candidate (after those already there) unless it is one already.
fn push_candidate(plan: &mut SubPlan, r: Record, ch: &str) {
    if !plan.candidates.contains_key(&r) {
        let n = plan.candidates.len();
        plan.candidates.insert(r, n);
        plan.candidate_channel.insert(r, ch.to_string());
    }
}

/// One Subscription's candidate selection, once its catalog, package and channels are known.
struct Selection<'a> {
    sub: &'a SubscriptionRequest,
    key: CatalogSourceKey,
    /// The catalog (an index into the namespace's catalogs).
    cat: u32,
    idx: &'a CatalogIndex,
    pkg: &'a PackageInfo,
    /// The channels in order; the first is the one explanations name.
    channels: Vec<&'a ChannelInfo>,
    range: Option<VersionRange>,
    plan: SubPlan,
}

impl<'a> Selection<'a> {
    fn first(&self) -> &'a ChannelInfo {
        self.channels[0]
    }

    /// The versions of a channel's candidate entries, lowest first, joined.
    fn versions_in(&self, ch: &ChannelInfo) -> String {
        let mut vs: Vec<&Version> = ordered(ch).iter().map(|(b, _)| &self.idx.bundle(*b).version).collect();
        vs.sort_by(|a, b| a.cmp_precedence(b));
        let s: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
        join_and(&s)
    }

    fn in_range(&self, v: &Version) -> bool {
        self.range.as_ref().is_none_or(|r| r.matches(v))
    }

    /// Candidates of a first install: every channel's entries head first, filtered by
    /// `startingCSV` and `versionRange`.
    fn first_install(&mut self) -> Result<(), Refusal> {
        for ch in &self.channels {
            for (b, _) in ordered(ch) {
                let e = self.idx.bundle(b);
                if self.sub.starting_csv.as_deref().is_some_and(|s| s != e.name) {
                    continue;
                }
                if !self.in_range(&e.version) {
                    continue;
                }
                push_candidate(&mut self.plan, Record::Bundle { cat: self.cat, b }, &ch.name);
            }
        }
        // A startingCSV that another entry skips is not on the channel's candidate chain, yet
        // OLM v0 installs it (its resolver filters every entry of the channel by CSV name) and
        // then upgrades along `skips` to the entry that skips it (`make compare-olm`,
        // upgrade-skips scenario).
        if self.plan.candidates.is_empty()
            && let Some(s) = &self.sub.starting_csv
        {
            for ch in &self.channels {
                let Some(b) = ch.entries.iter().find(|e| &e.name == s).and_then(|e| e.bundle) else { continue };
                if self.in_range(&self.idx.bundle(b).version) {
                    push_candidate(&mut self.plan, Record::Bundle { cat: self.cat, b }, &ch.name);
                }
            }
        }
        if self.plan.candidates.is_empty() {
            return Err(self.no_first_install());
        }
        Ok(())
    }

    /// Why a first install has no candidate: the startingCSV, the versionRange, or the channel.
    fn no_first_install(&self) -> Refusal {
        let (sub, key, first, pkg) = (self.sub, &self.key, self.first(), self.pkg);
        if let Some(s) = &sub.starting_csv {
            return Refusal::new(ErrorKind::StartingCsvNotInChannel, self.starting_csv_refused(s));
        }
        if let Some(r) = &self.range {
            let m = format!(
                "versionRange {r} matches no bundle in channel {} of package {} (catalog {key}); the channel has versions {}",
                first.name,
                pkg.name,
                self.versions_in(first)
            );
            let e = Explanation::fact(m, "widen spec.versionRange or choose another channel");
            return Refusal::new(ErrorKind::VersionRangeMatchesNothing, e);
        }
        let m = format!("channel {} of package {} (catalog {key}) has no installable bundle", first.name, pkg.name);
        Refusal::new(ErrorKind::BrokenChannel, Explanation::fact(m, ""))
    }

    /// Why `startingCSV` `s` gives no candidate: skipped, outside the range, or not in the channel.
    fn starting_csv_refused(&self, s: &str) -> Explanation {
        let (key, first, pkg) = (&self.key, self.first(), self.pkg);
        match first.entries.iter().find(|e| e.name == s) {
            Some(e) if e.skipped_by.is_some() => Explanation::fact(
                format!(
                    "startingCSV {s} is in channel {} of package {} (catalog {key}) but is skipped by {}, so OLM never installs it",
                    first.name,
                    pkg.name,
                    e.skipped_by.as_deref().unwrap_or_default(),
                ),
                format!("pick one of the channel's bundles instead ({})", self.versions_in(first)),
            ),
            Some(_) if self.range.is_some() => Explanation::fact(
                format!(
                    "startingCSV {s} is outside spec.versionRange {}",
                    self.sub.version_range.as_deref().unwrap_or_default()
                ),
                "make them agree",
            ),
            _ => {
                let names: Vec<String> = ordered(first).iter().map(|(b, _)| self.idx.bundle(*b).name.clone()).collect();
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
        }
    }

    /// Candidates of an upgrade of `cur` (installed bundle `ci`): the entries with an upgrade
    /// edge from it, newest first, then staying put when the range allows it.
    fn upgrade(&mut self, cur: &InstalledInfo, ci: u32) -> Result<(), Refusal> {
        let mut edges_outside_range: Vec<String> = Vec::new();
        for ch in &self.channels {
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
                if !self.in_range(&self.idx.bundle(b).version) {
                    edges_outside_range.push(format!("{} ({})", entry.name, self.idx.bundle(b).version));
                    continue;
                }
                push_candidate(&mut self.plan, Record::Bundle { cat: self.cat, b }, &ch.name);
            }
        }
        let stay_ok = self.in_range(&cur.version);
        if self.plan.candidates.is_empty() && !stay_ok {
            return Err(self.unreachable(cur));
        }
        if stay_ok {
            push_candidate(&mut self.plan, Record::Installed(ci), "");
        }
        if self.plan.candidates.len() == 1 && stay_ok {
            self.plan.note = no_upgrade_note(self.idx, self.first(), cur, &edges_outside_range, self.sub);
        }
        Ok(())
    }

    /// The versionRange excludes the installed bundle and every bundle one edge away.
    fn unreachable(&self, cur: &InstalledInfo) -> Refusal {
        let (key, first, pkg) = (&self.key, self.first(), self.pkg);
        let r = self.range.as_ref().map(|r| r.to_string()).unwrap_or_default();
        let path = path_to_range(self.idx, first, &cur.name, &cur.version, self.range.as_ref());
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
                    self.versions_in(first)
                ));
                String::new()
            }
        };
        Refusal::new(ErrorKind::Unreachable, Explanation::fact(m, hint))
    }
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
