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
            out.insert(ApiKey { group: group.into(), version: d.version.clone(), kind: d.kind.clone(), plural: plural.into() });
        }
    }
    for d in spec.apiservicedefinitions.iter().flat_map(|a| a.owned.iter().flatten()) {
        out.insert(ApiKey { group: d.group.clone(), version: d.version.clone(), kind: d.kind.clone(), plural: d.name.clone() });
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
pub fn provided_api_cluster_roles(spec: &ClusterServiceVersionSpec, owner: &dyn Fn(&str, &str) -> Option<ApiOwner>) -> Vec<Value> {
    let mut out = Vec::new();
    let role = |name: String, suffix: &str, verbs: &[&str], group: &str, resource: &str, names: Option<&str>, api: &ApiKey, o: &ApiOwner| {
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
        let api = ApiKey { group: group.into(), version: d.version.clone(), kind: d.kind.clone(), plural: plural.into() };
        let prefix = format!("{}-{}-", d.name, d.version);
        for (suffix, verbs) in SUFFIX_VERBS {
            out.push(role(format!("{prefix}{suffix}"), suffix, verbs, group, plural, None, &api, &o));
        }
        out.push(role(format!("{prefix}crdview"), "view", &["get"], "apiextensions.k8s.io", "customresourcedefinitions", Some(&d.name), &api, &o));
    }
    for d in spec.apiservicedefinitions.iter().flat_map(|a| a.owned.iter().flatten()) {
        let Some(o) = owner("APIService", &format!("{}.{}", d.version, d.group)) else { continue };
        let api = ApiKey { group: d.group.clone(), version: d.version.clone(), kind: d.kind.clone(), plural: d.name.clone() };
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
    let hash = super::plan::base62(&Sha224::digest(format!("{namespace}/{og}/{suffix}").as_bytes()));
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
        match Api::<CustomResourceDefinition>::all(client.clone()).get_opt(&d.name).await.map_err(err(format!("reading CRD {}", d.name)))? {
            Some(c) => owners.push(ApiOwner { api_version: "apiextensions.k8s.io/v1".into(), kind: "CustomResourceDefinition".into(), name: d.name.clone(), uid: c.uid().unwrap_or_default() }),
            None => missing.push(format!("CRD {}", d.name)),
        }
    }
    for d in csv.spec.apiservicedefinitions.iter().flat_map(|a| a.owned.iter().flatten()) {
        let name = format!("{}.{}", d.version, d.group);
        match Api::<APIService>::all(client.clone()).get_opt(&name).await.map_err(err(format!("reading APIService {name}")))? {
            Some(s) => owners.push(ApiOwner { api_version: "apiregistration.k8s.io/v1".into(), kind: "APIService".into(), name: name.clone(), uid: s.uid().unwrap_or_default() }),
            None => missing.push(format!("APIService {name}")),
        }
    }
    let lookup = |kind: &str, name: &str| owners.iter().find(|o| o.kind == kind && o.name == name).cloned();
    for cr in provided_api_cluster_roles(&csv.spec, &lookup) {
        apply_cluster_role(client, &cr).await?;
    }
    Ok(missing)
}

/// Brings an OperatorGroup's RBAC aggregation in line with the CSVs in its namespace (copied CSVs,
/// label `olm.copiedFrom`, excluded as in OLM): writes `olm.providedAPIs` (unless
/// `spec.staticProvidedAPIs`, whose annotation is the user's and is used as it is) and applies
/// [`operator_group_cluster_roles`] for the union — only when the annotation changes or the
/// group's `admin` ClusterRole is missing, so the periodic OperatorGroup check costs one list and
/// one read. Returns the annotation value.
pub async fn ensure_for_operator_group(client: &Client, og: &OperatorGroup) -> Result<String, AggregationError> {
    let ns = og.namespace().unwrap_or_default();
    let name = og.name_any();
    let csvs = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .map_err(err(format!("listing ClusterServiceVersions in {ns}")))?;
    let members: Vec<&ClusterServiceVersion> = csvs.items.iter().filter(|c| !c.labels().contains_key(super::LABEL_COPIED_FROM)).collect();
    let current = og.annotations().get(PROVIDED_APIS_ANNOTATION).cloned().unwrap_or_default();
    let static_apis = og.spec.static_provided_apis == Some(true);
    let apis: Vec<ApiKey> = if static_apis {
        parse_provided_apis(&current)
    } else {
        let set: BTreeSet<ApiKey> = members.iter().flat_map(|c| provided_apis(&c.spec)).map(|a| ApiKey { plural: String::new(), ..a }).collect();
        set.into_iter().collect()
    };
    let value = if static_apis { current.clone() } else { provided_apis_annotation(&apis) };
    let changed = value != current;
    if changed && !static_apis {
        // A merge patch of metadata only: the OperatorGroup may have been created as v1alpha2.
        let patch = json!({"metadata": {"annotations": {PROVIDED_APIS_ANNOTATION: value}}});
        Api::<OperatorGroup>::namespaced(client.clone(), &ns)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(err(format!("writing {PROVIDED_APIS_ANNOTATION} of OperatorGroup {ns}/{name}")))?;
    }
    let roles = operator_group_cluster_roles(&ns, &name, &apis);
    let admin = roles[0]["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let missing = Api::<ClusterRole>::all(client.clone()).get_opt(&admin).await.map_err(err(format!("reading ClusterRole {admin}")))?.is_none();
    if changed || missing {
        for cr in &roles {
            apply_cluster_role(client, cr).await?;
        }
    }
    Ok(value)
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
            }
            Err(_) => {}
        }
    }
}

/// Deletes OperatorGroup ClusterRoles (owner labels of kind `OperatorGroup`, `olm.managed`) whose
/// group is not in `existing` (`(namespace, name)`).
async fn sweep_orphans(client: &Client, existing: &BTreeSet<(String, String)>) -> Result<(), AggregationError> {
    let api = Api::<ClusterRole>::all(client.clone());
    let sel = format!("{LABEL_OWNER_KIND}=OperatorGroup,{LABEL_MANAGED}=true");
    let list = api.list_metadata(&ListParams::default().labels(&sel)).await.map_err(err("listing OperatorGroup ClusterRoles"))?;
    for cr in list.items {
        let l = cr.labels();
        let key = (l.get(LABEL_OWNER_NAMESPACE).cloned().unwrap_or_default(), l.get(LABEL_OWNER).cloned().unwrap_or_default());
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
            out.insert(ApiKey { group: group.into(), version: version.into(), kind: kind.into(), plural: String::new() });
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let api = ApiKey { group: "etcd.database.coreos.com".into(), version: "v1beta2".into(), kind: "EtcdCluster".into(), plural: "etcdclusters".into() };
        assert_eq!(aggregation_label(&api, "edit"), "olm.opgroup.permissions/aggregate-to-c571d720f17289d3-edit");
        // The plural takes no part: a key from the annotation (no plural) selects the same roles.
        let stripped = ApiKey { plural: String::new(), ..api.clone() };
        assert_eq!(aggregation_label(&api, "view"), aggregation_label(&stripped, "view"));
    }

    #[test]
    fn per_crd_roles_are_named_labelled_and_owned_as_olm() {
        let owner = |kind: &str, name: &str| Some(ApiOwner { api_version: "x/v1".into(), kind: kind.into(), name: name.into(), uid: format!("uid-{name}") });
        let roles = provided_api_cluster_roles(&etcd(), &owner);
        let names: Vec<&str> = roles.iter().map(|r| r["metadata"]["name"].as_str().unwrap()).collect();
        // The duplicate owned entry yields the same names (applied twice, harmless); the dot-less one none.
        assert_eq!(&names[..4], [
            "etcdclusters.etcd.database.coreos.com-v1beta2-admin",
            "etcdclusters.etcd.database.coreos.com-v1beta2-edit",
            "etcdclusters.etcd.database.coreos.com-v1beta2-view",
            "etcdclusters.etcd.database.coreos.com-v1beta2-crdview",
        ]);
        assert_eq!(&names[8..], ["fishes-v1-admin", "fishes-v1-edit", "fishes-v1-view"]);
        let edit = &roles[1];
        assert_eq!(edit["rules"], json!([{"verbs": ["create", "update", "patch", "delete"], "apiGroups": ["etcd.database.coreos.com"], "resources": ["etcdclusters"]}]));
        let labels = edit["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels["rbac.authorization.k8s.io/aggregate-to-edit"], "true");
        assert_eq!(labels["olm.managed"], "true");
        assert!(labels.keys().any(|k| k.starts_with("olm.opgroup.permissions/aggregate-to-") && k.ends_with("-edit")), "{labels:?}");
        assert_eq!(edit["metadata"]["ownerReferences"][0]["uid"], "uid-etcdclusters.etcd.database.coreos.com");
        assert_eq!(edit["metadata"]["ownerReferences"][0]["kind"], "CustomResourceDefinition");
        let crdview = &roles[3];
        assert_eq!(crdview["rules"], json!([{"verbs": ["get"], "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "resourceNames": ["etcdclusters.etcd.database.coreos.com"]}]));
        assert_eq!(crdview["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"], "true");
        assert_eq!(roles[8]["rules"][0]["verbs"], json!(["*"]));
        assert_eq!(roles[8]["metadata"]["ownerReferences"][0]["name"], "v1.ocean.example.com");
        // An owner not on the cluster yet: no roles for that API.
        let only_crds = |kind: &str, name: &str| (kind == "CustomResourceDefinition").then(|| owner(kind, name)).flatten();
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
        assert_eq!(roles[1]["metadata"]["labels"], json!({"olm.owner": "og", "olm.owner.namespace": "ns1", "olm.owner.kind": "OperatorGroup", "olm.managed": "true"}));
        let sel = roles[1]["aggregationRule"]["clusterRoleSelectors"].as_array().unwrap();
        let mut want: Vec<String> = apis.iter().map(|a| aggregation_label(a, "edit")).collect();
        want.sort();
        let got: Vec<&String> = sel.iter().map(|s| s["matchLabels"].as_object().unwrap().keys().next().unwrap()).collect();
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
}
