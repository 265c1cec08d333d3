//! ClusterServiceVersion reconciler (minimal; `reference/olm-v0.md` §1.5 "Transition rules"):
//! OperatorGroup membership and install mode first (Failed with `NoOperatorGroup`,
//! `TooManyOperatorGroups`, `UnsupportedOperatorGroup`), then None → Pending
//! (`RequirementsUnknown`) → InstallReady (`AllRequirementsMet`) → Installing (`InstallWaiting`)
//! → Succeeded (`InstallSucceeded`) once every Deployment of the install strategy is Available;
//! a Succeeded CSV whose Deployment is no longer Available goes back to Failed
//! (`ComponentUnhealthy`). A Succeeded CSV deletes the CSV named in its `spec.replaces`.
//! Requirement checks (`status.requirementStatus`) are not done yet.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{Context, Error, apply_status, kube_err, now};
use crate::api::{ClusterServiceVersion, OperatorGroup};

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
pub fn check_install_mode(namespace: &str, targets: &[String], modes: &[(String, bool)]) -> Result<(), InstallModeError> {
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

/// The OperatorGroup of `namespace` and its target namespaces (`[""]` for all namespaces).
/// Errors: `(reason, message)` with OLM's reasons `NoOperatorGroup` / `TooManyOperatorGroups`.
pub(crate) async fn operator_group_targets(client: &Client, namespace: &str) -> Result<Result<(String, Vec<String>), (&'static str, String)>, Error> {
    let ogs = Api::<OperatorGroup>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing OperatorGroups in {namespace}")))?;
    let og = match ogs.items.as_slice() {
        [] => return Ok(Err(("NoOperatorGroup", format!("csv in namespace {namespace} with no operatorgroups; create one OperatorGroup in {namespace}")))),
        [og] => og,
        many => {
            let names: Vec<String> = many.iter().map(|o| o.name_any()).collect();
            return Ok(Err(("TooManyOperatorGroups", format!("csv created in namespace {namespace} with multiple operatorgroups ({}); keep exactly one", names.join(", ")))));
        }
    };
    let targets = match (&og.spec.target_namespaces, &og.spec.selector) {
        (Some(t), _) if !t.is_empty() => t.clone(),
        (_, Some(sel)) if sel.match_labels.as_ref().is_some_and(|m| !m.is_empty()) || sel.match_expressions.as_ref().is_some_and(|m| !m.is_empty()) => {
            if sel.match_expressions.as_ref().is_some_and(|m| !m.is_empty()) {
                return Ok(Err(("UnsupportedOperatorGroup", format!("OperatorGroup {namespace}/{}: spec.selector.matchExpressions is not supported by capstan yet; use matchLabels or spec.targetNamespaces", og.name_any()))));
            }
            let labels: Vec<String> = sel.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
            let nss = Api::<Namespace>::all(client.clone())
                .list(&ListParams::default().labels(&labels.join(",")))
                .await
                .map_err(kube_err("listing namespaces for an OperatorGroup selector"))?;
            nss.items.iter().map(|n| n.name_any()).collect()
        }
        _ => vec![String::new()],
    };
    Ok(Ok((og.name_any(), targets)))
}

fn phase_status(status: &mut Value, phase: &str, reason: &str, message: &str) {
    if status["phase"] != phase {
        status["lastTransitionTime"] = json!(now());
        if !status["conditions"].is_array() {
            status["conditions"] = json!([]);
        }
        if let Some(list) = status["conditions"].as_array_mut() {
            list.push(json!({"phase": phase, "reason": reason, "message": message, "lastUpdateTime": now(), "lastTransitionTime": now()}));
            let extra = list.len().saturating_sub(20);
            list.drain(..extra);
        }
    }
    status["phase"] = json!(phase);
    status["reason"] = json!(reason);
    status["message"] = json!(message);
    status["lastUpdateTime"] = json!(now());
}

pub(super) async fn reconcile(csv: Arc<ClusterServiceVersion>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Finalizer and removal of a deleted CSV (issue 6, `removal.rs`).
    if let Some(action) = super::removal::reconcile_csv(&csv, &ctx).await? {
        return Ok(action);
    }
    let ns = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &ns);
    let mut status = serde_json::to_value(&csv.status).unwrap_or(Value::Null);
    if !status.is_object() {
        status = json!({});
    }
    let phase = status["phase"].as_str().unwrap_or("").to_string();
    let set = |status: &mut Value, p: &str, r: &str, m: &str| phase_status(status, p, r, m);

    // OperatorGroup membership and install mode come before any phase logic (§1.5).
    let fit = match operator_group_targets(&ctx.client, &ns).await? {
        Err((reason, message)) => Err((reason, message)),
        Ok((_, targets)) => {
            let modes: Vec<(String, bool)> = csv
                .spec
                .install_modes
                .iter()
                .flatten()
                .map(|m| (serde_json::to_value(&m.type_).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(), m.supported))
                .collect();
            check_install_mode(&ns, &targets, &modes).map_err(|e| (e.reason, format!("CSV {ns}/{name}: {}", e.message)))
        }
    };
    if let Err((reason, message)) = fit {
        if phase != "Failed" || status["reason"] != reason {
            set(&mut status, "Failed", reason, &message);
            apply_status(&api, &csv, status).await?;
        }
        return Ok(Action::requeue(Duration::from_secs(30)));
    }

    let next = match phase.as_str() {
        "" | "Failed" if status["reason"] != "ComponentUnhealthy" || phase.is_empty() => Some(("Pending", "RequirementsUnknown", "requirements not yet checked")),
        "Pending" => Some(("InstallReady", "AllRequirementsMet", "all requirements found, attempting install")),
        _ => None,
    };
    if let Some((p, r, m)) = next {
        set(&mut status, p, r, m);
        apply_status(&api, &csv, status).await?;
        return Ok(Action::requeue(Duration::from_millis(200)));
    }

    // InstallReady / Installing / Succeeded / Failed(ComponentUnhealthy): look at the Deployments.
    let deployments: Vec<String> = csv.spec.install.spec.iter().flat_map(|s| s.deployments.iter().map(|d| d.name.clone())).collect();
    let dapi: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let mut waiting = Vec::new();
    for d in &deployments {
        let available = dapi
            .get_opt(d)
            .await
            .map_err(kube_err(format!("reading Deployment {ns}/{d}")))?
            .and_then(|d| d.status)
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
        if !available {
            waiting.push(d.clone());
        }
    }
    let (p, r, m) = if waiting.is_empty() {
        ("Succeeded", "InstallSucceeded", "install strategy completed with no errors".to_string())
    } else if phase == "Succeeded" || (phase == "Failed" && status["reason"] == "ComponentUnhealthy") {
        ("Failed", "ComponentUnhealthy", format!("installing: Deployment {} is not available", waiting.join(", ")))
    } else {
        ("Installing", "InstallWaiting", format!("installing: waiting for deployment {} to become ready", waiting.join(", ")))
    };
    if phase != p || status["message"] != m {
        set(&mut status, p, r, &m);
        apply_status(&api, &csv, status).await?;
    }
    // Once the new CSV succeeded, the one it replaces is deleted (OLM: Replacing → Deleting, §1.5);
    // objects only it owns are garbage-collected with it.
    if p == "Succeeded"
        && let Some(old) = csv.spec.replaces.as_deref().filter(|r| !r.is_empty() && *r != name)
        && api.get_opt(old).await.map_err(kube_err(format!("reading ClusterServiceVersion {ns}/{old}")))?.is_some()
    {
        tracing::info!(csv = %format!("{ns}/{name}"), replaced = %old, "deleting the replaced CSV");
        match api.delete(old, &kube::api::DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(kube_err(format!("deleting replaced ClusterServiceVersion {ns}/{old}"))(e)),
        }
    }
    Ok(Action::requeue(Duration::from_secs(if p == "Succeeded" { 30 } else { 1 })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes(list: &[&str]) -> Vec<(String, bool)> {
        ["OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"].iter().map(|m| (m.to_string(), list.contains(m))).collect()
    }

    #[test]
    fn install_mode_rules_of_olm() {
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_install_mode("a", &t(&[""]), &modes(&["AllNamespaces"])).is_ok());
        assert_eq!(check_install_mode("a", &t(&[""]), &modes(&["OwnNamespace"])).unwrap_err().reason, "UnsupportedOperatorGroup");
        assert!(check_install_mode("a", &t(&["a"]), &modes(&["OwnNamespace"])).is_ok());
        assert!(check_install_mode("a", &t(&["a"]), &modes(&["SingleNamespace"])).is_err());
        assert!(check_install_mode("a", &t(&["b"]), &modes(&["SingleNamespace"])).is_ok());
        assert!(check_install_mode("a", &t(&["a", "b"]), &modes(&["MultiNamespace"])).is_err());
        assert!(check_install_mode("a", &t(&["a", "b"]), &modes(&["MultiNamespace", "OwnNamespace"])).is_ok());
        assert!(check_install_mode("a", &t(&["b", "c"]), &modes(&["MultiNamespace"])).is_ok());
        assert_eq!(check_install_mode("a", &t(&["", "b"]), &modes(&["MultiNamespace"])).unwrap_err().reason, "InvalidInstallModes");
        assert_eq!(check_install_mode("a", &[], &modes(&["AllNamespaces"])).unwrap_err().reason, "NoTargetNamespaces");
        let e = check_install_mode("a", &t(&["a"]), &modes(&["AllNamespaces"])).unwrap_err();
        assert!(e.message.contains("needs install mode OwnNamespace") && e.message.contains("supports: AllNamespaces"), "{e}");
    }
}
