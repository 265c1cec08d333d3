//! Client configuration: which registries are spoken to over plain HTTP, where credentials come
//! from, where the blob cache lives, and whether progress bars are drawn.
//!
//! Protocol rule (TLS by default; plain HTTP only for loopback addresses or when asked
//! explicitly): a registry is reached over HTTPS unless its host is a loopback address
//! (`127.0.0.0/8`, `localhost`, `[::1]`), or `plain_http` is set, or the registry is listed in
//! `insecure_registries`, or a registries.conf location or mirror is `insecure = true`. This matches what containerd and podman do for `localhost` registries.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use super::auth::DockerConfig;
use super::cache::BlobCache;
use super::limits::Limits;
use super::mirrors::RegistriesConf;

/// How a client reaches registries and authenticates.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// Use plain HTTP for every registry (`--plain-http`).
    pub plain_http: bool,
    /// Registries (`host` or `host:port`) reached over plain HTTP even though they are not loopback.
    pub insecure_registries: Vec<String>,
    /// Credentials. `None` means anonymous access everywhere.
    pub auth: Option<DockerConfig>,
    /// Content-addressed blob cache. `None` disables caching.
    pub cache: Option<BlobCache>,
    /// Draw no progress bars (`--quiet`). Bars are also hidden when stderr is not a terminal.
    pub quiet: bool,
    /// Idle timeout of one read from a registry; `None` means
    /// [`super::registry::READ_TIMEOUT`] (60 s). A registry that accepts the connection and then
    /// never answers fails with [`super::OciError::Connect`] after this long instead of hanging.
    pub read_timeout: Option<std::time::Duration>,
    /// Size limits on pulls and unpacking; the default reads the `CAPSTAN_MAX_*` environment
    /// variables once per process ([`Limits::default`]).
    pub limits: Limits,
    /// Registry mirrors (`--registries-conf`, `CAPSTAN_REGISTRIES_CONF`); `None`: every image is
    /// pulled from where its reference names.
    pub registries: Option<Arc<RegistriesConf>>,
}

impl ClientConfig {
    /// A configuration for command-line use: credentials from the default docker config file
    /// (see [`DockerConfig::load_default`]), the blob cache in [`BlobCache::default_root`], and
    /// the registry mirrors of the file `CAPSTAN_REGISTRIES_CONF` names, if set.
    ///
    /// Errors: an unreadable or malformed auth file ([`super::OciError::AuthConfig`]); a cache
    /// directory that cannot be created or written ([`super::OciError::CacheUnusable`], naming
    /// `CAPSTAN_CACHE`), so that a command fails at once rather than after a download; a
    /// `CAPSTAN_MAX_*` limit that does not parse ([`super::OciError::InvalidLimit`]); an
    /// unreadable or malformed registries.conf ([`super::OciError::RegistriesConf`]).
    pub fn from_env(plain_http: bool, quiet: bool) -> super::Result<Self> {
        let limits = Limits::from_env().map_err(super::OciError::InvalidLimit)?;
        let cache = BlobCache::open_default()?;
        Ok(ClientConfig {
            plain_http,
            insecure_registries: Vec::new(),
            auth: DockerConfig::load_default()?,
            cache: Some(cache),
            quiet,
            read_timeout: None,
            limits,
            registries: registries_from_env()?,
        })
    }

    /// Reads the registry mirrors from `path` and its `.d` directory ([`RegistriesConf::load`]).
    ///
    /// Errors: [`super::OciError::RegistriesConf`].
    pub fn with_registries_conf(mut self, path: &Path) -> super::Result<Self> {
        self.registries = Some(Arc::new(RegistriesConf::load(path)?));
        Ok(self)
    }

    /// True if `registry` (`host`, `host:port`, `[v6]:port`) is reached over plain HTTP.
    pub fn uses_plain_http(&self, registry: &str) -> bool {
        if self.plain_http || is_loopback_registry(registry) {
            return true;
        }
        if self.registries.as_ref().is_some_and(|r| r.is_insecure(registry)) {
            return true;
        }
        let host = registry_host(registry);
        self.insecure_registries.iter().any(|r| r.eq_ignore_ascii_case(registry) || r.eq_ignore_ascii_case(host))
    }
}

/// The environment variable naming a registries.conf file, for commands without
/// `--registries-conf`.
pub const REGISTRIES_CONF_ENV: &str = "CAPSTAN_REGISTRIES_CONF";

/// The registry mirrors of the file [`REGISTRIES_CONF_ENV`] names; `None` when it is unset or empty.
///
/// Errors: [`super::OciError::RegistriesConf`].
pub fn registries_from_env() -> super::Result<Option<Arc<RegistriesConf>>> {
    match std::env::var_os(REGISTRIES_CONF_ENV) {
        Some(p) if !p.is_empty() => Ok(Some(Arc::new(RegistriesConf::load(Path::new(&p))?))),
        _ => Ok(None),
    }
}

/// The host part of `host[:port]` (IPv6 literals keep no brackets: `[::1]:5000` → `::1`).
pub fn registry_host(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match registry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => registry,
    }
}

/// True for `localhost`, any `127.0.0.0/8` address and `::1`, with or without a port.
pub fn is_loopback_registry(registry: &str) -> bool {
    let host = registry_host(registry);
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_plain_http() {
        let c = ClientConfig::default();
        for r in ["127.0.0.1:5000", "127.1.2.3", "localhost", "LOCALHOST:5000", "[::1]:5000", "::1"] {
            assert!(c.uses_plain_http(r), "{r} should use plain HTTP");
        }
    }

    #[test]
    fn other_hosts_use_tls_unless_asked() {
        let c = ClientConfig::default();
        for r in [
            "quay.io",
            "registry.example.com:5000",
            "10.0.0.1:5000",
            "192.168.1.2",
            "[fe80::1]:5000",
            "localhost.example.com",
            "128.0.0.1",
        ] {
            assert!(!c.uses_plain_http(r), "{r} must use TLS by default");
        }
        let listed = ClientConfig {
            insecure_registries: vec!["registry.example.com:5000".into(), "10.0.0.1".into()],
            ..Default::default()
        };
        assert!(listed.uses_plain_http("registry.example.com:5000"));
        assert!(!listed.uses_plain_http("registry.example.com:6000"));
        assert!(listed.uses_plain_http("10.0.0.1:5000"), "a bare host covers every port");
        assert!(!listed.uses_plain_http("quay.io"));
        let forced = ClientConfig { plain_http: true, ..Default::default() };
        assert!(forced.uses_plain_http("quay.io"));
    }

    #[test]
    fn host_of_registry() {
        assert_eq!(registry_host("quay.io"), "quay.io");
        assert_eq!(registry_host("quay.io:443"), "quay.io");
        assert_eq!(registry_host("[::1]:5000"), "::1");
        assert_eq!(registry_host("::1"), "::1");
    }
}
