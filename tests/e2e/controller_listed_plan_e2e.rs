//! InstallPlans whose steps are written by hand (no bundle lookups), as OLM's own e2e suite and
//! tools that prepare plans elsewhere write them: applied as listed, as OLM's catalog operator
//! applies them.

use crate::support::controller::*;
use crate::support::eventually;
use crate::support::group::PerGroup;
use capstan::api::InstallPlan;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

const GROUP: &str = "controller_listed_plan_e2e";

static FIXTURE: PerGroup<ControllerFixture> = PerGroup::new(GROUP);

async fn fixture() -> std::sync::Arc<ControllerFixture> {
    FIXTURE
        .get_or_init(|| async {
            let client = crate::support::cluster().await;
            let repo = format!("ctl-listed-{}", std::process::id());
            let options = capstan::controller::Options { catalog_cache: None, ..Default::default() };
            ControllerFixture::start(&client, &repo, "ctl-listed-catalog", options).await
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
            let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"from": "a plan"}});
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
        let waiting = serde_json::to_value(plans.get("by-hand-waiting").await.expect("plan").status).expect("status");
        assert_eq!(waiting["phase"], "Installing", "an unapproved plan is left as written: {waiting}");
        assert!(cms.get_opt("by-hand-waiting").await.expect("get").is_none(), "nothing applied before approval");
    })
}
