//! Reading and writing File-Based Catalogs (FBC) as operator-registry does.
//!
//! Semantics follow operator-registry `alpha/declcfg/load.go`, `declcfg.go` and `write.go`
//! (`../shared/reference/olm-v0.md` §3.1):
//!
//! - A file is a stream of blobs: concatenated JSON objects, or a YAML multi-document stream.
//!   Like opm (k8s `YAMLOrJSONDecoder`), the format is decided by content: a file whose first
//!   non-whitespace character is `{` is a JSON stream, anything else is YAML. YAML documents are
//!   separated by lines starting with `---` (followed by nothing but spaces or a comment).
//! - Every blob needs `schema`. The meta keys `schema`, `package` and `name` are matched
//!   case-insensitively and keys equal up to case are an error; the fields of `olm.package`,
//!   `olm.channel`, `olm.bundle` and `olm.deprecations` are matched case-insensitively too (Go's
//!   `encoding/json` does so). Blobs of any other schema are kept verbatim in
//!   [`DeclarativeConfig::others`]; fields the model does not name are kept in `extra`.
//! - A directory is walked recursively in sorted path order; `.indexignore` files (gitignore
//!   syntax, patterns relative to the directory holding the file) exclude files. Like opm,
//!   every other file is parsed, whatever its extension: a stray `README.md` in a catalog
//!   directory is an error for opm and for capstan alike.
//!
//! Differences from opm, all deliberate: empty YAML documents (only comments or blank lines) are
//! skipped instead of rejected; non-UTF-8 input is rejected (Go silently replaces invalid bytes
//! in JSON strings); a package `description` over [`MAX_DESCRIPTION_BYTES`] is rejected.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Map, Value};

use super::error::CatalogError;
use super::model::{
    Bundle, Channel, ChannelEntry, DeclarativeConfig, Deprecation, DeprecationEntry, DeprecationReference, Icon,
    Package, Property, RelatedImage, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE,
};

/// Largest package `description` capstan accepts, in bytes (1 MiB).
///
/// OLM serves the description through packageserver's `PackageManifest` objects and the CSV;
/// Kubernetes caps one object at about 1.5 MiB (etcd request limit, `olm-v0.md` §6 row 6), so a
/// longer description cannot be served. Rejecting it at parse time keeps a runaway file (for
/// example a 50 MB description pasted by a generator bug) from reaching the cluster.
pub const MAX_DESCRIPTION_BYTES: usize = 1 << 20;

/// Name of the ignore file honoured while walking a catalog directory (gitignore syntax).
pub const INDEX_IGNORE_FILE: &str = ".indexignore";

/// Output format of [`write_dir_format`] and [`to_stream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// JSON objects indented by four spaces, one after another (opm's `WriteJSON`).
    #[default]
    Json,
    /// YAML documents, each starting with `---`, keys sorted (opm's `WriteYAML`).
    Yaml,
}

impl Format {
    /// File extension including the dot: `.json` or `.yaml`.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Json => ".json",
            Format::Yaml => ".yaml",
        }
    }
}

/// Parses one FBC file's bytes: a JSON stream or a YAML multi-document stream.
///
/// `source` is the file name used in errors. A UTF-8 byte order mark is skipped.
///
/// # Errors
/// [`CatalogError`] naming `source`: non-UTF-8 bytes ([`CatalogError::NotUtf8`]), malformed or
/// truncated JSON/YAML ([`CatalogError::Syntax`]), a document that is not an object, a blob with
/// no `schema`, duplicate keys up to case, a field of the wrong type ([`CatalogError::Field`]), or
/// a description over [`MAX_DESCRIPTION_BYTES`].
pub fn parse_bytes(source: &str, bytes: &[u8]) -> Result<DeclarativeConfig, CatalogError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let (line, column) = line_col(bytes, e.valid_up_to());
            return Err(CatalogError::NotUtf8 { file: source.to_string(), line, column });
        }
    };
    let mut cfg = DeclarativeConfig::default();
    let first = text.bytes().find(|b| !b.is_ascii_whitespace());
    if first == Some(b'{') {
        parse_json_stream(source, text, &mut cfg)?;
    } else {
        parse_yaml_stream(source, text, &mut cfg)?;
    }
    Ok(cfg)
}

/// 1-based line and column of byte `offset`.
fn line_col(bytes: &[u8], offset: usize) -> (usize, usize) {
    let offset = offset.min(bytes.len());
    let before = &bytes[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = offset - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
    (line, column)
}

fn parse_json_stream(source: &str, text: &str, cfg: &mut DeclarativeConfig) -> Result<(), CatalogError> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let bytes = text.as_bytes();
    let mut index = 0;
    // Incremental line counting: `counted` bytes have been scanned, `line` is the line there.
    let mut counted = 0usize;
    let mut line = 1usize;
    loop {
        let mut start = stream.byte_offset();
        while start < bytes.len() && bytes[start].is_ascii_whitespace() {
            start += 1;
        }
        if start >= bytes.len() {
            return Ok(());
        }
        line += bytes[counted..start].iter().filter(|&&b| b == b'\n').count();
        counted = start;
        match stream.next() {
            None => return Ok(()),
            Some(Err(e)) => {
                // serde_json ends its message with " at line L column C"; the line is shown once.
                let message = e.to_string();
                let message = match message.rfind(&format!(" at line {} column {}", e.line(), e.column())) {
                    Some(at) if e.line() > 0 => format!("{} at column {}", &message[..at], e.column()),
                    _ => message,
                };
                return Err(CatalogError::Syntax { file: source.to_string(), format: "JSON", line: e.line(), message });
            }
            Some(Ok(value)) => {
                decode_blob(source, index, line, value, cfg)?;
                index += 1;
            }
        }
    }
}

/// Splits a YAML stream into documents the way k8s `YAMLReader` does: a line starting with
/// `---` ends a document; anything but spaces or a comment after the `---` is an error.
/// Returns `(first line number, text)` per document.
fn split_yaml_documents<'a>(source: &str, text: &'a str) -> Result<Vec<(usize, &'a str)>, CatalogError> {
    let mut docs = Vec::new();
    let mut doc_start = 0usize;
    let mut doc_line = 1usize;
    let mut pos = 0usize;
    let mut line_no = 1usize;
    while pos < text.len() {
        let end = text[pos..].find('\n').map_or(text.len(), |i| pos + i + 1);
        let line = &text[pos..end];
        if let Some(rest) = line.strip_prefix("---") {
            let trimmed = rest.trim();
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                return Err(CatalogError::Syntax {
                    file: source.to_string(),
                    format: "YAML",
                    line: line_no,
                    message: format!(
                        "invalid YAML document separator: \"{}\"; put the document on the line after \"---\"",
                        line.trim_end()
                    ),
                });
            }
            if pos > doc_start {
                docs.push((doc_line, &text[doc_start..pos]));
            }
            doc_start = end;
            doc_line = line_no + 1;
        }
        pos = end;
        line_no += 1;
    }
    if text.len() > doc_start {
        docs.push((doc_line, &text[doc_start..]));
    }
    Ok(docs)
}

fn parse_yaml_stream(source: &str, text: &str, cfg: &mut DeclarativeConfig) -> Result<(), CatalogError> {
    // The line is shown by CatalogError::Syntax; the message does not repeat it.
    crate::yaml::check_flow_depth(text).map_err(|e| CatalogError::Syntax {
        file: source.to_string(),
        format: "YAML",
        line: e.line,
        message: e.to_string().replacen(&format!(" at line {}", e.line), "", 1),
    })?;
    let mut index = 0;
    for (first_line, doc) in split_yaml_documents(source, text)? {
        if doc.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#') || t == "..."
        }) {
            continue;
        }
        let value: Value = crate::yaml::from_str(doc).map_err(|e| {
            let (line, message) = crate::yaml::error_in_file(&e, first_line);
            CatalogError::Syntax { file: source.to_string(), format: "YAML", line, message }
        })?;
        if value.is_null() {
            continue;
        }
        let line =
            first_line + doc.lines().take_while(|l| l.trim().is_empty() || l.trim_start().starts_with('#')).count();
        decode_blob(source, index, line, value, cfg)?;
        index += 1;
    }
    Ok(())
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Position of a blob, for errors.
struct BlobCtx<'a> {
    file: &'a str,
    index: usize,
    line: usize,
    schema: String,
    named: String,
}

impl BlobCtx<'_> {
    fn field(&self, field: impl Into<String>, message: impl Into<String>) -> CatalogError {
        CatalogError::Field {
            file: self.file.to_string(),
            index: self.index,
            line: self.line,
            blob: format!("{}{}", self.schema, self.named),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Finds the value of a meta key (`schema`, `package`, `name`) case-insensitively.
fn meta_value<'v>(map: &'v Map<String, Value>, key: &str) -> Option<(&'v String, &'v Value)> {
    map.get_key_value(key).or_else(|| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)))
}

/// Meta string of a blob kept in `others` (`package` / `name` / `schema`), case-insensitively.
pub(crate) fn meta_str<'v>(v: &'v Value, key: &str) -> &'v str {
    v.as_object().and_then(|m| meta_value(m, key)).and_then(|(_, v)| v.as_str()).unwrap_or("")
}

fn decode_blob(
    file: &str,
    index: usize,
    line: usize,
    value: Value,
    cfg: &mut DeclarativeConfig,
) -> Result<(), CatalogError> {
    let map = match value {
        Value::Object(m) => m,
        other => {
            return Err(CatalogError::NotAnObject { file: file.to_string(), index, line, found: kind_of(&other) });
        }
    };
    // Keys equal up to case are an error (operator-registry `extractUniqueMetaKeys`).
    if map.keys().any(|k| k.bytes().any(|b| b.is_ascii_uppercase()) || !k.is_ascii()) {
        let mut folded: Vec<(String, &String)> = map.keys().map(|k| (k.to_lowercase(), k)).collect();
        folded.sort();
        for w in folded.windows(2) {
            if w[0].0 == w[1].0 {
                let keys = folded.iter().filter(|(f, _)| *f == w[0].0).map(|(_, k)| (*k).clone()).collect();
                return Err(CatalogError::DuplicateKey { file: file.to_string(), index, line, keys });
            }
        }
    }
    let mut meta = [String::new(), String::new(), String::new()];
    for (slot, key) in meta.iter_mut().zip(["schema", "package", "name"]) {
        if let Some((k, v)) = meta_value(&map, key) {
            match v {
                Value::String(s) => *slot = s.clone(),
                Value::Null => {}
                other => {
                    let ctx = BlobCtx { file, index, line, schema: String::new(), named: String::new() };
                    return Err(ctx.field(k.clone(), format!("expected a string, found {}", kind_of(other))));
                }
            }
        }
    }
    let [schema, _package, name] = meta;
    let named = if name.is_empty() { String::new() } else { format!(" \"{name}\"") };
    if schema.is_empty() {
        let named = if name.is_empty() { String::new() } else { format!(", name \"{name}\"") };
        return Err(CatalogError::MissingSchema { file: file.to_string(), index, line, named });
    }
    let ctx = BlobCtx { file, index, line, schema, named };
    match ctx.schema.as_str() {
        SCHEMA_PACKAGE => cfg.packages.push(decode_package(&ctx, map)?),
        SCHEMA_CHANNEL => cfg.channels.push(decode_channel(&ctx, map)?),
        SCHEMA_BUNDLE => cfg.bundles.push(decode_bundle(&ctx, map)?),
        SCHEMA_DEPRECATIONS => cfg.deprecations.push(decode_deprecation(&ctx, map)?),
        _ => cfg.others.push(Value::Object(map)),
    }
    Ok(())
}

fn string(ctx: &BlobCtx, field: &str, v: Value) -> Result<String, CatalogError> {
    match v {
        Value::String(s) => Ok(s),
        Value::Null => Ok(String::new()),
        other => Err(ctx.field(field, format!("expected a string, found {}", kind_of(&other)))),
    }
}

fn opt_string(ctx: &BlobCtx, field: &str, v: Value) -> Result<Option<String>, CatalogError> {
    let s = string(ctx, field, v)?;
    Ok(if s.is_empty() { None } else { Some(s) })
}

fn list(ctx: &BlobCtx, field: &str, v: Value) -> Result<Vec<Value>, CatalogError> {
    match v {
        Value::Array(a) => Ok(a),
        Value::Null => Ok(Vec::new()),
        other => Err(ctx.field(field, format!("expected a list, found {}", kind_of(&other)))),
    }
}

fn object(ctx: &BlobCtx, field: &str, v: Value) -> Result<Map<String, Value>, CatalogError> {
    match v {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        other => Err(ctx.field(field, format!("expected an object, found {}", kind_of(&other)))),
    }
}

fn string_list(ctx: &BlobCtx, field: &str, v: Value) -> Result<Vec<String>, CatalogError> {
    list(ctx, field, v)?.into_iter().enumerate().map(|(i, s)| string(ctx, &format!("{field}[{i}]"), s)).collect()
}

/// Canonical field name for `key` among `fields`, compared case-insensitively (Go `encoding/json`).
fn canonical<'f>(key: &str, fields: &[&'f str]) -> Option<&'f str> {
    fields.iter().find(|f| **f == key).or_else(|| fields.iter().find(|f| f.eq_ignore_ascii_case(key))).copied()
}

fn properties(ctx: &BlobCtx, field: &str, v: Value) -> Result<Vec<Property>, CatalogError> {
    let items = list(ctx, field, v)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = format!("{field}[{i}]");
        let mut type_ = String::new();
        let mut value = Value::Null;
        for (k, v) in object(ctx, &path, item)? {
            match canonical(&k, &["type", "value"]) {
                Some("type") => type_ = string(ctx, &format!("{path}.type"), v)?,
                Some(_) => value = v,
                None => {}
            }
        }
        out.push(Property { type_, value });
    }
    Ok(out)
}

fn decode_package(ctx: &BlobCtx, map: Map<String, Value>) -> Result<Package, CatalogError> {
    const FIELDS: &[&str] = &["schema", "name", "defaultChannel", "icon", "description", "properties"];
    let mut p = Package { schema: ctx.schema.clone(), ..Default::default() };
    for (k, v) in map {
        match canonical(&k, FIELDS) {
            Some("schema") => {}
            Some("name") => p.name = string(ctx, "name", v)?,
            Some("defaultChannel") => p.default_channel = opt_string(ctx, "defaultChannel", v)?,
            Some("icon") => {
                if !v.is_null() {
                    p.icon = Some(decode_icon(ctx, v)?);
                }
            }
            Some("description") => {
                let d = string(ctx, "description", v)?;
                if d.len() > MAX_DESCRIPTION_BYTES {
                    return Err(CatalogError::TooLarge {
                        file: ctx.file.to_string(),
                        index: ctx.index,
                        line: ctx.line,
                        blob: format!("{}{}", ctx.schema, ctx.named),
                        field: "description".into(),
                        size: d.len(),
                        limit: MAX_DESCRIPTION_BYTES,
                    });
                }
                p.description = if d.is_empty() { None } else { Some(d) };
            }
            Some(_) => p.properties = properties(ctx, "properties", v)?,
            None => {
                p.extra.insert(k, v);
            }
        }
    }
    Ok(p)
}

fn decode_icon(ctx: &BlobCtx, v: Value) -> Result<Icon, CatalogError> {
    let mut icon = Icon::default();
    for (k, v) in object(ctx, "icon", v)? {
        match canonical(&k, &["base64data", "mediatype"]) {
            Some("base64data") => icon.base64data = string(ctx, "icon.base64data", v)?,
            Some(_) => icon.mediatype = string(ctx, "icon.mediatype", v)?,
            None => {}
        }
    }
    // opm decodes base64data into bytes (Go `[]byte`, standard encoding, CR/LF ignored).
    use base64::Engine as _;
    let compact: String = icon.base64data.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    if let Err(e) = base64::engine::general_purpose::STANDARD.decode(compact.as_bytes()) {
        return Err(
            ctx.field("icon.base64data", format!("not valid standard base64 ({e}); encode the icon with `base64 -w0`"))
        );
    }
    Ok(icon)
}

fn decode_channel(ctx: &BlobCtx, map: Map<String, Value>) -> Result<Channel, CatalogError> {
    const FIELDS: &[&str] = &["schema", "name", "package", "entries", "properties"];
    let mut c = Channel { schema: ctx.schema.clone(), ..Default::default() };
    for (k, v) in map {
        match canonical(&k, FIELDS) {
            Some("schema") => {}
            Some("name") => c.name = string(ctx, "name", v)?,
            Some("package") => c.package = string(ctx, "package", v)?,
            Some("entries") => {
                let items = list(ctx, "entries", v)?;
                c.entries.reserve(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    c.entries.push(decode_entry(ctx, i, item)?);
                }
            }
            Some(_) => c.properties = properties(ctx, "properties", v)?,
            None => {
                c.extra.insert(k, v);
            }
        }
    }
    Ok(c)
}

fn decode_entry(ctx: &BlobCtx, i: usize, v: Value) -> Result<ChannelEntry, CatalogError> {
    const FIELDS: &[&str] = &["name", "replaces", "skips", "skipRange"];
    let path = format!("entries[{i}]");
    let mut e = ChannelEntry::default();
    for (k, v) in object(ctx, &path, v)? {
        match canonical(&k, FIELDS) {
            Some("name") => e.name = string(ctx, &format!("{path}.name"), v)?,
            Some("replaces") => e.replaces = opt_string(ctx, &format!("{path}.replaces"), v)?,
            Some("skips") => e.skips = string_list(ctx, &format!("{path}.skips"), v)?,
            Some(_) => e.skip_range = opt_string(ctx, &format!("{path}.skipRange"), v)?,
            None => {
                e.extra.insert(k, v);
            }
        }
    }
    Ok(e)
}

fn decode_bundle(ctx: &BlobCtx, map: Map<String, Value>) -> Result<Bundle, CatalogError> {
    const FIELDS: &[&str] = &["schema", "name", "package", "image", "properties", "relatedImages"];
    let mut b = Bundle { schema: ctx.schema.clone(), ..Default::default() };
    for (k, v) in map {
        match canonical(&k, FIELDS) {
            Some("schema") => {}
            Some("name") => b.name = string(ctx, "name", v)?,
            Some("package") => b.package = string(ctx, "package", v)?,
            Some("image") => b.image = string(ctx, "image", v)?,
            Some("properties") => b.properties = properties(ctx, "properties", v)?,
            Some(_) => {
                let items = list(ctx, "relatedImages", v)?;
                b.related_images.reserve(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    let path = format!("relatedImages[{i}]");
                    let mut r = RelatedImage { name: String::new(), image: String::new() };
                    for (k, v) in object(ctx, &path, item)? {
                        match canonical(&k, &["name", "image"]) {
                            Some("name") => r.name = string(ctx, &format!("{path}.name"), v)?,
                            Some(_) => r.image = string(ctx, &format!("{path}.image"), v)?,
                            None => {}
                        }
                    }
                    b.related_images.push(r);
                }
            }
            None => {
                b.extra.insert(k, v);
            }
        }
    }
    Ok(b)
}

fn decode_deprecation(ctx: &BlobCtx, map: Map<String, Value>) -> Result<Deprecation, CatalogError> {
    const FIELDS: &[&str] = &["schema", "package", "entries"];
    let mut d = Deprecation { schema: ctx.schema.clone(), ..Default::default() };
    for (k, v) in map {
        match canonical(&k, FIELDS) {
            Some("schema") => {}
            Some("package") => d.package = string(ctx, "package", v)?,
            Some(_) => {
                for (i, item) in list(ctx, "entries", v)?.into_iter().enumerate() {
                    let path = format!("entries[{i}]");
                    let mut e = DeprecationEntry::default();
                    for (k, v) in object(ctx, &path, item)? {
                        match canonical(&k, &["reference", "message"]) {
                            Some("reference") => {
                                let rpath = format!("{path}.reference");
                                let mut r = DeprecationReference::default();
                                for (k, v) in object(ctx, &rpath, v)? {
                                    match canonical(&k, &["schema", "name"]) {
                                        Some("schema") => r.schema = string(ctx, &format!("{rpath}.schema"), v)?,
                                        Some(_) => r.name = string(ctx, &format!("{rpath}.name"), v)?,
                                        None => {}
                                    }
                                }
                                e.reference = r;
                            }
                            Some(_) => e.message = string(ctx, &format!("{path}.message"), v)?,
                            None => {}
                        }
                    }
                    d.entries.push(e);
                }
            }
            None => {
                d.extra.insert(k, v);
            }
        }
    }
    Ok(d)
}

/// Loads a catalog from a file or a directory.
///
/// A directory is walked recursively in sorted path order, skipping files matched by
/// `.indexignore` files (gitignore syntax, operator-registry `alpha/declcfg/load.go` `WalkFS`) and
/// the `.indexignore` files themselves; every other file is parsed with [`parse_bytes`] (files are
/// parsed in parallel, results are merged in path order). File names in errors are the paths as
/// given (`dir/pkg/catalog.yaml`).
///
/// # Errors
/// [`CatalogError::Io`] when the path or a file cannot be read (or an `.indexignore` file is
/// malformed); otherwise an error of [`parse_bytes`] (parsing stops at the first failure;
/// of the files parsed by then, the first in path order is reported).
pub fn load_path(path: &Path) -> Result<DeclarativeConfig, CatalogError> {
    let mut cfg = DeclarativeConfig::default();
    for part in load_path_map(path, |_, c| c)? {
        merge(&mut cfg, part);
    }
    Ok(cfg)
}

/// As [`load_path`], but hands each file's blobs to `per_file` in the worker thread that parsed
/// it and returns the results in path order (one per file). Lets a caller check and shrink each
/// file's blobs before the next ones are read, so that the whole catalog never has to be in
/// memory at once ([`crate::catalog::validate::validate_path`]).
///
/// # Errors
/// As [`load_path`].
pub fn load_path_map<T, F>(path: &Path, per_file: F) -> Result<Vec<T>, CatalogError>
where
    T: Send,
    F: Fn(&Path, DeclarativeConfig) -> T + Sync,
{
    let meta = std::fs::metadata(path).map_err(|source| CatalogError::Io {
        path: path.to_path_buf(),
        action: "read catalog",
        source,
    })?;
    if !meta.is_dir() {
        let bytes = read_file(path)?;
        let cfg = parse_bytes(&path.display().to_string(), &bytes)?;
        return Ok(vec![per_file(path, cfg)]);
    }
    let files = catalog_files(path)?;
    parse_files_parallel(&files, &per_file)
}

fn read_file(path: &Path) -> Result<Vec<u8>, CatalogError> {
    std::fs::read(path).map_err(|source| CatalogError::Io { path: path.to_path_buf(), action: "read file", source })
}

/// The files of a catalog directory that [`load_path`] parses, in sorted path order.
///
/// # Errors
/// [`CatalogError::Io`] when the directory cannot be walked, holds a symlink, device, FIFO or
/// socket ([`crate::oci::layer::check_plain_file_type`]), or an `.indexignore` file cannot be
/// read or has an invalid pattern.
pub fn catalog_files(dir: &Path) -> Result<Vec<PathBuf>, CatalogError> {
    let mut files = Vec::new();
    let mut ignores: Vec<(PathBuf, ignore::gitignore::Gitignore)> = Vec::new();
    let walk = walkdir::WalkDir::new(dir).sort_by_file_name();
    for entry in walk {
        let entry = entry.map_err(|e| {
            let p = e.path().map_or_else(|| dir.to_path_buf(), Path::to_path_buf);
            CatalogError::Io { path: p, action: "walk catalog directory", source: e.into() }
        })?;
        // WalkDir follows no link below the root: a symlink (or device, FIFO, socket) is refused,
        // never read (the rule of catalog images too).
        crate::oci::layer::check_plain_file_type(entry.file_type()).map_err(|source| CatalogError::Io {
            path: entry.path().to_path_buf(),
            action: "read catalog directory",
            source,
        })?;
        if entry.file_type().is_dir() {
            continue;
        }
        if entry.file_name() == INDEX_IGNORE_FILE {
            let parent = entry.path().parent().unwrap_or(dir).to_path_buf();
            let (gi, err) = ignore::gitignore::Gitignore::new(entry.path());
            if let Some(err) = err {
                return Err(CatalogError::Io {
                    path: entry.path().to_path_buf(),
                    action: "read .indexignore",
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, err.to_string()),
                });
            }
            ignores.push((parent, gi));
            continue;
        }
        files.push(entry.into_path());
    }
    // Deeper .indexignore files decide over shallower ones (gitignore precedence).
    ignores.sort_by_key(|(root, _)| root.components().count());
    files.retain(|f| {
        let mut ignored = false;
        for (root, gi) in &ignores {
            if !f.starts_with(root) {
                continue;
            }
            let m = gi.matched_path_or_any_parents(f, false);
            if m.is_ignore() {
                ignored = true;
            } else if m.is_whitelist() {
                ignored = false;
            }
        }
        !ignored
    });
    Ok(files)
}

fn parse_files_parallel<T, F>(files: &[PathBuf], per_file: &F) -> Result<Vec<T>, CatalogError>
where
    T: Send,
    F: Fn(&Path, DeclarativeConfig) -> T + Sync,
{
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len()).max(1);
    let results: Mutex<Vec<Option<Result<T, CatalogError>>>> = Mutex::new((0..files.len()).map(|_| None).collect());
    // Largest files first, so that a big file does not start last and leave one worker busy
    // alone at the end; results still go to their path-order slot.
    let mut order: Vec<(u64, usize)> =
        files.iter().enumerate().map(|(i, f)| (std::fs::metadata(f).map_or(0, |m| m.len()), i)).collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let work = || {
        loop {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let Some(&(_, i)) = order.get(next.fetch_add(1, Ordering::Relaxed)) else { return };
            let path = &files[i];
            let r = read_file(path)
                .and_then(|b| parse_bytes(&path.display().to_string(), &b))
                .map(|cfg| per_file(path, cfg));
            if r.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            if let Ok(mut all) = results.lock() {
                all[i] = Some(r);
            }
        }
    };
    if workers == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    // The first error in path order wins; files after a failure may not have been parsed.
    results.into_iter().flatten().collect()
}

/// Appends every blob of `src` to `dst` (operator-registry `DeclarativeConfig.Merge`).
pub fn merge(dst: &mut DeclarativeConfig, src: DeclarativeConfig) {
    dst.packages.extend(src.packages);
    dst.channels.extend(src.channels);
    dst.bundles.extend(src.bundles);
    dst.deprecations.extend(src.deprecations);
    dst.others.extend(src.others);
}

// ---------------------------------------------------------------------------------------------
// Writing

#[derive(Serialize)]
struct WirePackage<'a> {
    schema: &'a str,
    name: &'a str,
    #[serde(rename = "defaultChannel")]
    default_channel: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    icon: Option<&'a Icon>,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    properties: &'a [Property],
    #[serde(flatten)]
    extra: &'a IndexMap<String, Value>,
}

#[derive(Serialize)]
struct WireChannel<'a> {
    schema: &'a str,
    name: &'a str,
    package: &'a str,
    entries: &'a [ChannelEntry],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    properties: &'a [Property],
    #[serde(flatten)]
    extra: &'a IndexMap<String, Value>,
}

#[derive(Serialize)]
struct WireRelatedImage<'a> {
    name: &'a str,
    image: &'a str,
}

#[derive(Serialize)]
struct WireBundle<'a> {
    schema: &'a str,
    name: &'a str,
    package: &'a str,
    image: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    properties: &'a [Property],
    #[serde(rename = "relatedImages", skip_serializing_if = "Vec::is_empty")]
    related_images: Vec<WireRelatedImage<'a>>,
    #[serde(flatten)]
    extra: &'a IndexMap<String, Value>,
}

fn wire_package(p: &Package) -> WirePackage<'_> {
    WirePackage {
        schema: &p.schema,
        name: &p.name,
        default_channel: p.default_channel.as_deref().unwrap_or(""),
        icon: p.icon.as_ref(),
        description: p.description.as_deref().unwrap_or(""),
        properties: &p.properties,
        extra: &p.extra,
    }
}

fn wire_channel(c: &Channel) -> WireChannel<'_> {
    WireChannel {
        schema: &c.schema,
        name: &c.name,
        package: &c.package,
        entries: &c.entries,
        properties: &c.properties,
        extra: &c.extra,
    }
}

fn wire_bundle(b: &Bundle) -> WireBundle<'_> {
    WireBundle {
        schema: &b.schema,
        name: &b.name,
        package: &b.package,
        image: &b.image,
        properties: &b.properties,
        related_images: b.related_images.iter().map(|r| WireRelatedImage { name: &r.name, image: &r.image }).collect(),
        extra: &b.extra,
    }
}

/// The blobs of one package (or the package-less remainder), in opm's output order.
struct PackageGroup<'a> {
    packages: Vec<&'a Package>,
    channels: Vec<&'a Channel>,
    bundles: Vec<&'a Bundle>,
    others: Vec<&'a Value>,
    deprecations: Vec<&'a Deprecation>,
}

/// Groups blobs by package name, sorted by name, with blobs ordered as opm's `writeToEncoder`:
/// packages, channels by name, bundles by name, others by schema (stable), deprecations. Returns
/// the groups and the `others` without a package.
fn group_by_package(cfg: &DeclarativeConfig) -> (Vec<(&str, PackageGroup<'_>)>, Vec<&Value>) {
    let mut groups: std::collections::BTreeMap<&str, PackageGroup<'_>> = std::collections::BTreeMap::new();
    fn entry<'a, 'g>(
        groups: &'g mut std::collections::BTreeMap<&'a str, PackageGroup<'a>>,
        name: &'a str,
    ) -> &'g mut PackageGroup<'a> {
        groups.entry(name).or_insert_with(|| PackageGroup {
            packages: Vec::new(),
            channels: Vec::new(),
            bundles: Vec::new(),
            others: Vec::new(),
            deprecations: Vec::new(),
        })
    }
    // opm skips packages, channels, bundles and deprecations with an empty package name when
    // grouping; capstan keeps them (in a group named "") so that nothing is lost silently.
    for p in &cfg.packages {
        entry(&mut groups, &p.name).packages.push(p);
    }
    for c in &cfg.channels {
        entry(&mut groups, &c.package).channels.push(c);
    }
    for b in &cfg.bundles {
        entry(&mut groups, &b.package).bundles.push(b);
    }
    let mut root_others = Vec::new();
    for o in &cfg.others {
        let pkg = meta_str(o, "package");
        if pkg.is_empty() {
            root_others.push(o);
        } else {
            entry(&mut groups, pkg).others.push(o);
        }
    }
    for d in &cfg.deprecations {
        entry(&mut groups, &d.package).deprecations.push(d);
    }
    let mut out: Vec<(&str, PackageGroup<'_>)> = groups.into_iter().collect();
    for (_, g) in &mut out {
        g.channels.sort_by(|a, b| a.name.cmp(&b.name));
        g.bundles.sort_by(|a, b| a.name.cmp(&b.name));
        g.others.sort_by(|a, b| meta_str(a, "schema").cmp(meta_str(b, "schema")));
    }
    (out, root_others)
}

/// Serializes blobs in one format, appending to `out`.
struct Encoder {
    format: Format,
    out: String,
}

impl Encoder {
    fn encode<T: Serialize>(&mut self, v: &T) {
        match self.format {
            Format::Json => {
                let mut buf = Vec::new();
                let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
                let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
                // Serializing model types and JSON values cannot fail: all map keys are strings.
                if v.serialize(&mut ser).is_ok() {
                    let s = String::from_utf8_lossy(&buf);
                    // Go's encoder escapes U+2028 and U+2029 even with HTML escaping off.
                    if s.contains(['\u{2028}', '\u{2029}']) {
                        self.out.push_str(&s.replace('\u{2028}', "\\u2028").replace('\u{2029}', "\\u2029"));
                    } else {
                        self.out.push_str(&s);
                    }
                    self.out.push('\n');
                }
            }
            Format::Yaml => {
                // opm converts each JSON blob to YAML via sigs.k8s.io/yaml, which sorts keys.
                if let Ok(mut value) = serde_json::to_value(v) {
                    sort_keys(&mut value);
                    if let Ok(s) = serde_norway::to_string(&value) {
                        self.out.push_str("---\n");
                        self.out.push_str(&s);
                    }
                }
            }
        }
    }

    fn group(&mut self, g: &PackageGroup<'_>) {
        for p in &g.packages {
            self.encode(&wire_package(p));
        }
        for c in &g.channels {
            self.encode(&wire_channel(c));
        }
        for b in &g.bundles {
            self.encode(&wire_bundle(b));
        }
        for o in &g.others {
            self.encode(o);
        }
        for d in &g.deprecations {
            self.encode(d);
        }
    }
}

fn sort_keys(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.sort_keys();
            for (_, x) in m.iter_mut() {
                sort_keys(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// The whole catalog as one stream in opm's order (operator-registry `WriteJSON` / `WriteYAML`):
/// per package (sorted by name) the `olm.package` blob, channels by name, bundles by name, other
/// schemas (sorted by schema), deprecations; then blobs of other schemas that have no package.
pub fn to_stream(cfg: &DeclarativeConfig, format: Format) -> String {
    let (groups, root_others) = group_by_package(cfg);
    let mut enc = Encoder { format, out: String::new() };
    for (_, g) in &groups {
        enc.group(g);
    }
    for o in root_others {
        enc.encode(o);
    }
    enc.out
}

/// One blob of [`each_blob_json`]: its `schema`, `package` (the package's own name for an
/// `olm.package` blob; "" for a blob of another schema without one), `name` ("" when it has none)
/// and its compact JSON.
#[derive(Debug, Clone, Copy)]
pub struct BlobJson<'a> {
    /// `schema`.
    pub schema: &'a str,
    /// The package the blob belongs to.
    pub package: &'a str,
    /// `name`, "" when absent.
    pub name: &'a str,
    /// Compact JSON of the blob, as it would be written back (no trailing newline).
    pub json: &'a [u8],
}

/// Calls `f` with every blob of the catalog, as compact JSON, in [`to_stream`]'s order (opm's).
pub fn each_blob_json(cfg: &DeclarativeConfig, mut f: impl FnMut(BlobJson<'_>)) {
    let mut buf = Vec::new();
    let mut emit = |schema: &str, package: &str, name: &str, v: &dyn erased::Ser| {
        buf.clear();
        if v.write(&mut buf).is_ok() {
            f(BlobJson { schema, package, name, json: &buf });
        }
    };
    let (groups, root_others) = group_by_package(cfg);
    for (_, g) in &groups {
        for p in &g.packages {
            emit(&p.schema, &p.name, &p.name, &wire_package(p));
        }
        for c in &g.channels {
            emit(&c.schema, &c.package, &c.name, &wire_channel(c));
        }
        for b in &g.bundles {
            emit(&b.schema, &b.package, &b.name, &wire_bundle(b));
        }
        for o in &g.others {
            emit(meta_str(o, "schema"), meta_str(o, "package"), meta_str(o, "name"), *o);
        }
        for d in &g.deprecations {
            emit(&d.schema, &d.package, "", *d);
        }
    }
    for o in root_others {
        emit(meta_str(o, "schema"), "", meta_str(o, "name"), o);
    }
}

/// Object-safe compact JSON serialization for [`each_blob_json`].
mod erased {
    /// A value that writes itself as compact JSON.
    pub(super) trait Ser {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }
}

/// The whole catalog as a JSON stream (objects indented by four spaces, one per blob), as
/// `opm render -o json` writes it. See [`to_stream`] for the order.
pub fn to_json_stream(cfg: &DeclarativeConfig) -> String {
    to_stream(cfg, Format::Json)
}

/// The whole catalog as a YAML multi-document stream (keys sorted), as `opm render -o yaml`.
pub fn to_yaml_stream(cfg: &DeclarativeConfig) -> String {
    to_stream(cfg, Format::Yaml)
}

/// Writes the catalog in opm's directory layout as JSON: `<dir>/<package>/catalog.json` per
/// package, and `<dir>/catalog.json` for blobs of other schemas without a package
/// (operator-registry `WriteFS`). Creates `dir`; overwrites those files; leaves other files alone.
///
/// # Errors
/// [`CatalogError::Write`] for a package name that is not a single path element (empty, `.`,
/// `..`, or containing `/` or `\`); [`CatalogError::Io`] when a directory or file cannot be written.
pub fn write_dir(cfg: &DeclarativeConfig, dir: &Path) -> Result<(), CatalogError> {
    write_dir_format(cfg, dir, Format::Json)
}

/// [`write_dir`] in the given format (`catalog.json` or `catalog.yaml`). Returns nothing; the
/// files written are `<dir>/<package>/catalog<ext>` and, if needed, `<dir>/catalog<ext>`.
///
/// # Errors
/// As [`write_dir`].
pub fn write_dir_format(cfg: &DeclarativeConfig, dir: &Path, format: Format) -> Result<(), CatalogError> {
    written_files(cfg, dir, format).map(|_| ())
}

/// Writes as [`write_dir_format`] and returns the paths written.
pub(crate) fn written_files(cfg: &DeclarativeConfig, dir: &Path, format: Format) -> Result<Vec<PathBuf>, CatalogError> {
    let (groups, root_others) = group_by_package(cfg);
    for (name, _) in &groups {
        if name.is_empty() || *name == "." || *name == ".." || name.contains(['/', '\\']) {
            return Err(CatalogError::Write {
                path: dir.to_path_buf(),
                message: format!(
                    "invalid package name {name:?}: a package name must be a single path element; fix the blobs that name it"
                ),
            });
        }
    }
    let mkdir = |p: &Path| {
        std::fs::create_dir_all(p).map_err(|source| CatalogError::Io {
            path: p.to_path_buf(),
            action: "create directory",
            source,
        })
    };
    mkdir(dir)?;
    let mut written = Vec::new();
    let file_name = format!("catalog{}", format.extension());
    for (name, g) in &groups {
        let pkg_dir = dir.join(name);
        mkdir(&pkg_dir)?;
        let mut enc = Encoder { format, out: String::new() };
        enc.group(g);
        let path = pkg_dir.join(&file_name);
        std::fs::write(&path, enc.out.as_bytes()).map_err(|source| CatalogError::Io {
            path: path.clone(),
            action: "write file",
            source,
        })?;
        written.push(path);
    }
    if !root_others.is_empty() {
        let mut enc = Encoder { format, out: String::new() };
        for o in root_others {
            enc.encode(o);
        }
        let path = dir.join(&file_name);
        std::fs::write(&path, enc.out.as_bytes()).map_err(|source| CatalogError::Io {
            path: path.clone(),
            action: "write file",
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "---\nschema: olm.package\nname: foo\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: foo\nname: stable\nentries:\n  - name: foo.v1.0.0\n  - name: foo.v1.1.0\n    replaces: foo.v1.0.0\n    skipRange: '<1.1.0'\n---\nschema: olm.bundle\nname: foo.v1.0.0\npackage: foo\nimage: r/foo:1\nproperties:\n  - type: olm.package\n    value: {packageName: foo, version: 1.0.0}\n---\nschema: my.custom\npackage: foo\nanswer: 42\n";

    #[test]
    fn yaml_stream_decodes_known_schemas_and_keeps_others() {
        let cfg = parse_bytes("c.yaml", YAML.as_bytes()).unwrap();
        assert_eq!(cfg.packages.len(), 1);
        assert_eq!(cfg.packages[0].default_channel.as_deref(), Some("stable"));
        assert_eq!(cfg.channels[0].entries[1].replaces.as_deref(), Some("foo.v1.0.0"));
        assert_eq!(cfg.channels[0].entries[1].skip_range.as_deref(), Some("<1.1.0"));
        assert_eq!(cfg.bundles[0].properties[0].type_, "olm.package");
        assert_eq!(cfg.others.len(), 1);
        assert_eq!(cfg.others[0]["answer"], 42);
    }

    /// YAML merge keys in a catalog file are expanded as opm's YAML reader (goyaml v2) expands them.
    #[test]
    fn yaml_merge_keys_are_expanded() {
        let y = "---\nschema: olm.bundle\nname: foo.v1.0.0\npackage: foo\nimage: r/foo:1\nproperties:\n  - &pkg\n    type: olm.package\n    value: {packageName: foo, version: 1.0.0}\n  - <<: *pkg\n    type: olm.package.required\n";
        let cfg = parse_bytes("c.yaml", y.as_bytes()).unwrap();
        let props = &cfg.bundles[0].properties;
        assert_eq!(props[1].type_, "olm.package.required");
        assert_eq!(props[1].value, serde_json::json!({"packageName": "foo", "version": "1.0.0"}));
    }

    #[test]
    fn json_round_trip_is_stable_and_sniffed_by_content() {
        let cfg = parse_bytes("c.yaml", YAML.as_bytes()).unwrap();
        let json = to_json_stream(&cfg);
        assert!(json.starts_with(
            "{\n    \"schema\": \"olm.package\",\n    \"name\": \"foo\",\n    \"defaultChannel\": \"stable\"\n}\n"
        ));
        // File named .yaml but holding JSON: decided by content, as opm does.
        let again = parse_bytes("c.yaml", json.as_bytes()).unwrap();
        assert_eq!(again, cfg);
        let yaml = to_yaml_stream(&cfg);
        assert_eq!(parse_bytes("x", yaml.as_bytes()).unwrap(), cfg);
    }

    #[test]
    fn meta_and_fields_are_case_insensitive() {
        let cfg = parse_bytes("c.json", br#"{"Schema":"olm.package","NAME":"foo","defaultchannel":"s"}"#).unwrap();
        assert_eq!(cfg.packages[0].name, "foo");
        assert_eq!(cfg.packages[0].default_channel.as_deref(), Some("s"));
        let err = parse_bytes("c.json", br#"{"schema":"olm.package","name":"a","Name":"b"}"#).unwrap_err();
        assert!(matches!(err, CatalogError::DuplicateKey { .. }), "{err}");
        assert!(err.to_string().contains("c.json"));
    }

    #[test]
    fn missing_schema_names_file_blob_and_line() {
        let err = parse_bytes("dir/p/catalog.json", b"{\"schema\":\"olm.package\",\"name\":\"a\"}\n\n{\"name\":\"x\"}")
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("dir/p/catalog.json") && msg.contains("blob 1") && msg.contains("line 3"), "{msg}");
        assert!(msg.contains("schema") && msg.contains("\"x\""), "{msg}");
    }

    #[test]
    fn wrong_field_type_names_field_path() {
        let err = parse_bytes(
            "c.yaml",
            b"schema: olm.channel\npackage: p\nname: s\nentries:\n  - name: a\n    skips: notalist\n",
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("entries[0].skips") && msg.contains("expected a list"), "{msg}");
    }

    #[test]
    fn truncated_and_non_utf8_inputs_are_errors_naming_the_file() {
        let err = parse_bytes("t.json", b"{\"schema\": \"olm.package\", \"name\": \"fo").unwrap_err();
        assert!(matches!(err, CatalogError::Syntax { format: "JSON", .. }) && err.to_string().contains("t.json"));
        let err = parse_bytes("t.yaml", b"schema: olm.package\nname: [foo\n").unwrap_err();
        assert!(matches!(err, CatalogError::Syntax { format: "YAML", .. }) && err.to_string().contains("t.yaml"));
        let err = parse_bytes("b.yaml", b"schema: olm.package\nname: \xff\xfe\n").unwrap_err();
        match err {
            CatalogError::NotUtf8 { file, line, column } => assert_eq!((file.as_str(), line, column), ("b.yaml", 2, 7)),
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn yaml_errors_report_line_in_file() {
        let err =
            parse_bytes("l.yaml", b"schema: olm.package\nname: a\n---\nschema: olm.bundle\nname: [x\n").unwrap_err();
        match err {
            CatalogError::Syntax { line, .. } => assert!(line >= 4, "line {line}"),
            other => panic!("unexpected {other}"),
        }
        let err = parse_bytes("l.yaml", b"schema: olm.package\n--- name: a\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn syntax_errors_show_the_location_once_in_file_lines() {
        // YAML: the error is in the second document; libyaml counts lines from the document.
        let err = parse_bytes(
            "l.yaml",
            b"schema: olm.package\nname: a\n---\nschema: olm.package\nname: b\ndefaultChannel: [x\n  y: : z\n",
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, CatalogError::Syntax { line: 7, .. }), "{msg}");
        assert_eq!(
            msg,
            "l.yaml: line 7: invalid YAML: did not find expected ',' or ']' at column 4, while parsing a flow sequence at line 6 column 17"
        );
        // JSON: serde_json's own " at line L column C" is not repeated.
        let err = parse_bytes("j.json", b"{\"schema\": \"olm.package\",\n \"name\": }\n").unwrap_err();
        assert_eq!(err.to_string(), "j.json: line 2: invalid JSON: expected value at column 10");
        // The flow-depth guard's line is not repeated either.
        let deep = format!("schema: olm.package\nname: {}\n", "[".repeat(MAX_FLOW_DEPTH_FOR_TEST + 1));
        let msg = parse_bytes("d.yaml", deep.as_bytes()).unwrap_err().to_string();
        assert!(
            msg.starts_with("d.yaml: line 2: invalid YAML: flow collections") && msg.matches("line").count() == 1,
            "{msg}"
        );
    }

    const MAX_FLOW_DEPTH_FOR_TEST: usize = crate::yaml::MAX_FLOW_DEPTH;

    #[test]
    fn oversized_description_is_rejected() {
        let big = "x".repeat(MAX_DESCRIPTION_BYTES + 1);
        let doc = format!("{{\"schema\":\"olm.package\",\"name\":\"p\",\"description\":\"{big}\"}}");
        let err = parse_bytes("big.json", doc.as_bytes()).unwrap_err();
        assert!(matches!(err, CatalogError::TooLarge { .. }));
        assert!(err.to_string().contains("big.json") && err.to_string().contains("description"));
    }

    #[test]
    fn scalar_documents_and_empty_documents() {
        assert!(parse_bytes("e.yaml", b"---\n# only a comment\n---\n").unwrap().packages.is_empty());
        let err = parse_bytes("s.yaml", b"just text\n").unwrap_err();
        assert!(matches!(err, CatalogError::NotAnObject { .. }), "{err}");
    }

    #[test]
    fn bad_icon_base64_is_rejected() {
        let err = parse_bytes(
            "i.json",
            br#"{"schema":"olm.package","name":"p","icon":{"base64data":"!!notbase64","mediatype":"image/png"}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("icon.base64data"), "{err}");
    }

    #[test]
    fn load_path_walks_sorted_and_honours_indexignore() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("b")).unwrap();
        std::fs::create_dir_all(root.join("a/skip")).unwrap();
        std::fs::write(root.join("b/catalog.json"), br#"{"schema":"olm.package","name":"b"}"#).unwrap();
        std::fs::write(root.join("a/catalog.yaml"), b"schema: olm.package\nname: a\n").unwrap();
        std::fs::write(root.join("a/skip/x.json"), b"garbage").unwrap();
        std::fs::write(root.join("README.md"), b"# not fbc").unwrap();
        std::fs::write(root.join(".indexignore"), b"README.md\nskip/\n").unwrap();
        let cfg = load_path(root).unwrap();
        let names: Vec<_> = cfg.packages.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        // Without the ignore file the README is parsed (as opm does) and fails, naming the file.
        std::fs::remove_file(root.join(".indexignore")).unwrap();
        let err = load_path(root).unwrap_err();
        assert!(err.file().ends_with("README.md") || err.file().ends_with("x.json"), "{err}");
    }

    #[test]
    fn write_dir_uses_one_directory_per_package() {
        let cfg = parse_bytes("c.yaml", YAML.as_bytes()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        write_dir(&cfg, dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("foo/catalog.json")).unwrap();
        assert!(text.contains("\"schema\": \"my.custom\""));
        assert_eq!(load_path(dir.path()).unwrap(), cfg);
        let mut bad = cfg.clone();
        bad.packages[0].name = "../evil".into();
        assert!(matches!(write_dir(&bad, dir.path()), Err(CatalogError::Write { .. })));
    }
}
