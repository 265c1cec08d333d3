//! A CSV's webhook and owned APIService definitions (`spec.webhookdefinitions`,
//! `spec.apiservicedefinitions.owned`) read and checked as OLM v0 checks them, before anything
//! is planned: `bundle validate` reports what [`check`] finds, and `install::plan::steps` refuses
//! the plan with it (`PlanError::InvalidWebhookDescription`). What OLM creates for them is
//! `install::webhook`.
//!
//! Semantics: \[OLM\] `pkg/controller/install/webhook.go` (`ValidWebhookRules`),
//! `pkg/controller/operators/olm/operator.go` (repeated `generateName` is
//! `InvalidWebhookDescription`), `certresources.go` (`getServicePort`, `ServiceName`).

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::api::clusterserviceversion::{ApiServiceDescription, WebhookAdmissionType, WebhookDescription};

/// The port a webhook or APIService is served on when the CSV names none.
pub const DEFAULT_PORT: i32 = 443;

/// `<deployment>-service` (\[OLM\] `ServiceName`).
pub fn service_name(deployment: &str) -> String {
    format!("{deployment}-service")
}

/// A CSV's webhook and owned APIService definitions, read from its JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Definitions {
    /// `spec.webhookdefinitions`.
    pub webhooks: Vec<WebhookDescription>,
    /// `spec.apiservicedefinitions.owned`.
    pub apiservices: Vec<ApiServiceDescription>,
}

impl Definitions {
    /// Reads `spec.webhookdefinitions` and `spec.apiservicedefinitions.owned` of a CSV.
    ///
    /// # Errors
    /// `(field, message)` when a definition does not have OLM's shape.
    pub fn read(csv: &Value) -> Result<Definitions, (String, String)> {
        let mut out = Definitions::default();
        if let Some(v) = csv.pointer("/spec/webhookdefinitions").filter(|v| !v.is_null()) {
            let list =
                v.as_array().ok_or_else(|| ("spec.webhookdefinitions".to_string(), "must be a list".to_string()))?;
            for (i, w) in list.iter().enumerate() {
                let d: WebhookDescription = serde_json::from_value(w.clone()).map_err(|e| {
                    (format!("spec.webhookdefinitions[{i}]"), format!("{e}; a webhook definition needs generateName, type, sideEffects and admissionReviewVersions"))
                })?;
                out.webhooks.push(d);
            }
        }
        if let Some(v) = csv.pointer("/spec/apiservicedefinitions/owned").filter(|v| !v.is_null()) {
            let list = v
                .as_array()
                .ok_or_else(|| ("spec.apiservicedefinitions.owned".to_string(), "must be a list".to_string()))?;
            for (i, a) in list.iter().enumerate() {
                let d: ApiServiceDescription = serde_json::from_value(a.clone()).map_err(|e| {
                    (
                        format!("spec.apiservicedefinitions.owned[{i}]"),
                        format!("{e}; an APIService definition needs name, group, version and kind"),
                    )
                })?;
                out.apiservices.push(d);
            }
        }
        Ok(out)
    }

    /// Whether the CSV declares neither webhooks nor owned APIServices.
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_empty() && self.apiservices.is_empty()
    }

    /// The Service ports of the definitions served by `deployment`, distinct, in definition
    /// order (APIServices first, as OLM's `getCertResources`): `(name, port, targetPort)`.
    pub fn service_ports(&self, deployment: &str) -> Vec<(String, i32, IntOrString)> {
        let mut out: Vec<(String, i32, IntOrString)> = Vec::new();
        let mut push = |p: (String, i32, IntOrString)| {
            if !out.contains(&p) {
                out.push(p);
            }
        };
        for a in self.apiservices.iter().filter(|a| a.deployment_name.as_deref() == Some(deployment)) {
            let port = a.container_port.filter(|p| *p > 0).unwrap_or(DEFAULT_PORT);
            push((port.to_string(), port, IntOrString::Int(port)));
        }
        for w in self.webhooks.iter().filter(|w| w.deployment_name.as_deref() == Some(deployment)) {
            let port = w.container_port.filter(|p| *p > 0).unwrap_or(DEFAULT_PORT);
            push((port.to_string(), port, w.target_port.clone().unwrap_or(IntOrString::Int(port))));
        }
        out
    }

    /// The deployments that serve a definition, in first-use order (whether or not the install
    /// strategy has them).
    pub fn deployments(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let names =
            self.apiservices.iter().map(|a| &a.deployment_name).chain(self.webhooks.iter().map(|w| &w.deployment_name));
        for n in names.flatten() {
            if !out.contains(n) {
                out.push(n.clone());
            }
        }
        out
    }
}

/// Why a CSV's webhooks or APIServices cannot be planned: `(field, message)` naming the
/// definition and what to do. OLM fails such a CSV with reason `InvalidWebhookDescription`
/// (rules, repeated names) or at install (conversion CRDs).
///
/// A `deploymentName` that is not a deployment of the install strategy is not an error, as in
/// OLM: the webhook configuration or CRD conversion is still planned, pointing at
/// `<deploymentName>-service`, but no Service, certificate or `caBundle` is made for it (some
/// operators, e.g. authorino-operator, create that deployment and its certificate themselves).
pub fn check(
    defs: &Definitions,
    owned_crds: &[String],
    crds_in_bundle: &BTreeMap<String, Value>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    check_webhooks(defs, owned_crds, crds_in_bundle, &mut out);
    check_apiservices(defs, &mut out);
    check_service_ports(defs, &mut out);
    out
}

/// The webhook definitions: unique names, rules OLM accepts, a deployment, and conversion CRDs
/// that the CSV owns and the bundle ships with `preserveUnknownFields` off.
fn check_webhooks(
    defs: &Definitions,
    owned_crds: &[String],
    crds_in_bundle: &BTreeMap<String, Value>,
    out: &mut Vec<(String, String)>,
) {
    let mut seen: Vec<&str> = Vec::new();
    for (i, w) in defs.webhooks.iter().enumerate() {
        let field = format!("spec.webhookdefinitions[{i}]");
        if seen.contains(&w.generate_name.as_str()) {
            out.push((
                format!("{field}.generateName"),
                format!("{:?} is repeated; every webhook definition needs its own generateName", w.generate_name),
            ));
        }
        seen.push(&w.generate_name);
        if let Some(m) = invalid_rules(w.rules.as_deref().unwrap_or_default()) {
            out.push((format!("{field}.rules"), format!("{m}; narrow the rules to the operator's own API groups")));
        }
        match w.deployment_name.as_deref() {
            None | Some("") => out.push((
                format!("{field}.deploymentName"),
                "is empty; name the install strategy deployment that serves the webhook".into(),
            )),
            _ => {}
        }
        if w.type_ == WebhookAdmissionType::ConversionWebhook {
            let crds = w.conversion_crds.as_deref().unwrap_or_default();
            if crds.is_empty() {
                out.push((
                    format!("{field}.conversionCRDs"),
                    "is empty; a conversion webhook must list at least one CRD".into(),
                ));
            }
            for c in crds {
                if !owned_crds.contains(c) {
                    out.push((format!("{field}.conversionCRDs"), format!("{c:?} is not in spec.customresourcedefinitions.owned; a conversion webhook converts only CRDs the CSV owns")));
                } else if let Some(crd) = crds_in_bundle.get(c) {
                    if crd.pointer("/spec/preserveUnknownFields").and_then(Value::as_bool) == Some(true) {
                        out.push((format!("{field}.conversionCRDs"), format!("CRD {c} has spec.preserveUnknownFields: true; the API server calls a conversion webhook only when it is false")));
                    }
                } else {
                    out.push((
                        format!("{field}.conversionCRDs"),
                        format!(
                            "CRD {c} is not in the bundle; ship it in manifests/ so its spec.conversion can be set"
                        ),
                    ));
                }
            }
        }
    }
}

/// The owned APIService definitions name a deployment.
fn check_apiservices(defs: &Definitions, out: &mut Vec<(String, String)>) {
    for (i, a) in defs.apiservices.iter().enumerate() {
        let field = format!("spec.apiservicedefinitions.owned[{i}].deploymentName");
        match a.deployment_name.as_deref() {
            None | Some("") => {
                out.push((field, "is empty; name the install strategy deployment that serves the API".into()))
            }
            _ => {}
        }
    }
}

/// One Service per Deployment: a port may lead to one target only (the API server refuses a
/// Service with the port twice; OLM's install fails the same way, later).
fn check_service_ports(defs: &Definitions, out: &mut Vec<(String, String)>) {
    for d in defs.deployments() {
        let ports = defs.service_ports(&d);
        for (k, (_, port, target)) in ports.iter().enumerate() {
            if let Some((_, _, other)) = ports[..k].iter().find(|(_, p, _)| p == port) {
                let show = |t: &IntOrString| match t {
                    IntOrString::Int(n) => n.to_string(),
                    IntOrString::String(s) => s.clone(),
                };
                out.push((
                    format!("spec.webhookdefinitions / spec.apiservicedefinitions.owned (deploymentName {d:?})"),
                    format!(
                        "Service {} would have port {port} twice, to targetPort {} and {}; give the definitions served by Deployment {d} one containerPort per targetPort (an owned APIService's targetPort is its containerPort)",
                        service_name(&d),
                        show(other),
                        show(target)
                    ),
                ));
            }
        }
    }
}

/// Rules OLM refuses (\[OLM\] `ValidWebhookRules`): all groups, the OLM group, or webhook
/// configurations themselves.
pub fn invalid_rules(rules: &[RuleWithOperations]) -> Option<String> {
    for r in rules {
        let groups = r.api_groups.as_deref().unwrap_or_default();
        if groups.iter().any(|g| g == "*") {
            return Some("webhook rules cannot include all groups".into());
        }
        if groups.iter().any(|g| g == "operators.coreos.com") {
            return Some("webhook rules cannot include the OLM group".into());
        }
        if groups.iter().any(|g| g == "admissionregistration.k8s.io") {
            let res = r.resources.as_deref().unwrap_or_default();
            if res
                .iter()
                .any(|x| x == "*" || x == "MutatingWebhookConfiguration" || x == "ValidatingWebhookConfiguration")
            {
                return Some("webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources".into());
            }
        }
    }
    None
}

/// [`Definitions::read`] and [`check`] of a loaded bundle (its CSV, its owned CRD names and the
/// CRDs it ships): every problem as `(field, message)`, empty when OLM would plan them.
pub fn problems(bundle: &super::Bundle) -> Vec<(String, String)> {
    let csv = bundle.csv();
    match Definitions::read(csv.value()) {
        Err(problem) => vec![problem],
        Ok(defs) if defs.is_empty() => Vec::new(),
        Ok(defs) => {
            let owned: Vec<String> = csv.owned_crds().into_iter().map(|c| c.name).collect();
            let crds: BTreeMap<String, Value> =
                bundle.crds().map(|m| (m.name().to_string(), m.value.clone())).collect();
            check(&defs, &owned, &crds)
        }
    }
}
