//! capstan: an Operator Lifecycle Manager for Kubernetes that speaks OLM v0's API and formats.
//!
//! Data flows one way, and a module imports only modules below it (`docs/architecture.md`):
//! bottom [`yaml`], [`api`], [`oci`], [`http`], [`metrics`]; then [`catalog`] (FBC model,
//! properties, semver ranges) → [`bundle`] (registry+v1 bundles, rendered into catalog blobs) →
//! [`resolve`] (uses `catalog`) → [`install`] (uses `bundle`) → [`discovery`] and [`controller`].

pub mod api;
pub mod bundle;
pub mod catalog;
pub mod controller;
pub mod discovery;
pub mod http;
pub mod install;
pub mod memory;
pub mod metrics;
pub mod oci;
pub mod resolve;
pub mod yaml;
