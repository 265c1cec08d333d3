//! Image layers: build a deterministic gzip tar layer from a directory tree, and unpack the
//! layers of an image into a directory safely.
//!
//! Building: entries sorted by path, directories `0755`, files `0644` (`0755` if executable),
//! mtime 0, uid/gid 0, no user/group names, gzip header without a timestamp — the same tree
//! always gives the same bytes and digest.
//!
//! Unpacking follows the OCI image-spec layer rules (`layer.md` "Applying changesets"): layers are
//! applied in order, later files overwrite earlier ones, `.wh.NAME` deletes `NAME` from lower
//! layers and `.wh..wh..opq` empties its directory. Paths that are absolute or contain `..`,
//! symlinks whose target leaves the destination, hard links to paths outside it, and writes
//! through a symlink are refused with an error naming the entry.

use std::collections::BTreeMap;
use std::io::{Read, Write as _};
use std::path::{Component, Path, PathBuf};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use super::cache::sha256_digest;
use super::error::{OciError, Result};
use super::registry::Blob;

/// OCI media type of a gzip-compressed tar layer.
pub const MEDIA_TYPE_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// OCI media type of an uncompressed tar layer.
pub const MEDIA_TYPE_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
/// Docker v2 media type of a gzip-compressed tar layer.
pub const MEDIA_TYPE_DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
/// Docker v2 media type of an uncompressed tar layer (rare, but allowed).
pub const MEDIA_TYPE_DOCKER_LAYER_TAR: &str = "application/vnd.docker.image.rootfs.diff.tar";
/// OCI media type of an image config.
pub const MEDIA_TYPE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// One entry of a layer to build: a path relative to the image root (`/`-separated, no leading
/// `/`) and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayerEntry {
    /// A directory.
    Dir(String),
    /// A regular file with its bytes and whether it is executable.
    File(String, Vec<u8>, bool),
}

impl LayerEntry {
    fn path(&self) -> &str {
        match self {
            LayerEntry::Dir(p) | LayerEntry::File(p, _, _) => p,
        }
    }
}

/// A built layer: the compressed blob and the digest of the uncompressed tar (the config's
/// `rootfs.diff_ids` entry).
#[derive(Debug, Clone)]
pub struct BuiltLayer {
    /// The gzip blob with its descriptor (`application/vnd.oci.image.layer.v1.tar+gzip`).
    pub blob: Blob,
    /// `sha256:` of the uncompressed tar.
    pub diff_id: String,
}

/// Collects the tree under `dir` as layer entries below `prefix` (e.g. `manifests`), sorted.
/// Symlinks are refused (a bundle or catalog directory holds plain files), as are non-UTF-8 names.
///
/// Errors: unreadable files, symlinks, special files ([`OciError::Io`]).
pub fn entries_from_dir(dir: &Path, prefix: &str) -> Result<Vec<LayerEntry>> {
    let mut out = vec![LayerEntry::Dir(prefix.trim_end_matches('/').to_string())];
    for item in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let item = item.map_err(|e| {
            let path = e.path().map(Path::to_path_buf).unwrap_or_else(|| dir.to_path_buf());
            OciError::io(path, std::io::Error::other(e.to_string()))
        })?;
        let rel = item
            .path()
            .strip_prefix(dir)
            .map_err(|e| OciError::io(item.path(), std::io::Error::other(e.to_string())))?;
        let rel = rel.to_str().ok_or_else(|| {
            OciError::io(
                item.path(),
                std::io::Error::other("file name is not UTF-8; rename it"),
            )
        })?;
        let path = format!("{}/{}", prefix.trim_end_matches('/'), rel.replace('\\', "/"));
        let ft = item.file_type();
        if ft.is_dir() {
            out.push(LayerEntry::Dir(path));
        } else if ft.is_file() {
            let data = std::fs::read(item.path()).map_err(|e| OciError::io(item.path(), e))?;
            let exec = is_executable(item.path());
            out.push(LayerEntry::File(path, data, exec));
        } else {
            return Err(OciError::io(
                item.path(),
                std::io::Error::other(
                    "is a symlink or special file; image layers built by capstan hold only regular files and directories: replace it with a copy",
                ),
            ));
        }
    }
    Ok(out)
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(_: &Path) -> bool {
    false
}

/// Builds a deterministic gzip tar layer from `entries` (sorted by path here; duplicates keep the
/// last).
///
/// Errors: a path that is empty, absolute or contains `..`.
pub fn build_layer(entries: Vec<LayerEntry>) -> Result<BuiltLayer> {
    let mut sorted: BTreeMap<String, LayerEntry> = BTreeMap::new();
    for e in entries {
        let p = e.path().trim_matches('/').to_string();
        if p.is_empty() || p.split('/').any(|c| c == ".." || c == "." || c.is_empty()) {
            return Err(OciError::io(
                PathBuf::from(e.path()),
                std::io::Error::other("layer path must be relative without . or .. components"),
            ));
        }
        sorted.insert(p, e);
    }
    let mut tar = tar::Builder::new(Vec::new());
    tar.mode(tar::HeaderMode::Deterministic);
    for (path, e) in &sorted {
        let mut h = tar::Header::new_gnu();
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        let res = match e {
            LayerEntry::Dir(_) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                tar.append_data(&mut h, format!("{path}/"), std::io::empty())
            }
            LayerEntry::File(_, data, exec) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(if *exec { 0o755 } else { 0o644 });
                h.set_size(data.len() as u64);
                tar.append_data(&mut h, path, data.as_slice())
            }
        };
        res.map_err(|err| OciError::io(PathBuf::from(path), err))?;
    }
    let tar_bytes = tar
        .into_inner()
        .map_err(|e| OciError::io(PathBuf::from("(layer)"), e))?;
    let diff_id = sha256_digest(&tar_bytes);
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&tar_bytes)
        .map_err(|e| OciError::io(PathBuf::from("(layer)"), e))?;
    let data = gz
        .finish()
        .map_err(|e| OciError::io(PathBuf::from("(layer)"), e))?;
    Ok(BuiltLayer {
        blob: Blob::new(MEDIA_TYPE_LAYER_GZIP, data),
        diff_id,
    })
}

/// An OCI image config (`application/vnd.oci.image.config.v1+json`) for a non-runnable image:
/// `linux/amd64` (fixed, so that the digest does not depend on the machine that builds it),
/// `config.Labels`, and `rootfs.diff_ids`. Keys are written in a fixed order.
pub fn image_config(labels: &BTreeMap<String, String>, diff_ids: &[String]) -> Blob {
    let config = serde_json::json!({
        "architecture": "amd64",
        "config": { "Labels": labels },
        "os": "linux",
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
    });
    Blob::new(
        MEDIA_TYPE_CONFIG,
        serde_json::to_vec(&config).unwrap_or_default(),
    )
}

/// Which part of an image to unpack.
#[derive(Debug, Clone, Default)]
pub struct UnpackOptions {
    /// Unpack only the tree under this image directory (e.g. `configs`), written at the top of
    /// the destination. `None` unpacks the whole image.
    pub subdir: Option<String>,
}

/// What an unpack wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnpackSummary {
    /// Regular files written (counting overwrites once per write).
    pub files: usize,
    /// Bytes of regular files written.
    pub bytes: u64,
}

/// Unpacks `layers` (in manifest order) into `dest`, creating it if needed.
/// `reference` names the image in errors.
///
/// Errors: [`OciError::Unpack`] for unsupported layer media types (zstd, foreign layers), corrupt
/// tar/gzip, absolute paths, `..`, escaping symlinks or hard links, writes through symlinks;
/// [`OciError::Io`] for filesystem errors.
pub fn unpack_layers(
    reference: &str,
    layers: &[Blob],
    dest: &Path,
    opts: &UnpackOptions,
) -> Result<UnpackSummary> {
    std::fs::create_dir_all(dest).map_err(|e| OciError::io(dest, e))?;
    let subdir: Vec<String> = opts
        .subdir
        .as_deref()
        .map(|s| {
            s.split('/')
                .filter(|c| !c.is_empty() && *c != ".")
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut summary = UnpackSummary::default();
    for layer in layers {
        let digest = layer.descriptor.digest.clone();
        let err = |reason: String| OciError::Unpack {
            reference: reference.to_string(),
            layer: digest.clone(),
            reason,
        };
        let reader: Box<dyn Read> = match layer.descriptor.media_type.as_str() {
            MEDIA_TYPE_LAYER_GZIP | MEDIA_TYPE_DOCKER_LAYER_GZIP => {
                Box::new(GzDecoder::new(layer.data.as_slice()))
            }
            MEDIA_TYPE_LAYER_TAR | MEDIA_TYPE_DOCKER_LAYER_TAR => Box::new(layer.data.as_slice()),
            other => {
                // Some tools label gzip layers loosely; trust the gzip magic number.
                if layer.data.starts_with(&[0x1f, 0x8b]) && !other.contains("zstd") {
                    Box::new(GzDecoder::new(layer.data.as_slice()))
                } else {
                    return Err(err(format!(
                        "layer media type {other:?} is not supported (only tar and tar+gzip layers are); rebuild the image with gzip compression"
                    )));
                }
            }
        };
        let mut archive = tar::Archive::new(reader);
        let entries = archive
            .entries()
            .map_err(|e| err(format!("not a tar archive: {e}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| err(format!("corrupt tar: {e}")))?;
            let raw_path = entry
                .path()
                .map_err(|e| err(format!("entry path: {e}")))?
                .into_owned();
            let Some(rel) = clean_path(&raw_path).map_err(err)? else {
                continue; // the root directory itself
            };
            // Select and re-root under the wanted subdirectory.
            let rel: Vec<String> = if subdir.is_empty() {
                rel
            } else if rel.len() < subdir.len() {
                // An opaque whiteout in an ancestor of the subdirectory empties it too.
                let name = rel.last().map(String::as_str).unwrap_or("");
                if name == ".wh..wh..opq" && subdir.starts_with(&rel[..rel.len() - 1]) {
                    clear_dir(dest)?;
                } else if let Some(hidden) = name.strip_prefix(".wh.")
                    && rel.len() <= subdir.len()
                    && subdir.starts_with(&rel[..rel.len() - 1])
                    && subdir[rel.len() - 1] == hidden
                {
                    clear_dir(dest)?;
                }
                continue;
            } else if rel[..subdir.len()] == subdir[..] {
                rel[subdir.len()..].to_vec()
            } else {
                continue;
            };
            if rel.is_empty() {
                continue;
            }
            let name = rel.last().map(String::as_str).unwrap_or("");
            let parent_rel = &rel[..rel.len() - 1];
            let parent = join(dest, parent_rel);
            check_no_symlink_ancestors(dest, parent_rel).map_err(&err)?;
            if name == ".wh..wh..opq" {
                if parent.is_dir() {
                    clear_dir(&parent)?;
                }
                continue;
            }
            if let Some(hidden) = name.strip_prefix(".wh.") {
                let victim = parent.join(hidden);
                remove_any(&victim)?;
                continue;
            }
            let target = parent.join(name);
            let kind = entry.header().entry_type();
            match kind {
                tar::EntryType::Directory => {
                    if target.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
                        remove_any(&target)?;
                    }
                    std::fs::create_dir_all(&target).map_err(|e| OciError::io(&target, e))?;
                }
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    std::fs::create_dir_all(&parent).map_err(|e| OciError::io(&parent, e))?;
                    remove_any(&target)?;
                    let mut data = Vec::new();
                    entry
                        .read_to_end(&mut data)
                        .map_err(|e| err(format!("reading {}: {e}", raw_path.display())))?;
                    std::fs::write(&target, &data).map_err(|e| OciError::io(&target, e))?;
                    set_mode(&target, entry.header().mode().unwrap_or(0o644));
                    summary.files += 1;
                    summary.bytes += data.len() as u64;
                }
                tar::EntryType::Symlink => {
                    let link = entry
                        .link_name()
                        .map_err(|e| err(format!("link name: {e}")))?
                        .ok_or_else(|| err(format!("symlink {} has no target", raw_path.display())))?
                        .into_owned();
                    if link.is_absolute() || !stays_inside(parent_rel, &link) {
                        return Err(err(format!(
                            "symlink {} points to {}, outside the destination; refusing to unpack it",
                            raw_path.display(),
                            link.display()
                        )));
                    }
                    std::fs::create_dir_all(&parent).map_err(|e| OciError::io(&parent, e))?;
                    remove_any(&target)?;
                    make_symlink(&link, &target)?;
                }
                tar::EntryType::Link => {
                    let link = entry
                        .link_name()
                        .map_err(|e| err(format!("link name: {e}")))?
                        .ok_or_else(|| err(format!("hard link {} has no target", raw_path.display())))?
                        .into_owned();
                    let link_rel = clean_path(&link)
                        .map_err(&err)?
                        .ok_or_else(|| err(format!("hard link {} points to the root", raw_path.display())))?;
                    let link_rel: Vec<String> = if subdir.is_empty() {
                        link_rel
                    } else if link_rel.len() > subdir.len() && link_rel[..subdir.len()] == subdir[..] {
                        link_rel[subdir.len()..].to_vec()
                    } else {
                        return Err(err(format!(
                            "hard link {} points to {}, outside the unpacked directory",
                            raw_path.display(),
                            link.display()
                        )));
                    };
                    check_no_symlink_ancestors(dest, &link_rel[..link_rel.len() - 1]).map_err(&err)?;
                    let source = join(dest, &link_rel);
                    if source.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
                        return Err(err(format!(
                            "hard link {} points to symlink {}; refusing",
                            raw_path.display(),
                            link.display()
                        )));
                    }
                    std::fs::create_dir_all(&parent).map_err(|e| OciError::io(&parent, e))?;
                    remove_any(&target)?;
                    std::fs::copy(&source, &target).map_err(|e| OciError::io(&source, e))?;
                    summary.files += 1;
                }
                // Devices, FIFOs and extended headers (already applied by the tar reader) are
                // not content of a bundle or catalog.
                _ => {}
            }
        }
    }
    Ok(summary)
}

/// Splits a tar path into normal components, dropping `./`; errors on absolute paths and `..`.
fn clean_path(p: &Path) -> std::result::Result<Option<Vec<String>>, String> {
    let mut out = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::Normal(s) => out.push(
                s.to_str()
                    .ok_or_else(|| format!("entry {} has a non-UTF-8 name", p.display()))?
                    .to_string(),
            ),
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "entry {} has an absolute path; refusing to unpack it",
                    p.display()
                ));
            }
            Component::ParentDir => {
                return Err(format!(
                    "entry {} contains `..` (path traversal); refusing to unpack it",
                    p.display()
                ));
            }
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// True if a relative symlink target, resolved from directory `from` (components below the
/// destination), stays inside the destination.
fn stays_inside(from: &[String], link: &Path) -> bool {
    let mut depth = from.len() as isize;
    for c in link.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

fn join(dest: &Path, rel: &[String]) -> PathBuf {
    let mut p = dest.to_path_buf();
    for c in rel {
        p.push(c);
    }
    p
}

fn check_no_symlink_ancestors(dest: &Path, rel: &[String]) -> std::result::Result<(), String> {
    let mut p = dest.to_path_buf();
    for c in rel {
        p.push(c);
        if p.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "an entry would be written through symlink {}; refusing",
                p.display()
            ));
        }
    }
    Ok(())
}

fn remove_any(p: &Path) -> Result<()> {
    match p.symlink_metadata() {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p).map_err(|e| OciError::io(p, e)),
        Ok(_) => std::fs::remove_file(p).map_err(|e| OciError::io(p, e)),
        Err(_) => Ok(()),
    }
}

fn clear_dir(dir: &Path) -> Result<()> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(_) => return Ok(()),
    };
    for item in rd {
        let item = item.map_err(|e| OciError::io(dir, e))?;
        remove_any(&item.path())?;
    }
    Ok(())
}

#[cfg(unix)]
fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    // Keep owner read/write so that the tree can be overwritten and removed later.
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode((mode & 0o777) | 0o600));
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) {}

#[cfg(unix)]
fn make_symlink(link: &Path, at: &Path) -> Result<()> {
    std::os::unix::fs::symlink(link, at).map_err(|e| OciError::io(at, e))
}

#[cfg(not(unix))]
fn make_symlink(_link: &Path, at: &Path) -> Result<()> {
    Err(OciError::io(at, std::io::Error::other("symlinks are not supported here")))
}

/// Removes what a failed pull wrote into `dest`, which was absent or empty before the pull (the
/// pulls refuse any other destination, so everything in it is the pull's own): `dest` itself when
/// the pull created it, else everything inside it. Symbolic links are removed, never followed.
/// Best effort: errors while removing are ignored, the pull's own error is what the user sees.
pub fn discard_partial_unpack(dest: &Path, existed_before: bool) {
    if !existed_before {
        let _ = std::fs::remove_dir_all(dest);
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dest) {
        for entry in entries.flatten() {
            let path = entry.path();
            let _ = match entry.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
                _ => std::fs::remove_file(&path),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_layer(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Blob {
        let mut b = tar::Builder::new(Vec::new());
        build(&mut b);
        Blob::new(MEDIA_TYPE_LAYER_TAR, b.into_inner().unwrap())
    }

    fn file(b: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8]) {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        // set_path refuses `..`; write the raw name to build hostile archives.
        let name = &mut h.as_old_mut().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        b.append(&h, data).unwrap();
    }

    fn symlink(b: &mut tar::Builder<Vec<u8>>, path: &str, target: &str) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        b.append_link(&mut h, path, target).unwrap();
    }

    #[test]
    fn build_is_deterministic_and_round_trips() {
        let entries = vec![
            LayerEntry::File("manifests/b.yaml".into(), b"b".to_vec(), false),
            LayerEntry::Dir("manifests".into()),
            LayerEntry::File("manifests/a.yaml".into(), b"a".to_vec(), false),
            LayerEntry::Dir("metadata".into()),
            LayerEntry::File("metadata/annotations.yaml".into(), b"x: y\n".to_vec(), false),
        ];
        let mut shuffled = entries.clone();
        shuffled.reverse();
        let one = build_layer(entries).unwrap();
        let two = build_layer(shuffled).unwrap();
        assert_eq!(one.blob.descriptor.digest, two.blob.descriptor.digest);
        assert_eq!(one.diff_id, two.diff_id);
        let dir = tempfile::tempdir().unwrap();
        let s = unpack_layers("r", &[one.blob], dir.path(), &UnpackOptions::default()).unwrap();
        assert_eq!(s.files, 3);
        assert_eq!(std::fs::read(dir.path().join("manifests/a.yaml")).unwrap(), b"a");
        assert_eq!(std::fs::read(dir.path().join("metadata/annotations.yaml")).unwrap(), b"x: y\n");
        assert!(build_layer(vec![LayerEntry::Dir("../x".into())]).is_err());
    }

    #[test]
    fn refuses_traversal_absolute_and_escaping_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out");
        for (layer, what) in [
            (raw_layer(|b| file(b, "../evil", b"x")), ".."),
            (raw_layer(|b| file(b, "/etc/evil", b"x")), "absolute"),
            (raw_layer(|b| symlink(b, "manifests/l", "../../etc")), "outside"),
            (raw_layer(|b| symlink(b, "l", "/etc")), "outside"),
            (
                raw_layer(|b| {
                    symlink(b, "m", "x");
                    file(b, "m/f", b"x");
                }),
                "through symlink",
            ),
        ] {
            let err = unpack_layers("reg/x:1", &[layer], &dest, &UnpackOptions::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(what) && err.contains("reg/x:1"), "{what}: {err}");
        }
        assert!(!dir.path().join("evil").exists());
        // A symlink that stays inside is fine.
        let ok = raw_layer(|b| {
            file(b, "manifests/a", b"a");
            symlink(b, "manifests/l", "a");
        });
        let dest2 = dir.path().join("ok");
        unpack_layers("r", &[ok], &dest2, &UnpackOptions::default()).unwrap();
        assert_eq!(std::fs::read(dest2.join("manifests/l")).unwrap(), b"a");
    }

    #[test]
    fn later_layers_overwrite_and_whiteouts_delete() {
        let l1 = raw_layer(|b| {
            file(b, "manifests/a.yaml", b"old");
            file(b, "manifests/gone.yaml", b"x");
            file(b, "metadata/keep.yaml", b"k");
            file(b, "tests/x", b"t");
        });
        let l2 = raw_layer(|b| {
            file(b, "manifests/a.yaml", b"new");
            file(b, "manifests/.wh.gone.yaml", b"");
            file(b, "tests/.wh..wh..opq", b"");
            file(b, "tests/y", b"y");
        });
        let dir = tempfile::tempdir().unwrap();
        unpack_layers("r", &[l1, l2], dir.path(), &UnpackOptions::default()).unwrap();
        assert_eq!(std::fs::read(dir.path().join("manifests/a.yaml")).unwrap(), b"new");
        assert!(!dir.path().join("manifests/gone.yaml").exists());
        assert!(!dir.path().join("manifests/.wh.gone.yaml").exists());
        assert!(dir.path().join("metadata/keep.yaml").exists());
        assert!(!dir.path().join("tests/x").exists());
        assert!(dir.path().join("tests/y").exists());
    }

    #[test]
    fn subdir_selects_and_reroots() {
        let l = raw_layer(|b| {
            file(b, "configs/pkg/catalog.json", b"{}");
            file(b, "bin/opm", b"elf");
            file(b, "./configs/other.yaml", b"y");
        });
        let dir = tempfile::tempdir().unwrap();
        let opts = UnpackOptions {
            subdir: Some("/configs".into()),
        };
        let s = unpack_layers("r", &[l], dir.path(), &opts).unwrap();
        assert_eq!(s.files, 2);
        assert!(dir.path().join("pkg/catalog.json").exists());
        assert!(dir.path().join("other.yaml").exists());
        assert!(!dir.path().join("bin").exists());
        assert!(!dir.path().join("configs").exists());
    }

    #[test]
    fn zstd_layers_are_named_unsupported() {
        let mut blob = Blob::new("application/vnd.oci.image.layer.v1.tar+zstd", vec![0x28, 0xb5]);
        blob.descriptor.digest = "sha256:abc".into();
        let dir = tempfile::tempdir().unwrap();
        let err = unpack_layers("r", &[blob], dir.path(), &UnpackOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("zstd") && err.contains("sha256:abc"), "{err}");
    }
}
