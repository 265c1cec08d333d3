//! `install::plan` + `install::apply` against the real local control plane: bundles
//! from `bundles/` become CRDs, RBAC, a CSV and Deployments that work.

use std::time::Duration;

use crate::support::controller::{allowed, sa_token};
use crate::support::{TestNamespace, eventually};
use capstan::bundle::Bundle;
use capstan::install::plan::{ANNOTATION_INSTALLED_ALONGSIDE, installed_alongside};
use capstan::install::preflight::Subject;
use capstan::install::{self, ApplyOptions, InstallTarget, Step, StepError, StepStatus, SubscriptionConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("test object")
}

fn load(rel: &str) -> Bundle {
    Bundle::load(&crate::support::repo_root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn target(bundle: &Bundle, ns: &str) -> InstallTarget {
    let mut t = InstallTarget {
        namespace: ns.into(),
        target_namespaces: vec![ns.into()],
        package: bundle.package().into(),
        csv_name: bundle.name().into(),
        operator_group: Some("og".into()),
        ..Default::default()
    };
    t.owner = Some(t.csv_owner_reference());
    t
}

/// The ClusterServiceVersion CRD must exist before a CSV step can be applied. Uses the project's
/// generated CRD (`manifests/crds/`) when there is one, else a schemaless stand-in; created only
/// when absent so that a real CRD installed by other tests is never replaced.
async fn ensure_csv_crd(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = "clusterserviceversions.operators.coreos.com";
    if crds.get_opt(name).await.expect("get CSV CRD").is_none() {
        let dir = crate::support::repo_root().join("manifests/crds");
        let from_repo = std::fs::read_dir(&dir).ok().into_iter().flatten().flatten().find_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            let v: Value = serde_norway::from_str(&text).ok()?;
            (v.pointer("/metadata/name").and_then(Value::as_str) == Some(name)).then_some(v)
        });
        let crd = from_repo.unwrap_or_else(|| {
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": name},
                "spec": {"group": "operators.coreos.com", "scope": "Namespaced",
                    "names": {"plural": "clusterserviceversions", "singular": "clusterserviceversion",
                              "kind": "ClusterServiceVersion", "listKind": "ClusterServiceVersionList", "shortNames": ["csv", "csvs"]},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true, "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
            })
        });
        match crds.create(&PostParams::default(), &obj(crd)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create CSV CRD: {e}"),
        }
    }
    eventually("CSV CRD Established", Duration::from_secs(30), || async {
        let c = crds.get(name).await.ok()?;
        c.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
    })
    .await;
}

/// Deletes the cluster-scoped objects a test created (generated RBAC of its namespace, plus the
/// named ones).
async fn cleanup_cluster_scoped(client: &kube::Client, ns: &str, named_cluster_roles: &[&str]) {
    let sel = ListParams::default().labels(&format!("olm.owner.namespace={ns}"));
    let crs: Api<ClusterRole> = Api::all(client.clone());
    let crbs: Api<ClusterRoleBinding> = Api::all(client.clone());
    let _ = crbs.delete_collection(&DeleteParams::default(), &sel).await;
    let _ = crs.delete_collection(&DeleteParams::default(), &sel).await;
    for n in named_cluster_roles {
        let _ = crs.delete(n, &DeleteParams::default()).await;
    }
}

/// A client acting as ServiceAccount `installer` of namespace `n` (created here), bound to a Role
/// `role` with `rules` in that namespace.
async fn installer_client(client: &kube::Client, n: &str, role: &str, rules: Value) -> kube::Client {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), n);
    sas.create(&PostParams::default(), &obj(json!({"metadata": {"name": "installer"}}))).await.expect("sa");
    Api::<Role>::namespaced(client.clone(), n)
        .create(&PostParams::default(), &obj(json!({"metadata": {"name": role}, "rules": rules})))
        .await
        .expect("role");
    Api::<RoleBinding>::namespaced(client.clone(), n)
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": n}]})),
        )
        .await
        .expect("binding");
    let token = sa_token(client, n, "installer").await;
    crate::support::client_with_token(&token).await
}

fn assert_all_applied(results: &[install::StepResult]) {
    let failed: Vec<String> = results.iter().filter(|r| !r.applied()).map(|r| r.to_string()).collect();
    assert!(failed.is_empty(), "steps not applied:\n{}", failed.join("\n"));
}

#[test]
fn nginx_operator_installs_works_and_reapplies_idempotently() {
    crate::support::run("install_cluster", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "inst-nginx").await;
        ensure_csv_crd(&client).await;
        let bundle = load("bundles/nginx-operator/0.2.0");
        let t = target(&bundle, &ns.name);
        let steps = install::steps(&bundle, &t).expect("plan");
        let _cleanup = ClusterCleanup(ns.name.clone(), vec![]);
        let results = install::apply(&client, &steps, &ApplyOptions::default()).await;
        assert_all_applied(&results);
        assert_eq!(results.len(), steps.len());
        for (r, s) in results.iter().zip(&steps) {
            if s.namespace.is_some() {
                assert_eq!(r.status, StepStatus::Created, "{r}: new namespace, so every namespaced object is new");
            }
        }
        assert_nginx_crd_established_with_its_schema(&client, &ns.name).await;
        let csv_uid =
            results.iter().find(|r| r.kind == "ClusterServiceVersion").and_then(|r| r.uid.clone()).expect("CSV uid");
        assert_deployment_available_and_owned_by_the_csv(&client, &ns.name, &csv_uid).await;
        assert_nginx_operator_may_do_what_its_csv_asks(&client, &ns.name).await;

        // Apply again: every step Present and unchanged.
        let again = install::apply(&client, &steps, &ApplyOptions::default()).await;
        for r in &again {
            assert_eq!(r.status, StepStatus::Present { changed: false }, "{r}");
        }
    })
}

/// The nginx CRD is Established; an Nginx accepted by the schema (and defaulted), a bad one
/// rejected naming both bad fields.
async fn assert_nginx_crd_established_with_its_schema(client: &kube::Client, ns: &str) {
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get("nginxes.example.com").await.expect("CRD");
    let conds = crd.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(conds.iter().any(|c| c.type_ == "Established" && c.status == "True"), "{conds:?}");
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1alpha1", "Nginx"), "nginxes");
    let nginxes: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let good: DynamicObject = obj(json!({"apiVersion": "example.com/v1alpha1", "kind": "Nginx",
    "metadata": {"name": "web"}, "spec": {"replicaCount": 2, "image": {}, "service": {"type": "ClusterIP", "port": 80}}}));
    let created = eventually("a valid Nginx is accepted", Duration::from_secs(20), || async {
        nginxes.create(&PostParams::default(), &good).await.ok()
    })
    .await;
    assert_eq!(created.data.pointer("/spec/image/tag"), Some(&json!("v1")), "schema defaults applied");
    let bad: DynamicObject = obj(json!({"apiVersion": "example.com/v1alpha1", "kind": "Nginx",
    "metadata": {"name": "bad"}, "spec": {"replicaCount": -1, "service": {"type": "Bogus"}}}));
    match nginxes.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(
                s.message.contains("spec.replicaCount") && s.message.contains("spec.service.type"),
                "{}",
                s.message
            );
        }
        other => panic!("an Nginx with replicaCount -1 must be rejected, got {other:?}"),
    }
}

/// The Deployment becomes Available on the kwok node, owned by the CSV (uid `csv_uid`), with OLM's
/// markers; the Service applied before the CSV existed got its ownerReference in the second pass.
async fn assert_deployment_available_and_owned_by_the_csv(client: &kube::Client, ns: &str, csv_uid: &str) {
    let deps: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let dep = eventually("Deployment Available", Duration::from_secs(90), || async {
        let d = deps.get("nginx-operator-controller-manager").await.ok()?;
        let ok = d.status.as_ref()?.conditions.as_ref()?.iter().any(|c| c.type_ == "Available" && c.status == "True");
        ok.then_some(d)
    })
    .await;
    let owners = dep.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!((owners[0].kind.as_str(), owners[0].uid.as_str()), ("ClusterServiceVersion", csv_uid));
    let labels = dep.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("olm.owner").map(String::as_str), Some("nginx-operator.v0.2.0"));
    assert_eq!(labels.get(&format!("operators.coreos.com/nginx-operator.{ns}")).map(String::as_str), Some(""));
    let pod_ann = dep.spec.and_then(|s| s.template.metadata).and_then(|m| m.annotations).unwrap_or_default();
    assert_eq!(pod_ann.get("olm.targetNamespaces").map(String::as_str), Some(ns));
    let svc = Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), ns)
        .get("nginx-operator-controller-manager-metrics-service")
        .await
        .expect("service");
    assert_eq!(
        svc.metadata.owner_references.unwrap_or_default().first().map(|o| o.uid.clone()),
        Some(csv_uid.to_string())
    );
}

/// The operator's ServiceAccount can do what the CSV asks, and no more.
async fn assert_nginx_operator_may_do_what_its_csv_asks(client: &kube::Client, n: &str) {
    let sa = "nginx-operator-controller-manager";
    assert!(allowed(client, n, sa, "create", "example.com", "nginxes", Some(n)).await, "permissions: nginxes create");
    assert!(allowed(client, n, sa, "watch", "apps", "deployments", Some(n)).await, "permissions: deployments watch");
    assert!(
        allowed(client, n, sa, "create", "authentication.k8s.io", "tokenreviews", None).await,
        "clusterPermissions: tokenreviews"
    );
    assert!(!allowed(client, n, sa, "delete", "", "pods", Some(n)).await, "pods are get/list/watch only");
    assert!(
        !allowed(client, n, sa, "create", "example.com", "nginxes", Some("default")).await,
        "no rights outside the target namespace"
    );
    assert!(!allowed(client, n, sa, "list", "", "nodes", None).await, "no cluster-wide reads beyond the CSV's");
}

#[test]
fn kaiwudb_operator_installs_with_cluster_scoped_rbac() {
    crate::support::run("install_cluster", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "inst-kaiwu").await;
        ensure_csv_crd(&client).await;
        let bundle = load("bundles/kaiwudb-operator/1.0.0");
        let mut t = target(&bundle, &ns.name);
        t.config =
            SubscriptionConfig::from_value(&json!({"env": [{"name": "LOG_LEVEL", "value": "debug"}]})).expect("config");
        let steps = install::steps(&bundle, &t).expect("plan");
        let shipped = ["kaiwudb-operator-kaiwucluster-editor-role", "kaiwudb-operator-kaiwucluster-viewer-role"];
        let _cleanup = ClusterCleanup(ns.name.clone(), shipped.to_vec());
        let results = install::apply(&client, &steps, &ApplyOptions::default()).await;
        assert_all_applied(&results);

        let generated: Vec<&Step> =
            steps.iter().filter(|s| s.kind == "ClusterRole" && !shipped.contains(&s.name.as_str())).collect();
        assert_eq!(generated.len(), 1, "one ClusterRole from clusterPermissions");
        let crb =
            Api::<ClusterRoleBinding>::all(client.clone()).get(&generated[0].name).await.expect("ClusterRoleBinding");
        let subj = &crb.subjects.unwrap_or_default()[0];
        assert_eq!(
            (subj.name.as_str(), subj.namespace.as_deref()),
            ("kaiwudb-operator-controller-manager", Some(ns.name.as_str()))
        );
        for name in shipped {
            Api::<ClusterRole>::all(client.clone())
                .get(name)
                .await
                .unwrap_or_else(|e| panic!("bundle ClusterRole {name}: {e}"));
        }
        let sa = "kaiwudb-operator-controller-manager";
        let n = ns.name.as_str();
        assert!(
            allowed(&client, n, sa, "create", "apps", "statefulsets", Some("default")).await,
            "cluster-wide statefulsets"
        );
        assert!(
            allowed(&client, n, sa, "create", "coordination.k8s.io", "leases", Some(n)).await,
            "leases in its namespace"
        );
        assert!(
            !allowed(&client, n, sa, "create", "coordination.k8s.io", "leases", Some("default")).await,
            "leases only in its namespace"
        );
        assert!(!allowed(&client, n, sa, "delete", "", "nodes", None).await);

        // A KaiwuCluster is accepted by the CRD's schema.
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kaiwu.inspur.com", "v1", "KaiwuCluster"),
            "kaiwuclusters",
        );
        let kcs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
        let kc: DynamicObject = obj(json!({"apiVersion": "kaiwu.inspur.com/v1", "kind": "KaiwuCluster",
        "metadata": {"name": "db"}, "spec": {"replicas": 3, "version": "2.2.0", "storage": {"size": "10Gi"}}}));
        eventually("a KaiwuCluster is accepted", Duration::from_secs(20), || async {
            kcs.create(&PostParams::default(), &kc).await.ok()
        })
        .await;

        let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
        let d = deps.get("kaiwudb-operator-controller-manager").await.expect("deployment");
        let env = d
            .spec
            .and_then(|s| s.template.spec)
            .map(|p| p.containers[0].env.clone().unwrap_or_default())
            .unwrap_or_default();
        let names: Vec<&str> = env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, vec!["KAIWUDB_IMAGE", "WATCH_NAMESPACE", "LOG_LEVEL", "OPERATOR_CONDITION_NAME"]);
    })
}

#[test]
fn forbidden_names_verb_resource_and_identity_and_stops_the_plan() {
    crate::support::run("install_cluster", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "inst-forbid").await;
        let n = ns.name.clone();
        ensure_csv_crd(&client).await;
        // An installer that may manage ServiceAccounts and read CSVs (to resolve the ServiceAccount's
        // owner) in its namespace, and nothing else.
        let installer = installer_client(
            &client,
            &n,
            "sa-only",
            json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create", "patch"]},
                   {"apiGroups": ["operators.coreos.com"], "resources": ["clusterserviceversions"], "verbs": ["get"]}]),
        )
        .await;

        let bundle = load("bundles/nginx-operator/0.2.0");
        let all = install::steps(&bundle, &target(&bundle, &n)).expect("plan");
        // Skip the CRD (cluster-scoped): the ServiceAccount goes through, the Role is refused.
        let steps: Vec<Step> = all.into_iter().filter(|s| s.kind != "CustomResourceDefinition").collect();
        assert_eq!(steps[0].kind, "ServiceAccount");
        let results = install::apply(&installer, &steps, &ApplyOptions::default()).await;
        assert_eq!(results.len(), steps.len());
        assert_eq!(results[0].status, StepStatus::Created, "{}", results[0]);
        let StepStatus::Failed(StepError::Forbidden { verb, resource, identity, namespace, .. }) = &results[1].status
        else {
            panic!("expected Forbidden on the Role, got {}", results[1]);
        };
        assert_eq!(verb, "get");
        assert_eq!(resource, "roles.rbac.authorization.k8s.io");
        assert_eq!(namespace.as_deref(), Some(n.as_str()));
        assert!(identity.contains(&format!("system:serviceaccount:{n}:installer")), "{identity}");
        let text = results[1].to_string();
        assert!(text.contains("Role") && text.contains("forbidden"), "{text}");
        for r in &results[2..] {
            assert_eq!(r.status, StepStatus::NotApplied { blocked_by: 1 }, "{r}");
        }
    })
}

#[test]
fn crd_whose_names_are_taken_fails_and_blocks_later_steps() {
    crate::support::run("install_cluster", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "inst-crd").await;
        let bundle = load("bundles/nginx-operator/0.2.0");
        let crd_step = install::steps(&bundle, &target(&bundle, &ns.name)).expect("plan").remove(0);
        let clone_name = format!("nginxclones{}.example.com", &ns.name[ns.name.len() - 8..]);
        let mut clone = crd_step.clone();
        clone.name = clone_name.clone();
        clone.manifest["metadata"]["name"] = json!(clone_name);
        clone.manifest["spec"]["names"]["plural"] = json!(clone_name.split('.').next());
        clone.manifest["spec"]["names"]["singular"] = json!("nginxclone");
        clone.manifest["spec"]["names"]["listKind"] = json!("NginxList"); // kind Nginx is already taken in example.com
        let cm = Step {
            resolving: "t".into(),
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "after".into(),
            namespace: Some(ns.name.clone()),
            manifest: json!({"metadata": {"name": "after", "namespace": ns.name}}),
        };
        let opts = ApplyOptions { crd_timeout: Duration::from_secs(20), ..Default::default() };
        let results = install::apply(&client, &[crd_step, clone, cm], &opts).await;
        let _ =
            Api::<CustomResourceDefinition>::all(client.clone()).delete(&clone_name, &DeleteParams::default()).await;
        assert!(results[0].applied(), "{}", results[0]);
        let StepStatus::Failed(StepError::NotEstablished { crd, message, .. }) = &results[1].status else {
            panic!("expected NotEstablished, got {}", results[1]);
        };
        assert_eq!(crd, &clone_name);
        assert!(message.contains("NamesAccepted"), "{message}");
        assert_eq!(results[2].status, StepStatus::NotApplied { blocked_by: 1 });
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns.name);
        assert!(cms.get_opt("after").await.expect("get").is_none(), "nothing after the failed step is applied");

        // An object the API server rejects is reported as Invalid, with its message.
        let bad = Step {
            resolving: "t".into(),
            group: String::new(),
            version: "v1".into(),
            kind: "Service".into(),
            name: "bad".into(),
            namespace: Some(ns.name.clone()),
            manifest: json!({"metadata": {"name": "bad"}, "spec": {"ports": [{"port": 0}]}}),
        };
        let r = install::apply(&client, &[bad], &opts).await;
        let StepStatus::Failed(StepError::Invalid { message, .. }) = &r[0].status else {
            panic!("expected Invalid, got {}", r[0])
        };
        assert!(message.contains("spec.ports[0].port"), "{message}");
    })
}

/// A CRD two namespaces' installs apply keeps the installed-alongside annotation of each whose
/// CSV exists, as OLM does (`setInstalledAlongsideAnnotation`); a deleted CSV's goes at the next
/// apply, and an upgrade's CSV takes the place of the one it replaces in its namespace (E21).
#[test]
fn a_crd_applied_from_two_namespaces_names_both_installs() {
    crate::support::run("install_cluster", 0, async {
        let client = crate::support::cluster().await;
        ensure_csv_crd(&client).await;
        let (a, b) =
            (TestNamespace::new(&client, "inst-along-a").await, TestNamespace::new(&client, "inst-along-b").await);
        let bundle = load("bundles/nginx-operator/0.2.0");
        // A CRD of this test's own (the nginx CRD renamed), so that no other test applies it.
        let group = format!("along{}.example.com", &a.name[a.name.len() - 8..]);
        let name = format!("alongs.{group}");
        let base = install::steps(&bundle, &target(&bundle, &a.name)).expect("plan").remove(0);
        assert_eq!(base.kind, "CustomResourceDefinition");
        let crd_for = |ns: &str, csv: &str| along_crd(&base, &group, &name, ns, csv);
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let _gone = CrdDeletedOnDrop(name.clone());
        let csv_ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
            "clusterserviceversions",
        );
        let csv = |ns: &str| Api::<DynamicObject>::namespaced_with(client.clone(), ns, &csv_ar);
        let csv_obj: DynamicObject = obj(
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "op.v1"}, "spec": {"displayName": "op", "version": "1.0.0", "install": {"strategy": "deployment"}}}),
        );
        for ns in [&a.name, &b.name] {
            csv(ns).create(&PostParams::default(), &csv_obj).await.expect("CSV");
        }
        apply_one(&client, crd_for(&a.name, "op.v1")).await;
        assert_eq!(alongside(&crds, &name).await, [format!("{}/op.v1", a.name)]);
        apply_one(&client, crd_for(&b.name, "op.v1")).await;
        assert_eq!(
            alongside(&crds, &name).await,
            [format!("{}/op.v1", a.name), format!("{}/op.v1", b.name)],
            "both installs named"
        );
        // b upgrades to op.v2: its op.v1 gives way, a's stays.
        apply_one(&client, crd_for(&b.name, "op.v2")).await;
        assert_eq!(alongside(&crds, &name).await, [format!("{}/op.v1", a.name), format!("{}/op.v2", b.name)]);
        // a's CSV is deleted: the next apply drops it.
        csv(&a.name).delete("op.v1", &DeleteParams::default()).await.expect("delete CSV");
        eventually("CSV gone", Duration::from_secs(20), || async {
            csv(&a.name).get_opt("op.v1").await.ok()?.is_none().then_some(())
        })
        .await;
        apply_one(&client, crd_for(&b.name, "op.v2")).await;
        assert_eq!(alongside(&crds, &name).await, [format!("{}/op.v2", b.name)]);
    })
}

/// The plan's CRD step `base` renamed to `name` in `group` (kind Along), annotated as installed
/// alongside CSV `csv` of namespace `ns` only.
fn along_crd(base: &Step, group: &str, name: &str, ns: &str, csv: &str) -> Step {
    let mut step = base.clone();
    step.name = name.to_string();
    step.group = "apiextensions.k8s.io".into();
    let m = &mut step.manifest;
    m["metadata"]["name"] = json!(name);
    m["spec"]["group"] = json!(group);
    m["spec"]["names"] = json!({"kind": "Along", "listKind": "AlongList", "plural": "alongs", "singular": "along"});
    let annotations = m["metadata"]["annotations"].as_object_mut().expect("the plan's CRD is annotated");
    annotations.retain(|k, _| !k.starts_with(ANNOTATION_INSTALLED_ALONGSIDE));
    let (k, v) = installed_alongside(ns, csv);
    annotations.insert(k, json!(v));
    step
}

/// The `namespace/csv` values of CRD `name`'s installed-alongside annotations, sorted; each under
/// the key OLM derives from it.
async fn alongside(crds: &Api<CustomResourceDefinition>, name: &str) -> Vec<String> {
    let mut v: Vec<String> = crds
        .get(name)
        .await
        .expect("CRD")
        .metadata
        .annotations
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k.starts_with(ANNOTATION_INSTALLED_ALONGSIDE))
        .map(|(k, v)| {
            assert_eq!(
                installed_alongside(v.split_once('/').expect("ns/csv").0, v.split_once('/').expect("ns/csv").1).0,
                k,
                "key of {v}"
            );
            v
        })
        .collect();
    v.sort();
    v
}

/// Applies one step, which must be applied.
async fn apply_one(client: &kube::Client, step: Step) {
    let r = install::apply(client, &[step], &ApplyOptions::default()).await;
    assert_all_applied(&r);
}

/// Runs `f` with an admin client on a runtime of its own, on another thread: `Drop` cannot await,
/// and the test's runtime is blocked in the drop.
fn with_admin_client<F, Fut>(f: F)
where
    F: FnOnce(kube::Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let _ = std::thread::spawn(move || {
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
            rt.block_on(async move {
                if let Ok(client) = kube::Client::try_from(crate::support::admin_config().await) {
                    f(client).await;
                }
            });
        }
    })
    .join();
}

/// Deletes the named CRD when dropped (end of test, pass or fail).
struct CrdDeletedOnDrop(String);

impl Drop for CrdDeletedOnDrop {
    fn drop(&mut self) {
        let name = self.0.clone();
        with_admin_client(move |client| async move {
            let _ = Api::<CustomResourceDefinition>::all(client).delete(&name, &DeleteParams::default()).await;
        });
    }
}

/// Removes the cluster-scoped objects of a test namespace when dropped (end of test, pass or fail).
struct ClusterCleanup(String, Vec<&'static str>);

impl Drop for ClusterCleanup {
    fn drop(&mut self) {
        let (ns, named) = (self.0.clone(), self.1.clone());
        with_admin_client(move |client| async move { cleanup_cluster_scoped(&client, &ns, &named).await });
    }
}

#[test]
fn preflight_lists_every_missing_permission_before_anything_is_applied() {
    crate::support::run("install_cluster", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "inst-pre").await;
        let n = ns.name.clone();
        let bundle = load("bundles/nginx-operator/0.2.0");
        let steps = install::steps(&bundle, &target(&bundle, &n)).expect("plan");

        // The admin may do everything.
        install::preflight::check(&client, &Subject::Client, &steps).await.expect("admin passes the pre-check");

        // An installer that may manage RBAC objects and ServiceAccounts in its namespace, but holds
        // none of the operator's permissions and nothing cluster-wide.
        let installer = installer_client(
            &client,
            &n,
            "installer",
            json!([{"apiGroups": [""], "resources": ["serviceaccounts", "services"], "verbs": ["get", "create", "patch"]},
                   {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["get", "create", "patch"]}]),
        )
        .await;
        let err = eventually("the installer's Role is in effect", Duration::from_secs(20), || async {
            match install::preflight::check(&installer, &Subject::Client, &steps).await {
                Err(install::PreflightError::Missing { who, findings })
                    if !findings.iter().any(|f| lacks(f, "create", "serviceaccounts")) =>
                {
                    Some((who, findings))
                }
                _ => None,
            }
        })
        .await;
        let (who, findings) = err;
        assert_findings_name_every_missing_permission(&who, &findings, &n);
        // The same check for the same ServiceAccount as a subject the admin asks about
        // (SubjectAccessReview, as the controller does for an OperatorGroup's serviceAccountName)
        // finds the same.
        let account = install::preflight::ServiceAccount { namespace: n.clone(), name: "installer".into() };
        let as_subject =
            install::preflight::findings(&client, &Subject::ServiceAccount(account), &steps).await.expect("reviews");
        assert_eq!(as_subject, findings, "one pre-check, two ways of naming the subject");
        // One message naming who, every finding and what to do.
        let message = install::PreflightError::Missing { who: who.clone(), findings: findings.clone() }.to_string();
        assert!(
            message.starts_with(&format!(
                "{who} lacks {} permissions needed by this plan; nothing was applied: (1) ",
                findings.len()
            )) && message.ends_with(&format!("; grant them to {who}")),
            "{message}"
        );
        // Read-only: nothing was created.
        assert!(
            Api::<Deployment>::namespaced(client.clone(), &n)
                .list(&ListParams::default())
                .await
                .expect("list")
                .items
                .is_empty()
        );
        assert!(
            Api::<Role>::namespaced(client.clone(), &n).list(&ListParams::default()).await.expect("list").items.len()
                == 1
        );
    })
}

/// Whether finding `f` lacks `verb` on `resource`.
fn lacks(f: &install::Finding, verb: &str, resource: &str) -> bool {
    f.missing.iter().any(|q| q.verb() == verb && q.target().starts_with(&format!("{resource} ")))
}

/// The pre-check's findings for the installer of namespace `n` (`who`): every permission of the
/// plan it lacks, none it holds, and the operator's Role as a grant it may not make.
fn assert_findings_name_every_missing_permission(who: &str, findings: &[install::Finding], n: &str) {
    assert!(who.contains(&format!("system:serviceaccount:{n}:installer")), "{who}");
    let shown: Vec<String> = findings.iter().flat_map(|f| f.missing.iter().map(ToString::to_string)).collect();
    for expected in [
        "create on customresourcedefinitions.apiextensions.k8s.io cluster-wide".to_string(),
        "create on clusterroles.rbac.authorization.k8s.io cluster-wide".to_string(),
        format!("delete on nginxes.example.com in namespace {n}"),
        format!("watch on leases.coordination.k8s.io in namespace {n}"),
        "create on tokenreviews.authentication.k8s.io cluster-wide".to_string(),
        format!("create on deployments.apps in namespace {n}"),
    ] {
        assert!(shown.contains(&expected), "missing list lacks {expected:?}:\n{}", shown.join("\n"));
    }
    assert!(!shown.iter().any(|s| s.starts_with("create on roles.")), "the installer may create Roles: {shown:?}");
    // The operator's Role asks for what the installer does not hold and it may not escalate:
    // the finding is that Role's rule, saying so.
    let grant =
        findings.iter().find(|f| lacks(f, "delete", "nginxes.example.com")).expect("a finding for delete nginxes");
    assert!(
        grant.step.starts_with("Role ") && grant.need == install::preflight::Need::Grant { roles: "roles" },
        "{grant:?}"
    );
    assert!(grant.to_string().contains("it must hold it, or have escalate on roles"), "{grant}");
}
