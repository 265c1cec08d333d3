//! A webhook operator installed by the controller from a catalog (issue 14), on the local
//! control plane with kwok (the pod is faked, so the webhook is not called here; the TLS calls
//! are `tests/node_webhook_e2e.rs`): the InstallPlan holds the Service, the serving Secret
//! (without any key material: the certificate is issued when the plan is applied), the webhook
//! configuration and the CRD's conversion; once applied the API server has them with the CA of
//! the Secret as `caBundle`, and the Deployment mounts the certificate.

mod support;

use capstan::install::certs;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams};
use support::TestNamespace;
use support::controller::*;

#[tokio::test]
async fn controller_installs_a_webhook_operator() {
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter("capstan=info").try_init();
    let client = support::cluster().await;
    let registry = support::registry();
    let work = tempfile::tempdir().unwrap();
    let repo = format!("ctl-wh-{}", std::process::id());
    let bundle = support::repo_root().join("tests/fixtures/webhook-operator/0.1.0");
    let catalog_ref = publish_dirs(&registry, &repo, "catalog", work.path(), &[(&bundle, "0.1.0", "replaces")]);
    apply_crds(&client).await;
    let catalog_ns = TestNamespace::new(&client, "ctl-wh-catalog").await;
    let options = capstan::controller::Options { global_catalog_namespace: catalog_ns.name.clone(), catalog_cache: None, ..Default::default() };
    let controller = tokio::spawn(capstan::controller::run(client.clone(), options, std::future::pending()));
    catalog_source(&client, &catalog_ns.name, "examples", &catalog_ref).await;
    let ns = namespace_with_global_group(&client, "ctl-wh").await;
    subscribe(&client, &ns.name, "webhook-operator", &catalog_ns.name, "Automatic").await;
    let plan = plan_in_phase(&client, &ns.name, "webhook-operator", "Complete").await;
    let status = serde_json::to_value(plan.status.as_ref().unwrap()).unwrap();
    let steps = status["plan"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = steps.iter().map(|s| (s["resource"]["kind"].as_str().unwrap(), s["resource"]["name"].as_str().unwrap())).collect();
    for want in [("Service", "webhook-operator-service"), ("BundleSecret", "webhook-operator-service-cert"), ("RoleBinding", "webhook-operator-service-auth-reader")] {
        assert!(kinds.contains(&want), "{want:?} not in {kinds:?}");
    }
    assert!(kinds.iter().any(|(k, n)| *k == "ValidatingWebhookConfiguration" && n.starts_with("vwidgets.webhook.capstan.dev-")), "{kinds:?}");
    assert!(!status.to_string().contains("PRIVATE KEY"), "no key material in the InstallPlan");
    csv_version_succeeded(&client, &ns.name, "webhook-operator.v0.1.0").await;

    let secret = Api::<Secret>::namespaced(client.clone(), &ns.name).get("webhook-operator-service-cert").await.unwrap();
    let data: std::collections::BTreeMap<String, Vec<u8>> = secret.data.unwrap().into_iter().map(|(k, v)| (k, v.0)).collect();
    assert_eq!(certs::rotation_reason(&data, &certs::hostnames_for_service("webhook-operator-service", &ns.name), time::OffsetDateTime::now_utc()), None);
    let ca = data["olmCAKey"].clone();
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default().labels(&format!("olm.owner=webhook-operator.v0.1.0,olm.owner.namespace={}", ns.name)))
        .await
        .unwrap();
    assert_eq!(vwcs.items.len(), 1);
    assert_eq!(vwcs.items[0].webhooks.as_ref().unwrap()[0].client_config.ca_bundle.as_ref().unwrap().0, ca);
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get("widgets.webhook.capstan.dev").await.unwrap();
    assert_eq!(crd.spec.conversion.unwrap().webhook.unwrap().client_config.unwrap().ca_bundle.unwrap().0, ca);
    let dep = Api::<Deployment>::namespaced(client.clone(), &ns.name).get("webhook-operator").await.unwrap();
    let pod = dep.spec.unwrap().template;
    assert_eq!(pod.metadata.unwrap().annotations.unwrap()["olmcahash"], certs::ca_hash(std::str::from_utf8(&ca).unwrap()));
    let vols: Vec<String> = pod.spec.unwrap().volumes.unwrap().into_iter().map(|v| v.name).collect();
    assert_eq!(vols, ["apiservice-cert", "webhook-cert"]);

    controller.abort();
    // What the namespace's deletion does not take: the webhook objects (capstan's removal of a
    // CSV does this once the controller calls webhook::remove), the CRD, the cluster RBAC.
    let defs = capstan::install::webhook::Definitions::read(capstan::bundle::Bundle::load(&bundle).unwrap().csv().value()).unwrap();
    capstan::install::webhook::remove(&client, "webhook-operator.v0.1.0", &ns.name, &defs).await.unwrap();
    let _ = Api::<CustomResourceDefinition>::all(client.clone()).delete("widgets.webhook.capstan.dev", &DeleteParams::default()).await;
    cleanup_cluster_rbac(&client, &[&ns.name]).await;
}
