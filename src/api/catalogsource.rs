//! `CatalogSource` (`operators.coreos.com/v1alpha1`): where a catalog of operator bundles comes
//! from (`reference/olm-v0.md` §1.2; upstream `pkg/operators/v1alpha1/catalogsource_types.go`).
//!
//! capstan pulls `spec.image` by digest directly from the registry (no registry pod) for
//! `sourceType: grpc` (as written for OLM) and for capstan's `sourceType: image`.

// kube's repeated `printcolumn(type_ = "string", …)` arguments are not duplicate attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// OLM's default poll interval when `spec.updateStrategy.registryPoll.interval` does not parse:
/// 15 minutes (`DefaultRegistryPollDuration`, `reference/olm-v0.md` §1.2).
pub const DEFAULT_REGISTRY_POLL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Spec of a CatalogSource (`CatalogSourceSpec`). Required: `sourceType`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
    namespaced,
    status = "CatalogSourceStatus",
    shortname = "catsrc",
    category = "olm",
    derive = "PartialEq",
    doc = "CatalogSource is a repository of CSVs, CRDs, and operator packages.",
    printcolumn(
        name = "Display",
        type_ = "string",
        json_path = ".spec.displayName",
        description = "The pretty name of the catalog"
    ),
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".spec.sourceType",
        description = "The type of the catalog"
    ),
    printcolumn(
        name = "Publisher",
        type_ = "string",
        json_path = ".spec.publisher",
        description = "The publisher of the catalog"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceSpec {
    /// How the catalog is served: `grpc`, `configmap`, `internal` (OLM), or capstan's `image`.
    pub source_type: SourceType,
    /// Dependency-resolution preference: higher wins; ties are ranked by name. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Name of a ConfigMap holding a catalog (OLM's `configmap` source type; not served by capstan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// `host:port` of a running gRPC registry (`opm serve`, `operator-sdk run bundle`); used with
    /// sourceType `grpc` when `image` is empty (OLM: ignored when `image` is set). capstan reads the
    /// catalog through OLM's registry API (`catalog::grpc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Catalog image reference (tag or digest); capstan pulls the File-Based Catalog from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Settings of OLM's registry pod (kept for compatibility; capstan runs no registry pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_pod_config: Option<GrpcPodConfig>,
    /// How a tagged `image` is re-checked for a new digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Names of pull secrets (in the CatalogSource's namespace) tried for catalog and bundle images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<String>>,
    /// Display name of the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Description of the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Publisher of the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// Icon of the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Icon>,
}

open_enum! {
    /// `spec.sourceType` of a CatalogSource (OLM `SourceType`; `reference/olm-v0.md` §1.2).
    pub enum SourceType {
        /// `grpc`: with `image`, a catalog image (capstan pulls it by digest); with `address`, a
        /// running gRPC registry.
        Grpc = "grpc",
        /// `configmap`: a catalog stored in a ConfigMap (OLM).
        ConfigMap = "configmap",
        /// `internal`: deprecated alias of `configmap` (OLM).
        Internal = "internal",
        /// `image`: capstan's name for "a catalog image pulled directly"; same as `grpc` + `image`.
        Image = "image",
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by `open_enum!`
impl Default for SourceType {
    fn default() -> Self {
        SourceType::Grpc
    }
}

/// `spec.icon`: `{base64data, mediatype}` (OLM `Icon`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Icon {
    /// Base64-encoded image data.
    #[serde(rename = "base64data")]
    pub base64data: String,
    /// Media type of the image, e.g. `image/svg+xml`.
    #[serde(rename = "mediatype")]
    pub mediatype: String,
}

/// `spec.updateStrategy`: only `registryPoll` exists (OLM `UpdateStrategy`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// Poll the image tag on an interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_poll: Option<RegistryPoll>,
}

/// `spec.updateStrategy.registryPoll` (OLM `RegistryPoll`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryPoll {
    /// Poll interval as a Go duration string (`10m`, `1h30m`, `45s`). When it does not parse, OLM
    /// polls every 15 minutes and reports `InvalidIntervalError`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

impl RegistryPoll {
    /// The poll interval, parsed as Go's `time.ParseDuration` does (`10m`, `1h30m`, `45s`, `1.5h`;
    /// via [`kube::core::Duration`]).
    ///
    /// # Errors
    /// [`IntervalError`] when the interval is absent, does not parse, or is not positive (capstan
    /// also refuses zero and negative intervals, which would poll without pause). OLM then polls
    /// every [`DEFAULT_REGISTRY_POLL`] and sets `status.reason` to `InvalidIntervalError`
    /// (`reference/olm-v0.md` §1.2).
    pub fn parse_interval(&self) -> Result<std::time::Duration, IntervalError> {
        let raw = self.interval.as_deref().unwrap_or("");
        let err = |reason: String| IntervalError { interval: raw.to_string(), reason };
        let d: kube::core::Duration = raw
            .trim()
            .parse()
            .map_err(|e| err(super::common::go_duration_error(raw).unwrap_or_else(|| format!("{e}"))))?;
        if d.is_negative() || std::time::Duration::from(d).is_zero() {
            return Err(err("the interval must be positive".to_string()));
        }
        Ok(d.into())
    }
}

/// `spec.updateStrategy.registryPoll.interval` is not a usable duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "spec.updateStrategy.registryPoll.interval {interval:?} is not a valid duration ({reason}); write a Go duration \
     such as 10m or 1h30m (polling every 15m until then)"
)]
pub struct IntervalError {
    /// The interval as written (empty when absent).
    pub interval: String,
    /// Why it was refused: Go's `time.ParseDuration` error when it does not parse
    /// ([`super::common::go_duration_error`]).
    pub reason: String,
}

impl IntervalError {
    /// The CatalogSource `status.message` OLM writes for it with reason `InvalidIntervalError`,
    /// word for word (\[API\] `operators/v1alpha1/catalogsource_types.go`
    /// `UpdateStrategy.UnmarshalJSON`): clients, OLM's e2e suite among them, compare it.
    pub fn olm_message(&self) -> String {
        format!(
            "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of 15m0s instead. Error: {}",
            self.reason
        )
    }
}

/// `spec.grpcPodConfig` (OLM `GrpcPodConfig`): scheduling of OLM's registry pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcPodConfig {
    /// Node selector of the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Affinity of the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Priority class of the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Pod security profile: `legacy` or `restricted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context_config: Option<SecurityConfig>,
    /// Memory target (sets `$GOMEMLIMIT` and the memory request of the registry pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_target: Option<Quantity>,
    /// Extract the FBC from an image without `opm` and serve it with a well-known `opm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_content: Option<ExtractContentConfig>,
}

/// `spec.grpcPodConfig.securityContextConfig` (OLM `SecurityConfig`; closed enum in OLM's CRD).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SecurityConfig {
    /// `legacy`: no restricted security context.
    Legacy,
    /// `restricted`: pod security `restricted` profile.
    Restricted,
}

/// `spec.grpcPodConfig.extractContent` (OLM `ExtractContentConfig`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtractContentConfig {
    /// Directory of the pre-built cache in the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<String>,
    /// Directory of the FBC in the image.
    pub catalog_dir: String,
}

/// Status of a CatalogSource (`CatalogSourceStatus`), plus capstan's resolved image, digest and
/// package count.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    /// Human-readable message of the last error, empty when healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Machine-readable reason of the last error: `SpecInvalidError`, `ConfigMapError`,
    /// `RegistryServerError` or `InvalidIntervalError`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the image tag was last checked for a new digest (OLM `latestImageRegistryPoll`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_image_registry_poll: Option<Time>,
    /// OLM's ConfigMap source reference (deprecated; kept for compatibility).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "configMapReference")]
    pub config_map_reference: Option<ConfigMapResourceReference>,
    /// The registry Service clients dial (`<serviceName>.<serviceNamespace>.svc:<port>`): with
    /// `capstan controller --registry-listen`, a Service in front of capstan's own gRPC registry
    /// of the catalog; `{protocol: grpc, createdAt}` for a `spec.address` source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_service: Option<RegistryServiceStatus>,
    /// Connection to the catalog: for capstan, the state of the last pull of `spec.image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_state: Option<GrpcConnectionState>,
    /// Conditions (`metav1.Condition`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// capstan: the catalog image pinned by digest that is being served, `<repository>@sha256:<hex>`
    /// (the tag in `spec.image` resolved at the last successful pull).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_image: Option<String>,
    /// capstan: the manifest digest of `resolvedImage`, `sha256:<hex>`; a poll that sees
    /// another digest re-reads the catalog and re-resolves Subscriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_digest: Option<String>,
    /// capstan: how many packages the served catalog holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_count: Option<i64>,
}

/// `status.connectionState` (OLM `GRPCConnectionState`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcConnectionState {
    /// Address of the catalog's registry: `<name>.<namespace>.svc:50051` when capstan serves it
    /// (`--registry-listen`), with that flag `spec.address` for an address source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// gRPC connectivity state: `READY`, `CONNECTING`, `TRANSIENT_FAILURE`, `IDLE`, `SHUTDOWN`.
    pub last_observed_state: String,
    /// When the state was last observed (OLM JSON name `lastConnect`).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "lastConnect")]
    pub last_connect: Option<Time>,
}

/// `status.registryService` (OLM `RegistryServiceStatus`): address is
/// `<serviceName>.<serviceNamespace>.svc:<port>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryServiceStatus {
    /// Protocol, e.g. `grpc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Service name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Service namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    /// Port, as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// When the Service was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
}

/// `status.configMapReference` (OLM `ConfigMapResourceReference`, deprecated).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapResourceReference {
    /// ConfigMap name.
    pub name: String,
    /// ConfigMap namespace.
    pub namespace: String,
    /// ConfigMap UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// ConfigMap resourceVersion read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// When it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

/// Values of `status.reason` (OLM `CatalogSource*Error` constants, `reference/olm-v0.md` §1.2).
pub mod reason {
    /// The spec is invalid (e.g. neither `image` nor `address`).
    pub const SPEC_INVALID_ERROR: &str = "SpecInvalidError";
    /// The ConfigMap of a `configmap` source could not be read.
    pub const CONFIG_MAP_ERROR: &str = "ConfigMapError";
    /// The catalog could not be served (for capstan: pulling or reading the catalog image failed).
    pub const REGISTRY_SERVER_ERROR: &str = "RegistryServerError";
    /// `spec.updateStrategy.registryPoll.interval` does not parse.
    pub const INVALID_INTERVAL_ERROR: &str = "InvalidIntervalError";
}

/// Values of `status.connectionState.lastObservedState` (gRPC connectivity states, as OLM reports them).
pub mod connection_state {
    /// The catalog is being fetched.
    pub const CONNECTING: &str = "CONNECTING";
    /// The catalog is available.
    pub const READY: &str = "READY";
    /// The last attempt failed; it will be retried.
    pub const TRANSIENT_FAILURE: &str = "TRANSIENT_FAILURE";
    /// No attempt yet.
    pub const IDLE: &str = "IDLE";
    /// Shut down.
    pub const SHUTDOWN: &str = "SHUTDOWN";
}

impl CatalogSource {
    /// Whether capstan serves this source by pulling `spec.image`: `sourceType` `grpc` or
    /// `image` with a non-empty `image`.
    pub fn is_image_source(&self) -> bool {
        matches!(self.spec.source_type, SourceType::Grpc | SourceType::Image)
            && self.spec.image.as_deref().is_some_and(|i| !i.is_empty())
    }

    /// The catalog's priority (`spec.priority`, default 0).
    pub fn priority(&self) -> i64 {
        self.spec.priority.unwrap_or(0)
    }

    /// How often the catalog image is polled (§1.2): `spec.updateStrategy.registryPoll.interval`,
    /// or [`DEFAULT_REGISTRY_POLL`] (15m) when unset, empty or invalid — then with the
    /// [`IntervalError`], which the CatalogSource's status shows.
    pub fn poll_period(&self) -> (std::time::Duration, Option<IntervalError>) {
        match self.spec.update_strategy.as_ref().and_then(|u| u.registry_poll.as_ref()) {
            Some(p) if p.interval.as_deref().is_some_and(|i| !i.trim().is_empty()) => match p.parse_interval() {
                Ok(d) => (d, None),
                Err(e) => (DEFAULT_REGISTRY_POLL, Some(e)),
            },
            _ => (DEFAULT_REGISTRY_POLL, None),
        }
    }

    /// The raw poll interval string when polling applies (OLM `CatalogSource.Poll`: an image
    /// source with `updateStrategy.registryPoll`), else `None`.
    pub fn poll_interval(&self) -> Option<&str> {
        if !self.is_image_source() {
            return None;
        }
        let poll = self.spec.update_strategy.as_ref()?.registry_poll.as_ref()?;
        Some(poll.interval.as_deref().unwrap_or(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn catsrc(spec: serde_json::Value) -> CatalogSource {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "c", "namespace": "olm"}, "spec": spec
        }))
        .expect("CatalogSource")
    }

    fn poll(interval: Option<&str>) -> RegistryPoll {
        RegistryPoll { interval: interval.map(str::to_string) }
    }

    #[test]
    fn intervals_parse_as_go_durations() {
        assert_eq!(poll(Some("10m")).parse_interval(), Ok(Duration::from_secs(600)));
        assert_eq!(poll(Some("1h30m")).parse_interval(), Ok(Duration::from_secs(5400)));
        assert_eq!(poll(Some("45s")).parse_interval(), Ok(Duration::from_secs(45)));
        for bad in [None, Some(""), Some("10"), Some("ten minutes"), Some("0s"), Some("-5m")] {
            let e = poll(bad).parse_interval().expect_err("invalid interval");
            assert!(e.to_string().contains("spec.updateStrategy.registryPoll.interval"), "{e}");
            assert_eq!(e.interval, bad.unwrap_or(""));
        }
    }

    #[test]
    fn polling_applies_to_image_sources_only() {
        let grpc = catsrc(serde_json::json!({"sourceType": "grpc", "image": "r/c:1",
            "updateStrategy": {"registryPoll": {"interval": "10m"}}}));
        assert_eq!(grpc.poll_interval(), Some("10m"));
        assert!(grpc.is_image_source());
        let image = catsrc(serde_json::json!({"sourceType": "image", "image": "r/c:1",
            "updateStrategy": {"registryPoll": {}}}));
        assert_eq!(image.poll_interval(), Some(""), "registryPoll without interval still polls (at the default)");
        let address = catsrc(serde_json::json!({"sourceType": "grpc", "address": "h:50051",
            "updateStrategy": {"registryPoll": {"interval": "10m"}}}));
        assert!(!address.is_image_source());
        assert_eq!(address.poll_interval(), None);
        let configmap = catsrc(serde_json::json!({"sourceType": "configmap", "image": "r/c:1",
            "updateStrategy": {"registryPoll": {"interval": "10m"}}}));
        assert_eq!(configmap.poll_interval(), None);
        let no_strategy = catsrc(serde_json::json!({"sourceType": "grpc", "image": "r/c:1"}));
        assert_eq!(no_strategy.poll_interval(), None);
        assert_eq!(no_strategy.priority(), 0);
    }

    fn cs(interval: Option<&str>) -> CatalogSource {
        CatalogSource::new(
            "c",
            CatalogSourceSpec {
                update_strategy: interval
                    .map(|i| UpdateStrategy { registry_poll: Some(RegistryPoll { interval: Some(i.into()) }) }),
                ..Default::default()
            },
        )
    }

    #[test]
    fn poll_interval_defaults_to_15m_and_reports_bad_values() {
        let poll_interval = |c: &CatalogSource| {
            let (d, e) = c.poll_period();
            (d, e.map(|e| e.to_string()))
        };
        assert_eq!(poll_interval(&cs(None)), (Duration::from_secs(900), None));
        assert_eq!(poll_interval(&cs(Some("10m"))), (Duration::from_secs(600), None));
        let (d, e) = poll_interval(&cs(Some("soon")));
        assert_eq!(d, Duration::from_secs(900));
        assert!(e.is_some_and(|e| e.contains("soon")));
    }

    #[test]
    fn unknown_source_types_are_kept() {
        let c = catsrc(serde_json::json!({"sourceType": "oci-artifact", "image": "r/c:1"}));
        assert_eq!(c.spec.source_type, SourceType::Other("oci-artifact".into()));
        assert!(!c.is_image_source());
        assert_eq!(serde_json::to_value(&c).unwrap()["spec"]["sourceType"], "oci-artifact");
    }
}
