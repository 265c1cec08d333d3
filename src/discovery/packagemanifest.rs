//! `packages.operators.coreos.com/v1` `PackageManifest`, built from a catalog exactly as OLM v0's
//! packageserver builds it from a catalog's registry (gRPC) API.
//!
//! Sources of the semantics (operator-lifecycle-manager v0.38.0 and operator-registry v1.73.0):
//! - `pkg/package-server/provider/registry.go` `refreshCache` / `newPackageManifest`: one manifest
//!   per package; channels sorted by name; each channel's `currentCSV` is its head bundle
//!   (`GetBundleForChannel`) and `currentCSVDesc` comes from that bundle's CSV
//!   (`pkg/package-server/apis/operators/packagemanifest.go` `CreateCSVDescription`); a channel
//!   whose head has no CSV is left out, and when that is the default channel the first channel
//!   left becomes the default; a package with no channel left is left out. `entries` lists every
//!   bundle of the channel without the legacy `olm.deprecated` property, by version, highest
//!   first. `provider` (and the `provider`/`provider-url` labels) come from the default channel's
//!   CSV, else the first channel's; the labels of the default channel's CSV (else the first
//!   one's) are added to the manifest's, then `operatorframework.io/os.linux` and
//!   `operatorframework.io/arch.amd64` (`provider/labels.go`) when no os/arch label is there.
//! - The head's CSV (`csvJson`): the first `olm.bundle.object` whose kind is
//!   `ClusterServiceVersion` (`alpha/declcfg/load.go` `extractCSV`); else, with exactly one
//!   `olm.csv.metadata`, a CSV made from it (`pkg/api/model_to_api.go`
//!   `ConvertModelBundleToAPIBundle`: name = bundle name, icon = the package icon, version = the
//!   bundle version, relatedImages = the bundle's, description = the package's when empty).
//! - Deprecations (`olm.deprecations`) of package, channel and bundle carry their message.
//! - `pkg/package-server/storage/reststorage.go`: icons are emptied on `list` and `get`, and the
//!   only field selector is `metadata.name`. The icon subresource is not served by capstan, so
//!   icons are not kept at all.
//!
//! Keys of a CSV are matched as Go's `encoding/json` matches them ([`crate::bundle::gofields`]).
//! One deliberate difference: `currentCSVDesc.relatedImages` is sorted (packageserver builds it
//! from a Go map, so its order changes from one refresh to the next).

use std::collections::BTreeMap;

use base64::Engine;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::catalog::property;
use crate::catalog::validated::{IndexedBundle, IndexedPackage, ValidatedCatalog};

/// API group of PackageManifest.
pub const GROUP: &str = "packages.operators.coreos.com";
/// API version of PackageManifest.
pub const VERSION: &str = "v1";
/// `apiVersion` of PackageManifest.
pub const API_VERSION: &str = "packages.operators.coreos.com/v1";
/// Kind.
pub const KIND: &str = "PackageManifest";
/// Resource (plural) name.
pub const RESOURCE: &str = "packagemanifests";
/// Label with the CatalogSource's name.
pub const LABEL_CATALOG: &str = "catalog";
/// Label with the CatalogSource's namespace.
pub const LABEL_CATALOG_NAMESPACE: &str = "catalog-namespace";
/// Label with the provider's name (of the default channel's CSV).
pub const LABEL_PROVIDER: &str = "provider";
/// Label with the provider's URL.
pub const LABEL_PROVIDER_URL: &str = "provider-url";
/// Added when no `operatorframework.io/os*` label is present (`provider/labels.go`).
pub const DEFAULT_OS_LABEL: &str = "operatorframework.io/os.linux";
/// Added when no `operatorframework.io/arch*` label is present.
pub const DEFAULT_ARCH_LABEL: &str = "operatorframework.io/arch.amd64";

/// `PackageManifest` as packageserver serves it (JSON field names as the Go type's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifest {
    /// Always [`API_VERSION`] (may be absent in a list's items as clients hand them over).
    #[serde(default)]
    pub api_version: String,
    /// Always [`KIND`].
    #[serde(default)]
    pub kind: String,
    /// Name (the package), namespace, labels, creation timestamp (the CatalogSource's).
    pub metadata: ObjectMeta,
    /// Always empty.
    #[serde(default)]
    pub spec: Value,
    /// What the catalog says about the package.
    pub status: PackageManifestStatus,
}

/// The part of `metadata` packageserver fills.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Package name.
    pub name: String,
    /// The namespace asked for (or the CatalogSource's when listing all namespaces).
    pub namespace: String,
    /// CatalogSource labels, `catalog`, `catalog-namespace`, `provider`, `provider-url`, CSV
    /// labels and the default os/arch labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The CatalogSource's creation timestamp (RFC 3339), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
}

/// `PackageManifestStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifestStatus {
    /// Name of the CatalogSource.
    pub catalog_source: String,
    /// Its `spec.displayName`.
    pub catalog_source_display_name: String,
    /// Its `spec.publisher`.
    pub catalog_source_publisher: String,
    /// Its namespace.
    pub catalog_source_namespace: String,
    /// Provider of the default channel's CSV.
    #[serde(default)]
    pub provider: AppLink,
    /// Package name.
    pub package_name: String,
    /// Package deprecation (`olm.deprecations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    /// Channels, sorted by name.
    pub channels: Vec<PackageChannel>,
    /// The default channel.
    pub default_channel: String,
}

/// A deprecation message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deprecation {
    /// Why, for the user.
    pub message: String,
}

/// `PackageChannel`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageChannel {
    /// Channel name.
    pub name: String,
    /// The channel head's CSV name.
    #[serde(rename = "currentCSV")]
    pub current_csv: String,
    /// Description of the head's CSV.
    #[serde(rename = "currentCSVDesc", default)]
    pub current_csv_desc: CsvDescription,
    /// Channel deprecation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    /// Bundles of the channel, highest version first; `null` when every one has `olm.deprecated`.
    pub entries: Option<Vec<ChannelEntry>>,
}

/// `ChannelEntry`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelEntry {
    /// Bundle (CSV) name.
    pub name: String,
    /// The `olm.package` version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Bundle deprecation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
}

/// `CSVDescription`: the display part of a CSV. Lists are omitted when empty, as Go's
/// `omitempty`; `version`, `provider`, `customresourcedefinitions` and `apiservicedefinitions`
/// are always written (Go structs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvDescription {
    /// `spec.displayName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// `spec.version` as blang/semver prints it (`0.0.0` when absent or unparseable).
    #[serde(default)]
    pub version: String,
    /// `spec.provider`.
    #[serde(default)]
    pub provider: AppLink,
    /// `metadata.annotations`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `spec.keywords`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// `spec.links`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<AppLink>,
    /// `spec.maintainers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    /// `spec.maturity`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub maturity: String,
    /// `spec.description` (JSON name `description`).
    #[serde(default, skip_serializing_if = "String::is_empty", rename = "description")]
    pub long_description: String,
    /// `spec.installModes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<InstallMode>,
    /// Owned and required CRDs, trimmed to name, version, kind, displayName, description.
    #[serde(default, rename = "customresourcedefinitions")]
    pub customresourcedefinitions: ApiDescriptions,
    /// Owned and required APIServices, trimmed to name, group, version, kind, displayName, description.
    #[serde(default, rename = "apiservicedefinitions")]
    pub apiservicedefinitions: ApiDescriptions,
    /// `spec.nativeAPIs` (JSON name `nativeApis`).
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "nativeApis")]
    pub native_apis: Vec<Value>,
    /// `spec.minKubeVersion`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub min_kube_version: String,
    /// Images of the install strategy's containers and init containers and `spec.relatedImages`, sorted, once each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<String>,
}

/// A `{name, url}` link (`AppLink`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppLink {
    /// Name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

/// A `{name, email}` maintainer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Maintainer {
    /// Name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Email.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
}

/// An install mode `{type, supported}` (the API type).
pub use crate::api::clusterserviceversion::InstallMode;

/// Owned and required API descriptions (each an object with the trimmed fields).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiDescriptions {
    /// Owned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<Value>,
    /// Required.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<Value>,
}

/// The CatalogSource fields a PackageManifest carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogSourceInfo {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// `spec.displayName`.
    pub display_name: String,
    /// `spec.publisher`.
    pub publisher: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.creationTimestamp` (RFC 3339).
    pub creation_timestamp: Option<String>,
}

impl CatalogSourceInfo {
    /// The fields of a CatalogSource object.
    pub fn of(cs: &crate::api::CatalogSource) -> CatalogSourceInfo {
        CatalogSourceInfo {
            name: cs.metadata.name.clone().unwrap_or_default(),
            namespace: cs.metadata.namespace.clone().unwrap_or_default(),
            display_name: cs.spec.display_name.clone().unwrap_or_default(),
            publisher: cs.spec.publisher.clone().unwrap_or_default(),
            labels: cs.metadata.labels.clone().unwrap_or_default(),
            creation_timestamp: cs.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
        }
    }
}

/// What one package contributes, independent of the CatalogSource that serves it: the status
/// without the `catalogSource*` fields and the labels from the CSV. Build them with
/// [`packages_of`]; turn one into a [`PackageManifest`] with [`PackageSummary::manifest`].
#[derive(Debug, Clone, PartialEq)]
pub struct PackageSummary {
    /// Package name.
    pub name: String,
    /// Status with empty `catalogSource*` fields.
    pub status: PackageManifestStatus,
    /// Labels of the default channel's CSV (else the first channel's).
    pub csv_labels: BTreeMap<String, String>,
    /// Keywords of every channel head's CSV, for search.
    pub keywords: Vec<String>,
}

/// Why a package has no PackageManifest (packageserver logs these and leaves the package out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElidedPackage {
    /// Package name.
    pub package: String,
    /// Why, naming the channels and bundles.
    pub reason: String,
}

/// The packages of a catalog index built with `keep_bundle_objects` (without it, a bundle whose
/// CSV is only in `olm.bundle.object` has no CSV and its channels are left out), sorted by name,
/// and the packages left out with why.
pub fn packages_of(index: &ValidatedCatalog) -> (Vec<PackageSummary>, Vec<ElidedPackage>) {
    let mut out = Vec::new();
    let mut elided = Vec::new();
    for pkg in index.packages() {
        match package_summary(index, pkg) {
            Ok(s) => out.push(s),
            Err(reason) => elided.push(ElidedPackage { package: pkg.name.clone(), reason }),
        }
    }
    (out, elided)
}

fn package_summary(index: &ValidatedCatalog, pkg: &IndexedPackage) -> Result<PackageSummary, String> {
    let mut status = PackageManifestStatus {
        package_name: pkg.name.clone(),
        default_channel: pkg.default_channel.clone(),
        deprecation: pkg.deprecation.clone().map(|message| Deprecation { message }),
        ..Default::default()
    };
    let mut provider_set = false;
    let mut default_elided = false;
    let mut default_csv_labels: Option<BTreeMap<String, String>> = None;
    let mut keywords = Vec::new();
    let mut skipped = Vec::new();
    // IndexedPackage::channels is sorted by name, as newPackageManifest sorts them.
    for ch in &pkg.channels {
        let head = index.bundle_at(ch.head);
        let Some(csv) = head_csv(pkg, head) else {
            skipped.push(format!("channel {}: head bundle {} has no ClusterServiceVersion", ch.name, head.name));
            default_elided |= ch.name == status.default_channel;
            continue;
        };
        let Some(desc) = csv_description(&csv) else {
            skipped.push(format!(
                "channel {}: the ClusterServiceVersion of head bundle {} has spec.version {} that is not a version",
                ch.name, head.name, csv["spec"]["version"]
            ));
            default_elided |= ch.name == status.default_channel;
            continue;
        };
        let is_default = ch.name == status.default_channel;
        if default_csv_labels.is_none() || is_default {
            default_csv_labels = Some(string_map(&csv["metadata"]["labels"]));
        }
        if (!status.default_channel.is_empty() && is_default) || !provider_set {
            status.provider = desc.provider.clone();
            provider_set = true;
        }
        keywords.extend(desc.keywords.iter().cloned());
        let mut entries: Vec<(&semver::Version, ChannelEntry)> = ch
            .entries
            .iter()
            .map(|e| index.bundle_at(e.bundle))
            .filter(|b| !b.legacy_deprecated)
            .map(|b| {
                let entry = ChannelEntry {
                    name: b.name.clone(),
                    version: b.version.to_string(),
                    deprecation: b.deprecation.clone().map(|message| Deprecation { message }),
                };
                (&b.version, entry)
            })
            .collect();
        entries.sort_by(|a, b| b.0.cmp(a.0));
        status.channels.push(PackageChannel {
            name: ch.name.clone(),
            current_csv: csv["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            current_csv_desc: desc,
            deprecation: ch.deprecation.clone().map(|message| Deprecation { message }),
            entries: if entries.is_empty() { None } else { Some(entries.into_iter().map(|(_, e)| e).collect()) },
        });
    }
    if status.channels.is_empty() {
        return Err(format!(
            "package {} has no channel with a ClusterServiceVersion ({})",
            pkg.name,
            skipped.join("; ")
        ));
    }
    if default_elided {
        status.default_channel = status.channels[0].name.clone();
    }
    keywords.sort();
    keywords.dedup();
    Ok(PackageSummary { name: pkg.name.clone(), status, csv_labels: default_csv_labels.unwrap_or_default(), keywords })
}

impl PackageSummary {
    /// The PackageManifest as served for `namespace` (the request's namespace; packageserver
    /// sets it so that clients do not complain of a mismatch) from the CatalogSource `source`.
    pub fn manifest(&self, source: &CatalogSourceInfo, namespace: &str) -> PackageManifest {
        let mut labels = source.labels.clone();
        labels.insert(LABEL_CATALOG.into(), source.name.clone());
        labels.insert(LABEL_CATALOG_NAMESPACE.into(), source.namespace.clone());
        labels.insert(LABEL_PROVIDER.into(), self.status.provider.name.clone());
        labels.insert(LABEL_PROVIDER_URL.into(), self.status.provider.url.clone());
        labels.extend(self.csv_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        if !labels.keys().any(|k| k.starts_with("operatorframework.io/os")) {
            labels.insert(DEFAULT_OS_LABEL.into(), "supported".into());
        }
        if !labels.keys().any(|k| k.starts_with("operatorframework.io/arch")) {
            labels.insert(DEFAULT_ARCH_LABEL.into(), "supported".into());
        }
        let mut status = self.status.clone();
        status.catalog_source = source.name.clone();
        status.catalog_source_display_name = source.display_name.clone();
        status.catalog_source_publisher = source.publisher.clone();
        status.catalog_source_namespace = source.namespace.clone();
        PackageManifest {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            metadata: ObjectMeta {
                name: self.name.clone(),
                namespace: if namespace.is_empty() { source.namespace.clone() } else { namespace.to_string() },
                labels,
                creation_timestamp: source.creation_timestamp.clone(),
            },
            spec: json!({}),
            status,
        }
    }
}

/// The head bundle's CSV as JSON with Go's key matching applied, or `None` when it has none.
fn head_csv(pkg: &IndexedPackage, b: &IndexedBundle) -> Option<Value> {
    for p in b.properties.iter().filter(|p| p.type_ == property::BUNDLE_OBJECT) {
        let Some(data) = p.value.get("data").and_then(Value::as_str) else { continue };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else { continue };
        let Ok(text) = std::str::from_utf8(&bytes) else { continue };
        let Ok(obj) = crate::yaml::from_str(text) else { continue };
        let (obj, _) = crate::bundle::gofields::canonical_csv(&obj);
        if obj.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion") {
            return Some(obj);
        }
    }
    let metas: Vec<&Value> =
        b.properties.iter().filter(|p| p.type_ == property::CSV_METADATA).map(|p| &p.value).collect();
    let [meta] = metas.as_slice() else { return None };
    Some(csv_from_metadata(pkg, b, meta))
}

/// A CSV made from an `olm.csv.metadata` value (`model_to_api.go` `csvMetadataToCsv`).
fn csv_from_metadata(pkg: &IndexedPackage, b: &IndexedBundle, meta: &Value) -> Value {
    let m = meta.as_object().cloned().unwrap_or_default();
    // Keys as Go decodes them into `property.CSVMetadata`: the exact JSON name, else the first
    // key equal under case folding (alpha/property/property.go).
    let get = |k: &str| {
        m.get(k)
            .or_else(|| m.iter().find(|(key, _)| crate::bundle::gofields::go_fold_eq(key, k)).map(|(_, v)| v))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mut spec = serde_json::Map::new();
    // (CSVMetadata JSON name, CSV spec field).
    for (k, field) in [
        ("apiServiceDefinitions", "apiservicedefinitions"),
        ("crdDescriptions", "customresourcedefinitions"),
        ("displayName", "displayName"),
        ("installModes", "installModes"),
        ("keywords", "keywords"),
        ("links", "links"),
        ("maintainers", "maintainers"),
        ("maturity", "maturity"),
        ("minKubeVersion", "minKubeVersion"),
        ("nativeAPIs", "nativeAPIs"),
        ("provider", "provider"),
    ] {
        let v = get(k);
        if !v.is_null() {
            spec.insert(field.into(), v);
        }
    }
    let description =
        get("description").as_str().filter(|s| !s.is_empty()).map(str::to_string).or_else(|| pkg.description.clone());
    if let Some(d) = description {
        spec.insert("description".into(), Value::String(d));
    }
    if let Some(icon) = &pkg.icon {
        spec.insert("icon".into(), json!([{"base64data": icon.base64data, "mediatype": icon.mediatype}]));
    }
    spec.insert("install".into(), json!({"strategy": "deployment"}));
    spec.insert("version".into(), Value::String(b.version.to_string()));
    spec.insert(
        "relatedImages".into(),
        json!(b.related_images.iter().map(|r| json!({"name": r.name, "image": r.image})).collect::<Vec<_>>()),
    );
    let (csv, _) = crate::bundle::gofields::canonical_csv(&json!({
        "kind": "ClusterServiceVersion",
        "apiVersion": "operators.coreos.com/v1alpha1",
        "metadata": {"name": b.name, "annotations": get("annotations"), "labels": get("labels")},
        "spec": Value::Object(spec),
    }));
    csv
}

/// `CreateCSVDescription` over a CSV kept as JSON; `None` when `spec.version` is not a
/// version (see [`go_semver_string`]).
pub fn csv_description(csv: &Value) -> Option<CsvDescription> {
    let spec = &csv["spec"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let link = |v: &Value| AppLink { name: s(&v["name"]), url: s(&v["url"]) };
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let trim = |v: &Value, keys: &[&str]| {
        list(v)
            .iter()
            .map(|d| {
                let mut o = IndexMap::new();
                for k in keys {
                    let x = &d[*k];
                    // name, (group,) version and kind are always written; displayName and description only when set.
                    let required = !matches!(*k, "displayName" | "description");
                    if required || x.as_str().is_some_and(|t| !t.is_empty()) {
                        o.insert(k.to_string(), Value::String(s(x)));
                    }
                }
                serde_json::to_value(o).unwrap_or_default()
            })
            .collect::<Vec<_>>()
    };
    const CRD_KEYS: &[&str] = &["name", "version", "kind", "displayName", "description"];
    const API_KEYS: &[&str] = &["name", "group", "version", "kind", "displayName", "description"];
    let mut images: Vec<String> = Vec::new();
    if spec["install"]["strategy"].as_str() == Some("deployment") {
        for d in list(&spec["install"]["spec"]["deployments"]) {
            let pod = &d["spec"]["template"]["spec"];
            for c in list(&pod["containers"]).iter().chain(list(&pod["initContainers"]).iter()) {
                images.push(s(&c["image"]));
            }
        }
    }
    images.extend(list(&spec["relatedImages"]).iter().map(|r| s(&r["image"])));
    images.sort();
    images.dedup();
    let version = match &spec["version"] {
        Value::Null => go_semver_string(None)?,
        Value::String(v) => go_semver_string(Some(v))?,
        _ => return None,
    };
    Some(CsvDescription {
        display_name: s(&spec["displayName"]),
        version,
        provider: link(&spec["provider"]),
        annotations: string_map(&csv["metadata"]["annotations"]),
        keywords: list(&spec["keywords"]).iter().map(s).collect(),
        links: list(&spec["links"]).iter().map(link).collect(),
        maintainers: list(&spec["maintainers"])
            .iter()
            .map(|m| Maintainer { name: s(&m["name"]), email: s(&m["email"]) })
            .collect(),
        maturity: s(&spec["maturity"]),
        long_description: s(&spec["description"]),
        install_modes: list(&spec["installModes"])
            .iter()
            .map(|m| InstallMode { type_: s(&m["type"]).into(), supported: m["supported"].as_bool().unwrap_or(false) })
            .collect(),
        customresourcedefinitions: ApiDescriptions {
            owned: trim(&spec["customresourcedefinitions"]["owned"], CRD_KEYS),
            required: trim(&spec["customresourcedefinitions"]["required"], CRD_KEYS),
        },
        apiservicedefinitions: ApiDescriptions {
            owned: trim(&spec["apiservicedefinitions"]["owned"], API_KEYS),
            required: trim(&spec["apiservicedefinitions"]["required"], API_KEYS),
        },
        native_apis: list(&spec["nativeAPIs"]),
        min_kube_version: s(&spec["minKubeVersion"]),
        related_images: images,
    })
}

/// A CSV `spec.version` as `OperatorVersion` prints it after blang's `semver.ParseTolerant`
/// (surrounding spaces and one leading `v` dropped, a missing minor/patch filled with 0 when
/// the short form has no pre-release or build part); `0.0.0` when absent. `None` when it does not
/// parse: Go's `json.Unmarshal` of the CSV then fails and packageserver leaves the channel out.
fn go_semver_string(v: Option<&str>) -> Option<String> {
    let Some(v) = v else { return Some("0.0.0".into()) };
    let t = v.trim();
    let t = t.strip_prefix('v').unwrap_or(t);
    let parts: Vec<&str> = t.splitn(3, '.').collect();
    let filled = if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return None;
        }
        format!("{t}{}", ".0".repeat(3 - parts.len()))
    } else {
        t.to_string()
    };
    semver::Version::parse(&filled).ok().map(|x| x.to_string())
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|o| o.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::parse::parse_bytes;
    use crate::catalog::validated::IndexOptions;

    fn csv_object(name: &str, version: &str, extra_spec: Value) -> String {
        let mut spec = json!({
            "displayName": "Etcd", "version": version, "description": "A key-value store",
            "provider": {"name": "CoreOS", "url": "https://coreos.com"},
            "keywords": ["etcd", "kv"],
            "links": [{"name": "Docs", "url": "https://etcd.io"}],
            "maintainers": [{"name": "Ann", "email": "ann@example.com"}],
            "maturity": "stable", "minKubeVersion": "1.20.0",
            "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "AllNamespaces", "supported": false}],
            "icon": [{"base64data": "PHN2Zz4=", "mediatype": "image/svg+xml"}],
            "customresourcedefinitions": {"owned": [{"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster",
                "displayName": "Etcd Cluster", "specDescriptors": [{"path": "size"}]}]},
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "etcd-operator", "spec": {"template": {"spec": {
                "containers": [{"name": "op", "image": "quay.io/coreos/etcd-operator:v1"}],
                "initContainers": [{"name": "init", "image": "quay.io/coreos/init:v1"}]}}}}]}},
            "relatedImages": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3"}, {"name": "op", "image": "quay.io/coreos/etcd-operator:v1"}],
        });
        spec.as_object_mut().unwrap().extend(extra_spec.as_object().cloned().unwrap_or_default());
        let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "annotations": {"capabilities": "Basic Install"}, "labels": {"operatorframework.io/arch.arm64": "supported"}},
            "spec": spec});
        base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&csv).unwrap())
    }

    /// The catalog the tests read: three packages and the deprecations of one.
    fn catalog() -> String {
        [etcd_package(), meta_package(), empty_package(), etcd_deprecations()].concat()
    }

    /// Package etcd: two channels, two bundles carrying their CSV (and a CRD) as bundle objects.
    fn etcd_package() -> String {
        let crd = base64::engine::general_purpose::STANDARD.encode(
            r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"x"}}"#,
        );
        format!(
            r#"
schema: olm.package
name: etcd
defaultChannel: stable
description: package description
icon: {{base64data: PHN2Zz4=, mediatype: image/svg+xml}}
---
schema: olm.channel
package: etcd
name: stable
entries:
- name: etcd.v0.9.0
- name: etcd.v0.9.2
  replaces: etcd.v0.9.0
---
schema: olm.channel
package: etcd
name: alpha
entries:
- name: etcd.v0.9.0
---
schema: olm.bundle
package: etcd
name: etcd.v0.9.0
image: quay.io/x/etcd:0.9.0
properties:
- {{type: olm.package, value: {{packageName: etcd, version: 0.9.0}}}}
- {{type: olm.bundle.object, value: {{data: {crd}}}}}
- {{type: olm.bundle.object, value: {{data: {a}}}}}
---
schema: olm.bundle
package: etcd
name: etcd.v0.9.2
image: quay.io/x/etcd:0.9.2
properties:
- {{type: olm.package, value: {{packageName: etcd, version: 0.9.2}}}}
- {{type: olm.bundle.object, value: {{data: {b}}}}}
---"#,
            a = csv_object("etcd.v0.9.0", "0.9.0", json!({})),
            b = csv_object(
                "etcd.v0.9.2",
                "v0.9.2",
                json!({"Provider": {"name": "Red Hat", "url": "https://redhat.com"}})
            ),
        )
    }

    /// Package meta: a bundle described by olm.csv.metadata, and a channel whose bundle has no CSV.
    fn meta_package() -> String {
        r#"
schema: olm.package
name: meta
defaultChannel: beta
---
schema: olm.channel
package: meta
name: beta
entries:
- name: meta.v1.0.0
---
schema: olm.channel
package: meta
name: nocsv
entries:
- name: meta.v0.1.0
---
schema: olm.bundle
package: meta
name: meta.v1.0.0
image: quay.io/x/meta:1.0.0
relatedImages: [{name: r, image: quay.io/x/related:1}]
properties:
- {type: olm.package, value: {packageName: meta, version: 1.0.0}}
- {type: olm.csv.metadata, value: {displayName: Meta, provider: {name: Acme}, installModes: [{type: AllNamespaces, supported: true}], labels: {operatorframework.io/os.linux: supported}, crdDescriptions: {owned: [{name: ms.x.io, version: v1, kind: M, specDescriptors: []}]}, APIServiceDefinitions: {required: [{name: as, group: g.io, version: v1, kind: A}]}}}
---
schema: olm.bundle
package: meta
name: meta.v0.1.0
image: quay.io/x/meta:0.1.0
properties:
- {type: olm.package, value: {packageName: meta, version: 0.1.0}}
---"#
            .to_string()
    }

    /// Package empty: one bundle with no CSV at all.
    fn empty_package() -> String {
        r#"
schema: olm.package
name: empty
defaultChannel: only
---
schema: olm.channel
package: empty
name: only
entries:
- name: empty.v1.0.0
---
schema: olm.bundle
package: empty
name: empty.v1.0.0
image: quay.io/x/empty:1.0.0
properties:
- {type: olm.package, value: {packageName: empty, version: 1.0.0}}
---"#
            .to_string()
    }

    /// Deprecations of etcd: the package, channel alpha and bundle etcd.v0.9.0.
    fn etcd_deprecations() -> String {
        r#"
schema: olm.deprecations
package: etcd
entries:
- reference: {schema: olm.package}
  message: etcd is retired
- reference: {schema: olm.channel, name: alpha}
  message: use stable
- reference: {schema: olm.bundle, name: etcd.v0.9.0}
  message: use 0.9.2
"#
        .to_string()
    }

    fn summaries() -> (Vec<PackageSummary>, Vec<ElidedPackage>) {
        let cfg = parse_bytes("c.yaml", catalog().as_bytes()).unwrap();
        let idx = ValidatedCatalog::with_options(cfg, IndexOptions { keep_bundle_objects: true, ..Default::default() })
            .unwrap();
        packages_of(&idx)
    }

    fn source() -> CatalogSourceInfo {
        CatalogSourceInfo {
            name: "community".into(),
            namespace: "olm".into(),
            display_name: "Community Operators".into(),
            publisher: "Red Hat".into(),
            labels: [("team".to_string(), "a".to_string())].into(),
            creation_timestamp: Some("2026-12-01T10:00:00Z".into()),
        }
    }

    #[test]
    fn status_from_bundle_objects() {
        let (pkgs, _) = summaries();
        let etcd = pkgs.iter().find(|p| p.name == "etcd").unwrap();
        let m = etcd.manifest(&source(), "operators");
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["metadata"]["namespace"], "operators", "the request's namespace");
        assert_eq!(v["metadata"]["creationTimestamp"], "2026-12-01T10:00:00Z");
        let st = &v["status"];
        assert_eq!(st["catalogSource"], "community");
        assert_eq!(st["catalogSourceDisplayName"], "Community Operators");
        assert_eq!(st["catalogSourcePublisher"], "Red Hat");
        assert_eq!(st["catalogSourceNamespace"], "olm");
        assert_eq!(st["packageName"], "etcd");
        assert_eq!(st["defaultChannel"], "stable");
        assert_eq!(st["deprecation"]["message"], "etcd is retired");
        // Channels sorted by name; provider from the default channel's head (a Go-cased key `Provider`).
        let names: Vec<&str> = st["channels"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["alpha", "stable"]);
        assert_eq!(st["provider"], json!({"name": "Red Hat", "url": "https://redhat.com"}));
        let alpha = &st["channels"][0];
        assert_eq!(alpha["currentCSV"], "etcd.v0.9.0");
        assert_eq!(alpha["deprecation"]["message"], "use stable");
        assert_eq!(
            alpha["entries"],
            json!([{"name": "etcd.v0.9.0", "version": "0.9.0", "deprecation": {"message": "use 0.9.2"}}])
        );
        let stable = &st["channels"][1];
        assert_eq!(stable["currentCSV"], "etcd.v0.9.2");
        assert_eq!(stable["entries"][0]["name"], "etcd.v0.9.2", "highest version first");
        assert_eq!(stable["entries"][1]["name"], "etcd.v0.9.0");
        let d = &stable["currentCSVDesc"];
        assert_eq!(d["displayName"], "Etcd");
        assert_eq!(d["version"], "0.9.2", "ParseTolerant drops the v");
        assert_eq!(d["description"], "A key-value store");
        assert_eq!(d["keywords"], json!(["etcd", "kv"]));
        assert_eq!(d["maintainers"], json!([{"name": "Ann", "email": "ann@example.com"}]));
        assert_eq!(d["links"], json!([{"name": "Docs", "url": "https://etcd.io"}]));
        assert_eq!(d["maturity"], "stable");
        assert_eq!(d["minKubeVersion"], "1.20.0");
        assert_eq!(d["annotations"], json!({"capabilities": "Basic Install"}));
        assert_eq!(d["installModes"][0], json!({"type": "OwnNamespace", "supported": true}));
        assert_eq!(d["installModes"][1], json!({"type": "AllNamespaces", "supported": false}));
        assert_eq!(
            d["customresourcedefinitions"],
            json!({"owned": [{"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster", "displayName": "Etcd Cluster"}]}),
            "descriptors trimmed"
        );
        assert_eq!(d["apiservicedefinitions"], json!({}));
        assert_eq!(
            d["relatedImages"],
            json!(["quay.io/coreos/etcd-operator:v1", "quay.io/coreos/etcd:v3", "quay.io/coreos/init:v1"])
        );
        assert!(d.get("icon").is_none(), "icons are emptied as packageserver's list and get do");
        let labels = &v["metadata"]["labels"];
        assert_eq!(labels["catalog"], "community");
        assert_eq!(labels["catalog-namespace"], "olm");
        assert_eq!(labels["team"], "a");
        assert_eq!(labels["provider"], "Red Hat");
        assert_eq!(labels["provider-url"], "https://redhat.com");
        assert_eq!(labels["operatorframework.io/arch.arm64"], "supported", "the default CSV's labels");
        assert!(labels.get("operatorframework.io/arch.amd64").is_none(), "an arch label is there");
        assert_eq!(labels["operatorframework.io/os.linux"], "supported");
    }

    #[test]
    fn status_from_csv_metadata_and_elided_channels() {
        let (pkgs, elided) = summaries();
        let meta = pkgs.iter().find(|p| p.name == "meta").unwrap();
        let v = serde_json::to_value(meta.manifest(&source(), "")).unwrap();
        assert_eq!(v["metadata"]["namespace"], "olm", "all namespaces: the CatalogSource's");
        let st = &v["status"];
        let names: Vec<&str> = st["channels"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["beta"], "a channel whose head has no CSV is left out");
        let d = &st["channels"][0]["currentCSVDesc"];
        assert_eq!(d["displayName"], "Meta");
        assert_eq!(d["version"], "1.0.0", "the bundle's version");
        assert_eq!(d["relatedImages"], json!(["quay.io/x/related:1"]));
        assert_eq!(d["provider"], json!({"name": "Acme"}));
        assert_eq!(
            d["customresourcedefinitions"],
            json!({"owned": [{"name": "ms.x.io", "version": "v1", "kind": "M"}]}),
            "crdDescriptions"
        );
        assert_eq!(
            d["apiservicedefinitions"],
            json!({"required": [{"name": "as", "group": "g.io", "version": "v1", "kind": "A"}]}),
            "a Go-cased key"
        );
        assert_eq!(st["provider"], json!({"name": "Acme"}));
        assert_eq!(st["channels"][0]["currentCSV"], "meta.v1.0.0");
        assert_eq!(v["metadata"]["labels"]["provider-url"], "");
        assert_eq!(v["metadata"]["labels"]["operatorframework.io/arch.amd64"], "supported");
        assert!(v["metadata"]["labels"].get("operatorframework.io/os.linux").is_some());
        assert_eq!(elided.len(), 1);
        assert_eq!(elided[0].package, "empty");
        assert!(elided[0].reason.contains("empty.v1.0.0"), "{}", elided[0].reason);
    }

    #[test]
    fn default_channel_elided_falls_back_to_first() {
        let cat = catalog().replace("name: meta\ndefaultChannel: beta", "name: meta\ndefaultChannel: nocsv");
        let cfg = parse_bytes("c.yaml", cat.as_bytes()).unwrap();
        let idx = ValidatedCatalog::with_options(cfg, IndexOptions { keep_bundle_objects: true, ..Default::default() })
            .unwrap();
        let (pkgs, _) = packages_of(&idx);
        let meta = pkgs.iter().find(|p| p.name == "meta").unwrap();
        assert_eq!(meta.status.default_channel, "beta");
    }

    #[test]
    fn tolerant_versions() {
        let t = |v| go_semver_string(Some(v));
        assert_eq!(t("v1.2").as_deref(), Some("1.2.0"));
        assert_eq!(t(" 1.2.3-rc.1 ").as_deref(), Some("1.2.3-rc.1"));
        assert_eq!(t("7").as_deref(), Some("7.0.0"));
        assert_eq!(t("1.2-rc"), None, "a short form with a pre-release is refused");
        assert_eq!(t("nonsense"), None);
        assert_eq!(go_semver_string(None).as_deref(), Some("0.0.0"));
    }
}
