//! From a resolved bundle to objects on a cluster: [`plan::steps`] turns a registry+v1 bundle
//! into ordered InstallPlan steps (pure), [`preflight::check`] asks whether a subject (the client,
//! or a ServiceAccount) may apply them (all missing RBAC in one answer), and [`apply::apply`] applies them with server-side
//! apply (I/O). The objects of a CSV's webhooks and APIServices are planned without I/O by
//! [`webhook`]; [`rotation::rotate_due`] renews their serving certificates and
//! [`webhook_removal::remove`] takes them away, the I/O shells over those rules.
//!
//! The semantics are OLM v0's (`reference/olm-v0.md` §1.4 InstallPlan steps, §1.5 the CSV's
//! deployment install strategy, §2.5 the kinds a bundle may contain, §5 install mechanics); the
//! upstream code is `pkg/controller/registry/resolver/{steps,rbac}.go`,
//! `pkg/controller/install/deployment.go` and
//! `pkg/controller/operators/olm/overrides/inject/inject.go` of operator-lifecycle-manager.
//! Where capstan differs from OLM it says so in the item's documentation.

pub mod aggregation;
pub mod apply;
pub mod certs;
pub mod config;
pub mod copied_csv;
pub mod crd_safety;
pub mod hash;
pub mod operator_condition;
pub mod operator_group;
pub mod plan;
pub mod preflight;
pub mod rotation;
pub mod webhook;
pub mod webhook_removal;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::GroupVersionKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use apply::{Appliers, ApplyOptions, StepError, StepResult, StepStatus, apply, apply_as};
pub use config::{ConfigError, SubscriptionConfig};
pub use plan::{PlanError, steps};
pub use preflight::{Finding, PreflightError};

/// List parameters for the reads an install and its reconciles make: answered from the API
/// server's watch cache at once (`resourceVersion=0`, `resourceVersionMatch=NotOlderThan`).
///
/// A list without a resourceVersion is a consistent read. Since Kubernetes 1.31
/// (`ConsistentListFromCache`, on by default) the API server serves it from its watch cache
/// after waiting until that cache has seen etcd's current revision; the cache of a resource with
/// no recent writes only learns that revision from an etcd progress notification, which the API
/// server requests at most every 100 ms (`k8s.io/apiserver` `pkg/storage/cacher/progress`,
/// `progressRequestPeriod`). Every such list on an install's path cost 60–100 ms of waiting
/// (docs/benchmarks.md, the trace of an nginx-operator install): five of them were most of nginx-operator's 0.6 s.
///
/// The cache is the one that feeds every watch, so a list from it is as fresh as an informer's
/// store, which is what OLM v0 decides from everywhere (its listers). A decision that must not
/// act on a lagging list confirms from etcd: an InstallPlan is created or a Complete one replaced
/// only after its CSVs were read by name and found missing (`controller::subscription`), and
/// `aggregation::write_provided_apis` carries the resourceVersion it was computed from.
pub fn from_watch_cache() -> kube::api::ListParams {
    kube::api::ListParams::default().match_any()
}

/// The field manager capstan uses for every server-side apply (one manager, so that a later apply
/// by capstan takes over fields it set before; §5.2 of `reference/olm-v0.md`).
pub const FIELD_MANAGER: &str = "capstan";

/// Label `olm.owner`: name of the CSV that owns the object (\[OLM\] `pkg/lib/ownerutil/util.go`).
pub const LABEL_OWNER: &str = "olm.owner";
/// Label `olm.owner.namespace`: namespace of the owning CSV.
pub const LABEL_OWNER_NAMESPACE: &str = "olm.owner.namespace";
/// Label `olm.owner.kind`: kind of the owner, always `ClusterServiceVersion` here.
pub const LABEL_OWNER_KIND: &str = "olm.owner.kind";
/// Label `olm.managed: "true"` on every object capstan creates (§5.5).
pub const LABEL_MANAGED: &str = "olm.managed";
/// Label `olm.permissions.hash` on generated RBAC: base62 SHA-224 of the rules, or of roleRef +
/// subjects for bindings (\[OLM\] `pkg/controller/registry/resolver/rbac.go`).
pub const LABEL_PERMISSIONS_HASH: &str = "olm.permissions.hash";
/// Label `olm.copiedFrom=<operator namespace>` on RBAC copied into another target namespace
/// (\[OLM\] `operatorgroup.go` `ensureTenantRBAC`).
pub const LABEL_COPIED_FROM: &str = "olm.copiedFrom";
/// Prefix of the component label `operators.coreos.com/<package>.<namespace>` (value "").
pub const COMPONENT_LABEL_PREFIX: &str = "operators.coreos.com/";

/// The component label key `operators.coreos.com/<package>.<namespace>` of the operator
/// `package` installed in `namespace`, its name part cut to 63 characters without trailing `.`,
/// `_` or `-` (\[OLM\] `pkg/controller/operators/decorators/operator.go` `ComponentLabelKey`). OLM
/// puts it (value `""`) on every component of the operator: Subscription, CSV, latest
/// InstallPlan, OperatorCondition and what the CSV owns (`adoption_controller.go`).
pub fn component_label_key(package: &str, namespace: &str) -> String {
    let mut name = format!("{package}.{namespace}");
    if name.len() > 63 {
        let mut cut = 63;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
        while name.ends_with(['.', '_', '-']) {
            name.pop();
        }
    }
    format!("{COMPONENT_LABEL_PREFIX}{name}")
}
/// CSV and pod-template annotation: the OperatorGroup's target namespaces, sorted and
/// comma-joined; `""` means all namespaces (§1.5).
pub const ANNOTATION_TARGET_NAMESPACES: &str = "olm.targetNamespaces";
/// CSV annotation: the OperatorGroup's name.
pub const ANNOTATION_OPERATOR_GROUP: &str = "olm.operatorGroup";
/// CSV annotation: the OperatorGroup's namespace.
pub const ANNOTATION_OPERATOR_NAMESPACE: &str = "olm.operatorNamespace";
/// CSV annotation set by the InstallPlan: `{"properties":[{type,value}…]}` of the bundle
/// (\[OLM\] `resolver/projection/properties.go`).
pub const ANNOTATION_PROPERTIES: &str = "operatorframework.io/properties";
/// The CSV's API group.
pub const OPERATORS_GROUP: &str = "operators.coreos.com";

/// Where and how a bundle is installed: the input of [`plan::steps`] besides the bundle.
#[derive(Debug, Clone, Default)]
pub struct InstallTarget {
    /// The namespace the operator (CSV, Deployments, ServiceAccounts) is installed into.
    pub namespace: String,
    /// The OperatorGroup's target namespaces. `[""]` means all namespaces (AllNamespaces install
    /// mode); an empty list is treated as `[namespace]` (OwnNamespace).
    pub target_namespaces: Vec<String>,
    /// The package name, for the component label `operators.coreos.com/<package>.<namespace>`.
    pub package: String,
    /// The CSV name; must equal the bundle CSV's `metadata.name`. It is every step's `resolving`.
    pub csv_name: String,
    /// The Subscription's `spec.config`, injected into every Deployment (§1.3).
    pub config: SubscriptionConfig,
    /// The ownerReference put on objects in [`InstallTarget::namespace`] that OLM garbage-collects
    /// with the CSV (see [`plan::steps`]). `None`: no ownerReference. A reference whose `uid` is
    /// empty (see [`InstallTarget::csv_owner_reference`]) is completed by [`apply::apply`] once the
    /// owner exists.
    pub owner: Option<OwnerReference>,
    /// The CSV this install replaces on this cluster; written to the CSV's `spec.replaces`, which
    /// OLM overwrites (and clears when nothing is replaced) (§1.5).
    pub replaces: Option<String>,
    /// The OperatorGroup name, written as the CSV annotation `olm.operatorGroup` (and
    /// `olm.operatorNamespace` = [`InstallTarget::namespace`]) when set.
    pub operator_group: Option<String>,
    /// The bundle's properties from the catalog (`{"type":…,"value":…}` each), written as the
    /// CSV annotation `operatorframework.io/properties` when not empty.
    pub properties: Vec<Value>,
    /// The namespace selector of the admission webhooks, from the OperatorGroup
    /// ([`operator_group::webhook_selector`], OLM's): `None` selects every namespace.
    pub webhook_selector: Option<Value>,
}

impl InstallTarget {
    /// A non-blocking, non-controller ownerReference to this target's CSV
    /// (`operators.coreos.com/v1alpha1`, \[OLM\] `ownerutil.NonBlockingOwner`) with an empty `uid`:
    /// [`apply::apply`] fills in the CSV's UID once the CSV exists.
    pub fn csv_owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: format!("{OPERATORS_GROUP}/v1alpha1"),
            kind: "ClusterServiceVersion".into(),
            name: self.csv_name.clone(),
            uid: String::new(),
            controller: Some(false),
            block_owner_deletion: Some(false),
        }
    }

    /// The component label key of this install ([`component_label_key`]).
    pub fn component_label(&self) -> String {
        component_label_key(&self.package, &self.namespace)
    }

    /// The target namespaces as OLM writes them in `olm.targetNamespaces`: sorted, deduplicated,
    /// comma-joined; `[namespace]` when the list is empty.
    pub fn target_namespaces_annotation(&self) -> String {
        self.effective_targets().join(",")
    }

    /// Sorted, deduplicated target namespaces, `[namespace]` when empty.
    pub(crate) fn effective_targets(&self) -> Vec<String> {
        let mut t: Vec<String> = if self.target_namespaces.is_empty() {
            vec![self.namespace.clone()]
        } else {
            self.target_namespaces.clone()
        };
        t.sort();
        t.dedup();
        t
    }

    /// Whether the target is all namespaces (`[""]`).
    pub fn all_namespaces(&self) -> bool {
        self.target_namespaces.iter().any(|n| n.is_empty())
    }
}

/// One InstallPlan step: an object to apply and the CSV it belongs to (`status.plan[]` of an
/// InstallPlan, `reference/olm-v0.md` §1.4).
///
/// `kind` is the object's own kind; OLM shows a bundle's Secret as the synthetic kind
/// `BundleSecret` in the InstallPlan, which the controller does when writing status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The CSV name this step installs.
    pub resolving: String,
    /// API group, "" for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `CustomResourceDefinition`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The full object to apply (with `apiVersion`, `kind`, `metadata`).
    pub manifest: Value,
}

impl Step {
    /// `apiVersion`: `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The step's group, version and kind.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }

    /// Whether the step is a CustomResourceDefinition (`apiextensions.k8s.io`). A scoped install
    /// applies these with capstan's own identity, not the OperatorGroup's ServiceAccount, as OLM
    /// v0.46.0 does: `ExecutePlan` in `pkg/controller/operators/catalog/operator.go` hands CRD
    /// steps to a step builder made from its own, unattenuated client ("CRDs should be installed
    /// via the default OLM (cluster-admin) client and not the scoped client"; the builder is
    /// `pkg/controller/operators/catalog/step.go`, `builder.create`).
    pub fn is_crd(&self) -> bool {
        self.kind == "CustomResourceDefinition" && self.group == "apiextensions.k8s.io"
    }

    /// `Kind namespace/name` or `Kind name`, for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}
