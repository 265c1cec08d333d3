//! Applying InstallPlan [`Step`]s to a cluster with server-side apply.
//!
//! Before the first step every object of the plan is read once: if any exists and is not this
//! operator's ([`takeover_refused`]), nothing is applied and each such object is reported as a
//! [`StepError::Conflict`] (where OLM would overwrite it).
//!
//! Semantics after OLM's `ExecutePlan` (`reference/olm-v0.md` §5.1 item 6, §5.2): steps are
//! applied in order with one field manager ([`super::FIELD_MANAGER`]) — consecutive steps that
//! need nothing of each other (ServiceAccounts, Roles, Services, …; bindings after the roles they
//! name) are sent together ([`waves`]); after CRDs, later steps
//! wait until every CRD applied before them is `Established` and `NamesAccepted`; transient API
//! errors (5xx, 429, 409 Conflict, timeouts and connection errors) are retried with exponential
//! backoff for up to [`ApplyOptions::retry_timeout`] (OLM's `--install-plan-retry-timeout`, 1 min);
//! `Forbidden` is reported at once with the verb, the resource and the client's identity (the
//! controller decides whether to retry, as OLM does for scoped installs). After a failed step the
//! later waves are not applied and their steps are reported as [`StepStatus::NotApplied`], so a
//! caller always learns which step failed and why and which did not run; the steps sent together
//! with a failed one (its wave) were sent, and each reports its own outcome (OLM applies every
//! step of a pass and reports each).
//!
//! A scoped install applies with two identities ([`apply_as`], [`Appliers`]): its CRDs with
//! capstan's own client and everything else as the OperatorGroup's ServiceAccount, as OLM's
//! `ExecutePlan` does (CRDs are cluster-wide objects the ServiceAccount of one namespace is not
//! meant to hold rights to).
//!
//! An ownerReference with an empty `uid` (see [`super::InstallTarget::csv_owner_reference`]) is
//! completed with the UID of the object it names in the step's namespace; when that object does
//! not exist yet (the CSV is applied after the objects it owns), the step is applied without the
//! reference first and applied again with it once all steps are done.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Error as KubeError};
use serde_json::Value;
use tokio::time::Instant;

use super::plan::kind_info;
use super::{FIELD_MANAGER, Step};

/// Settings of [`apply`]. [`Default`] gives capstan's values.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Field manager of every server-side apply; default [`FIELD_MANAGER`] (`capstan`).
    pub field_manager: String,
    /// Take over fields another manager owns (`force=true`), as an installer that owns its
    /// objects must; default `true`.
    pub force: bool,
    /// How long to wait for a CRD to become `Established`; default 60 s.
    pub crd_timeout: Duration,
    /// How long one API call is retried on transient errors; default 60 s (OLM's
    /// `--install-plan-retry-timeout` default).
    pub retry_timeout: Duration,
    /// First backoff between retries, doubled up to [`ApplyOptions::max_backoff`]; default 200 ms.
    pub initial_backoff: Duration,
    /// Largest backoff between retries; default 5 s.
    pub max_backoff: Duration,
    /// Poll interval while waiting for CRDs; default 100 ms.
    pub poll_interval: Duration,
    /// Validity of the webhook / APIService certificates issued when a plan has serving
    /// Secrets ([`super::webhook::fill_certificates`]); default 2 years (OLM's), or
    /// `$CAPSTAN_CERT_VALIDITY` ([`super::certs::validity_from_env`]; an unreadable value is
    /// logged and the default used).
    pub cert_validity: Duration,
    /// The CSVs of the cluster as a watch keeps them (the controller's CSV watch), read instead
    /// of a GET per CSV when a CRD keeps the installed-alongside annotations of other
    /// namespaces' installs ([`Applier::alongside_kept`]); `None` (the default): GETs. A CSV
    /// not in the store counts as gone.
    pub known_csvs: Option<kube::runtime::reflector::Store<crate::api::ClusterServiceVersion>>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            field_manager: FIELD_MANAGER.to_string(),
            force: true,
            crd_timeout: Duration::from_secs(60),
            retry_timeout: Duration::from_secs(60),
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            poll_interval: Duration::from_millis(100),
            cert_validity: super::certs::validity_from_env().unwrap_or_else(|e| {
                tracing::warn!(error = %e, "using the default certificate validity");
                super::certs::DEFAULT_CERT_VALID_FOR
            }),
            known_csvs: None,
        }
    }
}

/// What happened to one step (OLM's step statuses `Created` / `Present`, plus failure details).
#[derive(Debug, Clone, PartialEq)]
pub enum StepStatus {
    /// The object did not exist and was created.
    Created,
    /// The object existed; `changed` says whether the apply modified it (its resourceVersion
    /// changed).
    Present {
        /// Whether the object was modified.
        changed: bool,
    },
    /// The step failed; nothing after it was applied.
    Failed(StepError),
    /// Not applied because the step with this index failed first.
    NotApplied {
        /// Index (in the step list) of the failed step.
        blocked_by: usize,
    },
}

/// The result of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// Index of the step in the list given to [`apply`].
    pub index: usize,
    /// The step's kind.
    pub kind: String,
    /// The step's name.
    pub name: String,
    /// The step's namespace (`None` for cluster-scoped objects).
    pub namespace: Option<String>,
    /// What happened.
    pub status: StepStatus,
    /// The object's UID after the apply, when it was applied.
    pub uid: Option<String>,
}

impl StepResult {
    /// Whether the step was applied (`Created` or `Present`).
    pub fn applied(&self) -> bool {
        matches!(self.status, StepStatus::Created | StepStatus::Present { .. })
    }
}

impl fmt::Display for StepResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let obj = match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        };
        match &self.status {
            StepStatus::Created => write!(f, "{obj}: Created"),
            StepStatus::Present { changed: true } => write!(f, "{obj}: Present (updated)"),
            StepStatus::Present { changed: false } => write!(f, "{obj}: Present"),
            StepStatus::Failed(e) => write!(f, "{obj}: Failed: {e}"),
            StepStatus::NotApplied { blocked_by } => write!(f, "{obj}: not applied, step {blocked_by} failed"),
        }
    }
}

/// Why a step failed. Messages name the object and say what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepError {
    /// The API server refused the client (HTTP 403).
    #[error("{object}: forbidden: {identity} cannot {verb} {resource}{}: {message}; grant the permission (for a scoped install, to the OperatorGroup's ServiceAccount) or install with an account that has it", namespace.as_ref().map(|n| format!(" in namespace {n}")).unwrap_or_default())]
    Forbidden {
        /// The step's object, `Kind namespace/name`.
        object: String,
        /// The verb refused: `get` (reading the object first), `patch` (server-side apply) or
        /// `get` on an owner.
        verb: String,
        /// The resource, `plural.group` (or `plural` for the core group).
        resource: String,
        /// The namespace, for namespaced resources.
        namespace: Option<String>,
        /// Who the client is: user name and groups from a SelfSubjectReview, or as the API server
        /// named it in its message.
        identity: String,
        /// The API server's message.
        message: String,
    },
    /// The API server does not serve the kind (HTTP 404 on the resource type), e.g. a
    /// `ServiceMonitor` without the Prometheus operator's CRDs.
    #[error(
        "{object}: the API server does not serve {api_version} {kind}; install the API (its CRD) first or remove the object from the bundle"
    )]
    ApiNotAvailable {
        /// The step's object.
        object: String,
        /// The apiVersion asked for.
        api_version: String,
        /// The kind asked for.
        kind: String,
    },
    /// The API server rejected the object (HTTP 400/422: schema or validation).
    #[error("{object}: rejected by the API server ({reason}): {message}; fix the object in the bundle")]
    Invalid {
        /// The step's object.
        object: String,
        /// The API server's reason, e.g. `Invalid`.
        reason: String,
        /// The API server's message.
        message: String,
    },
    /// A CRD did not become Established (or its names were not accepted) in time.
    #[error("CustomResourceDefinition {crd}: not Established after {waited:?}: {message}")]
    NotEstablished {
        /// The CRD name.
        crd: String,
        /// How long capstan waited.
        waited: Duration,
        /// The CRD's conditions as last seen, or the reason names were refused.
        message: String,
    },
    /// An ownerReference names an object that does not exist after all steps ran.
    #[error("{object}: owner {owner} does not exist; apply the plan including its owner")]
    OwnerMissing {
        /// The step's object.
        object: String,
        /// The owner, `Kind name`.
        owner: String,
    },
    /// Transient errors went on past [`ApplyOptions::retry_timeout`].
    #[error(
        "{object}: {verb} failed {attempts} times over {elapsed:?}, last error: {last}; check the API server's health"
    )]
    RetriesExhausted {
        /// The step's object.
        object: String,
        /// The verb being retried.
        verb: String,
        /// Attempts made.
        attempts: u32,
        /// Time spent.
        elapsed: Duration,
        /// The last error.
        last: String,
    },
    /// The step itself is malformed (no name, kind unknown to the cluster's discovery…).
    #[error("{object}: {message}")]
    BadStep {
        /// The step's object.
        object: String,
        /// What is wrong.
        message: String,
    },
    /// The object exists and is not this operator's: capstan never takes over an object it did
    /// not create for the same operator (see [`takeover_refused`]).
    #[error(
        "{object}: already exists and {owner}; capstan does not take over objects it did not create for this operator: delete or rename the existing object, rename it in the bundle, or — if it really is this operator's — label it {label}=\"\" to hand it over"
    )]
    Conflict {
        /// The step's object.
        object: String,
        /// Who the existing object belongs to, as a phrase (`belongs to operator cert-manager.ops`,
        /// `is a Kubernetes bootstrap object`, `was not created by capstan or OLM`).
        owner: String,
        /// The component label that marks the object as this operator's.
        label: String,
    },
    /// Any other API error.
    #[error("{object}: {verb} failed: {message}")]
    Api {
        /// The step's object.
        object: String,
        /// The verb.
        verb: String,
        /// The error.
        message: String,
    },
}

/// Applies `steps` in order, wave by wave ([`waves`]; see the module documentation), and returns
/// one [`StepResult`] per step, in the same order. Never panics; a failure is a
/// [`StepStatus::Failed`] result, the other steps of its wave report their own outcome, and every
/// step of a later wave is [`StepStatus::NotApplied`] naming the first failed step. Every step is
/// applied with `client`; [`apply_as`] applies CRDs with another.
pub async fn apply(client: &Client, steps: &[Step], opts: &ApplyOptions) -> Vec<StepResult> {
    apply_as(Appliers { steps: client, crds: client }, steps, opts).await
}

/// Who applies a plan's steps ([`apply_as`]). A scoped install (OperatorGroup
/// `spec.serviceAccountName`) applies its CRDs with capstan's own client and every other step
/// with a client impersonating the ServiceAccount, as OLM v0.46.0's `ExecutePlan` does
/// (`pkg/controller/operators/catalog/operator.go`: CRD steps go to the step builder of
/// `step.go`, made from the unattenuated client; the other steps to the attenuated one).
#[derive(Clone, Copy)]
pub struct Appliers<'a> {
    /// Applies every step but the CRDs, reads their objects and issues their certificates.
    pub steps: &'a Client,
    /// Applies the CRD steps ([`Step::is_crd`]), reads them and waits until they are established.
    pub crds: &'a Client,
}

impl<'a> Appliers<'a> {
    /// The client that applies `step`.
    pub fn of(&self, step: &Step) -> &'a Client {
        if step.is_crd() { self.crds } else { self.steps }
    }
}

/// [`apply`] with the clients of `appliers`: each step is read and applied by the client
/// [`Appliers::of`] gives for it, so a `Forbidden` names the identity that was refused.
pub async fn apply_as(appliers: Appliers<'_>, steps: &[Step], opts: &ApplyOptions) -> Vec<StepResult> {
    let client = appliers.steps;
    // Serving Secrets of webhooks / APIServices: certificates kept or issued now, and the CA
    // written into the steps that need it; the plan itself never holds key material.
    let filled: Vec<Step>;
    let steps = if steps.iter().any(super::webhook::is_planned_serving_secret) {
        match with_certificates(client, steps, opts).await {
            Ok(v) => {
                filled = v;
                &filled[..]
            }
            Err((at, e)) => {
                tracing::warn!(step = %steps[at].describe(), error = %e, "install step failed");
                return results_of(steps, |i| {
                    if i == at { StepStatus::Failed(e.clone()) } else { StepStatus::NotApplied { blocked_by: at } }
                });
            }
        }
    } else {
        steps
    };
    let mut ap = Applier {
        clients: appliers,
        opts,
        uids: HashMap::new(),
        absent: Default::default(),
        identities: HashMap::new(),
        existing: HashMap::new(),
        unreadable: HashMap::new(),
        alongside: HashMap::new(),
    };
    // Before the first step: every object that exists must be this operator's, so that a
    // refused takeover leaves nothing half-applied.
    if let Some(refused) = ap.check_ownership(steps).await {
        return refused;
    }
    ap.apply_waves(steps).await
}

/// One [`StepResult`] per step, not applied yet, with the status `status` gives its index.
fn results_of(steps: &[Step], status: impl Fn(usize) -> StepStatus) -> Vec<StepResult> {
    steps
        .iter()
        .enumerate()
        .map(|(i, step)| StepResult {
            index: i,
            kind: step.kind.clone(),
            name: step.name.clone(),
            namespace: step.namespace.clone(),
            status: status(i),
            uid: None,
        })
        .collect()
}

/// The outcome of one step's PATCH ([`Applier::send_together`]): its status, the object's UID
/// and whether an owner is still pending, or the step's error.
type Sent = Result<(StepStatus, Option<String>, bool), StepError>;

/// Where [`Applier::apply_waves`] is in the plan.
struct Progress {
    /// One per step, in step order.
    results: Vec<StepResult>,
    /// CRD steps applied and not yet waited for.
    pending_crds: Vec<usize>,
    /// Steps applied without an ownerReference whose owner did not exist yet.
    deferred: Vec<usize>,
    /// The first step that failed.
    failed: Option<usize>,
}

impl Progress {
    /// Records the outcomes of a wave's sent steps ([`Applier::send_together`]).
    fn record(&mut self, steps: &[Step], sent: Vec<(usize, Sent)>) {
        for (i, outcome) in sent {
            let step = &steps[i];
            match outcome {
                Ok((status, uid, owner_pending)) => {
                    self.results[i].status = status;
                    self.results[i].uid = uid;
                    if step.kind == "CustomResourceDefinition" {
                        self.pending_crds.push(i);
                    }
                    if owner_pending {
                        self.deferred.push(i);
                    }
                }
                Err(e) => {
                    tracing::warn!(step = %step.describe(), error = %e, "install step failed");
                    self.results[i].status = StepStatus::Failed(e);
                    self.failed = Some(self.failed.map_or(i, |f| f.min(i)));
                }
            }
        }
    }
}

/// The kinds whose first-pass applies go out together when they follow each other in a plan
/// ([`waves`]): nothing in a plan needs them to exist first, except the role a binding names.
const SENT_TOGETHER: [&str; 7] =
    ["ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "Service", "ConfigMap"];

/// The order [`apply`] sends `steps` in: waves of step indices, each wave's PATCHes sent together
/// after the previous wave's are answered. A run of consecutive [`SENT_TOGETHER`] steps is one
/// wave, or two when a binding in it names a role the run creates (the roles first: the API
/// server checks a binding against the rules of the role it names, so a binder without
/// `bind`/`escalate` — a scoped install's ServiceAccount — is refused a binding to a role that
/// is not there yet). Every other step (CRDs, the CSV, Deployments, webhooks, Secrets, CRs) is a
/// wave of its own, in plan order (`reference/olm-v0.md` §5.1 item 6). Pure.
pub(crate) fn waves(steps: &[Step]) -> Vec<Vec<usize>> {
    let together = |s: &Step| SENT_TOGETHER.contains(&s.kind.as_str());
    let mut out = Vec::new();
    let mut i = 0;
    while i < steps.len() {
        if !together(&steps[i]) {
            out.push(vec![i]);
            i += 1;
            continue;
        }
        let end = (i..steps.len()).find(|&j| !together(&steps[j])).unwrap_or(steps.len());
        let run = &steps[i..end];
        let creates_role = |kind: &str, name: &str, ns: &Option<String>| {
            run.iter().any(|r| r.kind == kind && r.name == name && (kind == "ClusterRole" || r.namespace == *ns))
        };
        let binds_new_role = |s: &Step| {
            matches!(s.kind.as_str(), "RoleBinding" | "ClusterRoleBinding") && {
                let kind = s.manifest.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or("");
                let name = s.manifest.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("");
                creates_role(kind, name, &s.namespace)
            }
        };
        let (later, first): (Vec<usize>, Vec<usize>) = (i..end).partition(|&j| binds_new_role(&steps[j]));
        out.push(first);
        if !later.is_empty() {
            out.push(later);
        }
        i = end;
    }
    out
}

/// `steps` with their serving Secrets' certificates filled in: the existing Secret of each is
/// read, and [`super::webhook::fill_certificates`] keeps or issues them. Err: the index of the
/// Secret step that could not be read or issued, and why.
async fn with_certificates(
    client: &Client,
    steps: &[Step],
    opts: &ApplyOptions,
) -> Result<Vec<Step>, (usize, StepError)> {
    use k8s_openapi::api::core::v1::Secret;
    let mut existing = std::collections::BTreeMap::new();
    for (i, s) in steps.iter().enumerate().filter(|(_, s)| super::webhook::is_planned_serving_secret(s)) {
        let ns = s.namespace.clone().unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let start = Instant::now();
        let found = loop {
            match api.get_opt(&s.name).await {
                Ok(v) => break v,
                Err(e) if is_transient(&e) && start.elapsed() < opts.retry_timeout => {
                    tokio::time::sleep(opts.initial_backoff).await
                }
                Err(e) => {
                    return Err((
                        i,
                        StepError::Api { object: s.describe(), verb: "get".into(), message: e.to_string() },
                    ));
                }
            }
        };
        if let Some(data) = found.and_then(|x| x.data) {
            existing.insert((ns, s.name.clone()), data.into_iter().map(|(k, v)| (k, v.0)).collect());
        }
    }
    let mut out = steps.to_vec();
    let outcomes =
        super::webhook::fill_certificates(&mut out, &existing, time::OffsetDateTime::now_utc(), opts.cert_validity)
            .map_err(|e| {
                let at = steps.iter().position(super::webhook::is_planned_serving_secret).unwrap_or(0);
                (at, StepError::BadStep { object: steps[at].describe(), message: e.to_string() })
            })?;
    for o in outcomes {
        match &o.issued {
            Some(reason) => {
                tracing::info!(secret = %format!("{}/{}", o.namespace, o.secret), %reason, ca_hash = %o.ca_hash, "serving certificate issued")
            }
            None => tracing::debug!(secret = %format!("{}/{}", o.namespace, o.secret), "serving certificate kept"),
        }
    }
    Ok(out)
}

struct Applier<'a> {
    clients: Appliers<'a>,
    opts: &'a ApplyOptions,
    /// (apiVersion, kind, namespace, name) → uid of objects applied in this run.
    uids: HashMap<(String, String, String, String), String>,
    /// Owners read and found missing in this run: not read again (the plan's own CSV is applied
    /// after the objects it owns; once applied, its uid is in `uids`).
    absent: std::collections::HashSet<(String, String, String, String)>,
    /// Whether the client is the CRDs' ([`Appliers::crds`]) → its identity, once asked.
    identities: HashMap<bool, String>,
    /// Step index → resourceVersion of the object before the apply (`None`: it did not exist),
    /// read by [`Applier::check_ownership`].
    existing: HashMap<usize, Option<String>>,
    /// Step index → the error reading its object failed with in [`Applier::check_ownership`].
    unreadable: HashMap<usize, StepError>,
    /// CRD step index → the installed-alongside annotations of the CRD on the cluster that name
    /// CSVs of other namespaces (`super::plan::installed_alongside_elsewhere`), read by
    /// [`Applier::check_ownership`]; those whose CSV still exists are applied again with it.
    alongside: HashMap<usize, Vec<(String, String, String)>>,
}

/// The installed-alongside annotations of the CRD `found` (the object of CRD step `step` on the
/// cluster) that name CSVs of other namespaces than the plan's (the namespace of the step's own
/// installed-alongside annotation); empty for other steps. Pure.
fn alongside_elsewhere(step: &Step, found: &DynamicObject) -> Vec<(String, String, String)> {
    if step.kind != "CustomResourceDefinition" || step.namespace.is_some() {
        return Vec::new();
    }
    let Some(annotations) = found.metadata.annotations.as_ref() else { return Vec::new() };
    let own = step.manifest.pointer("/metadata/annotations").and_then(Value::as_object).into_iter().flatten().find_map(
        |(k, v)| {
            k.starts_with(super::plan::ANNOTATION_INSTALLED_ALONGSIDE)
                .then(|| v.as_str()?.split_once('/').map(|(ns, _)| ns.to_string()))
                .flatten()
        },
    );
    super::plan::installed_alongside_elsewhere(annotations, own.as_deref().unwrap_or_default())
}

/// A step ready for its PATCH ([`Applier::prepare`]).
struct Prepared {
    ar: ApiResource,
    manifest: Value,
    /// The object's resourceVersion before the apply (`None`: it did not exist).
    before: Option<String>,
    /// An owner reference was dropped because its owner does not exist yet.
    owner_pending: bool,
}

enum Attempt<T> {
    Done(T),
    Failed(KubeError, u32, Duration),
}

impl Applier<'_> {
    /// Reads every step's object once and refuses the whole plan (one [`StepError::Conflict`]
    /// per refused object, every other step [`StepStatus::NotApplied`]) when any existing object
    /// is not this operator's ([`takeover_refused`]). Objects whose API is not served yet (a CR
    /// of a CRD the plan installs) cannot exist and are skipped; a read that fails ends the check
    /// and becomes that step's failure when its turn comes.
    async fn check_ownership(&mut self, steps: &[Step]) -> Option<Vec<StepResult>> {
        // The reads are independent: once the API server has answered one, the others go out
        // together (two round trips on the critical path, not one per step) and are then taken
        // in step order, as one after the other would. The first read goes alone so that an API
        // server that fails it is not asked for every step, each retried (the later steps are
        // not applied then, so they need no read: `tests/it/install_retry.rs`).
        let mut reads = Vec::with_capacity(steps.len());
        for step in steps {
            let read = self.read_existing(step).await;
            let asked = read.is_some();
            reads.push(read);
            if asked {
                break;
            }
        }
        if let Some(Some((_, Attempt::Done(_)))) = reads.last() {
            let rest =
                futures::future::join_all(steps[reads.len()..].iter().map(|step| self.read_existing(step))).await;
            reads.extend(rest);
        }
        let mut conflicts: Vec<(usize, StepError)> = Vec::new();
        for (i, (step, read)) in steps.iter().zip(reads).enumerate() {
            let found = match read {
                None => continue,
                Some((_, Attempt::Done(found))) => found,
                // The step cannot be read: it fails with this error when its turn comes, and the
                // steps after it are not applied, so they need no check.
                Some((ar, Attempt::Failed(e, attempts, elapsed))) => {
                    let err = self.error(step, &ar, "get", e, attempts, elapsed).await;
                    self.unreadable.insert(i, err);
                    break;
                }
            };
            if let Some(obj) = &found
                && let Some((owner, label)) =
                    takeover_refused(step, obj.metadata.labels.as_ref(), declared_owned(step, steps))
            {
                conflicts.push((i, StepError::Conflict { object: step.describe(), owner, label }));
            }
            if let Some(obj) = &found {
                let elsewhere = alongside_elsewhere(step, obj);
                if !elsewhere.is_empty() {
                    self.alongside.insert(i, elsewhere);
                }
            }
            self.existing.insert(i, found.and_then(|o| o.metadata.resource_version));
        }
        let first = conflicts.first()?.0;
        let conflicts: HashMap<usize, StepError> = conflicts.into_iter().collect();
        Some(results_of(steps, |i| match conflicts.get(&i) {
            Some(e) => StepStatus::Failed(e.clone()),
            None => StepStatus::NotApplied { blocked_by: first },
        }))
    }

    /// Reads `step`'s object for [`Applier::check_ownership`]: `None` when the step names no
    /// object or its API is not served yet (a CR of a CRD the plan installs cannot exist), else
    /// the API resource and the read's outcome.
    async fn read_existing(&self, step: &Step) -> Option<(ApiResource, Attempt<Option<DynamicObject>>)> {
        if step.name.is_empty() || step.kind.is_empty() || step.version.is_empty() {
            return None;
        }
        let gvk = step.gvk();
        let ar = match kind_info(&step.kind) {
            Some(info) => ApiResource::from_gvk_with_plural(&gvk, info.plural),
            None => kube::discovery::pinned_kind(self.clients.of(step), &gvk).await.ok()?.0,
        };
        let api = self.api(step, &ar, step.namespace.as_deref());
        let found = self.retry(|| api.get_opt(&step.name)).await;
        Some((ar, found))
    }

    /// The waves of [`apply`] after the ownership check: each wave prepared and sent, CRDs waited
    /// for before the first wave that is not only CRDs, the deferred owners resolved at the end.
    async fn apply_waves(&mut self, steps: &[Step]) -> Vec<StepResult> {
        let mut p = Progress {
            results: results_of(steps, |_| StepStatus::NotApplied { blocked_by: 0 }),
            pending_crds: Vec::new(),
            deferred: Vec::new(),
            failed: None,
        };
        for wave in waves(steps) {
            if p.failed.is_none()
                && !p.pending_crds.is_empty()
                && wave.iter().any(|&i| steps[i].kind != "CustomResourceDefinition")
            {
                p.failed = self.wait_crds(steps, &mut p.pending_crds, &mut p.results).await;
            }
            let ready = self.prepare_wave(steps, &wave, &mut p).await;
            let sent = self.send_together(steps, ready).await;
            p.record(steps, sent);
            // A step of this wave left unsent names the first failed step, which may be one sent.
            if let Some(f) = p.failed {
                for &i in &wave {
                    if let StepStatus::NotApplied { blocked_by } = &mut p.results[i].status {
                        *blocked_by = f;
                    }
                }
            }
        }
        if p.failed.is_none() && !p.pending_crds.is_empty() {
            p.failed = self.wait_crds(steps, &mut p.pending_crds, &mut p.results).await;
        }
        if p.failed.is_none() {
            self.apply_deferred(steps, &p.deferred, &mut p.results).await;
        }
        p.results
    }

    /// The steps of `wave` prepared in step order; a step that cannot be prepared stops the wave
    /// there, as a failed step stops the plan (the steps after it are not sent).
    async fn prepare_wave(&mut self, steps: &[Step], wave: &[usize], p: &mut Progress) -> Vec<(usize, Prepared)> {
        let mut ready = Vec::with_capacity(wave.len());
        for &i in wave {
            if let Some(f) = p.failed {
                p.results[i].status = StepStatus::NotApplied { blocked_by: f };
                continue;
            }
            match self.prepare(i, &steps[i], false).await {
                Ok(prepared) => ready.push((i, prepared)),
                Err(e) => {
                    tracing::warn!(step = %steps[i].describe(), error = %e, "install step failed");
                    p.results[i].status = StepStatus::Failed(e);
                    p.failed = Some(i);
                }
            }
        }
        ready
    }

    /// Waits for every pending CRD; on failure marks its result failed and returns its index.
    async fn wait_crds(
        &mut self,
        steps: &[Step],
        pending: &mut Vec<usize>,
        results: &mut [StepResult],
    ) -> Option<usize> {
        for i in std::mem::take(pending) {
            if let Err(e) = self.wait_established(&steps[i].name).await {
                results[i].status = StepStatus::Failed(e);
                return Some(i);
            }
        }
        None
    }

    async fn wait_established(&self, name: &str) -> Result<(), StepError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.clients.crds.clone());
        let start = Instant::now();
        let mut last: String;
        loop {
            match api.get_opt(name).await {
                Ok(Some(crd)) => {
                    let conds = crd.status.and_then(|s| s.conditions).unwrap_or_default();
                    let is_true = |t: &str| conds.iter().any(|c| c.type_ == t && c.status == "True");
                    if let Some(c) = conds.iter().find(|c| c.type_ == "NamesAccepted" && c.status == "False") {
                        return Err(StepError::NotEstablished {
                            crd: name.to_string(),
                            waited: start.elapsed(),
                            message: format!(
                                "NamesAccepted=False ({}): {}; another CRD already uses these names",
                                c.reason.clone().unwrap_or_default(),
                                c.message.clone().unwrap_or_default()
                            ),
                        });
                    }
                    if is_true("Established") && is_true("NamesAccepted") {
                        return Ok(());
                    }
                    last = conds
                        .iter()
                        .map(|c| format!("{}={} {}", c.type_, c.status, c.message.clone().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join("; ");
                }
                Ok(None) => last = "the CRD is gone".into(),
                Err(e) if is_transient(&e) => last = e.to_string(),
                Err(e) => {
                    return Err(StepError::Api {
                        object: format!("CustomResourceDefinition {name}"),
                        verb: "get".into(),
                        message: e.to_string(),
                    });
                }
            }
            if start.elapsed() >= self.opts.crd_timeout {
                return Err(StepError::NotEstablished {
                    crd: name.to_string(),
                    waited: start.elapsed(),
                    message: last,
                });
            }
            tokio::time::sleep(self.opts.poll_interval).await;
        }
    }

    async fn api_resource(&self, step: &Step, gvk: &GroupVersionKind) -> Result<ApiResource, StepError> {
        if let Some(info) = kind_info(&step.kind) {
            return Ok(ApiResource::from_gvk_with_plural(gvk, info.plural));
        }
        match self.retry(|| kube::discovery::pinned_kind(self.clients.of(step), gvk)).await {
            Attempt::Done((ar, _caps)) => Ok(ar),
            Attempt::Failed(e, ..) => Err(StepError::BadStep {
                object: step.describe(),
                message: format!("cannot find the resource of {} {} by discovery: {e}", gvk.api_version(), gvk.kind),
            }),
        }
    }

    /// The API of `ar` in `namespace` (`None`: cluster-wide), as `step`'s client
    /// ([`Appliers::of`]) sees it.
    fn api(&self, step: &Step, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        let client = self.clients.of(step).clone();
        match namespace {
            Some(ns) => Api::namespaced_with(client, ns, ar),
            None => Api::all_with(client, ar),
        }
    }

    /// The deferred steps' second pass ([`apply`]): each step's owners resolved in turn (the
    /// owner, applied in the first pass, is known by now: no read), then the patches sent
    /// together, since they are independent. A step that fails gets its error.
    async fn apply_deferred(&mut self, steps: &[Step], deferred: &[usize], results: &mut [StepResult]) {
        let mut ready = Vec::with_capacity(deferred.len());
        for &i in deferred {
            match self.prepare(i, &steps[i], true).await {
                Ok(p) => ready.push((i, p)),
                Err(e) => results[i].status = StepStatus::Failed(e),
            }
        }
        for (i, outcome) in self.send_together(steps, ready).await {
            if let Err(e) = outcome {
                results[i].status = StepStatus::Failed(e);
            }
        }
    }

    /// Sends the PATCHes of the prepared steps `ready` (step index, prepared) together, then
    /// records each in step order ([`Applier::finish`]): per step its status, uid and whether an
    /// owner is still pending, or its error.
    async fn send_together(&mut self, steps: &[Step], ready: Vec<(usize, Prepared)>) -> Vec<(usize, Sent)> {
        let sent = futures::future::join_all(ready.iter().map(|(i, p)| self.send(&steps[*i], p))).await;
        let mut out = Vec::with_capacity(ready.len());
        for ((i, prepared), sent) in ready.into_iter().zip(sent) {
            out.push((i, self.finish(&steps[i], prepared, sent).await));
        }
        out
    }

    /// Everything a step's apply needs before its PATCH: the API, the manifest with its owners
    /// resolved, and the object's resourceVersion before (`None`: it did not exist).
    async fn prepare(&mut self, index: usize, step: &Step, final_pass: bool) -> Result<Prepared, StepError> {
        let object = step.describe();
        if step.name.is_empty() || step.kind.is_empty() || step.version.is_empty() {
            return Err(StepError::BadStep { object, message: "the step has no name, kind or version".into() });
        }
        if let Some(e) = self.unreadable.remove(&index) {
            return Err(e);
        }
        let gvk = step.gvk();
        let ar = self.api_resource(step, &gvk).await?;
        let api = self.api(step, &ar, step.namespace.as_deref());
        let mut manifest = step.manifest.clone();
        if let Some(obj) = manifest.as_object_mut() {
            obj.insert("apiVersion".into(), Value::String(step.api_version()));
            obj.insert("kind".into(), Value::String(step.kind.clone()));
        }
        let owner_pending = self.resolve_owners(step, &mut manifest, final_pass).await?;

        let before = match self.existing.remove(&index) {
            Some(before) => before,
            // The second pass of a step whose owner did not exist in the first: this run applied
            // the object a moment ago, so its status stays the first pass's (the caller keeps it)
            // and no read is needed.
            None if final_pass => None,
            None => match self.retry(|| api.get_opt(&step.name)).await {
                Attempt::Done(o) => o.and_then(|o| o.metadata.resource_version),
                Attempt::Failed(e, attempts, elapsed) => {
                    return Err(self.error(step, &ar, "get", e, attempts, elapsed).await);
                }
            },
        };
        // A CRD another namespace's install applied too keeps that install's installed-alongside
        // annotation while its CSV exists (OLM keeps it; the one field manager of every plan
        // would drop it otherwise).
        if let Some(elsewhere) = self.alongside.remove(&index) {
            for (key, value) in self.alongside_kept(elsewhere).await {
                super::plan::annotations_mut(&mut manifest).insert(key, Value::String(value));
            }
        }
        // A binding shared by the installs of one package in several namespaces keeps the
        // others' subjects (read just before the apply: another install may have added one).
        if super::webhook::is_shared_binding(step) {
            match self.retry(|| api.get_opt(&step.name)).await {
                Attempt::Done(Some(current)) => match serde_json::to_value(&current) {
                    Ok(current) => manifest = super::webhook::merge_shared_binding(&manifest, &current),
                    Err(e) => {
                        return Err(StepError::BadStep {
                            object,
                            message: format!("the object on the cluster cannot be read: {e}"),
                        });
                    }
                },
                Attempt::Done(None) => {}
                Attempt::Failed(e, attempts, elapsed) => {
                    return Err(self.error(step, &ar, "get", e, attempts, elapsed).await);
                }
            }
        }
        Ok(Prepared { ar, manifest, before, owner_pending })
    }

    /// Of the installed-alongside annotations `elsewhere` (key, CSV namespace, CSV name), those
    /// to keep, as (key, `namespace/name`): the CSV exists and is not a copy (OLM `IsCopied`:
    /// status reason `Copied`, or `olm.operatorNamespace` naming another namespace). A CSV that
    /// cannot be read (no access, a transient error) is assumed to exist, as OLM does. From
    /// [`ApplyOptions::known_csvs`] when given (OLM reads its lister too), else by GETs that go
    /// out together, made by the CRDs' client ([`Appliers::crds`], which applies the CRD).
    async fn alongside_kept(&self, elsewhere: Vec<(String, String, String)>) -> Vec<(String, String)> {
        use crate::api::ClusterServiceVersion;
        // Whether the CSV of `ns` counts: it exists and is not a copy.
        fn counts(csv: Option<&ClusterServiceVersion>, ns: &str) -> bool {
            csv.is_some_and(|c| {
                let copied = c.status.as_ref().and_then(|s| s.reason.as_ref()).is_some_and(|r| r.as_str() == "Copied");
                let owned_elsewhere = c
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("olm.operatorNamespace"))
                    .is_some_and(|o| o != ns);
                !copied && !owned_elsewhere
            })
        }
        let reads = elsewhere.iter().map(|(_, ns, name)| async move {
            match &self.opts.known_csvs {
                Some(store) => {
                    counts(store.get(&kube::runtime::reflector::ObjectRef::new(name).within(ns)).as_deref(), ns)
                }
                // A CSV that cannot be read is assumed to exist.
                None => Api::<ClusterServiceVersion>::namespaced(self.clients.crds.clone(), ns)
                    .get_opt(name)
                    .await
                    .map_or(true, |c| counts(c.as_ref(), ns)),
            }
        });
        let kept = futures::future::join_all(reads).await;
        elsewhere
            .into_iter()
            .zip(kept)
            .filter(|(_, keep)| *keep)
            .map(|((key, ns, name), _)| (key, format!("{ns}/{name}")))
            .collect()
    }

    /// The server-side apply of a prepared step (retried while transient).
    async fn send(&self, step: &Step, prepared: &Prepared) -> Attempt<DynamicObject> {
        let api = self.api(step, &prepared.ar, step.namespace.as_deref());
        let mut pp = PatchParams::apply(&self.opts.field_manager);
        pp.force = self.opts.force;
        let patch = Patch::Apply(&prepared.manifest);
        self.retry(|| api.patch(&step.name, &pp, &patch)).await
    }

    /// Records a sent step: its uid (for the owner references of later steps) and its status.
    async fn finish(&mut self, step: &Step, prepared: Prepared, sent: Attempt<DynamicObject>) -> Sent {
        let applied = match sent {
            Attempt::Done(o) => o,
            Attempt::Failed(e, attempts, elapsed) => {
                return Err(self.error(step, &prepared.ar, "patch", e, attempts, elapsed).await);
            }
        };
        let uid = applied.metadata.uid.clone();
        if let Some(u) = &uid {
            self.uids.insert(
                (step.api_version(), step.kind.clone(), step.namespace.clone().unwrap_or_default(), step.name.clone()),
                u.clone(),
            );
        }
        let status = match prepared.before {
            None => StepStatus::Created,
            Some(rv) => {
                StepStatus::Present { changed: applied.metadata.resource_version.as_deref() != Some(rv.as_str()) }
            }
        };
        tracing::debug!(step = %step.describe(), ?status, "applied install step");
        Ok((status, uid, prepared.owner_pending))
    }

    /// Fills empty ownerReference uids; removes the ones whose owner does not exist yet and
    /// returns whether any was removed.
    async fn resolve_owners(&mut self, step: &Step, manifest: &mut Value, final_pass: bool) -> Result<bool, StepError> {
        let ns = step.namespace.clone().unwrap_or_default();
        let Some(refs) = manifest.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut) else {
            return Ok(false);
        };
        let mut keep = Vec::with_capacity(refs.len());
        let mut pending = false;
        for mut r in std::mem::take(refs) {
            let uid_empty = r.get("uid").and_then(Value::as_str).is_none_or(str::is_empty);
            if !uid_empty {
                keep.push(r);
                continue;
            }
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let key = (s("apiVersion"), s("kind"), ns.clone(), s("name"));
            let uid = match self.uids.get(&key) {
                Some(u) => Some(u.clone()),
                None if self.absent.contains(&key) => None,
                None => {
                    let found = self.lookup_uid(step, &key).await?;
                    if found.is_none() {
                        self.absent.insert(key.clone());
                    }
                    found
                }
            };
            match uid {
                Some(u) => {
                    if let Some(o) = r.as_object_mut() {
                        o.insert("uid".into(), Value::String(u.clone()));
                    }
                    self.uids.insert(key, u);
                    keep.push(r);
                }
                None if final_pass => {
                    return Err(StepError::OwnerMissing {
                        object: step.describe(),
                        owner: format!("{} {}", key.1, key.3),
                    });
                }
                None => pending = true,
            }
        }
        let empty = keep.is_empty();
        *refs = keep;
        if empty && let Some(meta) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("ownerReferences");
        }
        Ok(pending)
    }

    async fn lookup_uid(
        &mut self,
        step: &Step,
        key: &(String, String, String, String),
    ) -> Result<Option<String>, StepError> {
        let (api_version, kind, ns, name) = key;
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version.as_str()));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let owner_step = Step {
            resolving: step.resolving.clone(),
            group: group.into(),
            version: version.into(),
            kind: kind.clone(),
            name: name.clone(),
            namespace: Some(ns.clone()),
            manifest: Value::Null,
        };
        let ar = self.api_resource(&owner_step, &gvk).await?;
        let api = self.api(&owner_step, &ar, Some(ns));
        match self.retry(|| api.get_opt(name)).await {
            Attempt::Done(o) => Ok(o.and_then(|o| o.metadata.uid)),
            // The owner's API not being served yet means the owner does not exist yet.
            Attempt::Failed(KubeError::Api(s), ..) if s.code == 404 => Ok(None),
            Attempt::Failed(e, attempts, elapsed) => {
                let mut err = self.error(&owner_step, &ar, "get", e, attempts, elapsed).await;
                if let StepError::Forbidden { object, .. } | StepError::Api { object, .. } = &mut err {
                    *object = format!("{} (owner of {})", object, step.describe());
                }
                Err(err)
            }
        }
    }

    async fn retry<T, F, Fut>(&self, mut f: F) -> Attempt<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, KubeError>>,
    {
        let start = Instant::now();
        let mut backoff = self.opts.initial_backoff;
        let mut attempts = 0;
        loop {
            attempts += 1;
            match f().await {
                Ok(v) => return Attempt::Done(v),
                Err(e) if is_transient(&e) && start.elapsed() < self.opts.retry_timeout => {
                    let mut wait = backoff;
                    if let KubeError::Api(s) = &e
                        && let Some(d) = &s.details
                        && d.retry_after_seconds > 0
                    {
                        wait = wait.max(Duration::from_secs(u64::from(d.retry_after_seconds)));
                    }
                    let left = self.opts.retry_timeout.saturating_sub(start.elapsed());
                    tracing::debug!(error = %e, ?wait, attempts, "transient API error, retrying");
                    tokio::time::sleep(wait.min(left).max(Duration::from_millis(1))).await;
                    backoff = (backoff * 2).min(self.opts.max_backoff);
                }
                Err(e) => return Attempt::Failed(e, attempts, start.elapsed()),
            }
        }
    }

    async fn error(
        &mut self,
        step: &Step,
        ar: &ApiResource,
        verb: &str,
        e: KubeError,
        attempts: u32,
        elapsed: Duration,
    ) -> StepError {
        let object = step.describe();
        let resource = if ar.group.is_empty() { ar.plural.clone() } else { format!("{}.{}", ar.plural, ar.group) };
        if is_transient(&e) {
            return StepError::RetriesExhausted { object, verb: verb.into(), attempts, elapsed, last: e.to_string() };
        }
        match e {
            KubeError::Api(s) if s.code == 403 => {
                let identity = self.identity(step, &s.message).await;
                StepError::Forbidden {
                    object,
                    verb: verb.into(),
                    resource,
                    namespace: step.namespace.clone(),
                    identity,
                    message: s.message.clone(),
                }
            }
            KubeError::Api(s) if s.code == 404 => {
                StepError::ApiNotAvailable { object, api_version: ar.api_version.clone(), kind: ar.kind.clone() }
            }
            KubeError::Api(s) if s.code == 400 || s.code == 422 => {
                StepError::Invalid { object, reason: s.reason.clone(), message: s.message.clone() }
            }
            KubeError::Api(s) if permanent_server_error(&s).is_some() => {
                let reason = permanent_server_error(&s).unwrap_or_default();
                let why = if reason == "RequestTooLarge" {
                    "the object is larger than the cluster stores in one object"
                } else {
                    "the object has a field its API version does not define"
                };
                StepError::Invalid {
                    object,
                    reason: reason.into(),
                    message: format!("{} (HTTP {}): {why}", s.message, s.code),
                }
            }
            other => StepError::Api { object, verb: verb.into(), message: other.to_string() },
        }
    }

    /// The identity of `step`'s client ([`Appliers::of`]) from a SelfSubjectReview, else the
    /// user the API server named in its Forbidden message (`User "x" cannot …`), else "the
    /// client".
    async fn identity(&mut self, step: &Step, message: &str) -> String {
        let crds = step.is_crd();
        if let Some(id) = self.identities.get(&crds) {
            return id.clone();
        }
        let from_review = whoami(self.clients.of(step)).await;
        let id = from_review
            .or_else(|| {
                let rest = message.split_once("User \"")?.1;
                Some(format!("user {:?}", rest.split_once('"')?.0))
            })
            .unwrap_or_else(|| "the client".into());
        self.identities.insert(crds, id.clone());
        id
    }
}

/// The client's identity from a SelfSubjectReview: `user "NAME" (groups A, B)`; `None` when the
/// review is not possible.
pub async fn whoami(client: &Client) -> Option<String> {
    let review = SelfSubjectReview { metadata: Default::default(), status: None };
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let r = api.create(&PostParams::default(), &review).await.ok()?;
    let u = r.status?.user_info?;
    let user = u.username?;
    let groups = u.groups.unwrap_or_default();
    Some(if groups.is_empty() {
        format!("user {user:?}")
    } else {
        format!("user {user:?} (groups {})", groups.join(", "))
    })
}

/// Label on the bootstrap objects the API server creates (`kubernetes.io/bootstrapping:
/// rbac-defaults` on its ClusterRoles and bindings).
const LABEL_BOOTSTRAPPING: &str = "kubernetes.io/bootstrapping";

/// Whether applying `step` would take over an existing object that is not this operator's; if
/// so, who the object belongs to (a phrase for [`StepError::Conflict`]) and the component label
/// that would mark it as this operator's.
///
/// An existing object is this operator's when it carries the step's component label
/// `operators.coreos.com/<package>.<namespace>` (capstan and OLM put it on everything they
/// install, `reference/olm-v0.md` §5.5), or — cluster-scoped objects only, such as a CRD shared
/// by two installs of one package — the component label of the same package in another
/// namespace (the label's name is `<package>.<namespace>` and a namespace has no dot); the same
/// holds for the auth bindings such installs share ([`super::webhook::is_shared_binding`]). A CRD
/// the plan's CSV declares owned (`declared_owned`, [`declared_owned`]) whose component labels
/// all name operators of the step's own namespace passes to this one (an API moved between two
/// packages of one namespace by the resolver).
/// Objects the API server bootstraps (label `kubernetes.io/bootstrapping`) are never this
/// operator's. A step without a component label (not planned by [`super::plan::steps`]) is not
/// checked.
///
/// OLM v0 updates such objects without asking; capstan refuses because a bundle is untrusted
/// input: one that shipped ClusterRole `system:basic-user` would otherwise make every user
/// cluster-admin.
pub fn takeover_refused(
    step: &Step,
    existing: Option<&std::collections::BTreeMap<String, String>>,
    declared_owned: bool,
) -> Option<(String, String)> {
    use super::COMPONENT_LABEL_PREFIX;
    let own = step
        .manifest
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .and_then(|l| l.keys().find(|k| k.starts_with(COMPONENT_LABEL_PREFIX)))?
        .clone();
    let empty = std::collections::BTreeMap::new();
    let labels = existing.unwrap_or(&empty);
    if labels.contains_key(LABEL_BOOTSTRAPPING) {
        return Some(("is a Kubernetes bootstrap object (label kubernetes.io/bootstrapping)".into(), own));
    }
    if labels.contains_key(&own) {
        return None;
    }
    let package_of = |key: &str| {
        key.strip_prefix(COMPONENT_LABEL_PREFIX).and_then(|rest| rest.rsplit_once('.')).map(|(pkg, _)| pkg.to_string())
    };
    if (step.namespace.is_none() || super::webhook::is_shared_binding(step))
        && let Some(pkg) = package_of(&own)
        && labels.keys().any(|k| package_of(k).as_deref() == Some(pkg.as_str()))
    {
        return None;
    }
    // A CRD passed from one operator of the namespace to another: OLM's resolver moves an API to
    // the package whose new bundle owns it when the old provider's new bundle no longer does
    // (operator-lifecycle-manager `TestSolveOperators_TransferApiOwnership`). Only a CRD the
    // plan's CSV declares owned (`declared_owned`): its API is one the resolver weighed, with one
    // provider per API in a namespace; a CRD a bundle merely ships is not.
    let namespace_of = |key: &str| {
        key.strip_prefix(COMPONENT_LABEL_PREFIX).and_then(|rest| rest.rsplit_once('.')).map(|(_, ns)| ns.to_string())
    };
    let components: Vec<&String> = labels.keys().filter(|k| k.starts_with(COMPONENT_LABEL_PREFIX)).collect();
    if step.is_crd()
        && declared_owned
        && let Some(ns) = namespace_of(&own)
        && !components.is_empty()
        && components.iter().all(|k| namespace_of(k).as_deref() == Some(ns.as_str()))
    {
        return None;
    }
    let others: Vec<&str> = labels.keys().filter_map(|k| k.strip_prefix(COMPONENT_LABEL_PREFIX)).collect();
    let owner = if !others.is_empty() {
        format!("belongs to operator {}", others.join(", "))
    } else if let Some(csv) = labels.get(super::LABEL_OWNER) {
        format!("belongs to ClusterServiceVersion {csv}")
    } else {
        "was not created by capstan or OLM".into()
    };
    Some((owner, own))
}

/// Whether CRD step `step` is one the CSV it is planned for declares in
/// `spec.customresourcedefinitions.owned` (the CSV step of `steps` named `step.resolving`). Pure.
pub fn declared_owned(step: &Step, steps: &[Step]) -> bool {
    step.is_crd()
        && steps.iter().filter(|s| s.kind == "ClusterServiceVersion" && s.name == step.resolving).any(|csv| {
            csv.manifest
                .pointer("/spec/customresourcedefinitions/owned")
                .and_then(Value::as_array)
                .is_some_and(|owned| owned.iter().any(|d| d.get("name").and_then(Value::as_str) == Some(&step.name)))
        })
}

/// Errors the API server reports as a 500 (or 413) that no retry changes, as the reason capstan
/// gives them: an object too large to store — HTTP 413 (over the API server's 3 MiB per
/// request) or etcd's "request is too large" (over its 1.5 MiB per object) — and a server-side
/// apply of an object with a field its type does not have ("failed to create typed patch
/// object … field not declared in schema": openebs 3.0.0's CRD has the `apiextensions/v1beta1`
/// field `spec.version`; OLM v0, which creates objects without server-side apply, has the field
/// dropped instead).
fn permanent_server_error(s: &kube::core::Status) -> Option<&'static str> {
    if s.code == 413 || s.message.contains("request is too large") {
        Some("RequestTooLarge")
    } else if s.code >= 500 && s.message.contains("failed to create typed patch object") {
        Some("FieldNotDeclared")
    } else {
        None
    }
}

/// Whether an error is worth retrying: 5xx (except [`permanent_server_error`]s), 429, 409
/// Conflict, server timeouts, connection errors.
fn is_transient(e: &KubeError) -> bool {
    match e {
        KubeError::Api(s) if permanent_server_error(s).is_some() => false,
        KubeError::Api(s) => {
            s.code >= 500 || s.code == 429 || s.code == 409 || s.reason == "ServerTimeout" || s.reason == "Timeout"
        }
        KubeError::HyperError(_) | KubeError::Service(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn transient_errors_are_the_retryable_ones() {
        let api = |code: u16, reason: &str| KubeError::Api(Status::failure("x", reason).with_code(code).boxed());
        for (code, reason) in [
            (500, "InternalError"),
            (503, "ServiceUnavailable"),
            (429, "TooManyRequests"),
            (409, "Conflict"),
            (504, "Timeout"),
        ] {
            assert!(is_transient(&api(code, reason)), "{code} {reason}");
        }
        for (code, reason) in [(403, "Forbidden"), (404, "NotFound"), (422, "Invalid"), (400, "BadRequest")] {
            assert!(!is_transient(&api(code, reason)), "{code} {reason}");
        }
        // Seen with a Service whose port was planned twice: the same object fails every time.
        let ports = KubeError::Api(Status::failure("failed to create typed patch object (ns/svc; /v1, Kind=Service): .spec.ports: duplicate entries for key [port=443,protocol=\"TCP\"]", "").with_code(500).boxed());
        assert!(!is_transient(&ports));
        // An object too large to store is as permanent as an invalid one: what the API server
        // answered for a 1.7 MB CRD (a 500 from etcd), and its own 413.
        let etcd = KubeError::Api(Status::failure("etcdserver: request is too large", "").with_code(500).boxed());
        assert!(!is_transient(&etcd));
        assert!(!is_transient(&api(413, "RequestEntityTooLarge")));
        // And a field the type does not have, as the API server answered openebs 3.0.0's CRD.
        let typed = KubeError::Api(Status::failure("failed to create typed patch object (/openebsinstalltemplates.openebs.io; apiextensions.k8s.io/v1, Kind=CustomResourceDefinition): .spec.version: field not declared in schema", "").with_code(500).boxed());
        assert!(!is_transient(&typed));
    }

    fn step(kind: &str, namespace: Option<&str>, component: &str) -> Step {
        Step {
            resolving: "op.v1".into(),
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            name: "x".into(),
            namespace: namespace.map(str::to_string),
            manifest: serde_json::json!({"metadata": {"name": "x", "labels": {component: ""}}}),
        }
    }

    /// nginx-operator's plan order (`install::plan`): the CRD alone; the ServiceAccount, Role,
    /// ClusterRole and Service together; then the two bindings, whose roles the wave before
    /// created; the CSV and the Deployment alone, in order. A binding to a role the plan does not
    /// create (the cluster's `view`), or in another namespace, needs no wave of its own.
    #[test]
    fn independent_steps_go_out_together_and_bindings_after_their_roles() {
        let named = |kind: &str, ns: Option<&str>, name: &str, role: Option<(&str, &str)>| {
            let mut s = step(kind, ns, "c");
            s.name = name.into();
            if let Some((k, n)) = role {
                s.manifest["roleRef"] =
                    serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": k, "name": n});
            }
            s
        };
        let plan = [
            named("CustomResourceDefinition", None, "nginxes.example.com", None),
            named("ServiceAccount", Some("ns"), "op", None),
            named("Role", Some("ns"), "op-role", None),
            named("RoleBinding", Some("ns"), "op-role", Some(("Role", "op-role"))),
            named("ClusterRole", None, "op-cr", None),
            named("ClusterRoleBinding", None, "op-cr", Some(("ClusterRole", "op-cr"))),
            named("Service", Some("ns"), "op-metrics", None),
            named("ClusterServiceVersion", Some("ns"), "op.v1", None),
            named("Deployment", Some("ns"), "op", None),
        ];
        assert_eq!(waves(&plan), vec![vec![0], vec![1, 2, 4, 6], vec![3, 5], vec![7], vec![8]]);
        let others = [
            named("ServiceAccount", Some("ns"), "op", None),
            named("RoleBinding", Some("ns"), "op-view", Some(("ClusterRole", "view"))),
            named("Role", Some("other"), "r", None),
            named("RoleBinding", Some("ns"), "r", Some(("Role", "r"))),
            named("Secret", Some("ns"), "cert", None),
            named("ConfigMap", Some("ns"), "cm", None),
        ];
        assert_eq!(waves(&others), vec![vec![0, 1, 2, 3], vec![4], vec![5]]);
        assert!(waves(&[]).is_empty());
    }

    fn labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// Only a CRD the plan's CSV lists in `spec.customresourcedefinitions.owned` counts as owned.
    #[test]
    fn a_crd_is_declared_owned_by_its_csv_step() {
        let own = "operators.coreos.com/op.ns1";
        let crd = Step { group: "apiextensions.k8s.io".into(), ..step("CustomResourceDefinition", None, own) };
        let mut csv = step("ClusterServiceVersion", Some("ns1"), own);
        csv.name = "op.v1".into();
        assert!(!declared_owned(&crd, &[crd.clone(), csv.clone()]), "the CSV owns nothing");
        csv.manifest = serde_json::json!({"spec": {"customresourcedefinitions": {"owned": [{"name": "x"}]}}});
        assert!(declared_owned(&crd, &[crd.clone(), csv.clone()]));
        csv.name = "other.v1".into();
        assert!(!declared_owned(&crd, &[crd.clone(), csv]), "another CSV's");
    }

    #[test]
    fn only_this_operators_objects_are_taken_over() {
        let own = "operators.coreos.com/op.ns1";
        let ns_step = step("ConfigMap", Some("ns1"), own);
        let crd_step = Step { group: "apiextensions.k8s.io".into(), ..step("CustomResourceDefinition", None, own) };
        // Its own component label: updated, in any scope.
        assert_eq!(takeover_refused(&ns_step, Some(&labels(&[(own, "")])), false), None);
        assert_eq!(takeover_refused(&crd_step, Some(&labels(&[(own, "")])), true), None);
        // The same package installed in another namespace shares its cluster-scoped objects only.
        let other_ns = labels(&[("operators.coreos.com/op.ns2", "")]);
        assert_eq!(takeover_refused(&crd_step, Some(&other_ns), true), None);
        assert_eq!(
            takeover_refused(&ns_step, Some(&other_ns), false),
            Some(("belongs to operator op.ns2".into(), own.into()))
        );
        // A CRD of another operator of the same namespace passes over (the resolver moved its
        // API to this one); of another package elsewhere, or any other object of another
        // package, a bootstrap object, an object nobody labelled: refused.
        let other_pkg = labels(&[("operators.coreos.com/opx.ns1", "")]);
        assert_eq!(takeover_refused(&crd_step, Some(&other_pkg), true), None);
        assert_eq!(
            takeover_refused(&crd_step, Some(&other_pkg), false),
            Some(("belongs to operator opx.ns1".into(), own.into())),
            "a CRD the bundle ships without declaring it owned"
        );
        assert_eq!(
            takeover_refused(&ns_step, Some(&other_pkg), false),
            Some(("belongs to operator opx.ns1".into(), own.into()))
        );
        let elsewhere = labels(&[("operators.coreos.com/opx.ns1", ""), ("operators.coreos.com/opx.ns2", "")]);
        assert_eq!(
            takeover_refused(&crd_step, Some(&elsewhere), true),
            Some(("belongs to operator opx.ns1, opx.ns2".into(), own.into()))
        );
        let boot = labels(&[("kubernetes.io/bootstrapping", "rbac-defaults")]);
        assert!(takeover_refused(&crd_step, Some(&boot), true).is_some_and(|(o, _)| o.contains("bootstrap")));
        assert_eq!(
            takeover_refused(&crd_step, None, true),
            Some(("was not created by capstan or OLM".into(), own.into()))
        );
        let csv_owned = labels(&[("olm.owner", "other.v2")]);
        assert_eq!(
            takeover_refused(&ns_step, Some(&csv_owned), false).map(|o| o.0),
            Some("belongs to ClusterServiceVersion other.v2".into())
        );
        // A step that capstan did not plan (no component label) is not checked.
        let mut raw = step("ConfigMap", Some("ns1"), own);
        raw.manifest = serde_json::json!({"metadata": {"name": "x"}});
        assert_eq!(takeover_refused(&raw, None, false), None);
        let e = StepError::Conflict {
            object: "ClusterRole system:basic-user".into(),
            owner: "is a Kubernetes bootstrap object (label kubernetes.io/bootstrapping)".into(),
            label: own.into(),
        };
        assert_eq!(
            e.to_string(),
            "ClusterRole system:basic-user: already exists and is a Kubernetes bootstrap object (label kubernetes.io/bootstrapping); capstan does not take over objects it did not create for this operator: delete or rename the existing object, rename it in the bundle, or — if it really is this operator's — label it operators.coreos.com/op.ns1=\"\" to hand it over"
        );
    }

    #[test]
    fn results_display_the_object_and_outcome() {
        let r = StepResult {
            index: 3,
            kind: "Role".into(),
            name: "r".into(),
            namespace: Some("ns".into()),
            status: StepStatus::Failed(StepError::Forbidden {
                object: "Role ns/r".into(),
                verb: "patch".into(),
                resource: "roles.rbac.authorization.k8s.io".into(),
                namespace: Some("ns".into()),
                identity: "user \"system:serviceaccount:ns:installer\"".into(),
                message: "denied".into(),
            }),
            uid: None,
        };
        let text = r.to_string();
        for part in [
            "Role ns/r",
            "patch",
            "roles.rbac.authorization.k8s.io",
            "system:serviceaccount:ns:installer",
            "in namespace ns",
        ] {
            assert!(text.contains(part), "{text} lacks {part}");
        }
        assert!(!r.applied());
    }
}
