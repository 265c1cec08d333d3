//! Helpers of the tests on the real node `capstan-node` (README "The real node"): the
//! images `images/build.sh` pushed, placing pods on the real node, waiting for pods and their logs,
//! the pinned kubectl, and a container's process on this machine.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams};
use serde_json::{Value, json};

use super::eventually;

/// The real node's name (tests/cluster/up.sh).
pub const REAL_NODE: &str = "capstan-node";

/// The reference (with digest) of an image `images/build.sh` pushed to the local registry.
pub fn image(name: &str) -> String {
    super::kubeconfig_path();
    let path = super::state_dir().join("images").join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (tests/cluster/up.sh pushes the test images)", path.display()))
        .trim()
        .to_string()
}

/// The real node's name, or a panic saying why this environment has none.
pub fn real_node() -> String {
    super::kubeconfig_path();
    let path = super::state_dir().join("node-name");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|_| {
            panic!(
                "this environment has no real node ({} is missing): another environment on this machine \
                 may own it, or it was started with CAPSTAN_REAL_NODE=0; see tests/cluster/up.sh's log",
                path.display()
            )
        })
        .trim()
        .to_string()
}

/// A pod spec fragment that places the pod on the real node.
pub fn on_real_node(mut spec: Value) -> Value {
    spec["nodeSelector"] = json!({"type": "real"});
    spec["tolerations"] =
        json!([{"key": "capstan.dev/node", "operator": "Equal", "value": "real", "effect": "NoSchedule"}]);
    spec
}

/// Runs the pinned kubectl with the admin kubeconfig; panics with its stderr when it fails.
pub fn run_kubectl(args: &[&str]) -> String {
    let out = std::process::Command::new(super::kubectl())
        .arg("--kubeconfig")
        .arg(super::kubeconfig_path())
        .args(args)
        .output()
        .expect("run kubectl");
    assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Creates pod `name` on the real node ([`on_real_node`]) with `labels` and `spec`.
pub async fn create_pod(pods: &Api<Pod>, name: &str, labels: Value, spec: Value) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": on_real_node(spec),
    }))
    .expect("pod object");
    pods.create(&PostParams::default(), &pod).await.unwrap_or_else(|e| panic!("create pod {name}: {e}"))
}

/// Waits until the pod reaches `phase` (or `Ready` when `phase` is "Ready"), panicking with its
/// status and events when it does not.
pub async fn wait_pod(client: &kube::Client, pods: &Api<Pod>, name: &str, phase: &str) -> Pod {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let p = pods.get(name).await.expect("get pod");
        let st = p.status.clone().unwrap_or_default();
        let done = match phase {
            "Ready" => st.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True"),
            _ => st.phase.as_deref() == Some(phase),
        };
        if done {
            return p;
        }
        if tokio::time::Instant::now() >= deadline || st.phase.as_deref() == Some("Failed") {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &ns);
            let evs = events.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
            let evs: Vec<String> = evs
                .iter()
                .filter(|e| e.involved_object.name.as_deref() == Some(name))
                .map(|e| format!("{}: {}", e.reason.clone().unwrap_or_default(), e.message.clone().unwrap_or_default()))
                .collect();
            let logs = pods.logs(name, &LogParams::default()).await.unwrap_or_default();
            panic!("pod {name} did not become {phase}: status {st:?}\nevents: {evs:#?}\nlogs: {logs}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The log of pod `name` once it contains `needle` (waits up to 30 s).
pub async fn logs_containing(pods: &Api<Pod>, name: &str, needle: &str) -> String {
    eventually(&format!("the log of pod {name} to contain {needle:?}"), Duration::from_secs(30), || async {
        let logs = pods.logs(name, &LogParams::default()).await.ok()?;
        logs.contains(needle).then_some(logs)
    })
    .await
}

/// The PID on this machine of the container `containerd://ID`, from the node's containerd.
pub fn container_pid(container_id: &str) -> u32 {
    let id = container_id.trim_start_matches("containerd://");
    let sock = super::state_dir().join("node/containerd/containerd.sock");
    let out = std::process::Command::new("ctr")
        .arg("--address")
        .arg(&sock)
        .args(["-n", "k8s.io", "tasks", "ls"])
        .output()
        .expect("run ctr");
    let tasks = String::from_utf8_lossy(&out.stdout).into_owned();
    tasks
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some(id)).then(|| f.next().and_then(|p| p.parse().ok())).flatten()
        })
        .unwrap_or_else(|| panic!("no running task {id} in containerd:\n{tasks}"))
}

/// Runs `httpd -get` (`args`) in a pod on the real node until one run succeeds, and returns that
/// run's log. Each run is its own pod (`{name}-1`, `{name}-2`, …, restartPolicy Never), tried
/// again at once when it fails: a Service's rules reach kube-proxy a moment after the Service
/// exists (longer while kube-proxy's watch recovers from an API server restart), and a pod
/// restarted by the kubelet instead would wait out CrashLoopBackOff (10 s, 20 s, 40 s, …).
/// Panics after 120 s with every run's log.
#[allow(dead_code)]
pub async fn fetch_in_pod(client: &kube::Client, pods: &Api<Pod>, name: &str, args: Value) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut failed = Vec::new();
    for n in 1.. {
        let pod = format!("{name}-{n}");
        create_pod(
            pods,
            &pod,
            json!({"app": name}),
            json!({
                "restartPolicy": "Never",
                "containers": [{"name": name, "image": image("httpd"), "args": args}],
            }),
        )
        .await;
        let phase = loop {
            let p = pods.get(&pod).await.expect("get pod");
            match p.status.and_then(|s| s.phase).as_deref() {
                Some(ph @ ("Succeeded" | "Failed")) => break ph.to_string(),
                _ if tokio::time::Instant::now() >= deadline => break "still running".to_string(),
                _ => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        };
        let logs = pods.logs(&pod, &LogParams::default()).await.unwrap_or_default();
        if phase == "Succeeded" {
            return logs;
        }
        failed.push(format!("{pod}: {phase}: {logs}"));
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(client.clone(), pods.namespace().unwrap_or_default());
    let events: Vec<String> = events
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .iter()
        .filter(|e| e.involved_object.name.as_deref().is_some_and(|n| n.starts_with(name)))
        .map(|e| {
            format!(
                "{}: {}: {}",
                e.involved_object.name.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default()
            )
        })
        .collect();
    panic!("no run of httpd {args} in a pod succeeded within 120 s:\n{}\nevents: {events:#?}", failed.join("\n"))
}
