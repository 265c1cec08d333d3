//! Kubernetes Events (`events.k8s.io/v1`) on the objects capstan reconciles, so that
//! `kubectl describe subscription|installplan|csv …` and `kubectl events` show what happened.
//!
//! A thin layer over kube-rs' [`Recorder`]: one [`Events`] per controller process, carried in the
//! reconcilers' [`super::Context`] (its cache folds repeats of the same event into one Event with a
//! growing `series.count`, as client-go's recorder does), reporting controller `capstan`,
//! reporting instance = the leader-election identity ([`super::leader::default_identity`]). OLM v0 records Events with reasons such as
//! `RequirementsNotMet`, `InstallSucceeded`, `InstallWaiting`, `ComponentUnhealthy`
//! (the CSV condition reasons of `reference/olm-v0.md` §1.5); use those reasons where they fit.
//!
//! Usage from a reconciler (never fails the reconcile; a failure to record is logged):
//! ```text
//! ctx.events.publish_for(&*csv, EventType::Normal, "InstallSucceeded", "install strategy completed with no errors").await;
//! ```
//! Cluster-scoped objects get their Events in namespace `default` (kube-rs' rule). RBAC: `create`
//! and `patch` on `events.k8s.io` `events` (granted in `manifests/rbac.yaml`).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
pub use kube::runtime::events::EventType;
use kube::runtime::events::{Event, Recorder, Reporter};

/// `reportingController` of every Event capstan records.
pub const REPORTING_CONTROLLER: &str = "capstan";

/// The longest `reason` / `action` the API accepts (characters).
const MAX_REASON: usize = 128;
/// The longest `note` the API accepts (bytes).
const MAX_NOTE: usize = 1024;

/// Cuts `s` to at most `max` bytes on a character boundary, marking the cut with `…`.
fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The Event recorder of one controller process (see the module documentation).
///
/// [`Events::new`] records in the background, in order, as client-go's broadcaster does for OLM:
/// [`Events::publish`] queues the Event and returns, and one task creates the queued Events one
/// after the other, so that a reconcile does not wait an API round trip per Event (an install
/// records about seven on its critical path). [`Events::awaited`] records before `publish`
/// returns (the scripted-API fixtures, whose requests must come in a fixed order).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
    /// The queue of the background task, started by the first [`Events::publish`] (inside the
    /// runtime); `None`: recorded before `publish` returns.
    queue: Option<EventQueue>,
}

/// The sending end of [`Events`]' background task, set once the task runs: each Event with the
/// object it is about.
type EventQueue = std::sync::Arc<std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<(ObjectReference, Event)>>>;

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

impl Events {
    /// A recorder writing with `client`, reporting controller [`REPORTING_CONTROLLER`] and
    /// instance `instance` (the leader-election identity).
    /// Events are recorded in the background, in order (see [`Events`]).
    pub fn new(client: Client, instance: String) -> Self {
        Events { queue: Some(Default::default()), ..Events::awaited(client, instance) }
    }

    /// [`Events::new`], but [`Events::publish`] returns only once the Event is recorded.
    pub fn awaited(client: Client, instance: String) -> Self {
        let reporter = Reporter { controller: REPORTING_CONTROLLER.into(), instance: Some(instance) };
        Events { recorder: Recorder::new(client, reporter), queue: None }
    }

    /// Records an Event about `regarding` (from `Resource::object_ref`): `type_` Normal or Warning,
    /// `reason` a short CamelCase word (≤ 128 characters; also used as the Event's `action`),
    /// `note` a sentence for people (cut to 1 KiB, the API's limit).
    ///
    /// # Errors
    /// The API error when the Event cannot be created (e.g. RBAC). Reconcilers usually want
    /// [`Events::publish`], which logs instead.
    pub async fn try_publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: &str,
    ) -> Result<(), kube::Error> {
        self.recorder.publish(&event(type_, reason, note), regarding).await
    }

    /// [`Events::try_publish`], logging a failure as a warning instead of returning it: an Event
    /// that cannot be recorded must not fail or retry a reconcile. With [`Events::new`] the Event
    /// is queued and recorded in the background.
    pub async fn publish(&self, regarding: &ObjectReference, type_: EventType, reason: &str, note: &str) {
        let Some(queue) = &self.queue else {
            if let Err(e) = self.try_publish(regarding, type_, reason, note).await {
                warn_unrecorded(regarding, reason, &e);
            }
            return;
        };
        let tx = queue.get_or_init(|| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(ObjectReference, Event)>();
            let recorder = self.recorder.clone();
            tokio::spawn(async move {
                while let Some((regarding, event)) = rx.recv().await {
                    if let Err(e) = recorder.publish(&event, &regarding).await {
                        warn_unrecorded(&regarding, &event.reason, &e);
                    }
                }
            });
            tx
        });
        if tx.send((regarding.clone(), event(type_, reason, note))).is_err() {
            tracing::warn!(%reason, "could not record an Event: the recording task has stopped");
        }
    }

    /// [`Events::publish`] about `obj` (any typed object, e.g. a Subscription, InstallPlan or CSV).
    pub async fn publish_for<K>(&self, obj: &K, type_: EventType, reason: &str, note: &str)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        self.publish(&obj.object_ref(&()), type_, reason, note).await;
    }
}

/// The Event as recorded: `reason` (also its `action`) and `note` cut to the API's limits.
fn event(type_: EventType, reason: &str, note: &str) -> Event {
    let reason = truncate(reason, MAX_REASON);
    Event { type_, reason: reason.clone(), note: Some(truncate(note, MAX_NOTE)), action: reason, secondary: None }
}

fn warn_unrecorded(regarding: &ObjectReference, reason: &str, e: &kube::Error) {
    tracing::warn!(
        kind = regarding.kind.as_deref().unwrap_or(""),
        namespace = regarding.namespace.as_deref().unwrap_or(""),
        name = regarding.name.as_deref().unwrap_or(""),
        %reason,
        error = %e,
        "could not record an Event"
    );
}

/// The process-wide [`Events`] of callers without a controller `Context` (the CLI, tests), built
/// from the first `client` passed in. Reconcilers use the one their `Context` carries.
fn shared(client: &Client) -> &'static Events {
    static SHARED: std::sync::OnceLock<Events> = std::sync::OnceLock::new();
    SHARED.get_or_init(|| Events::awaited(client.clone(), super::leader::default_identity()))
}

/// [`Events::try_publish`] through the process-wide recorder of callers without a `Context`.
///
/// # Errors
/// The API error when the Event cannot be created.
pub async fn try_publish(
    client: &Client,
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: &str,
) -> Result<(), kube::Error> {
    shared(client).try_publish(regarding, type_, reason, note).await
}

/// [`Events::publish_for`] through the process-wide recorder of callers without a `Context`.
pub async fn publish_for<K>(client: &Client, obj: &K, type_: EventType, reason: &str, note: &str)
where
    K: kube::Resource<DynamicType = ()>,
{
    shared(client).publish_for(obj, type_, reason, note).await;
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncates_on_char_boundaries() {
        assert_eq!(truncate("short", 10), "short");
        let long = "é".repeat(600); // 1200 bytes
        let cut = truncate(&long, 1024);
        assert!(cut.len() <= 1024, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
    }
}
