//! The File-Based Catalog (FBC) model: `olm.package`, `olm.channel`, `olm.bundle` and
//! `olm.deprecations` blobs, plus every other blob kept verbatim.
//!
//! Field names and meaning follow operator-registry's `alpha/declcfg/declcfg.go`
//! (`../shared/reference/olm-v0.md` §3.1–3.3). Fields this model does not name are kept in
//! `extra` maps so that a catalog read and written again loses nothing.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Schema name of a package blob.
pub const SCHEMA_PACKAGE: &str = "olm.package";
/// Schema name of a channel blob.
pub const SCHEMA_CHANNEL: &str = "olm.channel";
/// Schema name of a bundle blob.
pub const SCHEMA_BUNDLE: &str = "olm.bundle";
/// Schema name of a deprecations blob (one per package).
pub const SCHEMA_DEPRECATIONS: &str = "olm.deprecations";

/// A whole catalog: every blob of every file, grouped by schema, in file order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeclarativeConfig {
    /// `olm.package` blobs.
    pub packages: Vec<Package>,
    /// `olm.channel` blobs.
    pub channels: Vec<Channel>,
    /// `olm.bundle` blobs.
    pub bundles: Vec<Bundle>,
    /// `olm.deprecations` blobs.
    pub deprecations: Vec<Deprecation>,
    /// Blobs of any other schema, kept verbatim (`olm.*` names are reserved but not rejected here).
    pub others: Vec<Value>,
}

/// An `olm.package` blob.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// Always `olm.package`.
    pub schema: String,
    /// Package name.
    pub name: String,
    /// The channel a Subscription gets when it names none. Required by `opm validate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_channel: Option<String>,
    /// Package icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Icon>,
    /// Markdown description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Package-level properties.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
    /// Fields not named above, kept verbatim.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// An icon: base64 data and its media type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Icon {
    /// Base64-encoded image data.
    #[serde(default)]
    pub base64data: String,
    /// Media type such as `image/svg+xml`.
    #[serde(default)]
    pub mediatype: String,
}

/// An `olm.channel` blob: the channel's entries and their upgrade edges.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    /// Always `olm.channel`.
    pub schema: String,
    /// Package the channel belongs to.
    pub package: String,
    /// Channel name.
    pub name: String,
    /// Bundles in the channel with their edges.
    #[serde(default)]
    pub entries: Vec<ChannelEntry>,
    /// Channel properties.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
    /// Fields not named above, kept verbatim.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// One entry of a channel. Only `replaces` and `skips` are graph edges for `opm validate`;
/// `skipRange` is an upgrade edge for the resolver only (`olm-v0.md` §3.4, §4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelEntry {
    /// Bundle name (a CSV name).
    pub name: String,
    /// Name of the bundle this one replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Names of bundles this one skips.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    /// A semver range (blang/semver syntax) of versions this bundle upgrades from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_range: Option<String>,
    /// Fields not named above, kept verbatim.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// An `olm.bundle` blob.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    /// Always `olm.bundle`.
    pub schema: String,
    /// Package the bundle belongs to.
    pub package: String,
    /// Bundle name (the CSV's `metadata.name`).
    pub name: String,
    /// Bundle image reference.
    #[serde(default)]
    pub image: String,
    /// Images the bundle uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<RelatedImage>,
    /// Bundle properties (`olm.package`, `olm.gvk`, requirements, …).
    #[serde(default)]
    pub properties: Vec<Property>,
    /// Fields not named above, kept verbatim.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// A related image of a bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelatedImage {
    /// Optional name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Image reference.
    pub image: String,
}

/// An `olm.deprecations` blob.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Deprecation {
    /// Always `olm.deprecations`.
    pub schema: String,
    /// Package the entries refer to.
    pub package: String,
    /// Deprecation entries.
    #[serde(default)]
    pub entries: Vec<DeprecationEntry>,
    /// Fields not named above, kept verbatim.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// One deprecated package, channel or bundle with its message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeprecationEntry {
    /// What is deprecated.
    pub reference: DeprecationReference,
    /// Why, for the user.
    #[serde(default)]
    pub message: String,
}

/// Reference to a deprecated object: `schema` is `olm.package`, `olm.channel` or `olm.bundle`;
/// `name` is empty for a package.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeprecationReference {
    /// Schema of the referenced blob.
    pub schema: String,
    /// Name of the referenced channel or bundle.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// A property: `{type, value}`; the value stays raw JSON and is decoded on demand by
/// [`crate::catalog::property`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Property {
    /// Property type, e.g. `olm.package`, `olm.gvk`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Raw value.
    pub value: Value,
}
