//! Removing what makes the cluster call a CSV's webhooks and APIServices when the CSV goes or
//! must not be called: the I/O shell over [`super::webhook`]'s pure rules (which objects are the
//! CSV's, what a shared auth binding keeps of other installs).
//!
//! Semantics: \[OLM\] `pkg/controller/operators/olm/operator.go`
//! (`handleClusterServiceVersionDeletion`), which removes the APIServices and resets the
//! conversion of the CSV's CRDs; capstan also removes the webhook configurations (OLM leaves them
//! to label-based garbage collection) and its subject of the shared auth bindings.

use std::fmt::Debug;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::webhook::{
    Definitions, KUBE_SYSTEM, auth_delegator_name, auth_reader_name, service_name, webhook_service_name,
    without_subjects_of,
};
use super::{FIELD_MANAGER, LABEL_OWNER, LABEL_OWNER_NAMESPACE};
use crate::api::clusterserviceversion::{WebhookAdmissionType, WebhookDescription};

/// Why [`remove`] or [`remove_callers`] stopped: the first API error other than NotFound, naming
/// the object (`Kind name`, `Kind namespace/name`).
#[derive(Debug, thiserror::Error)]
pub enum RemovalError {
    /// Listing the objects of a kind labelled for the CSV failed.
    #[error("list {kind}: {source}")]
    List {
        /// The kind listed, e.g. `ValidatingWebhookConfiguration`.
        kind: &'static str,
        /// The API error.
        source: kube::Error,
    },
    /// Reading an object failed.
    #[error("{object}: get failed: {source}")]
    Get {
        /// The object, `Kind name`.
        object: String,
        /// The API error.
        source: kube::Error,
    },
    /// Deleting an object failed.
    #[error("{object}: delete failed: {source}")]
    Delete {
        /// The object, `Kind name`.
        object: String,
        /// The API error.
        source: kube::Error,
    },
    /// Setting a CRD's `spec.conversion` back to `None` failed.
    #[error("CustomResourceDefinition {crd}: resetting spec.conversion failed: {source}")]
    ResetConversion {
        /// The CRD's name.
        crd: String,
        /// The API error.
        source: kube::Error,
    },
    /// An object read could not be turned into JSON.
    #[error("{object}: {source}")]
    Json {
        /// The object, `Kind name`.
        object: String,
        /// The serialization error.
        source: serde_json::Error,
    },
    /// Applying a shared binding without the subjects of a namespace failed.
    #[error("{object}: removing the subjects of namespace {namespace} failed: {source}")]
    RemoveSubjects {
        /// The binding, `Kind name`.
        object: String,
        /// The namespace whose subjects were to go.
        namespace: String,
        /// The API error.
        source: kube::Error,
    },
}

fn gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The first part of [`remove`]: the webhook configurations and APIServices labelled for the CSV
/// and the conversion of its CRDs that points at its own Service; the shared auth bindings are
/// kept. For a CSV that stays installed but must not be called (refused for an OperatorGroup
/// owner conflict; it may own its APIs again later and then needs its bindings). Returns the
/// objects removed, as `Kind name`.
///
/// # Errors
/// The first API error other than NotFound, naming the object.
pub async fn remove_callers(
    client: &kube::Client,
    csv: &str,
    namespace: &str,
    defs: &Definitions,
) -> Result<Vec<String>, RemovalError> {
    let selector = ListParams::default().labels(&format!("{LABEL_OWNER}={csv},{LABEL_OWNER_NAMESPACE}={namespace}"));
    let mut removed = Vec::new();
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    delete_labelled(&validating, "ValidatingWebhookConfiguration", &selector, &mut removed).await?;
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone());
    delete_labelled(&mutating, "MutatingWebhookConfiguration", &selector, &mut removed).await?;
    if !defs.apiservices.is_empty() {
        let apiservice = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
            "apiservices",
        );
        let api = Api::<DynamicObject>::all_with(client.clone(), &apiservice);
        delete_labelled(&api, "APIService", &selector, &mut removed).await?;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for w in defs.webhooks.iter().filter(|w| w.type_ == WebhookAdmissionType::ConversionWebhook) {
        for c in w.conversion_crds.iter().flatten() {
            if reset_conversion(&crds, c, namespace, w).await? {
                removed.push(format!("CustomResourceDefinition {c} spec.conversion"));
            }
        }
    }
    Ok(removed)
}

/// Deletes every object of `api` that `selector` lists, adding `Kind name` to `removed` for each
/// one deleted (one already gone is skipped).
async fn delete_labelled<K>(
    api: &Api<K>,
    kind: &'static str,
    selector: &ListParams,
    removed: &mut Vec<String>,
) -> Result<(), RemovalError>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    let list = api.list(selector).await.map_err(|source| RemovalError::List { kind, source })?;
    for o in list.items {
        let name = o.meta().name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => removed.push(format!("{kind} {name}")),
            Err(e) if gone(&e) => {}
            Err(source) => return Err(RemovalError::Delete { object: format!("{kind} {name}"), source }),
        }
    }
    Ok(())
}

/// Sets CRD `crd`'s `spec.conversion` back to `None` when it points at the Service of the
/// conversion webhook `webhook` in `namespace`. Whether it did.
async fn reset_conversion(
    crds: &Api<CustomResourceDefinition>,
    crd: &str,
    namespace: &str,
    webhook: &WebhookDescription,
) -> Result<bool, RemovalError> {
    let object = || format!("CustomResourceDefinition {crd}");
    let Some(found) = crds.get_opt(crd).await.map_err(|source| RemovalError::Get { object: object(), source })? else {
        return Ok(false);
    };
    let points_here = found
        .spec
        .conversion
        .as_ref()
        .and_then(|cv| cv.webhook.as_ref())
        .and_then(|wh| wh.client_config.as_ref())
        .and_then(|cc| cc.service.as_ref())
        .is_some_and(|s| s.namespace == namespace && s.name == webhook_service_name(webhook));
    if !points_here {
        return Ok(false);
    }
    // A JSON merge patch: `webhook: null` removes the field whoever owns it.
    let patch = json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
    crds.patch(crd, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| RemovalError::ResetConversion { crd: crd.to_string(), source })?;
    Ok(true)
}

/// Removes what makes the cluster call a CSV's webhooks and APIServices, before its Deployments
/// go (so no write is left failing on a webhook that points at nothing): the
/// Validating/MutatingWebhookConfigurations and APIServices labelled `olm.owner=<csv>`,
/// `olm.owner.namespace=<namespace>`, and the `spec.conversion` of each conversion webhook's
/// CRDs set back to `None` (\[OLM\] `handleClusterServiceVersionDeletion`, which does the last
/// two; OLM leaves webhook configurations to label-based garbage collection). Also the
/// auth-reader RoleBinding in `kube-system` and auth-delegator ClusterRoleBinding, which no
/// ownerReference can collect: shared by the installs of one package in several namespaces
/// ([`super::webhook::is_shared_binding`]), they lose this namespace's subject and go with the
/// last one. Call it only when the CSV is removed, not replaced: a replacing CSV applies the same
/// objects (see [`super::webhook`]). Returns the objects removed, as `Kind name`.
///
/// # Errors
/// The first API error other than NotFound, naming the object.
pub async fn remove(
    client: &kube::Client,
    csv: &str,
    namespace: &str,
    defs: &Definitions,
) -> Result<Vec<String>, RemovalError> {
    let mut removed = remove_callers(client, csv, namespace, defs).await?;
    // The shared auth bindings: this namespace's subject goes, the binding with its last one.
    let delegators: Api<ClusterRoleBinding> = Api::all(client.clone());
    let readers: Api<RoleBinding> = Api::namespaced(client.clone(), KUBE_SYSTEM);
    for d in defs.deployments() {
        let svc = service_name(&d);
        let delegator = format!("ClusterRoleBinding {}", auth_delegator_name(&svc));
        if let Some(done) =
            release_shared_binding(&delegators, &auth_delegator_name(&svc), namespace, &delegator).await?
        {
            removed.push(done);
        }
        let reader = format!("RoleBinding {KUBE_SYSTEM}/{}", auth_reader_name(&svc));
        if let Some(done) = release_shared_binding(&readers, &auth_reader_name(&svc), namespace, &reader).await? {
            removed.push(done);
        }
    }
    Ok(removed)
}

/// Takes the subjects of `namespace` out of the shared binding `name` ([`without_subjects_of`]):
/// deletes it when none is left, else applies what is left (capstan's field manager). Returns
/// what was done, as `what` (deleted) or `what subjects of namespace <ns>`; `None` when the
/// binding is absent or has no subject of `namespace`.
async fn release_shared_binding<K>(
    api: &Api<K>,
    name: &str,
    namespace: &str,
    what: &str,
) -> Result<Option<String>, RemovalError>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    let found = api.get_opt(name).await.map_err(|source| RemovalError::Get { object: what.to_string(), source })?;
    let Some(obj) = found else { return Ok(None) };
    let name = obj.meta().name.clone().unwrap_or_default();
    let value = serde_json::to_value(&obj).map_err(|source| RemovalError::Json { object: what.to_string(), source })?;
    match without_subjects_of(&value, namespace) {
        None => Ok(None),
        Some(None) => match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => Ok(Some(what.to_string())),
            Err(e) if gone(&e) => Ok(None),
            Err(source) => Err(RemovalError::Delete { object: what.to_string(), source }),
        },
        Some(Some(left)) => {
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            api.patch(&name, &pp, &Patch::Apply(&left)).await.map_err(|source| RemovalError::RemoveSubjects {
                object: what.to_string(),
                namespace: namespace.to_string(),
                source,
            })?;
            Ok(Some(format!("{what} subjects of namespace {namespace}")))
        }
    }
}
