//! `capstan catalog render`: bundle directories → `olm.bundle` blobs, as `opm render` prints them.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use capstan::bundle::Bundle;
use capstan::catalog::model::DeclarativeConfig;
use capstan::catalog::parse::{Format, to_stream};
use capstan::catalog::render::{Migration, placeholder_image, render_bundle_with, render_info};

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
    /// Bundle directories (each holding manifests/ and metadata/).
    #[arg(required = true)]
    refs: Vec<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = FbcOutput::Json)]
    output: FbcOutput,
    /// Bundle image reference for the blob; with several directories give it once per directory,
    /// in the same order.
    #[arg(long = "image")]
    images: Vec<String>,
    /// Image reference template for directories without --image: `{package}`, `{name}` and
    /// `{version}` (or opm's `{{.Package}}`, `{{.Name}}`, `{{.Version}}`) are replaced.
    /// Default: `capstan.invalid/{package}/bundle:v{version}`, a placeholder that never resolves.
    #[arg(long)]
    image_template: Option<String>,
    /// Migration level, as opm's --migrate-level.
    #[arg(long, value_enum, default_value_t = MigrateLevel::None)]
    migrate_level: MigrateLevel,
}

// Wired into `capstan catalog` (src/cli/catalog.rs, owned by the catalog helper) once that file is on main.
#[allow(dead_code)]
/// Runs `capstan catalog render`. Exit 0 on success, 1 when any reference cannot be rendered
/// (nothing is printed then).
pub fn run(args: RenderArgs) -> ExitCode {
    if !args.images.is_empty() && args.images.len() != args.refs.len() {
        eprintln!(
            "error: {} --image values for {} bundle directories; give one per directory, in order",
            args.images.len(),
            args.refs.len()
        );
        return ExitCode::from(2);
    }
    let migration = match args.migrate_level {
        MigrateLevel::None => Migration::None,
        MigrateLevel::BundleObjectToCsvMetadata => Migration::CsvMetadata,
    };
    let mut cfg = DeclarativeConfig::default();
    for (i, dir) in args.refs.iter().enumerate() {
        if !dir.is_dir() {
            eprintln!(
                "error: {}: not a directory; capstan catalog render takes bundle directories (bundle images come with the registry support)",
                dir.display()
            );
            return ExitCode::from(1);
        }
        let bundle = match Bundle::load(dir) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: render {}: {e}", dir.display());
                return ExitCode::from(1);
            }
        };
        let image = match args.images.get(i) {
            Some(img) => img.clone(),
            None => {
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
            }
        };
        match render_bundle_with(&bundle, &image, migration) {
            Ok(b) => cfg.bundles.push(b),
            Err(e) => {
                eprintln!("error: render {}: {e}", dir.display());
                return ExitCode::from(1);
            }
        }
    }
    // opm's writer: grouped by package, bundles sorted by name, opm's key order.
    let format = match args.output {
        FbcOutput::Json => Format::Json,
        FbcOutput::Yaml => Format::Yaml,
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(to_stream(&cfg, format).as_bytes()).and_then(|()| out.flush()) {
        eprintln!("error: writing output: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
