//! Prometheus metrics and the health endpoints of `capstan controller`.
//!
//! [`Metrics`] holds every metric family capstan exports (OpenMetrics text, via
//! `prometheus-client`); the controller's reconcilers record into the instance their `Context`
//! carries (`ctx.metrics.observe_resolution(elapsed)`), by default the process-wide [`global`]. [`serve`]
//! answers `GET /metrics`, `/healthz` and `/readyz` on one address (`--metrics-addr`).
//!
//! The series (names as `GET /metrics` shows them):
//!
//! | series | type | labels | meaning |
//! |---|---|---|---|
//! | `capstan_resolution_duration_seconds` | histogram | – | one Subscription resolution |
//! | `capstan_install_duration_seconds` | histogram | `outcome` | executing one InstallPlan (`succeeded` / `failed`) |
//! | `capstan_csvs` | gauge | `phase` | ClusterServiceVersions per `status.phase` |
//! | `capstan_catalog_pull_duration_seconds` | histogram | `catalog` | pulling and loading one catalog image |
//! | `capstan_catalog_size_bytes` | gauge | `catalog` | size of the loaded catalog (FBC bytes) |
//! | `capstan_reconcile_errors_total` | counter | `controller`, `reason` | failed reconciles |
//! | `capstan_leader` | gauge | – | 1 while this process holds the leader Lease (or runs without leader election) |
//!
//! OLM v0 exports similar series (`csv_succeeded`, `csv_abnormal`, `olm_resolution_duration_seconds`;
//! its `pkg/metrics/metrics.go`, `reference/peers.md` and `reference/olm-v0.md`); the names here
//! are capstan's own.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// The ClusterServiceVersion phases (`reference/olm-v0.md` §1.5, OLM's `ClusterServiceVersionPhase`)
/// that `capstan_csvs` always exports, 0 when no CSV is in them.
pub const CSV_PHASES: [&str; 8] =
    ["Pending", "InstallReady", "Installing", "Succeeded", "Failed", "Unknown", "Replacing", "Deleting"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CatalogLabels {
    catalog: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    controller: String,
    reason: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn install_histogram() -> Histogram {
    // 0.1 s … about 14 min.
    Histogram::new(exponential_buckets(0.1, 2.0, 14))
}

fn catalog_pull_histogram() -> Histogram {
    // 10 ms … about 5.5 min.
    Histogram::new(exponential_buckets(0.01, 2.0, 16))
}

/// Every metric family capstan exports, plus the readiness flag `/readyz` reports.
///
/// All methods take `&self` and are cheap (atomics and a short lock); call them from any task.
pub struct Metrics {
    registry: Registry,
    resolution: Histogram,
    install: HistogramFamily<OutcomeLabels>,
    csvs: Family<PhaseLabels, Gauge>,
    catalog_pull: HistogramFamily<CatalogLabels>,
    catalog_size: Family<CatalogLabels, Gauge>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    leader: Gauge,
    ready: AtomicBool,
    /// Phases set by the last [`Metrics::set_csv_phase_counts`], to zero them on the next call.
    csv_phases_seen: Mutex<Vec<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set of families registered in their own registry (tests use their own instance;
    /// the controller uses [`global`]). Families with labels appear on `/metrics` once a label
    /// set has been recorded; `capstan_csvs` (every phase of [`CSV_PHASES`]) and
    /// `capstan_install_duration_seconds` (`succeeded`, `failed`) are exported from the start.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("capstan");
        // 1 ms … about 33 s.
        let resolution = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register_with_unit(
            "resolution_duration",
            "Time to resolve one Subscription",
            Unit::Seconds,
            resolution.clone(),
        );
        let install: HistogramFamily<OutcomeLabels> = Family::new_with_constructor(install_histogram);
        registry.register_with_unit(
            "install_duration",
            "Time to execute one InstallPlan, by outcome (succeeded, failed)",
            Unit::Seconds,
            install.clone(),
        );
        let csvs = Family::<PhaseLabels, Gauge>::default();
        registry.register("csvs", "ClusterServiceVersions by status.phase", csvs.clone());
        let catalog_pull: HistogramFamily<CatalogLabels> = Family::new_with_constructor(catalog_pull_histogram);
        registry.register_with_unit(
            "catalog_pull_duration",
            "Time to pull and load a catalog image, by CatalogSource (namespace/name)",
            Unit::Seconds,
            catalog_pull.clone(),
        );
        let catalog_size = Family::<CatalogLabels, Gauge>::default();
        registry.register_with_unit(
            "catalog_size",
            "Size of the loaded catalog (FBC), by CatalogSource (namespace/name)",
            Unit::Bytes,
            catalog_size.clone(),
        );
        let reconcile_errors = Family::<ErrorLabels, Counter>::default();
        registry.register("reconcile_errors", "Failed reconciles, by controller and reason", reconcile_errors.clone());
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this process holds the leader Lease (always 1 without --leader-elect)",
            leader.clone(),
        );
        let metrics = Metrics {
            registry,
            resolution,
            install,
            csvs,
            catalog_pull,
            catalog_size,
            reconcile_errors,
            leader,
            ready: AtomicBool::new(false),
            csv_phases_seen: Mutex::new(Vec::new()),
        };
        metrics.set_csv_phase_counts(&[]);
        // Both outcomes exported from the start (count 0), so that rates work before the first install.
        for outcome in ["succeeded", "failed"] {
            let _ = metrics.install.get_or_create(&OutcomeLabels { outcome: outcome.into() });
        }
        metrics
    }

    /// Records the duration of one Subscription resolution.
    pub fn observe_resolution(&self, elapsed: Duration) {
        self.resolution.observe(elapsed.as_secs_f64());
    }

    /// Records the duration of executing one InstallPlan; `outcome` is `succeeded` or `failed`
    /// (any short lowercase word is accepted).
    pub fn observe_install(&self, elapsed: Duration, outcome: &str) {
        self.install.get_or_create(&OutcomeLabels { outcome: outcome.to_string() }).observe(elapsed.as_secs_f64());
    }

    /// Sets `capstan_csvs{phase}` to the given counts (phase as in `status.phase`); every phase of
    /// [`CSV_PHASES`] and every phase set before but missing now is set to 0.
    pub fn set_csv_phase_counts(&self, counts: &[(&str, i64)]) {
        let mut seen = self.csv_phases_seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut values: BTreeMap<String, i64> = CSV_PHASES.iter().map(|p| (p.to_string(), 0)).collect();
        for p in seen.iter() {
            values.insert(p.clone(), 0);
        }
        for (phase, n) in counts {
            *values.entry(phase.to_string()).or_insert(0) += n;
        }
        for (phase, n) in &values {
            self.csvs.get_or_create(&PhaseLabels { phase: phase.clone() }).set(*n);
        }
        *seen = values.into_keys().collect();
    }

    /// [`Metrics::set_csv_phase_counts`] from the `status.phase` of every CSV; an empty phase
    /// (a CSV not reconciled yet, OLM's `None` phase) is not counted.
    pub fn set_csv_phases<'a>(&self, phases: impl IntoIterator<Item = &'a str>) {
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for p in phases {
            if !p.is_empty() {
                *counts.entry(p).or_insert(0) += 1;
            }
        }
        let counts: Vec<(&str, i64)> = counts.into_iter().collect();
        self.set_csv_phase_counts(&counts);
    }

    /// Records one pull of the catalog of CatalogSource `catalog` (`namespace/name`): how long it
    /// took and the size in bytes of the loaded catalog.
    pub fn observe_catalog_pull(&self, catalog: &str, elapsed: Duration, bytes: u64) {
        let labels = CatalogLabels { catalog: catalog.to_string() };
        self.catalog_pull.get_or_create(&labels).observe(elapsed.as_secs_f64());
        self.catalog_size.get_or_create(&labels).set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// Forgets the size of a CatalogSource's catalog (the CatalogSource was deleted).
    pub fn forget_catalog(&self, catalog: &str) {
        self.catalog_size.remove(&CatalogLabels { catalog: catalog.to_string() });
    }

    /// Counts one failed reconcile of `controller` (`catalogsource`, `subscription`,
    /// `installplan`, `clusterserviceversion`, …) for `reason` (a short CamelCase word, e.g. the
    /// API error's reason or `Resolution`).
    pub fn reconcile_error(&self, controller: &str, reason: &str) {
        self.reconcile_errors
            .get_or_create(&ErrorLabels { controller: controller.to_string(), reason: reason.to_string() })
            .inc();
    }

    /// Sets `capstan_leader` (true while this process leads).
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Sets what `/readyz` reports: true once the process serves its purpose (controllers started
    /// as leader, or waiting as a standby replica).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// What `/readyz` reports.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The OpenMetrics text exposition of every family (what `GET /metrics` returns).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The process-wide default [`Metrics`], created on first use: what `capstan controller` serves and
/// what the controller's `run` records into. Reconcilers never call this; they record into
/// the instance their `Context` carries.
pub fn global() -> Arc<Metrics> {
    static GLOBAL: OnceLock<Arc<Metrics>> = OnceLock::new();
    GLOBAL.get_or_init(|| Arc::new(Metrics::new())).clone()
}

/// The content type of [`Metrics::encode`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn respond(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

/// Answers one request: `GET /metrics` (OpenMetrics text), `GET /healthz` (200 `ok` while the
/// process runs), `GET /readyz` (200 `ok` when [`Metrics::is_ready`], else 503), 404 otherwise.
pub fn handle(metrics: &Metrics, method: &Method, path: &str) -> Response<Full<Bytes>> {
    if method != Method::GET && method != Method::HEAD {
        return respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "only GET\n".into());
    }
    match path {
        "/metrics" => respond(StatusCode::OK, OPENMETRICS_CONTENT_TYPE, metrics.encode()),
        "/healthz" | "/livez" => respond(StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" if metrics.is_ready() => respond(StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" => respond(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "not ready: the controllers have not started\n".into(),
        ),
        _ => respond(StatusCode::NOT_FOUND, "text/plain", "not found; try /metrics, /healthz or /readyz\n".into()),
    }
}

/// Binds `addr` and serves [`handle`] for `metrics` on it from a spawned task (HTTP/1.1, plain
/// text; put TLS in front if the metrics must not be readable inside the cluster network).
/// Returns the bound address (useful with port 0). Must be called inside a Tokio runtime.
///
/// # Errors
/// When the address cannot be bound (in use, no permission); the message names the address.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<SocketAddr> {
    crate::http::serve(addr, "--metrics-addr", "metrics", move |req| handle(&metrics, req.method(), req.uri().path()))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_every_named_series() {
        let m = Metrics::new();
        m.observe_resolution(Duration::from_millis(20));
        m.observe_install(Duration::from_secs(3), "succeeded");
        m.set_csv_phase_counts(&[("Succeeded", 2), ("Failed", 1)]);
        m.observe_catalog_pull("olm/community", Duration::from_millis(1500), 123_456);
        m.reconcile_error("installplan", "Forbidden");
        m.reconcile_error("installplan", "Forbidden");
        m.set_leader(true);
        let text = m.encode();
        for line in [
            "capstan_resolution_duration_seconds_count 1",
            "capstan_install_duration_seconds_count{outcome=\"succeeded\"} 1",
            "capstan_csvs{phase=\"Succeeded\"} 2",
            "capstan_csvs{phase=\"Failed\"} 1",
            "capstan_csvs{phase=\"Pending\"} 0",
            "capstan_catalog_pull_duration_seconds_sum{catalog=\"olm/community\"} 1.5",
            "capstan_catalog_size_bytes{catalog=\"olm/community\"} 123456",
            "capstan_reconcile_errors_total{controller=\"installplan\",reason=\"Forbidden\"} 2",
            "capstan_leader 1",
            "# TYPE capstan_resolution_duration_seconds histogram",
            "# UNIT capstan_catalog_size_bytes bytes",
        ] {
            assert!(text.lines().any(|l| l == line), "missing line {line:?} in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn csv_phases_are_counted() {
        let m = Metrics::new();
        m.set_csv_phases(["Succeeded", "Succeeded", "Failed", ""]);
        let text = m.encode();
        assert!(text.contains("capstan_csvs{phase=\"Succeeded\"} 2"), "{text}");
        assert!(text.contains("capstan_csvs{phase=\"Failed\"} 1"), "{text}");
        assert!(!text.contains("phase=\"\""), "{text}");
    }

    #[test]
    fn csv_phase_counts_reset_phases_that_emptied() {
        let m = Metrics::new();
        m.set_csv_phase_counts(&[("Installing", 1), ("CustomPhase", 4)]);
        m.set_csv_phase_counts(&[("Succeeded", 1)]);
        let text = m.encode();
        assert!(text.contains("capstan_csvs{phase=\"Installing\"} 0"), "{text}");
        assert!(text.contains("capstan_csvs{phase=\"CustomPhase\"} 0"), "{text}");
        assert!(text.contains("capstan_csvs{phase=\"Succeeded\"} 1"), "{text}");
    }

    #[test]
    fn endpoints_answer_by_path_and_readiness() {
        let m = Metrics::new();
        assert_eq!(handle(&m, &Method::GET, "/healthz").status(), StatusCode::OK);
        assert_eq!(handle(&m, &Method::GET, "/readyz").status(), StatusCode::SERVICE_UNAVAILABLE);
        m.set_ready(true);
        assert_eq!(handle(&m, &Method::GET, "/readyz").status(), StatusCode::OK);
        let metrics = handle(&m, &Method::GET, "/metrics");
        assert_eq!(metrics.status(), StatusCode::OK);
        assert_eq!(metrics.headers()[hyper::header::CONTENT_TYPE], OPENMETRICS_CONTENT_TYPE);
        assert_eq!(handle(&m, &Method::GET, "/other").status(), StatusCode::NOT_FOUND);
        assert_eq!(handle(&m, &Method::POST, "/metrics").status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
