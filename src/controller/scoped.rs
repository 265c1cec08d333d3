//! Scoped installs (issue 7; OLM's OperatorGroup `spec.serviceAccountName`, `reference/olm-v0.md`
//! §1.6; case-25 of `olm-cases.yaml`): a plan of such a group is applied impersonating that
//! ServiceAccount, and before the first step every permission the plan needs is checked with
//! SubjectAccessReviews, so that all missing ones are reported at once and nothing is applied.
//!
//! What a plan needs of its installer:
//! - `get`, `create` and `patch` (server-side apply) on every object of the plan, in its
//!   namespace or cluster-wide;
//! - to create a Role or ClusterRole, either `escalate` on roles / clusterroles or every
//!   permission of its rules (the API server's RBAC escalation check);
//! - to create a RoleBinding or ClusterRoleBinding, either `bind` on the role it references or
//!   every permission of that role's rules — the role's rules as the plan creates it, or as it
//!   exists on the cluster (Kubernetes `pkg/registry/rbac/rolebinding/policybased`,
//!   `BindingAuthorized` then `ConfirmNoEscalation`). A binding to a role that neither the plan
//!   nor the cluster has needs `bind`. For a role the plan creates without `escalate`, the rules
//!   the installer must hold are listed once, with the role.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::{Client, ResourceExt};
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
        /// Reference to it, as OLM writes it in the InstallPlan's
        /// `status.attenuatedServiceAccountRef`.
        reference: k8s_openapi::api::core::v1::ObjectReference,
    },
}

/// Whether plans of an OperatorGroup can be applied, and by whom.
pub(crate) enum InstallerCheck {
    /// They can, by this identity.
    Ready(Installer),
    /// They cannot: the ServiceAccount does not exist or no impersonating client can be made
    /// (the message names it and says what to do).
    Blocked(String),
}

/// The installer of OperatorGroup `ns/og`.
pub(crate) async fn installer(ctx: &Context, ns: &str, og: &str) -> Result<InstallerCheck, Error> {
    let group = Api::<OperatorGroup>::namespaced(ctx.client.clone(), ns).get_opt(og).await.map_err(kube_err(format!("reading OperatorGroup {ns}/{og}")))?;
    let Some(sa) = group.and_then(|g| g.spec.service_account_name).filter(|s| !s.is_empty()) else {
        return Ok(InstallerCheck::Ready(Installer::Controller));
    };
    let account = format!("{ns}/{sa}");
    let Some(found) = Api::<ServiceAccount>::namespaced(ctx.client.clone(), ns).get_opt(&sa).await.map_err(kube_err(format!("reading ServiceAccount {account}")))? else {
        return Ok(InstallerCheck::Blocked(format!(
            "ServiceAccount {account} named by OperatorGroup {ns}/{og} spec.serviceAccountName does not exist; create it and grant it what the plan needs, or remove spec.serviceAccountName to install with capstan's own identity"
        )));
    };
    let reference = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ServiceAccount".into()),
        name: Some(sa.clone()),
        namespace: Some(ns.to_string()),
        resource_version: found.resource_version(),
        uid: found.uid(),
        ..Default::default()
    };
    let Some(mut config) = ctx.config.clone() else {
        return Ok(InstallerCheck::Blocked(format!(
            "OperatorGroup {ns}/{og} asks for installs as ServiceAccount {account} (spec.serviceAccountName), but this controller was started without its client configuration, so it cannot impersonate (start it with controller::run_with_config)"
        )));
    };
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:{sa}"));
    config.auth_info.impersonate_groups = Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}"), "system:authenticated".into()]);
    match Client::try_from(config) {
        Ok(client) => Ok(InstallerCheck::Ready(Installer::ServiceAccount { account, name: sa, client, reference })),
        Err(e) => Ok(InstallerCheck::Blocked(format!("cannot build a client impersonating ServiceAccount {account}: {e}"))),
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
    let mut sar = Reviews { client, ns, sa, cache: std::collections::HashMap::new() };
    let mut missing = Vec::new();
    for step in steps {
        let Some(info) = kind_info(&step.kind) else { continue };
        let mut denied = Vec::new();
        for verb in ["get", "create", "patch"] {
            let mut a = json!({"group": step.group, "resource": info.plural, "verb": verb});
            if let Some(n) = &step.namespace {
                a["namespace"] = json!(n);
            }
            if !sar.allowed(json!({"resourceAttributes": a})).await? {
                denied.push(verb);
            }
        }
        if !denied.is_empty() {
            let scope = step.namespace.as_ref().map(|n| format!("in namespace {n}")).unwrap_or_else(|| "cluster-wide".into());
            let resource = if step.group.is_empty() { info.plural.to_string() } else { format!("{}.{}", info.plural, step.group) };
            missing.push(format!("{} {resource} {scope} (for {})", denied.join(", "), step.describe()));
        }
        if step.kind == "RoleBinding" || step.kind == "ClusterRoleBinding" {
            if let Some(m) = binding_lacks(&mut sar, steps, step).await? {
                missing.push(m);
            }
            continue;
        }
        if step.kind == "Role" || step.kind == "ClusterRole" {
            let mut esc = json!({"group": "rbac.authorization.k8s.io", "resource": info.plural, "verb": "escalate"});
            if let Some(n) = &step.namespace {
                esc["namespace"] = json!(n);
            }
            if sar.allowed(json!({"resourceAttributes": esc})).await? {
                continue;
            }
            let rules: Vec<PolicyRule> = serde_json::from_value(step.manifest["rules"].clone()).unwrap_or_default();
            for rule in &rules {
                let mut lacking = Vec::new();
                for attrs in rule_attributes(rule, step.namespace.as_deref()) {
                    if !sar.allowed(attrs.clone()).await? {
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

/// SubjectAccessReviews for ServiceAccount `ns/sa` (asked with the controller's `client`), one per
/// distinct attribute set.
struct Reviews<'a> {
    client: &'a Client,
    ns: &'a str,
    sa: &'a str,
    cache: std::collections::HashMap<String, bool>,
}

impl Reviews<'_> {
    async fn allowed(&mut self, attrs: Value) -> Result<bool, Error> {
        let key = attrs.to_string();
        if let Some(v) = self.cache.get(&key) {
            return Ok(*v);
        }
        let v = sar_allowed(self.client, self.ns, self.sa, attrs).await?;
        self.cache.insert(key, v);
        Ok(v)
    }
}

/// What the installer lacks to create binding `step` (see the module documentation), as one
/// sentence; `None` when it may.
async fn binding_lacks(sar: &mut Reviews<'_>, steps: &[Step], step: &Step) -> Result<Option<String>, Error> {
    let role_kind = step.manifest.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or("");
    let role_name = step.manifest.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("");
    let plural = if role_kind == "ClusterRole" { "clusterroles" } else { "roles" };
    let mut bind = json!({"group": "rbac.authorization.k8s.io", "resource": plural, "verb": "bind", "name": role_name});
    if let Some(n) = &step.namespace {
        bind["namespace"] = json!(n);
    }
    if sar.allowed(json!({"resourceAttributes": bind})).await? {
        return Ok(None);
    }
    let role = format!("{role_kind} {role_name}");
    // A role the plan creates without `escalate` needs the installer to hold its rules, which the
    // check of that role already lists; holding them also allows the binding.
    let role_ns = if role_kind == "Role" { step.namespace.clone() } else { None };
    if steps.iter().any(|s| s.kind == role_kind && s.name == role_name && s.namespace == role_ns) {
        let mut esc = json!({"group": "rbac.authorization.k8s.io", "resource": plural, "verb": "escalate"});
        if let Some(n) = &role_ns {
            esc["namespace"] = json!(n);
        }
        if !sar.allowed(json!({"resourceAttributes": esc})).await? {
            return Ok(None);
        }
    }
    let rules = match binding_role_rules(sar.client, steps, step, role_kind, role_name).await? {
        Some(rules) => rules,
        None => {
            return Ok(Some(format!(
                "bind on {plural} {role_name} (for {}: {role} is neither in the plan nor on the cluster, so only bind allows the binding)",
                step.describe()
            )));
        }
    };
    let mut lacking = Vec::new();
    for rule in &rules {
        for attrs in rule_attributes(rule, step.namespace.as_deref()) {
            if !sar.allowed(attrs.clone()).await? {
                lacking.push(describe_attrs(&attrs));
            }
        }
    }
    Ok((!lacking.is_empty()).then(|| {
        format!(
            "{} (to create {}, which grants {role}, it must hold every permission of {role}, or have bind on {plural} {role_name})",
            group_denied(&lacking),
            step.describe()
        )
    }))
}

/// The rules of the role a binding step references: from the plan when it creates that role,
/// else from the cluster (read with the controller's client); `None` when neither has it.
async fn binding_role_rules(client: &Client, steps: &[Step], binding: &Step, kind: &str, name: &str) -> Result<Option<Vec<PolicyRule>>, Error> {
    let role_ns = if kind == "Role" { binding.namespace.clone() } else { None };
    if let Some(s) = steps.iter().find(|s| s.kind == kind && s.name == name && s.namespace == role_ns) {
        return Ok(Some(serde_json::from_value(s.manifest["rules"].clone()).unwrap_or_default()));
    }
    let rules = match (kind, &role_ns) {
        ("ClusterRole", _) => Api::<ClusterRole>::all(client.clone()).get_opt(name).await.map_err(kube_err(format!("reading ClusterRole {name}")))?.map(|r| r.rules.unwrap_or_default()),
        ("Role", Some(ns)) => Api::<Role>::namespaced(client.clone(), ns).get_opt(name).await.map_err(kube_err(format!("reading Role {ns}/{name}")))?.map(|r| r.rules.unwrap_or_default()),
        _ => None,
    };
    Ok(rules)
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
