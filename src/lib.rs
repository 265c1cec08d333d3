//! capstan: an Operator Lifecycle Manager for Kubernetes that speaks OLM v0's API and formats.
//!
//! Data flows one way: registry ([`oci`]) → catalog index ([`catalog`]) → resolver ([`resolve`])
//! → plan (`install`) → cluster (`controller`; both to come, issue 5). See `../shared/DESIGN.md` for the map.

pub mod api;
pub mod bundle;
pub mod catalog;
pub mod controller;
pub mod discovery;
pub mod install;
pub mod metrics;
pub mod oci;
pub mod resolve;
pub mod yaml;
