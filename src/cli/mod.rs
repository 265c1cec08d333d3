//! The `capstan` binary's commands.

mod approve;
mod bundle;
mod catalog;
mod controller;
mod crds;
mod image;
mod render;
mod resolve;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

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
}

/// Parses the command line and runs the command; the exit code follows each command's contract.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("capstan {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Bundle(args) => bundle::run(args),
        Command::Resolve(args) => resolve::run(args),
        Command::Catalog(args) => catalog::run(args),
        Command::Crds(args) => crds::run(args),
        Command::Controller(args) => controller::run(args),
        Command::Approve(args) => approve::run(args),
    }
}
