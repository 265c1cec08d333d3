//! The registry client for pulling a CatalogSource's catalog image or a bundle image listed
//! from it, with the CatalogSource's pull secrets (`spec.secrets`): shared by the CatalogSource
//! and InstallPlan reconcilers.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use super::Context;
use crate::oci::{BlobCache, ClientConfig, DockerConfig, Registry};

/// Builds a registry client for `namespace` with the credentials of the named pull secrets
/// (plain HTTP is automatic for loopback registries).
pub(crate) async fn registry_for(ctx: &Context, namespace: &str, secrets: &[String]) -> Result<Registry, String> {
    let mut auth: Option<DockerConfig> = None;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    for name in secrets {
        let source = format!("secret {namespace}/{name}");
        let secret = match api.get_opt(name).await {
            Ok(Some(s)) => s,
            Ok(None) => {
                return Err(format!(
                    "pull {source} (spec.secrets) does not exist; create it or remove it from spec.secrets"
                ));
            }
            Err(e) => return Err(format!("reading pull {source}: {e}")),
        };
        let data = secret.data.unwrap_or_default();
        let cfg = DockerConfig::from_pull_secret(
            secret.type_.as_deref().unwrap_or(""),
            |k| data.get(k).map(|b| b.0.as_slice()),
            &source,
        )
        .map_err(|e| e.to_string())?;
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
