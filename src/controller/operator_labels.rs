//! Operators capstan did not make (created by hand, or naming a package capstan installs
//! nowhere): their components are the objects that carry their component label
//! `operators.coreos.com/<operator name>`, as OLM v0's operator controller lists them for every
//! Operator (upstream `pkg/controller/operators/operator_controller.go` `Reconcile`,
//! `mapComponentRequests`; test/e2e/operator_test.go "should surface components in its status").
//!
//! Operators of installs capstan made are kept from what the install applied ([`super::operator`]),
//! without a cluster-wide watch of 16 kinds. Those made by someone else are few, so for them the
//! objects of [`COMPONENT_KINDS`] bearing the label are listed (metadata only) when the Operator
//! changes and every [`RESYNC`] after: the status gets the label selector and the references, and
//! an Operator deleted while labelled objects remain is made again, as OLM does; one deleted with
//! none left stays deleted.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

use super::operator::{COMPONENT_KINDS, components, reference, write_operator};
use super::{Context, Error, kube_err};
use crate::api::operator::{Operator, RichReference};

/// How often the components of the Operators capstan did not make are listed again (labels added
/// or removed by hand raise no event capstan watches).
pub(super) const RESYNC: Duration = Duration::from_secs(15);

/// Whether capstan made Operator `op` for an install: its managed fields have an entry of
/// capstan's field manager for the object itself (not only for its status). Pure.
pub(super) fn made_by_capstan(op: &Operator) -> bool {
    op.meta().managed_fields.iter().flatten().any(|f| {
        f.manager.as_deref() == Some(crate::install::FIELD_MANAGER)
            && f.subresource.as_deref().is_none_or(str::is_empty)
            && f.operation.as_deref() == Some("Apply")
    })
}

/// Watches Operators; keeps the status of those capstan did not make ([`made_by_capstan`]) from
/// their labelled components, lists them again every [`RESYNC`], and makes one deleted while
/// components remain again. Failures are logged as the Operator sync logs them and retried at the
/// next resync.
pub(super) async fn run(ctx: Arc<Context>) {
    let operators: Api<Operator> = Api::all(ctx.client.clone());
    // With the controllers' backoff: a watch that fails (an API outage) is not retried in a loop.
    let mut events = watcher(operators, watcher::Config::default()).backoff(super::watch_backoff()).boxed();
    let mut known: BTreeSet<String> = BTreeSet::new();
    let mut tick = tokio::time::interval(RESYNC);
    loop {
        tokio::select! {
            event = events.next() => {
                let Some(event) = event else { return };
                match event {
                    Ok(watcher::Event::Apply(op) | watcher::Event::InitApply(op)) if !made_by_capstan(&op) => {
                        let name = op.name_any();
                        known.insert(name.clone());
                        report(&ctx, &name, sync(&ctx, &name).await);
                    }
                    Ok(watcher::Event::Delete(op)) if known.contains(&op.name_any()) => {
                        let name = op.name_any();
                        report(&ctx, &name, sync(&ctx, &name).await);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "Operator watch"),
                }
            }
            _ = tick.tick() => {
                for name in known.clone() {
                    match sync(&ctx, &name).await {
                        Ok(Synced::Gone) => { known.remove(&name); }
                        other => report(&ctx, &name, other),
                    }
                }
            }
        }
    }
}

/// What [`sync`] did.
#[derive(Debug, PartialEq)]
enum Synced {
    /// The status was written (the Operator made again if it was deleted).
    Written,
    /// The Operator is deleted and nothing bears its label: it stays deleted.
    Gone,
}

fn report(ctx: &Context, name: &str, result: Result<Synced, Error>) {
    if let Err(e) = result
        && let Some(skipped) = super::log_due(&ctx.error_log, "Operator", std::time::Instant::now())
    {
        tracing::warn!(operator = %name, error = %e, unlogged_since_last = skipped, "could not update the Operator from its labelled components; trying again in 15 s");
    }
}

/// Lists the components of Operator `name` and writes its status ([`components`]); an Operator
/// that is gone is made again when components remain.
async fn sync(ctx: &Context, name: &str) -> Result<Synced, Error> {
    let refs = labelled(ctx, name).await?;
    let exists = Api::<Operator>::all(ctx.client.clone())
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading Operator {name}")))?
        .is_some_and(|o| o.metadata.deletion_timestamp.is_none());
    if !exists && refs.is_empty() {
        return Ok(Synced::Gone);
    }
    if !exists {
        tracing::info!(operator = %name, components = refs.len(), "Operator deleted while objects bear its label: made again");
    }
    write_operator(ctx, name, &components(name, refs)).await?;
    Ok(Synced::Written)
}

/// The objects of [`COMPONENT_KINDS`] labelled `operators.coreos.com/<name>` (any value), as
/// references (conditions are not read: they are the components' own).
async fn labelled(ctx: &Context, name: &str) -> Result<Vec<RichReference>, Error> {
    let selector = format!("{}{name}", crate::install::COMPONENT_LABEL_PREFIX);
    let lp = ListParams::default().labels(&selector);
    let mut refs = Vec::new();
    for (api_version, kind, namespaced) in COMPONENT_KINDS {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
        let list = match api.list_metadata(&lp).await {
            Ok(l) => l,
            // A kind this cluster does not serve (OperatorCondition v2 before its CRD): none.
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => return Err(kube_err(format!("listing {kind} labelled {selector}"))(e)),
        };
        for o in list.items {
            let ns = if *namespaced { o.metadata.namespace.clone() } else { None };
            refs.push(reference(api_version, kind, ns.as_deref(), &o.name_any(), Vec::new()));
        }
    }
    Ok(refs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    fn op(fields: Vec<(&str, &str, Option<&str>)>) -> Operator {
        let mut o = Operator::new("o", Default::default());
        o.metadata.managed_fields = Some(
            fields
                .into_iter()
                .map(|(m, op, sub)| ManagedFieldsEntry {
                    manager: Some(m.into()),
                    operation: Some(op.into()),
                    subresource: sub.map(String::from),
                    ..Default::default()
                })
                .collect(),
        );
        o
    }

    #[test]
    fn an_operator_is_capstans_when_capstan_applied_the_object_itself() {
        let fm = crate::install::FIELD_MANAGER;
        assert!(made_by_capstan(&op(vec![(fm, "Apply", None), (fm, "Apply", Some("status"))])));
        // Created by hand (kubectl), its status written by capstan: not capstan's.
        assert!(!made_by_capstan(&op(vec![("kubectl-create", "Update", None), (fm, "Apply", Some("status"))])));
        assert!(!made_by_capstan(&op(vec![])));
    }
}
