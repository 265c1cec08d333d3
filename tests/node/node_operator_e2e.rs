//! On the real node, capstan installs the example
//! nginx-operator (operator-sdk's helm-operator with `examples/nginx-operator/`, the image
//! `images/build.sh nginx-operator` builds) from the catalog `examples/publish.sh` publishes to the
//! local registry.
//!
//! One scenario per test, each with an install of its own (OwnNamespace, in a namespace of its
//! own), over one controller and catalog the tests share ([`fixture`]; building the images, it
//! checks that the committed CSV names exactly the images built here):
//! - the operator's pod runs on the real node, from the image built here, under the
//!   ServiceAccount capstan created;
//! - that identity may do what the CSV grants, and a permission the CSV does not grant is refused;
//! - an `Nginx` object makes the operator install its chart, whose pod serves a page this test
//!   fetches (from the machine and from another pod through the chart's Service);
//! - deleting the Subscription with the removal opt-in (docs/uninstall.md) removes the operand and
//!   then the operator and its RBAC.
//!
//! The controller runs in this process (one at a time: it watches every namespace). The
//! operator and its operand are placed on the real node by the Subscription's `spec.config`
//! (nodeSelector and toleration) and the `Nginx` object's chart values; the CSV itself has neither,
//! so the kwok tests that install the same bundles keep their pods on kwok's node. Each test that
//! passes removes its install as the removal test does; the namespaces go when the group ends.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::support::controller::{
    ControllerFixture, WAIT, can, catalog_source, create, csv_version_succeeded, namespace_with_group, sa_token,
};
use crate::support::eventually;
use crate::support::group::PerGroup;
use crate::support::node::{REAL_NODE, fetch_in_pod, image, logs_containing, on_real_node, real_node};
use capstan::api::{ClusterServiceVersion, Subscription};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const GROUP: &str = "node_operator_e2e";
const CSV: &str = "nginx-operator.v0.2.0";
const OPERATOR: &str = "nginx-operator-controller-manager";

static FIXTURE: PerGroup<OperatorFixture> = PerGroup::new(GROUP);

/// The controller of these tests, with the examples' catalog as published by
/// `examples/publish.sh` as CatalogSource `examples` (READY) in its global catalog namespace.
struct OperatorFixture {
    controller: ControllerFixture,
    /// The reference (with digest) of the operator image built here.
    operator_image: String,
    /// The reference (with digest) of the operand image (httpd) built here.
    httpd_image: String,
}

async fn fixture() -> Arc<OperatorFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            real_node();
            let registry = crate::support::registry();
            let (operator_image, httpd_image) = images_named_by_the_committed_csv(&registry);
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            let repo = format!("node-op-{}", std::process::id());
            let controller = ControllerFixture::start(&client, &repo, "node-op-catalog", options).await;
            // The catalog, published as the demo publishes it (images relocated to this registry by digest).
            let catalog_ns = &controller.catalog_ns.name;
            let catalog_ref = format!("{registry}/{catalog_ns}/catalog:latest");
            let published = script(&["examples/publish.sh", &catalog_ref]);
            assert!(published.contains("nginx-operator-bundle:v0.2.0@sha256:"), "{published}");
            catalog_source(&client, catalog_ns, "examples", &catalog_ref).await;
            OperatorFixture { controller, operator_image, httpd_image }
        })
        .await
}

/// Builds the operator and operand images and pushes them; checks that the committed CSV names
/// exactly them. Their references (with digest): the operator's, httpd's.
fn images_named_by_the_committed_csv(registry: &str) -> (String, String) {
    script(&["images/build.sh", "--push", registry, "httpd", "nginx-operator"]);
    let operator_image = image("nginx-operator");
    let httpd_image = image("httpd");
    let csv_text = std::fs::read_to_string(
        crate::support::repo_root()
            .join("bundles/nginx-operator/0.2.0/manifests/nginx-operator.clusterserviceversion.yaml"),
    )
    .expect("CSV");
    for (name, built) in [("nginx-operator", &operator_image), ("httpd", &httpd_image)] {
        let committed = format!("quay.io/example/{name}@{}", digest_of(built));
        assert!(
            csv_text.contains(&committed),
            "bundles/nginx-operator/0.2.0's CSV does not name the {name} image built here ({built}); \
             after changing its inputs run images/build.sh --pin-bundles and rebuild catalog/ (bundles/README.md)"
        );
    }
    (operator_image, httpd_image)
}

/// The digest in a `NAME@sha256:…` reference.
fn digest_of(reference: &str) -> &str {
    reference.rsplit_once('@').map(|(_, d)| d).unwrap_or_else(|| panic!("{reference} has no digest"))
}

/// Runs a repository script with the test's capstan binary and state directory; its stdout.
fn script(args: &[&str]) -> String {
    let out = std::process::Command::new("bash")
        .args(args)
        .current_dir(crate::support::repo_root())
        .env("CAPSTAN", env!("CARGO_BIN_EXE_capstan"))
        .env("CAPSTAN_CLUSTER_DIR", crate::support::state_dir())
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "{args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One plain HTTP GET from this machine: the status line and the body.
fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    let mut s = std::net::TcpStream::connect_timeout(&addr.parse().expect("address"), Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

fn nginx_api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1alpha1", "Nginx"), "nginxes");
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// An OwnNamespace install in a new namespace `prefix-…` (held by the fixture until the group
/// ends) whose pods go to the real node, with the removal opt-in (uninstall-operands) on its
/// Subscription; its name once the CSV is Succeeded and its Deployment available.
async fn install(f: &OperatorFixture, client: &kube::Client, prefix: &str) -> String {
    let ns = f.controller.hold(namespace_with_group(client, prefix).await);
    let toleration = json!([{"key": "capstan.dev/node", "operator": "Equal", "value": "real", "effect": "NoSchedule"}]);
    create::<Subscription>(client, &ns.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "nginx-operator", "namespace": ns.name, "annotations": {"operators.capstan.dev/uninstall-operands": "true"}},
        "spec": {"name": "nginx-operator", "channel": "alpha", "source": "examples", "sourceNamespace": f.controller.catalog_ns.name,
                 "installPlanApproval": "Automatic",
                 "config": {"nodeSelector": {"type": "real"}, "tolerations": toleration}}
    }))
    .await;
    csv_version_succeeded(client, &ns.name, CSV).await;
    ns.name
}

/// Deletes the Subscription (uninstall-operands: the CSV goes too) and waits until the CSV is gone.
async fn uninstall(client: &kube::Client, ns: &str) {
    Api::<Subscription>::namespaced(client.clone(), ns)
        .delete("nginx-operator", &DeleteParams::default())
        .await
        .expect("delete Subscription");
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    eventually("CSV gone", Duration::from_secs(180), || async {
        csvs.get_opt(CSV).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// The operator's pod is Ready on the real node, runs the image built here as the ServiceAccount
/// capstan made (owned by the CSV, as OLM makes it), and watches its namespace.
#[test]
fn operator_runs_on_the_real_node_from_the_image_built_here_as_its_service_account() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = install(&f, &client, "node-op-run").await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let operator_pod = eventually("the operator's pod Ready", WAIT, || async {
            let list = pods.list(&ListParams::default().labels("control-plane=controller-manager")).await.ok()?;
            list.items.into_iter().find(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
        })
        .await;
        let spec = operator_pod.spec.clone().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some(REAL_NODE));
        assert_eq!(spec.service_account_name.as_deref(), Some(OPERATOR));
        let container =
            &operator_pod.status.as_ref().and_then(|s| s.container_statuses.clone()).expect("container statuses")[0];
        let operator_image = &f.operator_image;
        assert!(container.image_id.ends_with(digest_of(operator_image)), "{} vs {operator_image}", container.image_id);
        let sa = Api::<ServiceAccount>::namespaced(client.clone(), &ns)
            .get(OPERATOR)
            .await
            .expect("the operator's ServiceAccount");
        // capstan created it, owned by the CSV as OLM makes it (ownerReference, no owner labels).
        assert!(
            sa.owner_references().iter().any(|o| o.kind == "ClusterServiceVersion" && o.name == CSV),
            "capstan created the ServiceAccount: {:?}",
            sa.metadata
        );
        logs_containing(&pods, &operator_pod.name_any(), "\"watching namespaces\",\"namespaces\":[\"").await;
        uninstall(&client, &ns).await;
    })
}

/// The operator's identity (a token of its ServiceAccount) may do what the CSV grants (Nginx
/// objects and Secrets in its namespace, Deployments), and nothing else: no deleting or creating
/// pods, no Secrets outside its OperatorGroup, no Nodes.
#[test]
fn operator_identity_may_do_what_the_csv_grants_and_nothing_else() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = install(&f, &client, "node-op-rbac").await;
        let token = sa_token(&client, &ns, OPERATOR).await;
        let as_operator = crate::support::client_with_token(&token).await;
        nginx_api(&as_operator, &ns)
            .list(&ListParams::default())
            .await
            .expect("the operator may list Nginx objects in its namespace");
        Api::<Secret>::namespaced(as_operator.clone(), &ns)
            .list(&ListParams::default())
            .await
            .expect("and Secrets (Helm's releases)");
        assert!(can(&as_operator, "create", "apps", "deployments", Some(&ns)).await);
        assert!(!can(&as_operator, "delete", "", "pods", Some(&ns)).await, "the CSV grants pods get/list/watch only");
        let pod_try: Pod =
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "not-granted"},
        "spec": {"containers": [{"name": "c", "image": f.httpd_image}]}}))
            .expect("pod");
        let refused = Api::<Pod>::namespaced(as_operator.clone(), &ns)
            .create(&PostParams { dry_run: true, ..Default::default() }, &pod_try)
            .await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(s)) if s.code == 403),
            "creating a pod is not granted: {refused:?}"
        );
        let catalog_ns = &f.controller.catalog_ns.name;
        let other = Api::<Secret>::namespaced(as_operator.clone(), catalog_ns).list(&ListParams::default()).await;
        assert!(
            matches!(&other, Err(kube::Error::Api(s)) if s.code == 403),
            "Secrets outside its OperatorGroup: {other:?}"
        );
        let nodes =
            Api::<k8s_openapi::api::core::v1::Node>::all(as_operator.clone()).list(&ListParams::default()).await;
        assert!(matches!(&nodes, Err(kube::Error::Api(s)) if s.code == 403), "Nodes: {nodes:?}");
        uninstall(&client, &ns).await;
    })
}

/// Creates the `Nginx` object `web` serving `page` on the real node and waits until the operator
/// has installed its chart: the chart's Deployment Available and the object Deployed (release
/// `web`).
async fn deploy_nginx(client: &kube::Client, ns: &str, page: &str) {
    let nginx: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1alpha1", "kind": "Nginx", "metadata": {"name": "web", "namespace": ns},
        "spec": on_real_node(json!({"replicaCount": 1, "page": page}))
    }))
    .expect("Nginx");
    nginx_api(client, ns).create(&PostParams::default(), &nginx).await.expect("create Nginx");
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    eventually("the chart's Deployment web Available", WAIT, || async {
        let st = deploys.get("web").await.ok()?.status?;
        st.conditions?.iter().any(|c| c.type_ == "Available" && c.status == "True").then_some(())
    })
    .await;
    let deployed = eventually("Nginx web Deployed", Duration::from_secs(60), || async {
        let o = nginx_api(client, ns).get("web").await.ok()?;
        let conds = o.data["status"]["conditions"].as_array()?.clone();
        conds.iter().any(|c| c["type"] == "Deployed" && c["status"] == "True").then_some(o)
    })
    .await;
    assert!(deployed.data["status"]["deployedRelease"]["name"] == "web", "{:?}", deployed.data["status"]);
}

/// An `Nginx` object makes the operator install its chart: the operand's pod runs on the real node
/// from the image the CSV names and serves the page, to this machine and to another pod through
/// the chart's Service.
#[test]
fn nginx_object_serves_a_page_from_the_real_node_and_through_its_service() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = install(&f, &client, "node-op-page").await;
        let page = format!("hello from {ns} through nginx-operator");
        deploy_nginx(&client, &ns, &page).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let web = pods.list(&ListParams::default().labels("app.kubernetes.io/instance=web")).await.expect("pods").items;
        assert_eq!(web.len(), 1);
        let web_spec = web[0].spec.clone().expect("spec");
        assert_eq!(web_spec.node_name.as_deref(), Some(REAL_NODE));
        assert!(
            web_spec.containers[0].image.as_deref() == Some(f.httpd_image.replace(":v1@", "@").as_str()),
            "the operand is the image the CSV names: {:?}",
            web_spec.containers[0].image
        );
        let pod_ip = web[0].status.as_ref().and_then(|s| s.pod_ip.clone()).expect("pod IP");
        let answer = eventually("the page from the operand's pod", Duration::from_secs(30), || async {
            http_get(&format!("{pod_ip}:8080"), "/from-the-test").ok().filter(|a| a.contains("200 OK"))
        })
        .await;
        assert!(answer.contains(&page) && answer.contains("path /from-the-test"), "{answer}");
        // And from another pod, through the chart's Service.
        let svc = Api::<Service>::namespaced(client.clone(), &ns).get("web").await.expect("the chart's Service");
        let cluster_ip = svc.spec.and_then(|s| s.cluster_ip).expect("ClusterIP");
        let fetched =
            fetch_in_pod(&client, &pods, "client", json!(["-get", format!("http://{cluster_ip}/through-the-service")]))
                .await;
        assert!(
            fetched.contains("200 OK") && fetched.contains(&page) && fetched.contains("path /through-the-service"),
            "{fetched}"
        );
        pods.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=client"))
            .await
            .expect("delete the client pods");
        uninstall(&client, &ns).await;
    })
}

/// Removal: deleting the Subscription (uninstall-operands) deletes the CSV; the Nginx object goes
/// first, while the operator runs (it uninstalls the release: Deployment, Service, ConfigMap,
/// release Secret), then the operator, its ServiceAccount, its RBAC and its pods.
#[test]
fn deleting_the_subscription_removes_the_operand_then_the_operator_and_its_rbac() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = install(&f, &client, "node-op-remove").await;
        deploy_nginx(&client, &ns, &format!("hello from {ns} through nginx-operator")).await;
        let owned = ListParams::default().labels(&format!("olm.owner={CSV}"));
        let role_names: Vec<String> = Api::<Role>::namespaced(client.clone(), &ns)
            .list(&owned)
            .await
            .expect("roles")
            .items
            .iter()
            .map(|r| r.name_any())
            .collect();
        assert!(!role_names.is_empty(), "capstan made a Role for the CSV's permissions");
        uninstall(&client, &ns).await;
        assert!(
            nginx_api(&client, &ns).get_opt("web").await.expect("get Nginx").is_none(),
            "the operand object is gone"
        );
        operand_gone(&client, &ns).await;
        assert!(
            Api::<ServiceAccount>::namespaced(client.clone(), &ns).get_opt(OPERATOR).await.expect("get SA").is_none(),
            "the operator's ServiceAccount is gone"
        );
        let roles = Api::<Role>::namespaced(client.clone(), &ns).list(&owned).await.expect("roles").items;
        let bindings =
            Api::<RoleBinding>::namespaced(client.clone(), &ns).list(&owned).await.expect("rolebindings").items;
        let cluster_roles = Api::<ClusterRole>::all(client.clone())
            .list(&ListParams::default().labels(&format!("olm.owner={CSV},olm.owner.namespace={ns}")))
            .await
            .expect("clusterroles")
            .items;
        assert!(
            roles.is_empty() && bindings.is_empty() && cluster_roles.is_empty(),
            "the operator's RBAC is gone: {roles:?} {bindings:?} {cluster_roles:?}"
        );
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        eventually("the operator's pods gone", Duration::from_secs(60), || async {
            pods.list(&ListParams::default()).await.ok()?.items.is_empty().then_some(())
        })
        .await;
    })
}

/// Waits until the operand (the chart's Deployment, Service, ConfigMap and release Secret) and
/// the operator's Deployment are gone from `ns`.
async fn operand_gone(client: &kube::Client, ns: &str) {
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    eventually(
        "the operand (Deployment, Service, ConfigMap, release Secret) and the operator gone",
        Duration::from_secs(60),
        || async {
            let d = deploys.list(&ListParams::default()).await.ok()?.items;
            let s = Api::<Service>::namespaced(client.clone(), ns).get_opt("web").await.ok()?;
            let cm = Api::<ConfigMap>::namespaced(client.clone(), ns).get_opt("web-page").await.ok()?;
            let rel = Api::<Secret>::namespaced(client.clone(), ns)
                .list(&ListParams::default().labels("owner=helm,name=web"))
                .await
                .ok()?
                .items;
            (d.is_empty() && s.is_none() && cm.is_none() && rel.is_empty()).then_some(())
        },
    )
    .await;
}
