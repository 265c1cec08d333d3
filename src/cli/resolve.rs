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

use std::collections::{BTreeMap, BTreeSet};
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
    /// Subscription YAML as for `kubectl apply` (several documents or a List allowed; `-` reads
    /// stdin; a `status.installedCSV` counts as installed). Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "SUBSCRIPTION.yaml", required = true)]
    files: Vec<PathBuf>,
    /// A CSV already installed in the Subscriptions' namespace (NAMESPACE/CSV_NAME when they span
    /// several; CSV_NAME@PACKAGE when packages of the catalogs share the name). Repeatable.
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
    let mut catalogs = read_catalogs(&args.catalogs)?;
    apply_priorities(&mut catalogs, &args.priorities)?;
    let subscriptions = read_all_subscriptions(&args.files)?;
    let namespaces: BTreeSet<String> = subscriptions.iter().map(|s| s.namespace.clone()).collect();
    let mut installed = Installed { catalogs: &catalogs, given: Vec::new(), seen: BTreeSet::new(), notes: Vec::new() };
    for i in &args.installed {
        installed.add_flag(i, &namespaces, &subscriptions)?;
    }
    for s in &subscriptions {
        installed.add_status(s)?;
    }
    installed.check_one_per_package()?;
    for n in &installed.notes {
        eprintln!("{n}");
    }
    let installed = installed.given.into_iter().map(|g| g.bundle).collect();
    let input = ResolveInput { catalogs, installed, subscriptions };
    let out = resolve(&input);
    print_output(&out, args.output, namespaces.len() > 1)?;
    Ok(out)
}

/// The `--catalog` arguments read into the resolver's catalogs (priority 0).
fn read_catalogs(specs: &[String]) -> Result<Vec<CatalogInput>, String> {
    let mut catalogs: Vec<CatalogInput> = Vec::new();
    for spec in specs {
        let (key, target) = split_key_value(spec, "--catalog", "NAMESPACE/NAME=PATH")?;
        if catalogs.iter().any(|c| c.key == key) {
            return Err(format!("--catalog {spec}: catalog source {key} is given twice"));
        }
        let config = match super::image::classify(&target)
            .map_err(|e| format!("--catalog {spec}: {e} (expected an FBC directory or file, or a catalog image)"))?
        {
            super::image::Target::Path(p) => load_fbc(p)?,
            super::image::Target::Image(_) => {
                // A catalog image: pulled by digest, parsed, and cached under $CAPSTAN_CACHE/catalogs.
                let client =
                    capstan::oci::ClientConfig::from_env(false, false).map_err(|e| format!("--catalog {spec}: {e}"))?;
                capstan::catalog::image::load_catalog_image_blocking(&target, client)
                    .map_err(|e| format!("--catalog {spec}: {e}"))?
                    .config
            }
        };
        let index = index_of(&config, spec, &key)?;
        catalogs.push(CatalogInput { key, priority: 0, index: Arc::new(index) });
    }
    Ok(catalogs)
}

/// The `--priority NAMESPACE/NAME=N` arguments set on the catalogs they name.
fn apply_priorities(catalogs: &mut [CatalogInput], specs: &[String]) -> Result<(), String> {
    for spec in specs {
        let (key, value) = split_key_value(spec, "--priority", "NAMESPACE/NAME=N")?;
        let n: i32 = value.parse().map_err(|_| format!("--priority {spec}: {value:?} is not an integer"))?;
        let Some(c) = catalogs.iter_mut().find(|c| c.key == key) else {
            return Err(format!("--priority {spec}: no --catalog names catalog source {key}"));
        };
        c.priority = n;
    }
    Ok(())
}

/// The Subscriptions of all `-f` files, each file given once and each Subscription name once
/// per namespace; at least one.
fn read_all_subscriptions(files: &[PathBuf]) -> Result<Vec<SubscriptionRequest>, String> {
    // The same file under two spellings (`sub.yaml`, `./sub.yaml`) is the same file.
    let same: Vec<PathBuf> = files.iter().map(|f| std::fs::canonicalize(f).unwrap_or_else(|_| f.clone())).collect();
    if let Some((i, j)) = (0..same.len()).find_map(|j| (0..j).find(|&i| same[i] == same[j]).map(|i| (i, j))) {
        let (a, b) = (&files[i], &files[j]);
        let also = if a.as_os_str() == b.as_os_str() { String::new() } else { format!(" (as {})", b.display()) };
        return Err(format!("-f {}: the file is given twice{also}; give each file once", a.display()));
    }
    let mut read = Vec::new();
    for f in files {
        read.extend(read_subscriptions(f)?);
    }
    // A namespace holds one Subscription of a name: `kubectl apply` of both would keep the last.
    let mut first_at: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for r in &read {
        let s = &r.subscription;
        if let Some(first) = first_at.insert((&s.namespace, &s.name), &r.at) {
            return Err(format!(
                "{}: Subscription {}/{} is also given by {first}; a namespace holds one Subscription of a name (kubectl apply would keep only the last): rename one or drop it",
                r.at, s.namespace, s.name
            ));
        }
    }
    let subscriptions: Vec<SubscriptionRequest> = read.into_iter().map(|r| r.subscription).collect();
    if subscriptions.is_empty() {
        return Err(
            "no Subscription found in the -f files (kind: Subscription, apiVersion: operators.coreos.com/v1alpha1)"
                .into(),
        );
    }
    Ok(subscriptions)
}

/// The CSVs taken as installed: from `--installed` and from the Subscriptions' pasted
/// `status.installedCSV`, in that order.
struct Installed<'a> {
    catalogs: &'a [CatalogInput],
    /// Each installed CSV with what gave it.
    given: Vec<GivenInstalled>,
    /// `(namespace, CSV name)` of every CSV given so far.
    seen: BTreeSet<(String, String)>,
    /// Notes for stderr: a `status.installedCSV` taken as installed.
    notes: Vec<String>,
}

/// An installed CSV and what gave it (`--installed NAME`, or `status.installedCSV of
/// Subscription NS/NAME`), for messages.
struct GivenInstalled {
    what: String,
    bundle: InstalledBundle,
}

/// An installed CSV as named on the command line or in a status, before it is looked up in the
/// catalogs ([`installed_bundle`]).
struct InstalledName<'a> {
    /// What gave it, beginning each message (`--installed NAME`).
    what: &'a str,
    /// The argument as given.
    arg: &'a str,
    namespace: &'a str,
    /// CSV name.
    name: &'a str,
    /// The package, when given (`NAME@PACKAGE`, or the Subscription's).
    package: Option<&'a str>,
}

impl Installed<'_> {
    /// One `--installed [NAMESPACE/]CSV_NAME[@PACKAGE]` argument.
    fn add_flag(
        &mut self,
        i: &str,
        namespaces: &BTreeSet<String>,
        subscriptions: &[SubscriptionRequest],
    ) -> Result<(), String> {
        let (ns, name) = match i.split_once('/') {
            Some((ns, name)) => (ns.to_string(), name.to_string()),
            None if namespaces.len() == 1 => (namespaces.iter().next().cloned().unwrap_or_default(), i.to_string()),
            None => {
                return Err(format!(
                    "--installed {i}: the Subscriptions span namespaces {}; write NAMESPACE/{i}",
                    namespaces.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        };
        let given = name.clone();
        let (name, package) = match name.split_once('@') {
            Some((name, package)) => (name.to_string(), Some(package.to_string())),
            None => (name, None),
        };
        check_installed_flag(i, &ns, &name, package.as_deref())?;
        if !self.seen.insert((ns.clone(), name.clone())) {
            return Err(format!(
                "--installed {i}: CSV {ns}/{name} is given twice; a namespace holds one CSV of a name"
            ));
        }
        // An installed CSV counts only in its own namespace (OLM resolves each namespace apart):
        // one in a namespace none of the Subscriptions is in changes nothing, so it is a typo.
        if !namespaces.contains(&ns) {
            return Err(format!(
                "--installed {i}: none of the Subscriptions is in namespace {ns} (they are in {}); an installed CSV only counts in its Subscriptions' namespace: write {}/{given}",
                namespaces.iter().cloned().collect::<Vec<_>>().join(", "),
                namespaces.iter().next().cloned().unwrap_or_default()
            ));
        }
        let subscribed: BTreeSet<&str> =
            subscriptions.iter().filter(|s| s.namespace == ns).map(|s| s.package.as_str()).collect();
        let what = format!("--installed {i}");
        let named = InstalledName { what: &what, arg: i, namespace: &ns, name: &name, package: package.as_deref() };
        let bundle = installed_bundle(&named, &subscribed, self.catalogs)?;
        self.given.push(GivenInstalled { what, bundle });
        Ok(())
    }

    /// A Subscription copied from a cluster (`kubectl get -o yaml`) says what is installed in
    /// `status.installedCSV`: that CSV is taken as installed, as `--installed NS/CSV@PACKAGE`
    /// would give it (the controller resolves from the CSVs the namespace has).
    fn add_status(&mut self, s: &SubscriptionRequest) -> Result<(), String> {
        let Some(csv) = s.installed_csv.as_deref() else { return Ok(()) };
        let what = format!("status.installedCSV of Subscription {}/{}", s.namespace, s.name);
        if !capstan::catalog::validate::is_dns1123_subdomain(csv) {
            return Err(format!(
                "{what}: {csv:?} is not a CSV name (a Kubernetes object name: lowercase letters, digits, '-' and '.'); correct it or remove status"
            ));
        }
        if !self.seen.insert((s.namespace.clone(), csv.to_string())) {
            // Given before (by --installed, or another Subscription's status): the same CSV, so
            // one entry, unless the two say it is of different packages.
            let earlier = self.given.iter().find(|g| g.bundle.namespace == s.namespace && g.bundle.name == csv);
            if let Some(GivenInstalled { what: first, bundle: b }) = earlier
                && let Some(package) = b.package.clone().or_else(|| owner_package(&b.name, self.catalogs))
                && package != s.package
            {
                return Err(format!(
                    "{what}: {csv} is installed for package {}, but {first} gives it as a CSV of package {package}; give its package once (NAMESPACE/CSV@PACKAGE)",
                    s.package
                ));
            }
            return Ok(());
        }
        let subscribed = BTreeSet::from([s.package.as_str()]);
        let named =
            InstalledName { what: &what, arg: csv, namespace: &s.namespace, name: csv, package: Some(&s.package) };
        let bundle = installed_bundle(&named, &subscribed, self.catalogs)?;
        self.notes.push(format!(
            "note: {what}: {csv} taken as installed in namespace {} (as --installed {}/{csv}@{})",
            s.namespace, s.namespace, s.package
        ));
        self.given.push(GivenInstalled { what, bundle });
        Ok(())
    }

    /// A namespace has one CSV of a package installed: two given (two --installed, or one that
    /// contradicts a pasted status.installedCSV) would be explained as unrelated operators.
    fn check_one_per_package(&self) -> Result<(), String> {
        let mut of_package: BTreeMap<(&str, String), &str> = BTreeMap::new();
        for GivenInstalled { what, bundle: b } in &self.given {
            let package = b.package.clone().or_else(|| owner_package(&b.name, self.catalogs));
            if let Some(package) = package
                && let Some(first) = of_package.insert((b.namespace.as_str(), package.clone()), what)
            {
                return Err(format!(
                    "{what}: {first} already gives a CSV of package {package} in namespace {}; a namespace has one CSV of a package installed: give only the installed one (while an upgrade runs, the one whose phase is not Replacing)",
                    b.namespace
                ));
            }
        }
        Ok(())
    }
}

/// The names of `--installed {i}` as the API server checks them: a CSV name, a namespace name,
/// a non-empty package.
fn check_installed_flag(i: &str, ns: &str, name: &str, package: Option<&str>) -> Result<(), String> {
    if name.is_empty() || package == Some("") {
        return Err(format!("--installed {i:?}: empty CSV or package name; write [NAMESPACE/]CSV_NAME[@PACKAGE]"));
    }
    if !capstan::catalog::validate::is_dns1123_label(ns) {
        return Err(format!(
            "--installed {i}: {ns:?} is not a namespace name (lowercase letters, digits and '-'); write [NAMESPACE/]CSV_NAME[@PACKAGE]"
        ));
    }
    if !capstan::catalog::validate::is_dns1123_subdomain(name) {
        return Err(format!(
            "--installed {i}: {name:?} is not a CSV name (a Kubernetes object name: lowercase letters, digits, '-' and '.'); write [NAMESPACE/]CSV_NAME[@PACKAGE]"
        ));
    }
    Ok(())
}

/// The installed state of `--installed NAME` (`named.arg` as given; `named.what` begins each
/// message, e.g. `--installed NAME`), or of a Subscription's `status.installedCSV`. A name that is a bundle of one of
/// the catalogs is that bundle ([`InstalledBundle::from_csv`]: the resolver takes its package,
/// version, APIs and dependencies from the catalog). A name no catalog has is a CSV the catalogs
/// no longer (or never) served, as a cluster may have; it is only accepted when its
/// `<package>.v<version>` shape says what it is, with a warning naming what is assumed, since a
/// typo would otherwise silently resolve as a fresh install or as an unknown operator.
///
/// A bundle name is unique only within its package: when packages of the catalogs share `name`,
/// the package is `package` (`NAME@PACKAGE`), else the one of them subscribed to in the
/// namespace (`subscribed`: the packages of its Subscriptions) — a cluster's CSV says its
/// package in its `operatorframework.io/properties` annotation; a name does not.
///
/// # Errors
/// A name no catalog has and whose package and version cannot be read from it; `@PACKAGE`
/// naming a package without that bundle; a name several packages have when the Subscriptions
/// do not tell which.
fn installed_bundle(
    named: &InstalledName<'_>,
    subscribed: &BTreeSet<&str>,
    catalogs: &[CatalogInput],
) -> Result<InstalledBundle, String> {
    let InstalledName { what, arg, namespace: ns, name, package } = *named;
    let owners = owners_of(name, catalogs);
    if let Some(package) = package
        && !owners.is_empty()
    {
        if !owners.contains(package) {
            let list = owners.iter().copied().collect::<Vec<_>>().join(", ");
            return Err(format!("{what}: package {package} has no bundle named {name}; it is a bundle of {list}"));
        }
        return Ok(InstalledBundle {
            package: Some(package.to_string()),
            ..InstalledBundle::from_csv(ns, name, None, None)
        });
    }
    match owners.len() {
        0 => {}
        1 => return Ok(InstalledBundle::from_csv(ns, name, None, None)),
        _ => {
            let chosen: Vec<&str> = owners.iter().copied().filter(|p| subscribed.contains(p)).collect();
            let [package] = chosen[..] else {
                let list = owners.iter().copied().collect::<Vec<_>>();
                return Err(format!(
                    "{what}: packages {} each have a bundle named {name}, and the Subscriptions of namespace {ns} do not tell which is installed; write {arg}@PACKAGE (for example {arg}@{})",
                    list.join(", "),
                    list[0]
                ));
            };
            return Ok(InstalledBundle {
                package: Some(package.to_string()),
                ..InstalledBundle::from_csv(ns, name, None, None)
            });
        }
    }
    let keys: Vec<String> = catalogs.iter().map(|c| c.key.to_string()).collect();
    let in_catalogs = format!("{} {}", if keys.len() == 1 { "catalog" } else { "catalogs" }, keys.join(", "));
    let given = package;
    let Some((package, version)) =
        capstan::resolve::split_csv_name(name).map(|(p, v)| (given.map_or(p, str::to_string), v))
    else {
        return Err(format!(
            "{what}: no bundle named {name} in {in_catalogs}, and the name does not say its package and version (<package>.v<version>, e.g. etcdoperator.v0.9.4); give the CSV name of a bundle of the catalogs (`capstan show PACKAGE --catalog …` lists them)"
        ));
    };
    let mut warning = format!(
        "{what}: no bundle named {name} in {in_catalogs}; assuming package {package} version {version} from the name, with no APIs or dependencies"
    );
    let known: Vec<&str> = catalogs
        .iter()
        .filter_map(|c| c.index.package(&package).map(|(_, p)| (c, p)))
        .flat_map(|(c, p)| p.bundles.iter().map(|&b| c.index.bundle(b).name.as_str()))
        .collect();
    if known.is_empty() {
        warning.push_str(&format!("; no catalog has package {package} either: check the name"));
    } else {
        let shown: Vec<&str> = known.iter().copied().take(6).collect();
        let more =
            if known.len() > shown.len() { format!(" and {} more", known.len() - shown.len()) } else { String::new() };
        warning.push_str(&format!(
            "; package {package} has bundles {}{more}: check the name, unless the catalog no longer serves that CSV",
            shown.join(", ")
        ));
    }
    eprintln!("warning: {warning}");
    Ok(InstalledBundle {
        package: Some(package),
        version: Some(version),
        ..InstalledBundle::from_csv(ns, name, None, None)
    })
}

/// The packages of the catalogs with a bundle named `name`.
fn owners_of<'a>(name: &str, catalogs: &'a [CatalogInput]) -> BTreeSet<&'a str> {
    catalogs
        .iter()
        .flat_map(|c| {
            c.index
                .packages()
                .iter()
                .filter(|p| c.index.bundle_in(Some(&p.name), name).is_some())
                .map(|p| p.name.as_str())
        })
        .collect()
}

/// The one package of the catalogs with a bundle named `name`; `None` when none or several have.
fn owner_package(name: &str, catalogs: &[CatalogInput]) -> Option<String> {
    let mut owners = owners_of(name, catalogs).into_iter();
    match (owners.next(), owners.next()) {
        (Some(one), None) => Some(one.to_string()),
        _ => None,
    }
}

pub(crate) fn split_key_value(spec: &str, flag: &str, form: &str) -> Result<(CatalogSourceKey, String), String> {
    let (key, value) = spec.split_once('=').ok_or_else(|| format!("{flag} {spec}: expected {form}"))?;
    let (ns, name) =
        key.split_once('/').ok_or_else(|| format!("{flag} {spec}: expected {form} (the key needs NAMESPACE/NAME)"))?;
    if ns.is_empty() || name.is_empty() || value.is_empty() {
        return Err(format!("{flag} {spec}: expected {form} with non-empty parts"));
    }
    Ok((CatalogSourceKey::new(ns, name), value.to_string()))
}

/// The resolver's index of a catalog.
///
/// # Errors
/// A catalog that fails `opm validate` rules is invalid input (exit 2): the message names the
/// `--catalog` argument and lists every error by package / channel / bundle. (A cluster keeps
/// resolving from other catalog sources and reports the invalid one on each Subscription it
/// would serve; a what-if run has no use for a catalog that serves nothing.)
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

/// The only apiVersion of a Subscription (OLM serves `operators.coreos.com/v1alpha1` alone).
const SUBSCRIPTION_API_VERSION: &str = "operators.coreos.com/v1alpha1";

/// A Subscription as read from a file, with where it was read (`FILE, document N`, and
/// `, items[M]` in a List).
struct ReadSubscription {
    at: String,
    subscription: SubscriptionRequest,
}

/// The text of a `-f` file, or of stdin for `-`, with the name messages give it.
struct Source {
    /// The file as given, or `(stdin)`.
    shown: String,
    text: String,
}

impl Source {
    fn read(path: &Path) -> Result<Source, String> {
        if path == Path::new("-") {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| format!("reading the Subscriptions from stdin (-f -): {e}"))?;
            return Ok(Source { shown: "(stdin)".to_string(), text });
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Ok(Source { shown: path.display().to_string(), text })
    }
}

/// Reads the Subscriptions of a YAML file, or of stdin for `-` (other kinds, e.g. an
/// OperatorGroup, are skipped; the items of a `kind: List`, as `kubectl get -o yaml` writes
/// several objects, are read as documents). A Subscription is checked as `kubectl apply
/// --validate=strict` checks it: apiVersion `operators.coreos.com/v1alpha1`, no field the
/// Subscription CRD does not have ([`capstan::api::unknown_fields`]), every field of its type;
/// each error names the file, the Subscription and the field.
fn read_subscriptions(path: &Path) -> Result<Vec<ReadSubscription>, String> {
    let Source { shown, text } = Source::read(path)?;
    capstan::yaml::check_flow_depth(&text).map_err(|e| format!("{shown}: {e}"))?;
    if let Some(e) = capstan::yaml::duplicate_key(&text) {
        return Err(format!(
            "{shown}: {e}; a field given twice keeps only its last value: kubectl apply refuses it too, give it once"
        ));
    }
    // Compiled once for all documents (a compile per document cost ~57 ms each).
    let schema = match capstan::api::openapi_schema("Subscription", "v1alpha1") {
        Some(openapi) => Some(
            capstan::install::crd_safety::SchemaCheck::new("subscriptions.operators.coreos.com", "v1alpha1", &openapi)
                .map_err(|e| format!("{shown}: {e}"))?,
        ),
        None => None,
    };
    let mut out = Vec::new();
    for (doc, v) in objects(&shown, &text)? {
        if !is_subscription(&doc, &v)? {
            continue;
        }
        let reader = SubscriptionReader { shown: &shown, doc: &doc, schema: schema.as_ref() };
        let subscription = reader.read(v)?;
        out.push(ReadSubscription { at: doc, subscription });
    }
    Ok(out)
}

/// The objects of a YAML text with where each is (`FILE, document N`, and `, items[M]` for the
/// items of a `kind: List`); empty documents are left out.
fn objects(shown: &str, text: &str) -> Result<Vec<(String, serde_json::Value)>, String> {
    let mut objects = Vec::new();
    for (i, v) in capstan::yaml::documents(text).enumerate() {
        let v = v.map_err(|e| format!("{shown}: not valid YAML: {e}"))?;
        let doc = format!("{shown}, document {}", i + 1);
        match v {
            serde_json::Value::Null => {}
            serde_json::Value::Object(ref m)
                if matches!(m.get("kind").and_then(serde_json::Value::as_str), Some("List" | "SubscriptionList")) =>
            {
                let Some(items) = m.get("items").and_then(serde_json::Value::as_array) else {
                    return Err(format!(
                        "{doc}: a List without items (a list of objects); write items: [...] or the objects as documents"
                    ));
                };
                objects.extend(items.iter().enumerate().map(|(j, item)| (format!("{doc}, items[{j}]"), item.clone())));
            }
            v => objects.push((doc, v)),
        }
    }
    Ok(objects)
}

/// Whether the object at `doc` is a Subscription (`false`: another kind, skipped).
///
/// # Errors
/// Not an object, no kind, a kind that is not a string, or a kind that looks like a misspelt
/// Subscription (it would be dropped without a word; kubectl refuses it too).
fn is_subscription(doc: &str, v: &serde_json::Value) -> Result<bool, String> {
    if !v.is_object() {
        let what = match v {
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Array(_) => "a list",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::Bool(_) => "a boolean",
            _ => "empty",
        };
        return Err(format!(
            "{doc}: {what}, not an object; a Subscription is a mapping with apiVersion, kind, metadata and spec"
        ));
    }
    match v.get("kind") {
        Some(serde_json::Value::String(k)) if k == "Subscription" => Ok(true),
        Some(serde_json::Value::String(k)) if k.eq_ignore_ascii_case("subscription") => {
            Err(format!("{doc}: kind is {k:?}; kinds are matched exactly: write kind: Subscription"))
        }
        Some(serde_json::Value::String(k)) if strsim::levenshtein(&k.to_ascii_lowercase(), "subscription") <= 2 => {
            Err(format!(
                "{doc}: kind is {k:?}, which no API serves (kubectl apply refuses it: no matches for kind); did you mean kind: Subscription?"
            ))
        }
        // Other kinds (an OperatorGroup, a Namespace) are skipped.
        Some(serde_json::Value::String(k)) if !k.is_empty() => Ok(false),
        None | Some(serde_json::Value::Null) | Some(serde_json::Value::String(_)) => Err(format!(
            "{doc}: kind is missing; kubectl apply refuses an object without one: write kind: Subscription"
        )),
        Some(k) => Err(format!("{doc}: kind is {k}, not a string; a Subscription has kind: Subscription")),
    }
}

/// Reads one Subscription object of a file: what names it in messages and the compiled schema
/// of the Subscription CRD.
struct SubscriptionReader<'a> {
    /// The file as given.
    shown: &'a str,
    /// `FILE, document N`.
    doc: &'a str,
    schema: Option<&'a capstan::install::crd_safety::SchemaCheck>,
}

impl SubscriptionReader<'_> {
    /// The Subscription object `v`, checked as `kubectl apply --validate=strict` checks it.
    fn read(&self, v: serde_json::Value) -> Result<SubscriptionRequest, String> {
        let doc = self.doc;
        let at = match v.pointer("/metadata/name").and_then(serde_json::Value::as_str).filter(|n| !n.is_empty()) {
            Some(name) => format!("{}, Subscription {name:?}", self.shown),
            None => doc.to_string(),
        };
        // `status` is not checked: only `status.installedCSV` is read, and a Subscription copied
        // from `kubectl get -o yaml` of an OLM cluster may carry status fields capstan's
        // schema lacks (the API server does not take status from `kubectl apply` either).
        let unknown: Vec<capstan::api::UnknownField> = capstan::api::unknown_fields("Subscription", "v1alpha1", &v)
            .into_iter()
            .filter(|f| {
                f.parent.split(['.', '[']).next() != Some("status") && !(f.parent.is_empty() && f.name == "status")
            })
            .collect();
        let invalid = self.schema_errors(&v);
        let d = decode(&at, v, &invalid)?;
        if d.api_version != SUBSCRIPTION_API_VERSION {
            return Err(format!(
                "{at}: apiVersion is {:?}; a Subscription's apiVersion is {SUBSCRIPTION_API_VERSION}",
                d.api_version
            ));
        }
        if let Some(message) = unknown_fields_message(&at, &unknown) {
            return Err(message);
        }
        check_metadata(doc, &at, &d.metadata)?;
        let spec = d.spec.ok_or_else(|| format!("{at}: spec is missing"))?;
        check_spec(&at, &spec)?;
        // After the checks above, which say more than the schema's `Required value`.
        if let Some(e) = invalid.first() {
            return Err(schema_error(&at, e));
        }
        Ok(SubscriptionRequest {
            name: d.metadata.name,
            namespace: d.metadata.namespace.filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into()),
            package: spec.name,
            channel: spec.channel.filter(|c| !c.is_empty()),
            source: spec.source,
            source_namespace: spec.source_namespace,
            starting_csv: spec.starting_csv.filter(|c| !c.is_empty()),
            version_range: spec.version_range.filter(|c| !c.trim().is_empty()),
            installed_csv: d.status.and_then(|s| s.installed_csv).filter(|c| !c.is_empty()),
        })
    }

    /// A field of the wrong type (a list where `spec.config` is an object) could be read as
    /// empty: the API server refuses it, and so does this. `status` is left out, as above.
    fn schema_errors(&self, v: &serde_json::Value) -> Vec<capstan::install::crd_safety::FieldError> {
        let Some(check) = self.schema else { return Vec::new() };
        let mut checked = v.clone();
        if let Some(fields) = checked.as_object_mut() {
            fields.remove("status");
        }
        check.errors(&checked)
    }
}

/// A schema error of the Subscription at `at`, as the API server says it.
fn schema_error(at: &str, e: &capstan::install::crd_safety::FieldError) -> String {
    // YAML reads an unquoted 2.10 as the number 2.1: say to quote it.
    let quote = if e.reason.contains("\"string\"") && e.reason.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
        "; a string is wanted: quote the value as written (YAML reads an unquoted 2.10 as the number 2.1)"
    } else {
        ""
    };
    format!("{at}: {}: {}{quote}; kubectl apply refuses it too (the Subscription CRD's schema)", e.path, e.reason)
}

/// `v` decoded; a field serde stops at is said as the schema says it (`invalid`), for the field
/// serde stopped at (an error of another field, such as a missing spec.source, is said later,
/// better); serde's words are the fallback.
fn decode(
    at: &str,
    v: serde_json::Value,
    invalid: &[capstan::install::crd_safety::FieldError],
) -> Result<SubscriptionDoc, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let field = e.path().to_string();
        let under =
            |p: &str| p == field || p.strip_prefix(field.as_str()).is_some_and(|rest| rest.starts_with(['.', '[']));
        if let Some(e) = invalid.iter().find(|s| under(&s.path)) {
            return schema_error(at, e);
        }
        let field = if field.is_empty() || field == "." { String::new() } else { format!(" {field}:") };
        format!("{at}:{field} {}", e.into_inner())
    })
}

/// The message for fields the Subscription CRD does not have, naming the first and counting the
/// others; `None` when there are none.
fn unknown_fields_message(at: &str, unknown: &[capstan::api::UnknownField]) -> Option<String> {
    let field = unknown.first()?;
    let more = match unknown.len() {
        1 => String::new(),
        n => format!(
            " (and {}: {})",
            super::count(n - 1, "other", "others"),
            unknown[1..].iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    Some(format!(
        "{at}: unknown field {:?}{more}; a Subscription has no such field (kubectl apply --validate=strict refuses it too){}",
        field.to_string(),
        known_fields_hint(field)
    ))
}

/// `metadata.name` and `metadata.namespace` as the API server checks them (a Subscription's name
/// is a DNS-1123 subdomain, a namespace a DNS-1123 label).
fn check_metadata(doc: &str, at: &str, metadata: &Meta) -> Result<(), String> {
    if metadata.name.is_empty() {
        return Err(format!("{doc}: metadata.name is missing"));
    }
    let name = &metadata.name;
    if !capstan::catalog::validate::is_dns1123_subdomain(name) {
        return Err(format!(
            "{at}: metadata.name {name:?} is not a valid object name; use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        ));
    }
    if let Some(ns) =
        metadata.namespace.as_deref().filter(|n| !n.is_empty() && !capstan::catalog::validate::is_dns1123_label(n))
    {
        return Err(format!(
            "{at}: metadata.namespace {ns:?} is not a namespace name; use lowercase letters, digits and '-' (at most 63)"
        ));
    }
    Ok(())
}

/// The spec fields capstan reads: `versionRange` parses, the package and catalog are given, the
/// approval is `Automatic` or `Manual`.
fn check_spec(at: &str, spec: &SubscriptionSpec) -> Result<(), String> {
    if let Some(range) = spec.version_range.as_deref().filter(|r| !r.trim().is_empty()) {
        capstan::resolve::VersionRange::olm_v1(range).map_err(|e| {
            format!(
                "{at}: spec.versionRange: {e}; use forms such as \">=1.2 <2\", \"~1.4\", \"1.2.x\" or an exact version"
            )
        })?;
    }
    for (field, value) in
        [("spec.name", &spec.name), ("spec.source", &spec.source), ("spec.sourceNamespace", &spec.source_namespace)]
    {
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
    Ok(())
}

/// `"; did you mean spec.channel?"` for an unknown Subscription field within two edits of a
/// declared one, else `"; spec has channel, config, …"` (the fields its parent declares, from the
/// CRD schema: [`capstan::api::declared_fields`]); empty for a field of the object itself.
fn known_fields_hint(field: &capstan::api::UnknownField) -> String {
    const KIND: &str = "Subscription";
    if field.parent.is_empty() {
        return String::new();
    }
    let parent = &field.parent;
    if let [one] = field.near(KIND, "v1alpha1")[..] {
        return format!("; did you mean {parent}.{one}?");
    }
    match capstan::api::declared_fields(KIND, "v1alpha1", parent) {
        d if d.is_empty() => String::new(),
        d => format!("; {parent} has {}", d.join(", ")),
    }
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
