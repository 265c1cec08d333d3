//! Webhook objects on the real API server, without a real node: capstan's test
//! operator (`tests/fixtures/webhook-operator`) planned and applied by `capstan::install` on the
//! local control plane (kwok runs the pod, so nothing answers on the webhook port). Shows that
//! the API server accepts every object capstan plans for webhooks (Service, TLS Secret, webhook
//! configuration, CRD `spec.conversion`, the auth bindings), that the `caBundle` everywhere is
//! the CA of the Secret, that a re-apply keeps the certificate and a due one is replaced, and
//! that a webhook that cannot be served blocks writes until `webhook_removal::remove` — which runs
//! before the Deployment is deleted — unblocks them. The real TLS calls are in
//! `tests/node/node_webhook_e2e.rs` (real node).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::eventually;
use capstan::bundle::Bundle;
use capstan::install::certs::{self, ANNOTATION_CA_HASH};
use capstan::install::webhook::Definitions;
use capstan::install::webhook_removal;
use capstan::install::{self, ApplyOptions, InstallTarget};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const CRD: &str = "widgets.webhook.capstan.dev";

async fn apply(client: &kube::Client, b: &Bundle, ns: &str, opts: &ApplyOptions) {
    let mut t = InstallTarget {
        namespace: ns.into(),
        target_namespaces: vec!["".into()],
        package: b.package().into(),
        csv_name: b.name().into(),
        ..Default::default()
    };
    t.owner = None;
    // Without the CSV object: no controller runs here to own it.
    let steps: Vec<install::Step> =
        install::steps(b, &t).unwrap().into_iter().filter(|s| s.kind != "ClusterServiceVersion").collect();
    for r in install::apply(client, &steps, opts).await {
        assert!(r.applied(), "{r}");
    }
}

fn secret_data(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    s.data.clone().unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect()
}

/// One install of the test operator, in one namespace, through its lifetime: the objects are
/// accepted with the Secret's CA in every caBundle; a re-apply keeps the certificate and a due
/// one is replaced; a webhook nobody serves blocks writes until it is removed. One test, as the
/// steps share the cluster-scoped CRD and bindings of the operator.
#[test]
fn webhook_objects_on_the_api_server() {
    crate::support::run("install_webhooks_cluster", 0, async {
        let client = crate::support::cluster().await;
        let b = Bundle::load(&crate::support::repo_root().join("tests/fixtures/webhook-operator/0.1.0")).unwrap();
        let defs = Definitions::read(b.csv().value()).unwrap();
        let ns = format!("wh-cluster-{}", std::process::id());
        let nsobj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &nsobj).await.unwrap();
        let csv = b.name().to_string();
        let result = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(async {
            apply(&client, &b, &ns, &ApplyOptions::default()).await;
            let (data, vwc_name) = assert_objects_accepted_with_the_secrets_ca(&client, &ns, &csv).await;
            assert_certificate_kept_and_rotated(&client, &b, &ns, &data, &vwc_name).await;
            assert_unserved_webhook_blocks_writes_until_removed(&client, &ns, &csv, &defs).await;
        }))
        .await;
        let _ = webhook_removal::remove(&client, &csv, &ns, &defs).await;
        let _ = Api::<CustomResourceDefinition>::all(client.clone()).delete(CRD, &DeleteParams::default()).await;
        let _ = Api::<Namespace>::all(client.clone()).delete(&ns, &DeleteParams::default()).await;
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    })
}

/// The API server accepted every planned object: a valid TLS Secret for the Service whose CA is
/// the caBundle of the webhook configuration and of the CRD's conversion, and the Deployment's CA
/// hash; the auth bindings exist. The Secret's data and the configuration's name.
async fn assert_objects_accepted_with_the_secrets_ca(
    client: &kube::Client,
    ns: &str,
    csv: &str,
) -> (BTreeMap<String, Vec<u8>>, String) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret = secrets.get("webhook-operator-service-cert").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = secret_data(&secret);
    let hosts = certs::hostnames_for_service("webhook-operator-service", ns);
    assert_eq!(
        certs::rotation_reason(&data, &hosts, time::OffsetDateTime::now_utc()),
        None,
        "a valid certificate for the Service"
    );
    let ca = String::from_utf8(data["olmCAKey"].clone()).unwrap();
    let hash = certs::ca_hash(&ca);
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default().labels(&format!(
            "olm.owner={csv},olm.owner.namespace={ns},olm.webhook-description-generate-name=vwidgets.webhook.capstan.dev"
        )))
        .await
        .unwrap();
    assert_eq!(vwcs.items.len(), 1);
    assert_eq!(vwcs.items[0].webhooks.as_ref().unwrap()[0].client_config.ca_bundle.as_ref().unwrap().0, ca.as_bytes());
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(CRD).await.unwrap();
    let conv = crd.spec.conversion.unwrap();
    assert_eq!(conv.strategy, "Webhook");
    let cc = conv.webhook.unwrap().client_config.unwrap();
    assert_eq!(cc.ca_bundle.unwrap().0, ca.as_bytes());
    assert_eq!(cc.service.unwrap().path.as_deref(), Some("/convert"));
    let dep = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), ns)
        .get("webhook-operator")
        .await
        .unwrap();
    assert_eq!(dep.spec.unwrap().template.metadata.unwrap().annotations.unwrap()[ANNOTATION_CA_HASH], hash);
    Api::<ClusterRoleBinding>::all(client.clone()).get("webhook-operator-service-system:auth-delegator").await.unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), "kube-system")
        .get("webhook-operator-service-auth-reader")
        .await
        .unwrap();
    (data, vwcs.items[0].metadata.name.clone().unwrap())
}

/// Re-applied (an upgrade re-applies the same objects), the certificate `data` is kept; a missing
/// Secret gets a new one, which a short validity makes due and the next apply replaces, in the
/// caBundle of configuration `vwc_name` too.
async fn assert_certificate_kept_and_rotated(
    client: &kube::Client,
    b: &Bundle,
    ns: &str,
    data: &BTreeMap<String, Vec<u8>>,
    vwc_name: &str,
) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let hosts = certs::hostnames_for_service("webhook-operator-service", ns);
    apply(client, b, ns, &ApplyOptions::default()).await;
    assert_eq!(&secret_data(&secrets.get("webhook-operator-service-cert").await.unwrap()), data, "kept");
    // A short validity: issued with 60 s, due after 45 s, replaced by the next apply.
    let short_validity = || ApplyOptions { cert_validity: Duration::from_secs(60), ..Default::default() };
    apply(client, b, ns, &short_validity()).await;
    let short = secret_data(&secrets.get("webhook-operator-service-cert").await.unwrap());
    assert_eq!(&short, data, "a valid certificate is kept whatever the configured validity");
    secrets.delete("webhook-operator-service-cert", &DeleteParams::default()).await.unwrap();
    apply(client, b, ns, &short_validity()).await;
    let short = secret_data(&secrets.get("webhook-operator-service-cert").await.unwrap());
    assert_ne!(&short, data, "a missing Secret gets a new certificate");
    assert_eq!(certs::rotation_reason(&short, &hosts, time::OffsetDateTime::now_utc()), None);
    tokio::time::sleep(Duration::from_secs(46)).await;
    assert!(
        certs::rotation_reason(&short, &hosts, time::OffsetDateTime::now_utc())
            .is_some_and(|r| r.contains("due for rotation"))
    );
    apply(client, b, ns, &ApplyOptions::default()).await;
    let rotated = secret_data(&secrets.get("webhook-operator-service-cert").await.unwrap());
    assert_ne!(rotated, short, "rotated");
    let new_ca = String::from_utf8(rotated["olmCAKey"].clone()).unwrap();
    let vwc = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get(vwc_name).await.unwrap();
    assert_eq!(
        vwc.webhooks.unwrap()[0].client_config.ca_bundle.as_ref().unwrap().0,
        new_ca.as_bytes(),
        "caBundle follows the rotation"
    );
}

/// Nothing serves the webhook (kwok): failurePolicy Fail blocks writes until
/// `webhook_removal::remove` takes the webhook objects away (idempotently), the Deployment still
/// there.
async fn assert_unserved_webhook_blocks_writes_until_removed(
    client: &kube::Client,
    ns: &str,
    csv: &str,
    defs: &Definitions,
) {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("webhook.capstan.dev", "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let w: DynamicObject = serde_json::from_value(json!({"apiVersion": "webhook.capstan.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": 1}})).unwrap();
    let err = eventually("the CRD served", Duration::from_secs(30), || async {
        match widgets.create(&PostParams::default(), &w).await {
            Err(kube::Error::Api(e)) if e.code == 404 => None,
            other => Some(other),
        }
    })
    .await
    .expect_err("blocked by a webhook nobody serves");
    assert!(err.to_string().contains("vwidgets.webhook.capstan.dev"), "{err}");
    let removed = webhook_removal::remove(client, csv, ns, defs).await.unwrap();
    assert!(
        removed.iter().any(|r| r.starts_with("ValidatingWebhookConfiguration vwidgets.webhook.capstan.dev-")),
        "{removed:?}"
    );
    assert!(removed.contains(&format!("CustomResourceDefinition {CRD} spec.conversion")), "{removed:?}");
    assert!(
        removed.contains(&"ClusterRoleBinding webhook-operator-service-system:auth-delegator".to_string()),
        "{removed:?}"
    );
    assert!(
        removed.contains(&"RoleBinding kube-system/webhook-operator-service-auth-reader".to_string()),
        "{removed:?}"
    );
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(CRD).await.unwrap();
    assert_eq!(crd.spec.conversion.map(|c| c.strategy).as_deref(), Some("None"));
    widgets
        .create(&PostParams::default(), &w)
        .await
        .expect("writes work once the webhook is removed, with the Deployment still there");
    assert!(webhook_removal::remove(client, csv, ns, defs).await.unwrap().is_empty(), "idempotent");
}
