//! What a user sees from the `capstan` binary when something is wrong: one `error:` prefix per
//! line, natural plurals, quiet exit on a closed pipe, one location per YAML error, exit codes as
//! documented (0 ok, 1 invalid content, 2 unreadable input), and messages that say what to do.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `$CAPSTAN_SHARED`, else `<repo>/../shared`, else `/work/shared`.
fn shared() -> PathBuf {
    if let Some(p) = std::env::var_os("CAPSTAN_SHARED") {
        return PathBuf::from(p);
    }
    let sibling = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if sibling.exists() { sibling } else { PathBuf::from("/work/shared") }
}

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

#[test]
fn counts_read_naturally() {
    let home = tempfile::tempdir().unwrap();
    let bundle = invalid_bundle(home.path());
    let bundle = bundle.to_str().unwrap();

    let out = capstan_in(home.path(), &["bundle", "validate", bundle]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("is invalid: 1 error, 1 warning\n"), "{stdout}");

    let out = capstan_in(home.path(), &["bundle", "push", bundle, "127.0.0.1:9/x/bundle:v1"]);
    let err = text(&out.stderr);
    assert!(err.contains(&format!("bundle {bundle} has 1 error; not pushing it")), "{err}");

    let out = capstan_in(home.path(), &["bundle", "validate", example("nginx-operator/0.1.0").to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("is valid (0 warnings)\n"), "{stdout}");

    // One package with one channel and two bundles.
    let catalog = home.path().join("catalog.yaml");
    std::fs::write(
        &catalog,
        "schema: olm.package\nname: a\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: a\nname: stable\nentries:\n- name: a.v1.0.0\n- name: a.v1.1.0\n  replaces: a.v1.0.0\n---\nschema: olm.bundle\npackage: a\nname: a.v1.0.0\nimage: r.local/a:1.0.0\nproperties:\n- type: olm.package\n  value: {packageName: a, version: 1.0.0}\n---\nschema: olm.bundle\npackage: a\nname: a.v1.1.0\nimage: r.local/a:1.1.0\nproperties:\n- type: olm.package\n  value: {packageName: a, version: 1.1.0}\n",
    )
    .unwrap();
    let out = capstan_in(home.path(), &["catalog", "validate", catalog.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("valid (1 package, 1 channel, 2 bundles)"), "{stdout}");

    // One --image for two bundle directories.
    let nginx = example("nginx-operator/0.1.0");
    let out = capstan_in(
        home.path(),
        &["catalog", "render", nginx.to_str().unwrap(), nginx.to_str().unwrap(), "--image", "r.local/n:1"],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("1 --image value for 2 bundle directories"), "{err}");
}

/// Runs capstan with stdout on a pipe that is closed after the first line, as `| head -1` does;
/// returns the exit code and stderr.
fn first_line_then_close(home: &Path, args: &[&str]) -> (Option<i32>, String) {
    use std::io::{BufRead, BufReader, Read};
    let mut child = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(args)
        .env("CAPSTAN_CACHE", home.join("cache"))
        .env("HOME", home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run capstan");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(!line.is_empty(), "no output from capstan {args:?}");
    // The reader is dropped here: the pipe's read end is closed with most output unread.
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn a_closed_stdout_pipe_ends_quietly_with_exit_0() {
    let home = tempfile::tempdir().unwrap();
    // Megabytes of output: far more than a pipe buffer holds.
    let catalog = shared().join("corpus/community-operators-prod/catalogs/v4.20");
    let catalog = catalog.to_str().unwrap();
    for args in [
        &["catalog", "render", catalog][..],
        &["catalog", "render", "-o", "yaml", catalog],
        &["crds"],
    ] {
        let (code, err) = first_line_then_close(home.path(), args);
        assert_eq!(code, Some(0), "capstan {args:?}: {err}");
        assert!(err.is_empty(), "capstan {args:?} printed on stderr: {err}");
    }
}
