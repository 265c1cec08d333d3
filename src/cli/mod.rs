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
mod load;
mod render;
mod resolve;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

/// Writes command output to stdout and flushes it. When stdout is a pipe whose reader has gone
/// (`capstan catalog render DIR | head -1`), the rest of the output is dropped without a message
/// and the command goes on to its own exit code: `capstan bundle validate BAD | head -1` still
/// exits 1, a successful command 0 (a closed pipe is not a failure of the command, as for Unix
/// tools that end on SIGPIPE; unlike them, it never turns a failure into a success). Any other
/// write error (a full disk) is reported once on stderr, the rest of the output is dropped, and
/// a command that would have succeeded exits 1 ([`exit_code`]).
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    if stdout_state() != StdoutState::Open {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        stdout_failed(&e);
    }
}

/// [`write_stdout`] for bytes.
pub(crate) fn write_stdout_bytes(bytes: &[u8]) {
    if stdout_state() != StdoutState::Open {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        stdout_failed(&e);
    }
}

/// What became of stdout: still open, closed by its reader, or failed otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StdoutState {
    Open = 0,
    Closed = 1,
    Failed = 2,
}

static STDOUT_STATE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(StdoutState::Open as u8);

fn stdout_state() -> StdoutState {
    match STDOUT_STATE.load(std::sync::atomic::Ordering::Relaxed) {
        0 => StdoutState::Open,
        1 => StdoutState::Closed,
        _ => StdoutState::Failed,
    }
}

fn stdout_failed(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        STDOUT_STATE.store(StdoutState::Closed as u8, std::sync::atomic::Ordering::Relaxed);
        return;
    }
    STDOUT_STATE.store(StdoutState::Failed as u8, std::sync::atomic::Ordering::Relaxed);
    eprintln!("error: cannot write to stdout: {e}; the rest of the output is lost");
}

/// The process exit code for a command that returned `code`: `code` itself, except that a
/// command that succeeded while its output could not be written (other than to a closed pipe,
/// see [`write_stdout`]) exits 1.
fn exit_code(code: ExitCode) -> ExitCode {
    if code == ExitCode::SUCCESS && stdout_state() == StdoutState::Failed { ExitCode::from(1) } else { code }
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
    ///
    /// Exit 0 when every Subscription resolves, 1 when some do not (each with its reason), 2 on
    /// invalid input.
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
    let code = match cli.command {
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
    };
    exit_code(code)
}
