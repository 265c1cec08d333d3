//! The RBAC pre-check: may a **subject** — the client itself, or a ServiceAccount such as an
//! OperatorGroup's `spec.serviceAccountName` — apply these steps? Asked before anything is
//! applied, so that an installer that lacks permissions gets **every** missing one in one answer
//! instead of a plan that stops half-way at the first `Forbidden` (OLM's scoped installs, `reference/olm-v0.md` §1.6; operator-controller's
//! "permission validation pre-flight check").
//!
//! The steps given are the ones the subject applies. A scoped install's ServiceAccount does not
//! apply the plan's CRDs (capstan does, with its own identity, as OLM v0.46.0's `ExecutePlan` in
//! `pkg/controller/operators/catalog/operator.go` does; [`super::apply::Appliers`]), so the
//! InstallPlan reconciler leaves them out of what it asks that ServiceAccount for.
//!
//! What a plan needs of its installer (the API server's rules):
//! - `get`, `create` and `patch` on every object of the plan, in its namespace or cluster-wide
//!   (what [`super::apply::apply`]'s read + server-side apply need) — [`Need::Apply`];
//! - to create a Role or ClusterRole, either `escalate` on roles / clusterroles or every
//!   permission of its rules (RBAC escalation prevention) — one [`Need::Grant`] per rule it lacks;
//! - to create a RoleBinding or ClusterRoleBinding, either `bind` on the role it references or
//!   every permission of that role's rules, the role as the plan creates it or as it exists on
//!   the cluster (Kubernetes `pkg/registry/rbac/rolebinding/policybased`, `BindingAuthorized` then
//!   `ConfirmNoEscalation`) — [`Need::Bind`]. A binding to a role that neither the plan nor the
//!   cluster has needs `bind`. For a role the plan creates and the installer may not `escalate`,
//!   the rules it must hold are listed once, with the role (holding them allows the binding too).
//!
//! Sans-I/O at its core: [`evaluate`] turns the steps and what is known so far ([`Known`]:
//! answers to [`Question`]s, rules of roles read from the cluster) into either the next
//! questions and role reads ([`Progress::Ask`]) or the [`Finding`]s ([`Progress::Done`]); it asks
//! only what the answer depends on (a role's rules only when `escalate` is refused, a bound
//! role's rules only when `bind` is refused). [`check`] is the thin I/O shell: it asks the API
//! server (a SelfSubjectAccessReview for [`Subject::Client`], a SubjectAccessReview for
//! [`Subject::ServiceAccount`]) and reads roles until [`evaluate`] is done.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use futures::stream::{self, StreamExt};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::Step;
use super::apply::whoami;
use super::plan::kind_info;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// A ServiceAccount as the API server authenticates it: user `system:serviceaccount:<ns>:<name>`,
/// groups `system:serviceaccounts`, `system:serviceaccounts:<ns>`, `system:authenticated`
/// (Kubernetes `k8s.io/apiserver/pkg/authentication/serviceaccount`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServiceAccount {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub name: String,
}

impl ServiceAccount {
    /// The user name the API server gives its tokens.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The groups the API server gives its tokens.
    pub fn groups(&self) -> [String; 3] {
        [
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".into(),
        ]
    }
}

/// Whose permissions are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// The client making the reviews (SelfSubjectAccessReview).
    Client,
    /// A ServiceAccount, asked about by the client (SubjectAccessReview; the client needs
    /// `create` on `subjectaccessreviews`).
    ServiceAccount(ServiceAccount),
}

/// One access question, as the API server's authorizer attributes (`authorization.k8s.io/v1`
/// `ResourceAttributes` / `NonResourceAttributes`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Question {
    /// A verb on a resource (optionally a subresource or one named object), in a namespace or
    /// cluster-wide (`namespace: None`).
    Resource {
        /// e.g. `create`, or `*`.
        verb: String,
        /// API group, `""` for the core group.
        group: String,
        /// The resource's plural, e.g. `deployments`.
        resource: String,
        /// e.g. `status`.
        subresource: Option<String>,
        /// One object's name (a rule's `resourceNames`, the role a binding references).
        name: Option<String>,
        /// `None`: cluster-wide.
        namespace: Option<String>,
    },
    /// A verb on a non-resource URL such as `/metrics`.
    NonResource {
        /// e.g. `get`.
        verb: String,
        /// The URL path.
        path: String,
    },
}

impl Question {
    /// `verb` on `resource` of `group` (no subresource, no name), in `namespace` or cluster-wide.
    pub fn resource(verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> Self {
        Question::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: None,
            name: None,
            namespace: namespace.map(String::from),
        }
    }

    /// The same question about the one object `name` (a resource question; a non-resource one is
    /// returned as is).
    pub fn named(mut self, object: &str) -> Self {
        if let Question::Resource { name, .. } = &mut self {
            *name = Some(object.into());
        }
        self
    }

    /// The same question about subresource `sub` (a resource question; a non-resource one is
    /// returned as is).
    pub fn of_subresource(mut self, sub: &str) -> Self {
        if let Question::Resource { subresource, .. } = &mut self {
            *subresource = Some(sub.into());
        }
        self
    }

    /// The questions a policy rule grants: one per group × resource[/subresource] × verb (and
    /// resource name, when the rule lists them), and one per non-resource URL × verb, in
    /// `namespace` (`None`: cluster-wide).
    pub fn from_rule(rule: &PolicyRule, namespace: Option<&str>) -> Vec<Question> {
        let mut out = Vec::new();
        for path in rule.non_resource_urls.iter().flatten() {
            out.extend(rule.verbs.iter().map(|verb| Question::NonResource { verb: verb.clone(), path: path.clone() }));
        }
        let names: Vec<Option<String>> = match rule.resource_names.as_ref().filter(|n| !n.is_empty()) {
            Some(n) => n.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        for group in rule.api_groups.iter().flatten() {
            for res in rule.resources.iter().flatten() {
                let (resource, subresource) = match res.split_once('/') {
                    Some((r, s)) => (r.to_string(), Some(s.to_string())),
                    None => (res.clone(), None),
                };
                for verb in &rule.verbs {
                    for name in &names {
                        out.push(Question::Resource {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            subresource: subresource.clone(),
                            name: name.clone(),
                            namespace: namespace.map(String::from),
                        });
                    }
                }
            }
        }
        out
    }

    /// The verb asked about.
    pub fn verb(&self) -> &str {
        match self {
            Question::Resource { verb, .. } | Question::NonResource { verb, .. } => verb,
        }
    }

    /// The API server's words for refusing `verb` on this question's target (k8s.io/apiserver
    /// `forbiddenMessage`, without the user): `cannot VERB resource "R[/SUB]" in API group "G"
    /// in the namespace "N"` or `… at the cluster scope`, `named "NAME"` after the resource when
    /// the question is about one object; `cannot VERB path "/P"`.
    pub fn forbidden(&self, verb: &str) -> String {
        match self {
            Question::Resource { group, resource, subresource, name, namespace, .. } => {
                let r = match subresource {
                    Some(s) => format!("{resource}/{s}"),
                    None => resource.clone(),
                };
                let named = name.as_ref().map(|n| format!(" named {n:?}")).unwrap_or_default();
                let scope = match namespace {
                    Some(ns) => format!("in the namespace {ns:?}"),
                    None => "at the cluster scope".to_string(),
                };
                format!("cannot {verb} resource {r:?}{named} in API group {group:?} {scope}")
            }
            Question::NonResource { path, .. } => format!("cannot {verb} path {path:?}"),
        }
    }

    /// What the verb is on: `resource[/subresource][.group] [name] in namespace N` or
    /// `… cluster-wide`, or `non-resource URL /path`.
    pub fn target(&self) -> String {
        match self {
            Question::Resource { group, resource, subresource, name, namespace, .. } => {
                let mut r = resource.clone();
                if let Some(s) = subresource {
                    r = format!("{r}/{s}");
                }
                if !group.is_empty() {
                    r = format!("{r}.{group}");
                }
                if let Some(n) = name {
                    r = format!("{r} {n}");
                }
                match namespace {
                    Some(ns) => format!("{r} in namespace {ns}"),
                    None => format!("{r} cluster-wide"),
                }
            }
            Question::NonResource { path, .. } => format!("non-resource URL {path}"),
        }
    }

    fn attributes(&self) -> (Option<ResourceAttributes>, Option<NonResourceAttributes>) {
        match self {
            Question::Resource { verb, group, resource, subresource, name, namespace } => (
                Some(ResourceAttributes {
                    verb: Some(verb.clone()),
                    group: Some(group.clone()),
                    resource: Some(resource.clone()),
                    subresource: subresource.clone(),
                    name: name.clone(),
                    namespace: namespace.clone(),
                    ..Default::default()
                }),
                None,
            ),
            Question::NonResource { verb, path } => {
                (None, Some(NonResourceAttributes { verb: Some(verb.clone()), path: Some(path.clone()) }))
            }
        }
    }
}

impl fmt::Display for Question {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.verb(), self.target())
    }
}

/// A role a binding references: `kind` `Role` (in `namespace`) or `ClusterRole` (`namespace: None`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RoleKey {
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// The Role's namespace (the binding's); `None` for a ClusterRole.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl RoleKey {
    /// The role a RoleBinding or ClusterRoleBinding step references (`roleRef`); `None` for any
    /// other step.
    pub fn bound_by(step: &Step) -> Option<RoleKey> {
        if !matches!(step.kind.as_str(), "RoleBinding" | "ClusterRoleBinding") {
            return None;
        }
        let kind = step.manifest.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or("").to_string();
        let name = step.manifest.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("").to_string();
        let namespace = if kind == "Role" { step.namespace.clone() } else { None };
        Some(RoleKey { kind, namespace, name })
    }

    fn plural(&self) -> &'static str {
        if self.kind == "ClusterRole" { "clusterroles" } else { "roles" }
    }

    fn in_plan<'s>(&self, steps: &'s [Step]) -> Option<&'s Step> {
        steps.iter().find(|s| s.kind == self.kind && s.name == self.name && s.namespace == self.namespace)
    }
}

impl fmt::Display for RoleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// A role as read from the cluster for [`evaluate`].
#[derive(Debug, Clone, PartialEq)]
pub enum RoleRead {
    /// It exists with these rules.
    Rules(Vec<PolicyRule>),
    /// It does not exist.
    Absent,
    /// It could not be read (the reader was refused); the reason.
    Unreadable(String),
}

/// Why the subject needs the [`Finding::missing`] permissions.
#[derive(Debug, Clone, PartialEq)]
pub enum Need {
    /// To read and server-side apply the step's object (`get`, `create`, `patch`).
    Apply,
    /// To create a Role / ClusterRole granting one of its rules, the subject must hold the rule
    /// or have `escalate` on `roles` (`roles` or `clusterroles`).
    Grant {
        /// `roles` or `clusterroles`.
        roles: &'static str,
    },
    /// To create a binding to `role`, the subject must hold every permission of the role or
    /// have `bind` on it.
    Bind {
        /// The role the binding references.
        role: RoleKey,
        /// Where the role's rules were found.
        found: RoleFound,
    },
}

/// Where [`evaluate`] found the rules of a role a binding references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleFound {
    /// The plan creates it.
    InPlan,
    /// It exists on the cluster.
    OnCluster,
    /// Neither the plan nor the cluster has it: only `bind` allows the binding.
    Absent,
    /// It is not in the plan and could not be read (the reason): only `bind` is known to allow
    /// the binding.
    Unreadable(String),
}

/// What the subject lacks for one step (one rule of a role, one binding): the permissions and
/// why they are needed. Its `Display` is one sentence naming the permissions, the step and what
/// else would do.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The step, as [`Step::describe`] (`Kind namespace/name`).
    pub step: String,
    /// Why.
    pub need: Need,
    /// The permissions lacked, in the order asked.
    pub missing: Vec<Question>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lacking = group_verbs(&self.missing);
        let step = &self.step;
        match &self.need {
            Need::Apply => write!(f, "{lacking} (for {step})"),
            Need::Grant { roles } => {
                write!(f, "{lacking} (to grant this rule of {step} it must hold it, or have escalate on {roles})")
            }
            Need::Bind { role, found: RoleFound::InPlan | RoleFound::OnCluster } => write!(
                f,
                "{lacking} (to create {step}, which grants {role}, it must hold every permission of {role}, or have bind on {} {})",
                role.plural(),
                role.name
            ),
            Need::Bind { role, found: RoleFound::Absent } => {
                write!(
                    f,
                    "{lacking} (for {step}: {role} is neither in the plan nor on the cluster, so only bind allows the binding)"
                )
            }
            Need::Bind { role, found: RoleFound::Unreadable(why) } => {
                write!(
                    f,
                    "{lacking} (for {step}: {role} is not in the plan and could not be read ({why}), so only bind is known to allow the binding)"
                )
            }
        }
    }
}

/// The permissions lacked, phrased as the API server phrases a refusal (`cannot create resource
/// "deployments" in API group "apps" in the namespace "ns"`, `… at the cluster scope`, `cannot get
/// path "/metrics"`; k8s.io/apiserver `forbiddenMessage`), so that what clients match in OLM's
/// messages (OLM shows the API server's error of the first create refused) is found in capstan's:
/// one clause per target in first-seen order, its first verb spelled out and the others after it
/// (`(nor get, patch)`), clauses joined by `, `. `create` is named first when it is lacked.
fn group_verbs(questions: &[Question]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut verbs: BTreeMap<String, (Vec<&str>, &Question)> = BTreeMap::new();
    for q in questions {
        let target = q.target();
        if !verbs.contains_key(&target) {
            order.push(target.clone());
        }
        verbs.entry(target).or_insert_with(|| (Vec::new(), q)).0.push(q.verb());
    }
    order
        .iter()
        .map(|t| {
            let (vs, q) = &verbs[t];
            let mut vs = vs.clone();
            if let Some(i) = vs.iter().position(|v| *v == "create") {
                let v = vs.remove(i);
                vs.insert(0, v);
            }
            let first = q.forbidden(vs[0]);
            if vs.len() == 1 { first } else { format!("{first} (nor {})", vs[1..].join(", ")) }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The one message for a refused plan, for both callers (the CLI / library caller of [`check`]
/// and the InstallPlan's `status.message`): `{who} lacks N permission(s) needed by this plan;
/// nothing was applied: (1) …; (2) …; grant them to {grantee}`. A "permission" here is one
/// [`Finding`].
pub fn describe(who: &str, grantee: &str, findings: &[Finding]) -> String {
    let list: Vec<String> = findings.iter().enumerate().map(|(i, f)| format!("({}) {f}", i + 1)).collect();
    format!(
        "{who} lacks {} permission{} needed by this plan; nothing was applied: {}; grant them to {grantee}",
        findings.len(),
        if findings.len() == 1 { "" } else { "s" },
        list.join("; ")
    )
}

/// What [`evaluate`] knows so far: answers and roles read from the cluster.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// Whether the subject is allowed each question asked.
    pub answers: BTreeMap<Question, bool>,
    /// The roles read from the cluster (bindings' roles the plan does not create).
    pub roles: BTreeMap<RoleKey, RoleRead>,
}

/// One step of [`evaluate`].
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Ask these questions and read these roles into [`Known`], then evaluate again.
    Ask {
        /// Not yet answered, sorted, distinct.
        questions: Vec<Question>,
        /// Not yet read, sorted, distinct.
        roles: Vec<RoleKey>,
    },
    /// Everything needed is known: what the subject lacks, in step order (empty: nothing).
    Done(Vec<Finding>),
}

/// The evaluation's memory of one round: a question not yet answered counts as allowed (so that
/// the questions depending on its refusal are not asked yet) and is collected for the next round.
struct Round<'a> {
    known: &'a Known,
    ask: BTreeSet<Question>,
    read: BTreeSet<RoleKey>,
}

impl Round<'_> {
    fn allowed(&mut self, q: &Question) -> bool {
        match self.known.answers.get(q) {
            Some(a) => *a,
            None => {
                self.ask.insert(q.clone());
                true
            }
        }
    }

    fn lacking(&mut self, qs: Vec<Question>) -> Vec<Question> {
        qs.into_iter().filter(|q| !self.allowed(q)).collect()
    }
}

/// The findings for `steps`, or what must be asked first (module documentation). Pure.
pub fn evaluate(steps: &[Step], known: &Known) -> Progress {
    let mut round = Round { known, ask: BTreeSet::new(), read: BTreeSet::new() };
    let mut findings = Vec::new();
    for step in steps {
        let Some(info) = kind_info(&step.kind) else { continue };
        let ns = step.namespace.as_deref().filter(|_| info.namespaced);
        let apply =
            ["get", "create", "patch"].iter().map(|v| Question::resource(v, &step.group, info.plural, ns)).collect();
        let missing = round.lacking(apply);
        if !missing.is_empty() {
            findings.push(Finding { step: step.describe(), need: Need::Apply, missing });
        }
        if matches!(step.kind.as_str(), "Role" | "ClusterRole") {
            findings.extend(role_findings(&mut round, step, info.plural, ns));
        }
        if let Some(role) = RoleKey::bound_by(step) {
            findings.extend(binding_finding(&mut round, steps, step, role));
        }
    }
    if round.ask.is_empty() && round.read.is_empty() {
        Progress::Done(findings)
    } else {
        Progress::Ask { questions: round.ask.into_iter().collect(), roles: round.read.into_iter().collect() }
    }
}

fn rules_of(step: &Step) -> Vec<PolicyRule> {
    serde_json::from_value(step.manifest["rules"].clone()).unwrap_or_default()
}

fn escalate(roles: &str, namespace: Option<&str>) -> Question {
    Question::resource("escalate", RBAC_GROUP, roles, namespace)
}

/// A role step without `escalate`: one [`Need::Grant`] per rule the subject does not hold.
fn role_findings(round: &mut Round<'_>, step: &Step, plural: &'static str, ns: Option<&str>) -> Vec<Finding> {
    if round.allowed(&escalate(plural, ns)) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for rule in rules_of(step) {
        let missing = round.lacking(Question::from_rule(&rule, ns));
        if !missing.is_empty() {
            out.push(Finding { step: step.describe(), need: Need::Grant { roles: plural }, missing });
        }
    }
    out
}

/// A binding step: `bind` on its role, or every permission of the role (module documentation).
fn binding_finding(round: &mut Round<'_>, steps: &[Step], step: &Step, role: RoleKey) -> Option<Finding> {
    let ns = step.namespace.as_deref();
    let bind = Question::resource("bind", RBAC_GROUP, role.plural(), ns).named(&role.name);
    if round.allowed(&bind) {
        return None;
    }
    let (rules, found) = match role.in_plan(steps) {
        // Without `escalate` the role's own findings list its rules; holding them allows the
        // binding too.
        Some(_) if !round.allowed(&escalate(role.plural(), role.namespace.as_deref())) => return None,
        Some(created) => (rules_of(created), RoleFound::InPlan),
        None => match round.known.roles.get(&role) {
            None => {
                round.read.insert(role);
                return None;
            }
            Some(RoleRead::Rules(rules)) => (rules.clone(), RoleFound::OnCluster),
            Some(RoleRead::Absent) => {
                return Some(Finding {
                    step: step.describe(),
                    need: Need::Bind { role, found: RoleFound::Absent },
                    missing: vec![bind],
                });
            }
            Some(RoleRead::Unreadable(why)) => {
                let found = RoleFound::Unreadable(why.clone());
                return Some(Finding { step: step.describe(), need: Need::Bind { role, found }, missing: vec![bind] });
            }
        },
    };
    let missing = round.lacking(rules.iter().flat_map(|r| Question::from_rule(r, ns)).collect());
    (!missing.is_empty()).then(|| Finding { step: step.describe(), need: Need::Bind { role, found }, missing })
}

/// The pre-check's failure.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// The subject lacks permissions: every finding, in step order ([`describe`]).
    #[error("{}", describe(who, who, findings))]
    Missing {
        /// Who the subject is: `ServiceAccount ns/name`, or the client's identity from a
        /// SelfSubjectReview (`user "…" (groups …)`), or `the client`.
        who: String,
        /// What it lacks.
        findings: Vec<Finding>,
    },
    /// An access review or a role read failed.
    #[error(transparent)]
    Api(#[from] AskError),
}

/// An access review or a role read of the pre-check failed (the API call itself, not a refusal).
#[derive(Debug, thiserror::Error)]
#[error("cannot check permissions: {what}: {source}")]
pub struct AskError {
    /// What was asked or read, naming the object.
    pub what: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// What `subject` lacks to apply `steps`: [`evaluate`] driven to the end, asking the API server
/// with `client` (one review per distinct question, 16 at a time) and reading the roles it asks
/// for with `client` (a role it is refused is [`RoleRead::Unreadable`]). Empty: nothing.
///
/// # Errors
/// [`AskError`] when a review or a role read fails.
pub async fn findings(client: &Client, subject: &Subject, steps: &[Step]) -> Result<Vec<Finding>, AskError> {
    let mut known = Known::default();
    loop {
        match evaluate(steps, &known) {
            Progress::Done(findings) => return Ok(findings),
            Progress::Ask { questions, roles } => {
                for role in roles {
                    let read = read_role(client, &role).await?;
                    known.roles.insert(role, read);
                }
                known.answers.extend(ask(client, subject, questions).await?);
            }
        }
    }
}

/// Checks that `subject` may apply `steps` (module documentation).
///
/// # Errors
/// [`PreflightError::Missing`] with every [`Finding`]; [`PreflightError::Api`] when the reviews
/// themselves fail.
pub async fn check(client: &Client, subject: &Subject, steps: &[Step]) -> Result<(), PreflightError> {
    let findings = findings(client, subject, steps).await?;
    if findings.is_empty() {
        return Ok(());
    }
    let who = match subject {
        Subject::ServiceAccount(sa) => format!("ServiceAccount {}/{}", sa.namespace, sa.name),
        Subject::Client => whoami(client).await.unwrap_or_else(|| "the client".into()),
    };
    Err(PreflightError::Missing { who, findings })
}

/// Whether `subject` is allowed `question`: one access review made by `client`.
///
/// # Errors
/// The API error of the review.
pub async fn allowed(client: &Client, subject: &Subject, question: &Question) -> Result<bool, kube::Error> {
    let (resource_attributes, non_resource_attributes) = question.attributes();
    let pp = PostParams::default();
    let status = match subject {
        Subject::Client => {
            let review = SelfSubjectAccessReview {
                metadata: Default::default(),
                spec: SelfSubjectAccessReviewSpec { resource_attributes, non_resource_attributes },
                status: None,
            };
            Api::<SelfSubjectAccessReview>::all(client.clone()).create(&pp, &review).await?.status
        }
        Subject::ServiceAccount(sa) => {
            let spec = SubjectAccessReviewSpec {
                user: Some(sa.user()),
                groups: Some(sa.groups().to_vec()),
                resource_attributes,
                non_resource_attributes,
                ..Default::default()
            };
            Api::<SubjectAccessReview>::all(client.clone())
                .create(&pp, &SubjectAccessReview { metadata: Default::default(), spec, status: None })
                .await?
                .status
        }
    };
    Ok(status.is_some_and(|s| s.allowed))
}

async fn ask(client: &Client, subject: &Subject, questions: Vec<Question>) -> Result<Vec<(Question, bool)>, AskError> {
    let results: Vec<Result<(Question, bool), AskError>> = stream::iter(questions)
        .map(|q| async move {
            match allowed(client, subject, &q).await {
                Ok(a) => Ok((q, a)),
                Err(source) => Err(AskError { what: format!("access review of {q}"), source }),
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    results.into_iter().collect()
}

async fn read_role(client: &Client, role: &RoleKey) -> Result<RoleRead, AskError> {
    let rules = match &role.namespace {
        Some(ns) => Api::<Role>::namespaced(client.clone(), ns).get_opt(&role.name).await.map(|r| r.map(|r| r.rules)),
        None => Api::<ClusterRole>::all(client.clone()).get_opt(&role.name).await.map(|r| r.map(|r| r.rules)),
    };
    match rules {
        Ok(Some(rules)) => Ok(RoleRead::Rules(rules.unwrap_or_default())),
        Ok(None) => Ok(RoleRead::Absent),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(RoleRead::Unreadable(s.message)),
        Err(source) => {
            let at = role.namespace.as_ref().map(|ns| format!("{ns}/")).unwrap_or_default();
            Err(AskError { what: format!("reading {} {at}{}", role.kind, role.name), source })
        }
    }
}

#[cfg(test)]
mod tests;
