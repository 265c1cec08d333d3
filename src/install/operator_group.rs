//! The OperatorGroup rules, pure (`reference/olm-v0.md` §1.5, §1.6): which OperatorGroup of a
//! namespace counts and how its target namespaces are found ([`group_targets`]), whether a CSV's
//! install modes fit those targets ([`check_install_mode`]), an OperatorGroup's `spec.selector`
//! as a label-selector string ([`label_selector`]), and whether a CSV may own the APIs it
//! provides given every OperatorGroup of the cluster ([`api_ownership`], over
//! [`super::aggregation::decide_api_ownership`]). The reads they need (the namespace's groups,
//! the namespaces a selector matches, every group of the cluster) are the controller's.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;

use super::aggregation::{self, ApiOwnership, GroupSurface};
use crate::api::OperatorGroup;
use crate::api::operatorgroup::PROVIDED_APIS_ANNOTATION;

/// Why a CSV's install modes do not fit its OperatorGroup's target namespaces (§1.5,
/// [API] `clusterserviceversion.go` `InstallModeSet.Supports`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InstallModeError {
    /// OLM's reason: `UnsupportedOperatorGroup`, `InvalidInstallModes` or `NoTargetNamespaces`.
    pub reason: &'static str,
    /// What does not fit and what to do.
    pub message: String,
}

/// Checks `modes` (`spec.installModes` as `(type, supported)`) against the OperatorGroup's target
/// namespaces `targets` (`[""]` = all namespaces) for an operator in `namespace`.
pub fn check_install_mode(
    namespace: &str,
    targets: &[String],
    modes: &[(String, bool)],
) -> Result<(), InstallModeError> {
    let supports = |m: &str| modes.iter().any(|(t, s)| t == m && *s);
    let need = |m: &str, why: String| {
        if supports(m) {
            Ok(())
        } else {
            Err(InstallModeError {
                reason: "UnsupportedOperatorGroup",
                message: format!(
                    "{why} needs install mode {m}, which the CSV does not support (spec.installModes supports: {}); change the OperatorGroup's targetNamespaces to fit one of those",
                    {
                        let ok: Vec<&str> = modes.iter().filter(|(_, s)| *s).map(|(t, _)| t.as_str()).collect();
                        if ok.is_empty() { "none".to_string() } else { ok.join(", ") }
                    }
                ),
            })
        }
    };
    match targets {
        [] => Err(InstallModeError { reason: "NoTargetNamespaces", message: "the OperatorGroup selects no target namespace; set spec.targetNamespaces or a selector that matches a namespace".into() }),
        [t] if t.is_empty() => need("AllNamespaces", "an OperatorGroup targeting all namespaces".into()),
        [t] if t == namespace => need("OwnNamespace", format!("an OperatorGroup targeting only its own namespace {namespace}")),
        [t] => need("SingleNamespace", format!("an OperatorGroup targeting the single namespace {t}")),
        many => {
            if many.iter().any(|t| t.is_empty()) {
                return Err(InstallModeError { reason: "InvalidInstallModes", message: "the OperatorGroup's targetNamespaces mixes \"\" (all namespaces) with named namespaces; use one or the other".into() });
            }
            need("MultiNamespace", format!("an OperatorGroup targeting namespaces {}", many.join(", ")))?;
            if many.iter().any(|t| t == namespace) {
                need("OwnNamespace", format!("an OperatorGroup whose targets include its own namespace {namespace}"))?;
            }
            Ok(())
        }
    }
}

/// The OperatorGroup of a namespace as the CSV, InstallPlan and OperatorGroup reconcilers see it.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupTargets {
    /// The one OperatorGroup `name` and its target namespaces (`[""]` for all namespaces).
    Found {
        /// The OperatorGroup's name.
        name: String,
        /// Its target namespaces.
        targets: Vec<String>,
        /// The namespace selector of its members' admission webhooks ([`webhook_selector`]).
        webhook_selector: Option<serde_json::Value>,
    },
    /// No usable OperatorGroup: OLM's reason (`NoOperatorGroup`, `TooManyOperatorGroups`,
    /// `InvalidOperatorGroup`) and what to do.
    Unfit {
        /// The reason.
        reason: &'static str,
        /// The message.
        message: String,
    },
}

/// A `metav1.LabelSelector` as the label-selector string of a list call (`a=b,c in (d,e),!f`).
/// Errors name an operator other than In, NotIn, Exists, DoesNotExist, or In/NotIn without values.
pub fn label_selector(sel: &LabelSelector) -> Result<String, String> {
    let mut parts: Vec<String> = sel.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default();
        parts.push(match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(format!("matchExpressions key {:?}: operator {} needs values", e.key, e.operator));
            }
            "In" => format!("{} in ({})", e.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, values.join(",")),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => {
                return Err(format!(
                    "matchExpressions key {:?}: unknown operator {other:?} (use In, NotIn, Exists or DoesNotExist)",
                    e.key
                ));
            }
        });
    }
    Ok(parts.join(","))
}

/// The target namespaces of a namespace's one OperatorGroup, as far as they are known without
/// another read ([`group_targets`]).
#[derive(Debug, Clone, PartialEq)]
pub enum GroupLookup {
    /// Decided: the targets (`spec.targetNamespaces`, or `[""]` for all namespaces), or why the
    /// namespace has no usable OperatorGroup.
    Decided(GroupTargets),
    /// The OperatorGroup `name` selects its targets by `spec.selector`: the namespaces matching
    /// `selector` (a label-selector string, [`label_selector`]), sorted by name.
    Select {
        /// The OperatorGroup's name.
        name: String,
        /// The label selector of the namespaces to list.
        selector: String,
        /// The namespace selector of its members' admission webhooks ([`webhook_selector`]).
        webhook_selector: Option<serde_json::Value>,
    },
}

/// The OperatorGroup of `namespace` among `groups` (every OperatorGroup of that namespace) and
/// its targets (OLM `operatorgroup.go`): none is `NoOperatorGroup`, several are
/// `TooManyOperatorGroups`, a selector that does not parse is `InvalidOperatorGroup`; non-empty
/// `spec.targetNamespaces` win over a non-empty `spec.selector`; neither is all namespaces
/// (`[""]`). The messages are OLM's, with what to do.
pub fn group_targets(namespace: &str, groups: &[OperatorGroup]) -> GroupLookup {
    let og = match groups {
        [] => {
            return GroupLookup::Decided(GroupTargets::Unfit {
                reason: "NoOperatorGroup",
                message: format!(
                    "csv in namespace {namespace} with no operatorgroups; create one OperatorGroup in {namespace}"
                ),
            });
        }
        [og] => og,
        many => {
            let names: Vec<String> = many.iter().map(|o| o.name_any()).collect();
            return GroupLookup::Decided(GroupTargets::Unfit {
                reason: "TooManyOperatorGroups",
                message: format!(
                    "csv created in namespace {namespace} with multiple operatorgroups ({}); keep exactly one",
                    names.join(", ")
                ),
            });
        }
    };
    let webhook_selector = webhook_selector(og);
    let found = |targets: Vec<String>| {
        GroupLookup::Decided(GroupTargets::Found {
            name: og.name_any(),
            targets,
            webhook_selector: webhook_selector.clone(),
        })
    };
    match (&og.spec.target_namespaces, &og.spec.selector) {
        (Some(t), _) if !t.is_empty() => found(t.clone()),
        (_, Some(sel))
            if sel.match_labels.as_ref().is_some_and(|m| !m.is_empty())
                || sel.match_expressions.as_ref().is_some_and(|m| !m.is_empty()) =>
        {
            match label_selector(sel) {
                Ok(selector) => GroupLookup::Select { name: og.name_any(), selector, webhook_selector },
                Err(e) => GroupLookup::Decided(GroupTargets::Unfit {
                    reason: "InvalidOperatorGroup",
                    message: format!("OperatorGroup {namespace}/{}: spec.selector: {e}", og.name_any()),
                }),
            }
        }
        _ => found(vec![String::new()]),
    }
}

/// The namespace selector OLM gives the admission webhooks of the CSVs in `og` (OLM
/// `OperatorGroup.NamespaceLabelSelector`, operator-framework/api
/// `pkg/operators/v1/operatorgroup_types.go`, used by `pkg/controller/install/webhook.go`): with
/// `spec.targetNamespaces`, `{matchLabels: {olm.operatorgroup.uid/<uid>: ""}}`, the label the
/// OperatorGroup reconciler puts on each target namespace; else the group's `spec.selector`
/// when it has one; else none (all namespaces). Pure.
pub fn webhook_selector(og: &OperatorGroup) -> Option<serde_json::Value> {
    if og.spec.target_namespaces.as_ref().is_some_and(|t| !t.is_empty()) {
        let label = aggregation::namespace_label(og.uid().as_deref().unwrap_or_default());
        return Some(serde_json::json!({"matchLabels": {label: ""}}));
    }
    og.spec.selector.as_ref().and_then(|s| serde_json::to_value(s).ok())
}

/// The annotations a member CSV of OperatorGroup `namespace/og` with target namespaces `targets`
/// (`[""]` = all namespaces) carries — `olm.operatorGroup`, `olm.operatorNamespace` and
/// `olm.targetNamespaces` (sorted, comma-joined; `""` for all namespaces) — when any of
/// `current` (the CSV's annotations) differs from them, else `None`. OLM's olm-operator writes
/// them on every CSV of the group, made by an InstallPlan or by hand (`operatorGroupForCSV`,
/// `annotateCSVs`, `operatorGroupAnnotationsDiffer` in
/// `pkg/controller/operators/olm/operatorgroup.go`). Pure.
pub fn member_annotations(
    current: &std::collections::BTreeMap<String, String>,
    namespace: &str,
    og: &str,
    targets: &[String],
) -> Option<std::collections::BTreeMap<String, String>> {
    let mut sorted: Vec<&str> = targets.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let want: std::collections::BTreeMap<String, String> = [
        (super::ANNOTATION_OPERATOR_GROUP, og.to_string()),
        (super::ANNOTATION_OPERATOR_NAMESPACE, namespace.to_string()),
        (super::ANNOTATION_TARGET_NAMESPACES, sorted.join(",")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    want.iter().any(|(k, v)| current.get(k) != Some(v)).then_some(want)
}

/// The APIs `spec` provides as the [`aggregation::gvk_string`]s `olm.providedAPIs` lists.
pub fn provided_api_set(spec: &crate::api::clusterserviceversion::ClusterServiceVersionSpec) -> BTreeSet<String> {
    aggregation::provided_apis(spec).iter().map(aggregation::gvk_string).collect()
}

/// Whether CSV `csv_name` providing the APIs `add` ([`provided_api_set`]) in OperatorGroup
/// `namespace/og` with target namespaces `targets` may own them, given `groups`, every
/// OperatorGroup of the cluster ([`aggregation::decide_api_ownership`]; OLM
/// `syncClusterServiceVersion`, `groups.go`). The other groups are seen with their
/// `status.namespaces`. Also returns the resourceVersion of the CSV's group as listed, the
/// precondition of a write of the decided annotation; a group not among `groups` is
/// [`ApiOwnership::Free`] with none.
pub fn api_ownership(
    groups: &[OperatorGroup],
    namespace: &str,
    og: &str,
    targets: &[String],
    csv_name: &str,
    add: &BTreeSet<String>,
) -> (ApiOwnership, Option<String>) {
    let annotation = |g: &OperatorGroup| g.annotations().get(PROVIDED_APIS_ANNOTATION).cloned().unwrap_or_default();
    let is_own = |g: &OperatorGroup| g.namespace().as_deref() == Some(namespace) && g.name_any() == og;
    let Some(own) = groups.iter().find(|g| is_own(g)) else { return (ApiOwnership::Free, None) };
    let group = GroupSurface::new(namespace, og, targets, &annotation(own));
    let others: Vec<GroupSurface> = groups
        .iter()
        .filter(|g| !is_own(g))
        .map(|g| {
            GroupSurface::new(
                &g.namespace().unwrap_or_default(),
                &g.name_any(),
                g.status.as_ref().map(|s| s.namespaces.as_slice()).unwrap_or_default(),
                &annotation(g),
            )
        })
        .collect();
    let decided = aggregation::decide_api_ownership(
        &format!("{namespace}/{csv_name}"),
        false,
        add,
        &group,
        &others,
        own.spec.static_provided_apis == Some(true),
    );
    (decided, own.metadata.resource_version.clone())
}

#[cfg(test)]
mod tests {
    #[test]
    fn member_csvs_carry_their_groups_annotations_as_olm_writes_them() {
        use std::collections::BTreeMap;
        let m = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let want = m(&[("olm.operatorGroup", "og"), ("olm.operatorNamespace", "ns"), ("olm.targetNamespaces", "a,b")]);
        // A CSV made by hand has none: all three are written, targets sorted and deduplicated.
        let targets = ["b".to_string(), "a".to_string(), "b".to_string()];
        assert_eq!(member_annotations(&m(&[("x", "y")]), "ns", "og", &targets), Some(want.clone()));
        // One that has them (and others) needs nothing.
        let mut has = want.clone();
        has.insert("x".into(), "y".into());
        assert_eq!(member_annotations(&has, "ns", "og", &targets), None);
        // A group whose targets changed, or an all-namespaces group (""), rewrites them.
        assert_eq!(member_annotations(&has, "ns", "og", &[String::new()]).unwrap()["olm.targetNamespaces"], "");
        assert!(member_annotations(&has, "ns", "other", &targets).is_some());
    }

    use super::*;

    fn modes(list: &[&str]) -> Vec<(String, bool)> {
        ["OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"]
            .iter()
            .map(|m| (m.to_string(), list.contains(m)))
            .collect()
    }

    #[test]
    fn label_selectors_follow_kubernetes_syntax() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
        let req = |k: &str, op: &str, v: &[&str]| LabelSelectorRequirement {
            key: k.into(),
            operator: op.into(),
            values: Some(v.iter().map(|s| s.to_string()).collect()),
        };
        let sel = LabelSelector {
            match_labels: Some([("team".to_string(), "db".to_string())].into()),
            match_expressions: Some(vec![
                req("env", "In", &["prod", "stage"]),
                req("tier", "NotIn", &["x"]),
                req("a", "Exists", &[]),
                req("b", "DoesNotExist", &[]),
            ]),
        };
        assert_eq!(label_selector(&sel).unwrap(), "team=db,env in (prod,stage),tier notin (x),a,!b");
        let bad = LabelSelector { match_labels: None, match_expressions: Some(vec![req("env", "In", &[])]) };
        assert!(label_selector(&bad).unwrap_err().contains("needs values"));
        let bad = LabelSelector { match_labels: None, match_expressions: Some(vec![req("env", "Near", &["x"])]) };
        assert!(label_selector(&bad).unwrap_err().contains("unknown operator \"Near\""));
    }

    #[test]
    fn install_mode_rules_of_olm() {
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_install_mode("a", &t(&[""]), &modes(&["AllNamespaces"])).is_ok());
        assert_eq!(
            check_install_mode("a", &t(&[""]), &modes(&["OwnNamespace"])).unwrap_err().reason,
            "UnsupportedOperatorGroup"
        );
        assert!(check_install_mode("a", &t(&["a"]), &modes(&["OwnNamespace"])).is_ok());
        assert!(check_install_mode("a", &t(&["a"]), &modes(&["SingleNamespace"])).is_err());
        assert!(check_install_mode("a", &t(&["b"]), &modes(&["SingleNamespace"])).is_ok());
        assert!(check_install_mode("a", &t(&["a", "b"]), &modes(&["MultiNamespace"])).is_err());
        assert!(check_install_mode("a", &t(&["a", "b"]), &modes(&["MultiNamespace", "OwnNamespace"])).is_ok());
        assert!(check_install_mode("a", &t(&["b", "c"]), &modes(&["MultiNamespace"])).is_ok());
        assert_eq!(
            check_install_mode("a", &t(&["", "b"]), &modes(&["MultiNamespace"])).unwrap_err().reason,
            "InvalidInstallModes"
        );
        assert_eq!(check_install_mode("a", &[], &modes(&["AllNamespaces"])).unwrap_err().reason, "NoTargetNamespaces");
        let e = check_install_mode("a", &t(&["a"]), &modes(&["AllNamespaces"])).unwrap_err();
        assert!(
            e.message.contains("needs install mode OwnNamespace") && e.message.contains("supports: AllNamespaces"),
            "{e}"
        );
    }

    fn group(name: &str, spec: serde_json::Value) -> OperatorGroup {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn a_namespaces_one_group_and_where_its_targets_come_from() {
        let unfit = |l: GroupLookup| match l {
            GroupLookup::Decided(GroupTargets::Unfit { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(unfit(group_targets("ns", &[])), "NoOperatorGroup");
        let two = [group("a", serde_json::json!({})), group("b", serde_json::json!({}))];
        assert_eq!(unfit(group_targets("ns", &two)), "TooManyOperatorGroups");
        let found = |targets: &[&str], webhook_selector: Option<serde_json::Value>| {
            GroupLookup::Decided(GroupTargets::Found {
                name: "og".into(),
                targets: targets.iter().map(|t| t.to_string()).collect(),
                webhook_selector,
            })
        };
        // Webhooks of an all-namespaces group select nothing (every namespace), as OLM's.
        assert_eq!(group_targets("ns", &[group("og", serde_json::json!({}))]), found(&[""], None));
        let named = serde_json::json!({"targetNamespaces": ["a"], "selector": {"matchLabels": {"x": "y"}}});
        let mut og = group("og", named);
        og.metadata.uid = Some("u-1".into());
        assert_eq!(
            group_targets("ns", &[og]),
            found(&["a"], Some(serde_json::json!({"matchLabels": {"olm.operatorgroup.uid/u-1": ""}}))),
            "targetNamespaces win; webhooks select the group's namespace label"
        );
        let selected = serde_json::json!({"selector": {"matchLabels": {"x": "y"}}});
        assert_eq!(
            group_targets("ns", &[group("og", selected)]),
            GroupLookup::Select {
                name: "og".into(),
                selector: "x=y".into(),
                webhook_selector: Some(serde_json::json!({"matchLabels": {"x": "y"}}))
            }
        );
        let bad = serde_json::json!({"selector": {"matchExpressions": [{"key": "x", "operator": "Near"}]}});
        assert_eq!(unfit(group_targets("ns", &[group("og", bad)])), "InvalidOperatorGroup");
    }
}
