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

/// Builds a registry client for `namespace` with the credentials of the named pull secrets
/// (plain HTTP is automatic for loopback registries).
pub(crate) async fn registry_for(
    ctx: &Context,
    namespace: &str,
    secrets: &[String],
) -> Result<Registry, PullSecretError> {
    let mut auth: Option<DockerConfig> = None;
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
    Ok(Registry::new(ClientConfig {
        auth,
        cache: Some(BlobCache::new(BlobCache::default_root())),
        quiet: true,
        insecure_registries: ctx.options.insecure_registries.clone(),
        ..Default::default()
    }))
}
