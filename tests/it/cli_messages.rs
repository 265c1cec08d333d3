//! What a user sees from the `capstan` binary when something is wrong: one `error:` prefix per
//! line, natural plurals, a closed pipe that ends the output but keeps the exit code, one location
//! per YAML error, exit codes as documented (0 ok, 1 invalid content, 2 unreadable input), one
//! judgement of bundles, catalogs, paths and image references for every command, and
//! messages that say what to do.

use crate::support::shared_dir;
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
    let catalog = shared_dir().join("corpus/community-operators-prod/catalogs/v4.20");
    let catalog = catalog.to_str().unwrap();
    for args in [&["catalog", "render", catalog][..], &["catalog", "render", "-o", "yaml", catalog], &["crds"]] {
        let (code, err) = first_line_then_close(home.path(), args);
        assert_eq!(code, Some(0), "capstan {args:?}: {err}");
        assert!(err.is_empty(), "capstan {args:?} printed on stderr: {err}");
    }
}

/// Runs capstan with stdout on a pipe whose read end is closed before capstan starts (the
/// reader of `capstan … | head -1` may be gone before the first write): every write fails with
/// EPIPE. Returns the exit code and stderr.
fn with_closed_stdout(home: &Path, args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(args)
        .env("CAPSTAN_CACHE", home.join("cache"))
        .env("HOME", home)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run capstan");
    (out.status.code(), text(&out.stderr))
}

#[test]
fn a_closed_stdout_pipe_keeps_the_exit_code_of_the_result() {
    let home = tempfile::tempdir().unwrap();
    let bad = invalid_bundle(home.path());
    let good = example("nginx-operator/0.1.0");
    // `capstan bundle validate BAD | head -1` must still fail: the closed pipe drops the output,
    // not the verdict.
    for (args, want) in [
        (vec!["bundle", "validate", bad.to_str().unwrap()], 1),
        (vec!["bundle", "validate", "-o", "json", bad.to_str().unwrap()], 1),
        (vec!["bundle", "validate", good.to_str().unwrap()], 0),
    ] {
        let (code, err) = with_closed_stdout(home.path(), &args);
        assert_eq!(code, Some(want), "capstan {args:?}: {err}");
        assert!(err.is_empty(), "capstan {args:?} printed on stderr: {err}");
    }
}

#[test]
fn a_failed_stdout_write_is_an_error_even_when_the_command_succeeds() {
    let home = tempfile::tempdir().unwrap();
    let bad = invalid_bundle(home.path());
    let good = example("nginx-operator/0.1.0");
    for (args, want) in [
        (vec!["bundle", "validate", bad.to_str().unwrap()], 1),
        (vec!["bundle", "validate", good.to_str().unwrap()], 1),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(&args)
            .env("CAPSTAN_CACHE", home.path().join("cache"))
            .env("HOME", home.path())
            .stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full"))
            .output()
            .expect("run capstan");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(want), "capstan {args:?}: {err}");
        assert_eq!(err.matches("error: cannot write to stdout: ").count(), 1, "capstan {args:?}: {err}");
    }
}

/// A catalog directory with one valid package `a` (bundles 1.0.0 and 1.1.0), plus `extra` blobs.
fn catalog_dir(dir: &Path, extra: &str) -> PathBuf {
    let cat = dir.join("catalog");
    std::fs::create_dir_all(&cat).unwrap();
    let blobs = r#"{"schema":"olm.package","name":"a","defaultChannel":"stable"}
{"schema":"olm.channel","package":"a","name":"stable","entries":[{"name":"a.v1.0.0"},{"name":"a.v1.1.0","replaces":"a.v1.0.0"}]}
{"schema":"olm.bundle","package":"a","name":"a.v1.0.0","image":"r.local/a:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"a","version":"1.0.0"}}]}
{"schema":"olm.bundle","package":"a","name":"a.v1.1.0","image":"r.local/a:1.1.0","properties":[{"type":"olm.package","value":{"packageName":"a","version":"1.1.0"}}]}
"#;
    std::fs::write(cat.join("catalog.json"), format!("{blobs}{extra}")).unwrap();
    cat
}

fn subscription(dir: &Path, version_range: &str) -> PathBuf {
    let sub = dir.join("sub.yaml");
    std::fs::write(
        &sub,
        format!("apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {{name: a, namespace: ns}}\nspec: {{name: a, source: c, sourceNamespace: olm, versionRange: {version_range:?}}}\n"),
    )
    .unwrap();
    sub
}

#[test]
fn resolve_exits_2_on_an_invalid_version_range_or_catalog() {
    let home = tempfile::tempdir().unwrap();
    let cat = catalog_dir(home.path(), "");
    let catalog_arg = format!("olm/c={}", cat.display());
    let good = subscription(home.path(), ">=1.0.0 <2");
    let out = capstan_in(home.path(), &["resolve", "--catalog", &catalog_arg, "-f", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("a.v1.1.0"), "{}", text(&out.stdout));

    let bad = subscription(home.path(), ">=1.0.0 <<2");
    let out = capstan_in(home.path(), &["resolve", "--catalog", &catalog_arg, "-f", bad.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("sub.yaml") && err.contains("Subscription \"a\"") && err.contains("spec.versionRange"),
        "{err}"
    );
    assert!(err.contains(">=1.0.0 <<2"), "{err}");

    // Package b's default channel names no channel: `opm validate` rejects the catalog.
    let broken =
        catalog_dir(home.path(), "{\"schema\":\"olm.package\",\"name\":\"b\",\"defaultChannel\":\"stabel\"}\n");
    let out = capstan_in(
        home.path(),
        &["resolve", "--catalog", &format!("olm/c={}", broken.display()), "-f", good.to_str().unwrap()],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("olm/c") && err.contains("is invalid") && err.contains("package b") && err.contains("stabel"),
        "{err}"
    );
}

#[test]
fn render_and_add_exit_2_naming_a_bundle_path_they_cannot_read() {
    let home = tempfile::tempdir().unwrap();
    let bundle = home.path().join("unreadable-bundle");
    copy_dir(&example("nginx-operator/0.1.0"), &bundle);
    // A manifest whose read fails with EIO (reading address 0 of the reader's own memory): what a
    // file without read permission does for a user who is not root.
    std::os::unix::fs::symlink("/proc/self/mem", bundle.join("manifests/zz-unreadable.yaml")).unwrap();
    let b = bundle.to_str().unwrap();
    let catalog = home.path().join("catalog");
    let c = catalog.to_str().unwrap();
    for args in [&["catalog", "render", b][..], &["catalog", "add", c, b], &["bundle", "push", b, "127.0.0.1:9/x/b:v1"]]
    {
        let out = capstan_in(home.path(), args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(b) && err.contains("manifests/zz-unreadable.yaml: cannot read"), "{args:?}: {err}");
    }
    assert!(!catalog.exists(), "nothing is written");

    // A directory that is not a bundle (the package directory above the bundles): exit 2, the
    // path named once.
    let package = example("nginx-operator");
    let p = package.to_str().unwrap();
    let out = capstan_in(home.path(), &["catalog", "add", c, p]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no manifests/ directory") && err.matches(p).count() == 1, "{err}");
}

#[test]
fn an_unusable_capstan_cache_is_named_with_what_to_do() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("not-a-directory");
    std::fs::write(&file, "x").unwrap();
    let catalog = catalog_dir(home.path(), "");
    let sub = subscription(home.path(), "");
    for cache in [file.clone(), file.join("below-a-file")] {
        for args in [
            &["catalog", "validate", "127.0.0.1:9/capstan/catalog:latest"][..],
            &["catalog", "push", catalog.to_str().unwrap(), "127.0.0.1:9/capstan/catalog:latest"],
            &["resolve", "--catalog", "olm/c=127.0.0.1:9/capstan/catalog:latest", "-f", sub.to_str().unwrap()],
        ] {
            let out = Command::new(env!("CARGO_BIN_EXE_capstan"))
                .args(args)
                .env("CAPSTAN_CACHE", &cache)
                .env("HOME", home.path())
                .output()
                .expect("run capstan");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("CAPSTAN_CACHE") && err.contains(cache.to_str().unwrap()), "{args:?}: {err}");
            assert!(err.contains("writable directory"), "{args:?}: {err}");
        }
    }
}

#[test]
fn annotations_without_the_annotations_map_say_so_and_show_the_shape() {
    let home = tempfile::tempdir().unwrap();
    let bundle = home.path().join("flat-annotations");
    copy_dir(&example("nginx-operator/0.1.0"), &bundle);
    let file = bundle.join("metadata/annotations.yaml");
    let text_in = std::fs::read_to_string(&file).unwrap();
    // The keys moved to the top level: `annotations:` dropped, the indentation removed.
    let flat: String =
        text_in.lines().filter(|l| *l != "annotations:").map(|l| format!("{}\n", l.trim_start())).collect();
    assert!(flat.starts_with("operators.operatorframework.io.bundle."), "{flat}");
    std::fs::write(&file, flat).unwrap();
    let out = capstan_in(home.path(), &["bundle", "validate", bundle.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("could not find annotations file"), "{err}");
    assert!(err.contains("metadata/annotations.yaml") && err.contains("no top-level `annotations:` map"), "{err}");
    assert!(err.contains("annotations:\n    operators.operatorframework.io.bundle.package.v1: "), "{err}");

    // `annotations:` holding a list.
    std::fs::write(&file, "annotations:\n- operators.operatorframework.io.bundle.package.v1: nginx-operator\n")
        .unwrap();
    let err = text(&capstan_in(home.path(), &["bundle", "validate", bundle.to_str().unwrap()]).stderr);
    assert!(err.contains("metadata/annotations.yaml") && err.contains("`annotations` is a list, not a map"), "{err}");
}

#[test]
fn placeholder_bundle_images_are_warned_about_by_catalog_validate_and_push() {
    let home = tempfile::tempdir().unwrap();
    let catalog = home.path().join("catalog");
    let c = catalog.to_str().unwrap();
    let nginx = example("nginx-operator/0.1.0");
    // A bundle directory added without --image gets a capstan.invalid placeholder.
    let out = capstan_in(home.path(), &["catalog", "add", c, nginx.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let out = capstan_in(home.path(), &["catalog", "validate", c]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "a placeholder is a warning, not an error: {err}");
    let warning = "warning: bundle nginx-operator.v0.1.0 of package nginx-operator has the placeholder image capstan.invalid/nginx-operator/bundle:v0.1.0";
    assert!(err.contains(warning), "{err}");
    assert!(err.contains("catalog add") && err.contains("--image"), "{err}");
    let out = capstan_in(home.path(), &["catalog", "validate", "-o", "json", c]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["valid"], true);
    assert!(
        json["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("bundle nginx-operator.v0.1.0 of package nginx-operator has the placeholder image"),
        "{json}"
    );

    let addr = crate::support::registry();
    let reference = format!("{addr}/capstan-cli-messages/catalog:placeholder");
    let out = capstan_in(home.path(), &["catalog", "push", c, &reference]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(warning), "{err}");
    // The pushed image carries the same warning when validated by reference.
    let out = capstan_in(home.path(), &["catalog", "validate", &reference]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(warning), "{}", text(&out.stderr));

    // With a real image reference there is nothing to warn about.
    let real = home.path().join("real");
    let r = real.to_str().unwrap();
    let out = capstan_in(
        home.path(),
        &["catalog", "add", r, nginx.to_str().unwrap(), "--image", "quay.io/example/nginx-operator-bundle:v0.1.0"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for args in
        [&["catalog", "validate", r][..], &["catalog", "push", r, &format!("{addr}/capstan-cli-messages/catalog:real")]]
    {
        let out = capstan_in(home.path(), args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).contains("placeholder"), "{args:?}: {}", text(&out.stderr));
    }
}

#[test]
fn messages_do_not_cite_internal_reference_files() {
    let home = tempfile::tempdir().unwrap();
    // A directory that is not a bundle: the message states what a bundle holds.
    let out = capstan_in(home.path(), &["bundle", "validate", example("nginx-operator").to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("a registry+v1 bundle has manifests/ and metadata/"), "{err}");
    assert!(!err.contains("olm-v0.md") && !err.contains('§'), "{err}");
}

// ---- Formats: `bundle validate`, `catalog validate`, `catalog render`, `catalog add`
// and `resolve` judge their input alike: one bundle validation, one catalog validation, one
// path-or-image rule, one image-reference rule, and the same exit codes (1 invalid content, 2
// unreadable or unparseable input and bad flags).

/// capstan in `home` (also its working directory) with its cache there and every proxy pointing
/// at a closed port: a pull that should not happen fails at once instead of reaching Docker Hub.
fn offline(home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_capstan"));
    c.args(args)
        .current_dir(home)
        .env("CAPSTAN_CACHE", home.join("cache"))
        .env("HOME", home)
        .env_remove("DOCKER_CONFIG")
        .env_remove("REGISTRY_AUTH_FILE")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "");
    c
}

/// [`offline`], run to its end with no stdin.
fn capstan(home: &Path, args: &[&str]) -> Output {
    offline(home, args).stdin(Stdio::null()).output().expect("run capstan")
}

const NGINX_CSV: &str = "manifests/nginx-operator.clusterserviceversion.yaml";

/// A copy of the nginx-operator 0.1.0 example bundle at `dir/name` with its CSV text edited.
fn nginx_with(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let bundle = dir.join(name);
    copy_dir(&example("nginx-operator/0.1.0"), &bundle);
    let csv = bundle.join(NGINX_CSV);
    let before = std::fs::read_to_string(&csv).unwrap();
    let after = edit(before.clone());
    assert_ne!(before, after, "the edit changed nothing");
    std::fs::write(&csv, after).unwrap();
    bundle
}

/// [`catalog_dir`] in `dir/name`.
fn named_catalog(dir: &Path, name: &str, extra: &str) -> PathBuf {
    catalog_dir(&dir.join(name), extra)
}

// ---- 2. a mistyped path is a missing path, not an image on Docker Hub --------------------------

#[test]
fn a_mistyped_path_is_reported_missing_and_not_pulled() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join("bundles")).unwrap();
    let catalog = named_catalog(h, "catalog", "");
    let c = catalog.to_str().unwrap();
    let sub = h.join("sub.yaml");
    std::fs::write(&sub, "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm}\n").unwrap();
    let s = sub.to_str().unwrap();
    for typo in ["./bundels/foo", "bundels/foo", "../bundels/foo", "bundels"] {
        let hub = if typo.starts_with('.') {
            String::new()
        } else {
            format!("; for an image on Docker Hub, write docker.io/{typo} or give a tag ({typo}:TAG)")
        };
        let missing = format!("{typo} does not exist (no such file or directory)");
        let resolve_catalog = format!("olm/c={typo}");
        // `bundle validate` takes a directory only; the others a path or an image.
        let out = capstan(h, &["bundle", "validate", typo]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(text(&out.stderr), format!("error: {missing}\n"));
        let missing = format!("{missing}{hub}");
        for args in [
            &["catalog", "validate", typo][..],
            &["catalog", "render", typo],
            &["catalog", "add", c, typo],
            &["resolve", "--catalog", &resolve_catalog, "-f", s],
            &["show", "a", "--catalog", &resolve_catalog],
        ] {
            let out = capstan(h, args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "capstan {args:?}: {err}");
            assert!(err.contains(&missing), "capstan {args:?}: want {missing:?} in: {err}");
            assert!(
                !err.contains("127.0.0.1:9") && !err.contains("docker.io/library") && !err.contains("registry-1"),
                "capstan {args:?} tried a registry: {err}"
            );
        }
    }
}

// ---- 3. catalog render validates as catalog validate does ------------------------------------

#[test]
fn catalog_render_refuses_what_catalog_validate_refuses_with_the_same_exit_code() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // Package b's default channel names no channel.
    let invalid =
        named_catalog(h, "invalid", "{\"schema\":\"olm.package\",\"name\":\"b\",\"defaultChannel\":\"stabel\"}\n");
    let i = invalid.to_str().unwrap();
    let validate = capstan(h, &["catalog", "validate", i]);
    assert_eq!(validate.status.code(), Some(1), "{}", text(&validate.stderr));
    let render = capstan(h, &["catalog", "render", i]);
    let err = text(&render.stderr);
    assert_eq!(render.status.code(), Some(1), "{err}");
    assert!(render.stdout.is_empty(), "nothing is rendered: {}", text(&render.stdout));
    assert!(err.starts_with(&format!("error: catalog {i} is invalid; nothing was rendered (`capstan catalog validate {i}` lists the same errors): ")), "{err}");
    assert!(err.contains("package b") && err.contains("stabel"), "{err}");

    // Catalog fragments render when the output is a valid catalog: a package and its channel,
    // and the bundle from its directory ...
    let fragment = h.join("fragment");
    std::fs::create_dir_all(&fragment).unwrap();
    std::fs::write(
        fragment.join("pkg.yaml"),
        "schema: olm.package\nname: nginx-operator\ndefaultChannel: alpha\n---\nschema: olm.channel\npackage: nginx-operator\nname: alpha\nentries:\n- name: nginx-operator.v0.1.0\n",
    )
    .unwrap();
    let f = fragment.to_str().unwrap();
    let nginx = example("nginx-operator/0.1.0");
    let n = nginx.to_str().unwrap();
    let out = capstan(h, &["catalog", "render", f, n, "--image", "quay.io/example/nginx-operator-bundle:v0.1.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // ... but not when a channel names a bundle that is not there.
    let out = capstan(h, &["catalog", "render", f]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("nginx-operator.v0.1.0"), "{err}");
    let other = example("nginx-operator/0.2.0");
    let out = capstan(h, &["catalog", "render", f, other.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The errors belong to the combination, not to one input.
    assert!(
        err.starts_with(&format!("error: the catalog rendered from {f}, {} is invalid; nothing was rendered (the errors are of the combined output: each input may be valid on its own): ", other.display())),
        "{err}"
    );

    // A file that is not JSON or YAML: unreadable input for both, exit 2.
    let garbled = h.join("garbled");
    std::fs::create_dir_all(&garbled).unwrap();
    std::fs::write(garbled.join("catalog.json"), "{\"schema\": \"olm.package\", \"name\": ").unwrap();
    let g = garbled.to_str().unwrap();
    for args in [&["catalog", "validate", g][..], &["catalog", "render", g]] {
        let out = capstan(h, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "capstan {args:?}: {err}");
        assert!(err.contains("catalog.json"), "capstan {args:?}: {err}");
    }

    // A valid catalog renders.
    let valid = named_catalog(h, "valid", "");
    let out = capstan(h, &["catalog", "render", valid.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\"a.v1.1.0\""));
}

#[test]
fn catalog_render_and_add_refuse_an_image_flag_that_is_not_a_reference() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let nginx = example("nginx-operator/0.1.0");
    let n = nginx.to_str().unwrap();
    let cat = h.join("catalog");
    let c = cat.to_str().unwrap();
    let message = "error: --image \"not a ref\" is not an image reference: ";
    for args in
        [&["catalog", "render", n, "--image", "not a ref"][..], &["catalog", "add", c, n, "--image", "not a ref"]]
    {
        let out = capstan(h, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "capstan {args:?}: {err}");
        assert!(err.starts_with(message), "capstan {args:?}: {err}");
        assert!(err.contains("write a pull spec such as quay.io/org/bundle:v1.0.0"), "capstan {args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    assert!(!cat.exists(), "nothing was added");

    let out = capstan(h, &["catalog", "render", n, "--image", "quay.io/example/nginx-operator-bundle:v0.1.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\"image\": \"quay.io/example/nginx-operator-bundle:v0.1.0\""));
}

#[test]
fn catalog_render_refuses_unknown_image_template_placeholders_naming_the_known_ones() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let nginx = example("nginx-operator/0.1.0");
    let n = nginx.to_str().unwrap();
    let out = capstan(h, &["catalog", "render", n, "--image-template", "quay.io/org/{pkg}-bundle:v{version}"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: --image-template \"quay.io/org/{pkg}-bundle:v{version}\": unknown placeholder {pkg}; use {package}, {name}, {version} (or {{.Package}}, {{.Name}}, {{.Version}})\n"
    );
    assert!(out.stdout.is_empty());

    let out = capstan(h, &["catalog", "render", n, "--image-template", "quay.io/org/{{.Package}}-bundle:v{version}"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("\"image\": \"quay.io/org/nginx-operator-bundle:v0.1.0\""),
        "{}",
        text(&out.stdout)
    );

    // Known placeholders that fill in to something that is no reference.
    let out = capstan(h, &["catalog", "render", n, "--image-template", "quay.io/Org/{package}"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        format!(
            "error: render {n}: --image-template \"quay.io/Org/{{package}}\" (gives \"quay.io/Org/nginx-operator\") is not an image reference: invalid reference format; write a pull spec such as quay.io/org/bundle:v1.0.0 or quay.io/org/bundle@sha256:<digest>\n"
        )
    );
}

// ---- 4. resolve --installed ------------------------------------------------------------------

#[test]
fn resolve_installed_names_no_catalog_has_are_an_error_or_a_warning_saying_what_is_assumed() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let cat = named_catalog(h, "catalog", "");
    let catalog_arg = format!("olm/c={}", cat.display());
    let sub = h.join("sub.yaml");
    std::fs::write(&sub, "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm, channel: stable}\n").unwrap();
    let s = sub.to_str().unwrap();

    // A name that says nothing: an error, naming it.
    let out = capstan(h, &["resolve", "--catalog", &catalog_arg, "-f", s, "--installed", "a-v1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        "error: --installed a-v1: no bundle named a-v1 in catalog olm/c, and the name does not say its package and version (<package>.v<version>, e.g. etcdoperator.v0.9.4); give the CSV name of a bundle of the catalogs (`capstan show PACKAGE --catalog …` lists them)\n"
    );

    // A typo of a bundle of the catalog: resolved as assumed, with a warning saying so.
    let out = capstan(h, &["resolve", "--catalog", &catalog_arg, "-f", s, "--installed", "a.v1.0.1"]);
    let err = text(&out.stderr);
    assert_eq!(
        err,
        "warning: --installed a.v1.0.1: no bundle named a.v1.0.1 in catalog olm/c; assuming package a version 1.0.1 from the name, with no APIs or dependencies; package a has bundles a.v1.0.0, a.v1.1.0: check the name, unless the catalog no longer serves that CSV\n"
    );

    // A name of the catalog: no warning, and the upgrade from it.
    let out = capstan(h, &["resolve", "--catalog", &catalog_arg, "-f", s, "--installed", "a.v1.0.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    assert!(text(&out.stdout).contains("a.v1.1.0"), "{}", text(&out.stdout));
}

/// Package b of a catalog beside [`catalog_dir`]'s package a also has a bundle named a.v1.0.0
/// (opm allows it), which b.v1.1.0 replaces.
const SHARED_NAME: &str = r#"{"schema":"olm.package","name":"b","defaultChannel":"stable"}
{"schema":"olm.channel","package":"b","name":"stable","entries":[{"name":"a.v1.0.0"},{"name":"b.v1.1.0","replaces":"a.v1.0.0"}]}
{"schema":"olm.bundle","package":"b","name":"a.v1.0.0","image":"r.local/b:1.0.0","properties":[{"type":"olm.package","value":{"packageName":"b","version":"1.0.0"}}]}
{"schema":"olm.bundle","package":"b","name":"b.v1.1.0","image":"r.local/b:1.1.0","properties":[{"type":"olm.package","value":{"packageName":"b","version":"1.1.0"}}]}
"#;

/// A home with catalog `olm/c` (packages a and b of [`SHARED_NAME`]) and two Subscription files
/// of namespace ns: `b.yaml` (package b) and `both.yaml` (packages a and b).
struct SharedName {
    home: tempfile::TempDir,
    catalog_arg: String,
}

impl SharedName {
    fn new() -> SharedName {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let cat = named_catalog(h, "catalog", SHARED_NAME);
        let catalog_arg = format!("olm/c={}", cat.display());
        let sub = |name: &str, package: &str| {
            format!(
                "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {{name: {name}, namespace: ns}}\nspec: {{name: {package}, source: c, sourceNamespace: olm, channel: stable}}\n"
            )
        };
        std::fs::write(h.join("b.yaml"), sub("b", "b")).unwrap();
        std::fs::write(h.join("both.yaml"), format!("{}---\n{}", sub("a", "a"), sub("b", "b"))).unwrap();
        SharedName { home, catalog_arg }
    }

    /// `capstan resolve` of the Subscriptions in `file` (`b.yaml` or `both.yaml`) with one
    /// `--installed` per entry of `installed`, then `extra` arguments.
    fn resolve(&self, file: &str, installed: &[&str], extra: &[&str]) -> Output {
        let h = self.home.path();
        let file = h.join(file);
        let mut args = vec!["resolve", "--catalog", &self.catalog_arg, "-f", file.to_str().unwrap()];
        for i in installed {
            args.extend(["--installed", i]);
        }
        args.extend(extra);
        capstan(h, &args)
    }

    /// [`SharedName::resolve`] of `both.yaml`: its exit code and stderr.
    fn both(&self, installed: &[&str]) -> (Option<i32>, String) {
        let out = self.resolve("both.yaml", installed, &[]);
        (out.status.code(), text(&out.stderr))
    }
}

/// `--installed a.v1.0.0` with only package b subscribed in the namespace: the name is b's
/// bundle, and the plan is its upgrade.
#[test]
fn resolve_installed_name_of_the_one_subscribed_package_that_has_it_is_its_bundle() {
    let s = SharedName::new();
    let out = s.resolve("b.yaml", &["a.v1.0.0"], &["-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["resolved"][0]["bundle"], "b.v1.1.0", "{json}");
    assert_eq!(json["resolved"][0]["reason"], "upgrade from a.v1.0.0", "{json}");
}

/// Both packages subscribed: the name does not say which is installed, and `@PACKAGE` does.
#[test]
fn resolve_installed_name_two_subscribed_packages_share_is_refused_without_at_package() {
    let s = SharedName::new();
    let out = s.resolve("both.yaml", &["a.v1.0.0"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        "error: --installed a.v1.0.0: packages a, b each have a bundle named a.v1.0.0, and the Subscriptions of namespace ns do not tell which is installed; write a.v1.0.0@PACKAGE (for example a.v1.0.0@a)\n"
    );
    let out = s.resolve("both.yaml", &["a.v1.0.0@b"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// `@PACKAGE` naming a package that has no bundle of that name: refused, naming the package that has it.
#[test]
fn resolve_installed_at_a_package_without_that_bundle_names_the_package_that_has_it() {
    let s = SharedName::new();
    let out = s.resolve("both.yaml", &["b.v1.1.0@a"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: --installed b.v1.1.0@a: package a has no bundle named b.v1.1.0; it is a bundle of b\n"
    );
}

/// A namespace none of the Subscriptions is in: the installed CSV would change nothing.
#[test]
fn resolve_installed_in_a_namespace_without_subscriptions_is_refused() {
    let s = SharedName::new();
    let out = s.resolve("b.yaml", &["nss/a.v1.0.0"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        "error: --installed nss/a.v1.0.0: none of the Subscriptions is in namespace nss (they are in ns); an installed CSV only counts in its Subscriptions' namespace: write ns/a.v1.0.0\n"
    );
    assert_eq!(
        s.both(&["nss/a.v1.0.0@b"]).1,
        "error: --installed nss/a.v1.0.0@b: none of the Subscriptions is in namespace nss (they are in ns); an installed CSV only counts in its Subscriptions' namespace: write ns/a.v1.0.0@b\n"
    );
}

/// Names that cannot be a namespace or a CSV.
#[test]
fn resolve_installed_names_that_are_no_namespace_or_csv_name_are_refused() {
    let s = SharedName::new();
    assert_eq!(s.both(&["/a.v1.0.0"]), (Some(2), "error: --installed /a.v1.0.0: \"\" is not a namespace name (lowercase letters, digits and '-'); write [NAMESPACE/]CSV_NAME[@PACKAGE]\n".to_string()));
    for bad in ["ns//a.v1.0.0", "ns/a/b", "ns/Ü.v1.0.0"] {
        let (code, err) = s.both(&[bad]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains("is not a CSV name (a Kubernetes object name"), "{bad}: {err}");
    }
}

/// One CSV given twice (once without its namespace): refused, a namespace holds one CSV of a name.
#[test]
fn resolve_installed_csv_given_twice_is_refused() {
    let s = SharedName::new();
    assert_eq!(
        s.both(&["a.v1.0.0@a", "ns/a.v1.0.0@b"]),
        (
            Some(2),
            "error: --installed ns/a.v1.0.0@b: CSV ns/a.v1.0.0 is given twice; a namespace holds one CSV of a name\n"
                .to_string()
        )
    );
}

// ---- 5. Subscription input ---------------------------------------------------------------------

/// A home with [`catalog_dir`]'s catalog as `olm/c`, for `capstan resolve -f sub.yaml`.
struct SubFile {
    home: tempfile::TempDir,
    catalog_arg: String,
}

impl SubFile {
    fn new() -> SubFile {
        let home = tempfile::tempdir().unwrap();
        let cat = named_catalog(home.path(), "catalog", "");
        let catalog_arg = format!("olm/c={}", cat.display());
        SubFile { home, catalog_arg }
    }

    /// The path of `sub.yaml`, as the messages show it.
    fn file(&self) -> String {
        self.home.path().join("sub.yaml").display().to_string()
    }

    /// `capstan resolve --catalog olm/c=… ARGS`.
    fn resolve(&self, args: &[&str]) -> Output {
        let mut all = vec!["resolve", "--catalog", &self.catalog_arg];
        all.extend(args);
        capstan(self.home.path(), &all)
    }

    /// Writes `yaml` to `sub.yaml` and resolves it.
    fn run(&self, yaml: &str) -> Output {
        let sub = self.home.path().join("sub.yaml");
        std::fs::write(&sub, yaml).unwrap();
        self.resolve(&["-f", sub.to_str().unwrap()])
    }
}

/// A misspelt field is refused with the field it is nearest to.
#[test]
fn resolve_refuses_an_unknown_subscription_field_naming_the_nearest_one() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm, chanel: stable}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(
        err,
        format!(
            "error: {}, Subscription \"a\": unknown field \"spec.chanel\"; a Subscription has no such field (kubectl apply --validate=strict refuses it too); did you mean spec.channel?\n",
            s.file()
        )
    );
}

/// An unknown field nothing is near: the message lists the fields its parent has.
#[test]
fn resolve_refuses_an_unknown_subscription_field_listing_the_fields_there() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm, approval: Manual}\n",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown field \"spec.approval\"; a Subscription has no such field (kubectl apply --validate=strict refuses it too); spec has channel, config, "), "{err}");
    assert!(err.contains("installPlanApproval"), "{err}");
}

/// Several unknown fields: the first is named with a count of the others, and a suggestion.
#[test]
fn resolve_refuses_several_unknown_subscription_fields_in_one_message() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns, lables: {x: y}}\nspec: {name: a, source: c, sourceNamespace: olm, config: {nodeSelector: {k: v}, envv: []}}\n",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("unknown field \"metadata.lables\" (and 1 other: spec.config.envv)")
            && err.ends_with("; did you mean metadata.labels?\n"),
        "{err}"
    );
}

/// A value of the wrong type: the error names the field.
#[test]
fn resolve_refuses_a_subscription_value_of_the_wrong_type_naming_the_field() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm, channel: 5}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}, Subscription \"a\": spec.channel: 5 is not of types \"null\", \"string\"; a string is wanted: quote the value as written (YAML reads an unquoted 2.10 as the number 2.1); kubectl apply refuses it too (the Subscription CRD's schema)\n",
            s.file()
        )
    );
}

/// A document that is not an object is named as such (not "expected struct …").
#[test]
fn resolve_names_a_document_that_is_not_an_object() {
    let s = SubFile::new();
    let out = s.run("just a string\n");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}, document 1: a string, not an object; a Subscription is a mapping with apiVersion, kind, metadata and spec\n",
            s.file()
        )
    );
}

/// A list where the schema has an object (serde would read it as an empty config): refused with
/// the field, as the API server refuses it.
#[test]
fn resolve_refuses_a_list_where_the_schema_has_an_object() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm, config: [{env: []}]}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}, Subscription \"a\": spec.config: [{{\"env\":[]}}] is not of types \"null\", \"object\"; kubectl apply refuses it too (the Subscription CRD's schema)\n",
            s.file()
        )
    );
}

/// A Subscription copied from `kubectl get -o yaml`: metadata the server set, a status with
/// installedCSV a.v1.0.0 and a field capstan does not know.
const WITH_STATUS: &str = "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns, uid: x, resourceVersion: '1'}\nspec: {name: a, source: c, sourceNamespace: olm}\nstatus: {installedCSV: a.v1.0.0, somethingNewer: {x: 1}}\n";

/// The same Subscription with no status: a fresh install.
const FRESH: &str = "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm}\n";

/// Status fields are not checked (a Subscription copied from `kubectl get -o yaml`), and its
/// status.installedCSV is taken as installed: the plan is the upgrade from it, and says so; a
/// fresh install is planned differently.
#[test]
fn resolve_takes_status_installed_csv_as_installed_and_says_so() {
    let s = SubFile::new();
    let out = s.run(WITH_STATUS);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "note: status.installedCSV of Subscription ns/a: a.v1.0.0 taken as installed in namespace ns (as --installed ns/a.v1.0.0@a)\n"
    );
    let plan = text(&out.stdout);
    assert!(plan.contains("a.v1.1.0") && plan.contains("a.v1.0.0"), "the upgrade from the installed CSV: {plan}");
    let fresh = s.run(FRESH);
    assert_ne!(text(&fresh.stdout), plan, "a fresh install is planned differently");
}

/// --installed contradicting the pasted status: one CSV of a package per namespace.
#[test]
fn resolve_refuses_installed_that_contradicts_status_installed_csv() {
    let s = SubFile::new();
    s.run(WITH_STATUS);
    let out = s.resolve(&["-f", &s.file(), "--installed", "a.v1.1.0"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: status.installedCSV of Subscription ns/a: --installed a.v1.1.0 already gives a CSV of package a in namespace ns; a namespace has one CSV of a package installed: give only the installed one (while an upgrade runs, the one whose phase is not Replacing)\n"
    );
}

/// The same CSV by --installed and the status: one entry, the same plan.
#[test]
fn resolve_counts_installed_and_status_installed_csv_naming_one_csv_once() {
    let s = SubFile::new();
    let plan = text(&s.run(WITH_STATUS).stdout);
    let out = s.resolve(&["-f", &s.file(), "--installed", "a.v1.0.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), plan);
}

/// A status.installedCSV that is not a CSV name: refused, saying to correct or remove status.
#[test]
fn resolve_refuses_a_status_installed_csv_that_is_not_a_csv_name() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm}\nstatus: {installedCSV: A.v1}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: status.installedCSV of Subscription ns/a: \"A.v1\" is not a CSV name (a Kubernetes object name: lowercase letters, digits, '-' and '.'); correct it or remove status\n"
    );
}

/// An item of a `kubectl get -o yaml` List of Subscriptions in namespace `ns`.
fn list_item(name: &str, ns: &str) -> String {
    format!(
        "- apiVersion: operators.coreos.com/v1alpha1\n  kind: Subscription\n  metadata: {{name: {name}, namespace: {ns}}}\n  spec: {{name: a, source: c, sourceNamespace: olm}}\n"
    )
}

/// `kubectl get -o yaml` of several objects writes a List (or a SubscriptionList): its items are read.
#[test]
fn resolve_reads_the_items_of_a_list_and_of_a_subscription_list() {
    let s = SubFile::new();
    let out = s.run(&format!("apiVersion: v1\nkind: List\nitems:\n{}{}", list_item("a", "ns1"), list_item("b", "ns2")));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    assert!(plan.contains("ns1/a") && plan.contains("ns2/b"), "{plan}");
    let out = s.run(&format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: SubscriptionList\nitems:\n{}{}",
        list_item("a", "ns1"),
        list_item("b", "ns2")
    ));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    assert!(plan.contains("ns1/a") && plan.contains("ns2/b"), "{plan}");
}

/// An item of a List that is not an object: the error names the item.
#[test]
fn resolve_names_the_list_item_that_is_not_an_object() {
    let s = SubFile::new();
    let out = s.run(&format!("apiVersion: v1\nkind: List\nitems:\n{}- 7\n", list_item("a", "ns1")));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}, document 1, items[1]: a number, not an object; a Subscription is a mapping with apiVersion, kind, metadata and spec\n",
            s.file()
        )
    );
}

/// A Subscription without its `kind:` line.
const NO_KIND: &str = "apiVersion: operators.coreos.com/v1alpha1\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm}\n";

/// A missing kind would drop a Subscription silently: refused, as kubectl does.
#[test]
fn resolve_refuses_a_document_without_kind() {
    let s = SubFile::new();
    let out = s.run(NO_KIND);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}, document 1: kind is missing; kubectl apply refuses an object without one: write kind: Subscription\n",
            s.file()
        )
    );
}

/// Kinds are matched exactly: `subscription` is refused.
#[test]
fn resolve_refuses_a_kind_in_the_wrong_case() {
    let s = SubFile::new();
    let out = s.run(&format!("kind: subscription\n{NO_KIND}"));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}, document 1: kind is \"subscription\"; kinds are matched exactly: write kind: Subscription\n",
            s.file()
        )
    );
}

/// A misspelt kind no API serves: refused, naming the document and the kind it is near.
#[test]
fn resolve_refuses_a_misspelt_kind_suggesting_subscription() {
    let s = SubFile::new();
    let out =
        s.run(&format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: ns}}\n---\nkind: Subscriptoin\n{NO_KIND}"));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}, document 2: kind is \"Subscriptoin\", which no API serves (kubectl apply refuses it: no matches for kind); did you mean kind: Subscription?\n",
            s.file()
        )
    );
}

/// Objects of other kinds beside the Subscriptions are skipped.
#[test]
fn resolve_skips_objects_of_other_kinds() {
    let s = SubFile::new();
    let out =
        s.run(&format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: ns}}\n---\nkind: Subscription\n{NO_KIND}"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// A metadata.name the API server refuses: refused, saying what a name may hold.
#[test]
fn resolve_refuses_an_invalid_subscription_name() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: Bad_Name, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}, Subscription \"Bad_Name\": metadata.name \"Bad_Name\" is not a valid object name; use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit\n",
            s.file()
        )
    );
}

/// A metadata.namespace the API server refuses: refused, saying what a namespace name may hold.
#[test]
fn resolve_refuses_an_invalid_subscription_namespace() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: NS 1}\nspec: {name: a, source: c, sourceNamespace: olm}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}, Subscription \"a\": metadata.namespace \"NS 1\" is not a namespace name; use lowercase letters, digits and '-' (at most 63)\n",
            s.file()
        )
    );
}

/// A number where a string belongs (channel 2.10, read as 2.1): the message says to quote it.
#[test]
fn resolve_says_to_quote_a_channel_yaml_reads_as_a_number() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec: {name: a, source: c, sourceNamespace: olm, channel: 2.10}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "spec.channel: 2.1 is not of types \"null\", \"string\"; a string is wanted: quote the value as written"
        ),
        "{}",
        text(&out.stderr)
    );
}

/// A field given twice (the YAML parser keeps the last): refused, as kubectl's strict decoding does.
#[test]
fn resolve_refuses_a_field_given_twice() {
    let s = SubFile::new();
    let out = s.run(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: a, namespace: ns}\nspec:\n  name: a\n  channel: alpha\n  channel: beta\n  source: c\n  sourceNamespace: olm\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {}: spec: duplicate entry with key \"channel\" at line 5 column 3; a field given twice keeps only its last value: kubectl apply refuses it too, give it once\n",
            s.file()
        )
    );
}

/// The same file given twice to `-f`, by one path or by two: refused, naming both spellings.
#[test]
fn resolve_refuses_the_same_file_given_twice() {
    let s = SubFile::new();
    s.run(FRESH);
    let f = s.file();
    let out = s.resolve(&["-f", &f, "-f", &f]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stderr), format!("error: -f {f}: the file is given twice; give each file once\n"));
    let other = s.home.path().join(".").join("sub.yaml").display().to_string();
    let out = s.resolve(&["-f", &f, "-f", &other]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!("error: -f {f}: the file is given twice (as {other}); give each file once\n")
    );
}

/// Two Subscriptions of one namespace and name: kubectl apply would keep one; refused, naming both.
#[test]
fn resolve_refuses_two_subscriptions_of_one_namespace_and_name() {
    let s = SubFile::new();
    let doc = |ch: &str| {
        format!(
            "---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {{name: a, namespace: ns}}\nspec: {{name: a, source: c, sourceNamespace: olm, channel: {ch}}}\n"
        )
    };
    let out = s.run(&format!("{}{}", doc("stable"), doc("beta")));
    assert_eq!(out.status.code(), Some(2));
    let f = s.file();
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {f}, document 2: Subscription ns/a is also given by {f}, document 1; a namespace holds one Subscription of a name (kubectl apply would keep only the last): rename one or drop it\n"
        )
    );
}

/// Any apiVersion but operators.coreos.com/v1alpha1 (v1, the v1 of the group, none): refused.
#[test]
fn resolve_refuses_other_api_versions_of_a_subscription() {
    let s = SubFile::new();
    for version in ["v1", "operators.coreos.com/v1", ""] {
        let out = s.run(&format!(
            "apiVersion: {version:?}\nkind: Subscription\nmetadata: {{name: a, namespace: ns}}\nspec: {{name: a, source: c, sourceNamespace: olm}}\n"
        ));
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            text(&out.stderr),
            format!(
                "error: {}, Subscription \"a\": apiVersion is {version:?}; a Subscription's apiVersion is operators.coreos.com/v1alpha1\n",
                s.file()
            )
        );
    }
}

/// `-f -` reads the Subscriptions from stdin.
#[test]
fn resolve_reads_stdin_for_f_dash() {
    let s = SubFile::new();
    let mut child = offline(s.home.path(), &["resolve", "--catalog", &s.catalog_arg, "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run capstan");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), FRESH.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("a.v1.1.0"), "{}", text(&out.stdout));
}

/// `-f -` with nothing on stdin: no Subscription found, exit 2.
#[test]
fn resolve_of_an_empty_stdin_says_no_subscription_was_found() {
    let s = SubFile::new();
    let out = offline(s.home.path(), &["resolve", "--catalog", &s.catalog_arg, "-f", "-"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no Subscription found in the -f files"), "{}", text(&out.stderr));
}

// ---- 6. bundle validate: webhooks, ports, alm-examples ---------------------------------------

/// A misspelt CSV spec field (OLM's API server drops it: `spec.replace` loses the upgrade edge) is
/// a warning naming the field it is nearest to; a field nothing is near lists the fields there.
#[test]
fn bundle_validate_warns_of_csv_spec_fields_a_csv_does_not_have() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let csv = NGINX_CSV;
    let typo = nginx_with(h, "typo", |c| {
        c.replacen(
            "\n  version: 0.1.0\n",
            "\n  version: 0.1.0\n  replace: nginx-operator.v0.0.9\n  support: Example\n",
            1,
        )
    });
    let (code, found) = findings(h, &typo);
    assert_eq!(code, Some(0), "warnings only: {found:?}");
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(
        found[0],
        format!(
            "warning: {csv}: spec.replace: a ClusterServiceVersion has no such field: OLM's API server drops it, so it has no effect; did you mean spec.replaces? (fix: rename it to spec.replaces)"
        )
    );
    assert!(
        found[1].starts_with(&format!("warning: {csv}: spec.support: a ClusterServiceVersion has no such field: OLM's API server drops it, so it has no effect (fix: remove it, or use one of the fields of spec: annotations, ")),
        "{found:?}"
    );
    let deep = nginx_with(h, "deep", |c| c.replacen("deployments:", "deploymnts: []\n      deployments:", 1));
    let (_, found) = findings(h, &deep);
    assert!(
        found.iter().any(|f| f.contains("spec.install.spec.deploymnts: a ClusterServiceVersion has no such field")
            && f.contains("did you mean spec.install.spec.deployments?")),
        "{found:?}"
    );
    // A misspelt bundle annotation likewise.
    let ann = h.join("annotation");
    copy_dir(&example("nginx-operator/0.1.0"), &ann);
    let file = ann.join("metadata/annotations.yaml");
    let text_of = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text_of.replace("bundle.channel.default.v1", "bundle.chanel.default.v1")).unwrap();
    let (code, found) = findings(h, &ann);
    assert_eq!(code, Some(0), "{found:?}");
    assert_eq!(
        found,
        [
            "warning: metadata/annotations.yaml: annotations.operators.operatorframework.io.bundle.chanel.default.v1: not a bundle annotation opm or OLM reads, so it has no effect; did you mean operators.operatorframework.io.bundle.channel.default.v1? (fix: rename it to operators.operatorframework.io.bundle.channel.default.v1)"
        ]
    );
    // A typo in the prefix, or another case, is as lost.
    std::fs::write(
        &file,
        text_of.replace(
            "operators.operatorframework.io.bundle.channel.default.v1",
            "operators.operatorframework.io.bundel.channel.default.v1",
        ),
    )
    .unwrap();
    let (code, found) = findings(h, &ann);
    assert_eq!(code, Some(0), "{found:?}");
    assert_eq!(
        found,
        [
            "warning: metadata/annotations.yaml: annotations.operators.operatorframework.io.bundel.channel.default.v1: not a bundle annotation opm or OLM reads, so it has no effect; did you mean operators.operatorframework.io.bundle.channel.default.v1? (fix: rename it to operators.operatorframework.io.bundle.channel.default.v1)"
        ]
    );
}

/// A webhook definition in the nginx CSV: `(deploymentName, containerPort, failurePolicy, sideEffects)`.
fn with_webhook(dir: &Path, name: &str, deployment: &str, port: &str, policy: &str, side_effects: &str) -> PathBuf {
    nginx_with(dir, name, |csv| {
        csv.replacen(
            "\nspec:\n",
            &format!(
                "\nspec:\n  webhookdefinitions:\n    - generateName: vnginx.example.com\n      type: ValidatingAdmissionWebhook\n      deploymentName: {deployment}\n      containerPort: {port}\n      failurePolicy: {policy}\n      sideEffects: {side_effects}\n      admissionReviewVersions: [v1]\n      webhookPath: /validate\n      rules:\n        - {{apiGroups: [example.com], apiVersions: [v1alpha1], operations: [CREATE], resources: [nginxes]}}\n"
            ),
            1,
        )
    })
}

fn findings(home: &Path, bundle: &Path) -> (Option<i32>, Vec<String>) {
    let out = capstan(home, &["bundle", "validate", bundle.to_str().unwrap()]);
    (
        out.status.code(),
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("error: ") || l.starts_with("warning: "))
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn bundle_validate_checks_webhook_ports_policies_side_effects_and_deployments() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let good = with_webhook(h, "good", "nginx-operator-controller-manager", "443", "Fail", "None");
    assert_eq!(findings(h, &good), (Some(0), vec![]));

    let csv = NGINX_CSV;
    let port = with_webhook(h, "port", "nginx-operator-controller-manager", "70000", "Fail", "None");
    assert_eq!(
        findings(h, &port),
        (
            Some(1),
            vec![format!(
                "error: {csv}: spec.webhookdefinitions[0].containerPort: 70000 is not a port (1-65535); the API server refuses the CSV (fix: give the Service port the webhook is served on, e.g. 443, or leave it out for 443)"
            )]
        )
    );
    let policy = with_webhook(h, "policy", "nginx-operator-controller-manager", "443", "Sometimes", "Some");
    assert_eq!(
        findings(h, &policy),
        (
            Some(1),
            vec![
                format!(
                    "error: {csv}: spec.webhookdefinitions[0].failurePolicy: \"Sometimes\" is not a failure policy; the API server refuses the webhook configuration OLM creates (fix: use Ignore or Fail)"
                ),
                format!(
                    "error: {csv}: spec.webhookdefinitions[0].sideEffects: \"Some\" is not allowed; admissionregistration.k8s.io/v1, the webhook configuration OLM creates, accepts only None and NoneOnDryRun (fix: use None, or NoneOnDryRun for a webhook that has side effects except on dry-run requests)"
                ),
            ]
        )
    );
    let elsewhere = with_webhook(h, "elsewhere", "nginx-webhook", "443", "Ignore", "NoneOnDryRun");
    assert_eq!(
        findings(h, &elsewhere),
        (
            Some(0),
            vec![format!(
                "warning: {csv}: spec.webhookdefinitions[0].deploymentName: \"nginx-webhook\" is not a deployment of spec.install.spec.deployments (nginx-operator-controller-manager); OLM creates the webhook configuration pointing at Service nginx-webhook-service, but no Service, certificate or caBundle for it (fix: name the install strategy deployment that serves the webhook, unless the operator creates that deployment and its certificate itself)"
            )]
        )
    );

    let container =
        nginx_with(h, "container-port", |csv| csv.replace("- containerPort: 8443", "- containerPort: 70000"));
    assert_eq!(
        findings(h, &container),
        (
            Some(1),
            vec![format!(
                "error: {csv}: spec.install.spec.deployments[0].spec.template.spec.containers[0].ports[0].containerPort: 70000 is not a port (1-65535); the API server refuses the Deployment (fix: give the port the container listens on)"
            )]
        )
    );
}

#[test]
fn bundle_validate_and_render_refuse_alm_examples_that_are_not_a_list_of_objects() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let replace_examples = |with: &'static str| {
        move |csv: String| {
            let start = csv.find("    alm-examples: |-\n").unwrap();
            let end = csv.find("    capabilities:").unwrap();
            format!("{}    alm-examples: '{with}'\n{}", &csv[..start], &csv[end..])
        }
    };
    let fix = "(fix: write a JSON array of example custom resources, each with apiVersion, kind and metadata)";
    for (name, examples, why) in [
        ("numbers", "[1,2]", "entry 0 is a number, not an object"),
        ("no-kind", "[{\"apiVersion\": \"example.com/v1alpha1\"}]", "entry 0 has no kind"),
        ("object", "{\"kind\": \"Nginx\"}", "invalid type: map, expected a sequence at line 1 column 0"),
    ] {
        let bundle = nginx_with(h, name, replace_examples(examples));
        let want = format!(
            "error: {NGINX_CSV}: metadata.annotations[alm-examples]: is not a JSON list of example objects: {why} {fix}"
        );
        assert_eq!(findings(h, &bundle), (Some(1), vec![want.clone()]), "{examples}");
        let out = capstan(h, &["catalog", "render", bundle.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{examples}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(&want["error: ".len()..]), "{examples}: {}", text(&out.stderr));
    }
}

// ---- 7. oci:// related images: one rule for bundle validate, catalog render and catalog add ----

#[test]
fn an_oci_scheme_related_image_is_refused_alike_by_validate_render_and_add() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let corpus = shared_dir().join("corpus/community-operators-prod/operators/kuadrant-operator/0.2.0");
    assert!(
        corpus.is_dir(),
        "{} is missing: set CAPSTAN_SHARED to the shared/ directory with the corpus (or put it beside the clone)",
        corpus.display()
    );
    let bundle = h.join("kuadrant");
    copy_dir(&corpus, &bundle);
    let b = bundle.to_str().unwrap();
    let csv_file = "manifests/kuadrant-operator.clusterserviceversion.yaml";
    let finding = format!(
        "{csv_file}: spec.relatedImages[0].image: \"oci://quay.io/kuadrant/wasm-shim:v0.1.0\" is not a valid image reference"
    );
    let validate = capstan(h, &["bundle", "validate", b]);
    assert_eq!(validate.status.code(), Some(1), "{}", text(&validate.stdout));
    assert!(text(&validate.stdout).contains(&format!("error: {finding}")), "{}", text(&validate.stdout));
    let cat = h.join("catalog");
    for args in [&["catalog", "render", b][..], &["catalog", "add", cat.to_str().unwrap(), b]] {
        let out = capstan(h, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "capstan {args:?}: {err}");
        assert!(err.contains(&finding), "capstan {args:?}: {err}");
        assert!(err.contains("drop the scheme (oci://, docker://, https://)"), "capstan {args:?}: {err}");
    }
    assert!(!cat.exists(), "nothing was added");

    // The same reference in an environment variable is the operator's business: opm lists only
    // spec.relatedImages and container images, and so does capstan.
    let csv = bundle.join(csv_file);
    let fixed = std::fs::read_to_string(&csv).unwrap().replace("- image: oci://", "- image: ");
    assert!(fixed.contains("value: oci://quay.io/kuadrant/wasm-shim"), "the env var keeps its oci:// value");
    std::fs::write(&csv, fixed).unwrap();
    for args in
        [&["bundle", "validate", b][..], &["catalog", "render", b], &["catalog", "add", cat.to_str().unwrap(), b]]
    {
        let out = capstan(h, args);
        assert_eq!(out.status.code(), Some(0), "capstan {args:?}: {}{}", text(&out.stdout), text(&out.stderr));
    }
}
