//! The `operators.coreos.com` API as kube-rs custom resources: CatalogSource, Subscription,
//! InstallPlan, ClusterServiceVersion (`v1alpha1`) and OperatorGroup (`v1`; its CRD also serves
//! `v1alpha2`, see [`operatorgroup::v1alpha2`]), OperatorCondition (`v2`, also served as
//! [`operatorcondition::v1`]), Operator and OLMConfig (`v1`, cluster-scoped).
//!
//! Field names, enum values, condition types, short names, categories and printer columns are
//! OLM v0's (`../shared/reference/olm-v0.md` §1; upstream `operator-framework/api`
//! `pkg/operators/v1alpha1/*_types.go`, `pkg/operators/v1/operatorgroup_types.go` and
//! `crds/operators.coreos.com_*.yaml` at commit `3048ccdc`). capstan's additions are optional
//! fields OLM lacks, never renamed ones: [`SubscriptionSpec::version_range`] and the catalog
//! fields [`CatalogSourceStatus::resolved_image`], [`CatalogSourceStatus::resolved_digest`],
//! [`CatalogSourceStatus::package_count`].
//!
//! Subtrees capstan does not interpret (a CSV's icon, maintainers, links, provider, CRD
//! descriptors, the Deployment spec inside the install strategy, unknown top-level CSV spec
//! keys…) are kept as [`serde_json::Value`] and marked `x-kubernetes-preserve-unknown-fields`
//! in the CRD schema, so neither serde nor the API server drops them.
//!
//! String-valued enums whose value set OLM leaves open (phases, states, condition types,
//! reasons, step statuses, `sourceType`, install mode types) are "open enums": the known values
//! are variants that (de)serialize to OLM's exact strings, and any other string is kept
//! verbatim in an `Other(String)` variant, so an object written by a newer OLM never fails to
//! parse. Value sets OLM's own CRDs close with an `enum:` (condition status, approval,
//! `securityContextConfig`, webhook type, upgrade strategy) are plain enums with the same
//! `enum:` in capstan's CRDs.
//!
//! [`crds`] returns the eight CustomResourceDefinitions (sorted by name, deterministic);
//! `capstan crds` prints them and `manifests/crds/` holds them, one file per CRD named like
//! OLM's ([`crd_file_name`]).

/// Declares an open string enum: known values as variants with their exact wire strings, any
/// other string kept in `Other(String)`. Implements `as_str`, `Display`, `From<&str>`,
/// `From<String>`, serde (as a plain string) and `JsonSchema` (`type: string`).
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value this version of capstan does not know, kept verbatim.
            Other(String),
        }

        impl $name {
            /// Every known wire value, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$($wire),*];

            /// The wire string (OLM's spelling).
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $wire, )*
                    Self::Other(s) => s.as_str(),
                }
            }

            /// Whether this is one of the known values (not [`Self::Other`]).
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Other(_))
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $wire => Self::$variant, )*
                    other => Self::Other(other.to_string()),
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match Self::from(s.as_str()) {
                    Self::Other(_) => Self::Other(s),
                    known => known,
                }
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as ::serde::Deserialize>::deserialize(d)?;
                Ok(Self::from(s))
            }
        }

        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({ "type": "string" })
            }
        }
    };
}

pub mod catalogsource;
pub mod clusterserviceversion;
pub mod common;
pub mod installplan;
pub mod olmconfig;
pub mod operator;
pub mod operatorcondition;
pub mod operatorgroup;
pub mod subscription;

mod crds;

pub use catalogsource::{CatalogSource, CatalogSourceSpec, CatalogSourceStatus};
pub use clusterserviceversion::{ClusterServiceVersion, ClusterServiceVersionSpec, ClusterServiceVersionStatus};
pub use common::{Approval, ConditionStatus};
pub use crds::{
    CrdError, GENERATED_HEADER, UnknownField, crd_file_content, crd_file_name, crd_to_yaml, crds, crds_yaml_stream,
    declared_fields, openapi_schema, unknown_fields, unknown_fields_at, write_crd_dir,
};
pub use installplan::{InstallPlan, InstallPlanSpec, InstallPlanStatus};
pub use olmconfig::OlmConfig;
pub use operator::{Operator, OperatorSpec, OperatorStatus};
pub use operatorcondition::{OperatorCondition, OperatorConditionSpec, OperatorConditionStatus};
pub use operatorgroup::{OperatorGroup, OperatorGroupSpec, OperatorGroupStatus};
pub use subscription::{Subscription, SubscriptionSpec, SubscriptionStatus};

/// The API group of every kind here: `operators.coreos.com`.
pub const GROUP: &str = "operators.coreos.com";

/// The category every CRD here is listed under (`kubectl get olm`).
pub const CATEGORY: &str = "olm";
