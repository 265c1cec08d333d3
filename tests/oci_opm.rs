//! Side by side with opm (issue 3, "What must be shown" 3), against `docker-registry` on loopback:
//! - `opm render` of a bundle image pushed by `capstan bundle push` gives the same blob as
//!   `capstan catalog render` of the directory;
//! - `opm render` of a catalog image pushed by `capstan catalog push` gives the same blobs as
//!   `opm render` of the directory (opm finds the FBC through the configs label);
//! - `opm validate` accepts the directory `capstan catalog pull` writes.
//!
//! opm is found at `$CAPSTAN_OPM`, else `~/.cache/capstan/peers/bin/opm`, else on `PATH`. When
//! it is absent the tests print a note and return, unless `CAPSTAN_REQUIRE_PEERS=1` (CI), where
//! a missing opm is a failure. opm pulls through containers/image, which needs a signature
//! policy: the tests give it a `HOME` with `.config/containers/policy.json` accepting anything.

mod oci_common;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use capstan::oci::{ClientConfig, Registry, parse_reference};
use oci_common::shared_dir;
use serde_json::Value;

fn opm() -> Option<PathBuf> {
    let found = std::env::var_os("CAPSTAN_OPM")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/capstan/peers/bin/opm"))
                .filter(|p| p.is_file())
        })
        .or_else(|| {
            std::env::var_os("PATH")
                .and_then(|ps| std::env::split_paths(&ps).map(|d| d.join("opm")).find(|p| p.is_file()))
        });
    if found.is_none() {
        assert!(
            std::env::var("CAPSTAN_REQUIRE_PEERS").as_deref() != Ok("1"),
            "opm not found and CAPSTAN_REQUIRE_PEERS=1"
        );
        eprintln!("note: opm not found; side-by-side checks skipped");
    }
    found
}

/// A HOME for opm with a containers/image signature policy that accepts any image.
fn opm_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join(".config/containers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.json"), r#"{"default":[{"type":"insecureAcceptAnything"}]}"#).unwrap();
    home
}

fn stream(bytes: &[u8]) -> Vec<Value> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("not a JSON stream ({e}): {}", String::from_utf8_lossy(bytes)))
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn opm_render(opm: &Path, home: &Path, target: &str) -> Vec<u8> {
    run(Command::new(opm).args(["render", "--use-http", "-o", "json", target]).env("HOME", home).current_dir(home))
}

fn registry() -> Registry {
    Registry::new(ClientConfig { quiet: true, ..Default::default() })
}

#[tokio::test]
async fn opm_render_of_capstan_bundle_images_matches_capstan_render() {
    let Some(opm) = opm() else { return };
    let addr = support::registry();
    let home = opm_home();
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpus = shared_dir().join("corpus/community-operators-prod/operators");
    let mut bundles: Vec<PathBuf> = Vec::new();
    for (pkg, versions) in
        [("nginx-operator", &["0.1.0", "0.2.0"][..]), ("kaiwudb-operator", &["1.0.0", "1.1.0", "1.2.0"][..])]
    {
        bundles.extend(versions.iter().map(|v| repo.join("bundles").join(pkg).join(v)));
    }
    bundles.push(corpus.join("etcd/0.9.4"));
    bundles.push(corpus.join("etcd/0.6.1"));
    let reg = registry();
    let mut byte_identical = 0;
    for (i, dir) in bundles.iter().enumerate() {
        assert!(dir.join("metadata/annotations.yaml").is_file(), "missing bundle {}", dir.display());
        let reference = format!("{addr}/capstan-opm/bundle-{i}:v1");
        capstan::bundle::image::push_bundle(&reg, dir, &parse_reference(&reference).unwrap()).await.unwrap();
        let from_opm = opm_render(&opm, home.path(), &reference);
        let from_capstan = run(Command::new(env!("CARGO_BIN_EXE_capstan")).args([
            "catalog",
            "render",
            dir.to_str().unwrap(),
            "--image",
            &reference,
            "-o",
            "json",
        ]));
        assert_eq!(stream(&from_opm), stream(&from_capstan), "bundle {}", dir.display());
        if from_opm == from_capstan {
            byte_identical += 1;
        }
    }
    eprintln!("{byte_identical}/{} renders byte-identical", bundles.len());
}

#[tokio::test]
async fn opm_reads_capstan_catalog_images_and_validates_pulled_catalogs() {
    let Some(opm) = opm() else { return };
    let addr = support::registry();
    let home = opm_home();
    let catalog = shared_dir().join("corpus/community-operators-prod/catalogs/v4.20");
    let reference = format!("{addr}/capstan-opm/catalog:v4.20");
    let reg = registry();
    capstan::catalog::image::push_catalog(&reg, &catalog, &parse_reference(&reference).unwrap()).await.unwrap();
    // opm finds the FBC through the configs label and reads the same blobs as from the directory.
    let from_image = opm_render(&opm, home.path(), &reference);
    let from_dir = opm_render(&opm, home.path(), catalog.to_str().unwrap());
    let (from_image, from_dir) = (stream(&from_image), stream(&from_dir));
    assert!(from_dir.len() > 100, "{}", from_dir.len());
    assert_eq!(from_image, from_dir);

    // `capstan catalog pull` writes a directory `opm validate` accepts.
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("catalog");
    capstan::catalog::image::pull_catalog(&reg, &parse_reference(&reference).unwrap(), &dest).await.unwrap();
    run(Command::new(&opm).arg("validate").arg(&dest).env("HOME", home.path()));
}
