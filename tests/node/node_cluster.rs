//! The local environment has a real node beside kwok's fake one.
//! A pod with an image built here (images/build.sh: the httpd test image) runs on it, its log shows
//! its output, and another pod reaches it through a Service by ClusterIP; pods reach the API server
//! as `kubernetes.default` does (KUBERNETES_SERVICE_HOST, kube-proxy). The API server reports the
//! pinned version.
//!
//! Pods choose the real node with `crate::support::node::on_real_node`: the node selector `type=real` and a
//! toleration of its taint `capstan.dev/node=real:NoSchedule` (every other pod keeps landing on kwok).

use std::time::Duration;

use crate::support::node::{
    REAL_NODE, container_pid, create_pod, fetch_in_pod, image, logs_containing, real_node, run_kubectl, wait_pod,
};
use crate::support::{TestNamespace, eventually};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

/// The pinned Kubernetes release (`k8s.io/kubernetes` in tests/cluster/go.mod).
fn pinned_version() -> String {
    let go_mod = std::fs::read_to_string(crate::support::repo_root().join("tests/cluster/go.mod")).expect("go.mod");
    go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes v"))
        .map(|v| format!("v{}", v.split_whitespace().next().unwrap_or_default()))
        .expect("k8s.io/kubernetes in tests/cluster/go.mod")
}

#[test]
fn a_real_containerd_node_is_ready_beside_the_kwok_node() {
    crate::support::run("node_cluster", 0, async {
        let client = crate::support::cluster().await;
        let name = real_node();
        assert_eq!(name, REAL_NODE);
        let wide = run_kubectl(&["get", "nodes", "-o", "wide"]);
        let line = |n: &str| wide.lines().find(|l| l.split_whitespace().next() == Some(n)).map(str::to_string);
        let real = line(&name).unwrap_or_else(|| panic!("no {name} in:\n{wide}"));
        let cols: Vec<&str> = real.split_whitespace().collect();
        assert_eq!(cols.get(1), Some(&"Ready"), "{wide}");
        assert!(real.contains("containerd://"), "the real node's runtime is containerd:\n{wide}");
        assert!(real.contains(&pinned_version()), "the kubelet is the pinned release:\n{wide}");
        let kwok = line("kwok-node-0").unwrap_or_else(|| panic!("no kwok-node-0 in:\n{wide}"));
        assert_eq!(kwok.split_whitespace().nth(1), Some("Ready"), "{wide}");

        let node = Api::<Node>::all(client).get(&name).await.expect("real node");
        let info = node.status.as_ref().and_then(|s| s.node_info.clone()).expect("nodeInfo");
        assert!(info.container_runtime_version.starts_with("containerd://"), "{info:?}");
        assert_eq!(info.kubelet_version, pinned_version());
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("type").map(String::as_str), Some("real"));
        // Only pods that ask for the real node run there: its taint keeps everything else on kwok.
        let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
        assert!(
            taints
                .iter()
                .any(|t| t.key == "capstan.dev/node" && t.value.as_deref() == Some("real") && t.effect == "NoSchedule"),
            "{taints:?}"
        );
        // Its address is the bridge gateway the API server reaches (not loopback).
        let addrs = node.status.and_then(|s| s.addresses).unwrap_or_default();
        assert!(addrs.iter().any(|a| a.type_ == "InternalIP" && a.address == "10.0.2.1"), "{addrs:?}");
    })
}

#[test]
fn the_api_server_reports_the_pinned_version() {
    crate::support::run("node_cluster", 0, async {
        let client = crate::support::cluster().await;
        let v = client.apiserver_version().await.expect("/version");
        let pinned = pinned_version();
        assert_eq!(v.git_version, pinned);
        let minor = pinned.trim_start_matches('v').split('.').nth(1).expect("minor").to_string();
        assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", minor.as_str()));
        let client_version = run_kubectl(&["version", "-o", "json"]);
        let cv: Value = serde_json::from_str(&client_version).expect("kubectl version json");
        assert_eq!(cv["clientVersion"]["gitVersion"], json!(pinned));
        assert_eq!(cv["serverVersion"]["gitVersion"], json!(pinned));
    })
}

#[test]
fn a_pod_built_here_serves_another_pod_through_a_service() {
    crate::support::run("node_cluster", 0, async {
        let client = crate::support::cluster().await;
        real_node();
        let ns = TestNamespace::new(&client, "node-svc").await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
        let httpd = image("httpd");
        let message = format!("hello from {}", ns.name);

        create_pod(&pods, "web", json!({"app": "web"}), json!({
        "containers": [{
            "name": "web", "image": httpd, "args": ["-listen", ":8080", "-message", message],
            "ports": [{"containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 1},
            "securityContext": {"runAsNonRoot": true, "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false},
        }],
    }))
    .await;
        let web = wait_pod(&client, &pods, "web", "Ready").await;
        let spec = web.spec.clone().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some(REAL_NODE));
        let pod_ip = web.status.and_then(|s| s.pod_ip).expect("pod IP");
        assert!(pod_ip.starts_with("10.0.2."), "the pod's address is from the node's bridge range: {pod_ip}");
        // Its log (read through the API server from the kubelet) shows its output.
        logs_containing(&pods, "web", "listening on :8080").await;

        let svc: Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        }))
        .expect("service object");
        let svc = Api::<Service>::namespaced(client.clone(), &ns.name)
            .create(&PostParams::default(), &svc)
            .await
            .expect("create service");
        let cluster_ip = svc.spec.and_then(|s| s.cluster_ip).expect("ClusterIP");
        assert!(cluster_ip.starts_with("10.0.0."), "{cluster_ip}");

        // Another pod fetches a page through the Service's ClusterIP (kube-proxy's rules; retried while
        // the endpoints propagate).
        let url = format!("http://{cluster_ip}/through-the-service");
        let page = fetch_in_pod(&client, &pods, "client", json!(["-get", url])).await;
        assert!(page.contains("200 OK") && page.contains(&message), "{page}");
        assert!(page.contains("pod web"), "the answer came from the web pod: {page}");
        assert!(page.contains("path /through-the-service"), "{page}");
        // And the server logged that request.
        logs_containing(&pods, "web", "GET /through-the-service").await;

        // Pods reach the API server the way operators do: KUBERNETES_SERVICE_HOST (the `kubernetes`
        // Service's ClusterIP), with the ServiceAccount's CA and token.
        let sa = "/var/run/secrets/kubernetes.io/serviceaccount";
        let version = fetch_in_pod(
            &client,
            &pods,
            "api-client",
            json!([
                "-get",
                "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)/version",
                "-cacert",
                format!("{sa}/ca.crt"),
                "-token",
                format!("{sa}/token"),
            ]),
        )
        .await;
        assert!(version.contains("200 OK"), "{version}");
        assert!(version.contains(&format!("\"gitVersion\": \"{}\"", pinned_version())), "{version}");
    })
}

/// `kubectl apply -k` of manifests/
/// with the image `images/build.sh capstan` built (here from the binary cargo built for the tests)
/// runs capstan as two real pods on the real node, as user 65532 with a read-only root filesystem;
/// one holds the Lease, and killing it hands the Lease to another replica.
#[test]
fn capstan_runs_from_its_image_on_the_real_node() {
    crate::support::run("node_cluster", 0, async {
        let client = crate::support::cluster().await;
        real_node();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        eventually("no namespace capstan-system before the test", Duration::from_secs(120), || async {
            namespaces.get_opt("capstan-system").await.ok()?.is_none().then_some(())
        })
        .await;
        let digest = build_and_push_the_capstan_image();
        let overlay = crate::support::state_dir().join("capstan-on-real-node");
        let overlay = overlay.to_str().expect("path").to_string();
        let _cleanup = DeletedOnDrop(overlay.clone());
        let applied = run_kubectl(&["apply", "-k", &overlay]);
        assert!(applied.contains("deployment.apps/capstan created"), "{applied}");

        let deploys: Api<Deployment> = Api::namespaced(client.clone(), "capstan-system");
        eventually(
            "Deployment capstan-system/capstan Available with 2 ready pods",
            Duration::from_secs(120),
            || async {
                let st = deploys.get("capstan").await.ok()?.status?;
                let available = st.conditions?.iter().any(|c| c.type_ == "Available" && c.status == "True");
                (available && st.ready_replicas == Some(2)).then_some(())
            },
        )
        .await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "capstan-system");
        let list = pods.list(&ListParams::default().labels("app.kubernetes.io/name=capstan")).await.expect("pods");
        assert_eq!(list.items.len(), 2);
        let names: Vec<String> = list.items.iter().map(|p| assert_runs_the_image_confined(p, &digest)).collect();
        assert_killing_the_leader_hands_over_the_lease(&client, &pods, names).await;
    })
}

/// Builds the capstan image with `images/build.sh` from the binary cargo built for the tests and
/// pushes it to the environment's registry: its digest.
fn build_and_push_the_capstan_image() -> String {
    let root = crate::support::repo_root();
    let out = std::process::Command::new("bash")
        .arg(root.join("images/build.sh"))
        .args(["--push", &crate::support::registry(), "capstan"])
        .env("CAPSTAN_BIN", env!("CARGO_BIN_EXE_capstan"))
        .env("CAPSTAN_CLUSTER_DIR", crate::support::state_dir())
        .output()
        .expect("run images/build.sh");
    assert!(out.status.success(), "images/build.sh capstan failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let reference = image("capstan");
    reference.rsplit_once('@').map(|(_, d)| d.to_string()).expect("digest")
}

/// Deletes what `kubectl apply -k` of the overlay created, when dropped (whatever happens in the
/// test; the CRDs are manifests/' own).
struct DeletedOnDrop(String);

impl Drop for DeletedOnDrop {
    fn drop(&mut self) {
        let _ = std::process::Command::new(crate::support::kubectl())
            .arg("--kubeconfig")
            .arg(crate::support::kubeconfig_path())
            // Waits (at most 2 min) until the pods are gone: a controller left running would act
            // on the next tests' objects.
            .args(["delete", "--ignore-not-found", "--timeout=120s", "-k", &self.0])
            .output();
    }
}

/// Pod `p` runs on the real node, ready, from the image of `digest`; its process really runs as
/// 65532, on a read-only root filesystem. Its name.
fn assert_runs_the_image_confined(p: &Pod, digest: &str) -> String {
    let name = p.metadata.name.clone().expect("name");
    assert_eq!(p.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some(REAL_NODE), "{name}");
    let cs = &p.status.as_ref().and_then(|s| s.container_statuses.clone()).expect("container statuses")[0];
    assert!(cs.ready, "{name}: {cs:?}");
    assert!(cs.image_id.ends_with(digest), "{name} runs the image built here: {} vs {digest}", cs.image_id);
    let pid = container_pid(cs.container_id.as_deref().expect("container id"));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let uid = status.lines().find(|l| l.starts_with("Uid:")).expect("Uid line");
    assert_eq!(uid.split_whitespace().skip(1).collect::<Vec<_>>(), ["65532"; 4], "{name}: {uid}");
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).expect("mountinfo");
    let root_mount = mounts.lines().find(|l| l.split_whitespace().nth(4) == Some("/")).expect("root mount");
    assert!(
        root_mount.split_whitespace().nth(5).is_some_and(|o| o.split(',').any(|x| x == "ro")),
        "{name}: {root_mount}"
    );
    name
}

/// One of the pods `names` leads; kill it (no grace) and another replica takes the Lease.
async fn assert_killing_the_leader_hands_over_the_lease(client: &kube::Client, pods: &Api<Pod>, names: Vec<String>) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "capstan-system");
    let holder = |leases: Api<Lease>| async move {
        leases.get("capstan").await.ok()?.spec?.holder_identity.filter(|h| !h.is_empty())
    };
    let leader = eventually("a leader among the two pods", Duration::from_secs(60), || {
        let (leases, names) = (leases.clone(), names.clone());
        async move { holder(leases).await.filter(|h| names.contains(h)) }
    })
    .await;
    logs_containing(pods, &leader, "became leader").await;
    pods.delete(&leader, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
        .await
        .expect("kill the leader");
    let new_leader = eventually("the standby to take the Lease", Duration::from_secs(90), || {
        let (leases, leader) = (leases.clone(), leader.clone());
        async move { holder(leases).await.filter(|h| *h != leader) }
    })
    .await;
    // The standby, or the ReplicaSet's replacement pod if it asked first: either way another replica.
    assert!(new_leader.starts_with("capstan-"), "{new_leader}");
    logs_containing(pods, &new_leader, "became leader").await;
}
