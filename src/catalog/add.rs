//! Publishing: insert a rendered bundle into a catalog (`capstan catalog add`).
//!
//! Two update modes, as community-operators' `ci.yaml` `updateGraph` names them
//! (`../shared/corpus/community-operators-prod/PROVENANCE.md`; operator-registry
//! `pkg/registry/populator.go`, `bundlegraphloader.go`):
//!
//! - [`UpdateMode::Replaces`] (`replaces-mode`): the new entry carries the CSV's `spec.replaces`,
//!   `spec.skips` and `olm.skipRange` unchanged; the catalog is then validated, so a `replaces`
//!   that leaves two heads is reported with the chains (`olm-v0.md` §3.4).
//! - [`UpdateMode::Semver`] (`semver-mode`, operator-registry `AddBundleToGraph`): the entry is
//!   placed by version: it replaces the highest version below it in the channel, and the lowest
//!   version above it (if any) now replaces the new entry instead; with nothing above, the new
//!   entry is the channel head. The CSV's `skips` and `skipRange` are kept; its `replaces` is not
//!   used. A version already in the channel is an error.
//!
//! The package's `olm.package` blob is created when missing. `defaultChannel` follows the
//! bundle's default-channel annotation when the new bundle is the package's highest version
//! (operator-registry `SemverPackageManifest` takes it from the highest version). When the
//! annotation names a channel the package does not have, the previous default stays (or, for a
//! new package, the bundle's first channel) and [`AddReport::notes`] says so.
//!
//! Adding a bundle whose name is already in the package is an error ([`AddError::Exists`]) unless
//! [`AddOptions::force`] is set: then the old blob and its entries are replaced (a re-publish of
//! a fixed bundle under the same name).
//!
//! On disk ([`add_to_dir`]) only the files holding the package are rewritten, each in its own
//! format (JSON or YAML); a new package goes to `<dir>/<package>/catalog.json`, opm's layout.

use std::path::{Path, PathBuf};

use semver::Version;
use serde::Serialize;

use super::error::CatalogError;
use super::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, SCHEMA_CHANNEL, SCHEMA_PACKAGE};
use super::parse::{self, Format};
use super::property::{self, PackageProperty};
use super::validate::{ValidationErrors, validate};

/// How channel edges are built for the new bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpdateMode {
    /// Follow the CSV's replaces / skips / skipRange (community-operators `replaces-mode`).
    #[default]
    Replaces,
    /// Order entries by version (community-operators `semver-mode`).
    Semver,
}

impl std::str::FromStr for UpdateMode {
    type Err = UnknownUpdateMode;
    fn from_str(s: &str) -> Result<UpdateMode, UnknownUpdateMode> {
        match s {
            "replaces" | "replaces-mode" => Ok(UpdateMode::Replaces),
            "semver" | "semver-mode" => Ok(UpdateMode::Semver),
            other => Err(UnknownUpdateMode(other.to_string())),
        }
    }
}

/// An update mode other than `replaces` / `replaces-mode` and `semver` / `semver-mode`, as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown update mode {0:?}: use replaces or semver")]
pub struct UnknownUpdateMode(pub String);

/// What `add` needs from a rendered bundle: the `olm.bundle` blob and the CSV's upgrade edges
/// and channel annotations.
#[derive(Debug, Clone, Default)]
pub struct AddInput {
    /// The `olm.bundle` blob (must carry one `olm.package` property with a semver version).
    pub bundle: Bundle,
    /// CSV `spec.replaces`.
    pub replaces: Option<String>,
    /// CSV `spec.skips`.
    pub skips: Vec<String>,
    /// CSV annotation `olm.skipRange`.
    pub skip_range: Option<String>,
    /// Channels from the bundle annotation `operators.operatorframework.io.bundle.channels.v1`.
    pub channels: Vec<String>,
    /// Default channel from `operators.operatorframework.io.bundle.channel.default.v1`.
    pub default_channel: Option<String>,
}

/// Options of [`add_bundle`] and [`add_to_dir`].
#[derive(Debug, Clone, Default)]
pub struct AddOptions {
    /// Update mode.
    pub mode: UpdateMode,
    /// Channels to add the bundle to instead of its annotated channels.
    pub channels: Option<Vec<String>>,
    /// Replace a bundle of the same name instead of failing.
    pub force: bool,
}

/// What [`add_bundle`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddReport {
    /// The package.
    pub package: String,
    /// The bundle added.
    pub bundle: String,
    /// The bundle's version.
    pub version: String,
    /// Whether the `olm.package` blob was created.
    pub created_package: bool,
    /// Whether an existing bundle of the same name was replaced (`--force`).
    pub replaced_existing: bool,
    /// The package's default channel afterwards.
    pub default_channel: String,
    /// Per channel the bundle was added to: its entry and the channel head afterwards.
    pub channels: Vec<ChannelChange>,
    /// Things the user should know, e.g. a default channel annotation that could not be applied.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Files written by [`add_to_dir`] (empty for [`add_bundle`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PathBuf>,
}

/// The new entry in one channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChannelChange {
    /// Channel name.
    pub channel: String,
    /// Whether the channel was created.
    pub created: bool,
    /// The entry's `replaces`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// The entry now replacing the new bundle (semver mode, when inserted below the head).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<String>,
    /// The channel head afterwards.
    pub head: String,
}

/// Why a bundle could not be added.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    /// The catalog directory could not be read or written.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The bundle blob is unusable (no package, no name, no version, no channel).
    #[error("bundle {bundle:?}: {message}")]
    Bundle {
        /// Bundle name.
        bundle: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A bundle with this name is already in the package.
    #[error(
        "package {package} already has bundle {bundle}; bump the CSV version and name to publish a new bundle, or pass --force to replace the published one"
    )]
    Exists {
        /// Package.
        package: String,
        /// Bundle.
        bundle: String,
    },
    /// Semver mode: the channel already has a bundle of this version.
    #[error(
        "channel {channel} of package {package} already has version {version} (bundle {existing}); bundles in a semver-mode channel need distinct versions"
    )]
    VersionExists {
        /// Package.
        package: String,
        /// Channel.
        channel: String,
        /// Version.
        version: String,
        /// The bundle that has it.
        existing: String,
    },
    /// The catalog would not validate after the insertion; nothing was written. `errors` are
    /// the errors the insertion brings (every error when the catalog's state before is not known,
    /// [`add_bundle`]); `earlier` counts the errors the catalog already had ([`add_to_dir`]).
    #[error("adding {bundle} would make the catalog invalid; nothing was written{}\n{errors}", if *earlier > 0 { format!(" (the catalog also has {} it had before: `capstan catalog validate` lists them)", if *earlier == 1 { "1 error".to_string() } else { format!("{earlier} errors") }) } else { String::new() })]
    Invalid {
        /// The bundle being added.
        bundle: String,
        /// The validation errors the insertion brings.
        errors: ValidationErrors,
        /// How many errors the catalog had before the insertion.
        earlier: usize,
    },
    /// The catalog was invalid before and the insertion adds no error of its own; nothing was
    /// written ([`add_to_dir`]).
    #[error("the catalog {} is already invalid (in {}); adding {bundle} brings no error of its own: fix the catalog first (`capstan catalog validate {}` lists the errors); nothing was written\n{errors}", dir.display(), packages.join(", "), dir.display())]
    AlreadyInvalid {
        /// The bundle being added.
        bundle: String,
        /// The catalog directory.
        dir: PathBuf,
        /// The packages with errors (`blobs of no package` for errors outside any package).
        packages: Vec<String>,
        /// Every validation error (all there before the insertion).
        errors: ValidationErrors,
    },
}

/// Splits the errors after an insertion by what the catalog had before (`before`: its
/// validation without the insertion; an error is one it had when one of the same kind was
/// there for the same package, channel and bundle — a replaces cycle stays that cycle though
/// its message may name a new head): an
/// [`AddError::AlreadyInvalid`] when every error was there before, else an
/// [`AddError::Invalid`] with only the errors the insertion brings.
fn classify_invalid(
    dir: &Path,
    bundle: String,
    after: ValidationErrors,
    before: Result<(), ValidationErrors>,
) -> AddError {
    let before = before.err().map(|b| b.errors).unwrap_or_default();
    let key = |e: &super::validate::ValidationError| (e.package.clone(), e.channel.clone(), e.bundle.clone(), e.kind);
    let seen: std::collections::HashSet<_> = before.iter().map(key).collect();
    let (old, new): (Vec<_>, Vec<_>) = after.errors.into_iter().partition(|e| seen.contains(&key(e)));
    if new.is_empty() {
        let packages: std::collections::BTreeSet<String> = old
            .iter()
            .map(|e| if e.package.is_empty() { "blobs of no package".to_string() } else { e.package.clone() })
            .collect();
        return AddError::AlreadyInvalid {
            bundle,
            dir: dir.to_path_buf(),
            packages: packages.into_iter().collect(),
            errors: ValidationErrors { errors: old },
        };
    }
    AddError::Invalid { bundle, errors: ValidationErrors { errors: new }, earlier: before.len() }
}

fn bundle_version(b: &Bundle) -> Result<Version, AddError> {
    let err = |message: String| AddError::Bundle { bundle: b.name.clone(), message };
    let mut found = b.properties.iter().filter(|p| p.type_ == property::PACKAGE);
    let p = found.next().ok_or_else(|| err("has no olm.package property; render the bundle first".into()))?;
    let pp: PackageProperty = p.decode().map_err(|e| err(e.to_string()))?;
    Version::parse(&pp.version).map_err(|e| err(format!("olm.package version {:?} is not semver: {e}", pp.version)))
}

fn versions_in_package(cfg: &DeclarativeConfig, package: &str) -> std::collections::HashMap<String, Version> {
    cfg.bundles
        .iter()
        .filter(|b| b.package == package)
        .filter_map(|b| bundle_version(b).ok().map(|v| (b.name.clone(), v)))
        .collect()
}

/// Inserts a rendered bundle into an in-memory catalog and validates the result (see the module
/// documentation for the rules). On error `cfg` may be partly modified; [`add_to_dir`] works on
/// a copy and writes nothing then.
///
/// # Errors
/// [`AddError::Bundle`] for an unusable input, [`AddError::Exists`] for a re-add without
/// `force`, [`AddError::VersionExists`] in semver mode, [`AddError::Invalid`] when the catalog
/// does not validate afterwards (with every error).
pub fn add_bundle(cfg: &mut DeclarativeConfig, input: AddInput, opts: &AddOptions) -> Result<AddReport, AddError> {
    let AddInput { mut bundle, replaces, skips, skip_range, channels, default_channel } = input;
    let name = bundle.name.clone();
    let package = bundle.package.clone();
    if name.is_empty() || package.is_empty() {
        return Err(AddError::Bundle { bundle: name, message: "the olm.bundle blob needs name and package".into() });
    }
    let version = bundle_version(&bundle)?;
    let channels: Vec<String> =
        opts.channels.clone().unwrap_or(channels).into_iter().filter(|c| !c.is_empty()).collect();
    if channels.is_empty() {
        return Err(AddError::Bundle {
            bundle: name,
            message:
                "no channel: set the annotation operators.operatorframework.io.bundle.channels.v1 or pass --channel"
                    .into(),
        });
    }
    let replaced_existing = remove_existing(cfg, &package, &name, opts.force)?;

    // Package blob and default channel (settled after the channels exist, below).
    let versions = versions_in_package(cfg, &package);
    let highest = versions.values().all(|v| v.cmp_precedence(&version).is_lt());
    let created_package = !cfg.packages.iter().any(|p| p.name == package);
    if created_package {
        cfg.packages.push(Package { schema: SCHEMA_PACKAGE.into(), name: package.clone(), ..Default::default() });
    }
    let previous_default = cfg.packages.iter().find(|p| p.name == package).and_then(|p| p.default_channel.clone());
    let wanted_default = if created_package || highest {
        default_channel.clone().filter(|d| !d.is_empty()).or_else(|| previous_default.clone())
    } else {
        previous_default.clone()
    };

    let insertion = Insertion {
        package: &package,
        name: &name,
        version: &version,
        versions: &versions,
        replaces: replaces.filter(|r| !r.is_empty()),
        skips,
        skip_range: skip_range.filter(|s| !s.is_empty()),
        mode: opts.mode,
    };
    let mut changes = Vec::new();
    for ch_name in &channels {
        changes.extend(insertion.add_to_channel(cfg, ch_name)?);
    }
    let notes = insertion.settle_default_channel(cfg, wanted_default, previous_default, &channels[0]);

    if bundle.schema.is_empty() {
        bundle.schema = super::model::SCHEMA_BUNDLE.into();
    }
    cfg.bundles.push(bundle);

    if let Err(errors) = validate(cfg) {
        return Err(AddError::Invalid { bundle: name, errors, earlier: 0 });
    }
    set_heads(cfg, &package, &mut changes);
    let default_channel =
        cfg.packages.iter().find(|p| p.name == package).and_then(|p| p.default_channel.clone()).unwrap_or_default();
    Ok(AddReport {
        package,
        bundle: name,
        version: version.to_string(),
        created_package,
        replaced_existing,
        default_channel,
        channels: changes,
        notes,
        files: Vec::new(),
    })
}

/// A re-add: the bundle `name` already in `package` is removed with its channel entries when
/// `force` is set. Returns whether it was there.
///
/// # Errors
/// [`AddError::Exists`] when it is there and `force` is not set.
fn remove_existing(cfg: &mut DeclarativeConfig, package: &str, name: &str, force: bool) -> Result<bool, AddError> {
    let Some(pos) = cfg.bundles.iter().position(|b| b.package == package && b.name == name) else {
        return Ok(false);
    };
    if !force {
        return Err(AddError::Exists { package: package.to_string(), bundle: name.to_string() });
    }
    cfg.bundles.remove(pos);
    for ch in cfg.channels.iter_mut().filter(|c| c.package == package) {
        ch.entries.retain(|e| e.name != name);
    }
    Ok(true)
}

/// The bundle being inserted ([`add_bundle`]): its package, name and version, the versions of
/// the package's other bundles, and the edges its CSV gives (empty ones dropped).
struct Insertion<'a> {
    package: &'a str,
    name: &'a str,
    version: &'a Version,
    /// Bundle name → version, for the package's bundles before the insertion.
    versions: &'a std::collections::HashMap<String, Version>,
    replaces: Option<String>,
    skips: Vec<String>,
    skip_range: Option<String>,
    mode: UpdateMode,
}

/// In semver mode, the entries of a channel around the new bundle's version.
struct Neighbours {
    /// The entry with the highest version below the new one: the new entry replaces it.
    behind: Option<String>,
    /// The entry with the lowest version above the new one: it now replaces the new entry.
    ahead: Option<String>,
}

impl Insertion<'_> {
    /// Adds the new entry to channel `ch_name` (created when missing), with its edges by
    /// [`UpdateMode`]; `None` when the channel cannot be found after all.
    fn add_to_channel(&self, cfg: &mut DeclarativeConfig, ch_name: &str) -> Result<Option<ChannelChange>, AddError> {
        let package = self.package;
        let created = !cfg.channels.iter().any(|c| c.package == package && c.name == ch_name);
        if created {
            cfg.channels.push(Channel {
                schema: SCHEMA_CHANNEL.into(),
                package: package.to_string(),
                name: ch_name.to_string(),
                ..Default::default()
            });
        }
        let Some(ch) = cfg.channels.iter_mut().find(|c| c.package == package && c.name == ch_name) else {
            return Ok(None);
        };
        let mut entry = ChannelEntry {
            name: self.name.to_string(),
            skips: self.skips.clone(),
            skip_range: self.skip_range.clone(),
            ..Default::default()
        };
        let mut replaced_by = None;
        match self.mode {
            UpdateMode::Replaces => entry.replaces = self.replaces.clone(),
            UpdateMode::Semver => {
                let Neighbours { behind, ahead } = self.neighbours(ch)?;
                entry.replaces = behind;
                if let Some(a) = ahead {
                    if let Some(e) = ch.entries.iter_mut().find(|e| e.name == a) {
                        e.replaces = Some(self.name.to_string());
                    }
                    replaced_by = Some(a);
                }
            }
        }
        let change = ChannelChange {
            channel: ch_name.to_string(),
            created,
            replaces: entry.replaces.clone(),
            replaced_by,
            head: String::new(),
        };
        ch.entries.push(entry);
        Ok(Some(change))
    }

    /// The entries of `ch` just below and just above the new bundle's version.
    ///
    /// # Errors
    /// [`AddError::VersionExists`] when an entry has the same version.
    fn neighbours(&self, ch: &Channel) -> Result<Neighbours, AddError> {
        let mut behind: Option<(&str, &Version)> = None;
        let mut ahead: Option<(&str, &Version)> = None;
        for e in &ch.entries {
            let Some(v) = self.versions.get(&e.name) else { continue };
            match v.cmp_precedence(self.version) {
                std::cmp::Ordering::Equal => {
                    return Err(AddError::VersionExists {
                        package: self.package.to_string(),
                        channel: ch.name.clone(),
                        version: self.version.to_string(),
                        existing: e.name.clone(),
                    });
                }
                std::cmp::Ordering::Less => {
                    if behind.is_none_or(|(_, b)| v.cmp_precedence(b).is_gt()) {
                        behind = Some((&e.name, v));
                    }
                }
                std::cmp::Ordering::Greater => {
                    if ahead.is_none_or(|(_, a)| v.cmp_precedence(a).is_lt()) {
                        ahead = Some((&e.name, v));
                    }
                }
            }
        }
        Ok(Neighbours { behind: behind.map(|(n, _)| n.to_string()), ahead: ahead.map(|(n, _)| n.to_string()) })
    }

    /// Sets the package's default channel. It must name a channel of the package: an annotation
    /// naming a channel that does not exist (yet) keeps the previous default, else the bundle's
    /// first channel, with a note. Returns the notes.
    fn settle_default_channel(
        &self,
        cfg: &mut DeclarativeConfig,
        wanted: Option<String>,
        previous: Option<String>,
        first_channel: &str,
    ) -> Vec<String> {
        let (package, name) = (self.package, self.name);
        let mut notes = Vec::new();
        let exists = |c: &str| cfg.channels.iter().any(|ch| ch.package == package && ch.name == c);
        let new_default = match wanted {
            Some(d) if exists(&d) => d,
            other => {
                let fallback = previous.filter(|p| exists(p)).unwrap_or_else(|| first_channel.to_string());
                if let Some(d) = other {
                    notes.push(format!(
                        "the default channel annotation {d:?} of {name} names no channel of package {package}; the default channel stays {fallback}"
                    ));
                }
                fallback
            }
        };
        if let Some(p) = cfg.packages.iter_mut().find(|p| p.name == package) {
            p.default_channel = Some(new_default);
        }
        notes
    }
}

/// Each change's channel head after the insertion (the catalog is valid, so exactly one per
/// channel).
fn set_heads(cfg: &DeclarativeConfig, package: &str, changes: &mut [ChannelChange]) {
    for change in changes {
        if let Some(ch) = cfg.channels.iter().find(|c| c.package == package && c.name == change.channel) {
            let incoming: std::collections::HashSet<&str> = ch
                .entries
                .iter()
                .flat_map(|e| e.replaces.iter().map(String::as_str).chain(e.skips.iter().map(String::as_str)))
                .collect();
            if let Some(h) = ch.entries.iter().find(|e| !incoming.contains(e.name.as_str())) {
                change.head = h.name.clone();
            }
        }
    }
}

fn file_format(path: &Path, bytes: &[u8]) -> Format {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => Format::Json,
        Some("yaml" | "yml") => Format::Yaml,
        _ if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') => Format::Json,
        _ => Format::Yaml,
    }
}

/// Moves the blobs of `package` out of `cfg` into a new config.
fn take_package(cfg: &mut DeclarativeConfig, package: &str) -> DeclarativeConfig {
    let mut out = DeclarativeConfig::default();
    let (a, b): (Vec<_>, Vec<_>) = std::mem::take(&mut cfg.packages).into_iter().partition(|p| p.name == package);
    out.packages = a;
    cfg.packages = b;
    let (a, b): (Vec<_>, Vec<_>) = std::mem::take(&mut cfg.channels).into_iter().partition(|c| c.package == package);
    out.channels = a;
    cfg.channels = b;
    let (a, b): (Vec<_>, Vec<_>) = std::mem::take(&mut cfg.bundles).into_iter().partition(|x| x.package == package);
    out.bundles = a;
    cfg.bundles = b;
    let (a, b): (Vec<_>, Vec<_>) =
        std::mem::take(&mut cfg.deprecations).into_iter().partition(|d| d.package == package);
    out.deprecations = a;
    cfg.deprecations = b;
    let (a, b): (Vec<_>, Vec<_>) =
        std::mem::take(&mut cfg.others).into_iter().partition(|o| parse::meta_str(o, "package") == package);
    out.others = a;
    cfg.others = b;
    out
}

fn is_empty(cfg: &DeclarativeConfig) -> bool {
    cfg.packages.is_empty()
        && cfg.channels.is_empty()
        && cfg.bundles.is_empty()
        && cfg.deprecations.is_empty()
        && cfg.others.is_empty()
}

/// Adds a rendered bundle to the catalog directory `dir` (created if missing): loads it, runs
/// [`add_bundle`], and rewrites only the files that hold the bundle's package. Nothing is
/// written when the result does not validate.
///
/// # Errors
/// As [`add_bundle`], plus [`AddError::Catalog`] when the directory cannot be read or written.
pub fn add_to_dir(dir: &Path, input: AddInput, opts: &AddOptions) -> Result<AddReport, AddError> {
    let package = input.bundle.package.clone();
    // Per-file configs, to rewrite only the files of this package.
    let mut files: Vec<(PathBuf, DeclarativeConfig, Format)> = Vec::new();
    if dir.exists() {
        for path in parse::catalog_files(dir)? {
            let bytes = std::fs::read(&path).map_err(|source| CatalogError::Io {
                path: path.clone(),
                action: "read file",
                source,
            })?;
            let cfg = parse::parse_bytes(&path.display().to_string(), &bytes)?;
            let format = file_format(&path, &bytes);
            files.push((path, cfg, format));
        }
    }
    let mut merged = DeclarativeConfig::default();
    for (_, c, _) in &files {
        parse::merge(&mut merged, c.clone());
    }
    let mut report = match add_bundle(&mut merged, input, opts) {
        Ok(r) => r,
        // Which errors the catalog had before (validated only now, when the insertion failed).
        Err(AddError::Invalid { bundle, errors, .. }) => {
            let mut before = DeclarativeConfig::default();
            for (_, c, _) in &files {
                parse::merge(&mut before, c.clone());
            }
            return Err(classify_invalid(dir, bundle, errors, validate(&before)));
        }
        Err(e) => return Err(e),
    };
    let pkg_cfg = take_package(&mut merged, &package);

    let mut target: Option<usize> = None;
    let mut touched: Vec<usize> = Vec::new();
    for (i, (_, c, _)) in files.iter_mut().enumerate() {
        let old = take_package(c, &package);
        if !is_empty(&old) {
            touched.push(i);
            target.get_or_insert(i);
        }
    }
    let target = match target {
        Some(t) => t,
        None => {
            files.push((dir.join(&package).join("catalog.json"), DeclarativeConfig::default(), Format::Json));
            touched.push(files.len() - 1);
            files.len() - 1
        }
    };
    parse::merge(&mut files[target].1, pkg_cfg);
    for i in touched {
        let (path, c, format) = &files[i];
        if is_empty(c) {
            std::fs::remove_file(path).map_err(|source| CatalogError::Io {
                path: path.clone(),
                action: "remove file",
                source,
            })?;
        } else {
            crate::oci::cache::write_atomic(path, parse::to_stream(c, *format).as_bytes())
                .map_err(|source| CatalogError::Io { path: path.clone(), action: "write file", source })?;
            report.files.push(path.clone());
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::Property;

    fn input(pkg: &str, version: &str, replaces: Option<&str>, channels: &[&str]) -> AddInput {
        AddInput {
            bundle: Bundle {
                schema: "olm.bundle".into(),
                package: pkg.into(),
                name: format!("{pkg}.v{version}"),
                image: format!("registry.local/{pkg}:{version}"),
                properties: vec![Property::new(
                    property::PACKAGE,
                    &PackageProperty { package_name: pkg.into(), version: version.into(), release: None },
                )],
                ..Default::default()
            },
            replaces: replaces.map(str::to_string),
            channels: channels.iter().map(|c| c.to_string()).collect(),
            default_channel: Some(channels[0].to_string()),
            ..Default::default()
        }
    }

    #[test]
    fn replaces_mode_builds_a_chain_and_reports_heads() {
        let mut cfg = DeclarativeConfig::default();
        let opts = AddOptions::default();
        let r = add_bundle(&mut cfg, input("foo", "1.0.0", None, &["stable"]), &opts).unwrap();
        assert!(r.created_package && r.channels[0].created && r.default_channel == "stable");
        let r = add_bundle(&mut cfg, input("foo", "1.1.0", Some("foo.v1.0.0"), &["stable", "fast"]), &opts).unwrap();
        assert_eq!(r.channels[0].head, "foo.v1.1.0");
        assert_eq!(r.channels[1].head, "foo.v1.1.0", "a new channel's tail may replace a bundle outside it");
        // A replaces that splits the chain is refused with the validation explanation.
        let err = add_bundle(&mut cfg, input("foo", "1.2.0", Some("foo.v0.9.0"), &["stable"]), &opts).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("two heads") && msg.contains("foo.v1.2.0") && msg.contains("foo.v0.9.0"), "{msg}");
    }

    #[test]
    fn semver_mode_orders_by_version_even_out_of_order() {
        let mut cfg = DeclarativeConfig::default();
        let opts = AddOptions { mode: UpdateMode::Semver, ..Default::default() };
        for v in ["1.0.0", "1.2.0", "1.1.0", "0.9.0"] {
            add_bundle(&mut cfg, input("foo", v, Some("ignored.v0"), &["stable"]), &opts).unwrap();
        }
        let ch = &cfg.channels[0];
        let replaces = |n: &str| ch.entries.iter().find(|e| e.name == n).unwrap().replaces.clone();
        assert_eq!(replaces("foo.v1.2.0").as_deref(), Some("foo.v1.1.0"));
        assert_eq!(replaces("foo.v1.1.0").as_deref(), Some("foo.v1.0.0"));
        assert_eq!(replaces("foo.v1.0.0").as_deref(), Some("foo.v0.9.0"));
        assert_eq!(replaces("foo.v0.9.0"), None);
        let err = add_bundle(
            &mut cfg,
            input("foo", "1.1.0", None, &["stable"]),
            &AddOptions { force: false, ..opts.clone() },
        );
        assert!(matches!(err, Err(AddError::Exists { .. })));
    }

    #[test]
    fn default_channel_follows_the_highest_version() {
        let mut cfg = DeclarativeConfig::default();
        let opts = AddOptions { mode: UpdateMode::Semver, ..Default::default() };
        add_bundle(&mut cfg, input("foo", "1.0.0", None, &["alpha"]), &opts).unwrap();
        let r = add_bundle(&mut cfg, input("foo", "2.0.0", None, &["stable", "alpha"]), &opts).unwrap();
        assert_eq!(r.default_channel, "stable");
        let r = add_bundle(&mut cfg, input("foo", "1.5.0", None, &["alpha"]), &opts).unwrap();
        assert_eq!(r.default_channel, "stable", "an older bundle does not move the default channel");
    }

    #[test]
    fn default_channel_annotation_naming_no_channel_is_noted_not_fatal() {
        let mut cfg = DeclarativeConfig::default();
        let mut first = input("foo", "0.6.1", None, &["alpha"]);
        first.default_channel = Some("singlenamespace-alpha".into());
        let r = add_bundle(&mut cfg, first, &AddOptions::default()).unwrap();
        assert_eq!(r.default_channel, "alpha");
        assert!(r.notes[0].contains("singlenamespace-alpha"), "{:?}", r.notes);
        let mut next = input("foo", "0.9.0", None, &["singlenamespace-alpha"]);
        next.default_channel = Some("singlenamespace-alpha".into());
        let r = add_bundle(&mut cfg, next, &AddOptions::default()).unwrap();
        assert_eq!(r.default_channel, "singlenamespace-alpha");
        assert!(r.notes.is_empty());
    }

    #[test]
    fn force_replaces_and_missing_channel_is_an_error() {
        let mut cfg = DeclarativeConfig::default();
        add_bundle(&mut cfg, input("foo", "1.0.0", None, &["stable"]), &AddOptions::default()).unwrap();
        let mut again = input("foo", "1.0.0", None, &["stable"]);
        again.bundle.image = "registry.local/foo:1.0.0-fixed".into();
        let r = add_bundle(&mut cfg, again, &AddOptions { force: true, ..Default::default() }).unwrap();
        assert!(r.replaced_existing);
        assert_eq!(cfg.bundles.len(), 1);
        assert_eq!(cfg.bundles[0].image, "registry.local/foo:1.0.0-fixed");
        assert_eq!(cfg.channels[0].entries.len(), 1);
        let mut none = input("foo", "2.0.0", None, &["x"]);
        none.channels.clear();
        assert!(matches!(add_bundle(&mut cfg, none, &AddOptions::default()), Err(AddError::Bundle { .. })));
    }

    #[test]
    fn add_to_dir_blames_the_bundle_only_for_errors_it_brings() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let opts = AddOptions::default();
        add_to_dir(root, input("foo", "1.0.0", None, &["stable"]), &opts).unwrap();
        add_to_dir(root, input("foo", "1.1.0", Some("foo.v1.0.0"), &["stable"]), &opts).unwrap();
        // A replaces cycle in foo (v1.0.0 replaces v1.1.0) and a bad default channel in bar.
        let path = root.join("foo/catalog.json");
        let json = std::fs::read_to_string(&path).unwrap();
        let mut cfg = parse::parse_bytes("x", json.as_bytes()).unwrap();
        cfg.channels[0].entries.iter_mut().find(|e| e.name == "foo.v1.0.0").unwrap().replaces =
            Some("foo.v1.1.0".into());
        std::fs::write(&path, parse::to_yaml_stream(&cfg)).unwrap();
        std::fs::create_dir_all(root.join("bar")).unwrap();
        std::fs::write(root.join("bar/catalog.yaml"), "schema: olm.package\nname: bar\ndefaultChannel: stabel\n")
            .unwrap();
        let before = std::fs::read_to_string(&path).unwrap();

        // A bundle that brings no error of its own, in foo and in another package.
        for (package, version, replaces) in [("foo", "1.2.0", None), ("baz", "1.0.0", None)] {
            let err = add_to_dir(root, input(package, version, replaces, &["fast"]), &opts).unwrap_err();
            let AddError::AlreadyInvalid { packages, errors, .. } = &err else { panic!("{err}") };
            assert_eq!(packages, &["bar".to_string(), "foo".to_string()], "{err}");
            assert_eq!(errors.errors.len(), 3, "{err}");
            assert!(err.to_string().starts_with(&format!("the catalog {} is already invalid (in bar, foo); adding {package}.v{version} brings no error of its own", root.display())), "{err}");
        }
        // One that brings its own (a package name that is not a DNS-1123 label): only that is its.
        let err = add_to_dir(root, input("Baz", "1.0.0", None, &["stable"]), &opts).unwrap_err();
        let AddError::Invalid { errors, earlier, .. } = &err else { panic!("{err}") };
        assert_eq!(*earlier, 3, "{err}");
        assert!(!errors.errors.is_empty() && errors.errors.iter().all(|e| e.package == "Baz"), "{err}");
        assert!(err.to_string().starts_with("adding Baz.v1.0.0 would make the catalog invalid; nothing was written (the catalog also has 3 errors it had before"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before, "nothing was written");
    }

    #[test]
    fn add_to_dir_rewrites_only_the_package_files_in_their_format() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("other")).unwrap();
        let other = "schema: olm.package\nname: other\ndefaultChannel: s\n---\nschema: olm.channel\npackage: other\nname: s\nentries:\n- name: other.v1.0.0\n---\nschema: olm.bundle\npackage: other\nname: other.v1.0.0\nimage: r/o:1\nproperties:\n- {type: olm.package, value: {packageName: other, version: 1.0.0}}\n";
        std::fs::write(root.join("other/catalog.yaml"), other).unwrap();
        let opts = AddOptions::default();
        let r = add_to_dir(root, input("foo", "1.0.0", None, &["stable"]), &opts).unwrap();
        assert_eq!(r.files, vec![root.join("foo/catalog.json")]);
        // Second add: a YAML file of the package is rewritten in YAML.
        let json = std::fs::read_to_string(root.join("foo/catalog.json")).unwrap();
        let cfg = parse::parse_bytes("x", json.as_bytes()).unwrap();
        std::fs::remove_file(root.join("foo/catalog.json")).unwrap();
        std::fs::write(root.join("foo/catalog.yaml"), parse::to_yaml_stream(&cfg)).unwrap();
        add_to_dir(root, input("foo", "1.1.0", Some("foo.v1.0.0"), &["stable"]), &opts).unwrap();
        assert!(!root.join("foo/catalog.json").exists());
        let cat = parse::load_path(root).unwrap();
        assert_eq!(cat.bundles.len(), 3);
        validate(&cat).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("other/catalog.yaml")).unwrap(),
            other,
            "other packages untouched"
        );
        // An invalid add writes nothing.
        let before = std::fs::read_to_string(root.join("foo/catalog.yaml")).unwrap();
        assert!(add_to_dir(root, input("foo", "1.2.0", Some("nope"), &["stable"]), &opts).is_err());
        assert_eq!(std::fs::read_to_string(root.join("foo/catalog.yaml")).unwrap(), before);
    }
}
