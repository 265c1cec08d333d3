//! The integration tests that need no cluster, in one binary: each file below was a test binary
//! of its own, and on two cores linking kube, tokio and jsonschema into each of them took most of
//! `make test`. Run them with `cargo test --test it`, one module with
//! `cargo test --test it resolve_cases::`, one test with its name. They run in parallel with each
//! other (each works in temporary directories of its own); two of them push to the local OCI
//! registry (`bundle_render_cli`, `cli_messages`), which `tests/cluster/up.sh registry` starts on
//! first use. The tests on the local cluster are in `tests/e2e/`, those on the real node in
//! `tests/node/`, with `tests/support/` as the support module of all three.

#[path = "../support/mod.rs"]
mod support;

mod api_crds;
mod api_csv_corpus;
mod bundle_corpus;
mod bundle_examples;
mod bundle_go_formats;
mod bundle_malformed;
mod bundle_opm_golden;
mod bundle_render_cli;
mod catalog_add_corpus;
mod catalog_cases;
mod catalog_cli;
mod catalog_corpus;
mod catalog_large;
mod catalog_malformed;
mod catalog_opm;
mod cli_messages;
mod crd_safety_cases;
mod crd_safety_corpus;
mod install_corpus;
mod install_retry;
mod install_webhooks;
mod registry_mirrors;
mod registry_opm;
mod resolve_cases;
mod resolve_cli;
mod resolve_corpus;
mod resolve_messages;
mod resolve_props;
mod shape;
