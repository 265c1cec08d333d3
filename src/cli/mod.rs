//! The `capstan` binary's commands.

/// `print!` for command output, through [`write_stdout`]: a closed pipe ends the process quietly.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::write_stdout(format_args!($($arg)*)) };
}

/// `println!` for command output, through [`write_stdout`]: a closed pipe ends the process quietly.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

mod approve;
mod bundle;
mod catalog;
mod controller;
mod crds;
mod discover;
mod image;
mod render;
mod resolve;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

/// Writes command output to stdout and flushes it. When stdout is a pipe whose reader has gone
/// (`capstan catalog render DIR | head -1`), the process exits 0 at once without a message, as
/// Unix tools do on SIGPIPE; any other write error (a full disk) is reported and exits 1.
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        stdout_failed(&e);
    }
}

/// [`write_stdout`] for bytes.
pub(crate) fn write_stdout_bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        stdout_failed(&e);
    }
}

fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("error: cannot write to stdout: {e}");
    std::process::exit(1);
}

/// `n` followed by `one` when `n` is 1, else by `many`: `count(1, "error", "errors")` is
/// `"1 error"`, `count(0, "error", "errors")` is `"0 errors"`.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// capstan: an Operator Lifecycle Manager for Kubernetes.
#[derive(Parser, Debug)]
#[command(name = "capstan", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the version.
    Version,
    /// Work with registry+v1 bundle directories.
    Bundle(bundle::BundleArgs),
    /// What-if resolution of Subscriptions against catalogs; nothing is installed.
    Resolve(resolve::ResolveArgs),
    /// Work with File-Based Catalogs: validate, add, render, push, pull.
    Catalog(catalog::CatalogArgs),
    /// Print the operators.coreos.com CRDs (or write them with --dir).
    Crds(crds::CrdsArgs),
    /// Run the controllers: CatalogSource, Subscription, InstallPlan, ClusterServiceVersion.
    Controller(controller::ControllerArgs),
    /// Print an InstallPlan's steps and approve it (by plan or Subscription name).
    Approve(approve::ApproveArgs),
    /// Find packages by a word in their name, display name, keywords, description or provider.
    Search(discover::SearchArgs),
    /// Show a package: channels, versions, install modes, dependencies.
    Show(discover::ShowArgs),
}

/// Parses the command line and runs the command; the exit code follows each command's contract.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            outln!("capstan {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Bundle(args) => bundle::run(args),
        Command::Resolve(args) => resolve::run(args),
        Command::Catalog(args) => catalog::run(args),
        Command::Crds(args) => crds::run(args),
        Command::Controller(args) => controller::run(args),
        Command::Approve(args) => approve::run(args),
        Command::Search(args) => discover::run_search(args),
        Command::Show(args) => discover::run_show(args),
    }
}
