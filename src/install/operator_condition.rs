//! The OperatorCondition OLM v0 makes for every CSV, and the Role and RoleBinding that let the
//! operator's ServiceAccounts read and update it (OLM v0.38.0
//! `pkg/controller/operators/operatorconditiongenerator_controller.go`,
//! `operatorcondition_controller.go`): [`objects`] is pure, [`ensure`] applies them and writes
//! `status.conditions` from `spec.conditions` as OLM's controller does.
//!
//! - OperatorCondition `<csv>` (`operators.coreos.com/v2`) in the CSV's namespace, controlled by the
//!   CSV (`controller: true`, `blockOwnerDeletion: false`), `spec.deployments` = the install
//!   strategy's Deployment names, `spec.serviceAccounts` = the ServiceAccounts of
//!   `clusterPermissions` then `permissions` (OLM keeps duplicates; so does capstan), `["default"]`
//!   when there are none.
//! - Role `<csv>`: `get, update, patch` on `operatorconditions` named `<csv>`; RoleBinding `<csv>` to
//!   it for each ServiceAccount; both labelled `olm.managed: "true"` and controlled by the
//!   OperatorCondition.
//!
//! The `OPERATOR_CONDITION_NAME=<csv>` variable is already in every container of the Deployments
//! capstan creates ([`super::plan::steps`]); OLM adds it after the fact.

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{FIELD_MANAGER, LABEL_MANAGED};
use crate::api::{ClusterServiceVersion, OperatorCondition, OperatorConditionStatus};

/// `spec.serviceAccounts` OLM writes for a CSV (`getServiceAccountNames`).
pub fn service_accounts(csv: &ClusterServiceVersion) -> Vec<String> {
    let Some(s) = csv.spec.install.spec.as_ref() else { return vec!["default".into()] };
    let mut out: Vec<String> = s
        .cluster_permissions
        .iter()
        .flatten()
        .chain(s.permissions.iter().flatten())
        .map(|p| p.service_account_name.clone())
        .filter(|n| !n.is_empty())
        .collect();
    if out.is_empty() {
        out.push("default".into());
    }
    out
}

/// `spec.deployments` OLM writes for a CSV (`getDeploymentNames`).
pub fn deployments(csv: &ClusterServiceVersion) -> Vec<String> {
    csv.spec
        .install
        .spec
        .iter()
        .flat_map(|s| s.deployments.iter())
        .map(|d| d.name.clone())
        .filter(|n| !n.is_empty())
        .collect()
}

/// The OperatorCondition, Role and RoleBinding of `csv`, in that order, as JSON for server-side
/// apply. `csv_uid` and `oc_uid` are the owners' UIDs (the Role and RoleBinding are owned by the
/// OperatorCondition, so they need its UID: pass `""` to get only the OperatorCondition right).
pub fn objects(csv: &ClusterServiceVersion, csv_uid: &str, oc_uid: &str) -> Vec<Value> {
    let name = csv.name_any();
    let ns = csv.namespace().unwrap_or_default();
    let owner = |api_version: &str, kind: &str, uid: &str| json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": false}]);
    // OLM's adoption controller labels the OperatorCondition with the CSV's component labels
    // (`adoption_controller.go`: objects the CSV owns join its Operator).
    let components: serde_json::Map<String, Value> = csv
        .labels()
        .iter()
        .filter(|(k, _)| k.starts_with(super::COMPONENT_LABEL_PREFIX))
        .map(|(k, _)| (k.clone(), json!("")))
        .collect();
    let mut oc = json!({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": owner("operators.coreos.com/v1alpha1", "ClusterServiceVersion", csv_uid)},
        "spec": {"serviceAccounts": service_accounts(csv), "deployments": deployments(csv)},
    });
    if !components.is_empty() {
        oc["metadata"]["labels"] = Value::Object(components);
    }
    let oc_owner = owner("operators.coreos.com/v2", "OperatorCondition", oc_uid);
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": ns, "labels": {LABEL_MANAGED: "true"}, "ownerReferences": oc_owner},
        "rules": [{"verbs": ["get", "update", "patch"], "apiGroups": ["operators.coreos.com"], "resources": ["operatorconditions"], "resourceNames": [name]}],
    });
    let subjects: Vec<Value> =
        service_accounts(csv).into_iter().map(|sa| json!({"kind": "ServiceAccount", "name": sa})).collect();
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns, "labels": {LABEL_MANAGED: "true"}, "ownerReferences": oc_owner},
        "subjects": subjects,
        "roleRef": {"kind": "Role", "name": name, "apiGroup": "rbac.authorization.k8s.io"},
    });
    vec![oc, role, binding]
}

/// Error of [`ensure`]: what was being done and the API server's answer.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct OperatorConditionError {
    /// E.g. `applying OperatorCondition ns/op.v1`.
    pub what: String,
    /// The API server's error.
    #[source]
    pub source: kube::Error,
}

/// Applies [`objects`] for `csv` (which must have a UID, i.e. exist) and copies
/// `spec.conditions` to `status.conditions` ([`OperatorCondition::synced_status_conditions`]).
/// Returns the OperatorCondition as it is on the cluster afterwards.
pub async fn ensure(client: &Client, csv: &ClusterServiceVersion) -> Result<OperatorCondition, OperatorConditionError> {
    let ns = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let e = |what: String| move |source| OperatorConditionError { what, source };
    let ocs: Api<OperatorCondition> = Api::namespaced(client.clone(), &ns);
    let [oc, role, binding]: [Value; 3] =
        objects(csv, &csv.uid().unwrap_or_default(), "").try_into().unwrap_or_else(|_| unreachable!("three objects"));
    let mut applied = ocs
        .patch(&name, &pp, &Patch::Apply(&oc))
        .await
        .map_err(e(format!("applying OperatorCondition {ns}/{name}")))?;
    let oc_uid = applied.uid().unwrap_or_default();
    let fix = |mut v: Value| {
        v["metadata"]["ownerReferences"][0]["uid"] = json!(oc_uid);
        v
    };
    // The Role, its binding and the status copy depend only on the OperatorCondition: sent
    // together.
    let (role, binding) = (fix(role), fix(binding));
    let roles = Api::<Role>::namespaced(client.clone(), &ns);
    let bindings = Api::<RoleBinding>::namespaced(client.clone(), &ns);
    let conditions = applied.synced_status_conditions();
    let status = async {
        match conditions {
            Some(conditions) => {
                let status = json!({"status": OperatorConditionStatus { conditions }});
                ocs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .map(Some)
                    .map_err(e(format!("writing status of OperatorCondition {ns}/{name}")))
            }
            None => Ok(None),
        }
    };
    let (_, _, written) = futures::try_join!(
        async { roles.patch(&name, &pp, &Patch::Apply(&role)).await.map_err(e(format!("applying Role {ns}/{name}"))) },
        async {
            bindings
                .patch(&name, &pp, &Patch::Apply(&binding))
                .await
                .map_err(e(format!("applying RoleBinding {ns}/{name}")))
        },
        status,
    )?;
    if let Some(written) = written {
        applied = written;
    }
    Ok(applied)
}

/// The CSVs the plan's steps replace: `spec.replaces` of every ClusterServiceVersion step
/// (capstan writes it from the cluster's installed CSV, [`super::InstallTarget::replaces`]), as
/// `(namespace, name)`.
pub fn replaced_csvs(steps: &[super::Step]) -> Vec<(String, String)> {
    steps
        .iter()
        .filter(|s| s.kind == "ClusterServiceVersion")
        .filter_map(|s| {
            let r = s.manifest.pointer("/spec/replaces").and_then(Value::as_str).filter(|r| !r.is_empty())?;
            Some((s.namespace.clone().unwrap_or_default(), r.to_string()))
        })
        .collect()
}

/// Reason (on the InstallPlan's `Installed` condition and the Subscription) of an upgrade held by
/// an OperatorCondition: OLM's CSV reason `OperatorConditionNotUpgradeable`.
pub const NOT_UPGRADEABLE: &str = "OperatorConditionNotUpgradeable";

/// Whether CSV `ns/csv` may be replaced now (OLM `isOperatorUpgradeable`, read when the new CSV
/// is `Pending`): its OperatorCondition's [`OperatorCondition::upgradeable`]; no OperatorCondition
/// means yes. Copies `spec.conditions` to `status.conditions` on the way, as OLM's controller
/// does. `Ok(Err(message))`: held, with the message to show
/// (`operator is not upgradeable: …` naming the CSV).
pub async fn may_replace(client: &Client, ns: &str, csv: &str) -> Result<Result<(), String>, OperatorConditionError> {
    let ocs: Api<OperatorCondition> = Api::namespaced(client.clone(), ns);
    let e = |what: String| move |source| OperatorConditionError { what, source };
    let Some(oc) = ocs.get_opt(csv).await.map_err(e(format!("reading OperatorCondition {ns}/{csv}")))? else {
        return Ok(Ok(()));
    };
    if let Some(conditions) = oc.synced_status_conditions() {
        let status = json!({"status": OperatorConditionStatus { conditions }});
        ocs.patch_status(csv, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(e(format!("writing status of OperatorCondition {ns}/{csv}")))?;
    }
    Ok(oc.upgradeable().map_err(|m| format!("CSV {ns}/{csv} holds its upgrade: {m} (OperatorCondition {ns}/{csv}; the upgrade proceeds once Upgradeable is no longer False)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(strategy: Value) -> ClusterServiceVersion {
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "op.v1", "namespace": "ns"},
            "spec": {"displayName": "op", "install": {"strategy": "deployment", "spec": strategy}}
        }))
        .expect("csv")
    }

    #[test]
    fn objects_are_olms() {
        let c = csv(json!({
            "deployments": [{"name": "op-controller", "spec": {}}, {"name": "op-webhook", "spec": {}}],
            "permissions": [{"serviceAccountName": "op-sa", "rules": []}],
            "clusterPermissions": [{"serviceAccountName": "op-cluster-sa", "rules": []}]
        }));
        let o = objects(&c, "csv-uid", "oc-uid");
        assert_eq!(
            o[0]["spec"],
            json!({"serviceAccounts": ["op-cluster-sa", "op-sa"], "deployments": ["op-controller", "op-webhook"]})
        );
        assert_eq!(
            o[0]["metadata"]["ownerReferences"][0],
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "op.v1", "uid": "csv-uid", "controller": true, "blockOwnerDeletion": false})
        );
        assert_eq!(o[1]["rules"][0]["resourceNames"], json!(["op.v1"]));
        assert_eq!(o[1]["rules"][0]["verbs"], json!(["get", "update", "patch"]));
        assert_eq!(o[1]["metadata"]["ownerReferences"][0]["kind"], "OperatorCondition");
        assert_eq!(
            o[2]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "op-cluster-sa"}, {"kind": "ServiceAccount", "name": "op-sa"}])
        );
        assert_eq!(o[2]["roleRef"]["name"], "op.v1");
        // No permissions at all: the default ServiceAccount, as OLM.
        let bare = csv(json!({"deployments": [{"name": "d", "spec": {}}]}));
        assert_eq!(service_accounts(&bare), ["default"]);
    }
}
