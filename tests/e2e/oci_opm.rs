//! Side by side with opm, against `docker-registry` on loopback:
//! - `opm render` of a bundle image pushed by `capstan bundle push` gives the same blob as
//!   `capstan catalog render` of the directory;
//! - `opm render` of a catalog image pushed by `capstan catalog push` gives the same blobs as
//!   `opm render` of the directory (opm finds the FBC through the configs label);
//! - `opm validate` accepts the directory `capstan catalog pull` writes.
//!
//! opm is found by `support::opm` (`$CAPSTAN_OPM`, else `~/.cache/capstan/peers/bin/opm`, else on
//! `PATH`); when it is absent the tests fail, saying how to build it (`tests/peers/build.sh`). opm
//! pulls through containers/image, which needs a signature policy: the tests give it a `HOME`
//! with `.config/containers/policy.json` accepting anything.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{opm, shared_dir};
use capstan::oci::{ClientConfig, Registry, parse_reference};
use serde_json::Value;

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

#[test]
fn opm_render_of_capstan_bundle_images_matches_capstan_render() {
    crate::support::run("oci_opm", 0, async {
        let opm = opm();
        let addr = crate::support::registry();
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
    })
}

#[test]
fn opm_reads_capstan_catalog_images_and_validates_pulled_catalogs() {
    crate::support::run("oci_opm", 0, async {
        let opm = opm();
        let addr = crate::support::registry();
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
    })
}
