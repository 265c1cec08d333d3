//! Side by side with OLM v0's packageserver: for every corpus catalog (and the example catalog),
//! capstan's PackageManifest equals, field by field, what packageserver v0.46.0 returns for the
//! same catalog served by `opm serve`; and packageserver behind the cluster's aggregator, the path
//! capstan's own server takes (`tests/discovery_controller.rs`).
//!
//! One fixture for the binary ([`package_server`]): OLM v0 started by `tests/peers/olm.sh`
//! (`$OLM_SH` to use another copy of it) with one `opm serve` + CatalogSource in `olm` per catalog
//! (opm's JSON rendering of it: olm.sh reads YAML with PyYAML, which turns unquoted dates into
//! values it cannot write back), package-server (`tests/peers/build-olm.sh`) on the host address
//! with the delegated authentication/authorization kubeconfigs (run outside a Pod, it otherwise
//! looks for an in-cluster configuration), and each catalog's `PackageManifestList` of namespace
//! `olm` with `labelSelector=catalog=NAME`, asked as the cluster admin once package-server lists
//! its packages (written to `<state dir>/discovery-packageserver/NAME.json` too). Stopped when the
//! binary exits.
//!
//! The tests are ignored by `cargo test`: OLM v0 on the test cluster replaces capstan's
//! `operators.coreos.com` CRDs with its own and runs its olm and catalog operators, which watch
//! every namespace. Run them with the environment of `tests/cluster/up.sh` running:
//! `cargo test --test discovery_packageserver -- --ignored` (OLM v0 and opm are built on first use,
//! cached outside the repository; `make test` builds them too).
//!
//! Normalised before comparing (packageserver builds them from Go maps, so their order changes
//! from one refresh to the next): `currentCSVDesc.relatedImages` sorted. Everything else, including
//! `metadata.labels`, must be equal.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use capstan::catalog::validated::{IndexOptions, ValidatedCatalog};
use capstan::discovery::packagemanifest::{CatalogSourceInfo, packages_of};
use serde_json::Value;
use support::discovery::{at_exit, capstan, free_port, host_address, kubectl, kubectl_apply, opm, retry, shared};

/// What the fixture set up.
struct PackageServer {
    /// The host address package-server listens on.
    host: String,
    /// Its port.
    port: u16,
    /// Each catalog's name, FBC directory, and packageserver's `PackageManifestList` of it.
    catalogs: Vec<(String, PathBuf, Value)>,
}

/// The package-server the fixture started, killed at exit.
static PACKAGE_SERVER: Mutex<Option<Child>> = Mutex::new(None);

fn package_server() -> &'static PackageServer {
    static FIXTURE: OnceLock<Result<PackageServer, String>> = OnceLock::new();
    shared(&FIXTURE, set_up)
}

/// `tests/peers/olm.sh`, or `$OLM_SH`.
fn olm_sh() -> PathBuf {
    std::env::var_os("OLM_SH").map(PathBuf::from).unwrap_or_else(|| support::repo_root().join("tests/peers/olm.sh"))
}

fn set_up() -> PackageServer {
    let olm_sh = olm_sh();
    assert!(olm_sh.is_file(), "{} not found (set OLM_SH to a copy of tests/peers/olm.sh)", olm_sh.display());
    let dump = support::state_dir().join("discovery-packageserver");
    let _ = std::fs::remove_dir_all(&dump);
    std::fs::create_dir_all(&dump).expect("dump dir");
    let catalogs = render_catalogs(&dump);
    let bin = package_server_bin(&olm_sh);
    support::kubeconfig_path();
    at_exit(tear_down);
    start_olm(&olm_sh, &dump, &catalogs);
    let (host, port) = (host_address(), free_port());
    start_package_server(&bin, &dump, &host, port);
    let catalogs = catalogs
        .into_iter()
        .map(|(name, dir, _)| {
            let list = wait_listed(&host, port, &name);
            std::fs::write(dump.join(format!("{name}.json")), list.to_string()).expect("write dump");
            let count = list["items"].as_array().map_or(0, Vec::len);
            eprintln!("packageserver: {name} {count} packages");
            (name, dir, list)
        })
        .collect();
    PackageServer { host, port, catalogs }
}

/// The corpus catalogs (named by their directory) and the example catalog (`capstan-examples`),
/// each rendered by opm to `DUMP/fbc/NAME/catalog.json`: `(name, source directory, rendered
/// directory)`.
fn render_catalogs(dump: &Path) -> Vec<(String, PathBuf, PathBuf)> {
    let corpus = support::shared_dir().join("corpus/community-operators-prod/catalogs/v4.20");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|e| panic!("{}: {e}", corpus.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.push(support::repo_root().join("catalog"));
    dirs.into_iter()
        .map(|dir| {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let name = if name == "catalog" { "capstan-examples".to_string() } else { name.to_string() };
            let out = Command::new(opm()).arg("render").arg(&dir).args(["-o", "json"]).output().expect("run opm");
            assert!(out.status.success(), "opm render {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
            let fbc = dump.join("fbc").join(&name);
            std::fs::create_dir_all(&fbc).expect("fbc dir");
            std::fs::write(fbc.join("catalog.json"), &out.stdout).expect("write rendered catalog");
            (name, dir, fbc)
        })
        .collect()
}

/// package-server's path: the third line `build-olm.sh` (beside `olm_sh`) prints; it builds OLM
/// v0 on first use.
fn package_server_bin(olm_sh: &Path) -> PathBuf {
    let script = olm_sh.with_file_name("build-olm.sh");
    let out = Command::new("bash").arg(&script).output().expect("run build-olm.sh");
    assert!(out.status.success(), "{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(
        stdout.lines().nth(2).unwrap_or_else(|| panic!("{} printed no third line: {stdout}", script.display())),
    )
}

fn start_olm(olm_sh: &Path, dump: &Path, catalogs: &[(String, PathBuf, PathBuf)]) {
    let specs: Vec<String> = catalogs.iter().map(|(name, _, fbc)| format!("{name}={}", fbc.display())).collect();
    let out = Command::new("bash")
        .arg(olm_sh)
        .arg("start")
        .args(&specs)
        .env("CAPSTAN_CLUSTER_DIR", support::state_dir())
        .output()
        .expect("run olm.sh start");
    std::fs::write(dump.join("olm-start.log"), &out.stderr).expect("write olm-start.log");
    assert!(out.status.success(), "olm.sh start failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

fn start_package_server(bin: &Path, dump: &Path, host: &str, port: u16) {
    let kubeconfig = support::kubeconfig_path();
    let log = std::fs::File::create(dump.join("package-server.log")).expect("package-server log");
    let child = Command::new(bin)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--authentication-kubeconfig")
        .arg(&kubeconfig)
        .arg("--authorization-kubeconfig")
        .arg(&kubeconfig)
        .args(["--global-namespace", "olm", "--secure-port", &port.to_string(), "--bind-address", host])
        .arg("--cert-dir")
        .arg(dump.join("packageserver-certs"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    *PACKAGE_SERVER.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
}

/// Stops what the fixture and the aggregation scenario started: the APIService first, while its
/// server still answers (an aggregated API registered without its server stalls every namespace
/// deletion), then package-server and OLM.
fn tear_down() {
    let _ = kubectl(&["delete", "apiservice", "v1.packages.operators.coreos.com", "--ignore-not-found", "--wait=true"]);
    let _ = kubectl(&[
        "delete",
        "-n",
        "olm",
        "service/packageserver",
        "endpoints/packageserver",
        "endpointslice/packageserver-host",
        "--ignore-not-found",
    ]);
    if let Some(mut child) = PACKAGE_SERVER.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = Command::new("bash").arg(olm_sh()).arg("stop").env("CAPSTAN_CLUSTER_DIR", support::state_dir()).status();
}

/// packageserver's `PackageManifestList` of catalog `name` in `olm`, asked as the cluster admin
/// (its serving certificate is its own, not verified); `None` when it does not answer 2xx.
fn packageserver_list(host: &str, port: u16, name: &str) -> Option<Value> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let mut cfg = support::admin_config().await;
        cfg.cluster_url = format!("https://{host}:{port}").parse().ok()?;
        cfg.accept_invalid_certs = true;
        cfg.read_timeout = Some(Duration::from_secs(60));
        let client = kube::Client::try_from(cfg).ok()?;
        let path = format!(
            "/apis/packages.operators.coreos.com/v1/namespaces/olm/packagemanifests?labelSelector=catalog%3D{name}"
        );
        let text = client.request_text(http::Request::get(path).body(Vec::new()).ok()?).await.ok()?;
        serde_json::from_str(&text).ok()
    })
}

/// Catalog `name`'s list once package-server has packages of it (it connects to each `opm serve`
/// in turn; up to 300 s), read again a second later so that a refresh in progress has finished.
/// An empty list when it never answers (the comparison then names the catalog).
fn wait_listed(host: &str, port: u16, name: &str) -> Value {
    let _ = retry(300, Duration::from_secs(1), || {
        packageserver_list(host, port, name).filter(|l| l["items"].as_array().is_some_and(|i| !i.is_empty()))
    });
    std::thread::sleep(Duration::from_secs(1));
    packageserver_list(host, port, name).unwrap_or(Value::Null)
}

fn normalise(v: &mut Value) {
    if let Some(chs) = v["status"]["channels"].as_array_mut() {
        for c in chs {
            if let Some(imgs) = c["currentCSVDesc"]["relatedImages"].as_array_mut() {
                imgs.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
        }
    }
}

/// Paths where two JSON values differ, with both sides (at most `limit`).
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>, limit: usize) {
    if out.len() >= limit || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                diff(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                    limit,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), p, q, out, limit);
            }
        }
        _ => {
            let short = |v: &Value| {
                let s = v.to_string();
                if s.chars().count() > 200 { format!("{}…", s.chars().take(200).collect::<String>()) } else { s }
            };
            out.push(format!("{path}: capstan {} / packageserver {}", short(a), short(b)));
        }
    }
}

/// Every catalog's PackageManifests: capstan's (`packages_of`, with CatalogSource `olm/NAME`)
/// against packageserver's list of that catalog, in `status` and `metadata.labels`.
#[test]
#[ignore = "starts OLM v0 on the test cluster (its CRDs replace capstan's, its operators watch every namespace): \
            cargo test --test discovery_packageserver -- --ignored (make test runs it last)"]
fn packagemanifests_equal_packageservers() {
    let server = package_server();
    let mut problems = Vec::new();
    let (mut packages, mut catalogs) = (0, 0);
    for (name, dir, theirs) in &server.catalogs {
        let cfg = capstan::catalog::parse::load_path(dir).unwrap();
        let idx = ValidatedCatalog::with_options(cfg, IndexOptions { keep_bundle_objects: true, ..Default::default() })
            .unwrap();
        let (ours, _) = packages_of(&idx);
        let source = CatalogSourceInfo {
            name: name.clone(),
            namespace: "olm".into(),
            display_name: name.clone(),
            ..Default::default()
        };
        let mut their_items: Vec<Value> = theirs["items"].as_array().cloned().unwrap_or_default();
        their_items.sort_by(|a, b| a["metadata"]["name"].as_str().cmp(&b["metadata"]["name"].as_str()));
        let our_names: Vec<&str> = ours.iter().map(|p| p.name.as_str()).collect();
        let their_names: Vec<&str> = their_items.iter().map(|i| i["metadata"]["name"].as_str().unwrap_or("")).collect();
        if our_names != their_names {
            problems.push(format!("{name}: packages capstan {our_names:?} / packageserver {their_names:?}"));
            continue;
        }
        catalogs += 1;
        for (p, t) in ours.iter().zip(&their_items) {
            packages += 1;
            let mut mine = serde_json::to_value(p.manifest(&source, "olm")).unwrap();
            let mut t = t.clone();
            normalise(&mut mine);
            normalise(&mut t);
            let mut d = Vec::new();
            diff(&format!("{name}/{}.status", p.name), &mine["status"], &t["status"], &mut d, 10);
            diff(
                &format!("{name}/{}.metadata.labels", p.name),
                &mine["metadata"]["labels"],
                &t["metadata"]["labels"],
                &mut d,
                10,
            );
            problems.extend(d);
        }
    }
    eprintln!("compared {packages} packages of {catalogs} catalogs with packageserver");
    assert!(problems.is_empty(), "{} differences:\n{}", problems.len(), problems.join("\n"));
    assert!(catalogs > 0, "no catalog compared");
}

/// packageserver behind the aggregator: an APIService (`insecureSkipTLSVerify`, as OLM registers
/// it) and a Service whose Endpoints / EndpointSlice are on the host address; what a user sees
/// with kubectl, RBAC refusing a user without get/list (requestheader authentication and
/// SubjectAccessReview authorization in the aggregated server), `capstan search/show` against
/// the cluster.
#[test]
#[ignore = "starts OLM v0 on the test cluster (its CRDs replace capstan's, its operators watch every namespace): \
            cargo test --test discovery_packageserver -- --ignored (make test runs it last)"]
fn packageserver_serves_through_the_aggregator() {
    let server = package_server();
    let (host, port) = (&server.host, server.port);
    kubectl_apply(&format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: packageserver, namespace: olm}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: packageserver, namespace: olm}}
subsets: [{{addresses: [{{ip: {host}}}], ports: [{{name: https, port: {port}}}]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: packageserver-host
  namespace: olm
  labels: {{kubernetes.io/service-name: packageserver, endpointslice.kubernetes.io/managed-by: capstan-tests}}
addressType: IPv4
endpoints: [{{addresses: [{host}], conditions: {{ready: true}}}}]
ports: [{{name: https, port: {port}, protocol: TCP}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1.packages.operators.coreos.com}}
spec:
  group: packages.operators.coreos.com
  version: v1
  service: {{namespace: olm, name: packageserver, port: 443}}
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 2000
  versionPriority: 15
"#
    ));
    let available = kubectl(&[
        "wait",
        "--for=condition=Available",
        "--timeout=120s",
        "apiservice/v1.packages.operators.coreos.com",
    ]);
    assert!(available.ok, "APIService not Available: {}", available.stderr);
    let mut list = String::new();
    let both = |l: &str| l.contains("nginx-operator") && l.contains("rabbitmq-cluster-operator");
    let _ = retry(60, Duration::from_secs(1), || {
        let out = kubectl(&["get", "packagemanifests", "-n", "operators"]);
        list = if out.ok { out.stdout } else { String::new() };
        both(&list).then_some(())
    });
    println!("{list}");
    assert!(both(&list), "operators does not list both catalogs' packages:\n{list}");
    let head = kubectl(&[
        "get",
        "packagemanifest",
        "nginx-operator",
        "-n",
        "operators",
        "-o",
        "jsonpath={.status.channels[0].currentCSV}",
    ]);
    assert_eq!(head.stdout.trim(), "nginx-operator.v0.2.0", "nginx-operator currentCSV: {}", head.stderr);
    let nobody = kubectl(&["get", "packagemanifests", "-n", "operators", "--as=nobody"]);
    assert!(!nobody.ok, "a user without RBAC could list packagemanifests");
    assert!(nobody.stderr.contains("Forbidden"), "expected Forbidden, got: {}", nobody.stderr);
    let kubeconfig = support::kubeconfig_path();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let (ok, out, err) = capstan(&["search", "rabbit", "-n", "operators", "--kubeconfig", kubeconfig]);
    assert!(ok && out.contains("rabbitmq-cluster-operator"), "capstan search over the cluster: {out}{err}");
    let (ok, out, err) =
        capstan(&["show", "nginx-operator", "-n", "operators", "--kubeconfig", kubeconfig, "-o", "json"]);
    assert!(
        ok && out.contains(r#""currentCSV": "nginx-operator.v0.2.0""#),
        "capstan show over the cluster: {out}{err}"
    );
}
