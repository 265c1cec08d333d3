//! Catalog validation as `opm validate` does it, with every error collected and explained.
//!
//! Rules follow operator-registry `alpha/declcfg/declcfg_to_model.go` (`ConvertToModel`) and
//! `alpha/model/model.go` (`Package/Channel/Bundle.Validate`, `validateReplacesChain`,
//! `validateUniqueBundleVersions`), summarised in `../shared/reference/olm-v0.md` §3.4:
//!
//! - package: name set, a DNS-1123 label ([`PackageNames::Dns1123Label`]; any name for a catalog
//!   OLM serves from SQLite, [`PackageNames::NonEmpty`]), unique; `defaultChannel` set and naming
//!   one of its channels; at least one channel;
//! - channel: known package, name set and unique in the package, at least one entry, entries
//!   unique and naming existing bundles, skips not empty, skipRange parses (blang syntax,
//!   [`crate::catalog::semver_range`]);
//! - channel graph: exactly one head, counting only `replaces` and `skips` as incoming edges
//!   (`skipRange` is not an edge); from the head, the `replaces` chain (stopping at a replaced
//!   entry that some entry skips) reaches every entry no entry skips; no cycle in `replaces`; the
//!   tail may replace a bundle that is not in the channel;
//! - bundle: known package, unique name, listed in some channel, image set and a valid
//!   reference, exactly one `olm.package` property matching the package with a semver version,
//!   valid `release` (and then no build metadata and name `<package>-v<version>-<release>`),
//!   no two bundles of a package with the same version (not for a catalog served from SQLite,
//!   [`PackageNames::NonEmpty`], whose loader has no such rule);
//! - properties: every property has a type and a value; `olm.package`, `olm.gvk`,
//!   `olm.gvk.required`, `olm.package.required` (range parses), `olm.constraint` (shape,
//!   exactly one constraint per level, size limit, [`crate::catalog::property::MAX_CONSTRAINT_SIZE`]),
//!   `olm.bundle.object` (base64 data) and `olm.csv.metadata` (an object) have the right shape;
//! - deprecations: at most one per known package; entries reference an existing package,
//!   channel or bundle once, with a message.
//!
//! Where opm stops at the first error, capstan reports all of them, grouped by package. Checks
//! stricter than opm's (`olm.gvk` / `olm.gvk.required` need `version` and `kind`;
//! `olm.package.required` needs a parseable `versionRange`; `olm.constraint` is checked as OLM's
//! resolver parses it) reject catalogs that would fail at resolution time in OLM anyway.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;

use indexmap::IndexMap;
use semver::Version;
use serde::Serialize;
use serde_json::Value;

use super::error::CatalogError;
use super::model::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, Deprecation, Property, SCHEMA_BUNDLE, SCHEMA_CHANNEL,
    SCHEMA_PACKAGE,
};
use super::parse::{load_path_map, merge};
use super::property::{self, Constraint, Gvk, PackageProperty, PackageRequired};
use super::semver_range;

/// What kind of rule an error breaks (stable names for `-o json` and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// A package, channel or bundle name is missing or malformed.
    Name,
    /// Two blobs with the same identity.
    Duplicate,
    /// A blob names a package that has no `olm.package` blob.
    UnknownPackage,
    /// `defaultChannel` missing or naming no channel.
    DefaultChannel,
    /// A package without channels or a channel without entries.
    Empty,
    /// A channel entry names a bundle that has no `olm.bundle` blob.
    MissingBundle,
    /// A bundle that no channel lists.
    NotInChannel,
    /// A channel in which every entry is replaced or skipped.
    NoHead,
    /// A channel with more than one head.
    MultipleHeads,
    /// Entries not reachable from the head.
    Stranded,
    /// A cycle in the replaces chain.
    Cycle,
    /// An empty skip or a skipRange that does not parse.
    Edge,
    /// A property of the wrong shape, or the wrong number of `olm.package` properties.
    Property,
    /// A version or release that does not parse, or a duplicate version.
    Version,
    /// A missing or malformed image reference.
    Image,
    /// A malformed deprecation.
    Deprecation,
}

/// One validation error: where (package, channel, bundle) and what, including what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValidationError {
    /// Package the error belongs to (may be empty for a blob with no package).
    pub package: String,
    /// Channel, when the error is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Bundle, when the error is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// The rule broken.
    pub kind: ErrorKind,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "package {}", if self.package.is_empty() { "\"\"" } else { &self.package })?;
        if let Some(c) = &self.channel {
            write!(f, " / channel {c}")?;
        }
        if let Some(b) = &self.bundle {
            write!(f, " / bundle {b}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every error found in a catalog, in package order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ValidationErrors {
    /// The errors, sorted by package (stable within a package).
    pub errors: Vec<ValidationError>,
}

impl ValidationErrors {
    /// Number of errors.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// The errors grouped by package name.
    pub fn by_package(&self) -> BTreeMap<&str, Vec<&ValidationError>> {
        let mut m: BTreeMap<&str, Vec<&ValidationError>> = BTreeMap::new();
        for e in &self.errors {
            m.entry(e.package.as_str()).or_default().push(e);
        }
        m
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let groups = self.by_package();
        write!(
            f,
            "invalid catalog: {} error{} in {} package{}",
            self.len(),
            if self.len() == 1 { "" } else { "s" },
            groups.len(),
            if groups.len() == 1 { "" } else { "s" }
        )?;
        for (pkg, errs) in groups {
            write!(f, "\npackage {}:", if pkg.is_empty() { "\"\"" } else { pkg })?;
            for e in errs {
                write!(f, "\n  - {e}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ValidationErrors {}

/// FxHash (rustc's hasher): validation hashes many short names; SipHash's DoS resistance is not
/// needed for maps that live for one call.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, i: usize) {
        self.0 = (self.0.rotate_left(5) ^ i as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxBuild = std::hash::BuildHasherDefault<FxHasher>;
type FxMap<K, V> = HashMap<K, V, FxBuild>;
type FxSet<K> = HashSet<K, FxBuild>;

struct Collector {
    errors: Vec<ValidationError>,
}

impl Collector {
    fn push(&mut self, package: &str, channel: Option<&str>, bundle: Option<&str>, kind: ErrorKind, message: String) {
        self.errors.push(ValidationError {
            package: package.to_string(),
            channel: channel.map(str::to_string),
            bundle: bundle.map(str::to_string),
            kind,
            message,
        });
    }
}

/// Whether `s` is a DNS-1123 label (k8s `IsDNS1123Label`): at most 63 characters of lowercase
/// alphanumerics and `-`, starting and ending with an alphanumeric.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_dns1123_part(s)
}

/// Whether `s` is a DNS-1123 subdomain (k8s `IsDNS1123Subdomain`, the rule for most object
/// names, a Subscription's among them): at most 253 characters, parts separated by `.`, each of
/// lowercase alphanumerics and `-`, starting and ending with an alphanumeric. Unlike a label, a
/// part has no length limit of its own (k8s `dns1123SubdomainRegexp`).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_part)
}

/// One part of a DNS-1123 name, without a length limit: non-empty, lowercase alphanumerics and
/// `-`, starting and ending with an alphanumeric.
fn is_dns1123_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A blob's image for messages: the reference, or `no image` when it has none.
fn image_or_none(image: &str) -> &str {
    if image.is_empty() { "no image" } else { image }
}

/// The images of several blobs for messages: `images A and B`, or `all with image A` when they
/// are the same.
fn blob_images(images: &[&str]) -> String {
    let shown: Vec<&str> = images.iter().map(|i| image_or_none(i)).collect();
    if shown.windows(2).all(|w| w[0] == w[1]) {
        return format!("all with image {}", shown[0]);
    }
    let (last, rest) = shown.split_last().map_or(("", &[][..]), |(l, r)| (*l, r));
    format!("images {} and {last}", rest.join(", "))
}

fn list(names: &[&str]) -> String {
    names.join(", ")
}

fn count_word(n: usize) -> String {
    match n {
        2 => "two".into(),
        3 => "three".into(),
        4 => "four".into(),
        n => n.to_string(),
    }
}

/// Validates a whole catalog as `opm validate` does (see the module documentation for the rules).
///
/// # Errors
/// [`ValidationErrors`] listing every error found, grouped by package; each names package,
/// channel and bundle where they apply and says what to change.
pub fn validate(cfg: &DeclarativeConfig) -> Result<(), ValidationErrors> {
    validate_with(cfg, PackageNames::Dns1123Label)
}

/// Which operator-registry server OLM runs for the catalog (v1.74.0), and so which package names
/// it may have — and, served from SQLite ([`PackageNames::NonEmpty`]), that two bundles of a
/// package may share a version: the rules of [`validate`] that depend on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PackageNames {
    /// DNS-1123 labels, opm's rule for a file-based catalog (`alpha/declcfg/declcfg_to_model.go`
    /// `ConvertToModel`), applied by `opm validate` (`pkg/lib/config/validate.go`) and by
    /// `opm serve` (`pkg/cache/cache.go` `processPackage`: the server does not start). For
    /// authoring (`catalog validate`, `catalog add`, `catalog render`, catalog images built) and
    /// for a CatalogSource's file-based catalog image.
    #[default]
    Dns1123Label,
    /// Any name that is not empty: what a SQLite-backed registry serves. OLM's `configmap-server`
    /// loads a ConfigMap catalog's packages as they are (`pkg/sqlite/configmap.go` `Populate`,
    /// `pkg/sqlite/load.go` `addPackageChannels`), and a `spec.address` registry serves what it
    /// holds (`alpha/model/model.go` `Package.Validate` asks only for a name). For ConfigMap
    /// catalogs and `spec.address` catalogs: OLM's own e2e suite serves a package
    /// `PackageDependent` from a ConfigMap.
    NonEmpty,
}

/// [`validate`] with the package-name rule `names`.
///
/// # Errors
/// As [`validate`].
pub fn validate_with(cfg: &DeclarativeConfig, names: PackageNames) -> Result<(), ValidationErrors> {
    let mut checks = BundleChecks::default();
    for b in &cfg.bundles {
        checks.check(b);
    }
    validate_checked_with(cfg, checks, names)
}

/// The per-bundle rules of [`validate`] (name, image and related image references, properties,
/// version and release) applied to one `olm.bundle` blob, as `catalog add` and `opm validate`
/// apply them; [`crate::bundle::validate()`] runs them on the blob a bundle directory renders to.
/// Empty when the blob passes.
pub fn check_bundle_blob(b: &Bundle) -> Vec<ValidationError> {
    let mut c = Collector { errors: Vec::new() };
    check_bundle(b, None, &mut c);
    c.errors
}

/// Blob counts of a catalog.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CatalogCounts {
    /// `olm.package` blobs.
    pub packages: usize,
    /// `olm.channel` blobs.
    pub channels: usize,
    /// `olm.bundle` blobs.
    pub bundles: usize,
    /// `olm.deprecations` blobs.
    pub deprecations: usize,
    /// Blobs of other schemas.
    pub others: usize,
}

/// Loads and validates a catalog file or directory as [`validate`] does, with low memory: each
/// file's bundles are checked right after the file is parsed, then their properties, related
/// images and other payloads are dropped; the catalog-wide rules run on what is left. This is
/// what `capstan catalog validate` runs on a local path.
///
/// # Errors
/// Outer: [`CatalogError`] when the input cannot be read or parsed. Inner: the validation
/// result, with the blob counts either way.
pub fn validate_path(path: &Path) -> Result<(CatalogCounts, Result<(), ValidationErrors>), CatalogError> {
    validate_path_report(path).map(|r| (r.counts, r.result))
}

/// What [`validate_path_report`] finds.
#[derive(Debug)]
pub struct PathValidation {
    /// Blob counts.
    pub counts: CatalogCounts,
    /// The validation result, as [`validate`] gives it.
    pub result: Result<(), ValidationErrors>,
    /// Warnings that do not make the catalog invalid: bundles whose image is a placeholder
    /// ([`crate::catalog::placeholder::placeholder_warnings`]), in file and blob order.
    pub warnings: Vec<String>,
}

/// [`validate_path`], plus the warnings of [`PathValidation`].
///
/// # Errors
/// As [`validate_path`].
pub fn validate_path_report(path: &Path) -> Result<PathValidation, CatalogError> {
    let parts = load_path_map(path, |_, mut cfg| {
        let mut checks = BundleChecks::default();
        for b in &cfg.bundles {
            checks.check(b);
        }
        let warnings = crate::catalog::placeholder::placeholder_warnings(&cfg);
        let others = cfg.others.len();
        shrink_checked(&mut cfg);
        (cfg, checks, others, warnings)
    })?;
    let mut cfg = DeclarativeConfig::default();
    let mut checks = BundleChecks::default();
    let mut others = 0;
    let mut warnings = Vec::new();
    for (c, k, o, w) in parts {
        merge(&mut cfg, c);
        checks.merge(k);
        others += o;
        warnings.extend(w);
    }
    let counts = CatalogCounts {
        packages: cfg.packages.len(),
        channels: cfg.channels.len(),
        bundles: cfg.bundles.len(),
        deprecations: cfg.deprecations.len(),
        others,
    };
    Ok(PathValidation { counts, result: validate_checked(&cfg, checks), warnings })
}

/// Drops what [`validate_checked`] does not read once bundles have been checked.
fn shrink_checked(cfg: &mut DeclarativeConfig) {
    for b in &mut cfg.bundles {
        b.properties = Vec::new();
        b.related_images = Vec::new();
        b.extra = IndexMap::new();
    }
    for p in &mut cfg.packages {
        p.description = None;
        p.icon = None;
        p.properties = Vec::new();
        p.extra = IndexMap::new();
    }
    for c in &mut cfg.channels {
        c.properties = Vec::new();
        c.extra = IndexMap::new();
        for e in &mut c.entries {
            e.extra = IndexMap::new();
        }
    }
    cfg.others = Vec::new();
}

/// The per-bundle half of [`validate`] (image, properties, version), run blob by blob so that a
/// loader can check bundles as it reads them and then drop their properties
/// ([`validate_path`]). Bundle errors are kept here until [`validate_checked`] adds the
/// channel to their path.
#[derive(Debug, Default)]
pub struct BundleChecks {
    /// package → bundle → (version, version string incl. release) of bundles whose single
    /// `olm.package` property is valid.
    versions: FxMap<String, FxMap<String, (Version, String)>>,
    errors: Vec<ValidationError>,
}

impl BundleChecks {
    /// Checks one bundle blob (a second blob with the same package and name is skipped; the
    /// duplicate itself is reported by [`validate_checked`]).
    pub fn check(&mut self, b: &Bundle) {
        if self.versions.get(&b.package).is_some_and(|m| m.contains_key(&b.name)) {
            return;
        }
        let mut c = Collector { errors: std::mem::take(&mut self.errors) };
        let v = check_bundle(b, None, &mut c);
        self.errors = c.errors;
        if let Some(v) = v {
            self.versions.entry(b.package.clone()).or_default().insert(b.name.clone(), v);
        }
    }

    /// Adds the results of another set of checks (for bundles read later).
    pub fn merge(&mut self, other: BundleChecks) {
        for (pkg, names) in other.versions {
            let mine = self.versions.entry(pkg).or_default();
            for (n, v) in names {
                mine.entry(n).or_insert(v);
            }
        }
        self.errors.extend(other.errors);
    }

    fn version(&self, package: &str, bundle: &str) -> Option<&(Version, String)> {
        self.versions.get(package)?.get(bundle)
    }
}

/// The catalog-wide half of [`validate`]: packages, channels, graphs, duplicates, deprecations,
/// using the per-bundle results in `checks`. `cfg.bundles` need only carry package, name and
/// image (errors that involve several bundle blobs name each by its image).
///
/// # Errors
/// [`ValidationErrors`] with the errors of `checks` and of the catalog-wide rules.
pub fn validate_checked(cfg: &DeclarativeConfig, checks: BundleChecks) -> Result<(), ValidationErrors> {
    validate_checked_with(cfg, checks, PackageNames::Dns1123Label)
}

/// [`validate_checked`] with the package-name rule `names`.
fn validate_checked_with(
    cfg: &DeclarativeConfig,
    checks: BundleChecks,
    names: PackageNames,
) -> Result<(), ValidationErrors> {
    let mut c = Collector { errors: Vec::new() };
    let packages = index_packages(cfg, names, &mut c);
    let channels_of = index_channels(cfg, &packages, &mut c);
    let bundles = index_bundles(cfg, &packages, &mut c);
    let blobs = Blobs { packages, channels_of, bundles };
    let first_channel = blobs.first_channels();
    check_in_channel(cfg, &blobs, &first_channel, &mut c);
    let BundleChecks { versions, errors: bundle_errors } = checks;
    let checks = BundleChecks { versions, errors: Vec::new() };
    for mut e in bundle_errors {
        if e.channel.is_none()
            && let Some(b) = &e.bundle
        {
            e.channel = first_channel.get(&(e.package.as_str(), b.as_str())).map(|c| c.to_string());
        }
        c.errors.push(e);
    }

    // Package-level checks and channel graphs.
    let mut pkg_names: Vec<&str> = blobs.packages.keys().copied().collect();
    pkg_names.sort_unstable();
    for pkg in pkg_names {
        check_package(cfg, &blobs, pkg, &checks, names, &mut c);
    }

    check_deprecations(cfg, &blobs, &mut c);

    if c.errors.is_empty() {
        return Ok(());
    }
    c.errors.sort_by(|a, b| a.package.cmp(&b.package));
    Err(ValidationErrors { errors: c.errors })
}

/// The blobs of a catalog indexed for the catalog-wide rules.
struct Blobs<'a> {
    /// Each package with a name, first of its name → its index in `cfg.packages`.
    packages: FxMap<&'a str, usize>,
    /// The channels of each known package, by name (the first blob of a name).
    channels_of: FxMap<&'a str, IndexMap<&'a str, &'a Channel, FxBuild>>,
    /// The first bundle blob of each (package, name), for known packages.
    bundles: FxMap<(&'a str, &'a str), &'a Bundle>,
}

impl<'a> Blobs<'a> {
    /// (package, bundle) → the first channel (by name) that lists the bundle: the channel of
    /// each bundle error's path.
    fn first_channels(&self) -> FxMap<(&'a str, &'a str), &'a str> {
        let mut first_channel: FxMap<(&str, &str), &str> = FxMap::default();
        for (pkg, chans) in &self.channels_of {
            let mut names: Vec<&&str> = chans.keys().collect();
            names.sort();
            for ch in names {
                for e in &chans[*ch].entries {
                    first_channel.entry((pkg, e.name.as_str())).or_insert(ch);
                }
            }
        }
        first_channel
    }
}

/// Packages: named, unique, DNS-1123 labels when `names` asks for them. Returns each package →
/// its index in `cfg.packages`.
fn index_packages<'a>(cfg: &'a DeclarativeConfig, names: PackageNames, c: &mut Collector) -> FxMap<&'a str, usize> {
    let mut packages: FxMap<&str, usize> = FxMap::default();
    for (i, p) in cfg.packages.iter().enumerate() {
        if p.name.is_empty() {
            c.push("", None, None, ErrorKind::Name, "an olm.package blob has no name; set its name field".into());
            continue;
        }
        if packages.contains_key(p.name.as_str()) {
            c.push(&p.name, None, None, ErrorKind::Duplicate, format!(
                "duplicate package {:?}: there is more than one olm.package blob with this name; keep one (catalogs composed from several sources must not repeat a package)",
                p.name
            ));
            continue;
        }
        packages.insert(&p.name, i);
        if names == PackageNames::Dns1123Label && !is_dns1123_label(&p.name) {
            c.push(&p.name, None, None, ErrorKind::Name, format!(
                "invalid package name {:?}: a package name must be a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)",
                p.name
            ));
        }
    }
    packages
}

/// Channels, by package: of a known package, named, unique.
fn index_channels<'a>(
    cfg: &'a DeclarativeConfig,
    packages: &FxMap<&'a str, usize>,
    c: &mut Collector,
) -> FxMap<&'a str, IndexMap<&'a str, &'a Channel, FxBuild>> {
    let mut channels_of: FxMap<&str, IndexMap<&str, &Channel, FxBuild>> = FxMap::default();
    for ch in &cfg.channels {
        if !packages.contains_key(ch.package.as_str()) {
            c.push(&ch.package, Some(&ch.name), None, ErrorKind::UnknownPackage, format!(
                "channel {:?} names package {:?}, which has no olm.package blob; add the olm.package blob or fix the channel's package field",
                ch.name, ch.package
            ));
            continue;
        }
        if ch.name.is_empty() {
            c.push(
                &ch.package,
                None,
                None,
                ErrorKind::Name,
                "an olm.channel blob has no name; set its name field".into(),
            );
            continue;
        }
        let chans = channels_of.entry(&ch.package).or_default();
        if chans.contains_key(ch.name.as_str()) {
            c.push(&ch.package, Some(&ch.name), None, ErrorKind::Duplicate, format!(
                "duplicate channel {:?}: package {} has more than one olm.channel blob with this name; merge their entries into one",
                ch.name, ch.package
            ));
            continue;
        }
        chans.insert(&ch.name, ch);
    }
    channels_of
}

/// Bundles, by (package, name): of a known package, unique (duplicates are reported once per
/// name with the image of every blob).
fn index_bundles<'a>(
    cfg: &'a DeclarativeConfig,
    packages: &FxMap<&'a str, usize>,
    c: &mut Collector,
) -> FxMap<(&'a str, &'a str), &'a Bundle> {
    let mut bundles: FxMap<(&str, &str), &Bundle> = FxMap::default();
    // (package, name) of duplicated bundles → the image of every blob with that name.
    let mut duplicates: IndexMap<(&str, &str), Vec<&str>, FxBuild> = IndexMap::default();
    for b in &cfg.bundles {
        if b.package.is_empty() {
            c.push(
                "",
                None,
                Some(&b.name),
                ErrorKind::UnknownPackage,
                format!("bundle {:?} has no package; set its package field", b.name),
            );
            continue;
        }
        if !packages.contains_key(b.package.as_str()) {
            c.push(&b.package, None, Some(&b.name), ErrorKind::UnknownPackage, format!(
                "bundle {:?} names package {:?}, which has no olm.package blob; add the olm.package blob or fix the bundle's package field",
                b.name, b.package
            ));
            continue;
        }
        if let Some(first) = bundles.insert((&b.package, &b.name), b) {
            duplicates.entry((&b.package, &b.name)).or_insert_with(|| vec![first.image.as_str()]).push(&b.image);
        }
    }
    for ((pkg, name), images) in &duplicates {
        c.push(
            pkg,
            None,
            Some(name),
            ErrorKind::Duplicate,
            format!(
                "duplicate bundle {name:?}: package {pkg} has {} olm.bundle blobs with this name ({}); keep one",
                images.len(),
                blob_images(images)
            ),
        );
    }
    bundles
}

/// Bundles of known packages that no channel lists.
fn check_in_channel(
    cfg: &DeclarativeConfig,
    blobs: &Blobs<'_>,
    first_channel: &FxMap<(&str, &str), &str>,
    c: &mut Collector,
) {
    let mut seen_bundles: FxSet<(&str, &str)> = FxSet::default();
    for b in &cfg.bundles {
        let key = (b.package.as_str(), b.name.as_str());
        if !blobs.packages.contains_key(key.0) || !seen_bundles.insert(key) {
            continue;
        }
        if !first_channel.contains_key(&key) {
            c.push(&b.package, None, Some(&b.name), ErrorKind::NotInChannel, format!(
                "bundle {} is not an entry of any channel of package {}; add it to a channel's entries or remove the bundle",
                b.name, b.package
            ));
        }
    }
}

/// The rules of one package: it has channels and a default channel among them, each channel's
/// entries and graph, and no version twice — the last not for a catalog served from SQLite
/// (`names` [`PackageNames::NonEmpty`]): operator-registry's SQLite loader has no such rule
/// (v1.74.0 `pkg/sqlite/load.go`), and OLM resolves such a catalog's bundles of one version.
fn check_package<'a>(
    cfg: &DeclarativeConfig,
    blobs: &Blobs<'a>,
    pkg: &'a str,
    checks: &BundleChecks,
    names: PackageNames,
    c: &mut Collector,
) {
    let p = &cfg.packages[blobs.packages[pkg]];
    let empty: IndexMap<&str, &Channel, FxBuild> = IndexMap::default();
    let chans = blobs.channels_of.get(pkg).unwrap_or(&empty);
    let mut chan_names: Vec<&str> = chans.keys().copied().collect();
    chan_names.sort_unstable();
    if chans.is_empty() {
        c.push(
            pkg,
            None,
            None,
            ErrorKind::Empty,
            format!("package {pkg} has no channels; add an olm.channel blob with package: {pkg}"),
        );
    }
    check_default_channel(pkg, p.default_channel.as_deref(), &chan_names, c);
    for ch_name in &chan_names {
        check_channel(pkg, chans[ch_name], &blobs.bundles, checks, c);
    }
    if names == PackageNames::Dns1123Label {
        check_unique_versions(pkg, chans, &blobs.bundles, checks, c);
    }
}

/// `defaultChannel` is set and names one of `chan_names` (sorted).
fn check_default_channel(pkg: &str, default_channel: Option<&str>, chan_names: &[&str], c: &mut Collector) {
    match default_channel {
        None | Some("") => {
            let hint = match chan_names {
                [] => String::new(),
                [one] => format!(" (its only channel is {one})"),
                many => format!("; the existing channels are {}", list(many)),
            };
            c.push(pkg, None, None, ErrorKind::DefaultChannel, format!(
                "package {pkg} has no defaultChannel: set defaultChannel in its olm.package blob to the channel Subscriptions without a channel should use{hint}"
            ));
        }
        Some(d) if !chan_names.contains(&d) => {
            let near: Vec<&str> = chan_names.iter().copied().filter(|n| strsim::levenshtein(n, d) <= 2).collect();
            let hint = if near.len() == 1 { format!(" (did you mean {}?)", near[0]) } else { String::new() };
            c.push(pkg, None, None, ErrorKind::DefaultChannel, format!(
                "defaultChannel {d:?} of package {pkg} does not name any channel{hint}; the existing channels are ({}); fix defaultChannel in the olm.package blob or add the channel",
                list(chan_names)
            ));
        }
        Some(_) => {}
    }
}

/// Duplicate versions among bundles that are in channels (opm validateUniqueBundleVersions).
fn check_unique_versions(
    pkg: &str,
    chans: &IndexMap<&str, &Channel, FxBuild>,
    bundles: &FxMap<(&str, &str), &Bundle>,
    checks: &BundleChecks,
    c: &mut Collector,
) {
    let mut by_version: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut listed: FxSet<&str> = FxSet::default();
    for ch in chans.values() {
        for e in &ch.entries {
            if listed.insert(&e.name)
                && let Some((_, vs)) = checks.version(pkg, &e.name)
            {
                by_version.entry(vs).or_default().push(&e.name);
            }
        }
    }
    for (v, mut names) in by_version {
        if names.len() > 1 {
            names.sort_unstable();
            let images: Vec<String> = names
                .iter()
                .map(|n| format!("{n}: {}", bundles.get(&(pkg, *n)).map_or("(no blob)", |b| image_or_none(&b.image))))
                .collect();
            c.push(pkg, None, None, ErrorKind::Version, format!(
                "package {pkg} has duplicate version {v}: bundles {} all have version {v} in their olm.package property (images: {}); every bundle of a package needs its own version (bump the version of the respin or use the release field)",
                names.join(" and "),
                images.join(", ")
            ));
        }
    }
}

/// Checks one bundle's image and properties; returns its parsed version and version string
/// (`<version>[-<release>]`, as opm's `VersionString`) when the single `olm.package` is valid.
fn check_bundle(b: &Bundle, channel: Option<&str>, c: &mut Collector) -> Option<(Version, String)> {
    let mut check = BundleCheck { b, channel, c, package_props: 0, version: None };
    check.name_and_images();
    for (i, p) in b.properties.iter().enumerate() {
        check.property(&format!("properties[{i}]"), p);
    }
    if check.package_props != 1 {
        let found = check.package_props;
        check.at(
            ErrorKind::Property,
            format!("a bundle needs exactly one olm.package property with packageName and version; found {found}"),
        );
        return None;
    }
    check.version
}

/// One bundle blob being checked ([`check_bundle`]): the blob, the channel of its errors' path,
/// where errors go, and what its properties said so far.
struct BundleCheck<'a> {
    b: &'a Bundle,
    channel: Option<&'a str>,
    c: &'a mut Collector,
    /// `olm.package` properties seen.
    package_props: usize,
    /// Version and version string of the last valid `olm.package` property.
    version: Option<(Version, String)>,
}

impl BundleCheck<'_> {
    fn at(&mut self, kind: ErrorKind, msg: String) {
        self.c.push(&self.b.package, self.channel, Some(&self.b.name), kind, msg);
    }

    /// The name, the image (or `olm.bundle.object` properties when there is none) and the
    /// related images.
    fn name_and_images(&mut self) {
        let b = self.b;
        if b.name.is_empty() {
            self.at(ErrorKind::Name, "an olm.bundle blob has no name; set name to the CSV's metadata.name".into());
        }
        let has_objects = b.properties.iter().any(|p| p.type_ == property::BUNDLE_OBJECT);
        if b.image.is_empty() {
            if !has_objects {
                self.at(ErrorKind::Image, "bundle image must be set: set image to the bundle image reference (for example quay.io/org/op-bundle:v1.0.0)".into());
            }
        } else if let Err(e) = check_reference(&b.image) {
            self.at(
                ErrorKind::Image,
                format!(
                    "invalid image pull spec {:?}: {e}; use a reference such as registry.example.com/org/bundle:tag or @sha256:<digest>",
                    b.image
                ),
            );
        }
        for (i, r) in b.related_images.iter().enumerate() {
            if !r.image.is_empty()
                && let Err(e) = check_reference(&r.image)
            {
                self.at(
                    ErrorKind::Image,
                    format!("relatedImages[{i}].image: invalid image pull spec {:?}: {e}", r.image),
                );
            }
        }
    }

    /// One property (`here`: `properties[i]`), by its type.
    fn property(&mut self, here: &str, p: &Property) {
        if p.type_.is_empty() {
            self.at(ErrorKind::Property, format!("{here}: property type must be set"));
            return;
        }
        let t = p.type_.as_str();
        if p.value.is_null() {
            if t == property::PACKAGE {
                self.package_props += 1;
            }
            self.at(
                ErrorKind::Property,
                format!(
                    "{here} ({t}): property value must be set{}",
                    if t == property::PACKAGE {
                        "; a bundle needs exactly one olm.package property with packageName and version"
                    } else {
                        ""
                    }
                ),
            );
            return;
        }
        match t {
            property::PACKAGE => self.package(here, p),
            property::GVK | property::GVK_REQUIRED => match p.decode::<Gvk>() {
                Err(e) => self.at(ErrorKind::Property, format!("{here}: {e}; expected {{group, version, kind}}")),
                Ok(g) if g.version.is_empty() || g.kind.is_empty() => self.at(
                    ErrorKind::Property,
                    format!(
                        "{here}: {t} needs version and kind (got group {:?}, version {:?}, kind {:?})",
                        g.group, g.version, g.kind
                    ),
                ),
                Ok(_) => {}
            },
            property::PACKAGE_REQUIRED => match p.decode::<PackageRequired>() {
                Err(e) => self.at(ErrorKind::Property, format!("{here}: {e}; expected {{packageName, versionRange}}")),
                Ok(r) => {
                    if r.package_name.is_empty() {
                        self.at(ErrorKind::Property, format!("{here}: olm.package.required needs packageName"));
                    }
                    if let Err(e) = semver_range::parse(&r.version_range) {
                        self.at(
                            ErrorKind::Property,
                            format!("{here}: olm.package.required on {}: {e}", r.package_name),
                        );
                    }
                }
            },
            property::CONSTRAINT => self.constraint(here, p),
            property::BUNDLE_OBJECT => {
                let data = p.value.get("data").and_then(Value::as_str);
                use base64::Engine as _;
                match data {
                    None => self.at(
                        ErrorKind::Property,
                        format!("{here}: olm.bundle.object needs data (a base64-encoded manifest)"),
                    ),
                    Some(d) if base64::engine::general_purpose::STANDARD.decode(d).is_err() => {
                        self.at(ErrorKind::Property, format!("{here}: olm.bundle.object data is not valid base64"));
                    }
                    Some(_) => {}
                }
            }
            property::CSV_METADATA if !p.value.is_object() => {
                self.at(ErrorKind::Property, format!("{here}: olm.csv.metadata value must be an object"));
            }
            _ => {}
        }
    }

    /// An `olm.package` property: its package is the blob's, its version parses (with its
    /// release, [`check_release`]).
    fn package(&mut self, here: &str, p: &Property) {
        self.package_props += 1;
        let pp = match p.decode::<PackageProperty>() {
            Err(e) => {
                self.at(
                    ErrorKind::Property,
                    format!(
                        "{here}: {e}; a bundle needs exactly one olm.package property with packageName and version"
                    ),
                );
                return;
            }
            Ok(pp) => pp,
        };
        let b = self.b;
        if pp.package_name != b.package {
            self.at(
                ErrorKind::Property,
                format!(
                    "{here}: olm.package packageName {:?} does not match the bundle's package {:?}; set packageName to {:?}",
                    pp.package_name, b.package, b.package
                ),
            );
        }
        match Version::parse(&pp.version) {
            Err(e) => self.at(
                ErrorKind::Version,
                format!(
                    "{here}: olm.package version {:?} is not a semver version ({e}); use MAJOR.MINOR.PATCH such as 1.2.3",
                    pp.version
                ),
            ),
            Ok(v) => self.version = check_release(b, &pp, v, here, self.c, self.channel),
        }
    }

    /// An `olm.constraint` property: within the size limit, of the shape OLM's resolver parses.
    fn constraint(&mut self, here: &str, p: &Property) {
        let size = serde_json::to_vec(&p.value).map_or(0, |v| v.len());
        if size > property::MAX_CONSTRAINT_SIZE {
            self.at(
                ErrorKind::Property,
                format!(
                    "{here}: olm.constraint value is {size} bytes, greater than max constraint size {} bytes; split or simplify the constraint",
                    property::MAX_CONSTRAINT_SIZE
                ),
            );
            return;
        }
        match p.decode::<Constraint>() {
            Err(e) => self.at(
                ErrorKind::Property,
                format!(
                    "{here}: {e}; an olm.constraint value is {{failureMessage?, one of gvk | package | cel | all | any | not}}"
                ),
            ),
            Ok(con) => {
                if let Err(m) = check_constraint(&con, "") {
                    self.at(ErrorKind::Property, format!("{here}: olm.constraint{m}"));
                }
            }
        }
    }
}

/// Checks an image pull spec as opm does (`reference.ParseNormalizedNamed`, via the
/// distribution reference grammar that `oci_client::Reference` implements). Common references
/// are accepted by a hand-written check of the same grammar without running the regex (a
/// 10,000-bundle catalog spends most of its validation time there otherwise); anything that
/// check does not accept goes to `oci_client` for the verdict and its message.
pub fn check_reference(s: &str) -> Result<(), oci_client::ParseError> {
    if quick_reference_ok(s) {
        return Ok(());
    }
    oci_client::Reference::try_from(s).map(|_| ())
}

/// A conservative subset of the reference grammar: `[domain[:port]/]path[:tag][@sha256:<64 hex>]`
/// with lowercase path components. Returns false for anything else (IPv6 hosts, other digest
/// algorithms, …), which then takes the full parser.
fn quick_reference_ok(s: &str) -> bool {
    fn alnum(c: u8) -> bool {
        c.is_ascii_lowercase() || c.is_ascii_digit()
    }
    // pathComponent = [a-z0-9]+ ((?:[._]|__|[-]+) [a-z0-9]+)*
    fn path_component(p: &[u8]) -> bool {
        if p.is_empty() || !alnum(p[0]) || !alnum(p[p.len() - 1]) {
            return false;
        }
        let mut i = 0;
        while i < p.len() {
            if alnum(p[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < p.len() && !alnum(p[i]) {
                i += 1;
            }
            let sep = &p[start..i];
            let ok = sep == b"." || sep == b"_" || sep == b"__" || sep.iter().all(|c| *c == b'-');
            if !ok {
                return false;
            }
        }
        true
    }
    // domainNameComponent ('.' domainNameComponent)* (':' [0-9]+)?
    fn domain(d: &[u8]) -> bool {
        let (host, port) = match d.iter().position(|c| *c == b':') {
            Some(i) => (&d[..i], Some(&d[i + 1..])),
            None => (d, None),
        };
        if port.is_some_and(|p| p.is_empty() || !p.iter().all(u8::is_ascii_digit)) {
            return false;
        }
        !host.is_empty()
            && host.split(|c| *c == b'.').all(|c| {
                !c.is_empty()
                    && c[0].is_ascii_alphanumeric()
                    && c[c.len() - 1].is_ascii_alphanumeric()
                    && c.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'-')
            })
    }
    let (rest, digest) = match s.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest {
        let Some(hex) = d.strip_prefix("sha256:") else { return false };
        if hex.len() != 64 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
    }
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].find(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(t) = tag {
        let t = t.as_bytes();
        let word = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
        if t.is_empty() || t.len() > 128 || !word(&t[0]) || !t.iter().all(|c| word(c) || *c == b'.' || *c == b'-') {
            return false;
        }
    }
    if name.is_empty() || name.len() > 255 {
        return false;
    }
    let parts: Vec<&[u8]> = name.as_bytes().split(|c| *c == b'/').collect();
    let first_ok = path_component(parts[0]) || (parts.len() > 1 && domain(parts[0]));
    first_ok && parts[1..].iter().all(|p| path_component(p))
}

/// opm `NewRelease` and the release rules of `Bundle.Validate`.
fn check_release(
    b: &Bundle,
    pp: &PackageProperty,
    v: Version,
    here: &str,
    c: &mut Collector,
    channel: Option<&str>,
) -> Option<(Version, String)> {
    let Some(rel) = pp.release.as_deref().filter(|r| !r.is_empty()) else {
        let s = v.to_string();
        return Some((v, s));
    };
    let mut msgs: Vec<String> = Vec::new();
    if rel.len() > 20 {
        msgs.push(format!("invalid release {rel:?}: exceeds maximum length of 20 characters"));
    } else if let Err(e) = semver::Prerelease::new(rel) {
        msgs.push(format!("invalid release {rel:?}: {e}; a release is dot-separated alphanumerics and '-'"));
    }
    if !v.build.is_empty() {
        msgs.push("cannot use build metadata in version with a release version; drop the +build part".into());
    }
    let vs = format!("{v}-{rel}");
    let normalized = format!("{}-v{vs}", b.package);
    if msgs.is_empty() && b.name != normalized {
        msgs.push(format!("name {:?} does not match normalized name {normalized:?} (a bundle with a release must be named <package>-v<version>-<release>)", b.name));
    }
    let ok = msgs.is_empty();
    for m in msgs {
        c.push(&b.package, channel, Some(&b.name), ErrorKind::Version, format!("{here}: {m}"));
    }
    ok.then_some((v, vs))
}

/// Checks that every level of a constraint has exactly one of gvk/package/cel/all/any/not.
fn check_constraint(con: &Constraint, path: &str) -> Result<(), String> {
    let set = [
        con.gvk.is_some(),
        con.package.is_some(),
        con.cel.is_some(),
        con.all.is_some(),
        con.any.is_some(),
        con.not.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if set != 1 {
        return Err(format!("{path}: must have exactly one of gvk, package, cel, all, any, not (found {set})"));
    }
    if let Some(p) = &con.package
        && let Err(e) = semver_range::parse(&p.version_range)
    {
        return Err(format!("{path}.package: {e}"));
    }
    if let Some(g) = &con.gvk
        && (g.version.is_empty() || g.kind.is_empty())
    {
        return Err(format!("{path}.gvk: needs version and kind"));
    }
    if let Some(cel) = &con.cel
        && cel.rule.trim().is_empty()
    {
        return Err(format!("{path}.cel: rule must not be empty"));
    }
    for (name, compound) in [("all", &con.all), ("any", &con.any), ("not", &con.not)] {
        if let Some(comp) = compound {
            if comp.constraints.is_empty() {
                return Err(format!("{path}.{name}: needs at least one constraint"));
            }
            for (i, inner) in comp.constraints.iter().enumerate() {
                check_constraint(inner, &format!("{path}.{name}.constraints[{i}]"))?;
            }
        }
    }
    Ok(())
}

/// Entry checks and the upgrade-graph rules of one channel.
fn check_channel<'a>(
    pkg: &'a str,
    ch: &'a Channel,
    bundles: &FxMap<(&'a str, &'a str), &'a Bundle>,
    versions: &BundleChecks,
    c: &mut Collector,
) {
    let cn = ch.name.as_str();
    if ch.entries.is_empty() {
        c.push(
            pkg,
            Some(cn),
            None,
            ErrorKind::Empty,
            format!("channel {cn} of package {pkg} has no entries; add at least one entry or remove the channel"),
        );
        return;
    }
    let mut entries: IndexMap<&str, &ChannelEntry, FxBuild> =
        IndexMap::with_capacity_and_hasher(ch.entries.len(), FxBuild::default());
    let mut missing = Vec::new();
    for e in &ch.entries {
        if e.name.is_empty() {
            c.push(pkg, Some(cn), None, ErrorKind::Name, "an entry has no name; set it to a bundle name".into());
            continue;
        }
        if entries.insert(&e.name, e).is_some() {
            c.push(
                pkg,
                Some(cn),
                Some(&e.name),
                ErrorKind::Duplicate,
                format!("duplicate entry {}: a bundle may appear only once per channel; merge the two entries", e.name),
            );
            continue;
        }
        if !bundles.contains_key(&(pkg, e.name.as_str())) {
            missing.push(e.name.as_str());
        }
        for (i, s) in e.skips.iter().enumerate() {
            if s.is_empty() {
                c.push(
                    pkg,
                    Some(cn),
                    Some(&e.name),
                    ErrorKind::Edge,
                    format!("skips[{i}] is empty; remove it or name the skipped bundle"),
                );
            }
        }
        if let Some(r) = &e.skip_range
            && let Err(err) = semver_range::parse(r)
        {
            c.push(pkg, Some(cn), Some(&e.name), ErrorKind::Edge, format!("invalid skipRange: {err}"));
        }
    }
    for m in missing {
        c.push(pkg, Some(cn), Some(m), ErrorKind::MissingBundle, format!(
            "channel {cn} lists entry {m}, but package {pkg} has no olm.bundle blob named {m}; add the bundle or remove the entry"
        ));
    }
    check_graph(pkg, cn, &entries, bundles, versions, c);
}

/// Head, cycle and stranded-bundle rules (operator-registry `Channel.Head`,
/// `validateReplacesChain`), with explanations of where the replaces chain breaks.
fn check_graph<'a>(
    pkg: &'a str,
    cn: &str,
    entries: &IndexMap<&'a str, &'a ChannelEntry, FxBuild>,
    bundles: &FxMap<(&'a str, &'a str), &'a Bundle>,
    versions: &'a BundleChecks,
    c: &mut Collector,
) {
    let graph = Graph::new(pkg, cn, entries);
    let cycles = graph.cycles();
    let in_cycle: HashSet<&str> = cycles.iter().flatten().copied().collect();
    for cyc in &cycles {
        let closing = cyc[cyc.len() - 2];
        c.push(pkg, Some(cn), None, ErrorKind::Cycle, format!(
            "detected a cycle in the replaces chain of channel {cn}, package {pkg}: {}{}; remove the replaces edge that closes it ({closing} replaces {})",
            cyc.join(" -> "),
            if graph.heads.is_empty() { " (so no entry is left as the channel head)" } else { "" },
            cyc[cyc.len() - 1]
        ));
    }
    match graph.heads.len() {
        0 => {
            if cycles.is_empty() {
                c.push(pkg, Some(cn), None, ErrorKind::NoHead, format!(
                    "no channel head found in channel {cn} of package {pkg}: every entry is replaced or skipped by another entry; the newest entry must not be named in any replaces or skips"
                ));
            }
        }
        1 => graph.check_stranded(&in_cycle, c),
        _ => c.push(pkg, Some(cn), None, ErrorKind::MultipleHeads, graph.multiple_heads(bundles, versions)),
    }
}

/// The replaces/skips graph of one channel's entries.
struct Graph<'a, 'g> {
    pkg: &'a str,
    /// Channel name.
    cn: &'g str,
    entries: &'g IndexMap<&'a str, &'a ChannelEntry, FxBuild>,
    /// Entries some entry skips.
    skipped: FxSet<&'a str>,
    /// Entries no entry replaces or skips, in entry order.
    heads: Vec<&'a str>,
}

impl<'a, 'g> Graph<'a, 'g> {
    fn new(pkg: &'a str, cn: &'g str, entries: &'g IndexMap<&'a str, &'a ChannelEntry, FxBuild>) -> Self {
        let mut incoming: FxSet<&str> = FxSet::default();
        let mut skipped: FxSet<&str> = FxSet::default();
        for e in entries.values() {
            if let Some(r) = &e.replaces {
                incoming.insert(r);
            }
            for s in &e.skips {
                incoming.insert(s);
                skipped.insert(s);
            }
        }
        let heads: Vec<&str> = entries.keys().copied().filter(|n| !incoming.contains(n)).collect();
        Graph { pkg, cn, entries, skipped, heads }
    }

    /// The replaces target of an entry that the validation walk follows: an entry of this
    /// channel that no entry skips (opm stops at a skipped replaces target).
    fn next(&self, name: &str) -> Option<&'a str> {
        let r = self.entries.get(name)?.replaces.as_deref()?;
        (self.entries.contains_key(r) && !self.skipped.contains(r)).then_some(r)
    }

    /// Cycles in the replaces graph (each entry has at most one replaces edge), each as the path
    /// around it with its first entry repeated at the end.
    fn cycles(&self) -> Vec<Vec<&'a str>> {
        // 1 = on path, 2 = done
        let mut state: FxMap<&str, u8> = FxMap::with_capacity_and_hasher(self.entries.len(), FxBuild::default());
        let mut cycles: Vec<Vec<&str>> = Vec::new();
        for start in self.entries.keys().copied() {
            if state.contains_key(start) {
                continue;
            }
            let mut path = Vec::new();
            let mut cur = Some(start);
            while let Some(n) = cur {
                match state.get(n) {
                    Some(1) => {
                        let pos = path.iter().position(|p| *p == n).unwrap_or(0);
                        let mut cyc: Vec<&str> = path[pos..].to_vec();
                        cyc.push(n);
                        cycles.push(cyc);
                        break;
                    }
                    Some(_) => break,
                    None => {
                        state.insert(n, 1);
                        path.push(n);
                        cur = self.next(n);
                    }
                }
            }
            for n in path {
                state.insert(n, 2);
            }
        }
        cycles
    }

    /// With one head: entries neither on the replaces chain from it, nor skipped, nor in a cycle.
    fn check_stranded(&self, in_cycle: &HashSet<&str>, c: &mut Collector) {
        let (pkg, cn, head) = (self.pkg, self.cn, self.heads[0]);
        let mut chain: FxSet<&str> = FxSet::from_iter([head]);
        let mut cur = head;
        while let Some(n) = self.next(cur) {
            if !chain.insert(n) {
                break;
            }
            cur = n;
        }
        let mut stranded: Vec<&str> = self
            .entries
            .keys()
            .copied()
            .filter(|n| !chain.contains(n) && !self.skipped.contains(n) && !in_cycle.contains(n))
            .collect();
        if stranded.is_empty() {
            return;
        }
        stranded.sort_unstable();
        let (noun, they, them) =
            if stranded.len() == 1 { ("bundle", "it is", "it") } else { ("bundles", "they are", "them") };
        c.push(pkg, Some(cn), None, ErrorKind::Stranded, format!(
            "channel {cn} of package {pkg} contains stranded {noun} {}: {they} not on the replaces chain from the head {head} and no entry skips {them}, so no upgrade reaches {them}. The chain {}. Link each one: name it in the replaces (or skips) of the entry that should upgrade from it, or remove it from the channel",
            list(&stranded),
            describe_chain(head, self.entries, &self.skipped, cn)
        ));
    }

    /// The message for a channel with several heads: each head's chain, newest first, a note on
    /// skipRange, and the heads' images.
    fn multiple_heads(&self, bundles: &FxMap<(&'a str, &'a str), &'a Bundle>, versions: &BundleChecks) -> String {
        let (pkg, cn, entries) = (self.pkg, self.cn, self.entries);
        let version = |n: &str| versions.version(pkg, n).map(|(v, _)| v);
        let mut heads = self.heads.clone();
        // Newest first (unknown versions last), then by name.
        heads.sort_by(|a, b| match (version(a), version(b)) {
            (Some(x), Some(y)) => y.cmp_precedence(x).then_with(|| a.cmp(b)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.cmp(b),
        });
        let chains: Vec<String> = heads.iter().map(|h| describe_chain(h, entries, &self.skipped, cn)).collect();
        let mut msg = format!(
            "channel {cn} of package {pkg} has {} heads, {}: a channel needs exactly one head (an entry that no other entry replaces or skips), so the upgrade graph is split into separate chains. Chains: {}. To fix it, link the chains: let an entry of the newer chain replace (or skip) the head of the older one",
            count_word(heads.len()),
            heads.join(" and "),
            chains.join("; ")
        );
        let with_range: Vec<String> = heads
            .iter()
            .filter_map(|h| entries[h].skip_range.as_deref().map(|r| format!("{h} has skipRange {r:?}")))
            .collect();
        if !with_range.is_empty() || entries.values().any(|e| e.skip_range.is_some()) {
            msg.push_str(&format!(
                ". Note: {}skipRange does not create an ordering edge; add replaces or skips to link the entries",
                if with_range.is_empty() { String::new() } else { format!("{}, but ", with_range.join(", ")) }
            ));
        }
        let images: Vec<String> = heads
            .iter()
            .map(|h| format!("{h}: {}", bundles.get(&(pkg, *h)).map_or("(no blob)", |b| image_or_none(&b.image))))
            .collect();
        msg.push_str(&format!(". The heads' images: {}", images.join(", ")));
        msg
    }
}

/// "h...t (t replaces x, which is not an entry of channel c)" for the replaces chain from `head`.
fn describe_chain(
    head: &str,
    entries: &IndexMap<&str, &ChannelEntry, FxBuild>,
    skipped: &FxSet<&str>,
    cn: &str,
) -> String {
    let mut seen: FxSet<&str> = FxSet::from_iter([head]);
    let mut tail = head;
    let mut len = 1;
    while let Some(r) = entries.get(tail).and_then(|e| e.replaces.as_deref()) {
        if !entries.contains_key(r) || skipped.contains(r) || !seen.insert(r) {
            break;
        }
        tail = r;
        len += 1;
    }
    let reason = match entries.get(tail).and_then(|e| e.replaces.as_deref()) {
        None if len == 1 => {
            return format!("{head} is left disconnected: no entry replaces or skips it and it replaces nothing");
        }
        None => format!("{tail} replaces nothing"),
        Some(r) if !entries.contains_key(r) => format!("{tail} replaces {r}, which is not an entry of channel {cn}"),
        Some(r) if skipped.contains(r) => {
            format!("{tail} replaces {r}, which another entry skips, so the chain stops there")
        }
        Some(r) => format!("{tail} replaces {r}, closing a cycle"),
    };
    if len == 1 { format!("{head} alone ({reason})") } else { format!("{head}...{tail} ({reason})") }
}

/// `olm.deprecations` blobs: one per known package, each entry referring to an existing package,
/// channel or bundle of it, with a message.
fn check_deprecations(cfg: &DeclarativeConfig, blobs: &Blobs<'_>, c: &mut Collector) {
    let mut seen: FxSet<&str> = FxSet::default();
    for (i, d) in cfg.deprecations.iter().enumerate() {
        let pkg = d.package.as_str();
        if pkg.is_empty() {
            c.push(
                "",
                None,
                None,
                ErrorKind::Deprecation,
                format!("olm.deprecations blob {i} has no package; set its package field"),
            );
            continue;
        }
        if !blobs.packages.contains_key(pkg) {
            c.push(pkg, None, None, ErrorKind::Deprecation, format!(
                "cannot apply deprecations to unknown package {pkg:?}; add its olm.package blob or fix the package field"
            ));
            continue;
        }
        if !seen.insert(pkg) {
            c.push(
                pkg,
                None,
                None,
                ErrorKind::Deprecation,
                format!("package {pkg} has more than one olm.deprecations blob; merge them into one"),
            );
            continue;
        }
        check_deprecation_entries(pkg, d, blobs, c);
    }
}

/// The entries of the one `olm.deprecations` blob of package `pkg`.
fn check_deprecation_entries(pkg: &str, d: &Deprecation, blobs: &Blobs<'_>, c: &mut Collector) {
    let mut refs: FxSet<(&str, &str)> = FxSet::default();
    for (j, e) in d.entries.iter().enumerate() {
        let r = &e.reference;
        let here = format!("olm.deprecations entries[{j}]");
        if r.schema.is_empty() {
            c.push(
                pkg,
                None,
                None,
                ErrorKind::Deprecation,
                format!("{here}: reference.schema must be set (olm.package, olm.channel or olm.bundle)"),
            );
            continue;
        }
        if !refs.insert((&r.schema, &r.name)) {
            c.push(
                pkg,
                None,
                None,
                ErrorKind::Deprecation,
                format!("{here}: duplicate deprecation entry for {} {:?}", r.schema, r.name),
            );
            continue;
        }
        if e.message.is_empty() {
            c.push(
                pkg,
                None,
                None,
                ErrorKind::Deprecation,
                format!("{here}: message must be set; tell users why and what to use instead"),
            );
        }
        match r.schema.as_str() {
            SCHEMA_BUNDLE => {
                if !blobs.bundles.contains_key(&(pkg, r.name.as_str())) {
                    c.push(pkg, None, Some(&r.name), ErrorKind::Deprecation, format!("{here}: cannot deprecate bundle {:?}: bundle not found in package {pkg}", r.name));
                }
            }
            SCHEMA_CHANNEL => {
                if !blobs.channels_of.get(pkg).is_some_and(|m| m.contains_key(r.name.as_str())) {
                    c.push(pkg, Some(&r.name), None, ErrorKind::Deprecation, format!("{here}: cannot deprecate channel {:?}: channel not found in package {pkg}", r.name));
                }
            }
            SCHEMA_PACKAGE => {
                if !r.name.is_empty() {
                    c.push(pkg, None, None, ErrorKind::Deprecation, format!("{here}: reference.name must be empty for a deprecated package (got {:?})", r.name));
                }
            }
            other => c.push(pkg, None, None, ErrorKind::Deprecation, format!(
                "{here}: cannot deprecate an object of schema {other:?}; reference.schema must be olm.package, olm.channel or olm.bundle"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::parse::parse_bytes;

    fn cfg(yaml: &str) -> DeclarativeConfig {
        parse_bytes("t.yaml", yaml.as_bytes()).unwrap()
    }

    fn bundle(pkg: &str, name: &str, version: &str) -> String {
        format!(
            "---\nschema: olm.bundle\npackage: {pkg}\nname: {name}\nimage: registry.local/{pkg}:{version}\nproperties:\n- type: olm.package\n  value: {{packageName: {pkg}, version: {version}}}\n"
        )
    }

    fn errs(yaml: &str) -> ValidationErrors {
        validate(&cfg(yaml)).expect_err("catalog should be invalid")
    }

    const PKG: &str = "---\nschema: olm.package\nname: p\ndefaultChannel: stable\n";

    #[test]
    fn valid_chain_with_skips_passes() {
        let y = format!(
            "{PKG}---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n- name: p.v2\n  replaces: p.v1\n- name: p.v3\n  replaces: p.v1\n  skips: [p.v2]\n  skipRange: '<3.0.0'\n{}{}{}",
            bundle("p", "p.v1", "1.0.0"),
            bundle("p", "p.v2", "2.0.0"),
            bundle("p", "p.v3", "3.0.0")
        );
        validate(&cfg(&y)).unwrap();
    }

    /// OLM's e2e suite serves a package `PackageDependent` from a ConfigMap catalog: opm's
    /// file-based rules (`opm validate`, `opm serve`) refuse the name, a SQLite-backed registry
    /// serves it. Only the name rule differs; an empty name is refused by both.
    #[test]
    fn package_names_that_are_not_dns_labels_are_refused_only_by_the_file_based_rules() {
        let y = format!(
            "---\nschema: olm.package\nname: PackageDependent\ndefaultChannel: alpha\n---\nschema: olm.channel\npackage: PackageDependent\nname: alpha\nentries:\n- name: csv-right\n{}",
            bundle("PackageDependent", "csv-right", "0.1.0").replace("/PackageDependent:", "/package-dependent:")
        );
        let e = validate(&cfg(&y)).expect_err("opm validate refuses it");
        assert_eq!(e.len(), 1, "{e}");
        assert_eq!((e.errors[0].package.as_str(), e.errors[0].kind), ("PackageDependent", ErrorKind::Name));
        assert_eq!(
            e.errors[0].message,
            "invalid package name \"PackageDependent\": a package name must be a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)"
        );
        assert_eq!(validate_with(&cfg(&y), PackageNames::Dns1123Label), Err(e));
        validate_with(&cfg(&y), PackageNames::NonEmpty).expect("a SQLite-backed registry serves it");
        // Every other rule still applies.
        let broken = y.replace("defaultChannel: alpha", "defaultChannel: beta");
        let e = validate_with(&cfg(&broken), PackageNames::NonEmpty).expect_err("no such channel");
        assert_eq!(e.errors.iter().map(|e| e.kind).collect::<Vec<_>>(), [ErrorKind::DefaultChannel], "{e}");
        let nameless = "---\nschema: olm.package\ndefaultChannel: alpha\n";
        let e = validate_with(&cfg(nameless), PackageNames::NonEmpty).expect_err("a name is needed");
        assert_eq!(e.errors[0].kind, ErrorKind::Name, "{e}");
    }

    /// Two bundles of one version: an error for a file-based catalog (opm), accepted from a
    /// catalog served from SQLite, whose loader has no such rule.
    #[test]
    fn duplicate_versions_are_refused_only_where_opm_refuses_them() {
        let chan = "---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n- name: p.v2\n  replaces: p.v1\n";
        let y = format!("{PKG}{chan}{}{}", bundle("p", "p.v1", "1.0.0"), bundle("p", "p.v2", "1.0.0"));
        let e = validate_with(&cfg(&y), PackageNames::Dns1123Label).expect_err("duplicate version");
        assert_eq!(e.errors.iter().map(|e| e.kind).collect::<Vec<_>>(), [ErrorKind::Version], "{e}");
        validate_with(&cfg(&y), PackageNames::NonEmpty).expect("a SQLite-backed registry serves it");
    }

    /// Errors that involve several bundle blobs name each by its image, so that the
    /// author can tell which one is wrong.
    #[test]
    fn errors_about_several_blobs_name_their_images() {
        let chan = "---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n- name: p.v2\n";
        let twice = bundle("p", "p.v1", "1.0.0").replace("registry.local/p:1.0.0", "registry.local/other:1.0.0");
        let y = format!("{PKG}{chan}{}{twice}{}", bundle("p", "p.v1", "1.0.0"), bundle("p", "p.v2", "1.0.0"));
        let e = errs(&y);
        let messages: Vec<&str> = e.errors.iter().map(|e| e.message.as_str()).collect();
        assert!(messages.contains(&"duplicate bundle \"p.v1\": package p has 2 olm.bundle blobs with this name (images registry.local/p:1.0.0 and registry.local/other:1.0.0); keep one"), "{e}");
        assert!(messages.contains(&"package p has duplicate version 1.0.0: bundles p.v1 and p.v2 all have version 1.0.0 in their olm.package property (images: p.v1: registry.local/other:1.0.0, p.v2: registry.local/p:1.0.0); every bundle of a package needs its own version (bump the version of the respin or use the release field)"), "{e}");
        assert!(
            messages
                .iter()
                .any(|m| m.contains("has two heads, p.v1 and p.v2") || m.contains("has two heads, p.v2 and p.v1")),
            "{e}"
        );
        assert!(
            messages.iter().any(|m| m
                .ends_with(". The heads' images: p.v1: registry.local/other:1.0.0, p.v2: registry.local/p:1.0.0")
                || m.ends_with(". The heads' images: p.v2: registry.local/p:1.0.0, p.v1: registry.local/other:1.0.0")),
            "{e}"
        );
        assert_eq!(blob_images(&["a", "a"]), "all with image a");
        assert_eq!(blob_images(&["a", "", "c"]), "images a, no image and c");
    }

    #[test]
    fn skip_range_is_not_an_edge() {
        let y = format!(
            "{PKG}---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n- name: p.v2\n  skipRange: '<2.0.0'\n{}{}",
            bundle("p", "p.v1", "1.0.0"),
            bundle("p", "p.v2", "2.0.0")
        );
        let e = errs(&y);
        assert_eq!(e.len(), 1, "{e}");
        let m = e.errors[0].to_string();
        assert_eq!(e.errors[0].kind, ErrorKind::MultipleHeads);
        assert!(m.contains("p.v2 and p.v1") && m.contains("skipRange does not create an ordering edge"), "{m}");
    }

    #[test]
    fn stranded_bundle_is_reported_with_chain_end() {
        let y = format!(
            "{PKG}---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n- name: p.v2\n  replaces: p.v1\n- name: p.v3\n  replaces: p.v2\n- name: p.v4\n  replaces: p.v3\n  skips: [p.v2]\n{}{}{}{}",
            bundle("p", "p.v1", "1.0.0"),
            bundle("p", "p.v2", "2.0.0"),
            bundle("p", "p.v3", "3.0.0"),
            bundle("p", "p.v4", "4.0.0")
        );
        // p.v4 -> p.v3, whose replaces (p.v2) is skipped: the chain stops, p.v1 is stranded.
        let e = errs(&y);
        assert_eq!(e.errors[0].kind, ErrorKind::Stranded, "{e}");
        let m = e.errors[0].to_string();
        assert!(
            m.contains("stranded bundle p.v1: it is not on")
                && m.contains("p.v3 replaces p.v2, which another entry skips"),
            "{m}"
        );
    }

    #[test]
    fn cycle_is_reported_with_path_and_terminates() {
        let y = format!(
            "{PKG}---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n  replaces: p.v2\n- name: p.v2\n  replaces: p.v1\n{}{}",
            bundle("p", "p.v1", "1.0.0"),
            bundle("p", "p.v2", "2.0.0")
        );
        let e = errs(&y);
        assert!(
            e.errors.iter().any(|x| x.kind == ErrorKind::Cycle && x.message.contains("p.v1 -> p.v2 -> p.v1")),
            "{e}"
        );
    }

    #[test]
    fn all_errors_are_collected_across_packages() {
        let y = format!(
            "---\nschema: olm.package\nname: a\n---\nschema: olm.channel\npackage: a\nname: s\nentries:\n- name: a.v1\n- name: ghost\n{}---\nschema: olm.package\nname: b\ndefaultChannel: s\n---\nschema: olm.channel\npackage: b\nname: s\nentries:\n- name: b.v1\n---\nschema: olm.bundle\npackage: b\nname: b.v1\nimage: ''\nproperties: []\n",
            bundle("a", "a.v1", "not-semver")
        );
        let e = errs(&y);
        let kinds: Vec<(&str, ErrorKind)> = e.errors.iter().map(|x| (x.package.as_str(), x.kind)).collect();
        assert!(kinds.contains(&("a", ErrorKind::DefaultChannel)), "{e}");
        assert!(kinds.contains(&("a", ErrorKind::Version)), "{e}");
        assert!(kinds.contains(&("a", ErrorKind::MissingBundle)), "{e}");
        assert!(kinds.contains(&("b", ErrorKind::Image)), "{e}");
        assert!(kinds.contains(&("b", ErrorKind::Property)), "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with("invalid catalog:") && text.contains("\npackage a:") && text.contains("\npackage b:"),
            "{text}"
        );
    }

    #[test]
    fn property_shapes_are_checked() {
        let y = format!(
            "{PKG}---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n---\nschema: olm.bundle\npackage: p\nname: p.v1\nimage: registry.local/p:1\nproperties:\n- type: olm.package\n  value: {{packageName: p, version: 1.0.0}}\n- type: olm.package.required\n  value: {{packageName: q, versionRange: '>=1.0,<2'}}\n- type: olm.gvk\n  value: {{group: example.com, version: v1}}\n- type: olm.constraint\n  value: {{failureMessage: x, gvk: {{group: g, version: v1, kind: K}}, package: {{packageName: q, versionRange: '>=1.0.0'}}}}\n- type: olm.constraint\n  value: {{cel: {{rule: 'true'}}, extra: 1}}\n"
        );
        let e = errs(&y);
        let text = e.to_string();
        assert_eq!(e.len(), 4, "{text}");
        assert!(text.contains("properties[1]") && text.contains("invalid semver range"), "{text}");
        assert!(text.contains("properties[2]") && text.contains("kind"), "{text}");
        assert!(text.contains("properties[3]") && text.contains("exactly one of"), "{text}");
        assert!(text.contains("properties[4]") && text.contains("unknown field"), "{text}");
    }

    #[test]
    fn release_rules() {
        let y = format!(
            "{PKG}---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n---\nschema: olm.bundle\npackage: p\nname: p.v1\nimage: registry.local/p:1\nproperties:\n- type: olm.package\n  value: {{packageName: p, version: 1.0.0, release: '2'}}\n"
        );
        let e = errs(&y);
        assert!(e.to_string().contains("normalized name \"p-v1.0.0-2\""), "{e}");
        let ok = y.replace("name: p.v1", "name: p-v1.0.0-2");
        validate(&cfg(&ok)).unwrap();
    }

    #[test]
    fn deprecations_are_checked() {
        let y = format!(
            "{PKG}---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n{}---\nschema: olm.deprecations\npackage: p\nentries:\n- reference: {{schema: olm.bundle, name: p.v9}}\n  message: gone\n- reference: {{schema: olm.channel, name: stable}}\n  message: ''\n",
            bundle("p", "p.v1", "1.0.0")
        );
        let e = errs(&y);
        let text = e.to_string();
        assert!(text.contains("cannot deprecate bundle \"p.v9\"") && text.contains("message must be set"), "{text}");
    }

    #[test]
    fn quick_reference_check_agrees_with_the_full_parser() {
        let cases = [
            "quay.io/org/op-bundle:v1.0.0",
            "registry.local:5000/a/b/c@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "localhost/x:1",
            "ubuntu",
            "library/ubuntu:22.04",
            "a__b/c--d/e.f_g:T-a.g_1",
            "Quay.io/org/op:v1",
            "quay.io/Org/op:v1",
            "oci://quay.io/kuadrant/wasm-shim:v0.1.0",
            "quay.io/org/op:",
            "quay.io/org/op@sha256:abc",
            "quay.io//op",
            "-a/b",
            "a-/b",
            "quay.io/org/op:.bad",
            "[::1]:5000/x:1",
            "host:port/x",
            "a.b/c__d___e",
        ];
        for s in cases {
            let full = oci_client::Reference::try_from(s).is_ok();
            if quick_reference_ok(s) {
                assert!(full, "quick check accepted {s:?} but the full parser rejects it");
            }
            assert_eq!(check_reference(s).is_ok(), full, "{s}");
        }
        assert!(quick_reference_ok("quay.io/org/op-bundle:v1.0.0") && quick_reference_ok("ubuntu"));
    }

    #[test]
    fn validate_path_reports_the_same_errors_as_validate() {
        let y = format!(
            "{PKG}---\nschema: olm.channel\npackage: p\nname: stable\nentries:\n- name: p.v1\n- name: p.v2\n  skipRange: '<2.0.0'\n{}---\nschema: olm.bundle\npackage: p\nname: p.v2\nimage: 'Bad/Ref'\nproperties: []\n",
            bundle("p", "p.v1", "1.0.0")
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("p")).unwrap();
        std::fs::write(dir.path().join("p/catalog.yaml"), &y).unwrap();
        let (counts, result) = validate_path(dir.path()).unwrap();
        assert_eq!((counts.packages, counts.channels, counts.bundles), (1, 1, 2));
        let streamed = result.unwrap_err();
        let whole = validate(&cfg(&y)).unwrap_err();
        assert_eq!(streamed, whole);
        assert_eq!(whole.len(), 3, "{whole}");
    }

    #[test]
    fn dns_label() {
        assert!(
            is_dns1123_label("etcd-operator")
                && !is_dns1123_label("Etcd")
                && !is_dns1123_label("-a")
                && !is_dns1123_label("")
        );
        // A subdomain's parts have no limit of their own (a 70-character name is a valid
        // Subscription name); the whole is at most 253.
        let long = "a".repeat(70);
        assert!(!is_dns1123_label(&long) && is_dns1123_subdomain(&long) && is_dns1123_subdomain("a.b-c.d"));
        assert!(
            !is_dns1123_subdomain("a..b")
                && !is_dns1123_subdomain("a.-b")
                && !is_dns1123_subdomain("A")
                && !is_dns1123_subdomain(&"a".repeat(254))
        );
    }
}
