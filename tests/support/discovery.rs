//! Helpers of the discovery tests on the local cluster (`tests/discovery_controller.rs`,
//! `tests/discovery_packageserver.rs`): the pinned kubectl as a command whose refusal is an
//! answer (RBAC checks), objects applied from YAML, the host address the API server reaches an
//! aggregated API's server at, opm, JSON streams, and a fixture shared by the tests of one binary
//! that is removed when the binary exits.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, Once, OnceLock};
use std::time::Duration;

use serde_json::Value;

/// What one run of the pinned kubectl printed, and whether it exited 0.
pub struct Kubectl {
    /// Exit status 0.
    pub ok: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs the pinned kubectl ([`super::kubectl`]) with the admin kubeconfig; never panics on a
/// failed command (a refusal is what some checks expect).
pub fn kubectl(args: &[&str]) -> Kubectl {
    kubectl_with_stdin(args, None)
}

/// As [`kubectl`], with `input` on its standard input.
pub fn kubectl_with_stdin(args: &[&str], input: Option<&str>) -> Kubectl {
    let mut child = Command::new(super::kubectl())
        .arg("--kubeconfig")
        .arg(super::kubeconfig_path())
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).expect("write kubectl's stdin");
    }
    let out = child.wait_with_output().expect("wait for kubectl");
    Kubectl {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs kubectl and returns its standard output, trimmed; panics with its standard error when it
/// fails.
pub fn kubectl_ok(args: &[&str]) -> String {
    let out = kubectl(args);
    assert!(out.ok, "kubectl {} failed: {}", args.join(" "), out.stderr);
    out.stdout.trim().to_string()
}

/// `kubectl apply -f -` of `yaml` (one or more documents); panics with kubectl's error.
pub fn kubectl_apply(yaml: &str) {
    let out = kubectl_with_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(out.ok, "kubectl apply failed: {}\n{yaml}", out.stderr);
}

/// The host's own address, which the API server can reach and an Endpoints object may name
/// (loopback may not): the first IPv4 address of `hostname -I` that is not the node bridge's
/// (`10.0.2.*`, tests/cluster/up.sh).
///
/// # Panics
/// When `hostname -I` fails or names no such address.
pub fn host_address() -> String {
    let out = Command::new("hostname").arg("-I").output().expect("run hostname -I");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|a| a.parse::<std::net::Ipv4Addr>().is_ok() && !a.starts_with("10.0.2."))
        .unwrap_or_else(|| panic!("no usable host address in `hostname -I`: {}", String::from_utf8_lossy(&out.stdout)))
        .to_string()
}

/// A TCP port free on 127.0.0.1 at the time of the call.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

pub use super::opm;

/// `opm render DIR -o json`: the catalog's blobs in opm's order.
pub fn opm_render(dir: &Path) -> Vec<Value> {
    let out = Command::new(opm()).arg("render").arg(dir).args(["-o", "json"]).output().expect("run opm render");
    assert!(out.status.success(), "opm render {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    json_stream(&String::from_utf8_lossy(&out.stdout))
}

/// The JSON values of a stream of concatenated documents (a file-based catalog's `catalog.json`,
/// `opm render`'s output, JSON lines).
pub fn json_stream(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("not a JSON stream: {e}"))
}

/// Runs `capstan ARGS` (this build's binary); `(exit status 0, stdout, stderr)`.
pub fn capstan(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_capstan")).args(args).output().expect("run capstan");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Calls `probe` up to `tries` times, `pause` apart, until it returns `Some`; the last `None`
/// becomes `Err(())` (the caller says what was seen).
pub fn retry<T>(tries: usize, pause: Duration, mut probe: impl FnMut() -> Option<T>) -> Result<T, ()> {
    for i in 0..tries {
        if let Some(v) = probe() {
            return Ok(v);
        }
        if i + 1 < tries {
            std::thread::sleep(pause);
        }
    }
    Err(())
}

static EXIT_HOOKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

extern "C" fn run_exit_hooks() {
    let hooks = std::mem::take(&mut *EXIT_HOOKS.lock().unwrap_or_else(|e| e.into_inner()));
    for hook in hooks.into_iter().rev() {
        if std::panic::catch_unwind(hook).is_err() {
            eprintln!("a teardown step of the shared fixture panicked (see above); continuing");
        }
    }
}

/// Runs `hook` when the test binary exits (after its last test, whether tests failed or not),
/// hooks in the reverse order of their registration. This is how a fixture shared by the tests
/// of one binary ([`shared`]) removes what it created: the harness has no "after all tests". Not
/// run when the process is killed.
pub fn at_exit(hook: fn()) {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers a plain `extern "C" fn` without arguments, which catches every panic.
        let rc = unsafe { libc::atexit(run_exit_hooks) };
        assert_eq!(rc, 0, "atexit failed");
    });
    EXIT_HOOKS.lock().unwrap_or_else(|e| e.into_inner()).push(hook);
}

/// The fixture in `cell`, set up by `setup` once for all tests of the binary. When `setup`
/// panics, every test that asks for the fixture fails with that panic's message (set up once,
/// not once per test).
pub fn shared<T: Send + Sync>(cell: &'static OnceLock<Result<T, String>>, setup: impl FnOnce() -> T) -> &'static T {
    let done = cell.get_or_init(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(setup)).map_err(|payload| {
            payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic without a message".to_string())
        })
    });
    match done {
        Ok(fixture) => fixture,
        Err(msg) => panic!("the shared fixture of this test binary failed to set up: {msg}"),
    }
}
