//! Against the real control plane and registry: bundles that try to take over objects
//! capstan does not own are refused with the conflict named and the cluster's object unchanged;
//! a registry that is down during a pull, an OperatorGroup that is missing, a deleted
//! Deployment and a deleted CSV all recover without a hand; a scoped install whose installer may
//! not make a binding the bundle ships is refused before its first step.
//!
//! One test function runs the cases one after another: the controller watches every namespace.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::controller::*;
use crate::support::{TestNamespace, eventually};
use capstan::api::{ClusterServiceVersion, InstallPlan, OperatorGroup, Subscription};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

/// Copies the nginx-operator 0.2.0 bundle to `<work>/bundles/<case>/nginx-operator/0.2.0` and adds
/// `extra` as `manifests/<file>` for each `(file, yaml)`; returns the bundle directory.
fn bundle_with(work: &Path, case: &str, extra: &[(&str, String)]) -> PathBuf {
    let src = crate::support::repo_root().join("bundles/nginx-operator/0.2.0");
    let dir = work.join("bundles").join(case).join("nginx-operator/0.2.0");
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
        for e in std::fs::read_dir(src.join(sub)).expect("read bundle").flatten() {
            std::fs::copy(e.path(), dir.join(sub).join(e.file_name())).expect("copy");
        }
    }
    for (file, yaml) in extra {
        std::fs::write(dir.join("manifests").join(file), yaml).expect("write manifest");
    }
    dir
}

/// A ConfigMap manifest that makes a bundle's digest unique to this run (so that no blob cache
/// already holds it and the pull must reach the registry).
fn unique(tag: &str) -> (&'static str, String) {
    (
        "unique.yaml",
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile-unique\ndata:\n  run: \"{tag}-{}\"\n",
            std::process::id()
        ),
    )
}

/// A CatalogSource `name` in `catalog_ns` serving one bundle directory.
async fn catalog_of(
    client: &kube::Client,
    registry: &str,
    repo: &str,
    catalog_ns: &str,
    name: &str,
    work: &Path,
    bundle: &Path,
) {
    // Unvalidated: `capstan bundle push` refuses most of these bundles; the controller must too.
    let reference = publish_unvalidated(registry, &format!("{repo}/{name}"), name, work, bundle).await;
    catalog_source(client, catalog_ns, name, &reference).await;
}

async fn subscribe_to(client: &kube::Client, ns: &str, catalog_ns: &str, source: &str) {
    create::<Subscription>(client, ns, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "nginx-operator", "namespace": ns},
        "spec": {"name": "nginx-operator", "channel": "alpha", "source": source, "sourceNamespace": catalog_ns, "installPlanApproval": "Automatic"}
    }))
    .await;
}

/// The Subscription's current InstallPlan status as JSON once `pred` holds for it.
async fn plan_status_where(client: &kube::Client, ns: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    eventually(&format!("InstallPlan of {ns}/nginx-operator: {what}"), WAIT, || async {
        let name = subs.get("nginx-operator").await.ok()?.status?.install_plan_ref?.name?;
        let st = serde_json::to_value(plans.get(&name).await.ok()?.status?).ok()?;
        pred(&st).then_some(st)
    })
    .await
}

/// Pushes bundle directory `dir` as image `reference` with one more layer that holds the
/// whiteout entry `.wh..` (a regular empty file, as image builders write whiteouts).
async fn push_with_whiteout(dir: &Path, reference: &str) {
    use capstan::oci::layer::{MEDIA_TYPE_LAYER_GZIP, build_layer, entries_from_dir, image_config};
    let mut entries = entries_from_dir(&dir.join("manifests"), "manifests").expect("manifests");
    entries.extend(entries_from_dir(&dir.join("metadata"), "metadata").expect("metadata"));
    let base = build_layer(entries).expect("base layer");
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(0);
    h.set_mode(0o644);
    h.as_old_mut().name[..5].copy_from_slice(b".wh..");
    h.set_cksum();
    tar.append(&h, std::io::empty()).expect("tar entry");
    let hostile =
        capstan::oci::Blob::new(MEDIA_TYPE_LAYER_GZIP, tar.into_inner().expect("tar").finish().expect("gzip"));
    let labels = capstan::bundle::image::bundle_labels(dir).expect("labels");
    let diff_ids = vec![base.diff_id.clone(), hostile.descriptor.digest.clone()];
    let image = capstan::oci::ImageToPush {
        config: image_config(&labels, &diff_ids),
        layers: vec![base.blob, hostile],
        annotations: Default::default(),
    };
    let registry = capstan::oci::Registry::new(capstan::oci::ClientConfig { quiet: true, ..Default::default() });
    registry
        .push(&capstan::oci::parse_reference(reference).expect("reference"), &image)
        .await
        .expect("push hostile bundle");
}

/// Rewrites every image reference starting with `repository` in the catalog files under `dir`
/// (tag or digest) to `image`.
fn point_catalog_at(dir: &Path, repository: &str, image: &str) {
    for e in walkdir::WalkDir::new(dir).into_iter().flatten().filter(|e| e.file_type().is_file()) {
        let text = std::fs::read_to_string(e.path()).expect("catalog file");
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find(repository) {
            out.push_str(&rest[..i]);
            out.push_str(image);
            let after = &rest[i + repository.len()..];
            let end = after.find(|c: char| c == '"' || c == '\'' || c.is_whitespace()).unwrap_or(after.len());
            rest = &after[end..];
        }
        out.push_str(rest);
        std::fs::write(e.path(), out).expect("write catalog file");
    }
}

fn cluster_script(args: &[&str]) {
    let out = Command::new("bash")
        .arg(crate::support::repo_root().join("tests/cluster/up.sh"))
        .args(args)
        .env("CAPSTAN_CLUSTER_DIR", crate::support::state_dir())
        .output()
        .expect("run up.sh");
    assert!(out.status.success(), "up.sh {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Stops the registry the environment started (its PID file), and waits until it is gone.
fn stop_registry() {
    let pid = std::fs::read_to_string(crate::support::state_dir().join("pids/registry.pid")).expect("registry pid");
    let pid = pid.trim().to_string();
    let _ = Command::new("kill").arg(&pid).status();
    for _ in 0..100 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("registry (pid {pid}) did not stop");
}

#[test]
fn hostile_bundles_are_refused_and_failed_installs_recover() {
    crate::support::run("controller_hostile_e2e", 4, async {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "capstan=info".into()),
            )
            .try_init();
        let client = crate::support::cluster().await;
        let registry = crate::support::registry();
        let work = tempfile::tempdir().expect("tempdir");
        let repo = format!("hostile-{}", std::process::id());
        apply_crds(&client).await;
        let catalog_ns = TestNamespace::new(&client, "hostile-catalog").await;
        let options = capstan::controller::Options {
            global_catalog_namespace: catalog_ns.name.clone(),
            catalog_cache: None,
            ..Default::default()
        };
        let controller = tokio::spawn(capstan::controller::run_with_config(
            crate::support::admin_config().await,
            options,
            std::future::pending(),
        ));
        let roles: Api<ClusterRole> = Api::all(client.clone());

        // 1. A bundle that ships the cluster's own ClusterRole system:basic-user with `*` rules: the
        //    plan is refused before any step, naming the object; the cluster's role is unchanged.
        let before = roles.get("system:basic-user").await.expect("system:basic-user exists");
        let takeover = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: system:basic-user\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n".to_string();
        let dir = bundle_with(work.path(), "basic-user", &[("takeover.yaml", takeover)]);
        catalog_of(&client, &registry, &repo, &catalog_ns.name, "basic-user", work.path(), &dir).await;
        let ns1 = namespace_with_group(&client, "hostile-sys").await;
        subscribe_to(&client, &ns1.name, &catalog_ns.name, "basic-user").await;
        let st = plan_status_where(&client, &ns1.name, "Failed", |st| st["phase"] == "Failed").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(
                "ClusterRole system:basic-user (manifests/takeover.yaml) reserved by Kubernetes for its own RBAC"
            ) && message.contains("rename the object in the bundle"),
            "{st}"
        );
        let after = roles.get("system:basic-user").await.expect("system:basic-user still exists");
        assert_eq!(
            after.metadata.resource_version, before.metadata.resource_version,
            "the cluster's ClusterRole was modified"
        );
        assert_eq!(after.rules, before.rules);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns1.name);
        assert!(
            csvs.get_opt("nginx-operator.v0.2.0").await.expect("get csv").is_none(),
            "a refused plan installed a CSV"
        );

        // 1b. A bundle that aggregates Secrets into every namespace admin (a ClusterRole labelled
        //     aggregate-to-admin with a rule on the core group) and binds every authenticated user to
        //     cluster-admin under a harmless name: refused before any step; neither object exists.
        let aggregated = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: hostile-aggregate\n  labels: {rbac.authorization.k8s.io/aggregate-to-admin: 'true'}\nrules:\n- apiGroups: ['']\n  resources: [secrets]\n  verbs: [get, list]\n".to_string();
        let everyone = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: hostile-everyone\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: Group, name: system:authenticated, apiGroup: rbac.authorization.k8s.io}]\n".to_string();
        let dir = bundle_with(
            work.path(),
            "escalate",
            &[("aggregate.yaml", aggregated), ("everyone.yaml", everyone), unique("escalate")],
        );
        catalog_of(&client, &registry, &repo, &catalog_ns.name, "escalate", work.path(), &dir).await;
        let ns1b = namespace_with_group(&client, "hostile-agg").await;
        subscribe_to(&client, &ns1b.name, &catalog_ns.name, "escalate").await;
        let st = plan_status_where(&client, &ns1b.name, "Failed", |st| st["phase"] == "Failed").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("ClusterRole hostile-aggregate (manifests/aggregate.yaml): aggregated into admin")
                && message.contains("beyond the bundle's own API groups"),
            "{st}"
        );
        assert!(
            roles.get_opt("hostile-aggregate").await.expect("get").is_none(),
            "the aggregated ClusterRole was created"
        );
        let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(client.clone());
        assert!(
            bindings.get_opt("hostile-everyone").await.expect("get").is_none(),
            "the binding of system:authenticated was created"
        );

        // 2. A bundle that ships a ClusterRole which exists and is nobody's (created by hand): the
        //    whole plan is refused before its first step with the conflict named; the role is as it was.
        let unowned = format!("hostile-unowned-{}", std::process::id());
        let mine: ClusterRole = serde_json::from_value(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": unowned}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})).expect("role");
        let created = roles.create(&PostParams::default(), &mine).await.expect("create unowned ClusterRole");
        let conflict = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {unowned}\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n"
        );
        let dir = bundle_with(work.path(), "unowned", &[("takeover.yaml", conflict), unique("unowned")]);
        catalog_of(&client, &registry, &repo, &catalog_ns.name, "unowned", work.path(), &dir).await;
        let ns2 = namespace_with_group(&client, "hostile-own").await;
        subscribe_to(&client, &ns2.name, &catalog_ns.name, "unowned").await;
        let st = plan_status_where(&client, &ns2.name, "Failed", |st| st["phase"] == "Failed").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
        message.contains(&format!("ClusterRole {unowned}: already exists and was not created by capstan or OLM; capstan does not take over objects it did not create for this operator"))
            && message.contains(&format!("operators.coreos.com/nginx-operator.{}", ns2.name)),
        "{st}"
    );
        let statuses: Vec<&str> =
            st["plan"].as_array().map(|p| p.iter().filter_map(|s| s["status"].as_str()).collect()).unwrap_or_default();
        assert!(
            !statuses.is_empty() && statuses.iter().all(|s| *s == "NotCreated"),
            "nothing may be applied: {statuses:?}"
        );
        let after = roles.get(&unowned).await.expect("role still exists");
        assert_eq!(
            after.metadata.resource_version, created.metadata.resource_version,
            "the existing ClusterRole was modified"
        );
        assert!(
            Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns2.name)
                .get_opt("nginx-operator.v0.2.0")
                .await
                .expect("get")
                .is_none()
        );
        let _ = roles.delete(&unowned, &DeleteParams::default()).await;

        // 3. The registry is down while the plan pulls its bundle: the plan keeps its phase and says it
        //    retries; the Subscription says so too; once the registry is back the install completes.
        let dir = bundle_with(work.path(), "outage", &[unique("outage")]);
        catalog_of(&client, &registry, &repo, &catalog_ns.name, "outage", work.path(), &dir).await;
        let ns3 = namespace_with_group(&client, "hostile-reg").await;
        stop_registry();
        subscribe_to(&client, &ns3.name, &catalog_ns.name, "outage").await;
        let st = plan_status_where(&client, &ns3.name, "retrying", |st| {
            st["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["reason"] == "InstallRetrying"))
        })
        .await;
        assert_ne!(st["phase"], "Failed", "{st}");
        let retry = st["conditions"][0]["message"].as_str().unwrap_or_default().to_string();
        assert!(
            retry.contains("pulling the bundle image failed") && retry.contains("capstan tries again in"),
            "{retry}"
        );
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns3.name);
        eventually("Subscription shows the retry", WAIT, || async {
            let st = serde_json::to_value(subs.get("nginx-operator").await.ok()?.status?).ok()?;
            st["conditions"]
                .as_array()?
                .iter()
                .any(|c| {
                    c["type"] == "InstallPlanPending"
                        && c["message"].as_str().is_some_and(|m| m.contains("capstan tries again"))
                })
                .then_some(())
        })
        .await;
        cluster_script(&["registry"]);
        csv_version_succeeded(&client, &ns3.name, "nginx-operator.v0.2.0").await;

        // 4. No OperatorGroup: the plan is Failed naming it; creating the OperatorGroup as the message
        //    says lets the same plan go on, with no other step by hand.
        let ns4 = TestNamespace::new(&client, "hostile-og").await;
        subscribe_to(&client, &ns4.name, &catalog_ns.name, "outage").await;
        let st =
            plan_status_where(&client, &ns4.name, "Failed for NoOperatorGroup", |st| st["phase"] == "Failed").await;
        assert!(
            st["message"]
                .as_str()
                .is_some_and(|m| m.contains("NoOperatorGroup") && m.contains("create one OperatorGroup")),
            "{st}"
        );
        let og: OperatorGroup = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og", "namespace": ns4.name}, "spec": {"targetNamespaces": [ns4.name]}})).expect("og");
        Api::<OperatorGroup>::namespaced(client.clone(), &ns4.name)
            .create(&PostParams::default(), &og)
            .await
            .expect("create OperatorGroup");
        csv_version_succeeded(&client, &ns4.name, "nginx-operator.v0.2.0").await;

        // 5. The Deployment is deleted: it comes back, and the CSV is Succeeded again.
        let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns4.name);
        let list = deps.list(&Default::default()).await.expect("list deployments");
        let dep = list.items.first().expect("a Deployment of the CSV").clone();
        let dep_name = dep.metadata.name.clone().unwrap_or_default();
        deps.delete(&dep_name, &DeleteParams::default()).await.expect("delete Deployment");
        eventually("Deployment created again", WAIT, || async {
            let d = deps.get_opt(&dep_name).await.ok()??;
            (d.metadata.uid != dep.metadata.uid).then_some(())
        })
        .await;
        csv_version_succeeded(&client, &ns4.name, "nginx-operator.v0.2.0").await;

        // 6. The CSV is deleted while its Subscription stays: it is installed again.
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns4.name);
        let old = csvs.get("nginx-operator.v0.2.0").await.expect("csv");
        csvs.delete("nginx-operator.v0.2.0", &DeleteParams::default()).await.expect("delete CSV");
        eventually("CSV installed again", WAIT, || async {
            let c = csvs.get_opt("nginx-operator.v0.2.0").await.ok()??;
            (c.metadata.uid != old.metadata.uid && c.metadata.deletion_timestamp.is_none()).then_some(())
        })
        .await;
        csv_version_succeeded(&client, &ns4.name, "nginx-operator.v0.2.0").await;

        // 7. A scoped install (OperatorGroup spec.serviceAccountName) of a bundle that binds the
        //    cluster's ClusterRole `view`, which the installer neither holds nor may bind: refused
        //    before the first step, naming the missing `bind`, with nothing applied.
        let viewer = format!("hostile-viewer-{}", std::process::id());
        let binding = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {viewer}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\nsubjects: [{{kind: ServiceAccount, name: nginx-operator-controller-manager, namespace: default}}]\n"
        );
        let dir = bundle_with(work.path(), "viewer", &[("viewer.yaml", binding), unique("viewer")]);
        catalog_of(&client, &registry, &repo, &catalog_ns.name, "viewer", work.path(), &dir).await;
        let ns5 = TestNamespace::new(&client, "hostile-bind").await;
        let sa: k8s_openapi::api::core::v1::ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "installer", "namespace": ns5.name}})).expect("sa");
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &ns5.name)
            .create(&PostParams::default(), &sa)
            .await
            .expect("installer SA");
        let all = json!(["get", "list", "watch", "create", "update", "patch", "delete"]);
        let grant_name = format!("{}-installer", ns5.name);
        let cr: ClusterRole = serde_json::from_value(json!({"metadata": {"name": grant_name, "labels": {"olm.owner.namespace": ns5.name}}, "rules": [
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": all},
        {"apiGroups": [""], "resources": ["serviceaccounts", "services", "configmaps", "secrets", "events", "pods"], "verbs": all},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": all},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], "verbs": all},
        {"apiGroups": ["operators.coreos.com"], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": ["example.com"], "resources": ["nginxes", "nginxes/status", "nginxes/finalizers"], "verbs": all},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": all},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": all}
    ]})).expect("cr");
        roles.create(&PostParams::default(), &cr).await.expect("installer ClusterRole");
        let crb: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": grant_name, "labels": {"olm.owner.namespace": ns5.name}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": grant_name},
            "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns5.name}]
        }))
        .expect("crb");
        Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &crb)
            .await
            .expect("installer binding");
        let og: OperatorGroup = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og", "namespace": ns5.name}, "spec": {"targetNamespaces": [ns5.name], "serviceAccountName": "installer"}})).expect("og");
        Api::<OperatorGroup>::namespaced(client.clone(), &ns5.name)
            .create(&PostParams::default(), &og)
            .await
            .expect("create OperatorGroup");
        subscribe_to(&client, &ns5.name, &catalog_ns.name, "viewer").await;
        let st = plan_status_where(&client, &ns5.name, "refused for bind", |st| st["phase"] == "Failed").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(
        message.contains("lacks 1 permission needed by this plan")
            && message.contains(&format!("to create ClusterRoleBinding {viewer}, which grants ClusterRole view, it must hold every permission of ClusterRole view, or have bind on clusterroles view")),
        "{st}"
    );
        assert!(
            Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
                .get_opt(&viewer)
                .await
                .expect("get")
                .is_none(),
            "nothing applied"
        );
        assert!(
            Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns5.name)
                .get_opt("nginx-operator.v0.2.0")
                .await
                .expect("get")
                .is_none()
        );

        // 8. A bundle image with a whiteout entry `.wh..` (OCI's "delete `..`"), through the
        //    controller: before the fix it deleted everything beside the unpack directory, the whole
        //    $TMPDIR, and the plan still completed. Now the plan fails naming image, layer and entry,
        //    and a canary beside the unpack directories is untouched.
        let dir = bundle_with(work.path(), "whiteout", &[unique("whiteout")]);
        let good = format!("{registry}/{repo}/whiteout/nginx-operator-bundle:v0.2.0");
        let catalog_dir = work.path().join("whiteout-catalog");
        capstan(&["bundle", "push", "-q", dir.to_str().unwrap_or_default(), &good]);
        capstan(&["catalog", "add", catalog_dir.to_str().unwrap_or_default(), &good]);
        let hostile = format!("{registry}/{repo}/whiteout/hostile-bundle:v1");
        push_with_whiteout(&dir, &hostile).await;
        point_catalog_at(&catalog_dir, &format!("{registry}/{repo}/whiteout/nginx-operator-bundle"), &hostile);
        let catalog_ref = format!("{registry}/{repo}/whiteout-catalog:latest");
        capstan(&["catalog", "push", "-q", catalog_dir.to_str().unwrap_or_default(), &catalog_ref]);
        catalog_source(&client, &catalog_ns.name, "whiteout", &catalog_ref).await;
        let canary = std::env::temp_dir().join(format!("capstan-canary-{}", std::process::id()));
        std::fs::write(&canary, b"still here").expect("write canary");
        let ns6 = namespace_with_group(&client, "hostile-wh").await;
        subscribe_to(&client, &ns6.name, &catalog_ns.name, "whiteout").await;
        let st = plan_status_where(&client, &ns6.name, "Failed for the whiteout", |st| st["phase"] == "Failed").await;
        let message = st["message"].as_str().unwrap_or_default();
        assert!(message.contains(&hostile) && message.contains("layer sha256:") && message.contains(".wh.."), "{st}");
        assert_eq!(std::fs::read(&canary).expect("the canary beside the unpack directories is gone"), b"still here");
        let _ = std::fs::remove_file(&canary);

        // 9. A bundle whose steps are larger than the API server stores in one InstallPlan: the plan
        //    lists the large object as a reference to the bundle, so its status is
        //    written; the object itself (a 1.4 MB ConfigMap, over the 1 MiB a ConfigMap may hold)
        //    is refused by the API server, and the plan fails at once with its message, instead of
        //    failing to write its status on every try.
        let big = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: \"{}\"\n",
            "x".repeat(1_400_000)
        );
        let dir = bundle_with(work.path(), "big", &[("big.yaml", big), unique("big")]);
        catalog_of(&client, &registry, &repo, &catalog_ns.name, "big", work.path(), &dir).await;
        let ns7 = namespace_with_group(&client, "hostile-big").await;
        subscribe_to(&client, &ns7.name, &catalog_ns.name, "big").await;
        let st = plan_status_where(&client, &ns7.name, "Failed for its size", |st| st["phase"] == "Failed").await;
        assert!(
            st["message"]
                .as_str()
                .is_some_and(|m| m.contains("ConfigMap") && m.contains("may not be more than 1048576 bytes")),
            "{}",
            &st.to_string()[..2000.min(st.to_string().len())]
        );
        let big_step = st["plan"]
            .as_array()
            .and_then(|p| p.iter().find(|s| s["resource"]["name"] == "big"))
            .cloned()
            .unwrap_or_default();
        assert!(
            big_step["resource"]["manifest"].as_str().is_some_and(|m| m.contains("\"kind\":\"BundleObject\"")),
            "{big_step}"
        );
        assert!(st.to_string().len() < 200_000, "the plan's status stays small");
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &ns7.name);
        eventually("the Subscription says why", WAIT, || async {
            let st = serde_json::to_value(subs.get("nginx-operator").await.ok()?.status?).ok()?;
            st["conditions"]
                .as_array()?
                .iter()
                .any(|c| {
                    c["type"] == "InstallPlanFailed"
                        && c["message"].as_str().is_some_and(|m| m.contains("may not be more than 1048576 bytes"))
                })
                .then_some(())
        })
        .await;

        controller.abort();
        cleanup_cluster_rbac(&client, &[&ns1.name, &ns2.name, &ns3.name, &ns4.name, &ns5.name, &ns6.name, &ns7.name])
            .await;
    })
}
