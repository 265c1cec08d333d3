//! A bundle and an [`InstallTarget`] → ordered InstallPlan [`Step`]s. Pure: no I/O.
//!
//! Sources: `reference/olm-v0.md` §1.4, §1.5, §2.5, §5.2, §5.4; \[OLM\]
//! `pkg/controller/registry/resolver/steps.go` (`NewStepResourceFromBundle`), `rbac.go`
//! (`RBACForClusterServiceVersion`), `pkg/controller/install/deployment.go` (`deploymentForSpec`),
//! `pkg/controller/operators/olm/operatorgroup.go` (`ensureSingletonRBAC`, `ensureTenantRBAC`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha224};

use super::hash::{base62, deep_hash_object, short_hash};
use super::webhook;
use super::{
    ANNOTATION_OPERATOR_GROUP, ANNOTATION_OPERATOR_NAMESPACE, ANNOTATION_PROPERTIES, ANNOTATION_TARGET_NAMESPACES,
    InstallTarget, LABEL_COPIED_FROM, LABEL_MANAGED, LABEL_OWNER, LABEL_OWNER_KIND, LABEL_OWNER_NAMESPACE,
    LABEL_PERMISSIONS_HASH, Step,
};
use crate::api::clusterserviceversion::WebhookAdmissionType;
use crate::bundle::gojson::marshal_raw;
use crate::bundle::{Bundle, Manifest};

/// Label on generated Deployments: a hash of the final Deployment spec, for drift detection
/// (§5.4). OLM hashes with Go's `DeepHashObject`; capstan's value is its own (see
/// [`short_hash`]) and only compared with values capstan wrote.
pub const LABEL_DEPLOYMENT_SPEC_HASH: &str = "olm.deployment-spec-hash";

/// Kubernetes' limit on object names that must be DNS labels, used by OLM for generated RBAC.
const MAX_NAME_LENGTH: usize = 63;

/// How capstan places an object kind in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// The kind.
    pub kind: &'static str,
    /// Position in the apply order (lower first).
    pub rank: u8,
    /// Whether objects of this kind live in a namespace.
    pub namespaced: bool,
    /// The resource name (plural) in the API.
    pub plural: &'static str,
}

/// Every kind a plan may hold, in apply order: first the kinds others depend on (CRDs, ServiceAccounts,
/// Roles, RoleBindings, ClusterRoles, ClusterRoleBindings, Services, ConfigMaps, Secrets), then
/// the other kinds OLM supports in bundles (§2.5, \[OLM\] `catalog/supportedresources.go`), then the
/// CSV, then the Deployments of the CSV's install strategy (which OLM's olm-operator creates once
/// the CSV's requirements are met, §5.4).
pub const KINDS: &[KindInfo] = &[
    KindInfo { kind: "CustomResourceDefinition", rank: 0, namespaced: false, plural: "customresourcedefinitions" },
    KindInfo { kind: "ServiceAccount", rank: 1, namespaced: true, plural: "serviceaccounts" },
    KindInfo { kind: "Role", rank: 2, namespaced: true, plural: "roles" },
    KindInfo { kind: "RoleBinding", rank: 3, namespaced: true, plural: "rolebindings" },
    KindInfo { kind: "ClusterRole", rank: 4, namespaced: false, plural: "clusterroles" },
    KindInfo { kind: "ClusterRoleBinding", rank: 5, namespaced: false, plural: "clusterrolebindings" },
    KindInfo { kind: "Service", rank: 6, namespaced: true, plural: "services" },
    KindInfo { kind: "ConfigMap", rank: 7, namespaced: true, plural: "configmaps" },
    KindInfo { kind: "Secret", rank: 8, namespaced: true, plural: "secrets" },
    KindInfo { kind: "PrometheusRule", rank: 9, namespaced: true, plural: "prometheusrules" },
    KindInfo { kind: "ServiceMonitor", rank: 9, namespaced: true, plural: "servicemonitors" },
    KindInfo { kind: "PodDisruptionBudget", rank: 9, namespaced: true, plural: "poddisruptionbudgets" },
    KindInfo { kind: "PriorityClass", rank: 9, namespaced: false, plural: "priorityclasses" },
    KindInfo { kind: "VerticalPodAutoscaler", rank: 9, namespaced: true, plural: "verticalpodautoscalers" },
    KindInfo { kind: "ConsoleYAMLSample", rank: 9, namespaced: false, plural: "consoleyamlsamples" },
    KindInfo { kind: "ConsoleQuickStart", rank: 9, namespaced: false, plural: "consolequickstarts" },
    KindInfo { kind: "ConsoleCLIDownload", rank: 9, namespaced: false, plural: "consoleclidownloads" },
    KindInfo { kind: "ConsoleLink", rank: 9, namespaced: false, plural: "consolelinks" },
    KindInfo { kind: "ConsolePlugin", rank: 9, namespaced: false, plural: "consoleplugins" },
    KindInfo { kind: "NetworkPolicy", rank: 9, namespaced: true, plural: "networkpolicies" },
    KindInfo { kind: "ClusterServiceVersion", rank: 10, namespaced: true, plural: "clusterserviceversions" },
    KindInfo { kind: "Deployment", rank: 11, namespaced: true, plural: "deployments" },
    // Generated for spec.webhookdefinitions / spec.apiservicedefinitions.owned (install::webhook),
    // after the Deployments as OLM creates them; never accepted from a bundle.
    KindInfo {
        kind: "ValidatingWebhookConfiguration",
        rank: 12,
        namespaced: false,
        plural: "validatingwebhookconfigurations",
    },
    KindInfo {
        kind: "MutatingWebhookConfiguration",
        rank: 12,
        namespaced: false,
        plural: "mutatingwebhookconfigurations",
    },
    KindInfo { kind: "APIService", rank: 12, namespaced: false, plural: "apiservices" },
    // The Subscription OLM creates for a dependency it installs ([`DependencySubscription`]),
    // last, once the dependency's CSV exists; never accepted from a bundle.
    KindInfo { kind: "Subscription", rank: 13, namespaced: true, plural: "subscriptions" },
];

/// Whether `step`, one of `planned` (the steps [`steps`] gives for one CSV), is an InstallPlan
/// step. Not what OLM's catalog operator leaves to its olm-operator, which makes it from the CSV
/// once the CSV's requirements are met, as capstan's CSV reconciler does (`controller::csv::unit`):
/// - the Deployments of the install strategy (\[OLM\] `pkg/controller/install/deployment.go`);
/// - the Roles and RoleBindings of `permissions` copied into the other target namespaces
///   (label [`LABEL_COPIED_FROM`]; OLM `ensureTenantRBAC`);
/// - the ClusterRoles and ClusterRoleBindings an AllNamespaces install lifts those Roles to,
///   under the Role's name (OLM `ensureSingletonRBAC`, `pkg/controller/operators/olm/operatorgroup.go`).
///
/// Pure.
pub fn in_install_plan(step: &Step, planned: &[Step]) -> bool {
    let labelled = |label: &str| step.manifest.pointer("/metadata/labels").and_then(|l| l.get(label)).is_some();
    match step.kind.as_str() {
        "Deployment" => false,
        "Role" | "RoleBinding" => !labelled(LABEL_COPIED_FROM),
        "ClusterRole" | "ClusterRoleBinding" => {
            let lifted_from = step.kind.strip_prefix("Cluster").unwrap_or_default();
            !(labelled(LABEL_PERMISSIONS_HASH)
                && planned.iter().any(|s| {
                    s.kind == lifted_from
                        && s.name == step.name
                        && s.manifest.pointer("/metadata/labels").and_then(|l| l.get(LABEL_COPIED_FROM)).is_none()
                }))
        }
        _ => true,
    }
}

/// Kinds of [`KINDS`] that only capstan generates: a bundle holding one is `UnsupportedResource`.
const GENERATED_ONLY: [&str; 5] =
    ["Deployment", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService", "Subscription"];

/// Annotation on a Subscription created by an InstallPlan step: the plan's name (\[OLM\]
/// `catalog/operator.go` `generatedByKey`). The Subscription reconciler points such a
/// Subscription's `status.installPlanRef` at that plan until it has one of its own.
pub const ANNOTATION_GENERATED_BY: &str = "olm.generated-by";

/// A Subscription for a bundle an InstallPlan installs that no Subscription of the namespace
/// asks for — a dependency — so that it is visible and upgraded on its own channel, as OLM v0
/// creates it (\[OLM\] `resolver/step_resolver.go` `ResolveSteps`, `resolver/steps.go`
/// `NewSubscriptionStepResource`, `catalog/operator.go` `ExecutePlan`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DependencySubscription {
    /// The package (`spec.name`).
    pub package: String,
    /// The channel the bundle was resolved from (`spec.channel`; OLM writes `""` when it has none).
    pub channel: String,
    /// The CatalogSource the bundle comes from (`spec.source`).
    pub catalog_source: String,
    /// Its namespace (`spec.sourceNamespace`).
    pub catalog_source_namespace: String,
    /// The bundle's CSV (`spec.startingCSV`, and the step's `resolving`).
    pub starting_csv: String,
}

impl DependencySubscription {
    /// OLM's name: `<package>-<channel>-<catalog>-<catalog namespace>`.
    pub fn name(&self) -> String {
        [self.package.as_str(), &self.channel, &self.catalog_source, &self.catalog_source_namespace].join("-")
    }

    /// The step that creates the Subscription in `namespace` for InstallPlan `plan`: `spec.name`,
    /// `channel`, `source`, `sourceNamespace`, `startingCSV`, `installPlanApproval: Automatic`
    /// (OLM's fields), labels `olm.managed: "true"` (OLM's) and the package's component label
    /// (capstan's ownership mark, [`InstallTarget::component_label`]), annotation
    /// [`ANNOTATION_GENERATED_BY`] = `plan`. No ownerReference: the Subscription outlives the
    /// plan and the dependent operator, as in OLM.
    pub fn step(&self, namespace: &str, plan: &str) -> Step {
        let component =
            InstallTarget { namespace: namespace.to_string(), package: self.package.clone(), ..Default::default() }
                .component_label();
        let name = self.name();
        let manifest = json!({
            "apiVersion": format!("{}/v1alpha1", super::OPERATORS_GROUP),
            "kind": "Subscription",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {LABEL_MANAGED: "true", component: ""},
                "annotations": {ANNOTATION_GENERATED_BY: plan},
            },
            "spec": {
                "name": self.package,
                "channel": self.channel,
                "source": self.catalog_source,
                "sourceNamespace": self.catalog_source_namespace,
                "startingCSV": self.starting_csv,
                "installPlanApproval": "Automatic",
            },
        });
        Step {
            resolving: self.starting_csv.clone(),
            group: super::OPERATORS_GROUP.into(),
            version: "v1alpha1".into(),
            kind: "Subscription".into(),
            name,
            namespace: Some(namespace.to_string()),
            manifest,
        }
    }
}

/// The [`KindInfo`] of a kind; `None` for a kind OLM does not install from a bundle. Matched by
/// kind only, as OLM does.
pub fn kind_info(kind: &str) -> Option<&'static KindInfo> {
    KINDS.iter().find(|k| k.kind == kind)
}

/// Why a bundle cannot be turned into steps. Each message names the bundle object or field and
/// says what to do.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// [`InstallTarget::namespace`] is empty.
    #[error("install target has no namespace; set the namespace the operator is installed into")]
    NoNamespace,
    /// [`InstallTarget::csv_name`] is not the bundle's CSV.
    #[error(
        "install target names CSV {expected:?} but the bundle's ClusterServiceVersion is {found:?}; plan the bundle that was resolved"
    )]
    CsvNameMismatch {
        /// The name in the target.
        expected: String,
        /// The bundle CSV's `metadata.name`.
        found: String,
    },
    /// `""` (all namespaces) mixed with named target namespaces (§1.5).
    #[error(
        "target namespaces {targets:?} mix \"\" (all namespaces) with named namespaces; an OperatorGroup targets either all namespaces or a list"
    )]
    InvalidTargetNamespaces {
        /// The target namespaces as given.
        targets: Vec<String>,
    },
    /// The bundle holds objects of kinds OLM does not install (step status `UnsupportedResource`).
    #[error("bundle {bundle}: UnsupportedResource: {}; a bundle may contain only CRDs, the CSV, ServiceAccounts, Roles, RoleBindings, ClusterRoles, ClusterRoleBindings, Services, ConfigMaps, Secrets, PrometheusRules, ServiceMonitors, PodDisruptionBudgets, PriorityClasses, VerticalPodAutoscalers, NetworkPolicies and the OpenShift console kinds — remove these objects or move them into the operator", objects.join(", "))]
    UnsupportedResource {
        /// The bundle (CSV name).
        bundle: String,
        /// Each unsupported object as `Kind name (file)`.
        objects: Vec<String>,
    },
    /// A bundle object lacks `apiVersion` or `metadata.name`.
    #[error(
        "bundle {bundle}: {location}: {kind} has no {field}; every bundle object needs apiVersion, kind and metadata.name"
    )]
    InvalidObject {
        /// The bundle (CSV name).
        bundle: String,
        /// File (and document) of the object.
        location: String,
        /// The object's kind.
        kind: String,
        /// The missing field.
        field: &'static str,
    },
    /// The bundle ships RBAC objects with names the cluster reserves for itself: `system:…` or
    /// one of the bootstrap roles `cluster-admin`, `admin`, `edit`, `view` (Kubernetes'
    /// `plugin/pkg/auth/authorizer/rbac/bootstrappolicy`). Applying them would replace the
    /// cluster's own object (a bundle shipping ClusterRole `system:basic-user` with `*` rules
    /// made every authenticated user cluster-admin), so the plan is refused.
    #[error("bundle {bundle}: {} reserved by Kubernetes for its own RBAC (names starting with system: and the roles cluster-admin, admin, edit, view); an operator may not ship or replace them: rename the object in the bundle", objects.join(", "))]
    ReservedName {
        /// The bundle (CSV name).
        bundle: String,
        /// Each refused object as `Kind name (file)`.
        objects: Vec<String>,
    },
    /// The bundle ships a ClusterRole labelled `rbac.authorization.k8s.io/aggregate-to-*` whose
    /// rules reach beyond the bundle's own API groups: the cluster would copy them into `admin`,
    /// `edit` or `view`, i.e. to every user holding those roles
    /// ([`crate::bundle::rbac::Problem::AggregatedBeyondOwnApis`]).
    #[error("bundle {bundle}: {}; fix: keep aggregated ClusterRoles to the API groups of the bundle's own CRDs and APIServices, or drop the aggregate-to label and let the cluster admin bind the role", objects.join("; "))]
    AggregatedBeyondOwnApis {
        /// The bundle (CSV name).
        bundle: String,
        /// Each refused object as `Kind name (file): what it grants`.
        objects: Vec<String>,
    },
    /// The bundle ships a RoleBinding or ClusterRoleBinding of `User` or `Group` subjects
    /// (`system:authenticated`, …): it would grant a role to people rather than to the operator
    /// ([`crate::bundle::rbac::Problem::BindsUsersOrGroups`]).
    #[error("bundle {bundle}: {}; fix: bind the operator's ServiceAccounts only and leave binding users and groups to the cluster admin", objects.join("; "))]
    BindsUsersOrGroups {
        /// The bundle (CSV name).
        bundle: String,
        /// Each refused object as `Kind name (file): the subjects`.
        objects: Vec<String>,
    },
    /// The CSV's webhook or APIService definitions cannot be installed (OLM: reason
    /// `InvalidWebhookDescription`, or a failed install).
    #[error("ClusterServiceVersion {csv}: {}", problems.iter().map(|(f, m)| format!("{f}: {m}")).collect::<Vec<_>>().join("; "))]
    InvalidWebhookDescription {
        /// The CSV name.
        csv: String,
        /// Each problem as `(field, message)`.
        problems: Vec<(String, String)>,
    },
    /// The CSV's install strategy cannot be read.
    #[error("ClusterServiceVersion {csv}: {field}: {message}")]
    InvalidInstallStrategy {
        /// The CSV name.
        csv: String,
        /// The field, e.g. `spec.install.spec.permissions[0]`.
        field: String,
        /// What is wrong and what to do.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Permission {
    service_account_name: String,
    #[serde(default)]
    rules: Vec<PolicyRule>,
}

#[derive(Deserialize)]
struct DeploymentEntry {
    name: String,
    #[serde(default)]
    spec: DeploymentSpec,
    #[serde(default)]
    label: Option<BTreeMap<String, String>>,
}

pub use crate::bundle::rbac::is_reserved_rbac_name;

/// The bundle's RBAC objects that reach beyond its operator ([`crate::bundle::rbac::check`]):
/// reserved names first, then aggregated ClusterRoles beyond the bundle's own API groups, then
/// bindings of users or groups; each error names every object of its kind of problem. Checked
/// for every bundle by [`steps`] and for the steps of an InstallPlan written by hand.
///
/// # Errors
/// [`PlanError::ReservedName`], [`PlanError::AggregatedBeyondOwnApis`],
/// [`PlanError::BindsUsersOrGroups`].
pub fn check_rbac(bundle: &Bundle, csv_name: &str) -> Result<(), PlanError> {
    use crate::bundle::rbac::{Problem, check};
    let findings = check(bundle);
    let of = |pick: fn(&Problem) -> bool, with_message: bool| -> Vec<String> {
        findings
            .iter()
            .filter(|f| pick(&f.problem))
            .map(|f| if with_message { format!("{}: {}", f.object(), f.message()) } else { f.object() })
            .collect()
    };
    let reserved = of(|p| matches!(p, Problem::Reserved), false);
    if !reserved.is_empty() {
        return Err(PlanError::ReservedName { bundle: csv_name.to_string(), objects: reserved });
    }
    let aggregated = of(|p| matches!(p, Problem::AggregatedBeyondOwnApis { .. }), true);
    if !aggregated.is_empty() {
        return Err(PlanError::AggregatedBeyondOwnApis { bundle: csv_name.to_string(), objects: aggregated });
    }
    let bindings = of(|p| matches!(p, Problem::BindsUsersOrGroups { .. }), true);
    if !bindings.is_empty() {
        return Err(PlanError::BindsUsersOrGroups { bundle: csv_name.to_string(), objects: bindings });
    }
    Ok(())
}

/// Turns a bundle into ordered InstallPlan steps for `target`.
///
/// Steps, all with `resolving` = the CSV name:
/// - every object of the bundle, without server-owned metadata (`resourceVersion`, `uid`,
///   `selfLink`, `generation`, `managedFields`, `creationTimestamp`): namespaced ones get
///   `metadata.namespace` = the install namespace, cluster-scoped ones lose any namespace; all get
///   the labels `olm.managed: "true"`
///   and `operators.coreos.com/<package>.<namespace>: ""`. Services, ConfigMaps, Secrets and
///   namespaced §2.5 kinds get [`InstallTarget::owner`] as ownerReference; cluster-scoped §2.5
///   kinds get the owner labels. Bundle-shipped ServiceAccounts, Roles, RoleBindings,
///   ClusterRoles and ClusterRoleBindings get neither, as in OLM (they outlive the CSV, §5.2).
/// - the CSV with `metadata.namespace`, `spec.replaces` = [`InstallTarget::replaces`] (removed
///   when `None`), annotations `olm.targetNamespaces`, `olm.operatorGroup`,
///   `olm.operatorNamespace` and `operatorframework.io/properties` (§1.5).
/// - from `spec.install.spec` (strategy `deployment` only):
///   - a ServiceAccount for every `serviceAccountName` of `permissions`, `clusterPermissions` and
///     the deployments' pod templates, unless it is `default` or the bundle ships it (OLM creates
///     them only for the permissions; the deployments' are added so that their pods can start);
///   - per `permissions[i]`: a Role and a RoleBinding (to the ServiceAccount in the install
///     namespace) named `<csv>-<serviceAccount>-<hash>` in the install namespace, copied into every
///     other target namespace with label `olm.copiedFrom=<install namespace>`; with target `[""]`
///     (all namespaces) also a ClusterRole (the rules plus `get, list, watch` on namespaces) and
///     ClusterRoleBinding of one name whose hash also covers the install namespace (OLM's
///     `ensureSingletonRBAC`);
///   - per `clusterPermissions[i]`: a ClusterRole and ClusterRoleBinding named `<csv>-<hash>`;
///   - per `deployments[i]`: a Deployment as OLM's olm-operator makes it
///     (\[OLM\] `install/deployment.go` `deploymentForSpec`, §5.4): labels = the entry's `label`
///     map, then `olm.managed`, the owner labels and the component label; the pod template's
///     annotations merged with the CSV's (so it carries `olm.targetNamespaces`); the
///     Subscription config applied ([`super::SubscriptionConfig::apply_to`]); env
///     `OPERATOR_CONDITION_NAME=<csv>` in every container; `revisionHistoryLimit: 1`; label
///     `olm.deployment-spec-hash`; the owner reference.
///
///   - for `spec.webhookdefinitions` and `spec.apiservicedefinitions.owned`: the objects of
///     [`webhook`] (Service, serving Secret without data, its Role/RoleBinding, auth bindings,
///     the Deployment's certificate volumes, webhook configurations, APIServices, and the
///     conversion CRDs' `spec.conversion`); `docs/webhooks.md`.
///
///   Generated objects carry the owner labels `olm.owner`, `olm.owner.namespace`,
///   `olm.owner.kind`, and RBAC the label `olm.permissions.hash` computed exactly as OLM does
///   (base62 of SHA-224 over Go's JSON of the rules, or of `{RoleRef, Subjects}`). Generated
///   names are OLM's (`generateName` in OLM's `rbac.go`): `base-<hash>`, the hash
///   [`deep_hash_object`] of the CSV name, the namespace (`clusterPermissions` only) and the
///   permission entry; a Role lifted to a ClusterRole for an AllNamespaces install keeps the
///   Role's name (OLM's `ensureSingletonRBAC`). Equal to the names OLM v0.38.0 gives (checked
///   against OLM's objects by `tests/olm/compare.py`, install-automatic and cert-manager).
///
/// Order: by kind as in [`KINDS`], bundle objects (in file order) before generated ones of the
/// same kind.
///
/// # Errors
/// [`PlanError`]: no namespace, CSV name mismatch, invalid target namespaces, unsupported kinds
/// (all of them named in one error), reserved RBAC names ([`is_reserved_rbac_name`], all named), objects without apiVersion or name, an install strategy
/// other than `deployment` or with malformed entries, webhook or APIService definitions OLM
/// refuses ([`webhook::check`], all named).
pub fn steps(bundle: &Bundle, target: &InstallTarget) -> Result<Vec<Step>, PlanError> {
    let csv_name = check_input(bundle, target)?;
    let csv_value = &bundle.objects[bundle.csv_index].value;
    let defs = webhook::Definitions::read(csv_value).map_err(|(field, message)| {
        PlanError::InvalidWebhookDescription { csv: csv_name.clone(), problems: vec![(field, message)] }
    })?;
    let ctx = Ctx { target, csv: &csv_name };
    let (mut out, shipped_sas) = ctx.bundle_steps(bundle, &defs)?;

    // Read from the CSV as it is stored (OLM's CSV CRD defaults, [`go_csv_defaults`]), so that the
    // Deployments planned from a bundle and from the CSV on the cluster are the same, down to
    // their `olm.deployment-spec-hash`.
    let mut stored = csv_value.clone();
    go_csv_defaults(&mut stored);
    let strategy = Strategy::read(&csv_name, &stored)?;
    let owned_crds: Vec<String> = bundle.csv().owned_crds().into_iter().map(|c| c.name).collect();
    let crds_in_bundle: BTreeMap<String, Value> =
        bundle.crds().map(|m| (m.name().to_string(), m.value.clone())).collect();
    let problems = webhook::check(&defs, &owned_crds, &crds_in_bundle);
    if !problems.is_empty() {
        return Err(PlanError::InvalidWebhookDescription { csv: csv_name, problems });
    }
    out.extend(ctx.service_accounts(&strategy, &shipped_sas));
    for p in &strategy.permissions {
        for (rank, v) in ctx.permission_objects(p) {
            out.push((rank, ctx.step(v)));
        }
    }
    for p in &strategy.cluster_permissions {
        for (rank, v) in ctx.cluster_permission_objects(p) {
            out.push((rank, ctx.step(v)));
        }
    }
    // Pod templates get the CSV's annotations as the CSV is applied (with olm.targetNamespaces).
    let csv_annotations = ctx.csv_manifest(csv_value).pointer("/metadata/annotations").cloned().unwrap_or(json!({}));
    out.extend(ctx.deployments(&defs, &strategy, &csv_annotations)?);

    for p in defs.webhooks.iter().filter_map(|w| webhook::configuration(w, target)) {
        out.push((p.rank, ctx.planned(p)));
    }
    for a in &defs.apiservices {
        out.push((12, ctx.planned(webhook::apiservice(a, target))));
    }

    out.sort_by_key(|(rank, _)| *rank); // stable: bundle order, then generated order
    Ok(out.into_iter().map(|(_, s)| s).collect())
}

/// The checks of [`steps`] before any object is made: a namespace, the CSV name, the target
/// namespaces, the kinds of the bundle's objects, reserved RBAC names. The CSV's name.
fn check_input(bundle: &Bundle, target: &InstallTarget) -> Result<String, PlanError> {
    if target.namespace.is_empty() {
        return Err(PlanError::NoNamespace);
    }
    let csv_name = bundle.name().to_string();
    if target.csv_name != csv_name {
        return Err(PlanError::CsvNameMismatch { expected: target.csv_name.clone(), found: csv_name });
    }
    if target.all_namespaces() && target.target_namespaces.iter().any(|n| !n.is_empty()) {
        return Err(PlanError::InvalidTargetNamespaces { targets: target.target_namespaces.clone() });
    }
    let unsupported: Vec<String> = bundle
        .objects
        .iter()
        .filter(|m| kind_info(m.kind()).is_none_or(|k| GENERATED_ONLY.contains(&k.kind)))
        .map(|m| {
            format!("{} {} ({})", if m.kind().is_empty() { "<no kind>" } else { m.kind() }, m.name(), m.location())
        })
        .collect();
    if !unsupported.is_empty() {
        return Err(PlanError::UnsupportedResource { bundle: csv_name, objects: unsupported });
    }
    check_rbac(bundle, &csv_name)?;
    Ok(csv_name)
}

struct Strategy {
    permissions: Vec<Permission>,
    cluster_permissions: Vec<Permission>,
    deployments: Vec<DeploymentEntry>,
}

impl Strategy {
    fn read(csv: &str, value: &Value) -> Result<Strategy, PlanError> {
        let err =
            |field: String, message: String| PlanError::InvalidInstallStrategy { csv: csv.to_string(), field, message };
        let Some(install) = value.pointer("/spec/install") else {
            return Ok(Strategy { permissions: vec![], cluster_permissions: vec![], deployments: vec![] });
        };
        match install.get("strategy").and_then(Value::as_str) {
            Some("deployment") => {}
            other => {
                return Err(err(
                    "spec.install.strategy".into(),
                    format!("strategy is {other:?}; \"deployment\" is the only install strategy OLM knows"),
                ));
            }
        }
        let spec = install.get("spec").cloned().unwrap_or(Value::Null);
        let list = |name: &str| -> Result<Vec<Value>, PlanError> {
            match spec.get(name) {
                None | Some(Value::Null) => Ok(vec![]),
                Some(Value::Array(a)) => Ok(a.clone()),
                Some(_) => Err(err(format!("spec.install.spec.{name}"), "must be a list".into())),
            }
        };
        let mut permissions = Vec::new();
        let mut cluster_permissions = Vec::new();
        for (name, dest) in [("permissions", &mut permissions), ("clusterPermissions", &mut cluster_permissions)] {
            for (i, v) in list(name)?.into_iter().enumerate() {
                let p: Permission = serde_json::from_value(v).map_err(|e| {
                    err(
                        format!("spec.install.spec.{name}[{i}]"),
                        format!("{e}; an entry is {{serviceAccountName, rules: [PolicyRule]}}"),
                    )
                })?;
                if p.service_account_name.is_empty() {
                    return Err(err(
                        format!("spec.install.spec.{name}[{i}].serviceAccountName"),
                        "is empty; name the operator's ServiceAccount".into(),
                    ));
                }
                dest.push(p);
            }
        }
        let mut deployments = Vec::new();
        for (i, v) in list("deployments")?.into_iter().enumerate() {
            let d: DeploymentEntry = serde_json::from_value(v).map_err(|e| {
                err(
                    format!("spec.install.spec.deployments[{i}]"),
                    format!("{e}; an entry is {{name, spec: DeploymentSpec, label}}"),
                )
            })?;
            if d.name.is_empty() {
                return Err(err(
                    format!("spec.install.spec.deployments[{i}].name"),
                    "is empty; name the Deployment".into(),
                ));
            }
            deployments.push(d);
        }
        Ok(Strategy { permissions, cluster_permissions, deployments })
    }
}

/// Steps with their rank in the plan's order of kinds (sorted by rank at the end of [`steps`]).
type Ranked = Vec<(u8, Step)>;

struct Ctx<'a> {
    target: &'a InstallTarget,
    csv: &'a str,
}

impl Ctx<'_> {
    /// The steps of the bundle's own objects (the CSV as [`Ctx::csv_manifest`] makes it, CRDs
    /// with the installed-alongside annotation and their conversion webhook's `spec.conversion`)
    /// with their ranks, and the names of the ServiceAccounts the bundle ships.
    fn bundle_steps(&self, bundle: &Bundle, defs: &webhook::Definitions) -> Result<(Ranked, Vec<String>), PlanError> {
        // CRD name → spec.conversion of the conversion webhook that converts it.
        let conversions: BTreeMap<&str, Value> = defs
            .webhooks
            .iter()
            .filter(|w| w.type_ == WebhookAdmissionType::ConversionWebhook)
            .flat_map(|w| {
                w.conversion_crds.iter().flatten().map(move |c| (c.as_str(), webhook::conversion(w, self.target)))
            })
            .collect();
        let mut out: Ranked = Vec::new();
        let mut shipped_sas: Vec<String> = Vec::new();
        for (i, m) in bundle.objects.iter().enumerate() {
            let Some(info) = kind_info(m.kind()) else { continue };
            for (field, ok) in [("apiVersion", !m.api_version().is_empty()), ("metadata.name", !m.name().is_empty())] {
                if !ok {
                    return Err(PlanError::InvalidObject {
                        bundle: self.csv.to_string(),
                        location: m.location(),
                        kind: m.kind().to_string(),
                        field,
                    });
                }
            }
            if info.kind == "ServiceAccount" {
                shipped_sas.push(m.name().to_string());
            }
            let mut manifest =
                if i == bundle.csv_index { self.csv_manifest(&m.value) } else { self.bundle_object(m, info) };
            if info.kind == "CustomResourceDefinition" {
                let (key, value) = installed_alongside(&self.target.namespace, self.csv);
                annotations_mut(&mut manifest).insert(key, json!(value));
            }
            if info.kind == "CustomResourceDefinition"
                && let Some(conversion) = conversions.get(m.name())
                && let Some(spec) = manifest.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.insert("conversion".into(), conversion.clone());
            }
            out.push((info.rank, self.step(manifest)));
        }
        Ok((out, shipped_sas))
    }

    /// A ServiceAccount step for every `serviceAccountName` of the permissions and the
    /// deployments' pod templates, once each, unless it is `default` or the bundle ships it.
    fn service_accounts(&self, strategy: &Strategy, shipped_sas: &[String]) -> Ranked {
        let mut sa_names: Vec<String> = Vec::new();
        for p in strategy.permissions.iter().chain(&strategy.cluster_permissions) {
            sa_names.push(p.service_account_name.clone());
        }
        for d in &strategy.deployments {
            if let Some(sa) = d.spec.template.spec.as_ref().and_then(|s| s.service_account_name.clone()) {
                sa_names.push(sa);
            }
        }
        let mut out = Vec::new();
        let mut seen = Vec::new();
        for sa in sa_names {
            if sa.is_empty() || sa == "default" || shipped_sas.contains(&sa) || seen.contains(&sa) {
                continue;
            }
            seen.push(sa.clone());
            let mut v = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": self.target.namespace}});
            // As OLM (`rbac.go`: `AddNonBlockingOwner`, no owner labels): the CSV's ownerReference
            // and the component label; removal finds it by both (`removal::delete_owned`).
            self.common_labels(&mut v);
            self.add_owner(&mut v);
            out.push((1, self.step(v)));
        }
        out
    }

    /// The Deployment steps of the install strategy, and for a Deployment that serves webhooks
    /// or APIServices its certificate volumes and the objects of [`webhook::deployment_objects`]
    /// before it.
    fn deployments(
        &self,
        defs: &webhook::Definitions,
        strategy: &Strategy,
        csv_annotations: &Value,
    ) -> Result<Ranked, PlanError> {
        let mut out = Vec::new();
        let cert_deployments = defs.deployments();
        for d in &strategy.deployments {
            let mut with_certs;
            let d = if cert_deployments.contains(&d.name) {
                with_certs = DeploymentEntry { name: d.name.clone(), spec: d.spec.clone(), label: d.label.clone() };
                webhook::mutate_deployment(&mut with_certs.spec, &d.name);
                for p in webhook::deployment_objects(defs, self.target, &d.name, &with_certs.spec) {
                    out.push((p.rank, self.planned(p)));
                }
                &with_certs
            } else {
                d
            };
            let dep = deployment(self, d, csv_annotations).map_err(|e| PlanError::InvalidInstallStrategy {
                csv: self.csv.to_string(),
                field: format!("spec.install.spec.deployments[{}]", d.name),
                message: e.to_string(),
            })?;
            out.push((11, self.step(dep)));
        }
        Ok(out)
    }

    fn step(&self, manifest: Value) -> Step {
        let api_version = manifest.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.to_string()),
        };
        Step {
            resolving: self.csv.to_string(),
            group,
            version,
            kind: manifest.get("kind").and_then(Value::as_str).unwrap_or("").to_string(),
            name: manifest.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string(),
            namespace: manifest.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_string),
            manifest,
        }
    }

    /// A step for an object of [`webhook`]: common labels (webhook configurations only
    /// `olm.managed`), then the owner labels and the ownerReference as the object asks.
    fn planned(&self, p: webhook::Planned) -> Step {
        let mut v = p.value;
        let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
        if matches!(kind, "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") {
            // As OLM's: no component label (webhook configurations are none of an Operator's
            // components); removal finds them by their owner labels.
            labels_mut(&mut v).insert(LABEL_MANAGED.into(), json!("true"));
        } else {
            self.common_labels(&mut v);
        }
        if p.owner_labels {
            let labels = labels_mut(&mut v);
            for (k, val) in self.owner_labels() {
                labels.insert(k.into(), json!(val));
            }
        }
        if p.owned {
            self.add_owner(&mut v);
        }
        self.step(v)
    }

    fn owner_labels(&self) -> [(&'static str, String); 3] {
        [
            (LABEL_OWNER, self.csv.to_string()),
            (LABEL_OWNER_NAMESPACE, self.target.namespace.clone()),
            (LABEL_OWNER_KIND, "ClusterServiceVersion".to_string()),
        ]
    }

    /// olm.managed + component label (every object; none for a CSV of no package, one applied by
    /// hand, whose key would not be a valid label).
    fn common_labels(&self, v: &mut Value) {
        let labels = labels_mut(v);
        labels.insert(LABEL_MANAGED.into(), json!("true"));
        if !self.target.package.is_empty() {
            labels.insert(self.target.component_label(), json!(""));
        }
    }

    /// Common labels, owner labels, and (when `owned` and an owner is given) the ownerReference.
    fn generated_meta(&self, v: &mut Value, owned: bool) {
        self.common_labels(v);
        let labels = labels_mut(v);
        for (k, val) in self.owner_labels() {
            labels.insert(k.into(), json!(val));
        }
        if owned {
            self.add_owner(v);
        }
    }

    fn add_owner(&self, v: &mut Value) {
        let Some(owner) = &self.target.owner else { return };
        let Ok(owner) = serde_json::to_value(owner) else { return };
        let meta = meta_mut(v);
        let refs = meta.entry("ownerReferences").or_insert_with(|| json!([]));
        if !refs.is_array() {
            *refs = json!([]);
        }
        if let Some(a) = refs.as_array_mut() {
            let same = |r: &Value| r.get("kind") == owner.get("kind") && r.get("name") == owner.get("name");
            a.retain(|r| !same(r));
            a.push(owner);
        }
    }

    fn bundle_object(&self, m: &Manifest, info: &KindInfo) -> Value {
        let mut v = m.value.clone();
        let meta = meta_mut(&mut v);
        strip_server_fields(meta);
        if info.namespaced {
            meta.insert("namespace".into(), json!(self.target.namespace));
        } else {
            meta.remove("namespace");
        }
        self.common_labels(&mut v);
        match info.kind {
            "Service" | "ConfigMap" | "Secret" => self.add_owner(&mut v),
            _ if info.rank == 9 && info.namespaced => self.add_owner(&mut v),
            _ if info.rank == 9 => {
                let labels = labels_mut(&mut v);
                for (k, val) in self.owner_labels() {
                    labels.insert(k.into(), json!(val));
                }
            }
            _ => {}
        }
        v
    }

    fn csv_manifest(&self, csv: &Value) -> Value {
        let mut v = csv.clone();
        go_csv_defaults(&mut v);
        let meta = meta_mut(&mut v);
        strip_server_fields(meta);
        meta.insert("namespace".into(), json!(self.target.namespace));
        self.common_labels(&mut v);
        let ann = annotations_mut(&mut v);
        ann.insert(ANNOTATION_TARGET_NAMESPACES.into(), json!(self.target.target_namespaces_annotation()));
        if let Some(og) = &self.target.operator_group {
            ann.insert(ANNOTATION_OPERATOR_GROUP.into(), json!(og));
            ann.insert(ANNOTATION_OPERATOR_NAMESPACE.into(), json!(self.target.namespace));
        }
        if !self.target.properties.is_empty() {
            let text = marshal_raw(&json!({"properties": self.target.properties}));
            ann.insert(ANNOTATION_PROPERTIES.into(), json!(text));
        }
        if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
            match &self.target.replaces {
                Some(r) if !r.is_empty() => {
                    spec.insert("replaces".into(), json!(r));
                }
                _ => {
                    spec.remove("replaces");
                }
            }
        }
        v
    }

    fn permission_objects(&self, p: &Permission) -> Vec<(u8, Value)> {
        let ns = &self.target.namespace;
        let perm = permission_json(p);
        let name = generate_name(
            &format!("{}-{}", self.csv, p.service_account_name),
            &json!({"name": self.csv, "permission": perm}),
        );
        let rules = rules_json(&p.rules);
        let rules_hash = permissions_hash(&p.rules);
        let role_ref = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
        let subjects = json!([{"kind": "ServiceAccount", "name": p.service_account_name, "namespace": ns}]);
        let binding_hash = binding_hash(&role_ref, &subjects);

        let role = |namespace: &str| {
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": name, "namespace": namespace, "labels": {LABEL_PERMISSIONS_HASH: rules_hash}},
                   "rules": rules})
        };
        let binding = |namespace: &str| {
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": name, "namespace": namespace, "labels": {LABEL_PERMISSIONS_HASH: binding_hash}},
                   "roleRef": role_ref, "subjects": subjects})
        };
        let mut out = Vec::new();
        let mut r = role(ns);
        self.generated_meta(&mut r, true);
        out.push((2, r));
        let mut b = binding(ns);
        self.generated_meta(&mut b, true);
        out.push((3, b));
        if self.target.all_namespaces() {
            // Lifted to cluster scope under the Role's own name, as OLM's `ensureSingletonRBAC`
            // (`pkg/controller/operators/olm/operatorgroup.go`) names them, so that capstan
            // adopts what an OLM install made. The same CSV in a second AllNamespaces group
            // (possible only for one that provides no APIs: otherwise the groups conflict over
            // them) shares these, as under OLM.
            let subjects = subjects.clone();
            let mut cluster_rules = rules.clone();
            if let Some(a) = cluster_rules.as_array_mut() {
                a.push(json!({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]}));
            }
            let mut cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": name, "labels": {LABEL_PERMISSIONS_HASH: rules_hash}}, "rules": cluster_rules});
            self.generated_meta(&mut cr, false);
            out.push((4, cr));
            let mut crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": name, "labels": {LABEL_PERMISSIONS_HASH: binding_hash}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}, "subjects": subjects});
            self.generated_meta(&mut crb, false);
            out.push((5, crb));
        } else {
            for t in self.target.effective_targets() {
                if &t == ns {
                    continue;
                }
                for (rank, mut v) in [(2, role(&t)), (3, binding(&t))] {
                    self.generated_meta(&mut v, false);
                    labels_mut(&mut v).insert(LABEL_COPIED_FROM.into(), json!(ns));
                    out.push((rank, v));
                }
            }
        }
        out
    }

    fn cluster_permission_objects(&self, p: &Permission) -> Vec<(u8, Value)> {
        let ns = &self.target.namespace;
        let name =
            generate_name(self.csv, &json!({"name": self.csv, "namespace": ns, "permission": permission_json(p)}));
        let role_ref = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name});
        let subjects = json!([{"kind": "ServiceAccount", "name": p.service_account_name, "namespace": ns}]);
        let mut cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {LABEL_PERMISSIONS_HASH: permissions_hash(&p.rules)}},
            "rules": rules_json(&p.rules)});
        self.generated_meta(&mut cr, false);
        let mut crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {LABEL_PERMISSIONS_HASH: binding_hash(&role_ref, &subjects)}},
            "roleRef": role_ref, "subjects": subjects});
        self.generated_meta(&mut crb, false);
        vec![(4, cr), (5, crb)]
    }
}

/// The CSV's spec as OLM stores it after reading the bundle into its Go type
/// (`operators/v1alpha1.ClusterServiceVersionSpec`) and writing it back: struct fields without
/// `omitempty` appear even when the bundle leaves them out — `apiservicedefinitions: {}`,
/// `cleanup: {enabled: false}`, each install deployment's `spec.strategy: {}` — and empty lists
/// with `omitempty` (`customresourcedefinitions.owned` / `required`) disappear; and the defaults
/// of OLM's CSV CRD schema apply (container ports' `protocol: TCP`, webhook definitions'
/// `containerPort: 443`). Seen in
/// `make compare-olm`; without it, a CSV capstan made and one OLM made differ for no reason a
/// user could see.
fn go_csv_defaults(csv: &mut Value) {
    let Some(spec) = csv.get_mut("spec").and_then(Value::as_object_mut) else { return };
    spec.entry("apiservicedefinitions").or_insert_with(|| json!({}));
    spec.entry("cleanup").or_insert_with(|| json!({"enabled": false}));
    if let Some(crds) = spec.get_mut("customresourcedefinitions").and_then(Value::as_object_mut) {
        crds.retain(|k, v| !((k == "owned" || k == "required") && v.as_array().is_some_and(Vec::is_empty)));
    }
    let deployments = spec
        .get_mut("install")
        .and_then(|i| i.get_mut("spec"))
        .and_then(|s| s.get_mut("deployments"))
        .and_then(Value::as_array_mut);
    for d in deployments.into_iter().flatten() {
        if let Some(ds) = d.get_mut("spec").and_then(Value::as_object_mut) {
            ds.entry("strategy").or_insert_with(|| json!({}));
            // OLM's CSV CRD schema defaults a container port's protocol (structural defaulting by
            // the API server); capstan's CRD leaves the deployment spec unchecked, so set it here.
            for list in ["initContainers", "containers"] {
                let Some(cs) = ds
                    .get_mut("template")
                    .and_then(|t| t.get_mut("spec"))
                    .and_then(|p| p.get_mut(list))
                    .and_then(Value::as_array_mut)
                else {
                    continue;
                };
                for port in cs.iter_mut().filter_map(|c| c.get_mut("ports")).filter_map(Value::as_array_mut).flatten() {
                    if let Some(port) = port.as_object_mut() {
                        port.entry("protocol").or_insert_with(|| json!("TCP"));
                    }
                }
            }
        }
    }
    // The same schema defaults a webhook definition's `containerPort` to 443.
    for w in spec.get_mut("webhookdefinitions").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(w) = w.as_object_mut() {
            w.entry("containerPort").or_insert_with(|| json!(443));
        }
    }
}

/// The Deployment OLM's olm-operator makes from one `spec.install.spec.deployments[]` entry
/// (\[OLM\] `pkg/controller/install/deployment.go` `deploymentForSpec`, §5.4): labels = the entry's
/// `label` map, then `olm.managed`, the owner labels and the component label; the pod template's
/// annotations merged with the CSV's (so it carries `olm.targetNamespaces`); the Subscription
/// config applied ([`super::SubscriptionConfig::apply_to`]); env `OPERATOR_CONDITION_NAME=<csv>`
/// in every container; `revisionHistoryLimit: 1`; label `olm.deployment-spec-hash`; the owner
/// reference.
fn deployment(ctx: &Ctx<'_>, d: &DeploymentEntry, csv_annotations: &Value) -> Result<Value, serde_json::Error> {
    let mut dep = Deployment { spec: Some(d.spec.clone()), ..Default::default() };
    dep.metadata.name = Some(d.name.clone());
    dep.metadata.namespace = Some(ctx.target.namespace.clone());
    let spec = dep.spec.get_or_insert_with(Default::default);
    let tmeta = spec.template.metadata.get_or_insert_with(Default::default);
    let mut ann = tmeta.annotations.take().unwrap_or_default();
    if let Some(m) = csv_annotations.as_object() {
        for (k, v) in m {
            if let Some(s) = v.as_str() {
                ann.insert(k.clone(), s.to_string());
            }
        }
    }
    tmeta.annotations = Some(ann);
    let mut labels = d.label.clone().unwrap_or_default();
    labels.insert(LABEL_MANAGED.into(), "true".into());
    for (k, v) in ctx.owner_labels() {
        labels.insert(k.into(), v);
    }
    if !ctx.target.package.is_empty() {
        labels.insert(ctx.target.component_label(), String::new());
    }
    dep.metadata.labels = Some(labels);

    ctx.target.config.apply_to(&mut dep);
    let spec = dep.spec.get_or_insert_with(Default::default);
    let pod = spec.template.spec.get_or_insert_with(Default::default);
    super::config::inject_env(
        pod,
        &[k8s_openapi::api::core::v1::EnvVar {
            name: "OPERATOR_CONDITION_NAME".into(),
            value: Some(ctx.csv.to_string()),
            value_from: None,
        }],
    );
    spec.revision_history_limit = Some(1);
    let spec_json = serde_json::to_value(&dep.spec)?;
    let hash = short_hash(&spec_json);
    if let Some(l) = dep.metadata.labels.as_mut() {
        l.insert(LABEL_DEPLOYMENT_SPEC_HASH.into(), hash);
    }
    let mut v = serde_json::to_value(&dep)?;
    ctx.add_owner(&mut v);
    Ok(v)
}

/// Removes metadata the API server owns, which a bundle exported from a cluster may carry and
/// which server-side apply refuses or treats as a precondition (`resourceVersion`).
fn strip_server_fields(meta: &mut Map<String, Value>) {
    for k in ["resourceVersion", "uid", "selfLink", "generation", "managedFields", "creationTimestamp"] {
        meta.remove(k);
    }
}

fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = json!({});
    }
    let obj = v.as_object_mut().expect("made an object above");
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut().expect("made an object above")
}

fn sub_map_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    let entry = meta_mut(v).entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("made an object above")
}

/// Prefix of the annotation OLM writes on each CRD an InstallPlan applies, naming the CSV it was
/// installed alongside (upstream `pkg/controller/operators/internal/alongside`).
pub const ANNOTATION_INSTALLED_ALONGSIDE: &str = "operatorframework.io/installed-alongside-";

/// The installed-alongside annotation of a CRD installed with CSV `namespace/csv`: key
/// [`ANNOTATION_INSTALLED_ALONGSIDE`] followed by the FNV-1a 64-bit hash of `namespace/csv` in
/// lower-case hex, value `namespace/csv` (upstream `alongside.key`). The plan names the
/// installing CSV; the annotations of other installs of the CRD are added at the apply
/// ([`installed_alongside_elsewhere`]).
pub fn installed_alongside(namespace: &str, csv: &str) -> (String, String) {
    let value = format!("{namespace}/{csv}");
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(value.as_bytes());
    (format!("{ANNOTATION_INSTALLED_ALONGSIDE}{:x}", h.finish()), value)
}

/// The installed-alongside annotations of a CRD on the cluster ([`installed_alongside`]) that
/// name a CSV in a namespace other than `namespace` (the installing plan's), as
/// `(annotation key, CSV namespace, CSV name)`: the other installs of the CRD, which a plan
/// applying it again keeps when their CSV still exists and is not a copy (OLM
/// `setInstalledAlongsideAnnotation`, `pkg/controller/operators/catalog/step.go`; the caller
/// checks the CSVs). One of `namespace` is the CSV this plan replaces or one that is gone: the
/// plan's own annotation takes its place (docs/olm-differences.md E21). Values that are not
/// `namespace/name` are dropped, as OLM's `FromObject` drops them. Pure.
pub fn installed_alongside_elsewhere(
    annotations: &std::collections::BTreeMap<String, String>,
    namespace: &str,
) -> Vec<(String, String, String)> {
    annotations
        .iter()
        .filter(|(k, _)| k.starts_with(ANNOTATION_INSTALLED_ALONGSIDE))
        .filter_map(|(k, v)| {
            let (ns, name) = v.split_once('/')?;
            (!ns.is_empty() && !name.is_empty() && !name.contains('/') && ns != namespace)
                .then(|| (k.clone(), ns.to_string(), name.to_string()))
        })
        .collect()
}

fn labels_mut(v: &mut Value) -> &mut Map<String, Value> {
    sub_map_mut(v, "labels")
}

/// `metadata.annotations` of manifest `v`, created (with `metadata`) when missing.
pub(crate) fn annotations_mut(v: &mut Value) -> &mut Map<String, Value> {
    sub_map_mut(v, "annotations")
}

/// A PolicyRule as Go's `encoding/json` writes `rbac/v1.PolicyRule`: fields in struct order
/// (`verbs`, `apiGroups`, `resources`, `resourceNames`, `nonResourceURLs`), empty lists omitted
/// except `verbs`.
fn rule_json(r: &PolicyRule) -> Value {
    let mut m = Map::new();
    m.insert("verbs".into(), json!(r.verbs));
    for (k, v) in [
        ("apiGroups", &r.api_groups),
        ("resources", &r.resources),
        ("resourceNames", &r.resource_names),
        ("nonResourceURLs", &r.non_resource_urls),
    ] {
        if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
            m.insert(k.into(), json!(v));
        }
    }
    Value::Object(m)
}

fn rules_json(rules: &[PolicyRule]) -> Value {
    Value::Array(rules.iter().map(rule_json).collect())
}

fn permission_json(p: &Permission) -> Value {
    json!({"serviceAccountName": p.service_account_name, "rules": rules_json(&p.rules)})
}

/// `olm.permissions.hash` of a Role or ClusterRole: base62 SHA-224 of Go's JSON of the rules
/// (\[OLM\] `rbac.go` `PolicyRuleHashLabelValue`).
pub fn permissions_hash(rules: &[PolicyRule]) -> String {
    base62(&Sha224::digest(marshal_raw(&rules_json(rules)).as_bytes()))
}

/// `olm.permissions.hash` of a binding: base62 SHA-224 of Go's JSON of
/// `{"RoleRef":{apiGroup,kind,name},"Subjects":[{kind,apiGroup?,name,namespace?}]}`
/// (\[OLM\] `rbac.go` `RoleReferenceAndSubjectHashLabelValue`).
fn binding_hash(role_ref: &Value, subjects: &Value) -> String {
    let s = |k: &str, v: &Value| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let rr = json!({"apiGroup": s("apiGroup", role_ref), "kind": s("kind", role_ref), "name": s("name", role_ref)});
    let subs: Vec<Value> = subjects
        .as_array()
        .map(|a| {
            a.iter()
                .map(|sub| {
                    let mut m = Map::new();
                    m.insert("kind".into(), json!(s("kind", sub)));
                    if !s("apiGroup", sub).is_empty() {
                        m.insert("apiGroup".into(), json!(s("apiGroup", sub)));
                    }
                    m.insert("name".into(), json!(s("name", sub)));
                    if !s("namespace", sub).is_empty() {
                        m.insert("namespace".into(), json!(s("namespace", sub)));
                    }
                    Value::Object(m)
                })
                .collect()
        })
        .unwrap_or_default();
    base62(&Sha224::digest(marshal_raw(&json!({"RoleRef": rr, "Subjects": subs})).as_bytes()))
}

/// `<base>-<hash>`, the name OLM gives generated RBAC (\[OLM\] `pkg/controller/registry/resolver/rbac.go`
/// `generateName`): the hash is [`deep_hash_object`] of `obj`, and `base` is cut to
/// `63 - len(hash) - 1` characters when `len(base) + len(hash)` exceeds 63 — OLM's own check,
/// kept as is (it lets a 64-character name through, which RBAC names allow) so that capstan
/// computes the same name as OLM for the same CSV and adopts the objects an OLM install made.
fn generate_name(base: &str, obj: &Value) -> String {
    let hash = deep_hash_object(obj);
    let mut base = base.to_string();
    if base.len() + hash.len() > MAX_NAME_LENGTH {
        let mut cut = MAX_NAME_LENGTH.saturating_sub(hash.len() + 1);
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base.truncate(cut);
    }
    format!("{base}-{hash}")
}

#[cfg(test)]
mod tests;
