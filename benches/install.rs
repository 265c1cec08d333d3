//! Benchmark: time from creating a Subscription to its CSV Succeeded, on the
//! local control plane and registry (`tests/cluster`), and the controller's memory with the
//! corpus catalog (`../shared/corpus/community-operators-prod/catalogs/v4.20`, all packages)
//! loaded next to the example catalog.
//!
//! The controller runs as its own process (`capstan controller`, this build's binary) so that its
//! resident memory can be read from `/proc/<pid>/status` (VmRSS now, VmHWM peak).
//! Each run: a fresh namespace with an OperatorGroup, then the clock starts, the Subscription
//! to `nginx-operator` (Automatic) is created, and the clock stops when the API server returns
//! the CSV with `status.phase: Succeeded` (polled every 20 ms). Printed as a markdown table.
//!
//! Peer: OLM v0 cannot run here (no container engine; its modules are refused by the Go proxy
//! here), so its number is the one from its own CI logs (80–100 s), quoted, not measured.
//!
//! Run: `cargo bench --bench install` (starts the environment when it is not running).

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capstan::api::{ClusterServiceVersion, Subscription};
use kube::api::{Api, PostParams};
use serde_json::json;
use support::controller::*;

const RUNS: usize = 10;

struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `VmRSS` and `VmHWM` of `pid` in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
            .unwrap_or(f64::NAN)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let client = support::cluster().await;
    let registry = support::registry();
    let work = tempfile::tempdir().expect("tempdir");
    let repo = format!("bench-install-{}", std::process::id());
    let examples = publish(&registry, &repo, work.path());
    let corpus_dir = support::shared_dir().join("corpus/community-operators-prod/catalogs/v4.20");
    let corpus = format!("{registry}/{repo}/corpus-catalog:v4.20");
    capstan(&["catalog", "push", "-q", corpus_dir.to_str().unwrap_or_default(), &corpus]);
    apply_crds(&client).await;

    let catalog_ns = support::TestNamespace::new(&client, "bench-catalogs").await;
    let cache = work.path().join("cache");
    let child = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args([
            "controller",
            "--kubeconfig",
            support::kubeconfig_path().to_str().unwrap_or_default(),
            "--global-catalog-namespace",
            &catalog_ns.name,
        ])
        .env("CAPSTAN_CACHE", &cache)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start capstan controller");
    let controller = Controller(child);
    let pid = controller.0.id();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (idle_rss, _) = memory(pid);
    catalog_source(&client, &catalog_ns.name, "corpus", &corpus).await;
    catalog_source(&client, &catalog_ns.name, "examples", &examples).await;
    let (loaded_rss, _) = memory(pid);

    let mut times = Vec::new();
    let mut namespaces = Vec::new();
    for i in 0..RUNS {
        let ns = namespace_with_group(&client, &format!("bench-run{i}")).await;
        let sub: Subscription = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "nginx-operator", "namespace": ns.name},
            "spec": {"name": "nginx-operator", "channel": "alpha", "source": "examples", "sourceNamespace": catalog_ns.name}
        }))
        .expect("subscription");
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
        let start = Instant::now();
        Api::<Subscription>::namespaced(client.clone(), &ns.name)
            .create(&PostParams::default(), &sub)
            .await
            .expect("create Subscription");
        loop {
            let done = csvs
                .get_opt("nginx-operator.v0.2.0")
                .await
                .ok()
                .flatten()
                .and_then(|c| c.status)
                .is_some_and(|s| serde_json::to_value(&s.phase).ok().is_some_and(|p| p == "Succeeded"));
            if done {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(120), "run {i}: CSV not Succeeded after 120 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let secs = start.elapsed().as_secs_f64();
        eprintln!("run {i}: {secs:.2} s");
        times.push(secs);
        namespaces.push(ns);
    }
    let (rss, hwm) = memory(pid);
    let mut sorted = times.clone();
    let med = median(&mut sorted);
    let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
    let ns_names: Vec<&str> = namespaces.iter().map(|n| n.name.as_str()).collect();
    cleanup_cluster_rbac(&client, &ns_names).await;
    drop(controller);

    println!("\n### Subscription → CSV Succeeded (nginx-operator, local control plane, {RUNS} runs)\n");
    println!("| metric | capstan | OLM v0 (its CI logs, not measured here) | target | ratio OLM/capstan |");
    println!("|---|---|---|---|---|");
    println!(
        "| median time to CSV Succeeded | {med:.2} s | 80–100 s | ≤ 3 s | {:.0}–{:.0}× |",
        80.0 / med,
        100.0 / med
    );
    println!("| min / max | {min:.2} s / {max:.2} s | | | |");
    println!("\n### Controller memory (VmRSS, MiB)\n");
    println!("| state | capstan |");
    println!("|---|---|");
    println!("| started, no catalog | {idle_rss:.1} |");
    println!("| corpus v4.20 catalog + examples loaded | {loaded_rss:.1} |");
    println!("| after {RUNS} installs | {rss:.1} (peak VmHWM {hwm:.1}) |");
    println!("\ntarget: ≤ 100 MB resident with the corpus catalog loaded");
}
