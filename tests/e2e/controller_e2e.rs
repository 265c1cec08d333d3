//! `capstan controller` end to end on the real local control plane and registry: example
//! bundles and a catalog published by capstan, a CatalogSource + OperatorGroup + Subscription
//! written for OLM, and the controller running in-process.
//!
//! One scenario per test, each in namespaces of its own, over one controller the tests share
//! ([`fixture`]); it watches every namespace, so no other group's tests run meanwhile
//! ([`crate::support::group`]).

use std::time::Duration;

use crate::support::controller::*;
use crate::support::group::PerGroup;
use crate::support::{TestNamespace, eventually};
use capstan::api::{CatalogSource, ClusterServiceVersion, InstallPlan, Subscription};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const GROUP: &str = "controller_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

/// The controller of these tests, with the example catalog as CatalogSource `examples` and a
/// catalog image that does not exist as `missing` in its global catalog namespace, both settled
/// (READY and TRANSIENT_FAILURE) as they were before the first install when these scenarios were
/// one test: the installs below see both.
async fn fixture() -> std::sync::Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("ctl-e2e-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            let f = ControllerFixture::start(&client, &repo, "ctl-catalog", options).await;
            let (catalog_ns, catalog_ref, registry) = (&f.catalog_ns, &f.catalog_ref, &f.registry);
            create::<CatalogSource>(&client, &catalog_ns.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "examples", "namespace": catalog_ns.name},
        "spec": {"sourceType": "grpc", "image": catalog_ref, "updateStrategy": {"registryPoll": {"interval": "10m"}}}
    }))
    .await;
            create::<CatalogSource>(
                &client,
                &catalog_ns.name,
                json!({
                    "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                    "metadata": {"name": "missing", "namespace": catalog_ns.name},
                    "spec": {"sourceType": "image", "image": format!("{registry}/{repo}/no-such-catalog:latest")}
                }),
            )
            .await;
            let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), &catalog_ns.name);
            for (name, state) in [("examples", "READY"), ("missing", "TRANSIENT_FAILURE")] {
                eventually(&format!("CatalogSource {name} {state}"), WAIT, || async {
                    let st = serde_json::to_value(catalogs.get(name).await.ok()?.status?).ok()?;
                    (st["connectionState"]["lastObservedState"] == state).then_some(())
                })
                .await;
            }
            f
        })
        .await
}

/// CatalogSource: READY with the digest and package count.
#[test]
fn catalog_source_is_ready_with_its_digest_and_package_count() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), &catalog_ns.name);
        let st = eventually("CatalogSource READY", WAIT, || async {
            let st = serde_json::to_value(catalogs.get("examples").await.ok()?.status?).ok()?;
            (st["connectionState"]["lastObservedState"] == "READY").then_some(st)
        })
        .await;
        assert!(st["resolvedDigest"].as_str().is_some_and(|d| d.starts_with("sha256:")), "{st}");
        assert_eq!(st["packageCount"], 2, "{st}");
    })
}

/// A catalog image that does not exist: TRANSIENT_FAILURE with a message naming it.
#[test]
fn missing_catalog_image_is_a_transient_failure_naming_it() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), &catalog_ns.name);
        let st = eventually("CatalogSource TRANSIENT_FAILURE", WAIT, || async {
            let st = serde_json::to_value(catalogs.get("missing").await.ok()?.status?).ok()?;
            (st["connectionState"]["lastObservedState"] == "TRANSIENT_FAILURE").then_some(st)
        })
        .await;
        assert!(st["message"].as_str().is_some_and(|m| m.contains("no-such-catalog")), "{st}");
    })
}

/// Automatic: InstallPlan Complete → CSV Succeeded → Deployment Available, CRD Established, the
/// Events and metrics of the install, the operator's RBAC; then a new Subscription for the
/// installed operator adopts it without a second InstallPlan.
#[test]
fn automatic_install_completes_and_a_new_subscription_adopts_it() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let auto = f.hold(namespace_with_group(&client, "ctl-auto").await);
        subscribe(&client, &auto.name, "nginx-operator", &catalog_ns.name, "Automatic").await;
        assert_plan_complete_with_every_step_applied(&client, &auto.name).await;
        csv_succeeded_and_deployment_available(&client, &auto.name).await;
        assert_requirement_status_satisfied(&client, &auto.name).await;
        assert_install_events_in_order(&client, &auto.name).await;
        assert_install_metrics_recorded(&f);
        assert_operator_group_reports_its_namespace(&client, &auto.name).await;
        assert_nginx_crd_established_and_served(&client, &auto.name).await;
        assert_subscription_at_latest_known_reports_the_missing_catalog(&client, &auto.name).await;
        // Still exactly one InstallPlan after the install settled.
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &auto.name);
        assert_eq!(plans.list(&Default::default()).await.expect("plans").items.len(), 1);
        assert_operator_rbac_is_the_csvs(&client, &auto.name).await;
        assert_a_new_subscription_adopts_the_install(&client, &auto.name, &catalog_ns.name).await;
    })
}

/// The Subscription's InstallPlan is Complete: approved, one bundle lookup, the CRD and the CSV
/// among its steps, every step Created or Present.
async fn assert_plan_complete_with_every_step_applied(client: &kube::Client, ns: &str) {
    let plan = plan_in_phase(client, ns, "nginx-operator", "Complete").await;
    assert_eq!(plan.spec.cluster_service_version_names, vec!["nginx-operator.v0.2.0".to_string()]);
    assert!(plan.spec.approved);
    let pst = plan.status.clone().expect("plan status");
    assert_eq!(pst.bundle_lookups.len(), 1);
    assert!(pst.bundle_lookups[0].path.contains("nginx-operator-bundle"), "{:?}", pst.bundle_lookups);
    let kinds: Vec<&str> = pst.plan.iter().map(|s| s.resource.kind.as_str()).collect();
    assert!(kinds.contains(&"CustomResourceDefinition") && kinds.contains(&"ClusterServiceVersion"), "{kinds:?}");
    assert!(!kinds.contains(&"Deployment"), "the Deployment is the CSV reconciler's, as in OLM: {kinds:?}");
    let statuses: Vec<String> = pst
        .plan
        .iter()
        .map(|s| serde_json::to_value(&s.status).unwrap_or_default().as_str().unwrap_or_default().to_string())
        .collect();
    assert!(statuses.iter().all(|s| s == "Created" || s == "Present"), "{statuses:?}");
}

/// requirementStatus: the owned CRD is present, the ServiceAccount's rules are all satisfied.
async fn assert_requirement_status_satisfied(client: &kube::Client, ns: &str) {
    let csv =
        Api::<ClusterServiceVersion>::namespaced(client.clone(), ns).get("nginx-operator.v0.2.0").await.expect("CSV");
    let req =
        serde_json::to_value(csv.status.as_ref().expect("CSV status")).expect("status")["requirementStatus"].clone();
    let entries = req.as_array().cloned().unwrap_or_default();
    assert!(
        entries.iter().any(|e| e["kind"] == "CustomResourceDefinition"
            && e["name"] == "nginxes.example.com"
            && e["status"] == "Present"),
        "{req}"
    );
    let sa_entry = entries
        .iter()
        .find(|e| e["kind"] == "ServiceAccount" && e["name"] == "nginx-operator-controller-manager")
        .unwrap_or_else(|| panic!("{req}"));
    let deps = sa_entry["dependents"].as_array().cloned().unwrap_or_default();
    assert!(!deps.is_empty() && deps.iter().all(|d| d["status"] == "Satisfied"), "{sa_entry}");
}

/// Events: every transition a person wants to see, in order.
async fn assert_install_events_in_order(client: &kube::Client, ns: &str) {
    let order = eventually("install Events", WAIT, || async {
        let evs = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), ns)
            .list(&Default::default())
            .await
            .ok()?;
        let mut seen: Vec<(String, String, String)> = evs
            .items
            .iter()
            .map(|e| {
                let t = e.event_time.as_ref().map(|t| t.0.to_string()).unwrap_or_default();
                (
                    t,
                    e.regarding.as_ref().and_then(|r| r.kind.clone()).unwrap_or_default(),
                    e.reason.clone().unwrap_or_default(),
                )
            })
            .collect();
        seen.sort();
        let reasons: Vec<String> = seen.iter().map(|(_, k, r)| format!("{k}/{r}")).collect();
        let want = [
            "Subscription/InstallPlanCreated",
            "InstallPlan/Installing",
            "ClusterServiceVersion/RequirementsUnknown",
            "ClusterServiceVersion/AllRequirementsMet",
            "ClusterServiceVersion/InstallSucceeded",
        ];
        (want.iter().all(|w| reasons.iter().any(|r| r == w)) && reasons.iter().any(|r| r == "InstallPlan/Complete"))
            .then_some(reasons)
    })
    .await;
    let pos = |w: &str| order.iter().position(|r| r == w).unwrap_or(usize::MAX);
    assert!(
        pos("Subscription/InstallPlanCreated") < pos("InstallPlan/Installing")
            && pos("InstallPlan/Installing") < pos("ClusterServiceVersion/RequirementsUnknown")
            && pos("ClusterServiceVersion/RequirementsUnknown") < pos("ClusterServiceVersion/AllRequirementsMet")
            && pos("ClusterServiceVersion/AllRequirementsMet") < pos("ClusterServiceVersion/InstallSucceeded")
            && pos("InstallPlan/Installing") < pos("InstallPlan/Complete"),
        "Events out of order: {order:?}"
    );
}

/// The metrics of the install are recorded (by this group's controller: its own registry).
fn assert_install_metrics_recorded(f: &ControllerFixture) {
    let text = f.metrics.encode();
    let value = |prefix: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    for series in [
        "capstan_resolution_duration_seconds_count",
        "capstan_install_duration_seconds_count{outcome=\"succeeded\"}",
        "capstan_catalog_pull_duration_seconds_count",
        "capstan_catalog_size_bytes",
        "capstan_csvs{phase=\"Succeeded\"}",
    ] {
        assert!(value(series) >= 1.0, "{series} not recorded in /metrics:\n{text}");
    }
}

/// The OperatorGroup reports its target namespaces.
async fn assert_operator_group_reports_its_namespace(client: &kube::Client, ns: &str) {
    let ogs: Api<capstan::api::OperatorGroup> = Api::namespaced(client.clone(), ns);
    let og_ns = eventually("OperatorGroup status.namespaces", WAIT, || async {
        let st = serde_json::to_value(ogs.get("og").await.ok()?.status?).ok()?;
        st["namespaces"].as_array().filter(|a| !a.is_empty()).cloned()
    })
    .await;
    assert_eq!(og_ns, vec![json!(ns)]);
}

/// The Nginx CRD is Established and an Nginx object is accepted.
async fn assert_nginx_crd_established_and_served(client: &kube::Client, ns: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get("nginxes.example.com").await.expect("Nginx CRD");
    assert!(
        crd.status
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"))
    );
    let nginx =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1alpha1", "Nginx"), "nginxes");
    let obj: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "example.com/v1alpha1", "kind": "Nginx", "metadata": {"name": "sample"}, "spec": {}}),
    )
    .expect("nginx");
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &nginx)
        .create(&PostParams::default(), &obj)
        .await
        .expect("an Nginx object is accepted");
}

/// The Subscription is AtLatestKnown on the installed CSV; the visible catalog source that cannot
/// be pulled is reported, without stopping the install.
async fn assert_subscription_at_latest_known_reports_the_missing_catalog(client: &kube::Client, ns: &str) {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let st = eventually("Subscription AtLatestKnown", WAIT, || async {
        let st = serde_json::to_value(subs.get("nginx-operator").await.ok()?.status?).ok()?;
        (st["state"] == "AtLatestKnown").then_some(st)
    })
    .await;
    assert_eq!(st["installedCSV"], "nginx-operator.v0.2.0", "{st}");
    assert_eq!(st["currentCSV"], "nginx-operator.v0.2.0", "{st}");
    let unhealthy = st["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "CatalogSourcesUnhealthy").cloned())
        .unwrap_or_default();
    assert_eq!(unhealthy["status"], "True", "{st}");
    assert!(unhealthy["message"].as_str().is_some_and(|m| m.contains("/missing")), "{unhealthy}");
}

/// The operator's ServiceAccount may do what the CSV asks, and not more.
async fn assert_operator_rbac_is_the_csvs(client: &kube::Client, ns: &str) {
    let sa = "nginx-operator-controller-manager";
    assert!(allowed(client, ns, sa, "create", "apps", "deployments", Some(ns)).await, "CSV permissions granted");
    assert!(!allowed(client, ns, sa, "delete", "", "nodes", None).await, "nothing beyond the CSV");
    assert!(
        !allowed(client, ns, sa, "create", "rbac.authorization.k8s.io", "clusterroles", None).await,
        "nothing beyond the CSV"
    );
}

/// A new Subscription for the operator that is installed already adopts it: no second plan.
async fn assert_a_new_subscription_adopts_the_install(client: &kube::Client, ns: &str, catalog_ns: &str) {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    subs.delete("nginx-operator", &DeleteParams::default()).await.expect("delete Subscription");
    eventually("Subscription gone", WAIT, || async {
        subs.get_opt("nginx-operator").await.ok()?.is_none().then_some(())
    })
    .await;
    subscribe(client, ns, "nginx-operator", catalog_ns, "Automatic").await;
    let st = eventually("re-created Subscription AtLatestKnown", WAIT, || async {
        let st = serde_json::to_value(subs.get("nginx-operator").await.ok()?.status?).ok()?;
        (st["state"] == "AtLatestKnown").then_some(st)
    })
    .await;
    assert_eq!(st["installedCSV"], "nginx-operator.v0.2.0", "{st}");
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    let names: Vec<String> = plans
        .list(&Default::default())
        .await
        .expect("plans")
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert!(names.len() <= 1, "no new InstallPlan for an adopted operator: {names:?}");
}

/// An OperatorGroup written as v1alpha2 (still served) gets its status too.
#[test]
fn operator_group_written_as_v1alpha2_gets_its_status() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let old_ns = f.hold(TestNamespace::new(&client, "ctl-og-v1alpha2").await);
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("operators.coreos.com", "v1alpha2", "OperatorGroup"),
            "operatorgroups",
        );
        let old_og: DynamicObject = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha2", "kind": "OperatorGroup", "metadata": {"name": "old"}, "spec": {"targetNamespaces": [old_ns.name]}})).expect("og");
        Api::<DynamicObject>::namespaced_with(client.clone(), &old_ns.name, &ar)
            .create(&PostParams::default(), &old_og)
            .await
            .expect("create v1alpha2 OperatorGroup");
        let olds: Api<capstan::api::OperatorGroup> = Api::namespaced(client.clone(), &old_ns.name);
        eventually("v1alpha2 OperatorGroup status.namespaces", WAIT, || async {
            let st = serde_json::to_value(olds.get("old").await.ok()?.status?).ok()?;
            (st["namespaces"] == json!([old_ns.name])).then_some(())
        })
        .await;
    })
}

/// An OperatorGroup's label `olm.operatorgroup.uid/<uid>` is on exactly the namespaces it targets
/// (OLM's `syncNamespace`): put on when targeted, taken off when no longer targeted, when the
/// group targets all namespaces, and when it is deleted; other labels stay.
#[test]
fn operator_group_labels_its_target_namespaces() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let a = f.hold(TestNamespace::new(&client, "ctl-og-label-a").await);
        let b = f.hold(TestNamespace::new(&client, "ctl-og-label-b").await);
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        namespaces
            .patch(&b.name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}})))
            .await
            .expect("a label of the user's");
        let groups: Api<capstan::api::OperatorGroup> = Api::namespaced(client.clone(), &a.name);
        let og = json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og"}, "spec": {"targetNamespaces": [a.name, b.name]}});
        let og = groups.create(&PostParams::default(), &serde_json::from_value(og).expect("og")).await.expect("create");
        let key = format!("olm.operatorgroup.uid/{}", og.metadata.uid.clone().expect("uid"));
        let labelled = |want: Vec<String>| {
            let (namespaces, key) = (namespaces.clone(), key.clone());
            async move {
                eventually(&format!("namespaces labelled {key}: {want:?}"), WAIT, || async {
                    let list = namespaces.list(&ListParams::default().labels(&key)).await.ok()?;
                    let mut got: Vec<String> = list.items.iter().filter_map(|n| n.metadata.name.clone()).collect();
                    got.sort();
                    (got == want).then_some(())
                })
                .await
            }
        };
        let mut both = vec![a.name.clone(), b.name.clone()];
        both.sort();
        labelled(both).await;
        let retarget = |targets: Vec<String>| json!({"spec": {"targetNamespaces": targets}});
        groups
            .patch("og", &PatchParams::default(), &Patch::Merge(retarget(vec![a.name.clone()])))
            .await
            .expect("retarget");
        labelled(vec![a.name.clone()]).await;
        let user_label =
            namespaces.get(&b.name).await.expect("b").metadata.labels.unwrap_or_default().get("team").cloned();
        assert_eq!(user_label.as_deref(), Some("b"), "the user's label stays");
        groups
            .patch("og", &PatchParams::default(), &Patch::Merge(json!({"spec": {"targetNamespaces": null}})))
            .await
            .expect("all");
        labelled(vec![]).await;
        groups.patch("og", &PatchParams::default(), &Patch::Merge(retarget(vec![a.name.clone()]))).await.expect("back");
        labelled(vec![a.name.clone()]).await;
        groups.delete("og", &Default::default()).await.expect("delete");
        labelled(vec![]).await;
    })
}

/// Manual: RequiresApproval and nothing applied; `capstan approve` completes it.
#[test]
fn manual_plan_waits_for_capstan_approve() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let manual = f.hold(namespace_with_group(&client, "ctl-manual").await);
        subscribe(&client, &manual.name, "nginx-operator", &catalog_ns.name, "Manual").await;
        let plan = plan_in_phase(&client, &manual.name, "nginx-operator", "RequiresApproval").await;
        assert!(!plan.spec.approved);
        assert!(
            !plan.status.as_ref().map(|s| s.plan.is_empty()).unwrap_or(true),
            "the steps are listed before approval"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &manual.name);
        assert!(
            csvs.list(&Default::default()).await.expect("csvs").items.is_empty(),
            "nothing is applied before approval"
        );
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &manual.name);
        assert!(
            sas.get_opt("nginx-operator-controller-manager").await.expect("sa").is_none(),
            "nothing is applied before approval"
        );
        let kubeconfig = crate::support::kubeconfig_path();
        let out = capstan(&[
            "approve",
            "nginx-operator",
            "-n",
            &manual.name,
            "--kubeconfig",
            kubeconfig.to_str().unwrap_or_default(),
        ]);
        assert!(
            out.contains("CustomResourceDefinition nginxes.example.com") && out.contains("approved InstallPlan"),
            "{out}"
        );
        plan_in_phase(&client, &manual.name, "nginx-operator", "Complete").await;
        csv_succeeded_and_deployment_available(&client, &manual.name).await;
    })
}

/// A package that does not exist: ResolutionFailed naming it, and no InstallPlan.
#[test]
fn unknown_package_fails_resolution_without_a_plan() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let bad = f.hold(namespace_with_group(&client, "ctl-bad").await);
        subscribe(&client, &bad.name, "no-such-operator", &catalog_ns.name, "Automatic").await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &bad.name);
        let cond = eventually("ResolutionFailed", WAIT, || async {
            let st = serde_json::to_value(subs.get("no-such-operator").await.ok()?.status?).ok()?;
            st["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "ResolutionFailed" && c["status"] == "True")
                .cloned()
        })
        .await;
        assert!(cond["message"].as_str().is_some_and(|m| m.contains("no-such-operator")), "{cond}");
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &bad.name);
        assert!(plans.list(&Default::default()).await.expect("plans").items.is_empty());
    })
}

/// Manual approved with a plain patch of spec.approved (as `kubectl patch` does).
#[test]
fn manual_plan_approved_by_kubectl_patch_completes() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let patched = f.hold(namespace_with_group(&client, "ctl-patch").await);
        subscribe(&client, &patched.name, "nginx-operator", &catalog_ns.name, "Manual").await;
        let plan = plan_in_phase(&client, &patched.name, "nginx-operator", "RequiresApproval").await;
        let name = plan.metadata.name.clone().expect("plan name");
        // With kubectl itself (the pinned build), as an admin would.
        let out = std::process::Command::new(crate::support::kubectl())
            .args([
                "--kubeconfig",
                crate::support::kubeconfig_path().to_str().unwrap_or_default(),
                "patch",
                "installplan",
                &name,
                "-n",
                &patched.name,
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"approved":true}}"#,
            ])
            .output()
            .expect("run kubectl");
        assert!(out.status.success(), "kubectl patch: {}", String::from_utf8_lossy(&out.stderr));
        plan_in_phase(&client, &patched.name, "nginx-operator", "Complete").await;
        csv_succeeded_and_deployment_available(&client, &patched.name).await;
    })
}

/// An install mode the OperatorGroup cannot give (kaiwudb-operator supports only AllNamespaces):
/// the plan fails before anything is applied, and the Subscription says why.
#[test]
fn unsupported_install_mode_fails_the_plan_before_applying() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let modes = f.hold(namespace_with_group(&client, "ctl-modes").await);
        subscribe_channel(&client, &modes.name, "kaiwudb-operator", "stable", &catalog_ns.name, "Automatic").await;
        let plan = plan_in_phase(&client, &modes.name, "kaiwudb-operator", "Failed").await;
        let message = plan.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("UnsupportedOperatorGroup") && message.contains("AllNamespaces"), "{message}");
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &modes.name);
        assert!(csvs.list(&Default::default()).await.expect("csvs").items.is_empty(), "nothing applied");
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &modes.name);
        let cond = eventually("InstallPlanFailed", WAIT, || async {
            let st = serde_json::to_value(subs.get("kaiwudb-operator").await.ok()?.status?).ok()?;
            st["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "InstallPlanFailed" && c["status"] == "True")
                .cloned()
        })
        .await;
        assert!(cond["message"].as_str().is_some_and(|m| m.contains("AllNamespaces")), "{cond}");
    })
}

/// Two OperatorGroups in one namespace: the plan fails naming both.
#[test]
fn two_operator_groups_fail_the_plan_naming_both() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let two = f.hold(namespace_with_group(&client, "ctl-two-og").await);
        let og2: capstan::api::OperatorGroup = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og2", "namespace": two.name}, "spec": {}
    }))
    .expect("og2");
        Api::<capstan::api::OperatorGroup>::namespaced(client.clone(), &two.name)
            .create(&PostParams::default(), &og2)
            .await
            .expect("og2");
        subscribe(&client, &two.name, "nginx-operator", &catalog_ns.name, "Automatic").await;
        let plan = plan_in_phase(&client, &two.name, "nginx-operator", "Failed").await;
        let message = plan.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("TooManyOperatorGroups") && message.contains("og2"), "{message}");
    })
}

/// Registry poll: a new digest behind the catalog tag re-resolves the Subscription, which
/// upgrades along the channel (0.1.0 → 0.2.0), and the replaced CSV is deleted.
#[test]
fn new_catalog_digest_upgrades_along_the_channel() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let (registry, repo, work) = (&f.registry, &f.repo, &f.work);
        let upgrade = f.hold(namespace_with_group(&client, "ctl-upgrade").await);
        let upg_dir = work.path().join("upgrade-catalog");
        let upg_ref = format!("{registry}/{repo}/upgrade-catalog:latest");
        let bundle_ref = |v: &str| format!("{registry}/{repo}/nginx-operator-bundle:v{v}");
        capstan(&["catalog", "add", upg_dir.to_str().unwrap_or_default(), &bundle_ref("0.1.0")]);
        capstan(&["catalog", "push", "-q", upg_dir.to_str().unwrap_or_default(), &upg_ref]);
        create::<CatalogSource>(
            &client,
            &upgrade.name,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "upg", "namespace": upgrade.name},
                "spec": {"sourceType": "grpc", "image": upg_ref, "updateStrategy": {"registryPoll": {"interval": "2s"}}}
            }),
        )
        .await;
        create::<Subscription>(
            &client,
            &upgrade.name,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "nginx-operator", "namespace": upgrade.name},
                "spec": {"name": "nginx-operator", "channel": "alpha", "source": "upg", "sourceNamespace": upgrade.name}
            }),
        )
        .await;
        csv_version_succeeded(&client, &upgrade.name, "nginx-operator.v0.1.0").await;
        capstan(&["catalog", "add", upg_dir.to_str().unwrap_or_default(), &bundle_ref("0.2.0")]);
        capstan(&["catalog", "push", "-q", upg_dir.to_str().unwrap_or_default(), &upg_ref]);
        csv_version_succeeded(&client, &upgrade.name, "nginx-operator.v0.2.0").await;
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &upgrade.name);
        let new = csvs.get("nginx-operator.v0.2.0").await.expect("new CSV");
        assert_eq!(new.spec.replaces.as_deref(), Some("nginx-operator.v0.1.0"));
        eventually("replaced CSV deleted", WAIT, || async {
            csvs.get_opt("nginx-operator.v0.1.0").await.ok()?.is_none().then_some(())
        })
        .await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &upgrade.name);
        eventually("upgraded Subscription AtLatestKnown on 0.2.0", WAIT, || async {
            let st = serde_json::to_value(subs.get("nginx-operator").await.ok()?.status?).ok()?;
            (st["state"] == "AtLatestKnown" && st["installedCSV"] == "nginx-operator.v0.2.0").then_some(())
        })
        .await;
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &upgrade.name);
        assert_eq!(
            plans.list(&Default::default()).await.expect("plans").items.len(),
            2,
            "one InstallPlan per resolution"
        );
    })
}
