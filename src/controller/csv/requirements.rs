//! The CSV's requirements (`reference/olm-v0.md` §1.5 "requirements"; OLM
//! `requirementAndPermissionStatus`): what a Pending CSV needs on the cluster before it may
//! install — `spec.minKubeVersion`, its CRDs, required and owned APIServices, native APIs, and the
//! permissions of its ServiceAccounts — read and written as `status.requirementStatus`
//! ([`requirement_status`]).

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use serde_json::Value;

use crate::api::ClusterServiceVersion;
use crate::api::clusterserviceversion::{DependentStatus, RequirementStatus, RequirementStatusReason};
use crate::controller::{Error, kube_err, rbac};
use crate::install::preflight::{self, Question, Subject};

/// OLM's `status.requirementStatus` (§1.5 "requirements"): one entry per owned or required CRD
/// (`Present` when it exists and is Established, else `NotPresent`) and per ServiceAccount of
/// `permissions` / `clusterPermissions` (`Present` with one `PolicyRule` dependent per rule,
/// `Satisfied` when the ServiceAccount may do every group × resource × verb of the rule (the bound
/// roles as read, else a SubjectAccessReview) — in the CSV's namespace for `permissions`, cluster-wide for
/// `clusterPermissions`). Returns the entries and a description of each unmet requirement.
pub(super) async fn requirement_status(
    client: &Client,
    csv: &ClusterServiceVersion,
    ns: &str,
) -> Result<(Vec<RequirementStatus>, Vec<String>), Error> {
    let mut entries = Vec::new();
    let mut missing = Vec::new();
    // Order and checks as OLM's requirementAndPermissionStatus: minKubeVersion, each CRD once
    // (owned wins, by name), required then owned APIServices, native APIs, then the
    // ServiceAccounts.
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

/// The CRDs a Succeeded CSV owns or requires that are gone (not found, or being deleted), by
/// name: OLM checks a Succeeded CSV's requirements at each sync and fails it with
/// `RequirementsNotMet` "requirements no longer met" when one is lost (`transitionCSVState`,
/// `pkg/controller/operators/olm/operator.go`). Read from the API server's watch cache (one GET
/// per CRD, `resourceVersion=0`): a Succeeded CSV is looked at every 30 s.
pub(super) async fn crds_lost(client: &Client, csv: &ClusterServiceVersion) -> Result<Vec<String>, Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let names: Vec<&str> = csv.all_crd_descriptions().iter().map(|d| d.name.as_str()).collect();
    let found = futures::future::try_join_all(names.iter().map(|n| {
        let api = api.clone();
        async move {
            api.get_metadata_opt_with(n, &kube::api::GetParams::any())
                .await
                .map_err(kube_err(format!("reading CustomResourceDefinition {n}")))
        }
    }))
    .await?;
    Ok(names
        .iter()
        .zip(found)
        .filter(|(_, crd)| crd.as_ref().is_none_or(|c| c.metadata.deletion_timestamp.is_some()))
        .map(|(n, _)| n.to_string())
        .collect())
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
pub(super) async fn apiservice_available(client: &Client, name: &str) -> Result<(bool, Option<String>), Error> {
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
/// of the rule ([`rbac::granted_rules`], read once per ServiceAccount), an attribute they do
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
    let mut granted: std::collections::BTreeMap<String, rbac::GrantedRules> = std::collections::BTreeMap::new();
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
            granted.insert(sa.clone(), rbac::granted_rules(client, &who).await?);
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
pub(super) fn requirement(
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
