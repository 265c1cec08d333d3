//! Resolution: channel graphs, upgrade edges, dependencies; a pure function with explanations.
//!
//! [`resolve`] takes the catalogs a namespace can see, the bundles (CSVs) installed there and the
//! Subscriptions, and decides per Subscription which bundle it gets and which dependencies come
//! with it — or says, in a sentence naming packages, versions, channels and catalogs, why not.
//! It does no I/O.
//!
//! Semantics are OLM v0's (`../shared/reference/olm-v0.md` §4; upstream
//! `operator-lifecycle-manager/pkg/controller/registry/resolver/resolver.go`):
//! - Subscription candidates come from the Subscription's own catalog only (§4.3, §8 item 3): the
//!   named channel, or every channel with the default channel first when none is named; head first;
//!   `startingCSV` filters a first install; entries named in some `skips` are never candidates.
//! - An installed bundle moves one edge at a time: candidates are the entries that `replaces` it,
//!   list it in `skips`, or whose `skipRange` holds its version, newest first, with staying put as
//!   the last resort (§4.4).
//! - capstan adds `spec.versionRange` (OLM v1 `version` syntax) which filters those candidates.
//! - Dependencies (`olm.package.required`, `olm.gvk.required`, `olm.constraint` with `gvk`,
//!   `package`, `all`, `any`, `not`) may be met from any visible catalog, preferring installed
//!   bundles, then the dependent's catalog, then higher priority, then the Subscription's namespace,
//!   then catalog name; inside a catalog default channel, package name, channel name, head first
//!   (§4.5). At most one bundle per package and one provider per API (GVK) per namespace (§4.6).
//! - Installed bundles that no Subscription being resolved may upgrade stay as they are.
//!
//! The solver is [resolvo](https://docs.rs/resolvo) (CDCL SAT with a package-manager interface): a
//! resolvo "name" is a package (one bundle per name ⇒ one bundle per package) or an API (one
//! provider solvable per name ⇒ one provider per GVK); `olm.gvk.required` and `any` become resolvo
//! *union* requirements across packages; candidate order carries OLM's preference; its conflict
//! graph is turned into the explanations. All Subscriptions of a namespace are solved together; if
//! that fails, each Subscription is added in turn so that one that cannot be satisfied fails alone
//! with its own reason while the others still resolve.
//!
//! The files, as uv's resolver is split (provider, availability, report): `index.rs` the catalog
//! index; `namespace.rs` one namespace's records and the questions asked of them; `candidates.rs`
//! candidate selection per Subscription; `provider.rs` the resolvo provider; `conflict.rs` the
//! explanation of a conflict; `explain.rs` explanations as data; `solver.rs` solving a namespace
//! and building the plan. None of them imports a file that imports it.

mod candidates;
mod conflict;
pub mod explain;
pub mod index;
mod namespace;
mod provider;
mod solver;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use semver::Version;
use serde::Serialize;

pub use crate::catalog::semver_range::{Dialect, VersionRange, VersionRangeError};
pub use explain::{Cause, Explanation, Operator, PassedOver};
pub use index::CatalogIndex;

/// Identifies a catalog source: `namespace/name` (a CatalogSource object).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct CatalogSourceKey {
    /// CatalogSource namespace.
    pub namespace: String,
    /// CatalogSource name.
    pub name: String,
}

impl CatalogSourceKey {
    /// Builds a key.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        CatalogSourceKey { namespace: namespace.into(), name: name.into() }
    }
}

impl fmt::Display for CatalogSourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One catalog visible to the namespace(s) being resolved.
#[derive(Debug, Clone)]
pub struct CatalogInput {
    /// Which CatalogSource this is.
    pub key: CatalogSourceKey,
    /// `spec.priority` (default 0); higher is preferred for dependencies.
    pub priority: i32,
    /// The catalog's index, shared between resolutions.
    pub index: Arc<CatalogIndex>,
}

/// A bundle (CSV) installed in a namespace.
#[derive(Debug, Clone, Default)]
pub struct InstalledBundle {
    /// Namespace it is installed in.
    pub namespace: String,
    /// CSV name (`metadata.name`).
    pub name: String,
    /// Package, when known (from the `operatorframework.io/properties` annotation); otherwise
    /// taken from the catalog that has a bundle of this name, or from the `<package>.v<version>` name.
    pub package: Option<String>,
    /// `spec.version` of the CSV, when known; otherwise as for `package`.
    pub version: Option<Version>,
    /// The catalog it was installed from, when known.
    pub catalog: Option<CatalogSourceKey>,
}

impl InstalledBundle {
    /// The installed state of one CSV, as both the controller (from the cluster's CSVs) and
    /// `capstan resolve --installed` (from names) build it: the package and version only from
    /// what the CSV itself says — the `olm.package` property of its
    /// `operatorframework.io/properties` annotation (`{"properties":[{"type":"olm.package",
    /// "value":{"packageName":…,"version":…}}]}`, OLM `resolver/projection/properties.go`) and
    /// `spec.version` — and otherwise left to the resolver, which takes them from the catalog
    /// bundle of that name, else from the `<package>.v<version>` shape of the name. Guessing the
    /// package from the name first made an installed `strimzi-cluster-operator.v0.45.0` (package
    /// `strimzi-kafka-operator`) look like a second operator providing strimzi's APIs.
    pub fn from_csv(
        namespace: &str,
        name: &str,
        properties: Option<&str>,
        spec_version: Option<&str>,
    ) -> InstalledBundle {
        let package_property =
            properties.and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok()).and_then(|v| {
                v["properties"]
                    .as_array()
                    .and_then(|ps| ps.iter().find(|p| p["type"] == "olm.package").map(|p| p["value"].clone()))
            });
        let package = package_property
            .as_ref()
            .and_then(|v| v["packageName"].as_str())
            .filter(|p| !p.is_empty())
            .map(str::to_string);
        let parse = |v: &str| Version::parse(v.trim().trim_start_matches('v')).ok();
        let version = spec_version
            .and_then(parse)
            .or_else(|| package_property.as_ref().and_then(|v| v["version"].as_str()).and_then(parse));
        InstalledBundle { namespace: namespace.to_string(), name: name.to_string(), package, version, catalog: None }
    }
}

/// What a Subscription asks for (the fields of `spec`, plus `status.installedCSV`).
#[derive(Debug, Clone, Default)]
pub struct SubscriptionRequest {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `spec.name`: the package.
    pub package: String,
    /// `spec.channel`; `None` means the default channel first, then the others.
    pub channel: Option<String>,
    /// `spec.source`: CatalogSource name.
    pub source: String,
    /// `spec.sourceNamespace`: CatalogSource namespace.
    pub source_namespace: String,
    /// `spec.startingCSV`: the bundle for a first install.
    pub starting_csv: Option<String>,
    /// `spec.versionRange` (capstan addition, OLM v1 `version` syntax).
    pub version_range: Option<String>,
    /// `status.installedCSV`; when `None`, the installed bundle of the same package (if any) is used.
    pub installed_csv: Option<String>,
}

/// Input of [`resolve`].
#[derive(Debug, Clone, Default)]
pub struct ResolveInput {
    /// Catalogs visible to the Subscriptions.
    pub catalogs: Vec<CatalogInput>,
    /// Bundles installed, in any of the Subscriptions' namespaces.
    pub installed: Vec<InstalledBundle>,
    /// Subscriptions; each namespace is solved on its own.
    pub subscriptions: Vec<SubscriptionRequest>,
}

/// Why a bundle is in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Reason {
    /// First install requested by the Subscription.
    Requested,
    /// Upgrade of the installed bundle `from` along one upgrade edge.
    Upgrade {
        /// The installed CSV being replaced.
        from: String,
    },
    /// The installed bundle stays; `note` says why there is no upgrade when one might be expected.
    Installed {
        /// Explanation, e.g. an installed pre-release outside every skipRange.
        note: Option<String>,
    },
    /// Needed by another bundle of the plan.
    Dependency {
        /// The bundle (CSV) that needs it.
        of: String,
        /// What that bundle requires, e.g. `dns-operator 0.6.0`.
        requirement: String,
        /// The bundle is installed already and simply stays.
        already_installed: bool,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Requested => f.write_str("requested"),
            Reason::Upgrade { from } => write!(f, "upgrade from {from}"),
            Reason::Installed { note: None } => f.write_str("installed; no newer bundle along the channel"),
            Reason::Installed { note: Some(n) } => write!(f, "installed; {n}"),
            Reason::Dependency { of, requirement, already_installed } => {
                write!(f, "dependency of {of} (requires {requirement})")?;
                if *already_installed {
                    f.write_str("; already installed")?;
                }
                Ok(())
            }
        }
    }
}

/// A bundle in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedBundle {
    /// The Subscription this entry belongs to (for a dependency: the Subscription that first needs it).
    pub subscription: String,
    /// Namespace of that Subscription.
    pub namespace: String,
    /// Package.
    pub package: String,
    /// Bundle (CSV) name.
    pub bundle: String,
    /// Bundle version.
    #[serde(serialize_with = "serialize_version")]
    pub version: Version,
    /// Channel it was taken from (`None` for an installed bundle not found in any catalog).
    pub channel: Option<String>,
    /// Catalog it comes from (`None` when unknown for an installed bundle).
    pub catalog: Option<CatalogSourceKey>,
    /// Bundle image (empty when unknown).
    pub image: String,
    /// Why it is there.
    pub reason: Reason,
    /// For a Subscription's own bundle: the candidates OLM prefers to it (the channel head first)
    /// that were passed over because they cannot be installed, and why (e.g. a dependency no
    /// catalog has). `None` when it is the first candidate.
    pub passed_over: Option<PassedOver>,
    /// What install needs of the bundle's catalog entry: its properties as OLM writes them into a
    /// bundle lookup and the CSV annotation `operatorframework.io/properties` (`{type, value}`
    /// each; [`index::BundleEntry::lookup_properties`]). Only `olm.package` when the bundle is
    /// in no catalog. Not part of `capstan resolve`'s JSON.
    #[serde(skip)]
    pub properties: Vec<serde_json::Value>,
}

/// What kind of failure a [`ResolveError`] is; each has its own message that says what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
    /// `spec.source`/`spec.sourceNamespace` name no visible catalog.
    MissingCatalog,
    /// The Subscription's catalog is invalid as a whole (see [`CatalogIndex::with_invalid`]).
    InvalidCatalog,
    /// `spec.name` names no package of the catalog.
    MissingPackage,
    /// `spec.channel` names no channel of the package.
    MissingChannel,
    /// No channel named and the package's `defaultChannel` is empty or names no channel.
    MissingDefaultChannel,
    /// The channel cannot be ordered (several heads, cycle, …).
    BrokenChannel,
    /// `spec.startingCSV` is not a candidate of the channel.
    StartingCsvNotInChannel,
    /// `spec.versionRange` does not parse.
    InvalidVersionRange,
    /// `spec.versionRange` matches no bundle of the channel.
    VersionRangeMatchesNothing,
    /// The requested version cannot be reached from the installed one along upgrade edges.
    Unreachable,
    /// Dependencies or uniqueness rules cannot be met.
    Unsatisfiable,
}

/// A Subscription that cannot be resolved, with its explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolveError {
    /// Subscription name.
    pub subscription: String,
    /// Subscription namespace.
    pub namespace: String,
    /// Kind of failure (the controller maps it to the condition's reason).
    pub kind: ErrorKind,
    /// The chain of causes naming packages, versions, channels and catalogs, and the hints.
    pub explanation: Explanation,
}

impl ResolveError {
    /// The failure of Subscription `sub`.
    fn of(sub: &SubscriptionRequest, kind: ErrorKind, explanation: Explanation) -> ResolveError {
        ResolveError { subscription: sub.name.clone(), namespace: sub.namespace.clone(), kind, explanation }
    }

    /// The explanation rendered as one line (the `ResolutionFailed` condition's message).
    pub fn message(&self) -> String {
        self.explanation.to_string()
    }
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.explanation.fmt(f)
    }
}

/// Output of [`resolve`]: the plan and the Subscriptions that failed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResolveOutput {
    /// Bundles per Subscription (its own bundle first, then its dependencies), in Subscription order.
    pub resolved: Vec<ResolvedBundle>,
    /// One entry per Subscription that could not be resolved.
    pub errors: Vec<ResolveError>,
}

/// Resolves every Subscription of `input`; each namespace is solved separately, all Subscriptions
/// of one namespace together. Never panics on input; every problem becomes a [`ResolveError`].
pub fn resolve(input: &ResolveInput) -> ResolveOutput {
    let mut by_ns: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, s) in input.subscriptions.iter().enumerate() {
        by_ns.entry(s.namespace.as_str()).or_default().push(i);
    }
    let mut resolved: Vec<(usize, Vec<ResolvedBundle>)> = Vec::new();
    let mut errors: Vec<(usize, ResolveError)> = Vec::new();
    for (ns, subs) in by_ns {
        let installed: Vec<&InstalledBundle> = input.installed.iter().filter(|b| b.namespace == ns).collect();
        let out = solver::resolve_namespace(&input.catalogs, ns, &installed, &subs, &input.subscriptions);
        resolved.extend(out.resolved);
        errors.extend(out.errors);
    }
    resolved.sort_by_key(|(i, _)| *i);
    errors.sort_by_key(|(i, _)| *i);
    ResolveOutput {
        resolved: resolved.into_iter().flat_map(|(_, v)| v).collect(),
        errors: errors.into_iter().map(|(_, e)| e).collect(),
    }
}

fn serialize_version<S: serde::Serializer>(v: &Version, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Splits a CSV name of the usual form `<package>.v<semver>` (e.g. `ptp.v4.3.0-201911201000`).
pub fn split_csv_name(name: &str) -> Option<(String, Version)> {
    let mut search = 0;
    while let Some(pos) = name[search..].find(".v") {
        let at = search + pos;
        if let Ok(v) = crate::catalog::semver_range::parse_version(&name[at + 2..]) {
            return Some((name[..at].to_string(), v));
        }
        search = at + 2;
    }
    None
}

#[cfg(test)]
mod tests;
