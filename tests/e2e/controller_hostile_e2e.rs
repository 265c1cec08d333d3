//! Against the real control plane and registry: bundles that try to take over objects
//! capstan does not own are refused with the conflict named and the cluster's object unchanged;
//! a registry that is down during a pull, an OperatorGroup that is missing, a deleted
//! Deployment and a deleted CSV all recover without a hand; a scoped install whose installer may
//! not make a binding the bundle ships is refused before its first step.
//!
//! One scenario per test, each in namespaces of its own and with a catalog of its own bundle,
//! over one controller the tests share ([`fixture`]; it watches every namespace, so no other
//! group's tests run meanwhile: [`crate::support::group`]). The registry outage runs alone, in a
//! group of its own with a controller it starts itself: it stops the registry every other test
//! pulls from.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::support::controller::*;
use crate::support::group::PerGroup;
use crate::support::{TestNamespace, eventually};
use capstan::api::{ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const GROUP: &str = "controller_hostile_e2e";
/// The group of [`unreachable_registry_during_the_pull_is_retried_until_the_install_completes`].
const REGISTRY_GROUP: &str = "controller_hostile_registry";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

/// The controller of these tests (with the admin configuration, for scoped installs), with the
/// example catalog as CatalogSource `examples` in its global catalog namespace, READY.
async fn fixture() -> Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("hostile-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            let f = ControllerFixture::start(&client, &repo, "hostile-catalog", options).await;
            catalog_source(&client, &f.catalog_ns.name, "examples", &f.catalog_ref).await;
            f
        })
        .await
}

/// Copies the nginx-operator 0.2.0 bundle to `<work>/bundles/<case>/nginx-operator/0.2.0` and adds
/// `extra` as `manifests/<file>` for each `(file, yaml)`; returns the bundle directory.
fn bundle_with(work: &Path, case: &str, extra: &[(&str, String)]) -> PathBuf {
    let src = crate::support::repo_root().join("bundles/nginx-operator/0.2.0");
    let dir = work.join("bundles").join(case).join("nginx-operator/0.2.0");
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
        for e in std::fs::read_dir(src.join(sub)).expect("read bundle").flatten() {
            std::fs::copy(e.path(), dir.join(sub).join(e.file_name())).expect("copy");
        }
    }
    for (file, yaml) in extra {
        std::fs::write(dir.join("manifests").join(file), yaml).expect("write manifest");
    }
    dir
}

/// A ConfigMap manifest that makes a bundle's digest unique to this run (so that no blob cache
/// already holds it and the pull must reach the registry).
fn unique(tag: &str) -> (&'static str, String) {
    (
        "unique.yaml",
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile-unique\ndata:\n  run: \"{tag}-{}\"\n",
            std::process::id()
        ),
    )
}

/// A CatalogSource `name` in `catalog_ns` serving one bundle directory.
async fn catalog_of(
    client: &kube::Client,
    registry: &str,
    repo: &str,
    catalog_ns: &str,
    name: &str,
    work: &Path,
    bundle: &Path,
) {
    // Unvalidated: `capstan bundle push` refuses most of these bundles; the controller must too.
    let reference = publish_unvalidated(registry, &format!("{repo}/{name}"), name, work, bundle).await;
    catalog_source(client, catalog_ns, name, &reference).await;
}

async fn subscribe_to(client: &kube::Client, ns: &str, catalog_ns: &str, source: &str) {
    create::<Subscription>(client, ns, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "nginx-operator", "namespace": ns},
        "spec": {"name": "nginx-operator", "channel": "alpha", "source": source, "sourceNamespace": catalog_ns, "installPlanApproval": "Automatic"}
    }))
    .await;
}

/// The Subscription's current InstallPlan status as JSON once `pred` holds for it.
async fn plan_status_where(client: &kube::Client, ns: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    eventually(&format!("InstallPlan of {ns}/nginx-operator: {what}"), WAIT, || async {
        let name = subs.get("nginx-operator").await.ok()?.status?.install_plan_ref?.name?;
        let st = serde_json::to_value(plans.get(&name).await.ok()?.status?).ok()?;
        pred(&st).then_some(st)
    })
    .await
}

/// Pushes bundle directory `dir` as image `reference` with one more layer that holds the
/// whiteout entry `.wh..` (a regular empty file, as image builders write whiteouts).
async fn push_with_whiteout(dir: &Path, reference: &str) {
    use capstan::oci::layer::{MEDIA_TYPE_LAYER_GZIP, build_layer, entries_from_dir, image_config};
    let mut entries = entries_from_dir(&dir.join("manifests"), "manifests").expect("manifests");
    entries.extend(entries_from_dir(&dir.join("metadata"), "metadata").expect("metadata"));
    let base = build_layer(entries).expect("base layer");
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(0);
    h.set_mode(0o644);
    h.as_old_mut().name[..5].copy_from_slice(b".wh..");
    h.set_cksum();
    tar.append(&h, std::io::empty()).expect("tar entry");
    let hostile =
        capstan::oci::Blob::new(MEDIA_TYPE_LAYER_GZIP, tar.into_inner().expect("tar").finish().expect("gzip"));
    let labels = capstan::bundle::image::bundle_labels(dir).expect("labels");
    let diff_ids = vec![base.diff_id.clone(), hostile.descriptor.digest.clone()];
    let image = capstan::oci::ImageToPush {
        config: image_config(&labels, &diff_ids),
        layers: vec![base.blob, hostile],
        annotations: Default::default(),
    };
    let registry = capstan::oci::Registry::new(capstan::oci::ClientConfig { quiet: true, ..Default::default() });
    registry
        .push(&capstan::oci::parse_reference(reference).expect("reference"), &image)
        .await
        .expect("push hostile bundle");
}

/// Rewrites every image reference starting with `repository` in the catalog files under `dir`
/// (tag or digest) to `image`.
fn point_catalog_at(dir: &Path, repository: &str, image: &str) {
    for e in walkdir::WalkDir::new(dir).into_iter().flatten().filter(|e| e.file_type().is_file()) {
        let text = std::fs::read_to_string(e.path()).expect("catalog file");
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find(repository) {
            out.push_str(&rest[..i]);
            out.push_str(image);
            let after = &rest[i + repository.len()..];
            let end = after.find(|c: char| c == '"' || c == '\'' || c.is_whitespace()).unwrap_or(after.len());
            rest = &after[end..];
        }
        out.push_str(rest);
        std::fs::write(e.path(), out).expect("write catalog file");
    }
}

fn cluster_script(args: &[&str]) {
    let out = Command::new("bash")
        .arg(crate::support::repo_root().join("tests/cluster/up.sh"))
        .args(args)
        .env("CAPSTAN_CLUSTER_DIR", crate::support::state_dir())
        .output()
        .expect("run up.sh");
    assert!(out.status.success(), "up.sh {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Stops the registry the environment started (its PID file), and waits until it is gone.
fn stop_registry() {
    let pid = std::fs::read_to_string(crate::support::state_dir().join("pids/registry.pid")).expect("registry pid");
    let pid = pid.trim().to_string();
    let _ = Command::new("kill").arg(&pid).status();
    for _ in 0..100 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("registry (pid {pid}) did not stop");
}

/// A CatalogSource `name` in the fixture's catalog namespace serving one bundle directory.
async fn fixture_catalog_of(f: &ControllerFixture, client: &kube::Client, name: &str, bundle: &Path) {
    catalog_of(client, &f.registry, &f.repo, &f.catalog_ns.name, name, f.work.path(), bundle).await;
}

/// The status of the Subscription's InstallPlan in `ns` as JSON once it has failed.
async fn failed_plan(client: &kube::Client, ns: &str, what: &str) -> Value {
    plan_status_where(client, ns, what, |st| st["phase"] == "Failed").await
}

/// A bundle that ships the cluster's own ClusterRole system:basic-user with `*` rules: the plan is
/// refused before any step, naming the object; the cluster's role is unchanged.
#[test]
fn bundle_shipping_a_kubernetes_clusterrole_is_refused_and_the_role_left_unchanged() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let roles: Api<ClusterRole> = Api::all(client.clone());
        let before = roles.get("system:basic-user").await.expect("system:basic-user exists");
        let takeover = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: system:basic-user\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n".to_string();
        let dir = bundle_with(f.work.path(), "basic-user", &[("takeover.yaml", takeover)]);
        fixture_catalog_of(&f, &client, "basic-user", &dir).await;
        let ns1 = f.hold(namespace_with_group(&client, "hostile-sys").await);
        subscribe_to(&client, &ns1.name, &f.catalog_ns.name, "basic-user").await;
        let st = failed_plan(&client, &ns1.name, "Failed").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(
                "ClusterRole system:basic-user (manifests/takeover.yaml) reserved by Kubernetes for its own RBAC"
            ) && message.contains("rename the object in the bundle"),
            "{st}"
        );
        let after = roles.get("system:basic-user").await.expect("system:basic-user still exists");
        assert_eq!(
            after.metadata.resource_version, before.metadata.resource_version,
            "the cluster's ClusterRole was modified"
        );
        assert_eq!(after.rules, before.rules);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns1.name);
        assert!(
            csvs.get_opt("nginx-operator.v0.2.0").await.expect("get csv").is_none(),
            "a refused plan installed a CSV"
        );
    })
}

/// A bundle that aggregates Secrets into every namespace admin (a ClusterRole labelled
/// aggregate-to-admin with a rule on the core group) and binds every authenticated user to
/// cluster-admin under a harmless name: refused before any step; neither object exists.
#[test]
fn bundle_escalating_through_aggregation_or_a_binding_of_everyone_is_refused() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let roles: Api<ClusterRole> = Api::all(client.clone());
        let aggregated = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: hostile-aggregate\n  labels: {rbac.authorization.k8s.io/aggregate-to-admin: 'true'}\nrules:\n- apiGroups: ['']\n  resources: [secrets]\n  verbs: [get, list]\n".to_string();
        let everyone = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: hostile-everyone\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: Group, name: system:authenticated, apiGroup: rbac.authorization.k8s.io}]\n".to_string();
        let dir = bundle_with(
            f.work.path(),
            "escalate",
            &[("aggregate.yaml", aggregated), ("everyone.yaml", everyone), unique("escalate")],
        );
        fixture_catalog_of(&f, &client, "escalate", &dir).await;
        let ns1b = f.hold(namespace_with_group(&client, "hostile-agg").await);
        subscribe_to(&client, &ns1b.name, &f.catalog_ns.name, "escalate").await;
        let st = failed_plan(&client, &ns1b.name, "Failed").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("ClusterRole hostile-aggregate (manifests/aggregate.yaml): aggregated into admin")
                && message.contains("beyond the bundle's own API groups"),
            "{st}"
        );
        assert!(
            roles.get_opt("hostile-aggregate").await.expect("get").is_none(),
            "the aggregated ClusterRole was created"
        );
        let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(client.clone());
        assert!(
            bindings.get_opt("hostile-everyone").await.expect("get").is_none(),
            "the binding of system:authenticated was created"
        );
    })
}

/// A bundle that ships a ClusterRole which exists and is nobody's (created by hand): the whole
/// plan is refused before its first step with the conflict named; the role is as it was.
#[test]
fn bundle_taking_over_a_clusterrole_nobody_installed_is_refused_with_nothing_applied() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let roles: Api<ClusterRole> = Api::all(client.clone());
        let unowned = format!("hostile-unowned-{}", std::process::id());
        let mine: ClusterRole = serde_json::from_value(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": unowned}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})).expect("role");
        let created = roles.create(&PostParams::default(), &mine).await.expect("create unowned ClusterRole");
        let conflict = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {unowned}\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n"
        );
        let dir = bundle_with(f.work.path(), "unowned", &[("takeover.yaml", conflict), unique("unowned")]);
        fixture_catalog_of(&f, &client, "unowned", &dir).await;
        let ns2 = f.hold(namespace_with_group(&client, "hostile-own").await);
        subscribe_to(&client, &ns2.name, &f.catalog_ns.name, "unowned").await;
        let st = failed_plan(&client, &ns2.name, "Failed").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
        message.contains(&format!("ClusterRole {unowned}: already exists and was not created by capstan or OLM; capstan does not take over objects it did not create for this operator"))
            && message.contains(&format!("operators.coreos.com/nginx-operator.{}", ns2.name)),
        "{st}"
    );
        let statuses: Vec<&str> =
            st["plan"].as_array().map(|p| p.iter().filter_map(|s| s["status"].as_str()).collect()).unwrap_or_default();
        assert!(
            !statuses.is_empty() && statuses.iter().all(|s| *s == "NotCreated"),
            "nothing may be applied: {statuses:?}"
        );
        let after = roles.get(&unowned).await.expect("role still exists");
        assert_eq!(
            after.metadata.resource_version, created.metadata.resource_version,
            "the existing ClusterRole was modified"
        );
        assert!(
            Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns2.name)
                .get_opt("nginx-operator.v0.2.0")
                .await
                .expect("get")
                .is_none()
        );
        let _ = roles.delete(&unowned, &DeleteParams::default()).await;
    })
}

/// The registry is down while the plan pulls its bundle: the plan keeps its phase and says it
/// retries; the Subscription says so too; once the registry is back the install completes.
#[test]
fn unreachable_registry_during_the_pull_is_retried_until_the_install_completes() {
    crate::support::run(REGISTRY_GROUP, 4, async {
        let client = crate::support::cluster().await;
        let registry = crate::support::registry();
        let work = tempfile::tempdir().expect("tempdir");
        let repo = format!("hostile-{}", std::process::id());
        let (catalog_ns, controller) = own_controller(&client).await;
        let dir = bundle_with(work.path(), "outage", &[unique("outage")]);
        catalog_of(&client, &registry, &repo, &catalog_ns.name, "outage", work.path(), &dir).await;
        let ns3 = namespace_with_group(&client, "hostile-reg").await;
        stop_registry();
        subscribe_to(&client, &ns3.name, &catalog_ns.name, "outage").await;
        let st = plan_status_where(&client, &ns3.name, "retrying", |st| {
            st["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["reason"] == "InstallRetrying"))
        })
        .await;
        assert_ne!(st["phase"], "Failed", "{st}");
        let retry = st["conditions"][0]["message"].as_str().unwrap_or_default().to_string();
        assert!(
            retry.contains("pulling the bundle image failed") && retry.contains("capstan tries again in"),
            "{retry}"
        );
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns3.name);
        eventually("Subscription shows the retry", WAIT, || async {
            let st = serde_json::to_value(subs.get("nginx-operator").await.ok()?.status?).ok()?;
            st["conditions"]
                .as_array()?
                .iter()
                .any(|c| {
                    c["type"] == "InstallPlanPending"
                        && c["message"].as_str().is_some_and(|m| m.contains("capstan tries again"))
                })
                .then_some(())
        })
        .await;
        cluster_script(&["registry"]);
        csv_version_succeeded(&client, &ns3.name, "nginx-operator.v0.2.0").await;
        controller.abort();
        cleanup_cluster_rbac(&client, &[&ns3.name]).await;
    })
}

/// For a test that runs alone (a group of its own): applies the CRDs and starts a controller on
/// the test's runtime with the admin configuration; returns its global catalog namespace and its
/// task.
async fn own_controller(client: &kube::Client) -> (TestNamespace, tokio::task::JoinHandle<()>) {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "capstan=info".into()),
        )
        .try_init();
    apply_crds(client).await;
    let catalog_ns = TestNamespace::new(client, "hostile-catalog").await;
    let options = capstan::controller::Options {
        global_catalog_namespace: catalog_ns.name.clone(),
        catalog_cache: None,
        ..Default::default()
    };
    let controller = tokio::spawn(capstan::controller::run_with_config(
        crate::support::admin_config().await,
        options,
        std::future::pending(),
    ));
    (catalog_ns, controller)
}

/// No OperatorGroup: the plan is Failed naming it; creating the OperatorGroup as the message
/// says lets the same plan go on, with no other step by hand.
#[test]
fn missing_operator_group_fails_the_plan_until_one_is_created() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns4 = f.hold(TestNamespace::new(&client, "hostile-og").await);
        subscribe_to(&client, &ns4.name, &f.catalog_ns.name, "examples").await;
        let st = failed_plan(&client, &ns4.name, "Failed for NoOperatorGroup").await;
        assert!(
            st["message"]
                .as_str()
                .is_some_and(|m| m.contains("NoOperatorGroup") && m.contains("create one OperatorGroup")),
            "{st}"
        );
        let og: OperatorGroup = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og", "namespace": ns4.name}, "spec": {"targetNamespaces": [ns4.name]}})).expect("og");
        Api::<OperatorGroup>::namespaced(client.clone(), &ns4.name)
            .create(&PostParams::default(), &og)
            .await
            .expect("create OperatorGroup");
        csv_version_succeeded(&client, &ns4.name, "nginx-operator.v0.2.0").await;
    })
}

/// A namespace with an OperatorGroup where nginx-operator from the examples catalog has been
/// installed (its CSV Succeeded, its Deployment Available).
async fn installed(f: &ControllerFixture, client: &kube::Client, prefix: &str) -> HeldNamespace {
    let ns = f.hold(namespace_with_group(client, prefix).await);
    subscribe_to(client, &ns.name, &f.catalog_ns.name, "examples").await;
    csv_version_succeeded(client, &ns.name, "nginx-operator.v0.2.0").await;
    ns
}

/// The Deployment of an installed operator is deleted: it comes back, and the CSV is Succeeded again.
#[test]
fn deleted_deployment_is_created_again() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = installed(&f, &client, "hostile-dep").await;
        let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
        let list = deps.list(&Default::default()).await.expect("list deployments");
        let dep = list.items.first().expect("a Deployment of the CSV").clone();
        let dep_name = dep.metadata.name.clone().unwrap_or_default();
        deps.delete(&dep_name, &DeleteParams::default()).await.expect("delete Deployment");
        eventually("Deployment created again", WAIT, || async {
            let d = deps.get_opt(&dep_name).await.ok()??;
            (d.metadata.uid != dep.metadata.uid).then_some(())
        })
        .await;
        csv_version_succeeded(&client, &ns.name, "nginx-operator.v0.2.0").await;
    })
}

/// The CSV of an installed operator is deleted while its Subscription stays: it is installed again.
#[test]
fn deleted_csv_is_installed_again_while_its_subscription_stays() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = installed(&f, &client, "hostile-csv").await;
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
        let old = csvs.get("nginx-operator.v0.2.0").await.expect("csv");
        csvs.delete("nginx-operator.v0.2.0", &DeleteParams::default()).await.expect("delete CSV");
        eventually("CSV installed again", WAIT, || async {
            let c = csvs.get_opt("nginx-operator.v0.2.0").await.ok()??;
            (c.metadata.uid != old.metadata.uid && c.metadata.deletion_timestamp.is_none()).then_some(())
        })
        .await;
        csv_version_succeeded(&client, &ns.name, "nginx-operator.v0.2.0").await;
    })
}

/// A scoped install (OperatorGroup spec.serviceAccountName) of a bundle that binds the cluster's
/// ClusterRole `view`, which the installer neither holds nor may bind: refused before the first
/// step, naming the missing `bind`, with nothing applied.
#[test]
fn scoped_install_of_a_binding_the_installer_may_not_make_is_refused() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let viewer = format!("hostile-viewer-{}", std::process::id());
        let binding = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {viewer}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\nsubjects: [{{kind: ServiceAccount, name: nginx-operator-controller-manager, namespace: default}}]\n"
        );
        let dir = bundle_with(f.work.path(), "viewer", &[("viewer.yaml", binding), unique("viewer")]);
        fixture_catalog_of(&f, &client, "viewer", &dir).await;
        let ns5 = f.hold(TestNamespace::new(&client, "hostile-bind").await);
        scoped_installer(&client, &ns5.name).await;
        subscribe_to(&client, &ns5.name, &f.catalog_ns.name, "viewer").await;
        let st = failed_plan(&client, &ns5.name, "refused for bind").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
        message.contains("lacks 1 permission needed by this plan")
            && message.contains(&format!("to create ClusterRoleBinding {viewer}, which grants ClusterRole view, it must hold every permission of ClusterRole view, or have bind on clusterroles view")),
        "{st}"
    );
        assert!(
            Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
                .get_opt(&viewer)
                .await
                .expect("get")
                .is_none(),
            "nothing applied"
        );
        assert!(
            Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns5.name)
                .get_opt("nginx-operator.v0.2.0")
                .await
                .expect("get")
                .is_none()
        );
    })
}

/// ServiceAccount `installer` in `ns`, granted what installing nginx-operator takes (but not the
/// ClusterRole `view` nor `bind`) by a ClusterRole and binding labelled for `ns`, and an
/// OperatorGroup that installs as it (spec.serviceAccountName).
async fn scoped_installer(client: &kube::Client, ns: &str) {
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "installer", "namespace": ns}})).expect("sa");
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .expect("installer SA");
    let all = json!(["get", "list", "watch", "create", "update", "patch", "delete"]);
    let grant_name = format!("{ns}-installer");
    let cr: ClusterRole = serde_json::from_value(json!({"metadata": {"name": grant_name, "labels": {"olm.owner.namespace": ns}}, "rules": [
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": all},
    {"apiGroups": [""], "resources": ["serviceaccounts", "services", "configmaps", "secrets", "events", "pods"], "verbs": all},
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": all},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], "verbs": all},
    {"apiGroups": ["operators.coreos.com"], "resources": ["*"], "verbs": ["*"]},
    {"apiGroups": ["example.com"], "resources": ["nginxes", "nginxes/status", "nginxes/finalizers"], "verbs": all},
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": all},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": all}
    ]})).expect("cr");
    Api::<ClusterRole>::all(client.clone()).create(&PostParams::default(), &cr).await.expect("installer ClusterRole");
    let crb: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": grant_name, "labels": {"olm.owner.namespace": ns}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": grant_name},
        "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}]
    }))
    .expect("crb");
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &crb)
        .await
        .expect("installer binding");
    let og: OperatorGroup = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og", "namespace": ns}, "spec": {"targetNamespaces": [ns], "serviceAccountName": "installer"}})).expect("og");
    Api::<OperatorGroup>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &og)
        .await
        .expect("create OperatorGroup");
}

/// A bundle image with a whiteout entry `.wh..` (OCI's "delete `..`"), through the controller:
/// unpacked as written it would delete everything beside the unpack directory, the whole
/// $TMPDIR, and the plan would still complete. The plan fails naming image, layer and entry,
/// and a canary beside the unpack directories is untouched.
#[test]
fn bundle_layer_whiting_out_its_parent_fails_the_plan_and_deletes_nothing() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let (registry, repo, work) = (&f.registry, &f.repo, &f.work);
        let dir = bundle_with(work.path(), "whiteout", &[unique("whiteout")]);
        let good = format!("{registry}/{repo}/whiteout/nginx-operator-bundle:v0.2.0");
        let catalog_dir = work.path().join("whiteout-catalog");
        capstan(&["bundle", "push", "-q", dir.to_str().unwrap_or_default(), &good]);
        capstan(&["catalog", "add", catalog_dir.to_str().unwrap_or_default(), &good]);
        let hostile = format!("{registry}/{repo}/whiteout/hostile-bundle:v1");
        push_with_whiteout(&dir, &hostile).await;
        point_catalog_at(&catalog_dir, &format!("{registry}/{repo}/whiteout/nginx-operator-bundle"), &hostile);
        let catalog_ref = format!("{registry}/{repo}/whiteout-catalog:latest");
        capstan(&["catalog", "push", "-q", catalog_dir.to_str().unwrap_or_default(), &catalog_ref]);
        catalog_source(&client, &f.catalog_ns.name, "whiteout", &catalog_ref).await;
        let canary = std::env::temp_dir().join(format!("capstan-canary-{}", std::process::id()));
        std::fs::write(&canary, b"still here").expect("write canary");
        let ns6 = f.hold(namespace_with_group(&client, "hostile-wh").await);
        subscribe_to(&client, &ns6.name, &f.catalog_ns.name, "whiteout").await;
        let st = failed_plan(&client, &ns6.name, "Failed for the whiteout").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(message.contains(&hostile) && message.contains("layer sha256:") && message.contains(".wh.."), "{st}");
        assert_eq!(std::fs::read(&canary).expect("the canary beside the unpack directories is gone"), b"still here");
        let _ = std::fs::remove_file(&canary);
    })
}

/// A bundle whose steps are larger than the API server stores in one InstallPlan: the plan lists
/// the large object as a reference to the bundle, so its status is written; the object itself (a
/// 1.4 MB ConfigMap, over the 1 MiB a ConfigMap may hold) is refused by the API server, and the
/// plan fails at once with its message, instead of failing to write its status on every try.
#[test]
fn bundle_too_large_for_one_installplan_fails_with_the_api_servers_message() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let big = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: \"{}\"\n",
            "x".repeat(1_400_000)
        );
        let dir = bundle_with(f.work.path(), "big", &[("big.yaml", big), unique("big")]);
        fixture_catalog_of(&f, &client, "big", &dir).await;
        let ns7 = f.hold(namespace_with_group(&client, "hostile-big").await);
        subscribe_to(&client, &ns7.name, &f.catalog_ns.name, "big").await;
        let st = failed_plan(&client, &ns7.name, "Failed for its size").await;
        assert!(
            st["message"]
                .as_str()
                .is_some_and(|m| m.contains("ConfigMap") && m.contains("may not be more than 1048576 bytes")),
            "{}",
            &st.to_string()[..2000.min(st.to_string().len())]
        );
        let big_step = st["plan"]
            .as_array()
            .and_then(|p| p.iter().find(|s| s["resource"]["name"] == "big"))
            .cloned()
            .unwrap_or_default();
        assert!(
            big_step["resource"]["manifest"].as_str().is_some_and(|m| m.contains("\"kind\":\"BundleObject\"")),
            "{big_step}"
        );
        assert!(st.to_string().len() < 200_000, "the plan's status stays small");
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns7.name);
        eventually("the Subscription says why", WAIT, || async {
            let st = serde_json::to_value(subs.get("nginx-operator").await.ok()?.status?).ok()?;
            st["conditions"]
                .as_array()?
                .iter()
                .any(|c| {
                    c["type"] == "InstallPlanFailed"
                        && c["message"].as_str().is_some_and(|m| m.contains("may not be more than 1048576 bytes"))
                })
                .then_some(())
        })
        .await;
    })
}
