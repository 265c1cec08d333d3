//! What a user sees from the `capstan` binary when something is wrong: one `error:` prefix per
//! line, natural plurals, quiet exit on a closed pipe, one location per YAML error, exit codes as
//! documented (0 ok, 1 invalid content, 2 unreadable input), and messages that say what to do.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn example(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles").join(path)
}

/// Runs capstan with its cache and home in `home` (no user's docker config or cache).
fn capstan_in(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(args)
        .env("CAPSTAN_CACHE", home.join("cache"))
        .env("HOME", home)
        .env_remove("DOCKER_CONFIG")
        .env_remove("REGISTRY_AUTH_FILE")
        .output()
        .expect("run capstan")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Copies a directory tree.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A copy of the nginx-operator 0.1.0 example bundle whose CSV name is not a DNS-1123 name
/// (one error, one warning).
fn invalid_bundle(dir: &Path) -> PathBuf {
    let bundle = dir.join("bad-bundle");
    copy_dir(&example("nginx-operator/0.1.0"), &bundle);
    let csv = bundle.join("manifests/nginx-operator.clusterserviceversion.yaml");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.contains("\n  name: nginx-operator.v0.1.0\n"));
    std::fs::write(&csv, text.replacen("\n  name: nginx-operator.v0.1.0\n", "\n  name: BAD_NAME\n", 1)).unwrap();
    bundle
}

#[test]
fn bundle_push_of_an_invalid_bundle_prefixes_each_error_once() {
    let home = tempfile::tempdir().unwrap();
    let bundle = invalid_bundle(home.path());
    // Validation runs before any registry is contacted, so the reference need not exist.
    let out = capstan_in(home.path(), &["bundle", "push", bundle.to_str().unwrap(), "127.0.0.1:9/x/bundle:v1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error: manifests/nginx-operator.clusterserviceversion.yaml: metadata.name"), "{err}");
    assert!(!err.contains("error: error:"), "{err}");
}
