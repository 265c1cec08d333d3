//! The gRPC registry capstan serves for each CatalogSource it loaded itself (image and ConfigMap
//! sources; a `spec.address` source already is a registry), in place of OLM v0's registry Pod
//! and Service (`pkg/controller/registry/reconciler/grpc.go`, `configmap.go`): so that a client
//! that reads `status.registryService` and dials `<serviceName>.<serviceNamespace>.svc:50051`
//! (OLM's e2e suite, `catalogSourceRegistryPodSynced`) reaches the catalog.
//!
//! - One listener per CatalogSource ([`RegistryServers`]) on `--registry-listen`'s address and a
//!   port of its own. Nothing in a connection says reliably which catalog it is for (kube-proxy
//!   rewrites the destination to the endpoint; HTTP/2 `:authority` is whatever the client dialed,
//!   e.g. a ClusterIP), so the port is what tells the catalogs apart.
//! - Per CatalogSource a Service `<name>` (port 50051 `grpc`, no selector) and an EndpointSlice
//!   `<name>` (`kubernetes.io/service-name`, managed by `capstan`) whose one endpoint is the
//!   advertised address and that listener's port; kube-proxy forwards the Service's port there.
//!   Both are owned by the CatalogSource (ownerReference), so the garbage collector removes them
//!   with it. Only the leader runs the CatalogSource reconciler, so the slices always point at
//!   the leader; a new leader binds new ports and rewrites them.
//! - [`registry_status`]: `status.registryService` and `connectionState.address` once the
//!   Service exists, as OLM writes them.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};

use super::Error;
use crate::api::CatalogSource;
use crate::api::catalogsource::RegistryServiceStatus;
use crate::catalog::validated::ValidatedCatalog;
use crate::discovery::registry_server::{RegistryService, serve};
use crate::install::FIELD_MANAGER;

/// The port of every registry Service, as OLM's (`pkg/controller/registry/reconciler/grpc.go`).
pub const REGISTRY_PORT: i32 = 50051;
/// The name of the Service's and the EndpointSlice's port.
pub const PORT_NAME: &str = "grpc";
/// `endpointslice.kubernetes.io/managed-by` of the slices capstan writes (the EndpointSlice
/// controller leaves slices managed by others alone).
pub const MANAGED_BY: &str = "capstan";
/// Label naming the CatalogSource on its Service and EndpointSlice (OLM's label on its registry
/// Pod and Service).
pub const LABEL_CATALOG_SOURCE: &str = "olm.catalogSource";

/// Where `capstan controller` serves the registries (`--registry-listen`, `--registry-advertise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryOptions {
    /// The address the listeners bind (each on a port of its own).
    pub listen: IpAddr,
    /// The address written into the EndpointSlices (the Pod's IP).
    pub advertise: IpAddr,
}

/// One running listener.
struct Running {
    service: RegistryService,
    port: u16,
    stop: tokio::sync::oneshot::Sender<()>,
}

/// The registry listeners of this process, by CatalogSource (namespace, name).
#[derive(Default)]
pub struct RegistryServers {
    running: Mutex<BTreeMap<(String, String), Running>>,
}

impl std::fmt::Debug for RegistryServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryServers").field("keys", &self.keys()).finish()
    }
}

impl RegistryServers {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves `catalog` for `key` on `listen` and returns the port: the running listener (now
    /// answering from `catalog`), or a new one on a free port.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn ensure(
        &self,
        listen: IpAddr,
        key: &(String, String),
        catalog: Arc<ValidatedCatalog>,
    ) -> std::io::Result<u16> {
        if let Some(r) = self.lock().get(key) {
            if !Arc::ptr_eq(&r.service.current(), &catalog) {
                r.service.set(catalog);
            }
            return Ok(r.port);
        }
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(listen, 0)).await?;
        let port = listener.local_addr()?.port();
        let service = RegistryService::new(catalog);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let catalog_name = format!("{}/{}", key.0, key.1);
        let serving = service.clone();
        tokio::spawn(async move {
            if let Err(e) = serve(listener, serving, async { stopped.await.unwrap_or(()) }).await {
                tracing::error!(catalog = %catalog_name, error = %e, "registry listener stopped");
            }
        });
        tracing::info!(catalog = %format!("{}/{}", key.0, key.1), addr = %SocketAddr::new(listen, port), "serving the catalog's gRPC registry");
        let mut running = self.lock();
        if let Some(r) = running.get(key) {
            // Another reconcile of the same key won the race: keep its listener.
            return Ok(r.port);
        }
        running.insert(key.clone(), Running { service, port, stop });
        Ok(port)
    }

    /// Stops the listener of `key`, if any.
    pub fn stop(&self, key: &(String, String)) {
        if let Some(r) = self.lock().remove(key) {
            let _ = r.stop.send(());
            tracing::info!(catalog = %format!("{}/{}", key.0, key.1), "stopped serving the catalog's gRPC registry");
        }
    }

    /// Stops every listener whose key `keep` refuses (CatalogSources that are gone).
    pub fn retain(&self, keep: impl Fn(&(String, String)) -> bool) {
        for key in self.keys().into_iter().filter(|k| !keep(k)) {
            self.stop(&key);
        }
    }

    /// The keys served.
    pub fn keys(&self) -> Vec<(String, String)> {
        self.lock().keys().cloned().collect()
    }
}

/// The ownerReference that makes `cs`'s garbage collection take the object with it.
fn owner(cs: &CatalogSource) -> OwnerReference {
    OwnerReference {
        api_version: CatalogSource::api_version(&()).into_owned(),
        kind: CatalogSource::kind(&()).into_owned(),
        name: cs.metadata.name.clone().unwrap_or_default(),
        uid: cs.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(false),
    }
}

fn labels(cs: &CatalogSource, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let name = cs.metadata.name.clone().unwrap_or_default();
    let mut l = BTreeMap::from([
        (LABEL_CATALOG_SOURCE.to_string(), name),
        ("app.kubernetes.io/managed-by".to_string(), MANAGED_BY.to_string()),
    ]);
    l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    l
}

fn meta(cs: &CatalogSource, extra_labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: cs.metadata.name.clone(),
        namespace: cs.metadata.namespace.clone(),
        labels: Some(labels(cs, extra_labels)),
        owner_references: Some(vec![owner(cs)]),
        ..Default::default()
    }
}

/// The Service `<name>` of CatalogSource `cs`: port 50051 named `grpc`, no selector (its
/// endpoints are [`endpoint_slice`]), owned by `cs`. Pure.
pub fn service(cs: &CatalogSource) -> Service {
    Service {
        metadata: meta(cs, &[]),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.into()),
                port: REGISTRY_PORT,
                target_port: Some(IntOrString::Int(REGISTRY_PORT)),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The EndpointSlice `<name>` of CatalogSource `cs`'s Service: one ready endpoint, `address`,
/// port `port` named `grpc`; labelled for the Service and as managed by capstan; owned by
/// `cs`. Pure.
pub fn endpoint_slice(cs: &CatalogSource, address: IpAddr, port: u16) -> EndpointSlice {
    let service_name = cs.metadata.name.clone().unwrap_or_default();
    EndpointSlice {
        metadata: meta(
            cs,
            &[("kubernetes.io/service-name", &service_name), ("endpointslice.kubernetes.io/managed-by", MANAGED_BY)],
        ),
        address_type: if address.is_ipv4() { "IPv4" } else { "IPv6" }.into(),
        endpoints: Some(vec![Endpoint {
            addresses: vec![address.to_string()],
            conditions: Some(EndpointConditions { ready: Some(true), serving: Some(true), terminating: Some(false) }),
            ..Default::default()
        }]),
        ports: Some(vec![EndpointPort {
            name: Some(PORT_NAME.into()),
            port: Some(i32::from(port)),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
    }
}

/// `status.registryService` of a served CatalogSource whose Service was created at
/// `created_at` (OLM `grpc.go`: protocol `grpc`, the Service's name and namespace, port
/// `"50051"`), with `connectionState.address` `<name>.<namespace>.svc:50051`. Pure.
pub fn registry_status(cs: &CatalogSource, created_at: Option<Time>) -> (RegistryServiceStatus, String) {
    let name = cs.metadata.name.clone().unwrap_or_default();
    let namespace = cs.metadata.namespace.clone().unwrap_or_default();
    let address = format!("{name}.{namespace}.svc:{REGISTRY_PORT}");
    let status = RegistryServiceStatus {
        protocol: Some("grpc".into()),
        service_name: Some(name),
        service_namespace: Some(namespace),
        port: Some(REGISTRY_PORT.to_string()),
        created_at,
    };
    (status, address)
}

/// `status.registryService` of a `spec.address` source, as OLM's `grpc_address.go` writes it:
/// `{protocol: grpc, createdAt}`; `createdAt` kept from `previous` when it was already written.
/// Pure.
pub fn address_status(previous: Option<&RegistryServiceStatus>, now: &Time) -> RegistryServiceStatus {
    RegistryServiceStatus {
        protocol: Some("grpc".into()),
        created_at: previous.and_then(|p| p.created_at.clone()).or_else(|| Some(now.clone())),
        ..Default::default()
    }
}

/// Whether an existing object may be written by capstan for `cs`: it is owned by `cs` (same
/// UID). Pure.
pub fn owned_by(meta: &ObjectMeta, cs: &CatalogSource) -> bool {
    let uid = cs.metadata.uid.as_deref().unwrap_or_default();
    meta.owner_references.iter().flatten().any(|o| o.uid == uid && o.kind == "CatalogSource")
}

/// Why a CatalogSource's registry Service was not written.
#[derive(Debug, thiserror::Error)]
pub enum RegistryServiceError {
    /// A Service or EndpointSlice of that name exists and is not the CatalogSource's.
    #[error(
        "{kind} {namespace}/{name} exists and is not owned by this CatalogSource; capstan leaves it alone (delete or rename it to get the catalog's registry Service)"
    )]
    NotOurs {
        /// `Service` or `EndpointSlice`.
        kind: &'static str,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// An API call failed.
    #[error(transparent)]
    Api(#[from] Error),
}

/// Applies `cs`'s Service and EndpointSlice (advertised at `address:port`), and returns the
/// Service's creation time. Server-side apply with field manager `capstan`; an object of that
/// name capstan does not own is left alone ([`RegistryServiceError::NotOurs`]).
///
/// # Errors
/// [`RegistryServiceError`].
pub async fn apply_objects(
    client: &kube::Client,
    cs: &CatalogSource,
    address: IpAddr,
    port: u16,
) -> Result<Option<Time>, RegistryServiceError> {
    let ns = cs.metadata.namespace.clone().unwrap_or_default();
    let name = cs.metadata.name.clone().unwrap_or_default();
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
    let kube_err = |what: &str| {
        let context = format!("{what} {ns}/{name}");
        move |source: kube::Error| RegistryServiceError::Api(Error::Kube { context, source })
    };
    let not_ours =
        |kind: &'static str| RegistryServiceError::NotOurs { kind, namespace: ns.clone(), name: name.clone() };
    if let Some(s) = services.get_opt(&name).await.map_err(kube_err("reading Service"))?
        && !owned_by(&s.metadata, cs)
    {
        return Err(not_ours("Service"));
    }
    if let Some(s) = slices.get_opt(&name).await.map_err(kube_err("reading EndpointSlice"))?
        && !owned_by(&s.metadata, cs)
    {
        return Err(not_ours("EndpointSlice"));
    }
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut svc = service(cs);
    svc.metadata.managed_fields = None;
    let applied = services
        .patch(&name, &pp, &Patch::Apply(&with_kind(&svc, "v1", "Service")))
        .await
        .map_err(kube_err("applying Service"))?;
    let slice = endpoint_slice(cs, address, port);
    slices
        .patch(&name, &pp, &Patch::Apply(&with_kind(&slice, "discovery.k8s.io/v1", "EndpointSlice")))
        .await
        .map_err(kube_err("applying EndpointSlice"))?;
    Ok(applied.metadata.creation_timestamp)
}

/// `obj` as JSON with `apiVersion` and `kind` (server-side apply needs both).
fn with_kind<T: serde::Serialize>(obj: &T, api_version: &str, kind: &str) -> serde_json::Value {
    let mut v = serde_json::to_value(obj).unwrap_or_default();
    v["apiVersion"] = api_version.into();
    v["kind"] = kind.into();
    v
}

/// A Service a `spec.address` names in the cluster's DNS form, `<service>.<namespace>.svc:<port>`
/// or `<service>.<namespace>.svc.<cluster domain>:<port>` (OLM's e2e suite's magic catalog,
/// `test/e2e/magic_catalog.go`, points its CatalogSource at `<service>.<namespace>.svc:50051`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAddress<'a> {
    /// The Service's name.
    pub service: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// The Service port (as written: a number).
    pub port: &'a str,
}

/// The Service `address` names, if it is in the cluster DNS form ([`ServiceAddress`]) with a
/// numeric port; any other host (an IP, an outside name) gives `None`. Pure.
pub fn service_address(address: &str) -> Option<ServiceAddress<'_>> {
    let (host, port) = address.rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut labels = host.trim_end_matches('.').splitn(4, '.');
    let (service, namespace, svc) = (labels.next()?, labels.next()?, labels.next()?);
    let named = |l: &str| crate::catalog::validate::is_dns1123_label(l);
    (svc == "svc" && named(service) && named(namespace)).then_some(ServiceAddress { service, namespace, port })
}

/// The address to dial for `address`: for a Service in the cluster DNS form
/// ([`service_address`]) its ClusterIP and the port, read from the API server, so that a
/// controller outside the cluster (`capstan controller` on a workstation, the test environment)
/// reaches it as a pod would through the cluster's DNS (kube-proxy routes the ClusterIP on the
/// node). Anything else, a headless Service, or a Service that cannot be read: `address` as it
/// is (the resolver's DNS then decides).
pub async fn dial_address(client: &kube::Client, address: &str) -> String {
    let Some(s) = service_address(address) else { return address.to_string() };
    match Api::<Service>::namespaced(client.clone(), s.namespace).get_opt(s.service).await {
        Ok(Some(svc)) => match svc.spec.and_then(|spec| spec.cluster_ip).filter(|ip| !ip.is_empty() && ip != "None") {
            Some(ip) if ip.contains(':') => format!("[{ip}]:{}", s.port),
            Some(ip) => format!("{ip}:{}", s.port),
            None => address.to_string(),
        },
        Ok(None) => address.to_string(),
        Err(e) => {
            tracing::debug!(%address, error = %e, "cannot read the Service of a registry address; dialing it by name");
            address.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogSourceSpec;

    fn cs() -> CatalogSource {
        let mut c = CatalogSource::new("community", CatalogSourceSpec::default());
        c.metadata.namespace = Some("olm".into());
        c.metadata.uid = Some("uid-1".into());
        c
    }

    #[test]
    fn the_service_has_olms_port_no_selector_and_goes_with_the_catalogsource() {
        let s = service(&cs());
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["metadata"]["name"], "community");
        assert_eq!(v["metadata"]["namespace"], "olm");
        assert_eq!(
            v["spec"],
            serde_json::json!({"ports": [{"name": "grpc", "port": 50051, "targetPort": 50051, "protocol": "TCP"}]}),
            "no selector: the endpoints are capstan's EndpointSlice"
        );
        let o = &v["metadata"]["ownerReferences"][0];
        assert_eq!(
            (o["kind"].as_str(), o["uid"].as_str(), o["controller"].as_bool()),
            (Some("CatalogSource"), Some("uid-1"), Some(true))
        );
        assert_eq!(o["apiVersion"], "operators.coreos.com/v1alpha1");
        assert!(owned_by(&s.metadata, &cs()));
        let mut other = cs();
        other.metadata.uid = Some("uid-2".into());
        assert!(!owned_by(&s.metadata, &other), "a CatalogSource of the same name made again is another owner");
        assert!(!owned_by(&ObjectMeta::default(), &cs()));
    }

    #[test]
    fn the_slice_points_the_service_port_at_the_listener() {
        let v = serde_json::to_value(endpoint_slice(&cs(), "10.1.2.3".parse().unwrap(), 40123)).unwrap();
        assert_eq!(v["metadata"]["labels"]["kubernetes.io/service-name"], "community");
        assert_eq!(v["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"], "capstan");
        assert_eq!(v["addressType"], "IPv4");
        assert_eq!(v["endpoints"][0]["addresses"], serde_json::json!(["10.1.2.3"]));
        assert_eq!(v["endpoints"][0]["conditions"]["ready"], true);
        assert_eq!(v["ports"], serde_json::json!([{"name": "grpc", "port": 40123, "protocol": "TCP"}]));
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        let v6 = serde_json::to_value(endpoint_slice(&cs(), "fd00::5".parse().unwrap(), 1)).unwrap();
        assert_eq!(v6["addressType"], "IPv6");
    }

    #[test]
    fn status_as_olm_writes_it() {
        let t = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let (s, address) = registry_status(&cs(), Some(t.clone()));
        assert_eq!(address, "community.olm.svc:50051");
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!({"protocol": "grpc", "serviceName": "community", "serviceNamespace": "olm",
                "port": "50051", "createdAt": "2026-01-01T00:00:00Z"})
        );
        let later = Time("2026-02-01T00:00:00Z".parse().unwrap());
        let a = address_status(None, &t);
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::json!({"protocol": "grpc", "createdAt": "2026-01-01T00:00:00Z"})
        );
        assert_eq!(address_status(Some(&a), &later).created_at, Some(t), "createdAt stays");
    }

    #[test]
    fn a_service_address_is_the_cluster_dns_form_with_a_numeric_port() {
        let want = |service, namespace, port| Some(ServiceAddress { service, namespace, port });
        assert_eq!(service_address("cat.ns-1.svc:50051"), want("cat", "ns-1", "50051"));
        assert_eq!(service_address("cat.ns.svc.cluster.local:50051"), want("cat", "ns", "50051"));
        assert_eq!(service_address("cat.ns.svc.cluster.local.:50051"), want("cat", "ns", "50051"));
        for other in [
            "10.0.0.1:50051",
            "registry.example.com:50051",
            "cat.ns:50051",
            "cat.ns.svc",
            "cat.ns.svc:grpc",
            "Cat.ns.svc:50051",
            "[fd00::1]:50051",
        ] {
            assert_eq!(service_address(other), None, "{other}");
        }
    }
}
