//! Registry mirrors through the `capstan` binary, against `docker-registry` on loopback: an
//! image pushed as `127.0.0.1:PORT/quay.io/olmtest/…` is pulled as `quay.io/olmtest/…` through a
//! containers-registries.conf (`--registries-conf` or `CAPSTAN_REGISTRIES_CONF`); mirrors are
//! tried in order; a blocked source is never contacted; a failure names every location tried.
//! No request leaves the machine: every quay.io table here has a blocked source or a mirror
//! that serves the image.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::oci::{ExtraRegistry, dead_registry};

fn capstan(args: &[&str], home: &Path, conf_env: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capstan"));
    cmd.args(args)
        .env("CAPSTAN_CACHE", home.join("cache"))
        .env("HOME", home)
        .env_remove("DOCKER_CONFIG")
        .env_remove("REGISTRY_AUTH_FILE")
        .env_remove("CAPSTAN_REGISTRIES_CONF");
    if let Some(conf) = conf_env {
        cmd.env("CAPSTAN_REGISTRIES_CONF", conf);
    }
    cmd.output().expect("run capstan")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Pushes the nginx example bundle to `reference`; returns its digest.
fn push_bundle(reference: &str, home: &Path) -> String {
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles/nginx-operator/0.1.0");
    let out = capstan(&["bundle", "push", bundle.to_str().unwrap(), reference, "-q"], home, None);
    assert!(out.status.success(), "push {reference}: {}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

#[test]
fn an_image_is_pulled_under_its_original_name_through_a_mirror() {
    let reg = ExtraRegistry::start(None);
    let home = tempfile::tempdir().unwrap();
    let digest = push_bundle(&format!("{}/quay.io/olmtest/x:1", reg.addr), home.path());
    let conf = home.path().join("registries.conf");
    std::fs::write(
        &conf,
        format!(
            "[[registry]]\nprefix = \"quay.io\"\nlocation = \"quay.io\"\nblocked = true\n\
             [[registry.mirror]]\nlocation = \"{}/quay.io\"\n",
            reg.addr
        ),
    )
    .unwrap();

    let dest = home.path().join("by-flag");
    let args = ["bundle", "pull", "quay.io/olmtest/x:1", dest.to_str().unwrap(), "-q", "--registries-conf"];
    let out = capstan(&[&args[..], &[conf.to_str().unwrap()]].concat(), home.path(), None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), digest);
    assert!(dest.join("manifests/nginx-operator.clusterserviceversion.yaml").is_file());

    // By digest, and with the file named by the environment instead of the flag.
    let dest = home.path().join("by-env");
    let by_digest = format!("quay.io/olmtest/x@{digest}");
    let out = capstan(&["bundle", "pull", &by_digest, dest.to_str().unwrap(), "-q"], home.path(), Some(&conf));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dest.join("metadata/annotations.yaml").is_file());
    assert!(reg.log().contains("/v2/quay.io/olmtest/x/manifests/"), "the mirror served it: {}", reg.log());
}

#[test]
fn mirrors_are_tried_in_order_and_failures_name_every_location() {
    let reg = ExtraRegistry::start(None);
    let dead = dead_registry();
    let home = tempfile::tempdir().unwrap();
    let digest = push_bundle(&format!("{}/mirror/olmtest/y:2", reg.addr), home.path());
    let conf = home.path().join("registries.conf");
    std::fs::write(
        &conf,
        format!(
            "[[registry]]\nlocation = \"quay.io\"\nblocked = true\n\
             [[registry.mirror]]\nlocation = \"{dead}/quay.io\"\n\
             [[registry.mirror]]\nlocation = \"{}/mirror\"\n",
            reg.addr
        ),
    )
    .unwrap();
    let dest = home.path().join("second");
    let out =
        capstan(&["bundle", "pull", "quay.io/olmtest/y:2", dest.to_str().unwrap(), "-q"], home.path(), Some(&conf));
    assert!(out.status.success(), "the second mirror serves it: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), digest);

    let dest = home.path().join("absent");
    let out = capstan(
        &["bundle", "pull", "quay.io/olmtest/absent:1", dest.to_str().unwrap(), "-q"],
        home.path(),
        Some(&conf),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("quay.io/olmtest/absent:1") && err.contains("no location could serve it"), "{err}");
    assert!(err.contains(&format!("mirror {dead}/quay.io/olmtest/absent:1: cannot reach {dead}")), "{err}");
    assert!(err.contains(&format!("mirror {}/mirror/olmtest/absent:1: image", reg.addr)), "{err}");
    assert!(err.contains("not found"), "{err}");
    assert!(!err.contains("source quay.io"), "a blocked source is not tried: {err}");
}

#[test]
fn a_blocked_source_without_a_serving_mirror_and_a_bad_file_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let conf = home.path().join("registries.conf");
    std::fs::write(
        &conf,
        "[[registry]]\nlocation = \"quay.io\"\nblocked = true\n\
         [[registry.mirror]]\nlocation = \"127.0.0.1:9/quay.io\"\npull-from-mirror = \"digest-only\"\n",
    )
    .unwrap();
    let dest = home.path().join("x");
    let out =
        capstan(&["bundle", "pull", "quay.io/olmtest/z:1", dest.to_str().unwrap(), "-q"], home.path(), Some(&conf));
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("blocked") && err.contains(conf.to_str().unwrap()), "{err}");

    std::fs::write(&conf, "[[registry]]\nlocation = \"https://quay.io\"\n").unwrap();
    let out =
        capstan(&["bundle", "pull", "quay.io/olmtest/z:1", dest.to_str().unwrap(), "-q"], home.path(), Some(&conf));
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(conf.to_str().unwrap()) && err.contains("URL scheme"), "{err}");
}

#[test]
fn the_mirror_hosts_credentials_are_used() {
    use base64::Engine as _;
    let reg = ExtraRegistry::start(Some(("mirror-user", "mirror-pass")));
    let home = tempfile::tempdir().unwrap();
    let auth = home.path().join("auth.json");
    let b64 = base64::engine::general_purpose::STANDARD.encode("mirror-user:mirror-pass");
    std::fs::write(&auth, format!(r#"{{"auths":{{"{}":{{"auth":"{b64}"}}}}}}"#, reg.addr)).unwrap();
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles/nginx-operator/0.1.0");
    let reference = format!("{}/quay.io/private/x:1", reg.addr);
    let push = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["bundle", "push", bundle.to_str().unwrap(), &reference, "-q"])
        .env("CAPSTAN_CACHE", home.path().join("cache"))
        .env("HOME", home.path())
        .env("REGISTRY_AUTH_FILE", &auth)
        .output()
        .unwrap();
    assert!(push.status.success(), "{}", text(&push.stderr));
    let conf = home.path().join("registries.conf");
    std::fs::write(
        &conf,
        format!(
            "[[registry]]\nlocation = \"quay.io\"\nblocked = true\n[[registry.mirror]]\nlocation = \"{}/quay.io\"\n",
            reg.addr
        ),
    )
    .unwrap();
    let pull = |with_auth: bool, dest: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_capstan"));
        cmd.args(["bundle", "pull", "quay.io/private/x:1", home.path().join(dest).to_str().unwrap(), "-q"])
            .env("CAPSTAN_CACHE", home.path().join(format!("cache-{dest}")))
            .env("HOME", home.path())
            .env("CAPSTAN_REGISTRIES_CONF", &conf)
            .env_remove("DOCKER_CONFIG")
            .env_remove("REGISTRY_AUTH_FILE");
        if with_auth {
            cmd.env("REGISTRY_AUTH_FILE", &auth);
        }
        cmd.output().unwrap()
    };
    let anonymous = pull(false, "anonymous");
    assert_eq!(anonymous.status.code(), Some(2));
    let err = text(&anonymous.stderr);
    assert!(err.contains("not authorized to pull") && err.contains(&reg.addr), "{err}");
    let out = pull(true, "with-auth");
    assert!(out.status.success(), "credentials for the mirror's host: {}", text(&out.stderr));
}
