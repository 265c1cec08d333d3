//! `capstan resolve`: what-if resolution; reads catalogs (directories, files or images) and
//! Subscription YAML, prints the plan, installs nothing.
//!
//! ```text
//! capstan resolve --catalog NAMESPACE/NAME=PATH|REF [--priority NAMESPACE/NAME=N]
//!                 -f SUBSCRIPTION.yaml [--installed CSV_NAME]… [-o text|json|yaml]
//! ```
//! Exit codes: 0 when every Subscription resolves, 1 when some fail (listed under `errors`), 2 on
//! invalid input (message on stderr naming the file or argument): a catalog that cannot be read or
//! fails `opm validate` rules, a malformed Subscription or `spec.versionRange`, a bad flag.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use capstan::catalog::model::DeclarativeConfig;
use capstan::resolve::{
    CatalogIndex, CatalogInput, CatalogSourceKey, InstalledBundle, ResolveInput, ResolveOutput, SubscriptionRequest,
    resolve,
};

/// Arguments of `capstan resolve`.
#[derive(Args, Debug)]
pub struct ResolveArgs {
    /// A catalog source: NAMESPACE/NAME=PATH (an FBC directory or file) or NAMESPACE/NAME=REF (image). Repeatable.
    #[arg(long = "catalog", value_name = "NAMESPACE/NAME=PATH|REF", required = true)]
    catalogs: Vec<String>,
    /// Priority of a catalog source (CatalogSource spec.priority, default 0; higher is preferred for dependencies).
    #[arg(long = "priority", value_name = "NAMESPACE/NAME=N")]
    priorities: Vec<String>,
    /// Subscription YAML as for `kubectl apply` (several documents allowed). Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "SUBSCRIPTION.yaml", required = true)]
    files: Vec<PathBuf>,
    /// A CSV already installed in the Subscriptions' namespace (NAMESPACE/CSV_NAME when they span several). Repeatable.
    #[arg(long = "installed", value_name = "CSV_NAME")]
    installed: Vec<String>,
    /// Output format; json is `{"resolved": [...], "errors": [...]}`.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Human-readable lines.
    Text,
    /// JSON (its shape is in each command's `--output` help).
    Json,
    /// The JSON document as YAML.
    Yaml,
}

/// Runs the command; see the module docs for exit codes.
pub fn run(args: ResolveArgs) -> ExitCode {
    match run_inner(&args) {
        Ok(out) => {
            if out.errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn run_inner(args: &ResolveArgs) -> Result<ResolveOutput, String> {
    let mut catalogs: Vec<CatalogInput> = Vec::new();
    for spec in &args.catalogs {
        let (key, target) = split_key_value(spec, "--catalog", "NAMESPACE/NAME=PATH")?;
        if catalogs.iter().any(|c| c.key == key) {
            return Err(format!("--catalog {spec}: catalog source {key} is given twice"));
        }
        let path = Path::new(&target);
        if !path.exists() {
            if looks_like_image(&target) {
                // A catalog image: pulled by digest, parsed, and cached under $CAPSTAN_CACHE/catalogs.
                let client = capstan::oci::ClientConfig::from_env(false, false).map_err(|e| format!("--catalog {spec}: {e}"))?;
                let loaded = capstan::catalog::image::load_catalog_image_blocking(&target, client)
                    .map_err(|e| format!("--catalog {spec}: {e}"))?;
                let index = index_of(&loaded.config, spec, &key)?;
                catalogs.push(CatalogInput { key, priority: 0, index: Arc::new(index) });
                continue;
            }
            return Err(format!("--catalog {spec}: {target:?} does not exist (expected an FBC directory or file)"));
        }
        let config = load_fbc(path)?;
        let index = index_of(&config, spec, &key)?;
        catalogs.push(CatalogInput { key, priority: 0, index: Arc::new(index) });
    }
    for spec in &args.priorities {
        let (key, value) = split_key_value(spec, "--priority", "NAMESPACE/NAME=N")?;
        let n: i32 = value.parse().map_err(|_| format!("--priority {spec}: {value:?} is not an integer"))?;
        let Some(c) = catalogs.iter_mut().find(|c| c.key == key) else {
            return Err(format!("--priority {spec}: no --catalog names catalog source {key}"));
        };
        c.priority = n;
    }
    let mut subscriptions = Vec::new();
    for f in &args.files {
        subscriptions.extend(read_subscriptions(f)?);
    }
    if subscriptions.is_empty() {
        return Err("no Subscription found in the -f files (kind: Subscription, apiVersion: operators.coreos.com/v1alpha1)".into());
    }
    let namespaces: BTreeSet<String> = subscriptions.iter().map(|s| s.namespace.clone()).collect();
    let mut installed = Vec::new();
    for i in &args.installed {
        let (ns, name) = match i.split_once('/') {
            Some((ns, name)) => (ns.to_string(), name.to_string()),
            None if namespaces.len() == 1 => (namespaces.iter().next().cloned().unwrap_or_default(), i.clone()),
            None => {
                return Err(format!(
                    "--installed {i}: the Subscriptions span namespaces {}; write NAMESPACE/{i}",
                    namespaces.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        };
        if name.is_empty() {
            return Err(format!("--installed {i:?}: empty CSV name"));
        }
        installed.push(InstalledBundle::from_csv(&ns, &name, None, None));
    }
    let input = ResolveInput { catalogs, installed, subscriptions };
    let out = resolve(&input);
    print_output(&out, args.output, namespaces.len() > 1)?;
    Ok(out)
}

pub(crate) fn split_key_value(spec: &str, flag: &str, form: &str) -> Result<(CatalogSourceKey, String), String> {
    let (key, value) = spec.split_once('=').ok_or_else(|| format!("{flag} {spec}: expected {form}"))?;
    let (ns, name) = key.split_once('/').ok_or_else(|| format!("{flag} {spec}: expected {form} (the key needs NAMESPACE/NAME)"))?;
    if ns.is_empty() || name.is_empty() || value.is_empty() {
        return Err(format!("{flag} {spec}: expected {form} with non-empty parts"));
    }
    Ok((CatalogSourceKey::new(ns, name), value.to_string()))
}

pub(crate) fn looks_like_image(s: &str) -> bool {
    let first = s.split('/').next().unwrap_or("");
    s.contains('@') || (s.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost"))
}

/// The resolver's index of a catalog.
///
/// # Errors
/// A catalog that fails `opm validate` rules is invalid input (exit 2): the message names the
/// `--catalog` argument and lists every error by package / channel / bundle. (A cluster keeps
/// resolving from other catalog sources and reports the invalid one on each Subscription it
/// would serve, case-14; a what-if run has no use for a catalog that serves nothing.)
fn index_of(config: &DeclarativeConfig, spec: &str, key: &CatalogSourceKey) -> Result<CatalogIndex, String> {
    match capstan::catalog::validate::validate(config) {
        Ok(()) => Ok(CatalogIndex::from_config(config)),
        Err(errors) => Err(format!(
            "--catalog {spec}: catalog {key} is invalid and would serve nothing; fix it (`capstan catalog validate` lists the same errors) or leave it out: {errors}"
        )),
    }
}

/// Reads an FBC directory (recursively) or file with [`capstan::catalog::parse::load_path`].
fn load_fbc(path: &Path) -> Result<DeclarativeConfig, String> {
    capstan::catalog::parse::load_path(path).map_err(|e| e.to_string())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubscriptionDoc {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: Option<SubscriptionSpec>,
    #[serde(default)]
    status: Option<SubscriptionStatus>,
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SubscriptionSpec {
    #[serde(default)]
    name: String,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    source: String,
    #[serde(default)]
    source_namespace: String,
    #[serde(default, rename = "startingCSV")]
    starting_csv: Option<String>,
    #[serde(default)]
    install_plan_approval: Option<String>,
    #[serde(default)]
    version_range: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SubscriptionStatus {
    #[serde(default, rename = "installedCSV")]
    installed_csv: Option<String>,
}

/// Reads the Subscriptions of a YAML file (other kinds, e.g. an OperatorGroup, are skipped).
fn read_subscriptions(path: &Path) -> Result<Vec<SubscriptionRequest>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    capstan::yaml::check_flow_depth(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, v) in capstan::yaml::documents(&text).enumerate() {
        let v = v.map_err(|e| format!("{}: not valid YAML: {e}", path.display()))?;
        if v.is_null() {
            continue;
        }
        let d: SubscriptionDoc =
            serde_json::from_value(v).map_err(|e| format!("{}, document {}: {e}", path.display(), i + 1))?;
        if d.kind != "Subscription" {
            continue;
        }
        let at = format!("{}, Subscription {:?}", path.display(), d.metadata.name);
        if !d.api_version.starts_with("operators.coreos.com/") {
            return Err(format!("{at}: apiVersion {:?} is not operators.coreos.com/v1alpha1", d.api_version));
        }
        if d.metadata.name.is_empty() {
            return Err(format!("{}, document {}: metadata.name is missing", path.display(), i + 1));
        }
        let spec = d.spec.ok_or_else(|| format!("{at}: spec is missing"))?;
        if let Some(range) = spec.version_range.as_deref().filter(|r| !r.trim().is_empty()) {
            capstan::resolve::VersionRange::olm_v1(range).map_err(|e| {
                format!("{at}: spec.versionRange: {e}; use forms such as \">=1.2 <2\", \"~1.4\", \"1.2.x\" or an exact version")
            })?;
        }
        for (field, value) in [("spec.name", &spec.name), ("spec.source", &spec.source), ("spec.sourceNamespace", &spec.source_namespace)] {
            if value.is_empty() {
                return Err(format!("{at}: {field} is required"));
            }
        }
        if let Some(a) = &spec.install_plan_approval
            && !a.is_empty()
            && a != "Automatic"
            && a != "Manual"
        {
            return Err(format!("{at}: spec.installPlanApproval is {a:?}; use Automatic or Manual"));
        }
        out.push(SubscriptionRequest {
            name: d.metadata.name,
            namespace: d.metadata.namespace.filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into()),
            package: spec.name,
            channel: spec.channel.filter(|c| !c.is_empty()),
            source: spec.source,
            source_namespace: spec.source_namespace,
            starting_csv: spec.starting_csv.filter(|c| !c.is_empty()),
            version_range: spec.version_range.filter(|c| !c.trim().is_empty()),
            installed_csv: d.status.and_then(|s| s.installed_csv).filter(|c| !c.is_empty()),
        });
    }
    Ok(out)
}

#[derive(Serialize)]
struct JsonOut {
    resolved: Vec<JsonResolved>,
    errors: Vec<JsonError>,
}

#[derive(Serialize)]
struct JsonResolved {
    subscription: String,
    package: String,
    bundle: String,
    version: String,
    channel: Option<String>,
    catalog: Option<String>,
    image: String,
    reason: String,
}

#[derive(Serialize)]
struct JsonError {
    subscription: String,
    message: String,
}

fn print_output(out: &ResolveOutput, format: OutputFormat, qualify: bool) -> Result<(), String> {
    let sub_name = |ns: &str, name: &str| if qualify { format!("{ns}/{name}") } else { name.to_string() };
    let doc = JsonOut {
        resolved: out
            .resolved
            .iter()
            .map(|r| JsonResolved {
                subscription: sub_name(&r.namespace, &r.subscription),
                package: r.package.clone(),
                bundle: r.bundle.clone(),
                version: r.version.to_string(),
                channel: r.channel.clone(),
                catalog: r.catalog.as_ref().map(|c| c.to_string()),
                image: r.image.clone(),
                reason: match &r.passed_over {
                    Some(p) => format!("{}; {p}", r.reason),
                    None => r.reason.to_string(),
                },
            })
            .collect(),
        errors: out
            .errors
            .iter()
            .map(|e| JsonError { subscription: sub_name(&e.namespace, &e.subscription), message: e.message() })
            .collect(),
    };
    match format {
        OutputFormat::Json => {
            outln!("{}", serde_json::to_string_pretty(&doc).map_err(|e| format!("writing JSON: {e}"))?);
        }
        OutputFormat::Yaml => {
            out!("{}", serde_norway::to_string(&doc).map_err(|e| format!("writing YAML: {e}"))?);
        }
        OutputFormat::Text => {
            let mut current = String::new();
            for r in &doc.resolved {
                if r.subscription != current {
                    outln!("subscription {}:", r.subscription);
                    current = r.subscription.clone();
                }
                outln!(
                    "  {} ({} {}) channel {} catalog {}: {}",
                    r.bundle,
                    r.package,
                    r.version,
                    r.channel.as_deref().unwrap_or("-"),
                    r.catalog.as_deref().unwrap_or("-"),
                    r.reason
                );
                if !r.image.is_empty() {
                    outln!("      image {}", r.image);
                }
            }
            for e in &doc.errors {
                outln!("subscription {} failed: {}", e.subscription, e.message);
            }
        }
    }
    Ok(())
}
