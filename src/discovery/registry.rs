//! The answers of operator-registry's gRPC API (`api.Registry`, `pkg/api/registry.proto`) for one
//! valid catalog, as `opm serve` v1.74.0 gives them: pure functions of a [`ValidatedCatalog`]
//! (kept with its `olm.bundle.object` properties), one per RPC. [`super::registry_server`] puts
//! them on the wire for `capstan controller --registry-listen`.
//!
//! Semantics (operator-registry v1.74.0 `pkg/cache/cache.go`, `pkg/cache/pkgs.go`,
//! `pkg/api/model_to_api.go`, `pkg/server/server.go`):
//! - a bundle is answered per channel entry: `channelName` is the entry's channel, `replaces`,
//!   `skips` and `skipRange` the entry's edges; `GetBundle`, `GetBundleForChannel`,
//!   `GetBundleThatReplaces` and `GetDefaultBundleThatProvides` leave `replaces` and `skips` out
//!   (`getTrimmedBundle`), `ListBundles` leaves `csvJson` and `object` out of bundles that have an
//!   image (`SendBundles`);
//! - `object` is each `olm.bundle.object` as JSON (as apimachinery's `yaml.ToJSON`: JSON data as
//!   written, YAML data converted with keys sorted); `csvJson` the
//!   one of kind `ClusterServiceVersion`, else a CSV made from the one `olm.csv.metadata` (then
//!   also the only `object`); `properties` are every property but those two, their values compact
//!   JSON with keys sorted (`declcfg.Meta` re-encodes each blob through a map);
//!   `dependencies` are `olm.gvk.required` (type `olm.gvk`) and `olm.package.required` (type
//!   `olm.package`, `{"packageName","version"}`);
//! - errors are Go errors, which gRPC sends as status `Unknown` with the message
//!   ([`RegistryError`]); operator-registry's FBC server returns no `NotFound`.
//!
//! Orders where operator-registry iterates Go maps (packages, channels, bundles) are capstan's:
//! by name, channels in name order, entries in the channel blob's order.

use serde_json::Value;

use crate::bundle::gojson::{KeyOrder, to_string as go_json};
use crate::catalog::grpc::{
    Bundle, Channel, ChannelEntry, Dependency, Deprecation, GroupVersionKind, Package, PackageName, Property,
};
use crate::catalog::property;
use crate::catalog::validated::{IndexedBundle, IndexedChannel, IndexedEntry, IndexedPackage, ValidatedCatalog};

/// A query the catalog cannot answer; operator-registry's message, sent as gRPC `Unknown`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RegistryError(pub String);

/// Whether a bundle answer keeps `replaces` / `skips` (`ListBundles`, with its image rule) or
/// leaves them out (`getTrimmedBundle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Listed,
    Trimmed,
}

/// `ListPackages`: every package name, sorted.
pub fn list_packages(cat: &ValidatedCatalog) -> Vec<PackageName> {
    cat.packages().iter().map(|p| PackageName { name: p.name.clone() }).collect()
}

fn deprecation(message: &Option<String>) -> Option<Deprecation> {
    message.as_ref().map(|m| Deprecation { message: m.clone() })
}

/// `GetPackage`: channels sorted by name with their heads, the default channel, deprecations.
///
/// # Errors
/// `package "NAME" not found`.
pub fn get_package(cat: &ValidatedCatalog, name: &str) -> Result<Package, RegistryError> {
    let pkg = package(cat, name)?;
    Ok(Package {
        name: pkg.name.clone(),
        channels: pkg
            .channels
            .iter()
            .map(|c| Channel {
                name: c.name.clone(),
                csv_name: cat.bundle_at(c.head).name.clone(),
                deprecation: deprecation(&c.deprecation),
            })
            .collect(),
        default_channel_name: pkg.default_channel.clone(),
        deprecation: deprecation(&pkg.deprecation),
    })
}

fn package<'a>(cat: &'a ValidatedCatalog, name: &str) -> Result<&'a IndexedPackage, RegistryError> {
    cat.package(name).ok_or_else(|| RegistryError(format!("package {name:?} not found")))
}

fn channel<'a>(pkg: &'a IndexedPackage, name: &str) -> Result<&'a IndexedChannel, RegistryError> {
    pkg.channels
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| RegistryError(format!("package {:?}, channel {name:?} not found", pkg.name)))
}

/// `GetBundle`: the bundle `csv_name` of channel `channel_name` of package `pkg_name`, without
/// `replaces` / `skips`.
///
/// # Errors
/// The package, the channel or the bundle is not there (operator-registry's three messages).
pub fn get_bundle(
    cat: &ValidatedCatalog,
    pkg_name: &str,
    channel_name: &str,
    csv_name: &str,
) -> Result<Bundle, RegistryError> {
    let pkg = package(cat, pkg_name)?;
    let ch = channel(pkg, channel_name)?;
    let entry = ch.entries.iter().find(|e| cat.bundle_at(e.bundle).name == csv_name).ok_or_else(|| {
        RegistryError(format!("package {pkg_name:?}, channel {channel_name:?}, bundle {csv_name:?} not found"))
    })?;
    Ok(bundle(cat, pkg, ch, entry, Shape::Trimmed))
}

/// `GetBundleForChannel`: the channel head, without `replaces` / `skips`.
///
/// # Errors
/// The package or the channel is not there.
pub fn get_bundle_for_channel(
    cat: &ValidatedCatalog,
    pkg_name: &str,
    channel_name: &str,
) -> Result<Bundle, RegistryError> {
    let pkg = package(cat, pkg_name)?;
    let ch = channel(pkg, channel_name)?;
    let head = ch.entries.iter().find(|e| e.bundle == ch.head);
    let head =
        head.ok_or_else(|| RegistryError(format!("package {pkg_name:?}, channel {channel_name:?} has no head")))?;
    Ok(bundle(cat, pkg, ch, head, Shape::Trimmed))
}

/// Every (package, channel, entry) of the catalog, packages and channels by name, entries in
/// channel order.
fn entries(cat: &ValidatedCatalog) -> impl Iterator<Item = (&IndexedPackage, &IndexedChannel, &IndexedEntry)> {
    cat.packages().iter().flat_map(|p| p.channels.iter().flat_map(move |c| c.entries.iter().map(move |e| (p, c, e))))
}

fn channel_entry(
    cat: &ValidatedCatalog,
    pkg: &IndexedPackage,
    ch: &IndexedChannel,
    e: &IndexedEntry,
    replaces: &str,
) -> ChannelEntry {
    ChannelEntry {
        package_name: pkg.name.clone(),
        channel_name: ch.name.clone(),
        bundle_name: cat.bundle_at(e.bundle).name.clone(),
        replaces: replaces.to_string(),
    }
}

/// `GetChannelEntriesThatReplace`: one entry per bundle whose `replaces` is `name`, and one per
/// bundle that skips `name` (with that bundle's `replaces`), in every package and channel.
///
/// # Errors
/// `no channel entries found that replace NAME`.
pub fn get_channel_entries_that_replace(
    cat: &ValidatedCatalog,
    name: &str,
) -> Result<Vec<ChannelEntry>, RegistryError> {
    let mut out = Vec::new();
    for (pkg, ch, e) in entries(cat) {
        let replaces = e.replaces.as_deref().unwrap_or("");
        if replaces == name {
            out.push(channel_entry(cat, pkg, ch, e, replaces));
        }
        let skipped = e.skips.iter().filter(|s| *s == name && s.as_str() != replaces).count();
        for _ in 0..skipped {
            out.push(channel_entry(cat, pkg, ch, e, replaces));
        }
    }
    if out.is_empty() {
        return Err(RegistryError(format!("no channel entries found that replace {name}")));
    }
    Ok(out)
}

/// `GetBundleThatReplaces`: the (first, in channel order) bundle of the channel that replaces or
/// skips `name`, without `replaces` / `skips`.
///
/// # Errors
/// The package or channel is not there, or nothing in the channel replaces `name`.
pub fn get_bundle_that_replaces(
    cat: &ValidatedCatalog,
    name: &str,
    pkg_name: &str,
    channel_name: &str,
) -> Result<Bundle, RegistryError> {
    let pkg = cat.package(pkg_name).ok_or_else(|| RegistryError(format!("package {pkg_name} not found")))?;
    let ch = channel(pkg, channel_name)?;
    ch.entries
        .iter()
        .find(|e| e.replaces.as_deref() == Some(name) || e.skips.iter().any(|s| s == name))
        .map(|e| bundle(cat, pkg, ch, e, Shape::Trimmed))
        .ok_or_else(|| RegistryError(format!("no entry found for package {pkg_name:?}, channel {channel_name:?}")))
}

fn provides(cat: &ValidatedCatalog, b: &IndexedBundle, group: &str, version: &str, kind: &str) -> bool {
    cat.provided_gvks(b).any(|g| g.group == group && g.version == version && g.kind == kind)
}

/// The entries of one bundle that provides an API (`channelEntriesForBundle`): itself with its
/// `replaces`, and one per skipped name other than that (only names in the channel unless
/// `ignore_channel`).
fn entries_for_bundle(
    cat: &ValidatedCatalog,
    pkg: &IndexedPackage,
    ch: &IndexedChannel,
    e: &IndexedEntry,
    ignore_channel: bool,
) -> Vec<ChannelEntry> {
    let replaces = e.replaces.as_deref().unwrap_or("");
    let mut out = vec![channel_entry(cat, pkg, ch, e, replaces)];
    for s in &e.skips {
        let in_channel = ch.entries.iter().any(|x| cat.bundle_at(x.bundle).name == *s);
        if s != replaces && (ignore_channel || in_channel) {
            out.push(channel_entry(cat, pkg, ch, e, s));
        }
    }
    out
}

fn no_provider(what: &str, r: &GvkQuery) -> RegistryError {
    RegistryError(format!("{what} group:{:?} version:{:?} kind:{:?}", r.group, r.version, r.kind))
}

/// The API a `*Provide*` query asks for (`plural` is not compared, as in operator-registry).
#[derive(Debug, Clone, Copy)]
pub struct GvkQuery<'a> {
    /// API group.
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Kind.
    pub kind: &'a str,
}

/// `GetChannelEntriesThatProvide`: the entries (see [`entries_for_bundle`], skips from any
/// channel) of every bundle in every channel that provides the API.
///
/// # Errors
/// `no channel entries found that provide group:… version:… kind:…`.
pub fn get_channel_entries_that_provide(
    cat: &ValidatedCatalog,
    q: GvkQuery<'_>,
) -> Result<Vec<ChannelEntry>, RegistryError> {
    let out: Vec<ChannelEntry> = entries(cat)
        .filter(|(_, _, e)| provides(cat, cat.bundle_at(e.bundle), q.group, q.version, q.kind))
        .flat_map(|(p, c, e)| entries_for_bundle(cat, p, c, e, true))
        .collect();
    if out.is_empty() {
        return Err(no_provider("no channel entries found that provide", &q));
    }
    Ok(out)
}

/// `GetLatestChannelEntriesThatProvide`: as [`get_channel_entries_that_provide`] over channel
/// heads only, skips only within the channel.
///
/// # Errors
/// `no channel entries found that provide group:… version:… kind:…`.
pub fn get_latest_channel_entries_that_provide(
    cat: &ValidatedCatalog,
    q: GvkQuery<'_>,
) -> Result<Vec<ChannelEntry>, RegistryError> {
    let mut out = Vec::new();
    for pkg in cat.packages() {
        for ch in &pkg.channels {
            let Some(head) = ch.entries.iter().find(|e| e.bundle == ch.head) else { continue };
            if provides(cat, cat.bundle_at(head.bundle), q.group, q.version, q.kind) {
                out.extend(entries_for_bundle(cat, pkg, ch, head, false));
            }
        }
    }
    if out.is_empty() {
        return Err(no_provider("no channel entries found that provide", &q));
    }
    Ok(out)
}

/// `GetDefaultBundleThatProvides`: of the latest entries that provide the API, by package name,
/// the first in its package's default channel, as [`get_bundle`] gives it.
///
/// # Errors
/// No channel head provides the API, or none in a default channel.
pub fn get_default_bundle_that_provides(cat: &ValidatedCatalog, q: GvkQuery<'_>) -> Result<Bundle, RegistryError> {
    let mut latest = get_latest_channel_entries_that_provide(cat, q)?;
    latest.sort_by(|a, b| a.package_name.cmp(&b.package_name));
    for e in &latest {
        let Some(pkg) = cat.package(&e.package_name) else { continue };
        if e.channel_name == pkg.default_channel {
            return get_bundle(cat, &e.package_name, &e.channel_name, &e.bundle_name);
        }
    }
    Err(no_provider("no entry found that provides", &q))
}

/// `ListBundles`: one bundle per channel entry, with `replaces` and `skips`; `csvJson` and
/// `object` only for bundles without an image.
pub fn list_bundles(cat: &ValidatedCatalog) -> Vec<Bundle> {
    entries(cat).map(|(p, c, e)| bundle(cat, p, c, e, Shape::Listed)).collect()
}

/// `api.Bundle` of entry `e` of channel `ch` (`ConvertModelBundleToAPIBundle`, then `shape`).
fn bundle(cat: &ValidatedCatalog, pkg: &IndexedPackage, ch: &IndexedChannel, e: &IndexedEntry, shape: Shape) -> Bundle {
    let b = cat.bundle_at(e.bundle);
    let gvk = |g: &property::Gvk| GroupVersionKind {
        group: g.group.clone(),
        version: g.version.clone(),
        kind: g.kind.clone(),
        plural: String::new(),
    };
    let (csv_json, object) = match shape {
        Shape::Listed if !b.image.is_empty() => (String::new(), Vec::new()),
        _ => csv_and_objects(pkg, b),
    };
    let trimmed = shape == Shape::Trimmed;
    Bundle {
        csv_name: b.name.clone(),
        package_name: pkg.name.clone(),
        channel_name: ch.name.clone(),
        csv_json,
        object,
        bundle_path: b.image.clone(),
        provided_apis: cat.provided_gvks(b).map(gvk).collect(),
        required_apis: cat.required_gvks(b).map(gvk).collect(),
        version: package_version(b),
        skip_range: e.skip_range.as_ref().map(|r| r.as_str().to_string()).unwrap_or_default(),
        dependencies: dependencies(b),
        properties: b
            .properties
            .iter()
            .filter(|p| p.type_ != property::BUNDLE_OBJECT && p.type_ != property::CSV_METADATA)
            .map(|p| Property { r#type: p.type_.clone(), value: property_json(&p.value) })
            .collect(),
        replaces: if trimmed { String::new() } else { e.replaces.clone().unwrap_or_default() },
        skips: if trimmed { Vec::new() } else { e.skips.clone() },
        deprecation: deprecation(&b.deprecation),
    }
}

/// A property value as operator-registry holds it: compact, keys sorted, no HTML escaping.
fn property_json(v: &Value) -> String {
    go_json(v, KeyOrder::Sorted, false)
}

/// The `olm.package` property's version as written.
fn package_version(b: &IndexedBundle) -> String {
    b.properties
        .iter()
        .find(|p| p.type_ == property::PACKAGE)
        .and_then(|p| p.value.get("version").and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| b.version.to_string())
}

/// `convertModelPropertiesToAPIDependencies`.
fn dependencies(b: &IndexedBundle) -> Vec<Dependency> {
    let mut out = Vec::new();
    for p in &b.properties {
        match p.type_.as_str() {
            property::GVK_REQUIRED => {
                out.push(Dependency { r#type: property::GVK.into(), value: property_json(&p.value) })
            }
            property::PACKAGE_REQUIRED => {
                let s = |k: &str| p.value.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                let value = serde_json::json!({"packageName": s("packageName"), "version": s("versionRange")});
                out.push(Dependency {
                    r#type: property::PACKAGE.into(),
                    value: go_json(&value, KeyOrder::AsIs, false),
                });
            }
            _ => {}
        }
    }
    out
}

/// `csvJson` and `object` of a bundle: its `olm.bundle.object`s as JSON (as apimachinery's
/// `yaml.ToJSON`: JSON data as written; YAML with keys sorted and HTML characters escaped) and the
/// one of kind `ClusterServiceVersion`; without objects,
/// a CSV made from the one `olm.csv.metadata` is both.
fn csv_and_objects(pkg: &IndexedPackage, b: &IndexedBundle) -> (String, Vec<String>) {
    use base64::Engine;
    let mut objects = Vec::new();
    let mut csv = String::new();
    for p in b.properties.iter().filter(|p| p.type_ == property::BUNDLE_OBJECT) {
        let Some(data) = p.value.get("data").and_then(Value::as_str) else { continue };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else { continue };
        let text = String::from_utf8_lossy(&bytes);
        let Ok(obj) = crate::yaml::from_str(&text) else { continue };
        // apimachinery's `yaml.ToJSON`: JSON is kept as written, YAML becomes Go's JSON of a map.
        let json =
            if text.trim_start().starts_with('{') { text.into_owned() } else { go_json(&obj, KeyOrder::Sorted, true) };
        if csv.is_empty() && obj.get("kind").and_then(Value::as_str) == Some("ClusterServiceVersion") {
            csv = json.clone();
        }
        objects.push(json);
    }
    if csv.is_empty() {
        let metas: Vec<&Value> =
            b.properties.iter().filter(|p| p.type_ == property::CSV_METADATA).map(|p| &p.value).collect();
        if let [meta] = metas.as_slice() {
            csv = go_json(&go_csv::from_metadata(pkg, b, meta), KeyOrder::AsIs, true);
            if objects.is_empty() {
                objects.push(csv.clone());
            }
        }
    }
    (csv, objects)
}

/// The CSV operator-registry makes from an `olm.csv.metadata` value (`model_to_api.go`
/// `csvMetadataToCsv`), as Go's `json.Marshal` of `v1alpha1.ClusterServiceVersion` writes it:
/// fields in the Go structs' order, `omitempty` as declared there (operator-framework/api
/// `pkg/operators/v1alpha1/clusterserviceversion_types.go`), maps with sorted keys, fields the
/// Go types do not have dropped.
mod go_csv {
    use serde_json::{Map, Value, json};

    use crate::catalog::validated::{IndexedBundle, IndexedPackage};

    /// How a field is written when it holds its zero value.
    #[derive(Clone, Copy)]
    enum Zero {
        /// `json:"x"`: always.
        Keep,
        /// `json:"x,omitempty"`: left out when null, `""`, `0`, `false`, `[]` or `{}`.
        Omit,
    }

    /// One field of a Go struct: its JSON name, its `omitempty`, and how its value is written.
    type Field = (&'static str, Zero, fn(&Value) -> Value);

    fn is_empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
        }
    }

    /// A Go map: keys sorted (null stays null).
    fn map(v: &Value) -> Value {
        match v.as_object() {
            Some(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), o[k].clone())).collect())
            }
            None => Value::Null,
        }
    }

    /// A Go struct: `fields` in order, each converted by its function from the JSON value of the
    /// same name (case-folded as Go's decoder matches it).
    fn strukt(v: &Value, fields: &[Field]) -> Value {
        let o = v.as_object();
        let mut out = Map::new();
        for (name, zero, convert) in fields {
            let raw = o
                .and_then(|o| {
                    o.get(*name).or_else(|| {
                        o.iter().find(|(k, _)| crate::bundle::gofields::go_fold_eq(k, name)).map(|(_, v)| v)
                    })
                })
                .cloned()
                .unwrap_or(Value::Null);
            let value = convert(&raw);
            if matches!(zero, Zero::Omit) && is_empty(&value) {
                continue;
            }
            out.insert(name.to_string(), value);
        }
        Value::Object(out)
    }

    fn same(v: &Value) -> Value {
        v.clone()
    }

    fn string(v: &Value) -> Value {
        Value::String(v.as_str().unwrap_or_default().to_string())
    }

    fn list(v: &Value, item: fn(&Value) -> Value) -> Value {
        match v.as_array() {
            Some(a) => Value::Array(a.iter().map(item).collect()),
            None => Value::Null,
        }
    }

    fn descriptor(v: &Value) -> Value {
        strukt(
            v,
            &[
                ("path", Zero::Keep, string),
                ("displayName", Zero::Omit, string),
                ("description", Zero::Omit, string),
                ("x-descriptors", Zero::Omit, same),
                ("value", Zero::Omit, same),
            ],
        )
    }

    fn action(v: &Value) -> Value {
        strukt(
            v,
            &[
                ("path", Zero::Keep, string),
                ("displayName", Zero::Omit, string),
                ("description", Zero::Omit, string),
                ("x-descriptors", Zero::Omit, same),
            ],
        )
    }

    fn resource(v: &Value) -> Value {
        strukt(v, &[("name", Zero::Keep, string), ("kind", Zero::Keep, string), ("version", Zero::Keep, string)])
    }

    /// The fields `CRDDescription` and `APIServiceDescription` share, after their own.
    fn described() -> [Field; 6] {
        [
            ("displayName", Zero::Omit, string),
            ("description", Zero::Omit, string),
            ("resources", Zero::Omit, |v| list(v, resource)),
            ("statusDescriptors", Zero::Omit, |v| list(v, descriptor)),
            ("specDescriptors", Zero::Omit, |v| list(v, descriptor)),
            ("actionDescriptors", Zero::Omit, |v| list(v, action)),
        ]
    }

    fn crd_description(v: &Value) -> Value {
        let mut fields: Vec<Field> =
            vec![("name", Zero::Keep, string), ("version", Zero::Keep, string), ("kind", Zero::Keep, string)];
        fields.extend(described());
        strukt(v, &fields)
    }

    fn api_service_description(v: &Value) -> Value {
        let mut fields: Vec<Field> = vec![
            ("name", Zero::Keep, string),
            ("group", Zero::Keep, string),
            ("version", Zero::Keep, string),
            ("kind", Zero::Keep, string),
            ("deploymentName", Zero::Omit, string),
            ("containerPort", Zero::Omit, same),
        ];
        fields.extend(described());
        strukt(v, &fields)
    }

    fn owned_required(item: fn(&Value) -> Value) -> impl Fn(&Value) -> Value {
        move |v| {
            let mut out = Map::new();
            for k in ["owned", "required"] {
                let l = list(v.get(k).unwrap_or(&Value::Null), item);
                if !is_empty(&l) {
                    out.insert(k.into(), l);
                }
            }
            Value::Object(out)
        }
    }

    fn app_link(v: &Value) -> Value {
        strukt(v, &[("name", Zero::Omit, string), ("url", Zero::Omit, string)])
    }

    fn maintainer(v: &Value) -> Value {
        strukt(v, &[("name", Zero::Omit, string), ("email", Zero::Omit, string)])
    }

    fn install_mode(v: &Value) -> Value {
        strukt(v, &[("type", Zero::Keep, string), ("supported", Zero::Keep, |v| json!(v.as_bool().unwrap_or(false)))])
    }

    /// The CSV of bundle `b` of package `pkg` from its one `olm.csv.metadata` value `meta`.
    pub(super) fn from_metadata(pkg: &IndexedPackage, b: &IndexedBundle, meta: &Value) -> Value {
        let get = |k: &str| {
            meta.as_object()
                .and_then(|m| {
                    m.get(k).or_else(|| {
                        m.iter().find(|(key, _)| crate::bundle::gofields::go_fold_eq(key, k)).map(|(_, v)| v)
                    })
                })
                .cloned()
                .unwrap_or(Value::Null)
        };
        let mut metadata = Map::new();
        metadata.insert("name".into(), json!(b.name));
        for k in ["labels", "annotations"] {
            let m = map(&get(k));
            if !is_empty(&m) {
                metadata.insert(k.into(), m);
            }
        }
        let description = get("description").as_str().filter(|d| !d.is_empty()).map(str::to_string);
        let description = description.or_else(|| pkg.description.clone()).unwrap_or_default();
        let icon = pkg.icon.as_ref().map(|i| json!([{"base64data": i.base64data, "mediatype": i.mediatype}]));
        let related: Vec<Value> = b.related_images.iter().map(|r| json!({"name": r.name, "image": r.image})).collect();
        let mut spec = Map::new();
        spec.insert("install".into(), json!({"strategy": "deployment", "spec": {"deployments": null}}));
        spec.insert("version".into(), json!(b.version.to_string()));
        let optional = [
            ("maturity", string(&get("maturity"))),
            ("customresourcedefinitions", owned_required(crd_description)(&get("crdDescriptions"))),
            ("apiservicedefinitions", owned_required(api_service_description)(&get("apiServiceDefinitions"))),
            ("nativeAPIs", get("nativeAPIs")),
            ("minKubeVersion", string(&get("minKubeVersion"))),
        ];
        for (k, v) in optional {
            // The two description structs are not pointers: `omitempty` keeps them as `{}`.
            if !is_empty(&v) || k.ends_with("definitions") {
                spec.insert(k.into(), v);
            }
        }
        spec.insert("displayName".into(), string(&get("displayName")));
        let rest = [
            ("description", json!(description)),
            ("keywords", get("keywords")),
            ("maintainers", list(&get("maintainers"), maintainer)),
            ("provider", app_link(&get("provider"))),
            ("links", list(&get("links"), app_link)),
            ("icon", icon.unwrap_or(Value::Null)),
            ("installModes", list(&get("installModes"), install_mode)),
        ];
        for (k, v) in rest {
            // `provider` is a struct: `omitempty` keeps it.
            if !is_empty(&v) || k == "provider" {
                spec.insert(k.into(), v);
            }
        }
        spec.insert("cleanup".into(), json!({"enabled": false}));
        if !related.is_empty() {
            spec.insert("relatedImages".into(), Value::Array(related));
        }
        json!({
            "kind": "ClusterServiceVersion",
            "apiVersion": "operators.coreos.com/v1alpha1",
            "metadata": Value::Object(metadata),
            "spec": Value::Object(spec),
            "status": {"cleanup": {}},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::validated::IndexOptions;
    use base64::Engine;

    fn csv_object() -> String {
        let csv = r#"{"apiVersion":"operators.coreos.com/v1alpha1","kind":"ClusterServiceVersion","metadata":{"name":"dep.v1.0.0"},"spec":{"version":"1.0.0","description":"a <b> & c"}}"#;
        base64::engine::general_purpose::STANDARD.encode(csv)
    }

    fn catalog() -> ValidatedCatalog {
        let text = format!(
            r#"
schema: olm.package
name: etcd
defaultChannel: stable
---
schema: olm.channel
package: etcd
name: stable
entries:
- {{name: etcd.v1.0.0}}
- {{name: etcd.v1.1.0, replaces: etcd.v1.0.0, skips: [etcd.v0.9.0]}}
- {{name: etcd.v1.2.0, replaces: etcd.v1.1.0, skips: [etcd.v1.0.0], skipRange: "<1.2.0"}}
---
schema: olm.channel
package: etcd
name: alpha
entries:
- {{name: etcd.v1.2.0}}
---
schema: olm.bundle
package: etcd
name: etcd.v1.0.0
image: x/etcd:1.0.0
properties:
- {{type: olm.package, value: {{packageName: etcd, version: 1.0.0}}}}
- {{type: olm.gvk, value: {{kind: EtcdCluster, group: etcd.database.coreos.com, version: v1beta2}}}}
---
schema: olm.bundle
package: etcd
name: etcd.v1.1.0
image: x/etcd:1.1.0
properties:
- {{type: olm.package, value: {{packageName: etcd, version: 1.1.0}}}}
- {{type: olm.gvk, value: {{kind: EtcdCluster, group: etcd.database.coreos.com, version: v1beta2}}}}
---
schema: olm.bundle
package: etcd
name: etcd.v1.2.0
image: x/etcd:1.2.0
properties:
- {{type: olm.package, value: {{packageName: etcd, version: 1.2.0}}}}
- {{type: olm.gvk, value: {{kind: EtcdCluster, group: etcd.database.coreos.com, version: v1beta2}}}}
- {{type: olm.gvk.required, value: {{version: v1, kind: Dep, group: dep.io}}}}
- {{type: olm.package.required, value: {{packageName: dep, versionRange: ">=1.0.0"}}}}
---
schema: olm.package
name: dep
defaultChannel: stable
---
schema: olm.channel
package: dep
name: stable
entries:
- {{name: dep.v1.0.0}}
---
schema: olm.bundle
package: dep
name: dep.v1.0.0
image: ""
properties:
- {{type: olm.package, value: {{packageName: dep, version: 1.0.0}}}}
- {{type: olm.gvk, value: {{group: dep.io, kind: Dep, version: v1}}}}
- {{type: olm.bundle.object, value: {{data: {data}}}}}
---
schema: olm.deprecations
package: etcd
entries:
- {{reference: {{schema: olm.channel, name: alpha}}, message: use stable}}
- {{reference: {{schema: olm.bundle, name: etcd.v1.0.0}}, message: old}}
"#,
            data = csv_object()
        );
        let cfg = crate::catalog::parse::parse_bytes("c.yaml", text.as_bytes()).expect("parses");
        ValidatedCatalog::with_options(cfg, IndexOptions { keep_bundle_objects: true, ..Default::default() })
            .expect("valid")
    }

    fn entry(channel: &str, bundle: &str, replaces: &str) -> ChannelEntry {
        ChannelEntry {
            package_name: "etcd".into(),
            channel_name: channel.into(),
            bundle_name: bundle.into(),
            replaces: replaces.into(),
        }
    }

    const ETCD: GvkQuery<'static> =
        GvkQuery { group: "etcd.database.coreos.com", version: "v1beta2", kind: "EtcdCluster" };

    #[test]
    fn packages_and_their_channels() {
        let c = catalog();
        assert_eq!(list_packages(&c).iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["dep", "etcd"]);
        let p = get_package(&c, "etcd").unwrap();
        assert_eq!(p.default_channel_name, "stable");
        let channels: Vec<(&str, &str, Option<&str>)> = p
            .channels
            .iter()
            .map(|c| (c.name.as_str(), c.csv_name.as_str(), c.deprecation.as_ref().map(|d| d.message.as_str())))
            .collect();
        assert_eq!(channels, [("alpha", "etcd.v1.2.0", Some("use stable")), ("stable", "etcd.v1.2.0", None)]);
        assert_eq!(get_package(&c, "nope").unwrap_err().0, r#"package "nope" not found"#);
    }

    #[test]
    fn a_bundle_as_opm_serve_gives_it() {
        let c = catalog();
        let b = get_bundle_for_channel(&c, "etcd", "stable").unwrap();
        assert_eq!(
            (b.csv_name.as_str(), b.channel_name.as_str(), b.version.as_str()),
            ("etcd.v1.2.0", "stable", "1.2.0")
        );
        assert_eq!((b.replaces.as_str(), b.skips.len()), ("", 0), "GetBundleForChannel trims the edges");
        assert_eq!(b.skip_range, "<1.2.0");
        assert_eq!(b.bundle_path, "x/etcd:1.2.0");
        assert_eq!((b.csv_json.as_str(), b.object.len()), ("", 0), "an image bundle has no objects in the catalog");
        assert_eq!(b.provided_apis[0].kind, "EtcdCluster");
        assert_eq!(b.required_apis[0].group, "dep.io");
        let deps: Vec<(&str, &str)> = b.dependencies.iter().map(|d| (d.r#type.as_str(), d.value.as_str())).collect();
        assert_eq!(
            deps,
            [
                ("olm.gvk", r#"{"group":"dep.io","kind":"Dep","version":"v1"}"#),
                ("olm.package", r#"{"packageName":"dep","version":">=1.0.0"}"#)
            ],
            "keys sorted as the blob went through a Go map; the package dependency as property.Package"
        );
        assert_eq!(
            b.properties[1].value, r#"{"group":"etcd.database.coreos.com","kind":"EtcdCluster","version":"v1beta2"}"#,
            "compact, keys sorted, no HTML escaping"
        );
        let old = get_bundle(&c, "etcd", "stable", "etcd.v1.0.0").unwrap();
        assert_eq!(old.deprecation.map(|d| d.message), Some("old".into()));
        for (args, message) in [
            (("nope", "stable", "x"), r#"package "nope" not found"#),
            (("etcd", "beta", "x"), r#"package "etcd", channel "beta" not found"#),
            (("etcd", "stable", "x"), r#"package "etcd", channel "stable", bundle "x" not found"#),
        ] {
            assert_eq!(get_bundle(&c, args.0, args.1, args.2).unwrap_err().0, message);
        }
    }

    #[test]
    fn an_imageless_bundle_carries_its_objects() {
        let c = catalog();
        let b = get_bundle(&c, "dep", "stable", "dep.v1.0.0").unwrap();
        assert_eq!(b.object.len(), 1);
        assert_eq!(b.csv_json, b.object[0]);
        assert_eq!(
            b.csv_json.as_bytes(),
            base64::engine::general_purpose::STANDARD.decode(csv_object()).unwrap(),
            "JSON data is served as written"
        );
        assert!(b.properties.iter().all(|p| p.r#type != "olm.bundle.object"), "objects are not properties");
        let listed = list_bundles(&c);
        assert_eq!(listed.len(), 5, "one per channel entry");
        let dep = listed.iter().find(|b| b.csv_name == "dep.v1.0.0").unwrap();
        assert_eq!(dep.object, b.object, "ListBundles keeps the objects of a bundle without an image");
        let v11 = listed.iter().find(|b| b.csv_name == "etcd.v1.1.0").unwrap();
        assert_eq!((v11.replaces.as_str(), v11.skips.clone()), ("etcd.v1.0.0", vec!["etcd.v0.9.0".to_string()]));
    }

    #[test]
    fn replacements() {
        let c = catalog();
        assert_eq!(
            get_channel_entries_that_replace(&c, "etcd.v1.0.0").unwrap(),
            [entry("stable", "etcd.v1.1.0", "etcd.v1.0.0"), entry("stable", "etcd.v1.2.0", "etcd.v1.1.0")]
        );
        assert_eq!(
            get_channel_entries_that_replace(&c, "nope").unwrap_err().0,
            "no channel entries found that replace nope"
        );
        let b = get_bundle_that_replaces(&c, "etcd.v1.1.0", "etcd", "stable").unwrap();
        assert_eq!((b.csv_name.as_str(), b.replaces.as_str()), ("etcd.v1.2.0", ""));
        assert_eq!(get_bundle_that_replaces(&c, "x", "nope", "stable").unwrap_err().0, "package nope not found");
        assert_eq!(
            get_bundle_that_replaces(&c, "etcd.v1.2.0", "etcd", "stable").unwrap_err().0,
            r#"no entry found for package "etcd", channel "stable""#
        );
    }

    #[test]
    fn providers() {
        let c = catalog();
        assert_eq!(
            get_channel_entries_that_provide(&c, ETCD).unwrap(),
            [
                entry("alpha", "etcd.v1.2.0", ""),
                entry("stable", "etcd.v1.0.0", ""),
                entry("stable", "etcd.v1.1.0", "etcd.v1.0.0"),
                entry("stable", "etcd.v1.1.0", "etcd.v0.9.0"),
                entry("stable", "etcd.v1.2.0", "etcd.v1.1.0"),
                entry("stable", "etcd.v1.2.0", "etcd.v1.0.0"),
            ]
        );
        assert_eq!(
            get_latest_channel_entries_that_provide(&c, ETCD).unwrap(),
            [
                entry("alpha", "etcd.v1.2.0", ""),
                entry("stable", "etcd.v1.2.0", "etcd.v1.1.0"),
                entry("stable", "etcd.v1.2.0", "etcd.v1.0.0"),
            ]
        );
        let b = get_default_bundle_that_provides(&c, ETCD).unwrap();
        assert_eq!((b.csv_name.as_str(), b.channel_name.as_str()), ("etcd.v1.2.0", "stable"));
        let none = GvkQuery { group: "x", version: "v1", kind: "X" };
        assert_eq!(
            get_channel_entries_that_provide(&c, none).unwrap_err().0,
            r#"no channel entries found that provide group:"x" version:"v1" kind:"X""#
        );
        assert!(get_default_bundle_that_provides(&c, none).is_err());
    }
}
