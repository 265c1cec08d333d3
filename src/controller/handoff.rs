//! What the Subscription reconciler hands the InstallPlan reconciler, and reads back: the
//! plan's name ([`install_plan_name`]), the annotations it writes on a plan
//! ([`ANNOTATION_BUNDLE_LOOKUPS`], [`ANNOTATION_SUPERSEDED_BY`]) and the condition reason it
//! reads from a plan's status ([`INSTALL_RETRYING`]). Neither reconciler imports the other; both
//! use this file.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::api::installplan::BundleLookup;
use crate::install::plan::DependencySubscription;

/// The InstallPlan name for `subscription` installing `bundles` (`(CSV name, bundle image)`
/// pairs) with the Subscription's `spec.config` as JSON (`config`, `""` when unset): `install-`
/// and the first 10 hex digits of a SHA-256 over all of them, so that the same resolution always
/// maps to the same plan (a restart never creates a second one), and a changed input — a bundle
/// re-published under another digest, a corrected `spec.config` — gets a new plan instead of
/// being blocked by the plan that failed before it.
pub fn install_plan_name(subscription: &str, bundles: &[(String, String)], config: &str) -> String {
    let mut bundles = bundles.to_vec();
    bundles.sort();
    let mut h = Sha256::new();
    h.update(subscription.as_bytes());
    for (csv, image) in &bundles {
        h.update([0]);
        h.update(csv.as_bytes());
        h.update([1]);
        h.update(image.as_bytes());
    }
    if !config.is_empty() {
        h.update([2]);
        h.update(config.as_bytes());
    }
    format!("install-{}", &hex::encode(h.finalize())[..10])
}

/// Condition reason (with phase unchanged) of a plan that hit an error that goes away by itself
/// (a registry or the API server unreachable or failing): tried again after a backoff, doubling
/// from `installplan::RETRY_FIRST` up to `installplan::RETRY_MAX`.
pub const INSTALL_RETRYING: &str = "InstallRetrying";

/// Condition reason of a plan whose bundle image cannot be pulled for a reason a person fixes
/// (not found, unauthorized, a pull secret missing); checked again like
/// `installplan::CRD_UPGRADE_BLOCKED`. The Subscription reports it as OLM reports a failed
/// unpack (`BundleUnpacking`, then `BundleUnpackFailed`).
pub const BUNDLE_UNAVAILABLE: &str = "BundleUnavailable";

/// Annotation on an InstallPlan, set by the Subscription reconciler when it creates the plan:
/// [`PlannedLookups`] as JSON — where each bundle comes from. The InstallPlan reconciler copies
/// them into `status.bundleLookups` (only it writes InstallPlan status).
pub const ANNOTATION_BUNDLE_LOOKUPS: &str = "operators.capstan.dev/bundle-lookups";

/// Annotation on an InstallPlan waiting for approval, set by the Subscription reconciler when a
/// newer resolution supersedes it (written on the version it read, so a plan approved meanwhile
/// is not marked): why. The InstallPlan reconciler then fails the plan with reason `Superseded`,
/// so that approving it later installs nothing.
pub const ANNOTATION_SUPERSEDED_BY: &str = "operators.capstan.dev/superseded";

/// Condition reason of a plan superseded by a newer one ([`ANNOTATION_SUPERSEDED_BY`]).
pub const SUPERSEDED: &str = "Superseded";

/// The content of [`ANNOTATION_BUNDLE_LOOKUPS`]: `status.catalogSources` and
/// `status.bundleLookups` of a new plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedLookups {
    /// Names of the CatalogSources the bundles come from.
    pub catalog_sources: Vec<String>,
    /// One per bundle to install.
    pub bundle_lookups: Vec<BundleLookup>,
    /// The Subscriptions the plan creates for its dependencies (no Subscription of the namespace
    /// asks for their package, channel and catalog): a step each, after every other step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscriptions: Vec<DependencySubscription>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(csv: &str, image: &str) -> (String, String) {
        (csv.into(), image.into())
    }

    #[test]
    fn plan_name_is_deterministic_and_order_independent() {
        let a = install_plan_name("sub", &[b("b.v1", "r/b@sha256:1"), b("a.v1", "r/a@sha256:1")], "");
        assert_eq!(a, install_plan_name("sub", &[b("a.v1", "r/a@sha256:1"), b("b.v1", "r/b@sha256:1")], ""));
        assert_ne!(a, install_plan_name("other", &[b("a.v1", "r/a@sha256:1"), b("b.v1", "r/b@sha256:1")], ""));
        assert_ne!(a, install_plan_name("sub", &[b("a.v1", "r/a@sha256:1")], ""));
        assert!(a.starts_with("install-") && a.len() == "install-".len() + 10);
    }

    #[test]
    fn changed_inputs_get_a_new_plan_name() {
        let base = install_plan_name("sub", &[b("a.v1", "r/a@sha256:1")], "");
        assert_ne!(base, install_plan_name("sub", &[b("a.v1", "r/a@sha256:2")], ""), "a re-published bundle");
        assert_ne!(
            base,
            install_plan_name("sub", &[b("a.v1", "r/a@sha256:1")], r#"{"env":[]}"#),
            "a changed spec.config"
        );
    }
}
