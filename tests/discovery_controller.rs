//! capstan's own discovery on the local cluster (issue 16): runs
//! `tests/discovery/controller-packages.sh` with this build's `capstan` — the controller serving
//! `packages.operators.coreos.com/v1` PackageManifests as an aggregated API and the catalog
//! content endpoint, checked with the pinned kubectl (listing per namespace visibility, the
//! fields of `-o yaml`, `describe`, selectors, RBAC refusals, content equal to `opm render`, a
//! new catalog digest within one poll). The script's own header lists each check; its output is
//! printed when it fails.
//!
//! Needs the running environment of `tests/cluster/up.sh` (`CAPSTAN_CLUSTER_DIR`, default
//! `.cluster`) and opm (`CAPSTAN_OPM`, else `tests/peers/build.sh` builds it).

mod support;

#[test]
fn capstan_serves_packagemanifests_and_catalog_content() {
    let script = support::repo_root().join("tests/discovery/controller-packages.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .env("CAPSTAN_BIN", env!("CARGO_BIN_EXE_capstan"))
        .env("CAPSTAN_CLUSTER_DIR", support::state_dir())
        // The corpus where the Rust tests find it (beside the clone, else /work/shared): the
        // script alone looks only beside the clone.
        .env("CAPSTAN_SHARED", support::shared_dir())
        .output()
        .expect("run controller-packages.sh");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "controller-packages.sh failed:\n{text}");
    assert!(!text.contains("FAIL"), "{text}");
}
