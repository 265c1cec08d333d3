//! Leader election with a `coordination.k8s.io/v1` Lease, as client-go's
//! `tools/leaderelection` does it (`leaderelection.go`, `resourcelock/leaselock.go`), so that of
//! several `capstan controller --leader-elect` replicas exactly one reconciles.
//!
//! - **Acquire**: every `retry_period` the candidate reads the Lease. It takes it (writes
//!   `holderIdentity`, `acquireTime`, `renewTime`, `leaseDurationSeconds`, `leaseTransitions + 1`)
//!   when the Lease is missing, has no holder, or has not changed for `leaseDurationSeconds` as
//!   measured on the candidate's own clock since it last saw the record change (client-go's
//!   `observedTime`; no clock comparison between machines).
//! - **Renew**: the leader rewrites `renewTime` every `retry_period`. When it cannot renew for
//!   `renew_deadline` (API unreachable, or someone else holds the Lease) leadership is lost and
//!   [`run`] returns [`Outcome::LostLeadership`]; the caller must stop reconciling at once
//!   (`capstan controller` exits, as client-go's `OnStoppedLeading` usually does).
//! - **Release** on graceful shutdown: after the work has stopped, the leader writes an empty
//!   `holderIdentity` and `leaseDurationSeconds: 1` (client-go's `ReleaseOnCancel`), so a standby
//!   takes over at its next retry instead of waiting for the lease to expire.
//!
//! Every write is a `replace` carrying the `resourceVersion` that was read, so two candidates
//! racing for an expired Lease cannot both win: the API server rejects the second with 409
//! Conflict. Handover after the leader dies therefore takes at most about
//! `lease_duration + 2 × retry_period` (the last renewal may be observed up to one retry period
//! late, and the takeover happens at the first retry after expiry).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

/// Settings of one leader election (client-go's `LeaderElectionConfig`).
#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease (`--lease-namespace`; in a Pod, its own namespace).
    pub namespace: String,
    /// Name of the Lease (`--lease-name`, default `capstan`).
    pub name: String,
    /// This candidate's identity, written to `spec.holderIdentity`: unique among the candidates
    /// (see [`default_identity`]).
    pub identity: String,
    /// How long a Lease stays valid after its last renewal, written to
    /// `spec.leaseDurationSeconds` (whole seconds, at least 1; client-go's default 15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership (client-go's
    /// default 10 s); must be shorter than `lease_duration`.
    pub renew_deadline: Duration,
    /// Time between two attempts to acquire or renew (client-go's default 2 s); must be shorter
    /// than `renew_deadline`.
    pub retry_period: Duration,
}

/// Errors of [`LeaderElectionConfig::validate`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// The durations do not satisfy lease duration > renew deadline > retry period > 0.
    #[error(
        "leader election: need --lease-duration ({lease:?}) > --renew-deadline ({renew:?}) > --retry-period ({retry:?}) > 0, and a lease duration of at least 1s; adjust the flags"
    )]
    Durations {
        /// `lease_duration`.
        lease: Duration,
        /// `renew_deadline`.
        renew: Duration,
        /// `retry_period`.
        retry: Duration,
    },
    /// The identity or the Lease name is empty.
    #[error("leader election: {0} must not be empty")]
    Empty(&'static str),
}

impl LeaderElectionConfig {
    /// Checks the relations client-go's `NewLeaderElector` checks (lease duration > renew deadline
    /// > retry period > 0) and that names are not empty.
    ///
    /// # Errors
    /// [`ConfigError`] naming what to change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.identity.is_empty() {
            return Err(ConfigError::Empty("the identity"));
        }
        if self.name.is_empty() {
            return Err(ConfigError::Empty("--lease-name"));
        }
        if self.namespace.is_empty() {
            return Err(ConfigError::Empty("--lease-namespace"));
        }
        if self.lease_duration < Duration::from_secs(1)
            || self.lease_duration <= self.renew_deadline
            || self.renew_deadline <= self.retry_period
            || self.retry_period.is_zero()
        {
            return Err(ConfigError::Durations {
                lease: self.lease_duration,
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        Ok(())
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// This process's identity for `holderIdentity`: `$POD_NAME` (set from the downward API in
/// `manifests/deployment.yaml`) when set, else `<hostname>_<pid>`.
pub fn default_identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME")
        && !pod.is_empty()
    {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "capstan".into());
    format!("{host}_{}", std::process::id())
}

/// Errors talking to the API server about the Lease.
#[derive(Debug, thiserror::Error)]
#[error("Lease {namespace}/{name}: {what}: {source}")]
pub struct LeaseError {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// What was being done.
    pub what: &'static str,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// How [`run`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `shutdown` resolved before this candidate became leader; nothing to release.
    ShutdownWhileStandby,
    /// `shutdown` resolved while leading: the work was stopped and the Lease released.
    ShutdownWhileLeading,
    /// The work future ended by itself while leading; the Lease was released.
    WorkEnded,
    /// The Lease could not be renewed within the renew deadline, or another candidate holds it:
    /// the work was stopped; the caller must not reconcile any more (exit).
    LostLeadership {
        /// Why, for the log.
        reason: String,
    },
}

/// Result of one acquire-or-renew attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    Acquired,
    /// A valid Lease held by someone else.
    HeldBy(String),
}

/// A candidate for one Lease (client-go's `LeaderElector`).
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    /// The Lease spec last seen and when (local monotonic clock) it was first seen like that.
    observed: Option<(LeaseSpec, Instant)>,
    leading: bool,
}

impl LeaderElector {
    /// A candidate for `config`'s Lease.
    ///
    /// # Errors
    /// [`ConfigError`] when the settings are inconsistent.
    pub fn new(client: Client, config: LeaderElectionConfig) -> Result<LeaderElector, ConfigError> {
        config.validate()?;
        Ok(LeaderElector { api: Api::namespaced(client, &config.namespace), config, observed: None, leading: false })
    }

    /// The settings.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    fn err(&self, what: &'static str) -> impl FnOnce(kube::Error) -> LeaseError + '_ {
        move |source| LeaseError {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            what,
            source,
        }
    }

    /// One attempt to take or renew the Lease (client-go's `tryAcquireOrRenew`).
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, LeaseError> {
        let now = MicroTime(Timestamp::now());
        let lease_seconds = self.config.lease_seconds();
        let current = self.api.get_opt(&self.config.name).await.map_err(self.err("reading"))?;
        let Some(lease) = current else {
            let spec = LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(lease_seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            };
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec.clone()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.observed = Some((spec, Instant::now()));
                    Ok(Attempt::Acquired)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    Ok(Attempt::HeldBy("another candidate that created it first".into()))
                }
                Err(e) => Err(self.err("creating")(e)),
            };
        };
        let old = lease.spec.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|(seen, _)| *seen != old) {
            self.observed = Some((old.clone(), Instant::now()));
        }
        let holder = old.holder_identity.clone().unwrap_or_default();
        let valid = self.observed.as_ref().is_some_and(|(_, at)| {
            let d = Duration::from_secs(u64::try_from(old.lease_duration_seconds.unwrap_or(0)).unwrap_or(0));
            at.elapsed() < d
        });
        let mine = holder == self.config.identity;
        if !holder.is_empty() && !mine && valid {
            return Ok(Attempt::HeldBy(holder));
        }
        let spec = if mine && self.leading {
            LeaseSpec { renew_time: Some(now), lease_duration_seconds: Some(lease_seconds), ..old }
        } else {
            LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(lease_seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(old.lease_transitions.unwrap_or(0) + i32::from(!mine)),
                ..old
            }
        };
        let mut updated = lease;
        updated.spec = Some(spec.clone());
        // `replace` sends metadata.resourceVersion: a concurrent writer makes this a 409 Conflict.
        match self.api.replace(&self.config.name, &PostParams::default(), &updated).await {
            Ok(_) => {
                self.observed = Some((spec, Instant::now()));
                Ok(Attempt::Acquired)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                Ok(Attempt::HeldBy("a concurrent writer (409 Conflict)".into()))
            }
            Err(e) => Err(self.err("updating")(e)),
        }
    }

    /// Tries every `retry_period` until this candidate holds the Lease. API errors are logged and
    /// retried; the future never fails (wrap it in a `select!` with shutdown).
    pub async fn acquire(&mut self) {
        let mut last_holder = String::new();
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Acquired) => {
                    self.leading = true;
                    crate::metrics::global().set_leader(true);
                    tracing::info!(lease = %format!("{}/{}", self.config.namespace, self.config.name), identity = %self.config.identity, "became leader");
                    return;
                }
                Ok(Attempt::HeldBy(holder)) => {
                    if holder != last_holder {
                        tracing::info!(lease = %format!("{}/{}", self.config.namespace, self.config.name), %holder, "waiting for leadership (standby)");
                        last_holder = holder;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "leader election: cannot acquire the lease; retrying"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// While leading: renews every `retry_period`; returns why leadership was lost (client-go's
    /// `renew`: no successful renewal within `renew_deadline`, or another holder).
    pub async fn hold(&mut self) -> String {
        loop {
            let deadline = Instant::now() + self.config.renew_deadline;
            loop {
                match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                    Ok(Ok(Attempt::Acquired)) => break,
                    Ok(Ok(Attempt::HeldBy(holder))) => {
                        self.leading = false;
                        crate::metrics::global().set_leader(false);
                        return format!("the Lease is now held by {holder}");
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "leader election: renewal failed; retrying until the renew deadline");
                    }
                    Err(_) => {}
                }
                if Instant::now() + self.config.retry_period >= deadline {
                    self.leading = false;
                    crate::metrics::global().set_leader(false);
                    return format!(
                        "no renewal succeeded within the renew deadline ({:?})",
                        self.config.renew_deadline
                    );
                }
                tokio::time::sleep(self.config.retry_period).await;
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Gives the Lease up if this candidate holds it: empty `holderIdentity`,
    /// `leaseDurationSeconds: 1`, `acquireTime`/`renewTime` now, transitions kept (client-go's
    /// `release`). Does nothing when not leading.
    ///
    /// # Errors
    /// [`LeaseError`] when the Lease cannot be read or written (it then expires by itself).
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        if !self.leading {
            return Ok(());
        }
        self.leading = false;
        crate::metrics::global().set_leader(false);
        let Some(mut lease) = self.api.get_opt(&self.config.name).await.map_err(self.err("reading"))? else {
            return Ok(());
        };
        let old = lease.spec.clone().unwrap_or_default();
        if old.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(Timestamp::now());
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..old
        });
        self.api.replace(&self.config.name, &PostParams::default(), &lease).await.map_err(self.err("releasing"))?;
        tracing::info!(lease = %format!("{}/{}", self.config.namespace, self.config.name), "released the lease");
        Ok(())
    }
}

/// Runs `work` only while this candidate leads: waits for the Lease (standby), then runs `work`
/// on its own Tokio task (so that busy reconcilers cannot delay a renewal) while renewing.
/// Returns when `shutdown` resolves (the work is aborted and the Lease released), when `work`
/// ends (Lease released), or when leadership is lost (work aborted at once, nothing released).
/// The work task has ended (is dropped) before this returns.
///
/// # Errors
/// [`ConfigError`] when the settings are inconsistent (before anything is done).
pub async fn run<W, S>(
    client: Client,
    config: LeaderElectionConfig,
    shutdown: S,
    work: W,
) -> Result<Outcome, ConfigError>
where
    W: std::future::Future<Output = ()> + Send + 'static,
    S: std::future::Future<Output = ()>,
{
    let mut elector = LeaderElector::new(client, config)?;
    tokio::pin!(shutdown);
    tokio::select! {
        _ = elector.acquire() => {}
        _ = &mut shutdown => return Ok(Outcome::ShutdownWhileStandby),
    }
    let mut task = tokio::spawn(work);
    let (outcome, release) = {
        // `hold` borrows the elector mutably; release needs it after the select ends.
        let hold = elector.hold();
        tokio::pin!(hold);
        tokio::select! {
            reason = &mut hold => (Outcome::LostLeadership { reason }, false),
            _ = &mut task => (Outcome::WorkEnded, true),
            _ = &mut shutdown => (Outcome::ShutdownWhileLeading, true),
        }
    };
    // Stop the work before the Lease is released, so that no two leaders ever reconcile at once.
    task.abort();
    let _ = task.await;
    if release && let Err(e) = elector.release().await {
        tracing::warn!(error = %e, "could not release the lease; it expires by itself");
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lease: u64, renew: u64, retry: u64) -> LeaderElectionConfig {
        LeaderElectionConfig {
            namespace: "capstan-system".into(),
            name: "capstan".into(),
            identity: "a".into(),
            lease_duration: Duration::from_millis(lease),
            renew_deadline: Duration::from_millis(renew),
            retry_period: Duration::from_millis(retry),
        }
    }

    #[test]
    fn durations_must_be_ordered() {
        assert_eq!(cfg(15_000, 10_000, 2_000).validate(), Ok(()));
        assert!(matches!(cfg(10_000, 10_000, 2_000).validate(), Err(ConfigError::Durations { .. })));
        assert!(matches!(cfg(15_000, 2_000, 2_000).validate(), Err(ConfigError::Durations { .. })));
        assert!(matches!(cfg(15_000, 10_000, 0).validate(), Err(ConfigError::Durations { .. })));
        assert!(matches!(cfg(900, 500, 100).validate(), Err(ConfigError::Durations { .. })));
        let mut c = cfg(15_000, 10_000, 2_000);
        c.identity.clear();
        assert_eq!(c.validate(), Err(ConfigError::Empty("the identity")));
        let msg = cfg(1_000, 2_000, 3_000).validate().unwrap_err().to_string();
        assert!(msg.contains("--lease-duration") && msg.contains("--renew-deadline"), "{msg}");
    }
}
