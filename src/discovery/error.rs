//! [`ServeError`]: why the packages API (`packages.operators.coreos.com`) cannot start serving.

use std::net::SocketAddr;

/// Why the packages API cannot serve; each message names the object or address and what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The API server's front-proxy settings could not be read.
    #[error("reading ConfigMap kube-system/extension-apiserver-authentication: {0}")]
    RequestHeaderConfig(#[source] kube::Error),
    /// The API server runs without a front-proxy CA: aggregated APIs cannot authenticate anyone.
    #[error(
        "ConfigMap kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: start kube-apiserver with --requestheader-client-ca-file (and --proxy-client-cert-file/--proxy-client-key-file) so that it can proxy to aggregated APIs"
    )]
    NoRequestHeaderCa,
    /// The TLS configuration could not be made (`what`: the serving certificate or key, the
    /// requestheader CA, the client verifier).
    #[error("{what}: {message}")]
    Tls {
        /// Which part of the configuration.
        what: &'static str,
        /// The TLS library's message.
        message: String,
    },
    /// The listener could not be bound.
    #[error("cannot listen on {addr} ({what}): {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Which listener.
        what: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The catalog content listener could not start (the message names its address).
    #[error(transparent)]
    Content(std::io::Error),
    /// The serving certificate's Secret could not be read, written or issued.
    #[error("Secret {namespace}/{name}: {message}")]
    ServingSecret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What failed.
        message: String,
    },
    /// The APIService is missing or could not be patched.
    #[error("APIService {name}: {message}")]
    ApiService {
        /// Its name.
        name: String,
        /// What failed and what to do.
        message: String,
    },
}
