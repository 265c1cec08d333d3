//! The generated CRDs on a real kube-apiserver: they apply server-side
//! and become Established; OLM-style objects are accepted as users write them for OLM; the
//! status subresource keeps OLM's and capstan's status fields; uninterpreted CSV fields are not
//! pruned; `kubectl get` shows OLM's printer columns.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::TestNamespace;
use capstan::api::catalogsource::{SourceType, connection_state};
use capstan::api::clusterserviceversion::{CsvPhase, CsvReason, RequirementStatusReason};
use capstan::api::installplan::{InstallPlanPhase, StepStatus};
use capstan::api::operatorgroup::UpgradeStrategy;
use capstan::api::subscription::{SubscriptionConditionType, SubscriptionState};
use capstan::api::{
    Approval, CatalogSource, ClusterServiceVersion, ConditionStatus, InstallPlan, OperatorGroup, Subscription,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};

const MANAGER: &str = "capstan-api-tests";

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("test object")
}

/// Applies the generated CRDs server-side and waits until each is Established.
async fn install_crds(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in capstan::api::crds() {
        let name = crd.metadata.name.clone().expect("CRD name");
        api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("server-side apply of CRD {name} failed: {e}"));
        let established = kube::runtime::wait::await_condition(
            api.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .unwrap_or_else(|_| panic!("CRD {name} not Established in 30s"))
            .expect("watch CRD");
    }
}

/// Creates `object`, retrying while discovery of a just-Established CRD catches up.
async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let mut last;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match api.create(&PostParams::default(), object).await {
            Ok(o) => return o,
            Err(kube::Error::Api(s)) if s.code == 404 => last = s.message,
            Err(e) => panic!("create {:?} failed: {e}", object.meta().name),
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("create {:?}: resource still unknown after 20s: {last}", object.meta().name);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `kubectl get`'s view of one object: the server-side Table (column names, the row's cells).
async fn table_row(client: &kube::Client, collection_path: &str, name: &str) -> (Vec<String>, Vec<Value>) {
    let mut req =
        kube::core::Request::new(collection_path).get(name, &Default::default()).expect("build table request");
    req.headers_mut().insert("accept", "application/json;as=Table;v=v1;g=meta.k8s.io".parse().expect("header"));
    let text = client.request_text(req).await.expect("GET as Table");
    let table: Value = serde_json::from_str(&text).expect("Table JSON");
    let columns = table["columnDefinitions"]
        .as_array()
        .expect("columnDefinitions")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect();
    let cells = table["rows"][0]["cells"].as_array().cloned().expect("one row");
    (columns, cells)
}

#[test]
fn crds_are_established_with_olms_names_and_printer_columns() {
    crate::support::run("api_cluster", 0, async {
        let client = crate::support::cluster().await;
        install_crds(&client).await;
        let api: Api<CustomResourceDefinition> = Api::all(client.clone());
        let want: [(&str, &[&str], &[&str]); 5] = [
            ("catalogsources.operators.coreos.com", &["catsrc"], &["Display", "Type", "Publisher", "Age"]),
            ("subscriptions.operators.coreos.com", &["sub", "subs"], &["Package", "Source", "Channel"]),
            ("installplans.operators.coreos.com", &["ip"], &["CSV", "Approval", "Approved"]),
            (
                "clusterserviceversions.operators.coreos.com",
                &["csv", "csvs"],
                &["Display", "Version", "Release", "Replaces", "Phase"],
            ),
            ("operatorgroups.operators.coreos.com", &["og"], &[]),
        ];
        for (name, short, columns) in want {
            let crd = api.get(name).await.unwrap_or_else(|e| panic!("get CRD {name}: {e}"));
            assert_eq!(crd.spec.names.short_names.clone().unwrap_or_default(), short, "{name}");
            assert_eq!(crd.spec.names.categories.clone().unwrap_or_default(), ["olm"], "{name}");
            let got: Vec<String> =
                crd.spec.versions[0].additional_printer_columns.iter().flatten().map(|c| c.name.clone()).collect();
            assert_eq!(got, columns, "{name}");
            let status = crd.status.expect("CRD status");
            assert_eq!(status.accepted_names.and_then(|n| n.short_names).unwrap_or_default(), short, "{name}");
        }
    })
}

/// `spec.release` is checked by the API server as OLM v0.46.0's CRD checks it: at most 20
/// characters, dot-separated alphanumeric identifiers, no leading zeros; a valid one is shown in
/// the `Release` column.
#[test]
fn csv_release_is_checked_by_the_api_server_as_olm_does() {
    crate::support::run("api_cluster", 0, async {
        let client = crate::support::cluster().await;
        install_crds(&client).await;
        let ns = TestNamespace::new(&client, "api-release").await;
        let api: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
        let csv = |name: &str, release: &str| -> ClusterServiceVersion {
            obj(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": name},
                "spec": {"displayName": "Release", "version": "1.0.0", "release": release,
                         "install": {"strategy": "deployment", "spec": {"deployments": []}}}
            }))
        };
        let good = create(&api, &csv("good.v1.0.0", "2.fix-1")).await;
        assert_eq!(good.spec.release.as_deref(), Some("2.fix-1"));
        let (columns, cells) = table_row(
            &client,
            &format!("/apis/operators.coreos.com/v1alpha1/namespaces/{}/clusterserviceversions", ns.name),
            "good.v1.0.0",
        )
        .await;
        let at = columns.iter().position(|c| c == "Release").expect("a Release column");
        assert_eq!(cells[at], "2.fix-1");
        for (release, why) in [
            (
                "a_b",
                "release version must be composed of dot-separated identifiers containing only alphanumerics and hyphens",
            ),
            ("1.02", "numeric identifiers in release version must not have leading zeros"),
            ("123456789012345678901", "may not be more than 20 bytes"),
        ] {
            match api.create(&PostParams::default(), &csv("bad.v1.0.0", release)).await {
                Err(kube::Error::Api(s)) => {
                    assert_eq!(s.code, 422, "{release}: {s:?}");
                    assert!(s.message.contains(why) && s.message.contains("spec.release"), "{release}: {}", s.message);
                }
                other => panic!("release {release:?} was not refused: {other:?}"),
            }
        }
    })
}

#[test]
fn operatorhub_style_subscription_is_accepted_and_keeps_its_status() {
    crate::support::run("api_cluster", 0, async {
        let client = crate::support::cluster().await;
        install_crds(&client).await;
        let ns = TestNamespace::new(&client, "api-sub").await;
        let api: Api<Subscription> = Api::namespaced(client.clone(), &ns.name);
        let sub: Subscription = obj(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "my-etcd"},
            "spec": {"channel": "stable", "name": "etcd", "source": "operatorhubio-catalog",
                     "sourceNamespace": "olm", "installPlanApproval": "Manual", "versionRange": ">=0.9.0 <1.0.0",
                     "config": {"env": [{"name": "LOG_LEVEL", "value": "debug"}],
                                "resources": {"limits": {"memory": "256Mi"}}}}
        }));
        create(&api, &sub).await;
        let got = api.get("my-etcd").await.expect("get Subscription");
        assert_eq!(got.spec.package, "etcd");
        assert_eq!(got.spec.source_namespace, "olm");
        assert_eq!(got.approval(), Approval::Manual);
        assert_eq!(got.spec.version_range.as_deref(), Some(">=0.9.0 <1.0.0"));
        let env = got.spec.config.as_ref().and_then(|c| c.env.as_ref()).expect("config.env kept");
        assert_eq!(env[0].value.as_deref(), Some("debug"));

        // Status through the status subresource, as the controller will write it.
        let status = json!({"status": {
            "state": "UpgradePending", "currentCSV": "etcdoperator.v0.9.4",
            "installPlanRef": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                               "name": "install-abcde", "namespace": ns.name},
            "installplan": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                            "name": "install-abcde", "uuid": "0b7c5b0e-0000-4000-8000-000000000001"},
            "installPlanGeneration": 1,
            "catalogHealth": [{"catalogSourceRef": {"kind": "CatalogSource", "name": "operatorhubio-catalog",
                               "namespace": "olm"}, "healthy": true, "lastUpdated": "2026-11-29T10:00:00Z"}],
            "conditions": [{"type": "InstallPlanPending", "status": "True", "reason": "RequiresApproval",
                            "lastTransitionTime": "2026-11-29T10:00:00Z"},
                           {"type": "CatalogSourcesUnhealthy", "status": "False", "reason": "AllCatalogSourcesHealthy"}],
            "lastUpdated": "2026-11-29T10:00:00Z"
        }});
        api.patch_status("my-etcd", &PatchParams::default(), &Patch::Merge(&status)).await.expect("patch status");
        let got = api.get("my-etcd").await.expect("get Subscription");
        let st = got.status.expect("status kept");
        assert_eq!(st.state, Some(SubscriptionState::UpgradePending));
        assert_eq!(st.current_csv.as_deref(), Some("etcdoperator.v0.9.4"));
        assert_eq!(st.install_plan_ref.and_then(|r| r.name).as_deref(), Some("install-abcde"));
        assert_eq!(st.installplan.map(|r| r.uuid).as_deref(), Some("0b7c5b0e-0000-4000-8000-000000000001"));
        assert!(st.catalog_health[0].healthy);
        let pending = st.conditions.iter().find(|c| c.type_ == SubscriptionConditionType::InstallPlanPending);
        assert_eq!(pending.map(|c| c.status), Some(ConditionStatus::True));

        // A status that is not True/False/Unknown is rejected by the schema, naming the field.
        let bad = json!({"status": {"lastUpdated": "2026-11-29T10:00:00Z",
                                "conditions": [{"type": "ResolutionFailed", "status": "Maybe"}]}});
        let err = api.patch_status("my-etcd", &PatchParams::default(), &Patch::Merge(&bad)).await.expect_err("invalid");
        assert!(err.to_string().contains("status.conditions[0].status"), "{err}");

        // A Subscription without the required package name is rejected.
        let missing: DynamicObject = obj(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "no-package"}, "spec": {"source": "x", "sourceNamespace": "olm"}}));
        let ar = ApiResource::erase::<Subscription>(&());
        let dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
        let err = dynamic.create(&PostParams::default(), &missing).await.expect_err("spec.name is required");
        assert!(err.to_string().contains("spec.name"), "{err}");

        let (columns, cells) = table_row(
            &client,
            &format!("/apis/operators.coreos.com/v1alpha1/namespaces/{}/subscriptions", ns.name),
            "my-etcd",
        )
        .await;
        assert_eq!(columns, ["Name", "Package", "Source", "Channel"]);
        assert_eq!(cells, [json!("my-etcd"), json!("etcd"), json!("operatorhubio-catalog"), json!("stable")]);
    })
}

#[test]
fn catalog_source_keeps_poll_settings_and_capstan_status() {
    crate::support::run("api_cluster", 0, async {
        let client = crate::support::cluster().await;
        install_crds(&client).await;
        let ns = TestNamespace::new(&client, "api-catsrc").await;
        let api: Api<CatalogSource> = Api::namespaced(client.clone(), &ns.name);
        let cs: CatalogSource = obj(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "operatorhubio-catalog"},
            "spec": {"sourceType": "grpc", "image": "quay.io/operatorhubio/catalog:latest", "displayName": "Community Operators",
                     "publisher": "OperatorHub.io", "priority": -100, "secrets": ["pull-secret"],
                     "grpcPodConfig": {"securityContextConfig": "restricted", "memoryTarget": "30Mi"},
                     "updateStrategy": {"registryPoll": {"interval": "10m"}}}
        }));
        create(&api, &cs).await;
        let got = api.get("operatorhubio-catalog").await.expect("get CatalogSource");
        assert_eq!(got.spec.source_type, SourceType::Grpc);
        assert_eq!(got.poll_interval(), Some("10m"));
        assert_eq!(got.priority(), -100);
        assert!(got.is_image_source());

        let status = json!({"status": {
            "connectionState": {"address": "quay.io/operatorhubio/catalog:latest", "lastObservedState": "READY",
                                "lastConnect": "2026-11-29T10:00:00Z"},
            "latestImageRegistryPoll": "2026-11-29T10:00:00Z",
            "resolvedImage": "quay.io/operatorhubio/catalog@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "resolvedDigest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "packageCount": 13,
            "conditions": [{"type": "Ready", "status": "True", "reason": "CatalogPulled", "message": "",
                            "lastTransitionTime": "2026-11-29T10:00:00Z"}]
        }});
        api.patch_status("operatorhubio-catalog", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("patch status");
        let st = api.get("operatorhubio-catalog").await.expect("get").status.expect("status kept");
        assert_eq!(st.connection_state.map(|c| c.last_observed_state).as_deref(), Some(connection_state::READY));
        assert_eq!(st.package_count, Some(13));
        assert!(st.resolved_digest.is_some_and(|d| d.starts_with("sha256:")));
        assert!(st.resolved_image.is_some_and(|d| d.contains("@sha256:")));
        assert_eq!(st.conditions[0].reason, "CatalogPulled");

        // capstan's `sourceType: image` is accepted as well.
        let image: CatalogSource = obj(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "local"}, "spec": {"sourceType": "image", "image": "127.0.0.1:5000/catalog:1"}}));
        create(&api, &image).await;
        assert_eq!(api.get("local").await.expect("get").spec.source_type, SourceType::Image);

        let (columns, cells) = table_row(
            &client,
            &format!("/apis/operators.coreos.com/v1alpha1/namespaces/{}/catalogsources", ns.name),
            "operatorhubio-catalog",
        )
        .await;
        assert_eq!(columns, ["Name", "Display", "Type", "Publisher", "Age"]);
        assert_eq!(
            cells[..4],
            [json!("operatorhubio-catalog"), json!("Community Operators"), json!("grpc"), json!("OperatorHub.io")]
        );
    })
}

#[test]
fn operator_group_without_spec_is_defaulted_like_olm() {
    crate::support::run("api_cluster", 0, async {
        let client = crate::support::cluster().await;
        install_crds(&client).await;
        let ns = TestNamespace::new(&client, "api-og").await;
        // As OLM's upstream `global-operators` is written: no spec at all.
        let ar = ApiResource::erase::<OperatorGroup>(&());
        let dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
        let bare: DynamicObject = obj(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "global-operators"}}));
        create(&dynamic, &bare).await;
        let api: Api<OperatorGroup> = Api::namespaced(client.clone(), &ns.name);
        let og = api.get("global-operators").await.expect("a spec-less OperatorGroup reads back typed");
        assert_eq!(og.spec.upgrade_strategy, Some(UpgradeStrategy::Default));
        assert!(og.spec.target_namespaces.is_none() && og.spec.selector.is_none());

        let own: OperatorGroup = obj(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "own"}, "spec": {"targetNamespaces": [ns.name]}}));
        create(&api, &own).await;
        let status = json!({"status": {"namespaces": [ns.name], "lastUpdated": "2026-11-29T10:00:00Z"}});
        api.patch_status("own", &PatchParams::default(), &Patch::Merge(&status)).await.expect("patch status");
        let og = api.get("own").await.expect("get");
        assert_eq!(og.spec.target_namespaces.as_deref(), Some(&[ns.name.clone()][..]));
        assert_eq!(og.upgrade_strategy(), UpgradeStrategy::Default);
        assert_eq!(og.status.expect("status").namespaces, std::slice::from_ref(&ns.name));

        // An older manifest written against v1alpha2 is served and reads back as v1.
        let ar_v1alpha2 = ApiResource::erase::<capstan::api::operatorgroup::v1alpha2::OperatorGroup>(&());
        let v1alpha2: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar_v1alpha2);
        let old: DynamicObject = obj(json!({"apiVersion": "operators.coreos.com/v1alpha2", "kind": "OperatorGroup",
        "metadata": {"name": "old"}, "spec": {"targetNamespaces": ["a", "b"]}}));
        create(&v1alpha2, &old).await;
        let og = api.get("old").await.expect("a v1alpha2 OperatorGroup reads back as v1");
        assert_eq!(og.spec.target_namespaces.as_deref(), Some(&["a".to_string(), "b".to_string()][..]));
        assert_eq!(og.spec.upgrade_strategy, Some(UpgradeStrategy::Default), "v1 defaulting on read");

        let bad: DynamicObject = obj(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "bad"}, "spec": {"upgradeStrategy": "YOLO"}}));
        let err = dynamic.create(&PostParams::default(), &bad).await.expect_err("unknown upgrade strategy");
        assert!(err.to_string().contains("spec.upgradeStrategy"), "{err}");
    })
}

/// One CSV per corpus package (the first version directory in name order).
fn one_csv_per_package() -> Vec<PathBuf> {
    let root = crate::support::shared_dir().join("corpus/community-operators-prod/operators");
    let mut pkgs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", root.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    pkgs.sort();
    let mut out = Vec::new();
    for pkg in pkgs {
        let mut versions: Vec<PathBuf> = std::fs::read_dir(&pkg)
            .expect("read package")
            .map(|e| e.expect("entry").path().join("manifests"))
            .collect();
        versions.sort();
        let found = versions.iter().filter(|m| m.is_dir()).find_map(|m| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(m).ok()?.map(|e| e.expect("entry").path()).collect();
            files.sort();
            files.into_iter().find(|f| f.to_string_lossy().ends_with("clusterserviceversion.yaml"))
        });
        out.extend(found);
    }
    out
}

#[test]
fn corpus_csvs_are_stored_without_losing_uninterpreted_fields() {
    crate::support::run("api_cluster", 0, async {
        let client = crate::support::cluster().await;
        install_crds(&client).await;
        let ns = TestNamespace::new(&client, "api-csv").await;
        let api: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
        let files = one_csv_per_package();
        assert!(files.len() >= 10, "expected a CSV per corpus package, found {}", files.len());
        for f in &files {
            let original: Value =
                serde_norway::from_str(&std::fs::read_to_string(f).expect("read CSV")).expect("CSV YAML");
            let mut csv: ClusterServiceVersion =
                serde_json::from_value(original.clone()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            csv.metadata.namespace = None;
            let name = csv.metadata.name.clone().expect("CSV name");
            create(&api, &csv).await;
            let stored = api.get(&name).await.unwrap_or_else(|e| panic!("get CSV {name}: {e}"));
            let stored_spec = serde_json::to_value(&stored.spec).expect("spec JSON");
            // The API server pruned nothing and changed nothing in the spec.
            assert!(stored_spec == original["spec"], "{}: the stored spec differs from the file", f.display());
            assert_eq!(stored.metadata.annotations, csv.metadata.annotations, "{}", f.display());
        }

        // The uninterpreted fields the brief names, checked explicitly on etcd's CSV.
        let original = etcd_csv(&files);
        let name = original["metadata"]["name"].as_str().expect("name");
        let stored: DynamicObject = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            &ns.name,
            &ApiResource::erase::<ClusterServiceVersion>(&()),
        )
        .get(name)
        .await
        .expect("get etcd CSV as raw JSON");
        let spec = &stored.data["spec"];
        assert!(spec["description"].as_str().is_some_and(|d| d.len() > 100), "description kept");
        assert_eq!(spec["description"], original["spec"]["description"]);
        assert_eq!(spec["icon"], original["spec"]["icon"]);
        assert_eq!(spec["maintainers"], original["spec"]["maintainers"]);
        let owned = &spec["customresourcedefinitions"]["owned"][0];
        assert!(owned["specDescriptors"].as_array().is_some_and(|d| !d.is_empty()), "specDescriptors kept: {owned}");
        assert_eq!(
            owned["specDescriptors"],
            original["spec"]["customresourcedefinitions"]["owned"][0]["specDescriptors"]
        );
        assert_eq!(
            spec["install"]["spec"]["deployments"][0]["spec"],
            original["spec"]["install"]["spec"]["deployments"][0]["spec"],
            "the Deployment spec inside the install strategy is kept"
        );
    })
}

/// The corpus CSV of etcd among `files`, as its YAML says.
fn etcd_csv(files: &[PathBuf]) -> Value {
    let etcd = files.iter().find(|f| f.to_string_lossy().contains("/etcd/")).expect("etcd CSV");
    serde_norway::from_str(&std::fs::read_to_string(etcd).expect("read")).expect("YAML")
}

/// A CSV's status as olm-operator writes it (failed requirements, with the ServiceAccount's
/// unsatisfied rule) is kept by the status subresource, and `kubectl get` shows the CSV's
/// display name, version and phase.
#[test]
fn csv_status_as_olm_writes_it_is_kept_and_shown() {
    crate::support::run("api_cluster", 0, async {
        let client = crate::support::cluster().await;
        install_crds(&client).await;
        let ns = TestNamespace::new(&client, "api-csv-status").await;
        let api: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
        let original = etcd_csv(&one_csv_per_package());
        let mut csv: ClusterServiceVersion = serde_json::from_value(original.clone()).expect("etcd CSV");
        csv.metadata.namespace = None;
        create(&api, &csv).await;
        let name = original["metadata"]["name"].as_str().expect("name");
        let status = json!({"status": {
            "phase": "Failed", "reason": "RequirementsNotMet", "message": "one or more requirements couldn't be found",
            "lastUpdateTime": "2026-11-29T10:00:00Z", "lastTransitionTime": "2026-11-29T10:00:00Z",
            "conditions": [{"phase": "Pending", "reason": "RequirementsUnknown", "message": "requirements not yet checked",
                            "lastTransitionTime": "2026-11-29T09:59:00Z"},
                           {"phase": "Failed", "reason": "RequirementsNotMet", "lastTransitionTime": "2026-11-29T10:00:00Z"}],
            "requirementStatus": [{"group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition",
                                   "name": "etcdclusters.etcd.database.coreos.com", "status": "NotPresent", "message": "CRD is not present"},
                                  {"group": "", "version": "v1", "kind": "ServiceAccount", "name": "etcd-operator",
                                   "status": "PresentNotSatisfied", "message": "",
                                   "dependents": [{"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "PolicyRule",
                                                   "status": "NotSatisfied", "message": "namespaced rule:{\"verbs\":[\"*\"]}"}]}]
        }});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("patch CSV status");
        let got = api.get(name).await.expect("get CSV");
        assert_eq!(got.phase(), Some(&CsvPhase::Failed));
        let st = got.status.expect("status");
        assert_eq!(st.reason, Some(CsvReason::RequirementsNotMet));
        assert_eq!(st.conditions.len(), 2);
        assert_eq!(st.requirement_status[1].status, RequirementStatusReason::PresentNotSatisfied);
        assert_eq!(st.requirement_status[1].dependents[0].status, RequirementStatusReason::NotSatisfied);

        let (columns, cells) = table_row(
            &client,
            &format!("/apis/operators.coreos.com/v1alpha1/namespaces/{}/clusterserviceversions", ns.name),
            name,
        )
        .await;
        assert_eq!(columns, ["Name", "Display", "Version", "Release", "Replaces", "Phase"]);
        assert_eq!(cells[1], original["spec"]["displayName"]);
        assert_eq!(cells[2], original["spec"]["version"]);
        assert_eq!(cells[5], json!("Failed"));
    })
}

#[test]
fn install_plan_steps_status_and_kubectl_patch_approval() {
    crate::support::run("api_cluster", 0, async {
        let client = crate::support::cluster().await;
        install_crds(&client).await;
        let ns = TestNamespace::new(&client, "api-ip").await;
        let api: Api<InstallPlan> = Api::namespaced(client.clone(), &ns.name);
        let ip: InstallPlan = obj(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": "install-abcde"},
            "spec": {"approval": "Manual", "approved": false, "clusterServiceVersionNames": ["etcdoperator.v0.9.4"],
                     "generation": 1}
        }));
        create(&api, &ip).await;
        let crd_manifest = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                              "metadata": {"name": "etcdclusters.etcd.database.coreos.com"}})
        .to_string();
        let status = json!({"status": {
            "phase": "RequiresApproval",
            "catalogSources": ["operatorhubio-catalog"],
            "conditions": [{"type": "Installed", "status": "False", "reason": "InstallComponentFailed",
                            "lastUpdateTime": "2026-11-29T10:00:00Z"}],
            "plan": [
                {"resolving": "etcdoperator.v0.9.4", "status": "Unknown",
                 "resource": {"sourceName": "operatorhubio-catalog", "sourceNamespace": "olm", "group": "operators.coreos.com",
                              "version": "v1alpha1", "kind": "ClusterServiceVersion", "name": "etcdoperator.v0.9.4",
                              "manifest": "{}"}},
                {"resolving": "etcdoperator.v0.9.4", "status": "WaitingForApi", "optional": true,
                 "resource": {"sourceName": "operatorhubio-catalog", "sourceNamespace": "olm", "group": "apiextensions.k8s.io",
                              "version": "v1", "kind": "CustomResourceDefinition",
                              "name": "etcdclusters.etcd.database.coreos.com", "manifest": crd_manifest}}
            ],
            "bundleLookups": [{"path": "quay.io/operatorhubio/etcd:v0.9.4", "identifier": "etcdoperator.v0.9.4", "replaces": "",
                               "catalogSourceRef": {"kind": "CatalogSource", "name": "operatorhubio-catalog", "namespace": "olm"},
                               "conditions": [{"type": "BundleLookupPending", "status": "True", "reason": "JobIncomplete"}],
                               "properties": "{\"properties\":[]}"}],
            "startTime": "2026-11-29T10:00:00Z",
            "message": ""
        }});
        api.patch_status("install-abcde", &PatchParams::default(), &Patch::Merge(&status)).await.expect("patch status");

        // `kubectl patch installplan install-abcde --type merge -p '{"spec":{"approved":true}}'`
        api.patch("install-abcde", &PatchParams::default(), &Patch::Merge(json!({"spec": {"approved": true}})))
            .await
            .expect("approve");
        let got = api.get("install-abcde").await.expect("get InstallPlan");
        assert!(got.spec.approved);
        assert_eq!(got.spec.approval, Approval::Manual);
        assert_eq!(got.phase(), Some(&InstallPlanPhase::RequiresApproval));
        let st = got.status.expect("status");
        assert_eq!(st.catalog_sources, ["operatorhubio-catalog"]);
        assert_eq!(st.plan.len(), 2);
        assert_eq!(st.plan[1].status, StepStatus::WaitingForApi);
        assert!(st.plan[1].optional && !st.plan[0].optional);
        assert_eq!(st.plan[1].resource.manifest.as_deref(), Some(crd_manifest.as_str()));
        assert_eq!(st.bundle_lookups[0].identifier, "etcdoperator.v0.9.4");

        let (columns, cells) = table_row(
            &client,
            &format!("/apis/operators.coreos.com/v1alpha1/namespaces/{}/installplans", ns.name),
            "install-abcde",
        )
        .await;
        assert_eq!(columns, ["Name", "CSV", "Approval", "Approved"]);
        assert_eq!(cells, [json!("install-abcde"), json!("etcdoperator.v0.9.4"), json!("Manual"), json!(true)]);

        // Dropping a status field OLM's schema requires is rejected, naming it.
        let err = api
            .patch_status(
                "install-abcde",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"catalogSources": null}})),
            )
            .await
            .expect_err("catalogSources is required");
        assert!(err.to_string().contains("catalogSources"), "{err}");
    })
}
