//! `capstan catalog render`: bundle directories and images, catalog directories and images →
//! one FBC stream, as `opm render` prints it (operator-registry `alpha/action/render.go`).
//!
//! Exit codes: 0 success; 1 a reference was read but cannot be rendered (invalid bundle or
//! catalog); 2 a reference cannot be read (missing or unreadable path, unreachable registry, bad
//! flags).
//! Nothing is printed unless every reference renders.

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use capstan::bundle::{Bundle, BundleError};
use capstan::bundle::image::{BundleImageError, pull_bundle};
use capstan::catalog::image::{is_image_reference, load_catalog_image_blocking};
use capstan::catalog::model::DeclarativeConfig;
use capstan::catalog::parse::{self, Format, to_stream};
use capstan::bundle::render::{Migration, RenderError, render_info, render_validated};
use capstan::catalog::placeholder::placeholder_image;

use super::image::RegistryArgs;

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
    /// Image reference for a bundle directory's blob; repeat it once per bundle directory, in
    /// the order the directories are given. A bundle image always gets its own reference.
    #[arg(long = "image")]
    images: Vec<String>,
    /// Image reference template for bundle directories without --image: `{package}`, `{name}`
    /// and `{version}` (or opm's `{{.Package}}`, `{{.Name}}`, `{{.Version}}`) are replaced.
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
    let bundle_dirs = args.refs.iter().filter(|r| is_bundle_dir(Path::new(r))).count();
    if !args.images.is_empty() && args.images.len() != bundle_dirs {
        eprintln!(
            "error: {} for {}; give one per bundle directory, in order",
            super::count(args.images.len(), "--image value", "--image values"),
            super::count(bundle_dirs, "bundle directory", "bundle directories")
        );
        return ExitCode::from(2);
    }
    let migration = match args.migrate_level {
        MigrateLevel::None => Migration::None,
        MigrateLevel::BundleObjectToCsvMetadata => Migration::CsvMetadata,
    };
    let mut cfg = DeclarativeConfig::default();
    let mut images = args.images.iter();
    for r in &args.refs {
        let path = Path::new(r);
        let result = if is_bundle_dir(path) {
            render_dir(path, images.next().cloned(), &args, migration, &mut cfg)
        } else if path.exists() {
            parse::load_path(path).map(|c| parse::merge(&mut cfg, c)).map_err(|e| {
                let code = if matches!(e, capstan::catalog::error::CatalogError::Io { .. }) { 2 } else { 1 };
                (e.to_string(), code)
            })
        } else if is_image_reference(r) {
            render_image(r, &args, migration, &mut cfg)
        } else {
            Err((format!("{r}: no such file or directory, and not an image reference"), 2))
        };
        if let Err((message, code)) = result {
            eprintln!("error: render {r}: {message}");
            return ExitCode::from(code);
        }
    }
    // opm's writer: grouped by package, bundles sorted by name, opm's key order.
    let format = match args.output {
        FbcOutput::Json => Format::Json,
        FbcOutput::Yaml => Format::Yaml,
    };
    super::write_stdout_bytes(to_stream(&cfg, format).as_bytes());
    ExitCode::SUCCESS
}

/// Exit code of a bundle directory that does not load: 2 when it cannot be read (an I/O error, no
/// `manifests/` or `metadata/`), 1 when it was read and its content is wrong.
pub(crate) fn bundle_load_code(e: &BundleError) -> u8 {
    match e {
        BundleError::Io { .. } | BundleError::MissingDirectory { .. } => 2,
        _ => 1,
    }
}

/// The message and exit code of a bundle directory `dir` that does not load, naming the bundle
/// once as the user gave it (`shown`; a pulled image is read from a scratch directory).
pub(crate) fn bundle_load_failure(shown: &str, dir: &Path, e: &BundleError) -> (String, u8) {
    let message = e.to_string();
    let message = if message.starts_with(&dir.display().to_string()) { message } else { format!("bundle {shown}: {message}") };
    (message, bundle_load_code(e))
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
    let image = image.unwrap_or_else(|| {
        let info = render_info(&bundle);
        match &args.image_template {
            Some(t) => t
                .replace("{{.Package}}", &info.package)
                .replace("{{.Name}}", &info.name)
                .replace("{{.Version}}", &info.version)
                .replace("{package}", &info.package)
                .replace("{name}", &info.name)
                .replace("{version}", &info.version),
            None => placeholder_image(&info.package, &info.version),
        }
    });
    cfg.bundles.push(render_checked(&bundle, &dir.display().to_string(), &image, migration)?);
    Ok(())
}

/// [`render_validated`] for the CLI: warnings go to stderr (naming the bundle), errors become
/// exit code 1. `shown` is the bundle as the user named it (a pulled image is read from a scratch
/// directory, which the message does not show).
pub(crate) fn render_checked(bundle: &Bundle, shown: &str, image: &str, migration: Migration) -> Result<capstan::catalog::model::Bundle, Failure> {
    let (blob, warnings) = render_validated(bundle, image, migration).map_err(|e| match e {
        RenderError::Invalid { bundle, errors, .. } => (RenderError::Invalid { bundle, dir: shown.to_string(), errors }.to_string(), 1),
        e => (e.to_string(), 1),
    })?;
    for w in warnings {
        eprintln!("bundle {}: {w}", bundle.name());
    }
    Ok(blob)
}

/// Pulls `reference`; a bundle image is rendered with `reference` as its image (as opm does),
/// any other image is loaded as a catalog image.
fn render_image(reference: &str, args: &RenderArgs, migration: Migration, cfg: &mut DeclarativeConfig) -> Result<(), Failure> {
    let parsed = capstan::oci::parse_reference(reference).map_err(|e| (e.to_string(), 2))?;
    let config = args.registry.client_config().map_err(|e| (e.to_string(), 2))?;
    let scratch = capstan::oci::cache::scratch_dir("capstan-render").map_err(|e| (e.to_string(), 2))?;
    let scratch = scratch.path();
    let pulled = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| (e.to_string(), 2))
        .map(|rt| {
            let registry = capstan::oci::Registry::new(config.clone());
            rt.block_on(pull_bundle(&registry, &parsed, scratch))
        });
    // The scratch directory (a `tempfile::TempDir`) is removed when this function returns.
    match pulled {
        Err(f) => Err(f),
        Ok(Ok(_)) => Bundle::load(scratch)
            .map_err(|e| (e.to_string(), 1))
            .and_then(|b| render_checked(&b, reference, reference, migration))
            .map(|blob| cfg.bundles.push(blob)),
        Ok(Err(BundleImageError::NotABundle { .. })) => load_catalog_image_blocking(reference, config)
            .map(|loaded| parse::merge(cfg, loaded.config))
            .map_err(|e| (e.to_string(), 2)),
        Ok(Err(e)) => Err((e.to_string(), 2)),
    }
}
