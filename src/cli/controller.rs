//! `capstan controller`: runs the CatalogSource, Subscription, InstallPlan and
//! ClusterServiceVersion controllers until interrupted (see [`capstan::controller`]).
//!
//! ```text
//! capstan controller [--kubeconfig PATH] [--global-catalog-namespace olm]
//! ```
//! Exit codes: 0 after Ctrl-C / SIGTERM, 2 when no cluster configuration can be loaded.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// Kubeconfig file; default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Namespace whose CatalogSources every namespace can use (OLM's default: olm).
    #[arg(long, default_value = "olm", value_name = "NAMESPACE")]
    global_catalog_namespace: String,
}

/// Builds a client from `--kubeconfig` or the default configuration.
pub async fn client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer().await.map_err(|e| format!("no cluster configuration (set KUBECONFIG or pass --kubeconfig): {e}"))?,
    };
    kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))
}

pub fn run(args: ControllerArgs) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,kube=warn".into()))
        .with_writer(std::io::stderr)
        .try_init();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async move {
        let client = match client(args.kubeconfig.as_ref()).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        let options = capstan::controller::Options {
            global_catalog_namespace: args.global_catalog_namespace,
            catalog_cache: Some(capstan::oci::config::default_cache_root()),
        };
        tracing::info!(global_catalog_namespace = %options.global_catalog_namespace, "capstan controller starting");
        let shutdown = async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
            }
        };
        capstan::controller::run(client, options, shutdown).await;
        ExitCode::SUCCESS
    })
}
