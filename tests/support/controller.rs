//! Helpers of the controller end-to-end tests: publishing bundles and catalogs with the `capstan`
//! binary, the `operators.coreos.com` CRDs, OperatorGroups, Subscriptions, waiting for
//! InstallPlan / CSV phases, and [`ControllerFixture`], the controller the scenario tests of one
//! group share. A controller watches every namespace, so at most one runs at a time: the tests of
//! a group share theirs and groups never overlap ([`super::group`]).

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use capstan::api::{CatalogSource, ClusterServiceVersion, InstallPlan, Subscription};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SubjectAccessReview};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{TestNamespace, eventually};

/// A controller running in-process for the scenario tests of one group, with the example bundles
/// and their catalog published, the CRDs applied and a catalog namespace: kept in a
/// [`super::group::PerGroup`] and dropped when the group ends.
///
/// The controller runs on a runtime of its own (the tests' runtimes end with each test). Dropping
/// the fixture stops it first, then deletes the cluster-scoped RBAC of the namespaces the tests
/// [`hold`](ControllerFixture::hold), then those namespaces and the catalog namespace.
pub struct ControllerFixture {
    /// Address `127.0.0.1:PORT` of the local registry.
    pub registry: String,
    /// The repository prefix the images were pushed under (`<registry>/<repo>/...`).
    pub repo: String,
    /// Scratch space; the published catalog directory is `work/catalog`.
    pub work: tempfile::TempDir,
    /// The reference of the published catalog image of the example bundles.
    pub catalog_ref: String,
    /// The controller's global catalog namespace.
    pub catalog_ns: TestNamespace,
    /// What this fixture's controller alone recorded (not the process's global metrics, which
    /// every controller that ran before it in the test binary also recorded into).
    pub metrics: std::sync::Arc<capstan::metrics::Metrics>,
    runtime: Option<tokio::runtime::Runtime>,
    held: Mutex<Vec<TestNamespace>>,
}

/// The name of a namespace a [`ControllerFixture`] holds until the group ends.
pub struct HeldNamespace {
    /// The namespace name.
    pub name: String,
}

impl ControllerFixture {
    /// Publishes the example bundles and a catalog of them under repository `repo`, applies the
    /// CRDs, creates the catalog namespace (`catalog_prefix-...`) and starts the controller with
    /// `options` (its `global_catalog_namespace` set to that namespace) and the admin
    /// configuration, so that scoped installs work.
    pub async fn start(
        client: &kube::Client,
        repo: &str,
        catalog_prefix: &str,
        options: capstan::controller::Options,
    ) -> ControllerFixture {
        // The controller's log goes to the test's output (shown when the test fails).
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "capstan=info".into()),
            )
            .try_init();
        let registry = super::registry();
        let work = tempfile::tempdir().expect("tempdir");
        let catalog_ref = publish(&registry, repo, work.path());
        apply_crds(client).await;
        let catalog_ns = TestNamespace::new(client, catalog_prefix).await;
        let options = capstan::controller::Options { global_catalog_namespace: catalog_ns.name.clone(), ..options };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("controller runtime");
        let metrics = std::sync::Arc::new(capstan::metrics::Metrics::new());
        let recorded = metrics.clone();
        runtime.spawn(async move {
            // The admin configuration, as `capstan controller` has one: scoped installs (an
            // OperatorGroup's spec.serviceAccountName) impersonate through it. Its client is made
            // on this runtime: a kube client lives on the runtime that made it.
            let config = super::admin_config().await;
            capstan::controller::run_with_metrics(config, options, recorded, std::future::pending()).await
        });
        ControllerFixture {
            registry,
            repo: repo.to_string(),
            work,
            catalog_ref,
            catalog_ns,
            metrics,
            runtime: Some(runtime),
            held: Mutex::new(Vec::new()),
        }
    }

    /// Keeps `ns` until the group ends: it is deleted, and its cluster-scoped RBAC too, after
    /// the controller has stopped (as when the scenarios were one test function).
    pub fn hold(&self, ns: TestNamespace) -> HeldNamespace {
        let name = ns.name.clone();
        self.held.lock().unwrap_or_else(|e| e.into_inner()).push(ns);
        HeldNamespace { name }
    }
}

impl Drop for ControllerFixture {
    fn drop(&mut self) {
        let runtime = self.runtime.take();
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|e| e.into_inner()));
        // On a thread of its own: the fixture can be dropped inside a test's runtime (also while a
        // failed setup unwinds), where a runtime can be neither shut down nor started, and a
        // second panic there would abort the whole test binary.
        let cleaned = std::thread::spawn(move || {
            if let Some(runtime) = runtime {
                runtime.shutdown_timeout(Duration::from_secs(30));
            }
            let names: Vec<String> = held.iter().map(|ns| ns.name.clone()).collect();
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
                rt.block_on(async {
                    let client = super::cluster().await;
                    cleanup_cluster_rbac(&client, &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
                });
            }
            drop(held);
        })
        .join();
        if cleaned.is_err() && !std::thread::panicking() {
            panic!("cleaning up after the controller fixture failed (see the panic above)");
        }
    }
}

/// Whether ServiceAccount `ns/sa` may `verb` `group/resource` (in `in_ns`, or cluster-wide).
pub async fn allowed(
    client: &kube::Client,
    ns: &str,
    sa: &str,
    verb: &str,
    group: &str,
    resource: &str,
    in_ns: Option<&str>,
) -> bool {
    let mut attrs = json!({"verb": verb, "group": group, "resource": resource});
    if let Some(n) = in_ns {
        attrs["namespace"] = json!(n);
    }
    let sar: SubjectAccessReview = serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": format!("system:serviceaccount:{ns}:{sa}"),
                 "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
                 "resourceAttributes": attrs}
    }))
    .expect("sar");
    let r = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &sar)
        .await
        .expect("SubjectAccessReview");
    r.status.map(|s| s.allowed).unwrap_or(false)
}

/// Deletes the generated cluster-scoped RBAC of the test namespaces (labelled `olm.owner.namespace`).
pub async fn cleanup_cluster_rbac(client: &kube::Client, namespaces: &[&str]) {
    for ns in namespaces {
        let sel = ListParams::default().labels(&format!("olm.owner.namespace={ns}"));
        let _ = Api::<ClusterRoleBinding>::all(client.clone()).delete_collection(&DeleteParams::default(), &sel).await;
        let _ = Api::<ClusterRole>::all(client.clone()).delete_collection(&DeleteParams::default(), &sel).await;
    }
}

pub const WAIT: Duration = Duration::from_secs(120);

pub fn capstan(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_capstan")).args(args).output().expect("run capstan");
    assert!(
        out.status.success(),
        "capstan {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Pushes every bundle under `bundles/` and a catalog of them; returns the catalog reference.
pub fn publish(registry: &str, repo: &str, work: &Path) -> String {
    let catalog_dir = work.join("catalog");
    let root = super::repo_root().join("bundles");
    for pkg in ["nginx-operator", "kaiwudb-operator"] {
        let mut versions: Vec<_> = std::fs::read_dir(root.join(pkg))
            .expect("bundles dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        versions.sort();
        for dir in versions {
            let ver = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            let reference = format!("{registry}/{repo}/{pkg}-bundle:v{ver}");
            capstan(&["bundle", "push", "-q", dir.to_str().unwrap_or_default(), &reference]);
            capstan(&["catalog", "add", catalog_dir.to_str().unwrap_or_default(), &reference]);
        }
    }
    let catalog_ref = format!("{registry}/{repo}/catalog:latest");
    capstan(&["catalog", "push", "-q", catalog_dir.to_str().unwrap_or_default(), &catalog_ref]);
    catalog_ref
}

pub async fn apply_crds(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in capstan::api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &PatchParams::apply("capstan-test").force(), &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("apply CRD {name}: {e}"));
        eventually(&format!("CRD {name} Established"), Duration::from_secs(30), || async {
            let c = api.get(&name).await.ok()?;
            c.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
        })
        .await;
    }
}

pub async fn create<K>(client: &kube::Client, ns: &str, v: Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(v).expect("test object");
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {}: {e}", K::kind(&())))
}

pub async fn namespace_with_group(client: &kube::Client, prefix: &str) -> TestNamespace {
    let ns = TestNamespace::new(client, prefix).await;
    let og: capstan::api::OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": ns.name}, "spec": {"targetNamespaces": [ns.name]}
    }))
    .expect("og");
    Api::<capstan::api::OperatorGroup>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &og)
        .await
        .expect("create OperatorGroup");
    ns
}

pub async fn subscribe(client: &kube::Client, ns: &str, package: &str, catalog_ns: &str, approval: &str) {
    subscribe_channel(client, ns, package, "alpha", catalog_ns, approval).await;
}

pub async fn subscribe_channel(
    client: &kube::Client,
    ns: &str,
    package: &str,
    channel: &str,
    catalog_ns: &str,
    approval: &str,
) {
    create::<Subscription>(client, ns, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": package, "namespace": ns},
        "spec": {"name": package, "channel": channel, "source": "examples", "sourceNamespace": catalog_ns, "installPlanApproval": approval}
    }))
    .await;
}

/// The Subscription's InstallPlan once it has reached `phase`.
pub async fn plan_in_phase(client: &kube::Client, ns: &str, sub: &str, phase: &str) -> InstallPlan {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    eventually(&format!("InstallPlan of {ns}/{sub} in phase {phase}"), WAIT, || async {
        let s = subs.get(sub).await.ok()?;
        let name = s.status?.install_plan_ref?.name?;
        let p = plans.get(&name).await.ok()?;
        let st = serde_json::to_value(p.status.as_ref()?).ok()?;
        if st["phase"] == "Failed" && phase != "Failed" {
            panic!("InstallPlan {ns}/{name} failed: {}", st["message"]);
        }
        (st["phase"] == phase).then_some(p)
    })
    .await
}

pub async fn csv_succeeded_and_deployment_available(client: &kube::Client, ns: &str) {
    csv_version_succeeded(client, ns, "nginx-operator.v0.2.0").await;
}

pub async fn csv_version_succeeded(client: &kube::Client, ns: &str, csv: &str) {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    eventually(&format!("CSV {ns}/{csv} Succeeded"), WAIT, || async {
        let c = csvs.get(csv).await.ok()?;
        let st = serde_json::to_value(c.status.as_ref()?).ok()?;
        (st["phase"] == "Succeeded").then_some(())
    })
    .await;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let list = deps.list(&ListParams::default().labels(&format!("olm.owner={csv}"))).await.expect("list deployments");
    assert!(!list.items.is_empty(), "no Deployment of CSV {csv} (label olm.owner) in {ns}");
    for d in list.items {
        let ok = d
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
        assert!(ok, "Deployment {:?} not Available although the CSV Succeeded", d.metadata.name);
    }
}

/// Creates CatalogSource `ns/name` for `image` (sourceType grpc, as users write it for OLM) and
/// waits until it is READY.
pub async fn catalog_source(client: &kube::Client, ns: &str, name: &str, image: &str) {
    create::<CatalogSource>(
        client,
        ns,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"sourceType": "grpc", "image": image, "updateStrategy": {"registryPoll": {"interval": "10m"}}}
        }),
    )
    .await;
    let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), ns);
    eventually(&format!("CatalogSource {ns}/{name} READY"), WAIT, || async {
        let st = serde_json::to_value(catalogs.get(name).await.ok()?.status?).ok()?;
        (st["connectionState"]["lastObservedState"] == "READY").then_some(())
    })
    .await;
}

/// Pushes each bundle directory to `<registry>/<repo>/<package>-bundle:v<version>` and adds it
/// to a catalog with the given `catalog add --mode` (`replaces` or `semver`); pushes the catalog
/// to `<registry>/<repo>/<catalog>:latest` and returns that reference.
pub fn publish_dirs(registry: &str, repo: &str, catalog: &str, work: &Path, bundles: &[(&Path, &str, &str)]) -> String {
    let catalog_dir = work.join(catalog);
    for (dir, version, mode) in bundles {
        let package = dir.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or("bundle");
        let reference = format!("{registry}/{repo}/{package}-bundle:v{version}");
        capstan(&["bundle", "push", "-q", dir.to_str().unwrap_or_default(), &reference]);
        capstan(&["catalog", "add", "--mode", mode, catalog_dir.to_str().unwrap_or_default(), &reference]);
    }
    let catalog_ref = format!("{registry}/{repo}/{catalog}:latest");
    capstan(&["catalog", "push", "-q", catalog_dir.to_str().unwrap_or_default(), &catalog_ref]);
    catalog_ref
}

/// As [`publish_dirs`] for one bundle directory, but as a hostile publisher would, with no
/// validation: the bundle image is built and pushed and the catalog written and pushed through
/// the library (`capstan bundle push` and `catalog add` refuse what `bundle validate` refuses,
/// and the controller must refuse it again). Returns the catalog reference.
pub async fn publish_unvalidated(registry: &str, repo: &str, catalog: &str, work: &Path, dir: &Path) -> String {
    use capstan::catalog::add::{AddInput, AddOptions, add_to_dir};
    let oci = capstan::oci::Registry::new(capstan::oci::ClientConfig { quiet: true, ..Default::default() });
    let bundle = capstan::bundle::Bundle::load(dir).expect("load bundle");
    let info = capstan::bundle::render::render_info(&bundle);
    let reference = format!("{registry}/{repo}/{}-bundle:v{}", info.package, info.version);
    let parsed = capstan::oci::parse_reference(&reference).expect("reference");
    capstan::bundle::image::push_bundle(&oci, dir, &parsed).await.expect("push bundle image");
    let blob = capstan::bundle::render::render_bundle(&bundle, &reference).expect("render bundle");
    let catalog_dir = work.join(catalog);
    let input = AddInput {
        bundle: blob,
        replaces: info.replaces,
        skips: info.skips,
        skip_range: info.skip_range,
        channels: info.channels,
        default_channel: info.default_channel,
    };
    add_to_dir(&catalog_dir, input, &AddOptions::default()).expect("add to catalog");
    let catalog_ref = format!("{registry}/{repo}/{catalog}:latest");
    capstan(&["catalog", "push", "-q", catalog_dir.to_str().unwrap_or_default(), &catalog_ref]);
    catalog_ref
}

/// Creates a namespace with an OperatorGroup targeting all namespaces (no targetNamespaces).
pub async fn namespace_with_global_group(client: &kube::Client, prefix: &str) -> TestNamespace {
    let ns = TestNamespace::new(client, prefix).await;
    let og: capstan::api::OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "global", "namespace": ns.name}, "spec": {}
    }))
    .expect("og");
    Api::<capstan::api::OperatorGroup>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &og)
        .await
        .expect("create OperatorGroup");
    ns
}

/// The condition `type_` of Subscription `ns/name` once it has status `value`.
pub async fn subscription_condition(client: &kube::Client, ns: &str, name: &str, type_: &str, value: &str) -> Value {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    eventually(&format!("Subscription {ns}/{name} condition {type_}={value}"), WAIT, || async {
        let st = serde_json::to_value(subs.get(name).await.ok()?.status?).ok()?;
        st["conditions"].as_array()?.iter().find(|c| c["type"] == type_ && c["status"] == value).cloned()
    })
    .await
}

/// A token of ServiceAccount `ns/sa` from the TokenRequest API (one hour), as its pods get one.
pub async fn sa_token(client: &kube::Client, ns: &str, sa: &str) -> String {
    let tr: TokenRequest = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": 3600}
    }))
    .expect("token request");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let tr = sas
        .create_token_request(sa, &PostParams::default(), &tr)
        .await
        .unwrap_or_else(|e| panic!("TokenRequest for {ns}/{sa}: {e}"));
    tr.status.and_then(|s| s.token).expect("token")
}

/// Whether the client may `verb` `group/resource[/subresource]` (in `ns`, or cluster-wide).
pub async fn can(client: &kube::Client, verb: &str, group: &str, resource: &str, ns: Option<&str>) -> bool {
    let (resource, sub) = resource.split_once('/').map(|(r, s)| (r, Some(s))).unwrap_or((resource, None));
    let ssar: SelfSubjectAccessReview = serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource, "subresource": sub, "namespace": ns}}
    }))
    .expect("ssar");
    let r = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &ssar)
        .await
        .expect("SelfSubjectAccessReview");
    r.status.map(|s| s.allowed).unwrap_or(false)
}

/// Deletes OperatorGroup `ns/group` and waits until it is gone, so that a later install of the same
/// operator elsewhere does not intersect it (two intersecting groups providing one API are an
/// InterOperatorGroupOwnerConflict, as in OLM). What it installed stays (its CSVs are Failed
/// `NoOperatorGroup`).
pub async fn release_group(client: &kube::Client, ns: &str, group: &str) {
    let groups: Api<capstan::api::OperatorGroup> = Api::namespaced(client.clone(), ns);
    groups.delete(group, &kube::api::DeleteParams::default()).await.expect("delete OperatorGroup");
    eventually(&format!("OperatorGroup {ns}/{group} gone"), WAIT, || async {
        groups.get_opt(group).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// The turns of [`GroupTurn`]: the tests of one group at a time use them ([`super::group`]).
static TURNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A scenario's turn at installing an operator that other scenarios of its group install too, in
/// OperatorGroups that intersect (kaiwudb-operator, and nginx-operator with it, in AllNamespaces
/// groups): two such groups providing the same APIs at once are an InterOperatorGroupOwnerConflict,
/// as in OLM, so those scenarios take turns. [`GroupTurn::release`] ends a turn by deleting the
/// scenario's OperatorGroup ([`release_group`]); a scenario that fails before it has its group
/// deleted when the turn is dropped, so that its failure does not fail the next one for a conflict.
pub struct GroupTurn {
    ns: String,
    group: String,
    released: bool,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl GroupTurn {
    /// Waits until no other scenario has a turn; the scenario's OperatorGroup is `ns/group`.
    pub async fn take(ns: &str, group: &str) -> GroupTurn {
        let turn = TURNS.lock().await;
        GroupTurn { ns: ns.to_string(), group: group.to_string(), released: false, _turn: turn }
    }

    /// Deletes the scenario's OperatorGroup and waits until it is gone; then the next scenario goes.
    pub async fn release(mut self, client: &kube::Client) {
        release_group(client, &self.ns, &self.group).await;
        self.released = true;
    }
}

impl Drop for GroupTurn {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let (ns, group) = (self.ns.clone(), self.group.clone());
        // Drop cannot await, and the test's runtime may be unwinding: on a short-lived runtime of
        // its own, on another thread (as TestNamespace deletes its namespace). The turn passes on
        // once the group is gone.
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
                rt.block_on(async { release_group(&super::cluster().await, &ns, &group).await });
            }
        })
        .join();
    }
}

/// Copies a corpus bundle directory into `to`, replacing the `oci://` scheme of its
/// `spec.relatedImages` entries: kuadrant-operator lists `oci://quay.io/kuadrant/wasm-shim:…`
/// there, which is not an image pull spec — opm v1.74.0 and capstan both refuse such a catalog
/// (tests/it/catalog_add_corpus.rs) — so the test publishes it the way a catalog maintainer would
/// after fixing that entry. Nothing else changes.
pub fn copy_bundle(from: &Path, to: &Path) {
    for entry in walk(from) {
        let rel = entry.strip_prefix(from).expect("inside");
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        let bytes = std::fs::read(&entry).expect("read corpus file");
        let text = String::from_utf8_lossy(&bytes);
        let fixed = if rel.to_string_lossy().contains("clusterserviceversion") {
            text.replace("- image: oci://", "- image: ")
        } else {
            text.into_owned()
        };
        std::fs::write(&dest, fixed).expect("write");
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}
