//! RBAC pre-check: can this client apply these steps? Asked before anything is applied, so that
//! an installer account that lacks permissions gets **every** missing permission in one answer
//! instead of a plan that stops half-way at the first `Forbidden` (`cases/olm-cases.yaml`
//! case-25; operator-controller's "permission validation pre-flight check").
//!
//! Checks, each with a SelfSubjectAccessReview as the client:
//! - for every step: `get`, `create` and `patch` on its resource in its namespace (what
//!   [`super::apply::apply`]'s read + server-side apply need);
//! - for every Role and ClusterRole step: every rule the role grants (each verb × group ×
//!   resource[/subresource] × resourceName, and non-resource URLs), in the role's namespace or
//!   cluster-wide — Kubernetes refuses to create a role granting permissions its creator lacks
//!   (RBAC escalation prevention) unless the creator has `escalate` on roles/clusterroles;
//! - for every RoleBinding and ClusterRoleBinding step: `bind` on the referenced role unless the
//!   role's rules were all held (the API server's bind check).

use std::collections::BTreeMap;
use std::fmt;

use futures::stream::{self, StreamExt};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::Step;
use super::apply::whoami;
use super::plan::kind_info;

/// One permission the client lacks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MissingPermission {
    /// The verb, e.g. `create`, or `*`.
    pub verb: String,
    /// What on: `resource[/subresource][.group]`, `resource.group "name"`, or a non-resource URL.
    pub resource: String,
    /// The namespace, `None` for cluster-wide.
    pub namespace: Option<String>,
}

impl fmt::Display for MissingPermission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {} in namespace {ns}", self.verb, self.resource),
            None => write!(f, "{} {} cluster-wide", self.verb, self.resource),
        }
    }
}

/// The pre-check's failure.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// The client lacks permissions; every missing one is listed with the steps that need it.
    #[error("{identity} lacks {} permission(s) needed to apply the plan: {}; grant them (for example to the OperatorGroup's ServiceAccount) and retry — nothing was applied", missing.len(), missing.iter().map(|(p, steps)| format!("{p} (for {})", steps.join(", "))).collect::<Vec<_>>().join("; "))]
    Missing {
        /// Who the client is (from a SelfSubjectReview), or "the client".
        identity: String,
        /// Each missing permission and the steps (`Kind namespace/name`) that need it, sorted.
        missing: Vec<(MissingPermission, Vec<String>)>,
    },
    /// A SelfSubjectAccessReview could not be made.
    #[error("cannot check permissions: SelfSubjectAccessReview failed: {0}")]
    Review(String),
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Query {
    Resource { verb: String, group: String, resource: String, subresource: String, name: String, namespace: Option<String> },
    NonResource { verb: String, path: String },
}

impl Query {
    fn missing(&self) -> MissingPermission {
        match self {
            Query::Resource { verb, group, resource, subresource, name, namespace } => {
                let mut r = resource.clone();
                if !subresource.is_empty() {
                    r = format!("{r}/{subresource}");
                }
                if !group.is_empty() {
                    r = format!("{r}.{group}");
                }
                if !name.is_empty() {
                    r = format!("{r} {name:?}");
                }
                MissingPermission { verb: verb.clone(), resource: r, namespace: namespace.clone() }
            }
            Query::NonResource { verb, path } => {
                MissingPermission { verb: verb.clone(), resource: format!("non-resource URL {path}"), namespace: None }
            }
        }
    }

    fn review(&self) -> SelfSubjectAccessReview {
        let spec = match self {
            Query::Resource { verb, group, resource, subresource, name, namespace } => SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.clone()),
                    group: Some(group.clone()),
                    resource: Some(resource.clone()),
                    subresource: (!subresource.is_empty()).then(|| subresource.clone()),
                    name: (!name.is_empty()).then(|| name.clone()),
                    namespace: namespace.clone(),
                    ..Default::default()
                }),
                non_resource_attributes: None,
            },
            Query::NonResource { verb, path } => SelfSubjectAccessReviewSpec {
                resource_attributes: None,
                non_resource_attributes: Some(NonResourceAttributes { verb: Some(verb.clone()), path: Some(path.clone()) }),
            },
        };
        SelfSubjectAccessReview { metadata: Default::default(), spec, status: None }
    }
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key).and_then(Value::as_array).map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// The permissions a role's rules grant, as queries in `namespace` (`None`: cluster-wide).
fn rule_queries(rules: &Value, namespace: &Option<String>) -> Vec<Query> {
    let mut out = Vec::new();
    for rule in rules.as_array().into_iter().flatten() {
        let verbs = strings(rule, "verbs");
        for path in strings(rule, "nonResourceURLs") {
            for verb in &verbs {
                out.push(Query::NonResource { verb: verb.clone(), path: path.clone() });
            }
        }
        let names = strings(rule, "resourceNames");
        let names = if names.is_empty() { vec![String::new()] } else { names };
        for group in strings(rule, "apiGroups") {
            for res in strings(rule, "resources") {
                let (resource, subresource) = match res.split_once('/') {
                    Some((r, s)) => (r.to_string(), s.to_string()),
                    None => (res.clone(), String::new()),
                };
                for verb in &verbs {
                    for name in &names {
                        out.push(Query::Resource {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            subresource: subresource.clone(),
                            name: name.clone(),
                            namespace: namespace.clone(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// Checks that `client` may apply `steps` (module documentation). Makes one
/// SelfSubjectAccessReview per distinct question, 16 at a time.
///
/// # Errors
/// [`PreflightError::Missing`] listing every missing permission with the steps needing it;
/// [`PreflightError::Review`] when the reviews themselves fail.
pub async fn check(client: &Client, steps: &[Step]) -> Result<(), PreflightError> {
    // Question → steps that need it. Role rules are grouped so that `escalate` can excuse them.
    let mut plain: BTreeMap<Query, Vec<String>> = BTreeMap::new();
    let mut role_rules: Vec<(usize, Vec<Query>)> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let Some(info) = kind_info(&step.kind) else { continue };
        let ns = step.namespace.clone().filter(|_| info.namespaced);
        for verb in ["get", "create", "patch"] {
            let q = Query::Resource {
                verb: verb.into(),
                group: step.group.clone(),
                resource: info.plural.into(),
                subresource: String::new(),
                name: String::new(),
                namespace: ns.clone(),
            };
            plain.entry(q).or_default().push(step.describe());
        }
        if matches!(step.kind.as_str(), "Role" | "ClusterRole") {
            role_rules.push((i, rule_queries(&step.manifest["rules"], &ns)));
        }
    }
    let mut all: Vec<Query> = plain.keys().cloned().collect();
    for (i, qs) in &role_rules {
        all.extend(qs.iter().cloned());
        let info = kind_info(&steps[*i].kind).map(|k| k.plural).unwrap_or("roles");
        all.push(escalate_query(info, &steps[*i]));
    }
    all.sort();
    all.dedup();
    let answers = ask(client, &all).await?;
    let allowed = |q: &Query| answers.get(q).copied().unwrap_or(false);

    let mut missing: BTreeMap<MissingPermission, Vec<String>> = BTreeMap::new();
    for (q, needed_by) in &plain {
        if !allowed(q) {
            missing.entry(q.missing()).or_default().extend(needed_by.iter().cloned());
        }
    }
    let mut unheld_roles: Vec<(String, Option<String>)> = Vec::new();
    for (i, qs) in &role_rules {
        let step = &steps[*i];
        let plural = kind_info(&step.kind).map(|k| k.plural).unwrap_or("roles");
        let unheld: Vec<&Query> = qs.iter().filter(|q| !allowed(q)).collect();
        if unheld.is_empty() {
            continue;
        }
        unheld_roles.push((step.name.clone(), step.namespace.clone()));
        if allowed(&escalate_query(plural, step)) {
            continue;
        }
        for q in unheld {
            missing.entry(q.missing()).or_default().push(format!("{} (RBAC escalation)", step.describe()));
        }
    }
    // A binding to a role whose rules the client does not hold needs `bind` on that role.
    let mut bind_queries: BTreeMap<Query, Vec<String>> = BTreeMap::new();
    for step in steps.iter().filter(|s| matches!(s.kind.as_str(), "RoleBinding" | "ClusterRoleBinding")) {
        let role_kind = step.manifest.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or("");
        let role_name = step.manifest.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("");
        let role_ns = if role_kind == "Role" { step.namespace.clone() } else { None };
        if unheld_roles.iter().any(|(n, ns)| n == role_name && *ns == role_ns) {
            let plural = if role_kind == "Role" { "roles" } else { "clusterroles" };
            let q = Query::Resource {
                verb: "bind".into(),
                group: "rbac.authorization.k8s.io".into(),
                resource: plural.into(),
                subresource: String::new(),
                name: role_name.into(),
                namespace: step.namespace.clone(),
            };
            bind_queries.entry(q).or_default().push(step.describe());
        }
    }
    if !bind_queries.is_empty() {
        let qs: Vec<Query> = bind_queries.keys().cloned().collect();
        let bind_answers = ask(client, &qs).await?;
        for (q, needed_by) in bind_queries {
            if !bind_answers.get(&q).copied().unwrap_or(false) {
                missing.entry(q.missing()).or_default().extend(needed_by);
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let identity = whoami(client).await.unwrap_or_else(|| "the client".into());
    let missing = missing
        .into_iter()
        .map(|(p, mut s)| {
            s.dedup();
            (p, s)
        })
        .collect();
    Err(PreflightError::Missing { identity, missing })
}

fn escalate_query(plural: &str, step: &Step) -> Query {
    Query::Resource {
        verb: "escalate".into(),
        group: "rbac.authorization.k8s.io".into(),
        resource: plural.into(),
        subresource: String::new(),
        name: String::new(),
        namespace: step.namespace.clone(),
    }
}

async fn ask(client: &Client, queries: &[Query]) -> Result<BTreeMap<Query, bool>, PreflightError> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let results: Vec<Result<(Query, bool), PreflightError>> = stream::iter(queries.iter().cloned())
        .map(|q| {
            let api = api.clone();
            async move {
                let r = api.create(&PostParams::default(), &q.review()).await.map_err(|e| PreflightError::Review(e.to_string()))?;
                let ok = r.status.map(|s| s.allowed).unwrap_or(false);
                Ok((q, ok))
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_expand_to_one_question_per_permission() {
        let rules = json!([
            {"apiGroups": ["", "apps"], "resources": ["pods", "deployments/scale"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a", "b"], "verbs": ["get"]},
            {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
        ]);
        let qs = rule_queries(&rules, &Some("ns".into()));
        assert_eq!(qs.len(), 2 * 2 * 2 + 2 + 1);
        let shown: Vec<String> = qs.iter().map(|q| q.missing().to_string()).collect();
        assert!(shown.contains(&"list deployments/scale.apps in namespace ns".to_string()), "{shown:?}");
        assert!(shown.contains(&"get secrets \"b\" in namespace ns".to_string()), "{shown:?}");
        assert!(shown.contains(&"get non-resource URL /metrics cluster-wide".to_string()), "{shown:?}");
    }
}
