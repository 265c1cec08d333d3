//! What OLM v0 creates around an install, created by capstan too, on the real local control
//! plane with its real RBAC authorizer:
//!
//! - RBAC aggregation: a user bound to `edit` in the target namespace cannot create the
//!   operator's custom resources before the install and can after it (the per-CRD ClusterRoles
//!   labelled `rbac.authorization.k8s.io/aggregate-to-edit`); the OperatorGroup gets
//!   `olm.providedAPIs` and its `olm.og.<og>.<suffix>-<hash>` ClusterRoles; deleting the
//!   OperatorGroup deletes those, deleting the CRD (uninstall with `uninstall-crds`) the per-CRD
//!   ones.
//! - OperatorCondition: one per CSV, controlled by it, with OLM's spec; the operator's
//!   ServiceAccount may update it; `Upgradeable=False` in `spec.conditions` holds the upgrade
//!   with a condition that says so; clearing it lets the upgrade proceed.
//! - requirementStatus as OLM writes it: `minKubeVersion` first, each CRD once; a CSV above the
//!   server's version, or needing a native API the server lacks, stays Pending.
//! - A CatalogSource with `spec.address` at an `opm serve` resolves and installs like one with
//!   `spec.image`.
//!
//! One scenario per test, each in namespaces of its own (deleted when the test ends, while the
//! controller still runs and cleans up after the CSVs in them), over one controller the tests
//! share ([`fixture`]); it watches every namespace, so no other group's tests run meanwhile
//! ([`crate::support::group`]). The tests that install nginx-operator share its CRD
//! `nginxes.example.com`; the RBAC aggregation test deletes it, so it takes [`NGINX_CRD`] alone.

use std::sync::Arc;
use std::time::Duration;

use crate::support::controller::*;
use crate::support::group::PerGroup;
use crate::support::{TestNamespace, eventually};
use capstan::api::{CatalogSource, ClusterServiceVersion, InstallPlan, OperatorCondition, OperatorGroup, Subscription};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const GROUP: &str = "controller_parity_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

/// Who may have the CRD `nginxes.example.com` (created by every install of nginx-operator): the
/// RBAC aggregation test deletes it before its install and with its removal, so it takes the lock
/// alone (write); the other tests that install nginx-operator share it (read).
static NGINX_CRD: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The controller of these tests, with the example catalog as CatalogSource `examples` (READY) in
/// its global catalog namespace.
async fn fixture() -> Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("parity-e2e-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            let f = ControllerFixture::start(&client, &repo, "parity-catalog", options).await;
            catalog_source(&client, &f.catalog_ns.name, "examples", &f.catalog_ref).await;
            f
        })
        .await
}

/// RBAC aggregation from install to removal. alice has `edit` in the target namespace only: she
/// may create Nginx objects there once the operator is installed (not before, not elsewhere),
/// through the per-CRD ClusterRoles named and labelled as OLM does; the OperatorGroup gets
/// `olm.providedAPIs` and three aggregating ClusterRoles. Removal with `uninstall-crds` takes the
/// CRD and the per-CRD roles (edit covers nginxes no more); deleting the OperatorGroup its roles.
#[test]
fn edit_covers_the_operators_resources_from_install_until_removal() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        // This test deletes the CRD: no other install of nginx-operator meanwhile.
        let _crd = NGINX_CRD.write().await;
        let client = crate::support::cluster().await;
        let ns = namespace_with_group(&client, "parity-rbac").await;
        let alice = format!("alice-{}", std::process::id());
        bind_to_edit(&client, &ns.name, &alice).await;
        delete_nginx_crd_first(&client).await;
        // The aggregation controller rewrites `edit` a moment after old per-CRD roles go.
        eventually("before the install, edit does not cover nginxes", WAIT, || async {
            (!user_may(&client, &alice, "create", &ns.name).await).then_some(())
        })
        .await;

        subscribe(&client, &ns.name, "nginx-operator", &f.catalog_ns.name, "Automatic").await;
        csv_succeeded_and_deployment_available(&client, &ns.name).await;
        eventually("edit covers nginxes after the install", WAIT, || async {
            user_may(&client, &alice, "create", &ns.name).await.then_some(())
        })
        .await;
        let cr: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1alpha1", "kind": "Nginx", "metadata": {"name": "by-alice", "namespace": ns.name}, "spec": {}})).expect("cr");
        nginx_api(&client_as(&alice).await, &ns.name)
            .create(&PostParams::default(), &cr)
            .await
            .expect("alice creates an Nginx in her namespace");
        let other = TestNamespace::new(&client, "parity-other").await;
        assert!(
            !user_may(&client, &alice, "create", &other.name).await,
            "nothing outside the namespace where alice has edit"
        );
        per_crd_roles_named_and_labelled_as_olm(&client).await;
        operator_group_provides_the_api_and_its_roles(&client, &ns.name).await;

        uninstall_with_crds(&client, &ns.name).await;
        // The cluster's aggregation controller rewrites `edit` a moment after the roles go.
        eventually("after removal edit no longer covers nginxes", WAIT, || async {
            (!user_may(&client, &alice, "create", &ns.name).await).then_some(())
        })
        .await;
        Api::<OperatorGroup>::namespaced(client.clone(), &ns.name)
            .delete("og", &DeleteParams::default())
            .await
            .expect("delete OperatorGroup");
        eventually("OperatorGroup ClusterRoles deleted with it", WAIT, || async {
            og_roles(&client, &ns.name).await.is_empty().then_some(())
        })
        .await;
    })
}

/// requirementStatus as OLM writes it: minKubeVersion (1.27.0) checked against the server
/// (v1.36.3) first, each CRD once (with its uid).
#[test]
fn requirement_status_lists_min_kube_version_first_and_each_crd_once() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let _crd = NGINX_CRD.read().await;
        let client = crate::support::cluster().await;
        let ns = namespace_with_group(&client, "parity-reqs").await;
        subscribe(&client, &ns.name, "nginx-operator", &f.catalog_ns.name, "Automatic").await;
        csv_succeeded_and_deployment_available(&client, &ns.name).await;
        let csv = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns.name)
            .get("nginx-operator.v0.2.0")
            .await
            .expect("CSV");
        let reqs = serde_json::to_value(&csv.status.as_ref().expect("status").requirement_status).expect("json");
        assert_eq!(reqs[0]["kind"], "ClusterServiceVersion", "{reqs}");
        assert_eq!(reqs[0]["message"], "CSV minKubeVersion (1.27.0) less than server version (v1.36.3)", "{reqs}");
        let crd_entries: Vec<&Value> =
            reqs.as_array().unwrap().iter().filter(|r| r["kind"] == "CustomResourceDefinition").collect();
        assert_eq!(crd_entries.len(), 1, "{reqs}");
        assert!(crd_entries[0]["uuid"].as_str().is_some_and(|u| !u.is_empty()), "{reqs}");
    })
}

/// The OperatorCondition of an installed CSV: named after it, controlled by it, listing the
/// operator's Deployment and ServiceAccount; that ServiceAccount may update this
/// OperatorCondition and no other.
#[test]
fn operator_condition_belongs_to_the_csv_and_its_operator_may_update_it() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let _crd = NGINX_CRD.read().await;
        let client = crate::support::cluster().await;
        let ns = namespace_with_group(&client, "parity-oc").await;
        subscribe(&client, &ns.name, "nginx-operator", &f.catalog_ns.name, "Automatic").await;
        csv_succeeded_and_deployment_available(&client, &ns.name).await;
        let ocs: Api<OperatorCondition> = Api::namespaced(client.clone(), &ns.name);
        let oc =
            eventually("OperatorCondition", WAIT, || async { ocs.get_opt("nginx-operator.v0.2.0").await.ok()? }).await;
        assert_eq!(oc.spec.deployments, ["nginx-operator-controller-manager"]);
        assert!(
            oc.spec.service_accounts.iter().all(|s| s == "nginx-operator-controller-manager"),
            "{:?}",
            oc.spec.service_accounts
        );
        let owner = oc.metadata.owner_references.clone().unwrap_or_default();
        assert!(
            owner.iter().any(|o| o.kind == "ClusterServiceVersion"
                && o.name == "nginx-operator.v0.2.0"
                && o.controller == Some(true)),
            "{owner:?}"
        );
        assert!(
            !allowed(
                &client,
                &ns.name,
                "nginx-operator-controller-manager",
                "patch",
                "operators.coreos.com",
                "operatorconditions",
                Some(&ns.name)
            )
            .await,
            "the SA may patch only its own OperatorCondition (the SAR without a name is denied)"
        );
        let sar: SubjectAccessReview = serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": format!("system:serviceaccount:{}:nginx-operator-controller-manager", ns.name), "groups": ["system:serviceaccounts"],
                 "resourceAttributes": {"verb": "update", "group": "operators.coreos.com", "resource": "operatorconditions", "name": "nginx-operator.v0.2.0", "namespace": ns.name}}
    }))
    .expect("sar");
        let r =
            Api::<SubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &sar).await.expect("SAR");
        assert!(r.status.is_some_and(|s| s.allowed), "the operator's ServiceAccount may update its OperatorCondition");
    })
}

/// A CSV whose minKubeVersion is above the server's stays Pending and says why; a native API the
/// server lacks is listed as NotPresent.
#[test]
fn csv_above_the_servers_version_stays_pending_and_lists_missing_native_apis() {
    crate::support::run(GROUP, 4, async {
        let _f = fixture().await;
        let client = crate::support::cluster().await;
        let other = TestNamespace::new(&client, "parity-future").await;
        create::<ClusterServiceVersion>(&client, &other.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "future.v1.0.0", "namespace": other.name},
        "spec": {"displayName": "future", "minKubeVersion": "1.99.0", "installModes": [{"type": "AllNamespaces", "supported": true}, {"type": "OwnNamespace", "supported": true}],
                 "nativeAPIs": [{"group": "apps", "version": "v1", "kind": "Deployment"}, {"group": "nowhere.example.com", "version": "v1", "kind": "Ghost"}],
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}}
    }))
    .await;
        let og: OperatorGroup = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og", "namespace": other.name}, "spec": {"targetNamespaces": [other.name]}})).expect("og");
        Api::<OperatorGroup>::namespaced(client.clone(), &other.name)
            .create(&PostParams::default(), &og)
            .await
            .expect("create OperatorGroup");
        let st = eventually("future CSV RequirementsNotMet", WAIT, || async {
            let c = Api::<ClusterServiceVersion>::namespaced(client.clone(), &other.name)
                .get("future.v1.0.0")
                .await
                .ok()?;
            let st = serde_json::to_value(c.status?).ok()?;
            (st["reason"] == "RequirementsNotMet").then_some(st)
        })
        .await;
        assert_eq!(st["phase"], "Pending", "{st}");
        let msg = st["message"].as_str().unwrap_or_default();
        assert!(msg.contains("minKubeVersion (1.99.0) > server version (1.36.3)") && msg.contains("Ghost"), "{msg}");
        let reqs = &st["requirementStatus"];
        assert_eq!(reqs[0]["status"], "PresentNotSatisfied", "{reqs}");
        let native: Vec<(&str, &str)> = reqs
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "Deployment" || r["kind"] == "Ghost")
            .map(|r| (r["kind"].as_str().unwrap(), r["status"].as_str().unwrap()))
            .collect();
        assert_eq!(native, [("Deployment", "Present"), ("Ghost", "NotPresent")], "{reqs}");
        // The reason's change within Pending is an Event, as OLM records it (clients watch for it
        // through the core Events API, by the CSV's kind).
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &other.name);
        let lp = kube::api::ListParams::default()
            .fields("involvedObject.kind=ClusterServiceVersion,involvedObject.name=future.v1.0.0");
        eventually("Event RequirementsNotMet of future.v1.0.0", WAIT, || async {
            let list = events.list(&lp).await.ok()?;
            list.items.iter().any(|e| e.reason.as_deref() == Some("RequirementsNotMet")).then_some(())
        })
        .await;
    })
}

/// Upgradeable=False in the OperatorCondition of v0.1.0 holds the approved upgrade to v0.2.0
/// (the plan, the OperatorCondition's status and the Subscription say so, nothing of v0.2.0 is
/// applied); clearing it lets the upgrade proceed. While the upgrade waits for approval the
/// Subscription names both CSVs.
#[test]
fn upgradeable_false_holds_an_upgrade_until_cleared() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let _crd = NGINX_CRD.read().await;
        let client = crate::support::cluster().await;
        let up = namespace_with_group(&client, "parity-upgrade").await;
        create::<Subscription>(&client, &up.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "nginx-operator", "namespace": up.name},
        "spec": {"name": "nginx-operator", "channel": "alpha", "source": "examples", "sourceNamespace": f.catalog_ns.name,
                 "installPlanApproval": "Manual", "startingCSV": "nginx-operator.v0.1.0"}
    }))
    .await;
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &up.name);
        let first = plan_waiting_for_approval(&plans, "nginx-operator.v0.1.0").await;
        approve(&plans, &first.metadata.name.clone().unwrap_or_default()).await;
        csv_version_succeeded(&client, &up.name, "nginx-operator.v0.1.0").await;
        let up_ocs: Api<OperatorCondition> = Api::namespaced(client.clone(), &up.name);
        eventually("OperatorCondition of v0.1.0", WAIT, || async {
            up_ocs.get_opt("nginx-operator.v0.1.0").await.ok()?
        })
        .await;
        set_upgradeable(&client, &up.name, "nginx-operator.v0.1.0", "False").await;
        let second = plan_waiting_for_approval(&plans, "nginx-operator.v0.2.0").await;
        let second_name = second.metadata.name.clone().unwrap_or_default();
        // While the upgrade waits for approval the Subscription names both (installedCSV used to
        // be empty here).
        let st = eventually("installedCSV and currentCSV while the upgrade waits", WAIT, || async {
            let st = serde_json::to_value(
                Api::<Subscription>::namespaced(client.clone(), &up.name).get("nginx-operator").await.ok()?.status?,
            )
            .ok()?;
            (st["currentCSV"] == "nginx-operator.v0.2.0").then_some(st)
        })
        .await;
        assert_eq!(st["installedCSV"], "nginx-operator.v0.1.0", "{st}");
        approve(&plans, &second_name).await;
        upgrade_held_by_the_operator_condition(&client, &up.name, &second_name).await;
        set_upgradeable(&client, &up.name, "nginx-operator.v0.1.0", "True").await;
        csv_version_succeeded(&client, &up.name, "nginx-operator.v0.2.0").await;
    })
}

/// A CatalogSource with spec.address at an `opm serve` on loopback resolves and installs like one
/// with spec.image (OLM's gRPC registry API); once that registry is gone the CatalogSource is in
/// TRANSIENT_FAILURE naming the address.
#[test]
fn catalog_source_at_an_address_installs_and_fails_once_the_registry_is_gone() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let _crd = NGINX_CRD.read().await;
        let client = crate::support::cluster().await;
        let catalog_ns = &f.catalog_ns;
        let serve = crate::support::OpmServe::start(&f.work.path().join("catalog"));
        let address = serve.address.clone();
        eventually("opm serve listening", WAIT, || async { std::net::TcpStream::connect(&address).ok().map(|_| ()) })
            .await;
        create::<CatalogSource>(
            &client,
            &catalog_ns.name,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "served", "namespace": catalog_ns.name},
                "spec": {"sourceType": "grpc", "address": address}
            }),
        )
        .await;
        let catalogs: Api<CatalogSource> = Api::namespaced(client.clone(), &catalog_ns.name);
        let st = eventually("CatalogSource with spec.address READY", WAIT, || async {
            let st = serde_json::to_value(catalogs.get("served").await.ok()?.status?).ok()?;
            (st["connectionState"]["lastObservedState"] == "READY").then_some(st)
        })
        .await;
        assert_eq!(st["packageCount"], 2, "{st}");
        let served = namespace_with_group(&client, "parity-address").await;
        create::<Subscription>(&client, &served.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "nginx-operator", "namespace": served.name},
        "spec": {"name": "nginx-operator", "channel": "alpha", "source": "served", "sourceNamespace": catalog_ns.name, "installPlanApproval": "Automatic"}
    }))
    .await;
        csv_succeeded_and_deployment_available(&client, &served.name).await;
        let plan = plan_in_phase(&client, &served.name, "nginx-operator", "Complete").await;
        let lookups = serde_json::to_value(&plan.status.as_ref().expect("status").bundle_lookups).expect("json");
        assert!(
            lookups[0]["catalogSourceRef"]["name"] == "served"
                && lookups[0]["path"].as_str().is_some_and(|p| p.contains("nginx-operator-bundle")),
            "{lookups}"
        );
        drop(serve);
        // The registry gone: TRANSIENT_FAILURE naming the address (checked on the next poll, forced by a spec change).
        catalogs
            .patch("served", &PatchParams::default(), &Patch::Merge(json!({"spec": {"priority": 1}})))
            .await
            .expect("touch CatalogSource");
        let st = eventually("CatalogSource with a dead address TRANSIENT_FAILURE", WAIT, || async {
            let st = serde_json::to_value(catalogs.get("served").await.ok()?.status?).ok()?;
            (st["connectionState"]["lastObservedState"] == "TRANSIENT_FAILURE").then_some(st)
        })
        .await;
        assert!(st["message"].as_str().is_some_and(|m| m.contains(&address)), "{st}");
    })
}

/// Whether user `user` may `verb` `nginxes.example.com` in `ns`, by the API server's authorizer.
async fn user_may(client: &kube::Client, user: &str, verb: &str, ns: &str) -> bool {
    let sar: SubjectAccessReview = serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:authenticated"],
                 "resourceAttributes": {"verb": verb, "group": "example.com", "resource": "nginxes", "namespace": ns}}
    }))
    .expect("sar");
    let r = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &sar)
        .await
        .expect("SubjectAccessReview");
    r.status.is_some_and(|s| s.allowed)
}

/// A client acting as `user` (impersonated by the admin, so the real authorizer decides).
async fn client_as(user: &str) -> kube::Client {
    let mut cfg = crate::support::admin_config().await;
    cfg.auth_info.impersonate = Some(user.into());
    cfg.auth_info.impersonate_groups = Some(vec!["system:authenticated".into()]);
    kube::Client::try_from(cfg).expect("impersonating client")
}

fn nginx_api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1alpha1", "Nginx"), "nginxes");
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// Binds user `user` to the ClusterRole `edit` in `ns` (RoleBinding `alice-edit`).
async fn bind_to_edit(client: &kube::Client, ns: &str, user: &str) {
    let rb: RoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-edit", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    }))
    .expect("rolebinding");
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rb)
        .await
        .expect("bind alice to edit");
}

/// The CRD may exist from another test of this cluster: deletes it and waits until it and its
/// per-CRD ClusterRoles are gone, so that "before the install" is before.
async fn delete_nginx_crd_first(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt("nginxes.example.com").await.expect("read CRD").is_some() {
        let _ = crds.delete("nginxes.example.com", &DeleteParams::default()).await;
        eventually("old nginxes CRD gone", WAIT, || async {
            crds.get_opt("nginxes.example.com").await.ok()?.is_none().then_some(())
        })
        .await;
        let roles: Api<ClusterRole> = Api::all(client.clone());
        eventually("old per-CRD ClusterRoles collected", WAIT, || async {
            roles.get_opt("nginxes.example.com-v1alpha1-edit").await.ok()?.is_none().then_some(())
        })
        .await;
    }
}

/// The per-CRD roles as OLM names and labels them, owned by the CRD.
async fn per_crd_roles_named_and_labelled_as_olm(client: &kube::Client) {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    for (suffix, agg) in [("admin", "admin"), ("edit", "edit"), ("view", "view"), ("crdview", "view")] {
        let name = format!("nginxes.example.com-v1alpha1-{suffix}");
        let r = roles.get(&name).await.unwrap_or_else(|e| panic!("ClusterRole {name}: {e}"));
        let labels = r.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(&format!("rbac.authorization.k8s.io/aggregate-to-{agg}")).map(String::as_str),
            Some("true"),
            "{name}: {labels:?}"
        );
        assert!(labels.keys().any(|k| k.starts_with("olm.opgroup.permissions/aggregate-to-")), "{name}: {labels:?}");
        assert_eq!(
            r.metadata.owner_references.as_ref().and_then(|o| o.first()).map(|o| o.kind.as_str()),
            Some("CustomResourceDefinition")
        );
    }
}

/// The OperatorGroup `og` of `ns`: olm.providedAPIs and its three aggregating ClusterRoles.
async fn operator_group_provides_the_api_and_its_roles(client: &kube::Client, ns: &str) {
    let ogs: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    eventually("olm.providedAPIs", WAIT, || async {
        let og = ogs.get("og").await.ok()?;
        (og.metadata.annotations?.get("olm.providedAPIs")? == "Nginx.v1alpha1.example.com").then_some(())
    })
    .await;
    let list = eventually("OperatorGroup ClusterRoles", WAIT, || async {
        let l = og_roles(client, ns).await;
        (l.len() == 3 && l.iter().all(|r| r.aggregation_rule.is_some())).then_some(l)
    })
    .await;
    let mut names: Vec<String> = list.iter().filter_map(|r| r.metadata.name.clone()).collect();
    names.sort();
    assert!(
        names[0].starts_with("olm.og.og.admin-")
            && names[1].starts_with("olm.og.og.edit-")
            && names[2].starts_with("olm.og.og.view-"),
        "{names:?}"
    );
}

/// The ClusterRoles of OperatorGroup `og` in `ns`.
async fn og_roles(client: &kube::Client, ns: &str) -> Vec<ClusterRole> {
    Api::<ClusterRole>::all(client.clone())
        .list(
            &ListParams::default()
                .labels(&format!("olm.owner=og,olm.owner.namespace={ns},olm.owner.kind=OperatorGroup")),
        )
        .await
        .expect("list")
        .items
}

/// Removes nginx-operator from `ns` with `uninstall-crds`, and waits until the CRD and its
/// per-CRD ClusterRoles are gone.
async fn uninstall_with_crds(client: &kube::Client, ns: &str) {
    // uninstall-crds keeps a CRD another CSV still owns: wait until CSVs of other tests in this
    // cluster (in namespaces being deleted, finalized by this controller) are gone.
    eventually("no other CSV owns nginxes.example.com", WAIT, || async {
        let all = Api::<ClusterServiceVersion>::all(client.clone()).list(&ListParams::default()).await.ok()?;
        all.items
            .iter()
            .all(|c| {
                c.metadata.namespace.as_deref() == Some(ns) || !c.owned_crd_names().any(|n| n == "nginxes.example.com")
            })
            .then_some(())
    })
    .await;
    // The Subscription goes first (as `kubectl operator uninstall` does): while it exists, a
    // deleted CSV is installed again, CRD included, as OLM does.
    Api::<Subscription>::namespaced(client.clone(), ns)
        .delete("nginx-operator", &DeleteParams::default())
        .await
        .expect("delete Subscription");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    csvs.patch(
        "nginx-operator.v0.2.0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"operators.capstan.dev/uninstall-crds": "true"}}})),
    )
    .await
    .expect("annotate CSV");
    csvs.delete("nginx-operator.v0.2.0", &DeleteParams::default()).await.expect("delete CSV");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually("CRD removed by uninstall-crds", WAIT, || async {
        crds.get_opt("nginxes.example.com").await.ok()?.is_none().then_some(())
    })
    .await;
    let roles: Api<ClusterRole> = Api::all(client.clone());
    eventually("per-CRD ClusterRoles collected with the CRD", WAIT, || async {
        for s in ["admin", "edit", "view", "crdview"] {
            if roles.get_opt(&format!("nginxes.example.com-v1alpha1-{s}")).await.ok()?.is_some() {
                return None;
            }
        }
        Some(())
    })
    .await;
}

async fn set_upgradeable(client: &kube::Client, ns: &str, csv: &str, status: &str) {
    let ocs: Api<OperatorCondition> = Api::namespaced(client.clone(), ns);
    // As operator-lib's conditions package does: the operator writes spec.conditions.
    let patch = json!({"spec": {"conditions": [{"type": "Upgradeable", "status": status, "reason": "Migrating", "message": format!("test set {status}"), "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    ocs.patch(csv, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patch OperatorCondition");
}

/// The InstallPlan for `csv` once it waits for approval.
async fn plan_waiting_for_approval(plans: &Api<InstallPlan>, csv: &str) -> InstallPlan {
    eventually(&format!("plan for {csv} waiting for approval"), WAIT, || async {
        plans
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|p| p.spec.cluster_service_version_names.iter().any(|n| n == csv) && !p.spec.approved)
    })
    .await
}

async fn approve(plans: &Api<InstallPlan>, name: &str) -> InstallPlan {
    plans
        .patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"approved": true}})))
        .await
        .expect("approve")
}

/// The approved upgrade plan `plan` of `ns` is held by the Upgradeable=False condition of
/// nginx-operator.v0.1.0: its condition names the operator's message, the check copied the
/// condition to the OperatorCondition's status, the Subscription says so, and nothing of v0.2.0
/// is applied.
async fn upgrade_held_by_the_operator_condition(client: &kube::Client, ns: &str, plan: &str) {
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    let held = eventually("upgrade held by Upgradeable=False", WAIT, || async {
        let p = plans.get(plan).await.ok()?;
        let st = serde_json::to_value(p.status?).ok()?;
        st["conditions"].as_array()?.iter().any(|c| c["reason"] == "OperatorConditionNotUpgradeable").then_some(st)
    })
    .await;
    assert!(held.to_string().contains("test set False"), "the condition names the operator's message: {held}");
    // The check copied spec.conditions to status.conditions with the generation, as OLM's controller does.
    let ocs: Api<OperatorCondition> = Api::namespaced(client.clone(), ns);
    eventually("status.conditions copied from spec", WAIT, || async {
        let oc = ocs.get("nginx-operator.v0.1.0").await.ok()?;
        let c = oc.status?.conditions.into_iter().find(|c| c.type_ == "Upgradeable")?;
        (c.status == "False" && c.observed_generation == oc.metadata.generation).then_some(())
    })
    .await;
    let sub_cond = subscription_condition(client, ns, "nginx-operator", "InstallPlanFailed", "True").await;
    assert!(
        sub_cond.to_string().contains("OperatorConditionNotUpgradeable")
            || sub_cond.to_string().contains("not upgradeable"),
        "{sub_cond}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let csv_names: Vec<String> = Api::<ClusterServiceVersion>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(csv_names, ["nginx-operator.v0.1.0"], "nothing of v0.2.0 applied while held");
}
