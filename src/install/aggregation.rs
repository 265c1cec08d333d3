//! The ClusterRoles OLM v0 creates around an install so that namespace users can use an
//! operator's APIs (RBAC aggregation), as pure functions, and [`ensure_for_csv`] /
//! [`ensure_for_operator_group`] that apply them.
//!
//! Semantics are OLM v0.38.0's `pkg/controller/operators/olm/operatorgroup.go`:
//!
//! - per API a CSV owns (`ensureClusterRolesForCSV`, run when the CSV is `Succeeded`): ClusterRoles
//!   `<crd-name>-<version>-admin|edit|view` with verbs `*` / `create, update, patch, delete` /
//!   `get, list, watch` on the API's resource, plus `<crd-name>-<version>-crdview` (`get` on the
//!   CRD itself). Each is labelled `rbac.authorization.k8s.io/aggregate-to-<suffix>: "true"` —
//!   so the cluster's `admin`, `edit` and `view` roles include it, and a user bound to `edit` in a
//!   namespace may create the operator's custom resources there — and
//!   `olm.opgroup.permissions/aggregate-to-<fnv64a(Kind.version.group)>-<suffix>: "true"` and
//!   `olm.managed: "true"`, and is owned (non-blocking) by the CRD or APIService, so that it is
//!   garbage-collected with it. APIServices get the same three roles (no `crdview`).
//! - per OperatorGroup (`ensureOpGroupClusterRoles`): ClusterRoles `olm.og.<og>.<suffix>-<hash>`
//!   (`hash` = base62 SHA-224 of `<namespace>/<og>/<suffix>`) with owner labels `olm.owner*` of
//!   kind `OperatorGroup` and an aggregation rule selecting the `olm.opgroup.permissions/…` label
//!   of every API the group's CSVs provide (sorted; no rule when they provide none). They are
//!   deleted with the OperatorGroup (`operatorGroupDeleted`, by the owner labels).
//! - the OperatorGroup annotation `olm.providedAPIs`: the `Kind.version.group` of every API the
//!   group's (non-copied) CSVs own, sorted and comma-joined.
//!
//! capstan differs in one detail: OLM writes the CRD ownerReference with kind
//! `customresourcedefinition` (lower case, `SetGroupVersionKind(…WithKind("customresourcedefinition"))`),
//! which the garbage collector cannot map to a resource, so OLM's roles outlive their CRD;
//! capstan writes `CustomResourceDefinition` so that deleting the CRD removes them
//! (docs/olm-differences.md).
//!
//! An OperatorGroup's other mark outside its namespace is here too: the label
//! `olm.operatorgroup.uid/<uid>` on its target namespaces ([`sync_namespace_labels`]), taken off
//! with its ClusterRoles when it is deleted ([`watch_operator_group_deletions`]).

use std::collections::BTreeSet;
use std::hash::Hasher;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha224};

use super::{FIELD_MANAGER, LABEL_MANAGED, LABEL_OWNER, LABEL_OWNER_KIND, LABEL_OWNER_NAMESPACE};
use crate::api::clusterserviceversion::ClusterServiceVersionSpec;
use crate::api::operatorgroup::PROVIDED_APIS_ANNOTATION;
use crate::api::{ClusterServiceVersion, OperatorGroup};
use crate::bundle::ApiKey;

/// The three aggregation levels with their verbs (OLM `VerbsForSuffix`), in OLM's `Suffices`
/// order: `admin` (`*`), `edit` (`create, update, patch, delete`), `view` (`get, list, watch`).
pub const SUFFIX_VERBS: [(&str, &[&str]); 3] =
    [("admin", &["*"]), ("edit", &["create", "update", "patch", "delete"]), ("view", &["get", "list", "watch"])];

/// Label prefix of the labels the aggregation rules select: `rbac.authorization.k8s.io/aggregate-to-`.
pub const KUBE_AGGREGATE_LABEL_PREFIX: &str = "rbac.authorization.k8s.io/aggregate-to-";

/// The APIs `spec` owns (OLM `apiSurfaceOfCSV`, `ProvidedAPIs`): owned CRDs (`plural.group` split
/// at the first dot; entries without a dot skipped) and owned APIServices (plural = `name`).
/// Sorted, no duplicates.
pub fn provided_apis(spec: &ClusterServiceVersionSpec) -> Vec<ApiKey> {
    let mut out = BTreeSet::new();
    for d in spec.customresourcedefinitions.iter().flat_map(|c| c.owned.iter().flatten()) {
        if let Some((plural, group)) = d.name.split_once('.') {
            out.insert(ApiKey {
                group: group.into(),
                version: d.version.clone(),
                kind: d.kind.clone(),
                plural: plural.into(),
            });
        }
    }
    for d in spec.apiservicedefinitions.iter().flat_map(|a| a.owned.iter().flatten()) {
        out.insert(ApiKey {
            group: d.group.clone(),
            version: d.version.clone(),
            kind: d.kind.clone(),
            plural: d.name.clone(),
        });
    }
    out.into_iter().collect()
}

/// `Kind.version.group` (OLM `APIKeyToGVKString`), the element of `olm.providedAPIs`.
pub fn gvk_string(api: &ApiKey) -> String {
    format!("{}.{}.{}", api.kind, api.version, api.group)
}

/// The `olm.providedAPIs` value of a set of APIs: their [`gvk_string`]s sorted, deduplicated and
/// comma-joined (OLM `APISet.String`); `""` for none.
pub fn provided_apis_annotation<'a>(apis: impl IntoIterator<Item = &'a ApiKey>) -> String {
    let set: BTreeSet<String> = apis.into_iter().map(gvk_string).collect();
    set.into_iter().collect::<Vec<_>>().join(",")
}

/// The label `olm.opgroup.permissions/aggregate-to-<hash>-<suffix>` where `hash` is the FNV-1a
/// 64-bit hash of [`gvk_string`] in lower-case hex (OLM `aggregationLabelFromAPIKey`,
/// `cache.APIKeyToGVKHash`; the plural takes no part).
pub fn aggregation_label(api: &ApiKey, suffix: &str) -> String {
    let mut h = fnv::FnvHasher::default();
    h.write(gvk_string(api).as_bytes());
    format!("olm.opgroup.permissions/aggregate-to-{:x}-{suffix}", h.finish())
}

/// The owner of per-API ClusterRoles: the CRD or APIService object with its UID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiOwner {
    /// `apiextensions.k8s.io/v1` or `apiregistration.k8s.io/v1`.
    pub api_version: String,
    /// `CustomResourceDefinition` or `APIService`.
    pub kind: String,
    /// The owner's name (`plural.group` for a CRD, `version.group` for an APIService).
    pub name: String,
    /// The owner's UID.
    pub uid: String,
}

/// The per-API ClusterRoles of a CSV (OLM `ensureClusterRolesForCSV`): for each owned CRD
/// `<name>-<version>-{admin,edit,view}` and `<name>-<version>-crdview`, for each owned
/// APIService `<name>-<version>-{admin,edit,view}`, as JSON objects ready for server-side apply.
/// `owner(kind, name)` gives the CRD (`kind` = `CustomResourceDefinition`, `name` = the CRD
/// name) or APIService (`APIService`, `version.group`) that owns the roles; an API whose owner
/// it does not know (`None`: not on the cluster yet) gets no roles — OLM fails the sync then
/// and retries, the caller reports it.
pub fn provided_api_cluster_roles(
    spec: &ClusterServiceVersionSpec,
    owner: &dyn Fn(&str, &str) -> Option<ApiOwner>,
) -> Vec<Value> {
    let mut out = Vec::new();
    let role = |name: String,
                suffix: &str,
                verbs: &[&str],
                group: &str,
                resource: &str,
                names: Option<&str>,
                api: &ApiKey,
                o: &ApiOwner| {
        let mut rule = json!({"verbs": verbs, "apiGroups": [group], "resources": [resource]});
        if let Some(n) = names {
            rule["resourceNames"] = json!([n]);
        }
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {
                "name": name,
                "labels": {
                    format!("{KUBE_AGGREGATE_LABEL_PREFIX}{suffix}"): "true",
                    aggregation_label(api, suffix): "true",
                    LABEL_MANAGED: "true",
                },
                "ownerReferences": [{"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid,
                                     "blockOwnerDeletion": false, "controller": false}],
            },
            "rules": [rule],
        })
    };
    for d in spec.customresourcedefinitions.iter().flat_map(|c| c.owned.iter().flatten()) {
        let Some((plural, group)) = d.name.split_once('.') else { continue };
        let Some(o) = owner("CustomResourceDefinition", &d.name) else { continue };
        let api =
            ApiKey { group: group.into(), version: d.version.clone(), kind: d.kind.clone(), plural: plural.into() };
        let prefix = format!("{}-{}-", d.name, d.version);
        for (suffix, verbs) in SUFFIX_VERBS {
            out.push(role(format!("{prefix}{suffix}"), suffix, verbs, group, plural, None, &api, &o));
        }
        out.push(role(
            format!("{prefix}crdview"),
            "view",
            &["get"],
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            Some(&d.name),
            &api,
            &o,
        ));
    }
    for d in spec.apiservicedefinitions.iter().flat_map(|a| a.owned.iter().flatten()) {
        let Some(o) = owner("APIService", &format!("{}.{}", d.version, d.group)) else { continue };
        let api =
            ApiKey { group: d.group.clone(), version: d.version.clone(), kind: d.kind.clone(), plural: d.name.clone() };
        let prefix = format!("{}-{}-", d.name, d.version);
        for (suffix, verbs) in SUFFIX_VERBS {
            out.push(role(format!("{prefix}{suffix}"), suffix, verbs, &d.group, &d.name, None, &api, &o));
        }
    }
    out
}

/// Kubernetes' limit on a resource name (OLM `kubeResourceNameLimit`).
const NAME_LIMIT: usize = 253;

/// The name of an OperatorGroup's ClusterRole: `olm.og.<og>.<suffix>-<hash>`, `hash` the base62
/// SHA-224 of `<namespace>/<og>/<suffix>`, the group name cut so the whole fits 253 characters
/// (OLM `getClusterRoleName`).
pub fn operator_group_cluster_role_name(namespace: &str, og: &str, suffix: &str) -> String {
    let hash = super::hash::base62(&Sha224::digest(format!("{namespace}/{og}/{suffix}").as_bytes()));
    // "olm.og.%s.%s-%s" without the three %s is "olm.og..-" (9 characters).
    let limit = NAME_LIMIT - "olm.og..-".len() - suffix.len() - hash.len();
    let og = if og.len() < limit { og } else { og.get(..limit).unwrap_or(og) };
    format!("olm.og.{og}.{suffix}-{hash}")
}

/// The three ClusterRoles of an OperatorGroup (OLM `ensureOpGroupClusterRoles`), in the order
/// admin, edit, view: owner labels of kind `OperatorGroup`, `olm.managed`, and an aggregation rule
/// selecting [`aggregation_label`] of every API in `apis` (sorted by label; absent when `apis`
/// is empty).
pub fn operator_group_cluster_roles(namespace: &str, og: &str, apis: &[ApiKey]) -> Vec<Value> {
    SUFFIX_VERBS
        .iter()
        .map(|(suffix, _)| {
            let labels: BTreeSet<String> = apis.iter().map(|a| aggregation_label(a, suffix)).collect();
            let mut cr = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {
                    "name": operator_group_cluster_role_name(namespace, og, suffix),
                    "labels": {LABEL_OWNER: og, LABEL_OWNER_NAMESPACE: namespace, LABEL_OWNER_KIND: "OperatorGroup", LABEL_MANAGED: "true"},
                },
            });
            if !labels.is_empty() {
                let selectors: Vec<Value> = labels.into_iter().map(|l| json!({"matchLabels": {l: "true"}})).collect();
                cr["aggregationRule"] = json!({"clusterRoleSelectors": selectors});
            }
            cr
        })
        .collect()
}

/// Error of [`ensure_for_csv`] / [`ensure_for_operator_group`]: what was being done and the API
/// server's answer.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct AggregationError {
    /// E.g. `applying ClusterRole etcdclusters.etcd.database.coreos.com-v1beta2-edit`.
    pub what: String,
    /// The API server's error.
    #[source]
    pub source: kube::Error,
}

fn err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> AggregationError {
    let what = what.into();
    move |source| AggregationError { what, source }
}

async fn apply_cluster_role(client: &Client, cr: &Value) -> Result<(), AggregationError> {
    let name = cr["metadata"]["name"].as_str().unwrap_or_default();
    Api::<ClusterRole>::all(client.clone())
        .patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(cr))
        .await
        .map_err(err(format!("applying ClusterRole {name}")))?;
    Ok(())
}

/// Applies the per-API ClusterRoles of a `Succeeded` CSV ([`provided_api_cluster_roles`]),
/// looking up the owning CRDs and APIServices. Returns the APIs whose owner is not on the
/// cluster (no roles for them yet; OLM's sync fails with `crd "…" not found` then).
pub async fn ensure_for_csv(client: &Client, csv: &ClusterServiceVersion) -> Result<Vec<String>, AggregationError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let mut owners = Vec::new();
    let mut missing = Vec::new();
    for d in csv.spec.customresourcedefinitions.iter().flat_map(|c| c.owned.iter().flatten()) {
        match Api::<CustomResourceDefinition>::all(client.clone())
            .get_opt(&d.name)
            .await
            .map_err(err(format!("reading CRD {}", d.name)))?
        {
            Some(c) => owners.push(ApiOwner {
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                name: d.name.clone(),
                uid: c.uid().unwrap_or_default(),
            }),
            None => missing.push(format!("CRD {}", d.name)),
        }
    }
    for d in csv.spec.apiservicedefinitions.iter().flat_map(|a| a.owned.iter().flatten()) {
        let name = format!("{}.{}", d.version, d.group);
        match Api::<APIService>::all(client.clone())
            .get_opt(&name)
            .await
            .map_err(err(format!("reading APIService {name}")))?
        {
            Some(s) => owners.push(ApiOwner {
                api_version: "apiregistration.k8s.io/v1".into(),
                kind: "APIService".into(),
                name: name.clone(),
                uid: s.uid().unwrap_or_default(),
            }),
            None => missing.push(format!("APIService {name}")),
        }
    }
    let lookup = |kind: &str, name: &str| owners.iter().find(|o| o.kind == kind && o.name == name).cloned();
    // One round trip for all of them: the roles are independent objects.
    let roles = provided_api_cluster_roles(&csv.spec, &lookup);
    futures::future::try_join_all(roles.iter().map(|cr| apply_cluster_role(client, cr))).await?;
    Ok(missing)
}

/// Brings an OperatorGroup's RBAC aggregation in line with the CSVs in its namespace (copied CSVs,
/// label `olm.copiedFrom`, excluded as in OLM): prunes from `olm.providedAPIs` the APIs no member
/// provides any more ([`pruned_provided_apis`]; unless `spec.staticProvidedAPIs`, whose annotation
/// is the user's) — adding is the CSV check's ([`decide_api_ownership`]) — and applies
/// [`operator_group_cluster_roles`] for the members' APIs and the annotation's together (OLM
/// `syncOperatorGroups`: `providedAPIsForGroup`), only when the annotation changes or the group's
/// `admin` ClusterRole is missing or aggregates other APIs, so the periodic OperatorGroup check
/// costs one list and one read. Returns the annotation value.
pub async fn ensure_for_operator_group(client: &Client, og: &OperatorGroup) -> Result<String, AggregationError> {
    let ns = og.namespace().unwrap_or_default();
    let name = og.name_any();
    let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns)
        .list(&super::from_watch_cache())
        .await
        .map_err(err(format!("listing ClusterServiceVersions in {ns}")))?;
    let members: Vec<&ClusterServiceVersion> =
        csvs.items.iter().filter(|c| !c.labels().contains_key(super::LABEL_COPIED_FROM)).collect();
    let current = og.annotations().get(PROVIDED_APIS_ANNOTATION).cloned().unwrap_or_default();
    let static_apis = og.spec.static_provided_apis == Some(true);
    let value = if static_apis { current.clone() } else { pruned_provided_apis(&current, members.iter().copied()) };
    let mut set: BTreeSet<ApiKey> =
        members.iter().flat_map(|c| provided_apis(&c.spec)).map(|a| ApiKey { plural: String::new(), ..a }).collect();
    set.extend(parse_provided_apis(&current));
    let apis: Vec<ApiKey> = set.into_iter().collect();
    let changed = value != current;
    if changed {
        write_provided_apis(client, &ns, &name, &value, og.metadata.resource_version.as_deref()).await?;
    }
    let roles = operator_group_cluster_roles(&ns, &name, &apis);
    let admin = roles[0]["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let found = Api::<ClusterRole>::all(client.clone())
        .get_opt(&admin)
        .await
        .map_err(err(format!("reading ClusterRole {admin}")))?;
    let stale = found.is_none_or(|cr| {
        serde_json::to_value(&cr.aggregation_rule).unwrap_or_default()
            != roles[0].get("aggregationRule").cloned().unwrap_or(Value::Null)
    });
    if changed || stale {
        futures::future::try_join_all(roles.iter().map(|cr| apply_cluster_role(client, cr))).await?;
        // The group may have been deleted while this ran from a cached copy: if the deletion
        // watch ([`watch_operator_group_deletions`]) removed the roles before these applies, they
        // would stay forever. Read the group after applying: gone (or going), the roles go again.
        // (Deleted after this read, the watch's Delete comes after the applies and removes them.)
        let current = Api::<OperatorGroup>::namespaced(client.clone(), &ns)
            .get_opt(&name)
            .await
            .map_err(err(format!("reading OperatorGroup {ns}/{name}")))?;
        if current.is_none_or(|g| g.metadata.deletion_timestamp.is_some()) {
            delete_for_operator_group(client, &ns, &name).await?;
        }
    }
    Ok(value)
}

/// Writes `value` as OperatorGroup `namespace/name`'s `olm.providedAPIs` (a merge patch of
/// metadata only; the group may have been created as v1alpha2): the CSV check's `AddAPIs` /
/// `RemoveAPIs` ([`decide_api_ownership`]). `resource_version` is that of the group `value` was
/// computed from: the patch is refused (HTTP 409, an error here; the reconcile is retried) when
/// the group changed since, so that two CSVs of one group claiming at once cannot drop each
/// other's APIs from the annotation.
pub async fn write_provided_apis(
    client: &Client,
    namespace: &str,
    name: &str,
    value: &str,
    resource_version: Option<&str>,
) -> Result<(), AggregationError> {
    let mut patch = json!({"metadata": {"annotations": {PROVIDED_APIS_ANNOTATION: value}}});
    if let Some(rv) = resource_version {
        patch["metadata"]["resourceVersion"] = json!(rv);
    }
    Api::<OperatorGroup>::namespaced(client.clone(), namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(err(format!("writing {PROVIDED_APIS_ANNOTATION} of OperatorGroup {namespace}/{name}")))?;
    Ok(())
}

/// Follows OperatorGroup deletions and deletes their ClusterRoles ([`delete_for_operator_group`],
/// OLM `operatorGroupDeleted`). After every (re)list it also deletes the OperatorGroup
/// ClusterRoles whose group no longer exists, so a group deleted while capstan was down loses
/// them too. Runs until the watch stream ends; errors are logged.
pub async fn watch_operator_group_deletions(client: Client) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let stream = watcher(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Init) => seen.clear(),
            Ok(watcher::Event::InitApply(og) | watcher::Event::Apply(og)) => {
                seen.insert((og.namespace().unwrap_or_default(), og.name_any()));
            }
            Ok(watcher::Event::InitDone) => {
                if let Err(e) = sweep_orphans(&client, &seen).await {
                    tracing::warn!(error = %e, "deleting the ClusterRoles of deleted OperatorGroups");
                }
            }
            Ok(watcher::Event::Delete(og)) => {
                let key = (og.namespace().unwrap_or_default(), og.name_any());
                seen.remove(&key);
                if let Err(e) = delete_for_operator_group(&client, &key.0, &key.1).await {
                    tracing::warn!(error = %e, "deleting the ClusterRoles of a deleted OperatorGroup");
                }
                if let Some(uid) = og.uid()
                    && let Err(e) = sync_namespace_labels(&client, &uid, &[]).await
                {
                    tracing::warn!(error = %e, "taking the label of a deleted OperatorGroup off its namespaces");
                }
            }
            Err(_) => {}
        }
    }
}

/// Prefix of the label OLM puts on each namespace an OperatorGroup lists in its targets:
/// `olm.operatorgroup.uid/<uid of the group>` with the empty value (\[API\]
/// `operators/v1/operatorgroup_types.go` `OperatorGroupLabelPrefix`, `OGLabelKeyAndValue`).
pub const NAMESPACE_LABEL_PREFIX: &str = "olm.operatorgroup.uid/";

/// The namespace label of the OperatorGroup with UID `uid` ([`NAMESPACE_LABEL_PREFIX`]).
pub fn namespace_label(uid: &str) -> String {
    format!("{NAMESPACE_LABEL_PREFIX}{uid}")
}

/// Which namespaces get the group's label and which lose it, given the group's target
/// namespaces `targets` (`[""]`, all namespaces, labels none, as OLM's `syncNamespace`) and the
/// namespaces that carry it now (`labelled`): `(add, remove)`, each sorted. Pure.
pub fn namespace_label_changes(targets: &[String], labelled: &[String]) -> (Vec<String>, Vec<String>) {
    let want: BTreeSet<&String> = targets.iter().filter(|t| !t.is_empty()).collect();
    let have: BTreeSet<&String> = labelled.iter().collect();
    (want.difference(&have).map(|n| n.to_string()).collect(), have.difference(&want).map(|n| n.to_string()).collect())
}

/// Puts the label of the OperatorGroup with UID `uid` on its target namespaces `targets` and
/// takes it off the other namespaces that carry it (`[]` after the group is deleted), as OLM's
/// `syncNamespace` (\[OLM\] `pkg/controller/operators/olm/operator.go`;
/// [`namespace_label_changes`]). Each namespace is written by server-side
/// apply under a field manager of the group's own (`capstan-og-<uid>`), so that removing the
/// label leaves every other label, another group's included, as it is. A target namespace that
/// does not exist is skipped (it is labelled when the group is looked at after it appears).
///
/// # Errors
/// [`AggregationError`] naming the namespace the API server refused to list or write.
pub async fn sync_namespace_labels(client: &Client, uid: &str, targets: &[String]) -> Result<(), AggregationError> {
    use k8s_openapi::api::core::v1::Namespace;
    let key = namespace_label(uid);
    let api = Api::<Namespace>::all(client.clone());
    let labelled = api
        .list_metadata(&super::from_watch_cache().labels(&key))
        .await
        .map_err(err(format!("listing the namespaces labelled {key}")))?;
    let labelled: Vec<String> = labelled.items.iter().map(|n| n.name_any()).collect();
    let (add, remove) = namespace_label_changes(targets, &labelled);
    let params = PatchParams::apply(&format!("capstan-og-{uid}"));
    for (ns, labels) in add.iter().map(|n| (n, json!({ &key: "" }))).chain(remove.iter().map(|n| (n, json!({})))) {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}});
        match api.patch(ns, &params, &Patch::Apply(&body)).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(err(format!("labelling namespace {ns} with {key}"))(e)),
        }
    }
    Ok(())
}

/// Deletes OperatorGroup ClusterRoles (owner labels of kind `OperatorGroup`, `olm.managed`) whose
/// group is not in `existing` (`(namespace, name)`).
async fn sweep_orphans(client: &Client, existing: &BTreeSet<(String, String)>) -> Result<(), AggregationError> {
    let api = Api::<ClusterRole>::all(client.clone());
    let sel = format!("{LABEL_OWNER_KIND}=OperatorGroup,{LABEL_MANAGED}=true");
    let list = api
        .list_metadata(&ListParams::default().labels(&sel))
        .await
        .map_err(err("listing OperatorGroup ClusterRoles"))?;
    for cr in list.items {
        let l = cr.labels();
        let key = (
            l.get(LABEL_OWNER_NAMESPACE).cloned().unwrap_or_default(),
            l.get(LABEL_OWNER).cloned().unwrap_or_default(),
        );
        if !existing.contains(&key) {
            let name = cr.name_any();
            match api.delete(&name, &DeleteParams::default()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(err(format!("deleting ClusterRole {name}"))(e)),
                Ok(_) => {}
            }
        }
    }
    Ok(())
}

/// Deletes the ClusterRoles of a deleted OperatorGroup (by its owner labels, OLM
/// `operatorGroupDeleted`).
pub async fn delete_for_operator_group(client: &Client, namespace: &str, og: &str) -> Result<(), AggregationError> {
    let sel = format!("{LABEL_OWNER}={og},{LABEL_OWNER_NAMESPACE}={namespace},{LABEL_OWNER_KIND}=OperatorGroup");
    Api::<ClusterRole>::all(client.clone())
        .delete_collection(&DeleteParams::default(), &ListParams::default().labels(&sel))
        .await
        .map_err(err(format!("deleting the ClusterRoles of OperatorGroup {namespace}/{og}")))?;
    Ok(())
}

/// The APIs of an `olm.providedAPIs` value (`Kind.version.group,…`; OLM `GVKStringToProvidedAPISet`
/// with `schema.ParseKindArg`): an element with fewer than three dot-separated parts is skipped;
/// the plural is empty.
pub fn parse_provided_apis(annotation: &str) -> Vec<ApiKey> {
    let mut out = BTreeSet::new();
    for s in annotation.split(',').map(|s| s.replace(' ', "")) {
        let mut parts = s.splitn(3, '.');
        if let (Some(kind), Some(version), Some(group)) = (parts.next(), parts.next(), parts.next()) {
            out.insert(ApiKey {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
                plural: String::new(),
            });
        }
    }
    out.into_iter().collect()
}

/// One OperatorGroup as the provided-API check sees it (OLM `groups.go` `OperatorGroupSurface`,
/// `NewOperatorGroup`): its target namespaces — `status.namespaces` plus its own namespace, or
/// `{""}` for all namespaces — and the APIs its `olm.providedAPIs` annotation claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSurface {
    /// The group's namespace.
    pub namespace: String,
    /// The group's name.
    pub name: String,
    /// Target namespaces; `{""}` is all namespaces (OLM `NamespaceSet.IsAllNamespaces`).
    pub targets: BTreeSet<String>,
    /// `Kind.version.group` of each API in `olm.providedAPIs` ([`parse_provided_apis`]).
    pub provided_apis: BTreeSet<String>,
}

impl GroupSurface {
    /// OLM `NewOperatorGroup`: `namespaces` (the group's `status.namespaces`; `[""]` for all) with
    /// the group's own namespace added unless it targets all namespaces; a group with no
    /// `status.namespaces` yet targets nothing. `annotation` is its `olm.providedAPIs`.
    pub fn new(namespace: &str, name: &str, namespaces: &[String], annotation: &str) -> GroupSurface {
        let mut targets: BTreeSet<String> = namespaces.iter().cloned().collect();
        if namespaces.first().is_some_and(|n| !n.is_empty()) {
            targets.insert(namespace.to_string());
        }
        let provided_apis = parse_provided_apis(annotation).iter().map(gvk_string).collect();
        GroupSurface { namespace: namespace.into(), name: name.into(), targets, provided_apis }
    }

    fn all_namespaces(&self) -> bool {
        self.targets.len() == 1 && self.targets.contains("")
    }

    /// The namespaces both groups target (OLM `NamespaceSet.Intersection`: all namespaces
    /// intersected with a set is that set).
    pub fn shared_targets(&self, other: &GroupSurface) -> BTreeSet<String> {
        match (self.all_namespaces(), other.all_namespaces()) {
            (true, _) => other.targets.clone(),
            (_, true) => self.targets.clone(),
            _ => self.targets.intersection(&other.targets).cloned().collect(),
        }
    }

    fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn describe_targets(&self) -> String {
        if self.all_namespaces() {
            "all namespaces".into()
        } else {
            self.targets.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    }
}

/// Another OperatorGroup that already provides some of a CSV's APIs in namespaces the CSV's group
/// also targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiClaim {
    /// `namespace/name` of the other group.
    pub group: String,
    /// The other group's targets, as text (`all namespaces` or a comma-joined list).
    pub targets: String,
    /// The namespaces both groups target, as text.
    pub shared: String,
    /// The APIs both claim (`Kind.version.group`).
    pub apis: Vec<String>,
}

/// OLM's `ReconcileAPIIntersection` result (`groups.go` `APIReconciliationResult`), with the
/// other groups that claim the APIs for the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiReconciliation {
    /// No intersecting group provides the APIs and the group already lists them.
    NoConflict,
    /// No intersecting group provides them; the group's `olm.providedAPIs` lacks some: add them.
    Add,
    /// The group lists them, and so does an intersecting group: remove them from this group.
    Remove(Vec<ApiClaim>),
    /// An intersecting group provides them and this group does not: the CSV cannot own them.
    Conflict(Vec<ApiClaim>),
}

/// OLM `ReconcileAPIIntersection(add, group, otherGroups...)`: whether the APIs `add`
/// (`Kind.version.group`) of a CSV in `group` are provided by another group among `others` whose
/// targets intersect `group`'s (`group` itself, if listed, is skipped). Pure.
pub fn reconcile_api_intersection(
    add: &BTreeSet<String>,
    group: &GroupSurface,
    others: &[GroupSurface],
) -> ApiReconciliation {
    let mut owners = Vec::new();
    for other in others.iter().filter(|o| o.id() != group.id()) {
        let shared = group.shared_targets(other);
        if shared.is_empty() {
            continue;
        }
        let apis: Vec<String> = add.intersection(&other.provided_apis).cloned().collect();
        if !apis.is_empty() {
            let shared = if shared.len() == 1 && shared.contains("") {
                "all namespaces".to_string()
            } else {
                shared.into_iter().collect::<Vec<_>>().join(", ")
            };
            owners.push(ApiClaim { group: other.id(), targets: other.describe_targets(), shared, apis });
        }
    }
    let subset = add.is_subset(&group.provided_apis);
    match (subset, owners.is_empty()) {
        (true, false) => ApiReconciliation::Remove(owners),
        (false, false) => ApiReconciliation::Conflict(owners),
        (false, true) => ApiReconciliation::Add,
        (true, true) => ApiReconciliation::NoConflict,
    }
}

/// What a CSV's provided APIs mean for its install (OLM `operator.go` `syncClusterServiceVersion`,
/// the `apiReconciler.Reconcile` switch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiOwnership {
    /// The CSV may install; its group's `olm.providedAPIs` is right as it is.
    Free,
    /// The CSV may install once its group's `olm.providedAPIs` is this value (OLM `AddAPIs`).
    Claim(String),
    /// The CSV may not install (phase Failed with `reason`, which is
    /// `InterOperatorGroupOwnerConflict` or `CannotModifyStaticOperatorGroupProvidedAPIs`);
    /// `release`, when set, is the group's new `olm.providedAPIs` without the CSV's APIs (OLM
    /// `RemoveAPIs`, after which the next check is this conflict).
    Refused {
        /// OLM's reason.
        reason: &'static str,
        /// OLM's message first, then the other groups, the APIs and what to do.
        message: String,
        /// The group's `olm.providedAPIs` without the CSV's APIs, when they must be taken out.
        release: Option<String>,
    },
}

/// OLM's reason for a CSV whose APIs another intersecting OperatorGroup provides.
pub const INTER_OPERATOR_GROUP_OWNER_CONFLICT: &str = "InterOperatorGroupOwnerConflict";
/// OLM's reason for a CSV whose APIs a static OperatorGroup (`spec.staticProvidedAPIs`) does not list.
pub const CANNOT_MODIFY_STATIC_PROVIDED_APIS: &str = "CannotModifyStaticOperatorGroupProvidedAPIs";

/// Decides whether CSV `csv` (`namespace/name`) in `group` may own the APIs `add`
/// ([`provided_apis`] as [`gvk_string`]s) given the cluster's `others` groups (OLM
/// `syncClusterServiceVersion`): a copied CSV (label `olm.copiedFrom`) is never checked; a
/// [`ApiReconciliation::Conflict`] refuses with `InterOperatorGroupOwnerConflict`, a
/// [`ApiReconciliation::Remove`] too after releasing the APIs from its group; on a group with
/// `static_apis` an `Add` or `Remove` refuses with `CannotModifyStaticOperatorGroupProvidedAPIs`
/// (the annotation is the user's). Pure.
pub fn decide_api_ownership(
    csv: &str,
    copied: bool,
    add: &BTreeSet<String>,
    group: &GroupSurface,
    others: &[GroupSurface],
    static_apis: bool,
) -> ApiOwnership {
    if copied || add.is_empty() {
        return ApiOwnership::Free;
    }
    let result = reconcile_api_intersection(add, group, others);
    let apis = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
    match result {
        ApiReconciliation::NoConflict => ApiOwnership::Free,
        ApiReconciliation::Add | ApiReconciliation::Remove(_) if static_apis => {
            let missing: BTreeSet<String> = add.difference(&group.provided_apis).cloned().collect();
            let what = if missing.is_empty() {
                format!("its APIs {} are also provided by an intersecting OperatorGroup", apis(add))
            } else {
                format!("its APIs {} are not in the group's olm.providedAPIs", apis(&missing))
            };
            ApiOwnership::Refused {
                reason: CANNOT_MODIFY_STATIC_PROVIDED_APIS,
                message: format!(
                    "static provided api operatorgroup cannot be modified by these apis: ClusterServiceVersion {csv} is in OperatorGroup {} with spec.staticProvidedAPIs: true, and {what}; add them to the group's annotation olm.providedAPIs by hand, or set spec.staticProvidedAPIs: false",
                    group.id()
                ),
                release: None,
            }
        }
        ApiReconciliation::Add => {
            let union: BTreeSet<String> = group.provided_apis.union(add).cloned().collect();
            ApiOwnership::Claim(union.into_iter().collect::<Vec<_>>().join(","))
        }
        ApiReconciliation::Remove(owners) | ApiReconciliation::Conflict(owners) => {
            let release = group
                .provided_apis
                .is_superset(add)
                .then(|| group.provided_apis.difference(add).cloned().collect::<Vec<_>>().join(","));
            let others: Vec<String> = owners
                .iter()
                .map(|o| {
                    format!(
                        "OperatorGroup {} (targets {}; shared: {}) already provides {}",
                        o.group,
                        o.targets,
                        o.shared,
                        o.apis.join(", ")
                    )
                })
                .collect();
            ApiOwnership::Refused {
                reason: INTER_OPERATOR_GROUP_OWNER_CONFLICT,
                message: format!(
                    "intersecting operatorgroups provide the same apis: ClusterServiceVersion {csv} (OperatorGroup {}, targets {}) provides {}, but {}; two operators would reconcile the same resources (and take over each other's webhooks and CRD conversion), so its Deployments are not run; uninstall one of the two (delete its Subscription and ClusterServiceVersion) or change the OperatorGroups' target namespaces so that they do not overlap",
                    group.id(),
                    group.describe_targets(),
                    apis(add),
                    others.join("; ")
                ),
                release,
            }
        }
    }
}

/// The `olm.providedAPIs` an OperatorGroup keeps when its CSVs are `members` (copied CSVs,
/// label `olm.copiedFrom`, and CSVs being deleted excluded): the current value without the APIs no member provides any
/// more (OLM `pruneProvidedAPIs`; APIs are added by the CSV check, [`decide_api_ownership`], not
/// here, so that a CSV refused for a conflict does not claim them). Pure.
pub fn pruned_provided_apis<'a>(current: &str, members: impl IntoIterator<Item = &'a ClusterServiceVersion>) -> String {
    let provided: BTreeSet<String> = members
        .into_iter()
        .filter(|c| !c.labels().contains_key(super::LABEL_COPIED_FROM) && c.metadata.deletion_timestamp.is_none())
        .flat_map(|c| provided_apis(&c.spec))
        .map(|a| gvk_string(&a))
        .collect();
    let kept: BTreeSet<String> =
        parse_provided_apis(current).iter().map(gvk_string).filter(|a| provided.contains(a)).collect();
    kept.into_iter().collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_labels_follow_the_targets_and_none_for_all_namespaces() {
        let v = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(namespace_label("u-1"), "olm.operatorgroup.uid/u-1");
        assert_eq!(namespace_label_changes(&v(&["a", "b"]), &v(&[])), (v(&["a", "b"]), v(&[])), "new group");
        assert_eq!(namespace_label_changes(&v(&["a", "c"]), &v(&["a", "b"])), (v(&["c"]), v(&["b"])), "retargeted");
        assert_eq!(namespace_label_changes(&v(&[""]), &v(&["a"])), (v(&[]), v(&["a"])), "all namespaces: none");
        assert_eq!(namespace_label_changes(&v(&[]), &v(&["a", "b"])), (v(&[]), v(&["a", "b"])), "deleted group");
        assert_eq!(namespace_label_changes(&v(&["a"]), &v(&["a"])), (v(&[]), v(&[])), "nothing to write");
    }

    fn spec(v: Value) -> ClusterServiceVersionSpec {
        serde_json::from_value(v).expect("spec")
    }

    fn etcd() -> ClusterServiceVersionSpec {
        spec(json!({
            "displayName": "etcd", "install": {"strategy": "deployment"},
            "customresourcedefinitions": {"owned": [
                {"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster"},
                {"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2", "kind": "EtcdCluster"},
                {"name": "nodot", "version": "v1", "kind": "Broken"}
            ]},
            "apiservicedefinitions": {"owned": [{"name": "fishes", "group": "ocean.example.com", "version": "v1", "kind": "Fish"}]}
        }))
    }

    #[test]
    fn aggregation_label_is_olms_fnv64a_of_kind_version_group() {
        // Go: fnv.New64a().Write("EtcdCluster.v1beta2.etcd.database.coreos.com"); fmt.Sprintf("%x", Sum64()).
        let api = ApiKey {
            group: "etcd.database.coreos.com".into(),
            version: "v1beta2".into(),
            kind: "EtcdCluster".into(),
            plural: "etcdclusters".into(),
        };
        assert_eq!(aggregation_label(&api, "edit"), "olm.opgroup.permissions/aggregate-to-c571d720f17289d3-edit");
        // The plural takes no part: a key from the annotation (no plural) selects the same roles.
        let stripped = ApiKey { plural: String::new(), ..api.clone() };
        assert_eq!(aggregation_label(&api, "view"), aggregation_label(&stripped, "view"));
    }

    #[test]
    fn per_crd_roles_are_named_labelled_and_owned_as_olm() {
        let owner = |kind: &str, name: &str| {
            Some(ApiOwner {
                api_version: "x/v1".into(),
                kind: kind.into(),
                name: name.into(),
                uid: format!("uid-{name}"),
            })
        };
        let roles = provided_api_cluster_roles(&etcd(), &owner);
        let names: Vec<&str> = roles.iter().map(|r| r["metadata"]["name"].as_str().unwrap()).collect();
        // The duplicate owned entry yields the same names (applied twice, harmless); the dot-less one none.
        assert_eq!(
            &names[..4],
            [
                "etcdclusters.etcd.database.coreos.com-v1beta2-admin",
                "etcdclusters.etcd.database.coreos.com-v1beta2-edit",
                "etcdclusters.etcd.database.coreos.com-v1beta2-view",
                "etcdclusters.etcd.database.coreos.com-v1beta2-crdview",
            ]
        );
        assert_eq!(&names[8..], ["fishes-v1-admin", "fishes-v1-edit", "fishes-v1-view"]);
        let edit = &roles[1];
        assert_eq!(
            edit["rules"],
            json!([{"verbs": ["create", "update", "patch", "delete"], "apiGroups": ["etcd.database.coreos.com"], "resources": ["etcdclusters"]}])
        );
        let labels = edit["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels["rbac.authorization.k8s.io/aggregate-to-edit"], "true");
        assert_eq!(labels["olm.managed"], "true");
        assert!(
            labels.keys().any(|k| k.starts_with("olm.opgroup.permissions/aggregate-to-") && k.ends_with("-edit")),
            "{labels:?}"
        );
        assert_eq!(edit["metadata"]["ownerReferences"][0]["uid"], "uid-etcdclusters.etcd.database.coreos.com");
        assert_eq!(edit["metadata"]["ownerReferences"][0]["kind"], "CustomResourceDefinition");
        let crdview = &roles[3];
        assert_eq!(
            crdview["rules"],
            json!([{"verbs": ["get"], "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "resourceNames": ["etcdclusters.etcd.database.coreos.com"]}])
        );
        assert_eq!(crdview["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"], "true");
        assert_eq!(roles[8]["rules"][0]["verbs"], json!(["*"]));
        assert_eq!(roles[8]["metadata"]["ownerReferences"][0]["name"], "v1.ocean.example.com");
        // An owner not on the cluster yet: no roles for that API.
        let only_crds =
            |kind: &str, name: &str| (kind == "CustomResourceDefinition").then(|| owner(kind, name)).flatten();
        assert_eq!(provided_api_cluster_roles(&etcd(), &only_crds).len(), 8);
    }

    #[test]
    fn operator_group_roles_aggregate_the_provided_apis() {
        let apis = provided_apis(&etcd());
        assert_eq!(apis.len(), 2, "{apis:?}");
        let roles = operator_group_cluster_roles("ns1", "og", &apis);
        assert_eq!(roles.len(), 3);
        let name = roles[1]["metadata"]["name"].as_str().unwrap();
        // Go: big.Int.SetBytes(sha256.Sum224("ns1/og/edit")).Text(62).
        assert_eq!(name, "olm.og.og.edit-aYQ49ceIWihKG3SC57B3bKfMTh3FPw9eU36cy9");
        assert_eq!(name, operator_group_cluster_role_name("ns1", "og", "edit"));
        assert_ne!(name, operator_group_cluster_role_name("ns2", "og", "edit"), "the hash covers the namespace");
        assert_eq!(
            roles[1]["metadata"]["labels"],
            json!({"olm.owner": "og", "olm.owner.namespace": "ns1", "olm.owner.kind": "OperatorGroup", "olm.managed": "true"})
        );
        let sel = roles[1]["aggregationRule"]["clusterRoleSelectors"].as_array().unwrap();
        let mut want: Vec<String> = apis.iter().map(|a| aggregation_label(a, "edit")).collect();
        want.sort();
        let got: Vec<&String> =
            sel.iter().map(|s| s["matchLabels"].as_object().unwrap().keys().next().unwrap()).collect();
        assert_eq!(got, want.iter().collect::<Vec<_>>());
        assert!(operator_group_cluster_roles("ns1", "og", &[])[0].get("aggregationRule").is_none());
        // A long group name is cut so that the name fits 253 characters.
        let long = "g".repeat(300);
        assert_eq!(operator_group_cluster_role_name("ns", &long, "admin").len(), 253);
    }

    #[test]
    fn provided_apis_annotation_round_trips() {
        let apis = provided_apis(&etcd());
        let a = provided_apis_annotation(&apis);
        assert_eq!(a, "EtcdCluster.v1beta2.etcd.database.coreos.com,Fish.v1.ocean.example.com");
        let back = parse_provided_apis(&a);
        assert_eq!(provided_apis_annotation(&back), a);
        assert!(parse_provided_apis("").is_empty());
        assert!(parse_provided_apis("Kind.v1").is_empty());
    }

    fn group(ns: &str, name: &str, targets: &[&str], apis: &str) -> GroupSurface {
        GroupSurface::new(ns, name, &targets.iter().map(|t| t.to_string()).collect::<Vec<_>>(), apis)
    }

    fn set(apis: &[&str]) -> BTreeSet<String> {
        apis.iter().map(|a| a.to_string()).collect()
    }

    const WIDGET: &str = "Widget.v1.webhook.capstan.dev";

    #[test]
    fn group_surfaces_add_their_own_namespace_and_all_namespaces_intersects_everything() {
        let own = group("ns-a", "og", &["ns-a"], "");
        assert_eq!(own.targets, set(&["ns-a"]));
        let single = group("ops", "og", &["team1"], "");
        assert_eq!(single.targets, set(&["ops", "team1"]), "OLM NewOperatorGroup adds the group's namespace");
        let all = group("ns-b", "global", &[""], "");
        assert_eq!(all.targets, set(&[""]));
        assert_eq!(all.shared_targets(&own), set(&["ns-a"]));
        assert_eq!(own.shared_targets(&all), set(&["ns-a"]));
        assert_eq!(all.shared_targets(&group("x", "y", &[""], "")), set(&[""]));
        assert!(
            group("new", "og", &[], "").shared_targets(&all).is_empty(),
            "no status.namespaces yet: targets nothing"
        );
        assert!(own.shared_targets(&group("ns-c", "og", &["ns-c"], "")).is_empty());
    }

    #[test]
    fn reconcile_api_intersection_is_olms() {
        let add = set(&[WIDGET]);
        let a = |apis: &str| group("ns-a", "og-a", &["ns-a"], apis);
        let b = |apis: &str| group("ns-b", "og-b", &["ns-b"], apis);
        let global = |apis: &str| group("ns-g", "og-g", &[""], apis);
        // Disjoint namespaces: the same API in both groups is fine.
        assert_eq!(reconcile_api_intersection(&add, &a(WIDGET), &[b(WIDGET)]), ApiReconciliation::NoConflict);
        assert_eq!(reconcile_api_intersection(&add, &a(""), &[b(WIDGET)]), ApiReconciliation::Add);
        // AllNamespaces intersects everything: the newcomer conflicts, the holder keeps them.
        let conflict = reconcile_api_intersection(&add, &global(""), &[a(WIDGET), b("")]);
        let ApiReconciliation::Conflict(owners) = conflict else { panic!("{conflict:?}") };
        assert_eq!(
            owners,
            vec![ApiClaim {
                group: "ns-a/og-a".into(),
                targets: "ns-a".into(),
                shared: "ns-a".into(),
                apis: vec![WIDGET.into()]
            }]
        );
        assert_eq!(reconcile_api_intersection(&add, &a(WIDGET), &[global("")]), ApiReconciliation::NoConflict);
        // Both claim: remove from this group (OLM RemoveAPIs).
        assert!(matches!(
            reconcile_api_intersection(&add, &a(WIDGET), &[global(WIDGET)]),
            ApiReconciliation::Remove(_)
        ));
        // Other APIs of an intersecting group do not matter; the group itself is skipped.
        assert_eq!(
            reconcile_api_intersection(&add, &a(""), &[global("Gadget.v1.example.com")]),
            ApiReconciliation::Add
        );
        assert_eq!(reconcile_api_intersection(&add, &a(WIDGET), &[a(WIDGET)]), ApiReconciliation::NoConflict);
    }

    #[test]
    fn csv_api_ownership_decisions() {
        let add = set(&[WIDGET, "Gadget.v1.example.com"]);
        let a = group("ns-a", "og-a", &["ns-a"], WIDGET);
        let global = group("ns-b", "og-b", &[""], "");
        // The newcomer in the AllNamespaces group: refused, naming the other group, the API and what to do.
        let ApiOwnership::Refused { reason, message, release } =
            decide_api_ownership("ns-b/op.v1", false, &add, &global, std::slice::from_ref(&a), false)
        else {
            panic!()
        };
        assert_eq!(reason, INTER_OPERATOR_GROUP_OWNER_CONFLICT);
        assert!(message.starts_with("intersecting operatorgroups provide the same apis: "), "{message}");
        for part in [
            "ClusterServiceVersion ns-b/op.v1",
            "OperatorGroup ns-b/og-b, targets all namespaces",
            "OperatorGroup ns-a/og-a (targets ns-a; shared: ns-a) already provides Widget.v1.webhook.capstan.dev",
            "uninstall one of the two",
        ] {
            assert!(message.contains(part), "{part} in {message}");
        }
        assert_eq!(release, None, "the group never listed them");
        // The holder keeps installing; a group that lacks them claims them (AddAPIs).
        let holder = group("ns-a", "og-a", &["ns-a"], "Gadget.v1.example.com,Widget.v1.webhook.capstan.dev");
        assert_eq!(
            decide_api_ownership("ns-a/op.v1", false, &add, &holder, std::slice::from_ref(&global), false),
            ApiOwnership::Free
        );
        assert_eq!(
            decide_api_ownership("ns-a/op.v1", false, &add, &a, std::slice::from_ref(&global), false),
            ApiOwnership::Claim("Gadget.v1.example.com,Widget.v1.webhook.capstan.dev".into())
        );
        // Both groups list them: this one releases them and is refused.
        let both = group("ns-b", "og-b", &[""], "Gadget.v1.example.com,Other.v1.x.io,Widget.v1.webhook.capstan.dev");
        let ApiOwnership::Refused { reason, release, .. } =
            decide_api_ownership("ns-b/op.v1", false, &add, &both, std::slice::from_ref(&a), false)
        else {
            panic!()
        };
        assert_eq!((reason, release.as_deref()), (INTER_OPERATOR_GROUP_OWNER_CONFLICT, Some("Other.v1.x.io")));
        // Copied CSVs and CSVs without APIs are not checked.
        assert_eq!(
            decide_api_ownership("ns-b/op.v1", true, &add, &global, std::slice::from_ref(&a), false),
            ApiOwnership::Free
        );
        assert_eq!(
            decide_api_ownership("ns-b/op.v1", false, &BTreeSet::new(), &global, std::slice::from_ref(&a), false),
            ApiOwnership::Free
        );
        // A static group: adding (or removing) is refused; what it lists already is fine; a conflict stays a conflict.
        let ApiOwnership::Refused { reason, message, .. } =
            decide_api_ownership("ns-c/op.v1", false, &add, &group("ns-c", "og-c", &["ns-c"], WIDGET), &[], true)
        else {
            panic!()
        };
        assert_eq!(reason, CANNOT_MODIFY_STATIC_PROVIDED_APIS);
        assert!(
            message.starts_with("static provided api operatorgroup cannot be modified by these apis")
                && message.contains("Gadget.v1.example.com are not in"),
            "{message}"
        );
        let listed = group("ns-c", "og-c", &["ns-c"], "Gadget.v1.example.com,Widget.v1.webhook.capstan.dev");
        assert_eq!(decide_api_ownership("ns-c/op.v1", false, &add, &listed, &[], true), ApiOwnership::Free);
        let ApiOwnership::Refused { reason, .. } =
            decide_api_ownership("ns-c/op.v1", false, &add, &listed, &[group("ns-b", "og-b", &[""], WIDGET)], true)
        else {
            panic!()
        };
        assert_eq!(reason, CANNOT_MODIFY_STATIC_PROVIDED_APIS, "OLM: static and RemoveAPIs");
        let ApiOwnership::Refused { reason, .. } =
            decide_api_ownership("ns-b/op.v1", false, &add, &group("ns-b", "og-b", &[""], ""), &[a], true)
        else {
            panic!()
        };
        assert_eq!(reason, INTER_OPERATOR_GROUP_OWNER_CONFLICT);
    }

    #[test]
    fn the_group_annotation_is_only_pruned() {
        let csv = |labels: Value, owned: &str| -> ClusterServiceVersion {
            serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": "x", "namespace": "ns", "labels": labels},
                "spec": {"displayName": "x", "install": {"strategy": "deployment"},
                         "customresourcedefinitions": {"owned": [{"name": owned, "version": "v1", "kind": "Widget"}]}}}))
            .unwrap()
        };
        let member = csv(json!({}), "widgets.webhook.capstan.dev");
        let copied = csv(json!({"olm.copiedFrom": "ops"}), "widgets.other.io");
        let current = "Gone.v1.example.com,Widget.v1.other.io,Widget.v1.webhook.capstan.dev";
        assert_eq!(
            pruned_provided_apis(current, [&member, &copied]),
            WIDGET,
            "no longer provided or only by a copy: pruned"
        );
        assert_eq!(pruned_provided_apis("", [&member]), "", "not added here: the CSV check claims them");
    }
}
