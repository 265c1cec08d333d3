//! Typed views of the properties OLM understands (`../shared/reference/olm-v0.md` §2.2–2.3, §3.3;
//! operator-registry `alpha/property/property.go`, operator-framework/api `pkg/constraints`).

use serde::{Deserialize, Serialize};

use super::model::Property;

/// `olm.package` property type.
pub const PACKAGE: &str = "olm.package";
/// `olm.gvk` property type (a provided API).
pub const GVK: &str = "olm.gvk";
/// `olm.package.required` property type.
pub const PACKAGE_REQUIRED: &str = "olm.package.required";
/// `olm.gvk.required` property type.
pub const GVK_REQUIRED: &str = "olm.gvk.required";
/// `olm.constraint` property type.
pub const CONSTRAINT: &str = "olm.constraint";
/// `olm.csv.metadata` property type.
pub const CSV_METADATA: &str = "olm.csv.metadata";
/// `olm.bundle.object` property type.
pub const BUNDLE_OBJECT: &str = "olm.bundle.object";
/// `olm.deprecated` property type (legacy; makes a bundle prohibited in the solver).
pub const DEPRECATED: &str = "olm.deprecated";
/// Code limit of one `olm.constraint` value in bytes (`2 << 16`, `olm-v0.md` §2.3).
pub const MAX_CONSTRAINT_SIZE: usize = 2 << 16;

/// Value of `olm.package`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageProperty {
    /// Package name.
    pub package_name: String,
    /// Bundle version (semver).
    pub version: String,
    /// Optional release (packaging version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

/// A group/version/kind, the value of `olm.gvk` and `olm.gvk.required`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gvk {
    /// API group ("" for the core group).
    #[serde(default)]
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

/// Value of `olm.package.required`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageRequired {
    /// Required package.
    pub package_name: String,
    /// Semver range (blang/semver syntax).
    pub version_range: String,
}

/// Value of `olm.constraint`: an optional failure message and exactly one constraint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Constraint {
    /// Message shown when the constraint cannot be satisfied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Requires a provider of this GVK.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gvk: Option<Gvk>,
    /// Requires this package in this range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageRequired>,
    /// A CEL rule over the candidate's properties (not evaluated by capstan yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelConstraint>,
    /// Conjunction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<CompoundConstraint>,
    /// Disjunction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any: Option<CompoundConstraint>,
    /// Negation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not: Option<CompoundConstraint>,
}

/// `{rule}` of a CEL constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CelConstraint {
    /// The CEL expression.
    pub rule: String,
}

/// `{constraints: [...]}` of `all`, `any` and `not`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompoundConstraint {
    /// Nested constraints.
    #[serde(default)]
    pub constraints: Vec<Constraint>,
}

/// Error decoding a property value: names the property type and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("property {type_}: {message}")]
pub struct PropertyError {
    /// The property type.
    pub type_: String,
    /// What is wrong with its value.
    pub message: String,
}

impl Property {
    /// Builds a property from a typed value.
    pub fn new<T: Serialize>(type_: &str, value: &T) -> Property {
        Property { type_: type_.to_string(), value: serde_json::to_value(value).expect("property values serialize") }
    }

    /// Decodes the value as `T`.
    ///
    /// # Errors
    /// [`PropertyError`] naming the type when the value does not have the expected shape.
    pub fn decode<T: for<'de> Deserialize<'de>>(&self) -> Result<T, PropertyError> {
        T::deserialize(&self.value).map_err(|e| PropertyError { type_: self.type_.clone(), message: e.to_string() })
    }
}
