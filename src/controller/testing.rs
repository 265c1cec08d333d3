//! A scripted API server for reconciler fixtures, the pattern of kube-rs' controller-rs
//! (`src/fixtures.rs`: a `kube::Client` over a mock tower service whose `ApiServerVerifier`
//! expects each request in turn and answers it with a canned response). Here the script is a
//! list of expected `METHOD path` pairs with their replies, checked in order as the requests
//! come; every request is recorded (method, path, query, content type, JSON body) so that a
//! fixture asserts what was written — a status body, a patch's precondition — after the
//! reconcile returns.
//!
//! A request that is not the next one in the script gets a 500 with a `Status` naming the
//! mismatch, and [`ApiServer::finish`] panics with the script and every request seen; so does a
//! script that was not used up. A reconcile that makes one request more or fewer than before is
//! a failing fixture, which is the point: the requests are the reconciler's behaviour.
//!
//! Built on `tower::service_fn` (already a dev-dependency, see `tests/it/install_retry.rs`) rather
//! than `tower-test`'s `mock::pair`: the script is checked inside the service, so no verifier
//! task has to be spawned and joined.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use http::{Request as HttpRequest, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::{Value, json};

use super::Context;

/// What the scripted server answers to one expected request.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// This JSON with HTTP 200.
    Ok(Value),
    /// A `Status` with this code and reason (`NotFound`, `Conflict`, …).
    Status(u16, &'static str),
    /// The request's own body, with `metadata.uid` and `metadata.resourceVersion` filled in
    /// when absent (a create).
    Echo,
    /// This object with the request body's `status` written onto it (a status write: the server
    /// returns the object as written): replaced by a server-side apply, merged into it by a merge
    /// patch (RFC 7386, `null` removes).
    WithStatus(Value),
}

/// One request as the scripted server received it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// `GET`, `PATCH`, …
    pub method: String,
    /// The URI path.
    pub path: String,
    /// The URI query (`""` when none).
    pub query: String,
    /// The `content-type` header (`application/apply-patch+yaml` for server-side apply,
    /// `application/merge-patch+json` for a merge patch).
    pub content_type: String,
    /// The body as JSON (`Null` when empty).
    pub body: Value,
}

impl Seen {
    /// `METHOD path`, as the script names requests.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

#[derive(Debug)]
struct Expect {
    method: String,
    path: String,
    reply: Reply,
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<Expect>,
    /// Requests that may come at any point of the script, each once ([`ApiServer::expect_beside`]).
    beside: Vec<Expect>,
    seen: Vec<Seen>,
    errors: Vec<String>,
}

/// The scripted API server behind a fixture's client (see the module documentation).
#[derive(Clone)]
pub(crate) struct ApiServer {
    state: Arc<Mutex<State>>,
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": code, "reason": reason, "message": message})
}

impl ApiServer {
    /// A server with an empty script and a client talking to it.
    pub fn new() -> (ApiServer, kube::Client) {
        let server = ApiServer { state: Arc::new(Mutex::new(State::default())) };
        let s = server.clone();
        let svc = tower::service_fn(move |req: HttpRequest<Body>| {
            let s = s.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                let seen = Seen {
                    method: parts.method.to_string(),
                    path: parts.uri.path().to_string(),
                    query: parts.uri.query().unwrap_or("").to_string(),
                    content_type: parts
                        .headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string(),
                    body: if bytes.is_empty() {
                        Value::Null
                    } else {
                        serde_json::from_slice(&bytes)
                            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
                    },
                };
                let (code, body) = s.answer(seen);
                let resp = Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(resp)
            }
        });
        (server, kube::Client::new(svc, "default"))
    }

    /// A server and a controller [`Context`] (default options, its own metrics) whose client
    /// talks to it. Its Events are recorded before `publish` returns ([`super::Events::awaited`]),
    /// so that they come at fixed places in the script.
    pub fn context() -> (ApiServer, Arc<Context>) {
        let (server, client) = ApiServer::new();
        let (mut ctx, _resync) =
            Context::new(client.clone(), None, super::Options::default(), Arc::new(crate::metrics::Metrics::new()));
        Arc::get_mut(&mut ctx).expect("a new Context has no other reference").events =
            super::Events::awaited(client, super::leader::default_identity());
        (server, ctx)
    }

    /// Expects `method path` next (after what is scripted already) and answers it with `reply`.
    pub fn expect(&self, method: &str, path: &str, reply: Reply) -> &Self {
        self.lock().script.push_back(Expect { method: method.into(), path: path.into(), reply });
        self
    }

    /// Expects `method path` once, at any point of the script: a request a reconciler sends
    /// beside its ordered ones (a task of its own), whose place among them is not fixed.
    pub fn expect_beside(&self, method: &str, path: &str, reply: Reply) -> &Self {
        self.lock().beside.push(Expect { method: method.into(), path: path.into(), reply });
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn answer(&self, seen: Seen) -> (u16, Value) {
        let mut st = self.lock();
        let line = seen.line();
        if let Some(i) = st.beside.iter().position(|e| e.method == seen.method && e.path == seen.path) {
            let e = st.beside.remove(i);
            let out = reply(&e.reply, &seen);
            st.seen.push(seen);
            return out;
        }
        let next = st.script.pop_front();
        let out = match next {
            Some(e) if e.method == seen.method && e.path == seen.path => reply(&e.reply, &seen),
            Some(e) => {
                let message =
                    format!("request {} was {line}, the script expected {} {}", st.seen.len() + 1, e.method, e.path);
                st.errors.push(message.clone());
                st.script.push_front(e);
                (500, status_body(500, "InternalError", &message))
            }
            None => {
                let message = format!("request {} was {line}, after the end of the script", st.seen.len() + 1);
                st.errors.push(message.clone());
                (500, status_body(500, "InternalError", &message))
            }
        };
        st.seen.push(seen);
        out
    }

    /// The requests seen since the last `finish` (they are taken: a fixture scripts and checks a
    /// second reconcile on its own), after checking that each was the one the script expected
    /// and that the script is used up. Panics otherwise, listing the requests seen and the script
    /// left.
    pub fn finish(&self) -> Vec<Seen> {
        let mut st = self.lock();
        let seen: Vec<String> = st.seen.iter().map(Seen::line).collect();
        let left: Vec<String> =
            st.script.iter().chain(st.beside.iter()).map(|e| format!("{} {}", e.method, e.path)).collect();
        st.beside.clear();
        assert!(
            st.errors.is_empty() && left.is_empty(),
            "API requests did not follow the script:\n  {}\nseen:\n  {}\nnot seen:\n  {}",
            st.errors.join("\n  "),
            seen.join("\n  "),
            left.join("\n  ")
        );
        std::mem::take(&mut st.seen)
    }
}

fn reply(r: &Reply, seen: &Seen) -> (u16, Value) {
    match r {
        Reply::Ok(v) => (200, v.clone()),
        Reply::Status(code, reason) => (*code, status_body(*code, reason, &format!("{} ({reason})", seen.line()))),
        Reply::Echo => {
            let mut v = seen.body.clone();
            if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.entry("uid").or_insert_with(|| json!("uid-created"));
                meta.entry("resourceVersion").or_insert_with(|| json!("1"));
            }
            (200, v)
        }
        Reply::WithStatus(obj) => {
            let mut v = obj.clone();
            let status = seen.body.get("status").cloned().unwrap_or(Value::Null);
            if seen.content_type == "application/merge-patch+json" {
                // As the API server: `null` removes what it names.
                merge_patch(&mut v["status"], &status);
            } else {
                v["status"] = status;
            }
            (200, v)
        }
    }
}

/// Applies JSON merge patch `patch` to `target` (RFC 7386): objects merge key by key, `null`
/// removes the key, anything else replaces.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Some(fields) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Some(map) = target.as_object_mut() else { return };
    for (k, v) in fields {
        if v.is_null() {
            map.remove(k);
        } else {
            merge_patch(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// A list response of `kind` (`SubscriptionList`, …) with `items`.
pub(crate) fn list(kind: &str, api_version: &str, items: Vec<Value>) -> Reply {
    Reply::Ok(json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items}))
}

/// The path of a namespaced `operators.coreos.com` object (`plural` e.g. `subscriptions`;
/// `name` `""` for the collection).
pub(crate) fn olm_path(version: &str, ns: &str, plural: &str, name: &str) -> String {
    let base = format!("/apis/operators.coreos.com/{version}/namespaces/{ns}/{plural}");
    if name.is_empty() { base } else { format!("{base}/{name}") }
}

/// The collection path of Events (`events.k8s.io/v1`) in `ns`.
pub(crate) fn events_path(ns: &str) -> String {
    format!("/apis/events.k8s.io/v1/namespaces/{ns}/events")
}

mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;

    #[tokio::test]
    async fn requests_off_the_script_fail_the_fixture() {
        let (server, client) = ApiServer::new();
        server.expect("GET", "/api/v1/namespaces/ns/configmaps/a", Reply::Status(404, "NotFound"));
        let api: Api<ConfigMap> = Api::namespaced(client, "ns");
        assert!(api.get_opt("a").await.unwrap().is_none());
        assert_eq!(
            server.finish().iter().map(Seen::line).collect::<Vec<_>>(),
            ["GET /api/v1/namespaces/ns/configmaps/a"]
        );
        // One request more than scripted: a 500 for the reconciler, a panic for the fixture
        // (requests are counted from the last `finish`).
        assert!(api.get_opt("b").await.is_err());
        let s = server.clone();
        let panic = std::panic::catch_unwind(move || s.finish())
            .err()
            .and_then(|p| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        assert!(
            panic.contains("request 1 was GET /api/v1/namespaces/ns/configmaps/b, after the end of the script"),
            "{panic}"
        );
    }
}
