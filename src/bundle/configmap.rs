//! OLM's ConfigMap catalogs (CatalogSource `sourceType: configmap` or `internal`): a ConfigMap
//! whose data keys `customResourceDefinitions`, `clusterServiceVersions` and `packages` each hold
//! a YAML (or JSON) list, read as operator-registry's `ConfigMapLoader` reads it
//! (`pkg/sqlite/configmap.go`, `pkg/sqlite/load.go` `AddPackageChannels`, v1.74.0):
//!
//! - every CSV is a bundle holding the CSV and the CRDs it owns, matched by `plural.group` and
//!   version (a v1beta1 CRD's `spec.version` counts as its one version); an owned CRD that is not
//!   in the list is an error;
//! - every package's channel starts at its `currentCSV` and takes in each CSV reached through
//!   `replaces` and `spec.skips`; its `defaultChannel` must be one of its channels, except that a
//!   package of one channel has that channel as its default whatever it says;
//! - a CSV that no channel reaches belongs to no package and is left out (nothing can install it).
//!
//! The result is a file-based catalog whose bundles have no image and carry their objects as
//! `olm.bundle.object` properties, exactly as `opm render` writes a bundle directory
//! ([`crate::bundle::render::render_bundle`] with image `""`). Where operator-registry's
//! configmap-server stops at the first load error (it runs without `--permissive`), every error is
//! collected, so that one status message lists them all. Pure.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::render::{RenderError, render_bundle};
use super::{ANNOTATION_CHANNELS, ANNOTATION_DEFAULT_CHANNEL, ANNOTATION_PACKAGE, Annotations, Bundle, BundleError};
use crate::catalog::model::{self, Channel, ChannelEntry, DeclarativeConfig, Package};

/// Data key of the CRD list.
pub const KEY_CRDS: &str = "customResourceDefinitions";
/// Data key of the CSV list.
pub const KEY_CSVS: &str = "clusterServiceVersions";
/// Data key of the package list.
pub const KEY_PACKAGES: &str = "packages";

/// One problem of a ConfigMap catalog; each names the data key (and the entry) and what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigMapError {
    /// A data key the catalog needs is absent.
    #[error(
        "data.{key} is missing: a ConfigMap catalog holds customResourceDefinitions, clusterServiceVersions and packages, each a YAML list (an empty list is `[]`)"
    )]
    MissingKey {
        /// The data key.
        key: &'static str,
    },
    /// A data key's value is not a YAML/JSON list of objects.
    #[error("data.{key}: {message}")]
    NotAList {
        /// The data key.
        key: &'static str,
        /// What was found instead.
        message: String,
    },
    /// One entry of a list is wrong.
    #[error("data.{key}[{index}] ({name}): {message}")]
    Entry {
        /// The data key.
        key: &'static str,
        /// The entry's position in the list.
        index: usize,
        /// The entry's name, or `?` when it has none.
        name: String,
        /// What is wrong and what to do.
        message: String,
    },
}

/// All problems of one ConfigMap catalog, in the order the keys are read (CRDs, CSVs, packages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct ConfigMapErrors(pub Vec<ConfigMapError>);

/// One entry of the `packages` list (operator-registry `PackageManifest`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackageManifest {
    #[serde(default)]
    package_name: String,
    #[serde(default)]
    channels: Vec<PackageChannel>,
    /// `defaultChannel`: operator-registry's field is `DefaultChannelName` but its JSON and YAML
    /// key is `defaultChannel` (`pkg/registry/types.go`), which is what clients write.
    #[serde(default)]
    default_channel: Option<String>,
}

/// One channel of a [`PackageManifest`].
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackageChannel {
    #[serde(default)]
    name: String,
    #[serde(default, rename = "currentCSV")]
    current_csv: String,
}

/// A CRD of the list, by the API keys it serves: `(group, version, plural)` → index in the list.
type CrdIndex = BTreeMap<(String, String, String), usize>;

/// The default channel of `pkg`, whose channels that load are `channel_names`, and what is wrong
/// with it: a package of one channel has that channel as its default whatever `defaultChannel`
/// says (operator-registry v1.74.0 `PackageChannel.IsDefaultChannel`, which its SQLite loader
/// reads); otherwise `defaultChannel` must name a channel, and may be left out only with one.
fn default_channel(pkg: &PackageManifest, channel_names: &[String]) -> (Option<String>, Option<String>) {
    let default = match pkg.channels.as_slice() {
        [only] => Some(only.name.clone()),
        _ => pkg.default_channel.clone().filter(|d| !d.is_empty()),
    };
    let problem = match &default {
        Some(d) if !channel_names.contains(d) => {
            Some(format!("defaultChannel {d:?} is not one of its channels ({})", channel_names.join(", ")))
        }
        None if channel_names.len() > 1 => {
            Some("defaultChannel is not set and the package has several channels; set it".to_string())
        }
        _ => None,
    };
    (default, problem)
}

/// The file-based catalog of a ConfigMap catalog's `data` ([`crate::bundle::configmap`]).
///
/// # Errors
/// [`ConfigMapErrors`] listing every problem: a missing key, a value that is not a list of
/// objects, a CRD served twice, an owned CRD not in the list, a CSV in two packages, a channel
/// whose `currentCSV` is not a CSV of the list, a default channel that is not a channel, a CSV that
/// does not render.
pub fn from_config_map(data: &BTreeMap<String, String>) -> Result<DeclarativeConfig, ConfigMapErrors> {
    let mut errors = Vec::new();
    let mut list = |key: &'static str| match data.get(key) {
        None => {
            errors.push(ConfigMapError::MissingKey { key });
            Vec::new()
        }
        Some(text) => parse_list(key, text).unwrap_or_else(|e| {
            errors.push(e);
            Vec::new()
        }),
    };
    let (crds, csvs, packages) = (list(KEY_CRDS), list(KEY_CSVS), list(KEY_PACKAGES));
    let crd_index = index_crds(&crds, &mut errors);
    let csv_names: BTreeMap<String, usize> =
        csvs.iter().enumerate().map(|(i, c)| (name_of(c).to_string(), i)).filter(|(n, _)| !n.is_empty()).collect();
    let mut cfg = DeclarativeConfig::default();
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    let mut bundle_channels: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (index, value) in packages.iter().enumerate() {
        let Some(pkg) = read_package(index, value, &mut errors) else { continue };
        let mut channel_names = Vec::new();
        for ch in &pkg.channels {
            let Some(entries) = channel_entries(&pkg, ch, &csvs, &csv_names, index, &mut errors) else { continue };
            for e in &entries {
                match owner.insert(e.name.clone(), pkg.package_name.clone()) {
                    Some(other) if other != pkg.package_name => errors.push(entry_err(
                        KEY_PACKAGES,
                        index,
                        &pkg.package_name,
                        format!("CSV {} is also in package {other}; a CSV belongs to one package", e.name),
                    )),
                    _ => bundle_channels.entry(e.name.clone()).or_default().push(ch.name.clone()),
                }
            }
            channel_names.push(ch.name.clone());
            cfg.channels.push(Channel {
                schema: model::SCHEMA_CHANNEL.into(),
                package: pkg.package_name.clone(),
                name: ch.name.clone(),
                entries,
                ..Default::default()
            });
        }
        let (default, problem) = default_channel(&pkg, &channel_names);
        if let Some(problem) = problem {
            errors.push(entry_err(KEY_PACKAGES, index, &pkg.package_name, problem));
        }
        cfg.packages.push(Package {
            schema: model::SCHEMA_PACKAGE.into(),
            name: pkg.package_name.clone(),
            default_channel: default.or_else(|| channel_names.first().cloned()),
            ..Default::default()
        });
    }
    for (index, csv) in csvs.iter().enumerate() {
        let name = name_of(csv);
        let Some(package) = owner.get(name) else { continue };
        let channels = bundle_channels.remove(name).unwrap_or_default();
        let default = cfg.packages.iter().find(|p| &p.name == package).and_then(|p| p.default_channel.clone());
        match bundle_of(index, csv, &crds, &crd_index, package, channels, default) {
            Ok(b) => cfg.bundles.push(b),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() { Ok(cfg) } else { Err(ConfigMapErrors(errors)) }
}

/// The entries of `key`'s value: a YAML or JSON list of objects.
fn parse_list(key: &'static str, text: &str) -> Result<Vec<Value>, ConfigMapError> {
    let not_a_list = |message: String| ConfigMapError::NotAList { key, message };
    let docs = super::decode::parse_documents(text.as_bytes(), Path::new(key))
        .map_err(|e| not_a_list(e.to_string().replacen(&format!("{key}: "), "", 1)))?;
    let value = match docs.len() {
        0 => return Ok(Vec::new()),
        1 => docs.into_iter().next().unwrap_or(Value::Null),
        n => return Err(not_a_list(format!("{n} YAML documents; write one list"))),
    };
    let Value::Array(items) = value else {
        return Err(not_a_list(format!("expected a list, found {}", super::decode::type_name(&value))));
    };
    if let Some(i) = items.iter().position(|v| !v.is_object()) {
        return Err(not_a_list(format!("entry {i} is {}, not an object", super::decode::type_name(&items[i]))));
    }
    Ok(items)
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
}

fn entry_err(key: &'static str, index: usize, name: &str, message: String) -> ConfigMapError {
    let name = if name.is_empty() { "?".to_string() } else { name.to_string() };
    ConfigMapError::Entry { key, index, name, message }
}

/// Every `(group, version, plural)` each CRD of the list serves; one served by two CRDs is an
/// error (operator-registry: "can't add the same CRD twice in one configmap").
fn index_crds(crds: &[Value], errors: &mut Vec<ConfigMapError>) -> CrdIndex {
    let mut index = CrdIndex::new();
    for (i, crd) in crds.iter().enumerate() {
        let text = |p: &str| crd.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
        let (group, plural) = (text("/spec/group"), text("/spec/names/plural"));
        let mut versions: Vec<String> = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| vs.iter().filter_map(|v| v.get("name").and_then(Value::as_str).map(String::from)).collect())
            .unwrap_or_default();
        if versions.is_empty() && !text("/spec/version").is_empty() {
            versions.push(text("/spec/version"));
        }
        if group.is_empty() || plural.is_empty() || versions.is_empty() {
            errors.push(entry_err(
                KEY_CRDS,
                i,
                name_of(crd),
                "not a CustomResourceDefinition: spec.group, spec.names.plural and spec.versions are needed".into(),
            ));
            continue;
        }
        for version in versions {
            if index.insert((group.clone(), version.clone(), plural.clone()), i).is_some() {
                errors.push(entry_err(
                    KEY_CRDS,
                    i,
                    name_of(crd),
                    format!(
                        "{plural}.{group} {version} is served by an earlier CRD of the list too; list each CRD once"
                    ),
                ));
            }
        }
    }
    index
}

/// Entry `index` of the package list, when it has a name and channels.
fn read_package(index: usize, value: &Value, errors: &mut Vec<ConfigMapError>) -> Option<PackageManifest> {
    let name = value.get("packageName").and_then(Value::as_str).unwrap_or("");
    let pkg: PackageManifest = match serde_json::from_value(value.clone()) {
        Ok(p) => p,
        Err(e) => {
            errors.push(entry_err(KEY_PACKAGES, index, name, format!("not a package manifest: {e}")));
            return None;
        }
    };
    if pkg.package_name.is_empty() || pkg.channels.is_empty() {
        errors.push(entry_err(KEY_PACKAGES, index, name, "packageName and at least one channel are needed".into()));
        return None;
    }
    Some(pkg)
}

/// The entries of channel `ch` of `pkg` (entry `index` of the package list): from `currentCSV`,
/// every CSV of the list reached through `replaces` and `spec.skips`, each entry with the CSV's
/// `replaces` (when that CSV is in the list), `skips` and `olm.skipRange` annotation.
fn channel_entries(
    pkg: &PackageManifest,
    ch: &PackageChannel,
    csvs: &[Value],
    csv_names: &BTreeMap<String, usize>,
    index: usize,
    errors: &mut Vec<ConfigMapError>,
) -> Option<Vec<ChannelEntry>> {
    if !csv_names.contains_key(&ch.current_csv) {
        errors.push(entry_err(
            KEY_PACKAGES,
            index,
            &pkg.package_name,
            format!(
                "channel {:?}: currentCSV {:?} is not a CSV of data.{KEY_CSVS}; add it or name one that is",
                ch.name, ch.current_csv
            ),
        ));
        return None;
    }
    let mut entries = Vec::new();
    let mut seen = BTreeSet::new();
    let mut queue = VecDeque::from([ch.current_csv.clone()]);
    while let Some(name) = queue.pop_front() {
        let Some(&i) = csv_names.get(&name) else { continue };
        if !seen.insert(name.clone()) {
            continue;
        }
        let csv = &csvs[i];
        let replaces = csv
            .pointer("/spec/replaces")
            .and_then(Value::as_str)
            .filter(|r| csv_names.contains_key(*r))
            .map(String::from);
        let skips: Vec<String> = csv
            .pointer("/spec/skips")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
            .unwrap_or_default();
        let skip_range = csv.pointer("/metadata/annotations/olm.skipRange").and_then(Value::as_str).map(String::from);
        queue.extend(replaces.iter().cloned().chain(skips.iter().cloned()));
        entries.push(ChannelEntry { name, replaces, skips, skip_range, ..Default::default() });
    }
    Some(entries)
}

/// The `olm.bundle` blob of CSV entry `index` of the list, in `package` and `channels`: the CSV
/// and the CRDs it owns, rendered as `opm render` renders a bundle directory (no image).
fn bundle_of(
    index: usize,
    csv: &Value,
    crds: &[Value],
    crd_index: &CrdIndex,
    package: &str,
    channels: Vec<String>,
    default_channel: Option<String>,
) -> Result<model::Bundle, ConfigMapError> {
    let name = name_of(csv).to_string();
    let err = |message: String| entry_err(KEY_CSVS, index, &name, message);
    // Every entry of the list is a CSV, whatever its apiVersion says: operator-registry decodes it
    // into its CSV type and OLM creates it with a typed client, so clients write what they like
    // (OLM's e2e suite writes `apiVersion: v1alpha1`, its Go constant `GroupVersion`).
    let mut csv = csv.clone();
    if let Some(o) = csv.as_object_mut() {
        o.insert("apiVersion".into(), Value::from("operators.coreos.com/v1alpha1"));
        o.insert("kind".into(), Value::from("ClusterServiceVersion"));
    }
    let mut objects = vec![(PathBuf::from(format!("{KEY_CSVS}[{index}]")), csv.clone())];
    for owned in csv.pointer("/spec/customresourcedefinitions/owned").and_then(Value::as_array).into_iter().flatten() {
        let text = |k: &str| owned.get(k).and_then(Value::as_str).unwrap_or("");
        let Some((plural, group)) = text("name").split_once('.') else {
            return Err(err(format!("owned CRD name {:?} is not <plural>.<group>", text("name"))));
        };
        let key = (group.to_string(), text("version").to_string(), plural.to_string());
        let Some(&i) = crd_index.get(&key) else {
            return Err(err(format!(
                "owned CRD {} version {} is not in data.{KEY_CRDS}; add the CRD",
                text("name"),
                text("version")
            )));
        };
        let path = PathBuf::from(format!("{KEY_CRDS}[{i}]"));
        if !objects.iter().any(|(p, _)| p == &path) {
            objects.push((path, crds[i].clone()));
        }
    }
    let annotations = annotations(package, &channels, default_channel.as_deref());
    let bundle = Bundle::from_objects(Path::new(&format!("{KEY_CSVS}[{index}]")), annotations, objects)
        .map_err(|e: BundleError| err(e.to_string()))?;
    render_bundle(&bundle, "").map_err(|e: RenderError| err(e.to_string()))
}

/// The annotations a bundle of `package` in `channels` would carry.
fn annotations(package: &str, channels: &[String], default_channel: Option<&str>) -> Annotations {
    let mut all = indexmap::IndexMap::new();
    all.insert(ANNOTATION_PACKAGE.to_string(), package.to_string());
    all.insert(ANNOTATION_CHANNELS.to_string(), channels.join(","));
    if let Some(d) = default_channel {
        all.insert(ANNOTATION_DEFAULT_CHANNEL.to_string(), d.to_string());
    }
    Annotations {
        file: PathBuf::new(),
        package: package.to_string(),
        channels: channels.to_vec(),
        default_channel: default_channel.map(String::from),
        all,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRDS: &str = r#"
- apiVersion: apiextensions.k8s.io/v1
  kind: CustomResourceDefinition
  metadata: {name: widgets.example.com}
  spec:
    group: example.com
    names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
    scope: Namespaced
    versions:
    - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
"#;

    fn csv(name: &str, version: &str, replaces: Option<&str>, skips: &[&str]) -> String {
        let replaces = replaces.map(|r| format!("\n    replaces: {r}")).unwrap_or_default();
        format!(
            r#"
- apiVersion: operators.coreos.com/v1alpha1
  kind: ClusterServiceVersion
  metadata: {{name: {name}, annotations: {{olm.skipRange: "<{version}"}}}}
  spec:
    displayName: Widget
    version: {version}{replaces}
    skips: {skips:?}
    installModes: [{{type: AllNamespaces, supported: true}}]
    install: {{strategy: deployment, spec: {{deployments: []}}}}
    customresourcedefinitions:
      owned: [{{name: widgets.example.com, version: v1, kind: Widget}}]
"#
        )
    }

    fn data(crds: &str, csvs: &str, packages: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (KEY_CRDS.to_string(), crds.to_string()),
            (KEY_CSVS.to_string(), csvs.to_string()),
            (KEY_PACKAGES.to_string(), packages.to_string()),
        ])
    }

    const PACKAGES: &str = r#"
- packageName: widget
  defaultChannel: stable
  channels:
  - {name: stable, currentCSV: widget.v2.0.0}
  - {name: beta, currentCSV: widget.v1.0.0}
"#;

    #[test]
    fn a_csv_is_a_csv_whatever_apiversion_it_was_written_with() {
        // OLM's e2e suite writes its Go constant `v1alpha1` as the CSVs' apiVersion.
        let csvs = csv("widget.v1.0.0", "1.0.0", None, &[])
            .replace("apiVersion: operators.coreos.com/v1alpha1", "apiVersion: v1alpha1");
        let packages =
            "- {packageName: widget, defaultChannel: stable, channels: [{name: stable, currentCSV: widget.v1.0.0}]}";
        let cfg = from_config_map(&data(CRDS, &csvs, packages)).expect("a valid ConfigMap catalog");
        let csv = cfg.bundles[0]
            .properties
            .iter()
            .filter(|p| p.type_ == "olm.bundle.object")
            .filter_map(|p| p.value.get("data").and_then(Value::as_str))
            .filter_map(|d| base64::Engine::decode(&base64::engine::general_purpose::STANDARD, d).ok())
            .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
            .find(|o| o["kind"] == "ClusterServiceVersion")
            .expect("the CSV among the bundle's objects");
        assert_eq!(csv["apiVersion"], "operators.coreos.com/v1alpha1");
    }

    #[test]
    fn every_csv_a_channel_reaches_is_an_imageless_bundle_with_its_crds() {
        let csvs = [
            csv("widget.v1.0.0", "1.0.0", None, &[]),
            csv("widget.v2.0.0", "2.0.0", Some("widget.v1.0.0"), &["widget.v0.9.0"]),
            csv("stray.v1.0.0", "1.0.0", None, &[]),
        ]
        .concat();
        let cfg = from_config_map(&data(CRDS, &csvs, PACKAGES)).expect("a valid ConfigMap catalog");
        assert_eq!(cfg.packages.len(), 1);
        assert_eq!(cfg.packages[0].default_channel.as_deref(), Some("stable"));
        let stable = cfg.channels.iter().find(|c| c.name == "stable").expect("stable");
        type Entry<'a> = (&'a str, Option<&'a str>, Vec<&'a str>, Option<&'a str>);
        let entries: Vec<Entry> = stable
            .entries
            .iter()
            .map(|e| {
                (
                    e.name.as_str(),
                    e.replaces.as_deref(),
                    e.skips.iter().map(String::as_str).collect(),
                    e.skip_range.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("widget.v2.0.0", Some("widget.v1.0.0"), vec!["widget.v0.9.0"], Some("<2.0.0")),
                ("widget.v1.0.0", None, vec![], Some("<1.0.0")),
            ]
        );
        let names: Vec<&str> = cfg.bundles.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["widget.v1.0.0", "widget.v2.0.0"], "a CSV no channel reaches is left out");
        let v2 = &cfg.bundles[1];
        assert_eq!((v2.package.as_str(), v2.image.as_str()), ("widget", ""));
        let types: Vec<&str> = v2.properties.iter().map(|p| p.type_.as_str()).collect();
        assert_eq!(types, ["olm.gvk", "olm.package", "olm.bundle.object", "olm.bundle.object"], "{types:?}");
        assert!(crate::catalog::validate::validate(&cfg).is_ok(), "{:?}", crate::catalog::validate::validate(&cfg));
        let bundle = Bundle::from_blob(v2).expect("the blob's objects make a bundle");
        assert_eq!((bundle.name(), bundle.package()), ("widget.v2.0.0", "widget"));
        assert_eq!(bundle.crds().map(|c| c.name()).collect::<Vec<_>>(), ["widgets.example.com"]);
    }

    /// operator-registry's `IsDefaultChannel`: the one channel of a package is its default, even
    /// where `defaultChannel` names another (OLM's e2e "creation with dependencies required and
    /// provided in different versions" has such a package).
    #[test]
    fn the_one_channel_of_a_package_is_its_default() {
        let packages = "- {packageName: widget, defaultChannel: stable, channels: [{name: myapp-stable, currentCSV: widget.v1.0.0}]}";
        let cfg = from_config_map(&data(CRDS, &csv("widget.v1.0.0", "1.0.0", None, &[]), packages)).expect("loads");
        assert_eq!(cfg.packages[0].default_channel.as_deref(), Some("myapp-stable"));
    }

    #[test]
    fn every_problem_is_listed_with_its_key_and_entry() {
        let csvs = [
            csv("widget.v2.0.0", "2.0.0", None, &[]),
            csv("other.v1.0.0", "1.0.0", None, &[]).replace("widgets.example.com", "gadgets.example.com"),
        ]
        .concat();
        let packages = r#"
- packageName: widget
  defaultChannel: alpha
  channels: [{name: stable, currentCSV: widget.v2.0.0}, {name: beta, currentCSV: widget.v3.0.0}]
- packageName: other
  channels: [{name: stable, currentCSV: other.v1.0.0}]
"#;
        let err = from_config_map(&data(CRDS, &csvs, packages)).expect_err("problems");
        let messages: Vec<String> = err.0.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "data.packages[0] (widget): channel \"beta\": currentCSV \"widget.v3.0.0\" is not a CSV of data.clusterServiceVersions; add it or name one that is",
                "data.packages[0] (widget): defaultChannel \"alpha\" is not one of its channels (stable)",
                "data.clusterServiceVersions[1] (other.v1.0.0): owned CRD gadgets.example.com version v1 is not in data.customResourceDefinitions; add the CRD",
            ]
        );
        let missing = from_config_map(&BTreeMap::new()).expect_err("no keys");
        assert_eq!(missing.0.len(), 3);
        assert!(missing.to_string().starts_with("data.customResourceDefinitions is missing"), "{missing}");
        let not_a_list = from_config_map(&data("a: 1", "[]", "[]")).expect_err("a map");
        assert_eq!(not_a_list.to_string(), "data.customResourceDefinitions: expected a list, found a mapping");
    }
}
