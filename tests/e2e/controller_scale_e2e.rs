//! `capstan controller` end to end with real community-operators-prod bundles that broke it at
//! full scale, copied unchanged into `tests/fixtures/community-operators-prod/`:
//!
//! - mercury-operator 1.0.2 brings strimzi-kafka-operator 0.28.0 and camel-k 1.9.0 (CSVs named
//!   `strimzi-cluster-operator.v…` and `camel-k-operator.v…`, not after their packages); each
//!   dependency gets a Subscription as OLM v0 creates it, and a second, unrelated package
//!   (automotive-infra) then installs in the same namespace: the installed dependencies do not
//!   make the namespace unresolvable.
//! - argocd-operator 0.18.0 (4 MB of manifests, one CRD of 1.1 MB as JSON) installs: its
//!   InstallPlan lists the large objects as references to the bundle image.
//! - openebs 3.0.0 ships a CRD the API server refuses (`spec.version` is not a field of
//!   `apiextensions.k8s.io/v1`): the step fails at once with the API server's message instead of
//!   being retried for the minute of transient errors.
//!
//! Pods run on kwok's fake node (they do not really start, which none of this needs). One
//! scenario per test, each in namespaces of its own (the second package installs mercury-operator
//! first itself), over one controller and one published catalog the tests share ([`fixture`]);
//! it watches every namespace, so no other group's tests run meanwhile
//! ([`crate::support::group`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::controller::*;
use crate::support::eventually;
use crate::support::group::PerGroup;
use capstan::api::{ClusterServiceVersion, InstallPlan, Subscription};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use serde_json::{Value, json};

const GROUP: &str = "controller_scale_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

fn fixture_dir(rel: &str) -> PathBuf {
    crate::support::repo_root().join("tests/fixtures/community-operators-prod").join(rel)
}

fn subscription(ns: &str, name: &str, package: &str, channel: &str, catalog_ns: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"name": package, "channel": channel, "source": "community", "sourceNamespace": catalog_ns}
    })
}

/// Subscription `ns/name` once it is AtLatestKnown with `installedCSV` = `csv`; panics on a
/// ResolutionFailed condition (such as the resolver's "the bundles installed in namespace … are
/// already inconsistent").
async fn at_latest(client: &kube::Client, ns: &str, name: &str, csv: &str) -> Subscription {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    eventually(&format!("Subscription {ns}/{name} AtLatestKnown with {csv}"), WAIT, || async {
        let s = subs.get(name).await.ok()?;
        let st = serde_json::to_value(s.status.as_ref()?).ok()?;
        if let Some(c) = st["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "ResolutionFailed" && c["status"] == "True"))
        {
            panic!("Subscription {ns}/{name} failed to resolve: {}", c["message"]);
        }
        (st["state"] == "AtLatestKnown" && st["installedCSV"] == csv).then_some(s)
    })
    .await
}

/// The controller of these tests, with the community bundles above published as one catalog,
/// CatalogSource `community` in its global catalog namespace, READY.
async fn fixture() -> std::sync::Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("ctl-scale-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            let f = ControllerFixture::start(&client, &repo, "ctl-scale-catalog", options).await;
            let bundles = [
                ("mercury-operator/1.0.2", "1.0.2"),
                ("strimzi-kafka-operator/0.28.0", "0.28.0"),
                ("camel-k/1.9.0", "1.9.0"),
                ("automotive-infra/0.0.3", "0.0.3"),
                ("argocd-operator/0.18.0", "0.18.0"),
                ("openebs/3.0.0", "3.0.0"),
            ];
            let dirs: Vec<(PathBuf, &str)> = bundles.iter().map(|(rel, v)| (fixture_dir(rel), *v)).collect();
            let list: Vec<(&std::path::Path, &str, &str)> =
                dirs.iter().map(|(d, v)| (d.as_path(), *v, "replaces")).collect();
            let catalog_ref = publish_dirs(&f.registry, &repo, "community-catalog", f.work.path(), &list);
            catalog_source(&client, &f.catalog_ns.name, "community", &catalog_ref).await;
            f
        })
        .await
}

/// Subscribes `ns` to mercury-operator (Subscription `mercury`): one plan Complete installs it
/// with its dependencies, every CSV Succeeded. Returns that plan.
async fn install_mercury(client: &kube::Client, ns: &str, catalog_ns: &str) -> InstallPlan {
    create::<Subscription>(client, ns, subscription(ns, "mercury", "mercury-operator", "stable", catalog_ns)).await;
    let plan = plan_in_phase(client, ns, "mercury", "Complete").await;
    let mut csvs = plan.spec.cluster_service_version_names.clone();
    csvs.sort();
    assert_eq!(csvs, ["camel-k-operator.v1.9.0", "mercury-operator.v1.0.2", "strimzi-cluster-operator.v0.28.0"]);
    for csv in ["mercury-operator.v1.0.2", "strimzi-cluster-operator.v0.28.0", "camel-k-operator.v1.9.0"] {
        csv_version_succeeded(client, ns, csv).await;
    }
    plan
}

/// The Subscription `plan` made for dependency `package` (CSV `csv`) in `ns`, as OLM v0 makes
/// it: named package-channel-catalog-catalogNamespace, on the channel it was resolved from,
/// starting at the installed CSV, Automatic, labelled olm.managed, annotated with the plan that
/// created it, listed as a step of that plan; its status points at the plan, then AtLatestKnown.
async fn dependency_subscribed_as_olm_does(
    client: &kube::Client,
    ns: &str,
    catalog_ns: &str,
    plan: &InstallPlan,
    (package, csv): (&str, &str),
) {
    let plan_name = plan.metadata.name.clone().unwrap_or_default();
    let steps = plan.status.as_ref().map(|s| s.plan.clone()).unwrap_or_default();
    let name = format!("{package}-stable-community-{catalog_ns}");
    let step = steps
        .iter()
        .find(|s| s.resource.kind == "Subscription" && s.resource.name == name)
        .unwrap_or_else(|| panic!("no Subscription step {name} in {plan_name}"));
    assert_eq!((step.resolving.as_str(), step.status.as_str()), (csv, "Created"));
    let sub = at_latest(client, ns, &name, csv).await;
    let spec = serde_json::to_value(&sub.spec).expect("spec");
    assert_eq!(
        spec,
        json!({"name": package, "channel": "stable", "source": "community", "sourceNamespace": catalog_ns, "startingCSV": csv, "installPlanApproval": "Automatic"})
    );
    assert_eq!(sub.metadata.labels.as_ref().and_then(|l| l.get("olm.managed")).map(String::as_str), Some("true"));
    assert_eq!(sub.metadata.annotations.as_ref().and_then(|a| a.get("olm.generated-by")), Some(&plan_name));
    let st = sub.status.expect("status");
    assert_eq!(st.current_csv.as_deref(), Some(csv));
    assert_eq!(st.install_plan_ref.and_then(|r| r.name), Some(plan_name.clone()), "points at the plan that created it");
}

/// mercury-operator with its dependencies (strimzi-kafka-operator, camel-k, whose CSVs are not
/// named after their packages), in one plan; each dependency has a Subscription as OLM v0 makes
/// it, and the requested package none of its own.
#[test]
fn mercury_operator_installs_with_its_dependencies_each_subscribed_as_olm_does() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns.name;
        let apps = f.hold(namespace_with_group(&client, "ctl-mercury").await);
        let plan = install_mercury(&client, &apps.name, catalog_ns).await;
        for dependency in
            [("strimzi-kafka-operator", "strimzi-cluster-operator.v0.28.0"), ("camel-k", "camel-k-operator.v1.9.0")]
        {
            dependency_subscribed_as_olm_does(&client, &apps.name, catalog_ns, &plan, dependency).await;
        }
        // The requested one, last step: no Subscription of its own is made for it.
        let steps = plan.status.as_ref().map(|s| s.plan.clone()).unwrap_or_default();
        assert!(!steps.iter().any(|s| s.resource.kind == "Subscription" && s.resolving == "mercury-operator.v1.0.2"));
        assert_eq!(
            steps.last().map(|s| s.resource.kind.as_str()),
            Some("Subscription"),
            "Subscriptions come after the CSVs they name"
        );
        at_latest(&client, &apps.name, "mercury", "mercury-operator.v1.0.2").await;
    })
}

/// After mercury-operator and its dependencies, a second, unrelated package (automotive-infra)
/// in the same namespace resolves and installs; the installed ones stay as they are (no second
/// plan for mercury or its dependencies).
#[test]
fn a_second_package_installs_beside_installed_dependencies() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns.name;
        let apps = f.hold(namespace_with_group(&client, "ctl-mercury-then").await);
        install_mercury(&client, &apps.name, catalog_ns).await;
        at_latest(&client, &apps.name, "mercury", "mercury-operator.v1.0.2").await;
        create::<Subscription>(
            &client,
            &apps.name,
            subscription(&apps.name, "automotive", "automotive-infra", "alpha", catalog_ns),
        )
        .await;
        plan_in_phase(&client, &apps.name, "automotive", "Complete").await;
        csv_version_succeeded(&client, &apps.name, "automotive-infra.v0.0.3").await;
        at_latest(&client, &apps.name, "automotive", "automotive-infra.v0.0.3").await;
        at_latest(&client, &apps.name, "mercury", "mercury-operator.v1.0.2").await;
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &apps.name);
        assert_eq!(
            plans.list(&Default::default()).await.expect("plans").items.len(),
            2,
            "one plan per Subscription that asked for something"
        );
    })
}

/// argocd-operator 0.18.0 (4 MB of manifests): the CRDs too large to inline are listed as
/// references to the bundle image by digest; the plan completes and the CSV is created.
#[test]
fn argocd_operator_installs_with_its_large_crds_as_bundle_image_references() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let argo = f.hold(namespace_with_global_group(&client, "ctl-argocd").await);
        create::<Subscription>(
            &client,
            &argo.name,
            subscription(&argo.name, "argocd", "argocd-operator", "alpha", &f.catalog_ns.name),
        )
        .await;
        let plan = plan_in_phase(&client, &argo.name, "argocd", "Complete").await;
        let size = serde_json::to_vec(&plan).expect("plan json").len();
        assert!(size < 1024 * 1024, "the InstallPlan stays well below etcd's 1.5 MiB: {size} bytes");
        let steps = plan.status.as_ref().map(|s| s.plan.clone()).unwrap_or_default();
        let crd = steps
            .iter()
            .find(|s| s.resource.kind == "CustomResourceDefinition" && s.resource.name == "argocds.argoproj.io")
            .expect("argocds CRD step");
        let r: Value =
            serde_json::from_str(crd.resource.manifest.as_deref().unwrap_or_default()).expect("reference JSON");
        assert_eq!(r["kind"], "BundleObject", "{r}");
        assert!(r["image"].as_str().is_some_and(|i| i.contains("argocd-operator-bundle@sha256:")), "{r}");
        assert!(r["size"].as_u64().is_some_and(|s| s > 1_000_000), "{r}");
        // Created, or Present when an earlier run on this cluster left the (cluster-scoped) CRD.
        assert!(["Created", "Present"].contains(&crd.status.as_str()), "{:?}", crd.status);
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        assert!(
            crds.get_opt("argocds.argoproj.io").await.expect("get CRD").is_some(),
            "the CRD was applied from the bundle"
        );
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &argo.name);
        assert!(csvs.get_opt("argocd-operator.v0.18.0").await.expect("get CSV").is_some(), "CSV created");
    })
}

/// openebs 3.0.0: its CRD is refused by the API server; the step fails at once (well inside the
/// 60 s in which transient errors are retried) with the API server's message, and the
/// Subscription says so.
#[test]
fn openebs_crd_the_api_server_refuses_fails_its_step_at_once() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let openebs = f.hold(namespace_with_group(&client, "ctl-openebs").await);
        let started = Instant::now();
        create::<Subscription>(
            &client,
            &openebs.name,
            subscription(&openebs.name, "openebs", "openebs", "alpha", &f.catalog_ns.name),
        )
        .await;
        let plan = eventually("openebs InstallPlan Failed", Duration::from_secs(45), || async {
            let subs: Api<Subscription> = Api::namespaced(client.clone(), &openebs.name);
            let name = subs.get("openebs").await.ok()?.status?.install_plan_ref?.name?;
            let p = Api::<InstallPlan>::namespaced(client.clone(), &openebs.name).get(&name).await.ok()?;
            (p.status.as_ref()?.phase.as_str() == "Failed").then_some(p)
        })
        .await;
        let st = plan.status.expect("status");
        let message = st.message.clone().unwrap_or_default();
        assert!(
            message.contains("CustomResourceDefinition openebsinstalltemplates.openebs.io")
                && message.contains(".spec.version: field not declared in schema"),
            "{message}"
        );
        assert!(!message.contains("failed") || !message.contains("times over"), "not retried: {message}");
        assert!(
            st.conditions.iter().all(|c| c.reason.as_ref().is_none_or(|r| r.as_str() != "InstallRetrying")),
            "{:?}",
            st.conditions
        );
        eprintln!("openebs plan failed {:?} after its Subscription was created", started.elapsed());
        let c = subscription_condition(&client, &openebs.name, "openebs", "InstallPlanFailed", "True").await;
        assert!(c["message"].as_str().is_some_and(|m| m.contains("field not declared in schema")), "{c}");
    })
}
