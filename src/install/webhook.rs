//! The objects OLM creates for a CSV's `spec.webhookdefinitions` (validating, mutating and
//! conversion webhooks) and `spec.apiservicedefinitions.owned`, as plan objects; and, at apply
//! time, the certificate material filled into them ([`fill_certificates`]). Pure: no I/O.
//!
//! Semantics: \[OLM\] `pkg/controller/install/certresources.go` (`installCertRequirementsForDeployment`,
//! `getServicePort`, `AddDefaultCertVolumeAndVolumeMounts`, `SetCAAnnotation`), `webhook.go`
//! (`createOrUpdate{Validating,Mutating,Conversion}Webhook`, `ValidWebhookRules`, the labels
//! `olm.webhook-description-generate-name` and `olm.webhook-description-hash`),
//! `apiservice.go` (`createOrUpdateAPIService`), `pkg/controller/operators/olm/operator.go`
//! (repeated `generateName` is `InvalidWebhookDescription`), and operator-framework/api
//! `WebhookDescription.Get{Validating,Mutating}Webhook` / `DomainName`.
//!
//! For every Deployment of the install strategy that serves at least one webhook or owned
//! APIService (its `deploymentName`):
//! - Service `<deployment>-service` in the install namespace: one port per distinct
//!   (`containerPort` default 443, `targetPort` default the container port) named after the
//!   port, selector = the Deployment's `selector.matchLabels`, label `olm.managed`, owned by the CSV;
//! - Secret `<service>-cert` of type `kubernetes.io/tls` with `tls.crt`, `tls.key`, `olmCAKey`
//!   and the annotation `olmcahash` (planned without data; [`fill_certificates`] issues or
//!   reuses the certificates when the plan is applied, so no private key is ever written into
//!   an InstallPlan);
//! - Role and RoleBinding `<secret>` letting the Deployment's ServiceAccount `get` that Secret;
//! - ClusterRoleBinding `<service>-system:auth-delegator` (to ClusterRole `system:auth-delegator`)
//!   and RoleBinding `<service>-auth-reader` in `kube-system` (to Role
//!   `extension-apiserver-authentication-reader`), as OLM creates for every certificate holder;
//! - the Deployment's pod template: volumes `apiservice-cert` (`apiserver.crt`/`apiserver.key` at
//!   `/apiserver.local.config/certificates`) and `webhook-cert` (`tls.crt`/`tls.key` at
//!   `/tmp/k8s-webhook-server/serving-certs`) mounted in every container (replacing a volume or
//!   mount of the same name or path), the annotation `olmcahash` (the CA's SHA-256, so pods
//!   restart when the CA changes) and `serviceAccountName: default` when none is set.
//!
//! Per webhook: a Validating/MutatingWebhookConfiguration with one webhook named
//! `generateName`, its rules, failure/match/reinvocation policy, object selector, side effects,
//! timeout, admission review versions, the client config (Service `<deployment with . → ->-service`,
//! path `webhookPath`, port `containerPort`) and `caBundle`; a namespace selector for the
//! OperatorGroup's target namespaces; labels `olm.owner`, `olm.owner.kind`,
//! `olm.owner.namespace`, `olm.managed`, `olm.webhook-description-generate-name`,
//! `olm.webhook-description-hash`. A conversion webhook sets each of its `conversionCRDs`'
//! `spec.conversion` to `Webhook` with that Service, path (default `/`), port, `caBundle` and
//! `conversionReviewVersions` = `admissionReviewVersions`.
//!
//! Per owned APIService: APIService `<version>.<group>` with `groupPriorityMinimum: 2000`,
//! `versionPriority: 15`, the Service, port and `caBundle`, the owner labels and `olm.managed`,
//! and the Subscription config's annotations.
//!
//! Where capstan differs from OLM (each because capstan applies fixed objects with server-side
//! apply instead of creating with `generateName`):
//! - a webhook configuration is named `<generateName>-<suffix>` where the suffix is
//!   [`super::hash::short_hash`]'s alphabet over the namespace and package (OLM: a random
//!   suffix), so that the next CSV version of the package applies the same object and takes it
//!   over without a moment where no webhook is configured;
//! - `olm.webhook-description-hash` is capstan's hash of the description (OLM's is Go's
//!   `DeepHashObject`, only compared with values OLM wrote);
//!
//! The namespace selector is OLM's ([`super::operator_group::webhook_selector`]): the label
//! `olm.operatorgroup.uid/<uid>` the OperatorGroup reconciler puts on each target namespace, the
//! group's own selector, or none for all namespaces.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{KeyToPath, SecretVolumeSource, Volume, VolumeMount};
use serde_json::{Value, json};

pub use crate::bundle::webhooks::{DEFAULT_PORT, Definitions, check, invalid_rules, service_name};

use super::certs::{self, ANNOTATION_CA_HASH};
use super::{InstallTarget, LABEL_MANAGED, Step};
use crate::api::clusterserviceversion::{ApiServiceDescription, WebhookAdmissionType, WebhookDescription};

/// Label on webhook configurations: the description's `generateName` (\[OLM\] `WebhookDescKey`).
pub const LABEL_WEBHOOK_DESCRIPTION: &str = "olm.webhook-description-generate-name";
/// Label on webhook configurations: a hash of the description (\[OLM\] `WebhookHashKey`).
pub const LABEL_WEBHOOK_HASH: &str = "olm.webhook-description-hash";
/// Volume with the serving certificate for kubebuilder / operator-sdk webhook servers.
pub const VOLUME_WEBHOOK_CERT: &str = "webhook-cert";
/// Where [`VOLUME_WEBHOOK_CERT`] is mounted (`tls.crt`, `tls.key`).
pub const MOUNT_WEBHOOK_CERT: &str = "/tmp/k8s-webhook-server/serving-certs";
/// Volume with the serving certificate for aggregated API servers.
pub const VOLUME_APISERVICE_CERT: &str = "apiservice-cert";
/// Where [`VOLUME_APISERVICE_CERT`] is mounted (`apiserver.crt`, `apiserver.key`).
pub const MOUNT_APISERVICE_CERT: &str = "/apiserver.local.config/certificates";
/// Namespace of the `extension-apiserver-authentication-reader` RoleBinding.
pub const KUBE_SYSTEM: &str = "kube-system";

/// `<service>-cert` (\[OLM\] `SecretName`).
pub fn secret_name(service: &str) -> String {
    format!("{service}-cert")
}

/// `<service>-system:auth-delegator` (\[OLM\] `AuthDelegatorClusterRoleBindingName`).
pub fn auth_delegator_name(service: &str) -> String {
    format!("{service}-system:auth-delegator")
}

/// `<service>-auth-reader` (\[OLM\] `AuthReaderRoleBindingName`).
pub fn auth_reader_name(service: &str) -> String {
    format!("{service}-auth-reader")
}

/// The Service name a webhook's client config names: the deployment name with `.` → `-`, then
/// `-service` (operator-framework/api `WebhookDescription.DomainName`).
pub fn webhook_service_name(desc: &WebhookDescription) -> String {
    service_name(&desc.deployment_name.clone().unwrap_or_default().replace('.', "-"))
}

/// A planned object and where it goes: `rank` in the plan's order of kinds, whether it gets
/// the CSV ownerReference (`owned`) and whether it gets the owner labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Apply rank.
    pub rank: u8,
    /// Gets the CSV's ownerReference (namespaced objects in the install namespace).
    pub owned: bool,
    /// Gets the labels `olm.owner`, `olm.owner.kind`, `olm.owner.namespace`.
    pub owner_labels: bool,
    /// The object.
    pub value: Value,
}

/// The objects for one certificate-holding Deployment (Service, Secret, the Secret's Role and
/// RoleBinding, auth-delegator ClusterRoleBinding, auth-reader RoleBinding), its spec given
/// after the CSV's own (`spec.install.spec.deployments[].spec`).
pub fn deployment_objects(
    defs: &Definitions,
    target: &InstallTarget,
    deployment: &str,
    spec: &DeploymentSpec,
) -> Vec<Planned> {
    let ns = &target.namespace;
    let svc = service_name(deployment);
    let secret = secret_name(&svc);
    let sa = spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.service_account_name.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".into());
    let ports: Vec<Value> = defs
        .service_ports(deployment)
        .into_iter()
        .map(|(name, port, target_port)| json!({"name": name, "port": port, "targetPort": target_port}))
        .collect();
    let selector = spec.selector.match_labels.clone().unwrap_or_default();
    let managed = json!({LABEL_MANAGED: "true"});
    let subject = json!([{"kind": "ServiceAccount", "name": sa, "namespace": ns}]);
    vec![
        Planned {
            rank: 6,
            owned: true,
            owner_labels: false,
            value: json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "namespace": ns, "labels": managed},
                "spec": {"ports": ports, "selector": selector}}),
        },
        Planned {
            rank: 8,
            owned: true,
            owner_labels: false,
            value: json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": secret, "namespace": ns, "labels": managed, "annotations": {ANNOTATION_CA_HASH: ""}}}),
        },
        Planned {
            rank: 2,
            owned: true,
            owner_labels: false,
            value: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": secret, "namespace": ns, "labels": managed},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret]}]}),
        },
        Planned {
            rank: 3,
            owned: true,
            owner_labels: false,
            value: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": secret, "namespace": ns, "labels": managed},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": secret}, "subjects": subject}),
        },
        Planned {
            rank: 5,
            owned: false,
            owner_labels: true,
            value: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": auth_delegator_name(&svc), "labels": managed},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"}, "subjects": subject}),
        },
        Planned {
            rank: 3,
            owned: false,
            owner_labels: false,
            value: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": auth_reader_name(&svc), "namespace": KUBE_SYSTEM, "labels": managed},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"}, "subjects": subject}),
        },
    ]
}

/// Whether `step` is one of the two auth bindings OLM names per Service only
/// (`<service>-system:auth-delegator`, `<service>-auth-reader` in `kube-system`), which two
/// installs of one package in two namespaces therefore share. OLM overwrites the subjects on
/// each install, so the first install's ServiceAccount silently loses the delegation; capstan
/// keeps one subject per install ([`merge_shared_binding`]) and removes only its own
/// ([`without_subjects_of`]).
pub fn is_shared_binding(step: &Step) -> bool {
    let role = step.manifest.pointer("/roleRef/name").and_then(Value::as_str);
    match step.kind.as_str() {
        "ClusterRoleBinding" => role == Some("system:auth-delegator") && step.name.ends_with("-system:auth-delegator"),
        "RoleBinding" => {
            step.namespace.as_deref() == Some(KUBE_SYSTEM)
                && role == Some("extension-apiserver-authentication-reader")
                && step.name.ends_with("-auth-reader")
        }
        _ => false,
    }
}

/// The manifest to apply for a shared binding ([`is_shared_binding`]) given the object on the
/// cluster: the planned subjects after the existing ones of other namespaces, and the existing
/// component labels (`operators.coreos.com/<package>.<namespace>`) kept beside the planned
/// ones. The owner labels (`olm.owner*`) are dropped once the binding serves more than one
/// namespace, so that removing one install's objects by label leaves the binding to the others.
/// Pure.
pub fn merge_shared_binding(planned: &Value, existing: &Value) -> Value {
    let mut out = planned.clone();
    let planned_subjects: Vec<Value> = planned.get("subjects").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut subjects: Vec<Value> = existing
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| !planned_subjects.contains(s))
        .cloned()
        .collect();
    let shared = !subjects.is_empty();
    subjects.extend(planned_subjects);
    out["subjects"] = Value::Array(subjects);
    if let Some(labels) = existing.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels.iter().filter(|(k, _)| k.starts_with(super::COMPONENT_LABEL_PREFIX)) {
            out["metadata"]["labels"][k] = v.clone();
        }
    }
    if shared && let Some(labels) = out.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.retain(|k, _| {
            k != super::LABEL_OWNER && k != super::LABEL_OWNER_KIND && k != super::LABEL_OWNER_NAMESPACE
        });
    }
    out
}

/// A shared binding ([`is_shared_binding`]) as it is after the install in `namespace` goes: its
/// subjects of other namespaces and its component labels of other namespaces. `None` when no
/// subject of `namespace` is in it (nothing to do); `Some(None)` when no subject is left (delete
/// it); `Some(Some(manifest))` otherwise (apply it). `existing` is the object as read. Pure.
pub fn without_subjects_of(existing: &Value, namespace: &str) -> Option<Option<Value>> {
    let subjects = existing.get("subjects").and_then(Value::as_array).cloned().unwrap_or_default();
    let ours = |s: &Value| {
        s.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
            && s.get("namespace").and_then(Value::as_str) == Some(namespace)
    };
    if !subjects.iter().any(ours) {
        return None;
    }
    let left: Vec<Value> = subjects.into_iter().filter(|s| !ours(s)).collect();
    if left.is_empty() {
        return Some(None);
    }
    let meta = existing.get("metadata").cloned().unwrap_or_default();
    let suffix = format!(".{namespace}");
    let labels: serde_json::Map<String, Value> = meta
        .get("labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| !(k.starts_with(super::COMPONENT_LABEL_PREFIX) && k.ends_with(&suffix)))
        .filter(|(k, _)| {
            *k != super::LABEL_OWNER && *k != super::LABEL_OWNER_KIND && *k != super::LABEL_OWNER_NAMESPACE
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut metadata = json!({"name": meta.get("name"), "labels": labels});
    if let Some(ns) = meta.get("namespace") {
        metadata["namespace"] = ns.clone();
    }
    Some(Some(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": existing.get("kind").cloned().unwrap_or_default(),
        "metadata": metadata,
        "roleRef": existing.get("roleRef").cloned().unwrap_or_default(),
        "subjects": left,
    })))
}

/// Adds OLM's certificate volumes and mounts to a Deployment spec, sets `serviceAccountName:
/// default` when empty and the `olmcahash` pod-template annotation to `""` (filled by
/// [`fill_certificates`]) (\[OLM\] `AddDefaultCertVolumeAndVolumeMounts`, `SetCAAnnotation`).
pub fn mutate_deployment(spec: &mut DeploymentSpec, deployment: &str) {
    let secret = secret_name(&service_name(deployment));
    let pod = spec.template.spec.get_or_insert_with(Default::default);
    if pod.service_account_name.as_deref().is_none_or(str::is_empty) {
        pod.service_account_name = Some("default".into());
    }
    let item = |key: &str, path: &str| KeyToPath { key: key.into(), path: path.into(), mode: None };
    for (name, path, items) in [
        (
            VOLUME_APISERVICE_CERT,
            MOUNT_APISERVICE_CERT,
            vec![item("tls.crt", "apiserver.crt"), item("tls.key", "apiserver.key")],
        ),
        (VOLUME_WEBHOOK_CERT, MOUNT_WEBHOOK_CERT, vec![item("tls.crt", "tls.crt"), item("tls.key", "tls.key")]),
    ] {
        let volume = Volume {
            name: name.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                items: Some(items),
                ..Default::default()
            }),
            ..Default::default()
        };
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        match volumes.iter_mut().find(|v| v.name == name) {
            Some(v) => *v = volume,
            None => volumes.push(volume),
        }
        let mount = VolumeMount { name: name.into(), mount_path: path.into(), ..Default::default() };
        for c in &mut pod.containers {
            let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
            if mounts.iter().any(|m| m.name == name) {
                continue;
            }
            match mounts.iter_mut().find(|m| m.mount_path == path) {
                Some(m) => *m = mount.clone(),
                None => mounts.push(mount.clone()),
            }
        }
    }
    let tmeta = spec.template.metadata.get_or_insert_with(Default::default);
    tmeta.annotations.get_or_insert_with(Default::default).insert(ANNOTATION_CA_HASH.into(), String::new());
}

/// The name capstan gives the webhook configuration of `desc`: `<generateName>-<suffix>`, the
/// suffix a hash of the install namespace and package (see the module documentation), the
/// whole cut to 253 characters.
pub fn configuration_name(desc: &WebhookDescription, target: &InstallTarget) -> String {
    let suffix = super::hash::short_hash(&json!([target.namespace, target.package]));
    let mut base = desc.generate_name.clone();
    base.truncate(253 - suffix.len() - 1);
    format!("{base}-{suffix}")
}

fn client_config(desc: &WebhookDescription, ns: &str, default_path: Option<&str>) -> Value {
    let mut service = json!({"namespace": ns, "name": webhook_service_name(desc), "port": desc.container_port.filter(|p| *p > 0).unwrap_or(DEFAULT_PORT)});
    if let Some(p) = desc.webhook_path.as_deref().or(default_path) {
        service["path"] = json!(p);
    }
    json!({"service": service})
}

/// The webhook configuration of a validating or mutating `desc` (`None` for a conversion
/// webhook), without `caBundle` (filled by [`fill_certificates`]).
pub fn configuration(desc: &WebhookDescription, target: &InstallTarget) -> Option<Planned> {
    let kind = match desc.type_ {
        WebhookAdmissionType::ValidatingAdmissionWebhook => "ValidatingWebhookConfiguration",
        WebhookAdmissionType::MutatingAdmissionWebhook => "MutatingWebhookConfiguration",
        WebhookAdmissionType::ConversionWebhook => return None,
    };
    let mut hook = serde_json::Map::new();
    hook.insert("name".into(), json!(desc.generate_name));
    hook.insert("clientConfig".into(), client_config(desc, &target.namespace, None));
    let opt = |v: Option<Value>| v.filter(|v| !v.is_null());
    for (k, v) in [
        ("rules", opt(desc.rules.as_ref().map(|r| json!(r)))),
        ("failurePolicy", opt(desc.failure_policy.as_ref().map(|v| json!(v)))),
        ("matchPolicy", opt(desc.match_policy.as_ref().map(|v| json!(v)))),
        ("namespaceSelector", target.webhook_selector.clone()),
        ("objectSelector", opt(desc.object_selector.as_ref().map(|v| json!(v)))),
        ("sideEffects", Some(json!(desc.side_effects))),
        ("timeoutSeconds", desc.timeout_seconds.map(|v| json!(v))),
        ("admissionReviewVersions", Some(json!(desc.admission_review_versions))),
    ] {
        if let Some(v) = v {
            hook.insert(k.into(), v);
        }
    }
    if desc.type_ == WebhookAdmissionType::MutatingAdmissionWebhook
        && let Some(r) = &desc.reinvocation_policy
    {
        hook.insert("reinvocationPolicy".into(), json!(r));
    }
    let hash = super::hash::short_hash(&serde_json::to_value(desc).unwrap_or_default());
    Some(Planned {
        rank: 12,
        owned: false,
        owner_labels: true,
        value: json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": configuration_name(desc, target),
                "labels": {LABEL_MANAGED: "true", LABEL_WEBHOOK_DESCRIPTION: desc.generate_name, LABEL_WEBHOOK_HASH: hash}},
            "webhooks": [Value::Object(hook)]}),
    })
}

/// `spec.conversion` for the CRDs of a conversion webhook, without `caBundle`.
pub fn conversion(desc: &WebhookDescription, target: &InstallTarget) -> Value {
    json!({"strategy": "Webhook", "webhook": {"clientConfig": client_config(desc, &target.namespace, Some("/")),
        "conversionReviewVersions": desc.admission_review_versions}})
}

/// The APIService of an owned `desc`, without `caBundle`.
pub fn apiservice(desc: &ApiServiceDescription, target: &InstallTarget) -> Planned {
    let port = desc.container_port.filter(|p| *p > 0).unwrap_or(DEFAULT_PORT);
    let mut v = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("{}.{}", desc.version, desc.group), "labels": {LABEL_MANAGED: "true"}},
        "spec": {"group": desc.group, "version": desc.version, "groupPriorityMinimum": 2000, "versionPriority": 15,
            "service": {"namespace": target.namespace, "name": service_name(desc.deployment_name.as_deref().unwrap_or_default()), "port": port}}});
    if let Some(a) = target.config.annotations.as_ref().filter(|a| !a.is_empty()) {
        v["metadata"]["annotations"] = json!(a);
    }
    Planned { rank: 12, owned: false, owner_labels: true, value: v }
}

/// A serving Secret of a plan: planned by [`deployment_objects`] (kind `Secret`, type
/// `kubernetes.io/tls`, annotation `olmcahash`, no `data`).
pub fn is_planned_serving_secret(step: &Step) -> bool {
    step.kind == "Secret"
        && step.manifest.get("type").and_then(Value::as_str) == Some("kubernetes.io/tls")
        && step.manifest.pointer(&format!("/metadata/annotations/{ANNOTATION_CA_HASH}")).is_some()
        && step.manifest.get("data").is_none()
}

/// Why an object a CSV's InstallPlan applied for its webhooks or owned APIServices must be
/// applied again, from what the cluster holds now (`found`; `None` when it is gone):
/// - a Validating/MutatingWebhookConfiguration or APIService that was deleted, or whose webhook
///   or service no longer points at the planned Service (namespace, name, path, port) or whose
///   `caBundle` was emptied;
/// - a CRD whose planned `spec.conversion` is a webhook and whose conversion was reset (strategy
///   not `Webhook`, or no `caBundle` while it points at the planned Service). A conversion that
///   points at another Service is left alone (the next version of the operator converts), and
///   a deleted CRD is not a restore case (its custom resources went with it).
///
/// A missing `caBundle` counts only for a Service `has_certificate` names (one whose serving
/// Secret the plan made; a webhook served by a Deployment outside the install strategy gets no
/// `caBundle` from OLM or capstan, so its absence is as planned).
///
/// `None` for every other step and when the object is as planned. Rules, selectors and policies
/// are not compared (the API server defaults them); OLM v0's CSV controller likewise checks that
/// the webhooks exist and carry its CA (`pkg/controller/operators/olm/apiservices.go`,
/// `areWebhooksAvailable`) and reinstalls them otherwise.
pub fn restore_reason(planned: &Step, found: Option<&Value>, has_certificate: impl Fn(&str) -> bool) -> Option<String> {
    // The Service reference with the API server's defaults (port 443).
    fn service(v: Option<&Value>) -> Option<(String, String, String, i64)> {
        let s = v?;
        Some((
            s.get("namespace").and_then(Value::as_str).unwrap_or_default().to_string(),
            s.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
            s.get("path").and_then(Value::as_str).unwrap_or_default().to_string(),
            s.get("port").and_then(Value::as_i64).unwrap_or(i64::from(DEFAULT_PORT)),
        ))
    }
    let empty_ca = |v: Option<&Value>, service: Option<&Value>| {
        v.and_then(Value::as_str).is_none_or(str::is_empty)
            && service.and_then(|s| s.get("name")).and_then(Value::as_str).is_some_and(&has_certificate)
    };
    match planned.kind.as_str() {
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            let Some(found) = found else { return Some("was deleted".into()) };
            let have = found.get("webhooks").and_then(Value::as_array).cloned().unwrap_or_default();
            for w in planned.manifest.get("webhooks").and_then(Value::as_array).into_iter().flatten() {
                let name = w.get("name").and_then(Value::as_str).unwrap_or_default();
                let Some(h) = have.iter().find(|h| h.get("name").and_then(Value::as_str) == Some(name)) else {
                    return Some(format!("lost its webhook {name}"));
                };
                if service(h.pointer("/clientConfig/service")) != service(w.pointer("/clientConfig/service")) {
                    return Some(format!("has webhook {name} pointing at another Service"));
                }
                if empty_ca(h.pointer("/clientConfig/caBundle"), w.pointer("/clientConfig/service")) {
                    return Some(format!("has webhook {name} without a caBundle"));
                }
            }
            None
        }
        "APIService" => {
            let Some(found) = found else { return Some("was deleted".into()) };
            if service(found.pointer("/spec/service")) != service(planned.manifest.pointer("/spec/service")) {
                return Some("points at another Service".into());
            }
            if empty_ca(found.pointer("/spec/caBundle"), planned.manifest.pointer("/spec/service"))
                && found.pointer("/spec/insecureSkipTLSVerify").and_then(Value::as_bool) != Some(true)
            {
                return Some("has no caBundle".into());
            }
            None
        }
        "CustomResourceDefinition" => {
            let want = planned
                .manifest
                .pointer("/spec/conversion")
                .filter(|c| c.get("strategy").and_then(Value::as_str) == Some("Webhook"))?;
            let have = found?.pointer("/spec/conversion");
            if have.and_then(|c| c.get("strategy")).and_then(Value::as_str) != Some("Webhook") {
                return Some("had its spec.conversion reset".into());
            }
            // Another Service: most likely the next version of the operator, which converts now.
            let path = "/webhook/clientConfig/service";
            if service(have.and_then(|c| c.pointer(path))) != service(want.pointer(path)) {
                return None;
            }
            if empty_ca(have.and_then(|c| c.pointer("/webhook/clientConfig/caBundle")), want.pointer(path)) {
                return Some("has spec.conversion without a caBundle".into());
            }
            None
        }
        _ => None,
    }
}

/// What [`fill_certificates`] did for one serving Secret.
#[derive(Debug, Clone, PartialEq)]
pub struct CertOutcome {
    /// Namespace of the Secret.
    pub namespace: String,
    /// Secret name.
    pub secret: String,
    /// `None`: the existing certificates were kept; `Some(reason)`: new ones were issued.
    pub issued: Option<String>,
    /// The CA's hash (`olmcahash`).
    pub ca_hash: String,
}

/// Fills the certificate material into a plan about to be applied: for every planned serving
/// Secret ([`is_planned_serving_secret`]) the existing Secret's certificates are kept when
/// [`certs::rotation_reason`] finds nothing wrong with them (as OLM's "reusing existing cert"),
/// else new ones are issued valid for `valid_for`; the Secret gets `data` and `olmcahash`, and
/// every step that points at its Service gets the CA: webhook configurations'
/// `webhooks[].clientConfig.caBundle`, CRDs' `spec.conversion.webhook.clientConfig.caBundle`,
/// APIServices' `spec.caBundle`, and Deployments mounting the Secret the pod-template
/// annotation `olmcahash`.
///
/// `existing` maps `(namespace, secret name)` to the `data` of the Secret on the cluster.
///
/// # Errors
/// [`certs::CertError`] when certificates cannot be issued.
pub fn fill_certificates(
    steps: &mut [Step],
    existing: &BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>,
    now: time::OffsetDateTime,
    valid_for: std::time::Duration,
) -> Result<Vec<CertOutcome>, certs::CertError> {
    let mut outcomes = Vec::new();
    let mut cas = Cas::new();
    for step in steps.iter_mut().filter(|s| is_planned_serving_secret(s)) {
        let Some((outcome, service, pem)) = fill_secret(step, existing, now, valid_for)? else { continue };
        cas.insert((outcome.namespace.clone(), service), Ca { pem, hash: outcome.ca_hash.clone() });
        outcomes.push(outcome);
    }
    if cas.is_empty() {
        return Ok(outcomes);
    }
    for step in steps.iter_mut() {
        fill_ca(step, &cas);
    }
    Ok(outcomes)
}

/// A serving Secret's CA: its PEM and its hash (`olmcahash`).
struct Ca {
    pem: String,
    hash: String,
}

/// The CA of each serving Secret filled, by `(namespace, service)`.
type Cas = BTreeMap<(String, String), Ca>;

/// Fills one planned serving Secret `step`: the certificates of `existing` kept or new ones
/// issued ([`fill_certificates`]). The outcome, the Service and the CA's PEM; `None` when the
/// Secret is not named `<service>-cert`.
fn fill_secret(
    step: &mut Step,
    existing: &BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>,
    now: time::OffsetDateTime,
    valid_for: std::time::Duration,
) -> Result<Option<(CertOutcome, String, String)>, certs::CertError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let ns = step.namespace.clone().unwrap_or_default();
    let Some(service) = step.name.strip_suffix("-cert").map(str::to_string) else { return Ok(None) };
    let hosts = certs::hostnames_for_service(&service, &ns);
    let key = (ns.clone(), step.name.clone());
    let (data, issued) = match existing.get(&key) {
        Some(d) => match certs::rotation_reason(d, &hosts, now) {
            None => (d.clone(), None),
            Some(reason) => (certs::issue(&hosts, now, valid_for)?.secret_data(), Some(reason)),
        },
        None => (certs::issue(&hosts, now, valid_for)?.secret_data(), Some("no certificate yet".into())),
    };
    let ca_pem =
        String::from_utf8_lossy(data.get(certs::SECRET_CA_KEY).map(Vec::as_slice).unwrap_or_default()).into_owned();
    let hash = certs::ca_hash(&ca_pem);
    let encoded: serde_json::Map<String, Value> = data.iter().map(|(k, v)| (k.clone(), json!(b64.encode(v)))).collect();
    step.manifest["data"] = Value::Object(encoded);
    step.manifest["metadata"]["annotations"][ANNOTATION_CA_HASH] = json!(hash);
    let outcome = CertOutcome { namespace: ns, secret: step.name.clone(), issued, ca_hash: hash };
    Ok(Some((outcome, service, ca_pem)))
}

/// Writes the CA of `cas` into `step` where it points at a Service whose Secret was filled
/// ([`fill_certificates`]): the `caBundle` of webhook configurations, conversion CRDs and
/// APIServices, the `olmcahash` of a Deployment mounting the Secret.
fn fill_ca(step: &mut Step, cas: &Cas) {
    let b64 = base64::engine::general_purpose::STANDARD;
    let ca_for = |svc: &Value| -> Option<&Ca> {
        let ns = svc.get("namespace").and_then(Value::as_str)?;
        let name = svc.get("name").and_then(Value::as_str)?;
        cas.get(&(ns.to_string(), name.to_string()))
    };
    match step.kind.as_str() {
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            for hook in step.manifest.get_mut("webhooks").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(ca) = hook.pointer("/clientConfig/service").and_then(ca_for) {
                    hook["clientConfig"]["caBundle"] = json!(b64.encode(&ca.pem));
                }
            }
        }
        "CustomResourceDefinition" => {
            if let Some(ca) = step.manifest.pointer("/spec/conversion/webhook/clientConfig/service").and_then(ca_for) {
                step.manifest["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = json!(b64.encode(&ca.pem));
            }
        }
        "APIService" => {
            if let Some(ca) = step.manifest.pointer("/spec/service").and_then(ca_for) {
                step.manifest["spec"]["caBundle"] = json!(b64.encode(&ca.pem));
            }
        }
        "Deployment" => {
            let ns = step.namespace.clone().unwrap_or_default();
            let secret = step
                .manifest
                .pointer("/spec/template/spec/volumes")
                .and_then(Value::as_array)
                .and_then(|vs| vs.iter().find(|v| v.get("name").and_then(Value::as_str) == Some(VOLUME_WEBHOOK_CERT)))
                .and_then(|v| v.pointer("/secret/secretName"))
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some(service) = secret.as_deref().and_then(|s| s.strip_suffix("-cert"))
                && let Some(ca) = cas.get(&(ns, service.to_string()))
            {
                step.manifest["spec"]["template"]["metadata"]["annotations"][ANNOTATION_CA_HASH] = json!(ca.hash);
            }
        }
        _ => {}
    }
}

/// Why the webhooks and APIServices of a CSV cannot be served yet, naming each one: a webhook or
/// APIService whose Deployment (of the install strategy) is not available. `None` when all can
/// be served. For the CSV's status (OLM keeps such a CSV `Installing`, "webhooks not
/// installed"; capstan says which webhook waits on which Deployment).
pub fn unavailable(defs: &Definitions, deployment_available: impl Fn(&str) -> Option<bool>) -> Option<String> {
    let mut waiting = Vec::new();
    for w in &defs.webhooks {
        let d = w.deployment_name.as_deref().unwrap_or_default();
        if deployment_available(d) == Some(false) {
            waiting.push(format!(
                "webhook {} ({:?}) is served by Deployment {d}, which is not available",
                w.generate_name, w.type_
            ));
        }
    }
    for a in &defs.apiservices {
        let d = a.deployment_name.as_deref().unwrap_or_default();
        if deployment_available(d) == Some(false) {
            waiting.push(format!(
                "APIService {}.{} is served by Deployment {d}, which is not available",
                a.version, a.group
            ));
        }
    }
    (!waiting.is_empty()).then(|| waiting.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: &str, name: &str, namespace: Option<&str>, manifest: Value) -> Step {
        Step {
            resolving: "op.v1".into(),
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            namespace: namespace.map(String::from),
            manifest,
        }
    }

    fn sa(ns: &str) -> Value {
        json!({"kind": "ServiceAccount", "name": "op", "namespace": ns})
    }

    #[test]
    fn one_port_leading_to_two_targets_is_refused() {
        let csv = json!({"spec": {
            "webhookdefinitions": [{"type": "ValidatingAdmissionWebhook", "generateName": "v.example.com", "deploymentName": "op", "containerPort": 443, "targetPort": 9443,
                "admissionReviewVersions": ["v1"], "sideEffects": "None", "rules": [{"apiGroups": ["example.com"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["things"]}]}],
            "apiservicedefinitions": {"owned": [{"name": "gizmos", "group": "gizmos.example.com", "version": "v1", "kind": "Gizmo", "deploymentName": "op", "containerPort": 443}]}}});
        let defs = Definitions::read(&csv).unwrap();
        let problems = check(&defs, &[], &BTreeMap::new());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].1.contains("Service op-service would have port 443 twice, to targetPort 443 and 9443"),
            "{problems:?}"
        );
        let mut fixed = csv.clone();
        fixed["spec"]["apiservicedefinitions"]["owned"][0]["containerPort"] = json!(9443);
        assert_eq!(check(&Definitions::read(&fixed).unwrap(), &[], &BTreeMap::new()), Vec::<(String, String)>::new());
    }

    /// A webhook configuration is applied again when deleted, without a caBundle (where the plan has a
    /// certificate for its Service), pointing at another Service, or missing its webhook.
    #[test]
    fn a_webhook_configuration_is_applied_again_when_deleted_or_changed() {
        let svc = json!({"namespace": "ops", "name": "op-service", "path": "/validate", "port": 443});
        let vwc = step(
            "ValidatingWebhookConfiguration",
            "v-abc",
            None,
            json!({"webhooks": [{"name": "v.example.com", "clientConfig": {"service": svc}}]}),
        );
        assert_eq!(restore_reason(&vwc, None, |_| true).as_deref(), Some("was deleted"));
        let ok = json!({"webhooks": [{"name": "v.example.com", "clientConfig": {"service": {"namespace": "ops", "name": "op-service", "path": "/validate"}, "caBundle": "Q0E="}}]});
        assert_eq!(restore_reason(&vwc, Some(&ok), |_| true), None, "port 443 is the default");
        let mut no_ca = ok.clone();
        no_ca["webhooks"][0]["clientConfig"]["caBundle"] = json!("");
        assert_eq!(
            restore_reason(&vwc, Some(&no_ca), |_| true).as_deref(),
            Some("has webhook v.example.com without a caBundle")
        );
        let mut elsewhere = ok.clone();
        elsewhere["webhooks"][0]["clientConfig"]["service"]["name"] = json!("evil");
        assert_eq!(
            restore_reason(&vwc, Some(&no_ca), |s| s != "op-service"),
            None,
            "no certificate of the plan's for that Service: no caBundle is as planned"
        );
        assert_eq!(
            restore_reason(&vwc, Some(&elsewhere), |_| true).as_deref(),
            Some("has webhook v.example.com pointing at another Service")
        );
        assert_eq!(
            restore_reason(&vwc, Some(&json!({"webhooks": []})), |_| true).as_deref(),
            Some("lost its webhook v.example.com")
        );
    }

    /// A CRD's conversion webhook is put back when its spec.conversion was reset, but a deleted CRD, one
    /// converted by another Service, or one with no conversion webhook planned is left alone.
    #[test]
    fn a_crd_is_applied_again_only_when_its_conversion_webhook_was_reset() {
        let conversion = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"namespace": "ops", "name": "op-service", "path": "/convert", "port": 443}}, "conversionReviewVersions": ["v1"]}});
        let crd =
            step("CustomResourceDefinition", "gadgets.example.com", None, json!({"spec": {"conversion": conversion}}));
        let mut installed = json!({"spec": {"conversion": conversion}});
        installed["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = json!("Q0E=");
        assert_eq!(restore_reason(&crd, Some(&installed), |_| true), None);
        assert_eq!(
            restore_reason(&crd, Some(&json!({"spec": {"conversion": {"strategy": "None"}}})), |_| true).as_deref(),
            Some("had its spec.conversion reset")
        );
        assert_eq!(restore_reason(&crd, None, |_| true), None, "a deleted CRD is not restored");
        let mut next = installed.clone();
        next["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["name"] = json!("op-v2-service");
        assert_eq!(
            restore_reason(&crd, Some(&next), |_| true),
            None,
            "converted by another Service: the next version's"
        );
        let plain = step("CustomResourceDefinition", "things.example.com", None, json!({"spec": {}}));
        assert_eq!(
            restore_reason(&plain, Some(&json!({"spec": {"conversion": {"strategy": "None"}}})), |_| true),
            None,
            "no conversion webhook planned"
        );
    }

    /// An APIService is applied again when deleted or without a caBundle; other kinds never are.
    #[test]
    fn an_apiservice_is_applied_again_when_deleted_or_without_a_ca_bundle() {
        let api = step(
            "APIService",
            "v1.example.com",
            None,
            json!({"spec": {"service": {"namespace": "ops", "name": "op-service", "port": 443}}}),
        );
        assert_eq!(restore_reason(&api, None, |_| true).as_deref(), Some("was deleted"));
        assert_eq!(
            restore_reason(
                &api,
                Some(&json!({"spec": {"service": {"namespace": "ops", "name": "op-service"}, "caBundle": "Q0E="}})),
                |_| true
            ),
            None
        );
        assert_eq!(
            restore_reason(
                &api,
                Some(&json!({"spec": {"service": {"namespace": "ops", "name": "op-service"}}})),
                |_| true
            )
            .as_deref(),
            Some("has no caBundle")
        );
        assert_eq!(
            restore_reason(&step("Service", "op-service", Some("ops"), json!({})), None, |_| true),
            None,
            "other kinds are not this check's"
        );
    }

    #[test]
    fn only_the_two_auth_bindings_are_shared() {
        let reader = json!({"roleRef": {"name": "extension-apiserver-authentication-reader"}});
        let delegator = json!({"roleRef": {"name": "system:auth-delegator"}});
        assert!(is_shared_binding(&step("RoleBinding", "op-service-auth-reader", Some("kube-system"), reader.clone())));
        assert!(is_shared_binding(&step(
            "ClusterRoleBinding",
            "op-service-system:auth-delegator",
            None,
            delegator.clone()
        )));
        // The same role in another namespace, another role, another name: the install's own.
        assert!(!is_shared_binding(&step("RoleBinding", "op-service-auth-reader", Some("ops"), reader)));
        assert!(!is_shared_binding(&step(
            "ClusterRoleBinding",
            "op-service-system:auth-delegator",
            None,
            json!({"roleRef": {"name": "cluster-admin"}})
        )));
        assert!(!is_shared_binding(&step("ClusterRoleBinding", "anything", None, delegator)));
    }

    #[test]
    fn a_second_namespace_adds_its_subject_and_removal_takes_only_its_own() {
        let a = json!({"kind": "ClusterRoleBinding", "metadata": {"name": "op-service-system:auth-delegator",
            "labels": {"olm.managed": "true", "operators.coreos.com/op.a": "", "olm.owner": "op.v1", "olm.owner.kind": "ClusterServiceVersion", "olm.owner.namespace": "a"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"}, "subjects": [sa("a")]});
        let planned_b = json!({"kind": "ClusterRoleBinding", "metadata": {"name": "op-service-system:auth-delegator",
            "labels": {"olm.managed": "true", "operators.coreos.com/op.b": "", "olm.owner": "op.v1", "olm.owner.kind": "ClusterServiceVersion", "olm.owner.namespace": "b"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"}, "subjects": [sa("b")]});
        // Re-applying a's own plan changes nothing and keeps the owner labels.
        let again = merge_shared_binding(&a, &a);
        assert_eq!(again["subjects"], json!([sa("a")]));
        assert_eq!(again["metadata"]["labels"]["olm.owner.namespace"], "a");
        // b joins: both subjects, both component labels, no owner labels (removing a by label
        // must not take b's binding).
        let merged = merge_shared_binding(&planned_b, &a);
        assert_eq!(merged["subjects"], json!([sa("a"), sa("b")]));
        let labels = merged["metadata"]["labels"].as_object().unwrap();
        assert!(
            labels.contains_key("operators.coreos.com/op.a") && labels.contains_key("operators.coreos.com/op.b"),
            "{labels:?}"
        );
        assert!(!labels.contains_key("olm.owner") && !labels.contains_key("olm.owner.namespace"), "{labels:?}");
        // a goes: b's subject and label stay.
        let left = without_subjects_of(&merged, "a").expect("a has a subject").expect("b is left");
        assert_eq!(left["subjects"], json!([sa("b")]));
        assert_eq!(left["metadata"]["name"], "op-service-system:auth-delegator");
        assert!(
            left["metadata"]["labels"].get("operators.coreos.com/op.a").is_none()
                && left["metadata"]["labels"].get("operators.coreos.com/op.b").is_some(),
            "{left}"
        );
        assert_eq!(left["roleRef"]["name"], "system:auth-delegator");
        // a again: nothing of it is there; b goes: delete.
        assert_eq!(without_subjects_of(&left, "a"), None);
        assert_eq!(without_subjects_of(&left, "b"), Some(None));
    }
}
