//! On-disk content-addressed cache of manifests and blobs: `<root>/oci/blobs/sha256/<hex>`,
//! the layout of an OCI image layout's `blobs/` directory. Entries are written atomically
//! (temporary file + rename) and verified against their digest when read, so a truncated or
//! corrupted entry is treated as missing and fetched again.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::error::{OciError, Result};

/// A content-addressed blob cache rooted at a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobCache {
    root: PathBuf,
}

impl BlobCache {
    /// A cache rooted at `root` (the capstan cache directory; blobs go under `root/oci/blobs`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        BlobCache { root: root.into() }
    }

    /// `$CAPSTAN_CACHE`, else `$XDG_CACHE_HOME/capstan`, else `~/.cache/capstan`.
    pub fn default_root() -> PathBuf {
        default_cache_root()
    }

    /// The cache in [`Self::default_root`], after checking that the directory can be created and
    /// written, so that a command fails at once rather than after a download.
    ///
    /// # Errors
    /// [`OciError::CacheUnusable`], naming the directory and where its path came from.
    pub fn open_default() -> Result<Self> {
        let root = default_cache_root();
        check_cache_dir(&root).map_err(|source| OciError::CacheUnusable {
            path: root.clone(),
            origin: cache_root_origin(),
            source,
        })?;
        Ok(BlobCache::new(root))
    }

    /// The cache's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of the entry for `digest` (`sha256:<64 hex>`), or `None` if the digest is not a
    /// well-formed sha256 digest (other algorithms are not cached).
    pub fn path_for(&self, digest: &str) -> Option<PathBuf> {
        let hex = sha256_hex(digest)?;
        Some(self.root.join("oci").join("blobs").join("sha256").join(hex))
    }

    /// The cached bytes of `digest`, verified; `None` when absent or corrupt (a corrupt entry is
    /// removed).
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.path_for(digest)?;
        let bytes = std::fs::read(&path).ok()?;
        if sha256_digest(&bytes) == digest {
            Some(bytes)
        } else {
            tracing::warn!(path = %path.display(), "corrupt cache entry removed");
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// As [`Self::get`], but `None` without reading the entry when its length is not `size`
    /// (the size a descriptor declares), so that a cached blob is never read past the size the
    /// manifest at hand allows.
    pub fn get_sized(&self, digest: &str, size: u64) -> Option<Vec<u8>> {
        let path = self.path_for(digest)?;
        if std::fs::metadata(&path).ok()?.len() != size {
            return None;
        }
        self.get(digest)
    }

    /// True if an entry for `digest` exists (not verified).
    pub fn contains(&self, digest: &str) -> bool {
        self.path_for(digest).is_some_and(|p| p.is_file())
    }

    /// Stores `bytes` under `digest` after checking that they hash to it.
    ///
    /// Errors: the bytes do not match the digest, or the cache directory is not writable.
    pub fn put(&self, digest: &str, bytes: &[u8]) -> Result<()> {
        let Some(path) = self.path_for(digest) else {
            return Ok(());
        };
        let actual = sha256_digest(bytes);
        if actual != digest {
            return Err(OciError::DigestMismatch {
                reference: "(cache)".into(),
                registry: self.root.display().to_string(),
                what: "blob",
                expected: digest.to_string(),
                actual,
            });
        }
        if path.is_file() {
            return Ok(());
        }
        write_atomic(&path, bytes).map_err(|e| OciError::io(&path, e))
    }
}

/// The one atomic file writer: writes `bytes` to `path` through a temporary file in the same
/// directory (created if missing), synced, then renamed over `path` ([`tempfile::NamedTempFile`]),
/// so readers see the old content or the new, never a part.
///
/// # Errors
/// The operating system's error; the caller names `path` in its own error type.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A scratch directory under the system temp directory, named `<prefix>-…`, removed with its
/// content when dropped ([`tempfile::TempDir`]).
///
/// # Errors
/// The directory cannot be created.
pub fn scratch_dir(prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(&format!("{prefix}-")).tempdir().map_err(|e| OciError::io(std::env::temp_dir(), e))
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The hex part of a well-formed `sha256:<64 lowercase hex>` digest.
pub fn sha256_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))).then_some(hex)
}

/// Creates `dir` if needed and checks that a file can be created in it (the probe file is removed).
///
/// # Errors
/// The I/O error: `dir` is a file or lies below one, or it is not writable.
pub fn check_cache_dir(dir: &Path) -> std::io::Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotADirectory, "it exists and is not a directory"));
    }
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(format!(".capstan-probe-{}", std::process::id()));
    std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&probe)?;
    std::fs::remove_file(&probe)
}

/// Which setting [`default_cache_root`] took its directory from, for messages.
fn cache_root_origin() -> &'static str {
    let set = |v: &str| std::env::var_os(v).is_some_and(|d| !d.is_empty());
    if set("CAPSTAN_CACHE") {
        "from $CAPSTAN_CACHE"
    } else if set("XDG_CACHE_HOME") {
        "from $XDG_CACHE_HOME, as CAPSTAN_CACHE is not set"
    } else if set("HOME") {
        "the default, as CAPSTAN_CACHE is not set"
    } else {
        "in the temp directory, as CAPSTAN_CACHE and HOME are not set"
    }
}

/// Default cache root: `$CAPSTAN_CACHE`, else `$XDG_CACHE_HOME/capstan`, else `~/.cache/capstan`.
pub fn default_cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("CAPSTAN_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("capstan");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".cache").join("capstan"),
        None => std::env::temp_dir().join("capstan-cache"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_check_creates_the_directory_and_rejects_a_file() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("a/b");
        check_cache_dir(&dir).unwrap();
        assert!(dir.is_dir());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the probe file is removed");
        let file = t.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(check_cache_dir(&file).is_err());
        assert!(check_cache_dir(&file.join("below")).is_err());
    }

    #[test]
    fn put_get_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let c = BlobCache::new(dir.path());
        let d = sha256_digest(b"hello");
        assert!(c.get(&d).is_none());
        c.put(&d, b"hello").unwrap();
        assert_eq!(c.get(&d).as_deref(), Some(&b"hello"[..]));
        assert!(c.put(&sha256_digest(b"other"), b"hello").is_err());
        // Corrupt the entry: it is dropped, not returned.
        std::fs::write(c.path_for(&d).unwrap(), b"HELLO").unwrap();
        assert!(c.get(&d).is_none());
        assert!(!c.contains(&d));
        assert!(c.path_for("sha512:abc").is_none());
        assert!(c.path_for("sha256:../../etc").is_none());
    }
}
