//! `OperatorGroup` (`operators.coreos.com/v1`): the namespaces the operators installed in its
//! namespace watch (`reference/olm-v0.md` §1.6; upstream `pkg/operators/v1/operatorgroup_types.go`).
//!
//! Exactly one OperatorGroup per namespace. `spec` may be omitted: the CRD defaults it to
//! `{upgradeStrategy: Default}` like OLM's, so objects read from the API server always have one.
//! Like OLM's CRD, the CRD also serves the older [`v1alpha2`] version (same fields without
//! `upgradeStrategy`; `v1` is stored, conversion `None`).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// The annotations OLM sets on member CSVs (`olm.operatorGroup`, `olm.operatorNamespace`,
// `olm.targetNamespaces`) are `crate::install::ANNOTATION_*`; the namespace label
// `olm.operatorgroup.uid/<uid>` is `crate::install::aggregation::NAMESPACE_LABEL_PREFIX`.

/// Annotation on the OperatorGroup: comma list of `Kind.version.group` provided by its members.
pub const PROVIDED_APIS_ANNOTATION: &str = "olm.providedAPIs";

/// Annotation on an OperatorGroup: how long a bundle of its namespace may take to be pulled
/// (a Go duration), after which the Subscription reports `BundleUnpackFailed` with
/// `DeadlineExceeded`. OLM v0 `pkg/controller/bundle/bundle_unpacker.go`
/// (`BundleUnpackTimeoutAnnotationKey`; default the catalog operator's `--bundle-unpack-timeout`,
/// 10 minutes, [`DEFAULT_BUNDLE_UNPACK_TIMEOUT`]).
pub const BUNDLE_UNPACK_TIMEOUT_ANNOTATION: &str = "operatorframework.io/bundle-unpack-timeout";

/// OLM v0's default bundle unpack timeout (`cmd/catalog/start.go`, `--bundle-unpack-timeout`).
pub const DEFAULT_BUNDLE_UNPACK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// OperatorGroup annotation that removes the global catalog namespace from resolution.
pub const EXCLUDE_GLOBAL_NAMESPACE_RESOLUTION_ANNOTATION: &str =
    "olm.operatorframework.io/exclude-global-namespace-resolution";

/// Spec of an OperatorGroup (`OperatorGroupSpec`). With neither `targetNamespaces` nor
/// `selector` the group targets all namespaces.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OperatorGroup",
    namespaced,
    status = "OperatorGroupStatus",
    shortname = "og",
    category = "olm",
    derive = "PartialEq",
    doc = "OperatorGroup is the unit of multitenancy for OLM managed operators. It constrains the installation of operators in its namespace to a specified set of target namespaces."
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupSpec {
    /// Label selector of the target namespaces; ignored when `targetNamespaces` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Explicit list of target namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_namespaces: Option<Vec<String>>,
    /// ServiceAccount (in the group's namespace) used to install operators (scoped install).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Whether `olm.providedAPIs` is maintained by hand instead of by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "staticProvidedAPIs")]
    pub static_provided_apis: Option<bool>,
    /// `Default` or `TechPreviewUnsafeFailForward`; the CRD defaults it to `Default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Default"))]
    pub upgrade_strategy: Option<UpgradeStrategy>,
}

/// `spec.upgradeStrategy` (OLM `UpgradeStrategy`; closed enum in OLM's CRD).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UpgradeStrategy {
    /// A CSV moves to `Replacing` only from `Succeeded`.
    #[default]
    Default,
    /// A CSV may also move to `Replacing` from `Failed` (unsafe).
    TechPreviewUnsafeFailForward,
}

/// Status of an OperatorGroup (`OperatorGroupStatus`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupStatus {
    /// Resolved target namespaces; a global group has exactly `[""]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// The ServiceAccount of a scoped install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ObjectReference>,
    /// When the status was last updated (required by OLM's schema).
    pub last_updated: Time,
    /// Conditions: `OperatorGroupServiceAccount` (reason `ServiceAccountNotFound`),
    /// `MultipleOperatorGroup` (reason `MultipleOperatorGroupsFound`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// OperatorGroup condition types and reasons (`reference/olm-v0.md` §1.6).
pub mod condition {
    /// Condition type: the named ServiceAccount is missing.
    pub const SERVICE_ACCOUNT: &str = "OperatorGroupServiceAccount";
    /// Reason of [`SERVICE_ACCOUNT`].
    pub const SERVICE_ACCOUNT_NOT_FOUND: &str = "ServiceAccountNotFound";
    /// Condition type: more than one OperatorGroup in the namespace.
    pub const MULTIPLE_OPERATOR_GROUP: &str = "MultipleOperatorGroup";
    /// Reason of [`MULTIPLE_OPERATOR_GROUP`].
    pub const MULTIPLE_OPERATOR_GROUPS_FOUND: &str = "MultipleOperatorGroupsFound";
}

impl OperatorGroup {
    /// The effective upgrade strategy (`Default` when unset).
    pub fn upgrade_strategy(&self) -> UpgradeStrategy {
        self.spec.upgrade_strategy.unwrap_or_default()
    }
}

impl OperatorGroupStatus {
    /// This status as the body of one JSON merge patch (RFC 7386) of the status subresource
    /// that leaves nothing of an older status behind ([`OperatorGroupStatusPatch`]).
    pub fn merge_patch(&self) -> OperatorGroupStatusPatch<'_> {
        OperatorGroupStatusPatch {
            status: OperatorGroupStatusMerge {
                namespaces: &self.namespaces,
                service_account_ref: self.service_account_ref.as_ref(),
                last_updated: &self.last_updated,
                conditions: (!self.conditions.is_empty()).then_some(self.conditions.as_slice()),
            },
        }
    }
}

/// A whole [`OperatorGroupStatus`] as a JSON merge patch: `{"status": {...}}`. A merge patch
/// keeps what it does not name, so every field is named: `namespaces` always (an emptied list
/// replaces the old one), `serviceAccountRef` and `conditions` as `null` when there are none
/// (removed; OLM writes no empty `conditions` list).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperatorGroupStatusPatch<'a> {
    /// The status subresource's content.
    pub status: OperatorGroupStatusMerge<'a>,
}

/// The `status` of an [`OperatorGroupStatusPatch`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupStatusMerge<'a> {
    /// [`OperatorGroupStatus::namespaces`], also when empty.
    pub namespaces: &'a [String],
    /// [`OperatorGroupStatus::service_account_ref`]; `null` removes it.
    pub service_account_ref: Option<&'a ObjectReference>,
    /// [`OperatorGroupStatus::last_updated`].
    pub last_updated: &'a Time,
    /// [`OperatorGroupStatus::conditions`]; `null` (none) removes them.
    pub conditions: Option<&'a [Condition]>,
}

/// `operators.coreos.com/v1alpha2` OperatorGroup: served for manifests written against the older
/// version, not stored (OLM's CRD does the same; `reference/olm-v0.md` §1.1). Read and write
/// OperatorGroups as [`super::OperatorGroup`] (`v1`).
pub mod v1alpha2 {
    // kube's repeated `shortname`/`category` style arguments are not duplicate attributes.
    #![allow(clippy::duplicated_attributes)]

    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Spec of a `v1alpha2` OperatorGroup: `v1`'s without `upgradeStrategy`.
    #[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "operators.coreos.com",
        version = "v1alpha2",
        kind = "OperatorGroup",
        namespaced,
        status = "OperatorGroupStatus",
        shortname = "og",
        category = "olm",
        derive = "PartialEq",
        storage = false,
        doc = "OperatorGroup is the unit of multitenancy for OLM managed operators. It constrains the installation of operators in its namespace to a specified set of target namespaces."
    )]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupSpec {
        /// Label selector of the target namespaces; ignored when `targetNamespaces` is set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub selector: Option<LabelSelector>,
        /// Explicit list of target namespaces.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub target_namespaces: Option<Vec<String>>,
        /// ServiceAccount (in the group's namespace) used to install operators (scoped install).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_name: Option<String>,
        /// Whether `olm.providedAPIs` is maintained by hand instead of by the controller.
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "staticProvidedAPIs")]
        pub static_provided_apis: Option<bool>,
    }

    /// Status of a `v1alpha2` OperatorGroup (OLM's schema requires `lastUpdated` and `namespaces`).
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupStatus {
        /// Resolved target namespaces; a global group has exactly `[""]`.
        pub namespaces: Vec<String>,
        /// The ServiceAccount of a scoped install.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_ref: Option<ObjectReference>,
        /// When the status was last updated.
        pub last_updated: Time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_patch_sends_namespaces_and_removes_what_is_gone() {
        let st = OperatorGroupStatus {
            namespaces: Vec::new(),
            service_account_ref: None,
            last_updated: Time("2026-01-01T00:00:00Z".parse().unwrap()),
            conditions: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(st.merge_patch()).unwrap(),
            serde_json::json!({"status": {"namespaces": [], "serviceAccountRef": null,
                "lastUpdated": "2026-01-01T00:00:00Z", "conditions": null}})
        );
    }
}
