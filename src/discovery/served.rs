//! Discovery served by `capstan controller` from its `CatalogStore`: the
//! `packages.operators.coreos.com/v1` aggregated API ([`super::apiserver`]) and the catalog content
//! endpoint ([`super::content`]), with no pod per catalog and no copy of a catalog per request.
//!
//! - When a catalog is loaded (by the CatalogSource reconciler, or on a standby replica by
//!   [`crate::controller::mirror_once`]), its [`ServedCatalog`] is built once per digest and kept in
//!   the store's [`crate::controller::LoadedIndex::served`].
//! - [`crate::controller::serve_discovery`] watches CatalogSources (a reflector) and, whenever one
//!   changes or the store holds another digest, swaps in a new [`snapshot`]: `Arc`s of the held packages and content buffers
//!   with each CatalogSource's display name, publisher, labels and creation time. Requests read
//!   the current snapshot.
//! - Replicas: every replica serves, the same content. The leader loads catalogs and writes
//!   `status.resolvedDigest`; a standby loads that digest ([`crate::controller::mirror_once`]),
//!   so for one digest all replicas answer the same (docs/discovery.md, "Replicas").
//! - The serving certificate: [`ensure_serving_cert`] keeps a CA and a serving pair for the
//!   Service's DNS names in the Secret `<service>-cert` (shared by the replicas; issued and rotated
//!   as [`crate::install::certs`]), and [`set_ca_bundle`] writes the CA into the APIService's
//!   `spec.caBundle`.

use super::ServeError;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};

use super::content::CatalogContent;
use super::packagemanifest::{CatalogSourceInfo, PackageSummary, packages_of};
use super::query::CatalogPackages;
use crate::api::CatalogSource;
use crate::catalog::model::DeclarativeConfig;
use crate::catalog::validate::PackageNames;
use crate::catalog::validated::{IndexOptions, ValidatedCatalog};
use crate::install::certs;

/// What discovery serves of one loaded catalog digest.
#[derive(Debug)]
pub struct ServedCatalog {
    /// The catalog's blobs as JSON lines (the content endpoint); its digest is the catalog's.
    pub content: Arc<CatalogContent>,
    /// Its packages as PackageManifests are built from them ([`packages_of`]), sorted by name.
    pub packages: Arc<Vec<PackageSummary>>,
    /// The valid catalog itself, with its bundle objects, when kept for the gRPC registry
    /// ([`super::registry`]; [`ServedCatalog::build_keeping`]); `None` for an invalid catalog.
    pub index: Option<Arc<ValidatedCatalog>>,
}

impl ServedCatalog {
    /// Builds both views of catalog `name` (`namespace/name`, for messages) from `config`, loaded
    /// at `loaded` from `digest`. An invalid catalog gets its content but no PackageManifests
    /// (logged), as the resolver does not use it either; packages packageserver would leave out
    /// are logged. Package names must be DNS-1123 labels ([`PackageNames::Dns1123Label`]).
    pub fn build(name: &str, config: DeclarativeConfig, digest: &str, loaded: SystemTime) -> ServedCatalog {
        ServedCatalog::build_keeping(name, config, digest, loaded, false, PackageNames::Dns1123Label)
    }

    /// [`ServedCatalog::build`], keeping the [`ValidatedCatalog`] in [`ServedCatalog::index`]
    /// when `keep_index` (the gRPC registry answers from it), with the package names the
    /// catalog's kind of source allows (`package_names`, [`PackageNames`]).
    pub fn build_keeping(
        name: &str,
        config: DeclarativeConfig,
        digest: &str,
        loaded: SystemTime,
        keep_index: bool,
        package_names: PackageNames,
    ) -> ServedCatalog {
        let content = Arc::new(CatalogContent::new(&config, digest, loaded));
        let opts = IndexOptions { keep_bundle_objects: true, package_names };
        let (packages, index) = match ValidatedCatalog::with_options(config, opts) {
            Ok(index) => {
                let (packages, elided) = packages_of(&index);
                for e in elided {
                    tracing::info!(catalog = %name, package = %e.package, reason = %e.reason, "package has no PackageManifest (as packageserver)");
                }
                (packages, keep_index.then(|| Arc::new(index)))
            }
            Err(e) => {
                tracing::warn!(catalog = %name, %digest, error = %e, "catalog is invalid: no PackageManifests for it");
                (Vec::new(), None)
            }
        };
        ServedCatalog { content, packages: Arc::new(packages), index }
    }
}

/// The catalogs to serve now: every CatalogSource of `sources` whose catalog `served` gives (the
/// current load, or the last one of a failing source), sorted by namespace and name, as
/// PackageManifest sources and as content by `namespace/name`. Pure; copies no package or blob.
pub fn snapshot(
    sources: &[Arc<CatalogSource>],
    served: impl Fn(&(String, String)) -> Option<Arc<ServedCatalog>>,
) -> (Vec<CatalogPackages>, BTreeMap<String, Arc<CatalogContent>>) {
    let mut sorted: Vec<&Arc<CatalogSource>> = sources.iter().collect();
    sorted.sort_by_key(|cs| (cs.metadata.namespace.clone(), cs.metadata.name.clone()));
    let mut packages = Vec::new();
    let mut content = BTreeMap::new();
    for cs in sorted {
        let key = (cs.metadata.namespace.clone().unwrap_or_default(), cs.metadata.name.clone().unwrap_or_default());
        let Some(s) = served(&key) else { continue };
        content.insert(format!("{}/{}", key.0, key.1), s.content.clone());
        packages.push(CatalogPackages { source: CatalogSourceInfo::of(cs), packages: s.packages.clone() });
    }
    (packages, content)
}

/// Where and how `capstan controller` serves discovery.
#[derive(Debug, Clone)]
pub struct DiscoveryOptions {
    /// The packages API's HTTPS address (`--packages-api`).
    pub packages_api: Option<SocketAddr>,
    /// The catalog content endpoint's HTTP address (`--catalog-content`).
    pub catalog_content: Option<SocketAddr>,
    /// Namespace and name of the Service in front of the packages API (its DNS names are the
    /// serving certificate's; its Secret `<name>-cert` holds the certificate).
    pub service_namespace: String,
    /// See [`DiscoveryOptions::service_namespace`].
    pub service_name: String,
    /// The APIService whose `spec.caBundle` is set to the CA (`None`: not touched).
    pub api_service: Option<String>,
    /// The global catalog namespace (its catalogs are seen from every namespace).
    pub global_namespace: String,
}

/// The CA-signed serving pair in Secret `<service>-cert` of `namespace`, issued (or rotated, when
/// [`certs::rotation_reason`] says so) for the Service's DNS names. Replicas race safely: a
/// create that finds the Secret already there, or a replace that conflicts, reads it again.
///
/// # Errors
/// A message naming the Secret when it cannot be read or written, or the pair cannot be issued.
pub async fn ensure_serving_cert(
    client: &kube::Client,
    namespace: &str,
    service: &str,
) -> Result<certs::ServingCert, ServeError> {
    let name = format!("{service}-cert");
    let secret_err =
        |message: String| ServeError::ServingSecret { namespace: namespace.to_string(), name: name.clone(), message };
    let hosts = certs::hostnames_for_service(service, namespace);
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let valid_for = certs::validity_from_env().map_err(|e| secret_err(e.to_string()))?;
    for _ in 0..5 {
        let existing = api.get_opt(&name).await.map_err(|e| secret_err(format!("reading it: {e}")))?;
        let data: BTreeMap<String, Vec<u8>> = existing
            .as_ref()
            .and_then(|s| s.data.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        let now = time::OffsetDateTime::now_utc();
        if existing.is_some() && certs::rotation_reason(&data, &hosts, now).is_none() {
            return serving_cert_of(&data).ok_or_else(|| secret_err("not UTF-8 PEM".into()));
        }
        let issued = certs::issue(&hosts, now, valid_for).map_err(|e| secret_err(e.to_string()))?;
        let mut secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_string()),
                labels: Some(BTreeMap::from([("app.kubernetes.io/name".to_string(), "capstan".to_string())])),
                annotations: Some(BTreeMap::from([(certs::ANNOTATION_CA_HASH.to_string(), issued.ca_hash())])),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(issued.secret_data().into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
            ..Default::default()
        };
        let written = match existing {
            None => api.create(&PostParams::default(), &secret).await,
            Some(old) => {
                if let Some(reason) = certs::rotation_reason(&data, &hosts, now) {
                    tracing::info!(secret = %format!("{namespace}/{name}"), %reason, "rotating the packages API's serving certificate");
                }
                secret.metadata.resource_version = old.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &secret).await
            }
        };
        match written {
            Ok(_) => return Ok(issued),
            // Another replica wrote it first: use theirs.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(secret_err(format!("writing it: {e}"))),
        }
    }
    Err(secret_err("kept changing while the serving certificate was written; restart to try again".into()))
}

fn serving_cert_of(data: &BTreeMap<String, Vec<u8>>) -> Option<certs::ServingCert> {
    let text = |k: &str| data.get(k).and_then(|v| String::from_utf8(v.clone()).ok());
    let cert_pem = text(certs::SECRET_CERT_KEY)?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    let (nb, na) = (cert.validity().not_before.to_datetime(), cert.validity().not_after.to_datetime());
    Some(certs::ServingCert {
        ca_pem: text(certs::SECRET_CA_KEY)?,
        cert_pem,
        key_pem: text(certs::SECRET_PRIVATE_KEY)?,
        not_after: na,
        rotate_at: certs::rotate_at(nb, na),
    })
}

/// Sets APIService `name`'s `spec.caBundle` to `ca_pem` (a merge patch; unchanged when equal).
///
/// # Errors
/// A message naming the APIService when it does not exist or cannot be patched.
pub async fn set_ca_bundle(client: &kube::Client, name: &str, ca_pem: &str) -> Result<(), ServeError> {
    let err = |message: String| ServeError::ApiService { name: name.to_string(), message };
    use base64::Engine;
    let api: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource {
            group: "apiregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiregistration.k8s.io/v1".into(),
            kind: "APIService".into(),
            plural: "apiservices".into(),
        },
    );
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let current = api.get_opt(name).await.map_err(|e| err(format!("reading it: {e}")))?;
    let Some(current) = current else {
        return Err(err("does not exist; apply manifests/packages-api.yaml (kubectl apply -k manifests/) so that the API server routes packages.operators.coreos.com here".into()));
    };
    if current.data["spec"]["caBundle"].as_str() == Some(bundle.as_str()) {
        return Ok(());
    }
    let patch = serde_json::json!({"spec": {"caBundle": bundle, "insecureSkipTLSVerify": false}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| err(format!("setting spec.caBundle: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CatalogSourceSpec;
    use crate::catalog::parse::parse_bytes;
    use crate::discovery::apiserver::ServingIdentity;

    const CAT: &str = r#"
schema: olm.package
name: etcd
defaultChannel: stable
---
schema: olm.channel
package: etcd
name: stable
entries: [{name: etcd.v1.0.0}]
---
schema: olm.bundle
package: etcd
name: etcd.v1.0.0
image: x/etcd:1
properties:
- {type: olm.package, value: {packageName: etcd, version: 1.0.0}}
- {type: olm.csv.metadata, value: {displayName: Etcd, provider: {name: CoreOS}, installModes: [{type: AllNamespaces, supported: true}]}}
"#;

    fn source(ns: &str, name: &str, display: &str) -> Arc<CatalogSource> {
        let mut cs =
            CatalogSource::new(name, CatalogSourceSpec { display_name: Some(display.into()), ..Default::default() });
        cs.metadata.namespace = Some(ns.into());
        Arc::new(cs)
    }

    #[test]
    fn a_snapshot_shares_the_loaded_catalogs_and_follows_the_catalogsources() {
        let served = Arc::new(ServedCatalog::build(
            "olm/a",
            parse_bytes("c.yaml", CAT.as_bytes()).unwrap(),
            "sha256:1",
            SystemTime::now(),
        ));
        assert_eq!(served.packages.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["etcd"]);
        assert_eq!(served.content.len(), 3);
        let sources = vec![source("team", "b", "B"), source("olm", "a", "Community"), source("olm", "unloaded", "U")];
        let (p, c) = snapshot(&sources, |k| (k.1 != "unloaded").then(|| served.clone()));
        let names: Vec<String> =
            p.iter().map(|c| format!("{}/{}:{}", c.source.namespace, c.source.name, c.source.display_name)).collect();
        assert_eq!(
            names,
            ["olm/a:Community", "team/b:B"],
            "sorted, a CatalogSource without a loaded catalog is left out"
        );
        assert!(Arc::ptr_eq(&p[0].packages, &served.packages), "no copy of the packages");
        assert!(Arc::ptr_eq(&c["team/b"], &served.content), "no copy of the content");
        assert_eq!(c.keys().collect::<Vec<_>>(), ["olm/a", "team/b"]);
        let m = p[1].packages[0].manifest(&p[1].source, "team");
        assert_eq!((m.status.catalog_source.as_str(), m.status.catalog_source_display_name.as_str()), ("b", "B"));
    }

    #[test]
    fn an_invalid_catalog_has_content_but_no_packages() {
        let bad = CAT.replace("entries: [{name: etcd.v1.0.0}]", "entries: [{name: etcd.v9.0.0}]");
        let served = ServedCatalog::build(
            "olm/bad",
            parse_bytes("c.yaml", bad.as_bytes()).unwrap(),
            "sha256:2",
            SystemTime::now(),
        );
        assert!(served.packages.is_empty());
        assert_eq!(served.content.len(), 3);
    }

    #[test]
    fn the_serving_secret_reads_back() {
        let hosts = certs::hostnames_for_service("capstan-packages", "capstan-system");
        let issued = certs::issue(&hosts, time::OffsetDateTime::now_utc(), certs::DEFAULT_CERT_VALID_FOR).unwrap();
        let back = serving_cert_of(&issued.secret_data()).unwrap();
        assert_eq!((&back.ca_pem, &back.cert_pem, &back.key_pem), (&issued.ca_pem, &issued.cert_pem, &issued.key_pem));
        assert!(certs::rotation_reason(&issued.secret_data(), &hosts, time::OffsetDateTime::now_utc()).is_none());
        let cfg = super::super::apiserver::tls_config(
            &super::super::apiserver::RequestHeader { client_ca_pem: issued.ca_pem.clone(), ..Default::default() },
            &ServingIdentity::Pem { cert_pem: back.cert_pem, key_pem: back.key_pem },
        );
        assert!(cfg.is_ok(), "{:?}", cfg.err());
    }
}
