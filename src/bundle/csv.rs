//! Typed read access to a ClusterServiceVersion kept as raw JSON (`olm-v0.md` §1.5;
//! operator-framework/api `pkg/operators/v1alpha1/clusterserviceversion_types.go`).
//!
//! Accessors never fail: a field that is absent or has the wrong type reads as empty here, and
//! [`crate::bundle::validate()`] reports the wrong type with the file and field.

use std::path::Path;

use serde_json::Value;

use super::{ApiKey, Manifest, str_at};
use crate::catalog::model::Property;

/// The install mode types OLM knows (`olm-v0.md` §1.5).
pub const INSTALL_MODE_TYPES: [&str; 4] = ["OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"];

/// CSV metadata annotation holding the skipRange (`olm-v0.md` §1.5; operator-registry `pkg/registry/csv.go`).
pub const SKIP_RANGE_ANNOTATION: &str = "olm.skipRange";
/// CSV metadata annotation holding extra bundle properties as a JSON list (`olm-v0.md` §2.2).
pub const PROPERTIES_ANNOTATION: &str = "olm.properties";

/// Why the CSV's `olm.properties` annotation is not a JSON list of `{type, value}`
/// ([`CsvView::annotation_properties`]).
#[derive(Debug, thiserror::Error)]
pub enum PropertiesAnnotationError {
    /// Not JSON, or not a list: the parser's message.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Entry `index` (0-based) lacks a string `type` or a `value`.
    #[error("entry {index} needs a string type and a value")]
    Entry {
        /// Position of the entry in the list.
        index: usize,
    },
}

/// A borrowed, never-failing view of the bundle's ClusterServiceVersion manifest as written (the
/// API object is [`crate::api::ClusterServiceVersion`]; this view reads a manifest that may not
/// have its shape).
#[derive(Debug, Clone, Copy)]
pub struct CsvView<'a> {
    manifest: &'a Manifest,
}

/// One `spec.installModes` entry: the API type, one definition for bundles, CSVs and
/// PackageManifests.
pub use crate::api::clusterserviceversion::InstallMode;

/// One `spec.customresourcedefinitions.owned[]` / `required[]` entry (the identifying fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdDescription {
    /// `plural.group`, the CRD's `metadata.name`.
    pub name: String,
    /// API version served for this kind.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl CrdDescription {
    /// The API key (`plural.group` split at the first dot); `None` when `name` has no dot.
    pub fn api_key(&self) -> Option<ApiKey> {
        let (plural, group) = self.name.split_once('.')?;
        Some(ApiKey {
            group: group.to_string(),
            version: self.version.clone(),
            kind: self.kind.clone(),
            plural: plural.to_string(),
        })
    }
}

impl<'a> CsvView<'a> {
    pub(super) fn new(manifest: &'a Manifest) -> Self {
        CsvView { manifest }
    }

    /// The whole CSV as written.
    pub fn value(&self) -> &'a Value {
        &self.manifest.value
    }

    /// File the CSV came from, relative to the bundle directory.
    pub fn path(&self) -> &'a Path {
        &self.manifest.path
    }

    /// `metadata.name` (the bundle name).
    pub fn name(&self) -> &'a str {
        str_at(&self.manifest.value, "/metadata/name")
    }

    /// `spec.version`, `None` when absent or not a string.
    pub fn version(&self) -> Option<&'a str> {
        self.manifest.value.pointer("/spec/version").and_then(Value::as_str)
    }

    /// `spec.release` as operator-registry reads it (string, or a number printed like Go's `%d`
    /// / `%g`); `None` when absent.
    pub fn release(&self) -> Option<String> {
        match self.manifest.value.pointer("/spec/release")? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => i.to_string(),
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.2e18 => format!("{}", f as i64),
                (None, Some(f)) => super::gojson::format_float_g(f),
                (None, None) => n.to_string(),
            }),
            _ => None,
        }
    }

    /// `spec.replaces`, `None` when absent, empty or not a string.
    pub fn replaces(&self) -> Option<&'a str> {
        self.manifest.value.pointer("/spec/replaces").and_then(Value::as_str).filter(|s| !s.is_empty())
    }

    /// `spec.skips` (non-string entries dropped; validation reports them).
    pub fn skips(&self) -> Vec<&'a str> {
        self.manifest
            .value
            .pointer("/spec/skips")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// The `olm.skipRange` metadata annotation, `None` when absent.
    pub fn skip_range(&self) -> Option<&'a str> {
        self.annotation(SKIP_RANGE_ANNOTATION)
    }

    /// A `metadata.annotations` entry.
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.manifest.value.get("metadata")?.get("annotations")?.get(key)?.as_str()
    }

    /// The `olm.properties` annotation decoded as `[{type, value}]`; `None` when absent,
    /// `Some(Err)` when it is not such a list.
    pub fn annotation_properties(&self) -> Option<Result<Vec<Property>, PropertiesAnnotationError>> {
        let raw = self.annotation(PROPERTIES_ANNOTATION)?;
        let parsed: Result<Vec<Value>, _> = serde_json::from_str(raw);
        Some(match parsed {
            Err(e) => Err(PropertiesAnnotationError::Json(e)),
            Ok(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| match (item.get("type").and_then(Value::as_str), item.get("value")) {
                    (Some(t), Some(v)) => Ok(Property { type_: t.to_string(), value: v.clone() }),
                    _ => Err(PropertiesAnnotationError::Entry { index: i }),
                })
                .collect(),
        })
    }

    /// `spec.installModes`.
    pub fn install_modes(&self) -> Vec<InstallMode> {
        self.manifest
            .value
            .pointer("/spec/installModes")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|m| InstallMode {
                        type_: str_at(m, "/type").into(),
                        supported: m.get("supported").and_then(Value::as_bool).unwrap_or(false),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `spec.customresourcedefinitions.owned`.
    pub fn owned_crds(&self) -> Vec<CrdDescription> {
        self.crd_descriptions("/spec/customresourcedefinitions/owned")
    }

    /// `spec.customresourcedefinitions.required`.
    pub fn required_crds(&self) -> Vec<CrdDescription> {
        self.crd_descriptions("/spec/customresourcedefinitions/required")
    }

    fn crd_descriptions(&self, pointer: &str) -> Vec<CrdDescription> {
        self.manifest
            .value
            .pointer(pointer)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|d| CrdDescription {
                        name: str_at(d, "/name").to_string(),
                        version: str_at(d, "/version").to_string(),
                        kind: str_at(d, "/kind").to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `spec.apiservicedefinitions.owned` as API keys (plural = `name`).
    pub fn owned_apiservices(&self) -> Vec<ApiKey> {
        self.apiservices("/spec/apiservicedefinitions/owned")
    }

    /// `spec.apiservicedefinitions.required` as API keys.
    pub fn required_apiservices(&self) -> Vec<ApiKey> {
        self.apiservices("/spec/apiservicedefinitions/required")
    }

    fn apiservices(&self, pointer: &str) -> Vec<ApiKey> {
        self.manifest
            .value
            .pointer(pointer)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|d| ApiKey {
                        group: str_at(d, "/group").to_string(),
                        version: str_at(d, "/version").to_string(),
                        kind: str_at(d, "/kind").to_string(),
                        plural: str_at(d, "/name").to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `spec.relatedImages` as `(name, image)` pairs, in file order.
    pub fn related_images(&self) -> Vec<(&'a str, &'a str)> {
        self.manifest
            .value
            .pointer("/spec/relatedImages")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|r| (str_at(r, "/name"), str_at(r, "/image"))).collect())
            .unwrap_or_default()
    }

    /// Images of every container and init container of every deployment in a `deployment` install
    /// strategy (operator-registry `GetOperatorImages`), in file order, duplicates kept.
    pub fn operator_images(&self) -> Vec<&'a str> {
        let v = &self.manifest.value;
        if str_at(v, "/spec/install/strategy") != "deployment" {
            return Vec::new();
        }
        let mut out = Vec::new();
        for d in v.pointer("/spec/install/spec/deployments").and_then(Value::as_array).into_iter().flatten() {
            for list in ["/spec/template/spec/containers", "/spec/template/spec/initContainers"] {
                for c in d.pointer(list).and_then(Value::as_array).into_iter().flatten() {
                    out.push(str_at(c, "/image"));
                }
            }
        }
        out
    }
}
