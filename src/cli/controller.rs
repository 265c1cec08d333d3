//! `capstan controller`: runs the CatalogSource, Subscription, InstallPlan and
//! ClusterServiceVersion controllers until interrupted (see [`capstan::controller`]).
//!
//! ```text
//! capstan controller [--kubeconfig PATH] [--global-catalog-namespace olm]
//!                    [--leader-elect [--lease-namespace NS] [--lease-name capstan]
//!                     [--lease-duration 15s] [--renew-deadline 10s] [--retry-period 2s]]
//!                    [--metrics-addr 0.0.0.0:8080 | 0] [--log-format text|json]
//!                    [--packages-api 0.0.0.0:8443 [--packages-service NS/NAME] [--packages-apiservice NAME|-]]
//!                    [--catalog-content 0.0.0.0:8081]
//!                    [--registry-listen 0.0.0.0 [--registry-advertise IP ($POD_IP)]]
//! ```
//! `--registry-listen` serves every catalog capstan loads over operator-registry's gRPC API, one
//! listener per CatalogSource, behind a Service `<name>:50051` and EndpointSlice per CatalogSource
//! (written by the leader, pointing at `--registry-advertise`), and writes
//! `status.registryService` ([`capstan::controller::registry_services`]).
//! `--packages-api` / `--catalog-content` serve discovery from the loaded catalogs
//! ([`capstan::controller::serve_discovery`], [`capstan::discovery::served`]) on every replica, leader or standby.
//! With `--leader-elect` the controllers run only while this process holds the Lease
//! ([`capstan::controller::leader`]); a standby waits. `--metrics-addr` serves `/metrics`,
//! `/healthz` and `/readyz` ([`capstan::metrics`]). On Ctrl-C / SIGTERM the controllers stop and
//! the Lease is released.
//!
//! Exit codes: 0 after Ctrl-C / SIGTERM, 1 when leadership was lost (the process must not go on
//! reconciling; the Deployment restarts it as a standby), 2 on bad flags or when no cluster
//! configuration can be loaded.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::{Args, ValueEnum};

#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// Kubeconfig file; default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Namespace whose CatalogSources every namespace can use (OLM's default: olm).
    #[arg(long, default_value = "olm", value_name = "NAMESPACE")]
    global_catalog_namespace: String,
    /// Run the controllers only while holding a coordination.k8s.io Lease (for several replicas).
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the leader-election Lease (in a Pod: its own namespace via $POD_NAMESPACE).
    #[arg(long, env = "POD_NAMESPACE", default_value = "capstan-system", value_name = "NAMESPACE")]
    lease_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "capstan", value_name = "NAME")]
    lease_name: String,
    /// How long a Lease stays valid without renewal (whole seconds, e.g. 15s); a standby takes
    /// over at most about this long (plus two retry periods) after the leader died.
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    lease_duration: Duration,
    /// How long the leader retries renewing before it gives up leadership and exits.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    renew_deadline: Duration,
    /// Time between attempts to acquire or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    retry_period: Duration,
    /// Address for /metrics, /healthz and /readyz; `0` disables the listener.
    #[arg(long, default_value = "0.0.0.0:8080", value_name = "ADDR")]
    metrics_addr: String,
    /// Log format on stderr: human-readable text or one JSON object per line.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// A registry (host or host:port) of catalog and bundle images to reach over plain HTTP
    /// although it is not loopback, as the registry commands' flag. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    insecure_registries: Vec<String>,
    /// Registry mirrors for catalog and bundle images: a containers-registries.conf v2 file (and
    /// its PATH.d/*.conf drop-ins), read at start (docs/controller.md, "Registry mirrors").
    #[arg(long = "registries-conf", env = "CAPSTAN_REGISTRIES_CONF", value_name = "PATH")]
    registries_conf: Option<std::path::PathBuf>,
    /// Serve packages.operators.coreos.com/v1 PackageManifests (what `kubectl get packagemanifests`
    /// reads through the API server's aggregator) over HTTPS on this address, from the loaded
    /// catalogs; every replica serves (docs/discovery.md). Off when not given.
    #[arg(long = "packages-api", value_name = "ADDR")]
    packages_api: Option<SocketAddr>,
    /// The Service in front of the packages API, NAMESPACE/NAME: its DNS names are the serving
    /// certificate's, kept in Secret NAME-cert of NAMESPACE.
    #[arg(long = "packages-service", default_value = "capstan-system/capstan-packages", value_name = "NAMESPACE/NAME")]
    packages_service: String,
    /// The APIService whose spec.caBundle capstan sets to the serving certificate's CA; `-` leaves it alone.
    #[arg(long = "packages-apiservice", default_value = "v1.packages.operators.coreos.com", value_name = "NAME")]
    packages_apiservice: String,
    /// Serve each catalog's content over plain HTTP on this address, as catalogd:
    /// /catalogs/NAMESPACE/NAME/api/v1/all and …/api/v1/metas?schema=&package=&name=. Off when not given.
    #[arg(long = "catalog-content", value_name = "ADDR")]
    catalog_content: Option<SocketAddr>,
    /// Serve each loaded catalog (image and ConfigMap CatalogSources) over operator-registry's
    /// gRPC API, as OLM's registry pods do: one listener per CatalogSource on this IP (a port of
    /// its own), a Service <name>:50051 and an EndpointSlice per CatalogSource, and
    /// status.registryService. Off when not given.
    #[arg(long = "registry-listen", value_name = "IP")]
    registry_listen: Option<std::net::IpAddr>,
    /// The address written into the registry EndpointSlices (in a Pod: its IP from the downward
    /// API, $POD_IP). Defaults to --registry-listen when that is a specific address.
    #[arg(long = "registry-advertise", env = "POD_IP", value_name = "IP")]
    registry_advertise: Option<std::net::IpAddr>,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (tracing-subscriber's JSON format).
    Json,
}

/// Parses a Go duration (`500ms`, `2s`, `1.5s`, `1m`; [`capstan::api::common::parse_go_duration`])
/// or a plain number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Duration::from_secs_f64(v)),
        Ok(_) => Err(format!("{s:?} is not a duration; it must be zero or more")),
        Err(_) => capstan::api::common::parse_go_duration(s),
    }
}

/// Builds a client from `--kubeconfig` or the default configuration.
pub async fn client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, String> {
    let config = config(kubeconfig).await?;
    kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))
}

/// The configuration from `--kubeconfig` or the default one ($KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn config(kubeconfig: Option<&PathBuf>) -> Result<kube::Config, String> {
    Ok(match kubeconfig {
        Some(path) => {
            if !path.is_file() {
                return Err(format!(
                    "--kubeconfig {}: no such file; pass the path of a kubeconfig (e.g. .cluster/kubeconfig after `make cluster-up`)",
                    path.display()
                ));
            }
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no cluster configuration (set KUBECONFIG or pass --kubeconfig): {e}"))?,
    })
}

/// The log filter when `RUST_LOG` is unset. kube's client logs every failed HTTP request at
/// ERROR (`kube_client::client::builder`); during an API outage that is one line per request of
/// every watch and reconcile, unbounded in the number of objects. capstan logs those failures
/// itself, at most once per kind every 10 s (`controller::ERROR_LOG_INTERVAL`), so kube's
/// per-request line is off by default.
const DEFAULT_LOG_FILTER: &str = "info,kube=warn,kube_client::client::builder=off";

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| DEFAULT_LOG_FILTER.into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).try_init(),
    };
}

/// Waits until the API answers a list of CatalogSources (the CRDs are installed and this identity
/// may read them), then marks the process ready for `/readyz`.
async fn mark_ready_when_api_answers(client: kube::Client) {
    let api: kube::Api<capstan::api::CatalogSource> = kube::Api::all(client);
    let mut warned = false;
    loop {
        match api.list_metadata(&kube::api::ListParams::default().limit(1)).await {
            Ok(_) => {
                capstan::metrics::global().set_ready(true);
                return;
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(error = %e, "not ready: cannot list CatalogSources (are the CRDs installed, `kubectl apply -k manifests/`, and may this identity list them?)");
                    warned = true;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
    }
    tracing::info!("shutting down: stopping the controllers");
}

/// Runs the command; see the module docs for exit codes.
pub fn run(args: ControllerArgs) -> ExitCode {
    init_logging(args.log_format);
    let startup = match Startup::check(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(run_async(args, startup))
}

/// What the flags give once checked, before anything is started.
struct Startup {
    /// `--metrics-addr`; `None` when disabled.
    metrics_addr: Option<SocketAddr>,
    /// The Lease settings (checked only with `--leader-elect`).
    leader_config: capstan::controller::leader::LeaderElectionConfig,
    /// `--registry-listen` / `--registry-advertise`.
    registry: Option<capstan::controller::registry_services::RegistryOptions>,
    /// `--registries-conf`, read.
    registries_conf: Option<std::sync::Arc<capstan::oci::RegistriesConf>>,
}

impl Startup {
    /// Checks `--metrics-addr`, the `CAPSTAN_MAX_*` pull limits, `--registries-conf` and, with
    /// `--leader-elect`, the Lease settings.
    ///
    /// # Errors
    /// The message of the first that is wrong (exit 2).
    fn check(args: &ControllerArgs) -> Result<Startup, String> {
        let metrics_addr: Option<SocketAddr> =
            match args.metrics_addr.trim() {
                "0" | "" => None,
                a => Some(a.parse().map_err(|_| {
                    format!("--metrics-addr {a:?} is not HOST:PORT (e.g. 0.0.0.0:8080) or 0 to disable")
                })?),
            };
        // The pull limits are read once per process (`Limits::default`, used by the controller's
        // registry clients); a value that does not parse stops the controller here instead of
        // being ignored.
        let limits = capstan::oci::Limits::from_env().map_err(|e| e.to_string())?;
        tracing::info!(?limits, "image pull limits (CAPSTAN_MAX_*)");
        let leader_config = capstan::controller::leader::LeaderElectionConfig {
            namespace: args.lease_namespace.clone(),
            name: args.lease_name.clone(),
            identity: capstan::controller::leader::default_identity(),
            lease_duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
        };
        if args.leader_elect {
            leader_config.validate().map_err(|e| e.to_string())?;
        }
        let registry = registry_options(args.registry_listen, args.registry_advertise)?;
        let registries_conf = match &args.registries_conf {
            Some(path) => {
                let conf = capstan::oci::RegistriesConf::load(path).map_err(|e| e.to_string())?;
                tracing::info!(files = ?conf.files, tables = conf.registries.len(), "registry mirrors (--registries-conf)");
                Some(std::sync::Arc::new(conf))
            }
            None => None,
        };
        Ok(Startup { metrics_addr, leader_config, registry, registries_conf })
    }
}

/// `--registry-listen` and `--registry-advertise` (or `$POD_IP`): the advertised address
/// defaults to the listen address when that is a specific one.
///
/// # Errors
/// Listening on every address (`0.0.0.0`, `::`) with nothing to advertise.
fn registry_options(
    listen: Option<std::net::IpAddr>,
    advertise: Option<std::net::IpAddr>,
) -> Result<Option<capstan::controller::registry_services::RegistryOptions>, String> {
    let Some(listen) = listen else { return Ok(None) };
    let advertise = match advertise {
        Some(a) => a,
        None if !listen.is_unspecified() => listen,
        None => {
            return Err(format!(
                "--registry-listen {listen} needs --registry-advertise IP (or $POD_IP): the address the registry Services' EndpointSlices point at"
            ));
        }
    };
    Ok(Some(capstan::controller::registry_services::RegistryOptions { listen, advertise }))
}

async fn run_async(args: ControllerArgs, startup: Startup) -> ExitCode {
    let (kube_config, client) = match connect(args.kubeconfig.as_ref()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let metrics = capstan::metrics::global();
    if let Some(addr) = startup.metrics_addr {
        // A taken port must not stop reconciliation (a second controller on a workstation);
        // in a Pod the probes then fail, which shows the problem.
        match capstan::metrics::serve(addr, metrics.clone()).await {
            Ok(bound) => tracing::info!(addr = %bound, "serving /metrics, /healthz and /readyz"),
            Err(e) => {
                tracing::error!(error = %e, "running without /metrics, /healthz and /readyz; pass another --metrics-addr, or 0 to disable")
            }
        }
    }
    let discovery = args.packages_api.is_some() || args.catalog_content.is_some();
    let running = Running {
        options: capstan::controller::Options {
            global_catalog_namespace: args.global_catalog_namespace.clone(),
            catalog_cache: Some(capstan::oci::BlobCache::default_root()),
            insecure_registries: args.insecure_registries.clone(),
            registries_conf: startup.registries_conf,
            discovery,
            // `$CAPSTAN_CERT_VALIDITY` or two years (ApplyOptions' default).
            cert_validity: None,
            registry: startup.registry,
        },
        kube_config,
        client,
        metrics,
        // The catalogs outlive leadership: discovery serves them on every replica (a standby
        // loads the leader's digests) and a new leader starts with them loaded.
        store: Arc::new(capstan::controller::CatalogStore::default()),
        leading: Arc::new(AtomicBool::new(!args.leader_elect)),
    };
    if discovery && let Err(e) = running.start_discovery(&args) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    // Freed heap pages go back to the system (glibc keeps them resident otherwise).
    tokio::spawn(capstan::memory::return_freed_memory_periodically());
    tracing::info!(global_catalog_namespace = %running.options.global_catalog_namespace, leader_elect = args.leader_elect, "capstan controller starting");
    if !args.leader_elect {
        running.run_alone().await;
        return ExitCode::SUCCESS;
    }
    running.run_as_leader(startup.leader_config).await
}

/// The cluster configuration from `--kubeconfig` or the default one, and a client of it.
async fn connect(kubeconfig: Option<&PathBuf>) -> Result<(kube::Config, kube::Client), String> {
    let kube_config = config(kubeconfig).await?;
    let client = kube::Client::try_from(kube_config.clone()).map_err(|e| format!("cannot build a client: {e}"))?;
    Ok((kube_config, client))
}

/// The controllers about to run: the cluster, their options, metrics, the catalogs (which
/// outlive leadership) and whether this replica leads.
struct Running {
    kube_config: kube::Config,
    client: kube::Client,
    options: capstan::controller::Options,
    metrics: Arc<capstan::metrics::Metrics>,
    store: Arc<capstan::controller::CatalogStore>,
    leading: Arc<AtomicBool>,
}

impl Running {
    /// Starts serving discovery (`--packages-api`, `--catalog-content`) in the background.
    ///
    /// # Errors
    /// `--packages-service` not NAMESPACE/NAME.
    fn start_discovery(&self, args: &ControllerArgs) -> Result<(), String> {
        let Some((service_namespace, service_name)) =
            args.packages_service.split_once('/').filter(|(n, s)| !n.is_empty() && !s.is_empty())
        else {
            return Err(format!("--packages-service {:?} is not NAMESPACE/NAME", args.packages_service));
        };
        let opts = capstan::discovery::served::DiscoveryOptions {
            packages_api: args.packages_api,
            catalog_content: args.catalog_content,
            service_namespace: service_namespace.to_string(),
            service_name: service_name.to_string(),
            api_service: Some(args.packages_apiservice.clone()).filter(|a| a != "-" && !a.is_empty()),
            global_namespace: self.options.global_catalog_namespace.clone(),
        };
        let (ctx, _) = capstan::controller::Context::with_store(
            self.client.clone(),
            Some(self.kube_config.clone()),
            self.options.clone(),
            self.metrics.clone(),
            self.store.clone(),
        );
        let leading = self.leading.clone();
        tokio::spawn(async move {
            if let Err(e) = capstan::controller::serve_discovery(ctx, opts, leading).await {
                tracing::error!(error = %e, "not serving discovery (packages API, catalog content)");
            }
        });
        Ok(())
    }

    /// Without leader election: the controllers run until Ctrl-C / SIGTERM.
    async fn run_alone(self) {
        self.metrics.set_leader(true);
        tokio::spawn(mark_ready_when_api_answers(self.client.clone()));
        capstan::controller::run_with_store(
            self.kube_config,
            self.options,
            self.metrics,
            self.store,
            shutdown_signal(),
        )
        .await;
    }

    /// With leader election: the controllers run while this process holds the Lease.
    async fn run_as_leader(self, config: capstan::controller::leader::LeaderElectionConfig) -> ExitCode {
        let Running { kube_config, client, options, metrics, store, leading } = self;
        tracing::info!(lease = %format!("{}/{}", config.namespace, config.name), identity = %config.identity, "leader election: waiting for the lease");
        // A standby replica is ready: it serves its purpose by waiting.
        metrics.set_ready(true);
        let work_client = client.clone();
        let work_metrics = metrics.clone();
        let work = async move {
            work_metrics.set_ready(false);
            leading.store(true, std::sync::atomic::Ordering::Relaxed);
            let ready = tokio::spawn(mark_ready_when_api_answers(work_client.clone()));
            capstan::controller::run_with_store(kube_config, options, work_metrics, store, std::future::pending())
                .await;
            ready.abort();
        };
        match capstan::controller::leader::run(client, config, shutdown_signal(), work).await {
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Ok(capstan::controller::leader::Outcome::LostLeadership { reason }) => {
                tracing::error!(%reason, "leadership lost; exiting so that no two replicas reconcile");
                ExitCode::from(1)
            }
            Ok(outcome) => {
                tracing::info!(?outcome, "capstan controller stopped");
                ExitCode::SUCCESS
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn registry_flags() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(super::registry_options(None, Some(ip("10.0.0.1"))), Ok(None), "off without --registry-listen");
        let o = super::registry_options(Some(ip("0.0.0.0")), Some(ip("10.0.0.1"))).unwrap().unwrap();
        assert_eq!((o.listen, o.advertise), (ip("0.0.0.0"), ip("10.0.0.1")));
        let o = super::registry_options(Some(ip("192.0.2.7")), None).unwrap().unwrap();
        assert_eq!(o.advertise, ip("192.0.2.7"), "a specific listen address is advertised");
        let e = super::registry_options(Some(ip("0.0.0.0")), None).unwrap_err();
        assert!(e.contains("--registry-advertise"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("soon").unwrap_err().contains("not a duration"));
        assert!(parse_duration("-1s").is_err());
    }
}
