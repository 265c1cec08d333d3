//! Scoped installs (issue 7; OLM's OperatorGroup `spec.serviceAccountName`, `reference/olm-v0.md`
//! §1.6; case-25 of `olm-cases.yaml`): a plan of such a group is applied impersonating that
//! ServiceAccount, and before the first step every permission the plan needs is checked with
//! SubjectAccessReviews, so that all missing ones are reported at once and nothing is applied.
//!
//! What a plan needs of its installer:
//! - `get`, `create` and `patch` (server-side apply) on every object of the plan, in its
//!   namespace or cluster-wide;
//! - to create a Role or ClusterRole, either `escalate` on roles / clusterroles or every
//!   permission of its rules (the API server's RBAC escalation check); the bindings then need no
//!   more than their own create/patch, since the installer holds what they grant.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Client;
use kube::api::Api;
use serde_json::{Value, json};

use super::csv::{rule_attributes, sar_allowed};
use super::{Context, Error, kube_err};
use crate::api::OperatorGroup;
use crate::install::Step;
use crate::install::plan::kind_info;

/// The identity plans of namespace `ns` are applied with.
pub(crate) enum Installer {
    /// The controller's own identity (no `spec.serviceAccountName`).
    Controller,
    /// Impersonating ServiceAccount `ns/name`.
    ServiceAccount {
        /// `ns/name`, for messages.
        account: String,
        /// The ServiceAccount's name.
        name: String,
        /// A client impersonating it.
        client: Client,
    },
}

/// The installer of OperatorGroup `ns/og`. `Ok(Err(message))` when its ServiceAccount does not
/// exist or no impersonating client can be made (the message names it and says what to do).
pub(crate) async fn installer(ctx: &Context, ns: &str, og: &str) -> Result<Result<Installer, String>, Error> {
    let group = Api::<OperatorGroup>::namespaced(ctx.client.clone(), ns).get_opt(og).await.map_err(kube_err(format!("reading OperatorGroup {ns}/{og}")))?;
    let Some(sa) = group.and_then(|g| g.spec.service_account_name).filter(|s| !s.is_empty()) else {
        return Ok(Ok(Installer::Controller));
    };
    let account = format!("{ns}/{sa}");
    if Api::<ServiceAccount>::namespaced(ctx.client.clone(), ns).get_opt(&sa).await.map_err(kube_err(format!("reading ServiceAccount {account}")))?.is_none() {
        return Ok(Err(format!(
            "ServiceAccount {account} named by OperatorGroup {ns}/{og} spec.serviceAccountName does not exist; create it and grant it what the plan needs, or remove spec.serviceAccountName to install with capstan's own identity"
        )));
    }
    let Some(mut config) = ctx.config.clone() else {
        return Ok(Err(format!(
            "OperatorGroup {ns}/{og} asks for installs as ServiceAccount {account} (spec.serviceAccountName), but this controller was started without its client configuration, so it cannot impersonate (start it with controller::run_with_config)"
        )));
    };
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:{sa}"));
    config.auth_info.impersonate_groups = Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}"), "system:authenticated".into()]);
    match Client::try_from(config) {
        Ok(client) => Ok(Ok(Installer::ServiceAccount { account, name: sa, client })),
        Err(e) => Ok(Err(format!("cannot build a client impersonating ServiceAccount {account}: {e}"))),
    }
}

/// `(what, verb)` of SubjectAccessReview attributes: what is `resource.group[/sub] [name] in
/// namespace N` / `… cluster-wide`, or the non-resource path.
fn describe_attrs(a: &Value) -> (String, String) {
    let r = &a["resourceAttributes"];
    if r.is_object() {
        let group = r["group"].as_str().unwrap_or("");
        let mut resource = r["resource"].as_str().unwrap_or("").to_string();
        if let Some(s) = r["subresource"].as_str() {
            resource = format!("{resource}/{s}");
        }
        let resource = if group.is_empty() { resource } else { format!("{resource}.{group}") };
        let name = r["name"].as_str().map(|n| format!(" {n}")).unwrap_or_default();
        let scope = r["namespace"].as_str().map(|n| format!("in namespace {n}")).unwrap_or_else(|| "cluster-wide".into());
        (format!("{resource}{name} {scope}"), r["verb"].as_str().unwrap_or("").to_string())
    } else {
        let n = &a["nonResourceAttributes"];
        (n["path"].as_str().unwrap_or("").to_string(), n["verb"].as_str().unwrap_or("").to_string())
    }
}

/// `verbs on what` per distinct target, in first-seen order.
fn group_denied(denied: &[(String, String)]) -> String {
    let mut order: Vec<&str> = Vec::new();
    let mut verbs: std::collections::HashMap<&str, Vec<&str>> = std::collections::HashMap::new();
    for (what, verb) in denied {
        if !verbs.contains_key(what.as_str()) {
            order.push(what);
        }
        verbs.entry(what).or_default().push(verb);
    }
    order.iter().map(|w| format!("{} on {w}", verbs[w].join(", "))).collect::<Vec<_>>().join("; ")
}

/// Every permission ServiceAccount `ns/sa` lacks for `steps`, as sentences; empty when it has
/// them all. One SubjectAccessReview per distinct attribute set (admin client `client`).
pub(crate) async fn missing_permissions(client: &Client, ns: &str, sa: &str, steps: &[Step]) -> Result<Vec<String>, Error> {
    let mut cache: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
    let mut allowed = async |attrs: Value| -> Result<bool, Error> {
        let key = attrs.to_string();
        if let Some(v) = cache.get(&key) {
            return Ok(*v);
        }
        let v = sar_allowed(client, ns, sa, attrs).await?;
        cache.insert(key, v);
        Ok(v)
    };
    let mut missing = Vec::new();
    for step in steps {
        let Some(info) = kind_info(&step.kind) else { continue };
        let mut denied = Vec::new();
        for verb in ["get", "create", "patch"] {
            let mut a = json!({"group": step.group, "resource": info.plural, "verb": verb});
            if let Some(n) = &step.namespace {
                a["namespace"] = json!(n);
            }
            if !allowed(json!({"resourceAttributes": a})).await? {
                denied.push(verb);
            }
        }
        if !denied.is_empty() {
            let scope = step.namespace.as_ref().map(|n| format!("in namespace {n}")).unwrap_or_else(|| "cluster-wide".into());
            let resource = if step.group.is_empty() { info.plural.to_string() } else { format!("{}.{}", info.plural, step.group) };
            missing.push(format!("{} {resource} {scope} (for {})", denied.join(", "), step.describe()));
        }
        if step.kind == "Role" || step.kind == "ClusterRole" {
            let mut esc = json!({"group": "rbac.authorization.k8s.io", "resource": info.plural, "verb": "escalate"});
            if let Some(n) = &step.namespace {
                esc["namespace"] = json!(n);
            }
            if allowed(json!({"resourceAttributes": esc})).await? {
                continue;
            }
            let rules: Vec<PolicyRule> = serde_json::from_value(step.manifest["rules"].clone()).unwrap_or_default();
            for rule in &rules {
                let mut lacking = Vec::new();
                for attrs in rule_attributes(rule, step.namespace.as_deref()) {
                    if !allowed(attrs.clone()).await? {
                        lacking.push(describe_attrs(&attrs));
                    }
                }
                if !lacking.is_empty() {
                    missing.push(format!(
                        "{} (to grant this rule of {} it must hold it, or have escalate on {})",
                        group_denied(&lacking),
                        step.describe(),
                        info.plural
                    ));
                }
            }
        }
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_verbs_are_grouped_per_target() {
        let a = |g: &str, r: &str, v: &str, ns: Option<&str>| {
            let mut x = json!({"group": g, "resource": r, "verb": v});
            if let Some(n) = ns {
                x["namespace"] = json!(n);
            }
            describe_attrs(&json!({"resourceAttributes": x}))
        };
        let denied = vec![a("", "secrets", "get", None), a("apps", "deployments", "create", Some("ns")), a("", "secrets", "list", None)];
        assert_eq!(group_denied(&denied), "get, list on secrets cluster-wide; create on deployments.apps in namespace ns");
        let url = describe_attrs(&json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}));
        assert_eq!(group_denied(&[url]), "get on /metrics");
    }
}
