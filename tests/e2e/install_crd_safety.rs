//! `install::crd_safety::check_plan_crds` against the real local control plane (case-21 of
//! `shared/cases/olm-cases.yaml`): an upgrade whose CRD makes a field required
//! that an existing object lacks is refused naming the object and the field, and goes through once
//! the object is gone; a CRD that drops a version still in `status.storedVersions` is refused naming
//! the version, and goes through once the admin has migrated and pruned `storedVersions`.
//!
//! And `check_crd_upgrade`'s schema verdicts agree with the API server's on a table of values
//! (one test over the whole table: it lists every disagreement at once).
//!
//! One scenario per test. Every test uses CRDs of its own group (`<random>.capstan.test`),
//! deleted at the end, because the control plane is shared by all tests of the worktree.

use std::time::Duration;

use crate::support::{TestNamespace, eventually};
use capstan::bundle::Bundle;
use capstan::install::crd_safety::{CrdUpgradeError, LIST_PAGE_SIZE, check_plan_crds, check_plan_crds_outcome};
use capstan::install::{InstallTarget, Step};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Deletes its CRD (and so every object of it) when dropped, as [`TestNamespace`] does.
struct CrdGuard(String);

impl Drop for CrdGuard {
    fn drop(&mut self) {
        let name = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(rt) = rt {
                rt.block_on(async move {
                    if let Ok(client) = kube::Client::try_from(crate::support::admin_config().await) {
                        let _ = Api::<CustomResourceDefinition>::all(client)
                            .delete(&name, &DeleteParams::background())
                            .await;
                    }
                });
            }
        })
        .join();
    }
}

/// A fresh API group for one test.
fn unique_group(prefix: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{prefix}{:08x}{:04x}.capstan.test", nanos, std::process::id() & 0xffff)
}

/// A CRD step as `install::plan::steps` makes it.
fn crd_step(manifest: Value) -> Step {
    Step {
        resolving: "test.v2.0.0".into(),
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        kind: "CustomResourceDefinition".into(),
        name: manifest["metadata"]["name"].as_str().expect("CRD name").to_string(),
        namespace: None,
        manifest,
    }
}

/// Creates or replaces `crd` on the cluster and waits until it is Established.
async fn put_crd(client: &kube::Client, crd: &Value) -> CustomResourceDefinition {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd["metadata"]["name"].as_str().expect("CRD name").to_string();
    let mut typed: CustomResourceDefinition = serde_json::from_value(crd.clone()).expect("CRD object");
    match api.get_opt(&name).await.expect("get CRD") {
        None => {
            api.create(&PostParams::default(), &typed).await.expect("create CRD");
        }
        Some(current) => {
            typed.metadata.resource_version = current.metadata.resource_version;
            typed.status = None;
            api.replace(&name, &PostParams::default(), &typed).await.expect("replace CRD");
        }
    }
    eventually(&format!("CRD {name} Established"), Duration::from_secs(30), || {
        let api = api.clone();
        let name = name.clone();
        async move {
            let c = api.get(&name).await.ok()?;
            let established =
                c.status.as_ref()?.conditions.as_ref()?.iter().any(|c| c.type_ == "Established" && c.status == "True");
            established.then_some(c)
        }
    })
    .await
}

fn resource(crd: &Value, version: &str) -> ApiResource {
    let group = crd["spec"]["group"].as_str().expect("group").to_string();
    ApiResource {
        api_version: format!("{group}/{version}"),
        group,
        version: version.into(),
        kind: crd["spec"]["names"]["kind"].as_str().expect("kind").into(),
        plural: crd["spec"]["names"]["plural"].as_str().expect("plural").into(),
    }
}

/// Creates an object, retrying while the new API is still being set up (404 right after
/// Established happens on a loaded API server).
async fn create(client: &kube::Client, ns: &str, res: &ApiResource, obj: Value) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, res);
    let obj: DynamicObject = serde_json::from_value(obj).expect("object");
    eventually("object created", Duration::from_secs(30), || {
        let api = api.clone();
        let obj = obj.clone();
        async move { api.create(&PostParams::default(), &obj).await.ok() }
    })
    .await;
}

/// The kaiwudb-operator 1.2.0 bundle planned into `ns`, with its KaiwuCluster CRD moved to `group`
/// so that the test owns the CRD.
fn kaiwudb_steps(ns: &str, group: &str) -> Vec<Step> {
    let bundle = Bundle::load(&crate::support::repo_root().join("bundles/kaiwudb-operator/1.2.0"))
        .expect("kaiwudb 1.2.0 bundle");
    let target = InstallTarget {
        namespace: ns.into(),
        target_namespaces: vec![ns.into()],
        package: bundle.package().into(),
        csv_name: bundle.name().into(),
        ..Default::default()
    };
    let mut steps = capstan::install::steps(&bundle, &target).expect("plan kaiwudb 1.2.0");
    let crd = steps.iter_mut().find(|s| s.kind == "CustomResourceDefinition").expect("bundle has a CRD step");
    let name = format!("kaiwuclusters.{group}");
    crd.manifest["metadata"]["name"] = json!(name);
    crd.manifest["spec"]["group"] = json!(group);
    crd.name = name;
    steps
}

/// The CRD step's manifest, mutable.
fn crd_manifest(steps: &mut [Step]) -> &mut Value {
    &mut steps.iter_mut().find(|s| s.kind == "CustomResourceDefinition").expect("CRD step").manifest
}

/// Creates KaiwuClusters `kc-no-image` (no spec.image) and `kc-with-image` in `ns`.
async fn create_with_and_without_image(client: &kube::Client, ns: &str, res: &ApiResource) {
    create(
        client,
        ns,
        res,
        json!({
            "apiVersion": res.api_version, "kind": "KaiwuCluster",
            "metadata": {"name": "kc-no-image", "namespace": ns},
            "spec": {"replicas": 3, "version": "2.2.0"}
        }),
    )
    .await;
    create(
        client,
        ns,
        res,
        json!({
            "apiVersion": res.api_version, "kind": "KaiwuCluster",
            "metadata": {"name": "kc-with-image", "namespace": ns},
            "spec": {"replicas": 1, "version": "2.2.0", "image": "kaiwudb/kaiwudb:2.2.0"}
        }),
    )
    .await;
}

/// `check_plan_crds` refuses `upgrade` with one InvalidObjects error naming `kc-no-image` and its
/// missing spec.image, and not `kc-with-image`.
async fn assert_refused_naming_only_kc_no_image(client: &kube::Client, upgrade: &[Step], ns: &str, group: &str) {
    let errors = check_plan_crds(client, upgrade).await.expect_err("the upgrade must be refused");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let CrdUpgradeError::InvalidObjects { crd, version, objects, total, .. } = &errors[0] else {
        panic!("expected InvalidObjects, got {errors:#?}")
    };
    assert_eq!((crd.as_str(), version.as_str(), *total), (format!("kaiwuclusters.{group}").as_str(), "v1", 1));
    assert_eq!(objects[0].key(), format!("{ns}/kc-no-image"));
    let message = errors[0].to_string();
    eprintln!("refusal message: {message}");
    assert!(message.contains(&format!("{ns}/kc-no-image (spec.image: Required value)")), "{message}");
    assert!(!message.contains("kc-with-image"), "{message}");
}

/// The KaiwuCluster CRD of `group` on the cluster does not require spec.image.
async fn assert_installed_crd_does_not_require_image(client: &kube::Client, group: &str) {
    let on_cluster =
        Api::<CustomResourceDefinition>::all(client.clone()).get(&format!("kaiwuclusters.{group}")).await.expect("CRD");
    let spec_required = on_cluster.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("spec"))
        .and_then(|s| s.required.clone())
        .unwrap_or_default();
    assert!(!spec_required.contains(&"image".to_string()), "{spec_required:?}");
}

/// Deletes object `name` of `res` in `ns` and waits until it is gone.
async fn delete_and_wait_gone(client: &kube::Client, ns: &str, res: &ApiResource, name: &str) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, res);
    api.delete(name, &DeleteParams::default()).await.expect("delete object");
    eventually(&format!("{name} gone"), Duration::from_secs(30), || {
        let api = api.clone();
        async move { api.get_opt(name).await.ok().and_then(|o| o.is_none().then_some(())) }
    })
    .await;
}

/// An upgrade whose CRD makes spec.image required is refused naming the one object without it
/// (the check changes nothing on the cluster), and goes through once that object is deleted.
#[test]
fn a_new_required_field_that_an_existing_object_lacks_refuses_the_plan_until_the_object_is_gone() {
    crate::support::run("install_crd_safety", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "crdsafety-req").await;
        let group = unique_group("req");

        // Installed: kaiwudb 1.2.0's CRD (spec.image optional) and an object without spec.image.
        let mut installed = kaiwudb_steps(&ns.name, &group);
        let installed_crd = crd_manifest(&mut installed).clone();
        let _guard = CrdGuard(installed_crd["metadata"]["name"].as_str().expect("name").into());
        put_crd(&client, &installed_crd).await;
        let res = resource(&installed_crd, "v1");
        create_with_and_without_image(&client, &ns.name, &res).await;

        // The plan as it stands (same CRD) passes.
        assert_eq!(check_plan_crds(&client, &installed).await, Ok(()));

        // "2.0": the same bundle whose CRD requires spec.image.
        let mut upgrade = kaiwudb_steps(&ns.name, &group);
        let required = &mut crd_manifest(&mut upgrade)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
            ["spec"]["required"];
        required.as_array_mut().expect("spec.required").push(json!("image"));

        assert_refused_naming_only_kc_no_image(&client, &upgrade, &ns.name, &group).await;

        // The check reads only: the CRD on the cluster is unchanged.
        assert_installed_crd_does_not_require_image(&client, &group).await;

        // Removing the object lets the upgrade through.
        delete_and_wait_gone(&client, &ns.name, &res, "kc-no-image").await;
        assert_eq!(check_plan_crds(&client, &upgrade).await, Ok(()));
    })
}

/// case-21: a CRD that drops a version still listed in `status.storedVersions` is refused, and the
/// documented remediation (rewrite stored objects, prune storedVersions) lets it through without
/// uninstalling anything.
#[test]
fn case_21_dropping_a_stored_version_is_refused_until_stored_versions_are_migrated() {
    crate::support::run("install_crd_safety", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "crdsafety-stored").await;
        let group = unique_group("agents");
        let name = format!("agents.{group}");
        let _guard = CrdGuard(name.clone());
        let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}});
        let crd = |versions: Value| {
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": name},
                "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "agents", "singular": "agent", "kind": "Agent", "listKind": "AgentList"},
                    "versions": versions}
            })
        };
        let version = |n: &str, storage: bool| json!({"name": n, "served": true, "storage": storage, "schema": schema});

        // agent 1.7.0 before its storage move: v1alpha1 stored; one object written then.
        let v1alpha1_storage = crd(json!([version("v1alpha1", true), version("v2alpha1", false)]));
        put_crd(&client, &v1alpha1_storage).await;
        let old_res = resource(&v1alpha1_storage, "v1alpha1");
        create(
            &client,
            &ns.name,
            &old_res,
            json!({
                "apiVersion": old_res.api_version, "kind": "Agent",
                "metadata": {"name": "agent-1", "namespace": ns.name}, "spec": {"size": 1}
            }),
        )
        .await;
        // agent 1.7.0 as installed: storage moved to v2alpha1, so storedVersions is [v1alpha1, v2alpha1].
        let v1_7_0 = crd(json!([version("v1alpha1", false), version("v2alpha1", true)]));
        let installed = put_crd(&client, &v1_7_0).await;
        let stored = installed.status.and_then(|s| s.stored_versions).unwrap_or_default();
        assert_eq!(stored, ["v1alpha1", "v2alpha1"]);

        // agent 1.8.0's CRD keeps only v2alpha1: refused, naming the version and the remediation.
        let v1_8_0 = vec![crd_step(crd(json!([version("v2alpha1", true)])))];
        let errors = check_plan_crds(&client, &v1_8_0).await.expect_err("dropping a stored version must be refused");
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            matches!(&errors[0], CrdUpgradeError::StoredVersionRemoved { version, .. } if version == "v1alpha1"),
            "{errors:#?}"
        );
        let message = errors[0].to_string();
        eprintln!("refusal message: {message}");
        for needle in [
            format!("CRD {name}"),
            "version v1alpha1 would be removed but is still listed in status.storedVersions".to_string(),
            "rewrite stored objects".to_string(),
            "drop v1alpha1 from storedVersions".to_string(),
        ] {
            assert!(message.contains(&needle), "message lacks {needle:?}: {message}");
        }

        // The admin follows the message: rewrite every object (stored at v2alpha1 now), then prune.
        let new_res = resource(&v1_7_0, "v2alpha1");
        let agents: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &new_res);
        let mut agent = agents.get("agent-1").await.expect("agent-1");
        agent.metadata.managed_fields = None;
        agents.replace("agent-1", &PostParams::default(), &agent).await.expect("rewrite agent-1");
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"storedVersions": ["v2alpha1"]}})),
        )
        .await
        .expect("prune storedVersions");

        assert_eq!(check_plan_crds(&client, &v1_8_0).await, Ok(()));
    })
}

/// More objects than one list page: all are read (pagination) and counted, five are named.
#[test]
fn objects_beyond_one_list_page_are_all_checked() {
    crate::support::run("install_crd_safety", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "crdsafety-many").await;
        let group = unique_group("many");
        let name = format!("gadgets.{group}");
        let _guard = CrdGuard(name.clone());
        let crd = |required: Value| {
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": name},
                "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "required": required,
                            "properties": {"size": {"type": "integer"}, "owner": {"type": "string"}}}}}}}]}
            })
        };
        let installed = crd(json!(["size"]));
        put_crd(&client, &installed).await;
        let res = resource(&installed, "v1");
        // Warm up the new API (its discovery may lag Established), then create the rest concurrently.
        create(
            &client,
            &ns.name,
            &res,
            json!({
                "apiVersion": res.api_version, "kind": "Gadget", "metadata": {"name": "g-0000"}, "spec": {"size": 0}
            }),
        )
        .await;
        let count = LIST_PAGE_SIZE as usize + 20;
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &res);
        futures::stream::iter(1..count)
            .map(|i| {
                let api = api.clone();
                let obj: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": res.api_version, "kind": "Gadget",
                    "metadata": {"name": format!("g-{i:04}")}, "spec": {"size": i}
                }))
                .expect("object");
                async move { api.create(&PostParams::default(), &obj).await.map(|_| ()) }
            })
            .buffer_unordered(8)
            .try_collect::<Vec<()>>()
            .await
            .expect("create objects");

        let upgrade = vec![crd_step(crd(json!(["size", "owner"])))];
        let outcome = check_plan_crds_outcome(&client, &upgrade).await;
        assert_eq!(outcome.errors.len(), 1, "{:#?}", outcome.errors);
        let CrdUpgradeError::InvalidObjects { objects, total, .. } = &outcome.errors[0] else {
            panic!("expected InvalidObjects, got {:#?}", outcome.errors)
        };
        assert_eq!(*total, count);
        let names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["g-0000", "g-0001", "g-0002", "g-0003", "g-0004"]);
        let message = outcome.errors[0].to_string();
        assert!(message.contains(&format!("{count} existing Gadget objects")), "{message}");
        assert!(message.contains(&format!("; and {} more.", count - 5)), "{message}");
    })
}

/// A CRD that is not on the cluster yet is checked only for its own versions, and a plan with a
/// broken storage-version rule is refused before anything is created.
#[test]
fn new_crds_are_checked_for_their_own_versions_only() {
    crate::support::run("install_crd_safety", 0, async {
        let client = crate::support::cluster().await;
        let group = unique_group("fresh");
        let name = format!("widgets.{group}");
        let crd = |storage_v2: bool| {
            crd_step(json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": name},
                "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                    "versions": [
                        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
                        {"name": "v2", "served": true, "storage": storage_v2, "schema": {"openAPIV3Schema": {"type": "object"}}}
                    ]}
            }))
        };
        assert_eq!(check_plan_crds(&client, &[crd(false)]).await, Ok(()));
        let errors = check_plan_crds(&client, &[crd(true)]).await.expect_err("two storage versions");
        let message = errors[0].to_string();
        assert!(
            message.contains(&format!(
                "CRD {name}: spec.versions must have exactly one version marked as storage version"
            )),
            "{message}"
        );
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        assert!(crds.get_opt(&name).await.expect("get CRD").is_none(), "the check must not create the CRD");
    })
}

/// The CRD `probes.<group>` of the oracle test: one property of its spec per schema keyword of
/// the brief (types, enum, bounds, pattern in Go syntax, lengths, items, nullable, int-or-string,
/// nested required, maps, multipleOf, anyOf).
fn probe_crd(name: &str, group: &str) -> Value {
    let props = json!({
        "int": {"type": "integer", "minimum": 1, "maximum": 9},
        "num": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
        "str": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
        "color": {"type": "string", "enum": ["red", "blue"]},
        "ios": {"x-kubernetes-int-or-string": true},
        "nul": {"type": "string", "nullable": true},
        "list": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "ci": {"type": "string", "pattern": "^((?i)jan|feb)$"},
        "posix": {"type": "string", "pattern": "^[[:digit:]]+$"},
        "obj": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
        "map": {"type": "object", "additionalProperties": {"type": "integer"}},
        "mult": {"type": "integer", "multipleOf": 5},
        "far": {"type": "integer", "anyOf": [{"minimum": 5}, {"maximum": -5}]},
        "flag": {"type": "boolean"}
    });
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "probes", "singular": "probe", "kind": "Probe", "listKind": "ProbeList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}]}
    })
}

/// The values of the oracle test: (field of the Probe's spec, value), accepted and refused ones
/// for every property of [`probe_crd`].
fn probe_values() -> Vec<(&'static str, Value)> {
    vec![
        ("int", json!(0)),
        ("int", json!(1)),
        ("int", json!(9)),
        ("int", json!(10)),
        ("int", json!("3")),
        ("int", json!(2.5)),
        ("num", json!(0)),
        ("num", json!(0.5)),
        ("num", json!("x")),
        ("str", json!("a")),
        ("str", json!("ab")),
        ("str", json!("abcde")),
        ("str", json!("AB")),
        ("str", json!(12)),
        ("color", json!("red")),
        ("color", json!("green")),
        ("ios", json!(5)),
        ("ios", json!("5")),
        ("ios", json!(true)),
        ("nul", json!(null)),
        ("nul", json!("x")),
        ("nul", json!(3)),
        ("list", json!([])),
        ("list", json!(["a"])),
        ("list", json!(["a", "b", "c"])),
        ("list", json!([1])),
        ("ci", json!("JAN")),
        ("ci", json!("feb")),
        ("ci", json!("mar")),
        ("posix", json!("123")),
        ("posix", json!("12a")),
        ("obj", json!({})),
        ("obj", json!({"a": "x"})),
        ("obj", json!({"a": 1})),
        ("map", json!({"k": 1})),
        ("map", json!({"k": "v"})),
        ("mult", json!(10)),
        ("mult", json!(7)),
        ("far", json!(0)),
        ("far", json!(6)),
        ("far", json!(-6)),
        ("flag", json!(true)),
        ("flag", json!("true")),
        // Known difference: the API server prunes a null of a non-nullable field on write, so no
        // stored object holds one; capstan's validator, like OLM's, refuses it (checked below).
        ("int", json!(null)),
    ]
}

/// The API server's verdict on creating `object` (a dry run): accepted, or refused (422) with its
/// message; other errors are retried (the new API may not be served yet).
async fn server_verdict(api: &Api<DynamicObject>, object: &Value) -> Result<(), String> {
    let typed: DynamicObject = serde_json::from_value(object.clone()).expect("object");
    let dry_run = PostParams { dry_run: true, ..Default::default() };
    eventually("a dry-run verdict", Duration::from_secs(30), || {
        let api = api.clone();
        let typed = typed.clone();
        let dry_run = dry_run.clone();
        async move {
            match api.create(&dry_run, &typed).await {
                Ok(_) => Some(Ok(())),
                Err(kube::Error::Api(s)) if s.code == 422 => Some(Err(s.message)),
                Err(_) => None, // the new API may not be served yet
            }
        }
    })
    .await
}

/// capstan's schema validation agrees with the API server's own: each value of [`probe_values`]
/// is sent to the server (dry-run create) and to `check_crd_upgrade`, and both must accept or
/// refuse it alike. One table: every disagreement is listed at once.
#[test]
fn schema_verdicts_agree_with_the_api_server() {
    crate::support::run("install_crd_safety", 0, async {
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "crdsafety-oracle").await;
        let group = unique_group("oracle");
        let name = format!("probes.{group}");
        let _guard = CrdGuard(name.clone());
        let crd = probe_crd(&name, &group);
        let installed = put_crd(&client, &crd).await;
        let res = resource(&crd, "v1");
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &res);
        let cases = probe_values();
        let mut disagreements = Vec::new();
        let mut refused = 0;
        for (i, (field, value)) in cases.iter().enumerate() {
            let object = json!({"apiVersion": res.api_version, "kind": "Probe",
            "metadata": {"name": format!("p-{i}"), "namespace": ns.name}, "spec": {*field: value}});
            let server = server_verdict(&api, &object).await;
            refused += usize::from(server.is_err());
            let ours = check_plan_crds_outcome_for(&installed, &crd, &object);
            let expected_difference = *field == "int" && value.is_null();
            if expected_difference {
                assert!(server.is_ok() && ours.is_err(), "null in spec.int: API server {server:?}, capstan {ours:?}");
            } else if server.is_ok() != ours.is_ok() {
                disagreements.push(format!("spec.{field} = {value}: API server {server:?}, capstan {ours:?}"));
            }
        }
        assert!(disagreements.is_empty(), "capstan and the API server disagree:\n{}", disagreements.join("\n"));
        eprintln!(
            "{} values: the API server refused {refused}; capstan agreed on all but the known null case",
            cases.len()
        );
        assert!(
            refused >= 15 && cases.len() - refused >= 15,
            "the cases must exercise both verdicts: {refused} refused"
        );
    })
}

/// `check_crd_upgrade` of one object with the new CRD = `crd` (the installed one as existing).
fn check_plan_crds_outcome_for(
    installed: &CustomResourceDefinition,
    crd: &Value,
    object: &Value,
) -> Result<(), String> {
    let new: CustomResourceDefinition = serde_json::from_value(crd.clone()).expect("CRD");
    capstan::install::crd_safety::check_crd_upgrade(Some(installed), &new, &[("v1".into(), object.clone())])
        .map_err(|e| capstan::install::crd_safety::describe_all(&e))
}
