//! Reading a catalog from a running registry — a CatalogSource with `spec.address`, as
//! `opm serve` and `operator-sdk run bundle` provide — through OLM's gRPC registry API
//! (operator-registry v1.73.0 `pkg/api/registry.proto`, service `api.Registry`).
//!
//! capstan calls three RPCs: `ListPackages` (stream of names), `GetPackage` (channels, heads,
//! default channel) and `ListBundles` (one `Bundle` per channel entry, with `replaces`, `skips`,
//! `skipRange`, `bundlePath` and the bundle's properties). [`declarative_config`] turns those
//! answers into the same [`DeclarativeConfig`] an FBC catalog image gives (`olm.package`,
//! `olm.channel`, `olm.bundle` blobs), so resolution and installs do not care where a catalog came
//! from. The transport is tonic's client channel (HTTP/2, plaintext as OLM uses for
//! `spec.address`); the messages are prost derives with the proto's field numbers (v1.74.0), so
//! no build script or `protoc` is needed. They are the one definition of the API's messages:
//! capstan's own registry server (`crate::discovery::registry_server`, `capstan controller
//! --registry-listen`) writes the same types, with every field of `api.Bundle`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tonic::codegen::http::uri::PathAndQuery;

use super::model::DeclarativeConfig;

/// `api.PackageName`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PackageName {
    /// Package name.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// `api.Deprecation`: the message of a deprecated package, channel or bundle (`olm.deprecations`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Deprecation {
    /// Why, for the user.
    #[prost(string, tag = "1")]
    pub message: String,
}

/// `api.Channel` (of a package).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Channel {
    /// Channel name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The channel head's CSV name.
    #[prost(string, tag = "2")]
    pub csv_name: String,
    /// Set when the channel is deprecated.
    #[prost(message, optional, tag = "3")]
    pub deprecation: Option<Deprecation>,
}

/// `api.Package`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Package {
    /// Package name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its channels.
    #[prost(message, repeated, tag = "2")]
    pub channels: Vec<Channel>,
    /// `defaultChannelName`.
    #[prost(string, tag = "3")]
    pub default_channel_name: String,
    /// Set when the package is deprecated.
    #[prost(message, optional, tag = "4")]
    pub deprecation: Option<Deprecation>,
}

/// `api.GroupVersionKind`: an API a bundle provides or requires (`plural` is left empty by
/// operator-registry's FBC server).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct GroupVersionKind {
    /// API group.
    #[prost(string, tag = "1")]
    pub group: String,
    /// API version.
    #[prost(string, tag = "2")]
    pub version: String,
    /// Kind.
    #[prost(string, tag = "3")]
    pub kind: String,
    /// Plural resource name.
    #[prost(string, tag = "4")]
    pub plural: String,
}

/// `api.Dependency`: `type` `olm.gvk` or `olm.package`, `value` JSON text.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dependency {
    /// Dependency type.
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// JSON value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `api.Property`: `value` is JSON text.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Property {
    /// Property type, e.g. `olm.package`.
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// JSON value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `api.Bundle` (one per channel entry in `ListBundles`): what capstan's client reads and what
/// its registry server ([`crate::catalog`]'s callers in `discovery::registry`) writes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Bundle {
    /// CSV name (the bundle name).
    #[prost(string, tag = "1")]
    pub csv_name: String,
    /// Package name.
    #[prost(string, tag = "2")]
    pub package_name: String,
    /// The channel of this entry.
    #[prost(string, tag = "3")]
    pub channel_name: String,
    /// The CSV as JSON (empty in `ListBundles` when the bundle has an image).
    #[prost(string, tag = "4")]
    pub csv_json: String,
    /// The bundle's objects as JSON (`olm.bundle.object`; empty in `ListBundles` when the bundle
    /// has an image).
    #[prost(string, repeated, tag = "5")]
    pub object: Vec<String>,
    /// The bundle image.
    #[prost(string, tag = "6")]
    pub bundle_path: String,
    /// APIs the bundle provides (`olm.gvk`).
    #[prost(message, repeated, tag = "7")]
    pub provided_apis: Vec<GroupVersionKind>,
    /// APIs the bundle requires (`olm.gvk.required`).
    #[prost(message, repeated, tag = "8")]
    pub required_apis: Vec<GroupVersionKind>,
    /// Version (semver).
    #[prost(string, tag = "9")]
    pub version: String,
    /// `olm.skipRange`.
    #[prost(string, tag = "10")]
    pub skip_range: String,
    /// Required APIs and packages.
    #[prost(message, repeated, tag = "11")]
    pub dependencies: Vec<Dependency>,
    /// Properties of the bundle.
    #[prost(message, repeated, tag = "12")]
    pub properties: Vec<Property>,
    /// The entry this one replaces in the channel.
    #[prost(string, tag = "13")]
    pub replaces: String,
    /// Entries this one skips.
    #[prost(string, repeated, tag = "14")]
    pub skips: Vec<String>,
    /// Set when the bundle is deprecated.
    #[prost(message, optional, tag = "15")]
    pub deprecation: Option<Deprecation>,
}

/// `api.ChannelEntry`: bundle `bundle_name` of a channel, and one bundle it replaces (or skips).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, prost::Message)]
pub struct ChannelEntry {
    /// Package name.
    #[prost(string, tag = "1")]
    pub package_name: String,
    /// Channel name.
    #[prost(string, tag = "2")]
    pub channel_name: String,
    /// The bundle.
    #[prost(string, tag = "3")]
    pub bundle_name: String,
    /// What it replaces.
    #[prost(string, tag = "4")]
    pub replaces: String,
}

/// `api.GetBundleRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetBundleRequest {
    /// Package name.
    #[prost(string, tag = "1")]
    pub pkg_name: String,
    /// Channel name.
    #[prost(string, tag = "2")]
    pub channel_name: String,
    /// Bundle (CSV) name.
    #[prost(string, tag = "3")]
    pub csv_name: String,
}

/// `api.GetBundleInChannelRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetBundleInChannelRequest {
    /// Package name.
    #[prost(string, tag = "1")]
    pub pkg_name: String,
    /// Channel name.
    #[prost(string, tag = "2")]
    pub channel_name: String,
}

/// `api.GetAllReplacementsRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetAllReplacementsRequest {
    /// The bundle (CSV) name that is replaced.
    #[prost(string, tag = "1")]
    pub csv_name: String,
}

/// `api.GetReplacementRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetReplacementRequest {
    /// The bundle (CSV) name that is replaced.
    #[prost(string, tag = "1")]
    pub csv_name: String,
    /// Package name.
    #[prost(string, tag = "2")]
    pub pkg_name: String,
    /// Channel name.
    #[prost(string, tag = "3")]
    pub channel_name: String,
}

/// `api.GetAllProvidersRequest`, `api.GetLatestProvidersRequest` and
/// `api.GetDefaultProviderRequest`: the same four fields on the wire.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProvidersRequest {
    /// API group.
    #[prost(string, tag = "1")]
    pub group: String,
    /// API version.
    #[prost(string, tag = "2")]
    pub version: String,
    /// Kind.
    #[prost(string, tag = "3")]
    pub kind: String,
    /// Plural (ignored, as operator-registry ignores it).
    #[prost(string, tag = "4")]
    pub plural: String,
}

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckRequest {
    /// The service asked about (`""` or `Registry`; operator-registry answers every name).
    #[prost(string, tag = "1")]
    pub service: String,
}

/// `grpc.health.v1.HealthCheckResponse`: `status` 1 is `SERVING`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckResponse {
    /// `ServingStatus`: 0 unknown, 1 serving, 2 not serving, 3 service unknown.
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// `grpc.health.v1.HealthCheckResponse.ServingStatus.SERVING`.
pub const HEALTH_SERVING: i32 = 1;

/// `api.ListPackageRequest`, `api.ListBundlesRequest` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}

/// `api.GetPackageRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPackageRequest {
    /// Package name.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// Why a registry could not be read: the address, what was asked, and the transport's or
/// server's answer.
#[derive(Debug, thiserror::Error)]
pub enum GrpcCatalogError {
    /// `spec.address` is not `host:port`.
    #[error(
        "spec.address {address:?} is not a host:port gRPC address: {reason}; set it to the registry's host:port (e.g. 127.0.0.1:50051)"
    )]
    Address {
        /// The address.
        address: String,
        /// Why.
        reason: String,
    },
    /// No connection (refused, unreachable, timeout).
    #[error(
        "cannot connect to the registry at {address} (spec.address): {source}; check that it runs and listens there"
    )]
    Connect {
        /// The address.
        address: String,
        /// The transport error.
        #[source]
        source: tonic::transport::Error,
    },
    /// A call failed.
    #[error("registry at {address}: {call} failed: {status}")]
    Call {
        /// The address.
        address: String,
        /// The RPC, e.g. `ListBundles`.
        call: String,
        /// The gRPC status.
        status: Box<tonic::Status>,
    },
    /// The answers do not make a valid catalog.
    #[error("registry at {address}: its answers do not make a valid catalog: {message}")]
    Content {
        /// The address.
        address: String,
        /// The parse error.
        message: String,
    },
}

/// A catalog read from a registry: its config and a digest of its content (`sha256:` of the
/// canonical JSON stream), which changes exactly when the registry serves something else.
#[derive(Debug, Clone)]
pub struct RegistryCatalog {
    /// The catalog.
    pub config: DeclarativeConfig,
    /// `sha256:<hex>` of the catalog's JSON stream.
    pub digest: String,
}

/// Timeout of each call.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Reads the whole catalog served at `address` (`host:port`, plaintext gRPC).
pub async fn load_registry(address: &str) -> Result<RegistryCatalog, GrpcCatalogError> {
    load_registry_at(address, address).await
}

/// [`load_registry`] of `address` (`spec.address`, as errors name it) dialed at `dial`, e.g.
/// the ClusterIP of the Service `address` names (`controller::registry_services::dial_address`);
/// errors then show `address (dial)`.
pub async fn load_registry_at(address: &str, dial: &str) -> Result<RegistryCatalog, GrpcCatalogError> {
    let shown = if dial == address { address.to_string() } else { format!("{address} ({dial})") };
    let address = shown.as_str();
    let addr_err = |reason: String| GrpcCatalogError::Address { address: address.into(), reason };
    if dial.contains("://") || !dial.contains(':') {
        return Err(addr_err("expected host:port without a scheme".into()));
    }
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{dial}"))
        .map_err(|e| addr_err(e.to_string()))?
        .connect_timeout(Duration::from_secs(10))
        .timeout(CALL_TIMEOUT);
    let channel =
        endpoint.connect().await.map_err(|source| GrpcCatalogError::Connect { address: address.into(), source })?;
    let mut grpc = tonic::client::Grpc::new(channel);
    let call_err = |call: &str| {
        let call = call.to_string();
        move |status: tonic::Status| GrpcCatalogError::Call { address: address.into(), call, status: Box::new(status) }
    };
    let ready = |call: &'static str| {
        move |e: tonic::transport::Error| GrpcCatalogError::Call {
            address: address.into(),
            call: call.into(),
            status: Box::new(tonic::Status::unavailable(e.to_string())),
        }
    };

    grpc.ready().await.map_err(ready("ListPackages"))?;
    let mut names = Vec::new();
    let mut s = grpc
        .server_streaming(
            tonic::Request::new(Empty {}),
            PathAndQuery::from_static("/api.Registry/ListPackages"),
            tonic_prost::ProstCodec::<Empty, PackageName>::default(),
        )
        .await
        .map_err(call_err("ListPackages"))?
        .into_inner();
    while let Some(p) = s.message().await.map_err(call_err("ListPackages"))? {
        names.push(p.name);
    }
    let mut packages = Vec::new();
    for name in names {
        grpc.ready().await.map_err(ready("GetPackage"))?;
        let p = grpc
            .unary(
                tonic::Request::new(GetPackageRequest { name: name.clone() }),
                PathAndQuery::from_static("/api.Registry/GetPackage"),
                tonic_prost::ProstCodec::<GetPackageRequest, Package>::default(),
            )
            .await
            .map_err(call_err(&format!("GetPackage {name}")))?
            .into_inner();
        packages.push(p);
    }
    grpc.ready().await.map_err(ready("ListBundles"))?;
    let mut bundles = Vec::new();
    let mut s = grpc
        .server_streaming(
            tonic::Request::new(Empty {}),
            PathAndQuery::from_static("/api.Registry/ListBundles"),
            tonic_prost::ProstCodec::<Empty, Bundle>::default(),
        )
        .await
        .map_err(call_err("ListBundles"))?
        .into_inner();
    while let Some(b) = s.message().await.map_err(call_err("ListBundles"))? {
        bundles.push(b);
    }
    let stream = fbc_stream(&packages, &bundles);
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(stream.as_bytes())));
    let config = super::parse::parse_bytes(&format!("grpc://{address}"), stream.as_bytes())
        .map_err(|e| GrpcCatalogError::Content { address: address.into(), message: e.to_string() })?;
    Ok(RegistryCatalog { config, digest })
}

/// The FBC JSON stream (one document per line, packages sorted) of a registry's answers:
/// `olm.package` per package (`defaultChannel`), `olm.channel` per channel with one entry per
/// `ListBundles` answer in it (`replaces`, `skips`, `skipRange`), `olm.bundle` per bundle name
/// (`image` = `bundlePath`, the properties as served, `olm.package` added when the registry sent
/// none, and for a bundle without an image its `object`s as `olm.bundle.object`). Deterministic: the same answers in any order give the same text.
pub fn fbc_stream(packages: &[Package], bundles: &[Bundle]) -> String {
    let mut docs: Vec<Value> = Vec::new();
    let mut pkgs: Vec<&Package> = packages.iter().collect();
    pkgs.sort_by(|a, b| a.name.cmp(&b.name));
    for p in pkgs {
        docs.push(json!({"schema": "olm.package", "name": p.name, "defaultChannel": p.default_channel_name}));
        let mut channels: BTreeMap<&str, Vec<Value>> =
            p.channels.iter().map(|c| (c.name.as_str(), Vec::new())).collect();
        let mut by_name: BTreeMap<&str, &Bundle> = BTreeMap::new();
        for b in bundles.iter().filter(|b| b.package_name == p.name) {
            let mut entry = json!({"name": b.csv_name});
            if !b.replaces.is_empty() {
                entry["replaces"] = json!(b.replaces);
            }
            if !b.skips.is_empty() {
                entry["skips"] = json!(b.skips);
            }
            if !b.skip_range.is_empty() {
                entry["skipRange"] = json!(b.skip_range);
            }
            let list = channels.entry(b.channel_name.as_str()).or_default();
            if !list.iter().any(|e| e["name"] == b.csv_name) {
                list.push(entry);
            }
            by_name.entry(b.csv_name.as_str()).or_insert(b);
        }
        for (name, mut entries) in channels {
            entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            docs.push(json!({"schema": "olm.channel", "name": name, "package": p.name, "entries": entries}));
        }
        for (&name, &b) in &by_name {
            let mut props: Vec<Value> = b
                .properties
                .iter()
                .map(|pr| json!({"type": pr.r#type, "value": serde_json::from_str::<Value>(&pr.value).unwrap_or_else(|_| json!(pr.value))}))
                .collect();
            if !props.iter().any(|p| p["type"] == "olm.package") {
                props.insert(0, json!({"type": "olm.package", "value": {"packageName": p.name, "version": b.version}}));
            }
            // A bundle without an image is installed from its objects: put them back as the
            // `olm.bundle.object` properties they were served from.
            if b.bundle_path.is_empty() && !props.iter().any(|p| p["type"] == "olm.bundle.object") {
                use base64::Engine;
                for o in &b.object {
                    let data = base64::engine::general_purpose::STANDARD.encode(o);
                    props.push(json!({"type": "olm.bundle.object", "value": {"data": data}}));
                }
            }
            let mut doc = json!({"schema": "olm.bundle", "name": name, "package": p.name, "properties": props});
            if !b.bundle_path.is_empty() {
                doc["image"] = json!(b.bundle_path);
            }
            docs.push(doc);
        }
        if let Some(d) = deprecations_blob(p, by_name.values().copied()) {
            docs.push(d);
        }
    }
    docs.iter().map(|d| format!("{d}\n")).collect()
}

/// The `olm.deprecations` blob of package `p` that the registry's `deprecation` fields (on the
/// package, its channels and `bundles`) came from (operator-registry
/// `alpha/declcfg/declcfg_to_model.go`), or `None` when nothing is deprecated.
fn deprecations_blob<'a>(p: &Package, bundles: impl Iterator<Item = &'a Bundle>) -> Option<Value> {
    let mut entries = Vec::new();
    if let Some(d) = &p.deprecation {
        entries.push(json!({"reference": {"schema": "olm.package"}, "message": d.message}));
    }
    let mut channels: Vec<&Channel> = p.channels.iter().filter(|c| c.deprecation.is_some()).collect();
    channels.sort_by(|a, b| a.name.cmp(&b.name));
    for c in channels {
        let message = c.deprecation.as_ref().map(|d| d.message.as_str()).unwrap_or_default();
        entries.push(json!({"reference": {"schema": "olm.channel", "name": c.name}, "message": message}));
    }
    for b in bundles {
        if let Some(d) = &b.deprecation {
            entries.push(json!({"reference": {"schema": "olm.bundle", "name": b.csv_name}, "message": d.message}));
        }
    }
    (!entries.is_empty()).then(|| json!({"schema": "olm.deprecations", "package": p.name, "entries": entries}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(name: &str, channel: &str, replaces: &str, version: &str) -> Bundle {
        Bundle {
            csv_name: name.into(),
            package_name: "nginx-operator".into(),
            channel_name: channel.into(),
            bundle_path: format!("registry.example.com/nginx-operator-bundle:v{version}"),
            version: version.into(),
            skip_range: String::new(),
            properties: vec![Property {
                r#type: "olm.gvk".into(),
                value: r#"{"group":"example.com","kind":"Nginx","version":"v1alpha1"}"#.into(),
            }],
            replaces: replaces.into(),
            ..Default::default()
        }
    }

    #[test]
    fn registry_deprecations_become_the_olm_deprecations_blob() {
        let dep = |m: &str| Some(Deprecation { message: m.into() });
        let pkg = Package {
            name: "nginx-operator".into(),
            channels: vec![Channel {
                name: "alpha".into(),
                csv_name: "nginx-operator.v0.2.0".into(),
                deprecation: dep("c"),
            }],
            default_channel_name: "alpha".into(),
            deprecation: dep("p"),
        };
        let mut old = bundle("nginx-operator.v0.1.0", "alpha", "", "0.1.0");
        old.deprecation = dep("b");
        let bundles = [bundle("nginx-operator.v0.2.0", "alpha", "nginx-operator.v0.1.0", "0.2.0"), old];
        let text = fbc_stream(std::slice::from_ref(&pkg), &bundles);
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(
            last,
            json!({"schema": "olm.deprecations", "package": "nginx-operator", "entries": [
                {"reference": {"schema": "olm.package"}, "message": "p"},
                {"reference": {"schema": "olm.channel", "name": "alpha"}, "message": "c"},
                {"reference": {"schema": "olm.bundle", "name": "nginx-operator.v0.1.0"}, "message": "b"},
            ]})
        );
        let cfg = crate::catalog::parse::parse_bytes("t", text.as_bytes()).unwrap();
        assert_eq!(cfg.deprecations.len(), 1, "parsed back as the catalog's deprecations");
        let plain = Package {
            deprecation: None,
            channels: vec![Channel { deprecation: None, ..pkg.channels[0].clone() }],
            ..pkg
        };
        let bundles = [bundle("nginx-operator.v0.1.0", "alpha", "", "0.1.0")];
        assert!(!fbc_stream(&[plain], &bundles).contains("olm.deprecations"), "nothing deprecated: no blob");
    }

    #[test]
    fn registry_answers_become_the_fbc_they_came_from() {
        let pkg = Package {
            name: "nginx-operator".into(),
            channels: vec![Channel {
                name: "alpha".into(),
                csv_name: "nginx-operator.v0.2.0".into(),
                deprecation: None,
            }],
            default_channel_name: "alpha".into(),
            deprecation: None,
        };
        let bundles = [
            bundle("nginx-operator.v0.2.0", "alpha", "nginx-operator.v0.1.0", "0.2.0"),
            bundle("nginx-operator.v0.1.0", "alpha", "", "0.1.0"),
        ];
        let text = fbc_stream(std::slice::from_ref(&pkg), &bundles);
        let mut reversed = bundles.clone();
        reversed.reverse();
        assert_eq!(text, fbc_stream(&[pkg], &reversed), "order of the answers does not matter");
        let docs: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(docs[0], json!({"schema": "olm.package", "name": "nginx-operator", "defaultChannel": "alpha"}));
        assert_eq!(
            docs[1]["entries"],
            json!([{"name": "nginx-operator.v0.1.0"}, {"name": "nginx-operator.v0.2.0", "replaces": "nginx-operator.v0.1.0"}])
        );
        assert_eq!(docs[2]["image"], "registry.example.com/nginx-operator-bundle:v0.1.0");
        assert_eq!(
            docs[2]["properties"][0],
            json!({"type": "olm.package", "value": {"packageName": "nginx-operator", "version": "0.1.0"}})
        );
        assert_eq!(docs[2]["properties"][1]["value"]["kind"], "Nginx", "property values are JSON, not strings");
        let cfg = crate::catalog::parse::parse_bytes("grpc://test", text.as_bytes()).expect("parses as FBC");
        assert_eq!(cfg.bundles.len(), 2);
    }

    #[tokio::test]
    async fn an_unreachable_or_malformed_address_is_named() {
        let e = load_registry("http://127.0.0.1:1").await.unwrap_err().to_string();
        assert!(e.contains("spec.address") && e.contains("host:port"), "{e}");
        // Port 1 on loopback: nothing listens.
        let e = load_registry("127.0.0.1:1").await.unwrap_err().to_string();
        assert!(e.contains("cannot connect to the registry at 127.0.0.1:1"), "{e}");
    }
}
