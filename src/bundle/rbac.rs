//! The RBAC objects a bundle ships, checked for what would hand the cluster to whoever wrote the
//! bundle. Pure: the bundle in, the problems out; `install::plan::steps` refuses a plan with any
//! of them and [`super::validate()`] reports them as errors.
//!
//! A bundle may ship Roles, RoleBindings, ClusterRoles and ClusterRoleBindings (`olm-v0.md` §2.5),
//! and OLM v0 applies them as they are, with its own cluster-admin rights. Three shapes reach
//! beyond the operator's own ServiceAccounts, and capstan refuses them (`docs/deploy.md`,
//! "Untrusted images"):
//! - [`Problem::Reserved`]: a name the cluster reserves (`system:…`, and the bootstrap roles
//!   `cluster-admin`, `admin`, `edit`, `view`: Kubernetes
//!   `plugin/pkg/auth/authorizer/rbac/bootstrappolicy`). Applying it replaces the cluster's own
//!   object (a ClusterRole `system:basic-user` with `*` rules makes every user cluster-admin).
//! - [`Problem::AggregatedBeyondOwnApis`]: a ClusterRole labelled
//!   `rbac.authorization.k8s.io/aggregate-to-<role>: "true"` has its rules copied by the
//!   cluster's aggregation controller into `admin`, `edit`, `view` (or any role selecting the
//!   label), i.e. into every user holding those roles. Operators use this for their own APIs
//!   (cert-manager, 118 such ClusterRoles in the corpus, all on their own API groups); a rule on
//!   any other group (`""` for Secrets, `*`, `rbac.authorization.k8s.io`) or a non-resource URL
//!   grants every namespace admin, editor or viewer what the bundle chose.
//! - [`Problem::BindsUsersOrGroups`]: a RoleBinding or ClusterRoleBinding whose subjects include
//!   a `User` or `Group` (`system:authenticated`, `system:anonymous`, …) grants a role to people,
//!   not to the operator. No bundle of the corpus does it; the cluster admin binds people.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Bundle, Manifest};

/// The bootstrap roles every cluster has (Kubernetes `bootstrappolicy.ClusterRoles()`, the ones
/// without the `system:` prefix).
pub const BOOTSTRAP_ROLES: [&str; 4] = ["cluster-admin", "admin", "edit", "view"];

/// Label prefix of the labels Kubernetes' aggregated roles select
/// (`rbac.authorization.k8s.io/aggregate-to-admin`, `-edit`, `-view`, …).
pub const AGGREGATE_LABEL_PREFIX: &str = "rbac.authorization.k8s.io/aggregate-to-";

/// Whether an RBAC object of `kind` named `name` would replace one the cluster reserves: any
/// Role, RoleBinding, ClusterRole or ClusterRoleBinding named `system:…`, and the bootstrap
/// ClusterRoles and ClusterRoleBindings [`BOOTSTRAP_ROLES`].
pub fn is_reserved_rbac_name(kind: &str, name: &str) -> bool {
    match kind {
        "Role" | "RoleBinding" => name.starts_with("system:"),
        "ClusterRole" | "ClusterRoleBinding" => name.starts_with("system:") || BOOTSTRAP_ROLES.contains(&name),
        _ => false,
    }
}

/// What is wrong with one shipped RBAC object (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The name is reserved by the cluster ([`is_reserved_rbac_name`]).
    Reserved,
    /// A ClusterRole aggregated into the roles named in `into` (the label suffixes, e.g.
    /// `admin`) grants `beyond`: API groups outside the bundle's own (quoted, `""` is the core
    /// group) and non-resource URLs.
    AggregatedBeyondOwnApis {
        /// The aggregation label suffixes (`admin`, `edit`, …).
        into: Vec<String>,
        /// What the rules grant beyond the bundle's own API groups.
        beyond: Vec<String>,
    },
    /// A binding names `User` or `Group` subjects (each as `Kind name`).
    BindsUsersOrGroups {
        /// The subjects, e.g. `Group system:authenticated`.
        subjects: Vec<String>,
    },
}

/// One shipped RBAC object with a [`Problem`].
#[derive(Debug, Clone)]
pub struct Finding<'a> {
    /// The object.
    pub manifest: &'a Manifest,
    /// The field at fault: `metadata.name`, `metadata.labels` or `subjects`.
    pub field: &'static str,
    /// What is wrong.
    pub problem: Problem,
}

impl Finding<'_> {
    /// `Kind name (file)`, as plan errors name objects.
    pub fn object(&self) -> String {
        format!("{} {} ({})", self.manifest.kind(), self.manifest.name(), self.manifest.location())
    }

    /// What is wrong, in a sentence (without the object).
    pub fn message(&self) -> String {
        match &self.problem {
            Problem::Reserved => "the name is reserved by Kubernetes for its own RBAC (names starting with system: and the roles cluster-admin, admin, edit, view)".into(),
            Problem::AggregatedBeyondOwnApis { into, beyond } => format!(
                "aggregated into {} (every user holding {} gets its rules) with rules on {}, beyond the bundle's own API groups",
                into.join(", "),
                if into.len() == 1 { "that role" } else { "these roles" },
                beyond.join(", ")
            ),
            Problem::BindsUsersOrGroups { subjects } => {
                format!("binds {}; a bundle may bind only ServiceAccounts", subjects.join(", "))
            }
        }
    }

    /// What the author should do.
    pub fn fix(&self) -> &'static str {
        match self.problem {
            Problem::Reserved => "rename the object in the bundle",
            Problem::AggregatedBeyondOwnApis { .. } => {
                "keep aggregated ClusterRoles to the API groups of the bundle's own CRDs and APIServices, or drop the aggregate-to label and let the cluster admin bind the role"
            }
            Problem::BindsUsersOrGroups { .. } => {
                "bind the operator's ServiceAccounts only; leave binding users and groups to the cluster admin"
            }
        }
    }
}

/// The API groups the bundle owns: of the CRDs it ships, of the CRDs its CSV lists as owned
/// (`<plural>.<group>`), and of its owned APIServices.
pub fn own_groups(bundle: &Bundle) -> BTreeSet<String> {
    let mut groups: BTreeSet<String> = bundle
        .crds()
        .filter_map(|m| m.value.pointer("/spec/group").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    let csv = bundle.csv();
    groups.extend(csv.owned_crds().into_iter().filter_map(|c| c.name.split_once('.').map(|(_, g)| g.to_string())));
    groups.extend(csv.owned_apiservices().into_iter().map(|a| a.group));
    groups.retain(|g| !g.is_empty());
    groups
}

/// Every shipped RBAC object with a [`Problem`], in bundle order (one object may appear once per
/// problem).
pub fn check(bundle: &Bundle) -> Vec<Finding<'_>> {
    let own = own_groups(bundle);
    let mut out = Vec::new();
    for m in &bundle.objects {
        let kind = m.kind();
        if is_reserved_rbac_name(kind, m.name()) {
            out.push(Finding { manifest: m, field: "metadata.name", problem: Problem::Reserved });
        }
        match kind {
            "ClusterRole" => {
                if let Some(problem) = aggregation_escape(&m.value, &own) {
                    out.push(Finding { manifest: m, field: "metadata.labels", problem });
                }
            }
            "RoleBinding" | "ClusterRoleBinding" => {
                let subjects: Vec<String> = m
                    .value
                    .get("subjects")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|s| {
                        let k = s.get("kind").and_then(Value::as_str).unwrap_or("");
                        (k != "ServiceAccount").then(|| {
                            format!(
                                "{} {}",
                                if k.is_empty() { "<no kind>" } else { k },
                                s.get("name").and_then(Value::as_str).unwrap_or("")
                            )
                        })
                    })
                    .collect();
                if !subjects.is_empty() {
                    out.push(Finding {
                        manifest: m,
                        field: "subjects",
                        problem: Problem::BindsUsersOrGroups { subjects },
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// For a ClusterRole object: [`Problem::AggregatedBeyondOwnApis`] when it carries a
/// `rbac.authorization.k8s.io/aggregate-to-*: "true"` label and a rule on an API group not in
/// `own` (or `*`), or a non-resource URL.
pub fn aggregation_escape(role: &Value, own: &BTreeSet<String>) -> Option<Problem> {
    let into: Vec<String> = role
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.as_str() == Some("true"))
        .filter_map(|(k, _)| k.strip_prefix(AGGREGATE_LABEL_PREFIX).map(str::to_string))
        .collect();
    if into.is_empty() {
        return None;
    }
    let mut beyond = BTreeSet::new();
    for rule in role.get("rules").and_then(Value::as_array).into_iter().flatten() {
        for g in rule.get("apiGroups").and_then(Value::as_array).into_iter().flatten() {
            let g = g.as_str().unwrap_or("");
            if !own.contains(g) {
                beyond.insert(format!("{g:?}"));
            }
        }
        for u in rule.get("nonResourceURLs").and_then(Value::as_array).into_iter().flatten() {
            beyond.insert(format!("non-resource URL {}", u.as_str().unwrap_or("")));
        }
    }
    (!beyond.is_empty()).then(|| Problem::AggregatedBeyondOwnApis { into, beyond: beyond.into_iter().collect() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn own() -> BTreeSet<String> {
        ["cert-manager.io".to_string(), "acme.cert-manager.io".to_string()].into()
    }

    #[test]
    fn aggregation_on_own_groups_is_allowed() {
        let role = json!({"metadata": {"labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
            "rules": [{"apiGroups": ["cert-manager.io", "acme.cert-manager.io"], "resources": ["*"], "verbs": ["*"]}]});
        assert_eq!(aggregation_escape(&role, &own()), None);
    }

    #[test]
    fn aggregation_beyond_own_groups_names_every_group_and_url() {
        let role = json!({"metadata": {"labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true", "rbac.authorization.k8s.io/aggregate-to-view": "true", "app": "x"}},
            "rules": [{"apiGroups": ["", "cert-manager.io"], "resources": ["secrets"], "verbs": ["get"]},
                      {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                      {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]});
        assert_eq!(
            aggregation_escape(&role, &own()),
            Some(Problem::AggregatedBeyondOwnApis {
                into: vec!["admin".into(), "view".into()],
                beyond: vec!["\"\"".into(), "\"*\"".into(), "non-resource URL /metrics".into()],
            })
        );
    }

    #[test]
    fn a_false_or_foreign_aggregation_label_is_not_aggregation() {
        let rules = json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]);
        let off =
            json!({"metadata": {"labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "false"}}, "rules": rules});
        let foreign = json!({"metadata": {"labels": {"rbac.ext-remediation/aggregate-to-ext-remediation": "true"}}, "rules": rules});
        assert_eq!(aggregation_escape(&off, &own()), None);
        assert_eq!(aggregation_escape(&foreign, &own()), None);
    }
}
