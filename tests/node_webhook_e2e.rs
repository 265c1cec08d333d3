//! Webhooks on the real node (issue 14): capstan's test operator (`images/webhook-operator`,
//! bundle `tests/fixtures/webhook-operator`) is published in a catalog, its bundle pulled from
//! that catalog, planned and applied by `capstan::install`, and its pod runs on the real node
//! with the certificate capstan issued. The API server calls it over TLS: a Widget the
//! validating webhook rejects is rejected with its message, a valid one is stored, one written
//! as `v1alpha1` is read back as `v1` through the conversion webhook. Then rotation (a 60 s
//! validity: the next apply after the rotation time issues a new CA everywhere and writes keep
//! working), removal (webhook configurations and CRD conversion go before the Deployment, so
//! writes never fail on a webhook that points at nothing), and the failure case (a Deployment
//! that never becomes ready: writes blocked, [`webhook::unavailable`] names the webhook, removal
//! unblocks them).
//!
//! Needs a running environment WITH the real node (`tests/cluster/up.sh all` as the node's
//! owner); it never starts or stops one: `CAPSTAN_CLUSTER_DIR` names it (default `.cluster`).
//! It uses its own namespaces and removes everything it created. The controller is not run here
//! (it would reconcile every namespace of a shared environment); the install is the one the
//! controller's InstallPlan applies (`install::steps` + `install::apply`).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use capstan::bundle::Bundle;
use capstan::install::certs::ANNOTATION_CA_HASH;
use capstan::install::webhook::{self, Definitions};
use capstan::install::{self, ApplyOptions, InstallTarget, SubscriptionConfig};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, Toleration};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use support::eventually;

const PLACEHOLDER_IMAGE: &str = "capstan.invalid/capstan/webhook-operator:v1";
const CRD: &str = "widgets.webhook.capstan.dev";

fn state() -> PathBuf {
    support::state_dir()
}

/// An admin client of the running environment, or a panic saying what is missing (no up.sh:
/// the environment may be another worktree's).
async fn client() -> kube::Client {
    let dir = state();
    let node = dir.join("node-name");
    assert!(node.is_file(), "{} has no real node ({} is missing); start the environment that owns it", dir.display(), node.display());
    let kc = kube::config::Kubeconfig::read_from(dir.join("kubeconfig")).expect("kubeconfig of the running environment");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.expect("kubeconfig");
    kube::Client::try_from(cfg).expect("client")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(out.status.success(), "{cmd:?} failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn capstan(args: &[&str]) -> String {
    run(Command::new(env!("CARGO_BIN_EXE_capstan")).args(args))
}

/// Builds and pushes the test operator image; its reference with digest.
fn operator_image(registry: &str, work: &Path) -> String {
    let out = run(Command::new("bash")
        .arg(support::repo_root().join("images/build.sh"))
        .args(["--push", registry, "webhook-operator"])
        .env("CAPSTAN_CLUSTER_DIR", work));
    out.lines().find_map(|l| l.strip_prefix("webhook-operator ")).expect("image line").trim().to_string()
}

/// The fixture bundle with the image (and extra container args) set, published as a bundle
/// image in a catalog; then pulled back through the catalog. Returns the pulled bundle.
fn publish_and_pull(registry: &str, repo: &str, image: &str, args: &[&str], work: &Path) -> Bundle {
    let src = support::repo_root().join("tests/fixtures/webhook-operator/0.1.0");
    let dir = work.join(format!("{repo}-bundle"));
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap().flatten() {
            let mut text = std::fs::read_to_string(e.path()).unwrap().replace(PLACEHOLDER_IMAGE, image);
            if !args.is_empty() {
                text = text.replace("                image: ", &format!("                args: {args:?}\n                image: "));
            }
            std::fs::write(dir.join(sub).join(e.file_name()), text).unwrap();
        }
    }
    let bundle_ref = format!("{registry}/{repo}/webhook-operator-bundle:v0.1.0");
    capstan(&["bundle", "push", "-q", dir.to_str().unwrap(), &bundle_ref]);
    let catalog = work.join(format!("{repo}-catalog"));
    capstan(&["catalog", "add", catalog.to_str().unwrap(), &bundle_ref]);
    let catalog_ref = format!("{registry}/{repo}/catalog:latest");
    capstan(&["catalog", "push", "-q", catalog.to_str().unwrap(), &catalog_ref]);
    // Install from the catalog: its olm.bundle names the bundle image.
    let rendered = capstan(&["catalog", "render", &catalog_ref, "-o", "json"]);
    let image = serde_json::Deserializer::from_str(&rendered)
        .into_iter::<Value>()
        .flatten()
        .find(|b| b["schema"] == "olm.bundle" && b["package"] == "webhook-operator")
        .and_then(|b| b["image"].as_str().map(str::to_string))
        .expect("the catalog's webhook-operator bundle");
    let pulled = work.join(format!("{repo}-pulled"));
    capstan(&["bundle", "pull", &image, pulled.to_str().unwrap()]);
    Bundle::load(&pulled).expect("pulled bundle")
}

fn target(b: &Bundle, ns: &str) -> InstallTarget {
    let config = SubscriptionConfig {
        node_selector: Some([("type".to_string(), "real".to_string())].into()),
        tolerations: Some(vec![Toleration { key: Some("capstan.dev/node".into()), operator: Some("Equal".into()), value: Some("real".into()), effect: Some("NoSchedule".into()), ..Default::default() }]),
        ..Default::default()
    };
    let mut t = InstallTarget { namespace: ns.into(), target_namespaces: vec!["".into()], package: b.package().into(), csv_name: b.name().into(), config, ..Default::default() };
    t.owner = Some(t.csv_owner_reference());
    t
}

async fn install(client: &kube::Client, b: &Bundle, ns: &str, opts: &ApplyOptions) -> Vec<install::Step> {
    // Without the CSV object (and so without ownerReferences): a controller of the shared
    // environment would otherwise take the CSV for one of its own installs.
    let mut t = target(b, ns);
    t.owner = None;
    let steps: Vec<install::Step> = install::steps(b, &t).expect("plan").into_iter().filter(|s| s.kind != "ClusterServiceVersion").collect();
    let results = install::apply(client, &steps, opts).await;
    for r in &results {
        assert!(r.applied(), "{r}");
    }
    steps
}

async fn available(client: &kube::Client, ns: &str, name: &str) -> bool {
    let d = Api::<Deployment>::namespaced(client.clone(), ns).get_opt(name).await.ok().flatten();
    d.and_then(|d| d.status).and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| c.type_ == "Available" && c.status == "True")
        && Api::<Deployment>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .ok()
            .and_then(|d| d.status)
            .is_some_and(|s| s.updated_replicas == s.replicas && s.unavailable_replicas.unwrap_or(0) == 0)
}

fn widgets(client: &kube::Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("webhook.capstan.dev", version, "Widget"), "widgets");
    Api::namespaced_with(client.clone(), ns, &ar)
}

async fn create_widget(client: &kube::Client, ns: &str, version: &str, name: &str, spec: Value) -> Result<DynamicObject, kube::Error> {
    let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": format!("webhook.capstan.dev/{version}"), "kind": "Widget", "metadata": {"name": name}, "spec": spec})).unwrap();
    widgets(client, ns, version).create(&PostParams::default(), &obj).await
}

async fn namespace(client: &kube::Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap();
}

/// Everything the install made outside its namespace, plus the namespace, deleted.
async fn cleanup(client: &kube::Client, ns: &str, csv: &str, defs: &Definitions) {
    let _ = webhook::remove(client, csv, ns, defs).await;
    let _ = Api::<CustomResourceDefinition>::all(client.clone()).delete(CRD, &DeleteParams::default()).await;
    let _ = Api::<Namespace>::all(client.clone()).delete(ns, &DeleteParams::default()).await;
    let sel = ListParams::default().labels(&format!("olm.owner.namespace={ns}"));
    let _ = Api::<ClusterRoleBinding>::all(client.clone()).delete_collection(&DeleteParams::default(), &sel).await;
    let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(client.clone()).delete_collection(&DeleteParams::default(), &sel).await;
    eventually(&format!("CRD {CRD} gone"), Duration::from_secs(60), || async {
        Api::<CustomResourceDefinition>::all(client.clone()).get_opt(CRD).await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_operator_on_the_real_node() {
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter("capstan=info").try_init();
    let client = client().await;
    let registry = std::fs::read_to_string(state().join("registry")).expect("registry").trim().to_string();
    let work = tempfile::tempdir().unwrap();
    let image = operator_image(&registry, work.path());
    let suffix = std::process::id();
    let ns = format!("wh-e2e-{suffix}");

    // ---- install from the catalog, with a 60 s certificate validity (rotation below)
    let b = publish_and_pull(&registry, &format!("wh-e2e-{suffix}"), &image, &[], work.path());
    let defs = Definitions::read(b.csv().value()).unwrap();
    let csv = b.name().to_string();
    namespace(&client, &ns).await;
    let short = ApplyOptions { cert_validity: Duration::from_secs(60), ..Default::default() };
    let result = std::panic::AssertUnwindSafe(async {
        let t0 = tokio::time::Instant::now();
        install(&client, &b, &ns, &short).await;
        eventually("webhook-operator Available on the real node", Duration::from_secs(120), || async { available(&client, &ns, "webhook-operator").await.then_some(()) }).await;
        let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), &ns).list(&ListParams::default().labels("app=webhook-operator")).await.unwrap();
        assert!(pods.items.iter().all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("capstan-node")), "the pod runs on the real node");

        // ---- the API server calls the webhooks over TLS with capstan's certificate
        eventually("a valid Widget stored", Duration::from_secs(120), || async {
            create_widget(&client, &ns, "v1", "small", json!({"replicas": 3})).await.map_err(|e| eprintln!("create Widget small: {e}")).ok()
        })
        .await;
        let err = create_widget(&client, &ns, "v1", "too-big", json!({"replicas": 11})).await.expect_err("rejected by the validating webhook");
        assert!(err.to_string().contains("widget too-big: replicas 11 is over the limit of 10"), "{err}");
        let old = create_widget(&client, &ns, "v1alpha1", "old", json!({"size": 4})).await.expect("a v1alpha1 Widget");
        assert_eq!(old.data["spec"], json!({"size": 4}));
        let as_v1 = widgets(&client, &ns, "v1").get("old").await.expect("read as v1");
        assert_eq!(as_v1.data["spec"], json!({"replicas": 4}), "converted by the webhook");
        let as_old = widgets(&client, &ns, "v1alpha1").get("small").await.expect("read as v1alpha1");
        assert_eq!(as_old.data["spec"], json!({"size": 3}));
        let err = create_widget(&client, &ns, "v1alpha1", "old-too-big", json!({"size": 12})).await.expect_err("v1alpha1 validated too");
        assert!(err.to_string().contains("replicas 12 is over the limit"), "{err}");

        // ---- rotation: after 45 s (rotateAt = notAfter - 15 s), the next apply issues a new CA
        let secret_hash = |s: Secret| s.metadata.annotations.unwrap_or_default().get(ANNOTATION_CA_HASH).cloned().unwrap_or_default();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let first = secret_hash(secrets.get("webhook-operator-service-cert").await.unwrap());
        let due = Duration::from_secs(47).saturating_sub(t0.elapsed());
        tokio::time::sleep(due).await;
        install(&client, &b, &ns, &ApplyOptions::default()).await;
        let second = secret_hash(secrets.get("webhook-operator-service-cert").await.unwrap());
        assert_ne!(first, second, "a new CA after the rotation time");
        let dep = Api::<Deployment>::namespaced(client.clone(), &ns).get("webhook-operator").await.unwrap();
        assert_eq!(dep.spec.unwrap().template.metadata.unwrap().annotations.unwrap()[ANNOTATION_CA_HASH], second, "pods restart with the new CA");
        let vwc = Api::<ValidatingWebhookConfiguration>::all(client.clone()).list(&ListParams::default().labels(&format!("olm.owner={csv},olm.owner.namespace={ns}"))).await.unwrap();
        assert_eq!(vwc.items.len(), 1);
        let ca = vwc.items[0].webhooks.as_ref().unwrap()[0].client_config.ca_bundle.clone().unwrap();
        assert_eq!(capstan::install::certs::ca_hash(std::str::from_utf8(&ca.0).unwrap()), second, "caBundle is the new CA");
        eventually("rolled out with the new certificate", Duration::from_secs(120), || async { available(&client, &ns, "webhook-operator").await.then_some(()) }).await;
        eventually("writes work with the rotated certificate", Duration::from_secs(60), || async {
            create_widget(&client, &ns, "v1alpha1", "after-rotation", json!({"size": 5})).await.ok()
        })
        .await;
        let err = create_widget(&client, &ns, "v1", "too-big-2", json!({"replicas": 20})).await.expect_err("still validated");
        assert!(err.to_string().contains("over the limit"), "{err}");

        // ---- removal: webhook configurations and conversion first, then the Deployment
        let removed = webhook::remove(&client, &csv, &ns, &defs).await.expect("remove webhooks");
        assert!(removed.iter().any(|r| r.starts_with("ValidatingWebhookConfiguration vwidgets.webhook.capstan.dev-")), "{removed:?}");
        assert!(removed.contains(&format!("CustomResourceDefinition {CRD} spec.conversion")), "{removed:?}");
        assert!(removed.contains(&format!("RoleBinding kube-system/webhook-operator-service-auth-reader")), "{removed:?}");
        Api::<Deployment>::namespaced(client.clone(), &ns).delete("webhook-operator", &DeleteParams::foreground()).await.unwrap();
        eventually("Deployment gone", Duration::from_secs(60), || async {
            Api::<Deployment>::namespaced(client.clone(), &ns).get_opt("webhook-operator").await.ok()?.is_none().then_some(())
        })
        .await;
        create_widget(&client, &ns, "v1", "no-webhook-left", json!({"replicas": 50})).await.expect("writes do not hit a webhook that points at nothing");
        widgets(&client, &ns, "v1").list(&ListParams::default()).await.expect("reads work without the conversion webhook");
    })
    .catch_unwind_result()
    .await;
    cleanup(&client, &ns, &csv, &defs).await;
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }

    // ---- failure: the Deployment never becomes ready
    let ns2 = format!("wh-e2e-fail-{suffix}");
    let b2 = publish_and_pull(&registry, &format!("wh-e2e-fail-{suffix}"), &image, &["-never-ready"], work.path());
    namespace(&client, &ns2).await;
    let result = std::panic::AssertUnwindSafe(async {
        install(&client, &b2, &ns2, &ApplyOptions::default()).await;
        eventually("the never-ready pod running", Duration::from_secs(60), || async {
            let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), &ns2).list(&ListParams::default().labels("app=webhook-operator")).await.ok()?;
            pods.items.iter().any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let ready = available(&client, &ns2, "webhook-operator").await;
        assert!(!ready, "never ready");
        let reason = webhook::unavailable(&defs, |d| (d == "webhook-operator").then_some(ready)).expect("a reason");
        assert!(reason.contains("webhook vwidgets.webhook.capstan.dev (ValidatingAdmissionWebhook) is served by Deployment webhook-operator, which is not available"), "{reason}");
        assert!(reason.contains("webhook cwidgets.webhook.capstan.dev (ConversionWebhook)"), "{reason}");
        let err = create_widget(&client, &ns2, "v1", "blocked", json!({"replicas": 1})).await.expect_err("writes fail while the webhook cannot be served");
        assert!(err.to_string().contains("failed calling webhook") || err.to_string().contains("vwidgets.webhook.capstan.dev"), "{err}");
        let removed = webhook::remove(&client, &b2.name().to_string(), &ns2, &defs).await.expect("remove");
        assert!(removed.len() >= 3, "{removed:?}");
        create_widget(&client, &ns2, "v1", "unblocked", json!({"replicas": 1})).await.expect("removal unblocks writes");
    })
    .catch_unwind_result()
    .await;
    cleanup(&client, &ns2, b2.name(), &defs).await;
    // Nothing of either install is left outside its namespaces.
    for n in [&ns, &ns2] {
        let sel = ListParams::default().labels(&format!("olm.owner.namespace={n}"));
        assert!(Api::<ValidatingWebhookConfiguration>::all(client.clone()).list(&sel).await.unwrap().items.is_empty());
        assert!(Api::<ClusterRoleBinding>::all(client.clone()).list(&sel).await.unwrap().items.is_empty());
        let reader = format!("webhook-operator-service-auth-reader");
        let rb = Api::<RoleBinding>::namespaced(client.clone(), "kube-system").get_opt(&reader).await.unwrap();
        assert!(rb.is_none_or(|rb| !rb.subjects.unwrap_or_default().iter().any(|s| s.namespace.as_deref() == Some(n.as_str()))));
    }
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

/// `catch_unwind` for a future, so that cleanup runs when an assertion fails.
trait CatchUnwind: std::future::Future + Sized {
    fn catch_unwind_result(self) -> futures::future::CatchUnwind<Self>
    where
        Self: std::panic::UnwindSafe,
    {
        futures::FutureExt::catch_unwind(self)
    }
}
impl<F: std::future::Future> CatchUnwind for F {}
