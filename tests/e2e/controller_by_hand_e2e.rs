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

/// A CSV whose group targets another namespace is copied there as OLM copies it (label
/// `olm.copiedFrom`, reason `Copied`, OLM's message, the original's phase); a change of the copy's
/// status is put back, a deleted copy is made again, the copy goes when the group stops targeting
/// its namespace, and the copies go with the original. (The OLMConfig switch for AllNamespaces
/// groups is cluster-wide, so it is left to the conformance suite's `Disabling copied CSVs` specs,
/// which run alone.)
#[test]
fn a_csv_is_copied_into_the_other_namespaces_its_group_targets() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = f.hold(TestNamespace::new(&client, "copied-csv").await);
        let target = f.hold(TestNamespace::new(&client, "copied-csv-target").await);
        create::<capstan::api::OperatorGroup>(
            &client,
            &ns.name,
            json!({
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "og", "namespace": ns.name}, "spec": {"targetNamespaces": [target.name]}
            }),
        )
        .await;
        let labels = json!({"app": "copied"});
        create::<ClusterServiceVersion>(&client, &ns.name, json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "copied.v1.0.0", "namespace": ns.name, "labels": {"team": "a"}},
            "spec": {
                "displayName": "Copied", "version": "1.0.0",
                "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                                 {"type": "MultiNamespace", "supported": true}, {"type": "AllNamespaces", "supported": false}],
                "install": {"strategy": "deployment", "spec": {"deployments": [{
                    "name": "copied",
                    "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                             "template": {"metadata": {"labels": labels},
                                          "spec": {"containers": [{"name": "c", "image": "registry.example/copied:1"}]}}}
                }]}}
            }
        }))
        .await;
        csv_version_succeeded(&client, &ns.name, "copied.v1.0.0").await;
        let copies: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &target.name);
        let copied = |want: &'static str| {
            let copies = copies.clone();
            async move {
                let c = copies.get_opt("copied.v1.0.0").await.ok()??;
                let st = serde_json::to_value(c.status.as_ref()?).ok()?;
                (st["phase"] == "Succeeded" && st["reason"] == want).then_some(c)
            }
        };
        let copy = eventually("the copy in the target namespace", Duration::from_secs(30), || copied("Copied")).await;
        let labels = copy.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("olm.copiedFrom"), Some(&ns.name), "{labels:?}");
        assert_eq!(labels.get("team").map(String::as_str), Some("a"), "{labels:?}");
        let st = serde_json::to_value(copy.status.as_ref().unwrap()).unwrap();
        assert_eq!(st["message"], format!("The operator is running in {} but is managing this namespace", ns.name));
        let annotations = copy.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get("olm.operatorNamespace"), Some(&ns.name), "{annotations:?}");
        assert!(!annotations.contains_key("olm.targetNamespaces"), "{annotations:?}");
        // Settled, the copy is written no more (no write loop between a copy and its original).
        let settled = copies.get("copied.v1.0.0").await.expect("the copy").metadata.resource_version;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let later = copies.get("copied.v1.0.0").await.expect("the copy").metadata.resource_version;
        assert_eq!(settled, later, "the copy was written again while nothing changed");

        // A change of the copy's status is put back.
        let patch = json!({"status": {"reason": "Edited", "message": "by hand"}});
        copies
            .patch_status("copied.v1.0.0", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("edit the copy");
        eventually("the copy's status put back", Duration::from_secs(30), || copied("Copied")).await;
        // A deleted copy is made again.
        let uid = copy.metadata.uid.clone();
        copies.delete("copied.v1.0.0", &Default::default()).await.expect("delete the copy");
        eventually("the copy made again", Duration::from_secs(30), || async {
            let c = copied("Copied").await?;
            (c.metadata.uid != uid).then_some(())
        })
        .await;
        // The group no longer targets the namespace: the copy goes.
        let og_patch = json!({"spec": {"targetNamespaces": [ns.name]}});
        Api::<capstan::api::OperatorGroup>::namespaced(client.clone(), &ns.name)
            .patch("og", &PatchParams::default(), &Patch::Merge(&og_patch))
            .await
            .expect("retarget the group");
        eventually("the copy removed", Duration::from_secs(60), || async {
            copies.get_opt("copied.v1.0.0").await.ok()?.is_none().then_some(())
        })
        .await;
        // Targeted again, then the original deleted: the copy goes with it.
        let og_patch = json!({"spec": {"targetNamespaces": [target.name]}});
        Api::<capstan::api::OperatorGroup>::namespaced(client.clone(), &ns.name)
            .patch("og", &PatchParams::default(), &Patch::Merge(&og_patch))
            .await
            .expect("retarget the group");
        eventually("the copy back", Duration::from_secs(60), || copied("Copied")).await;
        Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns.name)
            .delete("copied.v1.0.0", &Default::default())
            .await
            .expect("delete the original");
        eventually("the copy gone with its original", Duration::from_secs(60), || async {
            copies.get_opt("copied.v1.0.0").await.ok()?.is_none().then_some(())
        })
        .await;
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

/// A CSV as a user writes it, with Deployment `name` (its container's env `MODE`) serving a
/// validating webhook, and with an owned APIService served by the same Deployment when `api`.
fn csv_with_webhook(ns: &str, name: &str, mode: &str, api: bool) -> serde_json::Value {
    let labels = json!({"app": name});
    let mut csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("{name}.v1.0.0"), "namespace": ns},
        "spec": {
            "displayName": name, "version": "1.0.0",
            "installModes": [{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
                             {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": false}],
            "install": {"strategy": "deployment", "spec": {"deployments": [{
                "name": name,
                "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels},
                                      "spec": {"containers": [{"name": "c", "image": "registry.example/by-hand:1",
                                                               "env": [{"name": "MODE", "value": mode}]}]}}}
            }]}},
            "webhookdefinitions": [{"generateName": format!("v{name}.capstan.dev"), "type": "ValidatingAdmissionWebhook",
                "deploymentName": name, "containerPort": 443, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "failurePolicy": "Ignore",
                "rules": [{"operations": ["CREATE"], "apiGroups": ["by-hand.capstan.dev"], "apiVersions": ["v1"], "resources": ["things"]}]}]
        }
    });
    if api {
        csv["spec"]["apiservicedefinitions"] = json!({"owned": [{"group": format!("{name}.capstan.dev"), "version": "v1",
            "kind": "Thing", "name": "things", "displayName": "Thing", "deploymentName": name, "containerPort": 5443}]});
    }
    csv
}

/// The env var `MODE` of Deployment `name`'s first container and the Deployment's generation.
async fn mode_and_generation(client: &kube::Client, ns: &str, name: &str) -> (Option<String>, i64) {
    let d = Api::<Deployment>::namespaced(client.clone(), ns).get(name).await.expect("the Deployment");
    let env = d.spec.and_then(|s| s.template.spec).map(|p| p.containers[0].env.clone().unwrap_or_default());
    let mode = env.unwrap_or_default().into_iter().find(|e| e.name == "MODE").and_then(|e| e.value);
    (mode, d.metadata.generation.unwrap_or_default())
}

/// A CSV with a webhook applied by hand gets what OLM's olm-operator makes for it: the
/// Deployment (with the serving certificate's volume), the Service, the serving Secret, the
/// webhook configuration with the Secret's CA as `caBundle`; it reaches Succeeded. An edit of an
/// env var in its `spec.install` rolls the Deployment out, once (one new generation).
#[test]
fn csv_with_a_webhook_applied_by_hand_is_installed_and_its_strategy_edits_roll_out() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = f.hold(namespace_with_group(&client, "csv-webhook-by-hand").await);
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
        create::<ClusterServiceVersion>(&client, &ns.name, csv_with_webhook(&ns.name, "hooked", "a", false)).await;
        csv_version_succeeded(&client, &ns.name, "hooked.v1.0.0").await;
        let secret = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), &ns.name)
            .get("hooked-service-cert")
            .await
            .expect("the serving Secret <deployment>-service-cert, as OLM names it");
        let ca = secret.data.unwrap_or_default().get("olmCAKey").cloned().expect("the CA in the Secret");
        Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), &ns.name)
            .get("hooked-service")
            .await
            .expect("the webhook's Service");
        let hooks =
            Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(client.clone())
                .list(
                    &kube::api::ListParams::default()
                        .labels("olm.webhook-description-generate-name=vhooked.capstan.dev"),
                )
                .await
                .expect("list webhook configurations");
        let hook = hooks
            .items
            .iter()
            .find(|h| h.metadata.labels.as_ref().and_then(|l| l.get("olm.owner.namespace")) == Some(&ns.name));
        let hook = hook.expect("the webhook configuration of the CSV");
        let bundle = hook.webhooks.as_ref().and_then(|w| w[0].client_config.ca_bundle.clone()).expect("caBundle");
        assert!(!bundle.0.is_empty() && !ca.0.is_empty(), "the webhook's caBundle is filled from the serving Secret");
        let (mode, generation) = mode_and_generation(&client, &ns.name, "hooked").await;
        assert_eq!(mode.as_deref(), Some("a"));

        // A hotfix: the env var edited in spec.install.
        let mut csv = csvs.get("hooked.v1.0.0").await.expect("the CSV");
        let edited = csv_with_webhook(&ns.name, "hooked", "b", false);
        csv.spec.install = serde_json::from_value(edited["spec"]["install"].clone()).expect("install strategy");
        csvs.replace("hooked.v1.0.0", &PostParams::default(), &csv).await.expect("edit spec.install");
        let rolled = eventually("the Deployment rolled out with MODE=b", WAIT, || async {
            let (mode, generation) = mode_and_generation(&client, &ns.name, "hooked").await;
            (mode.as_deref() == Some("b")).then_some(generation)
        })
        .await;
        csv_version_succeeded(&client, &ns.name, "hooked.v1.0.0").await;
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let (_, settled) = mode_and_generation(&client, &ns.name, "hooked").await;
        assert_eq!((rolled, settled), (generation + 1, generation + 1), "one rollout for one edit");

        // The webhook's generateName edited: the new configuration made, the old one removed.
        let mut csv = csvs.get("hooked.v1.0.0").await.expect("the CSV");
        if let Some(w) = csv.spec.webhookdefinitions.as_mut().and_then(|w| w.first_mut()) {
            w.generate_name = "vhooked-changed.capstan.dev".into();
        }
        csvs.replace("hooked.v1.0.0", &PostParams::default(), &csv).await.expect("edit the webhook definition");
        let hooks_api =
            Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(client.clone());
        let ours = format!("olm.owner=hooked.v1.0.0,olm.owner.namespace={}", ns.name);
        let names = eventually("the webhook configuration renamed", WAIT, || async {
            let list = hooks_api.list(&kube::api::ListParams::default().labels(&ours)).await.ok()?;
            let names: Vec<String> = list.items.iter().filter_map(|h| h.metadata.name.clone()).collect();
            (names.len() == 1 && names[0].starts_with("vhooked-changed.capstan.dev-")).then_some(names)
        })
        .await;
        assert_eq!(names.len(), 1, "{names:?}");
    })
}

/// A CSV applied by hand that owns an APIService gets it, pointing at the Service the CSV's
/// Deployment serves with the serving Secret's CA, and the auth-delegator binding; kwok's pods
/// serve nothing, so the CSV waits in Installing naming the APIService (as OLM's
/// `isAPIServiceAvailable`). Its webhook configuration and Deployment are made too.
#[test]
fn csv_owning_an_apiservice_applied_by_hand_gets_it() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = f.hold(namespace_with_group(&client, "csv-api-by-hand").await);
        create::<ClusterServiceVersion>(
            &client,
            &ns.name,
            csv_with_webhook(&ns.name, &format!("api-{}", ns.name), "a", true),
        )
        .await;
        let name = format!("api-{}", ns.name);
        let st = eventually("the CSV waiting on its APIService", WAIT, || async {
            let st = Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns.name)
                .get(&format!("{name}.v1.0.0"))
                .await
                .ok()?
                .status?;
            st.message.as_deref()?.contains("is not Available").then_some(st)
        })
        .await;
        assert_eq!(st.phase.as_ref().map(|p| p.as_str()), Some("Installing"), "{st:?}");
        let ar = kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
            "apiservices",
        );
        let apiservices: Api<kube::core::DynamicObject> = Api::all_with(client.clone(), &ar);
        let svc = apiservices.get(&format!("v1.{name}.capstan.dev")).await.expect("the owned APIService");
        assert_eq!(svc.data["spec"]["service"]["namespace"], ns.name.as_str());
        assert_eq!(svc.data["spec"]["service"]["name"], format!("{name}-service").as_str());
        assert!(svc.data["spec"]["caBundle"].as_str().is_some_and(|b| !b.is_empty()), "caBundle filled");
        Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
            .get(&format!("{name}-service-system:auth-delegator"))
            .await
            .expect("the auth-delegator binding");
        Api::<Deployment>::namespaced(client.clone(), &ns.name).get(&name).await.expect("the Deployment");
        // The CSV deleted takes its APIService with it (an APIService nothing serves would keep
        // the namespace from being deleted).
        Api::<ClusterServiceVersion>::namespaced(client.clone(), &ns.name)
            .delete(&format!("{name}.v1.0.0"), &Default::default())
            .await
            .expect("delete the CSV");
        eventually("the APIService removed with its CSV", WAIT, || async {
            apiservices.get_opt(&format!("v1.{name}.capstan.dev")).await.ok()?.is_none().then_some(())
        })
        .await;
    })
}

/// The env var names of Deployment `name`'s first container and the Deployment's generation.
async fn env_and_generation(client: &kube::Client, ns: &str, name: &str) -> (Vec<String>, i64) {
    let (env, generation) = env_values_and_generation(client, ns, name).await;
    (env.into_iter().map(|(name, _)| name).collect(), generation)
}

/// The env of the first container of Deployment `name` (name, value) and its generation.
async fn env_values_and_generation(client: &kube::Client, ns: &str, name: &str) -> (Vec<(String, String)>, i64) {
    let d = Api::<Deployment>::namespaced(client.clone(), ns).get(name).await.expect("the Deployment");
    let env = d.spec.and_then(|s| s.template.spec).map(|p| p.containers[0].env.clone().unwrap_or_default());
    let env = env.unwrap_or_default().into_iter().map(|e| (e.name, e.value.unwrap_or_default())).collect();
    (env, d.metadata.generation.unwrap_or_default())
}

/// A CSV a Subscription with `spec.config` installed: its InstallPlan lists no Deployment (OLM's
/// plan holds none; the CSV reconciler makes it), which has the config; it is not applied again
/// once installed; an env var added to its `spec.install` (a hotfix) is rolled out once, with the
/// Subscription's `spec.config` still applied on top; a new `spec.config` of the Subscription is
/// rolled out once too (OLM's olm-operator requeues the installed CSV of a changed Subscription).
#[test]
fn an_edit_of_a_subscribed_csvs_strategy_rolls_out_with_the_subscriptions_config() {
    crate::support::run(GROUP, 4, async {
        let f = fixture().await;
        let client = crate::support::cluster().await;
        let ns = f.hold(namespace_with_group(&client, "csv-hotfix").await);
        catalog_source(&client, &ns.name, "examples", &f.catalog_ref).await;
        create::<capstan::api::Subscription>(
            &client,
            &ns.name,
            json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "nginx-operator", "namespace": ns.name},
                "spec": {"name": "nginx-operator", "channel": "alpha", "source": "examples",
                         "sourceNamespace": ns.name, "installPlanApproval": "Automatic",
                         "config": {"env": [{"name": "LOG_LEVEL", "value": "debug"}]}}
            }),
        )
        .await;
        let (csv_name, dep) = ("nginx-operator.v0.2.0", "nginx-operator-controller-manager");
        csv_version_succeeded(&client, &ns.name, csv_name).await;
        let plan = plan_in_phase(&client, &ns.name, "nginx-operator", "Complete").await;
        let kinds: Vec<String> =
            plan.status.iter().flat_map(|s| s.plan.iter()).map(|s| s.resource.kind.clone()).collect();
        assert!(
            kinds.iter().any(|k| k == "ClusterServiceVersion") && !kinds.iter().any(|k| k == "Deployment"),
            "no Deployment step: {kinds:?}"
        );
        let (env, installed) = env_and_generation(&client, &ns.name, dep).await;
        assert!(env.iter().any(|e| e == "LOG_LEVEL"), "spec.config applied at install: {env:?}");
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        assert_eq!(env_and_generation(&client, &ns.name, dep).await.1, installed, "no rollout without an edit");

        let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
        let mut csv = serde_json::to_value(csvs.get(csv_name).await.expect("the CSV")).expect("CSV as JSON");
        let container =
            &mut csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0];
        let mut env = container["env"].as_array().cloned().unwrap_or_default();
        env.push(json!({"name": "HOTFIX", "value": "1"}));
        container["env"] = json!(env);
        let csv: ClusterServiceVersion = serde_json::from_value(csv).expect("CSV");
        csvs.replace(csv_name, &PostParams::default(), &csv).await.expect("edit spec.install");
        let (env, rolled) = eventually("the hotfix rolled out", WAIT, || async {
            let (env, generation) = env_and_generation(&client, &ns.name, dep).await;
            env.iter().any(|e| e == "HOTFIX").then_some((env, generation))
        })
        .await;
        assert!(env.iter().any(|e| e == "LOG_LEVEL"), "the Subscription's spec.config kept on top: {env:?}");
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let settled = env_and_generation(&client, &ns.name, dep).await.1;
        assert_eq!((rolled, settled), (installed + 1, installed + 1), "one rollout for one edit");

        let subs: Api<capstan::api::Subscription> = Api::namespaced(client.clone(), &ns.name);
        let config = json!({"spec": {"config": {"env": [{"name": "LOG_LEVEL", "value": "info"}]}}});
        subs.patch("nginx-operator", &PatchParams::default(), &Patch::Merge(&config)).await.expect("new spec.config");
        let (env, reconfigured) = eventually("the new spec.config rolled out", WAIT, || async {
            let (env, generation) = env_values_and_generation(&client, &ns.name, dep).await;
            env.iter().any(|(n, v)| n == "LOG_LEVEL" && v == "info").then_some((env, generation))
        })
        .await;
        assert!(env.iter().any(|(n, _)| n == "HOTFIX"), "the hotfixed strategy kept: {env:?}");
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let settled = env_and_generation(&client, &ns.name, dep).await.1;
        assert_eq!((reconfigured, settled), (rolled + 1, rolled + 1), "one rollout for one new config");
    })
}
