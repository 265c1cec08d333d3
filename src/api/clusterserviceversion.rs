//! `ClusterServiceVersion` (`operators.coreos.com/v1alpha1`): one version of an operator — its
//! install strategy, owned and required APIs, install modes and display metadata
//! (`reference/olm-v0.md` §1.5; upstream `pkg/operators/v1alpha1/clusterserviceversion_types.go`).
//!
//! Fields capstan interprets are typed. Everything else is preserved verbatim as
//! [`serde_json::Value`] (`x-kubernetes-preserve-unknown-fields` in the CRD): display metadata
//! (`icon`, `maintainers`, `provider`, `links`), CRD and APIService descriptors, each
//! Deployment's `spec`, and any spec key OLM's type lacks ([`ClusterServiceVersionSpec::extra`]).
//! A CSV from a bundle therefore round-trips through these types without losing a field.

// kube's repeated `printcolumn(type_ = "string", …)` arguments are not duplicate attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::common::{keep_null, preserve_object, preserve_object_list_nullable, preserve_object_nullable};

/// The CSV metadata annotation holding its `olm.skipRange` (a semver range; not a spec field).
pub const SKIP_RANGE_ANNOTATION: &str = "olm.skipRange";
/// The only install strategy name: `deployment`.
pub const INSTALL_STRATEGY_DEPLOYMENT: &str = "deployment";
/// OLM keeps the last 20 entries of `status.conditions` (`ConditionsLengthLimit`).
pub const CONDITIONS_LENGTH_LIMIT: usize = 20;

/// Spec of a ClusterServiceVersion (`ClusterServiceVersionSpec`). Required: `displayName`, `install`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    namespaced,
    status = "ClusterServiceVersionStatus",
    shortname = "csv",
    shortname = "csvs",
    category = "olm",
    derive = "PartialEq",
    doc = "ClusterServiceVersion is a Custom Resource of type `ClusterServiceVersionSpec`.",
    printcolumn(
        name = "Display",
        type_ = "string",
        json_path = ".spec.displayName",
        description = "The name of the CSV"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.version",
        description = "The version of the CSV"
    ),
    printcolumn(
        name = "Release",
        type_ = "string",
        json_path = ".spec.release",
        description = "The release of this version of the CSV"
    ),
    printcolumn(
        name = "Replaces",
        type_ = "string",
        json_path = ".spec.replaces",
        description = "The name of a CSV that this one replaces"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase")
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionSpec {
    /// The install strategy: Deployments and RBAC.
    pub install: NamedInstallStrategy,
    /// The operator version (semver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Optional packaging release (semver pre-release syntax, at most 20 characters), told apart
    /// from `version` by OLM ≥ v0.46.0; the API server enforces OLM's rules for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "release_schema")]
    pub release: Option<String>,
    /// Maturity, e.g. `alpha`, `stable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maturity: Option<String>,
    /// Owned and required CRDs (OLM JSON name `customresourcedefinitions`).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "customresourcedefinitions")]
    pub customresourcedefinitions: Option<CustomResourceDefinitions>,
    /// Owned and required aggregated APIs (OLM JSON name `apiservicedefinitions`).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "apiservicedefinitions")]
    pub apiservicedefinitions: Option<ApiServiceDefinitions>,
    /// Admission and conversion webhooks (OLM JSON name `webhookdefinitions`).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "webhookdefinitions")]
    pub webhookdefinitions: Option<Vec<WebhookDescription>>,
    /// GVKs that must exist on the cluster (OLM JSON name `nativeAPIs`).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "nativeAPIs")]
    pub native_apis: Option<Vec<GroupVersionKind>>,
    /// Minimum Kubernetes version (semver), compared with the API server's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_kube_version: Option<String>,
    /// Display name.
    pub display_name: String,
    /// Markdown description (preserved, not interpreted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Keywords.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords: Option<Vec<String>>,
    /// Maintainers `[{name, email}]` (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub maintainers: Option<Value>,
    /// Provider `{name, url}` (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_nullable")]
    pub provider: Option<Value>,
    /// Links `[{name, url}]` (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub links: Option<Value>,
    /// Icons `[{base64data, mediatype}]` (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub icon: Option<Value>,
    /// Install modes the operator supports; an omitted type is unsupported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_modes: Option<Vec<InstallMode>>,
    /// Name of the CSV this one replaces. An InstallPlan overwrites it with the CSV actually
    /// replaced on the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Labels of the operator (display; not applied to objects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations of the operator (display; not applied to objects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Label selector of the operator's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Whether the operator's custom resources are deleted when the CSV is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupSpec>,
    /// CSV names this one skips (catalog-build time only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skips: Option<Vec<String>>,
    /// Images the operator uses (catalog-build time only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_images: Option<Vec<RelatedImage>>,
    /// Spec keys OLM's type does not have (e.g. `support`), kept verbatim.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `spec.install` (OLM `NamedInstallStrategy`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NamedInstallStrategy {
    /// Strategy name; `deployment` is the only one.
    pub strategy: String,
    /// The deployment strategy's details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<StrategyDetailsDeployment>,
}

/// `spec.install.spec` (OLM `StrategyDetailsDeployment`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDetailsDeployment {
    /// The operator's Deployments.
    pub deployments: Vec<StrategyDeploymentSpec>,
    /// Namespaced rules, granted as Roles and RoleBindings in the target namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<StrategyDeploymentPermissions>>,
    /// Cluster-wide rules, granted as ClusterRoles and ClusterRoleBindings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_permissions: Option<Vec<StrategyDeploymentPermissions>>,
}

/// `spec.install.spec.deployments[]` (OLM `StrategyDeploymentSpec`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StrategyDeploymentSpec {
    /// Deployment name.
    pub name: String,
    /// An `apps/v1` DeploymentSpec, preserved as JSON (convert with `serde_json::from_value`).
    #[schemars(schema_with = "preserve_object")]
    pub spec: Value,
    /// Labels of the Deployment object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<BTreeMap<String, String>>,
}

impl StrategyDeploymentSpec {
    /// The preserved `spec` as a typed `apps/v1` DeploymentSpec (unknown keys inside are
    /// ignored by this conversion, not removed from [`Self::spec`]).
    ///
    /// # Errors
    /// [`DeploymentSpecError`] naming the deployment and what does not fit when `spec` is not a
    /// valid DeploymentSpec (e.g. a missing `selector` or `template`).
    pub fn deployment_spec(&self) -> Result<DeploymentSpec, DeploymentSpecError> {
        DeploymentSpec::deserialize(&self.spec)
            .map_err(|source| DeploymentSpecError { deployment: self.name.clone(), source })
    }
}

/// A `spec.install.spec.deployments[].spec` that is not a valid `apps/v1` DeploymentSpec.
#[derive(Debug, thiserror::Error)]
#[error("spec.install.spec.deployments[name={deployment}].spec is not a valid apps/v1 DeploymentSpec: {source}")]
pub struct DeploymentSpecError {
    /// The deployment's `name`.
    pub deployment: String,
    /// What does not fit.
    pub source: serde_json::Error,
}

/// `permissions[]` / `clusterPermissions[]` (OLM `StrategyDeploymentPermissions`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDeploymentPermissions {
    /// The ServiceAccount the rules are granted to.
    pub service_account_name: String,
    /// RBAC rules.
    pub rules: Vec<PolicyRule>,
}

/// `spec.customresourcedefinitions` (OLM `CustomResourceDefinitions`). Owned CRDs are
/// implicitly required.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CustomResourceDefinitions {
    /// CRDs the bundle provides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<CrdDescription>>,
    /// CRDs another operator must provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<CrdDescription>>,
}

/// An owned or required CRD (OLM `CRDDescription`). Required: `name`, `version`, `kind`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdDescription {
    /// CRD name, `<plural>.<group>`.
    pub name: String,
    /// API version served.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Kinds the operator creates for this API, `[{name, kind, version}]` (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub resources: Option<Value>,
    /// UI descriptors of status fields (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub status_descriptors: Option<Value>,
    /// UI descriptors of spec fields (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub spec_descriptors: Option<Value>,
    /// UI descriptors of actions (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub action_descriptors: Option<Value>,
}

/// `spec.apiservicedefinitions` (OLM `APIServiceDefinitions`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApiServiceDefinitions {
    /// APIServices the bundle provides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<Vec<ApiServiceDescription>>,
    /// APIServices another operator must provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<ApiServiceDescription>>,
}

/// An owned or required aggregated API (OLM `APIServiceDescription`). Required: `name`,
/// `group`, `version`, `kind`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDescription {
    /// Resource name.
    pub name: String,
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Deployment serving the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    /// Container port serving the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Kinds the operator creates for this API (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub resources: Option<Value>,
    /// UI descriptors of status fields (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub status_descriptors: Option<Value>,
    /// UI descriptors of spec fields (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub spec_descriptors: Option<Value>,
    /// UI descriptors of actions (preserved as is).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "keep_null")]
    #[schemars(schema_with = "preserve_object_list_nullable")]
    pub action_descriptors: Option<Value>,
}

/// `spec.webhookdefinitions[]` (OLM `WebhookDescription`). Required: `generateName`, `type`,
/// `sideEffects`, `admissionReviewVersions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDescription {
    /// Webhook name.
    pub generate_name: String,
    /// Webhook type.
    #[serde(rename = "type")]
    pub type_: WebhookAdmissionType,
    /// Deployment serving the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    /// Service port (OLM default 443).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    /// Container port the Service targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<IntOrString>,
    /// Operations and resources the webhook intercepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleWithOperations>>,
    /// `Ignore` or `Fail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// `Exact` or `Equivalent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    /// Which objects are sent to the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// `None` or `NoneOnDryRun` (the Go type also names `Some` and `Unknown`, which
    /// admissionregistration.k8s.io/v1, the webhook configurations OLM creates, refuses).
    pub side_effects: String,
    /// Timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// AdmissionReview versions accepted.
    pub admission_review_versions: Vec<String>,
    /// `Never` or `IfNeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    /// URL path of the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    /// CRDs converted by a `ConversionWebhook` (OLM JSON name `conversionCRDs`).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "conversionCRDs")]
    pub conversion_crds: Option<Vec<String>>,
}

/// `spec.webhookdefinitions[].type` (OLM `WebhookAdmissionType`; closed enum in OLM's CRD).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WebhookAdmissionType {
    /// A validating admission webhook.
    ValidatingAdmissionWebhook,
    /// A mutating admission webhook.
    MutatingAdmissionWebhook,
    /// A CRD conversion webhook.
    ConversionWebhook,
}

/// `spec.nativeAPIs[]` (`metav1.GroupVersionKind`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GroupVersionKind {
    /// API group (empty for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

/// `spec.installModes[]` (OLM `InstallMode`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallMode {
    /// Install mode type.
    #[serde(rename = "type")]
    pub type_: InstallModeType,
    /// Whether the operator supports it.
    pub supported: bool,
}

open_enum! {
    /// Install mode types (OLM `InstallModeType`; `reference/olm-v0.md` §1.5).
    pub enum InstallModeType {
        /// The operator watches its own namespace.
        OwnNamespace = "OwnNamespace",
        /// The operator watches one other namespace.
        SingleNamespace = "SingleNamespace",
        /// The operator watches several namespaces.
        MultiNamespace = "MultiNamespace",
        /// The operator watches all namespaces (target `""`).
        AllNamespaces = "AllNamespaces",
    }
}

/// `spec.cleanup` (OLM `CleanupSpec`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CleanupSpec {
    /// Whether cleanup is enabled.
    pub enabled: bool,
}

/// `spec.relatedImages[]` (OLM `RelatedImage`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RelatedImage {
    /// Name of the image's use.
    pub name: String,
    /// Image reference.
    pub image: String,
}

/// Status of a ClusterServiceVersion (`ClusterServiceVersionStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionStatus {
    /// Current phase; absent means none (OLM `""`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,
    /// Human-readable details of the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Reason of the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,
    /// Last time the status was updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Last time the phase changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// History of phases, oldest first, trimmed to the last 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ClusterServiceVersionCondition>,
    /// Result of the requirement checks (CRDs, ServiceAccounts, permissions…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirement_status: Vec<RequirementStatus>,
    /// When webhook/APIService certificates were last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_last_updated: Option<Time>,
    /// When those certificates are rotated next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_rotate_at: Option<Time>,
    /// Custom resources pending deletion during cleanup.
    #[serde(default, serialize_with = "cleanup_as_go_writes_it")]
    pub cleanup: Option<CleanupStatus>,
}

/// One entry of the CSV's phase history (OLM `ClusterServiceVersionCondition`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionCondition {
    /// The phase entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<CsvPhase>,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<CsvReason>,
    /// Last time it was updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the phase was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

open_enum! {
    /// CSV phases (OLM `ClusterServiceVersionPhase`; transitions in `reference/olm-v0.md` §1.5).
    pub enum CsvPhase {
        /// Requirements are being checked.
        Pending = "Pending",
        /// Requirements are met; the install strategy runs next.
        InstallReady = "InstallReady",
        /// Waiting for the Deployments to become available.
        Installing = "Installing",
        /// Installed and healthy.
        Succeeded = "Succeeded",
        /// Failed; `reason` and `message` say why.
        Failed = "Failed",
        /// Unknown.
        Unknown = "Unknown",
        /// A newer CSV replaces this one.
        Replacing = "Replacing",
        /// Being deleted after replacement.
        Deleting = "Deleting",
    }
}

open_enum! {
    /// CSV reasons (OLM `ConditionReason` constants for CSVs; complete list in `reference/olm-v0.md` §1.5).
    pub enum CsvReason {
        /// `RequirementsUnknown`.
        RequirementsUnknown = "RequirementsUnknown",
        /// `RequirementsNotMet`.
        RequirementsNotMet = "RequirementsNotMet",
        /// `AllRequirementsMet`.
        AllRequirementsMet = "AllRequirementsMet",
        /// `OwnerConflict`.
        OwnerConflict = "OwnerConflict",
        /// `InstallComponentFailed`.
        InstallComponentFailed = "InstallComponentFailed",
        /// `InstallComponentFailedNoRetry`.
        InstallComponentFailedNoRetry = "InstallComponentFailedNoRetry",
        /// `InvalidInstallStrategy`.
        InvalidInstallStrategy = "InvalidInstallStrategy",
        /// `InstallWaiting`.
        InstallWaiting = "InstallWaiting",
        /// `InstallSucceeded`.
        InstallSucceeded = "InstallSucceeded",
        /// `InstallCheckFailed`.
        InstallCheckFailed = "InstallCheckFailed",
        /// `ComponentUnhealthy`.
        ComponentUnhealthy = "ComponentUnhealthy",
        /// `BeingReplaced`.
        BeingReplaced = "BeingReplaced",
        /// `Replaced`.
        Replaced = "Replaced",
        /// `NeedsReinstall`.
        NeedsReinstall = "NeedsReinstall",
        /// `NeedsCertRotation`.
        NeedsCertRotation = "NeedsCertRotation",
        /// `APIServiceResourceIssue`.
        ApiServiceResourceIssue = "APIServiceResourceIssue",
        /// `APIServiceResourcesNeedReinstall`.
        ApiServiceResourcesNeedReinstall = "APIServiceResourcesNeedReinstall",
        /// `APIServiceInstallFailed`.
        ApiServiceInstallFailed = "APIServiceInstallFailed",
        /// `Copied`.
        Copied = "Copied",
        /// `InvalidInstallModes`.
        InvalidInstallModes = "InvalidInstallModes",
        /// `NoTargetNamespaces`.
        NoTargetNamespaces = "NoTargetNamespaces",
        /// `UnsupportedOperatorGroup`.
        UnsupportedOperatorGroup = "UnsupportedOperatorGroup",
        /// `NoOperatorGroup`.
        NoOperatorGroup = "NoOperatorGroup",
        /// `TooManyOperatorGroups`.
        TooManyOperatorGroups = "TooManyOperatorGroups",
        /// `InterOperatorGroupOwnerConflict`.
        InterOperatorGroupOwnerConflict = "InterOperatorGroupOwnerConflict",
        /// `CannotModifyStaticOperatorGroupProvidedAPIs`.
        CannotModifyStaticOperatorGroupProvidedApis = "CannotModifyStaticOperatorGroupProvidedAPIs",
        /// `DetectedClusterChange`.
        DetectedClusterChange = "DetectedClusterChange",
        /// `InvalidWebhookDescription`.
        InvalidWebhookDescription = "InvalidWebhookDescription",
        /// `OperatorConditionNotUpgradeable`.
        OperatorConditionNotUpgradeable = "OperatorConditionNotUpgradeable",
        /// `WaitingOnCleanup`.
        WaitingOnCleanup = "WaitingOnCleanup",
    }
}

/// `status.requirementStatus[]` (OLM `RequirementStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequirementStatus {
    /// API group of the requirement.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind (e.g. `CustomResourceDefinition`, `ServiceAccount`).
    pub kind: String,
    /// Name.
    pub name: String,
    /// Result of the check.
    pub status: RequirementStatusReason,
    /// Human-readable details (required by OLM's schema; may be empty).
    pub message: String,
    /// UID of the object found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Dependent checks (e.g. each permission of a ServiceAccount).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<DependentStatus>,
}

/// `status.requirementStatus[].dependents[]` (OLM `DependentStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependentStatus {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// `Satisfied` or `NotSatisfied`.
    pub status: RequirementStatusReason,
    /// UID of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Human-readable details (e.g. the rule that is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

open_enum! {
    /// Requirement and dependent statuses (OLM `StatusReason`).
    pub enum RequirementStatusReason {
        /// The requirement is present.
        Present = "Present",
        /// The requirement is missing.
        NotPresent = "NotPresent",
        /// Present, but a dependent is not satisfied.
        PresentNotSatisfied = "PresentNotSatisfied",
        /// Present, but not available (e.g. a CRD not Established).
        PresentNotAvailable = "PresentNotAvailable",
        /// A dependent is satisfied.
        Satisfied = "Satisfied",
        /// A dependent is not satisfied.
        NotSatisfied = "NotSatisfied",
        /// An owned APIService's Deployment is in the install strategy.
        DeploymentFound = "DeploymentFound",
        /// An owned APIService's Deployment is not in the install strategy.
        DeploymentNotFound = "DeploymentNotFound",
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by `open_enum!`
impl Default for RequirementStatusReason {
    fn default() -> Self {
        RequirementStatusReason::NotPresent
    }
}

/// `status.cleanup` as OLM's Go type writes it: always present, `{}` when nothing is pending
/// (`CleanupStatus` is a struct field with `omitempty`, which Go's `encoding/json` never omits).
fn cleanup_as_go_writes_it<S: serde::Serializer>(c: &Option<CleanupStatus>, s: S) -> Result<S::Ok, S::Error> {
    c.clone().unwrap_or_default().serialize(s)
}

/// `status.cleanup` (OLM `CleanupStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupStatus {
    /// Resources still to be deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_deletion: Vec<ResourceList>,
}

/// `status.cleanup.pendingDeletion[]` (OLM `ResourceList`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceList {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Instances.
    pub instances: Vec<ResourceInstance>,
}

/// `status.cleanup.pendingDeletion[].instances[]` (OLM `ResourceInstance`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceInstance {
    /// Name.
    pub name: String,
    /// Namespace (empty for cluster-scoped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// How many entries of the phase history (`status.conditions`) are kept.
pub const CSV_CONDITION_HISTORY: usize = 20;

impl ClusterServiceVersionStatus {
    /// Enters `phase` with `reason` and `message` at `now`: on a phase change also
    /// `lastTransitionTime` and a history entry (the last [`CSV_CONDITION_HISTORY`] kept), as
    /// OLM's `SetPhaseWithEvent` does.
    pub fn set_phase(&mut self, phase: CsvPhase, reason: CsvReason, message: &str, now: &Time) {
        if self.phase.as_ref() != Some(&phase) {
            self.last_transition_time = Some(now.clone());
            self.conditions.push(ClusterServiceVersionCondition {
                phase: Some(phase.clone()),
                message: Some(message.to_string()),
                reason: Some(reason.clone()),
                last_update_time: Some(now.clone()),
                last_transition_time: Some(now.clone()),
            });
            let extra = self.conditions.len().saturating_sub(CSV_CONDITION_HISTORY);
            self.conditions.drain(..extra);
        }
        self.phase = Some(phase);
        self.reason = Some(reason);
        self.message = Some(message.to_string());
        self.last_update_time = Some(now.clone());
    }

    /// Phase `Failed` with `reason` and `message` (see [`ClusterServiceVersionStatus::set_phase`]).
    pub fn fail(&mut self, reason: CsvReason, message: &str, now: &Time) {
        self.set_phase(CsvPhase::Failed, reason, message, now);
    }
}

impl ClusterServiceVersion {
    /// Whether the CSV declares webhooks (`spec.webhookdefinitions`) or owned APIServices
    /// (`spec.apiservicedefinitions.owned`), i.e. has serving certificates and objects the
    /// cluster calls (`install::webhook`).
    pub fn serves_webhooks_or_apiservices(&self) -> bool {
        self.spec.webhookdefinitions.as_ref().is_some_and(|w| !w.is_empty())
            || self.spec.apiservicedefinitions.as_ref().and_then(|a| a.owned.as_ref()).is_some_and(|o| !o.is_empty())
    }

    /// The `olm.skipRange` metadata annotation, if any.
    pub fn skip_range(&self) -> Option<&str> {
        self.metadata.annotations.as_ref()?.get(SKIP_RANGE_ANNOTATION).map(String::as_str)
    }

    /// Whether the CSV declares `type` as supported in `spec.installModes` (an omitted type is
    /// unsupported).
    pub fn supports_install_mode(&self, type_: &InstallModeType) -> bool {
        self.spec.install_modes.iter().flatten().any(|m| &m.type_ == type_ && m.supported)
    }

    /// Names of the owned CRDs (`spec.customresourcedefinitions.owned[].name`).
    pub fn owned_crd_names(&self) -> impl Iterator<Item = &str> {
        self.spec.customresourcedefinitions.iter().flat_map(|c| c.owned.iter().flatten()).map(|d| d.name.as_str())
    }

    /// The phase, `None` before any status.
    pub fn phase(&self) -> Option<&CsvPhase> {
        self.status.as_ref()?.phase.as_ref()
    }

    /// Owned and required CRD descriptions, one per CRD name (an owned one wins over a required
    /// one of the same name), sorted by name (OLM `GetAllCRDDescriptions`, which
    /// `status.requirementStatus` lists one entry per).
    pub fn all_crd_descriptions(&self) -> Vec<&CrdDescription> {
        let mut set: BTreeMap<&str, &CrdDescription> = BTreeMap::new();
        let c = self.spec.customresourcedefinitions.as_ref();
        for d in c.iter().flat_map(|c| c.required.iter().flatten()) {
            set.insert(&d.name, d);
        }
        for d in c.iter().flat_map(|c| c.owned.iter().flatten()) {
            set.insert(&d.name, d);
        }
        set.into_values().collect()
    }

    /// The `spec.minKubeVersion` requirement against the API server's `gitVersion` (OLM
    /// `minKubeVersionStatus`, `requirements.go`): `None` when the CSV sets none; otherwise whether
    /// it is met and the `requirementStatus` entry (kind `ClusterServiceVersion`, the CSV's name,
    /// OLM's messages). Versions are read as OLM's semver library reads them: a leading `v`
    /// dropped, the server's `-…` suffix cut, missing minor/patch parts zero. `server` is the
    /// server's `gitVersion`, or `Err` when it could not be asked.
    pub fn min_kube_version_status(&self, server: Result<&str, ()>) -> Option<(bool, RequirementStatus)> {
        let min = self.spec.min_kube_version.as_deref().filter(|m| !m.is_empty())?;
        let entry = |status: RequirementStatusReason, message: String| RequirementStatus {
            group: "operators.coreos.com".into(),
            version: "v1alpha1".into(),
            kind: "ClusterServiceVersion".into(),
            name: self.metadata.name.clone().unwrap_or_default(),
            status,
            message,
            uuid: None,
            dependents: Vec::new(),
        };
        let fail = |m: &str| Some((false, entry(RequirementStatusReason::PresentNotSatisfied, m.into())));
        let Ok(git) = server else { return fail("Server version discovery error") };
        let Some(sv) = loose_version(git.trim_start_matches('v').split('-').next().unwrap_or_default()) else {
            return fail("Server version parsing error");
        };
        let Some(mv) = loose_version(min.trim_start_matches('v')) else { return fail("CSV version parsing error") };
        let shown = format!("{}.{}.{}", sv.0, sv.1, sv.2);
        if mv > sv {
            return Some((
                false,
                entry(
                    RequirementStatusReason::PresentNotSatisfied,
                    format!("CSV version requirement not met: minKubeVersion ({min}) > server version ({shown})"),
                ),
            ));
        }
        Some((
            true,
            entry(
                RequirementStatusReason::Present,
                format!("CSV minKubeVersion ({min}) less than server version ({git})"),
            ),
        ))
    }
}

/// `major[.minor[.patch]]` with an optional `+build` or `-pre` part ignored, as numbers.
fn loose_version(s: &str) -> Option<(u64, u64, u64)> {
    let core = s.split(['+', '-']).next()?;
    let mut parts = core.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map(str::parse).transpose().ok()?.unwrap_or(0);
    let patch = parts.next().map(str::parse).transpose().ok()?.unwrap_or(0);
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

/// Schema of `spec.release` as in OLM's CRD (operator-framework/api v0.45.0,
/// `pkg/lib/release/release.go`: `MaxLength=20` and two `XValidation` rules): dot-separated
/// identifiers of alphanumerics and hyphens, numeric ones without leading zeros.
fn release_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Packaging release of this version (semver pre-release syntax, at most 20 characters): builds of one version that differ only in metadata.",
        "type": "string",
        "nullable": true,
        "maxLength": 20,
        "x-kubernetes-validations": [
            {
                "rule": "self.matches('^[0-9A-Za-z-]+(\\\\.[0-9A-Za-z-]+)*$')",
                "message": "release version must be composed of dot-separated identifiers containing only alphanumerics and hyphens"
            },
            {
                "rule": "!self.split('.').exists(x, x.matches('^0[0-9]+$'))",
                "message": "numeric identifiers in release version must not have leading zeros"
            }
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_descriptions_once_each_owned_first_sorted() {
        let c = csv(
            serde_json::json!({"displayName": "x", "install": {"strategy": "deployment"}, "customresourcedefinitions": {
            "owned": [{"name": "b.example.com", "version": "v1", "kind": "B"}, {"name": "a.example.com", "version": "v2", "kind": "A"}],
            "required": [{"name": "a.example.com", "version": "v1", "kind": "A"}, {"name": "c.example.com", "version": "v1", "kind": "C"}]}}),
            serde_json::json!({}),
        );
        let got: Vec<(&str, &str)> =
            c.all_crd_descriptions().iter().map(|d| (d.name.as_str(), d.version.as_str())).collect();
        assert_eq!(got, [("a.example.com", "v2"), ("b.example.com", "v1"), ("c.example.com", "v1")]);
    }

    #[test]
    fn min_kube_version_as_olm_checks_it() {
        let with = |m: &str| {
            csv(
                serde_json::json!({"displayName": "x", "install": {"strategy": "deployment"}, "minKubeVersion": m}),
                serde_json::json!({}),
            )
        };
        assert!(with("").min_kube_version_status(Ok("v1.36.3")).is_none());
        let (met, e) = with("1.20.0").min_kube_version_status(Ok("v1.36.3")).unwrap();
        assert!(met);
        assert_eq!(e.message, "CSV minKubeVersion (1.20.0) less than server version (v1.36.3)");
        assert_eq!((e.kind.as_str(), e.name.as_str()), ("ClusterServiceVersion", "op.v1.0.0"));
        let (met, e) = with("1.37").min_kube_version_status(Ok("v1.36.3")).unwrap();
        assert!(!met);
        assert_eq!(e.message, "CSV version requirement not met: minKubeVersion (1.37) > server version (1.36.3)");
        assert!(with("v1.36.3").min_kube_version_status(Ok("v1.36.3-rc.1+abc")).unwrap().0, "equal is met");
        assert!(!with("1.2").min_kube_version_status(Ok("v0.0.0-master+$Format:%H$")).unwrap().0);
        assert_eq!(with("x.y").min_kube_version_status(Ok("v1.36.3")).unwrap().1.message, "CSV version parsing error");
        assert_eq!(with("1.2").min_kube_version_status(Err(())).unwrap().1.message, "Server version discovery error");
    }

    fn csv(spec: serde_json::Value, annotations: serde_json::Value) -> ClusterServiceVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "op.v1.0.0", "annotations": annotations}, "spec": spec
        }))
        .expect("CSV")
    }

    #[test]
    fn deployment_spec_converts_or_names_the_deployment() {
        let good = StrategyDeploymentSpec {
            name: "op".into(),
            spec: serde_json::json!({"selector": {"matchLabels": {"a": "b"}}, "replicas": 2,
                "template": {"metadata": {"labels": {"a": "b"}, "creationTimestamp": null},
                             "spec": {"containers": [{"name": "c", "image": "i"}]}}}),
            label: None,
        };
        let d = good.deployment_spec().expect("valid DeploymentSpec");
        assert_eq!(d.replicas, Some(2));
        let bad =
            StrategyDeploymentSpec { name: "broken".into(), spec: serde_json::json!({"replicas": "two"}), label: None };
        let e = bad.deployment_spec().expect_err("invalid");
        assert!(e.to_string().contains("deployments[name=broken]"), "{e}");
    }

    #[test]
    fn install_modes_and_owned_crds() {
        let c = csv(
            serde_json::json!({"displayName": "Op", "install": {"strategy": "deployment"},
                "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "AllNamespaces", "supported": false}],
                "customresourcedefinitions": {"owned": [{"name": "as.example.com", "version": "v1", "kind": "A"}],
                                              "required": [{"name": "bs.example.com", "version": "v1", "kind": "B"}]}}),
            serde_json::json!({"olm.skipRange": ">=0.9.0 <1.0.0"}),
        );
        assert!(c.supports_install_mode(&InstallModeType::OwnNamespace));
        assert!(!c.supports_install_mode(&InstallModeType::AllNamespaces), "supported: false");
        assert!(!c.supports_install_mode(&InstallModeType::MultiNamespace), "omitted means unsupported");
        assert_eq!(c.owned_crd_names().collect::<Vec<_>>(), ["as.example.com"]);
        assert_eq!(c.skip_range(), Some(">=0.9.0 <1.0.0"));
        assert_eq!(c.phase(), None);
    }

    #[test]
    fn explicit_nulls_and_unknown_keys_in_preserved_subtrees_survive() {
        let spec = serde_json::json!({"displayName": "Op", "install": {"strategy": "deployment"},
            "customresourcedefinitions": {"owned": [{"name": "as.example.com", "version": "v1", "kind": "A",
                "resources": null, "specDescriptors": [{"path": "size", "x-descriptors": ["urn:x"], "value": 3}]}]},
            "support": "Example Inc.", "icon": [{"base64data": "", "mediatype": "image/png"}]});
        let c = csv(spec.clone(), serde_json::json!({}));
        let owned = &c.spec.customresourcedefinitions.as_ref().unwrap().owned.as_ref().unwrap()[0];
        assert_eq!(owned.resources, Some(serde_json::Value::Null));
        assert_eq!(c.spec.extra.get("support"), Some(&serde_json::json!("Example Inc.")));
        assert_eq!(serde_json::to_value(&c).unwrap()["spec"], spec);
    }

    #[test]
    fn status_phases_reasons_and_requirements_use_olm_strings() {
        let st: ClusterServiceVersionStatus = serde_json::from_value(serde_json::json!({
            "phase": "Succeeded", "reason": "InstallSucceeded",
            "conditions": [{"phase": "Pending", "reason": "RequirementsUnknown"}, {"phase": "Succeeded", "reason": "InstallSucceeded"}],
            "requirementStatus": [{"group": "", "version": "v1", "kind": "ServiceAccount", "name": "sa",
                                   "status": "Present", "message": "", "dependents": [{"group": "rbac.authorization.k8s.io",
                                   "version": "v1", "kind": "PolicyRule", "status": "Satisfied"}]}]
        }))
        .expect("status");
        assert_eq!(st.phase, Some(CsvPhase::Succeeded));
        assert_eq!(st.reason, Some(CsvReason::InstallSucceeded));
        assert_eq!(st.conditions[0].reason, Some(CsvReason::RequirementsUnknown));
        assert_eq!(st.requirement_status[0].dependents[0].status, RequirementStatusReason::Satisfied);
        assert_eq!(
            CsvReason::CannotModifyStaticOperatorGroupProvidedApis.as_str(),
            "CannotModifyStaticOperatorGroupProvidedAPIs"
        );
        assert_eq!(CsvReason::KNOWN.len(), 30, "OLM's complete list of CSV reasons");
    }
}
