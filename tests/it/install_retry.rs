//! `install::apply` against a scripted fake API server: transient errors (503, 429, 500) are
//! retried with backoff, persistent ones end in `RetriesExhausted` after the retry window,
//! Forbidden is reported at once with verb, resource and identity, and a kind the server does not
//! serve is `ApiNotAvailable`; a scoped install's CRDs are applied by the other client of
//! `install::apply_as`. The real control plane cannot be made to fail on cue; the successful
//! paths are covered by `install_cluster.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capstan::install::{self, ApplyOptions, Step, StepError, StepStatus};
use http::{Request, Response};
use kube::client::Body;
use serde_json::{Value, json};

/// Records every request as `METHOD path` and answers with `respond(method, path, n)` where `n`
/// counts earlier requests with the same method and path.
fn fake(
    respond: impl Fn(&str, &str, usize) -> (u16, Value) + Send + Sync + 'static,
) -> (kube::Client, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let respond = Arc::new(respond);
    let l = log.clone();
    let svc = tower::service_fn(move |req: Request<Body>| {
        let log = l.clone();
        let respond = respond.clone();
        async move {
            let key = format!("{} {}", req.method(), req.uri().path());
            let n = {
                let mut g = log.lock().unwrap_or_else(|e| e.into_inner());
                let n = g.iter().filter(|k| **k == key).count();
                g.push(key);
                n
            };
            let (code, body) = respond(req.method().as_str(), req.uri().path(), n);
            let resp = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(resp)
        }
    });
    (kube::Client::new(svc, "default"), log)
}

fn status(code: u16, reason: &str, message: &str, name: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
           "message": message, "details": {"name": name, "kind": "configmaps"}})
}

fn configmap_step() -> Step {
    Step {
        resolving: "op.v1".into(),
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "cm".into(),
        namespace: Some("ns".into()),
        manifest: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": {"k": "v"}}),
    }
}

fn quick() -> ApplyOptions {
    ApplyOptions {
        retry_timeout: Duration::from_millis(600),
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        ..Default::default()
    }
}

const CM_PATH: &str = "/api/v1/namespaces/ns/configmaps/cm";

#[tokio::test]
async fn transient_errors_are_retried_until_the_step_succeeds() {
    let (client, log) = fake(|method, path, n| match (method, path, n) {
        ("GET", CM_PATH, 0) => (503, status(503, "ServiceUnavailable", "etcd is restarting", "")),
        ("GET", CM_PATH, _) => (404, status(404, "NotFound", "configmaps \"cm\" not found", "cm")),
        ("PATCH", CM_PATH, 0) => (429, status(429, "TooManyRequests", "slow down", "")),
        ("PATCH", CM_PATH, 1) => (409, status(409, "Conflict", "the object has been modified", "cm")),
        ("PATCH", CM_PATH, _) => (
            200,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"}}),
        ),
        _ => (500, status(500, "InternalError", "unexpected request", "")),
    });
    let results = install::apply(&client, &[configmap_step()], &quick()).await;
    assert_eq!(results[0].status, StepStatus::Created, "{}", results[0]);
    assert_eq!(results[0].uid.as_deref(), Some("u-1"));
    let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(
        log,
        vec![
            format!("GET {CM_PATH}"),
            format!("GET {CM_PATH}"),
            format!("PATCH {CM_PATH}"),
            format!("PATCH {CM_PATH}"),
            format!("PATCH {CM_PATH}")
        ]
    );
}

#[tokio::test]
async fn persistent_server_errors_end_after_the_retry_window_and_block_later_steps() {
    let (client, log) = fake(|_, _, _| (500, status(500, "InternalError", "etcdserver: request timed out", "")));
    let mut second = configmap_step();
    second.name = "cm2".into();
    let start = std::time::Instant::now();
    let results = install::apply(&client, &[configmap_step(), second], &quick()).await;
    let elapsed = start.elapsed();
    let StepStatus::Failed(StepError::RetriesExhausted { verb, attempts, last, .. }) = &results[0].status else {
        panic!("expected RetriesExhausted, got {}", results[0]);
    };
    assert_eq!(verb, "get");
    assert!(*attempts >= 4, "backoff 10 ms doubling to 50 ms within 600 ms gives several attempts, got {attempts}");
    assert!(last.contains("etcdserver: request timed out"), "{last}");
    assert!(elapsed >= Duration::from_millis(600) && elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_eq!(results[1].status, StepStatus::NotApplied { blocked_by: 0 });
    let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(log.iter().all(|l| l.ends_with("/configmaps/cm")), "cm2 was never requested: {log:?}");
}

#[tokio::test]
async fn forbidden_is_not_retried_and_names_verb_resource_and_identity() {
    let (client, log) = fake(|method, path, _| match (method, path) {
        ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews") => (
            201,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                   "status": {"userInfo": {"username": "system:serviceaccount:ops:installer", "groups": ["system:serviceaccounts"]}}}),
        ),
        _ => (
            403,
            status(
                403,
                "Forbidden",
                "configmaps \"cm\" is forbidden: User \"system:serviceaccount:ops:installer\" cannot patch resource \"configmaps\"",
                "cm",
            ),
        ),
    });
    let mut step = configmap_step();
    step.group = String::new();
    let results = install::apply(&client, &[step], &quick()).await;
    let StepStatus::Failed(StepError::Forbidden { verb, resource, identity, namespace, .. }) = &results[0].status
    else {
        panic!("expected Forbidden, got {}", results[0]);
    };
    assert_eq!((verb.as_str(), resource.as_str(), namespace.as_deref()), ("get", "configmaps", Some("ns")));
    assert_eq!(identity, "user \"system:serviceaccount:ops:installer\" (groups system:serviceaccounts)");
    let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(log.iter().filter(|l| l.starts_with("GET")).count(), 1, "Forbidden is not retried: {log:?}");
}

#[tokio::test]
async fn a_kind_the_server_does_not_serve_is_api_not_available() {
    let (client, _) = fake(|_, _, _| {
        (
            404,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound", "message": "the server could not find the requested resource"}),
        )
    });
    let step = Step {
        resolving: "op.v1".into(),
        group: "monitoring.coreos.com".into(),
        version: "v1".into(),
        kind: "ServiceMonitor".into(),
        name: "sm".into(),
        namespace: Some("ns".into()),
        manifest: json!({"metadata": {"name": "sm"}}),
    };
    let results = install::apply(&client, &[step], &quick()).await;
    let StepStatus::Failed(e @ StepError::ApiNotAvailable { .. }) = &results[0].status else {
        panic!("expected ApiNotAvailable, got {}", results[0]);
    };
    assert!(e.to_string().contains("monitoring.coreos.com/v1 ServiceMonitor"), "{e}");
}

/// A scoped install's plan applied with [`install::apply_as`]: the CRD is read, applied and
/// waited for by capstan's own client, the ConfigMap by the ServiceAccount's, which may not touch
/// CRDs (OLM v0.46.0 `ExecutePlan`, `pkg/controller/operators/catalog/operator.go`).
#[tokio::test]
async fn a_scoped_install_applies_its_crds_with_capstans_own_client() {
    const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "uid": "u-crd", "resourceVersion": "3"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget"}, "versions": []},
        "status": {"conditions": [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}]}});
    let applied = crd.clone();
    let (own, own_log) = fake(move |method, path, n| match (method, path, n) {
        ("GET", CRD_PATH, 0) => (404, status(404, "NotFound", "not found", "widgets.example.com")),
        ("GET", CRD_PATH, _) | ("PATCH", CRD_PATH, _) => (200, applied.clone()),
        _ => (500, status(500, "InternalError", "unexpected request", "")),
    });
    let (account, account_log) = fake(|method, path, _| match (method, path) {
        ("GET", CM_PATH) => (404, status(404, "NotFound", "configmaps \"cm\" not found", "cm")),
        ("PATCH", CM_PATH) => (
            200,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"}}),
        ),
        _ => (403, status(403, "Forbidden", "the ServiceAccount may not", "")),
    });
    let crd_step = Step {
        resolving: "op.v1".into(),
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        kind: "CustomResourceDefinition".into(),
        name: "widgets.example.com".into(),
        namespace: None,
        manifest: crd,
    };
    let appliers = install::Appliers { steps: &account, crds: &own };
    let results = install::apply_as(appliers, &[crd_step, configmap_step()], &quick()).await;
    assert_eq!(results[0].status, StepStatus::Created, "{}", results[0]);
    assert_eq!(results[1].status, StepStatus::Created, "{}", results[1]);
    let own_log = own_log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let account_log = account_log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        own_log.iter().all(|l| l.ends_with(CRD_PATH)) && own_log.contains(&format!("PATCH {CRD_PATH}")),
        "{own_log:?}"
    );
    assert!(
        account_log.iter().all(|l| l.ends_with(CM_PATH)) && account_log.contains(&format!("PATCH {CM_PATH}")),
        "{account_log:?}"
    );
}
