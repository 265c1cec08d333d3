//! Image commands: `capstan bundle push|pull` and `capstan catalog push|pull`, plus the shared
//! registry flags and the `DIR|REF` catalog loader used by `catalog validate`.
//!
//! Exit codes: 0 on success, 1 when the content is rejected (invalid catalog, not a bundle),
//! 2 when the registry or the filesystem fails (unreachable, unauthorized, not found, I/O).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use capstan::bundle::image::{BundleImageError, pull_bundle, push_bundle};
use capstan::catalog::image::{CatalogImageError, build_catalog_image_reporting, pull_catalog};
use capstan::oci::{ClientConfig, OciError, Registry, parse_reference};

/// Flags every registry command takes.
#[derive(Args, Debug, Clone, Default)]
pub struct RegistryArgs {
    /// Use plain HTTP instead of TLS for every registry (loopback registries always use plain HTTP).
    #[arg(long)]
    pub plain_http: bool,
    /// A registry (host or host:port) to reach over plain HTTP. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure_registries: Vec<String>,
    /// Registry mirrors: a containers-registries.conf v2 file (and its PATH.d/*.conf drop-ins),
    /// as podman and CRI-O read it; every pull tries the mirrors of the image's registry first.
    /// Default: $CAPSTAN_REGISTRIES_CONF, else none.
    #[arg(long = "registries-conf", value_name = "PATH")]
    pub registries_conf: Option<PathBuf>,
    /// No progress bars (they are also hidden when stderr is not a terminal).
    #[arg(short, long)]
    pub quiet: bool,
}

impl RegistryArgs {
    /// The client configuration: these flags, credentials from the default docker config file,
    /// the blob cache in the default cache directory, the mirrors of `--registries-conf` (else
    /// of `$CAPSTAN_REGISTRIES_CONF`).
    pub fn client_config(&self) -> Result<ClientConfig, OciError> {
        let mut c = ClientConfig::from_env(self.plain_http, self.quiet)?;
        c.insecure_registries = self.insecure_registries.clone();
        match &self.registries_conf {
            Some(path) => c.with_registries_conf(path),
            None => Ok(c),
        }
    }
}

/// Output format of the image commands.
#[derive(Clone, Copy, Debug, Default, ValueEnum, PartialEq, Eq)]
pub enum Output {
    /// The digest alone on stdout.
    #[default]
    Text,
    /// `{reference, digest, size}` (push) or the pull summary as JSON.
    Json,
    /// The same as YAML.
    Yaml,
}

/// `capstan bundle push|pull`.
#[derive(Subcommand, Debug)]
pub enum BundleImageCommand {
    /// Build a bundle image from DIR (manifests/ and metadata/, annotations as labels) and push it.
    Push(PushArgs),
    /// Pull a bundle image by digest and unpack it into DIR (new or empty).
    Pull(PullArgs),
}

/// `capstan catalog push|pull`.
#[derive(Subcommand, Debug)]
pub enum CatalogImageCommand {
    /// Validate the FBC in DIR, build a catalog image (/configs, configs label) and push it.
    Push(PushArgs),
    /// Pull a catalog image by digest and write its FBC directory into DIR (new or empty).
    Pull(PullArgs),
}

/// Arguments of `… push DIR REF`.
#[derive(Args, Debug)]
pub struct PushArgs {
    /// The directory to build the image from.
    pub dir: PathBuf,
    /// Where to push: registry/repository:tag.
    pub reference: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Arguments of `… pull REF DIR`.
#[derive(Args, Debug)]
pub struct PullArgs {
    /// The image: registry/repository:tag or registry/repository@sha256:….
    pub reference: String,
    /// The directory to write into (created if missing; must be empty).
    pub dir: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

fn print<T: Serialize>(value: &T, output: Output, text: &str) {
    match output {
        Output::Text => outln!("{text}"),
        Output::Json => match serde_json::to_string_pretty(value) {
            Ok(s) => outln!("{s}"),
            Err(e) => eprintln!("error: cannot write JSON: {e}"),
        },
        Output::Yaml => match serde_norway::to_string(value) {
            Ok(s) => out!("{s}"),
            Err(e) => eprintln!("error: cannot write YAML: {e}"),
        },
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

fn fail(message: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

fn bundle_code(e: &BundleImageError) -> u8 {
    match e {
        BundleImageError::Oci(_) | BundleImageError::DestinationNotEmpty { .. } => 2,
        _ => 1,
    }
}

fn catalog_code(e: &CatalogImageError) -> u8 {
    match e {
        CatalogImageError::Oci(_) | CatalogImageError::DestinationNotEmpty { .. } => 2,
        _ => 1,
    }
}

/// Runs `capstan bundle push|pull`.
pub fn run_bundle(cmd: BundleImageCommand) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e, 2),
    };
    match cmd {
        BundleImageCommand::Push(a) => {
            let (registry, reference) = match setup(&a.registry, &a.reference) {
                Ok(x) => x,
                Err(code) => return code,
            };
            // Validate before pushing, as `bundle validate` does: errors stop the push.
            match capstan::bundle::Bundle::load(&a.dir) {
                Ok(b) => {
                    let findings = capstan::bundle::validate(&b);
                    let errors: Vec<_> =
                        findings.iter().filter(|f| f.severity == capstan::bundle::Severity::Error).collect();
                    if !errors.is_empty() {
                        // A finding prints its own severity ("error: file: field: …").
                        for f in &errors {
                            eprintln!("{f}");
                        }
                        return fail(
                            format!(
                                "bundle {} has {}; not pushing it (capstan bundle validate {} lists them)",
                                a.dir.display(),
                                super::count(errors.len(), "error", "errors"),
                                a.dir.display()
                            ),
                            1,
                        );
                    }
                }
                Err(e) => {
                    let (message, code) = super::load::bundle_load_failure(&a.dir.display().to_string(), &a.dir, &e);
                    return fail(format!("{message}; not pushing it"), code);
                }
            }
            match rt.block_on(push_bundle(&registry, &a.dir, &reference)) {
                Ok(p) => {
                    print(&p, a.output, &p.digest);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e, bundle_code(&e)),
            }
        }
        BundleImageCommand::Pull(a) => {
            let (registry, reference) = match setup(&a.registry, &a.reference) {
                Ok(x) => x,
                Err(code) => return code,
            };
            match rt.block_on(pull_bundle(&registry, &reference, &a.dir)) {
                Ok(p) => {
                    print(&p, a.output, &p.digest);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e, bundle_code(&e)),
            }
        }
    }
}

/// Runs `capstan catalog push|pull`.
pub fn run_catalog(cmd: CatalogImageCommand) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e, 2),
    };
    match cmd {
        CatalogImageCommand::Push(a) => {
            let (registry, reference) = match setup(&a.registry, &a.reference) {
                Ok(x) => x,
                Err(code) => return code,
            };
            // Validate and build first; a valid catalog may still carry placeholder bundle images.
            let image = match build_catalog_image_reporting(&a.dir) {
                Ok((image, warnings)) => {
                    for w in &warnings {
                        eprintln!("warning: {w}");
                    }
                    image
                }
                Err(e) => return fail(&e, catalog_code(&e)),
            };
            match rt.block_on(registry.push(&reference, &image)).map_err(CatalogImageError::from) {
                Ok(p) => {
                    print(&p, a.output, &p.digest);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e, catalog_code(&e)),
            }
        }
        CatalogImageCommand::Pull(a) => {
            let (registry, reference) = match setup(&a.registry, &a.reference) {
                Ok(x) => x,
                Err(code) => return code,
            };
            match rt.block_on(pull_catalog(&registry, &reference, &a.dir)) {
                Ok(p) => {
                    print(&p, a.output, &p.digest);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e, catalog_code(&e)),
            }
        }
    }
}

/// What a `PATH|REF` argument names ([`classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target<'a> {
    /// An existing file or directory.
    Path(&'a std::path::Path),
    /// An image reference (it parses; nothing is pulled yet).
    Image(&'a str),
}

/// Tells a `PATH|REF` argument apart as every command does
/// ([`capstan::catalog::image::looks_like_local_path`]): an existing path, or an image reference.
///
/// # Errors
/// A message naming the argument: a path that does not exist (`./bundels/foo`, `bundels/foo`),
/// or neither a path nor a valid image reference. Both are unreadable input (exit 2).
pub(crate) fn classify(arg: &str) -> Result<Target<'_>, String> {
    use capstan::catalog::image::{looks_like_local_path, missing_path_message};
    let path = std::path::Path::new(arg);
    if path.exists() {
        return Ok(Target::Path(path));
    }
    if looks_like_local_path(arg) {
        return Err(missing_path_message(arg));
    }
    match parse_reference(arg) {
        Ok(_) => Ok(Target::Image(arg)),
        Err(e) => Err(format!("{arg} is not a file or directory, and not an image reference: {e}")),
    }
}

fn setup(args: &RegistryArgs, reference: &str) -> Result<(Registry, capstan::oci::Reference), ExitCode> {
    let reference = parse_reference(reference).map_err(|e| fail(e, 2))?;
    let config = args.client_config().map_err(|e| fail(e, 2))?;
    Ok((Registry::new(config), reference))
}
