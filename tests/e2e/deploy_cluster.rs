//! Running capstan in a cluster on the real local control plane, one scenario per test:
//!
//! - `kubectl apply -k manifests/` (the pinned kubectl) creates everything and the Deployment
//!   becomes Available on the kwok node; the ServiceAccount it creates may do what capstan does
//!   and no more (SubjectAccessReviews with its own token); the built `capstan controller` runs
//!   with that identity (a TokenRequest token, not the admin's), installs nginx-operator and
//!   kaiwudb-operator, and serves /metrics, /healthz, /readyz. Each of these three tests applies
//!   the manifests itself and deletes them again ([`Manifests`]).
//! - Two `capstan controller --leader-elect` processes: exactly one holds the Lease; SIGKILL the
//!   holder and the other takes over after the lease expired and within its bound; SIGTERM
//!   releases the Lease, which the next controller takes at once; a leader whose Lease is taken
//!   exits with code 1. Killing the leader during an install: the standby finishes it with
//!   exactly one InstallPlan.
//! - `controller::events::publish` records an Event on a Subscription, folding repeats.
//! - The manifests' ClusterRole without `escalate`/`bind` is not enough: the InstallPlan of
//!   nginx-operator fails naming the identity and the refused grant.
//!
//! The tests on the cluster hold [`SERIAL`] as well as their group: each controller watches every
//! namespace, and the manifests tests delete the CRDs they created.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::controller::*;
use crate::support::{TestNamespace, eventually};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const GROUP: &str = "deploy_cluster";

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A `capstan controller` child process, SIGKILLed when dropped (a failing test leaves nothing running).
struct Controller {
    child: Child,
    log: PathBuf,
    metrics: String,
}

impl Controller {
    fn start(name: &str, kubeconfig: &Path, work: &Path, extra: &[&str]) -> Controller {
        Controller::start_on(name, kubeconfig, work, &format!("127.0.0.1:{}", free_port()), extra)
    }

    fn start_on(name: &str, kubeconfig: &Path, work: &Path, metrics: &str, extra: &[&str]) -> Controller {
        let metrics = metrics.to_string();
        let log = work.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_capstan"))
            .arg("controller")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--metrics-addr")
            .arg(&metrics)
            .args(extra)
            .env("POD_NAME", name)
            .env("CAPSTAN_CACHE", work.join(format!("{name}-cache")))
            .env("RUST_LOG", "info,kube=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("start capstan controller");
        Controller { child, log, metrics }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(&self.metrics, path)
    }

    fn signal(&self, sig: i32) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(pid, sig) };
    }

    /// Waits up to `timeout` for the process to exit; its exit code.
    fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// A plain HTTP/1.1 GET; `(status, body)`, or `None` when nothing listens.
fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// Runs the pinned kubectl (crate::support::kubectl) against the test cluster as admin; panics with its output on failure.
fn kubectl(args: &[&str]) -> String {
    kubectl_as(&crate::support::kubeconfig_path(), args)
}

/// Runs the pinned kubectl with `kubeconfig`; panics with its output on failure.
fn kubectl_as(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new(crate::support::kubectl())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A kubeconfig for the local API server that authenticates with `token`.
async fn token_kubeconfig(token: &str, path: &Path) {
    let admin = crate::support::admin_config().await;
    let ca = crate::support::state_dir().join("pki/ca.crt");
    let kc = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": admin.cluster_url.to_string(), "certificate-authority": ca}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c"
    });
    std::fs::write(path, serde_json::to_string_pretty(&kc).expect("json")).expect("write kubeconfig");
}

/// What `kubectl apply -k manifests/` created, for one test: deleted again when dropped
/// ([`DeleteManifests`]), the CRDs only when they did not exist before.
struct Manifests {
    /// What kubectl printed.
    applied: String,
    _cleanup: DeleteManifests,
}

impl Manifests {
    /// One `kubectl apply -k manifests/` (the pinned kubectl), once a capstan-system left by an
    /// earlier test or run is gone.
    async fn apply(admin: &kube::Client) -> Manifests {
        // What exists before, so that only what this test created is deleted afterwards.
        let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
        let crd_names: Vec<String> = capstan::api::crds().iter().filter_map(|c| c.metadata.name.clone()).collect();
        let mut preexisting_crds = Vec::new();
        for n in &crd_names {
            if crds.get_opt(n).await.expect("get CRD").is_some() {
                preexisting_crds.push(n.clone());
            }
        }
        // A capstan-system left by an earlier run must be gone first (deleting it takes a moment).
        let namespaces: Api<Namespace> = Api::all(admin.clone());
        eventually(
            "no namespace capstan-system before the test (delete it: kubectl delete -k manifests/)",
            Duration::from_secs(90),
            || async { namespaces.get_opt("capstan-system").await.ok()?.is_none().then_some(()) },
        )
        .await;
        // Whatever happens below, delete what the test created.
        let cleanup = DeleteManifests {
            created_crds: crd_names.iter().filter(|n| !preexisting_crds.contains(n)).cloned().collect(),
        };
        let root = crate::support::repo_root();
        let applied = kubectl(&["apply", "-k", root.join("manifests").to_str().expect("path")]);
        Manifests { applied, _cleanup: cleanup }
    }
}

/// The Deployment capstan-system/capstan once it is Available with its 2 replicas ready (on the
/// kwok node).
async fn deployment_available(admin: &kube::Client) -> Deployment {
    let deploys: Api<Deployment> = Api::namespaced(admin.clone(), "capstan-system");
    eventually("Deployment capstan-system/capstan Available", Duration::from_secs(120), || async {
        let d = deploys.get("capstan").await.ok()?;
        let st = d.status.as_ref()?;
        let available = st.conditions.as_ref()?.iter().any(|c| c.type_ == "Available" && c.status == "True");
        (available && st.ready_replicas == Some(2)).then_some(d)
    })
    .await
}

/// `kubectl apply -k manifests/` creates everything in one go; the Deployment becomes Available
/// on the kwok node, hardened (read-only root, no privilege escalation, non-root, probes,
/// resources, leader election), and the namespace's restricted Pod Security Standard admits its
/// Pods.
#[test]
fn manifests_apply_creates_everything_and_the_deployment_becomes_available() {
    crate::support::run(GROUP, 2, async {
        let _serial = SERIAL.lock().await;
        let admin = crate::support::cluster().await;
        let manifests = Manifests::apply(&admin).await;
        for what in [
            "namespace/capstan-system",
            "customresourcedefinition.apiextensions.k8s.io/subscriptions.operators.coreos.com",
            "serviceaccount/capstan",
            "clusterrole.rbac.authorization.k8s.io/capstan",
            "clusterrolebinding.rbac.authorization.k8s.io/capstan",
            "role.rbac.authorization.k8s.io/capstan-leader-election",
            "rolebinding.rbac.authorization.k8s.io/capstan-leader-election",
            "service/capstan-metrics",
            "deployment.apps/capstan",
        ] {
            assert!(manifests.applied.contains(what), "kubectl apply -k did not create {what}:\n{}", manifests.applied);
        }
        let d = deployment_available(&admin).await;
        let pod = d.spec.expect("spec").template.spec.expect("pod spec");
        let c = &pod.containers[0];
        let sc = c.security_context.as_ref().expect("container securityContext");
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(pod.security_context.as_ref().and_then(|s| s.run_as_non_root), Some(true));
        assert!(c.args.as_ref().is_some_and(|a| a.iter().any(|x| x == "--leader-elect")), "{:?}", c.args);
        assert!(c.liveness_probe.is_some() && c.readiness_probe.is_some());
        assert!(c.resources.as_ref().is_some_and(|r| r.limits.is_some() && r.requests.is_some()));
        // The namespace enforces the restricted Pod Security Standard and admitted the Pods.
        let pods = kubectl(&["get", "pods", "-n", "capstan-system", "-o", "name"]);
        assert_eq!(pods.lines().count(), 2, "{pods}");
    })
}

/// What capstan does, as (verb, group, resource, namespace): the ClusterRole of manifests/ must
/// grant each of them (the `operators.coreos.com` resources are checked apart).
const NEEDED: &[(&str, &str, &str, Option<&str>)] = &[
    ("create", "apiextensions.k8s.io", "customresourcedefinitions", None),
    ("update", "apiextensions.k8s.io", "customresourcedefinitions", None),
    ("create", "rbac.authorization.k8s.io", "clusterroles", None),
    // A deleted OperatorGroup's ClusterRoles (`install::aggregation::delete_for_operator_group`).
    ("deletecollection", "rbac.authorization.k8s.io", "clusterroles", None),
    ("escalate", "rbac.authorization.k8s.io", "clusterroles", None),
    ("bind", "rbac.authorization.k8s.io", "clusterroles", None),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", None),
    ("create", "rbac.authorization.k8s.io", "roles", Some("default")),
    ("escalate", "rbac.authorization.k8s.io", "roles", Some("default")),
    ("bind", "rbac.authorization.k8s.io", "roles", Some("default")),
    ("create", "rbac.authorization.k8s.io", "rolebindings", Some("default")),
    ("create", "apps", "deployments", Some("default")),
    ("delete", "apps", "deployments", Some("default")),
    ("create", "", "serviceaccounts", Some("default")),
    ("create", "", "services", Some("default")),
    ("create", "", "configmaps", Some("default")),
    ("create", "", "secrets", Some("default")),
    ("list", "", "namespaces", None),
    // The label olm.operatorgroup.uid/<uid> on an OperatorGroup's target namespaces.
    ("patch", "", "namespaces", None),
    ("impersonate", "", "serviceaccounts", Some("default")),
    ("get", "coordination.k8s.io", "leases", Some("capstan-system")),
    ("create", "coordination.k8s.io", "leases", Some("capstan-system")),
    ("update", "coordination.k8s.io", "leases", Some("capstan-system")),
    ("create", "events.k8s.io", "events", Some("default")),
    ("patch", "events.k8s.io", "events", Some("default")),
    ("create", "authorization.k8s.io", "subjectaccessreviews", None),
    ("create", "monitoring.coreos.com", "servicemonitors", Some("default")),
    ("create", "policy", "poddisruptionbudgets", Some("default")),
    ("create", "networking.k8s.io", "networkpolicies", Some("default")),
    // Webhooks and owned APIServices of CSVs (docs/deploy.md "Webhooks and APIServices").
    ("create", "admissionregistration.k8s.io", "validatingwebhookconfigurations", None),
    ("delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None),
    ("patch", "apiregistration.k8s.io", "apiservices", None),
    ("delete", "apiregistration.k8s.io", "apiservices", None),
    ("create", "rbac.authorization.k8s.io", "rolebindings", Some("kube-system")),
    // The gRPC registry of each served CatalogSource (`--registry-listen`): its Service and
    // EndpointSlice, server-side applied (docs/controller.md "Registry Services").
    ("patch", "", "services", Some("default")),
    ("create", "discovery.k8s.io", "endpointslices", Some("default")),
    ("patch", "discovery.k8s.io", "endpointslices", Some("default")),
    // The endpoints of a Service a CatalogSource's spec.address names (its registry pod replaced).
    ("watch", "discovery.k8s.io", "endpointslices", None),
];

/// What capstan never does: the ClusterRole must grant none of it (least privilege: no
/// wildcards, nothing capstan does not do).
const DENIED: &[(&str, &str, &str, Option<&str>)] = &[
    ("delete", "apiextensions.k8s.io", "customresourcedefinitions", None),
    ("create", "coordination.k8s.io", "leases", Some("default")),
    ("create", "", "pods", Some("default")),
    ("create", "", "pods/exec", Some("default")),
    ("create", "", "serviceaccounts/token", Some("default")),
    ("impersonate", "", "users", None),
    ("create", "", "nodes", None),
    ("delete", "", "namespaces", None),
    ("create", "", "persistentvolumeclaims", Some("default")),
    // EndpointSlices go with their CatalogSource by garbage collection: capstan deletes none.
    ("delete", "discovery.k8s.io", "endpointslices", Some("default")),
];

/// What of [`NEEDED`] and of every verb on the `operators.coreos.com` resources (and their
/// status) the client may not do.
async fn missing_grants(sa: &kube::Client) -> Vec<String> {
    let mut missing = Vec::new();
    for (verb, group, resource, ns) in NEEDED {
        if !can(sa, verb, group, resource, *ns).await {
            missing.push(format!("{verb} {group}/{resource} in {ns:?}"));
        }
    }
    for r in [
        "catalogsources",
        "subscriptions",
        "installplans",
        "clusterserviceversions",
        "operatorgroups",
        "operatorconditions",
        "operators",
        "olmconfigs",
    ] {
        for verb in ["get", "list", "watch", "create", "update", "patch", "delete"] {
            if !can(sa, verb, "operators.coreos.com", r, Some("default")).await {
                missing.push(format!("{verb} operators.coreos.com/{r}"));
            }
        }
        for verb in ["update", "patch"] {
            if !can(sa, verb, "operators.coreos.com", &format!("{r}/status"), Some("default")).await {
                missing.push(format!("{verb} operators.coreos.com/{r}/status"));
            }
        }
    }
    missing
}

/// The manifests' ServiceAccount, with its own token (`kubectl auth whoami` names it), may do
/// what capstan does and nothing more.
#[test]
fn the_manifests_service_account_may_do_what_capstan_needs_and_no_more() {
    crate::support::run(GROUP, 2, async {
        let _serial = SERIAL.lock().await;
        let admin = crate::support::cluster().await;
        let work = tempfile::tempdir().expect("tempdir");
        let _manifests = Manifests::apply(&admin).await;
        // Settled as in the apply test (the Deployment Available) before anything uses them.
        deployment_available(&admin).await;
        let token = sa_token(&admin, "capstan-system", "capstan").await;
        let sa = crate::support::client_with_token(&token).await;
        let kubeconfig = work.path().join("sa-kubeconfig");
        token_kubeconfig(&token, &kubeconfig).await;
        let me = kubectl_as(&kubeconfig, &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]);
        assert_eq!(me.trim(), "system:serviceaccount:capstan-system:capstan");
        let missing = missing_grants(&sa).await;
        assert!(missing.is_empty(), "the ClusterRole of manifests/ does not grant: {missing:#?}");
        for (verb, group, resource, ns) in DENIED {
            assert!(
                !can(&sa, verb, group, resource, *ns).await,
                "the ClusterRole grants more than capstan needs: {verb} {group}/{resource} in {ns:?}"
            );
        }
    })
}

/// /healthz, and every named series on /metrics of a controller that installed something as leader.
fn endpoints_serve_health_and_metrics(ctl: &Controller) {
    assert_eq!(ctl.get("/healthz").map(|r| r.0), Some(200));
    let (status, metrics) = ctl.get("/metrics").expect("GET /metrics");
    assert_eq!(status, 200);
    // (The catalog and error families appear once a catalog pull / failed reconcile is recorded;
    // the unit tests of capstan::metrics cover their encoding.)
    for series in [
        "# TYPE capstan_resolution_duration_seconds histogram",
        "# TYPE capstan_install_duration_seconds histogram",
        "capstan_install_duration_seconds_count{outcome=\"succeeded\"}",
        "# TYPE capstan_csvs gauge",
        "capstan_csvs{phase=\"Succeeded\"}",
        "capstan_leader 1",
    ] {
        assert!(metrics.contains(series), "/metrics lacks {series:?}:\n{metrics}");
    }
}

/// The controller's log shows no RBAC denial: not the API server refusing new objects (an Event,
/// say) in a namespace that another test is deleting, whose 403 says "... because it is being
/// terminated".
fn no_rbac_denial_logged(ctl: &Controller) {
    let log = ctl.log();
    let denials: Vec<&str> = log
        .lines()
        .filter(|l| {
            (l.contains("Forbidden") || l.contains("forbidden")) && !l.contains("because it is being terminated")
        })
        .collect();
    assert!(denials.is_empty(), "the ServiceAccount's controller was denied something:\n{}", denials.join("\n"));
}

/// The controller (the built binary) with the manifests' ServiceAccount token (a TokenRequest
/// token, not the admin's): leads, installs nginx-operator and kaiwudb-operator with their RBAC
/// without being denied anything, serves /healthz, /readyz and /metrics, and on SIGTERM exits 0
/// and releases the Lease.
#[test]
fn capstan_as_the_manifests_service_account_leads_installs_and_serves_its_endpoints() {
    crate::support::run(GROUP, 2, async {
        let _serial = SERIAL.lock().await;
        let admin = crate::support::cluster().await;
        let work = tempfile::tempdir().expect("tempdir");
        let _manifests = Manifests::apply(&admin).await;
        // Settled as in the apply test (the Deployment Available) before anything uses them.
        deployment_available(&admin).await;
        let token = sa_token(&admin, "capstan-system", "capstan").await;
        let kubeconfig = work.path().join("sa-kubeconfig");
        token_kubeconfig(&token, &kubeconfig).await;
        let registry = crate::support::registry();
        let catalog_ref = publish(&registry, &format!("deploy-e2e-{}", std::process::id()), work.path());
        let catalog_ns = TestNamespace::new(&admin, "deploy-catalog").await;
        let mut ctl = Controller::start(
            "capstan-sa",
            &kubeconfig,
            work.path(),
            &["--leader-elect", "--lease-namespace", "capstan-system", "--global-catalog-namespace", &catalog_ns.name],
        );
        let leases: Api<Lease> = Api::namespaced(admin.clone(), "capstan-system");
        let what = "the ServiceAccount's controller holds Lease capstan-system/capstan";
        lease_held_by(&leases, "capstan-sa", what, Duration::from_secs(60)).await;
        eventually("/readyz 200", Duration::from_secs(60), || async { (ctl.get("/readyz")?.0 == 200).then_some(()) })
            .await;
        catalog_source(&admin, &catalog_ns.name, "examples", &catalog_ref).await;
        let ns = namespace_with_global_group(&admin, "deploy-ops").await;
        subscribe(&admin, &ns.name, "nginx-operator", &catalog_ns.name, "Automatic").await;
        subscribe_channel(&admin, &ns.name, "kaiwudb-operator", "stable", &catalog_ns.name, "Automatic").await;
        csv_succeeded_and_deployment_available(&admin, &ns.name).await;
        let kaiwudb = eventually("kaiwudb-operator CSV named in its Subscription", WAIT, || async {
            let subs: Api<capstan::api::Subscription> = Api::namespaced(admin.clone(), &ns.name);
            subs.get("kaiwudb-operator").await.ok()?.status?.installed_csv
        })
        .await;
        csv_version_succeeded(&admin, &ns.name, &kaiwudb).await;
        endpoints_serve_health_and_metrics(&ctl);
        no_rbac_denial_logged(&ctl);
        // Graceful stop: exit 0 and the Lease released.
        ctl.signal(libc::SIGTERM);
        let code = ctl.wait_exit(Duration::from_secs(30));
        assert_eq!(code, Some(0), "controller did not stop on SIGTERM:\n{}", ctl.log());
        let spec = leases.get("capstan").await.expect("lease").spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some(""), "{spec:?}");
        drop(ctl);
        // The cluster-scoped RBAC of the installs; the manifests' objects go with `_manifests`.
        cleanup_cluster_rbac(&admin, &[ns.name.as_str()]).await;
        // The AllNamespaces group goes now, not with its namespace: nginx-operator installed for
        // all namespaces by the next test (the handover) would otherwise wait until it is gone.
        release_group(&admin, &ns.name, "global").await;
    })
}

/// Deletes, when dropped, what `kubectl apply -k manifests/` created: the namespace with its
/// objects, the cluster-scoped RBAC, and the CRDs that did not exist before the test.
struct DeleteManifests {
    created_crds: Vec<String>,
}

impl Drop for DeleteManifests {
    fn drop(&mut self) {
        // The APIService first: one left pointing at the deleted Service makes the API server's
        // discovery of packages.operators.coreos.com fail, and namespaces then stay Terminating.
        let mut args = vec![
            "delete",
            "--wait=false",
            "--ignore-not-found",
            "apiservice/v1.packages.operators.coreos.com",
            "namespace/capstan-system",
            "clusterrole/capstan",
            "clusterrolebinding/capstan",
            "clusterrolebinding/capstan:system:auth-delegator",
            "clusterrole/capstan-packagemanifests-view",
        ];
        let crds: Vec<String> = self.created_crds.iter().map(|n| format!("crd/{n}")).collect();
        args.extend(crds.iter().map(String::as_str));
        let _ = Command::new(crate::support::kubectl())
            .arg("--kubeconfig")
            .arg(crate::support::kubeconfig_path())
            .args(&args)
            .output();
        let _ = Command::new(crate::support::kubectl())
            .arg("--kubeconfig")
            .arg(crate::support::kubeconfig_path())
            .args([
                "delete",
                "--ignore-not-found",
                "-n",
                "kube-system",
                "rolebinding/capstan:extension-apiserver-authentication-reader",
            ])
            .output();
    }
}

/// The lease duration the leader-election tests give (`--lease-duration 4s`).
const LEASE: Duration = Duration::from_secs(4);
/// Their retry period (`--retry-period 500ms`).
const RETRY: Duration = Duration::from_millis(500);

/// Flags of a controller that elects its leader with Lease `ns/capstan`, [`LEASE`] and [`RETRY`].
fn lease_flags(ns: &str) -> Vec<&str> {
    vec![
        "--leader-elect",
        "--lease-namespace",
        ns,
        "--lease-name",
        "capstan",
        "--lease-duration",
        "4s",
        "--renew-deadline",
        "3s",
        "--retry-period",
        "500ms",
    ]
}

/// Lease `capstan` of `leases` once `holder` holds it, waiting up to `timeout` (`what` says for what).
async fn lease_held_by(leases: &Api<Lease>, holder: &str, what: &str, timeout: Duration) -> Lease {
    eventually(what, timeout, || async {
        let l = leases.get_opt("capstan").await.ok()??;
        (l.spec.as_ref()?.holder_identity.as_deref() == Some(holder)).then_some(l)
    })
    .await
}

/// Exactly one leads: `b` stays standby (ready, capstan_leader 0) through several renewals of `a`.
async fn only_a_leads_while_it_lives(a: &Controller, b: &Controller, leases: &Api<Lease>) {
    eventually("capstan-b /readyz", Duration::from_secs(30), || async { (b.get("/readyz")?.0 == 200).then_some(()) })
        .await;
    tokio::time::sleep(LEASE * 2).await;
    let lease = leases.get("capstan").await.expect("lease").spec.expect("spec");
    assert_eq!(
        lease.holder_identity.as_deref(),
        Some("capstan-a"),
        "a lost the Lease while alive: {lease:?}\n{}",
        b.log()
    );
    assert_eq!(lease.lease_duration_seconds, Some(4));
    assert!(b.get("/metrics").expect("b metrics").1.lines().any(|l| l == "capstan_leader 0"));
    assert!(a.get("/metrics").expect("a metrics").1.lines().any(|l| l == "capstan_leader 1"));
    assert!(b.log().contains("waiting for leadership"), "{}", b.log());
    assert!(!b.log().contains("became leader"), "{}", b.log());
}

/// SIGKILL the holder `a`: `b` takes over once the Lease expired, within lease duration + 2
/// retries (+1 s API slack), and reports itself leader.
async fn sigkill_hands_over_to_b(a: &mut Controller, b: &Controller, leases: &Api<Lease>) {
    let before = leases.get("capstan").await.expect("lease").spec.expect("spec");
    a.child.kill().expect("SIGKILL a");
    let killed = Instant::now();
    let after = lease_held_by(leases, "capstan-b", "capstan-b takes the Lease", Duration::from_secs(30)).await;
    let after = after.spec.expect("spec");
    let handover = killed.elapsed();
    let bound = LEASE + RETRY * 2 + Duration::from_secs(1);
    assert!(handover <= bound, "handover took {handover:?}, more than {bound:?}\n{}", b.log());
    // Not before the Lease a last renewed had expired (same clock on this machine).
    let last_renew = before.renew_time.expect("renewTime").0;
    let acquired = after.acquire_time.expect("acquireTime").0;
    let waited = acquired.duration_since(last_renew);
    assert!(
        waited.as_secs_f64() >= LEASE.as_secs_f64() - 0.05,
        "b took the Lease {waited:?} after a's last renewal, before it expired"
    );
    assert_eq!(after.lease_transitions, before.lease_transitions.map(|t| t + 1));
    eprintln!("handover after SIGKILL: {handover:?} (bound {bound:?}); acquired {waited:?} after the last renewal");
    eventually("capstan-b reports capstan_leader 1", Duration::from_secs(10), || async {
        b.get("/metrics")?.1.lines().any(|l| l == "capstan_leader 1").then_some(())
    })
    .await;
}

/// SIGTERM the leader `ctl`: it stops its controllers and releases the Lease (empty holder, 1 s),
/// exit 0.
async fn sigterm_releases_the_lease(ctl: &mut Controller, leases: &Api<Lease>) {
    ctl.signal(libc::SIGTERM);
    assert_eq!(ctl.wait_exit(Duration::from_secs(20)), Some(0), "it did not stop on SIGTERM:\n{}", ctl.log());
    let released = leases.get("capstan").await.expect("lease").spec.expect("spec");
    assert_eq!(released.holder_identity.as_deref(), Some(""), "{released:?}");
    assert_eq!(released.lease_duration_seconds, Some(1));
}

/// Two `capstan controller --leader-elect` processes: exactly one holds the Lease; SIGKILL the
/// holder and the other takes over after the lease expired and within its bound; SIGTERM then
/// releases the Lease.
#[test]
fn leader_election_hands_over_after_sigkill_and_releases_on_sigterm() {
    crate::support::run(GROUP, 2, async {
        let _serial = SERIAL.lock().await;
        let admin = crate::support::cluster().await;
        apply_crds(&admin).await;
        let ns = TestNamespace::new(&admin, "lease").await;
        let work = tempfile::tempdir().expect("tempdir");
        let kubeconfig = crate::support::kubeconfig_path();
        let flags = lease_flags(&ns.name);
        let mut a = Controller::start("capstan-a", &kubeconfig, work.path(), &flags);
        let leases: Api<Lease> = Api::namespaced(admin.clone(), &ns.name);
        lease_held_by(&leases, "capstan-a", "capstan-a holds the Lease", Duration::from_secs(30)).await;
        let mut b = Controller::start("capstan-b", &kubeconfig, work.path(), &flags);
        only_a_leads_while_it_lives(&a, &b, &leases).await;
        sigkill_hands_over_to_b(&mut a, &b, &leases).await;
        sigterm_releases_the_lease(&mut b, &leases).await;
        drop((a, b, ns));
    })
}

/// A Lease released on SIGTERM is taken at once by the next controller; a leader whose Lease
/// someone else took exits with code 1, and says why on a JSON log line (`--log-format json`: one
/// object per line, the message and fields at the top level).
#[test]
fn a_released_lease_is_taken_at_once_and_a_leader_that_loses_it_exits_1() {
    crate::support::run(GROUP, 2, async {
        let _serial = SERIAL.lock().await;
        let admin = crate::support::cluster().await;
        apply_crds(&admin).await;
        let ns = TestNamespace::new(&admin, "lease-lost").await;
        let work = tempfile::tempdir().expect("tempdir");
        let kubeconfig = crate::support::kubeconfig_path();
        let flags = lease_flags(&ns.name);
        let leases: Api<Lease> = Api::namespaced(admin.clone(), &ns.name);
        let mut a = Controller::start("capstan-a", &kubeconfig, work.path(), &flags);
        lease_held_by(&leases, "capstan-a", "capstan-a holds the Lease", Duration::from_secs(30)).await;
        sigterm_releases_the_lease(&mut a, &leases).await;

        let json_flags: Vec<&str> = flags.iter().copied().chain(["--log-format", "json"]).collect();
        let mut c = Controller::start("capstan-c", &kubeconfig, work.path(), &json_flags);
        let started = Instant::now();
        let what = "capstan-c holds the released Lease";
        let mut lease = lease_held_by(&leases, "capstan-c", what, Duration::from_secs(30)).await;
        assert!(started.elapsed() < LEASE, "taking a released Lease waited {:?}", started.elapsed());
        let spec = lease.spec.as_mut().expect("spec");
        spec.holder_identity = Some("intruder".into());
        spec.renew_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now()));
        spec.lease_duration_seconds = Some(60);
        leases.replace("capstan", &PostParams::default(), &lease).await.expect("take the Lease from c");
        let code = c.wait_exit(Duration::from_secs(10));
        assert_eq!(code, Some(1), "a leader that lost its Lease must exit 1:\n{}", c.log());
        let lines: Vec<serde_json::Value> = c
            .log()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line is not JSON ({e}): {l}")))
            .collect();
        let lost = lines
            .iter()
            .find(|v| v["message"] == "leadership lost; exiting so that no two replicas reconcile")
            .unwrap_or_else(|| panic!("no leadership-lost line: {lines:#?}"));
        assert_eq!(lost["level"], "ERROR");
        assert!(lost["reason"].as_str().is_some_and(|r| r.contains("intruder")), "{lost}");
        drop((a, c, ns));
    })
}

#[test]
fn events_are_recorded_on_objects_and_repeats_fold() {
    crate::support::run(GROUP, 0, async {
        // Not concurrently with the manifests test, which may delete the CRDs it created.
        let _serial = SERIAL.lock().await;
        let admin = crate::support::cluster().await;
        apply_crds(&admin).await;
        let ns = TestNamespace::new(&admin, "events").await;
        let sub: capstan::api::Subscription = create(
            &admin,
            &ns.name,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "nginx-operator", "namespace": ns.name},
                "spec": {"name": "nginx-operator", "channel": "alpha", "source": "examples", "sourceNamespace": "olm"}
            }),
        )
        .await;
        let regarding = sub.object_ref(&());
        use capstan::controller::events::{EventType, publish_for, try_publish};
        try_publish(
            &admin,
            &regarding,
            EventType::Warning,
            "ResolutionFailed",
            "no channel alpha in package nginx-operator",
        )
        .await
        .expect("publish");
        try_publish(
            &admin,
            &regarding,
            EventType::Warning,
            "ResolutionFailed",
            "no channel alpha in package nginx-operator",
        )
        .await
        .expect("publish again");
        publish_for(&admin, &sub, EventType::Normal, "InstallPlanCreated", &"x".repeat(3000)).await;
        let events: Api<Event> = Api::namespaced(admin.clone(), &ns.name);
        let list = events.list(&ListParams::default()).await.expect("list events");
        let ours: Vec<&Event> = list
            .items
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("nginx-operator"))
            .collect();
        assert_eq!(ours.len(), 2, "{ours:#?}");
        let failed =
            ours.iter().find(|e| e.reason.as_deref() == Some("ResolutionFailed")).expect("ResolutionFailed event");
        assert_eq!(failed.type_.as_deref(), Some("Warning"));
        assert_eq!(failed.note.as_deref(), Some("no channel alpha in package nginx-operator"));
        assert_eq!(failed.reporting_controller.as_deref(), Some("capstan"));
        assert_eq!(
            failed.series.as_ref().map(|s| s.count),
            Some(2),
            "the repeat is folded into one Event: {failed:#?}"
        );
        let r = failed.regarding.as_ref().expect("regarding");
        assert_eq!(
            (r.kind.as_deref(), r.api_version.as_deref(), r.uid.as_ref()),
            (Some("Subscription"), Some("operators.coreos.com/v1alpha1"), sub.metadata.uid.as_ref())
        );
        let long =
            ours.iter().find(|e| e.reason.as_deref() == Some("InstallPlanCreated")).expect("InstallPlanCreated event");
        assert!(long.note.as_ref().is_some_and(|n| n.len() <= 1024 && n.ends_with('…')), "{:?}", long.note);
        // `kubectl events` (the pinned kubectl) shows it as people look for it.
        let shown = kubectl(&["events", "-n", &ns.name, "--for", "subscription.operators.coreos.com/nginx-operator"]);
        assert!(shown.contains("ResolutionFailed") && shown.contains("no channel alpha"), "{shown}");
    })
}

/// Deletes a ClusterRole and ClusterRoleBinding of the test's own when dropped.
struct DeleteClusterRbac(String);

impl Drop for DeleteClusterRbac {
    fn drop(&mut self) {
        let (role, binding) = (format!("clusterrole/{}", self.0), format!("clusterrolebinding/{}", self.0));
        let _ = Command::new(crate::support::kubectl())
            .arg("--kubeconfig")
            .arg(crate::support::kubeconfig_path())
            .args(["delete", "--wait=false", "--ignore-not-found", role.as_str(), binding.as_str()])
            .output();
    }
}

/// The ClusterRole of `manifests/rbac.yaml` with its `escalate` and `bind` verbs removed (each is
/// there once), named `name`.
fn narrow_cluster_role(name: &str) -> k8s_openapi::api::rbac::v1::ClusterRole {
    use serde::Deserialize;
    let text = std::fs::read_to_string(crate::support::repo_root().join("manifests/rbac.yaml"))
        .expect("read manifests/rbac.yaml");
    let mut role = serde_norway::Deserializer::from_str(&text)
        .map(|d| serde_json::Value::deserialize(d).expect("YAML document"))
        .find(|v| v["kind"] == "ClusterRole")
        .expect("a ClusterRole in manifests/rbac.yaml");
    let mut removed = 0;
    for rule in role["rules"].as_array_mut().expect("rules") {
        if let Some(verbs) = rule["verbs"].as_array_mut() {
            let before = verbs.len();
            verbs.retain(|v| v != "escalate" && v != "bind");
            removed += before - verbs.len();
        }
    }
    assert_eq!(removed, 2, "expected escalate and bind once each in {role}");
    role["metadata"] = json!({"name": name});
    serde_json::from_value(role).expect("ClusterRole")
}

/// Creates the narrow ClusterRole `name`, bound to ServiceAccount `capstan` of `home`, and writes a
/// kubeconfig with that ServiceAccount's token to `kubeconfig`.
async fn narrow_service_account(admin: &kube::Client, home: &str, name: &str, kubeconfig: &Path) {
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &narrow_cluster_role(name))
        .await
        .expect("create narrow ClusterRole");
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "capstan", "namespace": home}]
    }))
    .expect("binding");
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("create binding");
    let sa: ServiceAccount =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "capstan"}}))
            .expect("sa");
    Api::<ServiceAccount>::namespaced(admin.clone(), home)
        .create(&PostParams::default(), &sa)
        .await
        .expect("create ServiceAccount");
    let token = sa_token(admin, home, "capstan").await;
    token_kubeconfig(&token, kubeconfig).await;
}

/// The message of the nginx-operator InstallPlan in `ns` once it is Failed.
async fn failed_plan_message(admin: &kube::Client, ns: &str) -> String {
    let plan = plan_in_phase(admin, ns, "nginx-operator", "Failed").await;
    let message = serde_json::to_value(plan.status.as_ref().expect("status")).expect("json")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    eprintln!("InstallPlan {ns}/{} failed as expected: {message}", plan.metadata.name.as_deref().unwrap_or(""));
    message
}

/// The ClusterRole of `manifests/rbac.yaml` without `escalate` and `bind` cannot install an
/// operator whose CSV asks for permissions capstan does not hold: the InstallPlan fails and its
/// message names what was refused.
#[test]
fn a_cluster_role_without_escalate_and_bind_is_not_enough() {
    crate::support::run(GROUP, 2, async {
        let _serial = SERIAL.lock().await;
        let admin = crate::support::cluster().await;
        apply_crds(&admin).await;
        let work = tempfile::tempdir().expect("tempdir");
        let home = TestNamespace::new(&admin, "narrow").await;

        // The manifests' ClusterRole, minus escalate and bind.
        let name = format!("capstan-narrow-{}", home.name);
        let _rbac = DeleteClusterRbac(name.clone());
        let kubeconfig = work.path().join("narrow-kubeconfig");
        narrow_service_account(&admin, &home.name, &name, &kubeconfig).await;

        let registry = crate::support::registry();
        let catalog_ref = publish(&registry, &format!("deploy-narrow-{}", std::process::id()), work.path());
        let catalog_ns = TestNamespace::new(&admin, "narrow-catalog").await;
        // Its metrics port is taken: the controller says so and reconciles all the same.
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let taken_addr = taken.local_addr().expect("addr").to_string();
        let ctl = Controller::start_on(
            "capstan-narrow",
            &kubeconfig,
            work.path(),
            &taken_addr,
            &["--global-catalog-namespace", &catalog_ns.name],
        );
        catalog_source(&admin, &catalog_ns.name, "examples", &catalog_ref).await;
        let ns = namespace_with_global_group(&admin, "narrow-ops").await;
        subscribe(&admin, &ns.name, "nginx-operator", &catalog_ns.name, "Automatic").await;
        let message = failed_plan_message(&admin, &ns.name).await;
        let who = format!("system:serviceaccount:{}:capstan", home.name);
        assert!(message.contains(&who), "the message names the identity: {message}\n{}", ctl.log());
        assert!(
            message.contains("attempting to grant RBAC permissions not currently held") || message.contains("escalate"),
            "the message names the refused grant: {message}"
        );
        assert!(ctl.log().contains("running without /metrics") && ctl.log().contains(&taken_addr), "{}", ctl.log());
        cleanup_cluster_rbac(&admin, &[ns.name.as_str()]).await;
        drop((ctl, taken));
    })
}

/// Every file of manifests/ (the generated CRDs included) is a resource of the kustomization, so
/// that `kubectl apply -k manifests/` installs all of it after `make crds` adds a CRD.
#[test]
fn kustomization_lists_every_manifest() {
    let _group = crate::support::group(GROUP);
    use serde::Deserialize;
    let dir = crate::support::repo_root().join("manifests");
    let k: serde_json::Value = serde_json::Value::deserialize(serde_norway::Deserializer::from_str(
        &std::fs::read_to_string(dir.join("kustomization.yaml")).expect("read kustomization.yaml"),
    ))
    .expect("kustomization.yaml is YAML");
    let listed: Vec<&str> = k["resources"].as_array().expect("resources").iter().filter_map(|r| r.as_str()).collect();
    let mut files = Vec::new();
    for sub in ["", "crds"] {
        for e in std::fs::read_dir(dir.join(sub)).expect("read manifests").flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            if p.is_file() && name.ends_with(".yaml") && name != "kustomization.yaml" {
                files.push(if sub.is_empty() { name } else { format!("{sub}/{name}") });
            }
        }
    }
    files.sort();
    let missing: Vec<&String> = files.iter().filter(|f| !listed.contains(&f.as_str())).collect();
    assert!(missing.is_empty(), "manifests/kustomization.yaml does not list {missing:?}");
    let stale: Vec<&&str> = listed.iter().filter(|l| !files.iter().any(|f| f == *l)).collect();
    assert!(stale.is_empty(), "manifests/kustomization.yaml lists missing files {stale:?}");
    assert_eq!(
        files.iter().filter(|f| f.starts_with("crds/")).count(),
        capstan::api::crds().len(),
        "one file per CRD of capstan crds"
    );
}

/// Bad `capstan controller` flags are refused before anything is started: exit 2 and a message
/// naming the flags.
#[test]
fn bad_controller_flags_exit_2_naming_the_flag() {
    let _group = crate::support::group(GROUP);
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_capstan"))
            .arg("controller")
            .args(["--kubeconfig", "/nonexistent/kubeconfig"])
            .args(args)
            .output()
            .expect("run capstan");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["--metrics-addr", "everywhere"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--metrics-addr") && err.contains("everywhere"), "{err}");
    let (code, err) = run(&["--leader-elect", "--lease-duration", "2s", "--renew-deadline", "3s"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--lease-duration") && err.contains("--renew-deadline"), "{err}");
    let (code, err) = run(&["--leader-elect", "--retry-period", "soon"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--retry-period") && err.contains("not a duration"), "{err}");
    let (code, err) = run(&["--log-format", "xml"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--log-format"), "{err}");
    // Good flags get as far as the (missing) kubeconfig, which is named.
    let (code, err) = run(&["--leader-elect", "--metrics-addr", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}

/// Waits until `who` holds the Lease `capstan`.
async fn leads(leases: &Api<Lease>, who: &str) {
    eventually(&format!("{who} leads"), Duration::from_secs(30), || async {
        (leases.get_opt("capstan").await.ok()??.spec?.holder_identity.as_deref() == Some(who)).then_some(())
    })
    .await;
}

/// The names of the InstallPlans of `plans`' namespace.
async fn plan_names(plans: &Api<capstan::api::InstallPlan>) -> Vec<String> {
    let list = plans.list(&ListParams::default()).await.expect("list InstallPlans");
    list.items.iter().filter_map(|p| p.metadata.name.clone()).collect()
}

/// InstallPlan `name` once Complete; fails at once if it turns Failed (with both controllers' logs).
async fn complete_after_handover(
    plans: &Api<capstan::api::InstallPlan>,
    name: &str,
    a: &Controller,
    b: &Controller,
) -> capstan::api::InstallPlan {
    eventually("the InstallPlan Complete after the handover", WAIT, || async {
        use capstan::api::installplan::InstallPlanPhase;
        let p = plans.get(name).await.ok()?;
        let st = p.status.as_ref()?;
        assert_ne!(
            st.phase,
            InstallPlanPhase::Failed,
            "the plan failed after the handover: {:?}\na:\n{}\nb:\n{}",
            st.message,
            a.log(),
            b.log()
        );
        (st.phase == InstallPlanPhase::Complete).then_some(p)
    })
    .await
}

/// The leader is SIGKILLed while it installs nginx-operator; the standby takes over and the
/// install converges: CSV Succeeded, exactly one InstallPlan, Complete, one CSV (the
/// standby applies the plan's steps again, which are idempotent).
#[test]
fn handover_during_an_install_converges_with_one_install_plan() {
    crate::support::run(GROUP, 2, async {
        let _serial = SERIAL.lock().await;
        let admin = crate::support::cluster().await;
        apply_crds(&admin).await;
        let work = tempfile::tempdir().expect("tempdir");
        let lease_ns = TestNamespace::new(&admin, "lease-install").await;
        let catalog_ns = TestNamespace::new(&admin, "handover-catalog").await;
        let registry = crate::support::registry();
        let catalog_ref = publish(&registry, &format!("deploy-handover-{}", std::process::id()), work.path());
        let kubeconfig = crate::support::kubeconfig_path();
        let flags = [
            "--leader-elect",
            "--lease-namespace",
            &lease_ns.name,
            "--lease-duration",
            "4s",
            "--renew-deadline",
            "3s",
            "--retry-period",
            "500ms",
            "--global-catalog-namespace",
            &catalog_ns.name,
        ];
        let a = Controller::start("capstan-a", &kubeconfig, work.path(), &flags);
        let leases: Api<Lease> = Api::namespaced(admin.clone(), &lease_ns.name);
        leads(&leases, "capstan-a").await;
        let b = Controller::start("capstan-b", &kubeconfig, work.path(), &flags);
        catalog_source(&admin, &catalog_ns.name, "examples", &catalog_ref).await;
        let ns = namespace_with_global_group(&admin, "handover-ops").await;
        subscribe(&admin, &ns.name, "nginx-operator", &catalog_ns.name, "Automatic").await;
        // Kill the leader as soon as the InstallPlan exists (while it executes, or just after).
        let subs: Api<capstan::api::Subscription> = Api::namespaced(admin.clone(), &ns.name);
        eventually("an InstallPlan for the Subscription", WAIT, || async {
            subs.get("nginx-operator").await.ok()?.status?.install_plan_ref
        })
        .await;
        let mut a = a;
        a.child.kill().expect("SIGKILL a");
        leads(&leases, "capstan-b").await;
        csv_succeeded_and_deployment_available(&admin, &ns.name).await;
        let plans: Api<capstan::api::InstallPlan> = Api::namespaced(admin.clone(), &ns.name);
        let names = plan_names(&plans).await;
        assert_eq!(names.len(), 1, "one InstallPlan per bundle, got {names:?}\na:\n{}\nb:\n{}", a.log(), b.log());
        // The plan a was applying when it died is applied again by b (`decide_start`: an `Installing`
        // plan is taken again) and completes; the CSV a created can reach Succeeded before that.
        let plan = &complete_after_handover(&plans, &names[0], &a, &b).await;
        // Still one after the wait (b made no second plan while it finished a's).
        let after = plan_names(&plans).await;
        assert_eq!(after, names, "one InstallPlan per bundle after the handover\na:\n{}\nb:\n{}", a.log(), b.log());
        let sub_plan =
            subs.get("nginx-operator").await.expect("sub").status.and_then(|s| s.install_plan_ref).and_then(|r| r.name);
        assert_eq!(sub_plan.as_deref(), plan.metadata.name.as_deref());
        // One CSV, one operator Deployment.
        let csvs: Api<capstan::api::ClusterServiceVersion> = Api::namespaced(admin.clone(), &ns.name);
        assert_eq!(csvs.list(&ListParams::default()).await.expect("csvs").items.len(), 1);
        cleanup_cluster_rbac(&admin, &[ns.name.as_str()]).await;
        drop((a, b));
    })
}
