//! `InstallPlan` (`operators.coreos.com/v1alpha1`): the resolved set of objects to create for one
//! or more CSVs, and their progress (`reference/olm-v0.md` §1.4, §5.1–5.2; upstream
//! `pkg/operators/v1alpha1/installplan_types.go`).

// kube's repeated `printcolumn(type_ = "string", …)` arguments are not duplicate attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Approval, ConditionStatus};

/// Spec of an InstallPlan (`InstallPlanSpec`). Required: `approval`, `approved`,
/// `clusterServiceVersionNames`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "InstallPlan",
    namespaced,
    status = "InstallPlanStatus",
    shortname = "ip",
    category = "olm",
    derive = "PartialEq",
    doc = "InstallPlan defines the installation of a set of operators.",
    printcolumn(
        name = "CSV",
        type_ = "string",
        json_path = ".spec.clusterServiceVersionNames[0]",
        description = "The first CSV in the list of clusterServiceVersionNames"
    ),
    printcolumn(name = "Approval", type_ = "string", json_path = ".spec.approval", description = "The approval mode"),
    printcolumn(name = "Approved", type_ = "boolean", json_path = ".spec.approved")
)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanSpec {
    /// Legacy: name of the CatalogSource the plan was resolved from.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "source")]
    pub source: Option<String>,
    /// Legacy: namespace of that CatalogSource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_namespace: Option<String>,
    /// Names of the CSVs this plan creates.
    pub cluster_service_version_names: Vec<String>,
    /// `Automatic` or `Manual`.
    pub approval: Approval,
    /// Whether the plan may be executed; `kubectl patch installplan … -p '{"spec":{"approved":true}}'`.
    pub approved: bool,
    /// Monotonic per-namespace generation of plans (`reference/olm-v0.md` §5.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

/// Status of an InstallPlan (`InstallPlanStatus`). OLM's schema requires `phase` and
/// `catalogSources`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanStatus {
    /// Phase of the plan.
    pub phase: InstallPlanPhase,
    /// Conditions (`Resolved`, `Installed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<InstallPlanCondition>,
    /// Names of the CatalogSources the plan was resolved from (always written, may be empty).
    pub catalog_sources: Vec<String>,
    /// Steps, in execution order; each creates or checks one object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<Step>,
    /// Bundles still to be fetched before the plan's steps are known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundle_lookups: Vec<BundleLookup>,
    /// The ServiceAccount the plan runs as when the OperatorGroup names one (scoped install).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attenuated_service_account_ref: Option<ObjectReference>,
    /// When execution started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// Human-readable details of the phase (for `Failed`, which step failed and why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl InstallPlanStatus {
    /// A status in `phase` with nothing else set.
    pub fn new(phase: InstallPlanPhase) -> Self {
        InstallPlanStatus {
            phase,
            conditions: Vec::new(),
            catalog_sources: Vec::new(),
            plan: Vec::new(),
            bundle_lookups: Vec::new(),
            attenuated_service_account_ref: None,
            start_time: None,
            message: None,
        }
    }
}

open_enum! {
    /// `status.phase` of an InstallPlan (OLM `InstallPlanPhase`). `Complete` and `Failed` are terminal.
    pub enum InstallPlanPhase {
        /// `Planning` (legacy, no longer written by OLM).
        Planning = "Planning",
        /// `RequiresApproval`: Manual approval pending; nothing is applied.
        RequiresApproval = "RequiresApproval",
        /// `Installing`: steps are being applied.
        Installing = "Installing",
        /// `Complete`: every step applied.
        Complete = "Complete",
        /// `Failed`: a step failed; `message` says which and why.
        Failed = "Failed",
    }
}

impl InstallPlanPhase {
    /// Whether the phase is terminal (`Complete` or `Failed`).
    pub fn is_terminal(&self) -> bool {
        matches!(self, InstallPlanPhase::Complete | InstallPlanPhase::Failed)
    }
}

/// An InstallPlan condition (OLM `InstallPlanCondition`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanCondition {
    /// `Resolved` or `Installed`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "type")]
    pub type_: Option<InstallPlanConditionType>,
    /// `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConditionStatus>,
    /// Last time the condition was updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Last time the status changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Reason of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<InstallPlanConditionReason>,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

open_enum! {
    /// InstallPlan condition types (OLM `InstallPlanConditionType`).
    pub enum InstallPlanConditionType {
        /// The plan's steps are resolved.
        Resolved = "Resolved",
        /// The plan's steps are applied.
        Installed = "Installed",
    }
}

open_enum! {
    /// InstallPlan condition reasons (OLM `InstallPlanConditionReason`).
    pub enum InstallPlanConditionReason {
        /// The plan is unknown.
        PlanUnknown = "PlanUnknown",
        /// A pre-install check failed.
        InstallCheckFailed = "InstallCheckFailed",
        /// Dependencies conflict.
        DependenciesConflict = "DependenciesConflict",
        /// Applying a step failed.
        InstallComponentFailed = "InstallComponentFailed",
    }
}

/// One step of `status.plan` (OLM `Step`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Name of the CSV this step belongs to.
    pub resolving: String,
    /// The object the step creates.
    pub resource: StepResource,
    /// Whether the plan may complete without this step (`false`, the default: a failure fails the plan).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// Progress of the step.
    pub status: StepStatus,
}

/// `status.plan[].resource` (OLM `StepResource`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepResource {
    /// CatalogSource the object comes from (OLM JSON name `sourceName`).
    pub source_name: String,
    /// Namespace of that CatalogSource.
    pub source_namespace: String,
    /// API group of the object (empty for the core group).
    pub group: String,
    /// API version of the object.
    pub version: String,
    /// Kind of the object.
    pub kind: String,
    /// Name of the object.
    pub name: String,
    /// The object serialized as JSON, or (for bundles unpacked from images in OLM) a JSON
    /// reference to the unpacked bundle ConfigMap (`reference/olm-v0.md` §1.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// `kind` of a [`BundleObjectRef`].
pub const BUNDLE_OBJECT_REF_KIND: &str = "BundleObject";

/// `status.plan[].resource.manifest` of a step whose object is not written into the plan (it is
/// larger than the controller's `INLINE_MANIFEST_MAX`, or the plan's `INLINE_PLAN_BUDGET` is spent): the
/// bundle image by digest that the step is planned from, and the digest of the object as
/// planned. Like OLM v0's reference to an unpacked bundle ConfigMap
/// (`catalog/operator.go` `UnpackedBundleReference`), it keeps an InstallPlan small for any
/// bundle size — argocd-operator 0.18.0 ships 4 MB of manifests, far past etcd's 1.5 MiB per
/// object. At apply the steps are planned again from that image (pulled by digest, its blobs
/// from the cache), so what is applied is what was listed. The object's group, version, kind
/// and name are the step resource's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleObjectRef {
    /// Always [`BUNDLE_OBJECT_REF_KIND`].
    pub kind: String,
    /// The bundle image, `repository@sha256:…`.
    pub image: String,
    /// `sha256:<hex>` of the object's compact JSON as planned.
    pub digest: String,
    /// Size of that JSON in bytes.
    pub size: usize,
}

impl BundleObjectRef {
    /// The reference in a step's `manifest`, if it holds one.
    pub fn parse(manifest: &str) -> Option<BundleObjectRef> {
        serde_json::from_str::<BundleObjectRef>(manifest)
            .ok()
            .filter(|r| r.kind == BUNDLE_OBJECT_REF_KIND && r.image.contains('@'))
    }
}

open_enum! {
    /// `status.plan[].status` (OLM `StepStatus`).
    pub enum StepStatus {
        /// Not known yet.
        Unknown = "Unknown",
        /// The object does not exist yet.
        NotPresent = "NotPresent",
        /// The object already exists.
        Present = "Present",
        /// The object was created.
        Created = "Created",
        /// Creating the object failed.
        NotCreated = "NotCreated",
        /// Waiting for the object's API (e.g. a CRD to be Established); the plan is requeued.
        WaitingForApi = "WaitingForApi",
        /// The object's kind cannot be installed.
        UnsupportedResource = "UnsupportedResource",
    }
}

/// `status.bundleLookups[]` (OLM `BundleLookup`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookup {
    /// The bundle image reference.
    pub path: String,
    /// The bundle's CSV name.
    pub identifier: String,
    /// The CSV the bundle replaces (empty if none).
    pub replaces: String,
    /// The CatalogSource the bundle comes from.
    pub catalog_source_ref: ObjectReference,
    /// Conditions (`BundleLookupPending`, `BundleLookupFailed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<BundleLookupCondition>,
    /// JSON of the bundle's properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<String>,
}

/// [`BundleLookup::properties`] is a string in OLM's API: `{"properties": [{type, value}, …]}`.
/// These two read and write it, so that no one else parses it.
impl BundleLookup {
    /// The `{type, value}` properties in [`BundleLookup::properties`]; empty when it is unset or
    /// not the `{"properties": [...]}` JSON OLM writes.
    pub fn property_list(&self) -> Vec<serde_json::Value> {
        self.properties
            .as_deref()
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
            .and_then(|mut v| match v.get_mut("properties").map(serde_json::Value::take) {
                Some(serde_json::Value::Array(a)) => Some(a),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Sets [`BundleLookup::properties`] to `{"properties": props}` as OLM writes it.
    pub fn set_properties(&mut self, props: &[serde_json::Value]) {
        self.properties = Some(serde_json::json!({"properties": props}).to_string());
    }
}

/// A bundle-lookup condition (OLM `BundleLookupCondition`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookupCondition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: BundleLookupConditionType,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// Reason: `JobNotStarted`, `JobIncomplete`, `JobFailed`, `CatalogSourceMissing`, `BundleNotUnpacked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Last time the condition was updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Last time the status changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

open_enum! {
    /// Bundle-lookup condition types (OLM `BundleLookupConditionType`).
    pub enum BundleLookupConditionType {
        /// The bundle is still being fetched.
        BundleLookupPending = "BundleLookupPending",
        /// Fetching the bundle failed.
        BundleLookupFailed = "BundleLookupFailed",
        /// OLM-internal: the unpacked bundle was not persisted.
        BundleLookupNotPersisted = "BundleLookupNotPersisted",
    }
}

/// Bundle-lookup condition reasons OLM uses (`pkg/controller/bundle/bundle_unpacker.go`).
pub mod bundle_lookup_reason {
    /// The unpack job has not started.
    pub const JOB_NOT_STARTED: &str = "JobNotStarted";
    /// The unpack job is not complete.
    pub const JOB_INCOMPLETE: &str = "JobIncomplete";
    /// The unpack job failed.
    pub const JOB_FAILED: &str = "JobFailed";
    /// The bundle's CatalogSource is missing.
    pub const CATALOG_SOURCE_MISSING: &str = "CatalogSourceMissing";
    /// The bundle is not unpacked.
    pub const BUNDLE_NOT_UNPACKED: &str = "BundleNotUnpacked";
}

impl InstallPlanStatus {
    /// Sets the one `Installed` condition of the plan (`status` True or False, with `reason` and
    /// `message` when given), updated and transitioned at `now`; every other condition goes.
    pub fn set_installed(&mut self, status: ConditionStatus, reason: Option<&str>, message: Option<&str>, now: &Time) {
        self.conditions = vec![InstallPlanCondition {
            type_: Some(InstallPlanConditionType::Installed),
            status: Some(status),
            last_update_time: Some(now.clone()),
            last_transition_time: Some(now.clone()),
            reason: reason.map(InstallPlanConditionReason::from),
            message: message.map(String::from),
        }];
    }

    /// Phase `Failed` with `message`, and condition `Installed=False` with `reason` and `message`.
    pub fn fail(&mut self, reason: &str, message: &str, now: &Time) {
        self.phase = InstallPlanPhase::Failed;
        self.message = Some(message.to_string());
        self.set_installed(ConditionStatus::False, Some(reason), Some(message), now);
    }

    /// Phase `Complete`, no message, condition `Installed=True`.
    pub fn complete(&mut self, now: &Time) {
        self.phase = InstallPlanPhase::Complete;
        self.message = None;
        self.set_installed(ConditionStatus::True, None, None, now);
    }

    /// The reason of the `Installed` condition, if the plan has one.
    pub fn installed_reason(&self) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| c.type_ == Some(InstallPlanConditionType::Installed))
            .and_then(|c| c.reason.as_ref())
            .map(|r| r.as_str())
    }
}

impl InstallPlanStatus {
    /// This whole status as one JSON merge patch (RFC 7386) of the status subresource that
    /// leaves nothing of an older status behind ([`InstallPlanStatusMerge::Whole`]), with
    /// `resource_version` (the plan's as read) as precondition when given.
    pub fn merge_patch<'a>(&'a self, resource_version: Option<&'a str>) -> InstallPlanStatusPatch<'a> {
        InstallPlanStatusPatch {
            metadata: resource_version.map(|resource_version| Precondition { resource_version }),
            status: InstallPlanStatusMerge::Whole {
                phase: &self.phase,
                conditions: (!self.conditions.is_empty()).then_some(self.conditions.as_slice()),
                catalog_sources: &self.catalog_sources,
                plan: (!self.plan.is_empty()).then_some(self.plan.as_slice()),
                bundle_lookups: (!self.bundle_lookups.is_empty()).then_some(self.bundle_lookups.as_slice()),
                attenuated_service_account_ref: self.attenuated_service_account_ref.as_ref(),
                start_time: self.start_time.as_ref(),
                message: self.message.as_deref(),
            },
        }
    }

    /// This status's `bundleLookups` alone as a JSON merge patch, with `resource_version` as
    /// precondition when given ([`InstallPlanStatusMerge::BundleLookups`]).
    pub fn bundle_lookups_patch<'a>(&'a self, resource_version: Option<&'a str>) -> InstallPlanStatusPatch<'a> {
        InstallPlanStatusPatch {
            metadata: resource_version.map(|resource_version| Precondition { resource_version }),
            status: InstallPlanStatusMerge::BundleLookups { bundle_lookups: &self.bundle_lookups },
        }
    }
}

/// An InstallPlan status write as a JSON merge patch: `{"metadata": {"resourceVersion": …},
/// "status": {…}}`. With `metadata` the API server refuses the write (409 Conflict) when the plan
/// changed since that resourceVersion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstallPlanStatusPatch<'a> {
    /// The precondition, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Precondition<'a>>,
    /// What is written.
    pub status: InstallPlanStatusMerge<'a>,
}

/// `metadata.resourceVersion` of a patch: the write applies only to that version.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Precondition<'a> {
    /// The resourceVersion the write was decided on.
    pub resource_version: &'a str,
}

/// The `status` of an [`InstallPlanStatusPatch`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum InstallPlanStatusMerge<'a> {
    /// Every field of [`InstallPlanStatus`]; a merge patch keeps what it does not name, so a
    /// field the status does not have (an empty list, no value) is sent as `null`, which removes
    /// it.
    #[serde(rename_all = "camelCase")]
    Whole {
        /// [`InstallPlanStatus::phase`].
        phase: &'a InstallPlanPhase,
        /// [`InstallPlanStatus::conditions`]; `null` when none.
        conditions: Option<&'a [InstallPlanCondition]>,
        /// [`InstallPlanStatus::catalog_sources`], also when empty (OLM's schema requires it).
        catalog_sources: &'a [String],
        /// [`InstallPlanStatus::plan`]; `null` when none.
        plan: Option<&'a [Step]>,
        /// [`InstallPlanStatus::bundle_lookups`]; `null` when none.
        bundle_lookups: Option<&'a [BundleLookup]>,
        /// [`InstallPlanStatus::attenuated_service_account_ref`].
        attenuated_service_account_ref: Option<&'a ObjectReference>,
        /// [`InstallPlanStatus::start_time`].
        start_time: Option<&'a Time>,
        /// [`InstallPlanStatus::message`].
        message: Option<&'a str>,
    },
    /// `bundleLookups` alone (the rest of the status as it is on the server).
    #[serde(rename_all = "camelCase")]
    BundleLookups {
        /// [`InstallPlanStatus::bundle_lookups`].
        bundle_lookups: &'a [BundleLookup],
    },
}

impl InstallPlan {
    /// The phase, `None` before the controller wrote a status.
    pub fn phase(&self) -> Option<&InstallPlanPhase> {
        self.status.as_ref().map(|s| &s.phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_status_patch_names_every_field_and_removes_what_is_gone() {
        let mut st = InstallPlanStatus::new(InstallPlanPhase::Installing);
        st.catalog_sources = vec!["community".into()];
        let v = serde_json::to_value(st.merge_patch(Some("7"))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"metadata": {"resourceVersion": "7"}, "status": {
                "phase": "Installing", "conditions": null, "catalogSources": ["community"], "plan": null,
                "bundleLookups": null, "attenuatedServiceAccountRef": null, "startTime": null, "message": null}})
        );
        let v = serde_json::to_value(st.bundle_lookups_patch(None)).unwrap();
        assert_eq!(v, serde_json::json!({"status": {"bundleLookups": []}}));
    }

    #[test]
    fn steps_and_phases_use_olm_strings() {
        let st: InstallPlanStatus = serde_json::from_value(serde_json::json!({
            "phase": "Installing", "catalogSources": [],
            "plan": [{"resolving": "a.v1", "status": "WaitingForApi",
                      "resource": {"sourceName": "c", "sourceNamespace": "olm", "group": "", "version": "v1",
                                   "kind": "ServiceAccount", "name": "sa", "manifest": "{}"}}],
            "conditions": [{"type": "Installed", "status": "False", "reason": "InstallComponentFailed"}]
        }))
        .expect("status");
        assert_eq!(st.phase, InstallPlanPhase::Installing);
        assert!(
            !st.phase.is_terminal()
                && InstallPlanPhase::Complete.is_terminal()
                && InstallPlanPhase::Failed.is_terminal()
        );
        assert_eq!(st.plan[0].status, StepStatus::WaitingForApi);
        assert!(!st.plan[0].optional);
        assert_eq!(st.conditions[0].reason, Some(InstallPlanConditionReason::InstallComponentFailed));
        let v = serde_json::to_value(&st).unwrap();
        assert!(v["plan"][0].get("optional").is_none(), "optional: false is omitted like OLM's omitempty");
        assert_eq!(v["catalogSources"], serde_json::json!([]), "catalogSources is always written");
        assert_eq!(
            serde_json::to_value(InstallPlanStatus::new(InstallPlanPhase::RequiresApproval)).unwrap(),
            serde_json::json!({"phase": "RequiresApproval", "catalogSources": []})
        );
    }
}
