//! `OLMConfig` (`operators.coreos.com/v1`, cluster-scoped): the lifecycle manager's own settings,
//! one object named `cluster` (upstream `operator-framework/api` `pkg/operators/v1/olmconfig_types.go`;
//! OLM v0.46.0 `pkg/controller/operators/olm/operator.go`, `syncOLMConfig`, `copiedCSVsAreEnabled`).
//!
//! capstan reads `spec.features.disableCopiedCSVs` (whether CSVs of groups that target all
//! namespaces are copied into every namespace, [`OlmConfig::copied_csvs_are_enabled`]) and writes
//! the `DisabledCopiedCSVs` status condition as OLM does. `packageServerSyncInterval` is kept as
//! written (it tunes OLM's packageserver pods; capstan serves PackageManifests from its own
//! catalog cache).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The one OLMConfig the lifecycle manager reads (OLM: `cluster`).
pub const NAME: &str = "cluster";

/// The status condition about copied CSVs (OLM `operatorsv1.DisabledCopiedCSVsConditionType`).
pub const DISABLED_COPIED_CSVS: &str = "DisabledCopiedCSVs";

/// Spec of an OLMConfig.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OLMConfig",
    root = "OlmConfig",
    plural = "olmconfigs",
    status = "OlmConfigStatus",
    category = "olm",
    derive = "PartialEq",
    derive = "Default",
    doc = "OLMConfig is a resource responsible for configuring OLM."
)]
#[serde(rename_all = "camelCase")]
pub struct OlmConfigSpec {
    /// Features that may be turned off or tuned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
}

/// `spec.features` of an OLMConfig.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// `true` stops the copies of CSVs installed in an OperatorGroup that targets all namespaces
    /// (copies into the targets of other groups are always made, as in OLM). Unset: copies made.
    #[serde(default, rename = "disableCopiedCSVs", skip_serializing_if = "Option::is_none")]
    pub disable_copied_csvs: Option<bool>,
    /// OLM's packageserver sync period (a Go duration of `h`, `m` and `s`); kept, not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(s|m|h))+$"))]
    pub package_server_sync_interval: Option<String>,
}

/// Status of an OLMConfig: the `DisabledCopiedCSVs` condition ([`DISABLED_COPIED_CSVS`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OlmConfigStatus {
    /// Conditions, by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl OlmConfig {
    /// Whether CSVs of groups that target all namespaces are copied (OLM
    /// `OLMConfig.CopiedCSVsAreEnabled`): unless `spec.features.disableCopiedCSVs` is `true`.
    pub fn copied_csvs_are_enabled(&self) -> bool {
        self.spec.features.as_ref().and_then(|f| f.disable_copied_csvs) != Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_on_unless_disabled_explicitly() {
        let with = |v: serde_json::Value| -> OlmConfig {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "cluster"}, "spec": v})).unwrap()
        };
        assert!(with(serde_json::json!({})).copied_csvs_are_enabled());
        assert!(with(serde_json::json!({"features": {}})).copied_csvs_are_enabled());
        assert!(with(serde_json::json!({"features": {"disableCopiedCSVs": false}})).copied_csvs_are_enabled());
        assert!(!with(serde_json::json!({"features": {"disableCopiedCSVs": true}})).copied_csvs_are_enabled());
    }
}
