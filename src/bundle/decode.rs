//! Reading a bundle directory: files in name order, YAML (multi-document) or JSON, with errors
//! that name the file. Semantics follow operator-registry `pkg/registry/parse.go` and
//! `pkg/registry/decode.go` (first document per file, first CSV, first metadata file of each kind).

use std::fs;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use crate::catalog::model::Property;

use super::{
    ANNOTATION_CHANNELS, ANNOTATION_DEFAULT_CHANNEL, ANNOTATION_PACKAGE, Annotations, Bundle, BundleError, Dependency,
    MAX_FILE_SIZE, Manifest,
};

pub(super) fn load(dir: &Path) -> Result<Bundle, BundleError> {
    let manifests_dir = dir.join("manifests");
    let metadata_dir = dir.join("metadata");
    check_layout(dir, &manifests_dir, &metadata_dir)?;
    let manifests = read_manifests(dir, &manifests_dir)?;
    check_csv_name(&manifests.objects[manifests.csv_index])?;
    let metadata = read_metadata(dir, &metadata_dir)?;
    Ok(Bundle {
        dir: dir.to_path_buf(),
        annotations: metadata.annotations,
        dependencies: metadata.dependencies,
        dependencies_file: metadata.dependencies_file,
        properties: metadata.properties,
        properties_file: metadata.properties_file,
        objects: manifests.objects,
        csv_index: manifests.csv_index,
        csv_as_written: manifests.csv_as_written,
        noncanonical_keys: manifests.noncanonical_keys,
        ignored: manifests.ignored,
    })
}

/// A bundle of objects held in memory (a ConfigMap catalog's, a catalog's `olm.bundle.object`s),
/// each named for messages by its path; `origin` stands for the directory. The first
/// ClusterServiceVersion is the bundle's (later ones are ignored, as [`load`] ignores them),
/// its keys spelled as Go reads them.
pub(super) fn from_objects(
    origin: &Path,
    annotations: Annotations,
    objects: Vec<(PathBuf, Value)>,
) -> Result<Bundle, BundleError> {
    let mut manifests = Manifests {
        objects: Vec::new(),
        ignored: Vec::new(),
        csv_index: 0,
        csv_as_written: None,
        noncanonical_keys: Vec::new(),
    };
    let mut csv_index = None;
    for (path, value) in objects {
        let mut manifest = Manifest { path, document: 0, value };
        check_object(&manifest)?;
        if manifest.kind() == "ClusterServiceVersion" {
            if csv_index.is_some() {
                manifests.ignored.push(manifest);
                continue;
            }
            csv_index = Some(manifests.objects.len());
            let (canonical, keys) = super::gofields::canonical_csv(&manifest.value);
            if !keys.is_empty() {
                manifests.csv_as_written = Some(std::mem::replace(&mut manifest.value, canonical));
                manifests.noncanonical_keys = keys;
            }
        }
        manifests.objects.push(manifest);
    }
    let Some(csv_index) = csv_index else {
        return Err(BundleError::NoCsv { dir: origin.to_path_buf(), spelled_kind: None, empty: Vec::new() });
    };
    manifests.csv_index = csv_index;
    check_csv_name(&manifests.objects[csv_index])?;
    Ok(Bundle {
        dir: origin.to_path_buf(),
        annotations,
        dependencies: Vec::new(),
        dependencies_file: None,
        properties: Vec::new(),
        properties_file: None,
        objects: manifests.objects,
        csv_index,
        csv_as_written: manifests.csv_as_written,
        noncanonical_keys: manifests.noncanonical_keys,
        ignored: manifests.ignored,
    })
}

/// The bundle a catalog's `olm.bundle` blob holds inline, in its `olm.bundle.object`
/// properties (base64 JSON of each object), as OLM installs a bundle without an image; each
/// object named `<bundle> olm.bundle.object[i]` in messages.
pub(super) fn from_blob(blob: &crate::catalog::model::Bundle) -> Result<Bundle, BundleError> {
    use base64::Engine;
    let origin = PathBuf::from(format!("catalog bundle {}", blob.name));
    let mut objects = Vec::new();
    let props = blob.properties.iter().filter(|p| p.type_ == crate::catalog::property::BUNDLE_OBJECT);
    for (i, p) in props.enumerate() {
        let path = PathBuf::from(format!("catalog bundle {} olm.bundle.object[{i}]", blob.name));
        let field = |message: String| BundleError::Field { path: path.clone(), field: "value.data".into(), message };
        let data = p.value.get("data").and_then(Value::as_str).ok_or_else(|| field("missing".into()))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| field(format!("not base64: {e}")))?;
        let value = serde_json::from_slice(&bytes).map_err(|e| field(format!("not a JSON object: {e}")))?;
        objects.push((path, value));
    }
    let annotations = Annotations {
        package: blob.package.clone(),
        all: IndexMap::from([(ANNOTATION_PACKAGE.to_string(), blob.package.clone())]),
        ..Default::default()
    };
    from_objects(&origin, annotations, objects)
}

/// `dir` exists, is a directory and holds `manifests/` and `metadata/` directories (not
/// symlinks).
fn check_layout(dir: &Path, manifests_dir: &Path, metadata_dir: &Path) -> Result<(), BundleError> {
    match fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BundleError::NotFound { dir: dir.to_path_buf() });
        }
        Ok(m) if m.is_file() => return Err(BundleError::NotADirectory { path: dir.to_path_buf() }),
        _ => {}
    }
    for (path, name) in [(manifests_dir, "manifests"), (metadata_dir, "metadata")] {
        // Not following links: a `manifests -> /etc` symlink is refused, not read.
        match fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => {}
            Ok(m) => {
                crate::oci::layer::check_plain_file_type(m.file_type())
                    .map_err(|source| BundleError::Io { path: path.to_path_buf(), source })?;
                return Err(missing_directory(dir, name));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(missing_directory(dir, name)),
            Err(source) => return Err(BundleError::Io { path: path.to_path_buf(), source }),
        }
    }
    Ok(())
}

/// [`BundleError::MissingDirectory`] for `dir/name`, with a hint when the bundle is one level
/// down (community-operators' `<version>/bundle/`).
fn missing_directory(dir: &Path, name: &'static str) -> BundleError {
    let nested = dir.join("bundle");
    let hint = if nested.join("manifests").is_dir() && nested.join("metadata").is_dir() {
        format!("; did you mean {}?", nested.display())
    } else {
        String::new()
    };
    BundleError::MissingDirectory { dir: dir.to_path_buf(), name, hint }
}

/// What `manifests/` holds, as [`Bundle`] keeps it.
struct Manifests {
    /// The first document of each file, in file name order.
    objects: Vec<Manifest>,
    /// Documents opm ignores: later documents of a file, CSVs after the first.
    ignored: Vec<Manifest>,
    /// Position of the first CSV in `objects`.
    csv_index: usize,
    /// The CSV as written, when its keys were not spelled as Go spells them.
    csv_as_written: Option<Value>,
    /// The CSV keys Go matched case-insensitively.
    noncanonical_keys: Vec<super::gofields::NonCanonicalKey>,
}

/// Reads `manifests/`: the first document of each file, the first CSV (its keys spelled as Go
/// matches them).
///
/// # Errors
/// An unreadable file or document, an object that is not one, and [`BundleError::NoCsv`]
/// (with a misspelt `kind` key and the empty files, to say why).
fn read_manifests(dir: &Path, manifests_dir: &Path) -> Result<Manifests, BundleError> {
    let mut objects = Vec::new();
    let mut ignored = Vec::new();
    let mut csv_index = None;
    let mut csv_as_written = None;
    let mut noncanonical_keys = Vec::new();
    let mut spelled_kind = None;
    let mut empty = Vec::new();
    for (name, full) in list_files(manifests_dir)? {
        let rel = PathBuf::from("manifests").join(&name);
        let docs = read_documents(&full, &rel)?;
        if docs.is_empty() {
            empty.push(rel.clone());
        }
        for (document, doc) in docs.into_iter().enumerate() {
            let mut manifest = Manifest { path: rel.clone(), document, value: doc };
            check_object(&manifest)?;
            if document > 0 {
                ignored.push(manifest);
                continue;
            }
            if manifest.kind().is_empty() && spelled_kind.is_none() {
                spelled_kind = misspelt_csv_kind(&manifest).map(|key| (rel.clone(), key));
            }
            if manifest.kind() == "ClusterServiceVersion" {
                if csv_index.is_some() {
                    ignored.push(manifest);
                    continue;
                }
                csv_index = Some(objects.len());
                // OLM and opm decode the CSV into its Go type, matching field names as Go does.
                let (canonical, keys) = super::gofields::canonical_csv(&manifest.value);
                if !keys.is_empty() {
                    csv_as_written = Some(std::mem::replace(&mut manifest.value, canonical));
                    noncanonical_keys = keys;
                }
            }
            objects.push(manifest);
        }
    }
    let Some(csv_index) = csv_index else {
        return Err(BundleError::NoCsv { dir: dir.to_path_buf(), spelled_kind, empty });
    };
    Ok(Manifests { objects, ignored, csv_index, csv_as_written, noncanonical_keys })
}

/// The key of a `kind: ClusterServiceVersion` spelt with another case (`Kind:`), which leaves
/// the object without a kind.
fn misspelt_csv_kind(manifest: &Manifest) -> Option<String> {
    let map = manifest.value.as_object()?;
    let (key, _) = map.iter().find(|(k, v)| {
        k.as_str() != "kind" && k.eq_ignore_ascii_case("kind") && v.as_str() == Some("ClusterServiceVersion")
    })?;
    Some(key.clone())
}

/// The CSV's `metadata.name` is a non-empty string.
fn check_csv_name(csv: &Manifest) -> Result<(), BundleError> {
    match csv.value.pointer("/metadata/name") {
        Some(Value::String(s)) if !s.is_empty() => Ok(()),
        Some(Value::String(_)) | None => Err(BundleError::Field {
            path: csv.path.clone(),
            field: "metadata.name".into(),
            message: "missing; set the CSV name, e.g. <package>.v<version>".into(),
        }),
        Some(other) => Err(BundleError::Field {
            path: csv.path.clone(),
            field: "metadata.name".into(),
            message: format!("must be a string, found {}", type_name(other)),
        }),
    }
}

/// What `metadata/` holds, as [`Bundle`] keeps it.
struct Metadata {
    annotations: Annotations,
    dependencies: Vec<Dependency>,
    dependencies_file: Option<PathBuf>,
    properties: Vec<Property>,
    properties_file: Option<PathBuf>,
}

/// Reads `metadata/`: the first file (by name) that decodes as annotations, as dependencies and
/// as properties, each from its first document.
///
/// # Errors
/// An unreadable file or document, an entry list that does not decode, and no annotations file
/// ([`BundleError::BadAnnotations`] naming the first file that looks meant as one).
fn read_metadata(dir: &Path, metadata_dir: &Path) -> Result<Metadata, BundleError> {
    let mut annotations = None;
    // The first metadata file that looks meant as the annotations file but does not decode as
    // one, and why: reported when no file does.
    let mut bad_annotations: Option<(PathBuf, String)> = None;
    let mut dependencies: Option<(PathBuf, Vec<Dependency>)> = None;
    let mut properties: Option<(PathBuf, Vec<Property>)> = None;
    for (name, full) in list_files_any(metadata_dir)? {
        let rel = PathBuf::from("metadata").join(&name);
        let docs = read_documents(&full, &rel)?;
        let Some(first) = docs.into_iter().next() else {
            // An empty annotations file is named, not reported as missing.
            if bad_annotations.is_none() && matches!(name.as_str(), "annotations.yaml" | "annotations.yml") {
                bad_annotations = Some((rel.clone(), "the file is empty (no YAML document)".to_string()));
            }
            continue;
        };
        if annotations.is_none() {
            annotations = decode_annotations(&first, &rel)?;
            if annotations.is_none() && bad_annotations.is_none() {
                bad_annotations = annotations_problem(&first, &name).map(|p| (rel.clone(), p));
            }
        }
        if dependencies.is_none()
            && let Some(list) = decode_entries(&first, "dependencies", &rel)?
        {
            dependencies = Some((rel.clone(), list));
        }
        if properties.is_none()
            && let Some(list) = decode_entries(&first, "properties", &rel)?
        {
            let list = list.into_iter().map(|d| Property { type_: d.type_, value: d.value }).collect();
            properties = Some((rel.clone(), list));
        }
    }
    let Some(annotations) = annotations else {
        return Err(match bad_annotations {
            Some((path, problem)) => BundleError::BadAnnotations { path, problem },
            None => BundleError::NoAnnotations { dir: dir.to_path_buf() },
        });
    };
    let (dependencies_file, dependencies) = dependencies.map_or((None, Vec::new()), |(f, d)| (Some(f), d));
    let (properties_file, properties) = properties.map_or((None, Vec::new()), |(f, d)| (Some(f), d));
    Ok(Metadata { annotations, dependencies, dependencies_file, properties, properties_file })
}

/// Regular files of `dir` whose names do not start with `.`, sorted by name (bytes), as opm's
/// `fs.ReadDir` + hidden-file skip. Subdirectories are skipped; a symlink, device, FIFO or socket
/// is an error ([`crate::oci::layer::check_plain_file_type`], the rule of bundle images too).
fn list_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, BundleError> {
    Ok(list_files_any(dir)?.into_iter().filter(|(n, _)| !n.starts_with('.')).collect())
}

/// Regular files of `dir` sorted by name (metadata/ does not skip hidden files in opm); errors as
/// [`list_files`].
fn list_files_any(dir: &Path) -> Result<Vec<(String, PathBuf)>, BundleError> {
    let io = |source| BundleError::Io { path: dir.to_path_buf(), source };
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(|source| BundleError::Io { path: path.clone(), source })?;
        crate::oci::layer::check_plain_file_type(file_type)
            .map_err(|source| BundleError::Io { path: path.clone(), source })?;
        if !file_type.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        out.push((name, path));
    }
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

/// Reads a file and parses every YAML document (or the JSON values of a JSON stream). Empty
/// documents (`---` with nothing after it, or only comments) are dropped.
pub(crate) fn read_documents(full: &Path, rel: &Path) -> Result<Vec<Value>, BundleError> {
    let meta = fs::metadata(full).map_err(|source| BundleError::Io { path: rel.to_path_buf(), source })?;
    if meta.len() > MAX_FILE_SIZE {
        return Err(BundleError::TooLarge { path: rel.to_path_buf(), size: meta.len(), limit: MAX_FILE_SIZE });
    }
    let bytes = fs::read(full).map_err(|source| BundleError::Io { path: rel.to_path_buf(), source })?;
    parse_documents(&bytes, rel)
}

/// Parses bytes as YAML documents or a JSON stream (opm's `NewYAMLOrJSONDecoder` sniffs JSON when
/// the first non-space byte is `{`).
pub(crate) fn parse_documents(bytes: &[u8], rel: &Path) -> Result<Vec<Value>, BundleError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| BundleError::NotUtf8 { path: rel.to_path_buf(), offset: e.valid_up_to() })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let syntax = |message: String| BundleError::Syntax { path: rel.to_path_buf(), message };
    if text.trim_start().starts_with('{') {
        let mut out = Vec::new();
        for v in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
            out.push(v.map_err(|e| syntax(format!("invalid JSON: {e}")))?);
        }
        return Ok(out);
    }
    crate::yaml::check_flow_depth(text).map_err(|e| syntax(e.to_string()))?;
    let mut out = Vec::new();
    for v in crate::yaml::documents(text) {
        let v = v.map_err(|e| syntax(format!("invalid YAML: {e}")))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

fn check_object(m: &Manifest) -> Result<(), BundleError> {
    if m.value.is_object() {
        return Ok(());
    }
    Err(BundleError::NotAnObject {
        path: m.path.clone(),
        document: m.document + 1,
        message: format!(
            "expected a Kubernetes object (a mapping with apiVersion, kind and metadata), found {}",
            type_name(&m.value)
        ),
    })
}

/// Why the first document of metadata file `name`, which [`decode_annotations`] did not accept,
/// was not an annotations file — when it looks meant as one: the file is named
/// `annotations.yaml` / `.yml` / `.json`, or it has bundle annotation keys at its top level.
/// `None` for other files (`dependencies.yaml`, `properties.yaml`, …).
fn annotations_problem(doc: &Value, name: &str) -> Option<String> {
    let named = matches!(name, "annotations.yaml" | "annotations.yml" | "annotations.json");
    let top_level_keys =
        doc.as_object().is_some_and(|m| m.keys().any(|k| k.starts_with("operators.operatorframework.io.bundle.")));
    if !named && !top_level_keys {
        return None;
    }
    Some(match doc.get("annotations") {
        None if top_level_keys => {
            "no top-level `annotations:` map: the bundle annotations are at the top level of the file; indent them under `annotations:`".to_string()
        }
        None => "no top-level `annotations:` map".to_string(),
        Some(Value::Object(_)) => format!("`annotations:` sets neither {ANNOTATION_PACKAGE} nor {ANNOTATION_CHANNELS}"),
        Some(other) => format!("`annotations` is {}, not a map", type_name(other)),
    })
}

/// Decodes an annotations file the way Go decodes `AnnotationsFile`: `annotations` must be a
/// mapping; the file counts when one of the three known keys is non-empty. A known key with a
/// non-string value makes the Go decode fail, so the file does not count either.
fn decode_annotations(doc: &Value, rel: &Path) -> Result<Option<Annotations>, BundleError> {
    let Some(Value::Object(map)) = doc.get("annotations") else { return Ok(None) };
    let known = [ANNOTATION_PACKAGE, ANNOTATION_CHANNELS, ANNOTATION_DEFAULT_CHANNEL];
    for k in known {
        if let Some(v) = map.get(k)
            && !v.is_string()
            && !v.is_null()
        {
            return Err(BundleError::Field {
                path: rel.to_path_buf(),
                field: format!("annotations.{k}"),
                message: format!("must be a string, found {}; quote the value", type_name(v)),
            });
        }
    }
    let get = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let package = get(ANNOTATION_PACKAGE);
    let channels = get(ANNOTATION_CHANNELS);
    let default_channel = get(ANNOTATION_DEFAULT_CHANNEL);
    if package.is_empty() && channels.is_empty() && default_channel.is_empty() {
        return Ok(None);
    }
    let mut all = IndexMap::new();
    for (k, v) in map {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            Value::Bool(_) | Value::Number(_) => v.to_string(),
            other => {
                return Err(BundleError::Field {
                    path: rel.to_path_buf(),
                    field: format!("annotations.{k}"),
                    message: format!("must be a string, found {}", type_name(other)),
                });
            }
        };
        all.insert(k.clone(), text);
    }
    Ok(Some(Annotations {
        file: rel.to_path_buf(),
        package,
        channels: if channels.is_empty() { Vec::new() } else { channels.split(',').map(str::to_string).collect() },
        default_channel: if default_channel.is_empty() { None } else { Some(default_channel) },
        all,
    }))
}

/// Decodes `dependencies:` / `properties:` lists of `{type, value}`. Returns `None` when the key is
/// absent or the list is empty (opm then keeps looking in later files).
fn decode_entries(doc: &Value, key: &str, rel: &Path) -> Result<Option<Vec<Dependency>>, BundleError> {
    let Some(list) = doc.get(key) else { return Ok(None) };
    let Value::Array(items) = list else {
        if list.is_null() {
            return Ok(None);
        }
        return Err(BundleError::Field {
            path: rel.to_path_buf(),
            field: key.to_string(),
            message: format!("must be a list of {{type, value}} entries, found {}", type_name(list)),
        });
    };
    if items.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = |f: &str| format!("{key}[{i}]{f}");
        let Value::Object(map) = item else {
            return Err(BundleError::Field {
                path: rel.to_path_buf(),
                field: field(""),
                message: format!("must be a mapping with type and value, found {}", type_name(item)),
            });
        };
        let type_ = match map.get("type") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            Some(other) => {
                return Err(BundleError::Field {
                    path: rel.to_path_buf(),
                    field: field(".type"),
                    message: format!("must be a string, found {}", type_name(other)),
                });
            }
        };
        out.push(Dependency { type_, value: map.get("value").cloned().unwrap_or(Value::Null) });
    }
    Ok(Some(out))
}

/// JSON type name for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_multi_document_and_empty_documents() {
        let docs = parse_documents(b"---\na: 1\n---\n# only a comment\n---\nb: [x]\n", Path::new("f.yaml")).unwrap();
        assert_eq!(docs, vec![serde_json::json!({"a": 1}), serde_json::json!({"b": ["x"]})]);
    }

    #[test]
    fn json_stream_is_sniffed() {
        let docs = parse_documents(b"  {\"a\": 1} {\"b\": 2}", Path::new("f.json")).unwrap();
        assert_eq!(docs.len(), 2);
    }

    #[test]
    fn non_utf8_names_file_and_offset() {
        let err = parse_documents(b"kind: A\xff\n", Path::new("manifests/x.yaml")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("manifests/x.yaml") && text.contains("offset 7"), "{text}");
    }

    #[test]
    fn truncated_yaml_names_file() {
        let err = parse_documents(b"a:\n  b: [1, 2\n", Path::new("manifests/x.yaml")).unwrap_err();
        assert!(err.to_string().starts_with("manifests/x.yaml: invalid YAML"), "{err}");
    }

    #[test]
    fn annotations_channels_split_like_opm() {
        let doc = serde_json::json!({"annotations": {
            ANNOTATION_PACKAGE: "p", ANNOTATION_CHANNELS: "alpha,beta", "x": 1}});
        let a = decode_annotations(&doc, Path::new("metadata/annotations.yaml")).unwrap().unwrap();
        assert_eq!(a.channels, vec!["alpha", "beta"]);
        assert_eq!(a.default_channel, None);
        assert_eq!(a.all.get("x").map(String::as_str), Some("1"));
    }

    #[test]
    fn dependencies_must_be_a_list() {
        let doc = serde_json::json!({"dependencies": {"type": "olm.package"}});
        let err = decode_entries(&doc, "dependencies", Path::new("metadata/dependencies.yaml")).unwrap_err();
        assert!(err.to_string().contains("metadata/dependencies.yaml: field dependencies"), "{err}");
    }

    #[test]
    fn deep_nesting_and_alias_bombs_are_errors_not_crashes() {
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_documents(deep.as_bytes(), Path::new("manifests/deep.yaml")).is_err());
        let deep_json = format!("{{\"a\":{}1{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_documents(deep_json.as_bytes(), Path::new("manifests/deep.json")).is_err());
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..12 {
            let prev = if i == 0 { "a".to_string() } else { format!("b{}", i - 1) };
            bomb.push_str(&format!("b{i}: &b{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        let err = parse_documents(bomb.as_bytes(), Path::new("manifests/bomb.yaml")).unwrap_err();
        assert!(err.to_string().starts_with("manifests/bomb.yaml: invalid YAML"), "{err}");
    }

    proptest::proptest! {
        /// Arbitrary bytes give documents or an error naming the file, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            if let Err(e) = parse_documents(&bytes, Path::new("manifests/x.yaml")) {
                proptest::prop_assert!(e.to_string().starts_with("manifests/x.yaml"));
            }
        }

        /// Arbitrary YAML-ish text (indentation, flow, anchors, tags, quotes) likewise.
        #[test]
        fn arbitrary_yaml_text_never_panics(text in "([a-z]{0,3}|[ \\t\\n:,\\-\\[\\]{}&*!|>'\"#%@]){0,80}") {
            if let Err(e) = parse_documents(text.as_bytes(), Path::new("manifests/x.yaml")) {
                proptest::prop_assert!(e.to_string().starts_with("manifests/x.yaml"));
            }
        }
    }
}
