//! The integration tests that need no cluster, in one binary (issue 12): each file below was a
//! test binary of its own, and on two cores linking kube, tokio and jsonschema into each of them
//! took most of `make test`. Run one group with `cargo test --test it resolve_cases::`, one test
//! with its name. The tests that need the local cluster stay binaries of their own
//! (`tests/controller_*.rs`, `tests/*_cluster.rs`, …), with `tests/support/` as their support module.

mod api_crds;
mod bundle_corpus;
mod bundle_examples;
mod bundle_go_formats;
mod bundle_malformed;
mod bundle_opm_golden;
mod catalog_add_corpus;
mod catalog_cases;
mod catalog_cli;
mod catalog_corpus;
mod catalog_large;
mod catalog_malformed;
mod catalog_opm;
mod crd_safety_cases;
mod crd_safety_corpus;
mod install_corpus;
mod resolve_cases;
mod resolve_cli;
mod resolve_corpus;
mod resolve_props;
mod shape;
