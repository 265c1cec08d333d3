//! What a ServiceAccount may do, evaluated from the cluster's RBAC objects as the API server's RBAC
//! authorizer does (Kubernetes `plugin/pkg/auth/authorizer/rbac/rbac.go` and
//! `pkg/apis/rbac/v1/evaluation_helpers.go`), so that the CSV requirement check
//! (`csv::requirements::service_account_requirements`) needs a handful of reads instead of one
//! SubjectAccessReview per group × resource × verb (77 for nginx-operator). OLM does the
//! same: its `requirementAndPermissionStatus` asks an in-process RBAC authorizer over its informer
//! caches.
//!
//! Only an *allow* is taken from this evaluation: an attribute the rules found here do not grant is
//! asked of the API server with a SubjectAccessReview ([`crate::install::preflight::allowed`]), which also sees
//! any other authorizer of the cluster, so a `NotSatisfied` requirement is always the API server's word.

use std::collections::BTreeSet;

use super::{Error, kube_err};
use crate::install::preflight::{Question, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::Api;

/// Whether binding subject `s` names ServiceAccount `who` (Kubernetes `appliesToUser`): the
/// ServiceAccount itself, its user name, or one of its groups.
pub(crate) fn is_subject(who: &ServiceAccount, s: &Subject) -> bool {
    match s.kind.as_str() {
        "ServiceAccount" => s.name == who.name && s.namespace.as_deref() == Some(who.namespace.as_str()),
        "User" => s.name == who.user(),
        "Group" => who.groups().contains(&s.name),
        _ => false,
    }
}

/// The rules granted to one account: cluster-wide (ClusterRoleBindings) and in one namespace
/// (RoleBindings of that namespace).
#[derive(Debug, Clone, Default)]
pub(crate) struct GrantedRules {
    /// Rules of every ClusterRole bound by a ClusterRoleBinding: they apply in every namespace, to
    /// cluster-scoped resources and to non-resource URLs.
    pub cluster: Vec<PolicyRule>,
    /// The namespace of [`GrantedRules::namespaced`].
    pub namespace: String,
    /// Rules of the Roles and ClusterRoles bound by RoleBindings of `namespace`: they apply to
    /// namespaced requests in it only.
    pub namespaced: Vec<PolicyRule>,
}

impl GrantedRules {
    /// Whether these rules allow `question` (the preflight's one question type). Pure.
    pub fn allows(&self, question: &Question) -> bool {
        match question {
            Question::Resource { namespace, .. } => {
                let namespace = namespace.as_deref().filter(|n| !n.is_empty());
                let applies = |rule: &PolicyRule| resource_rule_allows(rule, question);
                self.cluster.iter().any(applies)
                    || (namespace == Some(self.namespace.as_str()) && self.namespaced.iter().any(applies))
            }
            Question::NonResource { verb, path } => {
                self.cluster.iter().any(|rule| verb_matches(rule, verb) && non_resource_url_matches(rule, path))
            }
        }
    }
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

fn resource_rule_allows(rule: &PolicyRule, q: &Question) -> bool {
    let Question::Resource { verb, group, resource, subresource, name, .. } = q else { return false };
    let (sub, name) = (subresource.as_deref().unwrap_or(""), name.as_deref().unwrap_or(""));
    if !verb_matches(rule, verb) {
        return false;
    }
    if !rule.api_groups.iter().flatten().any(|g| g == "*" || g == group) {
        return false;
    }
    let combined = if sub.is_empty() { resource.to_string() } else { format!("{resource}/{sub}") };
    let resource_ok = rule
        .resources
        .iter()
        .flatten()
        .any(|res| res == "*" || *res == combined || (!sub.is_empty() && *res == format!("*/{sub}")));
    if !resource_ok {
        return false;
    }
    match rule.resource_names.as_ref().filter(|n| !n.is_empty()) {
        None => true,
        Some(names) => names.iter().any(|n| n == name),
    }
}

fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls
        .iter()
        .flatten()
        .any(|u| u == "*" || u == path || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix)))
}

/// Reads the rules granted to `who`: the ClusterRoleBindings and the RoleBindings of `who`'s
/// namespace that name it (directly or by one of its groups), and the roles they reference. A
/// binding to a role that does not exist grants nothing (as in the API server).
/// Errors: a failed list or read, naming the object.
pub(crate) async fn granted_rules(client: &Client, who: &ServiceAccount) -> Result<GrantedRules, Error> {
    let ns = who.namespace.as_str();
    let mut granted = GrantedRules { namespace: ns.to_string(), ..Default::default() };
    // Without read access to RBAC (a narrower deployment of capstan) nothing is known granted and
    // every attribute goes to a SubjectAccessReview, as before.
    let forbidden = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 403);
    // The two binding lists, then the roles they name, each read together (independent reads:
    // one round trip each on the install's critical path).
    let crb_api = Api::<ClusterRoleBinding>::all(client.clone());
    let rb_api = Api::<RoleBinding>::namespaced(client.clone(), ns);
    // From the watch cache (`install::from_watch_cache`): a binding it does not show yet only
    // sends its rules to a SubjectAccessReview.
    let all = crate::install::from_watch_cache();
    let (crbs, rbs) = futures::join!(crb_api.list(&all), rb_api.list(&all));
    let crbs = match crbs {
        Err(e) if forbidden(&e) => return Ok(granted),
        r => r.map_err(kube_err("listing ClusterRoleBindings"))?,
    };
    let rbs = match rbs {
        Err(e) if forbidden(&e) => return Ok(granted),
        r => r.map_err(kube_err(format!("listing RoleBindings in {ns}")))?,
    };
    let binds = |subjects: &Option<Vec<Subject>>| subjects.iter().flatten().any(|s| is_subject(who, s));
    let cluster_refs: BTreeSet<String> = crbs
        .items
        .iter()
        .filter(|b| binds(&b.subjects) && b.role_ref.kind == "ClusterRole")
        .map(|b| b.role_ref.name.clone())
        .collect();
    let ns_refs: BTreeSet<(String, String)> =
        rbs.items.iter().filter(|b| binds(&b.subjects)).map(|b| role_key(&b.role_ref)).collect();
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let roles: Api<Role> = Api::namespaced(client.clone(), ns);
    let cluster_role_rules = |name: String| {
        let api = cluster_roles.clone();
        async move {
            api.get_opt(&name)
                .await
                .map_err(kube_err(format!("reading ClusterRole {name}")))
                .map(|r| r.and_then(|r| r.rules).unwrap_or_default())
        }
    };
    let (cluster, namespaced) = futures::try_join!(
        futures::future::try_join_all(cluster_refs.iter().map(|name| cluster_role_rules(name.clone()))),
        futures::future::try_join_all(ns_refs.iter().map(|(kind, name)| {
            let (roles, name, by_cluster_role) = (roles.clone(), name.clone(), kind == "ClusterRole");
            let cluster = cluster_role_rules(name.clone());
            async move {
                if by_cluster_role {
                    cluster.await
                } else {
                    roles
                        .get_opt(&name)
                        .await
                        .map_err(kube_err(format!("reading Role {ns}/{name}")))
                        .map(|r| r.and_then(|r| r.rules).unwrap_or_default())
                }
            }
        })),
    )?;
    granted.cluster.extend(cluster.into_iter().flatten());
    granted.namespaced.extend(namespaced.into_iter().flatten());
    Ok(granted)
}

fn role_key(r: &RoleRef) -> (String, String) {
    (r.kind.clone(), r.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn rule(v: Value) -> PolicyRule {
        serde_json::from_value(v).unwrap()
    }

    fn res(group: &str, resource: &str, verb: &str, ns: Option<&str>) -> Question {
        match resource.split_once('/') {
            Some((r, s)) => Question::resource(verb, group, r, ns).of_subresource(s),
            None => Question::resource(verb, group, resource, ns),
        }
    }

    #[test]
    fn rules_match_as_the_rbac_authorizer_does() {
        let g = GrantedRules {
            cluster: vec![
                rule(json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]})),
                rule(json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]})),
                rule(json!({"nonResourceURLs": ["/metrics", "/api/*"], "verbs": ["get"]})),
            ],
            namespace: "ns1".into(),
            namespaced: vec![
                rule(
                    json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"], "resourceNames": ["lock"]}),
                ),
                rule(json!({"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get"]})),
            ],
        };
        assert!(g.allows(&res("apps", "deployments", "get", Some("any"))), "cluster rules apply in every namespace");
        assert!(g.allows(&res("apps", "deployments", "list", None)));
        assert!(!g.allows(&res("apps", "deployments", "create", Some("ns1"))));
        assert!(!g.allows(&res("", "deployments", "get", Some("ns1"))), "group must match");
        assert!(g.allows(&res("x.io", "widgets/status", "update", None)), "*/subresource");
        assert!(!g.allows(&res("x.io", "widgets", "update", None)));
        assert!(g.allows(&res("", "pods", "get", Some("ns1"))));
        assert!(g.allows(&res("", "pods/log", "get", Some("ns1"))));
        assert!(!g.allows(&res("", "pods/exec", "get", Some("ns1"))), "a subresource is not its resource");
        assert!(!g.allows(&res("", "pods", "get", Some("ns2"))), "RoleBinding rules only in their namespace");
        assert!(!g.allows(&res("", "pods", "get", None)), "nor cluster-wide");
        assert!(!g.allows(&res("", "configmaps", "get", Some("ns1"))), "resourceNames limit the rule");
        let named = res("", "configmaps", "update", Some("ns1")).named("lock");
        assert!(g.allows(&named));
        let url = |p: &str, v: &str| Question::NonResource { path: p.into(), verb: v.into() };
        assert!(g.allows(&url("/metrics", "get")));
        assert!(g.allows(&url("/api/v1", "get")), "trailing * is a prefix");
        assert!(!g.allows(&url("/metrics", "post")));
        assert!(!g.allows(&url("/healthz", "get")));
    }

    #[test]
    fn subjects_of_a_service_account() {
        let who = ServiceAccount { namespace: "ns1".into(), name: "op".into() };
        let s = |kind: &str, name: &str, ns: Option<&str>| Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: ns.map(String::from),
            api_group: None,
        };
        assert!(is_subject(&who, &s("ServiceAccount", "op", Some("ns1"))));
        assert!(!is_subject(&who, &s("ServiceAccount", "op", Some("ns2"))));
        assert!(!is_subject(&who, &s("ServiceAccount", "other", Some("ns1"))));
        assert!(is_subject(&who, &s("User", "system:serviceaccount:ns1:op", None)));
        assert!(is_subject(&who, &s("Group", "system:authenticated", None)));
        assert!(is_subject(&who, &s("Group", "system:serviceaccounts:ns1", None)));
        assert!(!is_subject(&who, &s("Group", "system:serviceaccounts:ns2", None)));
        assert!(!is_subject(&who, &s("Group", "system:masters", None)));
    }
}
