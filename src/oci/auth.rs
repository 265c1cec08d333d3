//! Registry credentials from docker config files and Kubernetes pull secrets.
//!
//! Formats (the same ones `docker login`, podman and the kubelet read):
//! - docker config JSON: `{"auths": {"<registry>": {"auth": base64("user:pass")} | {"username", "password"}
//!   | {"registrytoken"}}, "credsStore": "<helper>", "credHelpers": {"<registry>": "<helper>"}}`; this is
//!   also the `.dockerconfigjson` key of a `kubernetes.io/dockerconfigjson` Secret.
//! - legacy `.dockercfg` (key of a `kubernetes.io/dockercfg` Secret): the `auths` map alone, at top level.
//!
//! Keys are matched as the kubelet matches them (`pkg/credentialprovider/keyring.go`): the scheme and
//! a trailing `/v1/` or `/v2/` are dropped, Docker Hub's names (`docker.io`, `index.docker.io`,
//! `registry-1.docker.io`) are one registry, and a key with a path (`host/org`) matches repositories
//! under that path; the longest match wins.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use serde_json::Value;

use super::error::{OciError, Result};

/// Key of the docker config JSON inside a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// Key of the legacy config inside a `kubernetes.io/dockercfg` Secret.
pub const DOCKER_CFG_KEY: &str = ".dockercfg";
/// Secret type carrying [`DOCKER_CONFIG_JSON_KEY`].
pub const SECRET_TYPE_DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
/// Secret type carrying [`DOCKER_CFG_KEY`].
pub const SECRET_TYPE_DOCKERCFG: &str = "kubernetes.io/dockercfg";

/// Credentials for a set of registries, merged from one or more config files or pull secrets.
#[derive(Debug, Clone, Default)]
pub struct DockerConfig {
    entries: Vec<Entry>,
    helpers: Vec<Helper>,
    sources: Vec<String>,
}

#[derive(Clone)]
struct Entry {
    host: String,
    path: String,
    credential: Credential,
    source: String,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("host", &self.host)
            .field("path", &self.path)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
enum Credential {
    Basic(String, String),
    Bearer(String),
    /// An entry with no usable secret (docker writes `{}` when a credsStore holds the secret).
    Empty,
    /// An OAuth identity token, which needs a token exchange capstan does not do.
    IdentityToken,
}

#[derive(Debug, Clone)]
struct Helper {
    /// `None` for `credsStore` (all registries).
    registry: Option<String>,
    helper: String,
    source: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct FileJson {
    #[serde(default)]
    auths: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    creds_store: Option<String>,
    #[serde(default)]
    cred_helpers: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize, Default)]
struct AuthJson {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

/// The credentials chosen for one registry and where they came from.
#[derive(Debug, Clone)]
pub struct ResolvedAuth {
    /// What to send.
    pub auth: RegistryAuth,
    /// The file or pull secret the credentials came from; `None` for anonymous access.
    pub source: Option<String>,
}

impl DockerConfig {
    /// Parses docker config JSON (`{"auths": …}`), as in `~/.docker/config.json` or a
    /// `.dockerconfigjson` Secret key. `source` names the file or secret in errors.
    ///
    /// Errors: malformed JSON, an `auth` that is not base64 of `user:password`.
    pub fn from_config_json(bytes: &[u8], source: &str) -> Result<Self> {
        let file: FileJson = serde_json::from_slice(bytes).map_err(|e| OciError::AuthConfig {
            source_name: source.to_string(),
            reason: format!("not a docker config JSON object: {e}"),
        })?;
        let mut cfg = DockerConfig { sources: vec![source.to_string()], ..Default::default() };
        if let Some(auths) = &file.auths {
            cfg.add_auths(auths, source)?;
        }
        if let Some(helper) = file.creds_store.filter(|h| !h.is_empty()) {
            cfg.helpers.push(Helper { registry: None, helper, source: source.to_string() });
        }
        for (registry, helper) in file.cred_helpers.iter().flatten() {
            if let Some(helper) = helper.as_str() {
                cfg.helpers.push(Helper {
                    registry: Some(normalize_key(registry).host),
                    helper: helper.to_string(),
                    source: source.to_string(),
                });
            }
        }
        Ok(cfg)
    }

    /// Parses a legacy `.dockercfg` (`{"<registry>": {"auth": …}}`).
    ///
    /// Errors: malformed JSON or `auth` values.
    pub fn from_dockercfg(bytes: &[u8], source: &str) -> Result<Self> {
        let auths: serde_json::Map<String, Value> =
            serde_json::from_slice(bytes).map_err(|e| OciError::AuthConfig {
                source_name: source.to_string(),
                reason: format!("not a .dockercfg JSON object: {e}"),
            })?;
        let mut cfg = DockerConfig { sources: vec![source.to_string()], ..Default::default() };
        cfg.add_auths(&auths, source)?;
        Ok(cfg)
    }

    /// Reads a pull secret's data given its `type` and its decoded `data` map (key → bytes):
    /// `kubernetes.io/dockerconfigjson` uses `.dockerconfigjson`, `kubernetes.io/dockercfg` uses
    /// `.dockercfg`. `source` names the Secret (e.g. `secret olm/my-pull-secret`).
    ///
    /// Errors: another Secret type, or the expected key missing or malformed.
    pub fn from_pull_secret<'a>(
        secret_type: &str,
        mut data: impl FnMut(&str) -> Option<&'a [u8]>,
        source: &str,
    ) -> Result<Self> {
        let (key, json) = match secret_type {
            SECRET_TYPE_DOCKER_CONFIG_JSON => (DOCKER_CONFIG_JSON_KEY, true),
            SECRET_TYPE_DOCKERCFG => (DOCKER_CFG_KEY, false),
            other => {
                return Err(OciError::AuthConfig {
                    source_name: source.to_string(),
                    reason: format!(
                        "type {other:?} is not a pull secret; use type {SECRET_TYPE_DOCKER_CONFIG_JSON} with key {DOCKER_CONFIG_JSON_KEY}"
                    ),
                });
            }
        };
        let bytes = data(key).ok_or_else(|| OciError::AuthConfig {
            source_name: source.to_string(),
            reason: format!("has type {secret_type} but no data key {key}"),
        })?;
        if json { Self::from_config_json(bytes, source) } else { Self::from_dockercfg(bytes, source) }
    }

    /// Reads a docker config file.
    ///
    /// Errors: unreadable file, malformed content.
    pub fn from_file(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| OciError::AuthConfig {
            source_name: path.display().to_string(),
            reason: format!("cannot read: {e}"),
        })?;
        Self::from_config_json(&bytes, &path.display().to_string())
    }

    /// Loads the first config file that exists among `$REGISTRY_AUTH_FILE`,
    /// `$DOCKER_CONFIG/config.json` and `~/.docker/config.json` (podman and skopeo read
    /// `REGISTRY_AUTH_FILE` first; docker reads `DOCKER_CONFIG`). `Ok(None)` when none exists.
    ///
    /// Errors: `$REGISTRY_AUTH_FILE` set to a missing file, or a malformed file.
    pub fn load_default() -> Result<Option<Self>> {
        if let Some(p) = std::env::var_os("REGISTRY_AUTH_FILE").filter(|p| !p.is_empty()) {
            return Self::from_file(Path::new(&p)).map(Some);
        }
        for candidate in Self::default_paths() {
            if candidate.is_file() {
                return Self::from_file(&candidate).map(Some);
            }
        }
        Ok(None)
    }

    /// The docker config paths consulted by [`Self::load_default`] after `$REGISTRY_AUTH_FILE`.
    pub fn default_paths() -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(d) = std::env::var_os("DOCKER_CONFIG").filter(|p| !p.is_empty()) {
            out.push(PathBuf::from(d).join("config.json"));
        }
        if let Some(h) = std::env::var_os("HOME").filter(|p| !p.is_empty()) {
            out.push(PathBuf::from(h).join(".docker").join("config.json"));
        }
        out
    }

    /// Adds every entry of `other` after this one's (entries read first win ties).
    pub fn merge(&mut self, other: DockerConfig) {
        self.entries.extend(other.entries);
        self.helpers.extend(other.helpers);
        self.sources.extend(other.sources);
    }

    /// The files and secrets read, in order, for error messages.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }

    /// The credentials for `repository` (e.g. `org/app`) at `registry` (`host[:port]`).
    /// Anonymous when no entry matches.
    ///
    /// Errors: the matching entry is kept in a credential helper ([`OciError::CredentialHelper`]) or
    /// holds only an OAuth identity token.
    pub fn resolve(&self, registry: &str, repository: &str) -> Result<ResolvedAuth> {
        let host = canonical_host(registry);
        let best = self
            .entries
            .iter()
            .filter(|e| {
                e.host == host
                    && (e.path.is_empty() || repository == e.path || repository.starts_with(&format!("{}/", e.path)))
            })
            .max_by_key(|e| e.path.len());
        let helper = self
            .helpers
            .iter()
            .find(|h| h.registry.as_deref() == Some(host.as_str()))
            .or_else(|| self.helpers.iter().find(|h| h.registry.is_none()));
        match best.map(|e| (&e.credential, e)) {
            Some((Credential::Basic(u, p), e)) => {
                Ok(ResolvedAuth { auth: RegistryAuth::Basic(u.clone(), p.clone()), source: Some(e.source.clone()) })
            }
            Some((Credential::Bearer(t), e)) => {
                Ok(ResolvedAuth { auth: RegistryAuth::Bearer(t.clone()), source: Some(e.source.clone()) })
            }
            Some((Credential::IdentityToken, e)) => Err(OciError::AuthConfig {
                source_name: e.source.clone(),
                reason: format!(
                    "the entry for {registry} holds an OAuth identitytoken, which capstan cannot exchange; log in with a username and password or token instead"
                ),
            }),
            Some((Credential::Empty, e)) => match helper {
                Some(h) => Err(OciError::CredentialHelper {
                    registry: registry.to_string(),
                    helper: h.helper.clone(),
                    source_name: h.source.clone(),
                }),
                None => Err(OciError::AuthConfig {
                    source_name: e.source.clone(),
                    reason: format!(
                        "the entry for {registry} has neither auth nor username/password; run docker login {registry} again"
                    ),
                }),
            },
            None => match helper {
                Some(h) if h.registry.is_some() => Err(OciError::CredentialHelper {
                    registry: registry.to_string(),
                    helper: h.helper.clone(),
                    source_name: h.source.clone(),
                }),
                _ => Ok(ResolvedAuth { auth: RegistryAuth::Anonymous, source: None }),
            },
        }
    }

    fn add_auths(&mut self, auths: &serde_json::Map<String, Value>, source: &str) -> Result<()> {
        for (key, value) in auths {
            let bad = |reason: String| OciError::AuthConfig {
                source_name: source.to_string(),
                reason: format!("entry {key:?}: {reason}"),
            };
            let entry: AuthJson =
                serde_json::from_value(value.clone()).map_err(|e| bad(format!("not an auth object: {e}")))?;
            let credential = if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .map_err(|e| bad(format!("`auth` is not base64: {e}")))?;
                let text =
                    String::from_utf8(decoded).map_err(|_| bad("`auth` does not decode to UTF-8 text".into()))?;
                let (u, p) =
                    text.split_once(':').ok_or_else(|| bad("`auth` must be base64 of username:password".into()))?;
                Credential::Basic(u.to_string(), p.to_string())
            } else if let (Some(u), Some(p)) = (&entry.username, &entry.password) {
                Credential::Basic(u.clone(), p.clone())
            } else if let Some(t) = entry.registrytoken.filter(|t| !t.is_empty()) {
                Credential::Bearer(t)
            } else if entry.identitytoken.is_some_and(|t| !t.is_empty()) {
                Credential::IdentityToken
            } else {
                Credential::Empty
            };
            let AuthKey { host, path } = normalize_key(key);
            self.entries.push(Entry { host, path, credential, source: source.to_string() });
        }
        Ok(())
    }
}

/// Docker Hub goes by several names; all map to `docker.io`.
fn canonical_host(host: &str) -> String {
    let h = host.to_ascii_lowercase();
    match h.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => "docker.io".to_string(),
        _ => h,
    }
}

/// An `auths` key of a docker config, normalized: the registry host (Docker Hub's names as
/// `docker.io`) and the repository path prefix it is limited to (empty for the whole registry).
struct AuthKey {
    host: String,
    path: String,
}

/// `https://host:port/v1/` → `host:port` and ``; `host/org/` → `host` and `org`.
fn normalize_key(key: &str) -> AuthKey {
    let k = key.trim().trim_start_matches("https://").trim_start_matches("http://");
    let (host, path) = k.split_once('/').unwrap_or((k, ""));
    let path = path.trim_end_matches('/');
    let path = match path {
        "v1" | "v2" => "",
        p => p,
    };
    AuthKey { host: canonical_host(host), path: path.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(r: &ResolvedAuth) -> (String, String) {
        match &r.auth {
            RegistryAuth::Basic(u, p) => (u.clone(), p.clone()),
            other => panic!("expected basic auth, got {other:?}"),
        }
    }

    #[test]
    fn auth_field_and_username_password() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("alice:s3cr:et");
        let json = format!(
            r#"{{"auths":{{"https://reg.example.com/v1/":{{"auth":"{b64}"}},"127.0.0.1:5000":{{"username":"bob","password":"pw"}}}}}}"#
        );
        let c = DockerConfig::from_config_json(json.as_bytes(), "cfg.json").unwrap();
        let r = c.resolve("reg.example.com", "org/app").unwrap();
        assert_eq!(basic(&r), ("alice".into(), "s3cr:et".into()));
        assert_eq!(r.source.as_deref(), Some("cfg.json"));
        assert_eq!(basic(&c.resolve("127.0.0.1:5000", "x").unwrap()), ("bob".into(), "pw".into()));
        let anon = c.resolve("quay.io", "x").unwrap();
        assert!(matches!(anon.auth, RegistryAuth::Anonymous));
        assert!(anon.source.is_none());
    }

    #[test]
    fn docker_hub_aliases_and_path_keys() {
        let json = r#"{"auths":{"https://index.docker.io/v1/":{"username":"hub","password":"1"},
            "quay.io/team":{"username":"team","password":"2"},
            "quay.io":{"username":"all","password":"3"}}}"#;
        let c = DockerConfig::from_config_json(json.as_bytes(), "x").unwrap();
        assert_eq!(basic(&c.resolve("docker.io", "library/busybox").unwrap()).0, "hub");
        assert_eq!(basic(&c.resolve("index.docker.io", "a/b").unwrap()).0, "hub");
        assert_eq!(basic(&c.resolve("quay.io", "team/app").unwrap()).0, "team");
        assert_eq!(basic(&c.resolve("quay.io", "teamster/app").unwrap()).0, "all");
    }

    #[test]
    fn legacy_dockercfg_and_pull_secret() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("u:p");
        let cfg = format!(r#"{{"reg.example.com":{{"auth":"{b64}","email":"a@b"}}}}"#);
        let data = cfg.as_bytes();
        let c = DockerConfig::from_pull_secret(
            SECRET_TYPE_DOCKERCFG,
            |k| (k == DOCKER_CFG_KEY).then_some(data),
            "secret ns/s",
        )
        .unwrap();
        assert_eq!(basic(&c.resolve("reg.example.com", "a").unwrap()).0, "u");
        let err = DockerConfig::from_pull_secret(SECRET_TYPE_DOCKER_CONFIG_JSON, |_| None, "secret ns/s")
            .unwrap_err()
            .to_string();
        assert!(err.contains("secret ns/s") && err.contains(".dockerconfigjson"), "{err}");
        let err = DockerConfig::from_pull_secret("Opaque", |_| None, "secret ns/o").unwrap_err().to_string();
        assert!(err.contains("Opaque"), "{err}");
    }

    #[test]
    fn credential_helpers_are_reported() {
        let json = r#"{"auths":{"ghcr.io":{}},"credsStore":"desktop","credHelpers":{"123.dkr.ecr.us-east-1.amazonaws.com":"ecr-login"}}"#;
        let c = DockerConfig::from_config_json(json.as_bytes(), "/home/u/.docker/config.json").unwrap();
        let err = c.resolve("ghcr.io", "a").unwrap_err().to_string();
        assert!(err.contains("docker-credential-desktop") && err.contains("ghcr.io"), "{err}");
        let err = c.resolve("123.dkr.ecr.us-east-1.amazonaws.com", "a").unwrap_err().to_string();
        assert!(err.contains("ecr-login") && err.contains("/home/u/.docker/config.json"), "{err}");
        // A registry with no entry and only a global store is anonymous, as docker treats it.
        assert!(matches!(c.resolve("quay.io", "a").unwrap().auth, RegistryAuth::Anonymous));
    }

    #[test]
    fn malformed_auth_names_the_entry() {
        let json = r#"{"auths":{"reg.example.com":{"auth":"%%%"}}}"#;
        let err = DockerConfig::from_config_json(json.as_bytes(), "f.json").unwrap_err().to_string();
        assert!(err.contains("f.json") && err.contains("reg.example.com") && err.contains("base64"), "{err}");
        let nocolon = base64::engine::general_purpose::STANDARD.encode("justuser");
        let json = format!(r#"{{"auths":{{"r":{{"auth":"{nocolon}"}}}}}}"#);
        assert!(DockerConfig::from_config_json(json.as_bytes(), "f").is_err());
        assert!(DockerConfig::from_config_json(b"[1,2]", "f").is_err());
    }
}
