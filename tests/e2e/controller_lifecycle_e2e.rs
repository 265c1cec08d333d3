//! `capstan controller` lifecycle end to end (cases 08, 23, 27 of `olm-cases.yaml`
//! on the real control plane): upgrades driven by a new catalog digest
//! (registry poll), one edge per InstallPlan, pinned upgrades by `versionRange`, a catalog outage
//! after the install, and Manual approval flows (a superseded pending plan, a deleted pending
//! plan, switching Manual → Automatic).
//!
//! Upgrade semantics (`reference/olm-v0.md` §4.4): each resolution moves one edge from the
//! installed CSV — to the newest entry that replaces, skips or skip-ranges it. kaiwudb-operator
//! 1.2.0 carries `olm.skipRange: ">=1.0.0 <1.2.0"`, so with 1.1.0 and 1.2.0 published together a
//! cluster on 1.0.0 goes straight to 1.2.0, as OLM does; the multi-hop case uses a copy of 1.2.0
//! without that annotation (1.2.0 replaces 1.1.0 only), which must go 1.0.0 → 1.1.0 → 1.2.0.
//!
//! One test function (one controller per test binary: it watches every namespace).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::controller::*;
use crate::support::{TestNamespace, eventually};
use capstan::api::{ClusterServiceVersion, InstallPlan, Subscription};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

fn copy_dir(from: &Path, to: &Path, edit: &dyn Fn(&Path, String) -> String) {
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let p = e.path();
        let dest = to.join(e.file_name());
        if p.is_dir() {
            std::fs::create_dir_all(&dest).expect("mkdir");
            copy_dir(&p, &dest, edit);
        } else {
            let text = std::fs::read_to_string(&p).expect("read");
            std::fs::write(&dest, edit(&p, text)).expect("write");
        }
    }
}

/// Pushes the bundles and (re)pushes catalog `name` from scratch with exactly `bundles`
/// (directories, with their image tag suffix); returns the catalog reference.
fn push_catalog(registry: &str, repo: &str, work: &Path, name: &str, bundles: &[(PathBuf, &str)]) -> String {
    let dir = work.join(format!("{name}-{}", bundles.len()));
    let _ = std::fs::remove_dir_all(&dir);
    for (b, tag) in bundles {
        let package = b.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or("x").to_string();
        let package = package.trim_end_matches("-noskip").to_string();
        let reference = format!("{registry}/{repo}/{package}-bundle:{tag}");
        capstan(&["bundle", "push", "-q", b.to_str().unwrap_or_default(), &reference]);
        capstan(&["catalog", "add", dir.to_str().unwrap_or_default(), &reference]);
    }
    let reference = format!("{registry}/{repo}/{name}:latest");
    capstan(&["catalog", "push", "-q", dir.to_str().unwrap_or_default(), &reference]);
    reference
}

async fn polled_catalog(client: &kube::Client, ns: &str, name: &str, image: &str) {
    create::<capstan::api::CatalogSource>(
        client,
        ns,
        json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"sourceType": "grpc", "image": image, "updateStrategy": {"registryPoll": {"interval": "2s"}}}
        }),
    )
    .await;
}

async fn subscription(client: &kube::Client, ns: &str, source: &str, approval: &str) {
    create::<Subscription>(client, ns, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "kaiwudb-operator", "namespace": ns},
        "spec": {"name": "kaiwudb-operator", "channel": "stable", "source": source, "sourceNamespace": ns, "installPlanApproval": approval}
    }))
    .await;
}

async fn kaiwudb_csvs(client: &kube::Client, ns: &str) -> Vec<String> {
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let mut names: Vec<String> = csvs
        .list(&Default::default())
        .await
        .expect("csvs")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.starts_with("kaiwudb"))
        .collect();
    names.sort();
    names
}

/// Every InstallPlan of `ns` as (name, CSV names, phase).
async fn plans(client: &kube::Client, ns: &str) -> Vec<(String, Vec<String>, String, bool)> {
    let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    api.list(&Default::default())
        .await
        .expect("plans")
        .items
        .into_iter()
        .map(|p| {
            let phase = p
                .status
                .as_ref()
                .and_then(|s| serde_json::to_value(&s.phase).ok())
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            (p.metadata.name.unwrap_or_default(), p.spec.cluster_service_version_names, phase, p.spec.approved)
        })
        .collect()
}

async fn pending_plan_for(client: &kube::Client, ns: &str, csv: &str) -> String {
    eventually(&format!("a plan for {csv} in RequiresApproval in {ns}"), WAIT, || async {
        plans(client, ns)
            .await
            .into_iter()
            .find(|(_, c, ph, _)| c.iter().any(|n| n == csv) && ph == "RequiresApproval")
            .map(|p| p.0)
    })
    .await
}

async fn approve(client: &kube::Client, ns: &str, plan: &str) {
    Api::<InstallPlan>::namespaced(client.clone(), ns)
        .patch(plan, &PatchParams::default(), &Patch::Merge(json!({"spec": {"approved": true}})))
        .await
        .expect("approve");
}

async fn subscription_status(client: &kube::Client, ns: &str) -> Value {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    serde_json::to_value(subs.get("kaiwudb-operator").await.expect("sub").status).unwrap_or_default()
}

#[test]
fn controller_upgrades_and_approval_flows() {
    crate::support::run("controller_lifecycle_e2e", 4, async {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "capstan=info".into()),
            )
            .try_init();
        let client = crate::support::cluster().await;
        let registry = crate::support::registry();
        let work = tempfile::tempdir().expect("tempdir");
        let repo = format!("ctl-life-{}", std::process::id());
        apply_crds(&client).await;

        let root = crate::support::repo_root().join("bundles");
        let k = |v: &str| root.join("kaiwudb-operator").join(v);
        let nginx = root.join("nginx-operator").join("0.2.0");
        let noskip = work.path().join("kaiwudb-operator-noskip").join("1.2.0");
        std::fs::create_dir_all(&noskip).expect("mkdir");
        copy_dir(&k("1.2.0"), &noskip, &|p, text| {
            if p.to_string_lossy().contains("clusterserviceversion") {
                text.lines().filter(|l| !l.contains("olm.skipRange")).collect::<Vec<_>>().join("\n") + "\n"
            } else {
                text
            }
        });
        let base = [(nginx.clone(), "v0.2.0"), (k("1.0.0"), "v1.0.0")];
        let with = |extra: &[(PathBuf, &'static str)]| -> Vec<(PathBuf, &'static str)> {
            base.iter().cloned().chain(extra.iter().cloned()).collect()
        };

        let global = TestNamespace::new(&client, "ctl-life-global").await;
        let options = capstan::controller::Options {
            global_catalog_namespace: global.name.clone(),
            catalog_cache: None,
            ..Default::default()
        };
        let controller = tokio::spawn(capstan::controller::run(client.clone(), options, std::future::pending()));

        // 1. Automatic, one edge per plan: 1.0.0 → 1.1.0 → 1.2.0 (1.2.0 without skipRange).
        let auto = namespace_with_global_group(&client, "ctl-life-auto").await;
        let image = push_catalog(&registry, &repo, work.path(), "hops", &with(&[]));
        polled_catalog(&client, &auto.name, "hops", &image).await;
        subscription(&client, &auto.name, "hops", "Automatic").await;
        csv_version_succeeded(&client, &auto.name, "kaiwudb-operator.v1.0.0").await;
        push_catalog(
            &registry,
            &repo,
            work.path(),
            "hops",
            &with(&[(k("1.1.0"), "v1.1.0"), (noskip.clone(), "v1.2.0-noskip")]),
        );
        csv_version_succeeded(&client, &auto.name, "kaiwudb-operator.v1.2.0").await;
        eventually("only the last kaiwudb CSV left", WAIT, || async {
            (kaiwudb_csvs(&client, &auto.name).await == ["kaiwudb-operator.v1.2.0"]).then_some(())
        })
        .await;
        // RBAC of the last version only: the replaced CSVs' generated cluster RBAC went with them.
        for (csv, want) in
            [("kaiwudb-operator.v1.0.0", false), ("kaiwudb-operator.v1.1.0", false), ("kaiwudb-operator.v1.2.0", true)]
        {
            let sel =
                kube::api::ListParams::default().labels(&format!("olm.owner={csv},olm.owner.namespace={}", auto.name));
            eventually(&format!("cluster RBAC of {csv} present={want}"), WAIT, || async {
                let crs = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(client.clone())
                    .list(&sel)
                    .await
                    .ok()?
                    .items
                    .len();
                let crbs = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
                    .list(&sel)
                    .await
                    .ok()?
                    .items
                    .len();
                ((crs > 0 && crbs > 0) == want && (crs == 0 && crbs == 0) != want).then_some((crs, crbs))
            })
            .await;
        }
        // The operator's Deployment was updated in place (a rolling update), not removed with the
        // replaced CSVs: it is still there and Available.
        tokio::time::sleep(Duration::from_secs(2)).await;
        csv_version_succeeded(&client, &auto.name, "kaiwudb-operator.v1.2.0").await;
        let ps = eventually("every plan terminal", WAIT, || async {
            let ps = plans(&client, &auto.name).await;
            ps.iter().all(|(_, _, ph, _)| ph == "Complete" || ph == "Failed").then_some(ps)
        })
        .await;
        let has = |csv: &str| ps.iter().filter(|(_, c, ph, _)| c.iter().any(|n| n == csv) && ph == "Complete").count();
        assert_eq!(
            (has("kaiwudb-operator.v1.0.0"), has("kaiwudb-operator.v1.1.0"), has("kaiwudb-operator.v1.2.0")),
            (1, 1, 1),
            "one plan per edge: {ps:?}"
        );
        assert!(
            ps.iter().all(|(_, c, _, _)| c.iter().filter(|n| n.starts_with("kaiwudb")).count() == 1),
            "never two kaiwudb versions in one plan: {ps:?}"
        );
        let csv = Api::<ClusterServiceVersion>::namespaced(client.clone(), &auto.name)
            .get("kaiwudb-operator.v1.2.0")
            .await
            .expect("csv");
        assert_eq!(csv.spec.replaces.as_deref(), Some("kaiwudb-operator.v1.1.0"));
        eventually("Subscription AtLatestKnown on 1.2.0", WAIT, || async {
            let st = subscription_status(&client, &auto.name).await;
            (st["state"] == "AtLatestKnown"
                && st["installedCSV"] == "kaiwudb-operator.v1.2.0"
                && st["currentCSV"] == "kaiwudb-operator.v1.2.0")
                .then_some(())
        })
        .await;

        // case-27: the catalog becomes unreachable after the install. The install stays reported as
        // installed and healthy; one condition says the catalog cannot be loaded and resolution waits.
        let catalogs: Api<capstan::api::CatalogSource> = Api::namespaced(client.clone(), &auto.name);
        let good_image = catalogs.get("hops").await.expect("catalog").spec.image.clone().unwrap_or_default();
        let set_image = |img: String| {
            let catalogs = catalogs.clone();
            async move {
                catalogs
                    .patch("hops", &PatchParams::default(), &Patch::Merge(json!({"spec": {"image": img}})))
                    .await
                    .expect("patch CatalogSource")
            }
        };
        set_image(format!("{registry}/{repo}/unreachable:latest")).await;
        let c =
            subscription_condition(&client, &auto.name, "kaiwudb-operator", "CatalogSourcesUnhealthy", "True").await;
        let m = c["message"].as_str().unwrap_or_default().to_string();
        assert!(m.contains("unreachable") && m.contains("kaiwudb-operator.v1.2.0") && m.contains("kept"), "{m}");
        let st = subscription_status(&client, &auto.name).await;
        assert_eq!(st["installedCSV"], "kaiwudb-operator.v1.2.0", "{st}");
        assert_eq!(st["state"], "AtLatestKnown", "{st}");
        assert!(
            !st["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "ResolutionFailed" && c["status"] == "True"),
            "not reported as unresolved: {st}"
        );
        let phase = serde_json::to_value(
            Api::<ClusterServiceVersion>::namespaced(client.clone(), &auto.name)
                .get("kaiwudb-operator.v1.2.0")
                .await
                .expect("csv")
                .status,
        )
        .expect("st")["phase"]
            .clone();
        assert_eq!(phase, "Succeeded");
        let before = plans(&client, &auto.name).await.len();
        set_image(good_image).await;
        subscription_condition(&client, &auto.name, "kaiwudb-operator", "CatalogSourcesUnhealthy", "False").await;
        assert_eq!(plans(&client, &auto.name).await.len(), before, "nothing re-applied because of the outage");
        // Each part installs kaiwudb-operator with an AllNamespaces group: two such groups providing
        // the same APIs at once are an InterOperatorGroupOwnerConflict (as in OLM), so each part's
        // group goes before the next part starts.
        release_group(&client, &auto.name).await;

        // case-08: pinned upgrades by versionRange, one after another; status follows each hop.
        let pin = namespace_with_global_group(&client, "ctl-life-pin").await;
        let image = push_catalog(
            &registry,
            &repo,
            work.path(),
            "pin",
            &with(&[(k("1.1.0"), "v1.1.0"), (noskip.clone(), "v1.2.0-noskip")]),
        );
        polled_catalog(&client, &pin.name, "pin", &image).await;
        create::<Subscription>(&client, &pin.name, json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "kaiwudb-operator", "namespace": pin.name},
        "spec": {"name": "kaiwudb-operator", "channel": "stable", "source": "pin", "sourceNamespace": pin.name, "versionRange": "1.0.0"}
    }))
    .await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), &pin.name);
        for v in ["1.0.0", "1.1.0", "1.2.0"] {
            if v != "1.0.0" {
                subs.patch(
                    "kaiwudb-operator",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"versionRange": v}})),
                )
                .await
                .expect("set versionRange");
            }
            let csv = format!("kaiwudb-operator.v{v}");
            csv_version_succeeded(&client, &pin.name, &csv).await;
            eventually(&format!("installedCSV {csv}"), WAIT, || async {
                let st = subscription_status(&client, &pin.name).await;
                (st["installedCSV"] == csv.as_str() && st["state"] == "AtLatestKnown").then_some(())
            })
            .await;
        }
        eventually("only 1.2.0 left", WAIT, || async {
            (kaiwudb_csvs(&client, &pin.name).await == ["kaiwudb-operator.v1.2.0"]).then_some(())
        })
        .await;
        release_group(&client, &pin.name).await;

        // The same catalog with the real 1.2.0 (skipRange >=1.0.0 <1.2.0): one hop, as OLM does.
        let jump = namespace_with_global_group(&client, "ctl-life-jump").await;
        let image = push_catalog(&registry, &repo, work.path(), "jump", &with(&[]));
        polled_catalog(&client, &jump.name, "jump", &image).await;
        subscription(&client, &jump.name, "jump", "Automatic").await;
        csv_version_succeeded(&client, &jump.name, "kaiwudb-operator.v1.0.0").await;
        push_catalog(&registry, &repo, work.path(), "jump", &with(&[(k("1.1.0"), "v1.1.0"), (k("1.2.0"), "v1.2.0")]));
        csv_version_succeeded(&client, &jump.name, "kaiwudb-operator.v1.2.0").await;
        eventually("1.0.0 replaced", WAIT, || async {
            (kaiwudb_csvs(&client, &jump.name).await == ["kaiwudb-operator.v1.2.0"]).then_some(())
        })
        .await;
        let ps = plans(&client, &jump.name).await;
        assert!(
            !ps.iter().any(|(_, c, _, _)| c.iter().any(|n| n == "kaiwudb-operator.v1.1.0")),
            "1.1.0 is skipped: {ps:?}"
        );
        release_group(&client, &jump.name).await;

        // 2. Manual: nothing applied before approval; a pending plan superseded by a newer bundle is
        //    marked and cannot be approved into an install; a deleted pending plan comes back;
        //    switching to Automatic approves the pending plan.
        let manual = namespace_with_global_group(&client, "ctl-life-manual").await;
        let image = push_catalog(&registry, &repo, work.path(), "manual", &with(&[]));
        polled_catalog(&client, &manual.name, "manual", &image).await;
        subscription(&client, &manual.name, "manual", "Manual").await;
        let first = pending_plan_for(&client, &manual.name, "kaiwudb-operator.v1.0.0").await;
        assert!(kaiwudb_csvs(&client, &manual.name).await.is_empty(), "nothing applied before approval");
        approve(&client, &manual.name, &first).await;
        csv_version_succeeded(&client, &manual.name, "kaiwudb-operator.v1.0.0").await;
        // 1.1.0 published: a plan for it waits for approval, nothing applied.
        push_catalog(&registry, &repo, work.path(), "manual", &with(&[(k("1.1.0"), "v1.1.0")]));
        let p11 = pending_plan_for(&client, &manual.name, "kaiwudb-operator.v1.1.0").await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            kaiwudb_csvs(&client, &manual.name).await,
            ["kaiwudb-operator.v1.0.0"],
            "nothing applied before approval"
        );
        // 1.2.0 (skipRange covers 1.0.0) published: the 1.1.0 plan is superseded.
        push_catalog(&registry, &repo, work.path(), "manual", &with(&[(k("1.1.0"), "v1.1.0"), (k("1.2.0"), "v1.2.0")]));
        let p12 = pending_plan_for(&client, &manual.name, "kaiwudb-operator.v1.2.0").await;
        let old = eventually("superseded plan marked", WAIT, || async {
            let p = Api::<InstallPlan>::namespaced(client.clone(), &manual.name).get(&p11).await.ok()?;
            let st = serde_json::to_value(p.status?).ok()?;
            (st["phase"] == "Failed").then_some(st)
        })
        .await;
        assert!(old["message"].as_str().is_some_and(|m| m.contains("superseded") && m.contains(&p12)), "{old}");
        let st = subscription_status(&client, &manual.name).await;
        assert_eq!(st["installPlanRef"]["name"], p12.as_str(), "the Subscription points at the new plan: {st}");
        // Approving the superseded plan later installs nothing.
        approve(&client, &manual.name, &p11).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            kaiwudb_csvs(&client, &manual.name).await,
            ["kaiwudb-operator.v1.0.0"],
            "a superseded plan is never applied"
        );
        // Deleting the pending plan recreates it.
        let plans_api: Api<InstallPlan> = Api::namespaced(client.clone(), &manual.name);
        let uid = plans_api.get(&p12).await.expect("plan").metadata.uid;
        plans_api.delete(&p12, &DeleteParams::default()).await.expect("delete pending plan");
        eventually("pending plan recreated", WAIT, || async {
            let p = plans_api.get_opt(&p12).await.ok()??;
            (p.metadata.uid != uid && p.metadata.deletion_timestamp.is_none()).then_some(())
        })
        .await;
        // Manual → Automatic approves it; the cluster moves to 1.2.0.
        Api::<Subscription>::namespaced(client.clone(), &manual.name)
            .patch(
                "kaiwudb-operator",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"installPlanApproval": "Automatic"}})),
            )
            .await
            .expect("switch to Automatic");
        csv_version_succeeded(&client, &manual.name, "kaiwudb-operator.v1.2.0").await;
        eventually("1.0.0 replaced", WAIT, || async {
            (kaiwudb_csvs(&client, &manual.name).await == ["kaiwudb-operator.v1.2.0"]).then_some(())
        })
        .await;

        // CRD upgrade safety through the controller. A copy of kaiwudb-operator
        // whose CRD lives in a group of its own (so that no other test's objects are involved):
        // 2.0.0 makes spec.image required while an existing KaiwuCluster lacks it; 3.0.0 drops the
        // stored version v1.
        let group = format!("kaiwu-{}.example.com", std::process::id());
        let regroup = |text: String| text.replace("kaiwu.inspur.com", &group);
        let safe_dir = work.path().join("safe-bundles").join("kaiwudb-operator");
        let v12 = safe_dir.join("1.2.0");
        std::fs::create_dir_all(&v12).expect("mkdir");
        copy_dir(&k("1.2.0"), &v12, &|_, t| regroup(t));
        let v20 = safe_dir.join("2.0.0");
        std::fs::create_dir_all(&v20).expect("mkdir");
        copy_dir(&k("1.2.0"), &v20, &|p, t| {
            let t = regroup(t);
            if p.to_string_lossy().contains("clusterserviceversion") {
                t.replace("name: kaiwudb-operator.v1.2.0", "name: kaiwudb-operator.v2.0.0")
                    .replace("version: 1.2.0", "version: 2.0.0")
                    .replace("replaces: kaiwudb-operator.v1.1.0", "replaces: kaiwudb-operator.v1.2.0")
                    .lines()
                    .filter(|l| !l.contains("olm.skipRange"))
                    .collect::<Vec<_>>()
                    .join("\n")
                    + "\n"
            } else if p.to_string_lossy().contains("kaiwuclusters") {
                t.replace("required: [replicas, version]", "required: [replicas, version, image]")
            } else {
                t
            }
        });
        let v30 = safe_dir.join("3.0.0");
        std::fs::create_dir_all(&v30).expect("mkdir");
        copy_dir(&v20, &v30, &|p, t| {
            if p.to_string_lossy().contains("clusterserviceversion") {
                let t = t
                    .replace("name: kaiwudb-operator.v2.0.0", "name: kaiwudb-operator.v3.0.0")
                    .replace("version: 2.0.0", "version: 3.0.0")
                    .replace("replaces: kaiwudb-operator.v1.2.0", "replaces: kaiwudb-operator.v2.0.0");
                let mut csv: Value = serde_norway::from_str(&t).expect("CSV yaml");
                if let Some(owned) = csv["spec"]["customresourcedefinitions"]["owned"].as_array_mut() {
                    owned.retain(|o| o["version"] != "v1");
                }
                serde_json::to_string_pretty(&csv).expect("json")
            } else if p.to_string_lossy().contains("kaiwuclusters") {
                // Only v2alpha1 is left, now the storage version: v1 (in status.storedVersions) is gone.
                let mut crd: Value = serde_norway::from_str(&t).expect("CRD yaml");
                let versions = crd["spec"]["versions"].as_array_mut().expect("versions");
                versions.retain(|v| v["name"] != "v1");
                versions[0]["storage"] = json!(true);
                serde_json::to_string_pretty(&crd).expect("json")
            } else {
                t
            }
        });
        let safe = namespace_with_global_group(&client, "ctl-life-crd").await;
        let image = push_catalog(
            &registry,
            &repo,
            work.path(),
            "safe",
            &[(nginx.clone(), "v0.2.0"), (v12.clone(), "safe-v1.2.0")],
        );
        polled_catalog(&client, &safe.name, "safe", &image).await;
        subscription(&client, &safe.name, "safe", "Automatic").await;
        csv_version_succeeded(&client, &safe.name, "kaiwudb-operator.v1.2.0").await;
        let ar = kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(&group, "v1", "KaiwuCluster"),
            "kaiwuclusters",
        );
        let kcs: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &safe.name, &ar);
        let legacy: kube::api::DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "KaiwuCluster", "metadata": {"name": "legacy"}, "spec": {"replicas": 1, "version": "2.2.0"}})).expect("kc");
        kcs.create(&kube::api::PostParams::default(), &legacy).await.expect("create KaiwuCluster without spec.image");
        push_catalog(
            &registry,
            &repo,
            work.path(),
            "safe",
            &[(nginx.clone(), "v0.2.0"), (v12.clone(), "safe-v1.2.0"), (v20.clone(), "safe-v2.0.0")],
        );
        let refused = eventually("2.0.0 plan refused by the CRD check", WAIT, || async {
            let api: Api<InstallPlan> = Api::namespaced(client.clone(), &safe.name);
            api.list(&Default::default()).await.ok()?.items.into_iter().find_map(|p| {
                let st = serde_json::to_value(p.status.as_ref()?).ok()?;
                (p.spec.cluster_service_version_names.iter().any(|n| n == "kaiwudb-operator.v2.0.0")
                    && st["phase"] == "Failed")
                    .then_some(st)
            })
        })
        .await;
        let m = refused["message"].as_str().unwrap_or_default();
        assert!(
            m.contains(&format!("kaiwuclusters.{group}")) && m.contains("legacy") && m.contains("spec.image"),
            "{m}"
        );
        assert!(
            refused["plan"].as_array().into_iter().flatten().all(|s| s["status"] == "NotCreated"),
            "nothing applied: {refused}"
        );
        assert_eq!(
            kaiwudb_csvs(&client, &safe.name).await,
            ["kaiwudb-operator.v1.2.0"],
            "1.2.0 keeps running, 2.0.0 not created"
        );
        let sub_cond =
            subscription_condition(&client, &safe.name, "kaiwudb-operator", "InstallPlanFailed", "True").await;
        assert!(sub_cond["message"].as_str().is_some_and(|m| m.contains("legacy")), "{sub_cond}");
        kcs.delete("legacy", &DeleteParams::default()).await.expect("delete the object");
        csv_version_succeeded(&client, &safe.name, "kaiwudb-operator.v2.0.0").await;
        eventually("1.2.0 replaced by 2.0.0", WAIT, || async {
            (kaiwudb_csvs(&client, &safe.name).await == ["kaiwudb-operator.v2.0.0"]).then_some(())
        })
        .await;
        // 3.0.0 drops v1, which is in status.storedVersions: refused, naming the version.
        push_catalog(
            &registry,
            &repo,
            work.path(),
            "safe",
            &[
                (nginx.clone(), "v0.2.0"),
                (v12.clone(), "safe-v1.2.0"),
                (v20.clone(), "safe-v2.0.0"),
                (v30.clone(), "safe-v3.0.0"),
            ],
        );
        let refused = eventually("3.0.0 plan refused by the CRD check", WAIT, || async {
            let api: Api<InstallPlan> = Api::namespaced(client.clone(), &safe.name);
            api.list(&Default::default()).await.ok()?.items.into_iter().find_map(|p| {
                let st = serde_json::to_value(p.status.as_ref()?).ok()?;
                (p.spec.cluster_service_version_names.iter().any(|n| n == "kaiwudb-operator.v3.0.0")
                    && st["phase"] == "Failed")
                    .then_some(st)
            })
        })
        .await;
        let m = refused["message"].as_str().unwrap_or_default();
        assert!(m.contains("version v1 would be removed") && m.contains("storedVersions"), "{m}");
        assert_eq!(kaiwudb_csvs(&client, &safe.name).await, ["kaiwudb-operator.v2.0.0"], "3.0.0 not applied");

        controller.abort();
        let _ =
            Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(
                client.clone(),
            )
            .delete(&format!("kaiwuclusters.{group}"), &DeleteParams::default())
            .await;
        cleanup_cluster_rbac(&client, &[&auto.name, &jump.name, &manual.name, &pin.name, &safe.name]).await;
    })
}
