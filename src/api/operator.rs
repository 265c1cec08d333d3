//! `Operator` (`operators.coreos.com/v1`, cluster-scoped): one per installed package and namespace,
//! named `<package>.<namespace>`, whose status lists the objects that make up the operator
//! (upstream `operator-framework/api` `pkg/operators/v1/operator_types.go`; OLM v0.38.0
//! `pkg/controller/operators/operator_controller.go` and `decorators/operator.go`).
//!
//! The components are the objects labelled `operators.coreos.com/<package>.<namespace>` (the
//! component label, [`crate::install::InstallTarget::component_label`]); `status.components`
//! holds that selector and a reference to each, with the object's own conditions.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spec of an Operator: empty (OLM `OperatorSpec struct{}`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "Operator",
    status = "OperatorStatus",
    category = "olm",
    derive = "PartialEq",
    derive = "Default",
    doc = "Operator represents a cluster operator."
)]
pub struct OperatorSpec {}

/// Status of an Operator (OLM `OperatorStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperatorStatus {
    /// The operator's components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Components>,
}

/// The objects that compose an operator (OLM `Components`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Components {
    /// The selector of the components: `operators.coreos.com/<package>.<namespace>` exists.
    pub label_selector: Option<LabelSelector>,
    /// One reference per component, with its conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<RichReference>,
}

/// A reference to a component with its status conditions (OLM `RichReference`: an inlined
/// `ObjectReference` plus `conditions`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RichReference {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectReference,
    /// The object's conditions (`type`, `status`, `reason`, `message`, times), as it reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ComponentCondition>,
}

/// A component's condition (OLM `operators/v1.Condition`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentCondition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Reason of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Last time the condition was probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Last time the status changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}
