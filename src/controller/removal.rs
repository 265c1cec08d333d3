//! Removal that never hangs (`reference/olm-v0.md` §5.7).
//!
//! **CSV deletion.** Every ClusterServiceVersion capstan reconciles gets the finalizer
//! [`CSV_FINALIZER`] (`operators.coreos.com/csv-cleanup`, the name OLM uses since
//! operator-framework/operator-lifecycle-manager#3143 / PR #3148, \[OLM\]
//! `pkg/controller/operators/olm/operator.go` `processFinalizer`). The finalizer keeps a deleted CSV
//! until the controller has cleaned up after it, so a CSV deleted while the controller was down is
//! cleaned up when it runs again. Cleanup deletes, by the owner labels `olm.owner`,
//! `olm.owner.namespace`, `olm.owner.kind` (\[OLM\] `ownerutil.CSVOwnerSelector`):
//! ClusterRoleBindings, ClusterRoles, Mutating/ValidatingWebhookConfigurations (as OLM does), and,
//! in every namespace, Deployments, Services, ServiceAccounts, Roles, RoleBindings, ConfigMaps and
//! Secrets. Those namespaced objects also carry an ownerReference to the CSV and would be
//! garbage-collected once the CSV is gone; deleting them explicitly removes the operator before the
//! CRDs (when those are removed too) and covers what garbage collection does not: the Roles and
//! RoleBindings copied into other target namespaces carry owner labels but no ownerReference.
//! Bundle-shipped Services, ConfigMaps and Secrets (ownerReference only) that no other object owns
//! are deleted too. It waits until the ClusterRoles and ClusterRoleBindings are gone (as OLM does),
//! then removes the finalizer. Objects a bundle ships without owner labels (its own RBAC), CRDs and
//! custom resources are kept, as in OLM (§5.2, §5.7).
//!
//! **Operand removal (opt-in).** With [`ANNOTATION_UNINSTALL_OPERANDS`] or
//! [`ANNOTATION_UNINSTALL_CRDS`] set to `"true"` on the CSV or on its Subscription, or OLM's
//! `spec.cleanup.enabled: true` on the CSV (the API field of OLM's unimplemented operand-cleanup
//! design, operator-framework/operator-lifecycle-manager#2035), deleting the CSV first deletes every
//! custom resource of the CSV's owned CRDs (`spec.customresourcedefinitions.owned`) in its target
//! namespaces (all namespaces for AllNamespaces, and when the CRDs are removed too), while the
//! operator still runs so that it can complete their finalizers; waits up to
//! [`ANNOTATION_UNINSTALL_TIMEOUT`] (default [`DEFAULT_UNINSTALL_TIMEOUT`]); then removes the
//! operator and, with [`ANNOTATION_UNINSTALL_CRDS`], the CRDs (unless another CSV still owns or
//! requires one). Custom resources still there at the timeout, or at once when the operator is not
//! running, are reported in the CSV's status (phase `Deleting`, reason `WaitingOnCleanup`,
//! `status.message` and `status.cleanup.pendingDeletion`), in a Warning event and in the log, each
//! with its finalizers and the `kubectl patch` command that unblocks it; capstan never clears a
//! finalizer itself. The operator is removed after the report; the CSV (and the CRDs) stay until
//! those objects are gone, so the report stays readable. A CSV that another CSV replaces (an
//! upgrade) never removes operands or CRDs.
//!
//! **Subscription deletion.** As in OLM, deleting a Subscription leaves its operator installed
//! (§5.7, \[OLM\] `syncSubscriptionDeleted` is a no-op); capstan logs that and records an event on the
//! CSV. A Subscription that carries [`ANNOTATION_UNINSTALL_OPERANDS`] or
//! [`ANNOTATION_UNINSTALL_CRDS`] gets the finalizer [`SUBSCRIPTION_FINALIZER`]; deleting it deletes
//! its CSV (copying those annotations onto the CSV first), which is then removed as above.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::Action;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::events::EventType;
use super::{Context, Error, apply_typed_status, kube_err, now_time};
use crate::api::clusterserviceversion::{CleanupStatus, CsvPhase, CsvReason, ResourceList};
use crate::api::{ClusterServiceVersion, Subscription};
use crate::install::{
    ANNOTATION_TARGET_NAMESPACES, COMPONENT_LABEL_PREFIX, LABEL_COPIED_FROM, LABEL_OWNER, LABEL_OWNER_KIND,
    LABEL_OWNER_NAMESPACE,
};

/// The CSV finalizer: OLM's own name (\[OLM\] `olm/operator.go` `processFinalizer`, added by
/// operator-framework/operator-lifecycle-manager#3143). capstan replaces OLM on a cluster, so a CSV
/// OLM finalized before is cleaned up by capstan with the same meaning.
pub const CSV_FINALIZER: &str = "operators.coreos.com/csv-cleanup";

/// The Subscription finalizer, only on Subscriptions that ask for uninstall on deletion (see the
/// module documentation).
pub const SUBSCRIPTION_FINALIZER: &str = "operators.capstan.dev/uninstall";

/// Annotation (CSV or Subscription), `"true"` / `"false"`: when the CSV is deleted, delete the
/// custom resources of its owned CRDs first, while the operator still runs. The name follows
/// `kubectl operator uninstall --delete-operands` and `operator-sdk cleanup`.
pub const ANNOTATION_UNINSTALL_OPERANDS: &str = "operators.capstan.dev/uninstall-operands";

/// Annotation (CSV or Subscription), `"true"` / `"false"`: also delete the owned CRDs after the
/// operator (implies [`ANNOTATION_UNINSTALL_OPERANDS`], in every namespace). Follows
/// `kubectl operator uninstall --delete-crds`.
pub const ANNOTATION_UNINSTALL_CRDS: &str = "operators.capstan.dev/uninstall-crds";

/// Annotation (CSV or Subscription): how long to wait for custom resources to finish deleting while
/// the operator runs, as `90s`, `2m`, `1m30s` or `1h` (units `ms`, `s`, `m`, `h`). Default
/// [`DEFAULT_UNINSTALL_TIMEOUT`].
pub const ANNOTATION_UNINSTALL_TIMEOUT: &str = "operators.capstan.dev/uninstall-timeout";

/// Default wait for custom resources during an uninstall: 2 minutes (the default `--timeout` of
/// `kubectl operator uninstall` and `operator-sdk cleanup`).
pub const DEFAULT_UNINSTALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Parses a duration written as `<number><unit>` parts, units `ms`, `s`, `m`, `h` (e.g. `90s`,
/// `2m`, `1m30s`, `1h`): whole numbers of those units, parsed by
/// [`crate::api::common::parse_go_duration`]. `None` for anything else (empty, no unit, unknown
/// unit, a fraction, negative).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let s = text.trim();
    let units_ok =
        s.split(|c: char| c.is_ascii_digit()).filter(|u| !u.is_empty()).all(|u| matches!(u, "ms" | "s" | "m" | "h"));
    let digits_first = s.starts_with(|c: char| c.is_ascii_digit());
    let has_unit = s.ends_with(|c: char| c.is_ascii_alphabetic());
    if !(units_ok && digits_first && has_unit) {
        return None;
    }
    crate::api::common::parse_go_duration(s).ok()
}

/// What an uninstall removes, from the annotations of the CSV and its Subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UninstallSettings {
    /// Delete the custom resources of the owned CRDs before the operator.
    pub operands: bool,
    /// Delete the owned CRDs after the operator.
    pub crds: bool,
    /// How long to wait for the custom resources while the operator runs.
    pub timeout: Duration,
    /// Annotations that could not be read, each naming the object and what to write instead
    /// (an unreadable value removes nothing: data is kept).
    pub warnings: Vec<String>,
}

/// Reads [`UninstallSettings`] from `sources` (`(object description, annotations)`, the CSV first)
/// and OLM's `spec.cleanup.enabled` of the CSV. A `"true"` on any source turns a removal on; the
/// first readable timeout wins. Values other than `true`/`false` (any case) count as `false` and
/// give a warning.
pub fn uninstall_settings(
    sources: &[(String, Option<&BTreeMap<String, String>>)],
    cleanup_enabled: bool,
) -> UninstallSettings {
    let mut s = UninstallSettings {
        operands: cleanup_enabled,
        crds: false,
        timeout: DEFAULT_UNINSTALL_TIMEOUT,
        warnings: Vec::new(),
    };
    let mut timeout_set = false;
    for (what, annotations) in sources {
        let Some(annotations) = annotations else { continue };
        for (key, flag) in [(ANNOTATION_UNINSTALL_OPERANDS, &mut s.operands), (ANNOTATION_UNINSTALL_CRDS, &mut s.crds)]
        {
            match annotations.get(key).map(|v| v.trim().to_ascii_lowercase()) {
                None => {}
                Some(v) if v == "true" => *flag = true,
                Some(v) if v == "false" => {}
                Some(v) => s.warnings.push(format!("{what}: annotation {key}: {v:?} is not \"true\" or \"false\"; treated as \"false\" (nothing is removed); write \"true\" to remove")),
            }
        }
        if let Some(v) = annotations.get(ANNOTATION_UNINSTALL_TIMEOUT) {
            match parse_duration(v) {
                Some(d) if !timeout_set => {
                    s.timeout = d;
                    timeout_set = true;
                }
                Some(_) => {}
                None => s.warnings.push(format!(
                    "{what}: annotation {ANNOTATION_UNINSTALL_TIMEOUT}: {v:?} is not a duration like 90s, 2m or 1h; using {}",
                    human(DEFAULT_UNINSTALL_TIMEOUT)
                )),
            }
        }
    }
    if s.crds {
        s.operands = true;
    }
    s
}

/// `1m30s`-style text of a duration (whole seconds).
pub fn human(d: Duration) -> String {
    let secs = d.as_secs();
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// A custom resource that is still there during an uninstall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemainingObject {
    /// The CRD name, `<plural>.<group>` (what `kubectl` accepts as the resource).
    pub resource: String,
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace; `None` for cluster-scoped custom resources.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
}

impl RemainingObject {
    /// `Kind namespace/name` or `Kind name`.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// The command that clears the object's finalizers, so that its deletion completes:
    /// `kubectl patch <plural>.<group> <name> [-n <namespace>] --type=merge -p '{"metadata":{"finalizers":null}}'`.
    pub fn unblock_command(&self) -> String {
        let ns = self.namespace.as_ref().map(|n| format!(" -n {n}")).unwrap_or_default();
        format!(
            "kubectl patch {} {}{ns} --type=merge -p '{{\"metadata\":{{\"finalizers\":null}}}}'",
            self.resource, self.name
        )
    }
}

/// The status message of an uninstall whose custom resources are still Terminating: each object
/// (the first `max`, then a count) with its finalizers and the command that unblocks it.
pub fn stuck_message(csv: &str, objects: &[RemainingObject], why: &str) -> String {
    const MAX: usize = 10;
    let mut parts: Vec<String> = objects
        .iter()
        .take(MAX)
        .map(|o| {
            let fins = if o.finalizers.is_empty() {
                "no finalizers".to_string()
            } else {
                format!("finalizers: {}", o.finalizers.join(", "))
            };
            format!("{} ({fins}); to unblock it: {}", o.describe(), o.unblock_command())
        })
        .collect();
    if objects.len() > MAX {
        parts.push(format!("and {} more", objects.len() - MAX));
    }
    format!(
        "uninstall of CSV {csv}: {} custom resource{} still Terminating ({why}): {}. capstan does not clear finalizers itself: the operator's cleanup for these objects has not run; run the command only when that is acceptable. The operator has been removed; the CSV is kept until these objects are gone.",
        objects.len(),
        if objects.len() == 1 { " is" } else { "s are" },
        parts.join("; ")
    )
}

/// The reason a [`stuck_message`] gives (the text in parentheses), so that a report keeps its first
/// reason once capstan has removed the operator itself.
pub fn stuck_reason(message: &str) -> Option<&str> {
    let start = message.find(" still Terminating (")? + " still Terminating (".len();
    let len = message[start..].find("): ")?;
    Some(&message[start..start + len])
}

/// `status.cleanup.pendingDeletion` (OLM `ResourceList`s) of `objects`, grouped by group and kind.
pub fn pending_deletion(objects: &[RemainingObject]) -> Value {
    let mut groups: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    for o in objects {
        let mut inst = json!({"name": o.name});
        if let Some(ns) = &o.namespace {
            inst["namespace"] = json!(ns);
        }
        groups.entry((o.group.clone(), o.kind.clone())).or_default().push(inst);
    }
    Value::Array(
        groups
            .into_iter()
            .map(|((group, kind), instances)| json!({"group": group, "kind": kind, "instances": instances}))
            .collect(),
    )
}

/// The label selector of objects owned by CSV `namespace/name` (\[OLM\] `ownerutil.CSVOwnerSelector`).
pub fn owner_selector(namespace: &str, name: &str) -> String {
    format!("{LABEL_OWNER}={name},{LABEL_OWNER_NAMESPACE}={namespace},{LABEL_OWNER_KIND}=ClusterServiceVersion")
}

/// Where the operator's custom resources live: `None` = all namespaces.
fn target_namespaces(csv: &ClusterServiceVersion) -> Option<Vec<String>> {
    let ns = csv.namespace().unwrap_or_default();
    match csv.annotations().get(ANNOTATION_TARGET_NAMESPACES) {
        None => Some(vec![ns]),
        Some(v) => {
            let list: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
            if list.iter().any(|s| s.is_empty()) { None } else { Some(list) }
        }
    }
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}

/// What to tell when capstan's own RBAC does not let it `verb` the custom resources of `crd`
/// (the shipped `manifests/rbac.yaml` grants no access to operators' custom resources).
pub fn operands_forbidden(crd: &str, verb: &str, error: &str) -> String {
    let (plural, group) = crd.split_once('.').unwrap_or((crd, ""));
    format!(
        "capstan may not {verb} {crd} ({error}); grant capstan's ClusterRole `list` and `delete` on resource {plural} of API group {group} (docs/uninstall.md), or delete those custom resources yourself and remove the annotations {ANNOTATION_UNINSTALL_OPERANDS} / {ANNOTATION_UNINSTALL_CRDS}"
    )
}

/// The CSV hook of [`super::csv`]'s reconcile: adds [`CSV_FINALIZER`] to a live CSV (then `None`:
/// the reconcile goes on), or runs the cleanup of a deleted one (then `Some`: the reconcile stops).
/// `csv` is a fresh read (finalizers, deletion and the status of an uninstall in progress).
pub(super) async fn reconcile_csv(csv: &ClusterServiceVersion, ctx: &Context) -> Result<Option<Action>, Error> {
    let ns = csv.namespace().unwrap_or_default();
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &ns);
    let has = csv.finalizers().iter().any(|f| f == CSV_FINALIZER);
    if csv.meta().deletion_timestamp.is_none() {
        // Copied CSVs are not cleaned up on their own (OLM ignores them too).
        if !has && !csv.labels().contains_key(LABEL_COPIED_FROM) {
            add_finalizer(&api, csv, CSV_FINALIZER).await?;
        }
        return Ok(None);
    }
    if !has {
        return Ok(Some(Action::await_change()));
    }
    match finalize_csv(csv, ctx).await? {
        Some(wait) => Ok(Some(Action::requeue(wait))),
        None => {
            remove_finalizer(&api, csv, CSV_FINALIZER).await?;
            // The CSV is gone now, so nothing here may fail the reconcile (it would not run again).
            ctx.sync_operator_of(csv);
            // Its APIs leave the group's olm.providedAPIs now (it is deleting: not counted), so
            // that an install refused for them in an intersecting group may own them at its
            // next look rather than after the group's 30 s one. Best effort: the group's own
            // reconcile prunes them too.
            match Api::<crate::api::OperatorGroup>::namespaced(ctx.client.clone(), &ns)
                .list(&ListParams::default())
                .await
            {
                Ok(groups) => {
                    if let [og] = groups.items.as_slice()
                        && let Err(e) = ctx.ensure_group_aggregation(og).await
                    {
                        tracing::warn!(csv = %format!("{ns}/{}", csv.name_any()), error = %e.source, "could not prune the OperatorGroup's olm.providedAPIs; its next look does");
                    }
                }
                Err(e) => {
                    tracing::warn!(csv = %format!("{ns}/{}", csv.name_any()), error = %e, "could not list OperatorGroups to prune olm.providedAPIs; the group's next look does")
                }
            }
            Ok(Some(Action::await_change()))
        }
    }
}

/// Adds `finalizer` with a merge patch carrying the `resourceVersion` seen; an object changed or
/// deleted meanwhile is left alone (the next reconcile adds it, or there is nothing to guard).
async fn add_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let mut list = obj.meta().finalizers.clone().unwrap_or_default();
    list.push(finalizer.to_string());
    let patch = json!({"metadata": {"finalizers": list, "resourceVersion": obj.meta().resource_version}});
    match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!(
            "adding finalizer {finalizer} to {} {}/{name}",
            K::kind(&()),
            obj.meta().namespace.as_deref().unwrap_or("")
        ))(e)),
    }
}

/// Removes `finalizer` with a merge patch carrying the `resourceVersion` seen (a concurrent change
/// gives a conflict, and the reconcile is retried).
async fn remove_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let list: Vec<&String> = obj.meta().finalizers.iter().flatten().filter(|f| *f != finalizer).collect();
    let patch = json!({"metadata": {"finalizers": if list.is_empty() { Value::Null } else { json!(list) }, "resourceVersion": obj.meta().resource_version}});
    match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(e) if not_found(&e) => Ok(()),
        Err(e) => Err(kube_err(format!("removing finalizer {finalizer} from {} {name}", K::kind(&())))(e)),
    }
}

/// An owned CRD as found on the cluster.
struct OwnedCrd {
    name: String,
    api: ApiResource,
    namespaced: bool,
}

async fn owned_crds(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Vec<OwnedCrd>, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for d in csv.spec.customresourcedefinitions.iter().flat_map(|c| c.owned.iter().flatten()) {
        if seen.contains(&d.name) {
            continue;
        }
        seen.push(d.name.clone());
        let Some(crd) =
            crds.get_opt(&d.name).await.map_err(kube_err(format!("reading CustomResourceDefinition {}", d.name)))?
        else {
            continue;
        };
        let spec = &crd.spec;
        let version = spec
            .versions
            .iter()
            .find(|v| v.storage)
            .or_else(|| spec.versions.iter().find(|v| v.served))
            .or(spec.versions.first());
        let Some(version) = version else { continue };
        let gvk = GroupVersionKind::gvk(&spec.group, &version.name, &spec.names.kind);
        out.push(OwnedCrd {
            name: d.name.clone(),
            api: ApiResource::from_gvk_with_plural(&gvk, &spec.names.plural),
            namespaced: spec.scope == "Namespaced",
        });
    }
    Ok(out)
}

/// Why custom resources could not be listed or deleted.
enum OperandStop {
    /// capstan may not ([`operands_forbidden`]: what to grant).
    Forbidden(String),
    /// Another API failure.
    Api(Error),
}

impl From<Error> for OperandStop {
    fn from(e: Error) -> Self {
        OperandStop::Api(e)
    }
}

/// Lists the custom resources of each of `crds` in its scope in `scopes` (same index; `None` = all
/// namespaces).
async fn list_operands(
    ctx: &Context,
    crds: &[OwnedCrd],
    scopes: &[Option<Vec<String>>],
) -> Result<Vec<(DynamicObject, usize)>, OperandStop> {
    let mut out = Vec::new();
    for (i, (crd, scope)) in crds.iter().zip(scopes).enumerate() {
        let apis: Vec<Api<DynamicObject>> = match (crd.namespaced, scope) {
            (true, Some(list)) => list.iter().map(|n| Api::namespaced_with(ctx.client.clone(), n, &crd.api)).collect(),
            _ => vec![Api::all_with(ctx.client.clone(), &crd.api)],
        };
        for api in apis {
            match api.list(&ListParams::default()).await {
                Ok(l) => out.extend(l.items.into_iter().map(|o| (o, i))),
                Err(e) if not_found(&e) => {}
                Err(e) if forbidden(&e) => {
                    return Err(OperandStop::Forbidden(operands_forbidden(&crd.name, "list", &e.to_string())));
                }
                Err(e) => return Err(kube_err(format!("listing {} custom resources", crd.name))(e).into()),
            }
        }
    }
    Ok(out)
}

/// Deletes the operands in `scopes` (see [`list_operands`]) that are not being deleted yet;
/// returns those still there.
async fn delete_operands(
    ctx: &Context,
    crds: &[OwnedCrd],
    scopes: &[Option<Vec<String>>],
) -> Result<Vec<RemainingObject>, OperandStop> {
    let objects = list_operands(ctx, crds, scopes).await?;
    let mut deleted_any = false;
    for (o, i) in &objects {
        if o.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let crd = &crds[*i];
        let api: Api<DynamicObject> = match o.namespace() {
            Some(n) => Api::namespaced_with(ctx.client.clone(), &n, &crd.api),
            None => Api::all_with(ctx.client.clone(), &crd.api),
        };
        let what =
            format!("{} {}{}", crd.api.kind, o.namespace().map(|n| format!("{n}/")).unwrap_or_default(), o.name_any());
        tracing::info!(object = %what, "uninstall: deleting custom resource before the operator");
        match api.delete(&o.name_any(), &DeleteParams::background()).await {
            Ok(_) => deleted_any = true,
            Err(e) if not_found(&e) => {}
            Err(e) if forbidden(&e) => {
                return Err(OperandStop::Forbidden(operands_forbidden(&crd.name, "delete", &e.to_string())));
            }
            Err(e) => return Err(kube_err(format!("deleting {what}"))(e).into()),
        }
    }
    let objects = if deleted_any { list_operands(ctx, crds, scopes).await? } else { objects };
    Ok(objects
        .into_iter()
        .map(|(o, i)| RemainingObject {
            resource: crds[i].name.clone(),
            group: crds[i].api.group.clone(),
            kind: crds[i].api.kind.clone(),
            namespace: o.namespace(),
            name: o.name_any(),
            finalizers: o.finalizers().to_vec(),
        })
        .collect())
}

/// Why the operator is not running: `None` when every Deployment of the CSV's install strategy
/// exists, is not being deleted and is Available; else which is not.
async fn operator_not_running(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Option<String>, Error> {
    let ns = csv.namespace().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let names: Vec<String> =
        csv.spec.install.spec.iter().flat_map(|s| s.deployments.iter().map(|d| d.name.clone())).collect();
    if names.is_empty() {
        return Ok(Some("the CSV has no Deployment".into()));
    }
    for d in names {
        match api.get_opt(&d).await.map_err(kube_err(format!("reading Deployment {ns}/{d}")))? {
            None => return Ok(Some(format!("the operator is gone: Deployment {ns}/{d} does not exist"))),
            Some(dep) if dep.metadata.deletion_timestamp.is_some() => {
                return Ok(Some(format!("the operator is gone: Deployment {ns}/{d} is being deleted")));
            }
            Some(dep) => {
                let available = dep
                    .status
                    .and_then(|s| s.conditions)
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"));
                if !available {
                    return Ok(Some(format!("the operator is not running: Deployment {ns}/{d} is not Available")));
                }
            }
        }
    }
    Ok(None)
}

/// Deletes the namespaced objects of kind `K` labelled with `selector` in every namespace.
pub(super) async fn delete_labelled<K>(ctx: &Context, selector: &str, deleted: &mut Vec<String>) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let client = ctx.client.clone();
    delete_listed(
        &Api::<K>::all(ctx.client.clone()),
        |o: &K| Api::namespaced(client.clone(), &o.namespace().unwrap_or_default()),
        selector,
        deleted,
    )
    .await
}

/// Deletes the cluster-scoped objects of kind `K` labelled with `selector`.
async fn delete_labelled_cluster<K>(ctx: &Context, selector: &str, deleted: &mut Vec<String>) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::all(ctx.client.clone());
    delete_listed(&api, |_: &K| api.clone(), selector, deleted).await
}

/// Deletes each object `list` lists with label selector `selector` (not those being deleted
/// already) through `api_of(object)`, recording `Kind [namespace/]name` in `deleted`; one gone
/// meanwhile is fine.
async fn delete_listed<K>(
    list: &Api<K>,
    api_of: impl Fn(&K) -> Api<K>,
    selector: &str,
    deleted: &mut Vec<String>,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let kind = K::kind(&()).into_owned();
    let items = list
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(kube_err(format!("listing {kind}s labelled {selector}")))?
        .items;
    for o in items.iter().filter(|o| o.meta().deletion_timestamp.is_none()) {
        let shown = match o.namespace() {
            Some(ns) => format!("{kind} {ns}/{}", o.name_any()),
            None => format!("{kind} {}", o.name_any()),
        };
        match api_of(o).delete(&o.name_any(), &DeleteParams::background()).await {
            Ok(_) => deleted.push(shown),
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(kube_err(format!("deleting {shown}"))(e)),
        }
    }
    Ok(())
}

/// Deletes the objects of kind `K` in `ns` selected by `selector` whose only owners are the CSV
/// `uid` (bundle-shipped objects with an ownerReference but no owner labels).
async fn delete_owned<K>(
    ctx: &Context,
    ns: &str,
    selector: &str,
    uid: &str,
    deleted: &mut Vec<String>,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let kind = K::kind(&()).into_owned();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(kube_err(format!("listing {kind}s in {ns}")))?;
    for o in list.items {
        let refs = o.owner_references();
        if refs.is_empty() || !refs.iter().all(|r| r.uid == uid) || o.meta().deletion_timestamp.is_some() {
            continue;
        }
        let name = o.name_any();
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => deleted.push(format!("{kind} {ns}/{name}")),
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(kube_err(format!("deleting {kind} {ns}/{name}"))(e)),
        }
    }
    Ok(())
}

/// Deletes the webhook configurations labelled `sel` (the CSV's owner labels), mutating then
/// validating; none there, or no access to them, is nothing to delete.
async fn delete_labelled_webhook_configurations(ctx: &Context, sel: &str) -> Result<(), Error> {
    let lp = ListParams::default().labels(sel);
    for res in [
        Api::<MutatingWebhookConfiguration>::all(ctx.client.clone())
            .delete_collection(&DeleteParams::default(), &lp)
            .await
            .map(|_| ()),
        Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone())
            .delete_collection(&DeleteParams::default(), &lp)
            .await
            .map(|_| ()),
    ] {
        match res {
            Ok(()) => {}
            Err(e) if not_found(&e) => {}
            // capstan's shipped RBAC has no access to webhook configurations: it cannot have made any.
            Err(e) if forbidden(&e) => {
                tracing::debug!(error = %e, "no access to webhook configurations; none to delete")
            }
            Err(e) => return Err(kube_err(format!("deleting webhook configurations labelled {sel}"))(e)),
        }
    }
    Ok(())
}

/// Deletes the operator: what makes the cluster call it first (its webhook configurations and
/// APIServices, its CRDs' conversion, the auth bindings it shares: `install::webhook_removal::remove`,
/// only when the CSV is not `replaced` by an upgrade, which took them over), then its
/// Deployments, namespaced objects and cluster-scoped RBAC. Returns what was deleted now and the
/// cluster-scoped RBAC still present.
async fn remove_operator(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    replaced: bool,
) -> Result<(Vec<String>, Vec<String>), Error> {
    let ns = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    let sel = owner_selector(&ns, &name);
    let lp = ListParams::default().labels(&sel);
    let mut deleted = Vec::new();
    // No webhook may be left pointing at a Service without pods: with `failurePolicy: Fail` it
    // blocks every write of what it covers. So they go before the Deployments.
    if !replaced {
        deleted.extend(remove_webhooks(ctx, csv).await?);
    }
    delete_labelled_webhook_configurations(ctx, &sel).await?;
    // Then the workload, so that nothing acts with the permissions being removed.
    delete_labelled::<Deployment>(ctx, &sel, &mut deleted).await?;
    let crbs: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
    let crs: Api<ClusterRole> = Api::all(ctx.client.clone());
    delete_labelled_cluster::<ClusterRoleBinding>(ctx, &sel, &mut deleted).await?;
    delete_labelled_cluster::<ClusterRole>(ctx, &sel, &mut deleted).await?;
    delete_labelled::<Service>(ctx, &sel, &mut deleted).await?;
    delete_labelled::<RoleBinding>(ctx, &sel, &mut deleted).await?;
    delete_labelled::<Role>(ctx, &sel, &mut deleted).await?;
    delete_labelled::<ServiceAccount>(ctx, &sel, &mut deleted).await?;
    delete_labelled::<ConfigMap>(ctx, &sel, &mut deleted).await?;
    delete_labelled::<Secret>(ctx, &sel, &mut deleted).await?;
    // Bundle-shipped objects and generated ServiceAccounts carry the component label and an
    // ownerReference, no owner labels.
    if let Some(uid) = csv.uid()
        && let Some(component) = csv
            .labels()
            .keys()
            .find(|k| k.starts_with(COMPONENT_LABEL_PREFIX) && k.len() > COMPONENT_LABEL_PREFIX.len())
    {
        delete_owned::<Service>(ctx, &ns, component, &uid, &mut deleted).await?;
        // Generated ServiceAccounts too (OLM's shape; older capstan labelled them, above).
        delete_owned::<ServiceAccount>(ctx, &ns, component, &uid, &mut deleted).await?;
        delete_owned::<ConfigMap>(ctx, &ns, component, &uid, &mut deleted).await?;
        delete_owned::<Secret>(ctx, &ns, component, &uid, &mut deleted).await?;
    }
    // As OLM: wait until the cluster-scoped RBAC is really gone.
    let mut left = Vec::new();
    left.extend(
        crbs.list(&lp)
            .await
            .map_err(kube_err(format!("listing ClusterRoleBindings labelled {sel}")))?
            .items
            .iter()
            .map(|b| format!("ClusterRoleBinding {}", b.name_any())),
    );
    left.extend(
        crs.list(&lp)
            .await
            .map_err(kube_err(format!("listing ClusterRoles labelled {sel}")))?
            .items
            .iter()
            .map(|r| format!("ClusterRole {}", r.name_any())),
    );
    Ok((deleted, left))
}

/// `install::webhook_removal::remove` for a CSV that is uninstalled: its webhook configurations and
/// APIServices, its conversion CRDs reset, its subjects of the shared auth bindings. A CSV whose
/// definitions cannot be read (it never installed any) has nothing to remove.
async fn remove_webhooks(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Vec<String>, Error> {
    remove_webhooks_of(ctx, csv, false).await
}

/// [`remove_webhooks`], or with `keep_bindings` only what calls the operator
/// (`install::webhook_removal::remove_callers`): for a CSV refused for an OperatorGroup owner conflict,
/// which keeps its auth-binding subjects for when it may install again.
pub(super) async fn remove_webhooks_of(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    keep_bindings: bool,
) -> Result<Vec<String>, Error> {
    let ns = csv.namespace().unwrap_or_default();
    // Most CSVs declare neither: no JSON copy of the CSV on every reconcile for them.
    if !csv.serves_webhooks_or_apiservices() {
        return Ok(Default::default());
    }
    let name = csv.name_any();
    let value = serde_json::to_value(csv)
        .map_err(|source| Error::Build { what: format!("ClusterServiceVersion {ns}/{name} as JSON"), source })?;
    let defs = match crate::install::webhook::Definitions::read(&value) {
        Ok(d) => d,
        Err((field, message)) => {
            tracing::debug!(csv = %format!("{ns}/{name}"), %field, %message, "unreadable webhook definitions: none were installed");
            return Ok(Vec::new());
        }
    };
    if defs.is_empty() {
        return Ok(Vec::new());
    }
    let removed = if keep_bindings {
        crate::install::webhook_removal::remove_callers(&ctx.client, &name, &ns, &defs).await
    } else {
        crate::install::webhook_removal::remove(&ctx.client, &name, &ns, &defs).await
    };
    removed.map_err(|e| Error::Removal { csv: format!("{ns}/{name}"), message: e.to_string() })
}

/// Other live CSVs (any namespace) that own or require CRD `crd`, as `namespace/name`.
async fn other_users_of_crd(ctx: &Context, csv: &ClusterServiceVersion, crd: &str) -> Result<Vec<String>, Error> {
    let all = Api::<ClusterServiceVersion>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(kube_err("listing ClusterServiceVersions"))?;
    Ok(all
        .items
        .iter()
        .filter(|c| {
            c.uid() != csv.uid() && c.meta().deletion_timestamp.is_none() && !c.labels().contains_key(LABEL_COPIED_FROM)
        })
        .filter(|c| {
            c.spec
                .customresourcedefinitions
                .iter()
                .any(|d| d.owned.iter().chain(d.required.iter()).flatten().any(|x| x.name == crd))
        })
        .map(|c| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()))
        .collect())
}

/// Writes phase `Deleting` / `WaitingOnCleanup` with `message` and `status.cleanup` (keeping the
/// rest of the status). Does nothing when phase, message and pending objects are already these.
async fn write_deleting_status(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    message: &str,
    pending: Value,
) -> Result<(), Error> {
    let ns = csv.namespace().unwrap_or_default();
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &ns);
    let pending_deletion: Vec<ResourceList> = serde_json::from_value(pending).map_err(|source| Error::Build {
        what: format!("status.cleanup of ClusterServiceVersion {ns}/{}", csv.name_any()),
        source,
    })?;
    let mut status = csv.status.clone().unwrap_or_default();
    let same = status.phase == Some(CsvPhase::Deleting)
        && status.message.as_deref() == Some(message)
        && status.cleanup.as_ref().map(|c| c.pending_deletion.as_slice()).unwrap_or_default()
            == pending_deletion.as_slice();
    if same {
        return Ok(());
    }
    status.set_phase(CsvPhase::Deleting, CsvReason::WaitingOnCleanup, message, &now_time());
    status.cleanup = Some(CleanupStatus { pending_deletion });
    apply_typed_status(&api, csv, &status).await.map(|_| ())
}

/// When operand deletion started: `status.lastTransitionTime` of phase `Deleting`.
fn deleting_since(csv: &ClusterServiceVersion) -> Option<k8s_openapi::jiff::Timestamp> {
    let st = csv.status.as_ref()?;
    (st.phase.as_ref()? == &CsvPhase::Deleting).then_some(())?;
    st.last_transition_time.as_ref().map(|t| t.0)
}

/// The Subscription in the CSV's namespace that installed it (`status.installedCSV` or
/// `status.currentCSV` names it).
async fn subscription_of(ctx: &Context, ns: &str, csv: &str) -> Result<Option<Subscription>, Error> {
    let subs = Api::<Subscription>::namespaced(ctx.client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing Subscriptions in {ns}")))?;
    Ok(subs.items.into_iter().find(|s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.installed_csv.as_deref() == Some(csv) || st.current_csv.as_deref() == Some(csv))
    }))
}

/// What the cleanup of one deleted CSV works with ([`observe_cleanup`]).
struct Cleanup {
    /// `namespace/name` of the CSV.
    full: String,
    /// The CSV that replaces it (an upgrade), if any: then nothing of the operator's data goes.
    replaced_by: Option<String>,
    /// What the annotations ask for.
    settings: UninstallSettings,
    /// The CRDs the CSV owns, as found on the cluster.
    owned: Vec<OwnedCrd>,
    /// Per owned CRD, where its custom resources are deleted (`None`: every namespace).
    scopes: Vec<Option<Vec<String>>>,
}

/// Gathers what the cleanup of `csv` needs: whether it is replaced, the uninstall settings of
/// the CSV and its Subscription, its owned CRDs and where their custom resources are removed.
async fn observe_cleanup(csv: &ClusterServiceVersion, ctx: &Context) -> Result<Cleanup, Error> {
    let ns = csv.namespace().unwrap_or_default();
    let name = csv.name_any();
    let full = format!("{ns}/{name}");
    let api: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &ns);
    let siblings =
        api.list(&ListParams::default()).await.map_err(kube_err(format!("listing ClusterServiceVersions in {ns}")))?;
    let replaced_by = siblings
        .items
        .iter()
        .find(|c| c.name_any() != name && c.spec.replaces.as_deref() == Some(name.as_str()))
        .map(|c| c.name_any());
    let sub = subscription_of(ctx, &ns, &name).await?;
    let sources = vec![
        (format!("ClusterServiceVersion {full}"), csv.metadata.annotations.as_ref()),
        (
            sub.as_ref().map(|s| format!("Subscription {ns}/{}", s.name_any())).unwrap_or_default(),
            sub.as_ref().and_then(|s| s.metadata.annotations.as_ref()),
        ),
    ];
    let mut settings = uninstall_settings(&sources, csv.spec.cleanup.as_ref().is_some_and(|c| c.enabled));
    for w in &settings.warnings {
        tracing::warn!(csv = %full, "{w}");
    }
    if let Some(by) = &replaced_by {
        if settings.operands {
            tracing::info!(csv = %full, replaced_by = %by, "the CSV is replaced by an upgrade: its custom resources and CRDs are kept");
        }
        settings.operands = false;
        settings.crds = false;
    }
    let owned = owned_crds(ctx, csv).await?;
    // A CRD another live CSV owns or requires is never deleted, and its custom resources outside
    // this operator's target namespaces are not touched.
    let mut users = Vec::new();
    for crd in &owned {
        users.push(if settings.crds { other_users_of_crd(ctx, csv, &crd.name).await? } else { Vec::new() });
    }
    let targets = target_namespaces(csv);
    let scopes: Vec<Option<Vec<String>>> =
        users.iter().map(|u| if settings.crds && u.is_empty() { None } else { targets.clone() }).collect();
    Ok(Cleanup { full, replaced_by, settings, owned, scopes })
}

/// The status message while `remaining` custom resources are deleted before the operator.
fn deleting_message(full: &str, remaining: &[RemainingObject], timeout: Duration) -> String {
    let list: Vec<String> = remaining.iter().take(10).map(|o| o.describe()).collect();
    format!(
        "uninstall of CSV {full}: deleting {} custom resource{} before the operator, which still runs to complete their finalizers (waiting up to {}): {}{}",
        remaining.len(),
        if remaining.len() == 1 { "" } else { "s" },
        human(timeout),
        list.join(", "),
        if remaining.len() > 10 { format!(" and {} more", remaining.len() - 10) } else { String::new() }
    )
}

/// The cleanup of a deleted CSV. `Some(wait)`: not done, look again after `wait`; `None`: done,
/// the finalizer may go.
async fn finalize_csv(csv: &ClusterServiceVersion, ctx: &Context) -> Result<Option<Duration>, Error> {
    let cleanup = observe_cleanup(csv, ctx).await?;
    if cleanup.settings.operands
        && let Some(wait) = remove_operands_first(csv, ctx, &cleanup).await?
    {
        return Ok(Some(wait));
    }
    let (deleted, left) = remove_operator(ctx, csv, cleanup.replaced_by.is_some()).await?;
    if !deleted.is_empty() {
        tracing::info!(csv = %cleanup.full, deleted = ?deleted, "uninstall: removed the operator's objects");
    }
    if !left.is_empty() {
        tracing::info!(csv = %cleanup.full, waiting_for = ?left, "uninstall: waiting for cluster-scoped RBAC to be deleted");
        return Ok(Some(Duration::from_secs(1)));
    }
    let notes = if cleanup.settings.crds {
        delete_crds(csv, ctx, &cleanup.owned).await?
    } else if cleanup.replaced_by.is_none() {
        kept_notes(ctx, &cleanup).await?
    } else {
        Vec::new()
    };
    let message = match &cleanup.replaced_by {
        Some(by) => format!("CSV {} replaced by {by}: removed its own objects", cleanup.full),
        None => format!(
            "uninstalled CSV {}: removed the operator and its RBAC{}{}",
            cleanup.full,
            if notes.is_empty() { "" } else { "; " },
            notes.join("; ")
        ),
    };
    tracing::info!(csv = %cleanup.full, "{message}");
    ctx.events.publish_for(csv, EventType::Normal, "Uninstalled", &message).await;
    Ok(None)
}

/// Deletes the custom resources before the operator (§5.7), while it runs to complete
/// their finalizers, up to the timeout. `Some(wait)` while they are not all gone (the operator is
/// removed anyway once they are reported stuck); `None` when none are left.
async fn remove_operands_first(
    csv: &ClusterServiceVersion,
    ctx: &Context,
    cleanup: &Cleanup,
) -> Result<Option<Duration>, Error> {
    let full = &cleanup.full;
    let remaining = match delete_operands(ctx, &cleanup.owned, &cleanup.scopes).await {
        Ok(r) => r,
        Err(OperandStop::Api(e)) => return Err(e),
        Err(OperandStop::Forbidden(why)) => {
            // Never remove the operator before its custom resources: say what is missing.
            let message = format!(
                "uninstall of CSV {full}: the custom resources must be deleted before the operator, but {why}. The operator stays until then."
            );
            let changed = csv.status.as_ref().and_then(|s| s.message.as_deref()) != Some(message.as_str());
            write_deleting_status(ctx, csv, &message, Value::Array(Vec::new())).await?;
            if changed {
                tracing::warn!(csv = %full, "{message}");
                ctx.events.publish_for(csv, EventType::Warning, "OperandsForbidden", &message).await;
            }
            return Ok(Some(Duration::from_secs(15)));
        }
    };
    if remaining.is_empty() {
        return Ok(None);
    }
    let pending = pending_deletion(&remaining);
    let not_running = operator_not_running(ctx, csv).await?;
    let since = deleting_since(csv);
    let waited =
        since.map(|t| k8s_openapi::jiff::Timestamp::now().duration_since(t).unsigned_abs()).unwrap_or_default();
    let in_time = since.is_none() || waited < cleanup.settings.timeout;
    if not_running.is_none() && in_time {
        write_deleting_status(ctx, csv, &deleting_message(full, &remaining, cleanup.settings.timeout), pending).await?;
        return Ok(Some(Duration::from_secs(2)));
    }
    // The first reason stays: after the report capstan removes the operator itself.
    let previous = csv.status.as_ref().and_then(|s| s.message.as_deref()).and_then(stuck_reason).map(String::from);
    let why = previous
        .or(not_running)
        .unwrap_or_else(|| format!("the operator did not complete them within {}", human(cleanup.settings.timeout)));
    let message = stuck_message(full, &remaining, &why);
    let changed = csv.status.as_ref().and_then(|s| s.message.as_deref()) != Some(message.as_str());
    write_deleting_status(ctx, csv, &message, pending).await?;
    if changed {
        tracing::warn!(csv = %full, "{message}");
        ctx.events.publish_for(csv, EventType::Warning, "OperandsStuck", &message).await;
    }
    let (deleted, _) = remove_operator(ctx, csv, cleanup.replaced_by.is_some()).await?;
    if !deleted.is_empty() {
        tracing::info!(csv = %full, deleted = ?deleted, "uninstall: removed the operator after reporting the custom resources still Terminating");
    }
    Ok(Some(Duration::from_secs(5)))
}

/// Deletes the owned CRDs no other CSV uses; returns what was done, as notes for the message.
async fn delete_crds(csv: &ClusterServiceVersion, ctx: &Context, owned: &[OwnedCrd]) -> Result<Vec<String>, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut notes = Vec::new();
    for crd in owned {
        // Looked up again: another CSV may have been installed meanwhile.
        let others = other_users_of_crd(ctx, csv, &crd.name).await?;
        if !others.is_empty() {
            notes.push(format!("kept CRD {} because CSV {} still uses it", crd.name, others.join(", ")));
            continue;
        }
        match crds.delete(&crd.name, &DeleteParams::background()).await {
            Ok(_) => notes.push(format!("deleted CRD {}", crd.name)),
            Err(e) if not_found(&e) => {}
            Err(e) if forbidden(&e) => notes.push(format!("could not delete CRD {0} ({e}): capstan may not delete CRDs; delete it yourself: kubectl delete crd {0}", crd.name)),
            Err(e) => return Err(kube_err(format!("deleting CustomResourceDefinition {}", crd.name))(e)),
        }
    }
    Ok(notes)
}

/// What stays after an uninstall that keeps the CRDs (the status says which custom resources remain).
async fn kept_notes(ctx: &Context, cleanup: &Cleanup) -> Result<Vec<String>, Error> {
    let owned = &cleanup.owned;
    let everywhere = vec![None; owned.len()];
    let left = match list_operands(ctx, owned, &everywhere).await {
        Ok(l) => Some(l),
        Err(OperandStop::Forbidden(_)) => None,
        Err(OperandStop::Api(e)) => return Err(e),
    };
    let mut notes = Vec::new();
    for crd in owned {
        let Some(left) = &left else {
            notes.push(format!("kept CRD {} and its custom resources", crd.name));
            continue;
        };
        let n = left.iter().filter(|(_, i)| owned[*i].name == crd.name).count();
        let s = if n == 1 { "" } else { "s" };
        notes.push(if cleanup.settings.operands {
            format!("kept CRD {} and its {n} custom resource{s} outside the operator's target namespaces", crd.name)
        } else {
            format!("kept CRD {} and its {n} custom resource{s}", crd.name)
        });
    }
    if !owned.is_empty() && !cleanup.settings.operands {
        notes.push(format!("annotate the CSV or Subscription with {ANNOTATION_UNINSTALL_OPERANDS}=true or {ANNOTATION_UNINSTALL_CRDS}=true before deleting to remove them"));
    }
    Ok(notes)
}

/// Whether the Subscription asks that deleting it uninstalls its operator.
fn subscription_uninstalls(sub: &Subscription) -> bool {
    let a = sub.annotations();
    [ANNOTATION_UNINSTALL_OPERANDS, ANNOTATION_UNINSTALL_CRDS]
        .iter()
        .any(|k| a.get(*k).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")))
}

/// The Subscription hook of [`super::subscription`]'s reconcile: keeps [`SUBSCRIPTION_FINALIZER`] on
/// Subscriptions that ask for uninstall on deletion (then `None`: the reconcile goes on), and on
/// deletion of such a Subscription deletes its CSV with the Subscription's uninstall annotations
/// copied onto it (then `Some`: the reconcile stops).
/// `sub` is a fresh read.
pub(super) async fn reconcile_subscription(sub: &Subscription, ctx: &Context) -> Result<Option<Action>, Error> {
    let ns = sub.namespace().unwrap_or_default();
    let name = sub.name_any();
    let api: Api<Subscription> = Api::namespaced(ctx.client.clone(), &ns);
    let has = sub.finalizers().iter().any(|f| f == SUBSCRIPTION_FINALIZER);
    let wants = subscription_uninstalls(sub);
    if sub.meta().deletion_timestamp.is_none() {
        if wants && !has {
            add_finalizer(&api, sub, SUBSCRIPTION_FINALIZER).await?;
        } else if !wants && has {
            remove_finalizer(&api, sub, SUBSCRIPTION_FINALIZER).await?;
        }
        return Ok(None);
    }
    if !has {
        return Ok(Some(Action::await_change()));
    }
    if wants {
        let csvs: Api<ClusterServiceVersion> = Api::namespaced(ctx.client.clone(), &ns);
        // The package's CSVs (component label `operators.coreos.com/<package>.<namespace>`), and the
        // CSVs the status names (it may lag behind an upgrade).
        let component = crate::install::InstallTarget {
            namespace: ns.clone(),
            package: sub.spec.package.clone(),
            ..Default::default()
        }
        .component_label();
        let mut names: Vec<String> = csvs
            .list(&ListParams::default().labels(&component))
            .await
            .map_err(kube_err(format!("listing ClusterServiceVersions in {ns} labelled {component}")))?
            .items
            .iter()
            .map(|c| c.name_any())
            .collect();
        for n in sub.status.iter().flat_map(|s| [s.installed_csv.clone(), s.current_csv.clone()]).flatten() {
            if !n.is_empty() && !names.contains(&n) {
                names.push(n);
            }
        }
        let copied: BTreeMap<&str, &String> =
            [ANNOTATION_UNINSTALL_OPERANDS, ANNOTATION_UNINSTALL_CRDS, ANNOTATION_UNINSTALL_TIMEOUT]
                .into_iter()
                .filter_map(|k| sub.annotations().get(k).map(|v| (k, v)))
                .collect();
        let mut deleted = Vec::new();
        for csv_name in names {
            let Some(csv) = csvs
                .get_opt(&csv_name)
                .await
                .map_err(kube_err(format!("reading ClusterServiceVersion {ns}/{csv_name}")))?
            else {
                continue;
            };
            if csv.meta().deletion_timestamp.is_some() {
                continue;
            }
            // The CSV's cleanup must see the request after the Subscription is gone.
            csvs.patch(
                &csv_name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"annotations": copied}})),
            )
            .await
            .map_err(kube_err(format!("annotating ClusterServiceVersion {ns}/{csv_name} for uninstall")))?;
            match csvs.delete(&csv_name, &DeleteParams::background()).await {
                Ok(_) => deleted.push(csv_name),
                Err(e) if not_found(&e) => {}
                Err(e) => return Err(kube_err(format!("deleting ClusterServiceVersion {ns}/{csv_name}"))(e)),
            }
        }
        if deleted.is_empty() {
            tracing::info!(subscription = %format!("{ns}/{name}"), "Subscription deleted with an uninstall annotation; it has no installed CSV to delete");
        } else {
            tracing::info!(subscription = %format!("{ns}/{name}"), csvs = ?deleted, "Subscription deleted with an uninstall annotation: deleting its CSV");
        }
    }
    remove_finalizer(&api, sub, SUBSCRIPTION_FINALIZER).await?;
    Ok(Some(Action::await_change()))
}

/// Watches Subscriptions and, when one without an uninstall annotation is deleted, says that its
/// operator stays installed (log line and a Normal event `SubscriptionDeleted` on its CSV), as in
/// OLM (§5.7). Runs until dropped. Best effort: a deletion while the controller is down is not seen.
pub(super) async fn watch_subscription_deletions(ctx: Arc<Context>) {
    let api: Api<Subscription> = Api::all(ctx.client.clone());
    let stream = watcher(api, watcher::Config::default()).backoff(super::watch_backoff());
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        let Ok(watcher::Event::Delete(sub)) = ev else { continue };
        if subscription_uninstalls(&sub) {
            continue;
        }
        let ns = sub.namespace().unwrap_or_default();
        let csv_name = sub.status.as_ref().and_then(|s| s.installed_csv.clone()).filter(|c| !c.is_empty());
        let Some(csv_name) = csv_name else { continue };
        let csv =
            Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), &ns).get_opt(&csv_name).await.ok().flatten();
        let Some(csv) = csv.filter(|c| c.meta().deletion_timestamp.is_none()) else { continue };
        let message = format!(
            "Subscription {ns}/{} was deleted; the operator stays installed (CSV {csv_name}), as with OLM. To uninstall it, delete the CSV: kubectl delete csv {csv_name} -n {ns}",
            sub.name_any()
        );
        tracing::info!(subscription = %format!("{ns}/{}", sub.name_any()), csv = %csv_name, "{message}");
        ctx.events.publish_for(&csv, EventType::Normal, "SubscriptionDeleted", &message).await;
    }
}

/// The CSV an object names as its owner by OLM's owner labels (`olm.owner`,
/// `olm.owner.namespace`, `olm.owner.kind: ClusterServiceVersion`), as `(namespace, name)`;
/// `None` for another owner kind or incomplete labels. Pure.
pub(crate) fn csv_owner_of(labels: &BTreeMap<String, String>) -> Option<(String, String)> {
    if labels.get(LABEL_OWNER_KIND).map(String::as_str) != Some("ClusterServiceVersion") {
        return None;
    }
    let ns = labels.get(LABEL_OWNER_NAMESPACE).filter(|n| !n.is_empty())?;
    let name = labels.get(LABEL_OWNER).filter(|n| !n.is_empty())?;
    Some((ns.clone(), name.clone()))
}

/// Deletes each APIService whose owner CSV (by OLM's owner labels, [`csv_owner_of`]) does not
/// exist — its namespace gone, or the CSV — as OLM's `syncAPIService`
/// (`pkg/controller/operators/olm/operator.go`): an APIService left by an operator removed while
/// capstan was down, or labelled by hand, would keep an API group served by nothing, which breaks
/// discovery for every client. Follows a metadata watch of the APIServices that carry
/// `olm.owner.kind=ClusterServiceVersion`; each delete has the UID seen as precondition. Errors
/// are logged; the next event or relist tries again.
pub(super) async fn watch_orphaned_api_services(ctx: Arc<Context>) {
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let api: Api<APIService> = Api::all(ctx.client.clone());
    let meta: Api<kube::core::PartialObjectMeta<APIService>> = Api::all(ctx.client.clone());
    let config = watcher::Config::default().labels(&format!("{LABEL_OWNER_KIND}=ClusterServiceVersion"));
    let stream = watcher(meta, config).backoff(super::watch_backoff());
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        let Ok(watcher::Event::Apply(m) | watcher::Event::InitApply(m)) = ev else { continue };
        let Some((ns, csv)) = csv_owner_of(m.labels()) else { continue };
        let found = Api::<ClusterServiceVersion>::namespaced(ctx.client.clone(), &ns).get_metadata_opt(&csv).await;
        if !matches!(found, Ok(None)) {
            continue;
        }
        let name = m.name_any();
        let preconditions = m.uid().map(|uid| kube::api::Preconditions { uid: Some(uid), resource_version: None });
        let params = DeleteParams { preconditions, ..Default::default() };
        match api.delete(&name, &params).await {
            Ok(_) => {
                tracing::info!(apiservice = %name, owner = %format!("{ns}/{csv}"), "deleted an APIService whose owner CSV does not exist")
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => {
                tracing::warn!(apiservice = %name, error = %e, "deleting an APIService whose owner CSV does not exist")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_names_its_owner_csv_by_olms_labels() {
        let l = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let owned = l(&[
            ("olm.owner", "hat-server"),
            ("olm.owner.kind", "ClusterServiceVersion"),
            ("olm.owner.namespace", "ns"),
        ]);
        assert_eq!(csv_owner_of(&owned), Some(("ns".into(), "hat-server".into())));
        let group = l(&[("olm.owner", "og"), ("olm.owner.kind", "OperatorGroup"), ("olm.owner.namespace", "ns")]);
        assert_eq!(csv_owner_of(&group), None, "another owner kind is not a CSV's");
        assert_eq!(csv_owner_of(&l(&[("olm.owner.kind", "ClusterServiceVersion"), ("olm.owner", "x")])), None);
    }

    #[test]
    fn durations_in_go_style() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration(" 0s "), Some(Duration::ZERO));
        for bad in ["", "2", "m", "2 m", "-1s", "1d", "1.5s", "s1"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
        assert_eq!(human(Duration::from_secs(90)), "1m30s");
        assert_eq!(human(Duration::from_secs(120)), "2m");
        assert_eq!(human(Duration::from_secs(20)), "20s");
    }

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn settings_from_csv_and_subscription() {
        let none = uninstall_settings(&[("csv".into(), None)], false);
        assert_eq!((none.operands, none.crds, none.timeout), (false, false, DEFAULT_UNINSTALL_TIMEOUT));
        assert!(uninstall_settings(&[("csv".into(), None)], true).operands, "OLM spec.cleanup.enabled");

        let sub = ann(&[(ANNOTATION_UNINSTALL_CRDS, "True"), (ANNOTATION_UNINSTALL_TIMEOUT, "30s")]);
        let csv = ann(&[(ANNOTATION_UNINSTALL_TIMEOUT, "10s")]);
        let s = uninstall_settings(&[("csv".into(), Some(&csv)), ("sub".into(), Some(&sub))], false);
        assert!(s.operands && s.crds, "uninstall-crds implies operands: {s:?}");
        assert_eq!(s.timeout, Duration::from_secs(10), "the CSV's timeout comes first");
        assert!(s.warnings.is_empty());

        let typo = ann(&[(ANNOTATION_UNINSTALL_OPERANDS, "yes"), (ANNOTATION_UNINSTALL_TIMEOUT, "soon")]);
        let s = uninstall_settings(&[("ClusterServiceVersion ns/x".into(), Some(&typo))], false);
        assert!(!s.operands, "an unreadable value removes nothing");
        assert_eq!(s.timeout, DEFAULT_UNINSTALL_TIMEOUT);
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
        assert!(
            s.warnings[0].contains("ClusterServiceVersion ns/x")
                && s.warnings[0].contains(ANNOTATION_UNINSTALL_OPERANDS)
                && s.warnings[0].contains("\"yes\""),
            "{:?}",
            s.warnings
        );
        assert!(s.warnings[1].contains("\"soon\"") && s.warnings[1].contains("2m"), "{:?}", s.warnings);
    }

    fn obj(ns: Option<&str>, name: &str, fins: &[&str]) -> RemainingObject {
        RemainingObject {
            resource: "nginxes.example.com".into(),
            group: "example.com".into(),
            kind: "Nginx".into(),
            namespace: ns.map(String::from),
            name: name.into(),
            finalizers: fins.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn stuck_objects_are_reported_with_finalizers_and_the_unblocking_command() {
        let o = obj(Some("apps"), "w1", &["example.com/cleanup"]);
        assert_eq!(
            o.unblock_command(),
            r#"kubectl patch nginxes.example.com w1 -n apps --type=merge -p '{"metadata":{"finalizers":null}}'"#
        );
        assert_eq!(
            obj(None, "c", &[]).unblock_command(),
            r#"kubectl patch nginxes.example.com c --type=merge -p '{"metadata":{"finalizers":null}}'"#
        );
        let m = stuck_message(
            "ops/nginx.v1",
            &[o.clone(), obj(Some("apps"), "w2", &["a/b", "c/d"])],
            "the operator is gone: Deployment ops/x does not exist",
        );
        assert!(m.contains("CSV ops/nginx.v1") && m.contains("2 custom resources are still Terminating"), "{m}");
        assert!(
            m.contains("Nginx apps/w1 (finalizers: example.com/cleanup)") && m.contains("finalizers: a/b, c/d"),
            "{m}"
        );
        assert!(m.contains(&o.unblock_command()) && m.contains("Deployment ops/x does not exist"), "{m}");
        assert_eq!(stuck_reason(&m), Some("the operator is gone: Deployment ops/x does not exist"));
        assert_eq!(stuck_reason("uninstall of CSV a/b: deleting 1 custom resource before the operator"), None);
        let many: Vec<RemainingObject> = (0..13).map(|i| obj(Some("a"), &format!("n{i}"), &["f"])).collect();
        let m = stuck_message("a/b", &many, "why");
        assert!(m.contains("and 3 more") && !m.contains("n10 "), "{m}");
    }

    #[test]
    fn the_deleting_message_counts_and_lists_what_is_left() {
        let one = deleting_message("ops/nginx.v1", &[obj(Some("apps"), "w1", &[])], Duration::from_secs(120));
        assert_eq!(
            one,
            "uninstall of CSV ops/nginx.v1: deleting 1 custom resource before the operator, which still runs to complete their finalizers (waiting up to 2m): Nginx apps/w1"
        );
        assert_eq!(stuck_reason(&one), None, "a deletion in progress is not stuck");
        let many: Vec<RemainingObject> = (0..12).map(|i| obj(None, &format!("n{i}"), &[])).collect();
        let m = deleting_message("a/b", &many, Duration::from_secs(90));
        assert!(
            m.contains("deleting 12 custom resources")
                && m.contains("(waiting up to 1m30s)")
                && m.ends_with("Nginx n9 and 2 more"),
            "{m}"
        );
    }

    #[test]
    fn missing_rbac_for_operands_says_what_to_grant() {
        let m = operands_forbidden("nginxes.example.com", "list", "Forbidden");
        assert!(
            m.contains("may not list nginxes.example.com (Forbidden)")
                && m.contains("resource nginxes of API group example.com"),
            "{m}"
        );
        assert!(m.contains(ANNOTATION_UNINSTALL_OPERANDS) && m.contains("docs/uninstall.md"), "{m}");
    }

    #[test]
    fn pending_deletion_groups_by_kind() {
        let p = pending_deletion(&[obj(Some("a"), "x", &[]), obj(None, "y", &[])]);
        assert_eq!(
            p,
            json!([{"group": "example.com", "kind": "Nginx", "instances": [{"name": "x", "namespace": "a"}, {"name": "y"}]}])
        );
        assert_eq!(
            owner_selector("ns", "op.v1"),
            "olm.owner=op.v1,olm.owner.namespace=ns,olm.owner.kind=ClusterServiceVersion"
        );
    }
}
