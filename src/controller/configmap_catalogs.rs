//! ConfigMap catalogs (CatalogSource `sourceType: configmap` or `internal`, `spec.configMap`):
//! the ConfigMap is read straight from the API server, no registry pod, and converted to a
//! file-based catalog ([`crate::bundle::configmap`]); an edit of the ConfigMap re-reconciles the
//! CatalogSources that name it ([`sources_naming`], fed by a metadata-only watch of ConfigMaps).
//! OLM runs operator-registry's `configmap-server` in a pod per such source instead
//! (`pkg/controller/registry/reconciler/configmap.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use sha2::{Digest, Sha256};

use crate::api::CatalogSource;
use crate::api::catalogsource::{ConfigMapResourceReference, SourceType};
use crate::bundle::configmap::{ConfigMapErrors, from_config_map};
use crate::catalog::model::DeclarativeConfig;

/// Why a ConfigMap catalog was not read; each names the ConfigMap and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConfigMapLoadError {
    /// The ConfigMap does not exist.
    #[error(
        "ConfigMap {namespace}/{name} (spec.configMap) does not exist; create it with the catalog's customResourceDefinitions, clusterServiceVersions and packages"
    )]
    Missing {
        /// The CatalogSource's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
    },
    /// The API server did not return it.
    #[error("reading ConfigMap {namespace}/{name}: {source}")]
    Read {
        /// The CatalogSource's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Its content is not a catalog.
    #[error("ConfigMap {namespace}/{name} is not a valid catalog: {errors}")]
    Invalid {
        /// The CatalogSource's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// Every problem found.
        errors: ConfigMapErrors,
    },
}

/// A ConfigMap catalog as read: its catalog, the digest of its data (`sha256:<hex>` of the data
/// as JSON, so an edit that changes nothing is no new content) and the reference the status shows.
#[derive(Debug)]
pub struct ReadConfigMap {
    /// The catalog.
    pub config: DeclarativeConfig,
    /// `sha256:<hex>` of the ConfigMap's data.
    pub digest: String,
    /// `status.configMapReference`.
    pub reference: ConfigMapResourceReference,
}

/// The ConfigMap `name` a `configmap` / `internal` CatalogSource names (trimmed, not empty).
pub fn config_map_name(cs: &CatalogSource) -> Option<&str> {
    matches!(cs.spec.source_type, SourceType::ConfigMap | SourceType::Internal)
        .then(|| cs.spec.config_map.as_deref().map(str::trim).filter(|n| !n.is_empty()))
        .flatten()
}

/// The ownerReferences ConfigMap `cm` gets so that CatalogSource `owner` (a reference with its
/// UID) owns it, as OLM's catalog operator makes every ConfigMap catalog's source its owner
/// (`syncConfigMap`, `ownerutil.EnsureOwner`, `pkg/controller/operators/catalog/operator.go`):
/// non-blocking and not the controller, so deleting the CatalogSource deletes the ConfigMap
/// (the garbage collector), and a source made again with the same name starts from a new one.
/// `None` when it is owned already. Pure.
pub fn owner_references_with(cm: &ConfigMap, owner: &OwnerReference) -> Option<Vec<OwnerReference>> {
    let mut refs = cm.metadata.owner_references.clone().unwrap_or_default();
    if refs.iter().any(|r| r.uid == owner.uid) {
        return None;
    }
    refs.push(owner.clone());
    Some(refs)
}

/// The ownerReference of CatalogSource `cs` that [`owner_references_with`] adds. Pure.
pub fn source_owner(cs: &CatalogSource) -> OwnerReference {
    OwnerReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "CatalogSource".into(),
        name: cs.metadata.name.clone().unwrap_or_default(),
        uid: cs.metadata.uid.clone().unwrap_or_default(),
        controller: Some(false),
        block_owner_deletion: Some(false),
    }
}

/// Reads ConfigMap `namespace/name` into a catalog ([`ReadConfigMap`]), at `now`, first making
/// `owner` (the CatalogSource) its owner when it is not ([`owner_references_with`]; a merge patch
/// with the read resourceVersion as precondition).
///
/// # Errors
/// [`ConfigMapLoadError`]: the ConfigMap is missing, unreadable (or the owner could not be
/// written), or not a catalog.
pub async fn read(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    owner: &OwnerReference,
    now: Time,
) -> Result<ReadConfigMap, ConfigMapLoadError> {
    let (namespace, name) = (namespace.to_string(), name.to_string());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let mut cm = match api.get_opt(&name).await {
        Ok(Some(cm)) => cm,
        Ok(None) => return Err(ConfigMapLoadError::Missing { namespace, name }),
        Err(source) => return Err(ConfigMapLoadError::Read { namespace, name, source }),
    };
    if let Some(refs) = owner_references_with(&cm, owner) {
        let patch =
            serde_json::json!({"metadata": {"ownerReferences": refs, "resourceVersion": cm.metadata.resource_version}});
        cm = match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(cm) => cm,
            Err(source) => return Err(ConfigMapLoadError::Read { namespace, name, source }),
        };
    }
    let data: BTreeMap<String, String> = cm.data.unwrap_or_default();
    let config = match from_config_map(&data) {
        Ok(c) => c,
        Err(errors) => return Err(ConfigMapLoadError::Invalid { namespace, name, errors }),
    };
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(serde_json::to_vec(&data).unwrap_or_default())));
    let changed = last_changed(&cm.metadata).unwrap_or(now);
    let reference = ConfigMapResourceReference {
        name,
        namespace,
        uid: cm.metadata.uid,
        resource_version: cm.metadata.resource_version,
        last_update_time: Some(changed),
    };
    Ok(ReadConfigMap { config, digest, reference })
}

/// When a ConfigMap last changed, as the API server recorded it: the latest time of its managed
/// fields entries (every create, update and apply), else its creation time; `None` when neither
/// is known. `status.configMapReference.lastUpdateTime` is this time, so it moves when the
/// ConfigMap does and not at every poll (OLM writes the time its catalog operator saw the
/// change, `pkg/controller/registry/reconciler/configmap.go`). Pure.
pub fn last_changed(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<Time> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.time.clone())
        .max_by_key(|t| t.0)
        .or_else(|| meta.creation_timestamp.clone())
}

/// The CatalogSources in `sources` that name ConfigMap `namespace/name`: what an edit of it
/// re-reconciles. Pure over the store's content.
pub fn sources_naming(sources: &Store<CatalogSource>, namespace: &str, name: &str) -> Vec<ObjectRef<CatalogSource>> {
    sources
        .state()
        .iter()
        .filter(|cs| cs.metadata.namespace.as_deref() == Some(namespace) && config_map_name(cs) == Some(name))
        .map(|cs| ObjectRef::from_obj(cs.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogSourceSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

    #[test]
    fn a_config_map_changed_when_its_latest_managed_fields_entry_was_written() {
        let t = |s: &str| Time(s.parse().expect("time"));
        let entry = |s: &str| ManagedFieldsEntry { time: Some(t(s)), ..Default::default() };
        let meta = ObjectMeta {
            creation_timestamp: Some(t("2026-12-05T10:00:00Z")),
            managed_fields: Some(vec![
                entry("2026-12-05T10:00:00Z"),
                entry("2026-12-05T10:05:07Z"),
                entry("2026-12-05T10:01:00Z"),
            ]),
            ..Default::default()
        };
        assert_eq!(last_changed(&meta), Some(t("2026-12-05T10:05:07Z")));
        let created = ObjectMeta { creation_timestamp: Some(t("2026-12-05T10:00:00Z")), ..Default::default() };
        assert_eq!(last_changed(&created), Some(t("2026-12-05T10:00:00Z")), "no managed fields: its creation");
        assert_eq!(last_changed(&ObjectMeta::default()), None);
    }

    #[test]
    fn the_catalog_source_owns_its_config_map_once() {
        let cs: CatalogSource = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "cs", "namespace": "ns", "uid": "u-cs"},
            "spec": {"sourceType": "internal", "configMap": "cm"},
        }))
        .unwrap();
        let owner = source_owner(&cs);
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("CatalogSource", "u-cs"));
        assert_eq!((owner.controller, owner.block_owner_deletion), (Some(false), Some(false)));
        let mut cm = ConfigMap::default();
        let other = OwnerReference { uid: "u-other".into(), ..owner.clone() };
        cm.metadata.owner_references = Some(vec![other.clone()]);
        // Added beside the owners it has; nothing to write once it is there.
        let refs = owner_references_with(&cm, &owner).unwrap();
        assert_eq!(refs, vec![other, owner.clone()]);
        cm.metadata.owner_references = Some(refs);
        assert_eq!(owner_references_with(&cm, &owner), None);
    }

    #[test]
    fn only_configmap_and_internal_sources_name_a_config_map() {
        let with = |t: &str, cm: Option<&str>| {
            let mut cs = CatalogSource::new("c", CatalogSourceSpec::default());
            cs.spec.source_type = SourceType::from(t);
            cs.spec.config_map = cm.map(String::from);
            cs
        };
        assert_eq!(config_map_name(&with("configmap", Some(" cat "))), Some("cat"));
        assert_eq!(config_map_name(&with("internal", Some("cat"))), Some("cat"));
        assert_eq!(config_map_name(&with("grpc", Some("cat"))), None, "OLM ignores it for grpc");
        assert_eq!(config_map_name(&with("configmap", Some(" "))), None);
        let (reader, mut writer) = kube::runtime::reflector::store::<CatalogSource>();
        for (n, ns, t, cm) in
            [("a", "x", "configmap", "cat"), ("b", "y", "configmap", "cat"), ("c", "x", "grpc", "cat")]
        {
            let mut cs = with(t, Some(cm));
            cs.metadata.name = Some(n.into());
            cs.metadata.namespace = Some(ns.into());
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(cs));
        }
        let names: Vec<String> = sources_naming(&reader, "x", "cat").into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["a"]);
    }
}
