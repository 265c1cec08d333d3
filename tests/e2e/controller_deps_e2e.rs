//! `capstan controller` end to end, part two: dependencies from real corpus data
//! (kuadrant-operator), an operator with cluster-scoped RBAC (kaiwudb-operator, which also depends
//! on nginx-operator) with Subscription `spec.config`, bad input that must end in a condition
//! saying what is wrong without disturbing what else runs in the namespace, and scoped installs
//! (an OperatorGroup's `spec.serviceAccountName`, case-25 of `olm-cases.yaml`: missing permissions
//! are listed before any step).
//!
//! One scenario per test, each in namespaces of its own, over one controller the tests share
//! ([`fixture`]), which runs with the admin configuration so that scoped installs work; it
//! watches every namespace, so no other group's tests run meanwhile ([`crate::support::group`]).
//! The scenarios that subscribe to nginx-operator (also as kaiwudb-operator's dependency) take
//! turns, each deleting its OperatorGroup at the end of its turn ([`GroupTurn`]): an AllNamespaces
//! group providing Nginx intersects every other group that provides it, which is an
//! InterOperatorGroupOwnerConflict (as in OLM).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::support::controller::*;
use crate::support::eventually;
use crate::support::group::PerGroup;
use capstan::api::{ClusterServiceVersion, InstallPlan};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const GROUP: &str = "controller_deps_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

/// The controller of these tests, with two CatalogSources READY in its global catalog namespace:
/// `examples` (the example bundles) and `corpus`, corpus bundles published by capstan:
/// kuadrant-operator and several versions of each of its dependencies, so that the required
/// versions (not the channel heads) must be chosen.
async fn fixture() -> Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("ctl-deps-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            let f = ControllerFixture::start(&client, &repo, "ctl-deps-catalog", options).await;
            let corpus_ref = publish_corpus(&f.registry, &f.repo, f.work.path());
            catalog_source(&client, &f.catalog_ns.name, "corpus", &corpus_ref).await;
            catalog_source(&client, &f.catalog_ns.name, "examples", &f.catalog_ref).await;
            f
        })
        .await
}

/// Publishes the corpus catalog of [`fixture`] under `work`; returns its reference.
fn publish_corpus(registry: &str, repo: &str, work: &Path) -> String {
    let corpus = crate::support::shared_dir().join("corpus/community-operators-prod/operators");
    let picks = [
        ("authorino-operator", "0.12.0", "replaces"),
        ("authorino-operator", "0.13.0", "replaces"),
        ("authorino-operator", "0.13.1", "replaces"),
        ("authorino-operator", "0.14.0", "replaces"),
        ("limitador-operator", "0.10.0", "semver"),
        ("limitador-operator", "0.11.0", "semver"),
        ("dns-operator", "0.2.0", "semver"),
        ("dns-operator", "0.6.0", "semver"),
        ("kuadrant-operator", "0.10.0", "semver"),
        ("kuadrant-operator", "0.11.1", "semver"),
    ];
    let copies = work.join("bundles");
    let mut dirs = Vec::new();
    for (pkg, ver, mode) in picks {
        let to = copies.join(pkg).join(ver);
        copy_bundle(&corpus.join(pkg).join(ver), &to);
        dirs.push((to, ver, mode));
    }
    let list: Vec<(&Path, &str, &str)> = dirs.iter().map(|(d, v, m)| (d.as_path(), *v, *m)).collect();
    publish_dirs(registry, repo, "corpus-catalog", work, &list)
}

/// kuadrant-operator brings authorino 0.13.0, limitador 0.11.0 and dns 0.6.0 (the versions its
/// bundle requires), in one InstallPlan, each CSV Succeeded.
#[test]
fn kuadrant_brings_its_dependencies_at_the_required_versions_in_one_plan() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let kuadrant = f.hold(namespace_with_global_group(&client, "ctl-kuadrant").await);
        create::<capstan::api::Subscription>(&client, &kuadrant.name, json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "kuadrant", "namespace": kuadrant.name},
            "spec": {"name": "kuadrant-operator", "channel": "stable", "source": "corpus", "sourceNamespace": f.catalog_ns.name}
        }))
        .await;
        let plan = plan_in_phase(&client, &kuadrant.name, "kuadrant", "Complete").await;
        let mut names = plan.spec.cluster_service_version_names.clone();
        names.sort();
        let expected = [
            "authorino-operator.v0.13.0",
            "dns-operator.v0.6.0",
            "kuadrant-operator.v0.11.1",
            "limitador-operator.v0.11.0",
        ];
        assert_eq!(names, expected, "one plan with kuadrant and its three dependencies at the required versions");
        let lookups = plan.status.as_ref().map(|s| s.bundle_lookups.clone()).unwrap_or_default();
        let kl = lookups.iter().find(|l| l.identifier == "kuadrant-operator.v0.11.1").expect("kuadrant lookup");
        let props = kl.properties.clone().unwrap_or_default();
        assert!(
            props.contains("olm.package.required") && props.contains("authorino-operator") && props.contains("olm.gvk"),
            "bundle lookup properties: {props}"
        );
        for csv in expected {
            csv_version_succeeded(&client, &kuadrant.name, csv).await;
        }
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &kuadrant.name);
        assert_eq!(
            plans.list(&Default::default()).await.expect("plans").items.len(),
            1,
            "dependencies come in the same plan"
        );
    })
}

/// Installs kaiwudb-operator (AllNamespaces; it depends on nginx-operator) in `ns` from the
/// `examples` catalog, with a Subscription `spec.config`, and waits until both CSVs Succeeded.
async fn install_kaiwudb_with_config(client: &kube::Client, ns: &str, catalog_ns: &str) {
    create::<capstan::api::Subscription>(client, ns, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "kaiwudb-operator", "namespace": ns},
        "spec": {"name": "kaiwudb-operator", "channel": "stable", "source": "examples", "sourceNamespace": catalog_ns,
                 "config": {
                     "env": [{"name": "LOG_LEVEL", "value": "debug"}],
                     "resources": {"limits": {"memory": "256Mi"}, "requests": {"cpu": "50m"}},
                     "nodeSelector": {"kubernetes.io/os": "linux"},
                     "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]
                 }}
    }))
    .await;
    plan_in_phase(client, ns, "kaiwudb-operator", "Complete").await;
    csv_version_succeeded(client, ns, "kaiwudb-operator.v1.2.0").await;
    csv_version_succeeded(client, ns, "nginx-operator.v0.2.0").await;
}

/// kaiwudb-operator (AllNamespaces) gets its cluster-scoped RBAC, and not more; its CRD's schema
/// is enforced; its Subscription's spec.config lands in its Deployment and not in its
/// dependency's.
#[test]
fn kaiwudb_gets_cluster_rbac_and_its_subscription_config() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let kaiwu = f.hold(namespace_with_global_group(&client, "ctl-kaiwu").await);
        let turn = GroupTurn::take(&kaiwu.name, "global").await;
        install_kaiwudb_with_config(&client, &kaiwu.name, &f.catalog_ns.name).await;
        let by_owner = ListParams::default()
            .labels(&format!("olm.owner=kaiwudb-operator.v1.2.0,olm.owner.namespace={}", kaiwu.name));
        let crs = Api::<ClusterRole>::all(client.clone()).list(&by_owner).await.expect("clusterroles");
        let crbs = Api::<ClusterRoleBinding>::all(client.clone()).list(&by_owner).await.expect("clusterrolebindings");
        assert!(
            !crs.items.is_empty() && !crbs.items.is_empty(),
            "ClusterRole and ClusterRoleBinding of kaiwudb-operator"
        );
        let sa = "kaiwudb-operator-controller-manager";
        assert!(
            allowed(&client, &kaiwu.name, sa, "create", "apps", "statefulsets", Some("some-other-namespace")).await,
            "cluster-wide statefulsets from clusterPermissions"
        );
        assert!(!allowed(&client, &kaiwu.name, sa, "delete", "", "nodes", None).await, "nothing beyond the CSV");
        let kwc = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kaiwu.inspur.com", "v1", "KaiwuCluster"),
            "kaiwuclusters",
        );
        let kapi = Api::<DynamicObject>::namespaced_with(client.clone(), &kaiwu.name, &kwc);
        let good: DynamicObject = serde_json::from_value(json!({"apiVersion": "kaiwu.inspur.com/v1", "kind": "KaiwuCluster", "metadata": {"name": "db"}, "spec": {"replicas": 3, "version": "2.2.0"}})).expect("kwc");
        kapi.create(&PostParams::default(), &good).await.expect("a KaiwuCluster object is accepted");
        let bad: DynamicObject = serde_json::from_value(json!({"apiVersion": "kaiwu.inspur.com/v1", "kind": "KaiwuCluster", "metadata": {"name": "bad"}, "spec": {"replicas": 0, "version": "x"}})).expect("kwc");
        assert!(kapi.create(&PostParams::default(), &bad).await.is_err(), "the CRD's schema is enforced");
        subscription_config_in_the_deployment(&client, &kaiwu.name).await;
        turn.release(&client).await;
    })
}

/// kaiwudb-operator's Deployment in `ns` has its Subscription's spec.config; nginx-operator's
/// (its dependency) does not.
async fn subscription_config_in_the_deployment(client: &kube::Client, ns: &str) {
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let d = deploys
        .list(&ListParams::default().labels("olm.owner=kaiwudb-operator.v1.2.0"))
        .await
        .expect("deployments")
        .items
        .into_iter()
        .next()
        .expect("kaiwudb Deployment");
    let pod = d.spec.and_then(|s| s.template.spec).expect("pod spec");
    let c = &pod.containers[0];
    assert!(
        c.env.iter().flatten().any(|e| e.name == "LOG_LEVEL" && e.value.as_deref() == Some("debug")),
        "spec.config env: {:?}",
        c.env
    );
    let limits = c.resources.as_ref().and_then(|r| r.limits.clone()).unwrap_or_default();
    assert_eq!(limits.get("memory").map(|q| q.0.as_str()), Some("256Mi"), "spec.config resources");
    assert_eq!(
        pod.node_selector.unwrap_or_default().get("kubernetes.io/os").map(String::as_str),
        Some("linux"),
        "spec.config nodeSelector"
    );
    assert!(pod.tolerations.iter().flatten().any(|t| t.key.as_deref() == Some("dedicated")), "spec.config tolerations");
    // The dependency's Deployment does not get kaiwudb's Subscription config.
    let n = deploys
        .list(&ListParams::default().labels("olm.owner=nginx-operator.v0.2.0"))
        .await
        .expect("deployments")
        .items
        .into_iter()
        .next()
        .expect("nginx Deployment");
    let nc = n.spec.and_then(|s| s.template.spec).map(|p| p.containers[0].clone()).expect("nginx container");
    assert!(!nc.env.iter().flatten().any(|e| e.name == "LOG_LEVEL"), "config stays with its own package");
}

/// Bad input next to a healthy install (kaiwudb-operator) in the same namespace — a package, a
/// channel, a catalog or a catalog image that does not exist: each ends in a condition that says
/// what is wrong and what to do, with no InstallPlan; the installed operators stay Succeeded and
/// their Subscription AtLatestKnown.
#[test]
fn bad_subscriptions_say_what_is_wrong_and_disturb_nothing_beside_them() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let kaiwu = f.hold(namespace_with_global_group(&client, "ctl-kaiwu-bad").await);
        let turn = GroupTurn::take(&kaiwu.name, "global").await;
        install_kaiwudb_with_config(&client, &kaiwu.name, &catalog_ns.name).await;
        let bad_sub = |name: &str, package: &str, channel: &str, source: &str| {
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": name, "namespace": kaiwu.name},
                "spec": {"name": package, "channel": channel, "source": source, "sourceNamespace": catalog_ns.name}
            })
        };
        for (name, package, channel, source) in [
            ("no-package", "no-such-operator", "stable", "examples"),
            ("no-channel", "nginx-operator", "no-such-channel", "examples"),
            ("no-catalog", "nginx-operator", "alpha", "no-such-catalog"),
        ] {
            create::<capstan::api::Subscription>(&client, &kaiwu.name, bad_sub(name, package, channel, source)).await;
        }
        create::<capstan::api::CatalogSource>(
            &client,
            &catalog_ns.name,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "gone", "namespace": catalog_ns.name},
                "spec": {"sourceType": "grpc", "image": format!("{}/{}/no-such-image:latest", f.registry, f.repo)}
            }),
        )
        .await;
        create::<capstan::api::Subscription>(
            &client,
            &kaiwu.name,
            bad_sub("no-image", "nginx-operator", "alpha", "gone"),
        )
        .await;
        bad_subscriptions_say_why(&client, &kaiwu.name, &catalog_ns.name).await;
        nothing_else_broke(&client, &kaiwu.name).await;
        turn.release(&client).await;
    })
}

/// The conditions of the bad Subscriptions of `ns` name what is missing.
async fn bad_subscriptions_say_why(client: &kube::Client, ns: &str, catalog_ns: &str) {
    let c = subscription_condition(client, ns, "no-package", "ResolutionFailed", "True").await;
    let m = c["message"].as_str().unwrap_or_default();
    assert!(m.contains("no-such-operator") && m.contains(&format!("{catalog_ns}/examples")), "missing package: {m}");
    let c = subscription_condition(client, ns, "no-channel", "ResolutionFailed", "True").await;
    let m = c["message"].as_str().unwrap_or_default();
    assert!(
        m.contains("no-such-channel") && m.contains("alpha"),
        "missing channel names it and the channels there are: {m}"
    );
    let c = subscription_condition(client, ns, "no-catalog", "ResolutionFailed", "True").await;
    let m = c["message"].as_str().unwrap_or_default();
    assert!(m.contains("no-such-catalog") && m.contains("CatalogSource"), "missing catalog: {m}");
    let c = subscription_condition(client, ns, "no-image", "ResolutionFailed", "True").await;
    let m = c["message"].as_str().unwrap_or_default();
    assert!(m.contains("no-such-image") && m.contains("gone"), "missing catalog image: {m}");
    let c = subscription_condition(client, ns, "no-image", "CatalogSourcesUnhealthy", "True").await;
    // OLM's words for the Subscription's own catalog (the cause is in ResolutionFailed above).
    assert_eq!(c["message"], format!("targeted catalogsource {catalog_ns}/gone unhealthy").as_str(), "{c}");
}

/// Nothing else in `ns` broke: no plan for the bad Subscriptions, the installed CSVs stay
/// Succeeded and their Subscription stays AtLatestKnown.
async fn nothing_else_broke(client: &kube::Client, ns: &str) {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    assert_eq!(
        plans.list(&Default::default()).await.expect("plans").items.len(),
        1,
        "no InstallPlan for the bad Subscriptions"
    );
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    for csv in ["kaiwudb-operator.v1.2.0", "nginx-operator.v0.2.0"] {
        let st = serde_json::to_value(csvs.get(csv).await.expect("csv").status).expect("status");
        assert_eq!(st["phase"], "Succeeded", "{csv}: {st}");
    }
    let subs: Api<capstan::api::Subscription> = Api::namespaced(client.clone(), ns);
    eventually("kaiwudb Subscription AtLatestKnown", WAIT, || async {
        let st = serde_json::to_value(subs.get("kaiwudb-operator").await.ok()?.status?).ok()?;
        (st["state"] == "AtLatestKnown").then_some(())
    })
    .await;
}

/// Creates OperatorGroup `og` in `ns`, targeting `ns`, whose installs run as ServiceAccount `sa`.
async fn scoped_group(client: &kube::Client, ns: &str, sa: &str) {
    let og: capstan::api::OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og", "namespace": ns}, "spec": {"targetNamespaces": [ns], "serviceAccountName": sa}
    }))
    .expect("og");
    Api::<capstan::api::OperatorGroup>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &og)
        .await
        .expect("create OperatorGroup");
}

/// Grants ServiceAccount `ns/installer` `rules` through ClusterRole and ClusterRoleBinding `name`,
/// both labelled `capstan-test=<ns>`.
async fn grant(client: &kube::Client, ns: &str, name: &str, rules: serde_json::Value) {
    let cr: ClusterRole =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"capstan-test": ns}}, "rules": rules}))
            .expect("cr");
    Api::<ClusterRole>::all(client.clone()).create(&PostParams::default(), &cr).await.expect("create ClusterRole");
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"capstan-test": ns}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}]
    }))
    .expect("crb");
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &crb)
        .await
        .expect("create ClusterRoleBinding");
}

/// A scoped install (OperatorGroup spec.serviceAccountName) whose ServiceAccount lacks three
/// permissions fails before any step and lists all three; once they are granted the same plan
/// goes through, applied as that ServiceAccount — except the CRD, which capstan applies with its
/// own identity as OLM v0.46.0's `ExecutePlan` does
/// (`pkg/controller/operators/catalog/operator.go`): the ServiceAccount holds no rights on CRDs,
/// is not asked for them, and the CRD is installed all the same.
#[test]
fn scoped_install_lists_every_missing_permission_then_goes_through() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let scoped = f.hold(crate::support::TestNamespace::new(&client, "ctl-scoped").await);
        let ns = scoped.name.as_str();
        let sa: k8s_openapi::api::core::v1::ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "installer", "namespace": ns}})).expect("sa");
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &sa)
            .await
            .expect("create installer SA");
        let all = json!(["get", "list", "watch", "create", "update", "patch", "delete"]);
        grant(&client, ns, &format!("{ns}-installer"), json!([
            {"apiGroups": [""], "resources": ["serviceaccounts", "services", "configmaps", "secrets", "events", "pods"], "verbs": all},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": all},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], "verbs": all},
            {"apiGroups": ["operators.coreos.com"], "resources": ["*"], "verbs": ["*"]},
            {"apiGroups": ["example.com"], "resources": ["nginxes", "nginxes/status", "nginxes/finalizers"], "verbs": all},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
        ])).await;
        scoped_group(&client, ns, "installer").await;
        let turn = GroupTurn::take(ns, "og").await;
        subscribe(&client, ns, "nginx-operator", &f.catalog_ns.name, "Automatic").await;
        let refused = plan_in_phase(&client, ns, "nginx-operator", "Failed").await;
        let m = refused.status.and_then(|s| s.message).unwrap_or_default();
        assert!(m.contains(&format!("installer account {ns}/installer")) && m.contains("lacks 3 permissions"), "{m}");
        assert!(
            m.contains("ingresses") && m.contains("leases") && m.contains("subjectaccessreviews"),
            "all three in one message: {m}"
        );
        assert!(!m.contains("customresourcedefinitions"), "the CRD is capstan's to apply, not the installer's: {m}");
        nothing_applied(&client, ns).await;
        grant(
            &client,
            ns,
            &format!("{ns}-installer-more"),
            json!([
                {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": all},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": all},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
            ]),
        )
        .await;
        csv_version_succeeded(&client, ns, "nginx-operator.v0.2.0").await;
        crds_applied_by_capstan(&client, ns).await;
        turn.release(&client).await;
        let test_rbac = ListParams::default().labels(&format!("capstan-test={ns}"));
        let _ = Api::<ClusterRoleBinding>::all(client.clone()).delete_collection(&Default::default(), &test_rbac).await;
        let _ = Api::<ClusterRole>::all(client.clone()).delete_collection(&Default::default(), &test_rbac).await;
    })
}

/// The Complete plan of the scoped install in `ns` was applied as ServiceAccount `installer` and
/// its CRD step went through although that ServiceAccount may not create CRDs: capstan applied
/// it with its own identity.
async fn crds_applied_by_capstan(client: &kube::Client, ns: &str) {
    use capstan::install::preflight::{self, Question, ServiceAccount, Subject};
    let installer = Subject::ServiceAccount(ServiceAccount { namespace: ns.into(), name: "installer".into() });
    let create_crds = Question::resource("create", "apiextensions.k8s.io", "customresourcedefinitions", None);
    assert!(
        !preflight::allowed(client, &installer, &create_crds).await.expect("SubjectAccessReview"),
        "the installer must not hold create on CRDs for this test"
    );
    let plan = plan_in_phase(client, ns, "nginx-operator", "Complete").await;
    let st = serde_json::to_value(plan.status.as_ref().expect("status")).expect("status");
    assert_eq!(st["attenuatedServiceAccountRef"]["name"], "installer", "{st}");
    let crds: Vec<&serde_json::Value> = st["plan"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["resource"]["kind"] == "CustomResourceDefinition")
        .collect();
    assert!(!crds.is_empty(), "the plan has the operator's CRD: {st}");
    for step in crds {
        assert!(step["status"] == "Created" || step["status"] == "Present", "CRD step applied: {step}");
    }
    Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(
        client.clone(),
    )
    .get("nginxes.example.com")
    .await
    .expect("the operator's CRD is installed");
}

/// No CSV and not the operator's ServiceAccount in `ns`: nothing was applied.
async fn nothing_applied(client: &kube::Client, ns: &str) {
    assert!(
        Api::<ClusterServiceVersion>::namespaced(client.clone(), ns)
            .list(&Default::default())
            .await
            .expect("csvs")
            .items
            .is_empty(),
        "nothing applied"
    );
    assert!(
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), ns)
            .get_opt("nginx-operator-controller-manager")
            .await
            .expect("sa")
            .is_none(),
        "nothing applied"
    );
}

/// A scoped install whose ServiceAccount does not exist fails, naming it as such.
#[test]
fn scoped_install_names_a_missing_service_account() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let nosa = f.hold(crate::support::TestNamespace::new(&client, "ctl-scoped-nosa").await);
        scoped_group(&client, &nosa.name, "nobody").await;
        let turn = GroupTurn::take(&nosa.name, "og").await;
        subscribe(&client, &nosa.name, "nginx-operator", &f.catalog_ns.name, "Automatic").await;
        let refused = plan_in_phase(&client, &nosa.name, "nginx-operator", "Failed").await;
        let m = refused.status.and_then(|s| s.message).unwrap_or_default();
        assert!(m.contains(&format!("ServiceAccount {}/nobody", nosa.name)) && m.contains("does not exist"), "{m}");
        turn.release(&client).await;
    })
}
