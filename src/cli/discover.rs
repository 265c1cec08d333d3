//! `capstan search KEYWORD` and `capstan show PACKAGE`: find operators without kubectl plugins.
//!
//! ```text
//! capstan search KEYWORD [--catalog NAMESPACE/NAME=PATH|REF]… [-n NAMESPACE] [--kubeconfig F] [-o text|json|yaml]
//! capstan show PACKAGE   [--catalog NAMESPACE/NAME=PATH|REF]… [-n NAMESPACE] [--kubeconfig F] [-o text|json|yaml]
//! ```
//! With `--catalog` (as `capstan resolve` takes it) the catalogs are read here; without it the
//! cluster's `packages.operators.coreos.com/v1` PackageManifests of the namespace are listed
//! (served by capstan's controller, or by OLM's packageserver). Both give the same
//! PackageManifest objects ([`capstan::discovery::packagemanifest`]).
//!
//! `search` matches KEYWORD, case-insensitively, against the package name, the channel heads'
//! display names, keywords and descriptions, and the provider. `show` prints the channels
//! (head and versions), the install modes of the default channel's head and the dependencies of
//! each channel head (with `--catalog`, the `olm.package.required`, `olm.gvk.required` and
//! `olm.constraint` properties; from a cluster, the required CRDs and APIServices of the CSV,
//! which is all a PackageManifest says).
//!
//! Exit codes: 0 found (search: also when nothing matches, with a note on stderr), 1 `show` of a
//! package no catalog has, 2 invalid input (an unreadable or invalid catalog, no cluster).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use serde_json::Value;

use capstan::catalog::model::DeclarativeConfig;
use capstan::catalog::property;
use capstan::catalog::validated::{IndexOptions, ValidatedCatalog};
use capstan::discovery::packagemanifest::{self, CatalogSourceInfo, PackageManifest, PackageSummary, packages_of};

use super::resolve::OutputFormat;

/// Where the packages come from.
#[derive(Args, Debug)]
pub struct SourceArgs {
    /// A catalog source: NAMESPACE/NAME=PATH (an FBC directory or file) or NAMESPACE/NAME=REF (image). Repeatable; without it the cluster is asked.
    #[arg(long = "catalog", value_name = "NAMESPACE/NAME=PATH|REF")]
    catalogs: Vec<String>,
    /// Namespace whose PackageManifests are listed (cluster only; default: the kubeconfig's).
    #[arg(short = 'n', long = "namespace")]
    namespace: Option<String>,
    /// Kubeconfig (cluster only; default $KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long = "kubeconfig")]
    kubeconfig: Option<PathBuf>,
    /// Output format; json is, for `search`, an array of `{package, catalog, defaultChannel,
    /// version, displayName, provider}` and, for `show`, an array of `{packageManifest,
    /// dependencies}`.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
}

/// Arguments of `capstan search`.
#[derive(Args, Debug)]
pub struct SearchArgs {
    /// Word to look for in package names, display names, keywords, descriptions and providers.
    keyword: String,
    #[command(flatten)]
    source: SourceArgs,
}

/// Arguments of `capstan show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Package name.
    package: String,
    #[command(flatten)]
    source: SourceArgs,
}

/// Arguments of `capstan catalog serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// A catalog to serve: NAMESPACE/NAME=PATH (an FBC directory or file) or NAMESPACE/NAME=REF (image). Repeatable.
    #[arg(long = "catalog", value_name = "NAMESPACE/NAME=PATH|REF", required = true)]
    catalogs: Vec<String>,
    /// Address to listen on (port 0 picks a free one; the first line printed names it).
    #[arg(long = "listen", default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// Also serve packages.operators.coreos.com/v1 PackageManifests of these catalogs as an
    /// aggregated API on this address (HTTPS; needs the cluster: --kubeconfig).
    #[arg(long = "packages-api")]
    packages_api: Option<std::net::SocketAddr>,
    /// The global catalog namespace (its catalogs are seen from every namespace).
    #[arg(long = "global-namespace", default_value = "olm")]
    global_namespace: String,
    /// Names for the packages API's serving certificate (DNS names or IP addresses). Repeatable.
    #[arg(long = "cert-name")]
    cert_names: Vec<String>,
    /// Kubeconfig for the packages API's ConfigMap read and SubjectAccessReviews.
    #[arg(long = "kubeconfig")]
    kubeconfig: Option<PathBuf>,
}

/// Runs `capstan catalog serve`: loads the catalogs, prints `serving N catalogs on http://ADDR`,
/// and serves [`capstan::discovery::content`] until interrupted. A directory's digest is the
/// sha256 of its JSON lines; an image's is its manifest digest. Exit 2 on a catalog that cannot
/// be read or is invalid, or an address that cannot be bound.
pub fn run_serve(args: ServeArgs) -> ExitCode {
    let store = capstan::discovery::content::ContentCatalogs::default();
    let mut packages = Vec::new();
    for spec in &args.catalogs {
        match load_served(spec, args.packages_api.is_some()) {
            Ok(ServedCatalog { key, content, summaries }) => {
                let source = CatalogSourceInfo {
                    name: key.name.clone(),
                    namespace: key.namespace.clone(),
                    display_name: key.name.clone(),
                    ..Default::default()
                };
                packages.push(capstan::discovery::query::CatalogPackages { source, packages: summaries.into() });
                store.insert(&key.namespace, &key.name, std::sync::Arc::new(content))
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start a runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(serve(&args, store, packages))
}

/// A catalog of `capstan catalog serve`, loaded and checked.
struct ServedCatalog {
    key: capstan::resolve::CatalogSourceKey,
    content: capstan::discovery::content::CatalogContent,
    /// Its packages for the packages API (empty without `--packages-api`).
    summaries: Vec<PackageSummary>,
}

/// Loads and validates the catalog of one `--catalog NAMESPACE/NAME=PATH|REF`, with its package
/// summaries when `with_packages`.
///
/// # Errors
/// A malformed argument, a catalog that cannot be read or is invalid.
fn load_served(spec: &str, with_packages: bool) -> Result<ServedCatalog, String> {
    use capstan::discovery::content::CatalogContent;
    use sha2::Digest;
    let (key, target) = super::resolve::split_key_value(spec, "--catalog", "NAMESPACE/NAME=PATH")?;
    let (config, digest) = load_with_digest(spec, &target)?;
    capstan::catalog::validate::validate(&config)
        .map_err(|errors| format!("--catalog {spec}: catalog {key} is invalid: {errors}"))?;
    let mut content = CatalogContent::new(&config, digest.as_deref().unwrap_or(""), std::time::SystemTime::now());
    if digest.is_none() {
        let d = format!("sha256:{}", hex::encode(sha2::Sha256::digest(content.all())));
        content = CatalogContent::new(&config, &d, std::time::SystemTime::now());
    }
    let summaries = if with_packages {
        let index =
            ValidatedCatalog::with_options(config, IndexOptions { keep_bundle_objects: true, ..Default::default() })
                .map_err(|e| format!("--catalog {spec}: {e}"))?;
        packages_of(&index).0
    } else {
        Vec::new()
    };
    Ok(ServedCatalog { key, content, summaries })
}

/// Serves the packages API (with `--packages-api`) and the catalog content until Ctrl-C.
async fn serve(
    args: &ServeArgs,
    store: capstan::discovery::content::ContentCatalogs,
    packages: Vec<capstan::discovery::query::CatalogPackages>,
) -> ExitCode {
    if let Some(addr) = args.packages_api {
        let served = capstan::discovery::apiserver::PackageCatalogs::default();
        served.set(packages);
        let started = async {
            let client = super::controller::client(args.kubeconfig.as_ref()).await?;
            let mut names = args.cert_names.clone();
            names.push(addr.ip().to_string());
            capstan::discovery::apiserver::serve(
                addr,
                capstan::discovery::apiserver::ServingIdentity::SelfSigned(names),
                client,
                served,
                args.global_namespace.clone(),
            )
            .await
            .map_err(|e| e.to_string())
        };
        match started.await {
            Ok(bound) => eprintln!("packages API on https://{bound}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    match capstan::discovery::content::serve(args.listen, store).await {
        Ok(addr) => {
            outln!("serving {} on http://{addr}", super::count(args.catalogs.len(), "catalog", "catalogs"));
            let _ = tokio::signal::ctrl_c().await;
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// A package with its dependencies per channel head.
struct Found {
    manifest: PackageManifest,
    /// Per channel (same order as `status.channels`): `{type, value}` dependencies of the head.
    dependencies: Vec<Vec<Value>>,
}

/// Runs `capstan search`.
pub fn run_search(args: SearchArgs) -> ExitCode {
    match packages(&args.source).and_then(|found| {
        let k = args.keyword.to_lowercase();
        let hits: Vec<&Found> = found.iter().filter(|f| matches(&f.manifest, &k)).collect();
        print_search(&hits, args.source.output)?;
        if hits.is_empty() {
            eprintln!("no package matches {:?}", args.keyword);
        }
        Ok(())
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs `capstan show`.
pub fn run_show(args: ShowArgs) -> ExitCode {
    let found = match packages(&args.source) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let hits: Vec<&Found> = found.iter().filter(|f| f.manifest.metadata.name == args.package).collect();
    if hits.is_empty() {
        let mut names: Vec<&str> = found.iter().map(|f| f.manifest.metadata.name.as_str()).collect();
        names.sort();
        names.dedup();
        let near: Vec<&str> =
            names.iter().copied().filter(|n| n.contains(&args.package) || args.package.contains(*n)).take(5).collect();
        eprintln!(
            "error: no catalog has package {:?}{}; `capstan search WORD` finds packages",
            args.package,
            if near.is_empty() { String::new() } else { format!(" (similar: {})", near.join(", ")) }
        );
        return ExitCode::from(1);
    }
    match print_show(&hits, args.source.output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn matches(m: &PackageManifest, k: &str) -> bool {
    let has = |s: &str| s.to_lowercase().contains(k);
    has(&m.metadata.name)
        || has(&m.status.provider.name)
        || m.status.channels.iter().any(|c| {
            let d = &c.current_csv_desc;
            has(&d.display_name) || has(&d.long_description) || d.keywords.iter().any(|w| has(w))
        })
}

fn packages(src: &SourceArgs) -> Result<Vec<Found>, String> {
    if src.catalogs.is_empty() {
        return cluster_packages(src);
    }
    let mut out = Vec::new();
    for spec in &src.catalogs {
        let (key, target) = super::resolve::split_key_value(spec, "--catalog", "NAMESPACE/NAME=PATH")?;
        let config = load(spec, &target)?;
        if let Err(errors) = capstan::catalog::validate::validate(&config) {
            return Err(format!(
                "--catalog {spec}: catalog {key} is invalid and would serve nothing; `capstan catalog validate` lists the errors: {errors}"
            ));
        }
        let index =
            ValidatedCatalog::with_options(config, IndexOptions { keep_bundle_objects: true, ..Default::default() })
                .map_err(|e| format!("--catalog {spec}: {e}"))?;
        let source =
            CatalogSourceInfo { name: key.name.clone(), namespace: key.namespace.clone(), ..Default::default() };
        let (summaries, elided) = packages_of(&index);
        for e in elided {
            eprintln!("warning: --catalog {spec}: {} (OLM's packageserver leaves it out too)", e.reason);
        }
        for s in summaries {
            let manifest = s.manifest(&source, &key.namespace);
            let dependencies = manifest
                .status
                .channels
                .iter()
                .map(|c| {
                    index
                        .bundle(&s.name, &c.current_csv)
                        .map(|b| {
                            b.properties
                                .iter()
                                .filter(|p| {
                                    matches!(
                                        p.type_.as_str(),
                                        property::PACKAGE_REQUIRED | property::GVK_REQUIRED | property::CONSTRAINT
                                    )
                                })
                                .map(|p| serde_json::json!({"type": p.type_, "value": p.value}))
                                .collect()
                        })
                        .unwrap_or_default()
                })
                .collect();
            out.push(Found { manifest, dependencies });
        }
    }
    Ok(out)
}

fn load(spec: &str, target: &str) -> Result<DeclarativeConfig, String> {
    load_with_digest(spec, target).map(|(c, _)| c)
}

/// A catalog directory, file or image; the image's digest when it is one.
fn load_with_digest(spec: &str, target: &str) -> Result<(DeclarativeConfig, Option<String>), String> {
    let path = match super::image::classify(target)
        .map_err(|e| format!("--catalog {spec}: {e} (expected an FBC directory or file, or a catalog image)"))?
    {
        super::image::Target::Path(p) => p,
        super::image::Target::Image(_) => {
            let client =
                capstan::oci::ClientConfig::from_env(false, false).map_err(|e| format!("--catalog {spec}: {e}"))?;
            let loaded = capstan::catalog::image::load_catalog_image_blocking(target, client)
                .map_err(|e| format!("--catalog {spec}: {e}"))?;
            return Ok((loaded.config, Some(loaded.digest)));
        }
    };
    capstan::catalog::parse::load_path(path).map(|c| (c, None)).map_err(|e| format!("--catalog {spec}: {e}"))
}

/// The namespace's PackageManifests from the cluster's aggregated API.
fn cluster_packages(src: &SourceArgs) -> Result<Vec<Found>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(async {
        let client = super::controller::client(src.kubeconfig.as_ref()).await?;
        let ns = src.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
        let ar = kube::api::ApiResource {
            group: packagemanifest::GROUP.into(),
            version: packagemanifest::VERSION.into(),
            api_version: packagemanifest::API_VERSION.into(),
            kind: packagemanifest::KIND.into(),
            plural: packagemanifest::RESOURCE.into(),
        };
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(client, &ns, &ar);
        let list = api.list(&Default::default()).await.map_err(|e| {
            format!("listing packagemanifests.{} in namespace {ns}: {e} (is capstan's controller serving the API? pass --catalog to read catalogs directly)", packagemanifest::GROUP)
        })?;
        let mut out = Vec::new();
        for item in list.items {
            let v = serde_json::to_value(&item).map_err(|e| e.to_string())?;
            let manifest: PackageManifest = serde_json::from_value(v).map_err(|e| format!("packagemanifest {}: {e}", item.metadata.name.as_deref().unwrap_or("")))?;
            let dependencies = manifest
                .status
                .channels
                .iter()
                .map(|c| {
                    let d = &c.current_csv_desc;
                    let crds = d.customresourcedefinitions.required.iter().map(|r| serde_json::json!({"type": "crd.required", "value": r}));
                    let apis = d.apiservicedefinitions.required.iter().map(|r| serde_json::json!({"type": "apiservice.required", "value": r}));
                    crds.chain(apis).collect()
                })
                .collect();
            out.push(Found { manifest, dependencies });
        }
        Ok(out)
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SearchRow<'a> {
    package: &'a str,
    catalog: String,
    default_channel: &'a str,
    version: &'a str,
    display_name: &'a str,
    provider: &'a str,
}

fn default_channel(m: &PackageManifest) -> Option<&packagemanifest::PackageChannel> {
    m.status.channels.iter().find(|c| c.name == m.status.default_channel).or(m.status.channels.first())
}

fn print_search(hits: &[&Found], format: OutputFormat) -> Result<(), String> {
    let rows: Vec<SearchRow<'_>> = hits
        .iter()
        .map(|f| {
            let m = &f.manifest;
            let ch = default_channel(m);
            SearchRow {
                package: &m.metadata.name,
                catalog: format!("{}/{}", m.status.catalog_source_namespace, m.status.catalog_source),
                default_channel: &m.status.default_channel,
                version: ch.map_or("", |c| c.current_csv_desc.version.as_str()),
                display_name: ch.map_or("", |c| c.current_csv_desc.display_name.as_str()),
                provider: &m.status.provider.name,
            }
        })
        .collect();
    match format {
        OutputFormat::Json => outln!("{}", serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?),
        OutputFormat::Yaml => out!("{}", serde_norway::to_string(&rows).map_err(|e| e.to_string())?),
        OutputFormat::Text => {
            let header = ["PACKAGE", "CATALOG", "CHANNEL", "VERSION", "DISPLAY NAME", "PROVIDER"];
            let cells: Vec<[String; 6]> = rows
                .iter()
                .map(|r| {
                    [
                        r.package.into(),
                        r.catalog.clone(),
                        r.default_channel.into(),
                        r.version.into(),
                        r.display_name.into(),
                        r.provider.into(),
                    ]
                })
                .collect();
            let mut widths = header.map(str::len);
            for c in &cells {
                for (i, x) in c.iter().enumerate() {
                    widths[i] = widths[i].max(x.chars().count());
                }
            }
            let line = |c: [&str; 6]| {
                let mut s = String::new();
                for (i, x) in c.iter().enumerate() {
                    if i + 1 == c.len() {
                        s.push_str(x);
                    } else {
                        s.push_str(&format!("{x:<w$}   ", w = widths[i]));
                    }
                }
                s.trim_end().to_string()
            };
            if !cells.is_empty() {
                outln!("{}", line(header));
            }
            for c in &cells {
                outln!("{}", line([&c[0], &c[1], &c[2], &c[3], &c[4], &c[5]].map(String::as_str)));
            }
        }
    }
    Ok(())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShowDoc<'a> {
    package_manifest: &'a PackageManifest,
    /// Channel name → the head's dependencies.
    dependencies: indexmap::IndexMap<&'a str, &'a [Value]>,
}

fn print_show(hits: &[&Found], format: OutputFormat) -> Result<(), String> {
    let docs: Vec<ShowDoc<'_>> = hits
        .iter()
        .map(|f| ShowDoc {
            package_manifest: &f.manifest,
            dependencies: f
                .manifest
                .status
                .channels
                .iter()
                .zip(&f.dependencies)
                .map(|(c, d)| (c.name.as_str(), d.as_slice()))
                .collect(),
        })
        .collect();
    match format {
        OutputFormat::Json => outln!("{}", serde_json::to_string_pretty(&docs).map_err(|e| e.to_string())?),
        OutputFormat::Yaml => out!("{}", serde_norway::to_string(&docs).map_err(|e| e.to_string())?),
        OutputFormat::Text => {
            for (i, f) in hits.iter().enumerate() {
                if i > 0 {
                    outln!("");
                }
                show_text(f);
            }
        }
    }
    Ok(())
}

fn show_text(f: &Found) {
    let m = &f.manifest;
    let st = &m.status;
    let head = default_channel(m);
    outln!("Package:         {}", m.metadata.name);
    outln!("Catalog:         {}/{}", st.catalog_source_namespace, st.catalog_source);
    if let Some(h) = head {
        outln!("Display name:    {}", h.current_csv_desc.display_name);
    }
    let url = if st.provider.url.is_empty() { String::new() } else { format!(" ({})", st.provider.url) };
    outln!("Provider:        {}{url}", st.provider.name);
    outln!("Default channel: {}", st.default_channel);
    if let Some(d) = &st.deprecation {
        outln!("Deprecated:      {}", d.message);
    }
    if let Some(h) = head {
        let modes: Vec<String> = h
            .current_csv_desc
            .install_modes
            .iter()
            .map(|im| format!("{} {}", im.type_, if im.supported { "yes" } else { "no" }))
            .collect();
        outln!(
            "Install modes:   {} (of {})",
            if modes.is_empty() { "none declared".to_string() } else { modes.join(", ") },
            h.current_csv
        );
        if !h.current_csv_desc.min_kube_version.is_empty() {
            outln!("Min Kubernetes:  {}", h.current_csv_desc.min_kube_version);
        }
    }
    outln!("Channels:");
    for (c, deps) in st.channels.iter().zip(&f.dependencies) {
        let deprecated = c.deprecation.as_ref().map_or(String::new(), |d| format!(" [deprecated: {}]", d.message));
        outln!("  {}  head {} ({}){deprecated}", c.name, c.current_csv, c.current_csv_desc.version);
        let versions: Vec<String> = c
            .entries
            .iter()
            .flatten()
            .map(|e| if e.deprecation.is_some() { format!("{} (deprecated)", e.version) } else { e.version.clone() })
            .collect();
        outln!("    versions: {}", if versions.is_empty() { "none".to_string() } else { versions.join(", ") });
        if deps.is_empty() {
            outln!("    dependencies: none");
        } else {
            outln!("    dependencies:");
            for d in deps {
                outln!("      {}", dependency_text(d));
            }
        }
    }
}

fn dependency_text(d: &Value) -> String {
    let v = &d["value"];
    let s = |k: &str| v[k].as_str().unwrap_or_default();
    match d["type"].as_str().unwrap_or_default() {
        property::PACKAGE_REQUIRED => format!("package {} {}", s("packageName"), s("versionRange")),
        property::GVK_REQUIRED => format!("API {}/{} {}", s("group"), s("version"), s("kind")),
        "crd.required" => format!("CRD {} ({} {})", s("name"), s("version"), s("kind")),
        "apiservice.required" => format!("APIService {}.{} ({})", s("version"), s("group"), s("kind")),
        t => format!("{t} {v}"),
    }
}
