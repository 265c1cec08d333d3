//! ClusterServiceVersion reconciler (minimal; `reference/olm-v0.md` §1.5 "Transition rules"):
//! OperatorGroup membership and install mode first (Failed with `NoOperatorGroup`,
//! `TooManyOperatorGroups`, `UnsupportedOperatorGroup`), then None → Pending
//! (`RequirementsUnknown`) → InstallReady (`AllRequirementsMet`) → Installing (`InstallWaiting`)
//! → Succeeded (`InstallSucceeded`) once every Deployment of the install strategy is Available;
//! a Succeeded CSV whose Deployment is no longer Available goes back to Failed
//! (`ComponentUnhealthy`). A Succeeded CSV deletes the CSV named in its `spec.replaces`.
//! In Pending the requirements are checked and written to `status.requirementStatus`
//! ([`requirement_status`]); the CSV stays Pending (`RequirementsNotMet`) until all are met.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::events::EventType;
use super::{Context, Error, apply_typed_status, fresh, kube_err, now_time};
use crate::api::clusterserviceversion::{
    ClusterServiceVersionStatus, CsvPhase, CsvReason, DependentStatus, RequirementStatus, RequirementStatusReason,
};
use crate::api::operatorgroup::OperatorGroupStatus;
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::install::from_watch_cache;
use crate::install::preflight::{self, Question, Subject};

/// Why a CSV's install modes do not fit its OperatorGroup's target namespaces (§1.5,
/// [API] `clusterserviceversion.go` `InstallModeSet.Supports`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InstallModeError {
    /// OLM's reason: `UnsupportedOperatorGroup`, `InvalidInstallModes` or `NoTargetNamespaces`.
    pub reason: &'static str,
    /// What does not fit and what to do.
    pub message: String,
}

/// Checks `modes` (`spec.installModes` as `(type, supported)`) against the OperatorGroup's target
/// namespaces `targets` (`[""]` = all namespaces) for an operator in `namespace`.
pub fn check_install_mode(
    namespace: &str,
    targets: &[String],
    modes: &[(String, bool)],
) -> Result<(), InstallModeError> {
    let supports = |m: &str| modes.iter().any(|(t, s)| t == m && *s);
    let need = |m: &str, why: String| {
        if supports(m) {
            Ok(())
        } else {
            Err(InstallModeError {
                reason: "UnsupportedOperatorGroup",
                message: format!(
                    "{why} needs install mode {m}, which the CSV does not support (spec.installModes supports: {}); change the OperatorGroup's targetNamespaces to fit one of those",
                    {
                        let ok: Vec<&str> = modes.iter().filter(|(_, s)| *s).map(|(t, _)| t.as_str()).collect();
                        if ok.is_empty() { "none".to_string() } else { ok.join(", ") }
                    }
                ),
            })
        }
    };
    match targets {
        [] => Err(InstallModeError { reason: "NoTargetNamespaces", message: "the OperatorGroup selects no target namespace; set spec.targetNamespaces or a selector that matches a namespace".into() }),
        [t] if t.is_empty() => need("AllNamespaces", "an OperatorGroup targeting all namespaces".into()),
        [t] if t == namespace => need("OwnNamespace", format!("an OperatorGroup targeting only its own namespace {namespace}")),
        [t] => need("SingleNamespace", format!("an OperatorGroup targeting the single namespace {t}")),
        many => {
            if many.iter().any(|t| t.is_empty()) {
                return Err(InstallModeError { reason: "InvalidInstallModes", message: "the OperatorGroup's targetNamespaces mixes \"\" (all namespaces) with named namespaces; use one or the other".into() });
            }
            need("MultiNamespace", format!("an OperatorGroup targeting namespaces {}", many.join(", ")))?;
            if many.iter().any(|t| t == namespace) {
                need("OwnNamespace", format!("an OperatorGroup whose targets include its own namespace {namespace}"))?;
            }
            Ok(())
        }
    }
}

/// The OperatorGroup of a namespace as the CSV and InstallPlan reconcilers see it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GroupTargets {
    /// The one OperatorGroup `name` and its target namespaces (`[""]` for all namespaces).
    Found {
        /// The OperatorGroup's name.
        name: String,
        /// Its target namespaces.
        targets: Vec<String>,
    },
    /// No usable OperatorGroup: OLM's reason (`NoOperatorGroup`, `TooManyOperatorGroups`,
    /// `InvalidOperatorGroup`) and what to do.
    Unfit {
        /// The reason.
        reason: &'static str,
        /// The message.
        message: String,
    },
}

/// The OperatorGroup of `namespace` and its target namespaces ([`GroupTargets`]).
pub(crate) async fn operator_group_targets(client: &Client, namespace: &str) -> Result<GroupTargets, Error> {
    let ogs = Api::<OperatorGroup>::namespaced(client.clone(), namespace)
        .list(&from_watch_cache())
        .await
        .map_err(kube_err(format!("listing OperatorGroups in {namespace}")))?;
    let og = match ogs.items.as_slice() {
        [] => {
            return Ok(GroupTargets::Unfit {
                reason: "NoOperatorGroup",
                message: format!(
                    "csv in namespace {namespace} with no operatorgroups; create one OperatorGroup in {namespace}"
                ),
            });
        }
        [og] => og,
        many => {
            let names: Vec<String> = many.iter().map(|o| o.name_any()).collect();
            return Ok(GroupTargets::Unfit {
                reason: "TooManyOperatorGroups",
                message: format!(
                    "csv created in namespace {namespace} with multiple operatorgroups ({}); keep exactly one",
                    names.join(", ")
                ),
            });
        }
    };
    let targets = match (&og.spec.target_namespaces, &og.spec.selector) {
        (Some(t), _) if !t.is_empty() => t.clone(),
        (_, Some(sel))
            if sel.match_labels.as_ref().is_some_and(|m| !m.is_empty())
                || sel.match_expressions.as_ref().is_some_and(|m| !m.is_empty()) =>
        {
            let selector = match label_selector(sel) {
                Ok(s) => s,
                Err(e) => {
                    return Ok(GroupTargets::Unfit {
                        reason: "InvalidOperatorGroup",
                        message: format!("OperatorGroup {namespace}/{}: spec.selector: {e}", og.name_any()),
                    });
                }
            };
            let nss = Api::<Namespace>::all(client.clone()).list(&from_watch_cache().labels(&selector)).await.map_err(
                kube_err(format!("listing namespaces for the selector of OperatorGroup {namespace}/{}", og.name_any())),
            )?;
            let mut names: Vec<String> = nss.items.iter().map(|n| n.name_any()).collect();
            names.sort();
            names
        }
        _ => vec![String::new()],
    };
    Ok(GroupTargets::Found { name: og.name_any(), targets })
}

/// OLM's `status.requirementStatus` (§1.5 "requirements"): one entry per owned or required CRD
/// (`Present` when it exists and is Established, else `NotPresent`) and per ServiceAccount of
/// `permissions` / `clusterPermissions` (`Present` with one `PolicyRule` dependent per rule,
/// `Satisfied` when the ServiceAccount may do every group × resource × verb of the rule (the bound
/// roles as read, else a SubjectAccessReview) — in the CSV's namespace for `permissions`, cluster-wide for
/// `clusterPermissions`). Returns the entries and a description of each unmet requirement.
async fn requirement_status(
    client: &Client,
    csv: &ClusterServiceVersion,
    ns: &str,
) -> Result<(Vec<RequirementStatus>, Vec<String>), Error> {
    let mut entries = Vec::new();
    let mut missing = Vec::new();
    // Order and checks as OLM's requirementAndPermissionStatus: minKubeVersion, each CRD once
    // (owned wins, by name), required then owned APIServices, native APIs, then the
    // ServiceAccounts (issue 13, issue 14).
    // The server's version (for minKubeVersion) and the four kinds of requirement are read
    // together (independent reads), then listed in OLM's order.
    let version = async {
        match csv.spec.min_kube_version.as_deref().is_some_and(|m| !m.is_empty()) {
            true => Ok::<_, Error>(Some(client.apiserver_version().await.ok().map(|i| i.git_version))),
            false => Ok(None),
        }
    };
    let mut parts: [(Vec<RequirementStatus>, Vec<String>); 4] = Default::default();
    let [crds, apiservices, native, accounts] = &mut parts;
    let (server, ..) = futures::try_join!(
        version,
        crd_requirements(client, csv, &mut crds.0, &mut crds.1),
        apiservice_requirements(client, csv, &mut apiservices.0, &mut apiservices.1),
        native_api_requirements(client, csv, &mut native.0, &mut native.1),
        service_account_requirements(client, csv, ns, &mut accounts.0, &mut accounts.1),
    )?;
    if let Some(server) = server
        && let Some((met, entry)) = csv.min_kube_version_status(server.as_deref().ok_or(()))
    {
        if !met {
            missing.push(format!("spec.minKubeVersion: {}", entry.message));
        }
        entries.push(entry);
    }
    for (e, m) in parts {
        entries.extend(e);
        missing.extend(m);
    }
    Ok((entries, missing))
}

/// The CRD entries of [`requirement_status`]: each owned or required CRD once, owned first.
async fn crd_requirements(
    client: &Client,
    csv: &ClusterServiceVersion,
    entries: &mut Vec<RequirementStatus>,
    missing: &mut Vec<String>,
) -> Result<(), Error> {
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let descriptions = csv.all_crd_descriptions();
    let crds =
        futures::future::try_join_all(descriptions.iter().map(|d| {
            let api = crd_api.clone();
            async move {
                api.get_opt(&d.name).await.map_err(kube_err(format!("reading CustomResourceDefinition {}", d.name)))
            }
        }))
        .await?;
    for (d, crd) in descriptions.into_iter().zip(crds) {
        let cond = |t: &str| {
            crd.as_ref()
                .and_then(|c| c.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == t && c.status == "True"))
        };
        let served = crd.as_ref().is_some_and(|c| c.spec.versions.iter().any(|v| v.name == d.version && v.served));
        let (st, msg) = match &crd {
            None => (RequirementStatusReason::NotPresent, "CRD is not present"),
            Some(_) if !served => (RequirementStatusReason::NotPresent, "CRD version not served"),
            Some(_) if cond("Established") && cond("NamesAccepted") => {
                (RequirementStatusReason::Present, "CRD is present and Established condition is true")
            }
            Some(_) => (
                RequirementStatusReason::PresentNotAvailable,
                "CRD is present but the Established condition is False (not available)",
            ),
        };
        let present = st == RequirementStatusReason::Present;
        if !present {
            missing.push(format!("CustomResourceDefinition {} (version {}): {msg}", d.name, d.version));
        }
        let uuid = crd.as_ref().and_then(|c| c.metadata.uid.clone()).filter(|_| present);
        entries.push(RequirementStatus {
            uuid,
            ..requirement("apiextensions.k8s.io", "CustomResourceDefinition", &d.name, st, msg)
        });
    }
    Ok(())
}

/// The APIService entries of [`requirement_status`], as OLM's `requirementStatus`: a required
/// APIService `<version>.<group>` is `Present` when its kind is served and the APIService is
/// Available, else `NotPresent`; an owned one is `DeploymentFound` when its `deploymentName` is
/// in the install strategy, else `DeploymentNotFound` (unmet).
async fn apiservice_requirements(
    client: &Client,
    csv: &ClusterServiceVersion,
    entries: &mut Vec<RequirementStatus>,
    missing: &mut Vec<String>,
) -> Result<(), Error> {
    let Some(defs) = csv.spec.apiservicedefinitions.as_ref() else { return Ok(()) };
    for r in defs.required.iter().flatten() {
        let name = format!("{}.{}", r.version, r.group);
        let (available, uuid) = match served_kind(client, &r.group, &r.version, &r.kind).await? {
            false => (false, None),
            true => apiservice_available(client, &name).await?,
        };
        let (st, msg) = if available {
            (RequirementStatusReason::Present, "APIService is available")
        } else {
            (RequirementStatusReason::NotPresent, "APIService is not present or not available")
        };
        if !available {
            missing.push(format!("required APIService {name} ({}): {msg}", r.kind));
        }
        entries.push(RequirementStatus { uuid, ..requirement("apiregistration.k8s.io", "APIService", &name, st, msg) });
    }
    let strategy: Vec<&str> =
        csv.spec.install.spec.iter().flat_map(|s| s.deployments.iter().map(|d| d.name.as_str())).collect();
    for o in defs.owned.iter().flatten() {
        let name = format!("{}.{}", o.version, o.group);
        let found = o.deployment_name.as_deref().is_some_and(|d| strategy.contains(&d));
        let (st, msg) = if found {
            (RequirementStatusReason::DeploymentFound, "")
        } else {
            (RequirementStatusReason::DeploymentNotFound, "")
        };
        if !found {
            missing.push(format!(
                "owned APIService {name}: deploymentName {:?} is not a Deployment of spec.install",
                o.deployment_name.as_deref().unwrap_or_default()
            ));
        }
        entries.push(requirement("apiregistration.k8s.io", "APIService", &name, st, msg));
    }
    Ok(())
}

/// Whether `kind` is served in `group/version` (discovery; a group the server lacks is not).
async fn served_kind(client: &Client, group: &str, version: &str, kind: &str) -> Result<bool, Error> {
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    // The core group is discovered at /api/<version>, every other at /apis/<group>/<version>.
    let found = if group.is_empty() {
        client.list_core_api_resources(version).await
    } else {
        client.list_api_group_resources(&gv).await
    };
    match found {
        Ok(list) => Ok(list.resources.iter().any(|r| r.kind == kind)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 503 => Ok(false),
        Err(e) => Err(kube_err(format!("discovering API {gv}"))(e)),
    }
}

/// Whether APIService `name` exists with condition `Available=True`, and its uid.
pub(crate) async fn apiservice_available(client: &Client, name: &str) -> Result<(bool, Option<String>), Error> {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
        "apiservices",
    );
    let Some(obj) = Api::<DynamicObject>::all_with(client.clone(), &ar)
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading APIService {name}")))?
    else {
        return Ok((false, None));
    };
    let available = obj
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Available" && c["status"] == "True"));
    Ok((available, obj.metadata.uid.filter(|_| available)))
}

/// The `spec.nativeAPIs` entries of [`requirement_status`], checked by discovery.
async fn native_api_requirements(
    client: &Client,
    csv: &ClusterServiceVersion,
    entries: &mut Vec<RequirementStatus>,
    missing: &mut Vec<String>,
) -> Result<(), Error> {
    for api in csv.spec.native_apis.iter().flatten() {
        let gv = if api.group.is_empty() { api.version.clone() } else { format!("{}/{}", api.group, api.version) };
        let served = served_kind(client, &api.group, &api.version, &api.kind).await?;
        let (st, msg) = if served {
            (RequirementStatusReason::Present, "Native API exists")
        } else {
            (RequirementStatusReason::NotPresent, "Native API does not exist")
        };
        if !served {
            missing.push(format!("native API {gv} {}: {msg}", api.kind));
        }
        entries.push(RequirementStatus {
            version: api.version.clone(),
            ..requirement(&api.group, &api.kind, &format!("{}.{}", api.version, api.group), st, msg)
        });
    }
    Ok(())
}

/// The ServiceAccount entries of [`requirement_status`]: one per ServiceAccount, with a `PolicyRule`
/// dependent per rule: satisfied when the roles bound to the ServiceAccount grant every attribute
/// of the rule ([`super::rbac::granted_rules`], read once per ServiceAccount), an attribute they do
/// not grant checked by SubjectAccessReview.
async fn service_account_requirements(
    client: &Client,
    csv: &ClusterServiceVersion,
    ns: &str,
    entries: &mut Vec<RequirementStatus>,
    missing: &mut Vec<String>,
) -> Result<(), Error> {
    let strategy = csv.spec.install.spec.as_ref();
    let mut perms: Vec<(&crate::api::clusterserviceversion::StrategyDeploymentPermissions, bool)> = Vec::new();
    if let Some(s) = strategy {
        perms.extend(s.permissions.iter().flatten().map(|p| (p, true)));
        perms.extend(s.cluster_permissions.iter().flatten().map(|p| (p, false)));
    }
    let sa_api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let mut by_sa: std::collections::BTreeMap<String, Vec<DependentStatus>> = std::collections::BTreeMap::new();
    let mut absent = std::collections::BTreeSet::new();
    let mut granted: std::collections::BTreeMap<String, super::rbac::GrantedRules> = std::collections::BTreeMap::new();
    for (perm, namespaced) in perms {
        let sa = &perm.service_account_name;
        if !by_sa.contains_key(sa)
            && !absent.contains(sa)
            && sa_api.get_opt(sa).await.map_err(kube_err(format!("reading ServiceAccount {ns}/{sa}")))?.is_none()
        {
            absent.insert(sa.clone());
        }
        if absent.contains(sa) {
            continue;
        }
        if !granted.contains_key(sa) {
            let who = preflight::ServiceAccount { namespace: ns.to_string(), name: sa.clone() };
            granted.insert(sa.clone(), super::rbac::granted_rules(client, &who).await?);
        }
        let rules = &granted[sa];
        let deps = by_sa.entry(sa.clone()).or_default();
        for rule in &perm.rules {
            let mut denied = Vec::new();
            for q in Question::from_rule(rule, namespaced.then_some(ns)) {
                // Allowed by the bound roles as read: no need to ask. Otherwise the API server
                // decides (it also knows authorizers other than RBAC).
                if !rules.allows(&q) && !sa_allowed(client, ns, sa, &q).await? {
                    denied.push(q);
                }
            }
            let rule_json = serde_json::to_string(rule).unwrap_or_default();
            let scope = if namespaced { "namespaced" } else { "cluster" };
            if !denied.is_empty() {
                missing.push(format!("ServiceAccount {ns}/{sa} lacks the {scope} rule {rule_json}"));
            }
            deps.push(DependentStatus {
                group: "rbac.authorization.k8s.io".into(),
                version: "v1".into(),
                kind: "PolicyRule".into(),
                status: if denied.is_empty() {
                    RequirementStatusReason::Satisfied
                } else {
                    RequirementStatusReason::NotSatisfied
                },
                uuid: None,
                message: Some(format!("{scope} rule:{rule_json}")),
            });
        }
    }
    for sa in &absent {
        missing.push(format!("ServiceAccount {ns}/{sa} is not present"));
        entries.push(requirement(
            "",
            "ServiceAccount",
            sa,
            RequirementStatusReason::NotPresent,
            "Service account does not exist",
        ));
    }
    for (sa, deps) in by_sa {
        entries.push(RequirementStatus {
            dependents: deps,
            ..requirement("", "ServiceAccount", &sa, RequirementStatusReason::Present, "Service account present")
        });
    }
    Ok(())
}

/// One `status.requirementStatus` entry of API version `v1`.
fn requirement(
    group: &str,
    kind: &str,
    name: &str,
    status: RequirementStatusReason,
    message: &str,
) -> RequirementStatus {
    RequirementStatus {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        name: name.into(),
        status,
        message: message.into(),
        uuid: None,
        dependents: Vec::new(),
    }
}

/// Whether ServiceAccount `ns/sa` is allowed `question`: one SubjectAccessReview
/// ([`crate::install::preflight::allowed`]) made by `client`.
async fn sa_allowed(client: &Client, ns: &str, sa: &str, question: &Question) -> Result<bool, Error> {
    let subject =
        Subject::ServiceAccount(preflight::ServiceAccount { namespace: ns.to_string(), name: sa.to_string() });
    preflight::allowed(client, &subject, question)
        .await
        .map_err(kube_err(format!("SubjectAccessReview for ServiceAccount {ns}/{sa}")))
}

/// A `metav1.LabelSelector` as the label-selector string of a list call (`a=b,c in (d,e),!f`).
/// Errors name an operator other than In, NotIn, Exists, DoesNotExist, or In/NotIn without values.
pub(crate) fn label_selector(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Result<String, String> {
    let mut parts: Vec<String> = sel.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default();
        parts.push(match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(format!("matchExpressions key {:?}: operator {} needs values", e.key, e.operator));
            }
            "In" => format!("{} in ({})", e.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, values.join(",")),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => {
                return Err(format!(
                    "matchExpressions key {:?}: unknown operator {other:?} (use In, NotIn, Exists or DoesNotExist)",
                    e.key
                ));
            }
        });
    }
    Ok(parts.join(","))
}

/// The ServiceAccount an OperatorGroup's `spec.serviceAccountName` names, as read from the
/// cluster (OLM `pkg/lib/scoped/syncer.go` `SyncOperatorGroup`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GroupServiceAccount {
    /// No `spec.serviceAccountName`.
    Unset,
    /// It exists: `status.serviceAccountRef` refers to it.
    Found(k8s_openapi::api::core::v1::ObjectReference),
    /// It does not exist (its name).
    Missing(String),
}

/// The status of OperatorGroup `og` from its namespace's [`GroupTargets`] (§1.6): the target
/// namespaces when it is the namespace's one group, condition `OperatorGroupInvalid` when the
/// namespace has no usable group; `serviceAccountRef` to the group's ServiceAccount, or OLM's
/// condition `OperatorGroupServiceAccount` (reason `ServiceAccountNotFound`) when it is missing. Pure.
pub(crate) fn group_status(
    og: &str,
    targets: &GroupTargets,
    sa: &GroupServiceAccount,
    now: &Time,
) -> OperatorGroupStatus {
    let mut status = OperatorGroupStatus {
        namespaces: Vec::new(),
        service_account_ref: None,
        last_updated: now.clone(),
        conditions: Vec::new(),
    };
    match sa {
        GroupServiceAccount::Unset => {}
        GroupServiceAccount::Found(r) => status.service_account_ref = Some(r.clone()),
        GroupServiceAccount::Missing(name) => status.conditions.push(Condition {
            type_: "OperatorGroupServiceAccount".into(),
            status: "True".into(),
            reason: "ServiceAccountNotFound".into(),
            message: format!("ServiceAccount {name} not found"),
            last_transition_time: now.clone(),
            observed_generation: None,
        }),
    }
    match targets {
        GroupTargets::Found { name, targets } if name == og => status.namespaces = targets.clone(),
        GroupTargets::Found { .. } => {}
        GroupTargets::Unfit { reason, message } => status.conditions.push(Condition {
            type_: "OperatorGroupInvalid".into(),
            status: "True".into(),
            reason: reason.to_string(),
            message: message.clone(),
            last_transition_time: now.clone(),
            observed_generation: None,
        }),
    }
    status
}

/// Reads the group's ServiceAccount and, when it lacks it, gives it the label `olm.managed=true`
/// as OLM does (so that it shows in the informers of both systems). One GET per look, one
/// server-side apply of the label the first time.
async fn group_service_account(ctx: &Context, og: &OperatorGroup) -> Result<GroupServiceAccount, Error> {
    use k8s_openapi::api::core::v1::{ObjectReference, ServiceAccount};
    let Some(name) = og.spec.service_account_name.clone().filter(|n| !n.is_empty()) else {
        return Ok(GroupServiceAccount::Unset);
    };
    let ns = og.namespace().unwrap_or_default();
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(mut sa) = api
        .get_opt(&name)
        .await
        .map_err(kube_err(format!("reading ServiceAccount {ns}/{name} of OperatorGroup {ns}/{}", og.name_any())))?
    else {
        return Ok(GroupServiceAccount::Missing(name));
    };
    if sa.labels().get(crate::install::LABEL_MANAGED).map(String::as_str) != Some("true") {
        let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns, "labels": {crate::install::LABEL_MANAGED: "true"}}});
        sa = api
            .patch(
                &name,
                &kube::api::PatchParams::apply(crate::install::FIELD_MANAGER),
                &kube::api::Patch::Apply(&body),
            )
            .await
            .map_err(kube_err(format!("labelling ServiceAccount {ns}/{name} olm.managed=true")))?;
    }
    Ok(GroupServiceAccount::Found(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ServiceAccount".into()),
        name: Some(name),
        namespace: Some(ns),
        resource_version: sa.resource_version(),
        uid: sa.uid(),
        ..Default::default()
    }))
}

/// OperatorGroup reconciler: writes `status.namespaces` (the target namespaces, `[""]` for all)
/// and `lastUpdated`, re-checked every 30 s so that a selector follows namespace labels.
pub(super) async fn reconcile_operator_group(og: Arc<OperatorGroup>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = og.namespace().unwrap_or_default();
    let name = og.name_any();
    let targets = operator_group_targets(&ctx.client, &ns).await?;
    if matches!(&targets, GroupTargets::Found { name: found, .. } if *found == name) {
        // The group's ClusterRoles and `olm.providedAPIs` (OLM operatorgroup.go; install::aggregation).
        ctx.ensure_group_aggregation(&og).await.map_err(|e| Error::Kube { context: e.what, source: e.source })?;
    }
    let sa = group_service_account(&ctx, &og).await?;
    let status = group_status(&name, &targets, &sa, &now_time());
    let old = og.status.as_ref();
    let condition_types = |c: &[Condition]| c.iter().map(|c| c.type_.clone()).collect::<Vec<_>>();
    let changed = old.map(|o| o.namespaces.as_slice()) != Some(status.namespaces.as_slice())
        || old.map(|o| condition_types(&o.conditions)).unwrap_or_default() != condition_types(&status.conditions)
        || old.and_then(|o| o.service_account_ref.as_ref()) != status.service_account_ref.as_ref();
    if changed {
        // A merge patch, not server-side apply: an OperatorGroup created as v1alpha2 (served,
        // without spec.upgradeStrategy) makes apply's typed conversion fail on the defaulted field.
        // `namespaces` is always sent, so that an emptied list replaces the old one; no
        // conditions are removed with `null` (OLM writes no empty `conditions` list).
        let mut body = serde_json::to_value(&status)
            .map_err(|source| Error::Build { what: format!("the status of OperatorGroup {ns}/{name}"), source })?;
        body["namespaces"] = json!(status.namespaces);
        body["conditions"] =
            if status.conditions.is_empty() { serde_json::Value::Null } else { json!(status.conditions) };
        body["serviceAccountRef"] = json!(status.service_account_ref);
        let api: Api<OperatorGroup> = Api::namespaced(ctx.client.clone(), &ns);
        api.patch_status(
            &name,
            &kube::api::PatchParams { field_manager: Some(crate::install::FIELD_MANAGER.into()), ..Default::default() },
            &kube::api::Patch::Merge(&json!({"status": body})),
        )
        .await
        .map_err(kube_err(format!("writing status of OperatorGroup {ns}/{name}")))?;
    }
    Ok(Action::requeue(Duration::from_secs(30)))
}

/// Writes the CSV's status once for the phase steps one reconcile took (`phases`: each status
/// the steps decided, in order; the last is written). Each phase change is recorded as an Event
/// (reason and message of that phase; Warning for Failed), in order. Returns the CSV as written.
async fn write_status(
    ctx: &Context,
    api: &Api<ClusterServiceVersion>,
    csv: &ClusterServiceVersion,
    phases: &[ClusterServiceVersionStatus],
) -> Result<ClusterServiceVersion, Error> {
    let Some(status) = phases.last() else { return Ok(csv.clone()) };
    let written = apply_typed_status(api, csv, status).await?;
    let mut old_phase = csv.status.as_ref().and_then(|s| s.phase.clone());
    for step in phases {
        if step.phase == old_phase {
            continue;
        }
        old_phase = step.phase.clone();
        let phase = step.phase.as_ref().map(|p| p.as_str().to_string()).unwrap_or_default();
        let reason = step.reason.as_ref().map(|r| r.as_str().to_string()).unwrap_or_default();
        let message = step.message.clone().unwrap_or_default();
        let type_ = if step.phase == Some(CsvPhase::Failed) { EventType::Warning } else { EventType::Normal };
        ctx.events
            .publish_for(csv, type_, if reason.is_empty() { &phase } else { &reason }, &format!("{phase}: {message}"))
            .await;
    }
    // The Operator object follows the phases a user acts on (`operator.rs`); the
    // `capstan_csvs{phase}` gauge follows the CSV watch (`track_csvs`).
    if status.phase != csv.status.as_ref().and_then(|s| s.phase.clone())
        && matches!(status.phase, Some(CsvPhase::Succeeded | CsvPhase::Failed))
    {
        ctx.sync_operator_of(&written);
    }
    Ok(written)
}

/// Whether `csv` fits its namespace's OperatorGroup (§1.5): `Some((reason, message))` with OLM's
/// reason when there is none, several, its targets need an install mode the CSV lacks, or another
/// OperatorGroup whose targets intersect provides the same APIs ([`api_ownership`]:
/// `InterOperatorGroupOwnerConflict`, `CannotModifyStaticOperatorGroupProvidedAPIs`). A CSV that
/// may own its APIs gets them into its group's `olm.providedAPIs` (OLM `AddAPIs`): that write is
/// returned as a task of its own (the group's resourceVersion as read is its precondition), so
/// that the CSV's next steps need not wait for it; the caller joins it before anything that
/// reads the annotation and before the CSV's status is written.
async fn operator_group_fit(
    client: &Client,
    csv: &ClusterServiceVersion,
    ns: &str,
) -> Result<(Option<(String, String)>, Option<Beside>), Error> {
    let (og, targets) = match operator_group_targets(client, ns).await? {
        GroupTargets::Unfit { reason, message } => return Ok((Some((reason.to_string(), message)), None)),
        GroupTargets::Found { name, targets } => (name, targets),
    };
    let modes: Vec<(String, bool)> = csv
        .spec
        .install_modes
        .iter()
        .flatten()
        .map(|m| {
            (
                serde_json::to_value(&m.type_).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
                m.supported,
            )
        })
        .collect();
    if let Err(e) = check_install_mode(ns, &targets, &modes) {
        return Ok((Some((e.reason.to_string(), format!("CSV {ns}/{}: {}", csv.name_any(), e.message))), None));
    }
    use crate::install::aggregation::{self, ApiOwnership};
    let copied = csv.labels().contains_key(crate::install::LABEL_COPIED_FROM);
    let agg = |e: aggregation::AggregationError| Error::Kube { context: e.what, source: e.source };
    let (ownership, read_at) = api_ownership(client, ns, &og, &targets, &csv.name_any(), &csv.spec, copied).await?;
    match ownership {
        ApiOwnership::Free => Ok((None, None)),
        ApiOwnership::Claim(value) => {
            let (client, ns) = (client.clone(), ns.to_string());
            let claim = Beside::spawn(async move {
                aggregation::write_provided_apis(&client, &ns, &og, &value, read_at.as_deref()).await.map_err(agg)
            });
            Ok((None, Some(claim)))
        }
        ApiOwnership::Refused { reason, message, release } => {
            if let Some(value) = release {
                aggregation::write_provided_apis(client, ns, &og, &value, read_at.as_deref()).await.map_err(agg)?;
            }
            // OLM keeps InterOperatorGroupOwnerConflict over the static-group reason.
            let status = csv.status.as_ref();
            if reason == aggregation::CANNOT_MODIFY_STATIC_PROVIDED_APIS
                && status.is_some_and(|s| {
                    phase_of(s) == "Failed" && reason_is(s, aggregation::INTER_OPERATOR_GROUP_OWNER_CONFLICT)
                })
            {
                let message = status.and_then(|s| s.message.clone()).unwrap_or_default();
                return Ok((Some((aggregation::INTER_OPERATOR_GROUP_OWNER_CONFLICT.to_string(), message)), None));
            }
            Ok((Some((reason.to_string(), message)), None))
        }
    }
}

/// A write the CSV's phase steps do not wait for — the group's `olm.providedAPIs` claim
/// ([`operator_group_fit`]), the OperatorCondition — running as a task of its own; joined before
/// anything that needs it and before the CSV's status is written.
struct Beside(tokio::task::JoinHandle<Result<(), Error>>);

impl Beside {
    fn spawn(write: impl std::future::Future<Output = Result<(), Error>> + Send + 'static) -> Beside {
        Beside(tokio::spawn(write))
    }

    /// Waits for the write; its error (a 409 of the claim when the group changed since it was
    /// read is retried by the requeue). The task is never aborted: a JoinError is its panic,
    /// passed on as if it ran inline.
    async fn done(self) -> Result<(), Error> {
        self.0.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

/// Whether CSV `csv_name` (spec `spec`) in OperatorGroup `namespace/og` with target namespaces
/// `targets` may own the APIs it provides, given every OperatorGroup of the cluster
/// ([`crate::install::aggregation::decide_api_ownership`]; OLM `syncClusterServiceVersion`,
/// `groups.go`). A CSV providing no API costs no read. Used by the CSV reconciler and, before it
/// applies anything, by the InstallPlan reconciler. Also returns the resourceVersion of the
/// CSV's group as read, the precondition of a write of the decided annotation.
pub(crate) async fn api_ownership(
    client: &Client,
    namespace: &str,
    og: &str,
    targets: &[String],
    csv_name: &str,
    spec: &crate::api::clusterserviceversion::ClusterServiceVersionSpec,
    copied: bool,
) -> Result<(crate::install::aggregation::ApiOwnership, Option<String>), Error> {
    use crate::install::aggregation::{self, GroupSurface};
    let add: std::collections::BTreeSet<String> =
        aggregation::provided_apis(spec).iter().map(aggregation::gvk_string).collect();
    if copied || add.is_empty() {
        return Ok((aggregation::ApiOwnership::Free, None));
    }
    let groups = Api::<OperatorGroup>::all(client.clone())
        .list(&from_watch_cache())
        .await
        .map_err(kube_err("listing OperatorGroups of all namespaces"))?;
    let annotation = |g: &OperatorGroup| {
        g.annotations().get(crate::api::operatorgroup::PROVIDED_APIS_ANNOTATION).cloned().unwrap_or_default()
    };
    let own = groups.items.iter().find(|g| g.namespace().as_deref() == Some(namespace) && g.name_any() == og);
    let Some(own) = own else { return Ok((aggregation::ApiOwnership::Free, None)) };
    let group = GroupSurface::new(namespace, og, targets, &annotation(own));
    let others: Vec<GroupSurface> = groups
        .items
        .iter()
        .filter(|g| !(g.namespace().as_deref() == Some(namespace) && g.name_any() == og))
        .map(|g| {
            GroupSurface::new(
                &g.namespace().unwrap_or_default(),
                &g.name_any(),
                g.status.as_ref().map(|s| s.namespaces.as_slice()).unwrap_or_default(),
                &annotation(g),
            )
        })
        .collect();
    let decided = aggregation::decide_api_ownership(
        &format!("{namespace}/{csv_name}"),
        copied,
        &add,
        &group,
        &others,
        own.spec.static_provided_apis == Some(true),
    );
    Ok((decided, own.metadata.resource_version.clone()))
}

/// A CSV just refused for its provided APIs (OLM `cleanupCSVDeployments`): its webhook
/// configurations and APIServices, and its CRDs' conversion where it points at the CSV's own
/// Service, are removed first (so that nothing calls a webhook without pods), then its
/// Deployments; its subjects of the shared auth bindings stay (it may install again). Each removal is in an Event `ConflictCleanup`.
async fn remove_refused(ctx: &Context, csv: &ClusterServiceVersion, ns: &str) -> Result<(), Error> {
    let mut removed = super::removal::remove_webhooks_of(ctx, csv, true).await?;
    super::removal::delete_labelled::<Deployment>(
        ctx,
        &super::removal::owner_selector(ns, &csv.name_any()),
        &mut removed,
    )
    .await?;
    if !removed.is_empty() {
        let message = format!("removed {} while the CSV cannot own its APIs", removed.join(", "));
        tracing::info!(csv = %format!("{ns}/{}", csv.name_any()), "{message}");
        ctx.events.publish_for(csv, EventType::Warning, "ConflictCleanup", &message).await;
    }
    Ok(())
}

/// The CSV's Deployments that are not Available; those deleted by hand are created again first
/// ([`recreate_deployments`]).
async fn deployments_waiting(ctx: &Context, csv: &ClusterServiceVersion, ns: &str) -> Result<Vec<String>, Error> {
    let deployments: Vec<String> =
        csv.spec.install.spec.iter().flat_map(|s| s.deployments.iter().map(|d| d.name.clone())).collect();
    let dapi: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let mut waiting = Vec::new();
    let mut gone = Vec::new();
    for d in &deployments {
        let found = dapi.get_opt(d).await.map_err(kube_err(format!("reading Deployment {ns}/{d}")))?;
        if found.is_none() {
            gone.push(d.clone());
        }
        let available = found
            .and_then(|d| d.status)
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
        if !available {
            waiting.push(d.clone());
        }
    }
    // A Deployment deleted under an installed CSV is created again, as OLM's CSV controller does
    // (its install strategy is re-run when a component is missing).
    if !gone.is_empty() && csv.metadata.deletion_timestamp.is_none() {
        recreate_deployments(ctx, csv, &gone).await?;
    }
    Ok(waiting)
}

/// For a CSV with webhook or APIService definitions: which of them cannot be served while
/// Deployments `waiting` are not available, and its serving certificates' times after
/// rotating those that are due (`install::rotation::rotate_due`, each rotation an Event).
async fn webhooks_and_certificates(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    ns: &str,
    waiting: &[String],
) -> Result<(Option<String>, Option<(Time, Time)>), Error> {
    use crate::install::{rotation, webhook};
    // Most CSVs declare neither: no JSON copy of the CSV on every reconcile for them.
    if !csv.serves_webhooks_or_apiservices() {
        return Ok(Default::default());
    }
    let name = csv.name_any();
    let value = serde_json::to_value(csv)
        .map_err(|source| Error::Build { what: format!("ClusterServiceVersion {ns}/{name} as JSON"), source })?;
    let Ok(defs) = webhook::Definitions::read(&value) else { return Ok((None, None)) };
    if defs.is_empty() {
        return Ok((None, None));
    }
    let strategy: Vec<&str> =
        csv.spec.install.spec.iter().flat_map(|s| s.deployments.iter().map(|d| d.name.as_str())).collect();
    let mut unavailable: Vec<String> =
        webhook::unavailable(&defs, |d| strategy.contains(&d).then(|| !waiting.iter().any(|w| w == d)))
            .into_iter()
            .collect();
    // An owned APIService must also be Available (the API server reaches it), as OLM's
    // `isAPIServiceAvailable` before Succeeded.
    for a in defs
        .apiservices
        .iter()
        .filter(|a| a.deployment_name.as_deref().is_some_and(|d| !waiting.iter().any(|w| w == d)))
    {
        let name = format!("{}.{}", a.version, a.group);
        if !apiservice_available(&ctx.client, &name).await?.0 {
            unavailable.push(format!("APIService {name} is not Available"));
        }
    }
    // Only at the look of an installed CSV (Succeeded or Failed, every 30 s), not on the 1 s
    // requeues while Installing waits for its Deployments.
    // Also once all Deployments are ready while Installing: a CSV that was refused for its APIs
    // and may own them now gets the webhooks its InstallPlan held back.
    let installed =
        csv.status.as_ref().is_some_and(|s| matches!(phase_of(s), "Succeeded" | "Failed")) || waiting.is_empty();
    if installed && csv.metadata.deletion_timestamp.is_none() {
        unavailable.extend(restore_webhooks(ctx, csv, ns).await?);
    }
    let unavailable = (!unavailable.is_empty()).then(|| unavailable.join("; "));
    let opts = ctx.apply_options();
    let owner = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "ClusterServiceVersion".into(),
        name: name.clone(),
        uid: csv.uid().unwrap_or_default(),
        controller: Some(false),
        block_owner_deletion: Some(false),
    };
    let labels = csv
        .labels()
        .iter()
        .filter(|(k, _)| k.starts_with(crate::install::COMPONENT_LABEL_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let missing = rotation::MissingSecret { labels, owner: Some(&owner) };
    let times = rotation::rotate_due(&ctx.client, &name, ns, &defs, &missing, &opts, time::OffsetDateTime::now_utc())
        .await
        .map_err(|e| Error::Certificates { csv: format!("{ns}/{name}"), message: e.to_string() })?;
    for (secret, reason) in &times.rotated {
        let message = format!(
            "serving certificate in Secret {secret} issued again ({reason}); webhook configurations, CRD conversion, APIServices and Deployment now use the new CA"
        );
        tracing::info!(csv = %format!("{ns}/{name}"), "{message}");
        ctx.events.publish_for(csv, EventType::Normal, "CertsRotated", &message).await;
    }
    let to_time =
        |t: time::OffsetDateTime| k8s_openapi::jiff::Timestamp::from_second(t.unix_timestamp()).ok().map(Time);
    let certs = match (times.last_updated.and_then(to_time), times.rotate_at.and_then(to_time)) {
        (Some(l), Some(r)) => Some((l, r)),
        _ => None,
    };
    Ok((unavailable, certs))
}

/// Once the new CSV succeeded, the one it replaces is deleted (OLM: Replacing → Deleting, §1.5);
/// objects only it owns are garbage-collected with it.
async fn delete_replaced(api: &Api<ClusterServiceVersion>, csv: &ClusterServiceVersion, ns: &str) -> Result<(), Error> {
    let name = csv.name_any();
    let Some(old) = csv.spec.replaces.as_deref().filter(|r| !r.is_empty() && *r != name) else { return Ok(()) };
    if api.get_opt(old).await.map_err(kube_err(format!("reading ClusterServiceVersion {ns}/{old}")))?.is_none() {
        return Ok(());
    }
    tracing::info!(csv = %format!("{ns}/{name}"), replaced = %old, "deleting the replaced CSV");
    match api.delete(old, &kube::api::DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!("deleting replaced ClusterServiceVersion {ns}/{old}"))(e)),
    }
}

/// Applies again the Deployments `names` of `csv` as the InstallPlan that installed the CSV planned
/// them (its `status.plan` step manifests, with the CSV's uid in the ownerReference), with
/// server-side apply as the plan did. A Deployment no Complete plan of the namespace holds is
/// left alone (and logged): the CSV stays `Failed/ComponentUnhealthy` naming it.
async fn recreate_deployments(ctx: &Context, csv: &ClusterServiceVersion, names: &[String]) -> Result<(), Error> {
    let ns = csv.namespace().unwrap_or_default();
    let csv_name = csv.name_any();
    let plans = Api::<crate::api::InstallPlan>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing InstallPlans in {ns}")))?;
    // A namespace being deleted takes its Deployments with it: nothing to put back.
    let terminating = Api::<Namespace>::all(ctx.client.clone())
        .get_opt(&ns)
        .await
        .map_err(kube_err(format!("reading Namespace {ns}")))?
        .is_none_or(|n| n.metadata.deletion_timestamp.is_some());
    if terminating {
        return Ok(());
    }
    let dapi: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    for name in names {
        // (A Deployment larger than the plan inlines is listed as a reference to its bundle: None.)
        let manifest = installed_steps(&plans.items, &csv_name)
            .find(|st| st.resource.kind == "Deployment" && st.resource.name == *name)
            .and_then(|st| as_install_step(st, csv))
            .map(|step| step.manifest);
        let Some(mut manifest) = manifest else {
            tracing::warn!(csv = %format!("{ns}/{csv_name}"), deployment = %name, "Deployment is gone and no Complete InstallPlan of the CSV holds it inline; it is not created again");
            continue;
        };
        manifest["apiVersion"] = json!("apps/v1");
        manifest["kind"] = json!("Deployment");
        // The plan holds `olmcahash` empty (filled at apply): take the serving Secret's.
        if let Some(secret) = serving_secret_of(&manifest) {
            let found = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(ctx.client.clone(), &ns)
                .get_opt(&secret)
                .await
                .map_err(kube_err(format!("reading Secret {ns}/{secret}")))?;
            if let Some(hash) = found
                .and_then(|s| s.metadata.annotations)
                .and_then(|a| a.get(crate::install::certs::ANNOTATION_CA_HASH).cloned())
            {
                manifest["spec"]["template"]["metadata"]["annotations"][crate::install::certs::ANNOTATION_CA_HASH] =
                    json!(hash);
            }
        }
        dapi.patch(
            name,
            &kube::api::PatchParams::apply(crate::install::FIELD_MANAGER).force(),
            &kube::api::Patch::Apply(&manifest),
        )
        .await
        .map_err(kube_err(format!("creating Deployment {ns}/{name} of CSV {csv_name} again")))?;
        // Missing: deleted by hand, or held back by the InstallPlan while the CSV was refused for its APIs.
        let message =
            format!("Deployment {name} is missing; capstan created it from the install strategy of {csv_name}");
        tracing::info!(csv = %format!("{ns}/{csv_name}"), deployment = %name, "{message}");
        ctx.events.publish_for(csv, EventType::Normal, "DeploymentRecreated", &message).await;
    }
    Ok(())
}

/// The steps of `csv` in the Complete InstallPlans among `plans`: what was applied to install it.
fn installed_steps<'a>(
    plans: &'a [crate::api::InstallPlan],
    csv: &'a str,
) -> impl Iterator<Item = &'a crate::api::installplan::Step> + 'a {
    plans
        .iter()
        .filter(move |p| p.spec.cluster_service_version_names.iter().any(|n| n == csv))
        .filter(|p| p.status.as_ref().is_some_and(|s| s.phase == crate::api::installplan::InstallPlanPhase::Complete))
        .flat_map(|p| p.status.iter().flat_map(|s| s.plan.iter()))
        .filter(move |st| st.resolving == csv)
}

/// An InstallPlan step as the install step it applied, with the CSV's uid in its
/// ownerReferences; `None` for a step listed by reference to its bundle
/// ([`super::installplan::BundleObjectRef`]) or without a manifest.
fn as_install_step(st: &crate::api::installplan::Step, csv: &ClusterServiceVersion) -> Option<crate::install::Step> {
    let text = st.resource.manifest.as_deref()?;
    if super::installplan::BundleObjectRef::parse(text).is_some() {
        return None;
    }
    let mut manifest: Value = serde_json::from_str(text).ok()?;
    let csv_name = csv.name_any();
    if let Some(refs) = manifest.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut) {
        for r in refs.iter_mut().filter(|r| r["kind"] == "ClusterServiceVersion" && r["name"] == csv_name.as_str()) {
            r["uid"] = json!(csv.uid().unwrap_or_default());
        }
    }
    Some(crate::install::Step {
        resolving: st.resolving.clone(),
        group: st.resource.group.clone(),
        version: st.resource.version.clone(),
        // The plan shows a Secret as OLM's synthetic kind `BundleSecret` (`step_entry`).
        kind: if st.resource.kind == "BundleSecret" { "Secret".into() } else { st.resource.kind.clone() },
        name: st.resource.name.clone(),
        namespace: manifest.pointer("/metadata/namespace").and_then(Value::as_str).map(String::from),
        manifest,
    })
}

/// Puts back what an installed CSV's webhooks and owned APIServices need and someone deleted or
/// changed: the webhook configurations, APIServices and CRD conversions its Complete
/// InstallPlan applied, each checked with [`crate::install::webhook::restore_reason`], are
/// applied again from that plan together with the plan's serving Secrets, through
/// [`crate::install::apply::apply`], so they get the serving certificate the Secret holds (kept
/// while valid) as `caBundle`. Each restore is an Event `WebhooksRestored`. OLM v0's CSV
/// controller reinstalls in the same case (`areWebhooksAvailable`, `checkAPIServiceResources`).
///
/// Returns what is missing and cannot be restored here (a CRD the plan lists by reference to its
/// bundle), for the CSV's status.
async fn restore_webhooks(ctx: &Context, csv: &ClusterServiceVersion, ns: &str) -> Result<Vec<String>, Error> {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    const KINDS: [(&str, &str); 4] = [
        ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
        ("APIService", "apiservices"),
        ("CustomResourceDefinition", "customresourcedefinitions"),
    ];
    let csv_name = csv.name_any();
    let plans = Api::<crate::api::InstallPlan>::namespaced(ctx.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing InstallPlans in {ns}")))?;
    let mut restore = Vec::new();
    let mut reasons = Vec::new();
    let mut unrestorable = Vec::new();
    // The plan's serving Secrets, and the Services they serve (`<service>-cert`).
    let secrets: Vec<crate::install::Step> = installed_steps(&plans.items, &csv_name)
        .filter(|st| st.resource.kind == "BundleSecret" || st.resource.kind == "Secret")
        .filter_map(|st| as_install_step(st, csv))
        .filter(crate::install::webhook::is_planned_serving_secret)
        .collect();
    let has_certificate =
        |service: &str| secrets.iter().any(|s| s.name == crate::install::webhook::secret_name(service));
    for st in installed_steps(&plans.items, &csv_name) {
        let Some(&(kind, plural)) = KINDS.iter().find(|(k, _)| *k == st.resource.kind) else { continue };
        let Some(step) = as_install_step(st, csv) else {
            // Only conversion CRDs matter here, and only when their conversion is gone.
            continue;
        };
        // From the controller's watch of labelled objects when it has listed them, else one GET.
        let found = match ctx.webhook_stores.get().and_then(|s| s.lookup(kind, &step.name)) {
            Some(found) => found,
            None => {
                let ar =
                    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&step.group, &step.version, kind), plural);
                let found = Api::<DynamicObject>::all_with(ctx.client.clone(), &ar)
                    .get_opt(&step.name)
                    .await
                    .map_err(kube_err(format!("reading {kind} {}", step.name)))?;
                found.map(|f| serde_json::to_value(f).unwrap_or_default())
            }
        };
        // Labelled for another CSV (the next version of the operator took it over): not ours.
        if found
            .as_ref()
            .and_then(|f| f.pointer("/metadata/labels"))
            .and_then(|l| l.get(crate::install::LABEL_OWNER))
            .and_then(Value::as_str)
            .is_some_and(|o| o != csv_name)
        {
            continue;
        }
        if let Some(reason) = crate::install::webhook::restore_reason(&step, found.as_ref(), has_certificate) {
            reasons.push(format!("{kind} {} {reason}", step.name));
            restore.push(step);
        }
    }
    // A conversion CRD listed by reference: its conversion is checked from the cluster alone.
    for st in installed_steps(&plans.items, &csv_name).filter(|st| st.resource.kind == "CustomResourceDefinition") {
        if st.resource.manifest.as_deref().and_then(super::installplan::BundleObjectRef::parse).is_none() {
            continue;
        }
        let converted = csv
            .spec
            .webhookdefinitions
            .iter()
            .flatten()
            .any(|w| w.conversion_crds.iter().flatten().any(|c| *c == st.resource.name));
        if !converted {
            continue;
        }
        let crd =
            Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(
                ctx.client.clone(),
            )
            .get_opt(&st.resource.name)
            .await
            .map_err(kube_err(format!("reading CustomResourceDefinition {}", st.resource.name)))?;
        if crd.is_some_and(|c| c.spec.conversion.is_none_or(|cv| cv.strategy != "Webhook")) {
            unrestorable.push(format!("CustomResourceDefinition {} had its spec.conversion reset and is too large for the InstallPlan to hold; delete and recreate the Subscription's InstallPlan to apply it again", st.resource.name));
        }
    }
    if restore.is_empty() {
        return Ok(unrestorable);
    }
    // With the plan's serving Secrets: apply keeps their certificate and fills in the caBundle.
    let mut steps = secrets;
    steps.extend(restore);
    for r in crate::install::apply::apply(&ctx.client, &steps, &ctx.apply_options()).await {
        if let crate::install::apply::StepStatus::Failed(e) = &r.status {
            return Err(Error::Certificates {
                csv: format!("{ns}/{csv_name}"),
                message: format!("applying {} {} again: {e}", r.kind, r.name),
            });
        }
    }
    let message = format!(
        "{}; capstan applied them again from the InstallPlan of {csv_name}, with the serving certificate of its Secret",
        reasons.join("; ")
    );
    tracing::info!(csv = %format!("{ns}/{csv_name}"), "{message}");
    ctx.events.publish_for(csv, EventType::Normal, "WebhooksRestored", &message).await;
    Ok(unrestorable)
}

/// The serving Secret a Deployment manifest mounts as OLM's `webhook-cert` volume, if any.
fn serving_secret_of(manifest: &Value) -> Option<String> {
    manifest
        .pointer("/spec/template/spec/volumes")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == crate::install::webhook::VOLUME_WEBHOOK_CERT)?
        .pointer("/secret/secretName")?
        .as_str()
        .map(String::from)
}

/// The requeue [`decide`] asks for after entering a phase whose next step needs no wait (Pending
/// from None, InstallReady): the reconciler takes that step at once on the status as decided
/// (written once, after the last step), and this requeue is only the fallback when it stops (at
/// most three steps per reconcile).
pub(crate) const NEXT_STEP_AT_ONCE: Duration = Duration::from_millis(100);

/// What the CSV reconciler must look at next, by the CSV's phase (§1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Nothing more: the phase moves on as it is (None / Failed → Pending).
    Nothing,
    /// The requirements (Pending).
    Requirements,
    /// The Deployments (InstallReady, Installing, Succeeded, Failed/ComponentUnhealthy).
    Deployments,
}

/// What the CSV reconciler observed, as far as [`Need`] asked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CsvView {
    /// The CSV does not fit its OperatorGroup: OLM's reason and the message.
    Unfit(String, String),
    /// The phase's own step needs nothing more.
    Fresh,
    /// The requirement entries and a description of each unmet one.
    Requirements(Vec<RequirementStatus>, Vec<String>),
    /// The Deployments of the install strategy, the webhooks they serve, their certificates.
    Deployments(DeploymentsView),
}

/// What [`decide`] sees of an installed CSV's workload (phases InstallReady and after).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DeploymentsView {
    /// The Deployments of the install strategy that are not Available.
    pub waiting: Vec<String>,
    /// Each webhook and APIService that cannot be served, naming its Deployment
    /// (`install::webhook::unavailable`).
    pub webhooks: Option<String>,
    /// `(certsLastUpdated, certsRotateAt)` of the serving certificates, when the CSV has any.
    pub certs: Option<(Time, Time)>,
    /// This process applied the CSV's RBAC aggregation already ([`Context::aggregated`]).
    pub aggregated: bool,
}

impl DeploymentsView {
    /// A view of a CSV without webhooks whose Deployments `waiting` are not Available.
    #[cfg(test)]
    fn waiting(waiting: Vec<String>) -> DeploymentsView {
        DeploymentsView { waiting, ..Default::default() }
    }
}

/// What to do with a CSV: the status to write (`None`: unchanged), when to look again, and
/// whether to delete the CSV it replaces (once it succeeded).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CsvDecision {
    /// The new status, when it changed.
    pub status: Option<ClusterServiceVersionStatus>,
    /// When to look again.
    pub requeue: Duration,
    /// Delete the CSV named in `spec.replaces`.
    pub delete_replaced: bool,
    /// Create the CSV's OperatorCondition (first sight of the CSV; OLM's generator, issue 13).
    pub ensure_operator_condition: bool,
    /// Apply the RBAC aggregation of the CSV ([`aggregation_due`]: as it leaves InstallReady, or
    /// on its way into Succeeded; issue 13).
    pub ensure_aggregation: bool,
}

/// Whether `reason` is one of the two a CSV is refused with for its provided APIs.
fn refused_for_apis(reason: &str) -> bool {
    use crate::install::aggregation::{CANNOT_MODIFY_STATIC_PROVIDED_APIS, INTER_OPERATOR_GROUP_OWNER_CONFLICT};
    reason == INTER_OPERATOR_GROUP_OWNER_CONFLICT || reason == CANNOT_MODIFY_STATIC_PROVIDED_APIS
}

/// The phase of `status` as written (`""` when none).
fn phase_of(status: &ClusterServiceVersionStatus) -> &str {
    status.phase.as_ref().map(|p| p.as_str()).unwrap_or("")
}

fn reason_is(status: &ClusterServiceVersionStatus, reason: &str) -> bool {
    status.reason.as_ref().is_some_and(|r| r.as_str() == reason)
}

/// What [`decide`] needs observed for a CSV with `status`. Pure.
pub(crate) fn need(status: &ClusterServiceVersionStatus) -> Need {
    match phase_of(status) {
        "" => Need::Nothing,
        "Failed" if !reason_is(status, "ComponentUnhealthy") => Need::Nothing,
        "Pending" => Need::Requirements,
        _ => Need::Deployments,
    }
}

/// The CSV transition rules (§1.5) from `status` given `view`, at `now`. Pure.
pub(crate) fn decide(status: &ClusterServiceVersionStatus, view: CsvView, now: &Time) -> CsvDecision {
    let mut next = status.clone();
    let phase = phase_of(status).to_string();
    let keep = |requeue: Duration| CsvDecision {
        status: None,
        requeue,
        delete_replaced: false,
        ensure_operator_condition: false,
        ensure_aggregation: false,
    };
    let write = |next: ClusterServiceVersionStatus, requeue: Duration| CsvDecision {
        status: Some(next),
        requeue,
        delete_replaced: false,
        ensure_operator_condition: false,
        ensure_aggregation: false,
    };
    match view {
        // OperatorGroup membership and install mode come before any phase logic.
        CsvView::Unfit(reason, message) => {
            if phase == "Failed" && reason_is(status, &reason) {
                return keep(Duration::from_secs(30));
            }
            next.fail(CsvReason::from(reason), &message, now);
            write(next, Duration::from_secs(30))
        }
        CsvView::Fresh => {
            // A Failed CSV whose OperatorGroup fits now: OLM's message for each way it did not.
            let message = match status.reason.as_ref().map(|r| r.as_str()).filter(|_| phase == "Failed") {
                Some("InterOperatorGroupOwnerConflict") => {
                    "OperatorGroup no longer intersecting with conflicting owner"
                }
                Some("CannotModifyStaticOperatorGroupProvidedAPIs") => {
                    "static OperatorGroup and intersecting groups now support providedAPIs"
                }
                Some(
                    "NoTargetNamespaces" | "NoOperatorGroup" | "TooManyOperatorGroups" | "UnsupportedOperatorGroup",
                ) => "InstallModes now support target namespaces",
                _ => "requirements not yet checked",
            };
            next.set_phase(CsvPhase::Pending, CsvReason::RequirementsUnknown, message, now);
            CsvDecision { ensure_operator_condition: phase.is_empty(), ..write(next, NEXT_STEP_AT_ONCE) }
        }
        CsvView::Requirements(entries, missing) => {
            next.requirement_status = entries;
            if missing.is_empty() {
                next.set_phase(
                    CsvPhase::InstallReady,
                    CsvReason::AllRequirementsMet,
                    "all requirements found, attempting install",
                    now,
                );
                return write(next, NEXT_STEP_AT_ONCE);
            }
            let message = format!("one or more requirements couldn't be found: {}", missing.join("; "));
            if reason_is(status, "RequirementsNotMet") && status.message.as_deref() == Some(message.as_str()) {
                return keep(Duration::from_secs(2));
            }
            next.set_phase(CsvPhase::Pending, CsvReason::RequirementsNotMet, &message, now);
            write(next, Duration::from_secs(2))
        }
        CsvView::Deployments(DeploymentsView { waiting, webhooks, certs, aggregated }) => {
            let (p, r, mut m) = if waiting.is_empty() && webhooks.is_some() {
                (CsvPhase::Installing, CsvReason::InstallWaiting, "installing".to_string())
            } else if waiting.is_empty() {
                (
                    CsvPhase::Succeeded,
                    CsvReason::InstallSucceeded,
                    "install strategy completed with no errors".to_string(),
                )
            } else if phase == "Succeeded" || (phase == "Failed" && reason_is(status, "ComponentUnhealthy")) {
                (
                    CsvPhase::Failed,
                    CsvReason::ComponentUnhealthy,
                    format!("installing: Deployment {} is not available", waiting.join(", ")),
                )
            } else {
                (
                    CsvPhase::Installing,
                    CsvReason::InstallWaiting,
                    format!("installing: waiting for deployment {} to become ready", waiting.join(", ")),
                )
            };
            if let Some(w) = webhooks {
                m = format!("{m}: {w}");
            }
            let succeeded = p == CsvPhase::Succeeded;
            let mut requeue = Duration::from_secs(if succeeded { 30 } else { 1 });
            let mut changed = status.phase.as_ref() != Some(&p) || status.message.as_deref() != Some(m.as_str());
            if changed {
                next.set_phase(p, r, &m, now);
            }
            // OLM's certsLastUpdated / certsRotateAt; look again when the rotation is due.
            if let Some((last, at)) = certs {
                if status.certs_last_updated.as_ref() != Some(&last) || status.certs_rotate_at.as_ref() != Some(&at) {
                    next.certs_last_updated = Some(last);
                    next.certs_rotate_at = Some(at.clone());
                    changed = true;
                }
                let until = at.0.duration_since(now.0).unsigned_abs();
                if at.0 > now.0 {
                    requeue = requeue.min(until.max(Duration::from_secs(1)));
                }
            }
            let ensure_aggregation = aggregation_due(&phase, succeeded, aggregated);
            CsvDecision {
                status: changed.then_some(next),
                requeue,
                delete_replaced: succeeded,
                ensure_operator_condition: false,
                ensure_aggregation,
            }
        }
    }
}

/// Whether the RBAC aggregation (namespace users may use the operator's APIs) is applied now, for
/// a CSV leaving `phase` (`succeeded`: for Succeeded; `aggregated`: this process did it already).
/// It is in place before the CSV says Succeeded: applied as the CSV leaves InstallReady, while
/// its Deployments start, so that it is not on the path from Available to Succeeded; from
/// Installing into Succeeded again unless this process did it for the CSV already (with every
/// API found); on any other way into Succeeded (Failed → Succeeded) always. Pure.
fn aggregation_due(phase: &str, succeeded: bool, aggregated: bool) -> bool {
    match phase {
        "InstallReady" => true,
        "Succeeded" => false,
        "Installing" => succeeded && !aggregated,
        _ => succeeded,
    }
}

/// The RBAC aggregation of a CSV ([`aggregation_due`]; OLM `ensureClusterRolesForCSV`, then the
/// OperatorGroup's `olm.providedAPIs` and ClusterRoles; `install::aggregation`).
/// Returns whether every API the CSV provides had its roles (`false`: some were not on the
/// cluster yet, named in a warning).
async fn ensure_aggregation(ctx: &Context, csv: &ClusterServiceVersion, ns: &str) -> Result<bool, Error> {
    let client = &ctx.client;
    use crate::install::aggregation;
    let e = |e: aggregation::AggregationError| Error::Kube { context: e.what, source: e.source };
    let missing = aggregation::ensure_for_csv(client, csv).await.map_err(e)?;
    if !missing.is_empty() {
        tracing::warn!(csv = %format!("{ns}/{}", csv.name_any()), missing = %missing.join(", "), "no aggregated ClusterRoles for APIs not on the cluster");
    }
    let ogs = Api::<OperatorGroup>::namespaced(client.clone(), ns)
        .list(&from_watch_cache())
        .await
        .map_err(kube_err(format!("listing OperatorGroups in {ns}")))?;
    if let [og] = ogs.items.as_slice() {
        ctx.ensure_group_aggregation(og).await.map_err(e)?;
    }
    Ok(missing.is_empty())
}

pub(super) async fn reconcile(csv: Arc<ClusterServiceVersion>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = csv.namespace().unwrap_or_default();
    // A deleted CSV: the CSV watch's Delete event makes the context forget it (`track_csvs`).
    let Some(csv) = fresh(&ctx.client, csv.as_ref()).await? else {
        return Ok(Action::await_change());
    };
    // Finalizer and removal of a deleted CSV (issue 6, `removal.rs`).
    if let Some(action) = super::removal::reconcile_csv(&csv, &ctx).await? {
        return Ok(action);
    }
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &ns);
    let (fit, claim) = operator_group_fit(&ctx.client, &csv, &ns).await?;
    // The phase steps whose next one needs no wait (None → Pending → InstallReady →
    // Installing/Succeeded) are taken in this reconcile, on the status as decided, and written
    // once at the end (`status.conditions` keeps each phase it passed, with its time, as OLM's
    // do; an Event is recorded for each). On an API error of a step half-way the steps decided
    // so far are written before the error is returned, so the CSV never shows less than was
    // decided. The OperatorCondition and the group's olm.providedAPIs claim are written beside
    // the steps; when either fails nothing is written (the CSV stays where it was, so the next
    // reconcile creates the OperatorCondition, or claims, again): a CSV never says more than
    // what was done for it.
    let mut pass = Pass {
        status: csv.status.clone().unwrap_or_default(),
        phases: Vec::new(),
        claim,
        claim_failed: false,
        condition: None,
        requeue: NEXT_STEP_AT_ONCE,
        delete_replaced: false,
    };
    let stepped = steps(&ctx, &csv, &ns, fit.as_ref(), &mut pass).await;
    let condition = match pass.condition.take() {
        Some(task) => task.done().await,
        None => Ok(()),
    };
    let claimed = pass.join_claim().await;
    if !pass.phases.is_empty() && !pass.claim_failed && condition.is_ok() && claimed.is_ok() {
        let written = write_status(&ctx, &api, &csv, &pass.phases).await?;
        if written.status.as_ref().is_some_and(|s| s.phase == Some(CsvPhase::Succeeded))
            && let Some(uid) = csv.uid()
        {
            // Only needed between InstallReady and Succeeded (`aggregation_due`).
            ctx.aggregated.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
        }
    }
    stepped?;
    condition?;
    claimed?;
    if pass.delete_replaced {
        delete_replaced(&api, &csv, &ns).await?;
    }
    Ok(Action::requeue(pass.requeue))
}

/// The state of one CSV reconcile across its phase steps ([`steps`]).
struct Pass {
    /// The status as decided so far.
    status: ClusterServiceVersionStatus,
    /// Each status a step decided (not yet written), in order.
    phases: Vec<ClusterServiceVersionStatus>,
    /// The group's `olm.providedAPIs` claim being written ([`operator_group_fit`]).
    claim: Option<Beside>,
    /// The claim failed ([`Pass::join_claim`]): nothing is written.
    claim_failed: bool,
    /// The OperatorCondition being created beside the steps (first sight of the CSV).
    condition: Option<Beside>,
    /// When to look again.
    requeue: Duration,
    /// Delete the CSV named in `spec.replaces` after the write.
    delete_replaced: bool,
}

impl Pass {
    /// Waits for the claim, if it is still being written; a failure is remembered (nothing of
    /// the CSV's status is written then) and returned once.
    async fn join_claim(&mut self) -> Result<(), Error> {
        let Some(claim) = self.claim.take() else { return Ok(()) };
        let done = claim.done().await;
        self.claim_failed = done.is_err();
        done
    }
}

/// Takes the CSV's phase steps on `pass` ([`decide`] over what [`need`] asks observed), at most
/// three in a row while the next needs no wait. Writes nothing of the CSV's status.
async fn steps(
    ctx: &Arc<Context>,
    csv: &ClusterServiceVersion,
    ns: &str,
    fit: Option<&(String, String)>,
    pass: &mut Pass,
) -> Result<(), Error> {
    // Each step observes the CSV with the status the steps before it decided, as if written.
    let mut current = csv.clone();
    for _ in 0..3 {
        current.status = Some(pass.status.clone());
        let csv = &current;
        let view = match fit {
            Some((reason, message)) => CsvView::Unfit(reason.clone(), message.clone()),
            None => match need(&pass.status) {
                Need::Nothing => CsvView::Fresh,
                Need::Requirements => {
                    let (entries, missing) = requirement_status(&ctx.client, csv, ns).await?;
                    CsvView::Requirements(entries, missing)
                }
                Need::Deployments => {
                    let waiting = deployments_waiting(ctx, csv, ns).await?;
                    let (webhooks, certs) = webhooks_and_certificates(ctx, csv, ns, &waiting).await?;
                    let aggregated = csv
                        .uid()
                        .is_some_and(|uid| ctx.aggregated.lock().unwrap_or_else(|e| e.into_inner()).contains(&uid));
                    CsvView::Deployments(DeploymentsView { waiting, webhooks, certs, aggregated })
                }
            },
        };
        let decision = decide(&pass.status, view, &now_time());
        if decision.status.is_some() && fit.is_some_and(|(r, _)| refused_for_apis(r)) {
            remove_refused(ctx, csv, ns).await?;
        }
        if decision.ensure_operator_condition {
            // Needed by the operator, not by the next steps: created beside them.
            let (client, csv) = (ctx.client.clone(), csv.clone());
            pass.condition = Some(Beside::spawn(async move {
                crate::install::operator_condition::ensure(&client, &csv)
                    .await
                    .map(|_| ())
                    .map_err(|e| Error::Kube { context: e.what, source: e.source })
            }));
        }
        if decision.ensure_aggregation {
            pass.join_claim().await?;
            // Marked done only when every API had its roles: an APIService the plan has not
            // applied yet gets them on the way into Succeeded.
            if ensure_aggregation(ctx, csv, ns).await?
                && let Some(uid) = csv.uid()
            {
                ctx.aggregated.lock().unwrap_or_else(|e| e.into_inner()).insert(uid);
            }
        }
        pass.requeue = decision.requeue;
        pass.delete_replaced |= decision.delete_replaced;
        match decision.status {
            Some(next) => {
                pass.status = next.clone();
                pass.phases.push(next);
                if decision.requeue != NEXT_STEP_AT_ONCE {
                    return Ok(());
                }
            }
            None => return Ok(()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes(list: &[&str]) -> Vec<(String, bool)> {
        ["OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"]
            .iter()
            .map(|m| (m.to_string(), list.contains(m)))
            .collect()
    }

    #[test]
    fn label_selectors_follow_kubernetes_syntax() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
        let req = |k: &str, op: &str, v: &[&str]| LabelSelectorRequirement {
            key: k.into(),
            operator: op.into(),
            values: Some(v.iter().map(|s| s.to_string()).collect()),
        };
        let sel = LabelSelector {
            match_labels: Some([("team".to_string(), "db".to_string())].into()),
            match_expressions: Some(vec![
                req("env", "In", &["prod", "stage"]),
                req("tier", "NotIn", &["x"]),
                req("a", "Exists", &[]),
                req("b", "DoesNotExist", &[]),
            ]),
        };
        assert_eq!(label_selector(&sel).unwrap(), "team=db,env in (prod,stage),tier notin (x),a,!b");
        let bad = LabelSelector { match_labels: None, match_expressions: Some(vec![req("env", "In", &[])]) };
        assert!(label_selector(&bad).unwrap_err().contains("needs values"));
        let bad = LabelSelector { match_labels: None, match_expressions: Some(vec![req("env", "Near", &["x"])]) };
        assert!(label_selector(&bad).unwrap_err().contains("unknown operator \"Near\""));
    }

    #[test]
    fn install_mode_rules_of_olm() {
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_install_mode("a", &t(&[""]), &modes(&["AllNamespaces"])).is_ok());
        assert_eq!(
            check_install_mode("a", &t(&[""]), &modes(&["OwnNamespace"])).unwrap_err().reason,
            "UnsupportedOperatorGroup"
        );
        assert!(check_install_mode("a", &t(&["a"]), &modes(&["OwnNamespace"])).is_ok());
        assert!(check_install_mode("a", &t(&["a"]), &modes(&["SingleNamespace"])).is_err());
        assert!(check_install_mode("a", &t(&["b"]), &modes(&["SingleNamespace"])).is_ok());
        assert!(check_install_mode("a", &t(&["a", "b"]), &modes(&["MultiNamespace"])).is_err());
        assert!(check_install_mode("a", &t(&["a", "b"]), &modes(&["MultiNamespace", "OwnNamespace"])).is_ok());
        assert!(check_install_mode("a", &t(&["b", "c"]), &modes(&["MultiNamespace"])).is_ok());
        assert_eq!(
            check_install_mode("a", &t(&["", "b"]), &modes(&["MultiNamespace"])).unwrap_err().reason,
            "InvalidInstallModes"
        );
        assert_eq!(check_install_mode("a", &[], &modes(&["AllNamespaces"])).unwrap_err().reason, "NoTargetNamespaces");
        let e = check_install_mode("a", &t(&["a"]), &modes(&["AllNamespaces"])).unwrap_err();
        assert!(
            e.message.contains("needs install mode OwnNamespace") && e.message.contains("supports: AllNamespaces"),
            "{e}"
        );
    }

    fn st(phase: Option<&str>, reason: Option<&str>, message: Option<&str>) -> ClusterServiceVersionStatus {
        ClusterServiceVersionStatus {
            phase: phase.map(CsvPhase::from),
            reason: reason.map(CsvReason::from),
            message: message.map(String::from),
            ..Default::default()
        }
    }

    fn now() -> Time {
        Time("2026-01-01T00:00:00Z".parse().unwrap())
    }

    fn written(d: &CsvDecision) -> (String, String, String) {
        let s = d.status.as_ref().expect("a status to write");
        (
            phase_of(s).to_string(),
            s.reason.as_ref().map(|r| r.as_str().to_string()).unwrap_or_default(),
            s.message.clone().unwrap_or_default(),
        )
    }

    #[test]
    fn what_each_phase_needs() {
        assert_eq!(need(&st(None, None, None)), Need::Nothing);
        assert_eq!(need(&st(Some("Failed"), Some("NoOperatorGroup"), None)), Need::Nothing);
        assert_eq!(need(&st(Some("Pending"), Some("RequirementsUnknown"), None)), Need::Requirements);
        for p in ["InstallReady", "Installing", "Succeeded"] {
            assert_eq!(need(&st(Some(p), None, None)), Need::Deployments, "{p}");
        }
        assert_eq!(need(&st(Some("Failed"), Some("ComponentUnhealthy"), None)), Need::Deployments);
    }

    #[test]
    fn csv_transitions() {
        // Unfit: Failed with the OperatorGroup reason, written once.
        let d = decide(
            &st(Some("Succeeded"), None, None),
            CsvView::Unfit("TooManyOperatorGroups".into(), "m".into()),
            &now(),
        );
        assert_eq!(
            (written(&d), d.requeue),
            (("Failed".into(), "TooManyOperatorGroups".into(), "m".into()), Duration::from_secs(30))
        );
        let d = decide(
            &st(Some("Failed"), Some("TooManyOperatorGroups"), Some("m")),
            CsvView::Unfit("TooManyOperatorGroups".into(), "m".into()),
            &now(),
        );
        assert!(d.status.is_none());
        // None and a fixed Failed → Pending/RequirementsUnknown, with OLM's message for what was fixed.
        for (from, message) in [
            (st(None, None, None), "requirements not yet checked"),
            (st(Some("Failed"), Some("NoOperatorGroup"), None), "InstallModes now support target namespaces"),
            (
                st(Some("Failed"), Some("InterOperatorGroupOwnerConflict"), None),
                "OperatorGroup no longer intersecting with conflicting owner",
            ),
            (
                st(Some("Failed"), Some("CannotModifyStaticOperatorGroupProvidedAPIs"), None),
                "static OperatorGroup and intersecting groups now support providedAPIs",
            ),
        ] {
            let d = decide(&from, CsvView::Fresh, &now());
            assert_eq!(written(&d), ("Pending".into(), "RequirementsUnknown".into(), message.into()));
            assert_eq!(d.requeue, NEXT_STEP_AT_ONCE);
        }
        // Refused for its APIs: Failed with the reason, once; nothing to watch until it changes but the 30 s look.
        let d = decide(
            &st(Some("Installing"), None, None),
            CsvView::Unfit("InterOperatorGroupOwnerConflict".into(), "m".into()),
            &now(),
        );
        assert_eq!(written(&d).1, "InterOperatorGroupOwnerConflict");
        assert!(
            refused_for_apis("InterOperatorGroupOwnerConflict")
                && refused_for_apis("CannotModifyStaticOperatorGroupProvidedAPIs")
                && !refused_for_apis("NoOperatorGroup")
        );
        assert_eq!(need(d.status.as_ref().unwrap()), Need::Nothing, "no Deployment is created again while refused");
        // Pending: InstallReady when all is met, else RequirementsNotMet (written when it changes).
        let pending = st(Some("Pending"), Some("RequirementsUnknown"), None);
        let d = decide(
            &pending,
            CsvView::Requirements(
                vec![requirement("", "ServiceAccount", "a", RequirementStatusReason::Present, "ok")],
                vec![],
            ),
            &now(),
        );
        assert_eq!(written(&d).1, "AllRequirementsMet");
        assert_eq!(d.status.as_ref().unwrap().requirement_status.len(), 1);
        let d = decide(&pending, CsvView::Requirements(vec![], vec!["CRD x: missing".into()]), &now());
        assert_eq!(
            written(&d),
            (
                "Pending".into(),
                "RequirementsNotMet".into(),
                "one or more requirements couldn't be found: CRD x: missing".into()
            )
        );
        assert_eq!(d.requeue, Duration::from_secs(2));
        let again =
            decide(d.status.as_ref().unwrap(), CsvView::Requirements(vec![], vec!["CRD x: missing".into()]), &now());
        assert!(again.status.is_none());
        // Deployments: Installing → Succeeded (deletes the replaced CSV) → ComponentUnhealthy → Succeeded.
        let d = decide(
            &st(Some("InstallReady"), None, None),
            CsvView::Deployments(DeploymentsView::waiting(vec!["op".into()])),
            &now(),
        );
        assert_eq!(
            written(&d),
            (
                "Installing".into(),
                "InstallWaiting".into(),
                "installing: waiting for deployment op to become ready".into()
            )
        );
        assert!(!d.delete_replaced && d.requeue == Duration::from_secs(1));
        assert!(d.ensure_aggregation, "aggregated as it leaves InstallReady, while the Deployment starts");
        let installing = d.status.clone().unwrap();
        let done = DeploymentsView { aggregated: true, ..DeploymentsView::waiting(vec![]) };
        let d = decide(&installing, CsvView::Deployments(done), &now());
        assert_eq!(written(&d).1, "InstallSucceeded");
        assert!(d.delete_replaced && d.requeue == Duration::from_secs(30));
        assert!(!d.ensure_aggregation, "not again on the way from Available to Succeeded");
        // A CSV this process did not aggregate (it was Installing when capstan restarted) is
        // aggregated before it says Succeeded; so is one straight from InstallReady.
        assert!(decide(&installing, CsvView::Deployments(DeploymentsView::waiting(vec![])), &now()).ensure_aggregation);
        assert!(
            decide(
                &st(Some("InstallReady"), None, None),
                CsvView::Deployments(DeploymentsView::waiting(vec![])),
                &now()
            )
            .ensure_aggregation
        );
        let d = decide(&installing, CsvView::Deployments(DeploymentsView::waiting(vec![])), &now());
        let ok = d.status.unwrap();
        let same = decide(&ok, CsvView::Deployments(DeploymentsView::waiting(vec![])), &now());
        assert!(same.status.is_none() && same.delete_replaced);
        let d = decide(&ok, CsvView::Deployments(DeploymentsView::waiting(vec!["op".into()])), &now());
        assert_eq!(
            written(&d),
            ("Failed".into(), "ComponentUnhealthy".into(), "installing: Deployment op is not available".into())
        );
        let history = d.status.as_ref().unwrap().conditions.len();
        let d = decide(
            d.status.as_ref().unwrap(),
            CsvView::Deployments(DeploymentsView::waiting(vec!["op".into()])),
            &now(),
        );
        assert!(d.status.is_none(), "unchanged");
        assert_eq!(history, 3, "one history entry per phase entered");
    }

    #[test]
    fn every_operator_group_misfit_fails_the_csv_with_its_reason() {
        // The reasons of `operator_group_targets` (the namespace's groups) and of
        // `check_install_mode` (the CSV's install modes against the group's targets).
        for reason in [
            "NoOperatorGroup",
            "TooManyOperatorGroups",
            "InvalidOperatorGroup",
            "UnsupportedOperatorGroup",
            "NoTargetNamespaces",
            "InvalidInstallModes",
        ] {
            for from in [
                st(None, None, None),
                st(Some("Pending"), Some("RequirementsNotMet"), Some("x")),
                st(Some("Succeeded"), Some("InstallSucceeded"), Some("ok")),
            ] {
                let d = decide(&from, CsvView::Unfit(reason.into(), "m".into()), &now());
                assert_eq!(written(&d), ("Failed".into(), reason.into(), "m".into()), "{reason} from {from:?}");
                assert!(!d.delete_replaced && !d.ensure_aggregation && !d.ensure_operator_condition, "{reason}");
            }
        }
        for reason in ["NoOperatorGroup", "TooManyOperatorGroups", "InvalidOperatorGroup"] {
            let st = group_status(
                "og",
                &GroupTargets::Unfit { reason, message: "m".into() },
                &GroupServiceAccount::Unset,
                &now(),
            );
            assert_eq!(
                (st.conditions.len(), st.conditions[0].type_.as_str(), st.conditions[0].reason.as_str()),
                (1, "OperatorGroupInvalid", reason)
            );
        }
    }

    #[test]
    fn webhooks_that_cannot_be_served_are_named_and_rotation_is_scheduled() {
        let webhook = "webhook vwidgets.webhook.capstan.dev (ValidatingAdmissionWebhook) is served by Deployment op, which is not available";
        let view = DeploymentsView {
            waiting: vec!["op".into()],
            webhooks: Some(webhook.into()),
            certs: None,
            aggregated: false,
        };
        let d = decide(&st(Some("InstallReady"), None, None), CsvView::Deployments(view), &now());
        assert_eq!(
            written(&d),
            (
                "Installing".into(),
                "InstallWaiting".into(),
                format!("installing: waiting for deployment op to become ready: {webhook}")
            )
        );
        // Deployments ready, an owned APIService not Available: not Succeeded, and why.
        let view = DeploymentsView {
            waiting: vec![],
            webhooks: Some("APIService v1.packages.example.com is not Available".into()),
            certs: None,
            aggregated: false,
        };
        let d = decide(&st(Some("InstallReady"), None, None), CsvView::Deployments(view), &now());
        assert_eq!(
            written(&d),
            (
                "Installing".into(),
                "InstallWaiting".into(),
                "installing: APIService v1.packages.example.com is not Available".into()
            )
        );
        assert!(!d.delete_replaced);
        // Succeeded with certificates: their times in status, a look again when the rotation is
        // due (sooner than the usual 30 s), and none later than 30 s.
        let last = Time("2025-12-31T00:00:00Z".parse().unwrap());
        let soon = Time("2026-01-01T00:00:10Z".parse().unwrap());
        let view = DeploymentsView {
            waiting: vec![],
            webhooks: None,
            certs: Some((last.clone(), soon.clone())),
            aggregated: false,
        };
        let d = decide(&st(Some("Installing"), None, None), CsvView::Deployments(view.clone()), &now());
        let written_status = d.status.clone().unwrap();
        assert_eq!(
            (written_status.certs_last_updated, written_status.certs_rotate_at),
            (Some(last.clone()), Some(soon))
        );
        assert_eq!(d.requeue, Duration::from_secs(10));
        let same = decide(d.status.as_ref().unwrap(), CsvView::Deployments(view), &now());
        assert!(same.status.is_none(), "unchanged times are not written again");
        let later = Time("2028-01-01T00:00:00Z".parse().unwrap());
        let d = decide(
            d.status.as_ref().unwrap(),
            CsvView::Deployments(DeploymentsView {
                waiting: vec![],
                webhooks: None,
                certs: Some((last, later.clone())),
                aggregated: false,
            }),
            &now(),
        );
        assert_eq!(d.status.unwrap().certs_rotate_at, Some(later), "rotated: the new time is written");
        assert_eq!(d.requeue, Duration::from_secs(30));
    }

    #[test]
    fn phase_history_is_bounded() {
        let mut s = ClusterServiceVersionStatus::default();
        for i in 0..30 {
            let p = if i % 2 == 0 { CsvPhase::Installing } else { CsvPhase::Succeeded };
            s.set_phase(p, CsvReason::InstallWaiting, "m", &now());
        }
        assert_eq!(s.conditions.len(), crate::api::clusterserviceversion::CSV_CONDITION_HISTORY);
    }

    #[test]
    fn operator_group_status_from_its_targets() {
        let found = GroupTargets::Found { name: "og".into(), targets: vec![String::new()] };
        assert_eq!(group_status("og", &found, &GroupServiceAccount::Unset, &now()).namespaces, [""]);
        assert!(
            group_status("other", &found, &GroupServiceAccount::Unset, &now()).namespaces.is_empty(),
            "only the namespace's group gets targets"
        );
        let unfit = GroupTargets::Unfit { reason: "TooManyOperatorGroups", message: "keep one".into() };
        let st = group_status("og", &unfit, &GroupServiceAccount::Unset, &now());
        assert_eq!(
            (st.conditions[0].type_.as_str(), st.conditions[0].reason.as_str(), st.conditions[0].message.as_str()),
            ("OperatorGroupInvalid", "TooManyOperatorGroups", "keep one")
        );
        assert!(st.namespaces.is_empty());
        // The group's ServiceAccount, as OLM's scoped syncer reports it.
        let r = k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("ServiceAccount".into()),
            name: Some("installer".into()),
            ..Default::default()
        };
        let st = group_status("og", &found, &GroupServiceAccount::Found(r.clone()), &now());
        assert_eq!((st.service_account_ref, st.conditions.len()), (Some(r), 0));
        let st = group_status("og", &found, &GroupServiceAccount::Missing("installer".into()), &now());
        assert_eq!(st.service_account_ref, None);
        assert_eq!(
            (st.conditions[0].type_.as_str(), st.conditions[0].reason.as_str(), st.conditions[0].message.as_str()),
            ("OperatorGroupServiceAccount", "ServiceAccountNotFound", "ServiceAccount installer not found")
        );
    }
}
