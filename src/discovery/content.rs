//! A catalog's content over HTTP, read-only, as OLM v1's catalogd serves a ClusterCatalog:
//! `GET /catalogs/{namespace}/{name}/api/v1/all` (every blob) and
//! `GET /catalogs/{namespace}/{name}/api/v1/metas?schema=S&package=P&name=N` (the blobs whose
//! fields equal every parameter given; at least one is required), as JSON lines
//! (`application/jsonl`, one compact blob per line, in `opm render`'s order).
//!
//! Caching: `ETag` is the catalog image's digest (with the query for `metas`), `Last-Modified`
//! the time that digest was loaded; `If-None-Match` and `If-Modified-Since` answer 304.
//! `Accept-Encoding: gzip` gets a gzip body (`/all` is compressed once per digest and kept; a
//! `metas` answer is compressed while it streams). Each catalog is held once, as one buffer; an
//! answer is slices of it, never a copy (upstream: operator-controller `internal/catalogd/storage`
//! `localdir.go`, whose `/all` is the rendered FBC file and whose `metas` filters by the three
//! fields).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::SystemTime;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use crate::catalog::model::DeclarativeConfig;
use crate::catalog::parse::each_blob_json;

/// The media type of the answers.
pub const CONTENT_TYPE: &str = "application/jsonl";
/// Size of the pieces a streamed answer is cut into.
const CHUNK: usize = 256 * 1024;

/// One blob's place in [`CatalogContent`]'s buffer and its fields.
#[derive(Debug, Clone)]
struct Meta {
    start: usize,
    end: usize,
    schema: u32,
    package: u32,
    name: Box<str>,
}

/// A catalog's blobs as JSON lines, held once, with what `metas` filters on.
#[derive(Debug)]
pub struct CatalogContent {
    digest: String,
    loaded: SystemTime,
    data: Bytes,
    metas: Vec<Meta>,
    /// Interned schema and package names.
    strings: Vec<Box<str>>,
    gzip_all: OnceLock<Bytes>,
}

impl CatalogContent {
    /// Serializes `cfg` (every blob, opm's order) for the catalog image `digest`, loaded at `loaded`.
    pub fn new(cfg: &DeclarativeConfig, digest: &str, loaded: SystemTime) -> CatalogContent {
        let mut data = Vec::new();
        let mut metas = Vec::new();
        let mut strings: Vec<Box<str>> = Vec::new();
        let mut ids: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        let mut intern = |s: &str| -> u32 {
            if let Some(i) = ids.get(s) {
                return *i;
            }
            let i = strings.len() as u32;
            strings.push(s.into());
            ids.insert(s.to_string(), i);
            i
        };
        each_blob_json(cfg, |b| {
            let start = data.len();
            data.extend_from_slice(b.json);
            data.push(b'\n');
            metas.push(Meta {
                start,
                end: data.len(),
                schema: intern(b.schema),
                package: intern(b.package),
                name: b.name.into(),
            });
        });
        CatalogContent {
            digest: digest.to_string(),
            loaded,
            data: Bytes::from(data),
            metas,
            strings,
            gzip_all: OnceLock::new(),
        }
    }

    /// The catalog image digest.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Every blob, one per line.
    pub fn all(&self) -> Bytes {
        self.data.clone()
    }

    /// Bytes held (the JSON lines plus the per-blob index), for memory accounting.
    pub fn size_bytes(&self) -> usize {
        self.data.len()
            + self.metas.len() * std::mem::size_of::<Meta>()
            + self.metas.iter().map(|m| m.name.len()).sum::<usize>()
    }

    /// Number of blobs.
    pub fn len(&self) -> usize {
        self.metas.len()
    }

    /// Whether the catalog has no blob.
    pub fn is_empty(&self) -> bool {
        self.metas.is_empty()
    }

    /// The blobs matching every filter given, as slices of the buffer (adjacent blobs merged).
    pub fn metas(&self, f: &MetaFilter) -> Vec<Bytes> {
        let find = |s: &Option<String>| -> Result<Option<u32>, ()> {
            match s {
                None => Ok(None),
                Some(s) => self.strings.iter().position(|x| **x == **s).map(|i| Some(i as u32)).ok_or(()),
            }
        };
        let (Ok(schema), Ok(package)) = (find(&f.schema), find(&f.package)) else { return Vec::new() };
        let mut out: Vec<(usize, usize)> = Vec::new();
        for m in &self.metas {
            if schema.is_some_and(|s| s != m.schema)
                || package.is_some_and(|p| p != m.package)
                || f.name.as_deref().is_some_and(|n| n != &*m.name)
            {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.1 == m.start => last.1 = m.end,
                _ => out.push((m.start, m.end)),
            }
        }
        out.into_iter().map(|(s, e)| self.data.slice(s..e)).collect()
    }

    fn gzip_all(&self) -> Bytes {
        self.gzip_all
            .get_or_init(|| {
                let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                let _ = std::io::Write::write_all(&mut enc, &self.data);
                Bytes::from(enc.finish().unwrap_or_default())
            })
            .clone()
    }
}

/// The `metas` query: `schema`, `package`, `name`, each optional; a blob matches when it has
/// every one given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaFilter {
    /// `schema`.
    pub schema: Option<String>,
    /// `package`.
    pub package: Option<String>,
    /// `name`.
    pub name: Option<String>,
}

impl MetaFilter {
    /// From a URL query string.
    ///
    /// # Errors
    /// [`MetaQueryError`]: a parameter is unknown, or none is given.
    pub fn parse(query: Option<&str>) -> Result<MetaFilter, MetaQueryError> {
        let mut f = MetaFilter::default();
        for (k, v) in form_pairs(query.unwrap_or("")) {
            match k.as_str() {
                "schema" => f.schema = Some(v),
                "package" => f.package = Some(v),
                "name" => f.name = Some(v),
                _ => return Err(MetaQueryError::Unknown { parameter: k }),
            }
        }
        if f == MetaFilter::default() {
            return Err(MetaQueryError::Empty);
        }
        Ok(f)
    }
}

/// Why a `metas` query is refused ([`MetaFilter::parse`]; a 400 with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaQueryError {
    /// A parameter other than `schema`, `package` and `name`.
    #[error("unknown query parameter {parameter:?}: metas takes schema, package and name")]
    Unknown {
        /// The parameter as given (percent-decoded).
        parameter: String,
    },
    /// None of the parameters.
    #[error("metas needs at least one of the query parameters schema, package, name (or use /api/v1/all)")]
    Empty,
}

/// Percent-decoded `k=v` pairs of a query string (`+` is a space).
pub(crate) fn form_pairs(q: &str) -> Vec<(String, String)> {
    fn dec(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < b.len() => {
                    match s.get(i + 1..i + 3).map(|h| u8::from_str_radix(h, 16)).unwrap_or(Ok(b'%')) {
                        Ok(x) => {
                            out.push(x);
                            i += 2;
                        }
                        Err(_) => out.push(b'%'),
                    }
                }
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').map_or((dec(p), String::new()), |(k, v)| (dec(k), dec(v))))
        .collect()
}

/// The catalogs the endpoint serves, by `namespace/name`. The controller replaces an entry
/// when a CatalogSource's digest changes and removes it when the CatalogSource goes.
#[derive(Debug, Default, Clone)]
pub struct ContentCatalogs(Arc<RwLock<BTreeMap<String, Arc<CatalogContent>>>>);

impl ContentCatalogs {
    /// Sets (or replaces) a catalog's content.
    pub fn insert(&self, namespace: &str, name: &str, content: Arc<CatalogContent>) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).insert(format!("{namespace}/{name}"), content);
    }

    /// Replaces every catalog at once (keys `namespace/name`).
    pub fn replace_all(&self, catalogs: BTreeMap<String, Arc<CatalogContent>>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = catalogs;
    }

    /// Removes a catalog.
    pub fn remove(&self, namespace: &str, name: &str) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).remove(&format!("{namespace}/{name}"));
    }

    /// A catalog's content.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<CatalogContent>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).get(&format!("{namespace}/{name}")).cloned()
    }

    /// Total bytes held ([`CatalogContent::size_bytes`]).
    pub fn size_bytes(&self) -> usize {
        self.0.read().unwrap_or_else(|e| e.into_inner()).values().map(|c| c.size_bytes()).sum()
    }
}

/// Response body: whole buffers or a stream of slices.
pub type Body = BoxBody<Bytes, Infallible>;

fn text(status: StatusCode, msg: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(msg + "\n")).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// `Last-Modified` form of a time (RFC 7231 IMF-fixdate).
fn http_date(t: SystemTime) -> String {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    jiff::Timestamp::from_second(secs)
        .map(|ts| ts.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string())
        .unwrap_or_default()
}

fn parse_http_date(s: &str) -> Option<i64> {
    let dt = jiff::fmt::strtime::parse("%a, %d %b %Y %H:%M:%S GMT", s.trim()).ok()?.to_datetime().ok()?;
    Some(dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp().as_second())
}

fn accepts_gzip(req: &Request<impl Sized>) -> bool {
    req.headers()
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| {
            let mut parts = e.split(';');
            let name = parts.next().unwrap_or("").trim();
            let q0 = parts.any(|p| p.trim().replace(' ', "") == "q=0");
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !q0
        })
}

/// Answers one request for the content of `catalogs` (see the module documentation for paths).
pub fn handle<B>(catalogs: &ContentCatalogs, req: &Request<B>) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD".into());
    }
    let (content, filter) = match route(catalogs, req) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let etag = match &filter {
        None => format!("\"{}\"", content.digest),
        Some(_) => format!("\"{}?{}\"", content.digest, req.uri().query().unwrap_or("")),
    };
    let last_modified = http_date(content.loaded);
    let mut builder = Response::builder()
        .header(header::ETAG, etag.as_str())
        .header(header::LAST_MODIFIED, last_modified.as_str())
        .header(header::VARY, "Accept-Encoding")
        .header(header::CACHE_CONTROL, "no-cache");
    if not_modified(req, &etag, &content) {
        return builder
            .status(StatusCode::NOT_MODIFIED)
            .body(Full::new(Bytes::new()).boxed())
            .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "response".into()));
    }
    let gzip = accepts_gzip(req);
    builder = builder.header(header::CONTENT_TYPE, CONTENT_TYPE);
    if gzip {
        builder = builder.header(header::CONTENT_ENCODING, "gzip");
    }
    let head = req.method() == Method::HEAD;
    let (builder, body) = content_body(builder, &content, filter, gzip, head);
    builder
        .status(StatusCode::OK)
        .body(body)
        .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "response".into()))
}

/// A routed request: the catalog its path names and its `metas` filter (`None` for `all`).
type Route = (Arc<CatalogContent>, Option<MetaFilter>);

/// The catalog a request's path names and its `metas` filter (`None` for `all`).
///
/// # Errors
/// The response to send instead: 404 for an unknown path or catalog, 400 for a bad query.
fn route<B>(catalogs: &ContentCatalogs, req: &Request<B>) -> Result<Route, Box<Response<Body>>> {
    let path = req.uri().path();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let ["catalogs", ns, name, "api", "v1", what] = parts.as_slice() else {
        return Err(Box::new(text(
            StatusCode::NOT_FOUND,
            format!(
                "{path}: not found; use /catalogs/NAMESPACE/NAME/api/v1/all or /catalogs/NAMESPACE/NAME/api/v1/metas?schema=&package=&name="
            ),
        )));
    };
    let Some(content) = catalogs.get(ns, name) else {
        return Err(Box::new(text(
            StatusCode::NOT_FOUND,
            format!(
                "catalog source {ns}/{name} is not loaded (no such CatalogSource, or its image has not been pulled yet)"
            ),
        )));
    };
    let filter = match *what {
        "all" => None,
        "metas" => Some(
            MetaFilter::parse(req.uri().query()).map_err(|e| Box::new(text(StatusCode::BAD_REQUEST, e.to_string())))?,
        ),
        _ => {
            return Err(Box::new(text(
                StatusCode::NOT_FOUND,
                format!("{path}: not found; the catalog's paths are api/v1/all and api/v1/metas"),
            )));
        }
    };
    Ok((content, filter))
}

/// Whether the client's copy is current: `If-None-Match` names `etag` (or `*`), else
/// `If-Modified-Since` is not before the catalog was loaded.
fn not_modified<B>(req: &Request<B>, etag: &str, content: &CatalogContent) -> bool {
    match req.headers().get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) {
        Some(inm) => inm.split(',').any(|t| t.trim() == etag || t.trim() == "*"),
        None => req
            .headers()
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_http_date)
            .is_some_and(|since| {
                content.loaded.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0) <= since
            }),
    }
}

/// The body of a 200: the whole catalog (with its length) or the filtered blobs (streamed),
/// gzip-compressed when `gzip`, empty for `head`.
fn content_body(
    mut builder: hyper::http::response::Builder,
    content: &CatalogContent,
    filter: Option<MetaFilter>,
    gzip: bool,
    head: bool,
) -> (hyper::http::response::Builder, Body) {
    let body: Body = match (filter, gzip) {
        (None, false) => {
            builder = builder.header(header::CONTENT_LENGTH, content.data.len());
            if head { Full::new(Bytes::new()).boxed() } else { Full::new(content.all()).boxed() }
        }
        (None, true) => {
            let z = content.gzip_all();
            builder = builder.header(header::CONTENT_LENGTH, z.len());
            if head { Full::new(Bytes::new()).boxed() } else { Full::new(z).boxed() }
        }
        (Some(_), _) if head => Full::new(Bytes::new()).boxed(),
        (Some(f), false) => {
            let pieces = content.metas(&f);
            builder = builder.header(header::CONTENT_LENGTH, pieces.iter().map(Bytes::len).sum::<usize>());
            StreamBody::new(futures::stream::iter(
                pieces.into_iter().flat_map(split_chunks).map(|b| Ok(Frame::data(b))),
            ))
            .into_body()
        }
        (Some(f), true) => StreamBody::new(gzip_stream(content.metas(&f)).map(|b| Ok(Frame::data(b)))).into_body(),
    };
    (builder, body)
}

/// Boxes a streamed body (`BodyExt::boxed`, named here because `StreamExt` has a `boxed` too).
trait IntoBody {
    fn into_body(self) -> Body;
}

impl<S: futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + Sync + 'static> IntoBody for StreamBody<S> {
    fn into_body(self) -> Body {
        BodyExt::boxed(self)
    }
}

fn split_chunks(b: Bytes) -> Vec<Bytes> {
    (0..b.len()).step_by(CHUNK).map(|i| b.slice(i..(i + CHUNK).min(b.len()))).collect()
}

/// Gzip of the pieces, compressed a chunk at a time as the client reads.
fn gzip_stream(pieces: Vec<Bytes>) -> impl futures::Stream<Item = Bytes> + Send {
    let chunks: std::collections::VecDeque<Bytes> = pieces.into_iter().flat_map(split_chunks).collect();
    let enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    futures::stream::unfold(Some((chunks, enc)), |state| async move {
        let (mut chunks, mut enc) = state?;
        match chunks.pop_front() {
            Some(c) => {
                let _ = std::io::Write::write_all(&mut enc, &c);
                let out = std::mem::take(enc.get_mut());
                Some((Bytes::from(out), Some((chunks, enc))))
            }
            None => Some((Bytes::from(enc.finish().unwrap_or_default()), None)),
        }
    })
    .filter(|b| futures::future::ready(!b.is_empty()))
}

/// Binds `addr` and serves [`handle`] on it from a spawned task (HTTP/1.1). Returns the bound address.
///
/// # Errors
/// When the address cannot be bound; the message names it.
pub async fn serve(addr: SocketAddr, catalogs: ContentCatalogs) -> std::io::Result<SocketAddr> {
    crate::http::serve(addr, "catalog content", "catalog content", move |req| handle(&catalogs, &req)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::parse::parse_bytes;
    use std::io::Read;
    use std::time::Duration;

    const CAT: &str = r#"
schema: olm.package
name: b
defaultChannel: stable
---
schema: olm.channel
package: b
name: stable
entries: [{name: b.v1.0.0}]
---
schema: olm.bundle
package: b
name: b.v1.0.0
image: x/b:1
properties: [{type: olm.package, value: {packageName: b, version: 1.0.0}}]
---
schema: olm.package
name: a
defaultChannel: stable
---
schema: olm.channel
package: a
name: stable
entries: [{name: a.v1.0.0}]
---
schema: olm.bundle
package: a
name: a.v1.0.0
image: x/a:1
properties: [{type: olm.package, value: {packageName: a, version: 1.0.0}}]
---
schema: custom.thing
name: loose
"#;

    fn store() -> ContentCatalogs {
        let cfg = parse_bytes("c.yaml", CAT.as_bytes()).unwrap();
        let s = ContentCatalogs::default();
        s.insert(
            "olm",
            "c",
            Arc::new(CatalogContent::new(
                &cfg,
                "sha256:abc",
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_119_200),
            )),
        );
        s
    }

    fn get(s: &ContentCatalogs, uri: &str, headers: &[(&str, &str)]) -> (StatusCode, hyper::HeaderMap, Vec<u8>) {
        let mut b = Request::builder().uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let resp = handle(s, &b.body(()).unwrap());
        let (parts, body) = resp.into_parts();
        let bytes = futures::executor::block_on(body.collect()).unwrap().to_bytes().to_vec();
        (parts.status, parts.headers, bytes)
    }

    fn lines(b: &[u8]) -> Vec<serde_json::Value> {
        std::str::from_utf8(b).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn all_in_opm_order_with_cache_headers() {
        let s = store();
        let (st, h, body) = get(&s, "/catalogs/olm/c/api/v1/all", &[]);
        assert_eq!(st, StatusCode::OK);
        assert_eq!(h[header::CONTENT_TYPE], CONTENT_TYPE);
        assert_eq!(h[header::ETAG], "\"sha256:abc\"");
        assert_eq!(h[header::LAST_MODIFIED], "Tue, 01 Dec 2026 10:00:00 GMT");
        let got: Vec<String> = lines(&body)
            .iter()
            .map(|v| format!("{}:{}", v["schema"].as_str().unwrap(), v["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                "olm.package:a",
                "olm.channel:stable",
                "olm.bundle:a.v1.0.0",
                "olm.package:b",
                "olm.channel:stable",
                "olm.bundle:b.v1.0.0",
                "custom.thing:loose"
            ]
        );
        assert_eq!(
            get(&s, "/catalogs/olm/c/api/v1/all", &[("if-none-match", "\"sha256:abc\"")]).0,
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            get(&s, "/catalogs/olm/c/api/v1/all", &[("if-modified-since", "Tue, 01 Dec 2026 10:00:00 GMT")]).0,
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            get(&s, "/catalogs/olm/c/api/v1/all", &[("if-modified-since", "Tue, 01 Dec 2026 09:59:59 GMT")]).0,
            StatusCode::OK
        );
        assert_eq!(get(&s, "/catalogs/olm/c/api/v1/all", &[("if-none-match", "\"sha256:old\"")]).0, StatusCode::OK);
    }

    #[test]
    fn gzip_when_asked() {
        let s = store();
        let (_, _, plain) = get(&s, "/catalogs/olm/c/api/v1/all", &[]);
        for uri in ["/catalogs/olm/c/api/v1/all", "/catalogs/olm/c/api/v1/metas?package=b"] {
            let (st, h, z) = get(&s, uri, &[("accept-encoding", "br, gzip")]);
            assert_eq!(st, StatusCode::OK);
            assert_eq!(h[header::CONTENT_ENCODING], "gzip");
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&z[..]).read_to_end(&mut out).unwrap();
            if uri.ends_with("all") {
                assert_eq!(out, plain);
            } else {
                assert_eq!(lines(&out).len(), 3);
            }
        }
        assert!(
            get(&s, "/catalogs/olm/c/api/v1/all", &[("accept-encoding", "gzip;q=0")])
                .1
                .get(header::CONTENT_ENCODING)
                .is_none()
        );
    }

    #[test]
    fn metas_filter() {
        let s = store();
        let names = |q: &str| -> Vec<String> {
            let (st, _, b) = get(&s, &format!("/catalogs/olm/c/api/v1/metas?{q}"), &[]);
            assert_eq!(st, StatusCode::OK, "{q}");
            lines(&b).iter().map(|v| v["name"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(names("package=b"), ["b", "stable", "b.v1.0.0"]);
        assert_eq!(names("schema=olm.bundle"), ["a.v1.0.0", "b.v1.0.0"]);
        assert_eq!(names("schema=olm.channel&package=a"), ["stable"]);
        assert_eq!(names("schema=custom.thing"), ["loose"]);
        assert_eq!(names("schema=olm.bundle&name=b.v1.0.0"), ["b.v1.0.0"]);
        assert!(names("package=nope").is_empty());
        assert_eq!(names("schema=olm%2Epackage"), ["a", "b"], "percent-decoded");
        assert_eq!(get(&s, "/catalogs/olm/c/api/v1/metas", &[]).0, StatusCode::BAD_REQUEST);
        assert_eq!(get(&s, "/catalogs/olm/c/api/v1/metas?pkg=a", &[]).0, StatusCode::BAD_REQUEST);
        assert_eq!(get(&s, "/catalogs/olm/nope/api/v1/all", &[]).0, StatusCode::NOT_FOUND);
        assert_eq!(get(&s, "/catalogs/olm/c/api/v2/all", &[]).0, StatusCode::NOT_FOUND);
    }
}
