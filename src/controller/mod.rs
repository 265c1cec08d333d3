//! The controller (`capstan controller`): kube-rs [`Controller`]s for CatalogSource, Subscription,
//! InstallPlan, ClusterServiceVersion and OperatorGroup in one process, sharing one [`Context`].
//!
//! Flow (`reference/olm-v0.md` §1.2–1.5, §5): a CatalogSource's `spec.image` is pulled by digest and
//! its index kept in memory; a Subscription is resolved against the catalogs its namespace can see
//! (its own namespace and the global catalog namespace) and gets one InstallPlan per resolution; an
//! approved InstallPlan pulls each bundle image, plans its steps ([`crate::install::plan::steps`])
//! and applies them ([`crate::install::apply::apply`]); a CSV moves Pending → InstallReady →
//! Installing → Succeeded once its Deployments are Available, or Failed when the OperatorGroup does
//! not fit.
//!
//! Every status is written once per reconcile on the status subresource with field manager
//! [`crate::install::FIELD_MANAGER`] (`capstan`): server-side apply of the typed status, or, for
//! InstallPlans and OperatorGroups, a merge patch of the whole typed status (see their reconcilers).

mod catalogs;
mod catalogsource;
mod configmap_catalogs;
mod copied_csvs;
mod csv;
pub mod events;
#[cfg(test)]
mod fixtures;
mod handoff;
mod installplan;
pub mod leader;
mod olmconfig;
mod operator;
mod operator_groups;
mod operator_labels;
mod operatorgroup;
mod rbac;
mod registries;
pub mod registry_services;
mod removal;
mod scoped;
mod serving;
mod subscription;
#[cfg(test)]
pub(crate) mod testing;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde_json::Value;

use crate::api::{CatalogSource, ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use crate::install::FIELD_MANAGER;
use crate::metrics::Metrics;

pub use catalogs::{CatalogChange, CatalogState, CatalogStore, LoadedIndex};
pub use catalogsource::mirror_once;
pub use events::Events;
pub use serving::serve_discovery;

pub use crate::install::operator_group::{InstallModeError, check_install_mode};
pub use handoff::install_plan_name;
pub use removal::{
    ANNOTATION_UNINSTALL_CRDS, ANNOTATION_UNINSTALL_OPERANDS, ANNOTATION_UNINSTALL_TIMEOUT, CSV_FINALIZER,
    DEFAULT_UNINSTALL_TIMEOUT, SUBSCRIPTION_FINALIZER,
};

/// Settings of [`run`].
#[derive(Debug, Clone)]
pub struct Options {
    /// The namespace whose CatalogSources every namespace can see (OLM's `--global-catalog-namespace`,
    /// `olm` by default; §1.2).
    pub global_catalog_namespace: String,
    /// Where loaded catalogs are cached on disk (by digest); `None` keeps them only in memory.
    pub catalog_cache: Option<std::path::PathBuf>,
    /// Registries (`host` or `host:port`) of catalog and bundle images reached over plain HTTP
    /// although they are not loopback (`capstan controller --insecure-registry`;
    /// [`crate::oci::ClientConfig::insecure_registries`]). Empty: TLS for every non-loopback registry.
    pub insecure_registries: Vec<String>,
    /// Registry mirrors for catalog and bundle images (`capstan controller --registries-conf`;
    /// [`crate::oci::ClientConfig::registries`]). `None`: each image from where it names.
    pub registries_conf: Option<std::sync::Arc<crate::oci::RegistriesConf>>,
    /// Build each loaded catalog's PackageManifests and content buffer
    /// ([`LoadedIndex::served`]) for the discovery servers ([`crate::discovery::served`]).
    pub discovery: bool,
    /// Validity of the webhook / APIService serving certificates this controller issues and
    /// rotates; `None`: OLM's two years or `$CAPSTAN_CERT_VALIDITY`
    /// ([`crate::install::apply::ApplyOptions::cert_validity`]). Rotation is due a day before
    /// expiry, or after three quarters of a validity under four days ([`crate::install::certs::min_fresh`]).
    pub cert_validity: Option<std::time::Duration>,
    /// Serve each catalog capstan loads over operator-registry's gRPC API, with a Service and
    /// EndpointSlice per CatalogSource and `status.registryService`
    /// ([`registry_services`]; `capstan controller --registry-listen`). `None`: off.
    pub registry: Option<registry_services::RegistryOptions>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            global_catalog_namespace: "olm".into(),
            catalog_cache: None,
            insecure_registries: Vec::new(),
            registries_conf: None,
            discovery: false,
            cert_validity: None,
            registry: None,
        }
    }
}

impl Options {
    /// How this controller applies InstallPlan steps and rotates certificates: the defaults of
    /// [`crate::install::apply::ApplyOptions`] with [`Options::cert_validity`].
    pub fn apply_options(&self) -> crate::install::apply::ApplyOptions {
        let defaults = crate::install::apply::ApplyOptions::default();
        crate::install::apply::ApplyOptions {
            cert_validity: self.cert_validity.unwrap_or(defaults.cert_validity),
            ..defaults
        }
    }
}

/// State shared by every reconciler (one per process, in an [`Arc`]).
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The configuration `client` was built from, when known ([`run_with_config`]): scoped installs
    /// (OperatorGroup `spec.serviceAccountName`) derive an impersonating client from it.
    pub config: Option<kube::Config>,
    /// Settings.
    pub options: Options,
    /// Every CatalogSource's catalog: loading, loaded, or failed with why. Shared with the
    /// discovery servers, which read it ([`crate::discovery::served`]).
    pub catalogs: Arc<CatalogStore>,
    /// Where the reconcilers record their metrics (`GET /metrics` of `capstan controller`).
    pub metrics: Arc<Metrics>,
    /// The Event recorder of this process.
    pub events: Events,
    /// UIDs of the CSVs whose RBAC aggregation this process applied (`csv::decide`: as the CSV
    /// left InstallReady), so that it is not applied again on its way to Succeeded; removed
    /// when the CSV is gone.
    pub aggregated: Mutex<std::collections::HashSet<String>>,
    /// The `metadata.generation` of each CSV an InstallPlan installed (by UID) whose install
    /// strategy this process found in place (`csv::unit::install`): its Deployments are not
    /// planned and read again until the CSV's spec or its Subscription's spec changes
    /// ([`installed_csv_of`]); removed when the CSV is gone.
    pub strategy_checked: Mutex<HashMap<String, i64>>,
    /// Transient failures in a row per InstallPlan (namespace, name), for its retry backoff
    /// (`installplan::retry_backoff`); removed when the plan completes.
    pub plan_retries: Mutex<HashMap<(String, String), u32>>,
    /// Bundle pulls this process has started, per InstallPlan (namespace, name) and bundle lookup
    /// index: a `Pulling` marker in a plan's status that is not in this set was left by an earlier
    /// process that stopped while pulling (`installplan::mark_pulling`).
    pub pulls_started: Mutex<std::collections::HashSet<(String, String, usize)>>,
    /// Failed reconciles in a row per object (`Kind namespace/name`) and when the last one was,
    /// for [`error_policy`]'s backoff; a failure long after the last one starts a new row.
    pub reconcile_failures: Mutex<HashMap<String, (u32, std::time::Instant)>>,
    /// Registry clients by namespace and pull-secret content ([`registries::registry_for`]),
    /// reused across reconciles: building one loads the system's root certificates.
    pub(crate) registries: Mutex<HashMap<String, crate::oci::Registry>>,
    /// Per kind: when [`error_policy`] last logged a failure, and how many it left unlogged
    /// since (at most one line per kind every [`ERROR_LOG_INTERVAL`]).
    pub error_log: Mutex<HashMap<String, (std::time::Instant, u64)>>,
    /// Sends `()` to re-reconcile every Subscription (a catalog got a new digest).
    resync_subscriptions: mpsc::UnboundedSender<()>,
    /// Sends `(package, namespace)` to bring that Operator object up to date ([`operator::run`]);
    /// set when the controllers start.
    operator_syncs: Mutex<Option<mpsc::UnboundedSender<(String, String)>>>,
    /// The webhook configurations and APIServices labelled as a CSV's, as the CSV reconciler's
    /// watches keep them (set when the controllers start; [`WebhookStores`]).
    pub(crate) webhook_stores: std::sync::OnceLock<WebhookStores>,
    /// The CatalogSource controller's reflector store (set by [`run`]'s controllers; unset, the
    /// Subscription reconciler lists CatalogSources instead). It is the store of the watch that
    /// triggers the CatalogSource reconciles, so a deletion is out of it before it wakes the
    /// Subscriptions ([`wake_on_catalog_deletion`]).
    pub(crate) catalog_sources: std::sync::OnceLock<reflector::Store<CatalogSource>>,
    /// The CSV controller's reflector store (set by [`run`]'s controllers): the CSVs an
    /// InstallPlan's CRD steps look up for their installed-alongside annotations
    /// ([`Context::apply_options`]).
    pub(crate) csv_store: std::sync::OnceLock<reflector::Store<ClusterServiceVersion>>,
    /// One lock per OperatorGroup (namespace, name): its aggregation ([`Context::ensure_group_aggregation`])
    /// runs once at a time, so the CSV reconcile and the group's own reconcile, woken together by
    /// the `olm.providedAPIs` write, do not both apply the group's ClusterRoles.
    group_locks: Mutex<HashMap<(String, String), GroupLock>>,
    /// The gRPC registry listeners of the catalogs this process serves ([`Options::registry`]).
    pub registry_servers: registry_services::RegistryServers,
}

/// The lock of one OperatorGroup's aggregation ([`Context::ensure_group_aggregation`]).
type GroupLock = Arc<tokio::sync::Mutex<()>>;

/// Errors of a reconcile; the object is retried after a backoff (see [`error_policy`]). Each
/// variant names what failed; what a person must fix in an object (a bad `spec.config`, a
/// missing OperatorGroup, an unresolvable Subscription) is not an error of the reconcile but a
/// status the reconciler writes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{context}: {source}")]
    Kube {
        /// What was being done, naming the object.
        context: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// An object capstan builds (an InstallPlan, a SubjectAccessReview) could not be encoded or
    /// decoded: a bug in capstan, reported with the object's name.
    #[error("building {what}: {source}")]
    Build {
        /// The object, e.g. `InstallPlan ns/install-abc`.
        what: String,
        /// The serialization error.
        #[source]
        source: serde_json::Error,
    },
    /// Rotating the serving certificates of an installed CSV failed (`install::rotation::rotate_due`);
    /// the message names the object and the API error. Retried by the requeue.
    #[error("certificates of ClusterServiceVersion {csv}: {message}")]
    Certificates {
        /// `namespace/name` of the CSV.
        csv: String,
        /// What failed, naming the object.
        message: String,
    },
    /// Creating again a Deployment deleted under a CSV failed (`csv::unit::recreate`): the API
    /// server refused it; the message names the Deployment and the error. Retried by the requeue.
    #[error("workload of ClusterServiceVersion {csv}: {message}")]
    Workload {
        /// `namespace/name` of the CSV.
        csv: String,
        /// What failed, naming the object.
        message: String,
    },
    /// Removing what an uninstalled CSV made the cluster call (its webhook configurations,
    /// APIServices, CRD conversion, shared auth bindings: `install::webhook_removal::remove`) failed;
    /// the message names the object and the API error. Retried by the requeue.
    #[error("uninstall of ClusterServiceVersion {csv}: {message}")]
    Removal {
        /// `namespace/name` of the CSV.
        csv: String,
        /// What failed, naming the object.
        message: String,
    },
}

impl Error {
    /// A short CamelCase reason for `capstan_reconcile_errors_total{reason}`: the API status
    /// reason of the first [`kube::Error`] in the source chain (`Forbidden`, `Conflict`,
    /// `NotFound`, …), the kind of client failure, or `Reconcile` for capstan's own errors.
    pub fn reason(&self) -> String {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cur {
            if let Some(k) = e.downcast_ref::<kube::Error>() {
                return match k {
                    kube::Error::Api(status) if !status.reason.is_empty() => status.reason.clone(),
                    // No status reason (e.g. a 500 from a webhook or a conversion): the HTTP code.
                    kube::Error::Api(status) => format!("Http{}", status.code),
                    kube::Error::HyperError(_) | kube::Error::Service(_) => "Connection".into(),
                    kube::Error::SerdeError(_) => "Decode".into(),
                    kube::Error::Auth(_) => "Auth".into(),
                    _ => "Client".into(),
                };
            }
            cur = e.source();
        }
        "Reconcile".into()
    }
}

pub(crate) fn kube_err(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let context = context.into();
    move |source| Error::Kube { context, source }
}

/// `obj` as the API server has it now; `None` when it is gone. Reconcilers decide on this, never
/// on the watch cache: a reconcile queued by an earlier event may carry an object that has since
/// changed (approved, applied, its status written by this controller).
pub(crate) async fn fresh<K>(client: &Client, obj: &K) -> Result<Option<K>, Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let (ns, name) = (obj.meta().namespace.clone().unwrap_or_default(), obj.meta().name.clone().unwrap_or_default());
    Api::<K>::namespaced(client.clone(), &ns)
        .get_opt(&name)
        .await
        .map_err(kube_err(format!("reading {} {ns}/{name}", K::kind(&()))))
}

/// Current time, rounded to the second (metav1.Time has second precision).
pub(crate) fn now_time() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    let t = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t.round(k8s_openapi::jiff::Unit::Second).unwrap_or(t))
}

/// Server-side applies the typed `status` of `obj` (see [`apply_status`]); returns the object as written.
pub(crate) async fn apply_typed_status<K, S>(api: &Api<K>, obj: &K, status: &S) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    S: serde::Serialize,
{
    let value = serde_json::to_value(status).map_err(|source| Error::Build {
        what: format!("the status of {} {}", K::kind(&()), obj.meta().name.as_deref().unwrap_or("")),
        source,
    })?;
    apply_status(api, obj, value).await
}

/// Server-side applies `status` onto the status subresource of `obj` (field manager `capstan`,
/// forced); returns the object as the API server has it after the write.
pub(crate) async fn apply_status<K>(api: &Api<K>, obj: &K, status: Value) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": name},
        "status": status,
    });
    api.patch_status(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
        .await
        .map_err(kube_err(format!("writing status of {} {name}", K::kind(&()))))
}

/// At most one "reconcile failed" log line per kind in this interval; the others are counted and
/// the count is logged with the next line (an API outage otherwise floods the log).
pub const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// First requeue after a failed reconcile; doubled per failure in a row, up to
/// [`ERROR_BACKOFF_MAX`].
pub const ERROR_BACKOFF_FIRST: Duration = Duration::from_secs(1);
/// Longest requeue after failed reconciles, short enough that work resumes within seconds once
/// the API server is back.
pub const ERROR_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// The requeue after failure number `n` (1-based) in a row of one object.
pub fn error_backoff(n: u32) -> Duration {
    ERROR_BACKOFF_FIRST.saturating_mul(1u32 << n.saturating_sub(1).min(16)).min(ERROR_BACKOFF_MAX)
}

/// Whether a log line is due for `kind` at `now` (at most one per [`ERROR_LOG_INTERVAL`]); returns
/// the number of failures left unlogged before it, or `None` when this one is to be counted only.
fn log_due(
    log: &Mutex<HashMap<String, (std::time::Instant, u64)>>,
    kind: &str,
    now: std::time::Instant,
) -> Option<u64> {
    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
    match log.get_mut(kind) {
        Some((last, skipped)) if now.duration_since(*last) < ERROR_LOG_INTERVAL => {
            *skipped += 1;
            None
        }
        Some((last, skipped)) => {
            let n = *skipped;
            *last = now;
            *skipped = 0;
            Some(n)
        }
        None => {
            log.insert(kind.to_string(), (now, 0));
            Some(0)
        }
    }
}

fn object_key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{} {}/{}",
        K::kind(&()),
        obj.meta().namespace.as_deref().unwrap_or(""),
        obj.meta().name.as_deref().unwrap_or("")
    )
}

fn error_policy<K>(obj: Arc<K>, err: &Error, ctx: Arc<Context>) -> Action
where
    K: Resource<DynamicType = ()>,
{
    let kind = K::kind(&()).to_string();
    ctx.metrics.reconcile_error(&kind.to_lowercase(), &err.reason());
    let now = std::time::Instant::now();
    let n = {
        let mut failures = ctx.reconcile_failures.lock().unwrap_or_else(|e| e.into_inner());
        let (n, last) = failures.entry(object_key(obj.as_ref())).or_insert((0, now));
        // A failure more than two maximal backoffs after the previous one is not the same row:
        // the object reconciled (or was not retried) in between.
        if now.duration_since(*last) > 2 * ERROR_BACKOFF_MAX {
            *n = 0;
        }
        *n += 1;
        *last = now;
        *n
    };
    let wait = error_backoff(n);
    if let Some(skipped) = log_due(&ctx.error_log, &kind, now) {
        tracing::warn!(kind = %kind, name = obj.meta().name.as_deref().unwrap_or(""), namespace = obj.meta().namespace.as_deref().unwrap_or(""), error = %err, failures_in_a_row = n, retry_in = ?wait, unlogged_since_last = skipped, "reconcile failed");
    }
    Action::requeue(wait)
}

/// Longest wait between two tries of a watch (plus up to a quarter of jitter).
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(4);

/// The backoff of every watch: 0.5 s doubling to at most [`WATCH_BACKOFF_MAX`], with jitter,
/// reset after 60 s without errors. kube's `default_backoff` goes up to 30 s, so after an API
/// outage a new object could wait half a minute to be seen; 4 s keeps the reconnect within
/// seconds while an outage costs each watch one request per 4 s (not logged: kube's per-request
/// error line is off by default, see `capstan controller`).
pub(crate) fn watch_backoff() -> kube::runtime::utils::ResetTimerBackoff<WatchBackoff> {
    kube::runtime::utils::ResetTimerBackoff::new(WatchBackoff::default(), Duration::from_secs(60))
}

/// Exponential backoff for watches (see [`watch_backoff`]).
#[derive(Debug, Clone, Default)]
pub struct WatchBackoff {
    tries: u32,
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = Duration::from_millis(500).saturating_mul(1u32 << self.tries.min(8)).min(WATCH_BACKOFF_MAX);
        self.tries = self.tries.saturating_add(1);
        // Jitter of up to a quarter, so that many watches do not retry in lockstep.
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        Some(base + base / 4 * (nanos % 1000) / 1000)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.tries = 0;
    }
}

/// The backoff a [`Controller`] applies to its combined trigger stream on an error: a constant
/// 250 ms. Every watch feeding it backs off by itself ([`watch_backoff`]); kube's default here
/// (up to 30 s, pausing *every* trigger of the controller) made a Subscription created after an
/// API outage wait half a minute or more before it was seen.
#[derive(Debug, Clone, Copy, Default)]
pub struct TriggerBackoff;

impl Iterator for TriggerBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(250))
    }
}

impl kube::runtime::utils::Backoff for TriggerBackoff {
    fn reset(&mut self) {}
}

/// The change filter of every primary watch: a hash of what a person changes (`metadata.generation`,
/// i.e. the spec; labels; annotations; finalizers; deletion), from kube-runtime's `predicates`.
/// Status-only updates — the controllers' own writes — do not trigger a reconcile, so a status
/// write never loops back. Reconcilers that wait on status changes of other objects requeue or
/// watch those objects.
fn spec_or_metadata<K: Resource>(obj: &K) -> Option<u64> {
    use kube::runtime::{Predicate, predicates};
    let deleting = |o: &K| Some(u64::from(o.meta().deletion_timestamp.is_some()));
    predicates::generation
        .combine(predicates::labels)
        .combine(predicates::annotations)
        .combine(predicates::finalizers)
        .combine(deleting)
        .hash_property(obj)
}

/// [`spec_or_metadata`] without the component labels (`operators.coreos.com/<package>.<namespace>`):
/// the Subscription reconciler puts its operator's component label on the Subscription itself
/// (OLM's adoption), and that write must not make it reconcile again.
fn spec_or_metadata_but_components<K: Resource>(obj: &K) -> Option<u64> {
    use kube::runtime::{Predicate, predicates};
    use std::hash::{Hash, Hasher};
    let labels = |o: &K| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (k, v) in
            o.meta().labels.iter().flatten().filter(|(k, _)| !k.starts_with(crate::install::COMPONENT_LABEL_PREFIX))
        {
            (k, v).hash(&mut h);
        }
        Some(h.finish())
    };
    let deleting = |o: &K| Some(u64::from(o.meta().deletion_timestamp.is_some()));
    predicates::generation
        .combine(labels)
        .combine(predicates::annotations)
        .combine(predicates::finalizers)
        .combine(deleting)
        .hash_property(obj)
}

/// The objects of a watch whose `key` changed since they last passed, and every deleted one
/// (kube-runtime's `predicate_filter` can drop a delete whose keyed fields did not change: its
/// `predicates` module documentation). A restarted watch passes each object once more. For the
/// secondary watches of a reconciler that needs only some fields of the watched kind.
fn changed_objects<K, S>(
    events: S,
    key: impl Fn(&K) -> u64 + Send + 'static,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource<DynamicType = ()> + Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    use futures::TryStreamExt;
    let mut seen: HashMap<ObjectRef<K>, u64> = HashMap::new();
    events.try_filter_map(move |event| {
        let passed = match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                let k = key(&o);
                (seen.insert(ObjectRef::from_obj(&o), k) != Some(k)).then_some(o)
            }
            watcher::Event::Delete(o) => {
                seen.remove(&ObjectRef::from_obj(&o));
                Some(o)
            }
            watcher::Event::Init | watcher::Event::InitDone => None,
        };
        futures::future::ready(Ok(passed))
    })
}

/// What a Subscription reads of a CSV of its namespace (`subscription::observe_resolution`): that
/// it exists (uid), its spec (generation: `spec.version`) and its properties annotation — not its
/// status, whose phase changes do not change a resolution.
fn csv_trigger_key(csv: &ClusterServiceVersion) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let m = &csv.metadata;
    (
        &m.uid,
        m.generation,
        m.deletion_timestamp.is_some(),
        m.annotations.as_ref().and_then(|a| a.get(crate::install::ANNOTATION_PROPERTIES)),
    )
        .hash(&mut h);
    h.finish()
}

/// What a Subscription reads of one of its InstallPlans (`subscription::plan_progress`,
/// `decide_prior`): its spec (generation: approval), metadata a person or capstan changes
/// (labels, annotations: supersession), its phase and message, and the message of an
/// `Installed` condition that says why it is held — not its step statuses.
fn plan_trigger_key(plan: &InstallPlan) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let m = &plan.metadata;
    (&m.uid, m.generation, m.deletion_timestamp.is_some(), &m.labels, &m.annotations).hash(&mut h);
    if let Some(s) = &plan.status {
        (s.phase.as_str(), &s.message).hash(&mut h);
        for c in &s.conditions {
            (&c.reason, &c.message).hash(&mut h);
        }
    }
    h.finish()
}

/// A controller for `K` over all namespaces whose trigger is filtered by [`spec_or_metadata`].
fn filtered<K>(api: Api<K>) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    filtered_by(api, spec_or_metadata::<K>)
}

/// A controller for `K` over all namespaces whose trigger is filtered by `predicate` (a hash of
/// what matters; an unchanged hash does not trigger).
fn filtered_by<K>(api: Api<K>, predicate: impl Fn(&K) -> Option<u64> + Send + 'static) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let trigger = watcher(api, watcher::Config::default())
        .backoff(watch_backoff())
        .reflect(writer)
        .applied_objects()
        .predicate_filter(predicate, PredicateConfig::default());
    Controller::for_stream(trigger, reader).trigger_backoff(TriggerBackoff)
}

/// The CatalogSource controller: [`filtered`], with the Subscriptions woken when a CatalogSource is
/// deleted ([`wake_on_catalog_deletion`]).
fn catalog_controller(api: Api<CatalogSource>, ctx: Arc<Context>) -> Controller<CatalogSource> {
    let (reader, writer) = reflector::store();
    let trigger = watcher(api, watcher::Config::default())
        .backoff(watch_backoff())
        .reflect(writer)
        .inspect(wake_on_catalog_deletion(ctx))
        .applied_objects()
        .predicate_filter(spec_or_metadata::<CatalogSource>, PredicateConfig::default());
    Controller::for_stream(trigger, reader).trigger_backoff(TriggerBackoff)
}

/// Wakes every Subscription when a CatalogSource is deleted, or after a re-list (the watch
/// restarted; deletions in the gap come as no event): a deletion never reaches the CatalogSource
/// reconciler (kube-runtime calls it only for objects in its store), and without this the
/// Subscriptions that saw the catalog kept listing it as healthy until their next resync (up to
/// 5 min). Called after `reflect`, so the store [`subscription`] reads the catalogs from no longer
/// has it. OLM: the catalog informer's delete event notifies the Subscriptions
/// (`pkg/controller/operators/catalog/subscription/syncer.go`, `notifyOnCatalog`).
fn wake_on_catalog_deletion(ctx: Arc<Context>) -> impl FnMut(&Result<watcher::Event<CatalogSource>, watcher::Error>) {
    move |event| {
        if matches!(event, Ok(watcher::Event::Delete(_) | watcher::Event::InitDone)) {
            ctx.resync_subscriptions();
        }
    }
}

/// What wakes the CSVs whose group targets all namespaces for their copies (`copied_csvs.rs`):
/// a namespace created or changed (it may need copies), an edit of the OLMConfig (copies turned
/// on or off); and the OLMConfig watch's store, which says whether copies are made.
#[allow(clippy::type_complexity)] // two watch streams and a store, named once here
fn copy_triggers(
    client: &Client,
) -> (
    impl futures::Stream<Item = Result<PartialObjectMeta<Namespace>, watcher::Error>> + Send + 'static,
    impl futures::Stream<Item = Result<crate::api::OlmConfig, watcher::Error>> + Send + 'static,
    reflector::Store<crate::api::OlmConfig>,
) {
    let namespaces = watcher(Api::<PartialObjectMeta<Namespace>>::all(client.clone()), watcher::Config::default())
        .backoff(watch_backoff())
        .applied_objects()
        .predicate_filter(kube::runtime::predicates::resource_version, PredicateConfig::default());
    let (olm_config, olm_config_writer) = reflector::store();
    let olm_configs = watcher(Api::<crate::api::OlmConfig>::all(client.clone()), watcher::Config::default())
        .backoff(watch_backoff())
        .reflect(olm_config_writer)
        .applied_objects()
        .predicate_filter(kube::runtime::predicates::generation, PredicateConfig::default());
    (namespaces, olm_configs, olm_config)
}

/// The CSV controller: [`filtered`], with what the CSV watch's events tell `ctx` ([`track_csvs`]).
fn csv_controller(api: Api<ClusterServiceVersion>, ctx: Arc<Context>) -> Controller<ClusterServiceVersion> {
    let (reader, writer) = reflector::store();
    let trigger = watcher(api, watcher::Config::default())
        .backoff(watch_backoff())
        .reflect(writer)
        .inspect(track_csvs(ctx, reader.clone()))
        .applied_objects()
        .predicate_filter(spec_or_metadata::<ClusterServiceVersion>, PredicateConfig::default());
    Controller::for_stream(trigger, reader).trigger_backoff(TriggerBackoff)
}

/// What the CSV watch's events (after `reflect` has put them in `listed`, the watch's store)
/// tell `ctx`: the `capstan_csvs{phase}` gauge counted from the store (every CSV of the cluster,
/// also those this process has not changed; it follows a status write by the watch's latency),
/// a deleted CSV's aggregation mark forgotten ([`Context::forget_csv`]; a deletion never reaches
/// the reconciler, which kube-runtime calls only for objects in its store), and after a re-list
/// (the watch restarted; deletions in the gap come as no event) the marks of listed CSVs only.
fn track_csvs(
    ctx: Arc<Context>,
    listed: reflector::Store<ClusterServiceVersion>,
) -> impl FnMut(&Result<watcher::Event<ClusterServiceVersion>, watcher::Error>) {
    move |event| {
        match event {
            Ok(watcher::Event::Delete(csv)) => {
                ctx.forget_csv(csv);
                let (ctx, csv) = (ctx.clone(), csv.clone());
                tokio::spawn(async move {
                    if let Err(e) = copied_csvs::sync_after_delete(&ctx, &csv).await {
                        let name = kube::ResourceExt::name_any(&csv);
                        let ns = kube::ResourceExt::namespace(&csv).unwrap_or_default();
                        tracing::warn!(csv = %format!("{ns}/{name}"), "copied CSVs after a deletion: {e}");
                    }
                });
            }
            Ok(watcher::Event::InitDone) => ctx.keep_marks_of(&listed.state()),
            Ok(watcher::Event::Apply(_)) => {}
            _ => return,
        }
        let csvs = listed.state();
        ctx.metrics.set_csv_phases(
            csvs.iter().map(|c| c.status.as_ref().and_then(|s| s.phase.as_ref()).map_or("", |p| p.as_str())),
        );
    }
}

/// Runs the controllers (CatalogSource, Subscription, InstallPlan, CSV, OperatorGroup) until `shutdown` resolves (then they are dropped) or forever. Needs the
/// `operators.coreos.com` CRDs on the cluster (`capstan crds | kubectl apply -f -`).
///
/// Triggers: each kind's own spec/metadata changes ([`spec_or_metadata`]); a Subscription also
/// when one of its InstallPlans or a CSV of its namespace changes, and when a catalog gets a new
/// digest; a CSV also when one of its Deployments changes (label `olm.owner.kind`).
pub async fn run(
    client: Client,
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    run_recording(client, options, crate::metrics::global(), shutdown).await
}

/// [`run`] recording metrics into `metrics` instead of the process's [`crate::metrics::global`]
/// (a test that reads what one controller recorded while others ran before it in the process).
pub async fn run_recording(
    client: Client,
    options: Options,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (ctx, rx) = Context::new(client, None, options, metrics);
    run_inner(ctx, rx, shutdown).await
}

/// [`run`] with the client built from `config`, which also enables scoped installs: plans of an
/// OperatorGroup with `spec.serviceAccountName` are applied impersonating that ServiceAccount.
/// Errors: none returned; a configuration no client can be built from is logged and nothing runs.
pub async fn run_with_config(
    config: kube::Config,
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    run_with_metrics(config, options, crate::metrics::global(), shutdown).await
}

/// [`run_with_config`] recording metrics into `metrics` (what `capstan controller` serves).
pub async fn run_with_metrics(
    config: kube::Config,
    options: Options,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    run_with_store(config, options, metrics, Arc::new(CatalogStore::default()), shutdown).await
}

/// [`run_with_metrics`] loading catalogs into `store`, which outlives the controllers (the
/// discovery servers of `capstan controller` read it on every replica, leader or not).
pub async fn run_with_store(
    config: kube::Config,
    options: Options,
    metrics: Arc<Metrics>,
    store: Arc<CatalogStore>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    match Client::try_from(config.clone()) {
        Ok(client) => {
            let (ctx, rx) = Context::with_store(client, Some(config), options, metrics, store);
            run_inner(ctx, rx, shutdown).await
        }
        Err(e) => tracing::error!(error = %e, "cannot build a client from the configuration"),
    }
}

impl Context {
    /// The options of an InstallPlan's apply: [`Options::apply_options`] with the CSV watch's
    /// store, when the controllers run, for the CRD steps' installed-alongside lookups.
    pub fn apply_options(&self) -> crate::install::apply::ApplyOptions {
        crate::install::apply::ApplyOptions {
            known_csvs: self.csv_store.get().cloned(),
            ..self.options.apply_options()
        }
    }

    /// Forgets a deleted CSV's marks ([`Context::aggregated`], [`Context::strategy_checked`]; from the CSV watch,
    /// [`track_csvs`]).
    pub fn forget_csv(&self, csv: &ClusterServiceVersion) {
        if let Some(uid) = kube::ResourceExt::uid(csv) {
            self.aggregated.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
            self.strategy_checked.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
        }
    }

    /// Keeps the aggregation marks of the CSVs of `listed` only (the CSV watch's list after a
    /// restart of the watch, [`track_csvs`]).
    pub fn keep_marks_of(&self, listed: &[Arc<ClusterServiceVersion>]) {
        let uids: std::collections::HashSet<String> =
            listed.iter().filter_map(|c| kube::ResourceExt::uid(c.as_ref())).collect();
        self.aggregated.lock().unwrap_or_else(|e| e.into_inner()).retain(|uid| uids.contains(uid));
        self.strategy_checked.lock().unwrap_or_else(|e| e.into_inner()).retain(|uid, _| uids.contains(uid));
    }

    /// A context for one controller process, and the receiving end of its Subscription resync
    /// channel (see [`Context::resync_subscriptions`]).
    pub fn new(
        client: Client,
        config: Option<kube::Config>,
        options: Options,
        metrics: Arc<Metrics>,
    ) -> (Arc<Context>, mpsc::UnboundedReceiver<()>) {
        Context::with_store(client, config, options, metrics, Arc::new(CatalogStore::default()))
    }

    /// [`Context::new`] with the catalogs kept in `store`.
    pub fn with_store(
        client: Client,
        config: Option<kube::Config>,
        options: Options,
        metrics: Arc<Metrics>,
        store: Arc<CatalogStore>,
    ) -> (Arc<Context>, mpsc::UnboundedReceiver<()>) {
        let (tx, rx) = mpsc::unbounded();
        let ctx = Context {
            events: Events::new(client.clone(), leader::default_identity()),
            client,
            config,
            options,
            catalogs: store,
            metrics,
            aggregated: Mutex::new(std::collections::HashSet::new()),
            strategy_checked: Mutex::new(HashMap::new()),
            plan_retries: Mutex::new(HashMap::new()),
            pulls_started: Mutex::new(std::collections::HashSet::new()),
            reconcile_failures: Mutex::new(HashMap::new()),
            registries: Mutex::new(HashMap::new()),
            error_log: Mutex::new(HashMap::new()),
            resync_subscriptions: tx,
            operator_syncs: Mutex::new(None),
            webhook_stores: std::sync::OnceLock::new(),
            catalog_sources: std::sync::OnceLock::new(),
            csv_store: std::sync::OnceLock::new(),
            group_locks: Mutex::new(HashMap::new()),
            registry_servers: registry_services::RegistryServers::default(),
        };
        (Arc::new(ctx), rx)
    }

    /// Asks for the Operator object of `package` in `namespace` to be brought up to date
    /// ([`operator::run`]; nothing when the controllers do not run).
    pub(crate) fn sync_operator(&self, package: &str, namespace: &str) {
        if let Some(tx) = self.operator_syncs.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = tx.unbounded_send((package.to_string(), namespace.to_string()));
        }
    }

    /// [`Context::sync_operator`] for the package `csv` installs.
    pub(crate) fn sync_operator_of(&self, csv: &ClusterServiceVersion) {
        if let Some(p) = operator::package_of(csv) {
            self.sync_operator(&p, &kube::ResourceExt::namespace(csv).unwrap_or_default());
        }
    }

    /// [`crate::install::aggregation::ensure_for_operator_group`] for `og`, one at a time per
    /// group: the second caller waits and then finds the roles applied (one read, no writes).
    /// Errors: those of `ensure_for_operator_group`.
    pub(crate) async fn ensure_group_aggregation(
        &self,
        og: &OperatorGroup,
    ) -> Result<String, crate::install::aggregation::AggregationError> {
        let key = (og.metadata.namespace.clone().unwrap_or_default(), og.metadata.name.clone().unwrap_or_default());
        let lock = self.group_locks.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_default().clone();
        let _held = lock.lock().await;
        crate::install::aggregation::ensure_for_operator_group(&self.client, og).await
    }

    /// Asks for every Subscription to be reconciled again (a catalog changed).
    pub(crate) fn resync_subscriptions(&self) {
        let _ = self.resync_subscriptions.unbounded_send(());
    }
}

/// Reflector stores of the objects the cluster calls an installed operator through, labelled
/// `olm.owner.kind=ClusterServiceVersion` (`install::webhook` labels them): the CSV reconciler reads
/// them instead of one GET each when it checks what to restore (`csv::workload::restore_webhooks`), and
/// their watches wake the owning CSV when one is deleted or changed.
pub(crate) struct WebhookStores {
    /// ValidatingWebhookConfigurations.
    pub validating: reflector::Store<ValidatingWebhookConfiguration>,
    /// MutatingWebhookConfigurations.
    pub mutating: reflector::Store<MutatingWebhookConfiguration>,
    /// APIServices.
    pub apiservices: reflector::Store<APIService>,
}

impl WebhookStores {
    /// Object `name` of `kind` as JSON, when `kind` is one of the stored kinds and its store has
    /// completed its first list: `Some(None)` when it is not there (deleted, or its owner labels
    /// removed), `None` when the store cannot tell (read the object from the API server).
    pub(crate) fn lookup(&self, kind: &str, name: &str) -> Option<Option<Value>> {
        use futures::FutureExt;
        fn one<K>(store: &reflector::Store<K>, name: &str) -> Option<Option<Value>>
        where
            K: Resource<DynamicType = ()> + Clone + serde::Serialize + 'static,
        {
            store.wait_until_ready().now_or_never()?.ok()?;
            Some(store.get(&ObjectRef::new(name)).and_then(|o| serde_json::to_value(o.as_ref()).ok()))
        }
        match kind {
            "ValidatingWebhookConfiguration" => one(&self.validating, name),
            "MutatingWebhookConfiguration" => one(&self.mutating, name),
            "APIService" => one(&self.apiservices, name),
            _ => None,
        }
    }
}

/// The CSV named by an object's owner labels (`olm.owner`, `olm.owner.namespace`,
/// `olm.owner.kind=ClusterServiceVersion`), if any.
fn owning_csv(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<ObjectRef<ClusterServiceVersion>> {
    let l = meta.labels.as_ref()?;
    (l.get(crate::install::LABEL_OWNER_KIND)?.as_str() == "ClusterServiceVersion")
        .then(|| {
            Some(
                ObjectRef::new(l.get(crate::install::LABEL_OWNER)?)
                    .within(l.get(crate::install::LABEL_OWNER_NAMESPACE)?),
            )
        })
        .flatten()
}

/// The CSV a Subscription whose spec changed has installed (`status.installedCSV`), with its
/// [`Context::strategy_checked`] mark forgotten: the CSV reconciler rolls a new `spec.config` out
/// into its Deployments (`csv::unit::install`), as OLM's olm-operator requeues the installed CSV
/// of a changed Subscription (\[OLM\] `pkg/controller/operators/olm/operator.go`
/// `syncSubscription`).
fn installed_csv_of(ctx: &Context, sub: &Subscription) -> Option<ObjectRef<ClusterServiceVersion>> {
    let csv = sub.status.as_ref()?.installed_csv.as_deref().filter(|n| !n.is_empty())?;
    let r = ObjectRef::new(csv).within(sub.metadata.namespace.as_deref()?);
    if let Some(uid) =
        ctx.csv_store.get().and_then(|store| store.get(&r)).and_then(|c| kube::ResourceExt::uid(c.as_ref()))
    {
        ctx.strategy_checked.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
    }
    Some(r)
}

async fn run_inner(
    ctx: Arc<Context>,
    rx: mpsc::UnboundedReceiver<()>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let catalogs = catalog_controller(Api::<CatalogSource>::all(client.clone()), ctx.clone());
    let catalog_store = catalogs.store();
    let _ = ctx.catalog_sources.set(catalog_store.clone());
    // An edit of a ConfigMap catalog reloads the CatalogSources that name it (metadata only).
    let config_maps = watcher(Api::<PartialObjectMeta<ConfigMap>>::all(client.clone()), watcher::Config::default())
        .backoff(watch_backoff())
        .touched_objects();
    // A registry pod replaced behind the Service a `spec.address` names reloads its CatalogSources
    // (the Service's EndpointSlices change; metadata only).
    let slices = watcher(Api::<PartialObjectMeta<EndpointSlice>>::all(client.clone()), watcher::Config::default())
        .backoff(watch_backoff())
        .touched_objects();
    let sources_of_slices = catalog_store.clone();
    let catalogs = catalogs
        .watches_stream(config_maps, move |cm| {
            let (ns, name) = (cm.metadata.namespace.unwrap_or_default(), cm.metadata.name.unwrap_or_default());
            configmap_catalogs::sources_naming(&catalog_store, &ns, &name)
        })
        .watches_stream(slices, move |slice| {
            let ns = slice.metadata.namespace.clone().unwrap_or_default();
            let labels = slice.metadata.labels.unwrap_or_default();
            match labels.get("kubernetes.io/service-name") {
                Some(service) => catalogsource::sources_at_service(&sources_of_slices, &ns, service),
                None => Vec::new(),
            }
        })
        .run(catalogsource::reconcile, error_policy, ctx.clone())
        .for_each(|_| async {});
    let subscriptions = run_subscriptions(ctx.clone(), rx);
    let plans = run_install_plans(ctx.clone());
    let csvs = run_csvs(ctx.clone());
    let groups = filtered(Api::<OperatorGroup>::all(client.clone()))
        .run(operatorgroup::reconcile, error_policy, ctx.clone())
        .for_each(|_| async {});
    olmconfig::ensure_exists(&client).await;
    let olm_configs = filtered(Api::<crate::api::OlmConfig>::all(client.clone()))
        .run(olmconfig::reconcile, error_policy, ctx.clone())
        .for_each(|_| async {});
    let (operator_tx, operator_rx) = mpsc::unbounded();
    *ctx.operator_syncs.lock().unwrap_or_else(|e| e.into_inner()) = Some(operator_tx);
    let operators = futures::future::join(operator::run(ctx.clone(), operator_rx), operator_labels::run(ctx.clone()));
    let subscription_deletions = removal::watch_subscription_deletions(ctx.clone());
    let group_deletions = crate::install::aggregation::watch_operator_group_deletions(client.clone());
    let orphaned_api_services = removal::watch_orphaned_api_services(ctx.clone());
    let all = futures::future::join4(
        futures::future::join5(catalogs, subscriptions, plans, csvs, groups),
        futures::future::join3(subscription_deletions, orphaned_api_services, olm_configs),
        group_deletions,
        operators,
    );
    tokio::select! {
        _ = all => {}
        _ = shutdown => {}
    }
}

/// The Subscription controller: woken by its InstallPlans, by the CSVs of its namespace, and by
/// a catalog that changed (`rx`, [`Context::resync_subscriptions`]).
fn run_subscriptions(ctx: Arc<Context>, rx: mpsc::UnboundedReceiver<()>) -> impl std::future::Future<Output = ()> {
    let client = ctx.client.clone();
    let cfg = watcher::Config::default;
    let subscriptions =
        filtered_by(Api::<Subscription>::all(client.clone()), spec_or_metadata_but_components::<Subscription>);
    let sub_store = subscriptions.store();
    subscriptions
        .owns_stream(changed_objects(
            watcher(Api::<InstallPlan>::all(client.clone()), cfg()).backoff(watch_backoff()),
            plan_trigger_key,
        ))
        .watches_stream(
            changed_objects(
                watcher(Api::<ClusterServiceVersion>::all(client.clone()), cfg()).backoff(watch_backoff()),
                csv_trigger_key,
            ),
            move |csv| {
                let ns = csv.metadata.namespace.clone();
                sub_store
                    .state()
                    .into_iter()
                    .filter(|s| s.metadata.namespace == ns)
                    .map(|s| ObjectRef::from_obj(s.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .reconcile_all_on(rx)
        .run(subscription::reconcile, error_policy, ctx)
        .for_each(|_| async {})
}

/// The InstallPlan controller: woken also when the Subscription reconciler has written
/// `status.bundleLookups` (right after creating the plan): the plan can be worked on from then on.
fn run_install_plans(ctx: Arc<Context>) -> impl std::future::Future<Output = ()> {
    filtered_by(Api::<InstallPlan>::all(ctx.client.clone()), |ip: &InstallPlan| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        spec_or_metadata(ip).hash(&mut h);
        ip.status.as_ref().map(|s| s.bundle_lookups.len()).hash(&mut h);
        Some(h.finish())
    })
    .run(installplan::reconcile, error_policy, ctx)
    .for_each(|_| async {})
}

/// The CSV controller: woken by its Deployments, its webhook configurations and APIServices (by
/// their `olm.owner*` labels; kept in [`Context::webhook_stores`]), the CRDs its conversion
/// webhooks list, and the spec changes of the Subscription that installed it
/// ([`installed_csv_of`]). A deleted or changed webhook configuration, APIService or conversion CRD wakes
/// its CSV, which applies it again (`csv::workload::restore_webhooks`) at once rather than at its
/// next 30 s look.
fn run_csvs(ctx: Arc<Context>) -> impl std::future::Future<Output = ()> {
    let client = ctx.client.clone();
    let owned =
        || watcher::Config::default().labels(&format!("{}=ClusterServiceVersion", crate::install::LABEL_OWNER_KIND));
    let (validating, validating_writer) = reflector::store();
    let (mutating, mutating_writer) = reflector::store();
    let (apiservices, apiservices_writer) = reflector::store();
    let _ = ctx.webhook_stores.set(WebhookStores { validating, mutating, apiservices });
    let validating = watcher(Api::<ValidatingWebhookConfiguration>::all(client.clone()), owned())
        .backoff(watch_backoff())
        .reflect(validating_writer)
        .touched_objects();
    let mutating = watcher(Api::<MutatingWebhookConfiguration>::all(client.clone()), owned())
        .backoff(watch_backoff())
        .reflect(mutating_writer)
        .touched_objects();
    let apiservices = watcher(Api::<APIService>::all(client.clone()), owned())
        .backoff(watch_backoff())
        .reflect(apiservices_writer)
        .touched_objects();
    let crds =
        watcher(Api::<PartialObjectMeta<CustomResourceDefinition>>::all(client.clone()), watcher::Config::default())
            .backoff(watch_backoff())
            .touched_objects();
    let csvs = csv_controller(Api::<ClusterServiceVersion>::all(client.clone()), ctx.clone());
    let csv_store = csvs.store();
    let _ = ctx.csv_store.set(csv_store.clone());
    let csvs_of_all = csv_store.clone();
    let (namespaces, olm_configs, olm_config) = copy_triggers(&client);
    csvs.owns_stream(
        watcher(Api::<PartialObjectMeta<Deployment>>::all(client.clone()), owned())
            .backoff(watch_backoff())
            .touched_objects(),
    )
    .watches_stream(validating, |o| owning_csv(&o.metadata))
    .watches_stream(mutating, |o| owning_csv(&o.metadata))
    .watches_stream(apiservices, |o| owning_csv(&o.metadata))
    .watches_stream(
        watcher(Api::<Subscription>::all(client.clone()), watcher::Config::default())
            .backoff(watch_backoff())
            .touched_objects()
            .predicate_filter(kube::runtime::predicates::generation, PredicateConfig::default()),
        {
            let ctx = ctx.clone();
            move |sub| installed_csv_of(&ctx, &sub)
        },
    )
    .watches_stream(namespaces, {
        let (store, config) = (csvs_of_all.clone(), olm_config.clone());
        move |ns| match ns.metadata.deletion_timestamp {
            None => copied_csvs::global_originals(&store, &config, false),
            Some(_) => Vec::new(),
        }
    })
    .watches_stream(olm_configs, move |_| copied_csvs::global_originals(&csvs_of_all, &olm_config, true))
    .watches_stream(crds, move |crd| {
        // CRDs carry no owner labels: the CSVs whose conversion webhooks list it.
        let name = crd.metadata.name.clone().unwrap_or_default();
        csv_store
            .state()
            .into_iter()
            .filter(|c| {
                c.spec
                    .webhookdefinitions
                    .iter()
                    .flatten()
                    .any(|w| w.conversion_crds.iter().flatten().any(|n| *n == name))
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    })
    .run(csv::reconcile, error_policy, ctx)
    .for_each(|_| async {})
}

#[cfg(test)]
mod trigger_tests {
    use super::*;
    use futures::executor::block_on;

    fn csv(version: &str, phase: &str) -> ClusterServiceVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "a.v1", "namespace": "ns", "uid": "u1", "generation": if version == "1.0.0" { 1 } else { 2 }},
            "spec": {"version": version, "displayName": "a", "install": {"strategy": "deployment"}},
            "status": {"phase": phase},
        }))
        .expect("test CSV")
    }

    /// A deleted CatalogSource, and a re-list of them (deletions in the watch's gap come as no
    /// event), wake every Subscription ([`wake_on_catalog_deletion`]); an added or changed one
    /// does not here (its reconcile does, when what it loads changed).
    #[tokio::test]
    async fn a_catalog_deletion_wakes_the_subscriptions() {
        let (_server, client) = super::testing::ApiServer::new();
        let (ctx, mut resyncs) = Context::new(client, None, Options::default(), Arc::new(Metrics::new()));
        let mut wake = wake_on_catalog_deletion(ctx);
        let cs: CatalogSource = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "c", "namespace": "ns"}, "spec": {"sourceType": "grpc", "image": "r/c:1"},
        }))
        .expect("test CatalogSource");
        wake(&Ok(watcher::Event::Apply(cs.clone())));
        assert!(resyncs.try_recv().is_err(), "a change wakes nothing here");
        wake(&Ok(watcher::Event::Delete(cs)));
        assert_eq!(resyncs.try_recv().ok(), Some(()), "a deletion wakes the Subscriptions");
        wake(&Ok(watcher::Event::InitDone));
        assert_eq!(resyncs.try_recv().ok(), Some(()), "a re-list wakes the Subscriptions");
    }

    /// The `capstan_csvs{phase}` gauge and the aggregation marks follow the CSV watch through
    /// [`track_csvs`] (after `reflect`, as in [`csv_controller`]): a first list, a phase change,
    /// a deletion, a CSV re-created under its name, and a re-list that misses a deletion.
    #[tokio::test]
    async fn the_csv_gauge_and_marks_follow_the_csv_watch() {
        use futures::StreamExt;
        use kube::runtime::WatchStreamExt;
        let (_server, ctx) = super::testing::ApiServer::context();
        let (reader, writer) = reflector::store();
        let (tx, rx) = mpsc::unbounded::<watcher::Event<ClusterServiceVersion>>();
        let mut events = rx.map(Ok).reflect(writer).inspect(track_csvs(ctx.clone(), reader)).boxed();
        let mut feed = async |evs: Vec<watcher::Event<ClusterServiceVersion>>| {
            for ev in evs {
                tx.unbounded_send(ev).expect("send");
                events.next().await.expect("an event").expect("no error");
            }
            let text = ctx.metrics.encode();
            ["Pending", "Succeeded", "Failed"].map(|p| {
                let series = format!("capstan_csvs{{phase=\"{p}\"}} ");
                text.lines()
                    .find_map(|l| l.strip_prefix(series.as_str()))
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(-1)
            })
        };
        let named = |name: &str, uid: &str, phase: &str| {
            let mut c = csv("1.0.0", phase);
            c.metadata.name = Some(name.into());
            c.metadata.uid = Some(uid.into());
            c
        };
        let marked = |ctx: &Context| {
            let mut m: Vec<String> = ctx.aggregated.lock().unwrap().iter().cloned().collect();
            m.sort();
            m
        };
        use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
        // [Pending, Succeeded, Failed]
        assert_eq!(
            feed(vec![Init, InitApply(named("a", "u1", "Succeeded")), InitApply(named("b", "u2", "Failed")), InitDone])
                .await,
            [0, 1, 1]
        );
        ctx.aggregated.lock().unwrap().extend(["u1".to_string(), "u2".to_string()]);
        assert_eq!(feed(vec![Apply(named("b", "u2", "Succeeded"))]).await, [0, 2, 0]);
        assert_eq!(feed(vec![Delete(named("a", "u1", "Succeeded"))]).await, [0, 1, 0]);
        assert_eq!(marked(&ctx), ["u2"]);
        assert_eq!(
            feed(vec![Apply(named("a", "u3", "Pending"))]).await,
            [1, 1, 0],
            "a CSV re-created under the name of a deleted one"
        );
        ctx.aggregated.lock().unwrap().insert("u3".to_string());
        // The watch restarts; "a" was deleted in the gap and comes as no event.
        assert_eq!(feed(vec![Init, InitApply(named("b", "u2", "Succeeded")), InitDone]).await, [0, 1, 0]);
        assert_eq!(marked(&ctx), ["u2"]);
    }

    fn plan(phase: &str, step_status: &str) -> InstallPlan {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u2", "generation": 1},
            "spec": {"clusterServiceVersionNames": ["a.v1"], "approval": "Automatic", "approved": true},
            "status": {"phase": phase, "catalogSources": [], "plan": [{"resolving": "a.v1", "status": step_status,
                "resource": {"sourceName": "c", "sourceNamespace": "olm", "group": "", "version": "v1", "kind": "ServiceAccount", "name": "a", "manifest": "{}"}}]},
        }))
        .expect("test InstallPlan")
    }

    fn names<K: Resource>(objs: Vec<Result<K, watcher::Error>>) -> Vec<String> {
        objs.into_iter()
            .map(|o| o.map(|o| o.meta().name.clone().unwrap_or_default()).unwrap_or_else(|e| e.to_string()))
            .collect()
    }

    /// A CSV's status changes (its phases) do not wake the Subscriptions of its namespace; a new
    /// CSV, a changed spec and a deletion do, even a deletion of an object whose key is unchanged.
    #[test]
    fn csv_phase_changes_do_not_trigger_subscriptions() {
        use watcher::Event::*;
        let events = vec![
            Init,
            InitApply(csv("1.0.0", "Pending")),
            InitDone,
            Apply(csv("1.0.0", "InstallReady")),
            Apply(csv("1.0.0", "Succeeded")),
            Apply(csv("1.0.1", "Succeeded")),
            Delete(csv("1.0.1", "Succeeded")),
            Apply(csv("1.0.1", "Pending")),
        ];
        let passed: Vec<_> =
            block_on(changed_objects(futures::stream::iter(events.into_iter().map(Ok)), csv_trigger_key).collect());
        assert_eq!(names(passed), ["a.v1"; 4], "first sight, spec change, deletion, re-creation");
    }

    /// An InstallPlan's phase and held message wake its Subscription; its step statuses do not.
    #[test]
    fn plan_step_statuses_do_not_trigger_subscriptions() {
        use watcher::Event::*;
        let a = plan("Installing", "Unknown");
        let b = plan("Installing", "Created");
        let c = plan("Complete", "Created");
        assert_eq!(plan_trigger_key(&a), plan_trigger_key(&b));
        assert_ne!(plan_trigger_key(&b), plan_trigger_key(&c));
        let mut held = b.clone();
        if let Some(s) = held.status.as_mut() {
            s.message = Some("held".into());
        }
        assert_ne!(plan_trigger_key(&b), plan_trigger_key(&held));
        let passed: Vec<_> = block_on(
            changed_objects(
                futures::stream::iter([Apply(a), Apply(b), Apply(c)].into_iter().map(Ok)),
                plan_trigger_key,
            )
            .collect(),
        );
        assert_eq!(passed.len(), 2);
    }
}
