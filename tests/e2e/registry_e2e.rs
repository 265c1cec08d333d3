//! `capstan controller --registry-listen` on the real local control plane: a CatalogSource of the
//! example catalog image gets what OLM v0's registry Pod gives it — a Service `<name>:50051` in
//! its namespace, `status.registryService` and `connectionState.address`
//! `<name>.<namespace>.svc:50051` — and a gRPC client dialing the Service's ClusterIP reaches
//! capstan's registry of that catalog (kube-proxy on the host forwards the Service port to the
//! EndpointSlice capstan wrote: the host's address and the catalog's own listener port).
//! Deleting the CatalogSource takes the Service and the EndpointSlice with it (garbage
//! collection through their ownerReference). A ConfigMap catalog is served the same way, its
//! bundles with their objects; a `spec.address` source gets OLM's `{protocol: grpc, createdAt}`.
//!
//! Needs the real node's kube-proxy (`tests/cluster/up.sh`, `CAPSTAN_REAL_NODE=1`, the default):
//! without it a ClusterIP is not routed on the host.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::controller::*;
use crate::support::discovery::host_address;
use crate::support::eventually;
use crate::support::group::PerGroup;
use capstan::api::CatalogSource;
use capstan::catalog::grpc::{
    Bundle, Empty, GetBundleRequest, HEALTH_SERVING, HealthCheckRequest, HealthCheckResponse, PackageName,
};
use capstan::catalog::validated::{IndexOptions, ValidatedCatalog};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams};
use serde_json::json;
use tonic::codegen::http::uri::PathAndQuery;

const GROUP: &str = "registry_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

/// The controller of these tests, serving registries on every address and advertising the
/// host's (where kube-proxy on the host forwards the Services' ClusterIPs).
async fn fixture() -> Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let advertise: IpAddr = host_address().parse().expect("host address");
            let repo = format!("reg-e2e-{}", std::process::id());
            let options = capstan::controller::Options {
                catalog_cache: None,
                registry: Some(capstan::controller::registry_services::RegistryOptions {
                    listen: "0.0.0.0".parse().expect("ip"),
                    advertise,
                }),
                ..Default::default()
            };
            ControllerFixture::start(&client, &repo, "reg-catalog", options).await
        })
        .await
}

async fn grpc(addr: &str) -> Option<tonic::client::Grpc<tonic::transport::Channel>> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).ok()?;
    let channel = endpoint.connect_timeout(Duration::from_secs(5)).timeout(Duration::from_secs(10)).connect().await;
    Some(tonic::client::Grpc::new(channel.ok()?))
}

async fn health(addr: &str) -> Option<i32> {
    let mut g = grpc(addr).await?;
    g.ready().await.ok()?;
    let r = g
        .unary(
            tonic::Request::new(HealthCheckRequest { service: "Registry".into() }),
            PathAndQuery::from_static("/grpc.health.v1.Health/Check"),
            tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default(),
        )
        .await
        .ok()?;
    Some(r.into_inner().status)
}

async fn list_packages(addr: &str) -> Vec<String> {
    let mut g = grpc(addr).await.expect("connect");
    g.ready().await.expect("ready");
    let mut s = g
        .server_streaming(
            tonic::Request::new(Empty {}),
            PathAndQuery::from_static("/api.Registry/ListPackages"),
            tonic_prost::ProstCodec::<Empty, PackageName>::default(),
        )
        .await
        .expect("ListPackages")
        .into_inner();
    let mut names = Vec::new();
    while let Some(p) = s.message().await.expect("ListPackages stream") {
        names.push(p.name);
    }
    names.sort();
    names
}

async fn get_bundle(addr: &str, pkg: &str, channel: &str, csv: &str) -> Bundle {
    let mut g = grpc(addr).await.expect("connect");
    g.ready().await.expect("ready");
    let req = GetBundleRequest { pkg_name: pkg.into(), channel_name: channel.into(), csv_name: csv.into() };
    g.unary(
        tonic::Request::new(req),
        PathAndQuery::from_static("/api.Registry/GetBundle"),
        tonic_prost::ProstCodec::<GetBundleRequest, Bundle>::default(),
    )
    .await
    .expect("GetBundle")
    .into_inner()
}

/// The catalog the fixture published, as capstan's registry answers from it.
fn published(f: &ControllerFixture) -> ValidatedCatalog {
    let cfg = capstan::catalog::parse::load_path(&f.work.path().join("catalog")).expect("published catalog");
    ValidatedCatalog::with_options(cfg, IndexOptions { keep_bundle_objects: true, ..Default::default() })
        .expect("valid")
}

/// CatalogSource `ns/name`'s status once it is READY with `registryService`.
async fn ready_with_registry(client: &kube::Client, ns: &str, name: &str) -> serde_json::Value {
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), ns);
    eventually(&format!("CatalogSource {name} READY with status.registryService"), WAIT, || async {
        let st = serde_json::to_value(catalogs.get(name).await.ok()?.status?).ok()?;
        (st["connectionState"]["lastObservedState"] == "READY" && st["registryService"].is_object()).then_some(st)
    })
    .await
}

/// Waits for CatalogSource `ns/name`'s Service, EndpointSlice and status, checks each, and
/// returns the Service's ClusterIP.
async fn check_objects(client: &kube::Client, ns: &str, name: &str, uid: &str, host: &str) -> String {
    let st = ready_with_registry(client, ns, name).await;
    let rs = &st["registryService"];
    assert_eq!(
        (&rs["protocol"], &rs["serviceName"], &rs["serviceNamespace"], &rs["port"]),
        (&json!("grpc"), &json!(name), &json!(ns), &json!("50051")),
        "{st}"
    );
    assert!(rs["createdAt"].is_string(), "{st}");
    assert_eq!(st["connectionState"]["address"], json!(format!("{name}.{ns}.svc:50051")), "{st}");
    assert!(st["connectionState"]["lastConnect"].is_string(), "{st}");

    let svc = Api::<Service>::namespaced(client.clone(), ns).get(name).await.expect("Service");
    let owners = svc.metadata.owner_references.clone().unwrap_or_default();
    assert!(owners.iter().any(|o| o.kind == "CatalogSource" && o.uid == uid), "{owners:?}");
    let spec = svc.spec.expect("spec");
    assert!(spec.selector.is_none(), "no selector: capstan writes the endpoints");
    let port = &spec.ports.as_ref().expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("grpc"), 50051));

    let slice = Api::<EndpointSlice>::namespaced(client.clone(), ns).get(name).await.expect("EndpointSlice");
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("kubernetes.io/service-name").map(String::as_str), Some(name));
    assert_eq!(labels.get("endpointslice.kubernetes.io/managed-by").map(String::as_str), Some("capstan"));
    let endpoints = slice.endpoints.clone().unwrap_or_default();
    assert_eq!(endpoints.len(), 1);
    assert_eq!(endpoints[0].addresses, [host.to_string()]);
    let ports = slice.ports.clone().unwrap_or_default();
    assert_eq!(ports[0].name.as_deref(), Some("grpc"));
    assert!(ports[0].port.is_some_and(|p| p > 0 && p != 50051), "the catalog's own listener port: {ports:?}");
    spec.cluster_ip.expect("ClusterIP")
}

#[test]
fn a_catalogsource_is_served_behind_its_registry_service() {
    crate::support::run(GROUP, 2, async {
        let started = Instant::now();
        let client = crate::support::cluster().await;
        let host = host_address();
        let f = fixture().await;
        let ns = f.catalog_ns.name.clone();
        let cs: CatalogSource = create(
            &client,
            &ns,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "examples", "namespace": ns},
                "spec": {"sourceType": "grpc", "image": f.catalog_ref}
            }),
        )
        .await;
        let uid = cs.metadata.uid.clone().expect("uid");
        let step = |what: &str| eprintln!("registry_e2e: {what} after {:.1} s", started.elapsed().as_secs_f64());
        step("CatalogSource created");
        let cluster_ip = check_objects(&client, &ns, "examples", &uid, &host).await;
        step("Service, EndpointSlice and status checked");

        // A client on the host dials the Service: kube-proxy forwards it to capstan.
        let addr = format!("{cluster_ip}:50051");
        let serving =
            eventually(&format!("health check through the ClusterIP {addr}"), WAIT, || async { health(&addr).await })
                .await;
        assert_eq!(serving, HEALTH_SERVING);
        step("health check SERVING through the ClusterIP");
        let catalog = Arc::new(published(&f));
        let want: Vec<String> = catalog.packages().iter().map(|p| p.name.clone()).collect();
        assert_eq!(list_packages(&addr).await, want, "ListPackages through the ClusterIP");
        for pkg in catalog.packages() {
            for ch in &pkg.channels {
                let head = catalog.bundle_at(ch.head).name.clone();
                let local =
                    capstan::discovery::registry::get_bundle(&catalog, &pkg.name, &ch.name, &head).expect("local");
                assert_eq!(
                    get_bundle(&addr, &pkg.name, &ch.name, &head).await,
                    local,
                    "GetBundle {}/{}/{head}",
                    pkg.name,
                    ch.name
                );
                assert!(!local.bundle_path.is_empty() && !local.csv_json.is_empty(), "{local:?}");
            }
        }
        // capstan's own client (spec.address sources) reads the whole catalog through it.
        let read = capstan::catalog::grpc::load_registry(&addr).await.expect("load_registry through the ClusterIP");
        let mut names: Vec<String> = read.config.bundles.iter().map(|b| b.name.clone()).collect();
        names.sort();
        let mut expected: Vec<String> = catalog.all_bundles().iter().map(|b| b.name.clone()).collect();
        expected.sort();
        assert_eq!(names, expected);

        step("the catalog read through the ClusterIP");
        // Deleting the CatalogSource takes the Service and the EndpointSlice with it.
        Api::<CatalogSource>::namespaced(client.clone(), &ns)
            .delete("examples", &DeleteParams::default())
            .await
            .expect("delete CatalogSource");
        let services: Api<Service> = Api::namespaced(client.clone(), &ns);
        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
        eventually("Service and EndpointSlice garbage-collected", WAIT, || async {
            let gone =
                services.get_opt("examples").await.ok()?.is_none() && slices.get_opt("examples").await.ok()?.is_none();
            gone.then_some(())
        })
        .await;
        step("Service and EndpointSlice garbage-collected");
    })
}

/// A ConfigMap catalog with one CSV `cm-operator.v0.1.0` in channel `alpha` (OLM's format).
fn config_map_data() -> std::collections::BTreeMap<String, String> {
    let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "cm-operator.v0.1.0"},
        "spec": {"version": "0.1.0", "displayName": "CM", "installModes": [{"type": "AllNamespaces", "supported": true}],
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}}});
    let packages = json!([{"packageName": "cm-operator", "defaultChannel": "alpha",
                           "channels": [{"name": "alpha", "currentCSV": "cm-operator.v0.1.0"}]}]);
    std::collections::BTreeMap::from([
        ("customResourceDefinitions".to_string(), "[]".to_string()),
        ("clusterServiceVersions".to_string(), json!([csv]).to_string()),
        ("packages".to_string(), packages.to_string()),
    ])
}

#[test]
fn a_configmap_catalog_is_served_and_an_address_source_gets_olms_status() {
    crate::support::run(GROUP, 2, async {
        let client = crate::support::cluster().await;
        let host = host_address();
        let f = fixture().await;
        let ns = f.catalog_ns.name.clone();
        let cm = k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::api::ObjectMeta { name: Some("cm".into()), ..Default::default() },
            data: Some(config_map_data()),
            ..Default::default()
        };
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &ns)
            .create(&Default::default(), &cm)
            .await
            .expect("ConfigMap");
        let cs: CatalogSource = create(
            &client,
            &ns,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "cm", "namespace": ns},
                "spec": {"sourceType": "configmap", "configMap": "cm"}
            }),
        )
        .await;
        let uid = cs.metadata.uid.clone().expect("uid");
        let addr = format!("{}:50051", check_objects(&client, &ns, "cm", &uid, &host).await);
        eventually(&format!("health check through the ClusterIP {addr}"), WAIT, || async { health(&addr).await }).await;
        let b = get_bundle(&addr, "cm-operator", "alpha", "cm-operator.v0.1.0").await;
        assert!(b.bundle_path.is_empty(), "a ConfigMap bundle has no image: {b:?}");
        assert!(b.csv_json.contains("cm-operator.v0.1.0") && b.object.contains(&b.csv_json), "{b:?}");

        // A running registry at spec.address: OLM's status for it, no Service.
        let opm = crate::support::OpmServe::start(&f.work.path().join("catalog"));
        // Listening before the CatalogSource exists: a first load that fails is retried after 30 s.
        eventually("opm serve listening", WAIT, || async {
            tokio::net::TcpStream::connect(&opm.address).await.ok().map(|_| ())
        })
        .await;
        create::<CatalogSource>(
            &client,
            &ns,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "addr", "namespace": ns},
                "spec": {"sourceType": "grpc", "address": opm.address}
            }),
        )
        .await;
        let st = ready_with_registry(&client, &ns, "addr").await;
        let rs = st["registryService"].as_object().expect("registryService");
        let mut keys: Vec<&String> = rs.keys().collect();
        keys.sort();
        assert_eq!(keys, ["createdAt", "protocol"], "{st}");
        assert_eq!(st["registryService"]["protocol"], "grpc");
        assert_eq!(st["connectionState"]["address"], json!(opm.address));
        let services: Api<Service> = Api::namespaced(client.clone(), &ns);
        assert!(services.get_opt("addr").await.expect("get Service").is_none(), "no Service for an address source");
    })
}
