//! One scripted-API fixture per reconciler ([`super::testing::ApiServer`], the pattern of kube-rs'
//! controller-rs): each drives a reconciler's whole reconcile — observe, decide, act — for one
//! case a user meets, and asserts the exact requests it makes and what it writes. Where a
//! reconciler writes status only when it changed, the fixture runs a second reconcile over the
//! world the first one left and asserts that it writes nothing.
//!
//! None of these cases reaches a registry: the catalog is put into the [`super::CatalogStore`] as
//! the CatalogSource reconciler would, and the other cases stop before a pull (a pull secret
//! missing, no OperatorGroup). Pulls and applies are covered against a real API server and
//! registry by the end-to-end binaries (`tests/controller_*`).

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::handoff::ANNOTATION_BUNDLE_LOOKUPS;
use super::testing::{ApiServer, Reply, Seen, events_path, list, merge_patch, olm_path};
use super::{ANNOTATION_UNINSTALL_OPERANDS, CSV_FINALIZER, CatalogState, LoadedIndex, SUBSCRIPTION_FINALIZER};
use crate::api::{CatalogSource, ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use crate::install::ANNOTATION_PROPERTIES;

const NS: &str = "operators";
const BUNDLE_IMAGE: &str =
    "quay.io/example/etcd-bundle@sha256:0000000000000000000000000000000000000000000000000000000000000001";

fn typed<K: serde::de::DeserializeOwned>(v: &Value) -> Arc<K> {
    Arc::new(serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("fixture object does not decode: {e}: {v}")))
}

fn lines(seen: &[Seen]) -> Vec<String> {
    seen.iter().map(Seen::line).collect()
}

/// The status writes among `seen` (`PATCH …/status`).
fn status_writes(seen: &[Seen]) -> Vec<&Seen> {
    seen.iter().filter(|s| s.method == "PATCH" && s.path.ends_with("/status")).collect()
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no condition {type_} in {status}"))
}

fn subscription(status: Option<Value>) -> Value {
    let mut v = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "etcd", "namespace": NS, "uid": "uid-sub", "resourceVersion": "10", "generation": 1},
        "spec": {"name": "etcd", "channel": "stable", "source": "community", "sourceNamespace": "olm"},
    });
    if let Some(s) = status {
        v["status"] = s;
    }
    v
}

/// The component label OLM's adoption puts on the Subscription (the reconciler adds it once).
const COMPONENT: &str = "operators.coreos.com/etcd.operators";

/// `sub` as it is after the reconciler labelled it.
fn adopted(mut sub: Value) -> Value {
    sub["metadata"]["labels"] = json!({COMPONENT: ""});
    sub
}

fn catalog_source(status: Option<Value>) -> Value {
    let mut v = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "community", "namespace": "olm", "uid": "uid-cs", "resourceVersion": "3"},
        "spec": {"sourceType": "grpc", "image": "quay.io/example/catalog:latest", "secrets": ["pull-secret"]},
    });
    if let Some(s) = status {
        v["status"] = s;
    }
    v
}

/// The FBC of catalog olm/community (a JSON stream): package etcd, channel stable with one bundle.
const CATALOG: &str = r#"{"schema": "olm.package", "name": "etcd", "defaultChannel": "stable"}
{"schema": "olm.channel", "package": "etcd", "name": "stable", "entries": [{"name": "etcd.v0.9.4"}]}
{"schema": "olm.bundle", "package": "etcd", "name": "etcd.v0.9.4", "image": "quay.io/example/etcd-bundle@sha256:0000000000000000000000000000000000000000000000000000000000000001", "properties": [{"type": "olm.package", "value": {"packageName": "etcd", "version": "0.9.4"}}]}
"#;

fn load_catalog(ctx: &super::Context) {
    let config =
        crate::catalog::parse::parse_bytes("catalog.json", CATALOG.as_bytes()).expect("fixture catalog parses");
    let index = crate::resolve::CatalogIndex::from_config(&config);
    let loaded = LoadedIndex {
        image: "quay.io/example/catalog:latest".into(),
        digest: "sha256:c0".into(),
        priority: 0,
        index: Arc::new(index),
        served: None,
        inline: Default::default(),
        config_map: None,
    };
    ctx.catalogs.ready(&("olm".into(), "community".into()), loaded);
}

fn installed_csv(status: Option<Value>) -> Value {
    let mut v = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {
            "name": "etcd.v0.9.4", "namespace": NS, "uid": "uid-csv", "resourceVersion": "20",
            "finalizers": [CSV_FINALIZER],
            // As the InstallPlan applies it in OperatorGroup `og` (which the CSV reconciler
            // would otherwise write first: `install::operator_group::member_annotations`).
            "annotations": {
                ANNOTATION_PROPERTIES: r#"{"properties":[{"type":"olm.package","value":{"packageName":"etcd","version":"0.9.4"}}]}"#,
                "olm.operatorGroup": "og", "olm.operatorNamespace": NS, "olm.targetNamespaces": NS,
            },
        },
        "spec": {
            "displayName": "etcd", "version": "0.9.4",
            "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true}, {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": false}],
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "etcd-operator", "spec": {
                "selector": {"matchLabels": {"name": "etcd-operator"}},
                "template": {"metadata": {"labels": {"name": "etcd-operator"}}, "spec": {"containers": [{"name": "etcd-operator", "image": "quay.io/example/etcd-operator:v0.9.4"}]}},
            }}]}},
        },
    });
    if let Some(s) = status {
        v["status"] = s;
    }
    v
}

fn operator_group(name: &str, status: Option<Value>) -> Value {
    let mut v = json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"), "resourceVersion": "5", "generation": 1},
        "spec": {"targetNamespaces": [NS]},
    });
    if let Some(s) = status {
        v["status"] = s;
    }
    v
}

fn og_list(items: Vec<Value>) -> Reply {
    list("OperatorGroupList", "operators.coreos.com/v1", items)
}

/// The reads of one Subscription reconcile up to its resolution: the Subscription (labelled once
/// with its component label when it is not yet), the namespace's OperatorGroups (whether it
/// excludes the global catalogs), the CatalogSources of its namespace and of the global one, the
/// namespace's CSVs (`csvs`) and Subscriptions.
fn expect_subscription_observe(server: &ApiServer, sub: &Value, csvs: Vec<Value>) {
    server.expect("GET", &olm_path("v1alpha1", NS, "subscriptions", "etcd"), Reply::Ok(sub.clone()));
    if sub["metadata"]["labels"][COMPONENT].is_null() {
        server.expect("PATCH", &olm_path("v1alpha1", NS, "subscriptions", "etcd"), Reply::Ok(adopted(sub.clone())));
    }
    server
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![]))
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "catalogsources", ""),
            list("CatalogSourceList", "operators.coreos.com/v1alpha1", vec![]),
        )
        .expect(
            "GET",
            &olm_path("v1alpha1", "olm", "catalogsources", ""),
            list("CatalogSourceList", "operators.coreos.com/v1alpha1", vec![catalog_source(None)]),
        )
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "clusterserviceversions", ""),
            list("ClusterServiceVersionList", "operators.coreos.com/v1alpha1", csvs),
        )
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "subscriptions", ""),
            list("SubscriptionList", "operators.coreos.com/v1alpha1", vec![sub.clone()]),
        );
}

/// A new Subscription whose catalog is loaded: one InstallPlan is created — owned by the
/// Subscription, approved (Automatic), with the resolver's bundle in its lookups annotation — and
/// the Subscription's status is written once, UpgradePending with the plan's reference. The
/// InstallPlan's status is not written here (only the InstallPlan reconciler does); a second
/// reconcile over the same world writes nothing.
#[tokio::test]
async fn subscription_creates_one_plan_and_writes_its_status_once() {
    let (server, ctx) = ApiServer::context();
    load_catalog(&ctx);
    let plan = super::install_plan_name("etcd", &[("etcd.v0.9.4".into(), BUNDLE_IMAGE.into())], "");
    let sub = subscription(None);
    let expect_observe = |sub: &Value| expect_subscription_observe(&server, sub, vec![]);
    expect_observe(&sub);
    server
        .expect("GET", &olm_path("v1alpha1", NS, "installplans", &plan), Reply::Status(404, "NotFound"))
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "clusterserviceversions", "etcd.v0.9.4"),
            Reply::Status(404, "NotFound"),
        )
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "installplans", ""),
            list("InstallPlanList", "operators.coreos.com/v1alpha1", vec![]),
        )
        .expect("POST", &olm_path("v1alpha1", NS, "installplans", ""), Reply::Echo)
        .expect("POST", &events_path(NS), Reply::Echo)
        .expect("PATCH", &olm_path("v1alpha1", NS, "subscriptions", "etcd/status"), Reply::WithStatus(sub.clone()));
    let action = super::subscription::reconcile(typed::<Subscription>(&sub), ctx.clone()).await.expect("reconcile");
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    let seen = server.finish();
    // OLM's adoption: the component label, once, by merge patch of the metadata.
    assert_eq!(seen[1].body, json!({"metadata": {"labels": {COMPONENT: ""}}}));
    assert_created_plan(&seen[10].body, &plan);
    assert_eq!(
        (&seen[11].body["reason"], &seen[11].body["regarding"]["name"]),
        (&json!("InstallPlanCreated"), &json!("etcd"))
    );
    let writes = status_writes(&seen);
    assert_eq!(writes.len(), 1, "one status write: {:?}", lines(&seen));
    assert!(
        writes[0].path.ends_with("/subscriptions/etcd/status"),
        "only the InstallPlan reconciler writes InstallPlan status: {}",
        writes[0].line()
    );
    assert_eq!(writes[0].content_type, "application/apply-patch+yaml");
    let status = &writes[0].body["status"];
    assert_eq!(
        (&status["state"], &status["currentCSV"], &status["installPlanRef"]["name"]),
        (&json!("UpgradePending"), &json!("etcd.v0.9.4"), &json!(plan))
    );
    assert_eq!(
        (
            &condition(status, "CatalogSourcesUnhealthy")["status"],
            &condition(status, "CatalogSourcesUnhealthy")["reason"]
        ),
        (&json!("False"), &json!("AllCatalogSourcesHealthy"))
    );
    assert_eq!(
        (&condition(status, "InstallPlanPending")["reason"], &condition(status, "InstallPlanPending")["message"]),
        (&json!("Planning"), &json!(format!("InstallPlan {plan} is Planning")))
    );

    // Again, with the status as written and the plan there (not yet worked on): nothing to write.
    let sub = adopted(subscription(Some(status.clone())));
    let mut created = seen[10].body.clone();
    // As the server answered the create (`Reply::Echo`).
    created["metadata"]["uid"] = json!("uid-created");
    created["metadata"]["resourceVersion"] = json!("1");
    expect_observe(&sub);
    server.expect("GET", &olm_path("v1alpha1", NS, "installplans", &plan), Reply::Ok(created));
    super::subscription::reconcile(typed::<Subscription>(&sub), ctx).await.expect("second reconcile");
    let seen = server.finish();
    assert!(status_writes(&seen).is_empty() && !seen.iter().any(|s| s.method == "POST"), "{:?}", lines(&seen));
}

/// What the Subscription reconciler's create of plan `plan` carries: its name, the operator's
/// component label, the namespace's first generation, its owner, Automatic approval, the CSV and
/// the resolver's bundle in the lookups annotation, and no status.
fn assert_created_plan(created: &Value, plan: &str) {
    assert_eq!(created["metadata"]["name"], plan);
    assert_eq!(
        created["metadata"]["labels"],
        json!({COMPONENT: ""}),
        "the plan carries its operator's component label"
    );
    assert_eq!(created["spec"]["generation"], 1, "the namespace's first plan");
    assert_eq!(created["metadata"]["ownerReferences"][0]["uid"], "uid-sub");
    assert_eq!((&created["spec"]["approval"], &created["spec"]["approved"]), (&json!("Automatic"), &json!(true)));
    assert_eq!(created["spec"]["clusterServiceVersionNames"], json!(["etcd.v0.9.4"]));
    assert!(created.get("status").is_none_or(Value::is_null), "a new plan carries no status: {created}");
    let lookups: Value = serde_json::from_str(
        created["metadata"]["annotations"][ANNOTATION_BUNDLE_LOOKUPS].as_str().expect("lookups annotation"),
    )
    .expect("lookups JSON");
    assert_eq!(lookups["bundleLookups"][0]["path"], BUNDLE_IMAGE);
    assert_eq!(
        (
            &lookups["bundleLookups"][0]["catalogSourceRef"]["namespace"],
            &lookups["bundleLookups"][0]["catalogSourceRef"]["name"]
        ),
        (&json!("olm"), &json!("community"))
    );
}

/// A Subscription whose operator is installed and current: `AtLatestKnown` with `installedCSV`,
/// the completed plans pruned (none here); the second reconcile writes no status.
#[tokio::test]
async fn an_installed_subscription_is_at_latest_known_and_not_rewritten() {
    let (server, ctx) = ApiServer::context();
    load_catalog(&ctx);
    let run = |sub: &Value| expect_subscription_observe(&server, sub, vec![installed_csv(None)]);
    let sub = subscription(None);
    run(&sub);
    server
        .expect("PATCH", &olm_path("v1alpha1", NS, "subscriptions", "etcd/status"), Reply::WithStatus(sub.clone()))
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "installplans", ""),
            list("InstallPlanList", "operators.coreos.com/v1alpha1", vec![]),
        );
    let action = super::subscription::reconcile(typed::<Subscription>(&sub), ctx.clone()).await.expect("reconcile");
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
    let seen = server.finish();
    let status = status_writes(&seen)[0].body["status"].clone();
    assert_eq!(
        (&status["state"], &status["currentCSV"], &status["installedCSV"]),
        (&json!("AtLatestKnown"), &json!("etcd.v0.9.4"), &json!("etcd.v0.9.4"))
    );
    assert!(
        status["conditions"].as_array().is_some_and(|c| c.iter().all(|c| c["type"] == "CatalogSourcesUnhealthy")),
        "{status}"
    );

    let sub = adopted(subscription(Some(status)));
    run(&sub);
    server.expect(
        "GET",
        &olm_path("v1alpha1", NS, "installplans", ""),
        list("InstallPlanList", "operators.coreos.com/v1alpha1", vec![]),
    );
    super::subscription::reconcile(typed::<Subscription>(&sub), ctx).await.expect("second reconcile");
    assert!(status_writes(&server.finish()).is_empty());
}

/// A Subscription reconcile after an install of etcd.v0.9.4 whose InstallPlan is Complete, the
/// Subscription's status still pointing at the plan (its CSV's event not yet seen), and the
/// namespace's CSV list empty: scripted up to the read of the CSV by name, which answers
/// `csv_read`. Returns the server, the context and the Subscription.
fn completed_install(csv_read: Reply) -> (ApiServer, Arc<super::Context>, Value) {
    let (server, ctx) = ApiServer::context();
    load_catalog(&ctx);
    let plan = super::install_plan_name("etcd", &[("etcd.v0.9.4".into(), BUNDLE_IMAGE.into())], "");
    let sub = adopted(subscription(Some(json!({
        "lastUpdated": "2026-12-01T00:00:00Z", "state": "UpgradePending", "currentCSV": "etcd.v0.9.4",
        "installPlanRef": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "name": plan, "namespace": NS, "uid": "uid-ip", "resourceVersion": "30"},
    }))));
    let mut ip = install_plan(Some(json!({"phase": "Complete", "catalogSources": ["community"]})));
    ip["metadata"]["name"] = json!(plan);
    expect_subscription_observe(&server, &sub, vec![]);
    server.expect("GET", &olm_path("v1alpha1", NS, "installplans", &plan), Reply::Ok(ip)).expect(
        "GET",
        &olm_path("v1alpha1", NS, "clusterserviceversions", "etcd.v0.9.4"),
        csv_read,
    );
    (server, ctx, sub)
}

/// The namespace's CSVs are read from the API server's watch cache (`install::from_watch_cache`),
/// which can lag the plan's Complete status: a Complete plan whose CSV the list does not show,
/// but a read by name finds, is not deleted and nothing is installed again.
#[tokio::test]
async fn a_complete_plan_whose_csv_the_cached_list_lags_is_not_reinstalled() {
    let (server, ctx, sub) = completed_install(Reply::Ok(installed_csv(None)));
    server.expect("PATCH", &olm_path("v1alpha1", NS, "subscriptions", "etcd/status"), Reply::WithStatus(sub.clone()));
    super::subscription::reconcile(typed::<Subscription>(&sub), ctx).await.expect("reconcile");
    let seen = server.finish();
    assert!(
        !seen.iter().any(|s| s.method == "DELETE" || s.method == "POST"),
        "nothing deleted or created: {:?}",
        lines(&seen)
    );
    let csv_list = seen
        .iter()
        .find(|s| s.method == "GET" && s.path == olm_path("v1alpha1", NS, "clusterserviceversions", ""))
        .expect("the CSV list");
    assert!(
        csv_list.query.contains("resourceVersion=0") && csv_list.query.contains("resourceVersionMatch=NotOlderThan"),
        "the list is served from the watch cache: {}",
        csv_list.query
    );
}

/// A new InstallPlan is not created for a CSV that exists though the namespace's list (from the
/// watch cache) does not show it yet — as when a dependency's plan, named after another set of
/// bundles, installed it: the Subscription resolves again a second later, nothing written.
#[tokio::test]
async fn no_plan_is_created_for_a_csv_the_cached_list_does_not_show_yet() {
    let (server, ctx) = ApiServer::context();
    load_catalog(&ctx);
    let plan = super::install_plan_name("etcd", &[("etcd.v0.9.4".into(), BUNDLE_IMAGE.into())], "");
    let sub = adopted(subscription(None));
    expect_subscription_observe(&server, &sub, vec![]);
    server.expect("GET", &olm_path("v1alpha1", NS, "installplans", &plan), Reply::Status(404, "NotFound")).expect(
        "GET",
        &olm_path("v1alpha1", NS, "clusterserviceversions", "etcd.v0.9.4"),
        Reply::Ok(installed_csv(None)),
    );
    let action = super::subscription::reconcile(typed::<Subscription>(&sub), ctx).await.expect("reconcile");
    assert_eq!(action, Action::requeue(Duration::from_secs(1)));
    let seen = server.finish();
    assert!(!seen.iter().any(|s| s.method != "GET"), "nothing created or written: {:?}", lines(&seen));
}

/// A Complete plan whose CSV is gone (the read by name finds none either) is deleted and the
/// CSV installed again with a new plan, as OLM does.
#[tokio::test]
async fn a_complete_plan_whose_csv_was_deleted_is_replaced() {
    let (server, ctx, sub) = completed_install(Reply::Status(404, "NotFound"));
    let plan = super::install_plan_name("etcd", &[("etcd.v0.9.4".into(), BUNDLE_IMAGE.into())], "");
    server
        .expect("POST", &events_path(NS), Reply::Echo)
        .expect(
            "DELETE",
            &olm_path("v1alpha1", NS, "installplans", &plan),
            Reply::Ok(json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
        )
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "installplans", ""),
            list("InstallPlanList", "operators.coreos.com/v1alpha1", vec![]),
        )
        .expect("POST", &olm_path("v1alpha1", NS, "installplans", ""), Reply::Echo)
        .expect("POST", &events_path(NS), Reply::Echo)
        .expect("PATCH", &olm_path("v1alpha1", NS, "subscriptions", "etcd/status"), Reply::WithStatus(sub.clone()));
    super::subscription::reconcile(typed::<Subscription>(&sub), ctx).await.expect("reconcile");
    let seen = server.finish();
    let deleted = seen.iter().find(|s| s.method == "DELETE").expect("the Complete plan is deleted");
    assert_eq!(deleted.body["preconditions"]["uid"], "uid-ip", "the plan read, not a newer one of the same name");
    let reasons: Vec<&Value> = seen.iter().filter(|s| s.path == events_path(NS)).map(|s| &s.body["reason"]).collect();
    assert_eq!(reasons, [&json!("Reinstalling"), &json!("InstallPlanCreated")]);
    assert!(
        seen.iter().any(|s| s.method == "POST" && s.path == olm_path("v1alpha1", NS, "installplans", "")),
        "a new plan: {:?}",
        lines(&seen)
    );
}

fn install_plan(status: Option<Value>) -> Value {
    let lookups = json!({
        "catalogSources": ["community"],
        "bundleLookups": [{"path": BUNDLE_IMAGE, "identifier": "etcd.v0.9.4", "replaces": "", "catalogSourceRef": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource", "namespace": "olm", "name": "community"}}],
    });
    let mut v = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {
            "name": "install-abc", "namespace": NS, "uid": "uid-ip", "resourceVersion": "30", "generation": 1,
            "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "name": "etcd", "uid": "uid-sub", "controller": true}],
            "annotations": {ANNOTATION_BUNDLE_LOOKUPS: lookups.to_string()},
        },
        "spec": {"clusterServiceVersionNames": ["etcd.v0.9.4"], "approval": "Automatic", "approved": true, "source": "community", "sourceNamespace": "olm", "generation": 1},
    });
    if let Some(s) = status {
        v["status"] = s;
    }
    v
}

/// A new approved InstallPlan in a namespace without an OperatorGroup: its bundle lookups are
/// copied from the annotation into the status in the same write that fails it with
/// `NoOperatorGroup` (one status write; nothing pulled or applied, so no Pulling marker) and a
/// Warning Event. Rechecked while its Subscription points at it, an unchanged cause writes nothing
/// and records no second Event.
#[tokio::test]
async fn an_install_plan_without_operator_group_is_blocked_once() {
    let (server, ctx) = ApiServer::context();
    let ip = install_plan(None);
    let status_path = olm_path("v1alpha1", NS, "installplans", "install-abc/status");
    server
        .expect("GET", &olm_path("v1alpha1", NS, "installplans", "install-abc"), Reply::Ok(ip.clone()))
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![]))
        .expect("PATCH", &status_path, Reply::WithStatus(ip.clone()))
        .expect("POST", &events_path(NS), Reply::Echo);
    let action = super::installplan::reconcile(typed::<InstallPlan>(&ip), ctx.clone()).await.expect("reconcile");
    assert_eq!(action, Action::requeue(super::installplan::CRD_RECHECK));
    let seen = server.finish();
    let writes = status_writes(&seen);
    assert_eq!(writes.len(), 1, "{:#?}", lines(&seen));
    let failed = &writes[0].body["status"];
    let message = "NoOperatorGroup: csv in namespace operators with no operatorgroups; create one OperatorGroup in operators (capstan checks again every 10 s)";
    assert_eq!((&failed["phase"], &failed["message"]), (&json!("Failed"), &json!(message)));
    let installed = condition(failed, "Installed");
    assert_eq!((&installed["status"], &installed["reason"]), (&json!("False"), &json!("NoOperatorGroup")));
    assert_eq!(
        (&failed["bundleLookups"][0]["path"], &failed["catalogSources"]),
        (&json!(BUNDLE_IMAGE), &json!(["community"])),
        "the lookups are initialized"
    );
    assert!(
        failed["bundleLookups"][0].get("conditions").is_none_or(|c| c.as_array().is_some_and(Vec::is_empty)),
        "not pulled, so not marked Pulling: {failed}"
    );
    assert_eq!((&seen[3].body["type"], &seen[3].body["reason"]), (&json!("Warning"), &json!("NoOperatorGroup")));

    // The recheck: the Subscription still points at the plan, there is still no OperatorGroup.
    // The plan as stored: the merge patch's `null`s remove what they name.
    let mut stored = Value::Null;
    merge_patch(&mut stored, failed);
    let ip = install_plan(Some(stored));
    let sub = subscription(Some(
        json!({"lastUpdated": "2026-01-01T00:00:00Z", "installPlanRef": {"name": "install-abc", "namespace": NS}}),
    ));
    server
        .expect("GET", &olm_path("v1alpha1", NS, "installplans", "install-abc"), Reply::Ok(ip.clone()))
        .expect("GET", &olm_path("v1alpha1", NS, "subscriptions", "etcd"), Reply::Ok(sub))
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![]));
    let action = super::installplan::reconcile(typed::<InstallPlan>(&ip), ctx).await.expect("recheck");
    assert_eq!(action, Action::requeue(super::installplan::CRD_RECHECK));
    server.finish();
}

/// A plan that already lists its steps and is then refused before they are planned again (its
/// OperatorGroup is gone) keeps them: they name the bundle digest it was planned from, which the
/// next check pulls instead of the lookup's tag.
#[tokio::test]
async fn a_plan_refused_before_planning_keeps_the_steps_it_lists() {
    let (server, ctx) = ApiServer::context();
    let ip = install_plan(None);
    let status_path = olm_path("v1alpha1", NS, "installplans", "install-abc/status");
    server
        .expect("GET", &olm_path("v1alpha1", NS, "installplans", "install-abc"), Reply::Ok(ip.clone()))
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![]))
        .expect("PATCH", &status_path, Reply::WithStatus(ip.clone()))
        .expect("POST", &events_path(NS), Reply::Echo);
    super::installplan::reconcile(typed::<InstallPlan>(&ip), ctx).await.expect("reconcile");
    let seen = server.finish();
    let mut stored = Value::Null;
    merge_patch(&mut stored, &status_writes(&seen)[0].body["status"]);
    let listed = json!([{
        "resolving": "etcdoperator.v0.9.4",
        "resource": {"sourceName": "community", "sourceNamespace": NS, "group": "", "version": "v1",
                     "kind": "ServiceAccount", "name": "etcd-operator", "manifest": "{}"},
        "status": "NotCreated"
    }]);
    stored["plan"] = listed.clone();
    stored["message"] = json!("an earlier refusal");
    let ip = install_plan(Some(stored));
    // A new controller process (its Event recorder has not seen the first refusal).
    let (server, ctx) = ApiServer::context();
    let sub = subscription(Some(
        json!({"lastUpdated": "2026-01-01T00:00:00Z", "installPlanRef": {"name": "install-abc", "namespace": NS}}),
    ));
    server
        .expect("GET", &olm_path("v1alpha1", NS, "installplans", "install-abc"), Reply::Ok(ip.clone()))
        .expect("GET", &olm_path("v1alpha1", NS, "subscriptions", "etcd"), Reply::Ok(sub))
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![]))
        .expect("PATCH", &status_path, Reply::WithStatus(ip.clone()))
        .expect("POST", &events_path(NS), Reply::Echo);
    super::installplan::reconcile(typed::<InstallPlan>(&ip), ctx).await.expect("recheck");
    let seen = server.finish();
    let writes = status_writes(&seen);
    assert_eq!(writes.len(), 1, "{:#?}", lines(&seen));
    assert_eq!(writes[0].body["status"]["plan"], listed, "the listed steps stay: {}", writes[0].body);
}

/// The first pull of a catalog whose pull secret does not exist: the first pass writes only
/// `CONNECTING` and comes back at once; the second pulls and writes `TRANSIENT_FAILURE` with
/// reason `ImagePullFailed` and a message naming the secret and what to do; the store holds the
/// failure for the Subscriptions, and the next try comes within 30 s. One status write per pass.
#[tokio::test]
async fn a_catalog_source_with_a_missing_pull_secret_fails_with_the_reason() {
    let (server, ctx) = ApiServer::context();
    let cs = catalog_source(None);
    let status_path = olm_path("v1alpha1", "olm", "catalogsources", "community/status");
    server.expect("PATCH", &status_path, Reply::WithStatus(cs.clone()));
    let action = super::catalogsource::reconcile(typed::<CatalogSource>(&cs), ctx.clone()).await.expect("connect");
    assert_eq!(action, Action::requeue(Duration::ZERO), "the pull comes in the next pass");
    let seen = server.finish();
    let writes = status_writes(&seen);
    assert_eq!(writes.len(), 1, "{:#?}", lines(&seen));
    assert_eq!(
        (&writes[0].body["status"]["connectionState"]["lastObservedState"], &writes[0].body["status"]["message"]),
        (&json!("CONNECTING"), &json!("pulling quay.io/example/catalog:latest"))
    );
    assert!(matches!(ctx.catalogs.get(&("olm".into(), "community".into())), Some(CatalogState::Loading)));
    server.expect("GET", "/api/v1/namespaces/olm/secrets/pull-secret", Reply::Status(404, "NotFound")).expect(
        "PATCH",
        &status_path,
        Reply::WithStatus(cs.clone()),
    );
    let action = super::catalogsource::reconcile(typed::<CatalogSource>(&cs), ctx.clone()).await.expect("reconcile");
    assert_eq!(action, Action::requeue(Duration::from_secs(30)));
    let seen = server.finish();
    let writes = status_writes(&seen);
    assert_eq!(writes.len(), 1, "{:#?}", lines(&seen));
    let failed = &writes[0].body["status"];
    let why = "pull secret olm/pull-secret (spec.secrets) does not exist; create it or remove it from spec.secrets";
    assert_eq!(
        (&failed["connectionState"]["lastObservedState"], &failed["reason"]),
        (&json!("TRANSIENT_FAILURE"), &json!("ImagePullFailed"))
    );
    assert_eq!(failed["message"], format!("catalog source olm/community: {why}").as_str());
    assert!(failed.get("resolvedDigest").is_none_or(Value::is_null), "{failed}");
    match ctx.catalogs.get(&("olm".into(), "community".into())) {
        Some(CatalogState::Failed { error, last: None }) => assert_eq!(error, why),
        other => panic!("{other:?}"),
    }
}

/// A Succeeded CSV whose Deployment is no longer Available goes to `Failed/ComponentUnhealthy`
/// naming it, with a Warning Event; looked at again while the Deployment stays down, nothing is
/// written (the status says so already).
#[tokio::test]
async fn a_succeeded_csv_whose_deployment_fails_is_component_unhealthy_once() {
    let (server, ctx) = ApiServer::context();
    let succeeded = json!({"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed with no errors",
                           "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let csv = installed_csv(Some(succeeded));
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "etcd-operator", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"name": "etcd-operator"}}, "template": {"spec": {"containers": []}}},
        "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]},
    });
    let run = |csv: &Value| {
        server
            .expect("GET", &olm_path("v1alpha1", NS, "clusterserviceversions", "etcd.v0.9.4"), Reply::Ok(csv.clone()))
            .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![operator_group("og", None)]))
            // The strategy planned from the CSV, compared with the Deployment (`csv::unit`).
            .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![operator_group("og", None)]))
            .expect(
                "GET",
                &format!("/apis/apps/v1/namespaces/{NS}/deployments/etcd-operator"),
                Reply::Ok(deployment.clone()),
            )
            .expect(
                "GET",
                &format!("/apis/apps/v1/namespaces/{NS}/deployments/etcd-operator"),
                Reply::Ok(deployment.clone()),
            );
    };
    run(&csv);
    server
        .expect(
            "PATCH",
            &olm_path("v1alpha1", NS, "clusterserviceversions", "etcd.v0.9.4/status"),
            Reply::WithStatus(csv.clone()),
        )
        .expect("POST", &events_path(NS), Reply::Echo);
    let action = super::csv::reconcile(typed::<ClusterServiceVersion>(&csv), ctx.clone()).await.expect("reconcile");
    assert_eq!(action, Action::requeue(Duration::from_secs(1)));
    let seen = server.finish();
    let status = status_writes(&seen)[0].body["status"].clone();
    assert_eq!(
        (&status["phase"], &status["reason"], &status["message"]),
        (
            &json!("Failed"),
            &json!("ComponentUnhealthy"),
            &json!("installing: Deployment etcd-operator is not available")
        )
    );
    assert_eq!((&seen[6].body["type"], &seen[6].body["reason"]), (&json!("Warning"), &json!("ComponentUnhealthy")));

    let csv = installed_csv(Some(status));
    run(&csv);
    super::csv::reconcile(typed::<ClusterServiceVersion>(&csv), ctx).await.expect("second reconcile");
    let seen = server.finish();
    assert!(status_writes(&seen).is_empty(), "{:#?}", seen.iter().map(|s| (s.line(), &s.body)).collect::<Vec<_>>());
}

/// Two OperatorGroups in one namespace: each says `OperatorGroupInvalid` with
/// `TooManyOperatorGroups` and an empty `namespaces` (sent explicitly, so that a merge patch
/// empties an old list); written with a merge patch (not apply, see the reconciler), once.
#[tokio::test]
async fn two_operator_groups_are_both_invalid() {
    let (server, ctx) = ApiServer::context();
    let old = json!({"namespaces": [NS], "lastUpdated": "2026-01-01T00:00:00Z"});
    let (a, b) = (operator_group("a", Some(old)), operator_group("b", None));
    // The group's namespace label: none labelled, none to label (the group does not count).
    let labelled = || list("PartialObjectMetadataList", "meta.k8s.io/v1", vec![]);
    server
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![a.clone(), b.clone()]))
        .expect("PATCH", &olm_path("v1", NS, "operatorgroups", "a/status"), Reply::WithStatus(a.clone()))
        .expect("GET", "/api/v1/namespaces", labelled());
    let action = super::operatorgroup::reconcile(typed::<OperatorGroup>(&a), ctx.clone()).await.expect("reconcile");
    assert_eq!(action, Action::requeue(Duration::from_secs(30)));
    let seen = server.finish();
    assert_eq!(seen[1].content_type, "application/merge-patch+json");
    let status = seen[1].body["status"].clone();
    assert_eq!(status["namespaces"], json!([]));
    let invalid = condition(&status, "OperatorGroupInvalid");
    assert_eq!((&invalid["status"], &invalid["reason"]), (&json!("True"), &json!("TooManyOperatorGroups")));
    assert!(invalid["message"].as_str().is_some_and(|m| m.contains("(a, b); keep exactly one")), "{invalid}");

    let a = operator_group("a", Some(status));
    server.expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![a.clone(), b])).expect(
        "GET",
        "/api/v1/namespaces",
        labelled(),
    );
    super::operatorgroup::reconcile(typed::<OperatorGroup>(&a), ctx).await.expect("second reconcile");
    server.finish();
}

/// A Subscription deleted with `uninstall-operands: "true"`: its CSV gets the Subscription's
/// uninstall annotations (so that the CSV's cleanup still sees them) before it is deleted, then
/// the Subscription's finalizer goes with its resourceVersion as precondition. No status is
/// written.
#[tokio::test]
async fn a_subscription_deleted_for_uninstall_hands_its_annotations_to_the_csv() {
    let (server, ctx) = ApiServer::context();
    let mut sub = subscription(Some(
        json!({"lastUpdated": "2026-01-01T00:00:00Z", "installedCSV": "etcd.v0.9.4", "currentCSV": "etcd.v0.9.4", "state": "AtLatestKnown"}),
    ));
    sub["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:05:00Z");
    sub["metadata"]["finalizers"] = json!([SUBSCRIPTION_FINALIZER]);
    sub["metadata"]["annotations"] = json!({ANNOTATION_UNINSTALL_OPERANDS: "true"});
    let csv = installed_csv(None);
    let csv_path = olm_path("v1alpha1", NS, "clusterserviceversions", "etcd.v0.9.4");
    server
        .expect("GET", &olm_path("v1alpha1", NS, "subscriptions", "etcd"), Reply::Ok(sub.clone()))
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "clusterserviceversions", ""),
            list("ClusterServiceVersionList", "operators.coreos.com/v1alpha1", vec![csv.clone()]),
        )
        .expect("GET", &csv_path, Reply::Ok(csv.clone()))
        .expect("PATCH", &csv_path, Reply::Ok(csv.clone()))
        .expect("DELETE", &csv_path, Reply::Ok(csv.clone()))
        .expect("PATCH", &olm_path("v1alpha1", NS, "subscriptions", "etcd"), Reply::Ok(sub.clone()));
    let action = super::subscription::reconcile(typed::<Subscription>(&sub), ctx).await.expect("reconcile");
    assert_eq!(action, Action::await_change());
    let seen = server.finish();
    assert!(
        seen[1].query.contains("labelSelector=operators.coreos.com%2Fetcd.operators"),
        "the package's CSVs by component label: {}",
        seen[1].query
    );
    assert_eq!(seen[3].body, json!({"metadata": {"annotations": {ANNOTATION_UNINSTALL_OPERANDS: "true"}}}));
    assert_eq!(seen[5].body, json!({"metadata": {"finalizers": null, "resourceVersion": "10"}}));
    assert!(status_writes(&seen).is_empty());
}

/// An object of `kind` labelled as owned by CSV `etcd.v0.9.4` of namespace `NS` (OLM's
/// `olm.owner` labels), in namespace `ns` when given.
fn owned_by_csv(kind: &str, api_version: &str, ns: Option<&str>, name: &str) -> Value {
    let mut v = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "labels": {"olm.owner": "etcd.v0.9.4", "olm.owner.namespace": NS}}});
    if let Some(ns) = ns {
        v["metadata"]["namespace"] = json!(ns);
    }
    v
}

/// A deleted CSV without uninstall annotations and without webhooks or owned CRDs: the operator
/// goes in OLM's order — webhook configurations first (nothing may call a Service without pods),
/// then the Deployment, then its RBAC and the other labelled objects in every namespace — and only
/// once no labelled cluster-scoped RBAC is left does the finalizer go, with the resourceVersion
/// as precondition, after a Normal Event `Uninstalled`.
#[tokio::test]
async fn a_deleted_csv_removes_its_operator_in_order_then_its_finalizer() {
    let (server, ctx) = ApiServer::context();
    let mut csv = installed_csv(Some(json!({"phase": "Succeeded", "reason": "InstallSucceeded", "message": "ok"})));
    csv["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:05:00Z");
    let deployment = owned_by_csv("Deployment", "apps/v1", Some(NS), "etcd-operator");
    let binding = owned_by_csv("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", None, "etcd-operator-view");
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let csv_path = olm_path("v1alpha1", NS, "clusterserviceversions", "etcd.v0.9.4");
    server
        .expect("GET", &csv_path, Reply::Ok(csv.clone()))
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "clusterserviceversions", ""),
            list("ClusterServiceVersionList", "operators.coreos.com/v1alpha1", vec![csv.clone()]),
        )
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "subscriptions", ""),
            list("SubscriptionList", "operators.coreos.com/v1alpha1", vec![]),
        )
        .expect(
            "DELETE",
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
            list("MutatingWebhookConfigurationList", "admissionregistration.k8s.io/v1", vec![]),
        )
        .expect(
            "DELETE",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            list("ValidatingWebhookConfigurationList", "admissionregistration.k8s.io/v1", vec![]),
        )
        .expect("GET", "/apis/apps/v1/deployments", list("DeploymentList", "apps/v1", vec![deployment.clone()]))
        .expect("DELETE", &format!("/apis/apps/v1/namespaces/{NS}/deployments/etcd-operator"), Reply::Ok(deployment))
        .expect(
            "GET",
            &format!("{rbac}/clusterrolebindings"),
            list("ClusterRoleBindingList", "rbac.authorization.k8s.io/v1", vec![binding.clone()]),
        )
        .expect("DELETE", &format!("{rbac}/clusterrolebindings/etcd-operator-view"), Reply::Ok(binding))
        .expect("GET", &format!("{rbac}/clusterroles"), list("ClusterRoleList", "rbac.authorization.k8s.io/v1", vec![]))
        .expect("GET", "/api/v1/services", list("ServiceList", "v1", vec![]))
        .expect("GET", &format!("{rbac}/rolebindings"), list("RoleBindingList", "rbac.authorization.k8s.io/v1", vec![]))
        .expect("GET", &format!("{rbac}/roles"), list("RoleList", "rbac.authorization.k8s.io/v1", vec![]))
        .expect("GET", "/api/v1/serviceaccounts", list("ServiceAccountList", "v1", vec![]))
        .expect("GET", "/api/v1/configmaps", list("ConfigMapList", "v1", vec![]))
        .expect("GET", "/api/v1/secrets", list("SecretList", "v1", vec![]))
        .expect(
            "GET",
            &format!("{rbac}/clusterrolebindings"),
            list("ClusterRoleBindingList", "rbac.authorization.k8s.io/v1", vec![]),
        )
        .expect("GET", &format!("{rbac}/clusterroles"), list("ClusterRoleList", "rbac.authorization.k8s.io/v1", vec![]))
        .expect("POST", &events_path(NS), Reply::Echo)
        .expect("PATCH", &csv_path, Reply::Ok(csv.clone()))
        // Its APIs leave the group's olm.providedAPIs at once; no group here.
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![]));
    let action = super::csv::reconcile(typed::<ClusterServiceVersion>(&csv), ctx).await.expect("reconcile");
    assert_eq!(action, Action::await_change());
    let seen = server.finish();
    let selector = "labelSelector=olm.owner%3Detcd.v0.9.4%2Colm.owner.namespace%3Doperators%2Colm.owner.kind%3DClusterServiceVersion";
    for s in seen.iter().filter(|s| {
        !s.path.contains("operators.coreos.com")
            && !s.path.contains("events")
            && !s.path.ends_with("etcd-operator")
            && !s.path.ends_with("-view")
    }) {
        assert!(s.query.contains(selector), "{} selects the CSV's objects by owner labels: {}", s.line(), s.query);
    }
    assert_eq!(
        (&seen[18].body["type"], &seen[18].body["reason"], &seen[18].body["note"]),
        (
            &json!("Normal"),
            &json!("Uninstalled"),
            &json!("uninstalled CSV operators/etcd.v0.9.4: removed the operator and its RBAC")
        )
    );
    assert_eq!(seen[19].body, json!({"metadata": {"finalizers": null, "resourceVersion": "20"}}));
    assert!(status_writes(&seen).is_empty(), "nothing is left to report: {:?}", lines(&seen));
}

/// A new CSV whose requirements are met and whose Deployment is Available goes None → Pending →
/// InstallReady → Succeeded in one reconcile with **one** status write (each phase write would be
/// a round trip on the install's path): the phase written is Succeeded, and
/// `status.conditions` keeps each phase it passed, in order, as OLM's CSVs do. An Event is
/// recorded for each phase, in order. The OperatorCondition (with its Role and RoleBinding) is
/// created beside the steps, its requests at no fixed place among theirs.
#[tokio::test]
async fn a_new_csv_whose_deployment_is_available_succeeds_with_one_status_write() {
    let (server, ctx, csv, oc) = new_csv_world(Reply::Echo);
    let csv_path = olm_path("v1alpha1", NS, "clusterserviceversions", "etcd.v0.9.4");
    server
        .expect_beside(
            "PATCH",
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles/etcd.v0.9.4"),
            Reply::Echo,
        )
        .expect_beside(
            "PATCH",
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings/etcd.v0.9.4"),
            Reply::Echo,
        )
        .expect("PATCH", &format!("{csv_path}/status"), Reply::WithStatus(csv.clone()))
        .expect("POST", &events_path(NS), Reply::Echo)
        .expect("POST", &events_path(NS), Reply::Echo)
        .expect("POST", &events_path(NS), Reply::Echo);
    let action = super::csv::reconcile(typed::<ClusterServiceVersion>(&csv), ctx.clone()).await;
    let seen = server.finish();
    let action = action.expect("reconcile");
    assert_eq!(action, Action::requeue(Duration::from_secs(30)));
    let writes =
        status_writes(&seen).into_iter().filter(|s| s.path.contains("clusterserviceversions")).collect::<Vec<_>>();
    assert_eq!(writes.len(), 1, "{:#?}", lines(&seen));
    let status = &writes[0].body["status"];
    assert_eq!((&status["phase"], &status["reason"]), (&json!("Succeeded"), &json!("InstallSucceeded")));
    let passed: Vec<&Value> =
        status["conditions"].as_array().expect("conditions").iter().map(|c| &c["phase"]).collect();
    assert_eq!(passed, [&json!("Pending"), &json!("InstallReady"), &json!("Succeeded")]);
    let events: Vec<&Value> = seen.iter().filter(|s| s.path == events_path(NS)).map(|s| &s.body["reason"]).collect();
    assert_eq!(
        events,
        [
            &json!("InstallStrategyApplied"),
            &json!("RequirementsUnknown"),
            &json!("AllRequirementsMet"),
            &json!("InstallSucceeded")
        ],
        "the Deployment made on the way from InstallReady, then the phases, in order, once written"
    );
    assert!(seen.iter().any(|s| s.path == oc), "the OperatorCondition is created");
}

/// The same CSV whose OperatorCondition cannot be created (the API server fails the write): the
/// steps are decided, but nothing of the CSV's status is written and the reconcile fails, so the
/// CSV keeps no phase and its next reconcile creates the OperatorCondition again (it is created
/// only on the CSV's first sight; a CSV written Succeeded would never get one).
#[tokio::test]
async fn a_csv_whose_operator_condition_fails_writes_no_phase() {
    let (server, ctx, csv, _) = new_csv_world(Reply::Status(500, "InternalError"));
    let result = super::csv::reconcile(typed::<ClusterServiceVersion>(&csv), ctx).await;
    let seen = server.finish();
    let err = result.expect_err("the OperatorCondition's failure is the reconcile's");
    assert!(err.to_string().contains("OperatorCondition"), "{err}");
    assert!(status_writes(&seen).iter().all(|s| !s.path.contains("clusterserviceversions")), "{:#?}", lines(&seen));
    let events: Vec<&Value> = seen.iter().filter(|s| s.path == events_path(NS)).map(|s| &s.body["reason"]).collect();
    assert_eq!(events, [&json!("InstallStrategyApplied")], "no phase, no Event of one (the apply is idempotent)");
}

/// The world of a new etcd CSV whose requirements are met and whose Deployment is Available, up
/// to its status write: the reads of one reconcile, the RBAC aggregation, and the OperatorCondition
/// PATCH (answered with `condition`) beside them. Returns the server, its context, the CSV and the
/// OperatorCondition's path.
fn new_csv_world(condition: Reply) -> (ApiServer, Arc<super::Context>, Value, String) {
    let (server, ctx) = ApiServer::context();
    let csv = installed_csv(None);
    let csv_path = olm_path("v1alpha1", NS, "clusterserviceversions", "etcd.v0.9.4");
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "etcd-operator", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"name": "etcd-operator"}}, "template": {"spec": {"containers": []}}},
        "status": {"conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]},
    });
    let og = operator_group("og", Some(json!({"namespaces": [NS], "lastUpdated": "2026-01-01T00:00:00Z"})));
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let oc = olm_path("v2", NS, "operatorconditions", "etcd.v0.9.4");
    let og_role = |suffix: &str| crate::install::aggregation::operator_group_cluster_role_name(NS, "og", suffix);
    server
        .expect_beside("PATCH", &oc, condition)
        .expect("GET", &csv_path, Reply::Ok(csv.clone()))
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![og.clone()]))
        // The strategy planned from the CSV, compared with the Deployment (`csv::unit`).
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![og.clone()]))
        .expect(
            "GET",
            &format!("/apis/apps/v1/namespaces/{NS}/deployments/etcd-operator"),
            Reply::Ok(deployment.clone()),
        )
        // Installing (InstallReady): who installs (the group names no ServiceAccount: capstan),
        // the Deployment applied, orphans looked for, an Event.
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![og.clone()]))
        .expect("GET", &olm_path("v1", NS, "operatorgroups", "og"), Reply::Ok(og.clone()))
        .expect(
            "GET",
            &format!("/apis/apps/v1/namespaces/{NS}/deployments/etcd-operator"),
            Reply::Ok(deployment.clone()),
        )
        .expect("PATCH", &format!("/apis/apps/v1/namespaces/{NS}/deployments/etcd-operator"), Reply::Echo)
        .expect(
            "GET",
            &format!("/apis/apps/v1/namespaces/{NS}/deployments"),
            list("DeploymentList", "apps/v1", vec![deployment.clone()]),
        )
        .expect("POST", &events_path(NS), Reply::Echo)
        .expect(
            "GET",
            &format!("/apis/apps/v1/namespaces/{NS}/deployments/etcd-operator"),
            Reply::Ok(deployment.clone()),
        )
        // The RBAC aggregation, before the status says Succeeded (the group provides no API).
        .expect("GET", &olm_path("v1", NS, "operatorgroups", ""), og_list(vec![og.clone()]))
        .expect(
            "GET",
            &olm_path("v1alpha1", NS, "clusterserviceversions", ""),
            list("ClusterServiceVersionList", "operators.coreos.com/v1alpha1", vec![csv.clone()]),
        )
        .expect("GET", &format!("{rbac}/clusterroles/{}", og_role("admin")), Reply::Status(404, "NotFound"))
        .expect_beside("PATCH", &format!("{rbac}/clusterroles/{}", og_role("admin")), Reply::Echo)
        .expect_beside("PATCH", &format!("{rbac}/clusterroles/{}", og_role("edit")), Reply::Echo)
        .expect_beside("PATCH", &format!("{rbac}/clusterroles/{}", og_role("view")), Reply::Echo)
        .expect("GET", &olm_path("v1", NS, "operatorgroups", "og"), Reply::Ok(og.clone()));
    (server, ctx, csv, oc)
}
