//! On the real node, capstan installs the example
//! nginx-operator (operator-sdk's helm-operator with `examples/nginx-operator/`, the image
//! `images/build.sh nginx-operator` builds) from the catalog `examples/publish.sh` publishes to the
//! local registry; the operator's pod runs on the real node under the ServiceAccount and RBAC capstan
//! created, and a permission its CSV does not grant is refused to that identity; an `Nginx` object
//! makes the operator install its chart, whose pod serves a page this test fetches (from the machine
//! and from another pod through the chart's Service); deleting the Subscription with the removal
//! opt-in (docs/uninstall.md) removes the operand and then the operator.
//!
//! The controller runs in this process (one per test binary: it watches every namespace). The
//! operator and its operand are placed on the real node by the Subscription's `spec.config`
//! (nodeSelector and toleration) and the `Nginx` object's chart values; the CSV itself has neither,
//! so the kwok tests that install the same bundles keep their pods on kwok's node.

use std::io::{Read, Write};
use std::time::Duration;

use crate::support::controller::{
    WAIT, apply_crds, can, catalog_source, cleanup_cluster_rbac, create, csv_version_succeeded, namespace_with_group,
    sa_token,
};
use crate::support::node::{REAL_NODE, fetch_in_pod, image, logs_containing, on_real_node, real_node};
use crate::support::{TestNamespace, eventually};
use capstan::api::{ClusterServiceVersion, Subscription};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const CSV: &str = "nginx-operator.v0.2.0";
const OPERATOR: &str = "nginx-operator-controller-manager";

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

#[test]
fn nginx_operator_from_the_catalog_serves_a_page_on_the_real_node_and_is_removed() {
    crate::support::run("node_operator_e2e", 4, async {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "capstan=info".into()),
            )
            .try_init();
        let client = crate::support::cluster().await;
        real_node();
        apply_crds(&client).await;
        let registry = crate::support::registry();

        // The operator and operand images, built here and pushed; the committed CSV names exactly them.
        script(&["images/build.sh", "--push", &registry, "httpd", "nginx-operator"]);
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

        // The catalog, published as the demo publishes it (images relocated to this registry by digest).
        let catalog_ns = TestNamespace::new(&client, "node-op-catalog").await;
        let catalog_ref = format!("{registry}/{}/catalog:latest", catalog_ns.name);
        let published = script(&["examples/publish.sh", &catalog_ref]);
        assert!(published.contains("nginx-operator-bundle:v0.2.0@sha256:"), "{published}");
        let options = capstan::controller::Options {
            global_catalog_namespace: catalog_ns.name.clone(),
            catalog_cache: None,
            ..Default::default()
        };
        let controller = tokio::spawn(capstan::controller::run(client.clone(), options, std::future::pending()));
        catalog_source(&client, &catalog_ns.name, "examples", &catalog_ref).await;

        // An OwnNamespace install whose pods go to the real node; uninstall-operands opts in to removal.
        let ns = namespace_with_group(&client, "node-op").await;
        let toleration =
            json!([{"key": "capstan.dev/node", "operator": "Equal", "value": "real", "effect": "NoSchedule"}]);
        create::<Subscription>(&client, &ns.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "nginx-operator", "namespace": ns.name, "annotations": {"operators.capstan.dev/uninstall-operands": "true"}},
        "spec": {"name": "nginx-operator", "channel": "alpha", "source": "examples", "sourceNamespace": catalog_ns.name,
                 "installPlanApproval": "Automatic",
                 "config": {"nodeSelector": {"type": "real"}, "tolerations": toleration}}
    }))
    .await;
        csv_version_succeeded(&client, &ns.name, CSV).await;

        // The operator runs on the real node, from the image built here, as the ServiceAccount capstan made.
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
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
        assert!(container.image_id.ends_with(digest_of(&operator_image)), "{} vs {operator_image}", container.image_id);
        let sa = Api::<ServiceAccount>::namespaced(client.clone(), &ns.name)
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

        // Its identity (a token of that ServiceAccount) may do what the CSV grants, and nothing else.
        let token = sa_token(&client, &ns.name, OPERATOR).await;
        let as_operator = crate::support::client_with_token(&token).await;
        nginx_api(&as_operator, &ns.name)
            .list(&ListParams::default())
            .await
            .expect("the operator may list Nginx objects in its namespace");
        Api::<Secret>::namespaced(as_operator.clone(), &ns.name)
            .list(&ListParams::default())
            .await
            .expect("and Secrets (Helm's releases)");
        assert!(can(&as_operator, "create", "apps", "deployments", Some(&ns.name)).await);
        assert!(
            !can(&as_operator, "delete", "", "pods", Some(&ns.name)).await,
            "the CSV grants pods get/list/watch only"
        );
        let pod_try: Pod =
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "not-granted"},
        "spec": {"containers": [{"name": "c", "image": httpd_image}]}}))
            .expect("pod");
        let refused = Api::<Pod>::namespaced(as_operator.clone(), &ns.name)
            .create(&PostParams { dry_run: true, ..Default::default() }, &pod_try)
            .await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(s)) if s.code == 403),
            "creating a pod is not granted: {refused:?}"
        );
        let other = Api::<Secret>::namespaced(as_operator.clone(), &catalog_ns.name).list(&ListParams::default()).await;
        assert!(
            matches!(&other, Err(kube::Error::Api(s)) if s.code == 403),
            "Secrets outside its OperatorGroup: {other:?}"
        );
        let nodes =
            Api::<k8s_openapi::api::core::v1::Node>::all(as_operator.clone()).list(&ListParams::default()).await;
        assert!(matches!(&nodes, Err(kube::Error::Api(s)) if s.code == 403), "Nodes: {nodes:?}");

        // An Nginx object: the operator installs the chart; its pod serves the page.
        let page = format!("hello from {} through nginx-operator", ns.name);
        let nginx: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.com/v1alpha1", "kind": "Nginx", "metadata": {"name": "web", "namespace": ns.name},
            "spec": on_real_node(json!({"replicaCount": 1, "page": page}))
        }))
        .expect("Nginx");
        nginx_api(&client, &ns.name).create(&PostParams::default(), &nginx).await.expect("create Nginx");
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
        eventually("the chart's Deployment web Available", WAIT, || async {
            let st = deploys.get("web").await.ok()?.status?;
            st.conditions?.iter().any(|c| c.type_ == "Available" && c.status == "True").then_some(())
        })
        .await;
        let deployed = eventually("Nginx web Deployed", Duration::from_secs(60), || async {
            let o = nginx_api(&client, &ns.name).get("web").await.ok()?;
            let conds = o.data["status"]["conditions"].as_array()?.clone();
            conds.iter().any(|c| c["type"] == "Deployed" && c["status"] == "True").then_some(o)
        })
        .await;
        assert!(deployed.data["status"]["deployedRelease"]["name"] == "web", "{:?}", deployed.data["status"]);
        let web = pods.list(&ListParams::default().labels("app.kubernetes.io/instance=web")).await.expect("pods").items;
        assert_eq!(web.len(), 1);
        let web_spec = web[0].spec.clone().expect("spec");
        assert_eq!(web_spec.node_name.as_deref(), Some(REAL_NODE));
        assert!(
            web_spec.containers[0].image.as_deref() == Some(httpd_image.replace(":v1@", "@").as_str()),
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
        let svc = Api::<Service>::namespaced(client.clone(), &ns.name).get("web").await.expect("the chart's Service");
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

        // Removal: deleting the Subscription (uninstall-operands) deletes the CSV; the Nginx object goes
        // first, while the operator runs (it uninstalls the release), then the operator and its RBAC.
        let role_names: Vec<String> = Api::<Role>::namespaced(client.clone(), &ns.name)
            .list(&ListParams::default().labels(&format!("olm.owner={CSV}")))
            .await
            .expect("roles")
            .items
            .iter()
            .map(|r| r.name_any())
            .collect();
        assert!(!role_names.is_empty(), "capstan made a Role for the CSV's permissions");
        Api::<Subscription>::namespaced(client.clone(), &ns.name)
            .delete("nginx-operator", &DeleteParams::default())
            .await
            .expect("delete Subscription");
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
        eventually("CSV gone", Duration::from_secs(180), || async {
            csvs.get_opt(CSV).await.ok()?.is_none().then_some(())
        })
        .await;
        assert!(
            nginx_api(&client, &ns.name).get_opt("web").await.expect("get Nginx").is_none(),
            "the operand object is gone"
        );
        eventually(
            "the operand (Deployment, Service, ConfigMap, release Secret) and the operator gone",
            Duration::from_secs(60),
            || async {
                let d = deploys.list(&ListParams::default()).await.ok()?.items;
                let s = Api::<Service>::namespaced(client.clone(), &ns.name).get_opt("web").await.ok()?;
                let cm = Api::<ConfigMap>::namespaced(client.clone(), &ns.name).get_opt("web-page").await.ok()?;
                let rel = Api::<Secret>::namespaced(client.clone(), &ns.name)
                    .list(&ListParams::default().labels("owner=helm,name=web"))
                    .await
                    .ok()?
                    .items;
                (d.is_empty() && s.is_none() && cm.is_none() && rel.is_empty()).then_some(())
            },
        )
        .await;
        assert!(
            Api::<ServiceAccount>::namespaced(client.clone(), &ns.name)
                .get_opt(OPERATOR)
                .await
                .expect("get SA")
                .is_none(),
            "the operator's ServiceAccount is gone"
        );
        let roles = Api::<Role>::namespaced(client.clone(), &ns.name)
            .list(&ListParams::default().labels(&format!("olm.owner={CSV}")))
            .await
            .expect("roles")
            .items;
        let bindings = Api::<RoleBinding>::namespaced(client.clone(), &ns.name)
            .list(&ListParams::default().labels(&format!("olm.owner={CSV}")))
            .await
            .expect("rolebindings")
            .items;
        let cluster_roles = Api::<ClusterRole>::all(client.clone())
            .list(&ListParams::default().labels(&format!("olm.owner={CSV},olm.owner.namespace={}", ns.name)))
            .await
            .expect("clusterroles")
            .items;
        assert!(
            roles.is_empty() && bindings.is_empty() && cluster_roles.is_empty(),
            "the operator's RBAC is gone: {roles:?} {bindings:?} {cluster_roles:?}"
        );
        eventually("the operator's pods gone", Duration::from_secs(60), || async {
            pods.list(&ListParams::default()).await.ok()?.items.is_empty().then_some(())
        })
        .await;

        controller.abort();
        cleanup_cluster_rbac(&client, &[&ns.name]).await;
    })
}
