//! `capstan crds`: the CustomResourceDefinitions of the `operators.coreos.com` kinds.
//!
//! ```text
//! capstan crds                 # all five CRDs as one YAML stream on stdout
//! capstan crds --dir DIR       # one file per CRD, DIR/operators.coreos.com_<plural>.yaml
//! ```
//! `manifests/crds/` is generated with `cargo run -- crds --dir manifests/crds`.
//! Exit codes: 0 on success, 1 when a file cannot be written (message on stderr names the path).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// Arguments of `capstan crds`.
#[derive(Args, Debug)]
pub struct CrdsArgs {
    /// Write one file per CRD into this directory (created if missing) instead of printing.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Runs the command; see the module docs for exit codes.
pub fn run(args: CrdsArgs) -> ExitCode {
    let result = match &args.dir {
        Some(dir) => capstan::api::write_crd_dir(dir).map(|paths| {
            for p in paths {
                eprintln!("wrote {}", p.display());
            }
        }),
        // A closed pipe (`capstan crds | head`) ends quietly with exit 0.
        None => capstan::api::crds_yaml_stream().map(|yaml| super::write_stdout_bytes(yaml.as_bytes())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
