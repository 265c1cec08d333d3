//! Copied CSVs: the copy of an installed CSV that OLM keeps in each other namespace its
//! OperatorGroup targets, so that users of those namespaces see the operator that manages them
//! (`reference/olm-v0.md` §1.6; OLM v0.46.0 `pkg/controller/operators/olm/operatorgroup.go`:
//! `csvCopyPrototype`, `ensureCSVsInNamespaces`, `pruneFromNamespace`; `operator.go`:
//! `syncCopyCSV`, `removeDanglingChildCSVs`, `getCopiedCSVsCondition`). Pure; the controller's
//! `copied_csvs.rs` reads and writes.
//!
//! A group that targets all namespaces gets copies only while the OLMConfig allows them
//! (`api::OlmConfig::copied_csvs_are_enabled`); a group with a list of targets always does, as in
//! OLM (its flag applies to AllNamespaces groups only).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use super::{ANNOTATION_OPERATOR_NAMESPACE, ANNOTATION_TARGET_NAMESPACES, COMPONENT_LABEL_PREFIX, LABEL_COPIED_FROM};
use crate::api::ClusterServiceVersion;
use crate::api::clusterserviceversion::{CsvPhase, CsvReason};
use crate::api::olmconfig::DISABLED_COPIED_CSVS;

/// The annotation kubectl keeps its last applied object in; not copied (OLM: "big").
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether `csv` is a copy (OLM `IsCopied`): it has the `olm.copiedFrom` label, its reason is
/// `Copied`, or its `olm.operatorNamespace` annotation names another namespace.
pub fn is_copy(csv: &ClusterServiceVersion) -> bool {
    let ns = csv.namespace().unwrap_or_default();
    csv.labels().contains_key(LABEL_COPIED_FROM)
        || csv.status.as_ref().is_some_and(|s| s.reason == Some(CsvReason::Copied))
        || csv.annotations().get(ANNOTATION_OPERATOR_NAMESPACE).is_some_and(|o| *o != ns)
}

/// Whether `csv` may be copied (OLM `IsUncopiable`, negated): it has a phase and its reason is
/// none of those that say it is not a member of a group that could host it.
pub fn is_copiable(csv: &ClusterServiceVersion) -> bool {
    let Some(status) = csv.status.as_ref() else { return false };
    if status.phase.is_none() {
        return false;
    }
    !matches!(
        status.reason,
        Some(
            CsvReason::Copied
                | CsvReason::InvalidInstallModes
                | CsvReason::NoTargetNamespaces
                | CsvReason::UnsupportedOperatorGroup
                | CsvReason::NoOperatorGroup
                | CsvReason::TooManyOperatorGroups
                | CsvReason::InterOperatorGroupOwnerConflict
                | CsvReason::CannotModifyStaticOperatorGroupProvidedApis
        )
    )
}

/// The copy of `csv` (installed in its namespace) for another namespace, without namespace
/// (OLM `csvCopyPrototype`): its name, annotations but `olm.targetNamespaces` and kubectl's
/// last applied object, labels but the `operators.coreos.com/` component labels, plus
/// `olm.copiedFrom=<namespace>`; its spec; its status with reason `Copied` and OLM's message.
pub fn prototype(csv: &ClusterServiceVersion) -> ClusterServiceVersion {
    let from = csv.namespace().unwrap_or_default();
    let annotations: BTreeMap<String, String> = csv
        .annotations()
        .iter()
        .filter(|(k, _)| *k != ANNOTATION_TARGET_NAMESPACES && *k != LAST_APPLIED)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut labels: BTreeMap<String, String> = csv
        .labels()
        .iter()
        .filter(|(k, _)| !k.starts_with(COMPONENT_LABEL_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.insert(LABEL_COPIED_FROM.into(), from.clone());
    let mut status = csv.status.clone().unwrap_or_default();
    status.reason = Some(CsvReason::Copied);
    status.message = Some(format!("The operator is running in {from} but is managing this namespace"));
    let mut copy = ClusterServiceVersion::new(&csv.name_any(), csv.spec.clone());
    copy.metadata.annotations = Some(annotations);
    copy.metadata.labels = Some(labels);
    copy.status = Some(status);
    copy
}

/// The namespaces that should hold a copy of a CSV installed in `own`, of a group whose
/// `status.namespaces` is `targets` (`[""]`: all namespaces), on a cluster with namespaces
/// `cluster` (OLM `ensureCSVsInNamespaces` walks the cluster's namespaces): every other
/// namespace for an AllNamespaces group while `all_namespaces_enabled`, else none; for a group with
/// a list, the other targets that are among `cluster`.
pub fn copy_namespaces(
    own: &str,
    targets: &[String],
    cluster: &[String],
    all_namespaces_enabled: bool,
) -> BTreeSet<String> {
    let all = targets.iter().any(|t| t.is_empty());
    if all && !all_namespaces_enabled {
        return BTreeSet::new();
    }
    cluster.iter().filter(|n| *n != own && (all || targets.contains(n))).cloned().collect()
}

/// Why copy `copy` must go, given its original `parent` (the CSV of the same name in the
/// namespace its `olm.operatorNamespace` annotation names, when found) — OLM
/// `removeDanglingChildCSVs`, and `syncCopyCSV` for an AllNamespaces group whose copies are
/// disabled. `None`: it stays.
pub fn stale_copy(
    copy: &ClusterServiceVersion,
    parent: Option<&ClusterServiceVersion>,
    all_namespaces_enabled: bool,
) -> Option<&'static str> {
    let ns = copy.namespace().unwrap_or_default();
    if !copy.annotations().contains_key(ANNOTATION_OPERATOR_NAMESPACE) {
        return Some("it has no olm.operatorNamespace annotation");
    }
    let Some(parent) = parent else { return Some("its original CSV is gone") };
    if parent.namespace().as_deref() == Some(ns.as_str()) {
        return Some("its olm.operatorNamespace annotation names its own namespace");
    }
    let status = parent.status.as_ref();
    if status.is_some_and(|s| {
        s.phase == Some(CsvPhase::Failed) && s.reason == Some(CsvReason::InterOperatorGroupOwnerConflict)
    }) {
        return Some("its original CSV's group conflicts with another over its APIs");
    }
    let targets = parent.annotations().get(ANNOTATION_TARGET_NAMESPACES)?;
    let all = targets.is_empty();
    if !all && !targets.split(',').any(|t| t == ns) {
        return Some("its original CSV's group no longer targets this namespace");
    }
    if all && !all_namespaces_enabled {
        return Some("copied CSVs are disabled (OLMConfig spec.features.disableCopiedCSVs)");
    }
    None
}

/// What of `existing` differs from `desired` (a [`prototype`]): `(object, status)` — its labels,
/// annotations or spec; its status.
pub fn differences(existing: &ClusterServiceVersion, desired: &ClusterServiceVersion) -> (bool, bool) {
    let object = existing.labels() != desired.labels()
        || existing.annotations() != desired.annotations()
        || existing.spec != desired.spec;
    (object, existing.status != desired.status)
}

/// The `DisabledCopiedCSVs` condition of the OLMConfig (OLM `getCopiedCSVsCondition`): with
/// copies `enabled` or not, and whether some CSV of an AllNamespaces group has not the copies it
/// should (`unsettled`: missing ones, or unexpected ones when disabled). `now` is its transition
/// time.
pub fn copied_csvs_condition(enabled: bool, unsettled: bool, now: Time) -> Condition {
    let (status, reason, message) = match (enabled, unsettled) {
        (true, false) => ("False", "CopiedCSVsEnabled", "Copied CSVs are enabled and present across the cluster"),
        (true, true) => {
            ("False", "CopiedCSVsEnabled", "Copied CSVs are enabled and at least one copied CSVs is missing")
        }
        (false, true) => (
            "False",
            "CopiedCSVsDisabled",
            "Copied CSVs are disabled and at least one unexpected copied CSV was found for an operator installed in AllNamespace mode",
        ),
        (false, false) => (
            "True",
            "CopiedCSVsDisabled",
            "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode",
        ),
    };
    Condition {
        type_: DISABLED_COPIED_CSVS.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: now,
        observed_generation: None,
    }
}

/// Whether a CSV of an AllNamespaces group has the copies it should (OLM
/// `getCopiedCSVEvaluatorFunc`, with no protected namespaces): one in each other active
/// namespace (`active`: how many the cluster has) when enabled, none when disabled.
pub fn copies_settled(enabled: bool, copies: usize, active: usize) -> bool {
    if enabled { copies + 1 == active } else { copies == 0 }
}

#[cfg(test)]
mod tests;
