//! Webhooks on the real node, through the controller: capstan's test operator
//! (`images/webhook-operator`, bundle `tests/fixtures/webhook-operator`) is published in a
//! catalog and installed by a Subscription (its pod pinned to the real node by `spec.config`);
//! the CSV is Succeeded only once the webhook's pod serves.
//!
//! One scenario per test, each with an install of its own in a namespace of its own:
//! - the API server calls the webhooks over TLS with the certificate capstan issued: a Widget the
//!   validating webhook rejects is rejected with its message, a valid one is stored, one written
//!   as `v1alpha1` is read back as `v1` through the conversion webhook;
//! - rotation by the controller (`CAPSTAN_CERT_VALIDITY` 60 s: due after 45 s; a new CA in the
//!   Secret, the webhook configuration and the Deployment, writes keep working);
//! - removal by deleting the Subscription and CSV (the webhook configuration is deleted before the
//!   Deployment, seen by a watch, so writes never fail on a webhook that points at nothing);
//! - the failure case (a Deployment that never becomes ready: writes blocked, the CSV not
//!   Succeeded and naming both webhooks, removal unblocks writes);
//! - an upgrade to the next version while Widgets are written (Manual approval): every write is
//!   validated and none fails during the handover; the webhook configuration and the certificate
//!   are taken over.
//!
//! The first four share one controller ([`fixture`], certificates valid for 60 s) and its
//! catalogs. The operator's CRD is cluster-scoped and its conversion webhook needs an
//! AllNamespaces OperatorGroup, so two installs of it cannot coexist: those tests take turns
//! ([`WebhookFixture::one_install`]), whatever their order. The upgrade runs under a controller
//! of its own with the default certificate validity (a rotation during the upgrade would change
//! the certificate it checks is kept), in a group of its own ([`UPGRADE_GROUP`]), so that the two
//! controllers never watch the cluster at the same time.
//!
//! Needs an environment WITH the real node (`tests/cluster/up.sh all` as the node's owner;
//! `CAPSTAN_CLUSTER_DIR` names it, default `.cluster`). Each test removes what its install made
//! (also when it fails) and, when it passed, checks that nothing of it is left outside its
//! namespace.

use std::future::Future;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::controller::{ControllerFixture, capstan, create, namespace_with_global_group};
use crate::support::eventually;
use crate::support::group::PerGroup;
use crate::support::node::{REAL_NODE, real_node};
use capstan::api::{CatalogSource, ClusterServiceVersion, Subscription};
use capstan::install::certs::ANNOTATION_CA_HASH;
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const GROUP: &str = "node_webhook_e2e";
/// The group of the upgrade test, which runs its own controller.
const UPGRADE_GROUP: &str = "node_webhook_e2e_upgrade";

const PLACEHOLDER_IMAGE: &str = "capstan.invalid/capstan/webhook-operator:v1";
const CRD: &str = "widgets.webhook.capstan.dev";
const CSV: &str = "webhook-operator.v0.1.0";
const CSV_NEXT: &str = "webhook-operator.v0.2.0";

static FIXTURE: PerGroup<WebhookFixture> = PerGroup::new(GROUP);

/// The controller of the tests of [`GROUP`] and its catalogs.
struct WebhookFixture {
    /// The controller (certificates valid for 60 s, rotation due after 45 s), with the CatalogSources
    /// `webhooks` (the operator) and `never-ready` (its Deployment never becomes ready) in its
    /// global catalog namespace.
    controller: ControllerFixture,
    /// Held by a test for its whole install: one install of the operator at a time.
    one_install: tokio::sync::Mutex<()>,
}

async fn fixture() -> Arc<WebhookFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            real_node();
            let options = capstan::controller::Options {
                catalog_cache: None,
                cert_validity: Some(Duration::from_secs(60)),
                ..Default::default()
            };
            let repo = format!("wh-e2e-{}", std::process::id());
            let controller = ControllerFixture::start(&client, &repo, "wh-e2e-catalog", options).await;
            let image = operator_image(&controller.registry, controller.work.path());
            webhook_catalog(&client, &controller, &image, "webhooks", &[], &["0.1.0"]).await;
            webhook_catalog(&client, &controller, &image, "never-ready", &["-never-ready"], &["0.1.0"]).await;
            WebhookFixture { controller, one_install: tokio::sync::Mutex::new(()) }
        })
        .await
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds and pushes the test operator image; its reference with digest.
fn operator_image(registry: &str, work: &Path) -> String {
    let out = run(Command::new("bash")
        .arg(crate::support::repo_root().join("images/build.sh"))
        .args(["--push", registry, "webhook-operator"])
        .env("CAPSTAN_CLUSTER_DIR", work));
    out.lines().find_map(|l| l.strip_prefix("webhook-operator ")).expect("image line").trim().to_string()
}

/// The fixture bundle with the image (and extra container args) set, published as bundle
/// images in a catalog of its own, one per version: `0.1.0` is the fixture; a later version is the same
/// operator with its CSV renamed and `replaces` the one before (the next version of a package
/// that changes nothing of its webhooks), so the catalog's channel upgrades along them.
fn publish_versions(registry: &str, repo: &str, image: &str, args: &[&str], versions: &[&str], work: &Path) -> String {
    let src = crate::support::repo_root().join("tests/fixtures/webhook-operator/0.1.0");
    let catalog = work.join(format!("{repo}-catalog"));
    let mut previous: Option<&str> = None;
    for version in versions {
        let dir = work.join(format!("{repo}-bundle-{version}"));
        for sub in ["manifests", "metadata"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
            for e in std::fs::read_dir(src.join(sub)).unwrap().flatten() {
                let mut text = std::fs::read_to_string(e.path()).unwrap().replace(PLACEHOLDER_IMAGE, image);
                if !args.is_empty() {
                    text = text.replace(
                        "                image: ",
                        &format!("                args: {args:?}\n                image: "),
                    );
                }
                if let Some(prev) = previous {
                    text = text
                        .replace("  name: webhook-operator.v0.1.0", &format!("  name: webhook-operator.v{version}"))
                        .replace(
                            "  version: 0.1.0",
                            &format!("  version: {version}\n  replaces: webhook-operator.v{prev}"),
                        );
                }
                std::fs::write(dir.join(sub).join(e.file_name()), text).unwrap();
            }
        }
        let bundle_ref = format!("{registry}/{repo}/webhook-operator-bundle:v{version}");
        capstan(&["bundle", "push", "-q", dir.to_str().unwrap(), &bundle_ref]);
        capstan(&["catalog", "add", "--mode", "replaces", catalog.to_str().unwrap(), &bundle_ref]);
        previous = Some(version);
    }
    let catalog_ref = format!("{registry}/{repo}/catalog:latest");
    capstan(&["catalog", "push", "-q", catalog.to_str().unwrap(), &catalog_ref]);
    catalog_ref
}

/// Publishes `versions` of the operator with `image` and container `args` ([`publish_versions`])
/// and creates CatalogSource `name` for them in the controller's global catalog namespace.
async fn webhook_catalog(
    client: &kube::Client,
    f: &ControllerFixture,
    image: &str,
    name: &str,
    args: &[&str],
    versions: &[&str],
) {
    let repo = format!("{}-{name}", f.repo);
    let catalog_ref = publish_versions(&f.registry, &repo, image, args, versions, f.work.path());
    let catalog_ns = &f.catalog_ns.name;
    create::<CatalogSource>(client, catalog_ns, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource", "metadata": {"name": name, "namespace": catalog_ns},
        "spec": {"sourceType": "grpc", "image": catalog_ref}
    }))
    .await;
}

/// A Subscription to webhook-operator from `source` in `ns` (which has an all-namespaces
/// OperatorGroup: conversion webhooks need it), its pod on the real node.
async fn subscribe(client: &kube::Client, ns: &str, source: &str, catalog_ns: &str) {
    subscribe_with(client, ns, source, catalog_ns, json!({"installPlanApproval": "Automatic"})).await;
}

/// [`subscribe`] with more `spec` fields (`installPlanApproval`, `startingCSV`).
async fn subscribe_with(client: &kube::Client, ns: &str, source: &str, catalog_ns: &str, extra: Value) {
    let mut sub = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "webhook-operator", "namespace": ns},
        "spec": {"name": "webhook-operator", "channel": "alpha", "source": source, "sourceNamespace": catalog_ns,
                 "config": {"nodeSelector": {"type": "real"}, "tolerations": [{"key": "capstan.dev/node", "operator": "Equal", "value": "real", "effect": "NoSchedule"}]}}
    });
    if let (Some(spec), Some(more)) = (sub["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(more.clone());
    }
    create::<Subscription>(client, ns, sub).await;
}

/// Approves the Subscription's InstallPlan that installs `csv`, once it waits for approval.
async fn approve(client: &kube::Client, ns: &str, csv: &str) {
    let plans: Api<capstan::api::InstallPlan> = Api::namespaced(client.clone(), ns);
    let name = eventually(&format!("InstallPlan for {csv} waiting for approval"), Duration::from_secs(120), || async {
        let list = plans.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|p| p.spec.cluster_service_version_names.iter().any(|n| n == csv) && !p.spec.approved)
            .map(|p| p.metadata.name.unwrap_or_default())
    })
    .await;
    plans
        .patch(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(json!({"spec": {"approved": true}})))
        .await
        .expect("approve");
}

/// The CSV of `ns` once its status satisfies `f`.
async fn csv_when(client: &kube::Client, ns: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    csv_named_when(client, ns, CSV, what, f).await
}

/// CSV `csv` of `ns` once its status satisfies `f`.
async fn csv_named_when(client: &kube::Client, ns: &str, csv: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    eventually(what, Duration::from_secs(180), || async {
        let st = serde_json::to_value(csvs.get_opt(csv).await.ok()??.status?).ok()?;
        f(&st).then_some(st)
    })
    .await
}

/// Deletes the Subscription, then the CSV (as `kubectl operator uninstall`); waits until the
/// CSV is gone.
async fn uninstall(client: &kube::Client, ns: &str) {
    let _ =
        Api::<Subscription>::namespaced(client.clone(), ns).delete("webhook-operator", &DeleteParams::default()).await;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let _ = csvs.delete(CSV, &DeleteParams::default()).await;
    eventually(&format!("CSV {ns}/{CSV} removed"), Duration::from_secs(120), || async {
        csvs.get_opt(CSV).await.ok()?.is_none().then_some(())
    })
    .await;
}

async fn available(client: &kube::Client, ns: &str, name: &str) -> bool {
    let d = Api::<Deployment>::namespaced(client.clone(), ns).get_opt(name).await.ok().flatten();
    d.and_then(|d| d.status)
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Available" && c.status == "True")
        && Api::<Deployment>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .ok()
            .and_then(|d| d.status)
            .is_some_and(|s| s.updated_replicas == s.replicas && s.unavailable_replicas.unwrap_or(0) == 0)
}

fn widgets(client: &kube::Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("webhook.capstan.dev", version, "Widget"), "widgets");
    Api::namespaced_with(client.clone(), ns, &ar)
}

async fn create_widget(
    client: &kube::Client,
    ns: &str,
    version: &str,
    name: &str,
    spec: Value,
) -> Result<DynamicObject, kube::Error> {
    let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("webhook.capstan.dev/{version}"), "kind": "Widget", "metadata": {"name": name}, "spec": spec})).unwrap();
    widgets(client, ns, version).create(&PostParams::default(), &obj).await
}

/// The CA hash annotation of the webhook's certificate Secret in `ns`.
async fn secret_ca_hash(client: &kube::Client, ns: &str) -> String {
    Api::<Secret>::namespaced(client.clone(), ns)
        .get("webhook-operator-service-cert")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default()[ANNOTATION_CA_HASH]
        .clone()
}

/// Runs `scenario` for the install in `ns`, then deletes everything the install made ([`cleanup`],
/// also when the scenario failed) and, when it passed, checks that nothing of it is left outside
/// `ns` ([`nothing_left_outside`]).
async fn with_cleanup(client: &kube::Client, ns: &str, scenario: impl Future<Output = ()>) {
    let result = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(scenario)).await;
    cleanup(client, ns).await;
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
    nothing_left_outside(client, ns).await;
}

/// Everything the install made, its namespace included, deleted (by the controller's removal
/// while it runs, then whatever a failed test left).
async fn cleanup(client: &kube::Client, ns: &str) {
    uninstall(client, ns).await;
    let _ = Api::<CustomResourceDefinition>::all(client.clone()).delete(CRD, &DeleteParams::default()).await;
    let _ = Api::<Namespace>::all(client.clone()).delete(ns, &DeleteParams::default()).await;
    let sel = ListParams::default().labels(&format!("olm.owner.namespace={ns}"));
    let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete_collection(&DeleteParams::default(), &sel)
        .await;
    let _ = Api::<ClusterRoleBinding>::all(client.clone()).delete_collection(&DeleteParams::default(), &sel).await;
    let _ = Api::<ClusterRole>::all(client.clone()).delete_collection(&DeleteParams::default(), &sel).await;
    eventually(&format!("CRD {CRD} gone"), Duration::from_secs(60), || async {
        Api::<CustomResourceDefinition>::all(client.clone()).get_opt(CRD).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// Nothing of the install in `ns` is left outside it: no webhook configuration, no
/// ClusterRoleBinding, no subject of `ns` in the shared auth-reader RoleBinding in `kube-system`.
async fn nothing_left_outside(client: &kube::Client, ns: &str) {
    let sel = ListParams::default().labels(&format!("olm.owner.namespace={ns}"));
    assert!(Api::<ValidatingWebhookConfiguration>::all(client.clone()).list(&sel).await.unwrap().items.is_empty());
    assert!(Api::<ClusterRoleBinding>::all(client.clone()).list(&sel).await.unwrap().items.is_empty());
    let rb = Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
        .get_opt("webhook-operator-service-auth-reader")
        .await
        .unwrap();
    assert!(
        rb.is_none_or(|rb| { !rb.subjects.unwrap_or_default().iter().any(|s| s.namespace.as_deref() == Some(ns)) })
    );
}

/// Installs the operator in `ns` from CatalogSource `webhooks`: the CSV Succeeded, its
/// Deployment available, its pod on the real node, and a valid Widget `small` stored once the
/// API server reaches the webhook.
async fn installed_and_serving(client: &kube::Client, ns: &str, catalog_ns: &str) {
    subscribe(client, ns, "webhooks", catalog_ns).await;
    csv_when(client, ns, "CSV Succeeded with its webhook served on the real node", |st| st["phase"] == "Succeeded")
        .await;
    assert!(available(client, ns, "webhook-operator").await);
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels("app=webhook-operator"))
        .await
        .unwrap();
    assert!(
        pods.items.iter().all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(REAL_NODE)),
        "the pod runs on the real node"
    );
    eventually("a valid Widget stored", Duration::from_secs(120), || async {
        create_widget(client, ns, "v1", "small", json!({"replicas": 3}))
            .await
            .map_err(|e| eprintln!("create Widget small: {e}"))
            .ok()
    })
    .await;
}

/// Installed from the catalog by a Subscription, the operator runs on the real node and the API
/// server calls its webhooks over TLS with the certificate capstan issued: a Widget over the limit
/// is rejected with the webhook's message (as `v1` and as `v1alpha1`), a valid one is stored, and
/// one written as `v1alpha1` is read back as `v1` (and the other way) through the conversion
/// webhook.
#[test]
fn installed_operator_validates_and_converts_widgets_over_tls() {
    crate::support::run(GROUP, 2, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let _turn = f.one_install.lock().await;
        let ns = namespace_with_global_group(&client, "wh-e2e-serve").await;
        let ns = ns.name.as_str();
        with_cleanup(&client, ns, async {
            installed_and_serving(&client, ns, &f.controller.catalog_ns.name).await;
            let err = create_widget(&client, ns, "v1", "too-big", json!({"replicas": 11}))
                .await
                .expect_err("rejected by the validating webhook");
            assert!(err.to_string().contains("widget too-big: replicas 11 is over the limit of 10"), "{err}");
            let old =
                create_widget(&client, ns, "v1alpha1", "old", json!({"size": 4})).await.expect("a v1alpha1 Widget");
            assert_eq!(old.data["spec"], json!({"size": 4}));
            let as_v1 = widgets(&client, ns, "v1").get("old").await.expect("read as v1");
            assert_eq!(as_v1.data["spec"], json!({"replicas": 4}), "converted by the webhook");
            let as_old = widgets(&client, ns, "v1alpha1").get("small").await.expect("read as v1alpha1");
            assert_eq!(as_old.data["spec"], json!({"size": 3}));
            let err = create_widget(&client, ns, "v1alpha1", "old-too-big", json!({"size": 12}))
                .await
                .expect_err("v1alpha1 validated too");
            assert!(err.to_string().contains("replicas 12 is over the limit"), "{err}");
        })
        .await;
    })
}

/// The controller rotates the certificate at `certsRotateAt` (60 s validity: after 45 s): a new
/// CA in the Secret, then in the Deployment and the webhook configuration, `certsRotateAt` moves
/// on, the Deployment rolls out, and writes keep working and being validated.
#[test]
fn controller_rotates_the_certificate_and_writes_keep_working() {
    crate::support::run(GROUP, 2, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let _turn = f.one_install.lock().await;
        let ns = namespace_with_global_group(&client, "wh-e2e-rotate").await;
        let ns = ns.name.as_str();
        with_cleanup(&client, ns, async {
            installed_and_serving(&client, ns, &f.controller.catalog_ns.name).await;
            let second = rotated_ca(&client, ns).await;
            new_ca_in_deployment_and_webhook(&client, ns, &second).await;
            eventually("rolled out with the new certificate", Duration::from_secs(120), || async {
                available(&client, ns, "webhook-operator").await.then_some(())
            })
            .await;
            eventually("writes work with the rotated certificate", Duration::from_secs(60), || async {
                create_widget(&client, ns, "v1alpha1", "after-rotation", json!({"size": 5})).await.ok()
            })
            .await;
            let err = create_widget(&client, ns, "v1", "too-big-2", json!({"replicas": 20}))
                .await
                .expect_err("still validated");
            assert!(err.to_string().contains("over the limit"), "{err}");
        })
        .await;
    })
}

/// The CA hash of the certificate Secret in `ns` once the controller has replaced the one there
/// now, after `certsRotateAt` appeared in the CSV status; waits until `certsRotateAt` moved on.
async fn rotated_ca(client: &kube::Client, ns: &str) -> String {
    let secret_hash =
        |s: Secret| s.metadata.annotations.unwrap_or_default().get(ANNOTATION_CA_HASH).cloned().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let first = secret_hash(secrets.get("webhook-operator-service-cert").await.unwrap());
    let st = csv_when(client, ns, "certsRotateAt in the CSV status", |st| st["certsRotateAt"].is_string()).await;
    let first_rotate_at = st["certsRotateAt"].clone();
    let second = eventually("a new CA after the rotation time", Duration::from_secs(120), || async {
        let h = secret_hash(secrets.get("webhook-operator-service-cert").await.ok()?);
        (h != first).then_some(h)
    })
    .await;
    csv_when(client, ns, "certsRotateAt moved on", |st| {
        st["certsRotateAt"].is_string() && st["certsRotateAt"] != first_rotate_at
    })
    .await;
    second
}

/// Waits until the Deployment's pod template and the webhook configuration's CA bundle carry the
/// CA whose hash is `hash`.
async fn new_ca_in_deployment_and_webhook(client: &kube::Client, ns: &str, hash: &str) {
    eventually("the new CA in the Deployment and the webhook configuration", Duration::from_secs(60), || async {
        let dep = Api::<Deployment>::namespaced(client.clone(), ns).get("webhook-operator").await.ok()?;
        let dep_hash = dep.spec?.template.metadata?.annotations?.get(ANNOTATION_CA_HASH)?.clone();
        let vwc = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .list(&ListParams::default().labels(&format!("olm.owner={CSV},olm.owner.namespace={ns}")))
            .await
            .ok()?;
        let ca = vwc.items.first()?.webhooks.as_ref()?.first()?.client_config.ca_bundle.clone()?;
        (dep_hash == hash && capstan::install::certs::ca_hash(std::str::from_utf8(&ca.0).ok()?) == hash).then_some(())
    })
    .await;
}

/// Removal by deleting the Subscription and the CSV: the webhook configuration goes before the
/// Deployment (a watch sees the order), the CRD's conversion is reset, and writes and reads work
/// without a webhook that points at nothing.
#[test]
fn removal_deletes_the_webhook_configuration_before_the_deployment() {
    crate::support::run(GROUP, 2, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let _turn = f.one_install.lock().await;
        let ns = namespace_with_global_group(&client, "wh-e2e-remove").await;
        let ns = ns.name.as_str();
        with_cleanup(&client, ns, async {
            installed_and_serving(&client, ns, &f.controller.catalog_ns.name).await;
            let order = deletions_during_uninstall(&client, ns).await;
            assert_eq!(
                order,
                ["ValidatingWebhookConfiguration", "Deployment"],
                "the webhook goes before the Deployment"
            );
            let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(CRD).await.unwrap();
            assert_eq!(crd.spec.conversion.map(|c| c.strategy), Some("None".into()), "conversion reset");
            create_widget(&client, ns, "v1", "no-webhook-left", json!({"replicas": 50}))
                .await
                .expect("writes do not hit a webhook that points at nothing");
            widgets(&client, ns, "v1")
                .list(&ListParams::default())
                .await
                .expect("reads work without the conversion webhook");
        })
        .await;
    })
}

/// The kinds of the CSV's ValidatingWebhookConfiguration and Deployment in the order a watch
/// sees them deleted by [`uninstall`].
async fn deletions_during_uninstall(client: &kube::Client, ns: &str) -> Vec<String> {
    let order = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let watch = |kind: &'static str| {
        let order = order.clone();
        let client = client.clone();
        let ns = ns.to_string();
        tokio::spawn(async move {
            use kube::runtime::watcher::{self, Event};
            let cfg = watcher::Config::default().labels(&format!("olm.owner={CSV},olm.owner.namespace={ns}"));
            let note = |e: Event<DynamicObject>| {
                if let Event::Delete(_) = e {
                    order.lock().unwrap().push(kind.to_string());
                }
            };
            let ar = match kind {
                "ValidatingWebhookConfiguration" => ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
                    "validatingwebhookconfigurations",
                ),
                _ => ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", kind), "deployments"),
            };
            let api: Api<DynamicObject> =
                if kind == "Deployment" { Api::namespaced_with(client, &ns, &ar) } else { Api::all_with(client, &ar) };
            let mut s = std::pin::pin!(watcher::watcher(api, cfg));
            while let Some(Ok(e)) = s.next().await {
                note(e);
            }
        })
    };
    let watchers = [watch("ValidatingWebhookConfiguration"), watch("Deployment")];
    tokio::time::sleep(Duration::from_secs(2)).await;
    uninstall(client, ns).await;
    eventually("both deletions seen", Duration::from_secs(60), || async {
        (order.lock().unwrap().len() >= 2).then_some(())
    })
    .await;
    for w in watchers {
        w.abort();
    }
    order.lock().unwrap().clone()
}

/// What the CSV status says of the validating webhook while its Deployment is not available.
const VALIDATING_NOT_SERVED: &str = "webhook vwidgets.webhook.capstan.dev (ValidatingAdmissionWebhook) is served by \
                                     Deployment webhook-operator, which is not available";

/// A Deployment that never becomes ready: its pod runs, the CSV is not Succeeded and names both
/// webhooks that cannot be served, writes fail on the webhook, and removing the operator unblocks
/// them.
#[test]
fn never_ready_deployment_blocks_writes_until_the_operator_is_removed() {
    crate::support::run(GROUP, 2, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let _turn = f.one_install.lock().await;
        let ns = namespace_with_global_group(&client, "wh-e2e-fail").await;
        let ns = ns.name.as_str();
        with_cleanup(&client, ns, async {
            subscribe(&client, ns, "never-ready", &f.controller.catalog_ns.name).await;
            eventually("the never-ready pod running", Duration::from_secs(120), || async {
                let pods = Api::<Pod>::namespaced(client.clone(), ns)
                    .list(&ListParams::default().labels("app=webhook-operator"))
                    .await
                    .ok()?;
                pods.items
                    .iter()
                    .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                    .then_some(())
            })
            .await;
            let st = csv_when(&client, ns, "the CSV naming the webhooks that cannot be served", |st| {
                let m = st["message"].as_str().unwrap_or_default();
                m.contains(VALIDATING_NOT_SERVED)
                    && m.contains("webhook cwidgets.webhook.capstan.dev (ConversionWebhook)")
            })
            .await;
            assert_ne!(st["phase"], "Succeeded", "{st}");
            let err = create_widget(&client, ns, "v1", "blocked", json!({"replicas": 1}))
                .await
                .expect_err("writes fail while the webhook cannot be served");
            assert!(
                err.to_string().contains("failed calling webhook")
                    || err.to_string().contains("vwidgets.webhook.capstan.dev"),
                "{err}"
            );
            uninstall(&client, ns).await;
            create_widget(&client, ns, "v1", "unblocked", json!({"replicas": 1}))
                .await
                .expect("removal unblocks writes");
        })
        .await;
    })
}

/// Upgrade 0.1.0 → 0.2.0 (Manual approval) while Widgets are written: the next CSV takes over the
/// same webhook configuration, Service and certificate, so every write is stored or rejected by
/// the webhook and none fails during the handover. Under a controller of its own with the default
/// certificate validity, in [`UPGRADE_GROUP`].
#[test]
fn upgrade_while_widgets_are_written_validates_every_write_and_keeps_the_certificate() {
    crate::support::run(UPGRADE_GROUP, 2, async {
        let client = crate::support::cluster().await;
        real_node();
        let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
        let repo = format!("wh-e2e-upgrade-{}", std::process::id());
        let f = ControllerFixture::start(&client, &repo, "wh-e2e-upgrade-catalog", options).await;
        let image = operator_image(&f.registry, f.work.path());
        webhook_catalog(&client, &f, &image, "upgrade", &[], &["0.1.0", "0.2.0"]).await;
        let ns = namespace_with_global_group(&client, "wh-e2e-upgrade").await;
        let ns = ns.name.as_str();
        with_cleanup(&client, ns, async {
            let extra = json!({"installPlanApproval": "Manual", "startingCSV": CSV});
            subscribe_with(&client, ns, "upgrade", &f.catalog_ns.name, extra).await;
            approve(&client, ns, CSV).await;
            csv_when(&client, ns, "0.1.0 Succeeded", |st| st["phase"] == "Succeeded").await;
            eventually("the webhook serves", Duration::from_secs(120), || async {
                create_widget(&client, ns, "v1", "first", json!({"replicas": 1})).await.ok()
            })
            .await;
            let ca_before = secret_ca_hash(&client, ns).await;
            let (ok, failed) = writes_during_upgrade(&client, ns).await;
            assert!(
                ok >= 5 && failed.is_empty(),
                "{ok} writes stored; failed or unvalidated during the upgrade: {failed:?}"
            );
            let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .list(&ListParams::default().labels(&format!("olm.owner.namespace={ns}")))
                .await
                .unwrap();
            assert_eq!(vwcs.items.len(), 1, "one webhook configuration, taken over");
            assert_eq!(vwcs.items[0].metadata.labels.as_ref().unwrap()["olm.owner"], CSV_NEXT);
            assert_eq!(ca_before, secret_ca_hash(&client, ns).await, "the certificate is kept across the upgrade");
            remove_next(&client, ns).await;
        })
        .await;
    })
}

/// Writes Widgets (a valid one and one over the limit, every 200 ms) while 0.2.0 is approved and
/// replaces 0.1.0; the number of valid writes stored and every failed or unvalidated write.
async fn writes_during_upgrade(client: &kube::Client, ns: &str) -> (u32, Vec<String>) {
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (client, ns, stop) = (client.clone(), ns.to_string(), stop.clone());
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                match create_widget(&client, &ns, "v1", &format!("w{i}"), json!({"replicas": 2})).await {
                    Ok(_) => ok += 1,
                    Err(e) => failed.push(e.to_string()),
                }
                let too_big = create_widget(&client, &ns, "v1", &format!("big{i}"), json!({"replicas": 99})).await;
                if too_big.is_ok() {
                    failed.push(format!("big{i} was stored: no webhook validated it"));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            (ok, failed)
        })
    };
    approve(client, ns, CSV_NEXT).await;
    csv_named_when(client, ns, CSV_NEXT, "0.2.0 Succeeded", |st| st["phase"] == "Succeeded").await;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    eventually("0.1.0 deleted after the upgrade", Duration::from_secs(120), || async {
        csvs.get_opt(CSV).await.ok()?.is_none().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap()
}

/// Deletes the Subscription and the upgraded CSV; waits until that CSV is gone.
async fn remove_next(client: &kube::Client, ns: &str) {
    let _ =
        Api::<Subscription>::namespaced(client.clone(), ns).delete("webhook-operator", &DeleteParams::default()).await;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let _ = csvs.delete(CSV_NEXT, &DeleteParams::default()).await;
    eventually("0.2.0 removed", Duration::from_secs(120), || async {
        csvs.get_opt(CSV_NEXT).await.ok()?.is_none().then_some(())
    })
    .await;
}
