//! capstan's own discovery on the local cluster: `capstan controller --packages-api
//! --catalog-content` runs on the host; the API server reaches it through
//! `manifests/packages-api.yaml`'s APIService and a Service named as the manifest's whose
//! Endpoints / EndpointSlice point at the host address (loopback may not be named there).
//!
//! One fixture for the binary ([`env`]): the example catalog, the corpus catalog
//! `rabbitmq-cluster-operator` and team-a's catalog (the example nginx-operator without v0.2.0)
//! pushed to the local registry as CatalogSources `olm/capstan-examples` (labelled
//! `team: platform`), `olm/community` and `team-a/team-catalog` (polled every 10 s); the API
//! registered; the controller started with `--global-catalog-namespace olm`; the APIService
//! Available. It is removed when the binary exits, the APIService first while its server still
//! answers (an aggregated API registered without its server stalls every namespace deletion).
//!
//! Each test is one scenario, checked with the pinned kubectl:
//! - the APIService is Available with the caBundle capstan wrote (no `insecureSkipTLSVerify`);
//! - `kubectl get packagemanifests -n operators` lists the example catalog's and the corpus
//!   catalog's packages with packageserver's columns (NAME, CATALOG, AGE), not team-a's;
//! - `kubectl get packagemanifest nginx-operator -o json` carries the catalog's values, `-o yaml`
//!   and `kubectl describe` work;
//! - a namespace that cannot see a catalog (team-b, for team-a's CatalogSource) does not list it;
//!   label and field selectors;
//! - a user without RBAC is Forbidden, a user with the aggregated `view` role in one namespace may
//!   list there only;
//! - the content endpoint serves exactly `opm render`'s blobs, with the CatalogSource's digest as
//!   ETag;
//! - a new catalog image digest shows in `kubectl get packagemanifests` within one poll interval
//!   (this scenario holds the fixture exclusively: it changes team-a's catalog).
//!
//! Needs the environment of `tests/cluster/up.sh` (`CAPSTAN_CLUSTER_DIR`, default `.cluster`;
//! started when not running) and opm (`CAPSTAN_OPM`, else `tests/peers/build.sh` builds it).

mod support;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use base64::Engine;
use regex::Regex;
use serde_json::{Value, json};
use support::discovery::{
    at_exit, capstan, free_port, host_address, json_stream, kubectl, kubectl_apply, kubectl_ok, opm_render, retry,
    shared,
};

/// The APIService of `manifests/packages-api.yaml`.
const APISERVICE: &str = "apiservice/v1.packages.operators.coreos.com";
/// team-a's CatalogSource's `registryPoll.interval`, in seconds.
const POLL_INTERVAL: u64 = 10;

/// What the fixture set up.
struct Env {
    /// This test's files under the environment's state directory (`discovery-controller`).
    state: PathBuf,
    /// The local registry, `127.0.0.1:PORT`.
    registry: String,
    /// The corpus catalog served as `olm/community`.
    corpus_catalog: PathBuf,
    /// `127.0.0.1:PORT` of the controller's catalog content endpoint.
    content: String,
    /// Held exclusively by the scenario that changes team-a's catalog, shared by the others.
    team_catalog: RwLock<()>,
}

/// The controller the fixture started, killed at exit.
static CONTROLLER: Mutex<Option<Child>> = Mutex::new(None);

fn env() -> &'static Env {
    static ENV: OnceLock<Result<Env, String>> = OnceLock::new();
    shared(&ENV, set_up)
}

/// The fixture, for a scenario that only reads (shares it with the other readers).
fn reading() -> (&'static Env, RwLockReadGuard<'static, ()>) {
    let env = env();
    (env, env.team_catalog.read().unwrap_or_else(|e| e.into_inner()))
}

fn set_up() -> Env {
    let root = support::repo_root();
    let state = support::state_dir().join("discovery-controller");
    let _ = std::fs::remove_dir_all(&state);
    std::fs::create_dir_all(&state).expect("state dir");
    let env = Env {
        registry: support::registry(),
        corpus_catalog: support::shared_dir()
            .join("corpus/community-operators-prod/catalogs/v4.20/rabbitmq-cluster-operator"),
        content: format!("127.0.0.1:{}", free_port()),
        team_catalog: RwLock::new(()),
        state,
    };
    push_catalogs(&env, &root);
    support::kubeconfig_path();
    at_exit(tear_down);
    create_catalog_sources(&env, &root);
    let packages = format!("{}:{}", host_address(), free_port());
    register_api(&root, &packages);
    start_controller(&env, &packages);
    wait_available(&env);
    env
}

/// Pushes the three catalog images; team-a's first without nginx-operator.v0.2.0 (the update
/// scenario pushes the whole package).
fn push_catalogs(env: &Env, root: &Path) {
    let push = |dir: &Path, repo: &str| {
        let (ok, _, err) = capstan(&[
            "catalog",
            "push",
            "-q",
            dir.to_str().unwrap(),
            &format!("{}/discovery/{repo}:latest", env.registry),
        ]);
        assert!(ok, "capstan catalog push {}: {err}", dir.display());
    };
    push(&root.join("catalog"), "capstan-examples");
    push(&env.corpus_catalog, "community");
    let text = std::fs::read_to_string(root.join("catalog/nginx-operator/catalog.json")).expect("example catalog");
    let v1: Vec<String> = json_stream(&text)
        .into_iter()
        .filter(|b| b["name"] != "nginx-operator.v0.2.0")
        .map(|mut b| {
            if b["schema"] == "olm.channel" {
                let entries = b["entries"].as_array().cloned().unwrap_or_default();
                b["entries"] = entries.into_iter().filter(|e| e["name"] != "nginx-operator.v0.2.0").collect();
            }
            b.to_string()
        })
        .collect();
    let dir = env.state.join("team-v1/nginx-operator");
    std::fs::create_dir_all(&dir).expect("team-v1");
    std::fs::write(dir.join("catalog.json"), v1.join("\n") + "\n").expect("team-v1 catalog");
    push(&env.state.join("team-v1"), "team");
}

/// Removes what the fixture created: the APIService first, while its server still answers (an
/// aggregated API that is registered but down makes the namespace controller fail discovery, and
/// every namespace deletion of the cluster then waits), then the controller, the catalogs and
/// the namespaces.
fn tear_down() {
    let root = support::repo_root();
    let api = root.join("manifests/packages-api.yaml");
    let _ = kubectl(&["delete", "-f", api.to_str().unwrap(), "--wait=true", "--timeout=60s"]);
    if let Some(mut child) = CONTROLLER.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = kubectl(&["delete", "catalogsource", "-n", "olm", "capstan-examples", "community", "--wait=false"]);
    let _ = kubectl(&[
        "delete",
        "namespace",
        "operators",
        "team-a",
        "team-b",
        "capstan-system",
        "--wait=true",
        "--timeout=120s",
    ]);
}

fn create_catalog_sources(env: &Env, root: &Path) {
    let crds = root.join("manifests/crds");
    kubectl_ok(&["apply", "-f", crds.to_str().unwrap()]);
    // Namespaces an earlier test (deploy_cluster) or run is still deleting must be gone first.
    for ns in ["capstan-system", "operators", "team-a", "team-b"] {
        let phase = kubectl(&["get", "namespace", ns, "-o", "jsonpath={.status.phase}"]).stdout;
        if phase == "Terminating" {
            let wait = kubectl(&["wait", "--for=delete", &format!("namespace/{ns}"), "--timeout=180s"]);
            assert!(wait.ok, "namespace {ns} is still Terminating after 180 s");
        }
    }
    kubectl_ok(&["apply", "-f", root.join("manifests/namespace.yaml").to_str().unwrap()]);
    for ns in ["olm", "operators", "team-a", "team-b"] {
        kubectl_apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"));
    }
    let reg = &env.registry;
    kubectl_apply(&format!(
        r#"apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {{name: capstan-examples, namespace: olm, labels: {{team: platform}}}}
spec: {{sourceType: grpc, image: "{reg}/discovery/capstan-examples:latest", displayName: Capstan Examples, publisher: Capstan}}
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {{name: community, namespace: olm}}
spec: {{sourceType: grpc, image: "{reg}/discovery/community:latest", displayName: Community Operators, publisher: Red Hat}}
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {{name: team-catalog, namespace: team-a}}
spec:
  sourceType: grpc
  image: "{reg}/discovery/team:latest"
  displayName: Team Catalog
  updateStrategy: {{registryPoll: {{interval: {POLL_INTERVAL}s}}}}
"#
    ));
}

/// `manifests/packages-api.yaml` as shipped (APIService, RBAC), its Service without a selector so
/// that the test's Endpoints / EndpointSlice on `packages` (`HOST:PORT`) stay.
fn register_api(root: &Path, packages: &str) {
    let (host, port) = packages.split_once(':').expect("HOST:PORT");
    kubectl_ok(&["apply", "-f", root.join("manifests/packages-api.yaml").to_str().unwrap()]);
    kubectl_apply(&format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: capstan-packages, namespace: capstan-system, labels: {{app.kubernetes.io/name: capstan}}}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}, protocol: TCP}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: capstan-packages, namespace: capstan-system, labels: {{app.kubernetes.io/part-of: capstan-tests}}}}
subsets: [{{addresses: [{{ip: {host}}}], ports: [{{name: https, port: {port}}}]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: capstan-packages-host
  namespace: capstan-system
  labels: {{kubernetes.io/service-name: capstan-packages, endpointslice.kubernetes.io/managed-by: capstan-tests, app.kubernetes.io/part-of: capstan-tests}}
addressType: IPv4
endpoints: [{{addresses: [{host}], conditions: {{ready: true}}}}]
ports: [{{name: https, port: {port}, protocol: TCP}}]
"#
    ));
    // The manifest's Service has a selector; the applied one does not say, so remove it.
    let _ = kubectl(&[
        "patch",
        "service",
        "-n",
        "capstan-system",
        "capstan-packages",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/selector"}]"#,
    ]);
}

fn start_controller(env: &Env, packages: &str) {
    let log = std::fs::File::create(env.state.join("controller.log")).expect("controller log");
    let child = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .arg("controller")
        .arg("--kubeconfig")
        .arg(support::kubeconfig_path())
        .args(["--global-catalog-namespace", "olm", "--metrics-addr", "0"])
        .args(["--packages-api", packages, "--catalog-content", &env.content])
        .env("RUST_LOG", "info,kube=warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .spawn()
        .expect("start capstan controller");
    *CONTROLLER.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
}

fn controller_log_tail(env: &Env, lines: usize) -> String {
    let log = std::fs::read_to_string(env.state.join("controller.log")).unwrap_or_default();
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn wait_available(env: &Env) {
    let wait = kubectl(&["wait", "--for=condition=Available", "--timeout=120s", APISERVICE]);
    assert!(
        wait.ok,
        "APIService not Available: {}; log: {}",
        kubectl(&["get", APISERVICE, "-o", "jsonpath={.status.conditions}"]).stdout,
        controller_log_tail(env, 5)
    );
}

/// The rows of a `kubectl get` table (columns are separated by two or more spaces; a value such as
/// "Capstan Examples" has single ones).
fn rows(table: &str) -> Vec<Vec<&str>> {
    let sep = Regex::new(r" {2,}").unwrap();
    table.lines().map(|l| sep.split(l.trim_end()).collect()).collect()
}

fn lists(table: &str, package: &str) -> bool {
    table.lines().any(|l| l.starts_with(&format!("{package} ")))
}

/// `kubectl get packagemanifests -n operators` once it lists nginx-operator, kaiwudb-operator and
/// rabbitmq-cluster-operator (up to 90 s: the controller loads the catalogs after it starts), or
/// the last listing.
fn operators_listing() -> String {
    let mut list = String::new();
    let _ = retry(90, Duration::from_secs(1), || {
        let out = kubectl(&["get", "packagemanifests", "-n", "operators"]);
        list = if out.ok { out.stdout } else { String::new() };
        ["nginx-operator", "kaiwudb-operator", "rabbitmq-cluster-operator"]
            .iter()
            .all(|p| lists(&list, p))
            .then_some(())
    });
    list
}

/// Waits up to 60 s for team-a to list its own catalog's nginx-operator.
fn wait_team_listing() {
    let _ = retry(60, Duration::from_secs(1), || {
        let out = kubectl(&["get", "packagemanifests", "-n", "team-a", "-l", "catalog=team-catalog"]);
        (out.ok && lists(&out.stdout, "nginx-operator")).then_some(())
    });
}

#[test]
fn apiservice_is_available_with_the_ca_bundle_capstan_wrote() {
    let _env = reading();
    let api: Value = serde_json::from_str(&kubectl_ok(&["get", APISERVICE, "-o", "json"])).expect("APIService");
    let available = api["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Available" && c["status"] == "True"));
    assert!(available, "APIService not Available: {}", api["status"]);
    assert!(api["spec"]["caBundle"].as_str().is_some_and(|b| !b.is_empty()), "no caBundle on the APIService");
    assert_ne!(api["spec"]["insecureSkipTLSVerify"], json!(true), "insecureSkipTLSVerify is set");
}

#[test]
fn operators_lists_the_global_catalogs_with_packageservers_columns() {
    let _env = reading();
    let list = operators_listing();
    println!("{list}");
    let table = rows(&list);
    assert_eq!(table.first().map(Vec::as_slice), Some(&["NAME", "CATALOG", "AGE"][..]), "columns:\n{list}");
    let row = |package: &str| table.iter().find(|r| r[0] == package).cloned().unwrap_or_default();
    let nginx = row("nginx-operator");
    let age = Regex::new(r"^[0-9]+[smhd]").unwrap();
    assert!(
        nginx.get(1) == Some(&"Capstan Examples") && nginx.get(2).is_some_and(|a| age.is_match(a)),
        "operators does not list nginx-operator from Capstan Examples with an age:\n{list}"
    );
    assert_eq!(row("kaiwudb-operator").get(1), Some(&"Capstan Examples"), "operators does not list kaiwudb-operator");
    assert_eq!(
        row("rabbitmq-cluster-operator").get(1),
        Some(&"Community Operators"),
        "operators does not list the corpus catalog's rabbitmq-cluster-operator:\n{list}"
    );
    assert!(!list.contains("Team Catalog"), "operators lists team-a's catalog:\n{list}");
}

#[test]
fn a_packagemanifest_carries_its_catalogs_values() {
    let (env, _guard) = reading();
    operators_listing();
    let get = |output: &str| kubectl_ok(&["get", "packagemanifest", "nginx-operator", "-n", "operators", "-o", output]);
    let yaml = get("yaml");
    std::fs::write(env.state.join("nginx-operator.yaml"), &yaml).expect("write yaml");
    let pm: Value = serde_json::from_str(&get("json")).expect("PackageManifest JSON");
    let catalog = std::fs::read_to_string(support::repo_root().join("catalog/nginx-operator/catalog.json"))
        .expect("example catalog");
    let errors = catalog_mismatches(&pm, &json_stream(&catalog));
    assert!(
        errors.is_empty(),
        "nginx-operator's PackageManifest does not carry the catalog's values:\n{}",
        errors.join("\n")
    );
    eprintln!(
        "nginx-operator: status fields equal the catalog's (channels, currentCSV, currentCSVDesc, entries, provider, catalogSource*)"
    );
    assert!(yaml.contains("currentCSV: nginx-operator.v0.2.0"), "-o yaml lacks currentCSV:\n{yaml}");
    let describe = kubectl(&["describe", "packagemanifest", "nginx-operator", "-n", "operators"]);
    assert!(describe.ok, "kubectl describe failed: {}", describe.stderr);
    let head: String = describe.stdout.lines().take(20).collect::<Vec<_>>().join("\n");
    assert!(
        Regex::new("Catalog Source: *capstan-examples").unwrap().is_match(&describe.stdout),
        "kubectl describe lacks the catalog source: {head}"
    );
}

#[test]
fn namespaces_list_their_own_and_the_global_catalogs() {
    let _env = reading();
    operators_listing();
    wait_team_listing();
    let team_a = kubectl_ok(&["get", "packagemanifests", "-n", "team-a", "-l", "catalog=team-catalog"]);
    assert!(lists(&team_a, "nginx-operator"), "team-a does not list its own catalog's nginx-operator:\n{team_a}");
    assert_eq!(
        kubectl_ok(&[
            "get",
            "packagemanifest",
            "nginx-operator",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.status.catalogSource}"
        ]),
        "team-catalog",
        "get in team-a does not prefer team-a's own catalog"
    );
    assert_eq!(
        kubectl_ok(&["get", "packagemanifests", "-n", "team-b", "-l", "catalog=team-catalog", "-o", "name"]),
        "",
        "team-b lists team-a's catalog"
    );
    let team_b = kubectl_ok(&["get", "packagemanifests", "-n", "team-b"]);
    assert!(!team_b.contains("Team Catalog"), "team-b lists team-a's catalog:\n{team_b}");
    assert!(lists(&team_b, "rabbitmq-cluster-operator"), "team-b does not list the global catalogs:\n{team_b}");
    assert_eq!(
        kubectl_ok(&["get", "packagemanifests", "-n", "operators", "-l", "catalog=community", "-o", "name"]),
        "packagemanifest.packages.operators.coreos.com/rabbitmq-cluster-operator",
        "label selector catalog=community"
    );
    assert_eq!(
        kubectl_ok(&[
            "get",
            "packagemanifests",
            "-n",
            "operators",
            "--field-selector",
            "metadata.name=kaiwudb-operator",
            "-o",
            "name"
        ]),
        "packagemanifest.packages.operators.coreos.com/kaiwudb-operator",
        "field selector metadata.name"
    );
}

#[test]
fn reading_packagemanifests_takes_rbac_in_the_namespace() {
    let _env = reading();
    operators_listing();
    let nobody = kubectl(&["get", "packagemanifests", "-n", "operators", "--as=nobody"]);
    assert!(!nobody.ok, "a user without RBAC could list packagemanifests");
    assert!(nobody.stderr.to_lowercase().contains("forbidden"), "expected Forbidden, got: {}", nobody.stderr);
    let get = kubectl(&["get", "packagemanifest", "nginx-operator", "-n", "operators", "--as=nobody"]);
    assert!(!get.ok, "a user without RBAC could get a packagemanifest");
    kubectl_apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: alice-view, namespace: operators}\n\
         roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n\
         subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]\n",
    );
    // The binding and the aggregation into `view` (kube-controller-manager's clusterrole-aggregation
    // controller) reach the authorizer asynchronously: wait up to 60 s for the listing to show
    // nginx, and say what was seen if it never does.
    let mut seen = String::new();
    let listed = retry(60, Duration::from_secs(1), || {
        let out = kubectl(&["get", "packagemanifests", "-n", "operators", "--as=alice"]);
        seen = format!("{}{}", out.stdout, out.stderr);
        (out.ok && lists(&out.stdout, "nginx-operator")).then_some(())
    });
    if listed.is_err() {
        let can_i = kubectl(&[
            "auth",
            "can-i",
            "list",
            "packagemanifests.packages.operators.coreos.com",
            "-n",
            "operators",
            "--as=alice",
        ]);
        let view = kubectl(&["get", "clusterrole", "view", "-o", "json"]).stdout;
        let diagnostics = format!(
            "last listing as alice: {seen}\ncan-i list as alice: {}{}\nview's packagemanifests rules: {}",
            can_i.stdout,
            can_i.stderr,
            view.lines().filter(|l| l.contains("packagemanifests")).count()
        );
        eprintln!("{diagnostics}");
        panic!("alice (view in operators, aggregated capstan-packagemanifests-view) cannot list\n{diagnostics}");
    }
    let other = kubectl(&["get", "packagemanifests", "-n", "team-a", "--as=alice"]);
    assert!(!other.ok, "alice may list in team-a without a binding there");
}

#[test]
fn the_content_endpoint_serves_what_opm_renders() {
    let (env, _guard) = reading();
    operators_listing();
    let url = format!("http://{}/catalogs/olm/community/api/v1/all", env.content);
    let (status, headers, body) = http_get(&url, &[]);
    assert_eq!(status, 200, "GET {url}: {}", String::from_utf8_lossy(&body));
    let got = json_stream(&String::from_utf8_lossy(&body));
    let want = opm_render(&env.corpus_catalog);
    let first_difference = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or_else(|| got.len().min(want.len()));
    assert!(
        got == want,
        "content endpoint != opm render: {} blobs served, {} rendered by opm; first difference at {first_difference}",
        got.len(),
        want.len()
    );
    eprintln!("content endpoint: {} blobs, equal to opm render", got.len());
    let etag = headers.get("etag").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    assert_eq!(http_get(&url, &[("if-none-match", &etag)]).0, 304, "no 304 for the ETag {etag}");
    let digest =
        kubectl_ok(&["get", "catalogsource", "-n", "olm", "community", "-o", "jsonpath={.status.resolvedDigest}"]);
    assert_eq!(etag, format!("\"{digest}\""), "the ETag is not the CatalogSource's resolvedDigest");
}

#[test]
fn a_new_catalog_digest_shows_within_one_poll_interval() {
    let env = env();
    let _exclusive = env.team_catalog.write().unwrap_or_else(|e| e.into_inner());
    wait_team_listing();
    assert_eq!(
        kubectl_ok(&[
            "get",
            "packagemanifest",
            "nginx-operator",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.status.channels[0].currentCSV}"
        ]),
        "nginx-operator.v0.1.0",
        "team catalog v1 head"
    );
    let digest = || {
        kubectl_ok(&["get", "catalogsource", "-n", "team-a", "team-catalog", "-o", "jsonpath={.status.resolvedDigest}"])
    };
    let old_digest = digest();
    let v2 = env.state.join("team-v2");
    copy_dir(&support::repo_root().join("catalog/nginx-operator"), &v2.join("nginx-operator"));
    let (ok, _, err) =
        capstan(&["catalog", "push", "-q", v2.to_str().unwrap(), &format!("{}/discovery/team:latest", env.registry)]);
    assert!(ok, "capstan catalog push team-v2: {err}");
    let start = Instant::now();
    let mut seen = String::new();
    let _ = retry(POLL_INTERVAL as usize * 4, Duration::from_millis(500), || {
        seen = kubectl(&[
            "get",
            "packagemanifests",
            "-n",
            "team-a",
            "-l",
            "catalog=team-catalog",
            "-o",
            "jsonpath={.items[0].status.channels[0].currentCSV}",
        ])
        .stdout;
        (seen == "nginx-operator.v0.2.0").then_some(())
    });
    let took = start.elapsed().as_secs_f64();
    assert_eq!(
        seen, "nginx-operator.v0.2.0",
        "the new catalog image did not show in {took:.1}s (poll interval {POLL_INTERVAL}s); currentCSV {seen}"
    );
    let new_digest = digest();
    assert_ne!(new_digest, old_digest, "digest unchanged");
    assert!(
        took <= (POLL_INTERVAL + 3) as f64,
        "the update took {took:.1}s, more than the poll interval {POLL_INTERVAL}s (+3s for the pull)"
    );
    eprintln!("catalog update ({old_digest} -> {new_digest}) listed after {took:.1}s (poll interval {POLL_INTERVAL}s)");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).expect("copy");
        }
    }
}

/// A plain GET with `headers`: `(status, headers, body)`.
fn http_get(url: &str, headers: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let mut req = reqwest::Client::new().get(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let status = resp.status().as_u16();
        let h = resp.headers().clone();
        (status, h, resp.bytes().await.expect("body").to_vec())
    })
}

/// The parts of a file-based catalog of one package that a PackageManifest shows.
struct Catalog<'a> {
    package: &'a Value,
    /// Channels by name.
    channels: Vec<&'a Value>,
    bundles: HashMap<&'a str, &'a Value>,
}

impl<'a> Catalog<'a> {
    fn new(blobs: &'a [Value]) -> Catalog<'a> {
        let package = blobs.iter().find(|b| b["schema"] == "olm.package").expect("olm.package blob");
        let mut channels: Vec<&Value> = blobs.iter().filter(|b| b["schema"] == "olm.channel").collect();
        channels.sort_by_key(|c| c["name"].as_str().unwrap_or_default().to_string());
        let bundles = blobs
            .iter()
            .filter(|b| b["schema"] == "olm.bundle")
            .map(|b| (b["name"].as_str().unwrap_or_default(), b))
            .collect();
        Catalog { package, channels, bundles }
    }

    /// The channel's head: the entry no other entry replaces or skips.
    fn head(&self, channel: &Value) -> &'a Value {
        let entries = channel["entries"].as_array().expect("entries");
        let replaced: BTreeSet<&str> = entries
            .iter()
            .filter_map(|e| e["replaces"].as_str())
            .chain(entries.iter().flat_map(|e| e["skips"].as_array().into_iter().flatten().filter_map(Value::as_str)))
            .collect();
        let name =
            entries.iter().filter_map(|e| e["name"].as_str()).find(|n| !replaced.contains(n)).expect("a channel head");
        self.bundles[name]
    }

    fn version(bundle: &Value) -> &str {
        bundle["properties"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["type"] == "olm.package")
            .and_then(|p| p["value"]["version"].as_str())
            .expect("olm.package property")
    }

    /// The CSV among the bundle's `olm.bundle.object` properties.
    fn csv(bundle: &Value) -> Value {
        bundle["properties"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["type"] == "olm.bundle.object")
            .filter_map(|p| base64::engine::general_purpose::STANDARD.decode(p["value"]["data"].as_str()?).ok())
            .filter_map(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .find(|o| o["kind"] == "ClusterServiceVersion")
            .expect("a ClusterServiceVersion object")
    }

    /// The channel's entry names, newest version first.
    fn entries_by_version(&self, channel: &Value) -> Vec<&'a str> {
        let key = |name: &str| -> (Vec<u64>, String) {
            let v = Self::version(self.bundles[name]).split('.').map(|x| x.parse().expect("numeric version")).collect();
            (v, name.to_string())
        };
        let mut names: Vec<&str> = channel["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["name"].as_str())
            .map(|n| self.bundles.get_key_value(n).expect("entry's bundle").0)
            .copied()
            .collect();
        names.sort_by_key(|n| std::cmp::Reverse(key(n)));
        names
    }
}

/// Where `pm` (a PackageManifest of the example catalog in namespace `operators`) differs from
/// what the catalog's `blobs` and the CatalogSource `olm/capstan-examples` say; empty when equal.
fn catalog_mismatches(pm: &Value, blobs: &[Value]) -> Vec<String> {
    let catalog = Catalog::new(blobs);
    let (st, md) = (&pm["status"], &pm["metadata"]);
    let mut errors = Vec::new();
    let mut eq = |what: &str, got: &Value, want: &Value| {
        if got != want {
            errors.push(format!("{what}: {got} != catalog's {want}"));
        }
    };
    let or_empty = |v: &Value, empty: Value| if v.is_null() { empty } else { v.clone() };
    eq("kind", &pm["kind"], &json!("PackageManifest"));
    eq("apiVersion", &pm["apiVersion"], &json!("packages.operators.coreos.com/v1"));
    eq("metadata.namespace", &md["namespace"], &json!("operators"));
    eq("labels.catalog", &md["labels"]["catalog"], &json!("capstan-examples"));
    eq("labels.catalog-namespace", &md["labels"]["catalog-namespace"], &json!("olm"));
    eq("labels.team (the CatalogSource's)", &md["labels"]["team"], &json!("platform"));
    eq("catalogSource", &st["catalogSource"], &json!("capstan-examples"));
    eq("catalogSourceNamespace", &st["catalogSourceNamespace"], &json!("olm"));
    eq("catalogSourceDisplayName", &st["catalogSourceDisplayName"], &json!("Capstan Examples"));
    eq("catalogSourcePublisher", &st["catalogSourcePublisher"], &json!("Capstan"));
    eq("packageName", &st["packageName"], &catalog.package["name"]);
    eq("defaultChannel", &st["defaultChannel"], &catalog.package["defaultChannel"]);
    let got_channels = st["channels"].as_array().cloned().unwrap_or_default();
    let names = |cs: &[&Value]| cs.iter().map(|c| c["name"].clone()).collect::<Vec<_>>();
    eq("channel names", &json!(names(&got_channels.iter().collect::<Vec<_>>())), &json!(names(&catalog.channels)));
    for (got, ch) in got_channels.iter().zip(&catalog.channels) {
        let name = ch["name"].as_str().unwrap_or_default();
        let head = catalog.head(ch);
        let csv = Catalog::csv(head);
        let (spec, d) = (&csv["spec"], &got["currentCSVDesc"]);
        for key in ["version", "displayName", "installModes", "provider"] {
            if d.get(key).is_none() {
                errors.push(format!("{name}.currentCSVDesc has no {key}"));
            }
        }
        let mut eq = |what: &str, got: &Value, want: &Value| {
            if got != want {
                errors.push(format!("{name}.{what}: {got} != catalog's {want}"));
            }
        };
        eq("currentCSV", &got["currentCSV"], &csv["metadata"]["name"]);
        eq("version", &d["version"], &json!(Catalog::version(head)));
        eq("displayName", &d["displayName"], &spec["displayName"]);
        eq("description", &or_empty(&d["description"], json!("")), &or_empty(&spec["description"], json!("")));
        eq("installModes", &d["installModes"], &spec["installModes"]);
        eq("provider", &d["provider"]["name"], &spec["provider"]["name"]);
        for list in ["keywords", "maintainers", "links"] {
            eq(list, &or_empty(&d[list], json!([])), &or_empty(&spec[list], json!([])));
        }
        let owned = |v: &Value| {
            let mut n: Vec<String> = v["customresourcedefinitions"]["owned"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect();
            n.sort();
            json!(n)
        };
        eq("owned CRDs", &owned(d), &owned(spec));
        let want = catalog.entries_by_version(ch);
        let got_entries = got["entries"].as_array().cloned().unwrap_or_default();
        eq("entries", &json!(got_entries.iter().map(|e| &e["name"]).collect::<Vec<_>>()), &json!(want));
        let want_versions: Vec<&str> = want.iter().map(|n| Catalog::version(catalog.bundles[n])).collect();
        eq(
            "entries versions",
            &json!(got_entries.iter().map(|e| &e["version"]).collect::<Vec<_>>()),
            &json!(want_versions),
        );
    }
    let default =
        catalog.channels.iter().find(|c| c["name"] == catalog.package["defaultChannel"]).expect("the default channel");
    let provider = &Catalog::csv(catalog.head(default))["spec"]["provider"]["name"];
    if &st["provider"]["name"] != provider {
        errors.push(format!("provider: {} != catalog's {provider}", st["provider"]["name"]));
    }
    errors
}
