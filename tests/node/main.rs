//! The tests on the real node `capstan-node` of `tests/cluster/up.sh` (containerd, runc, CNI
//! bridge, kube-proxy beside kwok), in one binary: each module below was a test binary of its own.
//!
//! Every test takes its group, the module it is in ([`support::group`](mod@support::group)):
//! tests of one module run in parallel as before, tests of two modules never at the same time.
//! Run everything with `cargo test --test node`, one module with
//! `cargo test --test node node_cluster::`, one test with its name.

#[path = "../support/mod.rs"]
mod support;

mod node_cluster;
mod node_operator_e2e;
mod node_webhook_e2e;
