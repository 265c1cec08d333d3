//! `packages.operators.coreos.com/v1` served as an aggregated API: HTTPS with capstan's own serving
//! certificate (rcgen), authentication delegated to the front proxy (kube-apiserver's aggregator)
//! and authorization by SubjectAccessReview — what `k8s.io/apiserver`'s delegating options give
//! packageserver, reduced to what an aggregated read-only API needs.
//!
//! - Authentication: a request must come with a client certificate signed by the
//!   `requestheader-client-ca-file` of ConfigMap `kube-system/extension-apiserver-authentication`
//!   and, when `requestheader-allowed-names` is not empty, with one of those common names; the
//!   user is then the first `requestheader-username-headers` header, the groups every
//!   `requestheader-group-headers` header, extras the `requestheader-extra-headers-prefix` ones.
//!   Anything else is 401. (No TokenReview: clients reach this server through the aggregator.)
//! - Authorization: `get` / `list` of `packagemanifests` in the request's namespace by a
//!   SubjectAccessReview to the API server; denied is 403 with the reviewer's reason. Discovery
//!   (`/apis`, `/apis/packages.operators.coreos.com[/v1]`) and `/healthz`, `/readyz`, `/livez` need
//!   only the front proxy's certificate.
//! - Verbs: `get` and `list` (JSON, or the `meta.k8s.io/v1` Table kubectl asks for); `watch` is
//!   405 MethodNotSupported, as packageserver (`kubectl get` does not watch; `kubectl get -w`
//!   fails against packageserver too).

use super::ServeError;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

use super::packagemanifest::{API_VERSION, GROUP, KIND, RESOURCE, VERSION};
use super::query::{self, CatalogPackages, IncludeObject, ListOptions};

/// The catalogs whose packages are served; replace the whole list on every catalog change.
#[derive(Debug, Default, Clone)]
pub struct PackageCatalogs(Arc<RwLock<Arc<Vec<CatalogPackages>>>>);

impl PackageCatalogs {
    /// Replaces the served catalogs.
    pub fn set(&self, catalogs: Vec<CatalogPackages>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(catalogs);
    }

    /// The served catalogs.
    pub fn get(&self) -> Arc<Vec<CatalogPackages>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The front proxy's identity rules, from `kube-system/extension-apiserver-authentication`.
#[derive(Debug, Clone, Default)]
pub struct RequestHeader {
    /// PEM of the CA that signs the front proxy's client certificate.
    pub client_ca_pem: String,
    /// Common names the front proxy's certificate may have (empty: any).
    pub allowed_names: Vec<String>,
    /// Headers with the user name.
    pub username_headers: Vec<String>,
    /// Headers with the groups.
    pub group_headers: Vec<String>,
    /// Prefixes of headers with extras.
    pub extra_prefixes: Vec<String>,
}

impl RequestHeader {
    /// Reads the ConfigMap.
    ///
    /// # Errors
    /// A message naming the ConfigMap and key when it is missing (the API server then runs without
    /// `--requestheader-client-ca-file`: aggregated APIs cannot authenticate anyone).
    pub async fn from_cluster(client: &kube::Client) -> Result<RequestHeader, ServeError> {
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "kube-system");
        let cm = api.get("extension-apiserver-authentication").await.map_err(ServeError::RequestHeaderConfig)?;
        let data = cm.data.unwrap_or_default();
        let list =
            |k: &str| -> Vec<String> { data.get(k).and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default() };
        let ca = data
            .get("requestheader-client-ca-file")
            .cloned()
            .filter(|s| !s.trim().is_empty())
            .ok_or(ServeError::NoRequestHeaderCa)?;
        Ok(RequestHeader {
            client_ca_pem: ca,
            allowed_names: list("requestheader-allowed-names"),
            username_headers: list("requestheader-username-headers"),
            group_headers: list("requestheader-group-headers"),
            extra_prefixes: list("requestheader-extra-headers-prefix"),
        })
    }
}

/// Who a request is from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extras (lower-cased keys).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The user of a request that came through the front proxy (`None` without a user header).
pub fn user_of<B>(rh: &RequestHeader, req: &Request<B>) -> Option<User> {
    let h = req.headers();
    let name = rh
        .username_headers
        .iter()
        .find_map(|k| h.get(k.as_str()).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()))?
        .to_string();
    let groups = rh
        .group_headers
        .iter()
        .flat_map(|k| h.get_all(k.as_str()).iter().filter_map(|v| v.to_str().ok().map(str::to_string)))
        .collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in h {
        for p in &rh.extra_prefixes {
            if let Some(key) = k.as_str().strip_prefix(&p.to_ascii_lowercase())
                && let Ok(v) = v.to_str()
            {
                extra.entry(key.to_string()).or_default().push(v.to_string());
            }
        }
    }
    Some(User { name, groups, extra })
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/healthz`, `/readyz`, `/livez`.
    Health,
    /// `/apis`, `/apis/GROUP`, `/apis/GROUP/v1`.
    Discovery(String),
    /// List in a namespace (`""` = all namespaces).
    List(String),
    /// Get one by name in a namespace.
    Get(String, String),
    /// Anything else.
    NotFound,
}

/// The route of a path.
pub fn route(path: &str) -> Route {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["healthz" | "readyz" | "livez", ..] => Route::Health,
        ["apis"] => Route::Discovery(path.to_string()),
        ["apis", g] | ["apis", g, "v1"] if *g == GROUP => Route::Discovery(path.to_string()),
        ["apis", g, "v1", r] if *g == GROUP && *r == RESOURCE => Route::List(String::new()),
        ["apis", g, "v1", "namespaces", ns, r] if *g == GROUP && *r == RESOURCE => Route::List(ns.to_string()),
        ["apis", g, "v1", "namespaces", ns, r, name] if *g == GROUP && *r == RESOURCE => {
            Route::Get(ns.to_string(), name.to_string())
        }
        _ => Route::NotFound,
    }
}

fn discovery(path: &str) -> Value {
    let gv = json!({"groupVersion": format!("{GROUP}/{VERSION}"), "version": VERSION});
    let group = json!({"name": GROUP, "versions": [gv], "preferredVersion": gv});
    match path.trim_matches('/') {
        "apis" => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}),
        p if p.ends_with("/v1") => json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": API_VERSION,
            "resources": [{"name": RESOURCE, "singularName": "packagemanifest", "namespaced": true, "kind": KIND, "verbs": ["get", "list"], "categories": []}],
        }),
        _ => {
            let mut g = group;
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            g
        }
    }
}

fn json_response(status: StatusCode, v: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(serde_json::to_vec(v).unwrap_or_default())));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A `meta.k8s.io/v1` Status error.
pub fn status_error(code: StatusCode, reason: &str, message: &str) -> Response<Full<Bytes>> {
    json_response(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code.as_u16()}),
    )
}

/// Answers a request that is authenticated and authorized (see [`access_review`]).
pub fn answer<B>(
    catalogs: &[CatalogPackages],
    global_namespace: &str,
    req: &Request<B>,
    now: std::time::SystemTime,
) -> Response<Full<Bytes>> {
    let q: Vec<(String, String)> = super::content::form_pairs(req.uri().query().unwrap_or(""));
    let param = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let wants_table =
        req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("as=Table"));
    match route(req.uri().path()) {
        Route::Health => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"ok")));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            r
        }
        Route::Discovery(p) => json_response(StatusCode::OK, &discovery(&p)),
        Route::NotFound => status_error(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("the server could not find the requested resource ({})", req.uri().path()),
        ),
        Route::List(ns) => {
            if param("watch").is_some_and(|w| w == "true" || w == "1") {
                return status_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "MethodNotAllowed",
                    "watch is not supported on packagemanifests (as OLM's packageserver)",
                );
            }
            let opts = match ListOptions::parse(param("labelSelector"), param("fieldSelector")) {
                Ok(o) => o,
                Err(e) => return status_error(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
            };
            let items = query::list(catalogs, &ns, global_namespace, &opts);
            if wants_table {
                json_response(
                    StatusCode::OK,
                    &query::table(&items, IncludeObject::parse(param("includeObject")), now, "0"),
                )
            } else {
                json_response(StatusCode::OK, &query::list_object(&items, "0"))
            }
        }
        Route::Get(ns, name) => match query::get(catalogs, &ns, global_namespace, &name) {
            Some(m) if wants_table => json_response(
                StatusCode::OK,
                &query::table(&[m], IncludeObject::parse(param("includeObject")), now, "0"),
            ),
            Some(m) => json_response(StatusCode::OK, &serde_json::to_value(&m).unwrap_or_default()),
            None => status_error(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("packagemanifests.{GROUP} \"{name}\" not found"),
            ),
        },
    }
}

/// The SubjectAccessReview a route needs (`None` for discovery, health and unknown paths).
pub fn access_review(user: &User, r: &Route) -> Option<SubjectAccessReview> {
    let (verb, ns, name) = match r {
        Route::List(ns) => ("list", ns.clone(), None),
        Route::Get(ns, name) => ("get", ns.clone(), Some(name.clone())),
        _ => return None,
    };
    Some(SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            groups: Some(user.groups.clone()),
            extra: if user.extra.is_empty() { None } else { Some(user.extra.clone()) },
            resource_attributes: Some(ResourceAttributes {
                group: Some(GROUP.into()),
                version: Some(VERSION.into()),
                resource: Some(RESOURCE.into()),
                verb: Some(verb.into()),
                namespace: if ns.is_empty() { None } else { Some(ns) },
                name,
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// Common name of a DER certificate's subject.
fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    cert.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok()).map(str::to_string)
}

/// The certificate the server presents.
#[derive(Clone)]
pub enum ServingIdentity {
    /// A self-signed certificate for these names (DNS names or IP addresses), made at start
    /// (rcgen); the APIService then needs `insecureSkipTLSVerify` (`capstan catalog serve`).
    SelfSigned(Vec<String>),
    /// A certificate and its key, PEM (`capstan controller`: the CA-signed pair of
    /// [`super::served::ensure_serving_cert`], whose CA is the APIService's `caBundle`).
    Pem {
        /// Certificate chain, PEM.
        cert_pem: String,
        /// Private key (PKCS#8, SEC1 or PKCS#1), PEM.
        key_pem: String,
    },
}

impl std::fmt::Debug for ServingIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServingIdentity::SelfSigned(names) => f.debug_tuple("SelfSigned").field(names).finish(),
            ServingIdentity::Pem { .. } => f.write_str("Pem { .. }"),
        }
    }
}

/// The server's TLS configuration: `identity`'s serving certificate and client certificates
/// verified against the requestheader CA (optional at the TLS layer, required per request).
///
/// # Errors
/// A message when the CA cannot be read or the certificate cannot be made or read.
pub fn tls_config(rh: &RequestHeader, identity: &ServingIdentity) -> Result<rustls::ServerConfig, ServeError> {
    let tls = |what: &'static str| move |e: &dyn std::fmt::Display| ServeError::Tls { what, message: e.to_string() };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (certs, pkey) = match identity {
        ServingIdentity::SelfSigned(names) => {
            let key = rcgen::generate_simple_self_signed(names.clone())
                .map_err(|e| tls("making the serving certificate")(&e))?;
            let pkey = rustls::pki_types::PrivateKeyDer::try_from(key.signing_key.serialize_der())
                .map_err(|e| tls("serving key")(&e))?;
            (vec![key.cert.der().clone()], pkey)
        }
        ServingIdentity::Pem { cert_pem, key_pem } => {
            let certs = rustls::pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| tls("serving certificate")(&e))?;
            let pkey = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
                .map_err(|e| tls("serving key")(&e))?;
            (certs, pkey)
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(rh.client_ca_pem.as_bytes()) {
        let c = c.map_err(|e| tls("requestheader-client-ca-file")(&e))?;
        roots.add(c).map_err(|e| tls("requestheader-client-ca-file")(&e))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| tls("client verifier")(&e))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls("TLS versions")(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, pkey)
        .map_err(|e| tls("serving certificate")(&e))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Serves the API on `addr` from spawned tasks, presenting `identity`. Returns the bound address.
///
/// # Errors
/// When the ConfigMap cannot be read, the TLS configuration cannot be made, or `addr` cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    identity: ServingIdentity,
    client: kube::Client,
    catalogs: PackageCatalogs,
    global_namespace: String,
) -> Result<SocketAddr, ServeError> {
    let rh = Arc::new(RequestHeader::from_cluster(&client).await?);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls_config(&rh, &identity)?));
    let listen = |source| ServeError::Listen { addr, what: "packages API", source };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(listen)?;
    let bound = listener.local_addr().map_err(listen)?;
    let global = Arc::new(global_namespace);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let (acceptor, rh, client, catalogs, global) =
                (acceptor.clone(), rh.clone(), client.clone(), catalogs.clone(), global.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let proxy_ok = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).is_some_and(|c| {
                    rh.allowed_names.is_empty() || common_name(c).is_some_and(|cn| rh.allowed_names.contains(&cn))
                });
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (rh, client, catalogs, global) = (rh.clone(), client.clone(), catalogs.clone(), global.clone());
                    async move { Ok::<_, Infallible>(handle(proxy_ok, &rh, &client, &catalogs, &global, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

async fn handle(
    proxy_ok: bool,
    rh: &RequestHeader,
    client: &kube::Client,
    catalogs: &PackageCatalogs,
    global: &str,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    if req.method() != Method::GET {
        return status_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "packagemanifests are read-only (get, list)",
        );
    }
    if !proxy_ok {
        return status_error(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "this server accepts requests only through the API server's front proxy (its client certificate)",
        );
    }
    let r = route(req.uri().path());
    if let Some(user) = user_of(rh, &req) {
        if let Some(sar) = access_review(&user, &r) {
            let api: kube::Api<SubjectAccessReview> = kube::Api::all(client.clone());
            match api.create(&Default::default(), &sar).await {
                Ok(res) if res.status.as_ref().is_some_and(|s| s.allowed) => {}
                Ok(res) => {
                    let (verb, ns) = match &r {
                        Route::List(ns) => ("list", ns.as_str()),
                        Route::Get(ns, _) => ("get", ns.as_str()),
                        _ => ("get", ""),
                    };
                    let why = res
                        .status
                        .and_then(|s| s.reason)
                        .filter(|s| !s.is_empty())
                        .map(|s| format!(": {s}"))
                        .unwrap_or_default();
                    let scope = if ns.is_empty() {
                        "at the cluster scope".to_string()
                    } else {
                        format!("in the namespace \"{ns}\"")
                    };
                    return status_error(
                        StatusCode::FORBIDDEN,
                        "Forbidden",
                        &format!(
                            "{RESOURCE}.{GROUP} is forbidden: User \"{}\" cannot {verb} resource \"{RESOURCE}\" in API group \"{GROUP}\" {scope}{why}",
                            user.name
                        ),
                    );
                }
                Err(e) => {
                    return status_error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "InternalError",
                        &format!("SubjectAccessReview failed: {e}"),
                    );
                }
            }
        }
    } else if matches!(r, Route::List(_) | Route::Get(..)) {
        return status_error(StatusCode::UNAUTHORIZED, "Unauthorized", "no user in the front proxy's headers");
    }
    answer(&catalogs.get(), global, &req, std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rh() -> RequestHeader {
        RequestHeader {
            username_headers: vec!["X-Remote-User".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_prefixes: vec!["X-Remote-Extra-".into()],
            ..Default::default()
        }
    }

    #[test]
    fn routes_and_users() {
        assert_eq!(
            route("/apis/packages.operators.coreos.com/v1/namespaces/ops/packagemanifests"),
            Route::List("ops".into())
        );
        assert_eq!(route("/apis/packages.operators.coreos.com/v1/packagemanifests"), Route::List(String::new()));
        assert_eq!(
            route("/apis/packages.operators.coreos.com/v1/namespaces/ops/packagemanifests/etcd"),
            Route::Get("ops".into(), "etcd".into())
        );
        assert!(matches!(route("/apis/packages.operators.coreos.com/v1"), Route::Discovery(_)));
        assert_eq!(route("/apis/other.io/v1/namespaces/a/packagemanifests"), Route::NotFound);
        let req = Request::builder()
            .header("X-Remote-User", "ann")
            .header("X-Remote-Group", "dev")
            .header("X-Remote-Group", "system:authenticated")
            .header("X-Remote-Extra-Scopes", "a")
            .body(())
            .unwrap();
        let u = user_of(&rh(), &req).unwrap();
        assert_eq!((u.name.as_str(), u.groups.len()), ("ann", 2));
        assert_eq!(u.extra["scopes"], ["a"]);
        assert!(user_of(&rh(), &Request::builder().body(()).unwrap()).is_none());
        let sar = access_review(&u, &Route::Get("ops".into(), "etcd".into())).unwrap();
        let ra = sar.spec.resource_attributes.unwrap();
        assert_eq!(
            (ra.verb.as_deref(), ra.namespace.as_deref(), ra.name.as_deref(), ra.resource.as_deref()),
            (Some("get"), Some("ops"), Some("etcd"), Some("packagemanifests"))
        );
        assert!(access_review(&u, &Route::Health).is_none());
    }

    #[test]
    fn watch_is_refused_and_tables_are_served() {
        let req = Request::builder()
            .uri("/apis/packages.operators.coreos.com/v1/namespaces/a/packagemanifests?watch=true")
            .body(())
            .unwrap();
        assert_eq!(answer(&[], "olm", &req, std::time::SystemTime::now()).status(), StatusCode::METHOD_NOT_ALLOWED);
        let req = Request::builder()
            .uri("/apis/packages.operators.coreos.com/v1/namespaces/a/packagemanifests")
            .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
            .body(())
            .unwrap();
        let r = answer(&[], "olm", &req, std::time::SystemTime::now());
        assert_eq!(r.status(), StatusCode::OK);
        let req = Request::builder()
            .uri("/apis/packages.operators.coreos.com/v1/namespaces/a/packagemanifests?fieldSelector=status.x%3Dy")
            .body(())
            .unwrap();
        assert_eq!(answer(&[], "olm", &req, std::time::SystemTime::now()).status(), StatusCode::BAD_REQUEST);
    }
}
