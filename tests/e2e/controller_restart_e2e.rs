//! Restarts end to end: the `capstan controller` process killed
//! (SIGKILL) at random points of an install, 20 times with a fixed seed, and the API server
//! killed and restarted during an install. Each must converge to CSV Succeeded with exactly one
//! InstallPlan and the same objects as an undisturbed install (nothing orphaned, nothing twice).
//!
//! The controller runs as its own process (this build's `capstan` binary) so that it can be
//! killed like a Pod. One test function: one controller at a time on the cluster.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::controller::*;
use crate::support::{TestNamespace, eventually};
use capstan::api::{ClusterServiceVersion, InstallPlan};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams};

/// Fixed seed of the kill points, so that a failure can be replayed.
const SEED: u64 = 0x5eed_c0ffee;
const KILLS: usize = 20;

struct ControllerProcess(Child);

impl ControllerProcess {
    fn start(global_ns: &str, cache: &Path, log: &Path) -> ControllerProcess {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("controller log");
        let child = Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args([
                "controller",
                "--kubeconfig",
                crate::support::kubeconfig_path().to_str().unwrap_or_default(),
                "--global-catalog-namespace",
                global_ns,
                "--metrics-addr",
                "0",
            ])
            .env("CAPSTAN_CACHE", cache)
            .env("RUST_LOG", "capstan=info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start capstan controller");
        ControllerProcess(child)
    }

    fn kill(&mut self) {
        let _ = self.0.kill(); // SIGKILL
        let _ = self.0.wait();
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A small deterministic generator (PCG-style LCG step) for the kill delays.
struct Lcg(u64);

impl Lcg {
    fn next_ms(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// What an install left in `ns`: object counts per kind, and the cluster-scoped RBAC labelled
/// with the namespace.
async fn inventory(client: &kube::Client, ns: &str) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    let lp = ListParams::default();
    m.insert(
        "ClusterServiceVersion",
        Api::<ClusterServiceVersion>::namespaced(client.clone(), ns).list(&lp).await.expect("list").items.len(),
    );
    m.insert(
        "InstallPlan",
        Api::<InstallPlan>::namespaced(client.clone(), ns).list(&lp).await.expect("list").items.len(),
    );
    m.insert(
        "Deployment",
        Api::<Deployment>::namespaced(client.clone(), ns).list(&lp).await.expect("list").items.len(),
    );
    m.insert("Service", Api::<Service>::namespaced(client.clone(), ns).list(&lp).await.expect("list").items.len());
    m.insert(
        "ServiceAccount",
        Api::<ServiceAccount>::namespaced(client.clone(), ns).list(&lp).await.expect("list").items.len(),
    );
    m.insert("Role", Api::<Role>::namespaced(client.clone(), ns).list(&lp).await.expect("list").items.len());
    m.insert(
        "RoleBinding",
        Api::<RoleBinding>::namespaced(client.clone(), ns).list(&lp).await.expect("list").items.len(),
    );
    let owned = ListParams::default().labels(&format!("olm.owner.namespace={ns}"));
    m.insert("ClusterRole", Api::<ClusterRole>::all(client.clone()).list(&owned).await.expect("list").items.len());
    m.insert(
        "ClusterRoleBinding",
        Api::<ClusterRoleBinding>::all(client.clone()).list(&owned).await.expect("list").items.len(),
    );
    m
}

async fn converged(client: &kube::Client, ns: &str) -> BTreeMap<&'static str, usize> {
    csv_version_succeeded(client, ns, "nginx-operator.v0.2.0").await;
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    eventually(&format!("the InstallPlan of {ns} Complete"), WAIT, || async {
        let list = plans.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .all(|p| {
                p.status.as_ref().is_some_and(|s| s.phase == capstan::api::installplan::InstallPlanPhase::Complete)
            })
            .then_some(())
    })
    .await;
    inventory(client, ns).await
}

#[test]
fn controller_converges_after_kills_and_api_server_restart() {
    crate::support::run("controller_restart_e2e", 4, async {
        let client = crate::support::cluster().await;
        let registry = crate::support::registry();
        let work = tempfile::tempdir().expect("tempdir");
        let repo = format!("ctl-restart-{}", std::process::id());
        let catalog = publish(&registry, &repo, work.path());
        apply_crds(&client).await;
        let global = TestNamespace::new(&client, "ctl-restart-catalogs").await;
        let cache = work.path().join("cache");
        let log = work.path().join("controller.log");
        let mut controller = ControllerProcess::start(&global.name, &cache, &log);
        catalog_source(&client, &global.name, "examples", &catalog).await;

        // Baseline: an undisturbed install.
        let base = namespace_with_group(&client, "ctl-restart-base").await;
        subscribe(&client, &base.name, "nginx-operator", &global.name, "Automatic").await;
        let expected = converged(&client, &base.name).await;
        assert_eq!(expected["InstallPlan"], 1);
        let mut namespaces = vec![base];

        // 4. SIGKILL at a random point of each install (fixed seed), then start again.
        let mut rng = Lcg(SEED);
        for i in 0..KILLS {
            let ns = namespace_with_group(&client, &format!("ctl-kill{i}")).await;
            subscribe(&client, &ns.name, "nginx-operator", &global.name, "Automatic").await;
            let delay = rng.next_ms(700);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            controller.kill();
            controller = ControllerProcess::start(&global.name, &cache, &log);
            let got = converged(&client, &ns.name).await;
            assert_eq!(
                got,
                expected,
                "kill {i} after {delay} ms (seed {SEED:#x}): the install differs from an undisturbed one; controller log: {}",
                log.display()
            );
            namespaces.push(ns);
        }

        // 6. The API server killed during an install and started again: capstan reconnects.
        let ns = namespace_with_group(&client, "ctl-apiserver").await;
        subscribe(&client, &ns.name, "nginx-operator", &global.name, "Automatic").await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        let pid_file = crate::support::state_dir().join("pids/kube-apiserver.pid");
        let pid = std::fs::read_to_string(&pid_file).expect("kube-apiserver pid").trim().to_string();
        let status = Command::new("kill").args(["-9", &pid]).status().expect("kill");
        assert!(status.success(), "could not kill kube-apiserver {pid}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let up = Command::new("bash")
            .arg(crate::support::repo_root().join("tests/cluster/up.sh"))
            .arg("all")
            .env("CAPSTAN_CLUSTER_DIR", crate::support::state_dir())
            .output()
            .expect("up.sh");
        assert!(up.status.success(), "restarting kube-apiserver failed: {}", String::from_utf8_lossy(&up.stderr));
        let got = converged(&client, &ns.name).await;
        assert_eq!(got, expected, "after the API server restart; controller log: {}", log.display());
        namespaces.push(ns);

        controller.kill();
        // The kills did land inside installs: some plan was claimed (Installing) by one process and
        // finished by the next, or created by one and worked on by the next.
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let starts = text.matches("capstan controller starting").count();
        assert_eq!(starts, KILLS + 1, "one start per kill");
        eprintln!(
            "controller log: {} InstallPlan applies for {} installs",
            text.matches("applying InstallPlan").count(),
            KILLS + 2
        );
        let names: Vec<&str> = namespaces.iter().map(|n| n.name.as_str()).collect();
        cleanup_cluster_rbac(&client, &names).await;
    })
}
