//! Rendering a registry+v1 bundle into an `olm.bundle` blob, as `opm render` does.
//!
//! Source of the semantics (operator-registry at the commit in `olm-v0.md` §0):
//! `pkg/registry/parse.go` (`derivedProperties`), `pkg/registry/registry_to_model.go`
//! (`ObjectsAndPropertiesFromBundle`) and `alpha/action/render.go` (`bundleToDeclcfg`,
//! `getRelatedImages`, `moveBundleObjectsToEndOfPropertySlices`), plus
//! `alpha/action/migrations/000_bundle_object_to_csv_metadata.go` for [`Migration::CsvMetadata`].
//!
//! The properties are, before sorting:
//! - one `olm.bundle.object` per manifest object (`{data: base64(JSON of the object)}`, the JSON
//!   written as Go's `json.Marshal` writes it: keys sorted, `<>&` escaped);
//! - `olm.package` (`{packageName, version[, release]}`: the package annotation and CSV
//!   `spec.version`/`spec.release`; an `olm.package` from `properties.yaml` or the CSV's
//!   `olm.properties` annotation that comes later replaces it, as in opm);
//! - `olm.gvk` (`{group, kind, version}`) per served version of every CRD in the bundle, owned
//!   APIService, and `olm.gvk` entry of `properties.yaml` / `olm.properties`, deduplicated;
//! - `olm.gvk.required` per `olm.gvk` entry of `dependencies.yaml` and per CSV
//!   `customresourcedefinitions.required` / `apiservicedefinitions.required`, deduplicated;
//! - `olm.package.required` (`{packageName, versionRange}`) per `olm.package` entry of
//!   `dependencies.yaml` (its `version` becomes `versionRange`);
//! - every other entry of `properties.yaml`, the `olm.properties` annotation and
//!   `dependencies.yaml` (`olm.constraint`, `olm.label`, …) as written.
//!
//! They are then sorted by type and by the Go JSON bytes of the value, and `olm.bundle.object` /
//! `olm.csv.metadata` moved to the end (keeping their order). `relatedImages` are the CSV's
//! `spec.relatedImages`, then the bundle image, then every container and init container image of
//! the install strategy's deployments not already listed, sorted by image (stable).
//!
//! Deliberate differences from opm, all invisible once the blob is parsed:
//! - YAML is read as YAML 1.2 (serde_norway): unquoted `yes`/`no`/`on`/`off` stay strings, where
//!   opm's YAML 1.1 reader makes them booleans. Quote such values in manifests.
//! - A property value from the CSV's `olm.properties` annotation sorts by its compact JSON; opm
//!   sorts by the bytes as written (whitespace included), which only matters for two such
//!   properties of one type that differ in spacing.
//! - opm writes `relatedImages[].name: ""` for unnamed images; [`model::RelatedImage`] omits an
//!   empty name when serialized directly (the catalog writer, `catalog::parse::to_stream`,
//!   writes it as opm does).
//! - When a bundle directory is rendered without an image, [`render_bundle_dir`] fills in
//!   [`placeholder_image`] (opm leaves `image` empty unless `--alpha-image-ref-template` is given);
//!   [`render_bundle`] with `image = ""` gives opm's empty image.

use std::collections::BTreeSet;
use std::path::Path;

use base64::Engine;
use serde_json::{Map, Value, json};

use super::finding::Finding;
use super::gojson::{self, KeyOrder};
use super::{Bundle, BundleError, CsvView};
use crate::catalog::model::{self, Property, RelatedImage};
use crate::catalog::placeholder::placeholder_image;
use crate::catalog::property;

/// Options of a render (`opm render` flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Migration {
    /// opm's default (`--migrate-level none`): an `olm.bundle.object` per manifest.
    #[default]
    None,
    /// `--migrate-level bundle-object-to-csv-metadata`: replace the `olm.bundle.object`
    /// properties by one `olm.csv.metadata` (only when the bundle has an image), as the
    /// community-operators pipeline publishes catalogs.
    CsvMetadata,
}

/// What `catalog add` needs besides the blob: the annotations and the CSV's upgrade edges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderInfo {
    /// Package name (bundle annotation).
    pub package: String,
    /// Bundle name (CSV `metadata.name`).
    pub name: String,
    /// CSV `spec.version` ("" when absent).
    pub version: String,
    /// Channels from the annotations, in order.
    pub channels: Vec<String>,
    /// Default channel annotation, if any.
    pub default_channel: Option<String>,
    /// CSV `spec.replaces`.
    pub replaces: Option<String>,
    /// CSV `spec.skips`.
    pub skips: Vec<String>,
    /// CSV `olm.skipRange` annotation.
    pub skip_range: Option<String>,
}

/// Why a bundle could not be rendered. Names the bundle (CSV name) or file and the field.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The bundle directory could not be read.
    #[error(transparent)]
    Load(#[from] BundleError),
    /// A field or property has a shape opm also rejects.
    #[error("bundle {bundle}: {file}: {field}: {message}")]
    Field {
        /// Bundle (CSV) name.
        bundle: String,
        /// File (relative to the bundle directory) holding the field.
        file: String,
        /// Field or property, e.g. `spec.version`, `properties[2] (olm.gvk)`.
        field: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// [`crate::bundle::validate()`] found errors: the bundle is neither rendered nor added.
    #[error("bundle {bundle} ({dir}) is invalid: {}; nothing was rendered{}", count_errors(.errors.len()), list_findings(.errors))]
    Invalid {
        /// Bundle (CSV) name.
        bundle: String,
        /// The bundle directory as given.
        dir: String,
        /// The error findings, in [`crate::bundle::validate()`]'s order.
        errors: Vec<Finding>,
    },
}

fn count_errors(n: usize) -> String {
    if n == 1 { "1 error".to_string() } else { format!("{n} errors") }
}

fn list_findings(findings: &[Finding]) -> String {
    findings.iter().map(|f| format!("\n  {f}")).collect()
}

/// Renders a loaded bundle as `opm render` renders the bundle image `image` (opm's default
/// migration level). `image = ""` gives what opm gives for a bundle directory.
///
/// # Errors
/// [`RenderError::Field`] when opm would fail too: CSV `spec.version` not a string, an
/// `olm.gvk` / `olm.package` property or dependency whose value does not decode, CSV
/// `spec.relatedImages` not a list of `{name, image}`, a required CRD name without a dot.
pub fn render_bundle(bundle: &Bundle, image: &str) -> Result<model::Bundle, RenderError> {
    render_bundle_with(bundle, image, Migration::None)
}

/// [`render_bundle`] with an explicit [`Migration`].
///
/// # Errors
/// As [`render_bundle`]; with [`Migration::CsvMetadata`] also a CSV field whose type does not
/// fit operator-framework/api's ClusterServiceVersion (opm's migration decodes it typed).
pub fn render_bundle_with(bundle: &Bundle, image: &str, migration: Migration) -> Result<model::Bundle, RenderError> {
    let csv = bundle.csv();
    let r = Render { bundle, name: csv.name().to_string(), csv };
    let version = r.package_version()?;
    let mut collected = Collected::default();
    r.collect_properties(r.registry_props(&version), &mut collected)?;
    r.collect_dependencies(&mut collected)?;
    r.collect_apis(&mut collected)?;
    let properties = r.properties(collected, &version, image, migration)?;
    let related = r.related_images(image)?;
    Ok(model::Bundle {
        schema: model::SCHEMA_BUNDLE.to_string(),
        package: bundle.annotations.package.clone(),
        name: r.name,
        image: image.to_string(),
        related_images: related,
        properties: properties.into_iter().map(|p| Property { type_: p.type_, value: p.value }).collect(),
        extra: Default::default(),
    })
}

/// One render of a loaded bundle ([`render_bundle_with`]): the bundle, its CSV and the CSV's
/// name, which every error names.
struct Render<'a> {
    bundle: &'a Bundle,
    csv: CsvView<'a>,
    name: String,
}

/// The CSV's `spec.version` and `spec.release` as the `olm.package` property writes them
/// (empty when absent).
struct PackageVersion {
    version: String,
    release: String,
}

/// `(group, kind, version)` of an API, in the order opm sorts `olm.gvk` properties by.
type GroupKindVersion = (String, String, String);

/// What step 2 of a render (`ObjectsAndPropertiesFromBundle`) gathers before the properties are
/// assembled.
#[derive(Default)]
struct Collected {
    /// APIs provided (`olm.gvk`).
    provided: BTreeSet<GroupKindVersion>,
    /// APIs required (`olm.gvk.required`).
    required: BTreeSet<GroupKindVersion>,
    /// The last `olm.package` property, when one was given.
    package: Option<GoProp>,
    /// `olm.package.required`, from `dependencies.yaml`.
    package_required: Vec<GoProp>,
    /// Every other property, as written.
    others: Vec<GoProp>,
}

impl Render<'_> {
    fn field_err(&self, file: &Path, field: &str, message: String) -> RenderError {
        RenderError::Field {
            bundle: self.name.clone(),
            file: file.display().to_string(),
            field: field.to_string(),
            message,
        }
    }

    /// `spec.version` (a string) and `spec.release` (a string or a number).
    fn package_version(&self) -> Result<PackageVersion, RenderError> {
        let (csv, csv_path) = (&self.csv, self.csv.path());
        let version = match csv.value().pointer("/spec/version") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(self.field_err(
                    csv_path,
                    "spec.version",
                    format!("must be a string, found {other}; quote the version, e.g. \"1.0.0\""),
                ));
            }
        };
        let release = match csv.value().pointer("/spec/release") {
            None | Some(Value::Null) | Some(Value::String(_)) | Some(Value::Number(_)) => {
                csv.release().unwrap_or_default()
            }
            Some(other) => {
                return Err(self.field_err(
                    csv_path,
                    "spec.release",
                    format!("must be a string or number, found {other}"),
                ));
            }
        };
        Ok(PackageVersion { version, release })
    }

    /// Step 1: `bundle.Properties` as `pkg/registry/parse.go` builds them.
    fn registry_props(&self, version: &PackageVersion) -> Vec<GoProp> {
        let (bundle, csv_path) = (self.bundle, self.csv.path());
        let mut registry_props: Vec<GoProp> = Vec::new();
        let props_file = bundle.properties_file.as_deref().unwrap_or(Path::new("metadata/properties.yaml"));
        for (i, p) in bundle.properties.iter().enumerate() {
            registry_props
                .push(GoProp::raw_yaml(&p.type_, p.value.clone()).from(props_file, format!("properties[{i}]")));
        }
        let mut derived: Vec<GoProp> = Vec::new();
        if let Some(Ok(list)) = self.csv.annotation_properties() {
            for (i, p) in list.into_iter().enumerate() {
                derived.push(
                    GoProp::raw_json(&p.type_, p.value)
                        .from(csv_path, format!("metadata.annotations[olm.properties][{i}]")),
                );
            }
        }
        if !bundle.annotations.package.is_empty() {
            derived.insert(0, package_prop(&bundle.annotations.package, &version.version, &version.release));
        }
        for api in bundle.provided_apis() {
            derived.push(GoProp::built(property::GVK, gvk_value(&api.group, &api.kind, &api.version)));
        }
        registry_props.extend(dedup(derived));
        dedup(registry_props)
    }

    /// Step 2, the registry properties: `olm.gvk` provided, the last `olm.package`, the others.
    fn collect_properties(&self, registry_props: Vec<GoProp>, out: &mut Collected) -> Result<(), RenderError> {
        for p in registry_props {
            let (file, field) = match &p.origin {
                Some((f, field)) => (f.as_path(), format!("{field}.value")),
                None => (self.csv.path(), String::from("(derived property)")),
            };
            match p.type_.as_str() {
                property::GVK => {
                    let (g, v, k) =
                        decode_gvk(&p.value).ok_or_else(|| self.field_err(file, &field, expect_gvk(&p.value)))?;
                    out.provided.insert((g, k, v));
                }
                property::PACKAGE => {
                    let (n, v, r) = decode_package(&p.value).ok_or_else(|| {
                        self.field_err(
                            file,
                            &field,
                            format!("olm.package value must be {{packageName, version}} strings, found {}", p.value),
                        )
                    })?;
                    out.package = Some(package_prop(&n, &v, &r));
                }
                _ => out.others.push(p),
            }
        }
        Ok(())
    }

    /// Step 2, `dependencies.yaml`: `olm.gvk` required, `olm.package` as `olm.package.required`,
    /// the others as written.
    fn collect_dependencies(&self, out: &mut Collected) -> Result<(), RenderError> {
        let bundle = self.bundle;
        let deps_file = bundle.dependencies_file.as_deref().unwrap_or(Path::new("metadata/dependencies.yaml"));
        for (i, d) in bundle.dependencies.iter().enumerate() {
            match d.type_.as_str() {
                property::GVK => {
                    let (g, v, k) = decode_gvk(&d.value).ok_or_else(|| {
                        self.field_err(deps_file, &format!("dependencies[{i}].value"), expect_gvk(&d.value))
                    })?;
                    out.required.insert((g, k, v));
                }
                property::PACKAGE => {
                    let (n, v, _) = decode_package(&d.value).ok_or_else(|| {
                        self.field_err(
                            deps_file,
                            &format!("dependencies[{i}].value"),
                            format!(
                                "olm.package value must be {{packageName, version}} with version a semver range, found {}",
                                d.value
                            ),
                        )
                    })?;
                    out.package_required
                        .push(GoProp::built(property::PACKAGE_REQUIRED, json!({"packageName": n, "versionRange": v})));
                }
                _ => out.others.push(GoProp::raw_yaml(&d.type_, d.value.clone())),
            }
        }
        Ok(())
    }

    /// Step 2, the bundle's own APIs: provided by its CRDs and CSV, required by its CSV (a
    /// required CRD name must be `<plural>.<group>`).
    fn collect_apis(&self, out: &mut Collected) -> Result<(), RenderError> {
        for api in self.bundle.provided_apis() {
            out.provided.insert((api.group, api.kind, api.version));
        }
        for (i, d) in self.csv.required_crds().iter().enumerate() {
            if d.api_key().is_none() {
                return Err(self.field_err(
                    self.csv.path(),
                    &format!("spec.customresourcedefinitions.required[{i}].name"),
                    format!("couldn't parse plural.group from crd name: {:?}; use <plural>.<group>", d.name),
                ));
            }
        }
        for api in self.bundle.required_apis() {
            out.required.insert((api.group, api.kind, api.version));
        }
        Ok(())
    }

    /// The blob's properties: one `olm.bundle.object` per manifest, the package, the APIs and
    /// the rest, sorted as opm sorts them, the objects last; with [`Migration::CsvMetadata`] and
    /// an image, `olm.csv.metadata` instead of the objects.
    fn properties(
        &self,
        collected: Collected,
        version: &PackageVersion,
        image: &str,
        migration: Migration,
    ) -> Result<Vec<GoProp>, RenderError> {
        let bundle = self.bundle;
        let mut props: Vec<GoProp> = Vec::new();
        for obj in bundle.objects_as_written() {
            let data = gojson::to_string(obj, KeyOrder::Sorted, true);
            let b64 = base64::engine::general_purpose::STANDARD.encode(data.as_bytes());
            props.push(GoProp::built(property::BUNDLE_OBJECT, json!({ "data": b64 })));
        }
        props.push(
            collected
                .package
                .unwrap_or_else(|| package_prop(&bundle.annotations.package, &version.version, &version.release)),
        );
        for (g, k, v) in collected.provided {
            props.push(GoProp::built(property::GVK, gvk_value(&g, &k, &v)));
        }
        for (g, k, v) in collected.required {
            props.push(GoProp::built(property::GVK_REQUIRED, gvk_value(&g, &k, &v)));
        }
        props.extend(collected.package_required);
        props.extend(collected.others);
        props.sort_by(|a, b| a.type_.cmp(&b.type_).then_with(|| a.bytes.as_bytes().cmp(b.bytes.as_bytes())));
        let (mut properties, tail): (Vec<GoProp>, Vec<GoProp>) =
            props.into_iter().partition(|p| p.type_ != property::BUNDLE_OBJECT && p.type_ != property::CSV_METADATA);
        let has_csv_metadata = tail.iter().any(|p| p.type_ == property::CSV_METADATA);
        if migration == Migration::CsvMetadata && !image.is_empty() && !has_csv_metadata {
            let meta = csv_metadata(self.csv.value())
                .map_err(|FieldError { field, message }| self.field_err(self.csv.path(), &field, message))?;
            properties.extend(tail.into_iter().filter(|p| p.type_ != property::BUNDLE_OBJECT));
            properties.push(GoProp::built(property::CSV_METADATA, meta));
        } else {
            properties.extend(tail);
        }
        Ok(properties)
    }

    /// Step 3: relatedImages (`getRelatedImages` and the sort in `Render.Run`): the CSV's, the
    /// bundle image, the operator images, sorted by image.
    fn related_images(&self, image: &str) -> Result<Vec<RelatedImage>, RenderError> {
        let csv_path = self.csv.path();
        let mut related: Vec<RelatedImage> = Vec::new();
        match self.csv.value().pointer("/spec/relatedImages") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let get = |k: &str| match item.get(k) {
                        None | Some(Value::Null) => Ok(String::new()),
                        Some(Value::String(s)) => Ok(s.clone()),
                        Some(other) => Err(self.field_err(
                            csv_path,
                            &format!("spec.relatedImages[{i}].{k}"),
                            format!("must be a string, found {other}"),
                        )),
                    };
                    if !item.is_object() {
                        return Err(self.field_err(
                            csv_path,
                            &format!("spec.relatedImages[{i}]"),
                            "must be a mapping {name, image}".into(),
                        ));
                    }
                    related.push(RelatedImage { name: get("name")?, image: get("image")? });
                }
            }
            Some(other) => {
                return Err(self.field_err(
                    csv_path,
                    "spec.relatedImages",
                    format!("must be a list of {{name, image}}, found {other}"),
                ));
            }
        }
        let mut seen: BTreeSet<String> = related.iter().map(|r| r.image.clone()).collect();
        if !image.is_empty() && !seen.contains(image) {
            related.push(RelatedImage { name: String::new(), image: image.to_string() });
        }
        for img in self.csv.operator_images() {
            if seen.insert(img.to_string()) {
                related.push(RelatedImage { name: String::new(), image: img.to_string() });
            }
        }
        related.sort_by(|a, b| a.image.cmp(&b.image));
        Ok(related)
    }
}

/// Loads the bundle in `dir` and renders it (opm's default migration level). With `image = None`
/// the blob gets [`placeholder_image`]`(package, version)`.
///
/// # Errors
/// [`RenderError::Load`] when the directory is not a readable bundle, else as [`render_bundle`].
pub fn render_bundle_dir(dir: &Path, image: Option<&str>) -> Result<(model::Bundle, RenderInfo), RenderError> {
    let bundle = Bundle::load(dir)?;
    let info = render_info(&bundle);
    let image = match image {
        Some(i) => i.to_string(),
        None => placeholder_image(&info.package, &info.version),
    };
    Ok((render_bundle(&bundle, &image)?, info))
}

/// The [`RenderInfo`] of a loaded bundle.
pub fn render_info(bundle: &Bundle) -> RenderInfo {
    let csv = bundle.csv();
    RenderInfo {
        package: bundle.annotations.package.clone(),
        name: csv.name().to_string(),
        version: csv.version().unwrap_or_default().to_string(),
        channels: bundle.annotations.channels.clone(),
        default_channel: bundle.annotations.default_channel.clone(),
        replaces: csv.replaces().map(str::to_string),
        skips: csv.skips().into_iter().map(str::to_string).collect(),
        skip_range: csv.skip_range().map(str::to_string),
    }
}

/// A property with the Go JSON bytes opm sorts it by.
struct GoProp {
    type_: String,
    value: Value,
    bytes: String,
    /// File and field the property was written in, for errors; `None` when derived.
    origin: Option<(std::path::PathBuf, String)>,
}

impl GoProp {
    fn from(mut self, file: &Path, field: String) -> GoProp {
        self.origin = Some((file.to_path_buf(), field));
        self
    }
    /// Built from a Go struct (`property.MustBuild*`): field order as given, no HTML escaping.
    fn built(type_: &str, value: Value) -> GoProp {
        let bytes = gojson::to_string(&value, KeyOrder::AsIs, false);
        GoProp { type_: type_.to_string(), value, bytes, origin: None }
    }
    /// A raw value decoded from YAML by Go (`yaml.YAMLToJSON` + `json.Marshal`): keys sorted, HTML escaped.
    fn raw_yaml(type_: &str, value: Value) -> GoProp {
        let bytes = gojson::to_string(&value, KeyOrder::Sorted, true);
        GoProp { type_: type_.to_string(), value, bytes, origin: None }
    }
    /// A raw value from a JSON string (`json.RawMessage`): as written.
    fn raw_json(type_: &str, value: Value) -> GoProp {
        let bytes = gojson::to_string(&value, KeyOrder::AsIs, false);
        GoProp { type_: type_.to_string(), value, bytes, origin: None }
    }
}

/// operator-registry's `propertySet`: first occurrence of each (type, value bytes) wins.
fn dedup(props: Vec<GoProp>) -> Vec<GoProp> {
    let mut seen = std::collections::HashSet::new();
    props.into_iter().filter(|p| seen.insert((p.type_.clone(), p.bytes.clone()))).collect()
}

fn package_prop(name: &str, version: &str, release: &str) -> GoProp {
    let mut m = Map::new();
    m.insert("packageName".into(), Value::String(name.into()));
    m.insert("version".into(), Value::String(version.into()));
    if !release.is_empty() {
        m.insert("release".into(), Value::String(release.into()));
    }
    GoProp::built(property::PACKAGE, Value::Object(m))
}

/// `{group, kind, version}` in operator-registry's `property.GVK` field order.
fn gvk_value(group: &str, kind: &str, version: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// Decodes `{group, version, kind}` as Go's `json.Unmarshal` into `property.GVK` would: missing
/// fields are empty, non-string fields fail.
fn decode_gvk(v: &Value) -> Option<(String, String, String)> {
    let Value::Object(m) = v else { return None };
    let s = |k: &str| match m.get(k) {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => None,
    };
    Some((s("group")?, s("version")?, s("kind")?))
}

fn expect_gvk(v: &Value) -> String {
    format!("olm.gvk value must be {{group, version, kind}} strings, found {v}")
}

/// Decodes `{packageName, version, release?}` (Go `property.Package`).
fn decode_package(v: &Value) -> Option<(String, String, String)> {
    let Value::Object(m) = v else { return None };
    let s = |k: &str| match m.get(k) {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => None,
    };
    Some((s("packageName")?, s("version")?, s("release")?))
}

/// A CSV field whose type does not fit operator-framework/api's ClusterServiceVersion: the
/// field's path (e.g. `spec.installModes[0].supported`) and what is wrong with it.
struct FieldError {
    field: String,
    message: String,
}

type FieldResult<T> = Result<T, FieldError>;

/// The `olm.csv.metadata` value (operator-registry `property.MustBuildCSVMetadata`) with
/// operator-framework/api's JSON shapes: `omitempty` fields dropped when empty, structs
/// (`apiServiceDefinitions`, `crdDescriptions`, `provider`) always present, maps key-sorted.
fn csv_metadata(csv: &Value) -> FieldResult<Value> {
    let spec = csv.get("spec").cloned().unwrap_or(Value::Null);
    let mut out = Map::new();
    if let Some(a) = string_map(csv.pointer("/metadata/annotations"), "metadata.annotations")? {
        out.insert("annotations".into(), a);
    }
    out.insert(
        "apiServiceDefinitions".into(),
        definitions(spec.get("apiservicedefinitions"), "spec.apiservicedefinitions", true)?,
    );
    out.insert(
        "crdDescriptions".into(),
        definitions(spec.get("customresourcedefinitions"), "spec.customresourcedefinitions", false)?,
    );
    put_str(&mut out, "description", spec.get("description"), "spec.description")?;
    put_str(&mut out, "displayName", spec.get("displayName"), "spec.displayName")?;
    if let Some(modes) = install_modes(spec.get("installModes"))? {
        out.insert("installModes".into(), modes);
    }
    if let Some(list) = list(spec.get("keywords"), "spec.keywords")? {
        let kws = list
            .iter()
            .enumerate()
            .map(|(i, k)| req_str(Some(k), &format!("spec.keywords[{i}]")).map(Value::String))
            .collect::<FieldResult<Vec<_>>>()?;
        if !kws.is_empty() {
            out.insert("keywords".into(), Value::Array(kws));
        }
    }
    if let Some(l) = string_map(csv.pointer("/metadata/labels"), "metadata.labels")? {
        out.insert("labels".into(), l);
    }
    if let Some(list) = list(spec.get("links"), "spec.links")? {
        let links = list
            .iter()
            .enumerate()
            .map(|(i, l)| app_link(Some(l), &format!("spec.links[{i}]"), &["name", "url"]))
            .collect::<FieldResult<Vec<_>>>()?;
        if !links.is_empty() {
            out.insert("links".into(), Value::Array(links));
        }
    }
    if let Some(list) = list(spec.get("maintainers"), "spec.maintainers")? {
        let ms = list
            .iter()
            .enumerate()
            .map(|(i, l)| app_link(Some(l), &format!("spec.maintainers[{i}]"), &["name", "email"]))
            .collect::<FieldResult<Vec<_>>>()?;
        if !ms.is_empty() {
            out.insert("maintainers".into(), Value::Array(ms));
        }
    }
    put_str(&mut out, "maturity", spec.get("maturity"), "spec.maturity")?;
    put_str(&mut out, "minKubeVersion", spec.get("minKubeVersion"), "spec.minKubeVersion")?;
    if let Some(apis) = native_apis(spec.get("nativeAPIs"))? {
        out.insert("nativeAPIs".into(), apis);
    }
    out.insert("provider".into(), app_link(spec.get("provider"), "spec.provider", &["name", "url"])?);
    Ok(Value::Object(out))
}

/// `spec.installModes` as `[{type, supported}]`; `None` when absent or empty.
fn install_modes(v: Option<&Value>) -> FieldResult<Option<Value>> {
    let Some(list) = list(v, "spec.installModes")? else { return Ok(None) };
    let mut modes = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let f = format!("spec.installModes[{i}]");
        let mut o = Map::new();
        o.insert("type".into(), Value::String(req_str(m.get("type"), &format!("{f}.type"))?));
        let supported = match m.get("supported") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(FieldError {
                    field: format!("{f}.supported"),
                    message: format!("must be true or false, found {other}"),
                });
            }
        };
        o.insert("supported".into(), Value::Bool(supported));
        modes.push(Value::Object(o));
    }
    Ok((!modes.is_empty()).then_some(Value::Array(modes)))
}

/// `spec.nativeAPIs` as `[{group, version, kind}]`; `None` when absent or empty.
fn native_apis(v: Option<&Value>) -> FieldResult<Option<Value>> {
    let Some(list) = list(v, "spec.nativeAPIs")? else { return Ok(None) };
    let mut apis = Vec::new();
    for (i, a) in list.iter().enumerate() {
        let f = format!("spec.nativeAPIs[{i}]");
        let mut o = Map::new();
        for k in ["group", "version", "kind"] {
            o.insert(k.into(), Value::String(opt_str(a.get(k), &format!("{f}.{k}"))?.unwrap_or_default()));
        }
        apis.push(Value::Object(o));
    }
    Ok((!apis.is_empty()).then_some(Value::Array(apis)))
}

fn opt_str(v: Option<&Value>, field: &str) -> FieldResult<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => {
            Err(FieldError { field: field.to_string(), message: format!("must be a string, found {other}") })
        }
    }
}

fn req_str(v: Option<&Value>, field: &str) -> FieldResult<String> {
    Ok(opt_str(v, field)?.unwrap_or_default())
}

fn put_str(out: &mut Map<String, Value>, key: &str, v: Option<&Value>, field: &str) -> FieldResult<()> {
    if let Some(s) = opt_str(v, field)?
        && !s.is_empty()
    {
        out.insert(key.into(), Value::String(s));
    }
    Ok(())
}

fn list<'a>(v: Option<&'a Value>, field: &str) -> FieldResult<Option<&'a Vec<Value>>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(other) => Err(FieldError { field: field.to_string(), message: format!("must be a list, found {other}") }),
    }
}

/// A `map[string]string` (sorted keys), `None` when absent or empty.
fn string_map(v: Option<&Value>, field: &str) -> FieldResult<Option<Value>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k.clone(), Value::String(req_str(Some(v), &format!("{field}.{k}"))?));
            }
            Ok(if out.is_empty() { None } else { Some(Value::Object(out)) })
        }
        Some(other) => Err(FieldError {
            field: field.to_string(),
            message: format!("must be a mapping of strings, found {other}"),
        }),
    }
}

/// A struct of `omitempty` string fields (`AppLink`, `Maintainer`).
fn app_link(v: Option<&Value>, field: &str, keys: &[&str]) -> FieldResult<Value> {
    let mut o = Map::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for k in keys {
                if let Some(s) = opt_str(m.get(*k), &format!("{field}.{k}"))?
                    && !s.is_empty()
                {
                    o.insert((*k).into(), Value::String(s));
                }
            }
        }
        Some(other) => {
            return Err(FieldError { field: field.to_string(), message: format!("must be a mapping, found {other}") });
        }
    }
    Ok(Value::Object(o))
}

/// `{owned, required}` of CRDDescription or APIServiceDescription.
fn definitions(v: Option<&Value>, field: &str, apiservice: bool) -> FieldResult<Value> {
    let mut out = Map::new();
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(Value::Object(out)) };
    if !v.is_object() {
        return Err(FieldError {
            field: field.to_string(),
            message: format!("must be a mapping with owned and required, found {v}"),
        });
    }
    for key in ["owned", "required"] {
        if let Some(items) = list(v.get(key), &format!("{field}.{key}"))? {
            let descs = items
                .iter()
                .enumerate()
                .map(|(i, d)| description(d, &format!("{field}.{key}[{i}]"), apiservice))
                .collect::<FieldResult<Vec<_>>>()?;
            if !descs.is_empty() {
                out.insert(key.into(), Value::Array(descs));
            }
        }
    }
    Ok(Value::Object(out))
}

fn description(d: &Value, field: &str, apiservice: bool) -> FieldResult<Value> {
    if !d.is_object() {
        return Err(FieldError { field: field.to_string(), message: format!("must be a mapping, found {d}") });
    }
    let mut o = Map::new();
    let always: &[&str] = if apiservice { &["name", "group", "version", "kind"] } else { &["name", "version", "kind"] };
    for k in always {
        o.insert((*k).into(), Value::String(req_str(d.get(*k), &format!("{field}.{k}"))?));
    }
    if apiservice {
        put_str(&mut o, "deploymentName", d.get("deploymentName"), &format!("{field}.deploymentName"))?;
        match d.get("containerPort") {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) if n.as_i64().is_some_and(|p| i32::try_from(p).is_ok()) => {
                if n.as_i64() != Some(0) {
                    o.insert("containerPort".into(), Value::Number(n.clone()));
                }
            }
            Some(other) => {
                return Err(FieldError {
                    field: format!("{field}.containerPort"),
                    message: format!("must be a 32-bit integer, found {other}"),
                });
            }
        }
    }
    put_str(&mut o, "displayName", d.get("displayName"), &format!("{field}.displayName"))?;
    put_str(&mut o, "description", d.get("description"), &format!("{field}.description"))?;
    if let Some(items) = list(d.get("resources"), &format!("{field}.resources"))? {
        let mut rs = Vec::new();
        for (i, r) in items.iter().enumerate() {
            let f = format!("{field}.resources[{i}]");
            let mut ro = Map::new();
            for k in ["name", "kind", "version"] {
                ro.insert(k.into(), Value::String(req_str(r.get(k), &format!("{f}.{k}"))?));
            }
            rs.push(Value::Object(ro));
        }
        if !rs.is_empty() {
            o.insert("resources".into(), Value::Array(rs));
        }
    }
    for key in ["statusDescriptors", "specDescriptors", "actionDescriptors"] {
        if let Some(items) = list(d.get(key), &format!("{field}.{key}"))? {
            let mut ds = Vec::new();
            for (i, x) in items.iter().enumerate() {
                let f = format!("{field}.{key}[{i}]");
                let mut xo = Map::new();
                xo.insert("path".into(), Value::String(req_str(x.get("path"), &format!("{f}.path"))?));
                put_str(&mut xo, "displayName", x.get("displayName"), &format!("{f}.displayName"))?;
                put_str(&mut xo, "description", x.get("description"), &format!("{f}.description"))?;
                if let Some(xd) = list(x.get("x-descriptors"), &format!("{f}.x-descriptors"))? {
                    let xs = xd
                        .iter()
                        .enumerate()
                        .map(|(j, s)| req_str(Some(s), &format!("{f}.x-descriptors[{j}]")).map(Value::String))
                        .collect::<FieldResult<Vec<_>>>()?;
                    if !xs.is_empty() {
                        xo.insert("x-descriptors".into(), Value::Array(xs));
                    }
                }
                if let Some(v) = x.get("value") {
                    xo.insert("value".into(), v.clone());
                }
                ds.push(Value::Object(xo));
            }
            if !ds.is_empty() {
                o.insert(key.into(), Value::Array(ds));
            }
        }
    }
    Ok(Value::Object(o))
}
