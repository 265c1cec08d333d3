//! What OLM users write by hand rather than through a Subscription, as OLM's own e2e suite,
//! GitOps repositories and tools that prepare plans elsewhere do: an InstallPlan whose steps are
//! listed in its status (no bundle lookups), applied as listed, as OLM's catalog operator applies
//! it; a ClusterServiceVersion applied to a namespace with an OperatorGroup, installed from its own
//! install strategy, as OLM's olm-operator installs any CSV.

use crate::support::controller::*;
use crate::support::group::PerGroup;
use crate::support::{TestNamespace, eventually};
use capstan::api::{ClusterServiceVersion, InstallPlan, Operator};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;

const GROUP: &str = "controller_by_hand_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

async fn fixture() -> std::sync::Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("ctl-by-hand-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            ControllerFixture::start(&client, &repo, "ctl-by-hand-catalog", options).await
        })
        .await
}

/// A plan created Automatic and approved, then given its steps in `status.plan` with phase
/// `Installing` (as OLM's e2e suite does with a status update): the objects are created, each
/// step says `Created`, the plan is `Complete`. One written unapproved waits, applying nothing.
#[test]
fn steps_listed_by_hand_are_applied_once_approved() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = f.hold(namespace_with_group(&client, "listed").await);
        let plans: Api<InstallPlan> = Api::namespaced(client.clone(), &ns.name);
        for (name, approved) in [("by-hand", true), ("by-hand-waiting", false)] {
            let plan: InstallPlan = serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": name, "namespace": ns.name},
                "spec": {"approval": if approved { "Automatic" } else { "Manual" }, "approved": approved,
                         "clusterServiceVersionNames": []}
            }))
            .expect("plan");
            let mut plan = plans.create(&PostParams::default(), &plan).await.expect("create the plan");
            // The manifest names another namespace: the object still goes into the plan's, as in OLM.
            let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
                                  "data": {"from": "a plan"}});
            plan.status = Some(
                serde_json::from_value(json!({
                    "phase": "Installing", "catalogSources": [],
                    "plan": [{"resolving": "csv-by-hand", "status": "Unknown",
                              "resource": {"sourceName": "", "sourceNamespace": "", "group": "", "version": "v1",
                                           "kind": "ConfigMap", "name": name, "manifest": manifest.to_string()}}]
                }))
                .expect("status"),
            );
            plans.replace_status(name, &PostParams::default(), &plan).await.expect("write status.plan");
        }
        let done = eventually("the plan listed by hand Complete", WAIT, || async {
            let st = serde_json::to_value(plans.get("by-hand").await.ok()?.status?).ok()?;
            (st["phase"] == "Complete").then_some(st)
        })
        .await;
        assert_eq!(done["plan"][0]["status"], "Created", "{done}");
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
        let cm = cms.get("by-hand").await.expect("the ConfigMap the plan lists");
        assert_eq!(cm.data.unwrap_or_default().get("from").map(String::as_str), Some("a plan"));
        let elsewhere = Api::<ConfigMap>::namespaced(client.clone(), "default").get_opt("by-hand").await.expect("get");
        assert!(elsewhere.is_none(), "a plan writes only into its own namespace");
        let waiting = serde_json::to_value(plans.get("by-hand-waiting").await.expect("plan").status).expect("status");
        assert_eq!(waiting["phase"], "Installing", "an unapproved plan is left as written: {waiting}");
        assert!(cms.get_opt("by-hand-waiting").await.expect("get").is_none(), "nothing applied before approval");
    })
}

/// A CSV applied by hand (no Subscription, no InstallPlan) to a namespace with an OperatorGroup
/// is installed from its own install strategy: its Deployment is created, labelled and owned as
/// an InstallPlan would have made it, and the CSV reaches Succeeded.
#[test]
fn csv_applied_by_hand_is_installed_from_its_install_strategy() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = f.hold(namespace_with_group(&client, "csv-by-hand").await);
        let labels = json!({"app": "by-hand"});
        create::<ClusterServiceVersion>(&client, &ns.name, json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "by-hand.v1.0.0", "namespace": ns.name},
            "spec": {
                "displayName": "By hand", "version": "1.0.0",
                "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                                 {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": false}],
                "install": {"strategy": "deployment", "spec": {"deployments": [{
                    "name": "by-hand",
                    "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                             "template": {"metadata": {"labels": labels},
                                          "spec": {"containers": [{"name": "c", "image": "registry.example/by-hand:1"}]}}}
                }]}}
            }
        }))
        .await;
        csv_version_succeeded(&client, &ns.name, "by-hand.v1.0.0").await;
        let d = Api::<Deployment>::namespaced(client.clone(), &ns.name).get("by-hand").await.expect("the Deployment");
        let csv = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns.name)
            .get("by-hand.v1.0.0")
            .await
            .expect("the CSV");
        let owners = d.metadata.owner_references.clone().unwrap_or_default();
        assert!(
            owners.iter().any(|o| o.kind == "ClusterServiceVersion" && Some(&o.uid) == csv.metadata.uid.as_ref()),
            "the Deployment is owned by the CSV: {owners:?}"
        );
        let labels = d.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("olm.owner").map(String::as_str), Some("by-hand.v1.0.0"), "{labels:?}");
        let annotations = d.spec.and_then(|s| s.template.metadata).and_then(|m| m.annotations).unwrap_or_default();
        assert_eq!(annotations.get("olm.targetNamespaces"), Some(&ns.name), "{annotations:?}");
    })
}

/// An Operator created by hand (OLM's e2e "should surface components in its status"): its status
/// gets the component label selector and lists what bears its label, a label removed drops the
/// reference, the Operator deleted while a labelled object remains is made again, and deleted
/// with none left it stays deleted.
#[test]
fn operator_created_by_hand_lists_what_bears_its_label() {
    crate::support::run(GROUP, 4, async {
        let _f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = TestNamespace::new(&client, "operator-by-hand").await;
        let name = format!("by-hand-{}", std::process::id());
        let key = format!("operators.coreos.com/{name}");
        let operators: Api<Operator> = Api::all(client.clone());
        let o: Operator = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "Operator",
                                                      "metadata": {"name": name}, "spec": {}}))
        .expect("operator");
        let _ = operators.delete(&name, &Default::default()).await;
        operators.create(&PostParams::default(), &o).await.expect("create the Operator");
        let refs = |o: &Operator| -> Vec<(String, String)> {
            let c = o.status.as_ref().and_then(|s| s.components.as_ref());
            c.map(|c| {
                c.refs
                    .iter()
                    .map(|r| (r.object.kind.clone().unwrap_or_default(), r.object.name.clone().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default()
        };
        let wait = |what: &'static str, f: Box<dyn Fn(&Operator) -> bool + Send + Sync>| {
            let operators = operators.clone();
            let name = name.clone();
            async move {
                eventually(what, Duration::from_secs(60), || async {
                    operators.get_opt(&name).await.ok().flatten().filter(|o| f(o))
                })
                .await
            }
        };
        let selector_key = key.clone();
        wait(
            "the label selector in the Operator's status",
            Box::new(move |o| {
                let sel = o.status.as_ref().and_then(|s| s.components.as_ref()).and_then(|c| c.label_selector.as_ref());
                sel.and_then(|s| s.match_expressions.as_ref())
                    .is_some_and(|e| e.iter().any(|r| r.key == selector_key && r.operator == "Exists"))
            }),
        )
        .await;
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns.name);
        let sa: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "labelled", "labels": {key.clone(): ""}}})).expect("sa");
        sas.create(&PostParams::default(), &sa).await.expect("create the ServiceAccount");
        let o = wait(
            "the labelled ServiceAccount listed",
            Box::new(move |o| refs(o).contains(&("ServiceAccount".into(), "labelled".into()))),
        )
        .await;
        assert_eq!(refs(&o), [("ServiceAccount".to_string(), "labelled".to_string())], "only what bears the label");
        operators.delete(&name, &Default::default()).await.expect("delete the Operator");
        wait(
            "the Operator made again: a component remains",
            Box::new(move |o| o.metadata.deletion_timestamp.is_none() && !refs(o).is_empty()),
        )
        .await;
        let unlabel = json!({"metadata": {"labels": {key.clone(): null}}});
        sas.patch("labelled", &PatchParams::default(), &Patch::Merge(&unlabel)).await.expect("remove the label");
        wait("the ServiceAccount no longer listed", Box::new(move |o| refs(o).is_empty())).await;
        operators.delete(&name, &Default::default()).await.expect("delete the Operator again");
        // Longer than capstan's resync of such Operators (15 s): it stays deleted.
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert!(
            operators.get_opt(&name).await.expect("read").is_none(),
            "nothing bears the label: the Operator stays deleted"
        );
    })
}
