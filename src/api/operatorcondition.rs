//! `OperatorCondition` (`operators.coreos.com/v2`, also served as `v1`): how an operator tells the
//! lifecycle manager whether it may be upgraded now (upstream `operator-framework/api`
//! `pkg/operators/v2/operatorcondition_types.go`, `v1/operatorcondition_types.go`; OLM v0.38.0
//! `pkg/controller/operators/operatorcondition{,generator}_controller.go`,
//! `olm/operatorconditions.go`).
//!
//! The lifecycle manager creates one per CSV, named like the CSV and controlled by it, with
//! `spec.deployments` and `spec.serviceAccounts` of the CSV's install strategy; the operator finds
//! it through the `OPERATOR_CONDITION_NAME` environment variable and sets
//! `spec.conditions` (v2; operator-lib's `conditions` package), which the manager copies to
//! `status.conditions` with the object's generation. An administrator may force a value with
//! `spec.overrides`. [`OperatorCondition::upgradeable`] is OLM's reading of the three.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The condition type that holds an upgrade when `False` (OLM `operatorsv2.Upgradeable`).
pub const UPGRADEABLE: &str = "Upgradeable";

/// The environment variable, set in every container of the CSV's Deployments, naming the
/// OperatorCondition (OLM `OperatorConditionEnvVarKey`).
pub const ENV_VAR: &str = "OPERATOR_CONDITION_NAME";

/// Spec of an OperatorCondition (`v2`, the stored version).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v2",
    kind = "OperatorCondition",
    namespaced,
    status = "OperatorConditionStatus",
    shortname = "condition",
    category = "olm",
    derive = "PartialEq",
    derive = "Default",
    doc = "OperatorCondition is a Custom Resource of type `OperatorCondition` which is used to convey information to OLM about the state of an operator."
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionSpec {
    /// The ServiceAccounts of the CSV's install strategy (`default` when it names none); they may
    /// get, update and patch this object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
    /// The CSV's Deployments; they get the `OPERATOR_CONDITION_NAME` variable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<String>,
    /// Conditions an administrator forces; an `Upgradeable` override wins over the operator's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Condition>,
    /// Conditions the operator reports (copied to `status.conditions` by the manager).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Status of an OperatorCondition: the conditions the manager has observed, each with the
/// generation it was copied at (`observedGeneration`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperatorConditionStatus {
    /// Observed conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl OperatorCondition {
    /// Whether the operator may be upgraded now (OLM `isOperatorUpgradeable`): an `Upgradeable`
    /// entry in `spec.overrides` decides alone; otherwise the `Upgradeable` status condition —
    /// read after copying `spec.conditions` in as OLM's OperatorCondition controller does
    /// ([`Self::synced_status_conditions`]), so an operator's `spec.conditions` counts at once —
    /// holds the upgrade when it is `False` or was observed at another generation than the
    /// object's. `Err(message)` says why, in OLM's words (`the operator is not upgradeable: …`).
    pub fn upgradeable(&self) -> Result<(), String> {
        if let Some(o) = self.spec.overrides.iter().find(|c| c.type_ == UPGRADEABLE) {
            return if o.status == "True" {
                Ok(())
            } else {
                Err(format!("the operator is not upgradeable: {}", o.message))
            };
        }
        let conditions = self
            .synced_status_conditions()
            .unwrap_or_else(|| self.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default());
        let Some(c) = conditions.iter().find(|c| c.type_ == UPGRADEABLE) else { return Ok(()) };
        if c.observed_generation != self.metadata.generation {
            return Err(format!("the operatorcondition status {:?}={:?} is outdated", c.type_, c.status));
        }
        if c.status == "False" {
            return Err(format!("the operator is not upgradeable: {}", c.message));
        }
        Ok(())
    }

    /// The status conditions after copying `spec.conditions` in at generation `generation` (OLM
    /// `syncOperatorConditionStatus`, `meta.SetStatusCondition`: a condition whose status changes
    /// gets `lastTransitionTime` from the spec entry, others keep theirs). `None` when nothing
    /// changes.
    pub fn synced_status_conditions(&self) -> Option<Vec<Condition>> {
        let generation = self.metadata.generation;
        let mut out = self.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
        let mut changed = false;
        for c in &self.spec.conditions {
            match out.iter_mut().find(|o| o.type_ == c.type_) {
                Some(o) if o.status == c.status && o.observed_generation == generation => {}
                Some(o) => {
                    if o.status != c.status {
                        o.status = c.status.clone();
                        o.last_transition_time = c.last_transition_time.clone();
                    }
                    o.reason = c.reason.clone();
                    o.message = c.message.clone();
                    o.observed_generation = generation;
                    changed = true;
                }
                None => {
                    let mut n = c.clone();
                    n.observed_generation = generation;
                    out.push(n);
                    changed = true;
                }
            }
        }
        changed.then_some(out)
    }
}

/// `operators.coreos.com/v1` OperatorCondition: served for operators written against it (v1
/// has no `spec.conditions`; operator-lib's v1 client sets `status.conditions` itself), not
/// stored. Read and write OperatorConditions as [`super::OperatorCondition`] (`v2`).
pub mod v1 {
    #![allow(clippy::duplicated_attributes)]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    pub use super::OperatorConditionStatus;

    /// Spec of a `v1` OperatorCondition: `v2`'s without `conditions`.
    #[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "operators.coreos.com",
        version = "v1",
        kind = "OperatorCondition",
        namespaced,
        status = "OperatorConditionStatus",
        shortname = "condition",
        category = "olm",
        derive = "PartialEq",
        storage = false,
        doc = "OperatorCondition is a Custom Resource of type `OperatorCondition` which is used to convey information to OLM about the state of an operator."
    )]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorConditionSpec {
        /// See [`super::OperatorConditionSpec::service_accounts`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub service_accounts: Vec<String>,
        /// See [`super::OperatorConditionSpec::deployments`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub deployments: Vec<String>,
        /// See [`super::OperatorConditionSpec::overrides`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub overrides: Vec<Condition>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn oc(v: serde_json::Value) -> OperatorCondition {
        serde_json::from_value(v).expect("OperatorCondition")
    }

    fn cond(status: &str, generation: i64, msg: &str) -> serde_json::Value {
        json!({"type": "Upgradeable", "status": status, "reason": "R", "message": msg, "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": generation})
    }

    #[test]
    fn upgradeable_reads_overrides_then_status_as_olm() {
        let meta = json!({"name": "op.v1", "namespace": "ns", "generation": 2});
        let base = |spec: serde_json::Value, status: serde_json::Value| {
            oc(
                json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition", "metadata": meta, "spec": spec, "status": status}),
            )
        };
        assert!(base(json!({}), json!({})).upgradeable().is_ok());
        let held = base(json!({}), json!({"conditions": [cond("False", 2, "migrating")]}));
        assert_eq!(held.upgradeable().unwrap_err(), "the operator is not upgradeable: migrating");
        assert!(base(json!({}), json!({"conditions": [cond("True", 2, "")]})).upgradeable().is_ok());
        // Status observed at an older generation: held, as OLM does.
        assert!(
            base(json!({}), json!({"conditions": [cond("True", 1, "")]}))
                .upgradeable()
                .unwrap_err()
                .contains("outdated")
        );
        // An override wins in both directions.
        assert!(
            base(
                json!({"overrides": [cond("True", 0, "admin says go")]}),
                json!({"conditions": [cond("False", 2, "no")]})
            )
            .upgradeable()
            .is_ok()
        );
        assert!(
            base(json!({"overrides": [cond("False", 0, "admin says wait")]}), json!({}))
                .upgradeable()
                .unwrap_err()
                .contains("admin says wait")
        );
    }

    #[test]
    fn spec_conditions_are_copied_to_status_with_the_generation() {
        let mut o = oc(json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": "op.v1", "namespace": "ns", "generation": 3},
            "spec": {"conditions": [cond("False", 0, "migrating")]}}));
        let s = o.synced_status_conditions().expect("changed");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].observed_generation, Some(3));
        assert_eq!(s[0].status, "False");
        o.status = Some(OperatorConditionStatus { conditions: s });
        assert!(o.synced_status_conditions().is_none(), "nothing left to copy");
        assert!(o.upgradeable().is_err());
        // spec.conditions counts before the status is written back.
        o.status = None;
        assert_eq!(o.upgradeable().unwrap_err(), "the operator is not upgradeable: migrating");
        o.status = Some(OperatorConditionStatus { conditions: o.synced_status_conditions().unwrap() });
        o.metadata.generation = Some(4);
        o.spec.conditions[0].status = "True".into();
        let s = o.synced_status_conditions().expect("changed");
        assert_eq!((s[0].status.as_str(), s[0].observed_generation), ("True", Some(4)));
        o.status = Some(OperatorConditionStatus { conditions: s });
        assert!(o.upgradeable().is_ok());
    }
}
