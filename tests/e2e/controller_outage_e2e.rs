//! An API server outage of 90 s costs `capstan controller` at most a few hundred log
//! lines and little CPU, and a Subscription created after recovery installs within seconds.
//!
//! The controller runs as the `capstan` binary (its own process, so that its log lines and CPU
//! time are its own); the test stops the environment's kube-apiserver, waits, and starts it again
//! with `tests/cluster/up.sh`. One test in a group of its own ([`crate::support::group`]): no
//! other test may run while the API server is down, and the test's controller ([`ControllerProcess`])
//! is the only one watching the cluster.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::controller::*;
use crate::support::{TestNamespace, eventually};

/// The outage the issue measured.
const OUTAGE: Duration = Duration::from_secs(90);
/// At most this many log lines (at the controller's default filter, see `capstan controller`)
/// from the start of the outage until the API server is ready again.
const MAX_LOG_LINES: u64 = 300;
/// At most this much CPU time (user + system) over the same span.
const MAX_CPU: Duration = Duration::from_secs(5);
/// A Subscription created after recovery has a Complete InstallPlan (every object applied) within this.
const MAX_INSTALL_AFTER: Duration = Duration::from_secs(20);

/// User + system CPU time of process `pid` (from /proc/PID/stat, in clock ticks of 10 ms).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat of the controller");
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|u| u.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|s| s.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn apiserver_pid() -> String {
    std::fs::read_to_string(crate::support::state_dir().join("pids/kube-apiserver.pid"))
        .expect("kube-apiserver pid")
        .trim()
        .to_string()
}

#[test]
fn an_api_outage_is_quiet_and_work_resumes_within_seconds() {
    crate::support::run("controller_outage_e2e", 4, async {
        let client = crate::support::cluster().await;
        let registry = crate::support::registry();
        let work = tempfile::tempdir().expect("tempdir");
        let repo = format!("outage-{}", std::process::id());
        let catalog_ref = publish(&registry, &repo, work.path());
        apply_crds(&client).await;
        let catalog_ns = TestNamespace::new(&client, "outage-catalog").await;
        let controller = ControllerProcess::start(&catalog_ns.name);

        catalog_source(&client, &catalog_ns.name, "examples", &catalog_ref).await;
        let before = namespace_with_group(&client, "outage-before").await;
        subscribe(&client, &before.name, "nginx-operator", &catalog_ns.name, "Automatic").await;
        csv_succeeded_and_deployment_available(&client, &before.name).await;

        assert_an_outage_is_quiet(&controller).await;

        // After recovery: a new Subscription installs within seconds.
        let client = crate::support::cluster().await;
        eventually("API server ready again", Duration::from_secs(60), || async {
            client.apiserver_version().await.ok()
        })
        .await;
        let after = namespace_with_group(&client, "outage-after").await;
        let start = Instant::now();
        subscribe(&client, &after.name, "nginx-operator", &catalog_ns.name, "Automatic").await;
        // capstan's part: resolved, planned and every step applied.
        let planned =
            tokio::time::timeout(MAX_INSTALL_AFTER, plan_in_phase(&client, &after.name, "nginx-operator", "Complete"))
                .await;
        let took = start.elapsed();
        assert!(
            planned.is_ok(),
            "no Complete InstallPlan {took:?} after recovery (at most {MAX_INSTALL_AFTER:?}); controller log:\n{}",
            controller.last_lines()
        );
        println!("Subscription created after recovery: InstallPlan Complete after {took:?}");
        // The Deployment's availability waits for kube-controller-manager and kwok, which reconnect
        // with their own (client-go) backoff; the CSV then follows within a poll.
        csv_succeeded_and_deployment_available(&client, &after.name).await;
        println!("Subscription created after recovery: CSV Succeeded after {:?}", start.elapsed());
        // The install made before the outage runs on as it did.
        csv_succeeded_and_deployment_available(&client, &before.name).await;

        drop(controller);
        cleanup_cluster_rbac(&client, &[&before.name, &after.name]).await;
    })
}

/// The outage: kube-apiserver stopped for [`OUTAGE`], then started again by the environment's
/// script; meanwhile the controller logs at most [`MAX_LOG_LINES`] lines and spends at most
/// [`MAX_CPU`].
async fn assert_an_outage_is_quiet(controller: &ControllerProcess) {
    let lines_before = controller.lines.load(Ordering::Relaxed);
    let cpu_before = cpu_time(controller.pid);
    let api = apiserver_pid();
    assert!(Command::new("kill").arg(&api).status().expect("kill").success());
    let down = Instant::now();
    tokio::time::sleep(OUTAGE).await;
    assert!(down.elapsed() >= OUTAGE);
    let cpu_down = cpu_time(controller.pid).saturating_sub(cpu_before);
    let lines_down = controller.lines.load(Ordering::Relaxed) - lines_before;
    let up = Command::new("bash")
        .arg(crate::support::repo_root().join("tests/cluster/up.sh"))
        .arg("all")
        .env("CAPSTAN_CLUSTER_DIR", crate::support::state_dir())
        .output()
        .expect("up.sh");
    assert!(up.status.success(), "restarting the API server: {}", String::from_utf8_lossy(&up.stderr));
    let log_lines = controller.lines.load(Ordering::Relaxed) - lines_before;
    let cpu = cpu_time(controller.pid).saturating_sub(cpu_before);
    let last = controller.last_lines();
    println!(
        "outage of {:?}: {log_lines} log lines, {cpu:?} CPU; while down ({OUTAGE:?}): {lines_down} lines, {cpu_down:?} CPU",
        down.elapsed()
    );
    assert!(
        log_lines <= MAX_LOG_LINES,
        "{log_lines} log lines during the outage (at most {MAX_LOG_LINES}); last ones:\n{last}"
    );
    assert!(cpu <= MAX_CPU, "{cpu:?} of CPU during the outage (at most {MAX_CPU:?}); last log lines:\n{last}");
}

/// The controller process of the test (the `capstan` binary, default log filter), with a count of
/// the lines it logged and the last 80 of them. Killed when the test ends, also when an assertion
/// fails: left running, it would act on the objects of the tests that follow.
struct ControllerProcess {
    child: std::process::Child,
    pid: u32,
    lines: Arc<AtomicU64>,
    tail: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ControllerProcess {
    /// Starts `capstan controller` with global catalog namespace `catalog_ns`.
    fn start(catalog_ns: &str) -> ControllerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["controller", "--metrics-addr", "0", "--global-catalog-namespace", catalog_ns])
            .arg("--kubeconfig")
            .arg(crate::support::kubeconfig_path())
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start capstan controller");
        let pid = child.id();
        let lines = Arc::new(AtomicU64::new(0));
        let tail = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        for out in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let (lines, tail) = (lines.clone(), tail.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    lines.fetch_add(1, Ordering::Relaxed);
                    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                    t.push(line);
                    if t.len() > 80 {
                        t.remove(0);
                    }
                }
            });
        }
        ControllerProcess { child, pid, lines, tail }
    }

    /// The last lines the controller logged.
    fn last_lines(&self) -> String {
        self.tail.lock().unwrap_or_else(|e| e.into_inner()).join("\n")
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
