//! The one support module of the integration tests (`tests/it`, `tests/e2e`, `tests/node` and
//! the discovery tests), against the real local environment where they need one.
//!
//! - [`shared_dir`] finds the read-only `shared/` material (the corpus and the OLM cases) and
//!   [`opm`] the peer tool opm; every test uses these two, nothing else.
//! - [`registry`] gives the address (`127.0.0.1:PORT`) of the OCI registry, starting it with
//!   `tests/cluster/up.sh registry` when it is not running.
//! - [`cluster`] starts the whole control plane once per test binary (`tests/cluster/up.sh`),
//!   or reuses a running one, and returns an admin [`kube::Client`].
//! - [`TestNamespace`] gives each test its own namespace and deletes it when dropped.
//! - [`kubectl`] is the pinned kubectl built by `tests/cluster/build.sh` (never the machine's).
//! - [`group()`] and [`run`] keep the tests of one former test binary apart from the others
//!   ([`group`](mod@group) says why and how).
//! - [`controller`], [`node`] and [`oci`]: helpers of the controller, real-node and OCI tests.
//!
//! The state directory is `$CAPSTAN_CLUSTER_DIR`, default `<repo>/.cluster`. An environment a
//! test binary started is left running for the next binary; `make cluster-down` stops it (the
//! Makefile's `test` target starts it before and stops it after the run).
#![allow(dead_code)]

pub mod controller;
pub mod discovery;
pub mod group;
pub mod node;
pub mod oci;

#[allow(unused_imports)] // not every test binary runs async tests in a group
pub use group::{group, run};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The environment's state directory (`$CAPSTAN_CLUSTER_DIR` or `<repo>/.cluster`).
pub fn state_dir() -> PathBuf {
    std::env::var_os("CAPSTAN_CLUSTER_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".cluster"))
}

/// The read-only `shared/` directory: `$CAPSTAN_SHARED`, else `<repo>/../shared`, else `/work/shared`.
pub fn shared_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("CAPSTAN_SHARED") {
        return PathBuf::from(p);
    }
    let beside = repo_root().join("../shared");
    if beside.is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

/// The opm binary of the side-by-side tests: `$CAPSTAN_OPM`, else `~/.cache/capstan/peers/bin/opm`
/// (where `tests/peers/build.sh` puts it), else `opm` on `PATH`, else what `tests/peers/build.sh`
/// builds (once, cached outside the repository; it needs Go and the module proxy).
///
/// # Panics
/// When none is found and the build fails, with the build's error: a missing peer fails the
/// test, it is not skipped.
pub fn opm() -> PathBuf {
    static OPM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    OPM.get_or_init(|| {
        std::env::var_os("CAPSTAN_OPM")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".cache/capstan/peers/bin/opm"))
                    .filter(|p| p.is_file())
            })
            .or_else(|| {
                std::env::var_os("PATH")
                    .and_then(|ps| std::env::split_paths(&ps).map(|d| d.join("opm")).find(|p| p.is_file()))
            })
            .unwrap_or_else(|| {
                let out = Command::new("bash")
                    .arg(repo_root().join("tests/peers/build.sh"))
                    .output()
                    .expect("run tests/peers/build.sh");
                assert!(
                    out.status.success(),
                    "opm not found ($CAPSTAN_OPM, ~/.cache/capstan/peers/bin/opm, PATH) and tests/peers/build.sh \
                     failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
            })
    })
    .clone()
}

/// An `opm serve` of a catalog directory on a free loopback port (the peer of capstan's gRPC
/// registry, `operator-registry` `cmd/opm/serve`); killed and reaped when dropped, also when the
/// test fails.
pub struct OpmServe {
    child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
}

impl OpmServe {
    /// Starts [`opm`] `serve CATALOG` on a free loopback port (no pprof, no termination log).
    pub fn start(catalog: &Path) -> OpmServe {
        let opm = opm();
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
        let child = Command::new(&opm)
            .args([
                "serve",
                catalog.to_str().unwrap_or_default(),
                "-p",
                &port.to_string(),
                "--pprof-addr",
                "",
                "--termination-log",
                "/dev/null",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start opm serve");
        OpmServe { child, address: format!("127.0.0.1:{port}") }
    }
}

impl Drop for OpmServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static UP_LOCK: Mutex<()> = Mutex::new(());

fn run_up(what: &str) {
    let _guard = UP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let script = repo_root().join("tests/cluster/up.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(what)
        .env("CAPSTAN_CLUSTER_DIR", state_dir())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    if !out.status.success() {
        panic!(
            "{} {what} failed ({}):\n{}\n{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Address `127.0.0.1:PORT` of the local OCI registry, started if needed.
///
/// # Panics
/// When the registry cannot be started; the message carries the registry's log.
pub fn registry() -> String {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        run_up("registry");
        read_trimmed(&state_dir().join("registry"))
    })
    .clone()
}

fn read_trimmed(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display())).trim().to_string()
}

/// Path of the admin kubeconfig, after starting the control plane once per test binary.
///
/// # Panics
/// When the control plane cannot be started; the message carries the failing component's log.
pub fn kubeconfig_path() -> PathBuf {
    static UP: OnceLock<()> = OnceLock::new();
    UP.get_or_init(|| run_up("all"));
    state_dir().join("kubeconfig")
}

/// Path of the pinned `kubectl` (built by `tests/cluster/build.sh` from `tests/cluster/go.mod`,
/// linked as `<state dir>/bin`), after starting the control plane. Tests use it instead of any
/// kubectl on the machine's PATH; pass `--kubeconfig` [`kubeconfig_path`].
///
/// # Panics
/// When the control plane cannot be started or the binary is missing.
pub fn kubectl() -> PathBuf {
    kubeconfig_path();
    let path = state_dir().join("bin/kubectl");
    assert!(path.is_file(), "{} missing: tests/cluster/build.sh should have built it", path.display());
    path
}

/// The kube-rs configuration of the admin user.
pub async fn admin_config() -> kube::Config {
    let path = kubeconfig_path();
    let kc = Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("invalid kubeconfig {}: {e}", path.display()))
}

/// An admin client for the local control plane (started once per test binary).
pub async fn cluster() -> kube::Client {
    kube::Client::try_from(admin_config().await).expect("admin client")
}

/// A client that authenticates with a bearer token (for example one from TokenRequest) and
/// trusts the local control plane's CA.
pub async fn client_with_token(token: &str) -> kube::Client {
    let mut cfg = admin_config().await;
    cfg.auth_info = kube::config::AuthInfo { token: Some(token.to_string().into()), ..Default::default() };
    kube::Client::try_from(cfg).expect("token client")
}

/// A namespace of the test's own, deleted (without waiting) when dropped.
pub struct TestNamespace {
    /// The namespace name: `<prefix>-<random suffix>`.
    pub name: String,
}

impl TestNamespace {
    /// Creates a fresh namespace whose name starts with `prefix` (lowercase, `-` allowed).
    pub async fn new(client: &kube::Client, prefix: &str) -> TestNamespace {
        let suffix: u32 = rand_suffix();
        let name = format!("{prefix}-{suffix:08x}");
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"capstan.dev/test": "true"}}
        }))
        .expect("namespace object");
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.expect("create test namespace");
        // Pods need the default ServiceAccount, which the controller manager creates.
        let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(client.clone(), &name);
        for _ in 0..100 {
            if sas.get_opt("default").await.ok().flatten().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        TestNamespace { name }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop cannot await, and the test's client is driven by the test's own (now blocked)
        // runtime: delete with a fresh client on a short-lived runtime on another thread.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(rt) = rt {
                rt.block_on(async move {
                    if let Ok(client) = kube::Client::try_from(admin_config().await) {
                        let _ = Api::<Namespace>::all(client).delete(&name, &DeleteParams::background()).await;
                    }
                });
            }
        })
        .join();
    }
}

fn rand_suffix() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.finish() as u32
}

/// Polls `f` every 200 ms until it returns `Some`, or panics with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
