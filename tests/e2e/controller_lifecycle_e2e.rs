//! `capstan controller` lifecycle end to end on the real control plane: upgrades driven by a new
//! catalog digest (registry poll), one edge per InstallPlan, a catalog outage after the install
//! (case-27 of `olm-cases.yaml`: the install stays reported healthy), upgrades pinned by
//! `versionRange` one after another (case-08: status follows each hop), Manual approval flows (a
//! pending plan superseded by a newer bundle, as in case-23; a deleted pending plan; switching
//! Manual → Automatic) and CRD upgrade safety through the controller.
//!
//! Upgrade semantics (`reference/olm-v0.md` §4.4): each resolution moves one edge from the
//! installed CSV — to the newest entry that replaces, skips or skip-ranges it. kaiwudb-operator
//! 1.2.0 carries `olm.skipRange: ">=1.0.0 <1.2.0"`, so with 1.1.0 and 1.2.0 published together a
//! cluster on 1.0.0 goes straight to 1.2.0, as OLM does; the multi-hop case uses a copy of 1.2.0
//! without that annotation (1.2.0 replaces 1.1.0 only), which must go 1.0.0 → 1.1.0 → 1.2.0.
//!
//! One scenario per test, each in a namespace of its own with a polled catalog of its own, over
//! one controller the tests share ([`fixture`]); it watches every namespace, so no other group's
//! tests run meanwhile ([`crate::support::group`]). Every scenario installs kaiwudb-operator (and
//! with 1.2.0 its dependency nginx-operator) in an AllNamespaces OperatorGroup, and two such groups
//! providing the same APIs at once are an InterOperatorGroupOwnerConflict (as in OLM): the
//! scenarios take turns, each deleting its group at the end of its turn ([`GroupTurn`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::support::controller::*;
use crate::support::eventually;
use crate::support::group::PerGroup;
use capstan::api::{ClusterServiceVersion, InstallPlan, Subscription};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

const GROUP: &str = "controller_lifecycle_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

/// The controller of these tests, its global catalog namespace empty: each scenario publishes the
/// catalog it needs and creates its CatalogSource in its own namespace.
async fn fixture() -> Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("ctl-life-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            ControllerFixture::start(&client, &repo, "ctl-life-global", options).await
        })
        .await
}

/// What one scenario works with: the group's controller, a client, its namespace (with an
/// AllNamespaces OperatorGroup `global`), a work directory of its own and its turn.
struct Scenario {
    f: Arc<ControllerFixture>,
    client: kube::Client,
    ns: String,
    dir: PathBuf,
    turn: GroupTurn,
}

impl Scenario {
    /// A namespace `prefix-…` with an AllNamespaces OperatorGroup, once it is this scenario's turn.
    async fn start(prefix: &str) -> Scenario {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = f.hold(namespace_with_global_group(&client, prefix).await).name;
        let dir = f.work.path().join(prefix);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let turn = GroupTurn::take(&ns, "global").await;
        Scenario { f, client, ns, dir, turn }
    }

    /// [`push_catalog`] into this scenario's directory.
    fn push(&self, name: &str, bundles: &[(PathBuf, &str)]) -> String {
        push_catalog(&self.f.registry, &self.f.repo, &self.dir, name, bundles)
    }

    /// Pushes catalog `name` with `bundles` and creates its CatalogSource (polled every 2 s) here.
    async fn catalog(&self, name: &str, bundles: &[(PathBuf, &str)]) {
        let image = self.push(name, bundles);
        polled_catalog(&self.client, &self.ns, name, &image).await;
    }

    /// Ends the scenario's turn: its OperatorGroup goes, so that the next scenario's does not
    /// intersect it.
    async fn finish(self) {
        self.turn.release(&self.client).await;
    }
}

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

/// The directory of example bundle `package` `version`.
fn bundle(package: &str, version: &str) -> PathBuf {
    crate::support::repo_root().join("bundles").join(package).join(version)
}

/// The directory of kaiwudb-operator `version`.
fn k(version: &str) -> PathBuf {
    bundle("kaiwudb-operator", version)
}

/// nginx-operator 0.2.0 and kaiwudb-operator 1.0.0, then `extra`: the catalogs of these scenarios.
fn with(extra: &[(PathBuf, &'static str)]) -> Vec<(PathBuf, &'static str)> {
    let base = [(bundle("nginx-operator", "0.2.0"), "v0.2.0"), (k("1.0.0"), "v1.0.0")];
    base.into_iter().chain(extra.iter().cloned()).collect()
}

/// A copy of kaiwudb-operator 1.2.0 under `dir` without its `olm.skipRange` (so it replaces 1.1.0
/// only), pushed with tag `v1.2.0-noskip`.
fn noskip(dir: &Path) -> (PathBuf, &'static str) {
    let noskip = dir.join("kaiwudb-operator-noskip").join("1.2.0");
    std::fs::create_dir_all(&noskip).expect("mkdir");
    copy_dir(&k("1.2.0"), &noskip, &|p, text| {
        if p.to_string_lossy().contains("clusterserviceversion") {
            text.lines().filter(|l| !l.contains("olm.skipRange")).collect::<Vec<_>>().join("\n") + "\n"
        } else {
            text
        }
    });
    (noskip, "v1.2.0-noskip")
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

/// Waits until the only kaiwudb CSV of `ns` is `csv` (the ones it replaced are deleted).
async fn only_kaiwudb_csv(client: &kube::Client, ns: &str, what: &str, csv: &str) {
    eventually(what, WAIT, || async { (kaiwudb_csvs(client, ns).await == [csv]).then_some(()) }).await;
}

/// Every InstallPlan of `ns` as (name, CSV names, phase, approved).
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

/// Automatic, one edge per plan: 1.0.0 → 1.1.0 → 1.2.0 (1.2.0 without skipRange); the replaced
/// CSVs and their cluster RBAC go, the operator's Deployment is updated in place, and the
/// Subscription ends AtLatestKnown on 1.2.0.
#[test]
fn automatic_upgrades_move_one_edge_per_install_plan() {
    crate::support::run(GROUP, 4, async {
        let s = Scenario::start("ctl-life-auto").await;
        let (client, ns) = (&s.client, s.ns.as_str());
        s.catalog("hops", &with(&[])).await;
        subscription(client, ns, "hops", "Automatic").await;
        csv_version_succeeded(client, ns, "kaiwudb-operator.v1.0.0").await;
        s.push("hops", &with(&[(k("1.1.0"), "v1.1.0"), noskip(&s.dir)]));
        csv_version_succeeded(client, ns, "kaiwudb-operator.v1.2.0").await;
        only_kaiwudb_csv(client, ns, "only the last kaiwudb CSV left", "kaiwudb-operator.v1.2.0").await;
        cluster_rbac_of_the_last_version_only(client, ns).await;
        // The operator's Deployment was updated in place (a rolling update), not removed with the
        // replaced CSVs: it is still there and Available.
        tokio::time::sleep(Duration::from_secs(2)).await;
        csv_version_succeeded(client, ns, "kaiwudb-operator.v1.2.0").await;
        one_complete_plan_per_edge(client, ns).await;
        let csv = Api::<ClusterServiceVersion>::namespaced(client.clone(), ns)
            .get("kaiwudb-operator.v1.2.0")
            .await
            .expect("csv");
        assert_eq!(csv.spec.replaces.as_deref(), Some("kaiwudb-operator.v1.1.0"));
        eventually("Subscription AtLatestKnown on 1.2.0", WAIT, || async {
            let st = subscription_status(client, ns).await;
            (st["state"] == "AtLatestKnown"
                && st["installedCSV"] == "kaiwudb-operator.v1.2.0"
                && st["currentCSV"] == "kaiwudb-operator.v1.2.0")
                .then_some(())
        })
        .await;
        s.finish().await;
    })
}

/// RBAC of the last version only: the replaced CSVs' generated cluster RBAC went with them.
async fn cluster_rbac_of_the_last_version_only(client: &kube::Client, ns: &str) {
    for (csv, want) in
        [("kaiwudb-operator.v1.0.0", false), ("kaiwudb-operator.v1.1.0", false), ("kaiwudb-operator.v1.2.0", true)]
    {
        let sel = kube::api::ListParams::default().labels(&format!("olm.owner={csv},olm.owner.namespace={ns}"));
        eventually(&format!("cluster RBAC of {csv} present={want}"), WAIT, || async {
            let crs =
                Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(client.clone()).list(&sel).await.ok()?.items.len();
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
}

/// Once every plan of `ns` is terminal: one Complete plan per edge, never two kaiwudb versions in
/// one plan.
async fn one_complete_plan_per_edge(client: &kube::Client, ns: &str) {
    let ps = eventually("every plan terminal", WAIT, || async {
        let ps = plans(client, ns).await;
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
}

/// The catalog becomes unreachable after the install: the install stays reported as installed
/// and healthy, one condition says the catalog cannot be loaded and resolution waits; once the
/// catalog is back nothing is re-applied.
#[test]
fn unreachable_catalog_after_the_install_keeps_it_reported_healthy() {
    crate::support::run(GROUP, 4, async {
        let s = Scenario::start("ctl-life-outage").await;
        let (client, ns) = (&s.client, s.ns.as_str());
        s.catalog("outage", &with(&[(k("1.1.0"), "v1.1.0"), noskip(&s.dir)])).await;
        subscription(client, ns, "outage", "Automatic").await;
        csv_version_succeeded(client, ns, "kaiwudb-operator.v1.2.0").await;
        let catalogs: Api<capstan::api::CatalogSource> = Api::namespaced(client.clone(), ns);
        let good_image = catalogs.get("outage").await.expect("catalog").spec.image.clone().unwrap_or_default();
        let set_image = |img: String| {
            let catalogs = catalogs.clone();
            async move {
                catalogs
                    .patch("outage", &PatchParams::default(), &Patch::Merge(json!({"spec": {"image": img}})))
                    .await
                    .expect("patch CatalogSource")
            }
        };
        set_image(format!("{}/{}/unreachable:latest", s.f.registry, s.f.repo)).await;
        let c = subscription_condition(client, ns, "kaiwudb-operator", "CatalogSourcesUnhealthy", "True").await;
        let m = c["message"].as_str().unwrap_or_default().to_string();
        assert!(m.contains("unreachable") && m.contains("kaiwudb-operator.v1.2.0") && m.contains("kept"), "{m}");
        let st = subscription_status(client, ns).await;
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
        let csv = Api::<ClusterServiceVersion>::namespaced(client.clone(), ns)
            .get("kaiwudb-operator.v1.2.0")
            .await
            .expect("csv");
        let phase = serde_json::to_value(csv.status).expect("st")["phase"].clone();
        assert_eq!(phase, "Succeeded");
        let before = plans(client, ns).await.len();
        set_image(good_image).await;
        subscription_condition(client, ns, "kaiwudb-operator", "CatalogSourcesUnhealthy", "False").await;
        assert_eq!(plans(client, ns).await.len(), before, "nothing re-applied because of the outage");
        s.finish().await;
    })
}

/// Upgrades pinned by `versionRange`, one after another: the status follows each hop
/// (1.0.0 → 1.1.0 → 1.2.0), and only 1.2.0 is left.
#[test]
fn version_range_pins_each_upgrade_and_status_follows() {
    crate::support::run(GROUP, 4, async {
        let s = Scenario::start("ctl-life-pin").await;
        let (client, ns) = (&s.client, s.ns.as_str());
        s.catalog("pin", &with(&[(k("1.1.0"), "v1.1.0"), noskip(&s.dir)])).await;
        create::<Subscription>(client, ns, json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "kaiwudb-operator", "namespace": ns},
            "spec": {"name": "kaiwudb-operator", "channel": "stable", "source": "pin", "sourceNamespace": ns, "versionRange": "1.0.0"}
        }))
        .await;
        let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
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
            csv_version_succeeded(client, ns, &csv).await;
            eventually(&format!("installedCSV {csv}"), WAIT, || async {
                let st = subscription_status(client, ns).await;
                (st["installedCSV"] == csv.as_str() && st["state"] == "AtLatestKnown").then_some(())
            })
            .await;
        }
        only_kaiwudb_csv(client, ns, "only 1.2.0 left", "kaiwudb-operator.v1.2.0").await;
        s.finish().await;
    })
}

/// The catalog with the real 1.2.0 (skipRange >=1.0.0 <1.2.0): one hop from 1.0.0, as OLM does;
/// 1.1.0 is skipped.
#[test]
fn skip_range_upgrades_in_one_hop() {
    crate::support::run(GROUP, 4, async {
        let s = Scenario::start("ctl-life-jump").await;
        let (client, ns) = (&s.client, s.ns.as_str());
        s.catalog("jump", &with(&[])).await;
        subscription(client, ns, "jump", "Automatic").await;
        csv_version_succeeded(client, ns, "kaiwudb-operator.v1.0.0").await;
        s.push("jump", &with(&[(k("1.1.0"), "v1.1.0"), (k("1.2.0"), "v1.2.0")]));
        csv_version_succeeded(client, ns, "kaiwudb-operator.v1.2.0").await;
        only_kaiwudb_csv(client, ns, "1.0.0 replaced", "kaiwudb-operator.v1.2.0").await;
        let ps = plans(client, ns).await;
        assert!(
            !ps.iter().any(|(_, c, _, _)| c.iter().any(|n| n == "kaiwudb-operator.v1.1.0")),
            "1.1.0 is skipped: {ps:?}"
        );
        s.finish().await;
    })
}

/// Manual, from catalog `source`: the first plan waits for approval with nothing applied, and
/// once approved installs 1.0.0.
async fn manual_install_of_the_first_version(s: &Scenario, source: &str) {
    let (client, ns) = (&s.client, s.ns.as_str());
    s.catalog(source, &with(&[])).await;
    subscription(client, ns, source, "Manual").await;
    let first = pending_plan_for(client, ns, "kaiwudb-operator.v1.0.0").await;
    assert!(kaiwudb_csvs(client, ns).await.is_empty(), "nothing applied before approval");
    approve(client, ns, &first).await;
    csv_version_succeeded(client, ns, "kaiwudb-operator.v1.0.0").await;
}

/// 1.1.0 published in catalog `source` of a Manual Subscription on 1.0.0: a plan for it waits for
/// approval and nothing is applied; returns that plan's name.
async fn manual_upgrade_waits(s: &Scenario, source: &str) -> String {
    let (client, ns) = (&s.client, s.ns.as_str());
    s.push(source, &with(&[(k("1.1.0"), "v1.1.0")]));
    let p11 = pending_plan_for(client, ns, "kaiwudb-operator.v1.1.0").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(kaiwudb_csvs(client, ns).await, ["kaiwudb-operator.v1.0.0"], "nothing applied before approval");
    p11
}

/// Manual: nothing is applied before approval, neither the install nor an upgrade.
#[test]
fn manual_plans_apply_nothing_before_approval() {
    crate::support::run(GROUP, 4, async {
        let s = Scenario::start("ctl-life-manual").await;
        manual_install_of_the_first_version(&s, "manual").await;
        manual_upgrade_waits(&s, "manual").await;
        s.finish().await;
    })
}

/// Manual: a pending plan superseded by a newer bundle (1.2.0, whose skipRange covers 1.0.0) is
/// marked, the Subscription points at the new plan, and approving the old one installs nothing.
#[test]
fn superseded_pending_plan_is_marked_and_never_applied() {
    crate::support::run(GROUP, 4, async {
        let s = Scenario::start("ctl-life-supersede").await;
        let (client, ns) = (&s.client, s.ns.as_str());
        manual_install_of_the_first_version(&s, "supersede").await;
        let p11 = manual_upgrade_waits(&s, "supersede").await;
        s.push("supersede", &with(&[(k("1.1.0"), "v1.1.0"), (k("1.2.0"), "v1.2.0")]));
        let p12 = pending_plan_for(client, ns, "kaiwudb-operator.v1.2.0").await;
        let old = eventually("superseded plan marked", WAIT, || async {
            let p = Api::<InstallPlan>::namespaced(client.clone(), ns).get(&p11).await.ok()?;
            let st = serde_json::to_value(p.status?).ok()?;
            (st["phase"] == "Failed").then_some(st)
        })
        .await;
        assert!(old["message"].as_str().is_some_and(|m| m.contains("superseded") && m.contains(&p12)), "{old}");
        let st = subscription_status(client, ns).await;
        assert_eq!(st["installPlanRef"]["name"], p12.as_str(), "the Subscription points at the new plan: {st}");
        // Approving the superseded plan later installs nothing.
        approve(client, ns, &p11).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(kaiwudb_csvs(client, ns).await, ["kaiwudb-operator.v1.0.0"], "a superseded plan is never applied");
        s.finish().await;
    })
}

/// Manual: a deleted pending upgrade plan (1.0.0 → 1.2.0) comes back; switching the
/// Subscription to Automatic approves it and the cluster moves to 1.2.0.
#[test]
fn deleted_pending_plan_returns_and_automatic_approves_it() {
    crate::support::run(GROUP, 4, async {
        let s = Scenario::start("ctl-life-recreate").await;
        let (client, ns) = (&s.client, s.ns.as_str());
        manual_install_of_the_first_version(&s, "recreate").await;
        s.push("recreate", &with(&[(k("1.1.0"), "v1.1.0"), (k("1.2.0"), "v1.2.0")]));
        let p12 = pending_plan_for(client, ns, "kaiwudb-operator.v1.2.0").await;
        let plans_api: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
        let uid = plans_api.get(&p12).await.expect("plan").metadata.uid;
        plans_api.delete(&p12, &DeleteParams::default()).await.expect("delete pending plan");
        eventually("pending plan recreated", WAIT, || async {
            let p = plans_api.get_opt(&p12).await.ok()??;
            (p.metadata.uid != uid && p.metadata.deletion_timestamp.is_none()).then_some(())
        })
        .await;
        Api::<Subscription>::namespaced(client.clone(), ns)
            .patch(
                "kaiwudb-operator",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"installPlanApproval": "Automatic"}})),
            )
            .await
            .expect("switch to Automatic");
        csv_version_succeeded(client, ns, "kaiwudb-operator.v1.2.0").await;
        only_kaiwudb_csv(client, ns, "1.0.0 replaced", "kaiwudb-operator.v1.2.0").await;
        s.finish().await;
    })
}

/// Copies of kaiwudb-operator for the CRD upgrade checks, under `dir`, whose CRD lives in API
/// group `group` of its own (so that no other test's objects are involved): 1.2.0; 2.0.0, which
/// makes spec.image required; 3.0.0, which drops the stored version v1.
fn crd_bundles(dir: &Path, group: &str) -> [PathBuf; 3] {
    let regroup = |text: String| text.replace("kaiwu.inspur.com", group);
    let safe_dir = dir.join("safe-bundles").join("kaiwudb-operator");
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
    [v12, v20, v30]
}

/// The failed InstallPlan of `ns` for `csv`, refused by the CRD check, as its status.
async fn refused_plan(client: &kube::Client, ns: &str, csv: &str) -> Value {
    eventually(&format!("{csv} plan refused by the CRD check"), WAIT, || async {
        let api: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
        api.list(&Default::default()).await.ok()?.items.into_iter().find_map(|p| {
            let st = serde_json::to_value(p.status.as_ref()?).ok()?;
            (p.spec.cluster_service_version_names.iter().any(|n| n == csv) && st["phase"] == "Failed").then_some(st)
        })
    })
    .await
}

/// Deletes the CRD of a [`crd_bundles`] group.
async fn delete_kaiwuclusters(client: &kube::Client, group: &str) {
    let _ = Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(
        client.clone(),
    )
    .delete(&format!("kaiwuclusters.{group}"), &DeleteParams::default())
    .await;
}

/// CRD upgrade safety: 2.0.0 makes spec.image required while an existing KaiwuCluster lacks it,
/// so its plan is refused before any step and 1.2.0 keeps running; once the object is gone 2.0.0
/// replaces 1.2.0.
#[test]
fn crd_upgrade_is_refused_while_an_object_lacks_a_new_required_field() {
    crate::support::run(GROUP, 4, async {
        let s = Scenario::start("ctl-life-crd").await;
        let (client, ns) = (&s.client, s.ns.as_str());
        let group = format!("kaiwu-required-{}.example.com", std::process::id());
        let [v12, v20, _] = crd_bundles(&s.dir, &group);
        let nginx = (bundle("nginx-operator", "0.2.0"), "v0.2.0");
        s.catalog("required", &[nginx.clone(), (v12.clone(), "required-v1.2.0")]).await;
        subscription(client, ns, "required", "Automatic").await;
        csv_version_succeeded(client, ns, "kaiwudb-operator.v1.2.0").await;
        let ar = kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(&group, "v1", "KaiwuCluster"),
            "kaiwuclusters",
        );
        let kcs: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let legacy: kube::api::DynamicObject = serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": "KaiwuCluster", "metadata": {"name": "legacy"}, "spec": {"replicas": 1, "version": "2.2.0"}})).expect("kc");
        kcs.create(&kube::api::PostParams::default(), &legacy).await.expect("create KaiwuCluster without spec.image");
        s.push("required", &[nginx, (v12, "required-v1.2.0"), (v20, "required-v2.0.0")]);
        let refused = refused_plan(client, ns, "kaiwudb-operator.v2.0.0").await;
        let m = refused["message"].as_str().unwrap_or_default();
        assert!(
            m.contains(&format!("kaiwuclusters.{group}")) && m.contains("legacy") && m.contains("spec.image"),
            "{m}"
        );
        assert!(
            refused["plan"].as_array().into_iter().flatten().all(|s| s["status"] == "Unknown"),
            "nothing applied: {refused}"
        );
        assert_eq!(
            kaiwudb_csvs(client, ns).await,
            ["kaiwudb-operator.v1.2.0"],
            "1.2.0 keeps running, 2.0.0 not created"
        );
        let sub_cond = subscription_condition(client, ns, "kaiwudb-operator", "InstallPlanFailed", "True").await;
        assert!(sub_cond["message"].as_str().is_some_and(|m| m.contains("legacy")), "{sub_cond}");
        kcs.delete("legacy", &DeleteParams::default()).await.expect("delete the object");
        csv_version_succeeded(client, ns, "kaiwudb-operator.v2.0.0").await;
        only_kaiwudb_csv(client, ns, "1.2.0 replaced by 2.0.0", "kaiwudb-operator.v2.0.0").await;
        delete_kaiwuclusters(client, &group).await;
        s.finish().await;
    })
}

/// CRD upgrade safety: 3.0.0 drops v1, which is in the CRD's status.storedVersions: its plan is
/// refused, naming the version, and 2.0.0 keeps running.
#[test]
fn crd_upgrade_is_refused_when_it_drops_a_stored_version() {
    crate::support::run(GROUP, 4, async {
        let s = Scenario::start("ctl-life-stored").await;
        let (client, ns) = (&s.client, s.ns.as_str());
        let group = format!("kaiwu-stored-{}.example.com", std::process::id());
        let [v12, v20, v30] = crd_bundles(&s.dir, &group);
        let nginx = (bundle("nginx-operator", "0.2.0"), "v0.2.0");
        let installed = [nginx, (v12, "stored-v1.2.0"), (v20, "stored-v2.0.0")];
        s.catalog("stored", &installed).await;
        subscription(client, ns, "stored", "Automatic").await;
        csv_version_succeeded(client, ns, "kaiwudb-operator.v2.0.0").await;
        s.push("stored", &[installed.as_slice(), &[(v30, "stored-v3.0.0")]].concat());
        let refused = refused_plan(client, ns, "kaiwudb-operator.v3.0.0").await;
        let m = refused["message"].as_str().unwrap_or_default();
        assert!(m.contains("version v1 would be removed") && m.contains("storedVersions"), "{m}");
        assert_eq!(kaiwudb_csvs(client, ns).await, ["kaiwudb-operator.v2.0.0"], "3.0.0 not applied");
        delete_kaiwuclusters(client, &group).await;
        s.finish().await;
    })
}
