//! Removal that never hangs, on the real local control plane with the controller running
//! in-process: deleting a Subscription leaves its operator installed; deleting its CSV (or a
//! Subscription annotated to uninstall) removes every object the CSV created, the custom resources
//! first while the operator still runs, the CRDs last and only when nothing else uses them; an
//! object whose finalizer never completes is reported with the command that unblocks it, and the
//! controller being down only delays the cleanup (`cases/olm-cases.yaml` case-29, uninstall with
//! finalizers on the operator's custom resources).
//!
//! One scenario per test, each in namespaces of its own. The scenarios whose checks stay in their
//! namespaces share one controller ([`fixture`]; group `controller_removal`). Three run alone, each
//! in a group of its own with a controller it starts itself ([`alone`]): two stop and restart
//! their controller (one of them also deletes the CRD the other scenarios use), and one counts
//! every Nginx object in the cluster. A controller watches every namespace, so groups never
//! overlap ([`crate::support::group`]).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use crate::support::controller::{
    ControllerFixture, HeldNamespace, WAIT, apply_crds, capstan, create, namespace_with_group, publish_dirs,
};
use crate::support::group::PerGroup;
use crate::support::{TestNamespace, eventually};
use capstan::api::{CatalogSource, ClusterServiceVersion, Subscription};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

const GROUP: &str = "controller_removal";
/// The group of [`deleting_the_subscription_keeps_the_operator_and_deleting_the_csv_removes_it`]:
/// the Uninstalled note counts every Nginx object in the cluster.
const KEEP_GROUP: &str = "controller_removal_keep";
/// The group of [`csv_deleted_while_the_controller_is_down_is_cleaned_up_after_it_restarts`].
const DOWN_GROUP: &str = "controller_removal_down";
/// The group of [`crds_go_last_even_with_the_controller_down_and_only_with_the_last_installation`]:
/// it stops its controller and deletes the CRD.
const CRDS_GROUP: &str = "controller_removal_crds";

const CSV: &str = "nginx-operator.v0.2.0";
const DEPLOYMENT: &str = "nginx-operator-controller-manager";
const CLEANUP: &str = "example.com/cleanup";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

/// The controller of the scenarios of group `controller_removal`, with the example catalog as
/// CatalogSource `examples` in its global catalog namespace.
async fn fixture() -> std::sync::Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            clear_leftovers(&client).await;
            let repo = format!("ctl-removal-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            let f = ControllerFixture::start(&client, &repo, "rm-catalog", options).await;
            examples_source(&client, &f.catalog_ns.name, &f.catalog_ref).await;
            f
        })
        .await
}

/// For a test that runs alone (a group of its own) and starts its controller itself
/// ([`start_controller`]): publishes the nginx-operator bundles and a catalog of them under a
/// repository named after `tag`, applies the CRDs, clears what a failed earlier run left, and
/// returns the controller's catalog namespace with CatalogSource `examples` in it.
async fn alone(client: &kube::Client, tag: &str) -> TestNamespace {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "capstan=info".into()),
        )
        .try_init();
    let registry = crate::support::registry();
    let work = tempfile::tempdir().expect("tempdir");
    let repo = format!("ctl-removal-{tag}-{}", std::process::id());
    let nginx = crate::support::repo_root().join("bundles/nginx-operator");
    let (v1, v2) = (nginx.join("0.1.0"), nginx.join("0.2.0"));
    let catalog_ref = publish_dirs(
        &registry,
        &repo,
        "catalog",
        work.path(),
        &[(&v1, "0.1.0", "replaces"), (&v2, "0.2.0", "replaces")],
    );
    apply_crds(client).await;
    clear_leftovers(client).await;
    let catalog_ns = TestNamespace::new(client, "rm-catalog").await;
    examples_source(client, &catalog_ns.name, &catalog_ref).await;
    catalog_ns
}

/// A run that failed half-way may have left objects with the test's finalizer in namespaces being
/// deleted: play the operator for them, so that this run starts clean.
async fn clear_leftovers(client: &kube::Client) {
    for ns in Api::<Namespace>::all(client.clone()).list(&ListParams::default()).await.expect("list namespaces").items {
        let name = ns.name_any();
        if !name.starts_with("rm-") || ns.metadata.deletion_timestamp.is_none() {
            continue;
        }
        let leftovers = Api::<DynamicObject>::namespaced_with(client.clone(), &name, &nginx_resource())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        for o in leftovers.iter().filter(|o| o.finalizers().iter().any(|f| f == CLEANUP)) {
            clear_finalizers(client, &name, &o.name_any()).await;
        }
    }
}

/// CatalogSource `examples` in `catalog_ns` for the catalog image `catalog_ref`.
async fn examples_source(client: &kube::Client, catalog_ns: &str, catalog_ref: &str) {
    create::<CatalogSource>(
        client,
        catalog_ns,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "examples", "namespace": catalog_ns},
            "spec": {"sourceType": "grpc", "image": catalog_ref}
        }),
    )
    .await;
}

fn start_controller(client: &kube::Client, catalog_ns: &str) -> tokio::task::JoinHandle<()> {
    let options = capstan::controller::Options {
        global_catalog_namespace: catalog_ns.to_string(),
        catalog_cache: None,
        ..Default::default()
    };
    tokio::spawn(capstan::controller::run(client.clone(), options, std::future::pending()))
}

/// Stops the controller task and waits until it has ended.
async fn stop_controller(controller: &mut tokio::task::JoinHandle<()>) {
    controller.abort();
    let _ = controller.await;
}

/// A namespace with an OwnNamespace OperatorGroup and a Subscription to nginx-operator (with
/// `annotations`), once its CSV has Succeeded.
async fn install(client: &kube::Client, prefix: &str, catalog_ns: &str, annotations: Value) -> TestNamespace {
    let ns = namespace_with_group(client, prefix).await;
    create::<Subscription>(client, &ns.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "nginx-operator", "namespace": ns.name, "annotations": annotations},
        "spec": {"name": "nginx-operator", "channel": "alpha", "source": "examples", "sourceNamespace": catalog_ns, "installPlanApproval": "Automatic"}
    }))
    .await;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
    eventually(&format!("CSV {}/{CSV} Succeeded", ns.name), WAIT, || async {
        let st = serde_json::to_value(csvs.get(CSV).await.ok()?.status?).ok()?;
        (st["phase"] == "Succeeded").then_some(())
    })
    .await;
    let csv = csvs.get(CSV).await.expect("CSV");
    assert!(
        csv.finalizers().iter().any(|f| f == capstan::controller::CSV_FINALIZER),
        "a reconciled CSV carries the cleanup finalizer: {:?}",
        csv.finalizers()
    );
    ns
}

/// The objects labelled as owned by CSV `ns/CSV`, by kind (namespaced kinds in every namespace).
async fn owned(client: &kube::Client, ns: &str) -> BTreeMap<&'static str, Vec<String>> {
    owned_by(client, ns, CSV).await
}

/// The objects labelled as owned by CSV `ns/csv`, by kind, and the bundle's Services in `ns`.
async fn owned_by(client: &kube::Client, ns: &str, csv: &str) -> BTreeMap<&'static str, Vec<String>> {
    let lp = ListParams::default()
        .labels(&format!("olm.owner={csv},olm.owner.namespace={ns},olm.owner.kind=ClusterServiceVersion"));
    async fn names<K>(api: Api<K>, lp: &ListParams) -> Vec<String>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        api.list(lp)
            .await
            .expect("list owned objects")
            .items
            .iter()
            .map(|o| {
                format!("{}{}", o.meta().namespace.as_ref().map(|n| format!("{n}/")).unwrap_or_default(), o.name_any())
            })
            .collect()
    }
    let mut out = BTreeMap::new();
    out.insert("Deployment", names(Api::<Deployment>::all(client.clone()), &lp).await);

    out.insert("Role", names(Api::<Role>::all(client.clone()), &lp).await);
    out.insert("RoleBinding", names(Api::<RoleBinding>::all(client.clone()), &lp).await);
    out.insert("ClusterRole", names(Api::<ClusterRole>::all(client.clone()), &lp).await);
    out.insert("ClusterRoleBinding", names(Api::<ClusterRoleBinding>::all(client.clone()), &lp).await);
    // The bundle's own Service carries the component label and an ownerReference, no owner labels.
    let component = ListParams::default().labels(&format!("operators.coreos.com/nginx-operator.{ns}"));
    out.insert(
        "Service",
        names(Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), ns), &component).await,
    );
    // A generated ServiceAccount is owned by reference, with the component label, as OLM makes it.
    out.insert("ServiceAccount", names(Api::<ServiceAccount>::namespaced(client.clone(), ns), &component).await);
    out
}

fn assert_all_present(what: &BTreeMap<&'static str, Vec<String>>) {
    for (kind, list) in what {
        assert!(!list.is_empty(), "the install created no {kind} labelled for the CSV: {what:?}");
    }
}

async fn all_gone(client: &kube::Client, ns: &str) -> BTreeMap<&'static str, Vec<String>> {
    eventually(&format!("every object of CSV {ns}/{CSV} deleted"), WAIT, || async {
        let o = owned(client, ns).await;
        o.values().all(|l| l.is_empty()).then_some(o)
    })
    .await
}

fn nginx_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1alpha1", "Nginx"), "nginxes")
}

async fn create_nginx(client: &kube::Client, ns: &str, name: &str, finalizers: &[&str]) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1alpha1", "kind": "Nginx", "metadata": {"name": name, "finalizers": finalizers}, "spec": {}
    }))
    .expect("nginx");
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &nginx_resource())
        .create(&PostParams::default(), &obj)
        .await
        .expect("create Nginx");
}

async fn clear_finalizers(client: &kube::Client, ns: &str, name: &str) {
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &nginx_resource())
        .patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .expect("clear Nginx finalizers");
}

async fn csv_gone(client: &kube::Client, ns: &str) {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    eventually(&format!("CSV {ns}/{CSV} gone"), WAIT, || async {
        csvs.get_opt(CSV).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// The note of an event with `reason` about CSV `ns/CSV`.
async fn event_note(client: &kube::Client, ns: &str, reason: &str) -> String {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    eventually(&format!("event {reason} on CSV {ns}/{CSV}"), WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some(reason) && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(CSV)
            })
            .and_then(|e| e.note)
    })
    .await
}

/// Waits until the Subscription `ns/nginx-operator` carries capstan's finalizer (it asks to
/// uninstall on deletion).
async fn subscription_finalizer(client: &kube::Client, ns: &str) {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    eventually("Subscription finalizer", WAIT, || async {
        subs.get("nginx-operator")
            .await
            .ok()?
            .finalizers()
            .iter()
            .any(|f| f == capstan::controller::SUBSCRIPTION_FINALIZER)
            .then_some(())
    })
    .await;
}

/// Deleting the Subscription leaves the operator installed, as in OLM, and says so; deleting the
/// CSV then removes every object it created, cluster-scoped RBAC included. CRDs and the user's
/// custom resources stay, and the Uninstalled event says what was kept.
#[test]
fn deleting_the_subscription_keeps_the_operator_and_deleting_the_csv_removes_it() {
    crate::support::run(KEEP_GROUP, 4, async {
        let client = crate::support::cluster().await;
        let catalog_ns = alone(&client, "keep").await;
        let controller = start_controller(&client, &catalog_ns.name);
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let plain = install(&client, "rm-plain", &catalog_ns.name, json!({})).await;
        create_nginx(&client, &plain.name, "users-own", &[]).await;
        let before = owned(&client, &plain.name).await;
        println!("objects of CSV {}/{CSV} before the uninstall: {before:?}", plain.name);
        assert_all_present(&before);
        Api::<Subscription>::namespaced(client.clone(), &plain.name)
            .delete("nginx-operator", &DeleteParams::default())
            .await
            .expect("delete Subscription");
        let note = event_note(&client, &plain.name, "SubscriptionDeleted").await;
        assert!(
            note.contains("stays installed") && note.contains(&format!("kubectl delete csv {CSV} -n {}", plain.name)),
            "{note}"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &plain.name);
        assert!(
            csvs.get_opt(CSV).await.expect("get CSV").is_some_and(|c| c.meta().deletion_timestamp.is_none()),
            "the CSV stays after its Subscription is deleted"
        );
        assert_eq!(owned(&client, &plain.name).await, before, "nothing is removed with the Subscription");
        csvs.delete(CSV, &DeleteParams::default()).await.expect("delete CSV");
        csv_gone(&client, &plain.name).await;
        let after = all_gone(&client, &plain.name).await;
        println!("objects of CSV {}/{CSV} after the uninstall: {after:?}", plain.name);
        assert!(crds.get_opt("nginxes.example.com").await.expect("get CRD").is_some(), "CRDs are kept by default");
        let nginxes: Api<DynamicObject> = Api::namespaced_with(client.clone(), &plain.name, &nginx_resource());
        assert!(
            nginxes.get_opt("users-own").await.expect("get Nginx").is_some(),
            "custom resources are kept by default"
        );
        let note = event_note(&client, &plain.name, "Uninstalled").await;
        assert!(note.contains("kept CRD nginxes.example.com and its 1 custom resource"), "{note}");
        controller.abort();
    })
}

/// The CSV is deleted while the controller is stopped: the finalizer keeps the CSV, nothing is
/// cleaned up meanwhile, and the cleanup happens once the controller runs again.
#[test]
fn csv_deleted_while_the_controller_is_down_is_cleaned_up_after_it_restarts() {
    crate::support::run(DOWN_GROUP, 4, async {
        let client = crate::support::cluster().await;
        let catalog_ns = alone(&client, "down").await;
        let mut controller = start_controller(&client, &catalog_ns.name);
        let down = install(&client, "rm-down", &catalog_ns.name, json!({})).await;
        let before = owned(&client, &down.name).await;
        println!("objects of CSV {}/{CSV} before the uninstall: {before:?}", down.name);
        assert_all_present(&before);
        // Without its Subscription, nothing may reinstall the CSV (OLM reinstalls a CSV deleted under a
        // live Automatic Subscription).
        Api::<Subscription>::namespaced(client.clone(), &down.name)
            .delete("nginx-operator", &DeleteParams::default())
            .await
            .expect("delete Subscription");
        stop_controller(&mut controller).await;
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &down.name);
        csvs.delete(CSV, &DeleteParams::default()).await.expect("delete CSV");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let held = csvs
            .get_opt(CSV)
            .await
            .expect("get CSV")
            .expect("the finalizer keeps the deleted CSV while the controller is down");
        assert!(held.meta().deletion_timestamp.is_some());
        let meanwhile = owned(&client, &down.name).await;
        assert_eq!(meanwhile["ClusterRole"], before["ClusterRole"], "nothing cleans up while the controller is down");
        let controller = start_controller(&client, &catalog_ns.name);
        csv_gone(&client, &down.name).await;
        let after = all_gone(&client, &down.name).await;
        println!("objects of CSV {}/{CSV} after the restart: {after:?}", down.name);
        controller.abort();
    })
}

/// Operand removal asked on the CSV: the Nginx object with a finalizer is deleted while the
/// operator still runs, and the CSV says it waits for it; the test plays the operator and
/// completes the finalizer; then the operator goes. The CRD stays (only operands were asked for).
#[test]
fn operands_asked_on_the_csv_are_deleted_while_the_operator_still_runs() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let operands = f.hold(install(&client, "rm-operands", &f.catalog_ns.name, json!({})).await);
        create_nginx(&client, &operands.name, "web", &[CLEANUP]).await;
        Api::<Subscription>::namespaced(client.clone(), &operands.name)
            .delete("nginx-operator", &DeleteParams::default())
            .await
            .expect("delete Subscription");
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &operands.name);
        csvs.patch(CSV, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {
        capstan::controller::ANNOTATION_UNINSTALL_OPERANDS: "true", capstan::controller::ANNOTATION_UNINSTALL_TIMEOUT: "90s"}}})))
        .await
        .expect("annotate CSV");
        csvs.delete(CSV, &DeleteParams::default()).await.expect("delete CSV");
        let nginxes: Api<DynamicObject> = Api::namespaced_with(client.clone(), &operands.name, &nginx_resource());
        let deps: Api<Deployment> = Api::namespaced(client.clone(), &operands.name);
        eventually("Nginx web being deleted", WAIT, || async {
            nginxes.get("web").await.ok()?.metadata.deletion_timestamp.map(|_| ())
        })
        .await;
        let dep = deps.get_opt(DEPLOYMENT).await.expect("get Deployment");
        assert!(
            dep.is_some_and(|d| d.metadata.deletion_timestamp.is_none()),
            "the operator still runs while its custom resources are deleted"
        );
        let st = eventually("CSV Deleting while it waits", WAIT, || async {
            let st = serde_json::to_value(csvs.get(CSV).await.ok()?.status?).ok()?;
            (st["phase"] == "Deleting").then_some(st)
        })
        .await;
        assert_eq!(st["reason"], "WaitingOnCleanup", "{st}");
        assert!(
            st["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("Nginx {}/web", operands.name)) && m.contains("still runs")),
            "{st}"
        );
        assert_eq!(st["cleanup"]["pendingDeletion"][0]["instances"][0]["name"], "web", "{st}");
        assert!(
            owned(&client, &operands.name).await["ClusterRole"].len() == 1,
            "the operator's RBAC stays while it finalizes"
        );
        clear_finalizers(&client, &operands.name, "web").await;
        csv_gone(&client, &operands.name).await;
        all_gone(&client, &operands.name).await;
        assert!(nginxes.get_opt("web").await.expect("get Nginx").is_none());
        assert!(
            crds.get_opt("nginxes.example.com").await.expect("get CRD").is_some(),
            "CRDs are kept unless asked for"
        );
    })
}

/// An upgrade deletes the replaced CSV: only the objects still labelled for it go, and custom
/// resources stay even though the Subscription asks for operand removal on uninstall; deleting
/// the Subscription then uninstalls, operands included.
#[test]
fn upgrade_removes_only_the_replaced_csvs_objects_and_keeps_custom_resources() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let (registry, repo, work) = (&f.registry, &f.repo, &f.work);
        let upgrade = f.hold(namespace_with_group(&client, "rm-upgrade").await);
        let upg_dir = work.path().join("upgrade-catalog");
        let upg_ref = format!("{registry}/{repo}/upgrade-catalog:latest");
        let bundle_ref = |v: &str| format!("{registry}/{repo}/nginx-operator-bundle:v{v}");
        capstan(&["catalog", "add", upg_dir.to_str().unwrap_or_default(), &bundle_ref("0.1.0")]);
        capstan(&["catalog", "push", "-q", upg_dir.to_str().unwrap_or_default(), &upg_ref]);
        upgrade_subscription(&client, &upgrade.name, &upg_ref).await;
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &upgrade.name);
        let succeeded = |csv: &'static str| {
            let csvs = csvs.clone();
            async move {
                eventually(&format!("CSV {csv} Succeeded"), WAIT, || async {
                    let st = serde_json::to_value(csvs.get(csv).await.ok()?.status?).ok()?;
                    (st["phase"] == "Succeeded").then_some(())
                })
                .await
            }
        };
        succeeded("nginx-operator.v0.1.0").await;
        create_nginx(&client, &upgrade.name, "keep", &[CLEANUP]).await;
        let old = owned_by(&client, &upgrade.name, "nginx-operator.v0.1.0").await;
        assert!(!old["ClusterRole"].is_empty() && !old["Role"].is_empty(), "{old:?}");
        capstan(&["catalog", "add", upg_dir.to_str().unwrap_or_default(), &bundle_ref("0.2.0")]);
        capstan(&["catalog", "push", "-q", upg_dir.to_str().unwrap_or_default(), &upg_ref]);
        succeeded(CSV).await;
        eventually("replaced CSV deleted", WAIT, || async {
            csvs.get_opt("nginx-operator.v0.1.0").await.ok()?.is_none().then_some(())
        })
        .await;
        let left = owned_by(&client, &upgrade.name, "nginx-operator.v0.1.0").await;
        for kind in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] {
            assert!(left[kind].is_empty(), "RBAC of the replaced CSV is removed: {left:?}");
        }
        let new = owned(&client, &upgrade.name).await;
        assert_all_present(&new);
        let keep: Api<DynamicObject> = Api::namespaced_with(client.clone(), &upgrade.name, &nginx_resource());
        assert!(
            keep.get("keep").await.expect("Nginx keep").metadata.deletion_timestamp.is_none(),
            "an upgrade never deletes custom resources"
        );
        // Uninstall it through its Subscription (the operator plays its part at once).
        clear_finalizers(&client, &upgrade.name, "keep").await;
        Api::<Subscription>::namespaced(client.clone(), &upgrade.name)
            .delete("nginx-operator", &DeleteParams::default())
            .await
            .expect("delete Subscription");
        csv_gone(&client, &upgrade.name).await;
        all_gone(&client, &upgrade.name).await;
        assert!(keep.get_opt("keep").await.expect("get Nginx").is_none(), "operands removed on uninstall");
    })
}

/// CatalogSource `upg` in `ns` for `upg_ref` (polled every 2 s) and a Subscription to its
/// nginx-operator that asks for operand removal on uninstall.
async fn upgrade_subscription(client: &kube::Client, ns: &str, upg_ref: &str) {
    create::<CatalogSource>(
        client,
        ns,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "upg", "namespace": ns},
            "spec": {"sourceType": "grpc", "image": upg_ref, "updateStrategy": {"registryPoll": {"interval": "2s"}}}
        }),
    )
    .await;
    create::<Subscription>(client, ns, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "nginx-operator", "namespace": ns, "annotations": {capstan::controller::ANNOTATION_UNINSTALL_OPERANDS: "true"}},
        "spec": {"name": "nginx-operator", "channel": "alpha", "source": "upg", "sourceNamespace": ns}
    }))
    .await;
}

/// The operator is gone first: the stuck object is reported in status with its finalizer and the
/// command that unblocks it, never patched by capstan; following the message lets the namespace
/// be deleted. Asked on the Subscription, whose deletion uninstalls.
#[test]
fn stuck_object_of_a_gone_operator_is_reported_with_the_command_that_unblocks_it() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let annotations = json!({capstan::controller::ANNOTATION_UNINSTALL_OPERANDS: "true"});
        let gone = f.hold(install(&client, "rm-gone", &f.catalog_ns.name, annotations).await);
        subscription_finalizer(&client, &gone.name).await;
        create_nginx(&client, &gone.name, "stuck", &[CLEANUP]).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &gone.name);
        subs.delete("nginx-operator", &DeleteParams::default()).await.expect("delete Subscription");
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &gone.name);
        remove_the_operator(&client, &gone.name, &csvs).await;
        let command = format!(
            r#"kubectl patch nginxes.example.com stuck -n {} --type=merge -p '{{"metadata":{{"finalizers":null}}}}'"#,
            gone.name
        );
        let st = eventually("stuck Nginx reported in the CSV status", WAIT, || async {
            let st = serde_json::to_value(csvs.get(CSV).await.ok()?.status?).ok()?;
            st["message"].as_str()?.contains(&command).then_some(st)
        })
        .await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("Nginx {}/stuck (finalizers: {CLEANUP})", gone.name))
                && message.contains("does not exist"),
            "{message}"
        );
        assert_eq!(st["phase"], "Deleting", "{st}");
        assert_eq!(st["cleanup"]["pendingDeletion"][0]["instances"][0]["name"], "stuck", "{st}");
        assert!(
            subs.get_opt("nginx-operator").await.expect("get Subscription").is_none(),
            "the Subscription is gone; its CSV carries the uninstall"
        );
        // The operator and its RBAC are removed after the report; the CSV stays to show it.
        let after = all_gone(&client, &gone.name).await;
        println!("objects of CSV {}/{CSV} while the stuck object is reported: {after:?}", gone.name);
        let nginxes: Api<DynamicObject> = Api::namespaced_with(client.clone(), &gone.name, &nginx_resource());
        tokio::time::sleep(Duration::from_secs(2)).await;
        let stuck = nginxes.get("stuck").await.expect("the stuck Nginx is still there");
        assert_eq!(stuck.finalizers(), [CLEANUP.to_string()], "capstan never clears a finalizer itself");
        assert!(
            csvs.get_opt(CSV).await.expect("get CSV").is_some(),
            "the CSV keeps the report until the object is gone"
        );
        follow_the_message(&client, &gone, &command).await;
    })
}

/// Deletes the operator's Deployment once its CSV is being deleted and waits until it is gone. A
/// Deployment deleted under a live CSV is created again from the CSV's install strategy (as OLM
/// does); under a CSV being deleted it is not, so the operator stays gone.
async fn remove_the_operator(client: &kube::Client, ns: &str, csvs: &Api<ClusterServiceVersion>) {
    eventually("the CSV being deleted", WAIT, || async {
        csvs.get(CSV).await.ok()?.metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deps.delete(DEPLOYMENT, &DeleteParams::default()).await.expect("delete the operator Deployment");
    eventually("operator Deployment gone", WAIT, || async {
        deps.get_opt(DEPLOYMENT).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// Follows the message: runs the exact `command` it gives (with the test's kubeconfig), then the
/// CSV goes and namespace `ns` can be deleted.
async fn follow_the_message(client: &kube::Client, ns: &HeldNamespace, command: &str) {
    let kubeconfig = crate::support::kubeconfig_path();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{command} --kubeconfig {}", kubeconfig.display()))
        .output()
        .expect("run kubectl");
    assert!(out.status.success(), "{command}: {}", String::from_utf8_lossy(&out.stderr));
    csv_gone(client, &ns.name).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.delete(&ns.name, &DeleteParams::default()).await.expect("delete namespace");
    eventually("namespace deleted", WAIT, || async {
        namespaces.get_opt(&ns.name).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// The operator runs but does not complete a finalizer within the timeout: the object is reported
/// with its finalizer and the unblocking command, the operator is removed, and the CSV waits
/// (with the report) until the object is gone.
#[test]
fn operand_finalizer_past_the_timeout_is_reported_and_the_operator_removed() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let slow = f.hold(install(&client, "rm-timeout", &f.catalog_ns.name, json!({
        capstan::controller::ANNOTATION_UNINSTALL_OPERANDS: "true", capstan::controller::ANNOTATION_UNINSTALL_TIMEOUT: "5s"})).await);
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &slow.name);
        subscription_finalizer(&client, &slow.name).await;
        create_nginx(&client, &slow.name, "slow", &[CLEANUP]).await;
        subs.delete("nginx-operator", &DeleteParams::default()).await.expect("delete Subscription");
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &slow.name);
        let command = format!(
            r#"kubectl patch nginxes.example.com slow -n {} --type=merge -p '{{"metadata":{{"finalizers":null}}}}'"#,
            slow.name
        );
        let st = eventually("timed-out Nginx reported in the CSV status", WAIT, || async {
            let st = serde_json::to_value(csvs.get(CSV).await.ok()?.status?).ok()?;
            st["message"].as_str()?.contains("did not complete them within 5s").then_some(st)
        })
        .await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("Nginx {}/slow (finalizers: {CLEANUP})", slow.name))
                && message.contains(&command),
            "{message}"
        );
        let note = event_note(&client, &slow.name, "OperandsStuck").await;
        assert!(note.contains(&format!("Nginx {}/slow", slow.name)), "{note}");
        all_gone(&client, &slow.name).await;
        let nginxes: Api<DynamicObject> = Api::namespaced_with(client.clone(), &slow.name, &nginx_resource());
        assert_eq!(
            nginxes.get("slow").await.expect("Nginx slow").finalizers(),
            [CLEANUP.to_string()],
            "capstan never clears a finalizer itself"
        );
        assert!(
            csvs.get_opt(CSV).await.expect("get CSV").is_some(),
            "the CSV keeps the report until the object is gone"
        );
        clear_finalizers(&client, &slow.name, "slow").await;
        csv_gone(&client, &slow.name).await;
    })
}

/// Deleting a Subscription annotated to uninstall including CRDs deletes the custom resources
/// first while the operator runs, then the operator and its RBAC, then the CRD — even when the
/// controller is down as the Subscription is deleted. Another installation of the same operator
/// keeps the CRD and its own objects; uninstalling that last one with its CRDs (asked on the CSV)
/// then deletes the CRD.
#[test]
fn crds_go_last_even_with_the_controller_down_and_only_with_the_last_installation() {
    crate::support::run(CRDS_GROUP, 4, async {
        let client = crate::support::cluster().await;
        let catalog_ns = alone(&client, "crds").await;
        let mut controller = start_controller(&client, &catalog_ns.name);
        let other = install(&client, "rm-other", &catalog_ns.name, json!({})).await;
        create_nginx(&client, &other.name, "theirs", &[]).await;
        let annotations = json!({capstan::controller::ANNOTATION_UNINSTALL_CRDS: "true"});
        let full = install(&client, "rm-full", &catalog_ns.name, annotations).await;
        create_nginx(&client, &full.name, "w1", &[CLEANUP]).await;
        create_nginx(&client, &full.name, "w2", &[CLEANUP]).await;
        subscription_finalizer(&client, &full.name).await;
        stop_controller(&mut controller).await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &full.name);
        subs.delete("nginx-operator", &DeleteParams::default()).await.expect("delete Subscription");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let nginxes: Api<DynamicObject> = Api::namespaced_with(client.clone(), &full.name, &nginx_resource());
        assert!(
            subs.get_opt("nginx-operator").await.expect("get Subscription").is_some(),
            "the finalizer keeps the Subscription while the controller is down"
        );
        assert!(nginxes.get("w1").await.expect("get w1").metadata.deletion_timestamp.is_none());
        let controller = start_controller(&client, &catalog_ns.name);
        custom_resources_go_first(&client, &full.name).await;
        csv_gone(&client, &full.name).await;
        all_gone(&client, &full.name).await;
        crd_kept_for_the_other_installation(&client, &full.name, &other.name).await;
        last_installation_takes_the_crd(&client, &other.name).await;
        controller.abort();
    })
}

/// The custom resources w1 and w2 of `ns` are deleted while the operator still runs and before
/// the CRD; the test then plays the operator and completes their finalizers.
async fn custom_resources_go_first(client: &kube::Client, ns: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let nginxes: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &nginx_resource());
    let deps: Api<Deployment> = Api::namespaced(client.clone(), ns);
    for name in ["w1", "w2"] {
        eventually(&format!("Nginx {name} being deleted"), WAIT, || async {
            nginxes.get(name).await.ok()?.metadata.deletion_timestamp.map(|_| ())
        })
        .await;
    }
    assert!(
        deps.get_opt(DEPLOYMENT)
            .await
            .expect("get Deployment")
            .is_some_and(|d| d.metadata.deletion_timestamp.is_none()),
        "the operator still runs"
    );
    assert!(
        crds.get_opt("nginxes.example.com")
            .await
            .expect("get CRD")
            .is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "the CRD waits for its objects"
    );
    for name in ["w1", "w2"] {
        clear_finalizers(client, ns, name).await;
    }
}

/// After the uninstall with CRDs of `ns`, the CRD is kept for the installation in `other`, whose
/// objects are untouched, and the Uninstalled event names it.
async fn crd_kept_for_the_other_installation(client: &kube::Client, ns: &str, other: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let note = event_note(client, ns, "Uninstalled").await;
    // Other installations of the operator in the cluster (e.g. `make demo`'s in `operators`) are
    // named too; this test's own is among them.
    assert!(
        note.contains("kept CRD nginxes.example.com because CSV") && note.contains(&format!("{other}/{CSV}")),
        "{note}"
    );
    assert!(
        crds.get_opt("nginxes.example.com")
            .await
            .expect("get CRD")
            .is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "a CRD in use elsewhere is kept"
    );
    let theirs: Api<DynamicObject> = Api::namespaced_with(client.clone(), other, &nginx_resource());
    assert!(
        theirs.get("theirs").await.expect("the other installation's object").metadata.deletion_timestamp.is_none(),
        "objects of another installation are not touched"
    );
}

/// The last installation, in `ns`, uninstalled with its CRDs (asked on the CSV): now the CRD goes,
/// unless installations outside this test (a demo on the same cluster) use it, which are named.
async fn last_installation_takes_the_crd(client: &kube::Client, ns: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    Api::<Subscription>::namespaced(client.clone(), ns)
        .delete("nginx-operator", &DeleteParams::default())
        .await
        .expect("delete Subscription");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    csvs.patch(
        CSV,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {capstan::controller::ANNOTATION_UNINSTALL_CRDS: "true"}}})),
    )
    .await
    .expect("annotate CSV");
    csvs.delete(CSV, &DeleteParams::default()).await.expect("delete CSV");
    csv_gone(client, ns).await;
    all_gone(client, ns).await;
    let foreign: Vec<String> = Api::<ClusterServiceVersion>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list CSVs")
        .items
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none() && c.metadata.name.as_deref() == Some(CSV))
        .map(|c| format!("{}/{CSV}", c.metadata.namespace.unwrap_or_default()))
        .collect();
    if foreign.is_empty() {
        eventually("CRD nginxes.example.com deleted", WAIT, || async {
            crds.get_opt("nginxes.example.com").await.ok()?.is_none().then_some(())
        })
        .await;
    } else {
        let note = event_note(client, ns, "Uninstalled").await;
        assert!(foreign.iter().all(|f| note.contains(f.as_str())), "the CRD is kept for {foreign:?}: {note}");
        assert!(crds.get_opt("nginxes.example.com").await.expect("get CRD").is_some(), "kept while {foreign:?} use it");
    }
}
