//! Rotating the serving certificates of an installed CSV, as OLM's CSV controller does at
//! `status.certsRotateAt` (\[OLM\] `pkg/controller/operators/olm/operator.go`
//! `shouldRotateCerts`, `pkg/controller/install/certresources.go`): which serving Secrets are due
//! is decided without I/O ([`decide`], over [`super::certs::rotation_reason`]); [`rotate_due`] is
//! the thin I/O shell that reads the Secrets, and for those due re-applies the Secret and what
//! carries its CA through [`super::apply::apply`] (the same code as an install, so the
//! certificates are issued by [`super::webhook::fill_certificates`]).

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ListParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::apply::{ApplyOptions, StepError, StepStatus, apply};
use super::certs::{self, ANNOTATION_CA_HASH};
use super::webhook::{Definitions, secret_name, service_name};
use super::{LABEL_MANAGED, LABEL_OWNER, LABEL_OWNER_NAMESPACE, Step};
use crate::api::clusterserviceversion::WebhookAdmissionType;

/// What [`rotate_due`] gives a serving Secret it has to make again because it is missing: the
/// CSV's component labels and an ownerReference to the CSV (as the plan's Secret has).
#[derive(Debug, Clone, Default)]
pub struct MissingSecret<'a> {
    /// Labels, e.g. `operators.coreos.com/<package>.<namespace>`.
    pub labels: BTreeMap<String, String>,
    /// The CSV as owner, with its uid.
    pub owner: Option<&'a OwnerReference>,
}

/// The certificate times of a CSV's serving Secrets after [`rotate_due`]: for its
/// `status.certsLastUpdated` (the latest `notBefore`) and `status.certsRotateAt` (the earliest
/// [`certs::rotate_at`]), and the Secrets whose certificates were replaced now (`ns/name`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CertTimes {
    /// The latest `notBefore` of the serving certificates.
    pub last_updated: Option<time::OffsetDateTime>,
    /// The earliest rotation time of the serving certificates.
    pub rotate_at: Option<time::OffsetDateTime>,
    /// Secrets whose certificates were issued again by this call, with the reason.
    pub rotated: Vec<(String, String)>,
}

/// A serving Secret whose certificates are due ([`decide`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Due {
    /// The Deployment that mounts the Secret.
    pub deployment: String,
    /// The Secret as read, or as it is made again when it is missing.
    pub secret: Secret,
    /// Why it is due ([`certs::rotation_reason`], or that it is missing).
    pub reason: String,
}

/// What [`decide`] finds: the Secrets due and the certificate times of the others.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// The serving Secrets to issue again, in the order of `found`.
    pub due: Vec<Due>,
    /// The times of the Secrets that are not due (`rotated` empty).
    pub times: CertTimes,
}

/// Why [`rotate_due`] stopped: the object that could not be read or applied, and why.
#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    /// Reading an object failed.
    #[error("{object}: get failed: {source}")]
    Get {
        /// The object, `Kind namespace/name` or `Kind name`.
        object: String,
        /// The API error.
        source: kube::Error,
    },
    /// Listing the objects of a kind labelled for the CSV failed.
    #[error("list {kind}: {source}")]
    List {
        /// The kind listed, e.g. `ValidatingWebhookConfiguration`.
        kind: &'static str,
        /// The API error.
        source: kube::Error,
    },
    /// An object read could not be turned into JSON.
    #[error("{kind}: {source}")]
    Json {
        /// The object's kind.
        kind: &'static str,
        /// The serialization error.
        source: serde_json::Error,
    },
    /// Applying the Secret or what carries its CA failed.
    #[error("rotating the serving certificates of CSV {csv}: {source}")]
    Apply {
        /// `namespace/name` of the CSV.
        csv: String,
        /// The failed step's error.
        source: Box<StepError>,
    },
}

/// Which serving Secrets of a CSV in `namespace` are due at `now`, from `found`: each Deployment
/// that serves a webhook or APIService with its serving Secret as read (`None`: missing). A
/// missing Secret is due (made again as a planned serving Secret, with `missing`'s labels and
/// owner); one whose certificates [`certs::rotation_reason`] finds wrong is due with that reason;
/// the others give their times. Pure.
pub fn decide(
    namespace: &str,
    found: Vec<(String, Option<Secret>)>,
    missing: &MissingSecret<'_>,
    now: time::OffsetDateTime,
) -> Decision {
    let mut decision = Decision::default();
    for (deployment, secret) in found {
        let svc = service_name(&deployment);
        let Some(secret) = secret else {
            // Deleted by hand (or never applied): made again, as a planned serving Secret.
            let name = secret_name(&svc);
            let reason = format!("Secret {namespace}/{name} is missing");
            let secret = missing_secret(namespace, &name, missing);
            decision.due.push(Due { deployment, secret, reason });
            continue;
        };
        let data = secret_data(&secret);
        match certs::rotation_reason(&data, &certs::hostnames_for_service(&svc, namespace), now) {
            Some(reason) => decision.due.push(Due { deployment, secret, reason }),
            None => note_times(&mut decision.times, &data),
        }
    }
    decision
}

/// The serving Secret `name` made again: no data, the `olmcahash` annotation, `olm.managed` and
/// `missing`'s labels and owner.
fn missing_secret(namespace: &str, name: &str, missing: &MissingSecret<'_>) -> Secret {
    let mut labels = missing.labels.clone();
    labels.insert(LABEL_MANAGED.into(), "true".into());
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            annotations: Some([(ANNOTATION_CA_HASH.to_string(), String::new())].into()),
            owner_references: missing.owner.cloned().map(|o| vec![o]),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        ..Default::default()
    }
}

fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret.data.clone().unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect()
}

/// Adds one Secret's certificate times to `times`.
fn note_times(times: &mut CertTimes, data: &BTreeMap<String, Vec<u8>>) {
    if let Some((nb, na)) = certs::validity(data) {
        let at = certs::rotate_at(nb, na);
        times.last_updated = Some(times.last_updated.map_or(nb, |t| t.max(nb)));
        times.rotate_at = Some(times.rotate_at.map_or(at, |t| t.min(at)));
    }
}

/// An object read from the cluster as an apply configuration: without `status` and the fields
/// the API server owns (uid, resourceVersion, generation, creationTimestamp, managedFields).
fn as_applied(mut value: Value) -> Value {
    if let Some(o) = value.as_object_mut() {
        o.remove("status");
    }
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"] {
            meta.remove(k);
        }
    }
    value
}

/// `value` (an object read, with `kind` and `metadata`) as a step of CSV `csv` applying it again
/// ([`as_applied`]).
fn step_of(csv: &str, value: Value, group: &str, version: &str) -> Step {
    let meta = &value["metadata"];
    Step {
        resolving: csv.to_string(),
        group: group.into(),
        version: version.into(),
        kind: value["kind"].as_str().unwrap_or_default().into(),
        name: meta["name"].as_str().unwrap_or_default().into(),
        namespace: meta["namespace"].as_str().map(String::from),
        manifest: as_applied(value),
    }
}

/// The step applying a due Secret as planned (no data, the annotation present), so that
/// [`super::webhook::fill_certificates`] issues anew.
fn planned_secret(csv: &str, secret: &Secret) -> Result<Step, RotationError> {
    let mut planned = step_of(csv, to_value("Secret", secret)?, "", "v1");
    if let Some(o) = planned.manifest.as_object_mut() {
        o.remove("data");
    }
    planned.manifest["metadata"]["annotations"][ANNOTATION_CA_HASH] = json!("");
    Ok(planned)
}

fn to_value(kind: &'static str, object: &impl Serialize) -> Result<Value, RotationError> {
    serde_json::to_value(object).map_err(|source| RotationError::Json { kind, source })
}

/// Rotates the serving certificates of an installed CSV (`csv` in `namespace`) that are due
/// ([`decide`]: past [`certs::rotate_at`], missing, malformed, or not for the Service), as OLM's
/// CSV controller does at `certsRotateAt`: the Secret, the `caBundle` of the webhook
/// configurations, conversion CRDs and APIServices that point at its Service and the
/// `olmcahash` of the Deployment are re-applied from what is on the cluster, through
/// [`super::apply::apply`] and [`super::webhook::fill_certificates`] (the same code as an
/// install), so the pods restart with the new certificate. Returns the certificate times
/// afterwards.
///
/// # Errors
/// The object that could not be read or applied, and why.
pub async fn rotate_due(
    client: &kube::Client,
    csv: &str,
    namespace: &str,
    defs: &Definitions,
    missing: &MissingSecret<'_>,
    opts: &ApplyOptions,
    now: time::OffsetDateTime,
) -> Result<CertTimes, RotationError> {
    let shell = Shell::new(client, csv, namespace);
    let mut found = Vec::new();
    for d in defs.deployments() {
        let name = secret_name(&service_name(&d));
        found.push((d, shell.secret(&name).await?));
    }
    let Decision { due, mut times } = decide(namespace, found, missing, now);
    if due.is_empty() {
        return Ok(times);
    }
    let mut steps = shell.due_steps(&due).await?;
    steps.extend(shell.callers(defs).await?);
    for r in apply(client, &steps, opts).await {
        if let StepStatus::Failed(source) = r.status {
            return Err(RotationError::Apply { csv: format!("{namespace}/{csv}"), source: Box::new(source) });
        }
    }
    for Due { secret, reason, .. } in due {
        let name = secret.metadata.name.clone().unwrap_or_default();
        if let Some(fresh) = shell.secret(&name).await? {
            note_times(&mut times, &secret_data(&fresh));
        }
        times.rotated.push((format!("{namespace}/{name}"), reason));
    }
    Ok(times)
}

/// The reads of [`rotate_due`] for one CSV.
struct Shell<'a> {
    client: &'a kube::Client,
    csv: &'a str,
    namespace: &'a str,
    /// The objects labelled for the CSV (`olm.owner`, `olm.owner.namespace`).
    selector: ListParams,
}

impl<'a> Shell<'a> {
    fn new(client: &'a kube::Client, csv: &'a str, namespace: &'a str) -> Self {
        let selector =
            ListParams::default().labels(&format!("{LABEL_OWNER}={csv},{LABEL_OWNER_NAMESPACE}={namespace}"));
        Shell { client, csv, namespace, selector }
    }

    /// The Secret `name` of the CSV's namespace, `None` when it does not exist.
    async fn secret(&self, name: &str) -> Result<Option<Secret>, RotationError> {
        Api::<Secret>::namespaced(self.client.clone(), self.namespace)
            .get_opt(name)
            .await
            .map_err(|source| RotationError::Get { object: format!("Secret {}/{name}", self.namespace), source })
    }

    /// The steps for the due Secrets: each Secret as planned and the Deployment mounting it.
    async fn due_steps(&self, due: &[Due]) -> Result<Vec<Step>, RotationError> {
        let deployments = Api::<Deployment>::namespaced(self.client.clone(), self.namespace);
        let mut steps = Vec::new();
        for Due { deployment, secret, .. } in due {
            steps.push(planned_secret(self.csv, secret)?);
            let found = deployments.get_opt(deployment).await.map_err(|source| RotationError::Get {
                object: format!("Deployment {}/{deployment}", self.namespace),
                source,
            })?;
            if let Some(dep) = found {
                steps.push(step_of(self.csv, to_value("Deployment", &dep)?, "apps", "v1"));
            }
        }
        Ok(steps)
    }

    /// The steps for what carries the CA: the CSV's webhook configurations, the CRDs of its
    /// conversion webhooks and its APIServices, as they are on the cluster.
    async fn callers(&self, defs: &Definitions) -> Result<Vec<Step>, RotationError> {
        let admission = "admissionregistration.k8s.io";
        let validating = Api::<ValidatingWebhookConfiguration>::all(self.client.clone());
        let mut steps = self.labelled(&validating, "ValidatingWebhookConfiguration", admission).await?;
        let mutating = Api::<MutatingWebhookConfiguration>::all(self.client.clone());
        steps.extend(self.labelled(&mutating, "MutatingWebhookConfiguration", admission).await?);
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for c in defs
            .webhooks
            .iter()
            .filter(|w| w.type_ == WebhookAdmissionType::ConversionWebhook)
            .flat_map(|w| w.conversion_crds.iter().flatten())
        {
            let found = crds
                .get_opt(c)
                .await
                .map_err(|source| RotationError::Get { object: format!("CustomResourceDefinition {c}"), source })?;
            if let Some(crd) = found {
                let value = to_value("CustomResourceDefinition", &crd)?;
                steps.push(step_of(self.csv, value, "apiextensions.k8s.io", "v1"));
            }
        }
        if !defs.apiservices.is_empty() {
            let ar = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
                "apiservices",
            );
            let apiservices = Api::<DynamicObject>::all_with(self.client.clone(), &ar);
            steps.extend(self.labelled(&apiservices, "APIService", "apiregistration.k8s.io").await?);
        }
        Ok(steps)
    }

    /// The objects of `kind` (version `v1` of `group`) labelled for the CSV, as steps.
    async fn labelled<K>(&self, api: &Api<K>, kind: &'static str, group: &str) -> Result<Vec<Step>, RotationError>
    where
        K: kube::Resource + Clone + Serialize + DeserializeOwned + Debug,
    {
        let list = api.list(&self.selector).await.map_err(|source| RotationError::List { kind, source })?;
        let mut steps = Vec::with_capacity(list.items.len());
        for o in &list.items {
            let mut value = to_value(kind, o)?;
            // A list's items may come without their kind.
            value["kind"] = json!(kind);
            steps.push(step_of(self.csv, value, group, "v1"));
        }
        Ok(steps)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn secret(name: &str, data: Option<BTreeMap<String, Vec<u8>>>) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ops".into()),
                uid: Some("u-1".into()),
                resource_version: Some("7".into()),
                ..Default::default()
            },
            data: data.map(|d| d.into_iter().map(|(k, v)| (k, k8s_openapi::ByteString(v))).collect()),
            type_: Some("kubernetes.io/tls".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_missing_secret_an_old_one_and_a_fresh_one() {
        let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let valid_for = Duration::from_secs(30 * 24 * 3600);
        let fresh = certs::issue(&certs::hostnames_for_service("a-service", "ops"), now, valid_for).unwrap();
        let old_at = now - time::Duration::days(40);
        let old = certs::issue(&certs::hostnames_for_service("b-service", "ops"), old_at, valid_for).unwrap();
        let owner = OwnerReference { name: "op.v1".into(), uid: "csv-uid".into(), ..Default::default() };
        let missing = MissingSecret { labels: [("l".to_string(), "".to_string())].into(), owner: Some(&owner) };
        let found = vec![
            ("a".to_string(), Some(secret("a-service-cert", Some(fresh.secret_data())))),
            ("b".to_string(), Some(secret("b-service-cert", Some(old.secret_data())))),
            ("c".to_string(), None),
        ];
        let decision = decide("ops", found, &missing, now);
        let due: Vec<(&str, &str)> = decision.due.iter().map(|d| (d.deployment.as_str(), d.reason.as_str())).collect();
        assert_eq!(due.len(), 2, "{due:?}");
        assert_eq!(due[0].0, "b");
        assert_eq!(due[1], ("c", "Secret ops/c-service-cert is missing"));
        let made = &decision.due[1].secret;
        assert_eq!(made.metadata.name.as_deref(), Some("c-service-cert"));
        assert_eq!(made.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(made.metadata.labels.as_ref().unwrap()[LABEL_MANAGED], "true");
        assert_eq!(made.metadata.labels.as_ref().unwrap()["l"], "");
        assert_eq!(made.metadata.owner_references.as_ref().unwrap()[0].uid, "csv-uid");
        assert_eq!(decision.times.rotate_at, Some(fresh.rotate_at));
        assert!(decision.times.last_updated.is_some());
        assert!(decision.times.rotated.is_empty());
    }

    #[test]
    fn a_due_secret_is_applied_again_as_planned() {
        let data = BTreeMap::from([("tls.crt".to_string(), b"x".to_vec())]);
        let step = planned_secret("op.v1", &secret("a-service-cert", Some(data))).unwrap();
        assert_eq!(
            (step.kind.as_str(), step.name.as_str(), step.namespace.as_deref()),
            ("Secret", "a-service-cert", Some("ops"))
        );
        assert_eq!(step.resolving, "op.v1");
        assert!(step.manifest.get("data").is_none(), "{}", step.manifest);
        assert_eq!(step.manifest["metadata"]["annotations"][ANNOTATION_CA_HASH], "");
        assert!(
            step.manifest["metadata"].get("uid").is_none()
                && step.manifest["metadata"].get("resourceVersion").is_none()
        );
        assert!(super::super::webhook::is_planned_serving_secret(&step));
    }
}
