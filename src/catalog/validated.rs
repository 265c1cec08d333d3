//! What a valid catalog shows, in memory: [`ValidatedCatalog`], for discovery (the PackageManifests
//! and content of `crate::discovery::served::ServedCatalog`), `capstan discover` and
//! `catalog generate`. It keeps descriptions, icons, every property and optionally the bundle
//! objects, and is built only from a catalog that validates ([`ValidatedCatalog::new`] returns the
//! validation errors). It is not the resolver's index: that is `crate::resolve::CatalogIndex`,
//! which never fails (a broken package, channel or bundle is recorded there so that the rest of
//! the catalog still resolves) and keeps only what solving needs, one per CatalogSource even with
//! discovery off; `CatalogIndex::from_validated` builds one from the other.
//!
//! Built once per catalog (by digest) and shared behind an [`Arc`]; every lookup is a binary
//! search or a hash lookup, and nothing is cloned out of the source [`DeclarativeConfig`]: the
//! config is consumed and its strings moved. To keep memory small (`olm-v0.md` §7: catalog
//! servers are OOM-killed, operator-registry#783), `olm.bundle.object` payloads are dropped by
//! default (they stay on disk in the catalog files), GVKs are interned once per catalog, and
//! bundles refer to their package by number.
//!
//! Semantics of what is indexed: packages, channels and entries as in `olm-v0.md` §3.2; the
//! parsed `olm.package` version per bundle; provided APIs (`olm.gvk`) and requirements
//! (`olm.gvk.required`, `olm.package.required`, `olm.constraint`) per bundle (§2.2–2.3, §3.3);
//! deprecation messages (§3.2).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use semver::Version;
use serde_json::Value;

use super::error::CatalogError;
use super::model::{
    ChannelEntry, DeclarativeConfig, Icon, Property, RelatedImage, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE,
};
use super::property::{self, Constraint, Gvk, PackageProperty, PackageRequired};
use super::semver_range::{self, Range};
use super::validate::{PackageNames, ValidationErrors, validate_with};

/// Index of a bundle in [`ValidatedCatalog::bundle_at`].
pub type BundleId = u32;
/// Index of an interned GVK in [`ValidatedCatalog::gvk`].
pub type GvkId = u32;

/// Options for building an index.
#[derive(Debug, Clone, Copy, Default)]
pub struct IndexOptions {
    /// Keep `olm.bundle.object` properties in [`IndexedBundle::properties`] (default: dropped).
    pub keep_bundle_objects: bool,
    /// The package names the catalog may have (default: DNS-1123 labels, as `opm validate`; a
    /// ConfigMap or `spec.address` catalog takes any non-empty name, as OLM serves it).
    pub package_names: PackageNames,
}

/// A package: its metadata, channels (sorted by name) and bundles (sorted by name).
#[derive(Debug)]
pub struct IndexedPackage {
    /// Package name.
    pub name: String,
    /// Channel a Subscription without a channel gets.
    pub default_channel: String,
    /// Markdown description.
    pub description: Option<String>,
    /// Icon.
    pub icon: Option<Icon>,
    /// Package-level properties.
    pub properties: Vec<Property>,
    /// Channels sorted by name.
    pub channels: Vec<IndexedChannel>,
    /// Bundle ids of this package, sorted by bundle name.
    pub bundles: Vec<BundleId>,
    /// Deprecation message of the whole package, if deprecated (`olm.deprecations`).
    pub deprecation: Option<String>,
}

/// A channel: its entries in file order and its head.
#[derive(Debug)]
pub struct IndexedChannel {
    /// Channel name.
    pub name: String,
    /// Entries in the order of the `olm.channel` blob.
    pub entries: Vec<IndexedEntry>,
    /// The channel head (the one entry no other entry replaces or skips).
    pub head: BundleId,
    /// Channel properties.
    pub properties: Vec<Property>,
    /// Deprecation message, if the channel is deprecated.
    pub deprecation: Option<String>,
}

/// One channel entry with its upgrade edges (`replaces`, `skips`, `skipRange`; §4.2).
#[derive(Debug)]
pub struct IndexedEntry {
    /// The bundle.
    pub bundle: BundleId,
    /// Name of the bundle this one replaces (may be absent from the catalog).
    pub replaces: Option<String>,
    /// Names of bundles this one skips.
    pub skips: Vec<String>,
    /// The parsed skipRange.
    pub skip_range: Option<Range>,
}

/// A `olm.package.required` requirement (or a `package` constraint) with its parsed range.
#[derive(Debug, Clone)]
pub struct PackageRequirement {
    /// Required package.
    pub package_name: String,
    /// Accepted versions.
    pub range: Range,
}

/// A bundle with its parsed version and APIs.
#[derive(Debug)]
pub struct IndexedBundle {
    /// Bundle name (CSV name).
    pub name: String,
    /// Index of its package in [`ValidatedCatalog::packages`].
    pub package: u32,
    /// Bundle image reference.
    pub image: String,
    /// Version from the `olm.package` property.
    pub version: Version,
    /// Release from the `olm.package` property, if any.
    pub release: Option<String>,
    /// Properties, without `olm.bundle.object` unless [`IndexOptions::keep_bundle_objects`].
    pub properties: Vec<Property>,
    /// Related images.
    pub related_images: Vec<RelatedImage>,
    /// Provided APIs (`olm.gvk`), interned.
    pub provided_gvks: Vec<GvkId>,
    /// Required APIs (`olm.gvk.required`), interned.
    pub required_gvks: Vec<GvkId>,
    /// Required packages (`olm.package.required`).
    pub required_packages: Vec<PackageRequirement>,
    /// `olm.constraint` values.
    pub constraints: Vec<Constraint>,
    /// Channels listing this bundle (indexes into the package's `channels`).
    pub channels: Vec<u32>,
    /// Deprecation message, if the bundle is deprecated (`olm.deprecations`).
    pub deprecation: Option<String>,
    /// Whether the legacy `olm.deprecated` property is set (OLM then never installs it, §3.2).
    pub legacy_deprecated: bool,
}

/// Error building an index from a path: unreadable/unparseable input, or an invalid catalog.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The catalog could not be read or parsed.
    #[error(transparent)]
    Load(#[from] CatalogError),
    /// The catalog does not validate.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
}

/// The content of one valid catalog, indexed for lookups (module documentation). Immutable;
/// share it as `Arc<ValidatedCatalog>`.
#[derive(Debug, Default)]
pub struct ValidatedCatalog {
    packages: Vec<IndexedPackage>,
    bundles: Vec<IndexedBundle>,
    gvks: Vec<Gvk>,
    gvk_ids: HashMap<Gvk, GvkId>,
    providers: Vec<Vec<BundleId>>,
    others: Vec<Value>,
}

impl ValidatedCatalog {
    /// Loads, validates and indexes a catalog file or directory, returning a shared handle.
    ///
    /// # Errors
    /// [`IndexError::Load`] from [`crate::catalog::parse::load_path`]; [`IndexError::Invalid`]
    /// with every validation error.
    pub fn load(path: &Path) -> Result<Arc<ValidatedCatalog>, IndexError> {
        let cfg = super::parse::load_path(path)?;
        Ok(Arc::new(ValidatedCatalog::new(cfg)?))
    }

    /// Validates and indexes a catalog, consuming it, with default [`IndexOptions`].
    ///
    /// # Errors
    /// [`ValidationErrors`] when the catalog does not validate (see
    /// [`crate::catalog::validate::validate`]).
    pub fn new(cfg: DeclarativeConfig) -> Result<ValidatedCatalog, ValidationErrors> {
        ValidatedCatalog::with_options(cfg, IndexOptions::default())
    }

    /// As [`ValidatedCatalog::new`], with options.
    ///
    /// # Errors
    /// [`ValidationErrors`] when the catalog does not validate.
    pub fn with_options(cfg: DeclarativeConfig, opts: IndexOptions) -> Result<ValidatedCatalog, ValidationErrors> {
        validate_with(&cfg, opts.package_names)?;
        Ok(build(cfg, opts))
    }

    /// All packages, sorted by name.
    pub fn packages(&self) -> &[IndexedPackage] {
        &self.packages
    }

    /// Position of a package in [`ValidatedCatalog::packages`].
    pub fn package_id(&self, name: &str) -> Option<u32> {
        self.packages.binary_search_by(|p| p.name.as_str().cmp(name)).ok().map(|i| i as u32)
    }

    /// A package by name.
    pub fn package(&self, name: &str) -> Option<&IndexedPackage> {
        self.package_id(name).map(|i| &self.packages[i as usize])
    }

    /// The channels of a package, sorted by name.
    pub fn channels(&self, package: &str) -> Option<&[IndexedChannel]> {
        self.package(package).map(|p| p.channels.as_slice())
    }

    /// A channel by package and name.
    pub fn channel(&self, package: &str, channel: &str) -> Option<&IndexedChannel> {
        let p = self.package(package)?;
        p.channels.binary_search_by(|c| c.name.as_str().cmp(channel)).ok().map(|i| &p.channels[i])
    }

    /// A bundle id by package and bundle name.
    pub fn bundle_id(&self, package: &str, name: &str) -> Option<BundleId> {
        let p = self.package(package)?;
        p.bundles.binary_search_by(|b| self.bundles[*b as usize].name.as_str().cmp(name)).ok().map(|i| p.bundles[i])
    }

    /// A bundle by package and bundle name.
    pub fn bundle(&self, package: &str, name: &str) -> Option<&IndexedBundle> {
        self.bundle_id(package, name).map(|i| &self.bundles[i as usize])
    }

    /// A bundle by id. Panics on an id not from this index.
    pub fn bundle_at(&self, id: BundleId) -> &IndexedBundle {
        &self.bundles[id as usize]
    }

    /// All bundles, grouped by package (ids are positions in this slice).
    pub fn all_bundles(&self) -> &[IndexedBundle] {
        &self.bundles
    }

    /// The bundles of a package, sorted by name.
    pub fn bundles_of<'a>(&'a self, package: &str) -> impl Iterator<Item = &'a IndexedBundle> + 'a {
        let ids: &[BundleId] = self.package(package).map_or(&[], |p| p.bundles.as_slice());
        ids.iter().map(move |i| &self.bundles[*i as usize])
    }

    /// The parsed version of a bundle.
    pub fn version(&self, package: &str, name: &str) -> Option<&Version> {
        self.bundle(package, name).map(|b| &b.version)
    }

    /// The package name of a bundle.
    pub fn package_of(&self, bundle: &IndexedBundle) -> &str {
        &self.packages[bundle.package as usize].name
    }

    /// An interned GVK.
    pub fn gvk(&self, id: GvkId) -> &Gvk {
        &self.gvks[id as usize]
    }

    /// The id of a GVK, if any bundle provides or requires it.
    pub fn gvk_id(&self, gvk: &Gvk) -> Option<GvkId> {
        self.gvk_ids.get(gvk).copied()
    }

    /// The APIs a bundle provides.
    pub fn provided_gvks<'a>(&'a self, bundle: &'a IndexedBundle) -> impl Iterator<Item = &'a Gvk> + 'a {
        bundle.provided_gvks.iter().map(move |g| &self.gvks[*g as usize])
    }

    /// The APIs a bundle requires (`olm.gvk.required`).
    pub fn required_gvks<'a>(&'a self, bundle: &'a IndexedBundle) -> impl Iterator<Item = &'a Gvk> + 'a {
        bundle.required_gvks.iter().map(move |g| &self.gvks[*g as usize])
    }

    /// Ids of the bundles (of any package) that provide a GVK, in id order.
    pub fn providers(&self, gvk: &Gvk) -> &[BundleId] {
        self.gvk_id(gvk).map_or(&[], |id| self.providers[id as usize].as_slice())
    }

    /// Blobs of schemas other than the four OLM ones, verbatim.
    pub fn others(&self) -> &[Value] {
        &self.others
    }
}

fn intern(gvks: &mut Vec<Gvk>, ids: &mut HashMap<Gvk, GvkId>, g: Gvk) -> GvkId {
    if let Some(id) = ids.get(&g) {
        return *id;
    }
    let id = gvks.len() as GvkId;
    gvks.push(g.clone());
    ids.insert(g, id);
    id
}

/// Builds the index from a validated config (validation guarantees the lookups below succeed;
/// anything unexpected is skipped rather than panicking).
fn build(cfg: DeclarativeConfig, opts: IndexOptions) -> ValidatedCatalog {
    let DeclarativeConfig { packages, channels, bundles, deprecations, others } = cfg;
    let mut idx = ValidatedCatalog { others, ..Default::default() };
    idx.add_packages(packages);
    idx.add_bundles(bundles, opts);
    idx.add_channels(channels);
    idx.add_deprecations(deprecations);
    idx
}

/// What the index keeps of a bundle's properties ([`ValidatedCatalog::read_properties`]).
struct BundleProperties {
    version: Version,
    release: Option<String>,
    provided: Vec<GvkId>,
    required: Vec<GvkId>,
    required_packages: Vec<PackageRequirement>,
    constraints: Vec<Constraint>,
    legacy_deprecated: bool,
}

impl ValidatedCatalog {
    /// The packages, sorted by name, the first of each name.
    fn add_packages(&mut self, mut packages: Vec<super::model::Package>) {
        packages.sort_by(|a, b| a.name.cmp(&b.name));
        packages.dedup_by(|a, b| a.name == b.name);
        self.packages = packages
            .into_iter()
            .map(|p| IndexedPackage {
                name: p.name,
                default_channel: p.default_channel.unwrap_or_default(),
                description: p.description,
                icon: p.icon,
                properties: p.properties,
                channels: Vec::new(),
                bundles: Vec::new(),
                deprecation: None,
            })
            .collect();
    }

    /// The bundles of known packages, sorted by (package, name) so that ids group by package,
    /// then the providers of each GVK.
    fn add_bundles(&mut self, bundles: Vec<super::model::Bundle>, opts: IndexOptions) {
        let mut bundles: Vec<_> =
            bundles.into_iter().filter_map(|b| self.package_id(&b.package).map(|p| (p, b))).collect();
        bundles.sort_by(|(pa, a), (pb, b)| pa.cmp(pb).then_with(|| a.name.cmp(&b.name)));
        bundles.dedup_by(|(pa, a), (pb, b)| pa == pb && a.name == b.name);
        for (pkg, b) in bundles {
            let mut props = b.properties;
            if !opts.keep_bundle_objects {
                props.retain(|p| p.type_ != property::BUNDLE_OBJECT);
            }
            props.shrink_to_fit();
            let BundleProperties {
                version,
                release,
                mut provided,
                required,
                required_packages,
                constraints,
                legacy_deprecated,
            } = self.read_properties(&props);
            provided.sort_unstable();
            provided.dedup();
            let id = self.bundles.len() as BundleId;
            self.packages[pkg as usize].bundles.push(id);
            self.bundles.push(IndexedBundle {
                name: b.name,
                package: pkg,
                image: b.image,
                version,
                release,
                properties: props,
                related_images: b.related_images,
                provided_gvks: provided,
                required_gvks: required,
                required_packages,
                constraints,
                channels: Vec::new(),
                deprecation: None,
                legacy_deprecated,
            });
        }
        self.providers = vec![Vec::new(); self.gvks.len()];
        for (id, b) in self.bundles.iter().enumerate() {
            for g in &b.provided_gvks {
                self.providers[*g as usize].push(id as BundleId);
            }
        }
    }

    /// Reads a bundle's properties, interning its GVKs; what does not decode is skipped.
    fn read_properties(&mut self, props: &[super::model::Property]) -> BundleProperties {
        let mut out = BundleProperties {
            version: Version::new(0, 0, 0),
            release: None,
            provided: Vec::new(),
            required: Vec::new(),
            required_packages: Vec::new(),
            constraints: Vec::new(),
            legacy_deprecated: false,
        };
        for p in props {
            match p.type_.as_str() {
                property::PACKAGE => {
                    if let Ok(pp) = p.decode::<PackageProperty>() {
                        if let Ok(v) = Version::parse(&pp.version) {
                            out.version = v;
                        }
                        out.release = pp.release.filter(|r| !r.is_empty());
                    }
                }
                property::GVK => {
                    if let Ok(g) = p.decode::<Gvk>() {
                        out.provided.push(intern(&mut self.gvks, &mut self.gvk_ids, g));
                    }
                }
                property::GVK_REQUIRED => {
                    if let Ok(g) = p.decode::<Gvk>() {
                        out.required.push(intern(&mut self.gvks, &mut self.gvk_ids, g));
                    }
                }
                property::PACKAGE_REQUIRED => {
                    if let Ok(r) = p.decode::<PackageRequired>()
                        && let Ok(range) = semver_range::parse(&r.version_range)
                    {
                        out.required_packages.push(PackageRequirement { package_name: r.package_name, range });
                    }
                }
                property::CONSTRAINT => {
                    if let Ok(c) = p.decode::<Constraint>() {
                        out.constraints.push(c);
                    }
                }
                property::DEPRECATED => out.legacy_deprecated = true,
                _ => {}
            }
        }
        out
    }

    /// The channels of known packages, sorted by name, the first of each name; a channel
    /// without a head (or whose entries name no bundle) is left out.
    fn add_channels(&mut self, channels: Vec<super::model::Channel>) {
        let mut by_pkg: Vec<Vec<super::model::Channel>> = (0..self.packages.len()).map(|_| Vec::new()).collect();
        for ch in channels {
            if let Some(p) = self.package_id(&ch.package) {
                by_pkg[p as usize].push(ch);
            }
        }
        for (p, mut chans) in by_pkg.into_iter().enumerate() {
            chans.sort_by(|a, b| a.name.cmp(&b.name));
            chans.dedup_by(|a, b| a.name == b.name);
            let pkg_name = self.packages[p].name.clone();
            let mut out = Vec::with_capacity(chans.len());
            for ch in chans {
                let ci = out.len() as u32;
                out.extend(self.index_channel(&pkg_name, ci, ch));
            }
            self.packages[p].channels = out;
        }
    }

    /// One channel of package `pkg_name`, to be the package's channel number `ci`.
    fn index_channel(&mut self, pkg_name: &str, ci: u32, ch: super::model::Channel) -> Option<IndexedChannel> {
        let mut entries = Vec::with_capacity(ch.entries.len());
        let mut incoming: std::collections::HashSet<String> = std::collections::HashSet::new();
        for e in &ch.entries {
            incoming.extend(e.replaces.iter().cloned());
            incoming.extend(e.skips.iter().cloned());
        }
        let mut head = None;
        for ChannelEntry { name, replaces, skips, skip_range, .. } in ch.entries {
            let Some(bundle) = self.bundle_id(pkg_name, &name) else { continue };
            if !incoming.contains(&name) {
                head = Some(bundle);
            }
            self.bundles[bundle as usize].channels.push(ci);
            entries.push(IndexedEntry {
                bundle,
                replaces,
                skips,
                skip_range: skip_range.and_then(|r| semver_range::parse(&r).ok()),
            });
        }
        let head = head?;
        Some(IndexedChannel { name: ch.name, entries, head, properties: ch.properties, deprecation: None })
    }

    /// The deprecation messages, on the package, channel or bundle each names.
    fn add_deprecations(&mut self, deprecations: Vec<super::model::Deprecation>) {
        for d in deprecations {
            let Some(p) = self.package_id(&d.package) else { continue };
            for e in d.entries {
                match e.reference.schema.as_str() {
                    SCHEMA_PACKAGE => self.packages[p as usize].deprecation = Some(e.message),
                    SCHEMA_CHANNEL => {
                        let pkg = &mut self.packages[p as usize];
                        if let Ok(i) = pkg.channels.binary_search_by(|c| c.name.as_str().cmp(&e.reference.name)) {
                            pkg.channels[i].deprecation = Some(e.message);
                        }
                    }
                    SCHEMA_BUNDLE => {
                        let name = self.packages[p as usize].name.clone();
                        if let Some(b) = self.bundle_id(&name, &e.reference.name) {
                            self.bundles[b as usize].deprecation = Some(e.message);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::parse::parse_bytes;

    const CAT: &str = r#"
schema: olm.package
name: etcd
defaultChannel: stable
---
schema: olm.channel
package: etcd
name: stable
entries:
- name: etcd.v0.9.0
- name: etcd.v0.9.2
  replaces: etcd.v0.9.0
  skipRange: '>=0.9.0 <0.9.2'
---
schema: olm.bundle
package: etcd
name: etcd.v0.9.0
image: quay.io/x/etcd:0.9.0
properties:
- {type: olm.package, value: {packageName: etcd, version: 0.9.0}}
- {type: olm.gvk, value: {group: etcd.database.coreos.com, version: v1beta2, kind: EtcdCluster}}
---
schema: olm.bundle
package: etcd
name: etcd.v0.9.2
image: quay.io/x/etcd:0.9.2
properties:
- {type: olm.package, value: {packageName: etcd, version: 0.9.2}}
- {type: olm.gvk, value: {group: etcd.database.coreos.com, version: v1beta2, kind: EtcdCluster}}
- {type: olm.package.required, value: {packageName: other, versionRange: '>=1.0.0'}}
- {type: olm.bundle.object, value: {data: e30=}}
---
schema: olm.package
name: other
defaultChannel: alpha
---
schema: olm.channel
package: other
name: alpha
entries:
- name: other.v1.0.0
---
schema: olm.bundle
package: other
name: other.v1.0.0
image: quay.io/x/other:1.0.0
properties:
- {type: olm.package, value: {packageName: other, version: 1.0.0}}
- {type: olm.gvk.required, value: {group: etcd.database.coreos.com, version: v1beta2, kind: EtcdCluster}}
---
schema: olm.deprecations
package: etcd
entries:
- reference: {schema: olm.bundle, name: etcd.v0.9.0}
  message: use 0.9.2
"#;

    #[test]
    fn lookups() {
        let idx = Arc::new(ValidatedCatalog::new(parse_bytes("c.yaml", CAT.as_bytes()).unwrap()).unwrap());
        let ch = idx.channel("etcd", "stable").unwrap();
        assert_eq!(idx.bundle_at(ch.head).name, "etcd.v0.9.2");
        assert!(ch.entries[1].skip_range.as_ref().unwrap().matches(&Version::new(0, 9, 1)));
        let b = idx.bundle("etcd", "etcd.v0.9.2").unwrap();
        assert_eq!(b.version, Version::new(0, 9, 2));
        assert!(b.properties.iter().all(|p| p.type_ != "olm.bundle.object"), "bundle objects are dropped");
        assert_eq!(b.required_packages[0].package_name, "other");
        let gvk =
            Gvk { group: "etcd.database.coreos.com".into(), version: "v1beta2".into(), kind: "EtcdCluster".into() };
        let providers: Vec<&str> = idx.providers(&gvk).iter().map(|i| idx.bundle_at(*i).name.as_str()).collect();
        assert_eq!(providers, ["etcd.v0.9.0", "etcd.v0.9.2"]);
        let other = idx.bundle("other", "other.v1.0.0").unwrap();
        assert_eq!(idx.required_gvks(other).next(), Some(&gvk));
        assert!(idx.providers(&Gvk { group: "x".into(), version: "v1".into(), kind: "Y".into() }).is_empty());
        assert_eq!(idx.bundle("etcd", "etcd.v0.9.0").unwrap().deprecation.as_deref(), Some("use 0.9.2"));
        assert!(idx.bundle("etcd", "nope").is_none() && idx.package("nope").is_none());
        assert_eq!(idx.bundles_of("etcd").count(), 2);
        assert_eq!(idx.package_of(b), "etcd");
        let keep = ValidatedCatalog::with_options(
            parse_bytes("c.yaml", CAT.as_bytes()).unwrap(),
            IndexOptions { keep_bundle_objects: true, ..Default::default() },
        )
        .unwrap();
        assert!(keep.bundle("etcd", "etcd.v0.9.2").unwrap().properties.iter().any(|p| p.type_ == "olm.bundle.object"));
    }

    #[test]
    fn invalid_catalog_is_refused() {
        let bad = CAT.replace("defaultChannel: alpha", "defaultChannel: beta");
        let err = ValidatedCatalog::new(parse_bytes("c.yaml", bad.as_bytes()).unwrap()).unwrap_err();
        assert!(err.to_string().contains("beta"));
    }
}
