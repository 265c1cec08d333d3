//! `capstan controller --registry-listen` on the real local control plane: a CatalogSource of the
//! example catalog image gets what OLM v0's registry Pod gives it — a Service `<name>:50051` in
//! its namespace, `status.registryService` and `connectionState.address`
//! `<name>.<namespace>.svc:50051` — and a gRPC client dialing the Service's ClusterIP reaches
//! capstan's registry of that catalog (kube-proxy on the host forwards the Service port to the
//! EndpointSlice capstan wrote: the host's address and the catalog's own listener port).
//! Deleting the CatalogSource takes the Service and the EndpointSlice with it (garbage
//! collection through their ownerReference).
//!
//! Needs the real node's kube-proxy (`tests/cluster/up.sh`, `CAPSTAN_REAL_NODE=1`, the default):
//! without it a ClusterIP is not routed on the host.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::controller::*;
use crate::support::discovery::host_address;
use crate::support::eventually;
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
    ValidatedCatalog::with_options(cfg, IndexOptions { keep_bundle_objects: true }).expect("valid")
}

/// Waits for the Service, the EndpointSlice and the status, checks each, and returns the
/// Service's ClusterIP.
async fn check_objects(client: &kube::Client, ns: &str, uid: &str, host: &str) -> String {
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), ns);
    let st = eventually("CatalogSource examples READY with status.registryService", WAIT, || async {
        let st = serde_json::to_value(catalogs.get("examples").await.ok()?.status?).ok()?;
        (st["connectionState"]["lastObservedState"] == "READY" && st["registryService"].is_object()).then_some(st)
    })
    .await;
    let rs = &st["registryService"];
    assert_eq!(
        (&rs["protocol"], &rs["serviceName"], &rs["serviceNamespace"], &rs["port"]),
        (&json!("grpc"), &json!("examples"), &json!(ns), &json!("50051")),
        "{st}"
    );
    assert!(rs["createdAt"].is_string(), "{st}");
    assert_eq!(st["connectionState"]["address"], json!(format!("examples.{ns}.svc:50051")), "{st}");
    assert!(st["connectionState"]["lastConnect"].is_string(), "{st}");

    let svc = Api::<Service>::namespaced(client.clone(), ns).get("examples").await.expect("Service examples");
    let owners = svc.metadata.owner_references.clone().unwrap_or_default();
    assert!(owners.iter().any(|o| o.kind == "CatalogSource" && o.uid == uid), "{owners:?}");
    let spec = svc.spec.expect("spec");
    assert!(spec.selector.is_none(), "no selector: capstan writes the endpoints");
    let port = &spec.ports.as_ref().expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("grpc"), 50051));

    let slice = Api::<EndpointSlice>::namespaced(client.clone(), ns).get("examples").await.expect("EndpointSlice");
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("kubernetes.io/service-name").map(String::as_str), Some("examples"));
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
    crate::support::run(GROUP, 4, async {
        let started = Instant::now();
        let client = crate::support::cluster().await;
        let host = host_address();
        let advertise: IpAddr = host.parse().expect("host address");
        let repo = format!("reg-e2e-{}", std::process::id());
        let options = capstan::controller::Options {
            catalog_cache: None,
            registry: Some(capstan::controller::registry_services::RegistryOptions {
                listen: "0.0.0.0".parse().expect("ip"),
                advertise,
            }),
            ..Default::default()
        };
        let f = ControllerFixture::start(&client, &repo, "reg-catalog", options).await;
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
        let cluster_ip = check_objects(&client, &ns, &uid, &host).await;
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
