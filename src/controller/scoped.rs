//! Scoped installs (OLM's OperatorGroup `spec.serviceAccountName`, `reference/olm-v0.md` §1.6): a
//! plan of such a group is applied impersonating that ServiceAccount, except its CRDs, which
//! capstan applies with its own identity as OLM v0.46.0 does (`ExecutePlan` in
//! `pkg/controller/operators/catalog/operator.go`: "CRDs should be installed via the default OLM
//! (cluster-admin) client and not the scoped client"). A CRD is cluster-wide: the ServiceAccount
//! of one namespace's installs is not meant to hold rights over every namespace's APIs. Who the
//! installer is, and whether it can be impersonated, is decided here; what it must hold before
//! the first step is the RBAC pre-check [`crate::install::preflight`] with
//! [`crate::install::preflight::Subject::ServiceAccount`] over [`applied_by_account`] (asked by
//! the InstallPlan reconciler).

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;
use kube::{Client, ResourceExt};

use super::{Context, Error, kube_err};
use crate::api::OperatorGroup;
use crate::install::{Appliers, Step, preflight};

/// The identity plans of namespace `ns` are applied with.
// One value per InstallPlan reconcile, never stored in bulk: boxing the client would only add an
// allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Installer {
    /// The controller's own identity (no `spec.serviceAccountName`).
    Controller,
    /// Impersonating a ServiceAccount.
    ServiceAccount {
        /// The ServiceAccount.
        account: preflight::ServiceAccount,
        /// A client impersonating it.
        client: Client,
        /// Reference to it, as OLM writes it in the InstallPlan's
        /// `status.attenuatedServiceAccountRef`.
        reference: k8s_openapi::api::core::v1::ObjectReference,
    },
}

impl Installer {
    /// Who applies a plan's steps, `own` being capstan's client: every step with `own` for
    /// [`Installer::Controller`]; for a ServiceAccount, the CRDs with `own` and the rest with the
    /// impersonating client (OLM v0.46.0 `ExecutePlan`,
    /// `pkg/controller/operators/catalog/operator.go`, module documentation).
    pub(crate) fn appliers<'a>(&'a self, own: &'a Client) -> Appliers<'a> {
        match self {
            Installer::Controller => Appliers { steps: own, crds: own },
            Installer::ServiceAccount { client, .. } => Appliers { steps: client, crds: own },
        }
    }
}

/// The steps of a plan a scoped install's ServiceAccount applies, and so must be allowed to:
/// all but the CRDs ([`Step::is_crd`]), which capstan applies with its own identity
/// ([`Installer::appliers`]; OLM v0.46.0 `ExecutePlan`,
/// `pkg/controller/operators/catalog/operator.go`). Pure.
pub(crate) fn applied_by_account(steps: &[Step]) -> Vec<Step> {
    steps.iter().filter(|s| !s.is_crd()).cloned().collect()
}

/// Whether plans of an OperatorGroup can be applied, and by whom.
// One value per InstallPlan reconcile (see `Installer`).
#[allow(clippy::large_enum_variant)]
pub(crate) enum InstallerCheck {
    /// They can, by this identity.
    Ready(Installer),
    /// They cannot: the ServiceAccount does not exist or no impersonating client can be made
    /// (the message names it and says what to do).
    Blocked(String),
}

/// The installer of OperatorGroup `ns/og`.
pub(crate) async fn installer(ctx: &Context, ns: &str, og: &str) -> Result<InstallerCheck, Error> {
    // No OperatorGroup (a plan written by hand in a namespace without one): capstan's identity.
    if og.is_empty() {
        return Ok(InstallerCheck::Ready(Installer::Controller));
    }
    let group = Api::<OperatorGroup>::namespaced(ctx.client.clone(), ns)
        .get_opt(og)
        .await
        .map_err(kube_err(format!("reading OperatorGroup {ns}/{og}")))?;
    let Some(sa) = group.and_then(|g| g.spec.service_account_name).filter(|s| !s.is_empty()) else {
        return Ok(InstallerCheck::Ready(Installer::Controller));
    };
    let account = format!("{ns}/{sa}");
    let Some(found) = Api::<ServiceAccount>::namespaced(ctx.client.clone(), ns)
        .get_opt(&sa)
        .await
        .map_err(kube_err(format!("reading ServiceAccount {account}")))?
    else {
        return Ok(InstallerCheck::Blocked(format!(
            "ServiceAccount {account} named by OperatorGroup {ns}/{og} spec.serviceAccountName does not exist; create it and grant it what the plan needs, or remove spec.serviceAccountName to install with capstan's own identity"
        )));
    };
    let reference = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ServiceAccount".into()),
        name: Some(sa.clone()),
        namespace: Some(ns.to_string()),
        resource_version: found.resource_version(),
        uid: found.uid(),
        ..Default::default()
    };
    let Some(mut config) = ctx.config.clone() else {
        return Ok(InstallerCheck::Blocked(format!(
            "OperatorGroup {ns}/{og} asks for installs as ServiceAccount {account} (spec.serviceAccountName), but this controller was started without its client configuration, so it cannot impersonate (start it with controller::run_with_config)"
        )));
    };
    let who = preflight::ServiceAccount { namespace: ns.to_string(), name: sa };
    config.auth_info.impersonate = Some(who.user());
    config.auth_info.impersonate_groups = Some(who.groups().to_vec());
    match Client::try_from(config) {
        Ok(client) => Ok(InstallerCheck::Ready(Installer::ServiceAccount { account: who, client, reference })),
        Err(e) => {
            Ok(InstallerCheck::Blocked(format!("cannot build a client impersonating ServiceAccount {account}: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(group: &str, kind: &str) -> Step {
        Step {
            resolving: "op.v1".into(),
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            name: "x".into(),
            namespace: None,
            manifest: json!({}),
        }
    }

    #[test]
    fn the_service_account_is_asked_for_everything_but_the_crds() {
        let plan = vec![
            step("apiextensions.k8s.io", "CustomResourceDefinition"),
            step("", "ServiceAccount"),
            step("rbac.authorization.k8s.io", "ClusterRole"),
            step("operators.coreos.com", "ClusterServiceVersion"),
            // A kind of that name in another group is not a CRD.
            step("example.com", "CustomResourceDefinition"),
        ];
        let kinds: Vec<(String, String)> = applied_by_account(&plan).into_iter().map(|s| (s.group, s.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("".into(), "ServiceAccount".into()),
                ("rbac.authorization.k8s.io".into(), "ClusterRole".into()),
                ("operators.coreos.com".into(), "ClusterServiceVersion".into()),
                ("example.com".into(), "CustomResourceDefinition".into()),
            ]
        );
    }
}
