//! `capstan bundle …`: work with registry+v1 bundle directories.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use capstan::bundle::{Bundle, Finding, Severity, validate};

/// Arguments of `capstan bundle`.
#[derive(Args, Debug)]
pub struct BundleArgs {
    #[command(subcommand)]
    command: BundleCommand,
}

#[derive(Subcommand, Debug)]
enum BundleCommand {
    /// Check a bundle directory. Exit 0 when valid (warnings allowed), 1 on errors, 2 when the
    /// directory cannot be read as a bundle.
    Validate(ValidateArgs),
    #[command(flatten)]
    Image(super::image::BundleImageCommand),
}

/// Output format of reports.
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum Output {
    /// One finding per line.
    #[default]
    Text,
    /// A JSON document.
    Json,
    /// A YAML document.
    Yaml,
}

#[derive(Args, Debug)]
struct ValidateArgs {
    /// The bundle directory (holding manifests/ and metadata/).
    dir: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

/// Machine-readable validation report.
#[derive(Serialize)]
struct Report<'a> {
    bundle: String,
    valid: bool,
    errors: usize,
    warnings: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    findings: &'a [Finding],
}

/// Runs `capstan bundle …`.
pub fn run(args: BundleArgs) -> ExitCode {
    match args.command {
        BundleCommand::Validate(a) => validate_cmd(a),
        BundleCommand::Image(c) => super::image::run_bundle(c),
    }
}

fn validate_cmd(args: ValidateArgs) -> ExitCode {
    let dir = args.dir.display().to_string();
    let bundle = match Bundle::load(&args.dir) {
        Ok(b) => b,
        Err(e) => {
            let report =
                Report { bundle: dir, valid: false, errors: 1, warnings: 0, error: Some(e.to_string()), findings: &[] };
            match args.output {
                Output::Text => eprintln!("error: {e}"),
                _ => print_report(&report, args.output),
            }
            return ExitCode::from(2);
        }
    };
    let findings = validate(&bundle);
    let errors = findings.iter().filter(|f| f.severity == Severity::Error).count();
    let warnings = findings.len() - errors;
    match args.output {
        Output::Text => {
            for f in &findings {
                outln!("{f}");
            }
            let name = bundle.name();
            let warned = super::count(warnings, "warning", "warnings");
            if errors == 0 {
                outln!("bundle {name} ({dir}) is valid ({warned})");
            } else {
                outln!("bundle {name} ({dir}) is invalid: {}, {warned}", super::count(errors, "error", "errors"));
            }
        }
        out => print_report(
            &Report { bundle: dir, valid: errors == 0, errors, warnings, error: None, findings: &findings },
            out,
        ),
    }
    if errors == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn print_report(report: &Report<'_>, output: Output) {
    let text = match output {
        Output::Yaml => serde_norway::to_string(report).map_err(|e| e.to_string()),
        _ => serde_json::to_string_pretty(report).map_err(|e| e.to_string()),
    };
    match text {
        Ok(t) => outln!("{}", t.trim_end()),
        Err(e) => eprintln!("error: cannot write the report: {e}"),
    }
}
