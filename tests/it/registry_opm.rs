//! capstan's gRPC registry (`capstan::discovery::registry_server`, what `capstan controller
//! --registry-listen` serves per CatalogSource) side by side with `opm serve` (operator-registry
//! v1.74.0) of the same FBC: every RPC of `api.Registry` and the health check, asked the same
//! questions (each package, channel and bundle, each replaced and skipped name, each provided API,
//! and names that are not there), must get the same answers and the same errors.
//!
//! Orders operator-registry takes from Go maps (packages, bundles, entries) are compared sorted;
//! `GetBundleThatReplaces`, which picks any of several replacing bundles in opm, must pick one of
//! them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capstan::catalog::grpc::{
    Bundle, ChannelEntry, Empty, GetAllReplacementsRequest, GetBundleInChannelRequest, GetBundleRequest,
    GetPackageRequest, GetReplacementRequest, HealthCheckRequest, HealthCheckResponse, Package, PackageName,
    ProvidersRequest,
};
use capstan::catalog::validated::{IndexOptions, ValidatedCatalog};
use tonic::codegen::http::uri::PathAndQuery;

use crate::support::{OpmServe, eventually};

type Answer<T> = Result<T, (tonic::Code, String)>;

async fn grpc(addr: &str) -> tonic::client::Grpc<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    tonic::client::Grpc::new(channel).max_decoding_message_size(64 << 20)
}

async fn unary<Req, Resp>(addr: &str, path: &'static str, req: Req) -> Answer<Resp>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut g = grpc(addr).await;
    g.ready().await.expect("ready");
    g.unary(tonic::Request::new(req), PathAndQuery::from_static(path), tonic_prost::ProstCodec::<Req, Resp>::default())
        .await
        .map(|r| r.into_inner())
        .map_err(|s| (s.code(), s.message().to_string()))
}

async fn streaming<Req, M>(addr: &str, path: &'static str, req: Req) -> Answer<Vec<M>>
where
    Req: prost::Message + Send + Sync + 'static,
    M: prost::Message + Default + Send + Sync + 'static,
{
    let mut g = grpc(addr).await;
    g.ready().await.expect("ready");
    let mut s = g
        .server_streaming(
            tonic::Request::new(req),
            PathAndQuery::from_static(path),
            tonic_prost::ProstCodec::<Req, M>::default(),
        )
        .await
        .map_err(|s| (s.code(), s.message().to_string()))?
        .into_inner();
    let mut out = Vec::new();
    loop {
        match s.message().await {
            Ok(Some(m)) => out.push(m),
            Ok(None) => return Ok(out),
            Err(st) => return Err((st.code(), st.message().to_string())),
        }
    }
}

/// capstan's registry of `dir` on a loopback port, for the life of the test's runtime.
async fn capstan_serve(dir: &Path) -> String {
    let cfg = capstan::catalog::parse::load_path(dir).expect("catalog");
    let cat = ValidatedCatalog::with_options(cfg, IndexOptions { keep_bundle_objects: true, ..Default::default() })
        .expect("valid catalog");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let service = capstan::discovery::registry_server::RegistryService::new(Arc::new(cat));
    tokio::spawn(capstan::discovery::registry_server::serve(listener, service, std::future::pending()));
    addr
}

async fn health(addr: &str, service: &str) -> Answer<HealthCheckResponse> {
    unary(addr, "/grpc.health.v1.Health/Check", HealthCheckRequest { service: service.into() }).await
}

fn sorted<T: Ord>(a: Answer<Vec<T>>) -> Answer<Vec<T>> {
    a.map(|mut v| {
        v.sort();
        v
    })
}

/// The two servers and what was compared.
struct Pair {
    opm: String,
    capstan: String,
    compared: usize,
}

impl Pair {
    fn same<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, opm: T, capstan: T) {
        assert_eq!(capstan, opm, "{what}: capstan (left) and opm serve (right) differ");
        self.compared += 1;
    }

    async fn package(&mut self, name: &str) {
        let req = || GetPackageRequest { name: name.into() };
        let (o, c): (Answer<Package>, Answer<Package>) = (
            unary(&self.opm, "/api.Registry/GetPackage", req()).await,
            unary(&self.capstan, "/api.Registry/GetPackage", req()).await,
        );
        self.same(&format!("GetPackage {name}"), o, c);
    }

    async fn bundle(&mut self, pkg: &str, channel: &str, csv: &str) {
        let req = || GetBundleRequest { pkg_name: pkg.into(), channel_name: channel.into(), csv_name: csv.into() };
        let (o, c): (Answer<Bundle>, Answer<Bundle>) = (
            unary(&self.opm, "/api.Registry/GetBundle", req()).await,
            unary(&self.capstan, "/api.Registry/GetBundle", req()).await,
        );
        self.same(&format!("GetBundle {pkg}/{channel}/{csv}"), o, c);
    }

    async fn head(&mut self, pkg: &str, channel: &str) {
        let req = || GetBundleInChannelRequest { pkg_name: pkg.into(), channel_name: channel.into() };
        let (o, c): (Answer<Bundle>, Answer<Bundle>) = (
            unary(&self.opm, "/api.Registry/GetBundleForChannel", req()).await,
            unary(&self.capstan, "/api.Registry/GetBundleForChannel", req()).await,
        );
        self.same(&format!("GetBundleForChannel {pkg}/{channel}"), o, c);
    }

    async fn replacements(&mut self, name: &str) {
        let req = || GetAllReplacementsRequest { csv_name: name.into() };
        let (o, c): (Answer<Vec<ChannelEntry>>, Answer<Vec<ChannelEntry>>) = (
            sorted(streaming(&self.opm, "/api.Registry/GetChannelEntriesThatReplace", req()).await),
            sorted(streaming(&self.capstan, "/api.Registry/GetChannelEntriesThatReplace", req()).await),
        );
        self.same(&format!("GetChannelEntriesThatReplace {name}"), o, c);
    }

    /// `GetBundleThatReplaces`: equal when one bundle of the channel replaces `name`; when
    /// several do (opm picks by Go map order), capstan's answer is one of them.
    async fn replacement(&mut self, name: &str, pkg: &str, channel: &str, listed: &[Bundle]) {
        let req =
            || GetReplacementRequest { csv_name: name.into(), pkg_name: pkg.into(), channel_name: channel.into() };
        let (o, c): (Answer<Bundle>, Answer<Bundle>) = (
            unary(&self.opm, "/api.Registry/GetBundleThatReplaces", req()).await,
            unary(&self.capstan, "/api.Registry/GetBundleThatReplaces", req()).await,
        );
        let candidates: BTreeSet<&str> = listed
            .iter()
            .filter(|b| b.package_name == pkg && b.channel_name == channel)
            .filter(|b| b.replaces == name || b.skips.iter().any(|s| s == name))
            .map(|b| b.csv_name.as_str())
            .collect();
        if candidates.len() > 1 {
            let c = c.expect("a replacement");
            assert!(candidates.contains(c.csv_name.as_str()), "GetBundleThatReplaces {name}: {}", c.csv_name);
            assert!(o.is_ok());
            self.compared += 1;
        } else {
            self.same(&format!("GetBundleThatReplaces {name} {pkg}/{channel}"), o, c);
        }
    }

    async fn providers(&mut self, group: &str, version: &str, kind: &str) {
        let req = || ProvidersRequest {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: String::new(),
        };
        let what = format!("{group}/{version} {kind}");
        for path in ["/api.Registry/GetChannelEntriesThatProvide", "/api.Registry/GetLatestChannelEntriesThatProvide"] {
            let (o, c): (Answer<Vec<ChannelEntry>>, Answer<Vec<ChannelEntry>>) =
                (sorted(streaming(&self.opm, path, req()).await), sorted(streaming(&self.capstan, path, req()).await));
            self.same(&format!("{path} {what}"), o, c);
        }
        let (o, c): (Answer<Bundle>, Answer<Bundle>) = (
            unary(&self.opm, "/api.Registry/GetDefaultBundleThatProvides", req()).await,
            unary(&self.capstan, "/api.Registry/GetDefaultBundleThatProvides", req()).await,
        );
        self.same(&format!("GetDefaultBundleThatProvides {what}"), o, c);
    }
}

fn bundle_key(b: &Bundle) -> (String, String, String) {
    (b.package_name.clone(), b.channel_name.clone(), b.csv_name.clone())
}

/// Asks both servers of `dir` everything (module documentation) and returns how many answers
/// were compared.
async fn compare(dir: &Path) -> usize {
    let opm = OpmServe::start(dir);
    let capstan = capstan_serve(dir).await;
    let address = opm.address.clone();
    eventually("opm serve listening", Duration::from_secs(60), || {
        let address = address.clone();
        async move { tokio::net::TcpStream::connect(&address).await.ok().map(|_| ()) }
    })
    .await;
    let mut p = Pair { opm: opm.address.clone(), capstan, compared: 0 };
    for service in ["", "Registry"] {
        let (o, c) = (health(&p.opm, service).await, health(&p.capstan, service).await);
        p.same(&format!("Health/Check {service:?}"), o, c);
    }
    let names = |a: Answer<Vec<PackageName>>| {
        sorted(a.map(|v| v.into_iter().map(|p| p.name).collect::<Vec<_>>())).expect("ListPackages")
    };
    let packages = names(streaming(&p.opm, "/api.Registry/ListPackages", Empty {}).await);
    let theirs = names(streaming(&p.capstan, "/api.Registry/ListPackages", Empty {}).await);
    p.same("ListPackages", packages.clone(), theirs);
    let by_key = |a: Answer<Vec<Bundle>>| {
        let mut v = a.expect("ListBundles");
        v.sort_by_key(bundle_key);
        v
    };
    let listed = by_key(streaming(&p.opm, "/api.Registry/ListBundles", Empty {}).await);
    let theirs = by_key(streaming(&p.capstan, "/api.Registry/ListBundles", Empty {}).await);
    assert_eq!(theirs.len(), listed.len(), "ListBundles: one bundle per channel entry");
    for (o, c) in listed.iter().zip(&theirs) {
        p.same(&format!("ListBundles {:?}", bundle_key(o)), o, c);
    }
    for name in packages.iter().map(String::as_str).chain(["nope"]) {
        p.package(name).await;
    }
    let mut names: BTreeSet<String> = BTreeSet::from(["nope".to_string()]);
    let mut gvks: BTreeSet<(String, String, String)> = BTreeSet::from([("x.io".into(), "v1".into(), "X".into())]);
    let mut channels: BTreeSet<(String, String)> = BTreeSet::new();
    for b in &listed {
        p.bundle(&b.package_name, &b.channel_name, &b.csv_name).await;
        names.insert(b.csv_name.clone());
        names.extend(b.skips.iter().cloned());
        names.extend(Some(b.replaces.clone()).filter(|r| !r.is_empty()));
        gvks.extend(b.provided_apis.iter().map(|g| (g.group.clone(), g.version.clone(), g.kind.clone())));
        channels.insert((b.package_name.clone(), b.channel_name.clone()));
    }
    for (pkg, channel) in &channels {
        p.head(pkg, channel).await;
        p.bundle(pkg, channel, "nope").await;
        for name in &names {
            p.replacement(name, pkg, channel, &listed).await;
        }
    }
    if let Some((pkg, _)) = channels.first() {
        p.head(pkg, "nope").await;
        p.head("nope", "stable").await;
        p.bundle("nope", "stable", "x").await;
        p.replacement("x", "nope", "stable", &listed).await;
        p.replacement("x", pkg, "nope", &listed).await;
    }
    for name in &names {
        p.replacements(name).await;
    }
    for (group, version, kind) in &gvks {
        p.providers(group, version, kind).await;
    }
    p.compared
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test]
async fn the_example_catalog_is_served_as_opm_serves_it() {
    let n = compare(&repo().join("catalog")).await;
    eprintln!("registry_opm: {n} answers compared for catalog/");
    assert!(n > 20, "{n} answers compared");
}

#[tokio::test]
async fn edges_deprecations_and_objects_are_served_as_opm_serves_them() {
    let n = compare(&repo().join("tests/fixtures/registry-catalog")).await;
    eprintln!("registry_opm: {n} answers compared for tests/fixtures/registry-catalog");
    assert!(n > 50, "{n} answers compared");
}
