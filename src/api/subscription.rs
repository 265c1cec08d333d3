//! `Subscription` (`operators.coreos.com/v1alpha1`): keeps an operator installed and up to date
//! from a catalog (`reference/olm-v0.md` §1.3; upstream `pkg/operators/v1alpha1/subscription_types.go`).

// kube's repeated `printcolumn(type_ = "string", …)` arguments are not duplicate attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ObjectReference, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Approval, ConditionStatus};

/// Spec of a Subscription (`SubscriptionSpec`). Required: `name`, `source`, `sourceNamespace`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "Subscription",
    namespaced,
    status = "SubscriptionStatus",
    shortname = "sub",
    shortname = "subs",
    category = "olm",
    derive = "PartialEq",
    doc = "Subscription keeps operators up to date by tracking changes to Catalogs.",
    printcolumn(
        name = "Package",
        type_ = "string",
        json_path = ".spec.name",
        description = "The package subscribed to"
    ),
    printcolumn(
        name = "Source",
        type_ = "string",
        json_path = ".spec.source",
        description = "The catalog source for the specified package"
    ),
    printcolumn(
        name = "Channel",
        type_ = "string",
        json_path = ".spec.channel",
        description = "The channel of updates to subscribe to"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// Name of the CatalogSource to install from.
    pub source: String,
    /// Namespace of that CatalogSource: the Subscription's own namespace or the global catalog
    /// namespace.
    pub source_namespace: String,
    /// The package name (OLM JSON name `name`, Go field `Package`).
    #[serde(rename = "name")]
    pub package: String,
    /// Channel to follow; empty or absent means any channel, preferring the package's default channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Exact CSV name to install first; only used while nothing is installed yet.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "startingCSV")]
    pub starting_csv: Option<String>,
    /// `Automatic` (default) or `Manual` approval of the InstallPlans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_approval: Option<Approval>,
    /// Settings injected into the operator's Deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<SubscriptionConfig>,
    /// capstan addition: a semver range the installed version must satisfy, in the syntax of
    /// OLM v1's `version` (Masterminds/semver v3 constraints: `>=1.2.0 <2.0.0`, `>=1.2, <2`,
    /// `~1.4`, `^1.2`, `1.2.x`, `||` alternatives, or an exact version to pin; parsed by
    /// `capstan::catalog::semver_range` with the OLM v1 dialect). Absent: any version. OLM v0
    /// ignores the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_range: Option<String>,
}

/// `spec.config` (OLM `SubscriptionConfig`, `doc/design/subscription-config.md`): injected into
/// every Deployment the CSV creates. Merge rules: `reference/olm-v0.md` §1.3.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionConfig {
    /// Label selector for the operator's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Overwrites the pods' node selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Appended to the pods' tolerations unless an identical one exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// When set, replaces the resources of every container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Appended to every container's `envFrom` unless an identical entry exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// Set on every container, overwriting variables of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Added to the pods, overwriting volumes of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    /// Added to every container, overwriting mounts of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// Overwrites the pods' affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Added to the Deployments' pod templates (and APIServices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// Status of a Subscription (`SubscriptionStatus`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The CSV the Subscription is progressing to (the newest known).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "currentCSV")]
    pub current_csv: Option<String>,
    /// The CSV actually installed.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "installedCSV")]
    pub installed_csv: Option<String>,
    /// Deprecated reference to the latest InstallPlan (OLM JSON name `installplan`).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "installplan")]
    pub installplan: Option<InstallPlanReference>,
    /// Upgrade state; absent means none yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SubscriptionState>,
    /// Reason of the state (e.g. `InvalidCatalog`, `UpgradeSucceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Generation of the latest InstallPlan (`spec.generation` of that plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_generation: Option<i64>,
    /// Reference to the latest InstallPlan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_ref: Option<ObjectReference>,
    /// Health of every catalog visible to the Subscription (own namespace and global namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub catalog_health: Vec<SubscriptionCatalogHealth>,
    /// Conditions: `CatalogSourcesUnhealthy`, `InstallPlanMissing`, `InstallPlanPending`,
    /// `InstallPlanFailed`, `ResolutionFailed`, `BundleUnpacking`, `BundleUnpackFailed`, `Deprecated`,
    /// `PackageDeprecated`, `ChannelDeprecated`, `BundleDeprecated`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<SubscriptionCondition>,
    /// When the status was last updated (required by OLM's schema).
    pub last_updated: Time,
}

open_enum! {
    /// `status.state` of a Subscription (OLM `SubscriptionState`; `reference/olm-v0.md` §1.3).
    pub enum SubscriptionState {
        /// `UpgradeAvailable` (defined by OLM, never written by current OLM).
        UpgradeAvailable = "UpgradeAvailable",
        /// `UpgradePending`: an InstallPlan for `currentCSV` exists, the CSV is not installed yet.
        UpgradePending = "UpgradePending",
        /// `AtLatestKnown`: `currentCSV` is installed.
        AtLatestKnown = "AtLatestKnown",
        /// `UpgradeFailed`: the InstallPlan failed.
        UpgradeFailed = "UpgradeFailed",
    }
}

/// `status.installplan` (OLM `InstallPlanReference`, deprecated).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanReference {
    /// `operators.coreos.com/v1alpha1`.
    pub api_version: String,
    /// `InstallPlan`.
    pub kind: String,
    /// InstallPlan name.
    pub name: String,
    /// InstallPlan UID (OLM JSON name `uuid`).
    #[serde(rename = "uuid")]
    pub uuid: String,
}

/// An entry of `status.catalogHealth` (OLM `SubscriptionCatalogHealth`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCatalogHealth {
    /// The CatalogSource.
    pub catalog_source_ref: ObjectReference,
    /// When its health was last checked.
    pub last_updated: Time,
    /// Whether it is serving.
    pub healthy: bool,
}

/// A Subscription condition (OLM `SubscriptionCondition`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCondition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: SubscriptionConditionType,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// One-word CamelCase reason (e.g. `ConstraintsNotSatisfiable`, `AllCatalogSourcesHealthy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable details (for `ResolutionFailed`, the resolver's explanation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Last time the condition was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    /// Last time the status changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

open_enum! {
    /// Subscription condition types (OLM `SubscriptionConditionType`; `reference/olm-v0.md` §1.3).
    pub enum SubscriptionConditionType {
        /// Some visible catalog is unhealthy (`True`), or all are healthy (`False`).
        CatalogSourcesUnhealthy = "CatalogSourcesUnhealthy",
        /// The referenced InstallPlan does not exist.
        InstallPlanMissing = "InstallPlanMissing",
        /// The InstallPlan is not complete yet (reason: its phase).
        InstallPlanPending = "InstallPlanPending",
        /// The InstallPlan failed.
        InstallPlanFailed = "InstallPlanFailed",
        /// Resolution failed; the message explains why.
        ResolutionFailed = "ResolutionFailed",
        /// A bundle is being unpacked.
        BundleUnpacking = "BundleUnpacking",
        /// Unpacking a bundle failed.
        BundleUnpackFailed = "BundleUnpackFailed",
        /// Roll-up of the three deprecation conditions.
        Deprecated = "Deprecated",
        /// The package is deprecated in the catalog.
        PackageDeprecated = "PackageDeprecated",
        /// The channel is deprecated in the catalog.
        ChannelDeprecated = "ChannelDeprecated",
        /// The installed bundle is deprecated in the catalog.
        BundleDeprecated = "BundleDeprecated",
    }
}

/// Reasons OLM writes on Subscriptions (`status.reason` and condition reasons; `reference/olm-v0.md` §1.3).
pub mod reason {
    /// `status.reason`: the catalog is invalid.
    pub const INVALID_CATALOG: &str = "InvalidCatalog";
    /// `status.reason`: the upgrade succeeded.
    pub const UPGRADE_SUCCEEDED: &str = "UpgradeSucceeded";
    /// `CatalogSourcesUnhealthy`: no catalog is visible.
    pub const NO_CATALOG_SOURCES_FOUND: &str = "NoCatalogSourcesFound";
    /// `CatalogSourcesUnhealthy` = False: all catalogs are healthy.
    pub const ALL_CATALOG_SOURCES_HEALTHY: &str = "AllCatalogSourcesHealthy";
    /// `CatalogSourcesUnhealthy`: catalogs were added.
    pub const CATALOG_SOURCES_ADDED: &str = "CatalogSourcesAdded";
    /// `CatalogSourcesUnhealthy`: catalogs were updated.
    pub const CATALOG_SOURCES_UPDATED: &str = "CatalogSourcesUpdated";
    /// `CatalogSourcesUnhealthy`: catalogs were deleted.
    pub const CATALOG_SOURCES_DELETED: &str = "CatalogSourcesDeleted";
    /// `CatalogSourcesUnhealthy` = True: some catalog is unhealthy.
    pub const UNHEALTHY_CATALOG_SOURCE_FOUND: &str = "UnhealthyCatalogSourceFound";
    /// `InstallPlanMissing`.
    pub const REFERENCED_INSTALL_PLAN_NOT_FOUND: &str = "ReferencedInstallPlanNotFound";
    /// `InstallPlanPending` before the plan has a phase.
    pub const INSTALL_PLAN_NOT_YET_RECONCILED: &str = "InstallPlanNotYetReconciled";
    /// `InstallPlanFailed` when the plan's `Installed` condition has no reason.
    pub const INSTALL_PLAN_FAILED: &str = "InstallPlanFailed";
    /// `ResolutionFailed`: the constraints cannot be satisfied.
    pub const CONSTRAINTS_NOT_SATISFIABLE: &str = "ConstraintsNotSatisfiable";
    /// `ResolutionFailed`: an error (not unsatisfiability) prevented resolution.
    pub const ERROR_PREVENTED_RESOLUTION: &str = "ErrorPreventedResolution";
    /// `BundleUnpacking`.
    pub const UNPACKING_IN_PROGRESS: &str = "UnpackingInProgress";
    /// `BundleUnpackFailed`.
    pub const BUNDLE_UNPACK_FAILED: &str = "BundleUnpackFailed";
    /// `BundleUnpackFailed`: an error prevented unpacking.
    pub const ERROR_PREVENTED_UNPACKING: &str = "ErrorPreventedUnpacking";
    /// `BundleUnpackFailed`: the InstallPlan could not be ensured.
    pub const ENSURE_INSTALL_PLAN_FAILED: &str = "EnsureInstallPlanFailed";
}

impl Subscription {
    /// The effective approval: `spec.installPlanApproval`, `Automatic` when absent.
    pub fn approval(&self) -> Approval {
        self.spec.install_plan_approval.unwrap_or_default()
    }

    /// The channel asked for, `None` when absent or empty (any channel, default preferred).
    pub fn channel(&self) -> Option<&str> {
        self.spec.channel.as_deref().filter(|c| !c.is_empty())
    }
}

impl SubscriptionStatus {
    /// An empty status last updated at `now`.
    pub fn new(now: Time) -> Self {
        SubscriptionStatus {
            current_csv: None,
            installed_csv: None,
            installplan: None,
            state: None,
            reason: None,
            install_plan_generation: None,
            install_plan_ref: None,
            catalog_health: Vec::new(),
            conditions: Vec::new(),
            last_updated: now,
        }
    }

    /// The condition of the given type, if present.
    pub fn condition(&self, type_: &SubscriptionConditionType) -> Option<&SubscriptionCondition> {
        self.conditions.iter().find(|c| &c.type_ == type_)
    }

    /// Sets condition `type_` to `status` with `reason` and `message`; the `lastTransitionTime`
    /// changes only when the status does (a new condition gets `now`). No `lastHeartbeatTime`:
    /// OLM v0 never writes one on a Subscription (`make compare-olm`), and `lastUpdated` says when
    /// the status was last computed.
    pub fn set_condition(
        &mut self,
        type_: SubscriptionConditionType,
        status: ConditionStatus,
        reason: &str,
        message: &str,
        now: &Time,
    ) {
        match self.conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = Some(now.clone());
                }
                c.status = status;
                c.reason = Some(reason.to_string());
                c.message = Some(message.to_string());
                c.last_heartbeat_time = None;
            }
            None => self.conditions.push(SubscriptionCondition {
                type_,
                status,
                reason: Some(reason.to_string()),
                message: Some(message.to_string()),
                last_heartbeat_time: None,
                last_transition_time: Some(now.clone()),
            }),
        }
    }

    /// Sets condition `type_` to `True` with `reason` and `message` (a problem the condition
    /// reports: `ResolutionFailed`, `InstallPlanFailed`, `CatalogSourcesUnhealthy`, …).
    pub fn fail(&mut self, type_: SubscriptionConditionType, reason: &str, message: &str, now: &Time) {
        self.set_condition(type_, ConditionStatus::True, reason, message, now);
    }

    /// Removes condition `type_`.
    pub fn remove_condition(&mut self, type_: &SubscriptionConditionType) {
        self.conditions.retain(|c| &c.type_ != type_);
    }

    /// Whether `other` says the same as `self`, heartbeats and update times aside
    /// (`lastUpdated`, `catalogHealth[].lastUpdated`, conditions' `lastHeartbeatTime`): a
    /// reconcile that would only move those writes nothing.
    pub fn same_as(&self, other: &SubscriptionStatus) -> bool {
        fn strip(s: &SubscriptionStatus) -> SubscriptionStatus {
            let mut s = s.clone();
            s.last_updated = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
            for h in &mut s.catalog_health {
                h.last_updated = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
            }
            for c in &mut s.conditions {
                c.last_heartbeat_time = None;
            }
            s
        }
        strip(self) == strip(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(spec: serde_json::Value) -> Subscription {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "s", "namespace": "ns"}, "spec": spec
        }))
        .expect("Subscription")
    }

    #[test]
    fn olm_json_names_map_to_the_fields() {
        let s = sub(serde_json::json!({"name": "etcd", "source": "operatorhubio-catalog", "sourceNamespace": "olm",
            "channel": "", "startingCSV": "etcdoperator.v0.9.2", "versionRange": ">=0.9 <1"}));
        assert_eq!(s.spec.package, "etcd");
        assert_eq!(s.spec.starting_csv.as_deref(), Some("etcdoperator.v0.9.2"));
        assert_eq!(s.channel(), None, "an empty channel means any channel");
        assert_eq!(s.approval(), Approval::Automatic, "absent approval is Automatic");
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["spec"]["name"], "etcd");
        assert_eq!(v["spec"]["startingCSV"], "etcdoperator.v0.9.2");
        assert_eq!(v["spec"]["versionRange"], ">=0.9 <1");
        assert!(v["spec"].get("package").is_none());
    }

    #[test]
    fn missing_required_fields_are_named() {
        let err = serde_json::from_value::<Subscription>(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "s"}, "spec": {"name": "etcd", "source": "c"}
        }))
        .expect_err("sourceNamespace is required");
        assert!(err.to_string().contains("sourceNamespace"), "{err}");
    }

    #[test]
    fn status_uses_olm_names_and_condition_types() {
        let st: SubscriptionStatus = serde_json::from_value(serde_json::json!({
            "currentCSV": "a.v2", "installedCSV": "a.v1", "state": "AtLatestKnown", "lastUpdated": "2026-01-01T00:00:00Z",
            "installplan": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "name": "ip", "uuid": "u"},
            "conditions": [{"type": "ResolutionFailed", "status": "True", "reason": "ConstraintsNotSatisfiable",
                            "message": "no operators found in package x"},
                           {"type": "SomethingNewer", "status": "Unknown"}]
        }))
        .expect("status");
        assert_eq!(st.state, Some(SubscriptionState::AtLatestKnown));
        let rf = st.condition(&SubscriptionConditionType::ResolutionFailed).expect("condition");
        assert_eq!(rf.reason.as_deref(), Some(reason::CONSTRAINTS_NOT_SATISFIABLE));
        assert_eq!(st.conditions[1].type_, SubscriptionConditionType::Other("SomethingNewer".into()));
        let v = serde_json::to_value(&st).unwrap();
        assert_eq!(v["currentCSV"], "a.v2");
        assert_eq!(v["installedCSV"], "a.v1");
        assert_eq!(v["installplan"]["uuid"], "u");
        assert!(v.get("catalogHealth").is_none(), "empty lists are omitted like OLM's omitempty");
    }

    fn at(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn conditions_keep_transition_time_while_status_is_unchanged() {
        use SubscriptionConditionType::ResolutionFailed as RF;
        let mut st = SubscriptionStatus::new(at("2020-01-01T00:00:00Z"));
        st.fail(RF, "r", "m1", &at("2020-01-01T00:00:00Z"));
        st.fail(RF, "r", "m2", &at("2020-01-02T00:00:00Z"));
        let c = st.condition(&RF).unwrap();
        assert_eq!(c.last_transition_time, Some(at("2020-01-01T00:00:00Z")));
        assert_eq!(c.last_heartbeat_time, None, "OLM writes no heartbeat");
        assert_eq!(c.message.as_deref(), Some("m2"));
        st.set_condition(RF, ConditionStatus::False, "r", "ok", &at("2020-01-03T00:00:00Z"));
        assert_eq!(st.condition(&RF).unwrap().last_transition_time, Some(at("2020-01-03T00:00:00Z")));
        let before = st.clone();
        st.last_updated = at("2021-01-01T00:00:00Z");
        st.set_condition(RF, ConditionStatus::False, "r", "ok", &at("2021-01-01T00:00:00Z"));
        assert!(st.same_as(&before), "only heartbeats moved");
        st.remove_condition(&RF);
        assert!(st.conditions.is_empty());
        assert!(!st.same_as(&before));
    }
}
