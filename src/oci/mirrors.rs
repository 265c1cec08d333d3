//! Registry mirrors, read from a containers-registries.conf v2 file (`man 5
//! containers-registries.conf`) and its `.d` drop-in directory: which locations a pull of an
//! image tries, in which order, and which of them are reached over plain HTTP.
//!
//! The format is the one podman, CRI-O, skopeo and buildah read, and the one OpenShift renders
//! its ImageDigestMirrorSet / ImageTagMirrorSet objects into on every node, so users of
//! air-gapped clusters already have it. The semantics follow containers/image
//! (`pkg/sysregistriesv2/system_registries_v2.go`): the `[[registry]]` table with the longest
//! matching `prefix` applies; its mirrors (`[[registry.mirror]]`, in order, filtered by
//! `pull-from-mirror` and `mirror-by-digest-only`) come first, then the registry's own
//! `location` unless it is `blocked`. A location replaces the matched prefix of the reference.

use std::path::{Path, PathBuf};

use oci_client::Reference;
use serde::Deserialize;

use super::error::{OciError, Result};

/// Which pulls a mirror serves (`pull-from-mirror`, containers-registries.conf(5)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PullFromMirror {
    /// Tag and digest pulls (the default).
    #[default]
    All,
    /// Only pulls by digest: a tag may name another image on the mirror.
    DigestOnly,
    /// Only pulls by tag.
    TagOnly,
}

/// One `[[registry.mirror]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Mirror {
    /// `host[:port][/namespace…]` that replaces the registry's prefix.
    pub location: String,
    /// Reach this mirror over plain HTTP.
    #[serde(default)]
    pub insecure: bool,
    /// Which pulls use this mirror.
    #[serde(default)]
    pub pull_from_mirror: PullFromMirror,
}

/// One `[[registry]]` table, after defaults are applied (`prefix` defaults to `location`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RegistryEntry {
    /// What references this table applies to: `host[:port][/namespace…]`, or `*.domain` for every
    /// subdomain of `domain`.
    #[serde(default)]
    pub prefix: String,
    /// Where the prefix really lives; empty for a wildcard prefix (the reference as it is).
    #[serde(default)]
    pub location: String,
    /// Reach `location` over plain HTTP.
    #[serde(default)]
    pub insecure: bool,
    /// Never pull from `location` itself; mirrors are still tried (OpenShift renders an
    /// ImageDigestMirrorSet's `mirrorSourcePolicy: NeverContactSource` so).
    #[serde(default)]
    pub blocked: bool,
    /// Mirrors serve only pulls by digest (the older, registry-wide form of `pull-from-mirror`).
    #[serde(default)]
    pub mirror_by_digest_only: bool,
    /// The mirrors, tried in order before `location`.
    #[serde(default, rename = "mirror")]
    pub mirrors: Vec<Mirror>,
}

/// The parts of a registries.conf file capstan reads; other keys (`unqualified-search-registries`,
/// `short-name-mode`, `[aliases]`, …) concern short names, which capstan never resolves.
#[derive(Debug, Default, Deserialize)]
struct File {
    #[serde(default)]
    registry: Vec<RegistryEntry>,
}

/// A location to pull an image from: a mirror or the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullSource {
    /// The reference rewritten to this location.
    pub reference: Reference,
    /// A mirror (true) or the registry's own location (false).
    pub mirror: bool,
}

impl PullSource {
    /// `mirror` or `source`, for messages.
    pub fn kind(&self) -> &'static str {
        if self.mirror { "mirror" } else { "source" }
    }
}

/// A parsed registries.conf with its drop-ins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistriesConf {
    /// The `[[registry]]` tables; a drop-in's table replaces an earlier one of the same prefix.
    pub registries: Vec<RegistryEntry>,
    /// The files read, in order (for messages).
    pub files: Vec<PathBuf>,
}

impl RegistriesConf {
    /// Reads `path` and then every `*.conf` in `<path>.d/` in lexical order, as containers/image
    /// reads `registries.conf` and `registries.conf.d/`. A missing `.d` directory is fine.
    ///
    /// Errors: [`OciError::RegistriesConf`] naming the file: unreadable, not TOML, a v1 file,
    /// a location with a URL scheme, a wildcard prefix with a location.
    pub fn load(path: &Path) -> Result<Self> {
        let mut conf = RegistriesConf::default();
        let text = std::fs::read_to_string(path).map_err(|e| conf_error(path, format!("cannot read it: {e}")))?;
        conf.merge(path, &text)?;
        let dir = PathBuf::from(format!("{}.d", path.display()));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                .collect();
            files.sort();
            for file in files {
                let text =
                    std::fs::read_to_string(&file).map_err(|e| conf_error(&file, format!("cannot read it: {e}")))?;
                conf.merge(&file, &text)?;
            }
        }
        Ok(conf)
    }

    /// Parses one file's text (named `path` in errors) and merges its tables into `self`.
    ///
    /// Errors: as [`Self::load`].
    pub fn merge(&mut self, path: &Path, text: &str) -> Result<()> {
        if text.lines().any(|l| l.trim_start().starts_with("[registries.")) {
            return Err(conf_error(
                path,
                "it is a version 1 file ([registries.search] …); write [[registry]] tables (version 2)".into(),
            ));
        }
        let file: File = toml::from_str(text).map_err(|e| conf_error(path, format!("not valid: {e}")))?;
        for entry in file.registry {
            let entry = normalize(entry).map_err(|reason| conf_error(path, reason))?;
            match self.registries.iter_mut().find(|r| r.prefix == entry.prefix) {
                Some(existing) => *existing = entry,
                None => self.registries.push(entry),
            }
        }
        self.files.push(path.to_path_buf());
        Ok(())
    }

    /// The matching table (`name` is `registry/repository[:tag][@digest]`) with the longest
    /// prefix, counting a wildcard prefix's own length as containers/image `FindRegistry` does,
    /// and the length of the matched part of `name`; on a tie the first table wins.
    fn find(&self, name: &str) -> Option<(&RegistryEntry, usize)> {
        let mut best: Option<(&RegistryEntry, usize)> = None;
        for r in &self.registries {
            if let Some(len) = matching_prefix(name, &r.prefix)
                && best.is_none_or(|(b, _)| r.prefix.len() > b.prefix.len())
            {
                best = Some((r, len));
            }
        }
        best
    }

    /// The locations a pull of `reference` tries, in order: the matching table's mirrors that
    /// serve this kind of pull (by digest or by tag), then its location unless blocked. A
    /// reference no table matches is pulled from where it names.
    ///
    /// Errors: [`OciError::Blocked`] when the table is blocked and no mirror serves the pull;
    /// [`OciError::RegistriesConf`] when a rewritten reference does not parse.
    pub fn pull_sources(&self, reference: &Reference) -> Result<Vec<PullSource>> {
        let name = reference_name(reference);
        let Some((entry, len)) = self.find(&name) else {
            return Ok(vec![PullSource { reference: reference.clone(), mirror: false }]);
        };
        let by_digest = reference.digest().is_some();
        let rest = &name[len..];
        let mut out = Vec::new();
        for m in &entry.mirrors {
            let serves = match (m.pull_from_mirror, entry.mirror_by_digest_only) {
                (_, true) | (PullFromMirror::DigestOnly, _) => by_digest,
                (PullFromMirror::TagOnly, _) => !by_digest,
                (PullFromMirror::All, false) => true,
            };
            if serves {
                out.push(PullSource { reference: self.rewrite(&m.location, rest)?, mirror: true });
            }
        }
        if !entry.blocked {
            let reference =
                if entry.location.is_empty() { reference.clone() } else { self.rewrite(&entry.location, rest)? };
            out.push(PullSource { reference, mirror: false });
        }
        if out.is_empty() {
            return Err(OciError::Blocked {
                reference: reference.whole(),
                prefix: entry.prefix.clone(),
                files: self.files_text(),
            });
        }
        Ok(out)
    }

    fn rewrite(&self, location: &str, rest: &str) -> Result<Reference> {
        let text = format!("{location}{rest}");
        text.parse::<Reference>().map_err(|e| OciError::RegistriesConf {
            path: self.files_text(),
            reason: format!("location {location:?} makes {text:?}, which is not an image reference: {e}"),
        })
    }

    /// True if `registry` (`host[:port]`) is a location or mirror marked `insecure = true`.
    pub fn is_insecure(&self, registry: &str) -> bool {
        let same = |location: &str| {
            let host = location.split('/').next().unwrap_or(location);
            host.eq_ignore_ascii_case(registry)
        };
        self.registries.iter().any(|r| {
            (r.insecure && (same(&r.location) || (r.location.is_empty() && wildcard_matches_host(&r.prefix, registry))))
                || r.mirrors.iter().any(|m| m.insecure && same(&m.location))
        })
    }

    fn files_text(&self) -> String {
        self.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
    }
}

fn conf_error(path: &Path, reason: String) -> OciError {
    OciError::RegistriesConf { path: path.display().to_string(), reason }
}

/// Trims trailing slashes, refuses URL schemes and empty values, defaults `prefix` to
/// `location` (containers/image `parseLocation` and `postProcessRegistries`).
fn normalize(mut entry: RegistryEntry) -> std::result::Result<RegistryEntry, String> {
    let clean = |what: &str, value: &str| -> std::result::Result<String, String> {
        let v = value.trim_end_matches('/');
        if v.starts_with("http://") || v.starts_with("https://") {
            return Err(format!("{what} {value:?}: write host[:port][/path] without a URL scheme"));
        }
        Ok(v.to_string())
    };
    entry.location = clean("location", &entry.location)?;
    entry.prefix = clean("prefix", &entry.prefix)?;
    if entry.prefix.is_empty() {
        entry.prefix = entry.location.clone();
    }
    if entry.prefix.is_empty() {
        return Err("a [[registry]] table has neither prefix nor location".into());
    }
    if entry.prefix.starts_with("*.") {
        if !entry.location.is_empty() && entry.location != entry.prefix {
            return Err(format!("prefix {:?} is a wildcard: it takes no location", entry.prefix));
        }
        entry.location = String::new();
    }
    for m in &mut entry.mirrors {
        m.location = clean("mirror location", &m.location)?;
        if m.location.is_empty() {
            return Err(format!("a mirror of {:?} has no location", entry.prefix));
        }
    }
    Ok(entry)
}

/// `registry/repository:tag` or `registry/repository@digest` (a tag with a digest is
/// dropped, an absent tag is `latest`), with Docker Hub as `docker.io/library/…`, as
/// containers/image matches prefixes against the reference's full string.
pub fn reference_name(reference: &Reference) -> String {
    let base = format!("{}/{}", reference.registry(), reference.repository());
    match reference.digest() {
        Some(d) => format!("{base}@{d}"),
        None => format!("{base}:{}", reference.tag().unwrap_or("latest")),
    }
}

/// The length of the part of `name` that `prefix` matches, if it does: a plain prefix matches
/// when followed by the end, `:`, `/` or `@`; `*.domain` matches a host that ends in `.domain`
/// and the length is that of the host (containers/image `refMatchingPrefix`).
pub fn matching_prefix(name: &str, prefix: &str) -> Option<usize> {
    let boundary = |len: usize| name.len() == len || matches!(name.as_bytes()[len], b':' | b'/' | b'@');
    if let Some(domain) = prefix.strip_prefix('*') {
        let host = name.split('/').next().unwrap_or(name);
        let host = registry_host(host);
        return (host.len() > domain.len() && host.ends_with(domain)).then_some(host.len());
    }
    (name.starts_with(prefix) && boundary(prefix.len())).then_some(prefix.len())
}

/// `host` of `host[:port]` (a wildcard prefix names DNS hosts, never IPv6 literals).
fn registry_host(registry: &str) -> &str {
    match registry.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => registry,
    }
}

fn wildcard_matches_host(prefix: &str, registry: &str) -> bool {
    prefix.strip_prefix('*').is_some_and(|d| registry_host(registry).ends_with(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> RegistriesConf {
        let mut c = RegistriesConf::default();
        c.merge(Path::new("registries.conf"), text).unwrap();
        c
    }

    fn sources(c: &RegistriesConf, r: &str) -> Vec<String> {
        let r: Reference = r.parse().unwrap();
        c.pull_sources(&r).unwrap().iter().map(|s| format!("{} {}", s.kind(), s.reference.whole())).collect()
    }

    const LOCAL: &str = r#"
unqualified-search-registries = ["quay.io"]
[[registry]]
prefix = "quay.io"
location = "quay.io"
[[registry.mirror]]
location = "127.0.0.1:5000/quay.io"
[[registry.mirror]]
location = "mirror.example.com/q"
pull-from-mirror = "digest-only"

[[registry]]
location = "docker.io"
blocked = true
[[registry.mirror]]
location = "127.0.0.1:5000/docker.io"
insecure = true
"#;

    #[test]
    fn mirrors_come_first_then_the_source() {
        let c = conf(LOCAL);
        assert_eq!(
            sources(&c, "quay.io/olmtest/x:1"),
            ["mirror 127.0.0.1:5000/quay.io/olmtest/x:1", "source quay.io/olmtest/x:1"]
        );
        let d = "sha256:".to_string() + &"a".repeat(64);
        assert_eq!(
            sources(&c, &format!("quay.io/olmtest/x@{d}")),
            [
                format!("mirror 127.0.0.1:5000/quay.io/olmtest/x@{d}"),
                format!("mirror mirror.example.com/q/olmtest/x@{d}"),
                format!("source quay.io/olmtest/x@{d}"),
            ]
        );
        assert_eq!(sources(&c, "ghcr.io/a/b:1"), ["source ghcr.io/a/b:1"], "no table: as named");
        assert_eq!(sources(&c, "quay.iox/a:1"), ["source quay.iox/a:1"], "a prefix ends at a separator");
    }

    #[test]
    fn docker_hub_names_are_full_and_blocked_sources_are_skipped() {
        let c = conf(LOCAL);
        assert_eq!(sources(&c, "busybox"), ["mirror 127.0.0.1:5000/docker.io/library/busybox:latest"]);
        assert_eq!(sources(&c, "docker.io/olmtest/a:2"), ["mirror 127.0.0.1:5000/docker.io/olmtest/a:2"]);
        let tag_only_blocked = conf(
            "[[registry]]\nlocation = \"r.example.com\"\nblocked = true\nmirror-by-digest-only = true\n\
             [[registry.mirror]]\nlocation = \"m.example.com\"\n",
        );
        let err = tag_only_blocked.pull_sources(&"r.example.com/a:1".parse().unwrap()).unwrap_err().to_string();
        assert!(
            err.contains("r.example.com/a:1") && err.contains("blocked") && err.contains("registries.conf"),
            "{err}"
        );
    }

    #[test]
    fn longest_prefix_wins_and_wildcards_match_subdomains() {
        let c = conf(
            r#"
[[registry]]
prefix = "a.example.com/team"
location = "internal.local/team-a"
[[registry]]
location = "a.example.com"
[[registry.mirror]]
location = "host.local"
[[registry]]
prefix = "*.example.com"
[[registry.mirror]]
location = "wild.local"
"#,
        );
        assert_eq!(sources(&c, "a.example.com/team/app:1"), ["source internal.local/team-a/app:1"]);
        assert_eq!(
            sources(&c, "a.example.com/other/app:1"),
            ["mirror host.local/other/app:1", "source a.example.com/other/app:1"]
        );
        assert_eq!(sources(&c, "b.example.com/x/app:1"), ["mirror wild.local/x/app:1", "source b.example.com/x/app:1"]);
        assert_eq!(
            sources(&c, "example.com/x/app:1"),
            ["source example.com/x/app:1"],
            "the bare domain is no subdomain"
        );
        assert_eq!(
            sources(&c, "bb.example.com/x/app:1"),
            ["mirror wild.local/x/app:1", "source bb.example.com/x/app:1"]
        );
        assert_eq!(matching_prefix("b.example.com:5000/x:1", "*.example.com"), Some("b.example.com".len()));
    }

    #[test]
    fn tag_only_mirrors_and_insecure_locations() {
        let c = conf(
            "[[registry]]\nlocation = \"r.example.com\"\ninsecure = true\n\
             [[registry.mirror]]\nlocation = \"m.example.com:5000/r\"\npull-from-mirror = \"tag-only\"\ninsecure = true\n",
        );
        assert_eq!(sources(&c, "r.example.com/a:1"), ["mirror m.example.com:5000/r/a:1", "source r.example.com/a:1"]);
        let d = "sha256:".to_string() + &"b".repeat(64);
        assert_eq!(sources(&c, &format!("r.example.com/a@{d}")), [format!("source r.example.com/a@{d}")]);
        assert!(c.is_insecure("m.example.com:5000") && c.is_insecure("r.example.com"));
        assert!(!c.is_insecure("m.example.com") && !c.is_insecure("quay.io"));
    }

    #[test]
    fn drop_ins_replace_tables_of_the_same_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("registries.conf");
        std::fs::write(&main, LOCAL).unwrap();
        std::fs::create_dir(dir.path().join("registries.conf.d")).unwrap();
        std::fs::write(
            dir.path().join("registries.conf.d/50-quay.conf"),
            "[[registry]]\nprefix = \"quay.io\"\nlocation = \"quay.io\"\n[[registry.mirror]]\nlocation = \"other.local\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("registries.conf.d/README"), "not toml").unwrap();
        let c = RegistriesConf::load(&main).unwrap();
        assert_eq!(c.files.len(), 2);
        assert_eq!(sources(&c, "quay.io/a/b:1"), ["mirror other.local/a/b:1", "source quay.io/a/b:1"]);
        assert_eq!(c.registries.len(), 2);
    }

    #[test]
    fn malformed_files_are_named() {
        let mut c = RegistriesConf::default();
        for (text, want) in [
            ("[registries.search]\nregistries = []\n", "version 1"),
            ("[[registry]]\nlocation = \"https://quay.io\"\n", "URL scheme"),
            ("[[registry]]\nprefix = \"*.x.com\"\nlocation = \"y.com\"\n", "wildcard"),
            ("[[registry]]\ninsecure = true\n", "neither prefix nor location"),
            (
                "[[registry]]\nlocation = \"q\"\n[[registry.mirror]]\nlocation = \"m\"\npull-from-mirror = \"sometimes\"\n",
                "not valid",
            ),
            ("[[registry]\n", "not valid"),
        ] {
            let err = c.merge(Path::new("/etc/x.conf"), text).unwrap_err().to_string();
            assert!(err.contains("/etc/x.conf") && err.contains(want), "{text}: {err}");
        }
        let missing = RegistriesConf::load(Path::new("/nonexistent/registries.conf")).unwrap_err().to_string();
        assert!(missing.contains("/nonexistent/registries.conf") && missing.contains("cannot read"), "{missing}");
    }
}
