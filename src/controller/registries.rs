//! The registry client for pulling a CatalogSource's catalog image or a bundle image listed
//! from it, with the CatalogSource's pull secrets (`spec.secrets`): shared by the CatalogSource
//! and InstallPlan reconcilers.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use super::Context;
use crate::oci::{BlobCache, ClientConfig, DockerConfig, OciError, Registry};

/// Why the pull secrets a CatalogSource names (`spec.secrets`) give no credentials; each message
/// names the secret and what to do.
#[derive(Debug, thiserror::Error)]
pub enum PullSecretError {
    /// A secret named in `spec.secrets` does not exist in the CatalogSource's namespace.
    #[error("pull secret {namespace}/{name} (spec.secrets) does not exist; create it or remove it from spec.secrets")]
    Missing {
        /// The CatalogSource's namespace.
        namespace: String,
        /// The secret's name.
        name: String,
    },
    /// The API server did not return the secret.
    #[error("reading pull secret {namespace}/{name}: {source}")]
    Read {
        /// The CatalogSource's namespace.
        namespace: String,
        /// The secret's name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The secret is not a docker config this client can read (its type or content).
    #[error(transparent)]
    Invalid(#[from] OciError),
}

/// Registry clients [`Context::registries`] keeps at most; past that it starts over.
const MAX_REGISTRIES: usize = 256;

/// The registry client for `namespace` with the credentials of the named pull secrets (plain
/// HTTP is automatic for loopback registries). The secrets are read on every call; the client is
/// built once per namespace and secret content and then reused from [`Context::registries`]:
/// building one (and each registry's oci-client in it) loads and parses every root certificate
/// of the system, which per call made each catalog poll — and each retry of a CatalogSource
/// whose status write failed during an API server outage — pay that again (measured with
/// `perf`: most of the controller's CPU during an outage). A reused client also keeps its
/// connections and registry tokens; changed secret content gets a client of its own.
pub(crate) async fn registry_for(
    ctx: &Context,
    namespace: &str,
    secrets: &[String],
) -> Result<Registry, PullSecretError> {
    let (auth, content) = pull_secrets(ctx, namespace, secrets).await?;
    let key = format!("{namespace}\u{0}{}", crate::oci::cache::sha256_digest(&content));
    let mut registries = ctx.registries.lock().unwrap_or_else(|e| e.into_inner());
    if registries.len() >= MAX_REGISTRIES && !registries.contains_key(&key) {
        registries.clear();
    }
    Ok(registries
        .entry(key)
        .or_insert_with(|| {
            Registry::new(ClientConfig {
                auth,
                cache: Some(BlobCache::new(BlobCache::default_root())),
                quiet: true,
                insecure_registries: ctx.options.insecure_registries.clone(),
                registries: ctx.options.registries_conf.clone(),
                ..Default::default()
            })
        })
        .clone())
}

/// The docker config merged from the named pull secrets of `namespace`, and their names and
/// content as bytes (what identifies the credentials).
async fn pull_secrets(
    ctx: &Context,
    namespace: &str,
    secrets: &[String],
) -> Result<(Option<DockerConfig>, Vec<u8>), PullSecretError> {
    let mut auth: Option<DockerConfig> = None;
    let mut content = Vec::new();
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    for name in secrets {
        let source = format!("secret {namespace}/{name}");
        let (namespace, name) = (namespace.to_string(), name.clone());
        let secret = match api.get_opt(&name).await {
            Ok(Some(s)) => s,
            Ok(None) => return Err(PullSecretError::Missing { namespace, name }),
            Err(source) => return Err(PullSecretError::Read { namespace, name, source }),
        };
        let data = secret.data.unwrap_or_default();
        content.extend(name.as_bytes());
        for (k, v) in &data {
            content.extend([0].iter().chain(k.as_bytes()).chain([0].iter()).chain(&v.0));
        }
        content.push(1);
        let cfg = DockerConfig::from_pull_secret(
            secret.type_.as_deref().unwrap_or(""),
            |k| data.get(k).map(|b| b.0.as_slice()),
            &source,
        )?;
        match &mut auth {
            Some(a) => a.merge(cfg),
            None => auth = Some(cfg),
        }
    }
    Ok((auth, content))
}
