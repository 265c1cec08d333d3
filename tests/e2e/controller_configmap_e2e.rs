//! ConfigMap catalogs (CatalogSource `sourceType: configmap`), as OLM's own e2e suite and older
//! installers write them: a ConfigMap with `customResourceDefinitions`, `clusterServiceVersions`
//! and `packages`, read straight from the API server (no registry pod), its bundles installed
//! without an image, its edits followed. One scenario per test, over one controller.

use std::collections::BTreeMap;

use crate::support::controller::*;
use crate::support::group::PerGroup;
use crate::support::{TestNamespace, eventually};
use capstan::api::{CatalogSource, InstallPlan};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const GROUP: &str = "controller_configmap_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

async fn fixture() -> std::sync::Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("ctl-configmap-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            ControllerFixture::start(&client, &repo, "ctl-cm-catalog", options).await
        })
        .await
}

/// The one object of the manifest file `name` of the example nginx-operator bundle `version`.
fn manifest(version: &str, name: &str) -> Value {
    let path = crate::support::repo_root().join("bundles/nginx-operator").join(version).join("manifests").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The data of a ConfigMap catalog of nginx-operator with the CSVs of `versions` in channel
/// `alpha`, whose head is the last of them.
fn catalog_data(versions: &[&str]) -> BTreeMap<String, String> {
    let csvs: Vec<Value> = versions.iter().map(|v| manifest(v, "nginx-operator.clusterserviceversion.yaml")).collect();
    let head = format!("nginx-operator.v{}", versions.last().expect("a version"));
    let packages = json!([{"packageName": "nginx-operator", "defaultChannel": "alpha",
                           "channels": [{"name": "alpha", "currentCSV": head}]}]);
    BTreeMap::from([
        ("customResourceDefinitions".to_string(), json!([manifest("0.2.0", "example.com_nginxes.yaml")]).to_string()),
        ("clusterServiceVersions".to_string(), Value::Array(csvs).to_string()),
        ("packages".to_string(), packages.to_string()),
    ])
}

/// Creates ConfigMap `ns/name` with `data` and CatalogSource `ns/name` (sourceType configmap)
/// naming it; returns the ConfigMap as created.
async fn config_map_catalog(client: &kube::Client, ns: &str, name: &str, data: BTreeMap<String, String>) -> ConfigMap {
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some(data),
        ..Default::default()
    };
    let cm =
        Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await.expect("ConfigMap");
    create::<CatalogSource>(
        client,
        ns,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"sourceType": "configmap", "configMap": name, "displayName": "ConfigMap catalog"}
        }),
    )
    .await;
    cm
}

/// CatalogSource `ns/name`'s status once `ok` holds for it.
async fn catalog_status(client: &kube::Client, ns: &str, name: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let api: Api<CatalogSource> = Api::namespaced(client.clone(), ns);
    eventually(&format!("CatalogSource {ns}/{name} {what}"), WAIT, || async {
        let st = serde_json::to_value(api.get(name).await.ok()?.status?).ok()?;
        ok(&st).then_some(st)
    })
    .await
}

/// READY with `configMapReference` naming the ConfigMap at the resourceVersion read and a
/// `lastConnect`, as OLM clients wait for; an edit of the ConfigMap moves the reference and the
/// catalog's content.
#[test]
fn config_map_catalog_is_ready_and_follows_an_edit() {
    crate::support::run(GROUP, 4, async {
        let _f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "cm-ready").await;
        let cm = config_map_catalog(&client, &ns.name, "catalog", catalog_data(&["0.1.0"])).await;
        let st = catalog_status(&client, &ns.name, "catalog", "READY", |st| {
            st["connectionState"]["lastObservedState"] == "READY"
        })
        .await;
        // The CatalogSource owns its ConfigMap, as OLM's catalog operator makes it (non-blocking,
        // not the controller): the reference is to the ConfigMap as it is after that write.
        let cm_now =
            Api::<ConfigMap>::namespaced(client.clone(), &ns.name).get("catalog").await.expect("read the ConfigMap");
        let owners = cm_now.metadata.owner_references.clone().unwrap_or_default();
        assert!(
            owners.iter().any(|o| o.kind == "CatalogSource" && o.name == "catalog" && o.controller == Some(false)),
            "{owners:?}"
        );
        let rv = cm_now.metadata.resource_version.clone().expect("resourceVersion");
        assert_eq!(st["configMapReference"]["name"], "catalog", "{st}");
        assert_eq!(st["configMapReference"]["namespace"], ns.name.as_str(), "{st}");
        assert_eq!(st["configMapReference"]["resourceVersion"], rv.as_str(), "{st}");
        assert_eq!(st["configMapReference"]["uid"], cm.metadata.uid.as_deref().unwrap_or_default(), "{st}");
        assert!(st["connectionState"]["lastConnect"].is_string(), "{st}");
        assert_eq!(st["packageCount"], 1, "{st}");
        assert!(st.get("resolvedImage").is_none(), "a ConfigMap is no image: {st}");
        let patch = json!({"data": catalog_data(&["0.1.0", "0.2.0"])});
        let edited = Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
            .patch("catalog", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("edit the ConfigMap");
        let new_rv = edited.metadata.resource_version.expect("resourceVersion");
        assert_ne!(new_rv, rv);
        let st = catalog_status(&client, &ns.name, "catalog", "at the edited resourceVersion", |st| {
            st["configMapReference"]["resourceVersion"] == new_rv.as_str()
        })
        .await;
        assert_eq!(st["connectionState"]["lastObservedState"], "READY", "{st}");
        assert!(st["message"].as_str().is_some_and(|m| m.contains("configmap://")), "{st}");
    })
}

/// A Subscription to a package of a ConfigMap catalog installs its bundle, which has no image:
/// the plan lists the bundle with an empty path and every step inline, the CSV Succeeds and its
/// Deployment is Available.
#[test]
fn subscription_installs_a_bundle_of_a_config_map_catalog() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = f.hold(namespace_with_group(&client, "cm-install").await);
        config_map_catalog(&client, &ns.name, "catalog", catalog_data(&["0.1.0", "0.2.0"])).await;
        catalog_status(&client, &ns.name, "catalog", "READY", |st| {
            st["connectionState"]["lastObservedState"] == "READY"
        })
        .await;
        create::<capstan::api::Subscription>(
            &client,
            &ns.name,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "nginx-operator", "namespace": ns.name},
                "spec": {"name": "nginx-operator", "channel": "alpha", "source": "catalog", "sourceNamespace": ns.name,
                         "installPlanApproval": "Automatic"}
            }),
        )
        .await;
        let plan: InstallPlan = plan_in_phase(&client, &ns.name, "nginx-operator", "Complete").await;
        let status = plan.status.expect("plan status");
        assert_eq!(status.bundle_lookups.len(), 1, "{:?}", status.bundle_lookups);
        assert_eq!(status.bundle_lookups[0].path, "", "a ConfigMap catalog's bundle has no image");
        assert_eq!(status.bundle_lookups[0].identifier, "nginx-operator.v0.2.0");
        let kinds: Vec<&str> = status.plan.iter().map(|s| s.resource.kind.as_str()).collect();
        assert!(kinds.contains(&"CustomResourceDefinition") && kinds.contains(&"ClusterServiceVersion"), "{kinds:?}");
        for step in &status.plan {
            let manifest: Value =
                serde_json::from_str(step.resource.manifest.as_deref().unwrap_or("{}")).expect("JSON");
            assert_eq!(manifest["kind"], step.resource.kind.as_str(), "every step inline: {manifest}");
        }
        csv_succeeded_and_deployment_available(&client, &ns.name).await;
    })
}

/// A ConfigMap that is missing, or whose content is not a catalog: TRANSIENT_FAILURE with
/// reason `ConfigMapError` and a message naming the ConfigMap and what to fix.
#[test]
fn config_map_that_is_missing_or_not_a_catalog_says_why() {
    crate::support::run(GROUP, 4, async {
        let _f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "cm-bad").await;
        create::<CatalogSource>(
            &client,
            &ns.name,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                "metadata": {"name": "missing", "namespace": ns.name},
                "spec": {"sourceType": "internal", "configMap": "nowhere"}
            }),
        )
        .await;
        let failed = |st: &Value| st["connectionState"]["lastObservedState"] == "TRANSIENT_FAILURE";
        let st = catalog_status(&client, &ns.name, "missing", "TRANSIENT_FAILURE", failed).await;
        assert_eq!(st["reason"], "ConfigMapError", "{st}");
        let want = format!("ConfigMap {}/nowhere (spec.configMap) does not exist", ns.name);
        assert!(st["message"].as_str().is_some_and(|m| m.contains(&want)), "{st}");
        let mut data = catalog_data(&["0.2.0"]);
        data.remove("packages");
        config_map_catalog(&client, &ns.name, "broken", data).await;
        let st = catalog_status(&client, &ns.name, "broken", "TRANSIENT_FAILURE", failed).await;
        assert_eq!(st["reason"], "ConfigMapError", "{st}");
        let want = format!("ConfigMap {}/broken is not a valid catalog: data.packages is missing", ns.name);
        assert!(st["message"].as_str().is_some_and(|m| m.contains(&want)), "{st}");
    })
}
