//! Discovery: what a cluster user reads to find operators, built from the catalogs capstan holds.
//!
//! - [`packagemanifest`]: `packages.operators.coreos.com/v1` `PackageManifest` as OLM v0's
//!   packageserver fills it.
//! - [`query`]: list/get over the catalogs a namespace can see, label and field selectors, the
//!   Table kubectl prints.
//! - [`apiserver`]: the aggregated API server (TLS, front-proxy authentication, SubjectAccessReview).
//! - [`served`]: what `capstan controller` serves of them from its catalog store (and the serving certificate).
//! - [`registry`], [`registry_server`]: operator-registry's gRPC API (`api.Registry`, what OLM's
//!   registry pods serve) answered from a catalog.
//! - [`content`]: a catalog's blobs as JSON lines, whole or by package / schema, as catalogd serves them.

pub mod apiserver;
pub mod content;
mod error;
pub mod packagemanifest;
pub mod query;
pub mod registry;
pub mod registry_server;
pub mod served;

pub use error::ServeError;
