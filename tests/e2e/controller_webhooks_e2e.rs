//! A webhook operator installed by the controller from a catalog, on the local control plane
//! with kwok (the pod is faked, so the webhook is not called here; the TLS calls are
//! `tests/node/node_webhook_e2e.rs`).
//!
//! One scenario per test, each in namespaces of its own, over one controller the tests share
//! ([`fixture`]); it watches every namespace, so no other group's tests run meanwhile
//! ([`crate::support::group`]). Its certificates are valid for 120 s (`Options::cert_validity`),
//! so rotation is due after 90 s. The scenarios:
//!
//! - an install for all namespaces: the InstallPlan holds the Service, the serving Secret (without
//!   any key material: the certificate is issued when the plan is applied), the webhook
//!   configuration and the CRD's conversion; once applied the API server has them with the CA of
//!   the Secret as `caBundle`, and the Deployment mounts the certificate; removal by the
//!   controller takes the webhook configuration and the CRD's conversion;
//! - the webhook configuration deleted and the conversion reset by hand are applied again;
//! - an OwnNamespace install beside the install for all namespaces is refused
//!   (InterOperatorGroupOwnerConflict) until that one is removed;
//! - two OwnNamespace installs share the auth bindings (one subject each); removing one leaves
//!   the other's, removing the last takes them;
//! - a deleted webhook Deployment and a deleted serving Secret come back; certificates are
//!   rotated when due, with the new CA everywhere;
//! - a webhook whose Deployment cannot run is named in the CSV's status and removal still cleans
//!   it up; an owned APIService the API server cannot reach keeps the CSV Installing and goes with
//!   it; required APIServices are requirements.
//!
//! Every install here owns the CRD `widgets.webhook.capstan.dev`, so the tests that need it to
//! themselves take [`WIDGET_CRD`] alone. Each test removes what it installed, and its namespaces
//! are deleted when it ends, while the controller still runs (and cleans up after a failed one).

use std::sync::Arc;
use std::time::Duration;

use crate::support::controller::*;
use crate::support::group::PerGroup;
use crate::support::{TestNamespace, eventually};
use capstan::api::{ClusterServiceVersion, InstallPlan, Subscription};
use capstan::install::certs;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

const GROUP: &str = "controller_webhooks_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

/// Who may use the CRD `widgets.webhook.capstan.dev` that every install of these tests owns. An
/// install for all namespaces intersects the OperatorGroup of every other install (the second is
/// refused with InterOperatorGroupOwnerConflict), and the CRD's installed-alongside annotations
/// name every install that applied it: those tests take the lock alone (write); the OwnNamespace
/// installs, which may run side by side, share it (read).
static WIDGET_CRD: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// How soon a deleted webhook configuration or reset conversion is applied again (the watches;
/// well under the 30 s look of a Succeeded CSV).
const RESTORED_WITHIN: Duration = Duration::from_secs(10);

/// The controller of these tests (certificates valid for 120 s) with three catalog sources in its
/// global catalog namespace, all READY: `examples` with the webhook operator as published, `own`
/// with its OwnNamespace variant ([`own_namespace_variant`]) and `api` with that variant owning an
/// APIService ([`apiservice_variant`]).
async fn fixture() -> Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("ctl-wh-{}", std::process::id());
            let options = capstan::controller::Options {
                catalog_cache: None,
                cert_validity: Some(Duration::from_secs(120)),
                ..Default::default()
            };
            let f = ControllerFixture::start(&client, &repo, "ctl-wh-catalog", options).await;
            let work = f.work.path();
            let bundle = crate::support::repo_root().join("tests/fixtures/webhook-operator/0.1.0");
            let own = own_namespace_variant(&bundle, work);
            let api = apiservice_variant(&own, work);
            // Each variant under a repository of its own: all three are webhook-operator-bundle:v0.1.0.
            for (source, dir) in [("examples", &bundle), ("own", &own), ("api", &api)] {
                let reference = publish_dirs(
                    &f.registry,
                    &format!("{repo}/{source}"),
                    &format!("{source}-catalog"),
                    work,
                    &[(dir.as_path(), "0.1.0", "replaces")],
                );
                catalog_source(&client, &f.catalog_ns.name, source, &reference).await;
            }
            f
        })
        .await
}

/// An install for all namespaces: the InstallPlan holds the Service, the serving Secret without
/// key material, the auth-reader RoleBinding and the webhook configuration; once applied the
/// Secret's certificate is valid, and its CA is the `caBundle` of the webhook configuration and of
/// the CRD's conversion and the hash on the Deployment, which mounts the certificate. Removal by
/// the controller takes the webhook configuration and the CRD's conversion.
#[test]
fn all_namespaces_install_spreads_the_serving_ca_and_removal_takes_it_back() {
    crate::support::run(GROUP, 0, async {
        let f = fixture().await;
        let _crd = WIDGET_CRD.write().await;
        let client = crate::support::cluster().await;
        let (ns, plan) = install_for_all_namespaces(&client, &f.catalog_ns.name).await;
        plan_holds_the_webhook_objects_without_keys(&plan);
        serving_ca_everywhere(&client, &ns.name).await;
        uninstall_for_all_namespaces(&client, &ns.name).await;
    })
}

/// The webhook configuration deleted and the CRD's conversion reset by hand: both applied again
/// from the InstallPlan with the CA of the serving Secret, and an Event says so — within 10 s:
/// the deletion and the change wake the CSV through the controller's watches (the 30 s look of a
/// Succeeded CSV is only the backstop).
#[test]
fn deleted_webhook_configuration_and_reset_conversion_are_applied_again() {
    crate::support::run(GROUP, 0, async {
        let f = fixture().await;
        let _crd = WIDGET_CRD.write().await;
        let client = crate::support::cluster().await;
        let (ns, _) = install_for_all_namespaces(&client, &f.catalog_ns.name).await;
        let vwc_name = owned_vwcs(&client, &ns.name)
            .await
            .first()
            .and_then(|v| v.metadata.name.clone())
            .expect("the webhook configuration of the install");
        let vwc_api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        vwc_api.delete(&vwc_name, &DeleteParams::default()).await.unwrap();
        let reset = json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}});
        Api::<CustomResourceDefinition>::all(client.clone())
            .patch("widgets.webhook.capstan.dev", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&reset))
            .await
            .unwrap();
        let secrets_of_ns: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
        let edited = std::time::Instant::now();
        eventually("webhook configuration and conversion restored with the serving CA", RESTORED_WITHIN, || async {
            let ca = secrets_of_ns.get("webhook-operator-service-cert").await.ok()?.data?.get("olmCAKey")?.0.clone();
            let vwc = vwc_api.get_opt(&vwc_name).await.ok()??;
            let vwc_ok = vwc.webhooks?.first()?.client_config.ca_bundle.as_ref()?.0 == ca;
            let crd =
                Api::<CustomResourceDefinition>::all(client.clone()).get("widgets.webhook.capstan.dev").await.ok()?;
            let conv = crd.spec.conversion?;
            let crd_ok = conv.strategy == "Webhook" && conv.webhook?.client_config?.ca_bundle?.0 == ca;
            (vwc_ok && crd_ok).then_some(())
        })
        .await;
        eprintln!("restored {:.1} s after the edits", edited.elapsed().as_secs_f64());
        webhooks_restored_event_names_the_repair(&client, &ns.name, &vwc_name).await;
        uninstall_for_all_namespaces(&client, &ns.name).await;
    })
}

/// InterOperatorGroupOwnerConflict: the same CRD's operator installed OwnNamespace in x while the
/// AllNamespaces install in ns (group `global`) provides Widget. x's CSV is Failed with OLM's
/// reason and a message naming the other group, the API and what to do; its InstallPlan completed
/// without its Deployment and webhook configuration, and the CRD's conversion still points at
/// ns's Service. Once ns's install is removed, x's CSV installs: its Deployment and webhook
/// configuration are created from its plan, and it kept its auth-binding subjects.
#[test]
fn own_namespace_install_beside_an_all_namespaces_owner_waits_for_its_removal() {
    crate::support::run(GROUP, 0, async {
        let f = fixture().await;
        let _crd = WIDGET_CRD.write().await;
        let client = crate::support::cluster().await;
        let (ns, _) = install_for_all_namespaces(&client, &f.catalog_ns.name).await;
        let x = namespace_with_group(&client, "ctl-wh-x").await;
        subscribe_to(&client, &x.name, "own", &f.catalog_ns.name, json!({})).await;
        refused_as_an_owner_conflict_with(&client, &x.name, &ns.name).await;

        uninstall_for_all_namespaces(&client, &ns.name).await;
        // x's install may own Widget now: Succeeded, with its Deployment and webhook configuration.
        csv_version_succeeded(&client, &x.name, "webhook-operator.v0.1.0").await;
        eventually("x's webhook configuration created from its plan", WAIT, || async {
            (owned_vwcs(&client, &x.name).await.len() == 1).then_some(())
        })
        .await;
        let x_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &x.name);
        let recovered = x_csvs.get("webhook-operator.v0.1.0").await.unwrap().status.unwrap();
        assert!(
            recovered
                .conditions
                .iter()
                .any(|c| c.message.as_deref() == Some("OperatorGroup no longer intersecting with conflicting owner")),
            "{:?}",
            recovered.conditions
        );
        assert_eq!(
            subjects_of_bindings(&client, &[&x.name]).await,
            (Some(vec![x.name.clone()]), Some(vec![x.name.clone()])),
            "x kept its auth-binding subjects while refused"
        );
        uninstall(&client, &x.name, "webhook-operator", "webhook-operator.v0.1.0").await;
        eventually("x's webhook configuration removed", WAIT, || async {
            owned_vwcs(&client, &x.name).await.is_empty().then_some(())
        })
        .await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let _ = crds.delete("widgets.webhook.capstan.dev", &DeleteParams::default()).await;
    })
}

/// Two OwnNamespace installs of a variant (validating webhook only; disjoint target namespaces:
/// no conflict) share the auth bindings, one subject each, and the CRD both applied names both
/// (OLM's installed-alongside). Removing a leaves b's subjects and webhook; removing b takes the
/// bindings.
#[test]
fn two_own_namespace_installs_share_the_auth_bindings_until_the_last_is_removed() {
    crate::support::run(GROUP, 0, async {
        let f = fixture().await;
        let _crd = WIDGET_CRD.write().await;
        let client = crate::support::cluster().await;
        // A CRD of these installs only: its installed-alongside annotations name who applied it.
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let _ = crds.delete("widgets.webhook.capstan.dev", &DeleteParams::default()).await;
        let a = install_own_namespace(&client, &f.catalog_ns.name, "ctl-wh-a").await;
        let b = install_own_namespace(&client, &f.catalog_ns.name, "ctl-wh-b").await;
        let both = (Some(vec![a.name.clone(), b.name.clone()]), Some(vec![a.name.clone(), b.name.clone()]));
        assert_eq!(
            sorted(subjects_of_bindings(&client, &[&a.name, &b.name]).await),
            both,
            "one subject per install in each shared binding"
        );
        // The CRD both installs applied names both (OLM's installed-alongside; the controller reads
        // a's CSV from its watch when b's plan applies the CRD).
        let alongside: Vec<String> = {
            let crd = crds.get("widgets.webhook.capstan.dev").await.expect("CRD");
            let mut v: Vec<String> = crd
                .metadata
                .annotations
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| k.starts_with(capstan::install::plan::ANNOTATION_INSTALLED_ALONGSIDE))
                .map(|(_, v)| v)
                .collect();
            v.sort();
            v
        };
        let mut want =
            vec![format!("{}/webhook-operator.v0.1.0", a.name), format!("{}/webhook-operator.v0.1.0", b.name)];
        want.sort();
        assert_eq!(alongside, want, "the shared CRD names both installs");

        uninstall(&client, &a.name, "webhook-operator", "webhook-operator.v0.1.0").await;
        eventually("a's subjects gone, b's kept", WAIT, || async {
            (owned_vwcs(&client, &a.name).await.is_empty()
                && subjects_of_bindings(&client, &[&a.name, &b.name]).await
                    == (Some(vec![b.name.clone()]), Some(vec![b.name.clone()])))
                .then_some(())
        })
        .await;
        assert_eq!(owned_vwcs(&client, &b.name).await.len(), 1, "b's webhook stays");
        uninstall(&client, &b.name, "webhook-operator", "webhook-operator.v0.1.0").await;
        eventually("the shared bindings go with the last install", WAIT, || async {
            (owned_vwcs(&client, &b.name).await.is_empty()
                && subjects_of_bindings(&client, &[&a.name, &b.name]).await == (None, None))
                .then_some(())
        })
        .await;
    })
}

/// A webhook Deployment deleted by hand comes back with the certificate's olmcahash.
#[test]
fn deleted_webhook_deployment_comes_back_with_the_ca_hash() {
    crate::support::run(GROUP, 0, async {
        let f = fixture().await;
        let _crd = WIDGET_CRD.read().await;
        let client = crate::support::cluster().await;
        let b = install_own_namespace(&client, &f.catalog_ns.name, "ctl-wh-dep").await;
        let deps: Api<Deployment> = Api::namespaced(client.clone(), &b.name);
        let hash = serving_secret_ca_hash(&client, &b.name).await;
        let uid = deps.get("webhook-operator").await.unwrap().metadata.uid;
        deps.delete("webhook-operator", &DeleteParams::default()).await.unwrap();
        eventually("the Deployment created again with the CA hash", WAIT, || async {
            let d = deps.get_opt("webhook-operator").await.ok()??;
            (d.metadata.uid != uid && d.spec?.template.metadata?.annotations?.get("olmcahash") == Some(&hash))
                .then_some(())
        })
        .await;
        uninstall(&client, &b.name, "webhook-operator", "webhook-operator.v0.1.0").await;
    })
}

/// A serving Secret deleted by hand is issued again (within the 30 s look of a Succeeded CSV),
/// with its CA in the webhook configuration.
#[test]
fn deleted_serving_secret_is_issued_again_with_its_ca_in_the_webhook() {
    crate::support::run(GROUP, 0, async {
        let f = fixture().await;
        let _crd = WIDGET_CRD.read().await;
        let client = crate::support::cluster().await;
        let b = install_own_namespace(&client, &f.catalog_ns.name, "ctl-wh-secret").await;
        let hash = serving_secret_ca_hash(&client, &b.name).await;
        let b_secrets: Api<Secret> = Api::namespaced(client.clone(), &b.name);
        b_secrets.delete("webhook-operator-service-cert", &DeleteParams::default()).await.unwrap();
        let new_hash = eventually("the deleted serving Secret issued again", WAIT, || async {
            let s = b_secrets.get_opt("webhook-operator-service-cert").await.ok()??;
            let h = s.metadata.annotations?.get("olmcahash")?.clone();
            (!h.is_empty() && h != hash).then_some(h)
        })
        .await;
        eventually("b's webhook configuration has the new CA", WAIT, || async {
            let vwc = owned_vwcs(&client, &b.name).await.into_iter().next()?;
            let ca = vwc.webhooks?.first()?.client_config.ca_bundle.clone()?;
            (certs::ca_hash(std::str::from_utf8(&ca.0).ok()?) == new_hash).then_some(())
        })
        .await;
        uninstall(&client, &b.name, "webhook-operator", "webhook-operator.v0.1.0").await;
    })
}

/// Rotation when due (120 s validity: after 90 s): new CA in the Secret, the webhook
/// configuration and the Deployment; the CSV's certsRotateAt moves on.
#[test]
fn serving_certificate_is_rotated_when_due_with_the_new_ca_everywhere() {
    crate::support::run(GROUP, 0, async {
        let f = fixture().await;
        let _crd = WIDGET_CRD.read().await;
        let client = crate::support::cluster().await;
        let a = install_own_namespace(&client, &f.catalog_ns.name, "ctl-wh-rotate").await;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &a.name);
        let ca_of = |s: Secret| s.data.and_then(|d| d.get("olmCAKey").cloned()).map(|b| b.0);
        let first_ca = ca_of(secrets.get("webhook-operator-service-cert").await.unwrap()).unwrap();
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &a.name);
        let first_rotate_at = eventually("certsRotateAt in CSV status", WAIT, || async {
            csvs.get("webhook-operator.v0.1.0").await.ok()?.status?.certs_rotate_at
        })
        .await;
        let rotated_ca = eventually("certificate rotated", Duration::from_secs(240), || async {
            let ca = ca_of(secrets.get("webhook-operator-service-cert").await.ok()?)?;
            (ca != first_ca).then_some(ca)
        })
        .await;
        eventually("new CA in the webhook configuration, the Deployment and the CSV status", WAIT, || async {
            let vwc = owned_vwcs(&client, &a.name).await.into_iter().next()?;
            let bundle_ok = vwc.webhooks?[0].client_config.ca_bundle.as_ref()?.0 == rotated_ca;
            let dep = Api::<Deployment>::namespaced(client.clone(), &a.name).get("webhook-operator").await.ok()?;
            let hash_ok = dep.spec?.template.metadata?.annotations?.get("olmcahash")?
                == &certs::ca_hash(std::str::from_utf8(&rotated_ca).ok()?);
            let at = csvs.get("webhook-operator.v0.1.0").await.ok()?.status?.certs_rotate_at?;
            (bundle_ok && hash_ok && at.0 > first_rotate_at.0).then_some(())
        })
        .await;
        uninstall(&client, &a.name, "webhook-operator", "webhook-operator.v0.1.0").await;
    })
}

/// A webhook whose Deployment cannot run (no node matches its selector) is named in the CSV's
/// status; removal still takes its webhook configuration.
#[test]
fn webhook_whose_deployment_cannot_run_is_named_and_removal_still_takes_it() {
    crate::support::run(GROUP, 0, async {
        let f = fixture().await;
        let _crd = WIDGET_CRD.read().await;
        let client = crate::support::cluster().await;
        let c = namespace_with_group(&client, "ctl-wh-c").await;
        subscribe_to(
            &client,
            &c.name,
            "own",
            &f.catalog_ns.name,
            json!({"nodeSelector": {"capstan.dev/no-such-node": "true"}}),
        )
        .await;
        let msg = eventually("CSV waiting on the webhook's Deployment", WAIT, || async {
            let st = Api::<ClusterServiceVersion>::namespaced(client.clone(), &c.name)
                .get("webhook-operator.v0.1.0")
                .await
                .ok()?
                .status?;
            let m = st.message.clone()?;
            (m.contains("webhook vwidgets.webhook.capstan.dev")
                && m.contains("Deployment webhook-operator, which is not available"))
            .then_some((format!("{:?}", st.phase), m))
        })
        .await;
        assert!(!msg.0.contains("Succeeded"), "{msg:?}");
        assert_eq!(owned_vwcs(&client, &c.name).await.len(), 1);
        uninstall(&client, &c.name, "webhook-operator", "webhook-operator.v0.1.0").await;
        eventually("the unserved webhook removed", WAIT, || async {
            owned_vwcs(&client, &c.name).await.is_empty().then_some(())
        })
        .await;
    })
}

/// An owned APIService that the API server cannot reach (kwok's pods serve nothing): the CSV is
/// not Succeeded and says which APIService; its requirement names the Deployment; the APIService
/// points at the install's Service with a CA; removal deletes it.
#[test]
fn unreachable_owned_apiservice_keeps_the_csv_installing_and_goes_with_it() {
    crate::support::run(GROUP, 0, async {
        let f = fixture().await;
        let _crd = WIDGET_CRD.read().await;
        let client = crate::support::cluster().await;
        let d = namespace_with_group(&client, "ctl-wh-d").await;
        subscribe_to(&client, &d.name, "api", &f.catalog_ns.name, json!({})).await;
        let st = eventually("CSV waiting on its APIService", WAIT, || async {
            let st = Api::<ClusterServiceVersion>::namespaced(client.clone(), &d.name)
                .get("webhook-operator.v0.1.0")
                .await
                .ok()?
                .status?;
            st.message.as_deref()?.contains("APIService v1.gizmos.capstan.dev is not Available").then_some(st)
        })
        .await;
        assert_eq!(st.phase.as_ref().map(|p| p.as_str()), Some("Installing"), "{st:?}");
        let req = st.requirement_status.iter().find(|r| r.kind == "APIService").expect("APIService requirement");
        assert_eq!((req.name.as_str(), req.status.as_str()), ("v1.gizmos.capstan.dev", "DeploymentFound"));
        let apiservices = kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
            "apiservices",
        );
        let api_svcs: Api<kube::core::DynamicObject> = Api::all_with(client.clone(), &apiservices);
        let svc = api_svcs.get("v1.gizmos.capstan.dev").await.expect("APIService created");
        assert_eq!(svc.data["spec"]["service"]["namespace"], d.name.as_str());
        assert!(svc.data["spec"]["caBundle"].as_str().is_some_and(|b| !b.is_empty()), "caBundle filled");
        uninstall(&client, &d.name, "webhook-operator", "webhook-operator.v0.1.0").await;
        eventually("APIService removed with the CSV", WAIT, || async {
            api_svcs.get_opt("v1.gizmos.capstan.dev").await.ok()?.is_none().then_some(())
        })
        .await;
    })
}

/// Required APIServices are requirements, as OLM's requirementStatus: v1.apps (served,
/// Available) Present; v1.nowhere.example.com NotPresent, so the CSV stays Pending.
#[test]
fn required_apiservices_are_requirements_as_olm_reports_them() {
    crate::support::run(GROUP, 0, async {
        let _f = fixture().await;
        let client = crate::support::cluster().await;
        let e = namespace_with_group(&client, "ctl-wh-e").await;
        create::<ClusterServiceVersion>(&client, &e.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "needs-apis.v1.0.0", "namespace": e.name},
        "spec": {"displayName": "needs-apis", "installModes": [{"type": "OwnNamespace", "supported": true}],
                 "apiservicedefinitions": {"required": [{"name": "deployments", "group": "apps", "version": "v1", "kind": "Deployment"},
                                                        {"name": "ghosts", "group": "nowhere.example.com", "version": "v1", "kind": "Ghost"}]},
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}}
    }))
    .await;
        let st = eventually("required APIServices in requirementStatus", WAIT, || async {
            let st = Api::<ClusterServiceVersion>::namespaced(client.clone(), &e.name)
                .get("needs-apis.v1.0.0")
                .await
                .ok()?
                .status?;
            (st.reason.as_ref().map(|r| r.as_str()) == Some("RequirementsNotMet")).then_some(st)
        })
        .await;
        let apis: Vec<(&str, &str)> = st
            .requirement_status
            .iter()
            .filter(|r| r.kind == "APIService")
            .map(|r| (r.name.as_str(), r.status.as_str()))
            .collect();
        assert_eq!(
            apis,
            [("v1.apps", "Present"), ("v1.nowhere.example.com", "NotPresent")],
            "{:?}",
            st.requirement_status
        );
        assert!(
            st.message.as_deref().unwrap_or_default().contains("required APIService v1.nowhere.example.com (Ghost)"),
            "{:?}",
            st.message
        );
    })
}

/// Installs webhook-operator from `examples` in a new namespace whose OperatorGroup `global`
/// targets all namespaces; returns the namespace and its InstallPlan (Complete) once the CSV has
/// Succeeded.
async fn install_for_all_namespaces(client: &kube::Client, catalog_ns: &str) -> (TestNamespace, InstallPlan) {
    let ns = namespace_with_global_group(client, "ctl-wh").await;
    subscribe(client, &ns.name, "webhook-operator", catalog_ns, "Automatic").await;
    let plan = plan_in_phase(client, &ns.name, "webhook-operator", "Complete").await;
    csv_version_succeeded(client, &ns.name, "webhook-operator.v0.1.0").await;
    (ns, plan)
}

/// Removal by the controller of the install in `ns` ([`install_for_all_namespaces`]): its webhook
/// configuration and the CRD's conversion go with the CSV.
async fn uninstall_for_all_namespaces(client: &kube::Client, ns: &str) {
    uninstall(client, ns, "webhook-operator", "webhook-operator.v0.1.0").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually("VWC and conversion removed with the CSV", WAIT, || async {
        let left = owned_vwcs(client, ns).await;
        let crd = crds.get("widgets.webhook.capstan.dev").await.ok()?;
        (left.is_empty() && crd.spec.conversion.as_ref().is_some_and(|c| c.strategy == "None" && c.webhook.is_none()))
            .then_some(())
    })
    .await;
}

/// Installs the OwnNamespace variant from `own` in a new namespace (`prefix-…`) whose
/// OperatorGroup targets it, and waits until its CSV has Succeeded.
async fn install_own_namespace(client: &kube::Client, catalog_ns: &str, prefix: &str) -> TestNamespace {
    let ns = namespace_with_group(client, prefix).await;
    subscribe_to(client, &ns.name, "own", catalog_ns, json!({})).await;
    csv_version_succeeded(client, &ns.name, "webhook-operator.v0.1.0").await;
    ns
}

/// The steps of the plan of an install for all namespaces hold the Service, the serving Secret,
/// the auth-reader RoleBinding and the webhook configuration, and its status no key material.
fn plan_holds_the_webhook_objects_without_keys(plan: &InstallPlan) {
    let status = serde_json::to_value(plan.status.as_ref().unwrap()).unwrap();
    let steps = status["plan"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = steps
        .iter()
        .map(|s| (s["resource"]["kind"].as_str().unwrap(), s["resource"]["name"].as_str().unwrap()))
        .collect();
    for want in [
        ("Service", "webhook-operator-service"),
        ("BundleSecret", "webhook-operator-service-cert"),
        ("RoleBinding", "webhook-operator-service-auth-reader"),
    ] {
        assert!(kinds.contains(&want), "{want:?} not in {kinds:?}");
    }
    assert!(
        kinds
            .iter()
            .any(|(k, n)| *k == "ValidatingWebhookConfiguration" && n.starts_with("vwidgets.webhook.capstan.dev-")),
        "{kinds:?}"
    );
    assert!(!status.to_string().contains("PRIVATE KEY"), "no key material in the InstallPlan");
}

/// The serving Secret of the install for all namespaces in `ns` holds a certificate not due for
/// rotation; its CA is the `caBundle` of the one webhook configuration and of the CRD's
/// conversion, and its hash is on the Deployment's pods, which mount the certificates.
async fn serving_ca_everywhere(client: &kube::Client, ns: &str) {
    let secret = Api::<Secret>::namespaced(client.clone(), ns).get("webhook-operator-service-cert").await.unwrap();
    let data: std::collections::BTreeMap<String, Vec<u8>> =
        secret.data.unwrap().into_iter().map(|(k, v)| (k, v.0)).collect();
    assert_eq!(
        certs::rotation_reason(
            &data,
            &certs::hostnames_for_service("webhook-operator-service", ns),
            time::OffsetDateTime::now_utc()
        ),
        None
    );
    let ca = data["olmCAKey"].clone();
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default().labels(&format!("olm.owner=webhook-operator.v0.1.0,olm.owner.namespace={ns}")))
        .await
        .unwrap();
    assert_eq!(vwcs.items.len(), 1);
    assert_eq!(vwcs.items[0].webhooks.as_ref().unwrap()[0].client_config.ca_bundle.as_ref().unwrap().0, ca);
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get("widgets.webhook.capstan.dev").await.unwrap();
    assert_eq!(crd.spec.conversion.unwrap().webhook.unwrap().client_config.unwrap().ca_bundle.unwrap().0, ca);
    let dep = Api::<Deployment>::namespaced(client.clone(), ns).get("webhook-operator").await.unwrap();
    let pod = dep.spec.unwrap().template;
    assert_eq!(
        pod.metadata.unwrap().annotations.unwrap()["olmcahash"],
        certs::ca_hash(std::str::from_utf8(&ca).unwrap())
    );
    let vols: Vec<String> = pod.spec.unwrap().volumes.unwrap().into_iter().map(|v| v.name).collect();
    assert_eq!(vols, ["apiservice-cert", "webhook-cert"]);
}

/// The WebhooksRestored Event of the install in `ns` names what was repaired (the deleted
/// webhook configuration `vwc_name` or the reset conversion) and where it came from.
async fn webhooks_restored_event_names_the_repair(client: &kube::Client, ns: &str, vwc_name: &str) {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    let restored = eventually("a WebhooksRestored Event", WAIT, || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("WebhooksRestored"))
            .and_then(|e| e.note)
    })
    .await;
    // (Both repairs are usually one Event; if the 30 s look fell between the two edits they are
    // two Events of one reason, which the recorder folds into one series with the first note.)
    assert!(
        restored.contains(&format!("ValidatingWebhookConfiguration {vwc_name} was deleted"))
            || restored.contains("CustomResourceDefinition widgets.webhook.capstan.dev had its spec.conversion reset"),
        "{restored}"
    );
    assert!(
        restored.contains("capstan applied them again from the InstallPlan of webhook-operator.v0.1.0"),
        "{restored}"
    );
}

/// The install in `x` is refused while the install for all namespaces in `owner` provides Widget:
/// its CSV is Failed with InterOperatorGroupOwnerConflict and a message naming `owner`'s group, the
/// API and what to do; its InstallPlan completed without its Deployment and webhook
/// configuration; the CRD's conversion stays with `owner`'s Service; and, as OLM
/// (`ensureSubscriptionCSVState`), its Subscription is AtLatestKnown (the CSV exists, whatever its
/// phase).
async fn refused_as_an_owner_conflict_with(client: &kube::Client, x: &str, owner: &str) {
    let x_csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), x);
    let conflict = eventually("x's CSV Failed with InterOperatorGroupOwnerConflict", WAIT, || async {
        let st = x_csvs.get("webhook-operator.v0.1.0").await.ok()?.status?;
        (st.phase.as_ref()?.as_str() == "Failed" && st.reason.as_ref()?.as_str() == "InterOperatorGroupOwnerConflict")
            .then_some(st.message?)
    })
    .await;
    for part in [
        "intersecting operatorgroups provide the same apis",
        &format!("OperatorGroup {owner}/global (targets all namespaces"),
        "Widget.v1.webhook.capstan.dev",
        "uninstall one of the two",
    ] {
        assert!(conflict.contains(part), "{part:?} not in {conflict:?}");
    }
    plan_in_phase(client, x, "webhook-operator", "Complete").await;
    let x_deps: Api<Deployment> = Api::namespaced(client.clone(), x);
    assert!(x_deps.get_opt("webhook-operator").await.unwrap().is_none(), "no Deployment while refused");
    assert!(owned_vwcs(client, x).await.is_empty(), "no webhook configuration while refused");
    let conv = Api::<CustomResourceDefinition>::all(client.clone())
        .get("widgets.webhook.capstan.dev")
        .await
        .unwrap()
        .spec
        .conversion
        .unwrap();
    assert_eq!(
        conv.webhook.unwrap().client_config.unwrap().service.unwrap().namespace,
        owner,
        "the conversion stays with ns's operator"
    );
    let x_subs: Api<Subscription> = Api::namespaced(client.clone(), x);
    eventually("x's Subscription AtLatestKnown", WAIT, || async {
        let state = serde_json::to_value(x_subs.get("webhook-operator").await.ok()?.status?.state?).ok()?;
        (state == json!("AtLatestKnown")).then_some(())
    })
    .await;
}

/// The `olmcahash` annotation of the serving Secret of the install in `ns`.
async fn serving_secret_ca_hash(client: &kube::Client, ns: &str) -> String {
    Api::<Secret>::namespaced(client.clone(), ns)
        .get("webhook-operator-service-cert")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap()["olmcahash"]
        .clone()
}

/// The bundle with OwnNamespace supported and without its conversion webhook (conversion
/// webhooks need AllNamespaces), in `work/own/webhook-operator/0.1.0`.
fn own_namespace_variant(bundle: &std::path::Path, work: &std::path::Path) -> std::path::PathBuf {
    let dir = work.join("own/webhook-operator/0.1.0");
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for f in std::fs::read_dir(bundle.join(sub)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dir.join(sub).join(f.file_name().unwrap())).unwrap();
        }
    }
    let csv_path = dir.join("manifests/webhook-operator.clusterserviceversion.yaml");
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let csv =
        csv.replacen("  - type: OwnNamespace\n    supported: false", "  - type: OwnNamespace\n    supported: true", 1);
    let csv = &csv[..csv.find("  - type: ConversionWebhook").expect("conversion webhook is the last definition")];
    std::fs::write(&csv_path, csv).unwrap();
    dir
}

/// The OwnNamespace variant that also owns APIService `v1.gizmos.capstan.dev`, served by its
/// Deployment on the webhook's target port (one port may lead to one target only), in
/// `work/api/webhook-operator/0.1.0`.
fn apiservice_variant(own: &std::path::Path, work: &std::path::Path) -> std::path::PathBuf {
    let dir = work.join("api/webhook-operator/0.1.0");
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for f in std::fs::read_dir(own.join(sub)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dir.join(sub).join(f.file_name().unwrap())).unwrap();
        }
    }
    let csv_path = dir.join("manifests/webhook-operator.clusterserviceversion.yaml");
    let mut csv = std::fs::read_to_string(&csv_path).unwrap();
    csv.push_str("  apiservicedefinitions:\n    owned:\n    - name: gizmos\n      group: gizmos.capstan.dev\n      version: v1\n      kind: Gizmo\n      displayName: Gizmo\n      deploymentName: webhook-operator\n      containerPort: 9443\n");
    std::fs::write(&csv_path, csv).unwrap();
    dir
}

/// A Subscription to webhook-operator from catalog source `source` with `spec.config` `config`.
async fn subscribe_to(client: &kube::Client, ns: &str, source: &str, catalog_ns: &str, config: serde_json::Value) {
    create::<Subscription>(client, ns, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "webhook-operator", "namespace": ns},
        "spec": {"name": "webhook-operator", "channel": "alpha", "source": source, "sourceNamespace": catalog_ns, "installPlanApproval": "Automatic", "config": config}
    }))
    .await;
}

/// Deletes the Subscription, then the CSV (as `kubectl operator uninstall`), and waits until the
/// CSV is gone.
async fn uninstall(client: &kube::Client, ns: &str, sub: &str, csv: &str) {
    Api::<Subscription>::namespaced(client.clone(), ns)
        .delete(sub, &DeleteParams::default())
        .await
        .expect("delete Subscription");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    csvs.delete(csv, &DeleteParams::default()).await.expect("delete CSV");
    eventually(&format!("CSV {ns}/{csv} removed"), WAIT, || async {
        csvs.get_opt(csv).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// The ValidatingWebhookConfigurations of the install in `ns`.
async fn owned_vwcs(client: &kube::Client, ns: &str) -> Vec<ValidatingWebhookConfiguration> {
    let sel = format!("olm.owner=webhook-operator.v0.1.0,olm.owner.namespace={ns}");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default().labels(&sel))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// The namespaces of the subjects of the auth-delegator ClusterRoleBinding and the auth-reader
/// RoleBinding in kube-system among `mine` (this test's namespaces; installs of other tests or
/// runs may share the bindings). `None`: no subject of `mine` in the binding.
async fn subjects_of_bindings(client: &kube::Client, mine: &[&str]) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let ns_of = |s: Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
        s.unwrap_or_default()
            .into_iter()
            .filter_map(|s| s.namespace)
            .filter(|n| mine.contains(&n.as_str()))
            .collect::<Vec<_>>()
    };
    let crb = Api::<ClusterRoleBinding>::all(client.clone())
        .get_opt("webhook-operator-service-system:auth-delegator")
        .await
        .unwrap();
    let rb = Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
        .get_opt("webhook-operator-service-auth-reader")
        .await
        .unwrap();
    let ours = |v: Vec<String>| (!v.is_empty()).then_some(v);
    (crb.and_then(|b| ours(ns_of(b.subjects))), rb.and_then(|b| ours(ns_of(b.subjects))))
}

fn sorted((a, b): (Option<Vec<String>>, Option<Vec<String>>)) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let s = |v: Option<Vec<String>>| {
        v.map(|mut v| {
            v.sort();
            v
        })
    };
    (s(a), s(b))
}
