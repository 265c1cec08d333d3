//! `capstan catalog …`: validate, add, render, push, pull.
//!
//! Exit codes of `validate` and `add`: 0 success, 1 the content is invalid (every error listed),
//! 2 the input cannot be read (missing or unreadable path, a directory that is not a bundle,
//! unparseable catalog file, unreachable registry).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use capstan::bundle::render::{Migration, render_info};
use capstan::catalog::add::{AddError, AddInput, AddOptions, UpdateMode, add_to_dir};
use capstan::catalog::image::load_catalog_image_blocking;
use capstan::catalog::validate::{CatalogCounts, ValidationError, ValidationErrors, validate, validate_path_report};

use super::image::{CatalogImageCommand, RegistryArgs};
use super::render::{MigrateLevel, RenderArgs};

/// Arguments of `capstan catalog`.
#[derive(Args, Debug)]
pub struct CatalogArgs {
    #[command(subcommand)]
    command: CatalogCommand,
}

#[derive(Subcommand, Debug)]
enum CatalogCommand {
    /// Validate a File-Based Catalog as `opm validate` does, listing every error.
    Validate(ValidateArgs),
    /// Render a bundle and insert it into a catalog directory, then validate and write it.
    Add(AddArgs),
    /// Render bundle directories into `olm.bundle` blobs, as `opm render` does.
    Render(RenderArgs),
    /// Serve catalogs' content read-only over HTTP as catalogd does (/catalogs/NS/NAME/api/v1/all, .../metas).
    Serve(super::discover::ServeArgs),
    #[command(flatten)]
    Image(CatalogImageCommand),
}

/// Output format of `validate` and `add`.
#[derive(Clone, Copy, Debug, Default, ValueEnum, PartialEq, Eq)]
pub enum Output {
    /// Human-readable text.
    #[default]
    Text,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Arguments of `capstan catalog validate`.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// A catalog directory or file, or a catalog image reference.
    catalog: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Arguments of `capstan catalog add`.
#[derive(Args, Debug)]
pub struct AddArgs {
    /// The catalog directory (created if missing).
    catalog_dir: PathBuf,
    /// A bundle directory (manifests/ and metadata/) or a bundle image reference.
    bundle: String,
    /// Channel(s) to add the bundle to instead of its annotated channels (repeatable or
    /// comma-separated).
    #[arg(long = "channel", value_delimiter = ',')]
    channels: Vec<String>,
    /// How to build the upgrade edges: `replaces` follows the CSV's replaces/skips/skipRange;
    /// `semver` orders the channel by version (community-operators `updateGraph`).
    #[arg(long, default_value = "replaces", value_parser = parse_mode)]
    mode: UpdateMode,
    /// Bundle image reference for the blob of a bundle directory. Default: a placeholder under
    /// `capstan.invalid`, which never resolves; a bundle image reference is used as given.
    #[arg(long)]
    image: Option<String>,
    /// Migration level of the rendered blob, as `opm render --migrate-level`.
    #[arg(long, value_enum, default_value_t = MigrateLevel::None)]
    migrate_level: MigrateLevel,
    /// Replace a bundle of the same name that is already in the catalog.
    #[arg(long)]
    force: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    registry: RegistryArgs,
}

fn parse_mode(s: &str) -> Result<UpdateMode, capstan::catalog::add::UnknownUpdateMode> {
    s.parse()
}

/// Runs `capstan catalog …`.
pub fn run(args: CatalogArgs) -> ExitCode {
    match args.command {
        CatalogCommand::Validate(a) => run_validate(a),
        CatalogCommand::Add(a) => run_add(a),
        CatalogCommand::Render(a) => super::render::run(a),
        CatalogCommand::Serve(a) => super::discover::run_serve(a),
        CatalogCommand::Image(cmd) => super::image::run_catalog(cmd),
    }
}

fn emit<T: Serialize>(value: &T, output: Output) {
    let text = match output {
        Output::Json => serde_json::to_string_pretty(value).map_err(|e| e.to_string()),
        Output::Yaml => serde_norway::to_string(value).map_err(|e| e.to_string()),
        Output::Text => return,
    };
    match text {
        Ok(t) => outln!("{}", t.trim_end()),
        Err(e) => eprintln!("error: cannot encode output: {e}"),
    }
}

/// The result of `catalog validate` in `-o json|yaml`.
#[derive(Serialize)]
struct ValidateReport<'a> {
    catalog: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
    valid: bool,
    packages: usize,
    channels: usize,
    bundles: usize,
    errors: &'a [ValidationError],
    /// Findings that leave the catalog valid (bundles with placeholder images).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

/// Blob counts, the image digest (for a reference), the validation result and the warnings.
type Validated = (CatalogCounts, Option<String>, Result<(), ValidationErrors>, Vec<String>);

/// Loads and validates a catalog path (streaming, [`validate_path_report`]) or image.
fn load_and_validate(arg: &str, registry: &RegistryArgs) -> Result<Validated, String> {
    if let super::image::Target::Image(_) = super::image::classify(arg)? {
        let config = registry.client_config().map_err(|e| e.to_string())?;
        let loaded = load_catalog_image_blocking(arg, config).map_err(|e| e.to_string())?;
        let cfg = &loaded.config;
        let counts = CatalogCounts {
            packages: cfg.packages.len(),
            channels: cfg.channels.len(),
            bundles: cfg.bundles.len(),
            deprecations: cfg.deprecations.len(),
            others: cfg.others.len(),
        };
        let warnings = capstan::catalog::placeholder::placeholder_warnings(cfg);
        return Ok((counts, Some(loaded.digest.clone()), validate(cfg), warnings));
    }
    validate_path_report(Path::new(arg)).map(|r| (r.counts, None, r.result, r.warnings)).map_err(|e| e.to_string())
}

fn run_validate(a: ValidateArgs) -> ExitCode {
    let (counts, digest, result, warnings) = match load_and_validate(&a.catalog, &a.registry) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let errors = result.as_ref().err().map_or(&[][..], |e| e.errors.as_slice());
    let report = ValidateReport {
        catalog: &a.catalog,
        digest,
        valid: errors.is_empty(),
        packages: counts.packages,
        channels: counts.channels,
        bundles: counts.bundles,
        errors,
        warnings: &warnings,
    };
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    match (a.output, &result) {
        (Output::Text, Ok(())) => outln!(
            "{}: valid ({}, {}, {})",
            a.catalog,
            super::count(report.packages, "package", "packages"),
            super::count(report.channels, "channel", "channels"),
            super::count(report.bundles, "bundle", "bundles")
        ),
        (Output::Text, Err(e)) => eprintln!("{}: {e}", a.catalog),
        (out, _) => emit(&report, out),
    }
    if result.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// Renders the bundle argument (directory or image) into the inputs of `add`.
fn render_input(a: &AddArgs, scratch: &Path) -> Result<AddInput, (String, u8)> {
    let migration = match a.migrate_level {
        MigrateLevel::None => Migration::None,
        MigrateLevel::BundleObjectToCsvMetadata => Migration::CsvMetadata,
    };
    if let Some(image) = &a.image {
        super::render::check_image_flag("--image", image, image)?;
    }
    let target = super::image::classify(&a.bundle)
        .map_err(|e| (format!("{e} (expected a bundle directory or a bundle image)"), 2))?;
    let (dir, image): (PathBuf, Option<String>) = if Path::new(&a.bundle).is_dir() {
        (PathBuf::from(&a.bundle), a.image.clone())
    } else if let super::image::Target::Image(_) = target {
        let reference = capstan::oci::parse_reference(&a.bundle).map_err(|e| (e.to_string(), 2))?;
        let config = a.registry.client_config().map_err(|e| (e.to_string(), 2))?;
        let registry = capstan::oci::Registry::new(config);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| (e.to_string(), 2))?;
        rt.block_on(capstan::bundle::image::pull_bundle(&registry, &reference, scratch))
            .map_err(|e| (e.to_string(), 2))?;
        (scratch.to_path_buf(), Some(a.image.clone().unwrap_or_else(|| a.bundle.clone())))
    } else {
        return Err((
            format!(
                "{} is not a bundle directory (it has no manifests/ and metadata/), and not an image reference",
                a.bundle
            ),
            2,
        ));
    };
    let bundle =
        capstan::bundle::Bundle::load(&dir).map_err(|e| super::load::bundle_load_failure(&a.bundle, &dir, &e))?;
    let info = render_info(&bundle);
    let image = image.unwrap_or_else(|| {
        let placeholder = capstan::catalog::placeholder::placeholder_image(&info.package, &info.version);
        eprintln!("warning: no --image given; the bundle blob gets the placeholder image {placeholder}");
        placeholder
    });
    let blob = super::render::render_checked(&bundle, &a.bundle, &image, migration)?;
    Ok(AddInput {
        bundle: blob,
        replaces: info.replaces,
        skips: info.skips,
        skip_range: info.skip_range,
        channels: info.channels,
        default_channel: info.default_channel,
    })
}

fn run_add(a: AddArgs) -> ExitCode {
    let scratch = match capstan::oci::cache::scratch_dir("capstan-add") {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let result = render_input(&a, scratch.path());
    drop(scratch);
    let input = match result {
        Ok(i) => i,
        Err((e, code)) => {
            eprintln!("error: {e}");
            return ExitCode::from(code);
        }
    };
    let opts =
        AddOptions { mode: a.mode, channels: (!a.channels.is_empty()).then(|| a.channels.clone()), force: a.force };
    match add_to_dir(&a.catalog_dir, input, &opts) {
        Ok(report) => {
            match a.output {
                Output::Text => {
                    outln!(
                        "added {} ({}) to package {}{} in {}",
                        report.bundle,
                        report.version,
                        report.package,
                        if report.created_package { " (new package)" } else { "" },
                        a.catalog_dir.display()
                    );
                    for c in &report.channels {
                        outln!(
                            "  channel {}{}: replaces {}{}; head {}",
                            c.channel,
                            if c.created { " (new)" } else { "" },
                            c.replaces.as_deref().unwrap_or("nothing"),
                            c.replaced_by.as_deref().map(|r| format!(", now replaced by {r}")).unwrap_or_default(),
                            c.head
                        );
                    }
                    outln!("  default channel: {}", report.default_channel);
                    for n in &report.notes {
                        eprintln!("note: {n}");
                    }
                }
                out => emit(&report, out),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(match e {
                AddError::Catalog(_) => 2,
                _ => 1,
            })
        }
    }
}
