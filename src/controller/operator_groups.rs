//! The reads of OperatorGroups that the CSV, InstallPlan and OperatorGroup reconcilers share: a
//! namespace's group and its targets ([`operator_group_targets`]) and whether a CSV may own its
//! APIs ([`api_ownership`]). The rules are pure, in [`crate::install::operator_group`]; this
//! file only lists what they decide from. No reconciler imports another: they meet here.

use kube::api::Api;
use kube::{Client, ResourceExt};

use k8s_openapi::api::core::v1::Namespace;

use super::{Error, kube_err};
use crate::api::OperatorGroup;
use crate::api::clusterserviceversion::ClusterServiceVersionSpec;
use crate::install::aggregation::ApiOwnership;
use crate::install::from_watch_cache;
use crate::install::operator_group::{self, GroupLookup, GroupTargets};

/// The OperatorGroup of `namespace` and its target namespaces ([`GroupTargets`];
/// [`operator_group::group_targets`]): one list of the namespace's groups, and one of the
/// namespaces its selector matches when it has one.
pub(crate) async fn operator_group_targets(client: &Client, namespace: &str) -> Result<GroupTargets, Error> {
    let ogs = Api::<OperatorGroup>::namespaced(client.clone(), namespace)
        .list(&from_watch_cache())
        .await
        .map_err(kube_err(format!("listing OperatorGroups in {namespace}")))?;
    match operator_group::group_targets(namespace, &ogs.items) {
        GroupLookup::Decided(targets) => Ok(targets),
        GroupLookup::Select { name, selector, webhook_selector } => {
            let nss = Api::<Namespace>::all(client.clone()).list(&from_watch_cache().labels(&selector)).await.map_err(
                kube_err(format!("listing namespaces for the selector of OperatorGroup {namespace}/{name}")),
            )?;
            let mut targets: Vec<String> = nss.items.iter().map(|n| n.name_any()).collect();
            targets.sort();
            Ok(GroupTargets::Found { name, targets, webhook_selector })
        }
    }
}

/// Whether CSV `csv_name` (spec `spec`) in OperatorGroup `namespace/og` with target namespaces
/// `targets` may own the APIs it provides ([`operator_group::api_ownership`] over every
/// OperatorGroup of the cluster, one list). A CSV providing no API, or `copied` (a copy of a CSV
/// in a target namespace), costs no read and is [`ApiOwnership::Free`]. Used by the CSV
/// reconciler and, before it applies anything, by the InstallPlan reconciler. Also returns the
/// resourceVersion of the CSV's group as read, the precondition of a write of the decided
/// annotation.
pub(crate) async fn api_ownership(
    client: &Client,
    namespace: &str,
    og: &str,
    targets: &[String],
    csv_name: &str,
    spec: &ClusterServiceVersionSpec,
    copied: bool,
) -> Result<(ApiOwnership, Option<String>), Error> {
    let add = operator_group::provided_api_set(spec);
    if copied || add.is_empty() {
        return Ok((ApiOwnership::Free, None));
    }
    let groups = Api::<OperatorGroup>::all(client.clone())
        .list(&from_watch_cache())
        .await
        .map_err(kube_err("listing OperatorGroups of all namespaces"))?;
    Ok(operator_group::api_ownership(&groups.items, namespace, og, targets, csv_name, &add))
}
