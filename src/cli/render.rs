//! `capstan catalog render`: bundle directories and images, catalog directories and images →
//! one FBC stream, as `opm render` prints it (operator-registry `alpha/action/render.go`).
//!
//! Exit codes, as `catalog validate`'s: 0 success; 1 a reference was read but its content is
//! invalid (a bundle `capstan bundle validate` rejects, a catalog `capstan catalog validate`
//! rejects); 2 a reference cannot be read or parsed (missing or unreadable path, a catalog file
//! that is not JSON/YAML, unreachable registry) or a flag is wrong (`--image` not a reference,
//! unknown `--image-template` placeholders).
//! Nothing is printed unless every reference renders.

use std::path::Path;
use std::process::ExitCode;

use capstan::bundle::Bundle;
use capstan::bundle::image::{BundleImageError, pull_bundle};
use capstan::bundle::render::{Migration, RenderError, render_info};
use capstan::bundle::render_validated;
use capstan::catalog::image::load_catalog_image_blocking;
use capstan::catalog::model::DeclarativeConfig;
use capstan::catalog::parse::{self, Format, to_stream};
use capstan::catalog::placeholder::placeholder_image;
use clap::{Args, ValueEnum};

use super::image::{RegistryArgs, Target};
use super::load::bundle_load_code;

/// Output format of FBC blobs.
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum FbcOutput {
    /// A stream of JSON objects indented by 4 spaces (opm's `-o json`).
    #[default]
    Json,
    /// YAML documents, each starting with `---`, keys sorted (opm's `-o yaml`).
    Yaml,
}

/// Migration level (opm's `--migrate-level`).
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum MigrateLevel {
    /// An `olm.bundle.object` per manifest (opm's default).
    #[default]
    None,
    /// One `olm.csv.metadata` instead of the `olm.bundle.object` properties.
    BundleObjectToCsvMetadata,
}

/// Arguments of `capstan catalog render`.
#[derive(Args, Debug)]
pub struct RenderArgs {
    /// What to render: bundle directories (manifests/ and metadata/), catalog directories or
    /// files, bundle images or catalog images.
    #[arg(required = true)]
    refs: Vec<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = FbcOutput::Json)]
    output: FbcOutput,
    /// Image reference for a bundle directory's blob (checked as `catalog validate` checks
    /// bundle images); repeat it once per bundle directory, in the order the directories are
    /// given. A bundle image always gets its own reference.
    #[arg(long = "image")]
    images: Vec<String>,
    /// Image reference template for bundle directories without --image: `{package}`, `{name}`
    /// and `{version}` (or opm's `{{.Package}}`, `{{.Name}}`, `{{.Version}}`) are replaced; any
    /// other placeholder is refused, and so is a result that is not an image reference.
    /// Default: `capstan.invalid/{package}/bundle:v{version}`, a placeholder that never resolves.
    #[arg(long)]
    image_template: Option<String>,
    /// Migration level of rendered bundles, as opm's --migrate-level (catalog blobs are passed
    /// through unchanged).
    #[arg(long, value_enum, default_value_t = MigrateLevel::None)]
    migrate_level: MigrateLevel,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Why a reference failed: the message and the exit code (1 invalid content, 2 unreadable).
type Failure = (String, u8);

/// Runs `capstan catalog render` (exit codes in the module documentation).
pub fn run(args: RenderArgs) -> ExitCode {
    match render_all(&args) {
        Ok(cfg) => {
            // opm's writer: grouped by package, bundles sorted by name, opm's key order.
            let format = match args.output {
                FbcOutput::Json => Format::Json,
                FbcOutput::Yaml => Format::Yaml,
            };
            super::write_stdout_bytes(to_stream(&cfg, format).as_bytes());
            ExitCode::SUCCESS
        }
        Err((message, code)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

/// Checks the flags, then renders every reference in order into one configuration; the first
/// failure stops it.
fn render_all(args: &RenderArgs) -> Result<DeclarativeConfig, Failure> {
    for image in &args.images {
        check_image_flag("--image", image, image)?;
    }
    if let Some(t) = &args.image_template {
        // Checked once up front, so that a wrong template fails before anything is read.
        capstan::catalog::placeholder::expand_image_template(t, "package", "package.v1.0.0", "1.0.0")
            .map_err(|e| (format!("--image-template {t:?}: {e}"), 2))?;
    }
    let mut targets = Vec::with_capacity(args.refs.len());
    for r in &args.refs {
        targets.push(super::image::classify(r).map_err(|e| (format!("render {r}: {e}"), 2))?);
    }
    let bundle_dirs = targets.iter().filter(|t| matches!(t, Target::Path(p) if is_bundle_dir(p))).count();
    if !args.images.is_empty() && args.images.len() != bundle_dirs {
        return Err((
            format!(
                "{} for {}; give one per bundle directory, in order",
                super::count(args.images.len(), "--image value", "--image values"),
                super::count(bundle_dirs, "bundle directory", "bundle directories")
            ),
            2,
        ));
    }
    let migration = match args.migrate_level {
        MigrateLevel::None => Migration::None,
        MigrateLevel::BundleObjectToCsvMetadata => Migration::CsvMetadata,
    };
    let mut cfg = DeclarativeConfig::default();
    let mut images = args.images.iter();
    let mut catalogs: Vec<&str> = Vec::new();
    for (r, target) in args.refs.iter().zip(targets) {
        let result = match target {
            Target::Path(path) if is_bundle_dir(path) => {
                render_dir(path, images.next().cloned(), args, migration, &mut cfg)
            }
            Target::Path(path) => {
                catalogs.push(r);
                parse::load_path(path).map_err(|e| (e.to_string(), 2)).map(|c| parse::merge(&mut cfg, c))
            }
            Target::Image(_) => render_image(r, args, migration, &mut cfg).map(|catalog| {
                if catalog {
                    catalogs.push(r);
                }
            }),
        };
        result.map_err(|(message, code)| (format!("render {r}: {message}"), code))?;
    }
    if !catalogs.is_empty() {
        check_catalog(&args.refs, &catalogs, &cfg)?;
    }
    Ok(cfg)
}

/// When a catalog (directory, file or image) is among the references, the output is a catalog,
/// and it passes the same validation as `capstan catalog validate`
/// ([`capstan::catalog::validate::validate`]) on the whole output: an invalid one is invalid
/// content (exit 1), with every error, and nothing is rendered. (Bundles alone render to
/// `olm.bundle` blobs without packages or channels, which are checked as bundles only.)
/// Placeholder-image warnings go to stderr, as `catalog validate` prints them.
fn check_catalog(refs: &[String], catalogs: &[&str], cfg: &DeclarativeConfig) -> Result<(), Failure> {
    if let Err(errors) = capstan::catalog::validate::validate(cfg) {
        let what = if refs.len() == 1 {
            format!("catalog {} is invalid", refs[0])
        } else {
            format!("the catalog rendered from {} is invalid", refs.join(", "))
        };
        return Err((
            if refs.len() == catalogs.len() && catalogs.len() == 1 {
                format!(
                    "{what}; nothing was rendered (`capstan catalog validate {}` lists the same errors): {errors}",
                    catalogs[0]
                )
            } else {
                // The errors may come from the combination (a bundle the catalog already has, or
                // a package two inputs both define), not from one input alone.
                format!(
                    "{what}; nothing was rendered (the errors are of the combined output: each input may be valid on its own): {errors}"
                )
            },
            1,
        ));
    }
    for w in capstan::catalog::placeholder::placeholder_warnings(cfg) {
        eprintln!("warning: {w}");
    }
    Ok(())
}

/// An image reference given by `flag` (`--image`, or `--image-template` once filled in as
/// `image`) must be a pull spec the catalog accepts ([`capstan::catalog::validate::check_reference`]):
/// a bad flag (exit 2) naming the flag.
pub(crate) fn check_image_flag(flag: &str, given: &str, image: &str) -> Result<(), Failure> {
    capstan::catalog::validate::check_reference(image).map_err(|e| {
        let e = e.to_string();
        let filled = if given == image { String::new() } else { format!(" (gives {image:?})") };
        (format!("{flag} {given:?}{filled} is not an image reference: {e}; write a pull spec such as quay.io/org/bundle:v1.0.0 or quay.io/org/bundle@sha256:<digest>"), 2)
    })
}

/// opm's `isBundle`: a directory with `manifests/` and `metadata/` sub-directories.
fn is_bundle_dir(path: &Path) -> bool {
    path.join("manifests").is_dir() && path.join("metadata").is_dir()
}

fn render_dir(
    dir: &Path,
    image: Option<String>,
    args: &RenderArgs,
    migration: Migration,
    cfg: &mut DeclarativeConfig,
) -> Result<(), Failure> {
    let bundle = Bundle::load(dir).map_err(|e| (e.to_string(), bundle_load_code(&e)))?;
    let image = match image {
        Some(image) => image,
        None => {
            let info = render_info(&bundle);
            match &args.image_template {
                Some(t) => {
                    let image = capstan::catalog::placeholder::expand_image_template(
                        t,
                        &info.package,
                        &info.name,
                        &info.version,
                    )
                    .map_err(|e| (format!("--image-template {t:?}: {e}"), 2))?;
                    check_image_flag("--image-template", t, &image)?;
                    image
                }
                None => placeholder_image(&info.package, &info.version),
            }
        }
    };
    cfg.bundles.push(render_checked(&bundle, &dir.display().to_string(), &image, migration)?);
    Ok(())
}

/// [`render_validated`] for the CLI: warnings go to stderr (naming the bundle), errors become
/// exit code 1. `shown` is the bundle as the user named it (a pulled image is read from a scratch
/// directory, which the message does not show).
pub(crate) fn render_checked(
    bundle: &Bundle,
    shown: &str,
    image: &str,
    migration: Migration,
) -> Result<capstan::catalog::model::Bundle, Failure> {
    let (blob, warnings) = render_validated(bundle, image, migration).map_err(|e| match e {
        RenderError::Invalid { bundle, errors, .. } => {
            (RenderError::Invalid { bundle, dir: shown.to_string(), errors }.to_string(), 1)
        }
        e => (e.to_string(), 1),
    })?;
    for w in warnings {
        eprintln!("bundle {}: {w}", bundle.name());
    }
    Ok(blob)
}

/// Pulls `reference`; a bundle image is rendered with `reference` as its image (as opm does),
/// any other image is loaded as a catalog image. Returns whether it was a catalog.
fn render_image(
    reference: &str,
    args: &RenderArgs,
    migration: Migration,
    cfg: &mut DeclarativeConfig,
) -> Result<bool, Failure> {
    let parsed = capstan::oci::parse_reference(reference).map_err(|e| (e.to_string(), 2))?;
    let config = args.registry.client_config().map_err(|e| (e.to_string(), 2))?;
    let scratch = capstan::oci::cache::scratch_dir("capstan-render").map_err(|e| (e.to_string(), 2))?;
    let scratch = scratch.path();
    let pulled =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| (e.to_string(), 2)).map(|rt| {
            let registry = capstan::oci::Registry::new(config.clone());
            rt.block_on(pull_bundle(&registry, &parsed, scratch))
        });
    // The scratch directory (a `tempfile::TempDir`) is removed when this function returns.
    match pulled {
        Err(f) => Err(f),
        Ok(Ok(_)) => Bundle::load(scratch)
            .map_err(|e| (e.to_string(), 1))
            .and_then(|b| render_checked(&b, reference, reference, migration))
            .map(|blob| {
                cfg.bundles.push(blob);
                false
            }),
        Ok(Err(BundleImageError::NotABundle { .. })) => load_catalog_image_blocking(reference, config)
            .map(|loaded| parse::merge(cfg, loaded.config))
            .map(|()| true)
            .map_err(|e| (e.to_string(), 2)),
        Ok(Err(e)) => Err((e.to_string(), 2)),
    }
}
