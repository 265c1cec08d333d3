//! The image commands end to end through the `capstan` binary, against `docker-registry` on
//! loopback: `bundle push -o json` prints `{reference, digest, size}`, `bundle pull` unpacks,
//! credentials come from `REGISTRY_AUTH_FILE`, and failures exit 2 naming the registry.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::oci::ExtraRegistry;
use crate::support::shared_dir;
use base64::Engine as _;

fn capstan(args: &[&str], cache: &Path, auth_file: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capstan"));
    cmd.args(args)
        .env("CAPSTAN_CACHE", cache)
        .env("HOME", cache) // no ~/.docker/config.json of the machine's user
        .env_remove("DOCKER_CONFIG")
        .env_remove("REGISTRY_AUTH_FILE");
    if let Some(f) = auth_file {
        cmd.env("REGISTRY_AUTH_FILE", f);
    }
    cmd.output().expect("run capstan")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn etcd_bundle() -> std::path::PathBuf {
    shared_dir().join("corpus/community-operators-prod/operators/etcd/0.9.4")
}

#[test]
fn bundle_push_json_and_pull() {
    let _group = crate::support::group("oci_cli");
    let addr = crate::support::registry();
    let cache = tempfile::tempdir().unwrap();
    let reference = format!("{addr}/capstan-cli/etcd-bundle:v0.9.4");
    let bundle = etcd_bundle();
    let out = capstan(&["bundle", "push", bundle.to_str().unwrap(), &reference, "-o", "json"], cache.path(), None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reference"], reference.as_str());
    let digest = v["digest"].as_str().unwrap().to_string();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{digest}");
    assert!(v["size"].as_u64().unwrap() > 0);

    let dest = cache.path().join("pulled");
    let out = capstan(&["bundle", "pull", &reference, dest.to_str().unwrap()], cache.path(), None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), digest);
    assert_eq!(
        std::fs::read(dest.join("metadata/annotations.yaml")).unwrap(),
        std::fs::read(bundle.join("metadata/annotations.yaml")).unwrap()
    );
}

#[test]
fn missing_image_exits_2_naming_the_registry() {
    let _group = crate::support::group("oci_cli");
    let addr = crate::support::registry();
    let cache = tempfile::tempdir().unwrap();
    let dest = cache.path().join("x");
    let out = capstan(
        &["bundle", "pull", &format!("{addr}/capstan-cli/absent:v1"), dest.to_str().unwrap()],
        cache.path(),
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(&format!("not found in {addr}")), "{err}");
}

#[test]
fn registry_auth_file_is_used() {
    let _group = crate::support::group("oci_cli");
    let reg = ExtraRegistry::start(Some(("cli-user", "cli-pass")));
    let cache = tempfile::tempdir().unwrap();
    let auth = cache.path().join("auth.json");
    let b64 = base64::engine::general_purpose::STANDARD.encode("cli-user:cli-pass");
    std::fs::write(&auth, format!(r#"{{"auths":{{"{}":{{"auth":"{b64}"}}}}}}"#, reg.addr)).unwrap();
    let reference = format!("{}/private/etcd-bundle:v1", reg.addr);
    let bundle = etcd_bundle();

    let out = capstan(&["bundle", "push", bundle.to_str().unwrap(), &reference, "-q"], cache.path(), None);
    assert_eq!(out.status.code(), Some(2), "anonymous push must fail");
    let err = text(&out.stderr);
    assert!(err.contains(&reg.addr) && err.contains("not authorized to push"), "{err}");

    let out = capstan(&["bundle", "push", bundle.to_str().unwrap(), &reference, "-q"], cache.path(), Some(&auth));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dest = cache.path().join("pulled");
    let out = capstan(&["bundle", "pull", &reference, dest.to_str().unwrap(), "-q"], cache.path(), Some(&auth));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dest.join("manifests").is_dir());
}

#[test]
fn resolve_reads_a_catalog_image_like_the_directory() {
    let _group = crate::support::group("oci_cli");
    let addr = crate::support::registry();
    let cache = tempfile::tempdir().unwrap();
    let catalog = shared_dir().join("corpus/community-operators-prod/catalogs/v4.20/ecr-secret-operator");
    let reference = format!("{addr}/capstan-cli/ecr-catalog:v1");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let registry = capstan::oci::Registry::new(capstan::oci::ClientConfig { quiet: true, ..Default::default() });
    rt.block_on(capstan::catalog::image::push_catalog(
        &registry,
        &catalog,
        &capstan::oci::parse_reference(&reference).unwrap(),
    ))
    .unwrap();
    let sub = cache.path().join("sub.yaml");
    std::fs::write(
        &sub,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: ecr, namespace: operators}\nspec: {name: ecr-secret-operator, channel: alpha, source: cat, sourceNamespace: olm}\n",
    )
    .unwrap();
    let run = |target: &str| {
        let out = capstan(
            &["resolve", "--catalog", &format!("olm/cat={target}"), "-f", sub.to_str().unwrap(), "-o", "json"],
            cache.path(),
            None,
        );
        assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let from_dir = run(catalog.to_str().unwrap());
    let from_image = run(&reference);
    assert!(!from_dir["resolved"].as_array().unwrap().is_empty(), "{from_dir}");
    assert_eq!(from_dir, from_image);
    // The parsed catalog is now cached by digest.
    assert!(std::fs::read_dir(cache.path().join("catalogs")).unwrap().count() >= 2);
}

#[test]
fn catalog_push_validate_ref_and_pull() {
    let _group = crate::support::group("oci_cli");
    let addr = crate::support::registry();
    let cache = tempfile::tempdir().unwrap();
    let catalog = shared_dir().join("corpus/community-operators-prod/catalogs/v4.20/nfs-provisioner-operator");
    let reference = format!("{addr}/capstan-cli/nfs-catalog:v1");
    let out = capstan(&["catalog", "push", catalog.to_str().unwrap(), &reference, "-o", "yaml"], cache.path(), None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_norway::from_slice(&out.stdout).unwrap();
    let digest = v["digest"].as_str().unwrap().to_string();

    let out = capstan(&["catalog", "validate", &reference], cache.path(), None);
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));

    let dest = cache.path().join("pulled");
    let out = capstan(
        &["catalog", "pull", &format!("{addr}/capstan-cli/nfs-catalog@{digest}"), dest.to_str().unwrap()],
        cache.path(),
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), digest);
    let original = std::fs::read_dir(&catalog).unwrap().count();
    assert_eq!(std::fs::read_dir(&dest).unwrap().count(), original);

    // An invalid catalog is not pushed: exit 1, the error names the problem.
    let bad = cache.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("c.json"),
        r#"{"schema":"olm.package","name":"demo","defaultChannel":"stable"}
{"schema":"olm.channel","package":"demo","name":"alpha","entries":[{"name":"demo.v1.0.0"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.0.0","image":"quay.io/x/demo:v1","properties":[{"type":"olm.package","value":{"packageName":"demo","version":"1.0.0"}}]}
"#,
    )
    .unwrap();
    let out =
        capstan(&["catalog", "push", bad.to_str().unwrap(), &format!("{addr}/capstan-cli/bad:v1")], cache.path(), None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("not pushing") && err.contains("stable"), "{err}");
}
