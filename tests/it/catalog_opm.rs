//! Side by side with `opm validate`: opm accepts the catalogs
//! capstan writes (JSON and YAML layouts, `catalog add` output, the generated benchmark catalog),
//! and capstan and opm agree on accepting or rejecting every catalog of the olm-cases file.
//!
//! opm is found by `support::opm` (`$CAPSTAN_OPM`, else `~/.cache/capstan/peers/bin/opm`, else on
//! `PATH`); when it is absent the tests fail, saying how to build it (`tests/peers/build.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{opm, shared_dir};
use capstan::catalog::add::{AddInput, AddOptions, UpdateMode, add_to_dir};
use capstan::catalog::{generate, parse, validate};
use serde_json::Value;

/// Runs `opm validate DIR`: Ok(()) when it accepts, Err(output) when it rejects.
fn opm_validate(opm: &Path, dir: &Path) -> Result<(), String> {
    let out = Command::new(opm).arg("validate").arg(dir).output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

#[test]
fn opm_accepts_catalogs_capstan_writes() {
    let opm = opm();
    // Generated benchmark catalog, JSON and YAML layouts.
    let cfg = generate::generate(40, 12, 4, 3);
    validate::validate(&cfg).unwrap();
    for format in [parse::Format::Json, parse::Format::Yaml] {
        let dir = tempfile::tempdir().unwrap();
        parse::write_dir_format(&cfg, dir.path(), format).unwrap();
        opm_validate(&opm, dir.path()).unwrap_or_else(|e| panic!("{format:?}: {e}"));
    }
    // A corpus catalog read and written again.
    let corpus = shared_dir().join("corpus/community-operators-prod/catalogs/v4.20");
    let dir = tempfile::tempdir().unwrap();
    parse::write_dir(&parse::load_path(&corpus).unwrap(), dir.path()).unwrap();
    opm_validate(&opm, dir.path()).unwrap();
}

#[test]
fn opm_accepts_catalog_add_output() {
    let opm = opm();
    let ops = shared_dir().join("corpus/community-operators-prod/operators");
    let dir = tempfile::tempdir().unwrap();
    for (package, mode) in [("etcd", UpdateMode::Replaces), ("self-node-remediation", UpdateMode::Semver)] {
        let mut bundles: Vec<(semver::Version, PathBuf)> = std::fs::read_dir(ops.join(package))
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("manifests").is_dir())
            .filter_map(|p| Some((semver::Version::parse(p.file_name()?.to_str()?.split('-').next()?).ok()?, p)))
            .collect();
        bundles.sort();
        for (v, path) in bundles {
            let image = format!("quay.io/community-operators/{package}-bundle:v{v}");
            let (blob, info) = capstan::bundle::render::render_bundle_dir(&path, Some(&image)).unwrap();
            let input = AddInput {
                bundle: blob,
                replaces: info.replaces,
                skips: info.skips,
                skip_range: info.skip_range,
                channels: info.channels,
                default_channel: info.default_channel,
            };
            add_to_dir(dir.path(), input, &AddOptions { mode, ..Default::default() })
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
    opm_validate(&opm, dir.path()).unwrap();
}

#[test]
fn capstan_and_opm_agree_on_every_case_catalog() {
    let opm = opm();
    let text = std::fs::read_to_string(shared_dir().join("cases/olm-cases.yaml")).unwrap();
    let cases: Vec<Value> = serde_norway::from_str(&text).unwrap();
    let mut checked = 0;
    for case in cases {
        let mut blobs = Vec::new();
        for item in case["catalog"].as_array().into_iter().flatten() {
            match item.get("blobs").and_then(Value::as_array) {
                Some(bs) => blobs.extend(bs.iter().cloned()),
                None => blobs.push(item.clone()),
            }
        }
        if blobs.is_empty() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let stream: String = blobs.iter().map(|b| serde_json::to_string(b).unwrap() + "\n").collect();
        std::fs::write(dir.path().join("catalog.json"), &stream).unwrap();
        let ours = parse::load_path(dir.path())
            .map_err(|e| e.to_string())
            .and_then(|c| validate::validate(&c).map_err(|e| e.to_string()));
        let theirs = opm_validate(&opm, dir.path());
        assert_eq!(ours.is_ok(), theirs.is_ok(), "{}: capstan {ours:?}, opm {theirs:?}", case["id"]);
        checked += 1;
    }
    assert!(checked >= 15, "{checked}");
}

/// Bundles that need Go's YAML and JSON rules — YAML merge keys
/// (clickhouse), `Kind:` for `kind:` in the CSV (project-quay), `MinKubeVersion:` (strimzi),
/// `ApiVersion:` (automotive-infra) — render byte-identical to `opm render` (`-o json`, opm's
/// default output), at opm's default migration level and with `olm.csv.metadata` (where the CSV
/// is read as Go reads it). `-o yaml` is not compared: capstan's YAML writer quotes and folds
/// differently from goyaml v2's (`docs/render.md`). Fixtures and provenance in
/// `tests/fixtures/community-operators-prod/`.
#[test]
fn go_yaml_and_json_bundles_render_byte_identical_to_opm() {
    let opm = opm();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/community-operators-prod");
    let capstan = PathBuf::from(env!("CARGO_BIN_EXE_capstan"));
    // (program, its render command, its image template flag and template)
    let opm_cmd = (
        opm.as_path(),
        &["render"][..],
        "--alpha-image-ref-template",
        "quay.io/example/{{.Package}}-bundle:v{{.Version}}",
    );
    let capstan_cmd = (
        capstan.as_path(),
        &["catalog", "render"][..],
        "--image-template",
        "quay.io/example/{package}-bundle:v{version}",
    );
    let render =
        |(program, command, flag, template): (&Path, &[&str], &str, &str), dir: &Path, format: &str, migrate: &str| {
            let out = Command::new(program)
                .args(command)
                .arg(dir)
                .args(["-o", format, "--migrate-level", migrate, flag, template])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{} render {}: {}",
                program.display(),
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
    for bundle in ["clickhouse/0.26.0", "project-quay/3.18.0", "strimzi-kafka-operator/1.2.0", "automotive-infra/0.0.3"]
    {
        let dir = fixtures.join(bundle);
        for format in ["json"] {
            for migrate in ["none", "bundle-object-to-csv-metadata"] {
                let want = render(opm_cmd, &dir, format, migrate);
                let got = render(capstan_cmd, &dir, format, migrate);
                if got != want {
                    let line = got.lines().zip(want.lines()).position(|(a, b)| a != b).unwrap_or(0);
                    panic!(
                        "{bundle} -o {format} --migrate-level {migrate}: differs from opm at line {}:\ncapstan: {}\nopm:     {}",
                        line + 1,
                        got.lines().nth(line).unwrap_or("<end>").chars().take(300).collect::<String>(),
                        want.lines().nth(line).unwrap_or("<end>").chars().take(300).collect::<String>()
                    );
                }
            }
        }
    }
}

/// An `oci://` related image (kuadrant-operator 0.2.0 of the corpus lists
/// `oci://quay.io/kuadrant/wasm-shim:v0.1.0`): `opm render` copies it into the blob without a
/// check (operator-registry v1.74.0 `alpha/action/render.go` validates nothing), and
/// `opm validate` refuses the catalog that holds it (`alpha/declcfg/declcfg_to_model.go`
/// `validateImagePullSpec`, `reference.ParseNormalizedNamed` on every `relatedImages[].image`).
/// capstan refuses it in `bundle validate` already, with the one reference rule
/// (`catalog::validate::check_reference`) that `catalog validate` applies to the same blob.
#[test]
fn an_oci_scheme_related_image_renders_in_opm_and_fails_opm_validate_as_in_capstan() {
    let opm = opm();
    let bundle_dir = shared_dir().join("corpus/community-operators-prod/operators/kuadrant-operator/0.2.0");
    let image = "oci://quay.io/kuadrant/wasm-shim:v0.1.0";

    let out = Command::new(&opm).args(["render", "-o", "json"]).arg(&bundle_dir).output().unwrap();
    assert!(out.status.success(), "opm render refused it: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("\"image\": \"{image}\"")));

    let bundle = capstan::bundle::Bundle::load(&bundle_dir).unwrap();
    let errors: Vec<String> = capstan::bundle::validate(&bundle)
        .into_iter()
        .filter(|f| f.severity == capstan::bundle::Severity::Error)
        .map(|f| format!("{}: {}", f.field, f.message))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with(&format!("spec.relatedImages[0].image: \"{image}\" is not a valid image reference")),
        "{errors:?}"
    );

    // The rendered blob in a catalog: both validators refuse it, naming relatedImages[0].
    let (blob, _) = capstan::bundle::render::render_bundle_dir(
        &bundle_dir,
        Some("quay.io/kuadrant/kuadrant-operator-bundle:v0.2.0"),
    )
    .unwrap();
    let catalog = format!(
        "{{\"schema\":\"olm.package\",\"name\":\"kuadrant-operator\",\"defaultChannel\":\"alpha\"}}\n{{\"schema\":\"olm.channel\",\"package\":\"kuadrant-operator\",\"name\":\"alpha\",\"entries\":[{{\"name\":\"{}\"}}]}}\n{}\n",
        blob.name,
        serde_json::to_string(&blob).unwrap()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("catalog.json"), catalog).unwrap();
    let opm_err = opm_validate(&opm, dir.path()).expect_err("opm validate accepted an oci:// related image");
    assert!(
        opm_err.contains("relatedImages[0].image: invalid image pull spec") && opm_err.contains(image),
        "{opm_err}"
    );
    let capstan_err =
        validate::validate(&parse::load_path(dir.path()).unwrap()).expect_err("capstan accepted it").to_string();
    assert!(
        capstan_err.contains("relatedImages[0].image: invalid image pull spec") && capstan_err.contains(image),
        "{capstan_err}"
    );
}
