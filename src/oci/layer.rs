//! Image layers: build a deterministic gzip tar layer from a directory tree, and unpack the
//! layers of an image into a directory safely.
//!
//! Building: entries sorted by path, directories `0755`, files `0644` (`0755` if executable),
//! mtime 0, uid/gid 0, no user/group names, gzip header without a timestamp — the same tree
//! always gives the same bytes and digest.
//!
//! Unpacking follows the OCI image-spec layer rules (`layer.md` "Applying changesets"): layers are
//! applied in order, later files overwrite earlier ones, `.wh.NAME` deletes `NAME` from lower
//! layers and `.wh..wh..opq` empties its directory of lower layers' entries. Refused, with an
//! error naming the image, the layer digest and the entry: paths that are absolute or contain
//! `..`, whiteouts that do not name a file, symlinks, devices and FIFOs (one rule with directories
//! on disk, [`PLAIN_FILES_RULE`]), hard links to anything but a regular file unpacked before them,
//! and content over the [`Limits`] (each file, the uncompressed total, the number of entries).
//! Files stream to disk; nothing is held in memory beyond the compressed layer.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write as _};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use super::cache::sha256_digest;
use super::error::{OciError, Result};
use super::limits::{Limit, Limits};
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
/// Symlinks and special files are refused ([`check_plain_file_type`]), as are non-UTF-8 names.
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
        let rel = rel
            .to_str()
            .ok_or_else(|| OciError::io(item.path(), std::io::Error::other("file name is not UTF-8; rename it")))?;
        let path = format!("{}/{}", prefix.trim_end_matches('/'), rel.replace('\\', "/"));
        let ft = item.file_type();
        check_plain_file_type(ft).map_err(|e| OciError::io(item.path(), e))?;
        if ft.is_dir() {
            out.push(LayerEntry::Dir(path));
        } else {
            let data = std::fs::read(item.path()).map_err(|e| OciError::io(item.path(), e))?;
            let exec = is_executable(item.path());
            out.push(LayerEntry::File(path, data, exec));
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
    let tar_bytes = tar.into_inner().map_err(|e| OciError::io(PathBuf::from("(layer)"), e))?;
    let diff_id = sha256_digest(&tar_bytes);
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&tar_bytes).map_err(|e| OciError::io(PathBuf::from("(layer)"), e))?;
    let data = gz.finish().map_err(|e| OciError::io(PathBuf::from("(layer)"), e))?;
    Ok(BuiltLayer { blob: Blob::new(MEDIA_TYPE_LAYER_GZIP, data), diff_id })
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
    Blob::new(MEDIA_TYPE_CONFIG, serde_json::to_vec(&config).unwrap_or_default())
}

/// Which part of an image to unpack, and within which limits.
#[derive(Debug, Clone, Default)]
pub struct UnpackOptions {
    /// Unpack only the tree under this image directory (e.g. `configs`), written at the top of
    /// the destination. `None` unpacks the whole image. Entries outside it are read past and
    /// never created, whatever their type.
    pub subdir: Option<String>,
    /// Bounds on each file ([`Limits::file_bytes`]), on the uncompressed tar streams of all layers
    /// ([`Limits::unpacked_bytes`]) and on the number of entries ([`Limits::entries`]).
    pub limits: Limits,
}

/// What an unpack wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnpackSummary {
    /// Regular files written (counting overwrites once per write; hard links count as files).
    pub files: usize,
    /// Bytes of regular files written.
    pub bytes: u64,
}

/// The rule for symlinks, devices, FIFOs and sockets, in images and in directories on disk
/// alike; every refusal quotes it.
pub const PLAIN_FILES_RULE: &str = "bundles and catalogs hold only regular files and directories, and capstan follows no symlink, in an image or in a directory on disk: replace it with a copy of the file";

/// Checks that an entry of a bundle or catalog directory read from disk (`file_type` as
/// `symlink_metadata` or `DirEntry::file_type` give it, not following links) is a regular file
/// or a directory. The one check behind `bundle validate|push`, `catalog render|add|validate|push`
/// and [`unpack_layers`].
///
/// Errors: an `InvalidInput` I/O error naming the kind of file and [`PLAIN_FILES_RULE`]; callers
/// wrap it with the path.
pub fn check_plain_file_type(file_type: std::fs::FileType) -> std::io::Result<()> {
    if file_type.is_file() || file_type.is_dir() {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("is {}; {PLAIN_FILES_RULE}", describe_file_type(file_type)),
    ))
}

fn describe_file_type(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_block_device() || ft.is_char_device() {
            return "a device file";
        }
    }
    if ft.is_symlink() { "a symlink" } else { "not a regular file or directory" }
}

/// The opaque whiteout marker (OCI image-spec `layer.md`, "Opaque Whiteout").
const OPAQUE: &str = ".wh..wh..opq";

/// A whiteout entry: `.wh..wh..opq` or `.wh.NAME`.
enum Whiteout {
    /// Hides every lower-layer entry of the directory it is in.
    Opaque,
    /// Hides the lower-layer entry `NAME` of the directory it is in.
    Hide(String),
}

/// Why a tar entry's path is refused; [`unpack_layers`] words it into [`OciError::Unpack`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum EntryRefusal {
    /// A path component that is not UTF-8 (the path as shown).
    #[error("entry {0} has a non-UTF-8 name")]
    NonUtf8(String),
    /// An absolute path.
    #[error("entry {0} has an absolute path; refusing to unpack it")]
    Absolute(String),
    /// A path with `..`.
    #[error("entry {0} contains `..` (path traversal); refusing to unpack it")]
    Traversal(String),
    /// A path below a symlink already in the destination (the symlink's path).
    #[error("an entry would be written through symlink {0}; refusing")]
    ThroughSymlink(String),
    /// A `.wh.` name that does not name a file.
    #[error(
        "whiteout {name:?} does not name a file (OCI image-spec layer.md: a whiteout is `.wh.` followed by the name of a file or directory of a lower layer, or the opaque marker {}); refusing the image",
        OPAQUE
    )]
    BadWhiteout {
        /// The entry's last path component.
        name: String,
    },
}

/// The whiteout a last path component stands for, if any (OCI image-spec `layer.md`,
/// "Whiteouts"). A `.wh.` name that does not name a file — empty, `.`, `..`, containing `/`, or
/// `.wh..wh.`-prefixed other than the opaque marker — is an error.
fn whiteout_of(name: &str) -> std::result::Result<Option<Whiteout>, EntryRefusal> {
    if name == OPAQUE {
        return Ok(Some(Whiteout::Opaque));
    }
    let Some(hidden) = name.strip_prefix(".wh.") else {
        return Ok(None);
    };
    if hidden.is_empty() || hidden == "." || hidden == ".." || hidden.contains('/') || hidden.starts_with(".wh.") {
        return Err(EntryRefusal::BadWhiteout { name: name.to_string() });
    }
    Ok(Some(Whiteout::Hide(hidden.to_string())))
}

/// A reader that counts the bytes read from all layers into a shared counter and fails once it
/// passes `limit`, so that a gzip bomb stops after `limit` bytes of output.
struct Counted<R> {
    inner: R,
    total: Rc<Cell<u64>>,
    limit: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let total = self.total.get().saturating_add(n as u64);
        self.total.set(total);
        if total > self.limit {
            return Err(std::io::Error::other("over the unpacked-size limit"));
        }
        Ok(n)
    }
}

/// Unpacks `layers` (in manifest order) into `dest`, creating it if needed.
/// `reference` names the image in errors.
///
/// Semantics: OCI image-spec `layer.md` "Applying Changesets": layers apply in order, a later
/// entry replaces an earlier one at the same path, `.wh.NAME` removes `NAME` and `.wh..wh..opq`
/// the content of its directory — both only what lower layers put there, never an entry of their
/// own layer, and only inside `dest`. Hard links are unpacked as copies of a regular file this
/// unpack already wrote inside `dest` (counted in the limits). Regular files stream to disk.
///
/// Errors (each naming the image, the layer digest and the entry):
/// [`OciError::Unpack`] for unsupported layer media types (zstd, foreign layers), corrupt
/// tar/gzip, absolute paths, `..`, malformed whiteouts, symlinks, devices and FIFOs
/// ([`PLAIN_FILES_RULE`]), hard links to anything but a regular file unpacked before them, writes
/// through a symlink already in `dest`; [`OciError::TooLarge`] for a file, the layers'
/// uncompressed size or the entry count over [`UnpackOptions::limits`]; [`OciError::Io`] for
/// filesystem errors. On error, what was written stays in `dest` (see [`discard_partial_unpack`]).
pub fn unpack_layers(reference: &str, layers: &[Blob], dest: &Path, opts: &UnpackOptions) -> Result<UnpackSummary> {
    std::fs::create_dir_all(dest).map_err(|e| OciError::io(dest, e))?;
    let subdir: Vec<String> = opts
        .subdir
        .as_deref()
        .map(|s| s.split('/').filter(|c| !c.is_empty() && *c != ".").map(str::to_string).collect())
        .unwrap_or_default();
    let mut unpack = Unpack {
        reference,
        dest,
        subdir,
        limits: &opts.limits,
        total: Rc::new(Cell::new(0u64)),
        entries_seen: 0,
        summary: UnpackSummary::default(),
    };
    for layer in layers {
        unpack.layer(layer)?;
    }
    Ok(unpack.summary)
}

/// One [`unpack_layers`] across all layers: the image, the destination, the part of the image
/// unpacked, the limits and what was counted and written so far.
struct Unpack<'a> {
    /// The image, for errors.
    reference: &'a str,
    dest: &'a Path,
    /// [`UnpackOptions::subdir`] as path components; empty for the whole image.
    subdir: Vec<String>,
    limits: &'a Limits,
    /// Uncompressed bytes read from all layers so far, shared with the [`Counted`] reader.
    total: Rc<Cell<u64>>,
    /// Tar entries read from all layers so far.
    entries_seen: u64,
    summary: UnpackSummary,
}

/// The layer being applied: its digest (for errors) and the paths it wrote, which its own
/// whiteouts never remove.
struct Layer {
    digest: String,
    own: HashSet<Vec<String>>,
}

/// Where a tar entry goes: the path as the archive wrote it (for errors), its components below
/// the destination, its parent directory and its own path on disk.
struct Placed {
    shown: String,
    rel: Vec<String>,
    parent: PathBuf,
    target: PathBuf,
}

impl Unpack<'_> {
    fn err(&self, layer: &Layer, reason: String) -> OciError {
        OciError::Unpack { reference: self.reference.to_string(), layer: layer.digest.clone(), reason }
    }

    /// A read error; after the counter passed the limit it is the limit, not corruption.
    fn read_err(&self, layer: &Layer, what: &str, e: std::io::Error) -> OciError {
        if self.total.get() > self.limits.unpacked_bytes {
            OciError::too_large(
                self.reference,
                format!("the uncompressed content of its layers (reading {what} of layer {})", layer.digest),
                format!("more than {} bytes", self.limits.unpacked_bytes),
                Limit::Unpacked,
                self.limits,
            )
        } else {
            self.err(layer, format!("{what}: {e}"))
        }
    }

    /// The tar stream of `blob`, decompressed by its media type.
    fn decoder<'b>(&self, layer: &Layer, blob: &'b Blob) -> Result<Box<dyn Read + 'b>> {
        Ok(match blob.descriptor.media_type.as_str() {
            MEDIA_TYPE_LAYER_GZIP | MEDIA_TYPE_DOCKER_LAYER_GZIP => Box::new(GzDecoder::new(blob.data.as_slice())),
            MEDIA_TYPE_LAYER_TAR | MEDIA_TYPE_DOCKER_LAYER_TAR => Box::new(blob.data.as_slice()),
            other => {
                // Some tools label gzip layers loosely; trust the gzip magic number.
                if blob.data.starts_with(&[0x1f, 0x8b]) && !other.contains("zstd") {
                    Box::new(GzDecoder::new(blob.data.as_slice()))
                } else {
                    return Err(self.err(layer, format!(
                        "layer media type {other:?} is not supported (only tar and tar+gzip layers are); rebuild the image with gzip compression"
                    )));
                }
            }
        })
    }

    /// Applies one layer's entries in order.
    fn layer(&mut self, blob: &Blob) -> Result<()> {
        let mut layer = Layer { digest: blob.descriptor.digest.clone(), own: HashSet::new() };
        let decoded = self.decoder(&layer, blob)?;
        let counted = Counted { inner: decoded, total: self.total.clone(), limit: self.limits.unpacked_bytes };
        let mut archive = tar::Archive::new(counted);
        let entries = archive.entries().map_err(|e| self.read_err(&layer, "the tar archive", e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| self.read_err(&layer, "the next tar entry", e))?;
            self.entry(&mut layer, &mut entry)?;
        }
        Ok(())
    }

    /// One tar entry: counted, its path checked and re-rooted, then applied as a whiteout or
    /// written.
    fn entry<R: Read>(&mut self, layer: &mut Layer, entry: &mut tar::Entry<'_, R>) -> Result<()> {
        self.entries_seen += 1;
        let raw_path = entry.path().map_err(|e| self.err(layer, format!("entry path: {e}")))?.into_owned();
        let shown = raw_path.display().to_string();
        if self.entries_seen > self.limits.entries {
            return Err(OciError::too_large(
                self.reference,
                format!("layer {} (at entry {shown})", layer.digest),
                format!("more than {} tar entries", self.limits.entries),
                Limit::Entries,
                self.limits,
            ));
        }
        let Some(rel) = clean_path(&raw_path).map_err(|r| self.err(layer, r.to_string()))? else {
            return Ok(()); // the root directory itself
        };
        let name = rel.last().map(String::as_str).unwrap_or("");
        let whiteout = whiteout_of(name).map_err(|r| self.err(layer, format!("entry {shown}: {r}")))?;
        let Some(rel) = self.select(layer, rel, whiteout.as_ref())? else {
            return Ok(());
        };
        let parent_rel = &rel[..rel.len() - 1];
        let parent = join(self.dest, parent_rel);
        check_no_symlink_ancestors(self.dest, parent_rel)
            .map_err(|r| self.err(layer, format!("entry {shown}: {r}")))?;
        match whiteout {
            Some(Whiteout::Opaque) => remove_lower_children(&parent, &mut parent_rel.to_vec(), &layer.own),
            Some(Whiteout::Hide(hidden)) => {
                let mut victim = parent_rel.to_vec();
                victim.push(hidden.clone());
                remove_lower(&parent.join(&hidden), &mut victim, &layer.own)
            }
            None => {
                let placed = Placed { shown, target: join(self.dest, &rel), parent, rel };
                self.write(layer, entry, placed)
            }
        }
    }

    /// `rel` re-rooted under the wanted subdirectory; `None` for an entry outside it (read past).
    /// A whiteout of the subdirectory or of one of its ancestors, or an opaque marker in one of
    /// them, hides everything lower layers put in the subdirectory.
    fn select(&self, layer: &Layer, rel: Vec<String>, whiteout: Option<&Whiteout>) -> Result<Option<Vec<String>>> {
        let subdir = &self.subdir;
        if subdir.is_empty() {
            return Ok(Some(rel));
        }
        if rel.len() <= subdir.len() {
            let parent = &rel[..rel.len() - 1];
            let hides_subdir = subdir.starts_with(parent)
                && match whiteout {
                    Some(Whiteout::Opaque) => true,
                    Some(Whiteout::Hide(hidden)) => subdir[parent.len()] == *hidden,
                    None => false,
                };
            if hides_subdir {
                remove_lower_children(self.dest, &mut Vec::new(), &layer.own)?;
            }
            return Ok(None);
        }
        Ok((rel[..subdir.len()] == subdir[..]).then(|| rel[subdir.len()..].to_vec()))
    }

    /// Writes an entry that is not a whiteout, by its tar entry type.
    fn write<R: Read>(&mut self, layer: &mut Layer, entry: &mut tar::Entry<'_, R>, placed: Placed) -> Result<()> {
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                if placed.target.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
                    remove_any(&placed.target)?;
                }
                std::fs::create_dir_all(&placed.target).map_err(|e| OciError::io(&placed.target, e))?;
                layer.own.insert(placed.rel);
                Ok(())
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => self.regular(layer, entry, placed),
            tar::EntryType::Link => self.hard_link(layer, entry, placed),
            // Extended headers: already applied to the entries they describe by the tar reader.
            tar::EntryType::XGlobalHeader
            | tar::EntryType::XHeader
            | tar::EntryType::GNULongName
            | tar::EntryType::GNULongLink => Ok(()),
            other => Err(self.err(layer, refusal(&placed.shown, other, entry))),
        }
    }

    /// A regular file, streamed to disk within [`Limits::file_bytes`].
    fn regular<R: Read>(&mut self, layer: &mut Layer, entry: &mut tar::Entry<'_, R>, placed: Placed) -> Result<()> {
        let Placed { shown, rel, parent, target } = placed;
        // The tar reader yields exactly the header's size for an entry.
        let size = entry.size();
        if size > self.limits.file_bytes {
            return Err(OciError::too_large(
                self.reference,
                format!("file {shown} in layer {}", layer.digest),
                format!("{size} bytes"),
                Limit::File,
                self.limits,
            ));
        }
        std::fs::create_dir_all(&parent).map_err(|e| OciError::io(&parent, e))?;
        remove_any(&target)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| OciError::io(&target, e))?;
        let written = std::io::copy(&mut (&mut *entry).take(self.limits.file_bytes), &mut file)
            .map_err(|e| self.read_err(layer, &format!("entry {shown}"), e))?;
        drop(file);
        set_mode(&target, entry.header().mode().unwrap_or(0o644));
        layer.own.insert(rel);
        self.summary.files += 1;
        self.summary.bytes += written;
        Ok(())
    }

    /// A hard link, unpacked as a copy of the regular file it points to, which this unpack must
    /// have written before it inside the destination (counted in the limits).
    fn hard_link<R: Read>(&mut self, layer: &mut Layer, entry: &tar::Entry<'_, R>, placed: Placed) -> Result<()> {
        let Placed { shown, rel, parent, target } = placed;
        let link = entry
            .link_name()
            .map_err(|e| self.err(layer, format!("link name: {e}")))?
            .ok_or_else(|| self.err(layer, format!("hard link {shown} has no target")))?
            .into_owned();
        let refuse = |why: &str| {
            self.err(
                layer,
                format!(
                    "hard link {shown} -> {}: {why}; hard links may only point to a regular file unpacked before them",
                    link.display()
                ),
            )
        };
        let subdir = &self.subdir;
        let link_rel = clean_path(&link).map_err(|r| refuse(&r.to_string()))?.unwrap_or_default();
        let link_rel = if link_rel.len() > subdir.len() && link_rel[..subdir.len()] == subdir[..] {
            link_rel[subdir.len()..].to_vec()
        } else {
            return Err(refuse("the target is outside the unpacked part of the image"));
        };
        if link_rel == rel {
            return Err(refuse("the link points to itself"));
        }
        check_no_symlink_ancestors(self.dest, &link_rel[..link_rel.len() - 1]).map_err(|r| refuse(&r.to_string()))?;
        let source = join(self.dest, &link_rel);
        let len = match source.symlink_metadata() {
            Ok(m) if m.is_file() => m.len(),
            Ok(_) => return Err(refuse("the target is not a regular file")),
            Err(_) => return Err(refuse("no such file was unpacked before it")),
        };
        if len > self.limits.file_bytes {
            return Err(OciError::too_large(
                self.reference,
                format!("file {shown} (a hard link) in layer {}", layer.digest),
                format!("{len} bytes"),
                Limit::File,
                self.limits,
            ));
        }
        self.total.set(self.total.get().saturating_add(len));
        if self.total.get() > self.limits.unpacked_bytes {
            return Err(self.read_err(layer, &format!("hard link {shown}"), std::io::Error::other("limit")));
        }
        std::fs::create_dir_all(&parent).map_err(|e| OciError::io(&parent, e))?;
        remove_any(&target)?;
        std::fs::copy(&source, &target).map_err(|e| OciError::io(&source, e))?;
        layer.own.insert(rel);
        self.summary.files += 1;
        self.summary.bytes += len;
        Ok(())
    }
}

/// Why an entry of a type capstan does not unpack (a symlink, a device file, a FIFO, anything
/// else but a directory, a file or a hard link) is refused.
fn refusal<R: Read>(shown: &str, kind: tar::EntryType, entry: &tar::Entry<'_, R>) -> String {
    match kind {
        tar::EntryType::Symlink => {
            let link = entry.link_name().ok().flatten().map(|l| l.display().to_string()).unwrap_or_default();
            format!("entry {shown} is a symlink (to {link:?}); {PLAIN_FILES_RULE}")
        }
        tar::EntryType::Char | tar::EntryType::Block => format!("entry {shown} is a device file; {PLAIN_FILES_RULE}"),
        tar::EntryType::Fifo => format!("entry {shown} is a FIFO; {PLAIN_FILES_RULE}"),
        other => format!(
            "entry {shown} has tar entry type {:?} ({other:?}), which capstan does not unpack; {PLAIN_FILES_RULE}",
            char::from(other.as_byte())
        ),
    }
}

/// Removes what lower layers put at `path` (`rel` below the destination): a file or symlink not
/// in `own`, and a directory's lower-layer content, the directory too when nothing of this layer
/// is left in it. Never follows a symlink.
fn remove_lower(path: &Path, rel: &mut Vec<String>, own: &HashSet<Vec<String>>) -> Result<()> {
    let Ok(meta) = path.symlink_metadata() else {
        return Ok(());
    };
    if own.is_empty() {
        return remove_any(path);
    }
    let mine = own.contains(rel);
    if meta.is_dir() {
        remove_lower_children(path, rel, own)?;
        let empty = std::fs::read_dir(path).map(|mut d| d.next().is_none()).unwrap_or(false);
        if !mine && empty {
            std::fs::remove_dir(path).map_err(|e| OciError::io(path, e))?;
        }
        Ok(())
    } else if mine {
        Ok(())
    } else {
        std::fs::remove_file(path).map_err(|e| OciError::io(path, e))
    }
}

/// [`remove_lower`] for every entry of directory `dir` (`rel` below the destination).
fn remove_lower_children(dir: &Path, rel: &mut Vec<String>, own: &HashSet<Vec<String>>) -> Result<()> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for item in read {
        let item = item.map_err(|e| OciError::io(dir, e))?;
        rel.push(item.file_name().to_string_lossy().into_owned());
        let res = remove_lower(&item.path(), rel, own);
        rel.pop();
        res?;
    }
    Ok(())
}

/// Splits a tar path into normal components, dropping `./`; errors on absolute paths and `..`.
fn clean_path(p: &Path) -> std::result::Result<Option<Vec<String>>, EntryRefusal> {
    let mut out = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::Normal(s) => {
                out.push(s.to_str().ok_or_else(|| EntryRefusal::NonUtf8(p.display().to_string()))?.to_string())
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(EntryRefusal::Absolute(p.display().to_string()));
            }
            Component::ParentDir => {
                return Err(EntryRefusal::Traversal(p.display().to_string()));
            }
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

fn join(dest: &Path, rel: &[String]) -> PathBuf {
    let mut p = dest.to_path_buf();
    for c in rel {
        p.push(c);
    }
    p
}

fn check_no_symlink_ancestors(dest: &Path, rel: &[String]) -> std::result::Result<(), EntryRefusal> {
    let mut p = dest.to_path_buf();
    for c in rel {
        p.push(c);
        if p.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(EntryRefusal::ThroughSymlink(p.display().to_string()));
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

#[cfg(unix)]
fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    // Keep owner read/write so that the tree can be overwritten and removed later.
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode((mode & 0o777) | 0o600));
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) {}

/// The one pull-into-an-empty-directory guard (bundle and catalog pulls): runs `work`, which
/// writes into `dest`, only when `dest` is missing or empty; when `work` fails, removes what it
/// wrote ([`discard_partial_unpack`]), so a failed pull leaves nothing behind.
///
/// # Errors
/// `not_empty()` when `dest` has entries (nothing is touched); else `work`'s error.
pub async fn into_empty_dir<T, E>(
    dest: &Path,
    not_empty: impl FnOnce() -> E,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    if std::fs::read_dir(dest).is_ok_and(|mut d| d.next().is_some()) {
        return Err(not_empty());
    }
    let existed = dest.exists();
    let result = work.await;
    if result.is_err() {
        discard_partial_unpack(dest, existed);
    }
    result
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
        // set_path refuses `..`; raw_entry writes the raw name to build hostile archives.
        raw_entry(b, tar::EntryType::Regular, path, "", data);
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
    fn refuses_traversal_absolute_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out");
        for (layer, what) in [
            (raw_layer(|b| file(b, "../evil", b"x")), ".."),
            (raw_layer(|b| file(b, "/etc/evil", b"x")), "absolute"),
            (raw_layer(|b| symlink(b, "manifests/l", "../../etc")), "manifests/l is a symlink"),
            (raw_layer(|b| symlink(b, "l", "/etc")), "l is a symlink"),
            (
                raw_layer(|b| {
                    symlink(b, "m", "x");
                    file(b, "m/f", b"x");
                }),
                "m is a symlink",
            ),
            // Symlinks are refused even when they stay inside: bundles and catalogs need none.
            (
                raw_layer(|b| {
                    file(b, "manifests/a", b"a");
                    symlink(b, "manifests/l", "a");
                }),
                "manifests/l is a symlink",
            ),
        ] {
            let err = unpack_layers("reg/x:1", &[layer], &dest, &UnpackOptions::default()).unwrap_err().to_string();
            assert!(err.contains(what) && err.contains("reg/x:1"), "{what}: {err}");
            if what.contains("symlink") {
                assert!(err.contains(PLAIN_FILES_RULE), "{err}");
            }
        }
        assert!(!dir.path().join("evil").exists());
        assert!(!dest.join("manifests/l").exists() && !dest.join("l").exists() && !dest.join("m").exists());
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
        let opts = UnpackOptions { subdir: Some("/configs".into()), ..Default::default() };
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
        let err = unpack_layers("r", &[blob], dir.path(), &UnpackOptions::default()).unwrap_err().to_string();
        assert!(err.contains("zstd") && err.contains("sha256:abc"), "{err}");
    }

    /// A tar header of `kind` with a raw name (no checks) and `link` as link name.
    fn raw_entry(b: &mut tar::Builder<Vec<u8>>, kind: tar::EntryType, path: &str, link: &str, data: &[u8]) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        let name = &mut h.as_old_mut().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        let ln = &mut h.as_old_mut().linkname;
        ln[..link.len()].copy_from_slice(link.as_bytes());
        h.set_cksum();
        b.append(&h, data).unwrap();
    }

    /// A destination inside a directory with a canary beside it; returns (tempdir, dest, canary).
    fn guarded() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let canary = dir.path().join("canary");
        std::fs::write(&canary, b"canary").unwrap();
        let dest = dir.path().join("out");
        std::fs::create_dir_all(&dest).unwrap();
        (dir, dest, canary)
    }

    fn unpack_err(layers: &[Blob], dest: &Path, opts: &UnpackOptions) -> String {
        unpack_layers("reg/hostile:1", layers, dest, opts).unwrap_err().to_string()
    }

    #[test]
    fn malformed_whiteouts_are_refused_and_delete_nothing() {
        for name in [".wh.", ".wh..", ".wh...", ".wh..wh.", ".wh..wh.foo", "sub/.wh..", "sub/.wh...", "sub/.wh."] {
            for subdir in [None, Some("sub".to_string())] {
                let (_dir, dest, canary) = guarded();
                std::fs::write(dest.join("keep"), b"k").unwrap();
                let lower = raw_layer(|b| file(b, "sub/x", b"x"));
                let bad = raw_layer(|b| file(b, name, b""));
                let digest = bad.descriptor.digest.clone();
                let opts = UnpackOptions { subdir: subdir.clone(), ..Default::default() };
                let err = unpack_err(&[lower, bad], &dest, &opts);
                assert!(err.contains("reg/hostile:1") && err.contains(&digest) && err.contains(name), "{name}: {err}");
                assert!(err.contains("does not name a file"), "{err}");
                assert_eq!(std::fs::read(&canary).unwrap(), b"canary", "{name}");
                assert!(dest.join("keep").exists(), "{name} {subdir:?}");
            }
        }
    }

    #[test]
    fn whiteouts_remove_only_lower_layers_entries() {
        let lower = raw_layer(|b| {
            file(b, "manifests/a.yaml", b"lower");
            file(b, "manifests/b.yaml", b"lower");
            file(b, "docs/old", b"o");
        });
        let upper = raw_layer(|b| {
            // Written by this layer before its own whiteouts: they must not remove it.
            file(b, "manifests/a.yaml", b"upper");
            file(b, "manifests/.wh.a.yaml", b"");
            file(b, "manifests/.wh.b.yaml", b"");
            file(b, "docs/new", b"n");
            file(b, "docs/.wh..wh..opq", b"");
        });
        let (_dir, dest, canary) = guarded();
        unpack_layers("r", &[lower, upper], &dest, &UnpackOptions::default()).unwrap();
        assert_eq!(std::fs::read(dest.join("manifests/a.yaml")).unwrap(), b"upper");
        assert!(!dest.join("manifests/b.yaml").exists());
        assert!(dest.join("docs/new").exists());
        assert!(!dest.join("docs/old").exists());
        assert!(canary.exists());
    }

    #[test]
    fn hard_links_copy_an_unpacked_file_only() {
        let ok = raw_layer(|b| {
            file(b, "manifests/a.yaml", b"aaaa");
            raw_entry(b, tar::EntryType::Link, "manifests/b.yaml", "manifests/a.yaml", b"");
        });
        let (_dir, dest, _) = guarded();
        let s = unpack_layers("r", &[ok], &dest, &UnpackOptions::default()).unwrap();
        assert_eq!((s.files, s.bytes), (2, 8));
        assert_eq!(std::fs::read(dest.join("manifests/b.yaml")).unwrap(), b"aaaa");
        for (layer, why) in [
            (raw_layer(|b| raw_entry(b, tar::EntryType::Link, "l", "../canary", b"")), ".."),
            (raw_layer(|b| raw_entry(b, tar::EntryType::Link, "l", "/etc/passwd", b"")), "absolute"),
            (raw_layer(|b| raw_entry(b, tar::EntryType::Link, "l", "missing", b"")), "no such file"),
            (raw_layer(|b| raw_entry(b, tar::EntryType::Link, "l", "l", b"")), "itself"),
            (
                raw_layer(|b| {
                    raw_entry(b, tar::EntryType::Directory, "d/", "", b"");
                    raw_entry(b, tar::EntryType::Link, "l", "d", b"");
                }),
                "not a regular file",
            ),
        ] {
            let (_dir, dest, canary) = guarded();
            let err = unpack_err(&[layer], &dest, &UnpackOptions::default());
            assert!(err.contains("hard link l") && err.contains(why), "{why}: {err}");
            assert_eq!(std::fs::read(&canary).unwrap(), b"canary");
        }
        // Outside the selected subdirectory: never unpacked, so not a target.
        let l = raw_layer(|b| {
            file(b, "bin/opm", b"elf");
            raw_entry(b, tar::EntryType::Link, "configs/x", "bin/opm", b"");
        });
        let (_dir, dest, _) = guarded();
        let opts = UnpackOptions { subdir: Some("configs".into()), ..Default::default() };
        assert!(unpack_err(&[l], &dest, &opts).contains("outside the unpacked part"));
    }

    #[test]
    fn devices_and_fifos_are_refused_but_skipped_outside_the_subdirectory() {
        for kind in [tar::EntryType::Char, tar::EntryType::Block, tar::EntryType::Fifo] {
            let (_dir, dest, _) = guarded();
            let err = unpack_err(
                &[raw_layer(|b| raw_entry(b, kind, "configs/dev", "", b""))],
                &dest,
                &UnpackOptions::default(),
            );
            assert!(err.contains("entry configs/dev is a") && err.contains(PLAIN_FILES_RULE), "{err}");
            assert!(!dest.join("configs/dev").exists());
        }
        // A catalog image's base layers hold symlinks and devices outside /configs: skipped.
        let base = raw_layer(|b| {
            symlink(b, "bin/sh", "busybox");
            raw_entry(b, tar::EntryType::Char, "dev/null", "", b"");
            file(b, "configs/c.json", b"{}");
        });
        let (_dir, dest, _) = guarded();
        let opts = UnpackOptions { subdir: Some("configs".into()), ..Default::default() };
        assert_eq!(unpack_layers("r", &[base], &dest, &opts).unwrap().files, 1);
        assert!(!dest.join("bin").exists() && !dest.join("dev").exists());
    }

    fn limits(f: impl FnOnce(&mut Limits)) -> UnpackOptions {
        let mut l = Limits::builtin();
        f(&mut l);
        UnpackOptions { subdir: None, limits: l }
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_limits() {
        // 64 MiB of zeros in one file: about 64 KiB of gzip.
        let zeros = vec![0u8; 64 << 20];
        let bomb = build_layer(vec![LayerEntry::File("manifests/bomb".into(), zeros, false)]).unwrap().blob;
        assert!(bomb.data.len() < 1 << 20);
        let digest = bomb.descriptor.digest.clone();
        let (_dir, dest, _) = guarded();
        let err = unpack_err(std::slice::from_ref(&bomb), &dest, &limits(|l| l.file_bytes = 1 << 20));
        assert!(err.contains("file manifests/bomb in layer") && err.contains(&digest), "{err}");
        assert!(err.contains("CAPSTAN_MAX_FILE_BYTES") && err.contains("1Mi"), "{err}");
        assert!(!dest.join("manifests/bomb").exists(), "refused before anything is written");
        let err = unpack_err(std::slice::from_ref(&bomb), &dest, &limits(|l| l.unpacked_bytes = 4 << 20));
        assert!(err.contains("CAPSTAN_MAX_UNPACKED_BYTES") && err.contains(&digest), "{err}");
        let written = std::fs::metadata(dest.join("manifests/bomb")).map_or(0, |m| m.len());
        assert!(written <= 4 << 20, "{written}");
    }

    #[test]
    fn entry_count_is_bounded() {
        let l = raw_layer(|b| {
            for i in 0..20 {
                file(b, &format!("f{i}"), b"");
            }
        });
        let (_dir, dest, _) = guarded();
        let err = unpack_err(&[l], &dest, &limits(|l| l.entries = 10));
        assert!(err.contains("CAPSTAN_MAX_ENTRIES") && err.contains("f10"), "{err}");
    }

    #[test]
    fn directories_on_disk_follow_the_same_rule() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"a").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("l")).unwrap();
        let err = entries_from_dir(dir.path(), "manifests").unwrap_err().to_string();
        assert!(err.contains("is a symlink") && err.contains(PLAIN_FILES_RULE), "{err}");
    }

    #[test]
    fn a_whiteout_of_the_subdirectory_or_an_ancestor_hides_lower_content_only() {
        let lower = raw_layer(|b| {
            file(b, "configs/a.json", b"a");
            file(b, "configs/pkg/c.json", b"c");
        });
        for hide in [".wh.configs", ".wh..wh..opq"] {
            let upper = raw_layer(|b| {
                file(b, "configs/b.json", b"b");
                file(b, hide, b"");
            });
            let (_dir, dest, canary) = guarded();
            let opts = UnpackOptions { subdir: Some("configs".into()), ..Default::default() };
            unpack_layers("r", &[lower.clone(), upper], &dest, &opts).unwrap();
            assert!(!dest.join("a.json").exists() && !dest.join("pkg").exists(), "{hide}");
            assert!(dest.join("b.json").exists(), "{hide}: this layer's own entry stays");
            assert!(canary.exists());
        }
    }
}
