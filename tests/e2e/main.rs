//! The end-to-end tests on the local environment of `tests/cluster/up.sh` (control plane with
//! kwok's node, and the OCI registry), in one binary: each module below was a test binary of its
//! own, and on two cores linking kube, tokio and jsonschema into each of them took minutes.
//!
//! Every test takes its group, the module it is in ([`support::group`](mod@support::group)):
//! tests of one module run in parallel as before, tests of two modules never at the same time
//! (several start a controller that watches every namespace). Run everything with
//! `cargo test --test e2e`, one module with `cargo test --test e2e controller_e2e::`, one test
//! with its name. The tests on the real node are in `tests/node/`, those that need no cluster in
//! `tests/it/`.

#[path = "../support/mod.rs"]
mod support;

mod api_cluster;
mod compare_olm;
mod controller_by_hand_e2e;
mod controller_community_e2e;
mod controller_configmap_e2e;
mod controller_deps_e2e;
mod controller_e2e;
mod controller_hostile_e2e;
mod controller_lifecycle_e2e;
mod controller_outage_e2e;
mod controller_parity_e2e;
mod controller_removal;
mod controller_restart_e2e;
mod controller_scale_e2e;
mod controller_webhooks_e2e;
mod deploy_cluster;
mod env_cluster;
mod install_cluster;
mod install_crd_safety;
mod install_webhooks_cluster;
mod oci_bundle;
mod oci_catalog;
mod oci_cli;
mod oci_hostile;
mod oci_opm;
mod oci_roundtrip;
mod registry_e2e;
