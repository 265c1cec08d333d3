//! operator-registry's gRPC API on the wire: services `api.Registry` (every RPC of
//! `pkg/api/registry.proto` v1.74.0 but the experimental one, answered by
//! [`super::registry`]) and `grpc.health.v1.Health` `Check` (always `SERVING`, whatever the
//! service name, as `pkg/server/health.go`), over plaintext HTTP/2 as `opm serve` listens.
//!
//! One [`RegistryService`] serves one catalog; its content can be swapped
//! ([`RegistryService::set`]) while connections stay open, so a new catalog digest is served by
//! the same listener. The service is a tower service dispatching on the request path, with
//! tonic's server codec and prost messages (`crate::catalog::grpc`): no build script, no
//! `protoc`.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};

use super::registry::{self as answers, GvkQuery, RegistryError};
use crate::catalog::grpc::{
    Empty, GetAllReplacementsRequest, GetBundleInChannelRequest, GetBundleRequest, GetPackageRequest,
    GetReplacementRequest, HEALTH_SERVING, HealthCheckRequest, HealthCheckResponse, ProvidersRequest,
};
use crate::catalog::validated::ValidatedCatalog;

/// The gRPC registry of one catalog (cheap to clone: clones share the catalog).
#[derive(Clone, Debug)]
pub struct RegistryService {
    catalog: Arc<RwLock<Arc<ValidatedCatalog>>>,
}

impl RegistryService {
    /// A service answering from `catalog`.
    pub fn new(catalog: Arc<ValidatedCatalog>) -> RegistryService {
        RegistryService { catalog: Arc::new(RwLock::new(catalog)) }
    }

    /// Answers from `catalog` from now on (requests already running finish on the old one).
    pub fn set(&self, catalog: Arc<ValidatedCatalog>) {
        *self.catalog.write().unwrap_or_else(|e| e.into_inner()) = catalog;
    }

    /// The catalog answered from now.
    pub fn current(&self) -> Arc<ValidatedCatalog> {
        self.catalog.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A Go error as gRPC sends it: `Unknown` with the message.
fn status(e: RegistryError) -> Status {
    Status::unknown(e.0)
}

/// One unary RPC: `f` over the catalog.
struct Unary<Req, Resp> {
    cat: Arc<ValidatedCatalog>,
    f: fn(&ValidatedCatalog, Req) -> Result<Resp, RegistryError>,
}

impl<Req, Resp> Service<tonic::Request<Req>> for Unary<Req, Resp> {
    type Response = tonic::Response<Resp>;
    type Error = Status;
    type Future = Ready<Result<tonic::Response<Resp>, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<Req>) -> Self::Future {
        ready((self.f)(&self.cat, req.into_inner()).map(tonic::Response::new).map_err(status))
    }
}

/// The messages of a server-streaming answer.
type Messages<M> = futures::stream::Iter<std::vec::IntoIter<Result<M, Status>>>;

/// One server-streaming RPC: `f` over the catalog, sent message by message.
struct Streaming<Req, M> {
    cat: Arc<ValidatedCatalog>,
    f: fn(&ValidatedCatalog, Req) -> Result<Vec<M>, RegistryError>,
    _m: PhantomData<fn() -> M>,
}

impl<Req, M> Service<tonic::Request<Req>> for Streaming<Req, M> {
    type Response = tonic::Response<Messages<M>>;
    type Error = Status;
    type Future = Ready<Result<tonic::Response<Messages<M>>, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<Req>) -> Self::Future {
        let answer = (self.f)(&self.cat, req.into_inner()).map_err(status);
        ready(answer.map(|ms| tonic::Response::new(futures::stream::iter(ms.into_iter().map(Ok).collect::<Vec<_>>()))))
    }
}

async fn unary<Req, Resp>(
    req: http::Request<Body>,
    cat: Arc<ValidatedCatalog>,
    f: fn(&ValidatedCatalog, Req) -> Result<Resp, RegistryError>,
) -> http::Response<Body>
where
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
{
    let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<Resp, Req>::default());
    grpc.unary(Unary { cat, f }, req).await
}

async fn streaming<Req, M>(
    req: http::Request<Body>,
    cat: Arc<ValidatedCatalog>,
    f: fn(&ValidatedCatalog, Req) -> Result<Vec<M>, RegistryError>,
) -> http::Response<Body>
where
    Req: prost::Message + Default + Send + 'static,
    M: prost::Message + Send + Sync + 'static,
{
    let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<M, Req>::default());
    grpc.server_streaming(Streaming { cat, f, _m: PhantomData }, req).await
}

fn gvk(r: &ProvidersRequest) -> GvkQuery<'_> {
    GvkQuery { group: &r.group, version: &r.version, kind: &r.kind }
}

/// Answers one request by its path (`/SERVICE/METHOD`).
async fn dispatch(path: &str, cat: Arc<ValidatedCatalog>, req: http::Request<Body>) -> http::Response<Body> {
    match path {
        "/api.Registry/ListPackages" => streaming(req, cat, |c, _: Empty| Ok(answers::list_packages(c))).await,
        "/api.Registry/GetPackage" => unary(req, cat, |c, r: GetPackageRequest| answers::get_package(c, &r.name)).await,
        "/api.Registry/GetBundle" => {
            unary(req, cat, |c, r: GetBundleRequest| answers::get_bundle(c, &r.pkg_name, &r.channel_name, &r.csv_name))
                .await
        }
        "/api.Registry/GetBundleForChannel" => {
            unary(req, cat, |c, r: GetBundleInChannelRequest| {
                answers::get_bundle_for_channel(c, &r.pkg_name, &r.channel_name)
            })
            .await
        }
        "/api.Registry/GetChannelEntriesThatReplace" => {
            streaming(req, cat, |c, r: GetAllReplacementsRequest| {
                answers::get_channel_entries_that_replace(c, &r.csv_name)
            })
            .await
        }
        "/api.Registry/GetBundleThatReplaces" => {
            unary(req, cat, |c, r: GetReplacementRequest| {
                answers::get_bundle_that_replaces(c, &r.csv_name, &r.pkg_name, &r.channel_name)
            })
            .await
        }
        "/api.Registry/GetChannelEntriesThatProvide" => {
            streaming(req, cat, |c, r: ProvidersRequest| answers::get_channel_entries_that_provide(c, gvk(&r))).await
        }
        "/api.Registry/GetLatestChannelEntriesThatProvide" => {
            streaming(req, cat, |c, r: ProvidersRequest| answers::get_latest_channel_entries_that_provide(c, gvk(&r)))
                .await
        }
        "/api.Registry/GetDefaultBundleThatProvides" => {
            unary(req, cat, |c, r: ProvidersRequest| answers::get_default_bundle_that_provides(c, gvk(&r))).await
        }
        "/api.Registry/ListBundles" => streaming(req, cat, |c, _: Empty| Ok(answers::list_bundles(c))).await,
        "/grpc.health.v1.Health/Check" => {
            unary(req, cat, |_, _: HealthCheckRequest| Ok(HealthCheckResponse { status: HEALTH_SERVING })).await
        }
        other => Status::unimplemented(format!("unknown method {other}")).into_http(),
    }
}

impl Service<http::Request<Body>> for RegistryService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<http::Response<Body>, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let cat = self.current();
        Box::pin(async move {
            let path = req.uri().path().to_string();
            Ok(dispatch(&path, cat, req).await)
        })
    }
}

/// Serves `service` on `listener` (plaintext HTTP/2) until `shutdown` completes.
///
/// # Errors
/// The transport's error when the listener fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: RegistryService,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tonic::transport::Server::builder().serve_with_incoming_shutdown(service, incoming, shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::grpc::load_registry;
    use crate::catalog::model::DeclarativeConfig;
    use crate::catalog::validated::IndexOptions;
    use serde_json::{Value, json};
    use std::collections::BTreeSet;

    /// Serves `cfg` on a loopback port; the sender stops the listener.
    async fn serve_on_loopback(cfg: DeclarativeConfig) -> (String, tokio::sync::oneshot::Sender<()>) {
        let cat = ValidatedCatalog::with_options(cfg, IndexOptions { keep_bundle_objects: true, ..Default::default() })
            .expect("valid");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, RegistryService::new(Arc::new(cat)), async { stopped.await.unwrap_or(()) }));
        (addr, stop)
    }

    /// What a catalog read back over the registry API can hold: packages, channel entries with
    /// their edges, bundles with image and properties (`olm.csv.metadata` is never a served
    /// property; `olm.bundle.object` is served as `object`, and only for bundles without an image).
    fn comparable(cfg: &DeclarativeConfig) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for p in &cfg.packages {
            out.insert(format!("package {} default {:?}", p.name, p.default_channel));
        }
        for c in &cfg.channels {
            for e in &c.entries {
                out.insert(format!(
                    "entry {}/{}/{} replaces {:?} skips {:?} skipRange {:?}",
                    c.package, c.name, e.name, e.replaces, e.skips, e.skip_range
                ));
            }
        }
        for b in &cfg.bundles {
            out.insert(format!("bundle {}/{} image {:?}", b.package, b.name, b.image));
            for p in &b.properties {
                let served = p.type_ != "olm.csv.metadata" && (p.type_ != "olm.bundle.object" || b.image.is_empty());
                if served {
                    let mut v = p.value.clone();
                    if p.type_ == "olm.bundle.object" {
                        // Served as the object's JSON: compare the decoded objects.
                        use base64::Engine;
                        let data = base64::engine::general_purpose::STANDARD
                            .decode(v["data"].as_str().unwrap_or_default())
                            .unwrap_or_default();
                        v = crate::yaml::from_str(&String::from_utf8_lossy(&data)).unwrap_or_default();
                    }
                    out.insert(format!("property {}/{} {} {}", b.package, b.name, p.type_, sorted(&v)));
                }
            }
        }
        out
    }

    fn sorted(v: &Value) -> String {
        crate::bundle::gojson::to_string(v, crate::bundle::gojson::KeyOrder::Sorted, false)
    }

    #[tokio::test]
    async fn capstans_client_reads_back_the_catalog_it_was_loaded_from() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
        let cfg = crate::catalog::parse::load_path(&dir).expect("the example catalog");
        let (addr, _stop) = serve_on_loopback(cfg.clone()).await;
        let read = load_registry(&addr).await.expect("read over gRPC");
        assert_eq!(comparable(&read.config), comparable(&cfg));
        assert!(!cfg.bundles.is_empty());
    }

    #[tokio::test]
    async fn an_imageless_bundle_keeps_its_objects_over_the_wire() {
        use base64::Engine;
        let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "a.v1.0.0"}, "spec": {"version": "1.0.0"}});
        let data = base64::engine::general_purpose::STANDARD.encode(csv.to_string());
        let text = format!(
            r#"{{"schema":"olm.package","name":"a","defaultChannel":"stable"}}
{{"schema":"olm.channel","package":"a","name":"stable","entries":[{{"name":"a.v1.0.0"}}]}}
{{"schema":"olm.bundle","package":"a","name":"a.v1.0.0","image":"","properties":[{{"type":"olm.package","value":{{"packageName":"a","version":"1.0.0"}}}},{{"type":"olm.bundle.object","value":{{"data":"{data}"}}}}]}}
"#
        );
        let cfg = crate::catalog::parse::parse_bytes("c.json", text.as_bytes()).unwrap();
        let (addr, _stop) = serve_on_loopback(cfg.clone()).await;
        let read = load_registry(&addr).await.expect("read over gRPC");
        assert_eq!(comparable(&read.config), comparable(&cfg));
    }

    #[tokio::test]
    async fn health_is_serving_and_unknown_methods_are_unimplemented() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
        let (addr, stop) = serve_on_loopback(crate::catalog::parse::load_path(&dir).unwrap()).await;
        let channel =
            tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
        let mut grpc = tonic::client::Grpc::new(channel);
        for service in ["", "Registry"] {
            grpc.ready().await.unwrap();
            let answer = grpc
                .unary(
                    tonic::Request::new(HealthCheckRequest { service: service.into() }),
                    http::uri::PathAndQuery::from_static("/grpc.health.v1.Health/Check"),
                    tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default(),
                )
                .await
                .expect("Check");
            assert_eq!(answer.into_inner().status, HEALTH_SERVING);
        }
        grpc.ready().await.unwrap();
        let e = grpc
            .unary(
                tonic::Request::new(GetPackageRequest { name: "nope".into() }),
                http::uri::PathAndQuery::from_static("/api.Registry/GetPackage"),
                tonic_prost::ProstCodec::<GetPackageRequest, crate::catalog::grpc::Package>::default(),
            )
            .await
            .unwrap_err();
        assert_eq!((e.code(), e.message()), (tonic::Code::Unknown, r#"package "nope" not found"#), "a Go error");
        grpc.ready().await.unwrap();
        let e = grpc
            .unary(
                tonic::Request::new(Empty {}),
                http::uri::PathAndQuery::from_static("/api.Registry/Nope"),
                tonic_prost::ProstCodec::<Empty, Empty>::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unimplemented);
        let _ = stop.send(());
    }
}
