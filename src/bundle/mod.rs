//! registry+v1 bundles: read, validate, build and push images, pull and unpack them.
//!
//! A bundle directory holds `manifests/` (exactly one ClusterServiceVersion, its CRDs and other
//! objects) and `metadata/` (`annotations.yaml`, optional `dependencies.yaml` and
//! `properties.yaml`); see `../shared/reference/olm-v0.md` §2.1–2.2. [`Bundle::load`] reads one
//! the way operator-registry's `pkg/registry/parse.go` does, but it reports every unreadable file
//! instead of skipping it; [`validate()`] checks it and [`crate::bundle::render`] turns it into an
//! `olm.bundle` blob.

pub mod configmap;
mod crd;
mod csv;
mod decode;
mod finding;
pub mod gofields;
pub(crate) mod gojson;
pub mod image;
pub mod rbac;
pub mod render;
mod validate;
pub mod webhooks;

pub use crd::{CrdVersion, CrdView};
pub use csv::{
    CrdDescription, CsvView, INSTALL_MODE_TYPES, InstallMode, PROPERTIES_ANNOTATION, PropertiesAnnotationError,
    SKIP_RANGE_ANNOTATION,
};
pub use finding::{Finding, Severity};
pub use validate::{ALLOWED_KINDS, MAX_OBJECT_SIZE, render_validated, validate};

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

/// Annotation key of the package name (`metadata/annotations.yaml`, also an image label).
pub const ANNOTATION_PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
/// Annotation key of the comma-separated channel list.
pub const ANNOTATION_CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
/// Annotation key of the default channel.
pub const ANNOTATION_DEFAULT_CHANNEL: &str = "operators.operatorframework.io.bundle.channel.default.v1";
/// Annotation key of the media type (`registry+v1`, `plain` or `helm`).
pub const ANNOTATION_MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";
/// Annotation key of the manifests directory (`manifests/`).
pub const ANNOTATION_MANIFESTS: &str = "operators.operatorframework.io.bundle.manifests.v1";
/// Annotation key of the metadata directory (`metadata/`).
pub const ANNOTATION_METADATA: &str = "operators.operatorframework.io.bundle.metadata.v1";

/// Largest manifest or metadata file [`Bundle::load`] reads, in bytes (16 MiB). The API server
/// stores no object over about 1.5 MiB (etcd's request limit), so a larger file cannot be a
/// working bundle; the limit keeps a hostile file from exhausting memory.
pub const MAX_FILE_SIZE: u64 = 16 << 20;

/// A registry+v1 bundle read from a directory.
///
/// Paths inside are relative to [`Bundle::dir`] (for example `manifests/etcd.csv.yaml`) so that
/// messages name files the way the author sees them.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The bundle directory as given to [`Bundle::load`].
    pub dir: PathBuf,
    /// The decoded `annotations.yaml`.
    pub annotations: Annotations,
    /// `dependencies.yaml` entries (`type` + raw `value`), empty when the file is absent.
    pub dependencies: Vec<Dependency>,
    /// File the dependencies came from.
    pub dependencies_file: Option<PathBuf>,
    /// `properties.yaml` entries (`type` + raw `value`), empty when the file is absent.
    pub properties: Vec<crate::catalog::model::Property>,
    /// File the properties came from.
    pub properties_file: Option<PathBuf>,
    /// The objects OLM and opm use: the first document of every file in `manifests/`, sorted by
    /// file name (Go's `fs.ReadDir` order), hidden files and sub-directories skipped. Only the
    /// first ClusterServiceVersion counts; later ones are in [`Bundle::ignored`].
    pub objects: Vec<Manifest>,
    /// Index of the ClusterServiceVersion in [`Bundle::objects`]. Its value has its keys spelled
    /// as the Go type's fields (`Kind:` read as `kind:`, as OLM and opm read it:
    /// [`gofields`]); the CSV as written is [`Bundle::csv_as_written`].
    pub csv_index: usize,
    /// The CSV exactly as written when some of its keys are spelled otherwise than their Go
    /// fields ([`Bundle::noncanonical_keys`] lists them); `None` when it is the same as the CSV
    /// in [`Bundle::objects`]. opm renders the CSV as written.
    pub csv_as_written: Option<Value>,
    /// Keys of the CSV that fill a Go field under another spelling (`MinKubeVersion` for
    /// `minKubeVersion`), in document order; [`validate()`] warns about each.
    pub noncanonical_keys: Vec<gofields::NonCanonicalKey>,
    /// Documents opm and OLM ignore: the second and later documents of a multi-document file and
    /// any ClusterServiceVersion after the first. [`validate()`] reports them.
    pub ignored: Vec<Manifest>,
}

/// One Kubernetes object from a manifest file.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// File relative to the bundle directory, e.g. `manifests/etcd.crd.yaml`.
    pub path: PathBuf,
    /// Zero-based document number inside the file.
    pub document: usize,
    /// The object, as written (nothing pruned or defaulted) — except that the bundle's CSV has
    /// its keys spelled as its Go fields (see [`Bundle::csv_index`]).
    pub value: Value,
}

impl Manifest {
    /// `apiVersion`, or "" when absent or not a string.
    pub fn api_version(&self) -> &str {
        self.value.get("apiVersion").and_then(Value::as_str).unwrap_or("")
    }
    /// `kind`, or "" when absent or not a string.
    pub fn kind(&self) -> &str {
        self.value.get("kind").and_then(Value::as_str).unwrap_or("")
    }
    /// `metadata.name`, or "" when absent or not a string.
    pub fn name(&self) -> &str {
        self.value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
    }
    /// Whether this is a CustomResourceDefinition (any group, as operator-registry checks only the kind).
    pub fn is_crd(&self) -> bool {
        self.kind() == "CustomResourceDefinition"
    }
    /// "file" or "file (document N)" for messages.
    pub fn location(&self) -> String {
        if self.document == 0 {
            self.path.display().to_string()
        } else {
            format!("{} (document {})", self.path.display(), self.document + 1)
        }
    }
}

/// The bundle's `metadata/annotations.yaml` (`olm-v0.md` §2.1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Annotations {
    /// File the annotations came from, relative to the bundle directory.
    pub file: PathBuf,
    /// Package name (`operators.operatorframework.io.bundle.package.v1`); "" when absent.
    pub package: String,
    /// Channels, split at commas exactly as operator-registry does (no trimming); empty when absent.
    pub channels: Vec<String>,
    /// Default channel; `None` when absent or empty.
    pub default_channel: Option<String>,
    /// Every annotation in file order, scalar values as text (these become image labels).
    pub all: IndexMap<String, String>,
}

/// One `dependencies.yaml` entry: a type and its raw value (operator-registry
/// `pkg/registry/types.go` `Dependency`).
#[derive(Debug, Clone, PartialEq)]
pub struct Dependency {
    /// Entry type, e.g. `olm.package`, `olm.gvk`, `olm.constraint`.
    pub type_: String,
    /// Raw value as written.
    pub value: Value,
}

/// Why a bundle directory could not be read. Every variant names the file (relative to the bundle
/// directory when it is inside it) and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A file or directory could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bundle directory itself does not exist (a mistyped path).
    #[error("{} does not exist (no such file or directory)", .dir.display())]
    NotFound {
        /// The bundle directory as given.
        dir: PathBuf,
    },
    /// `manifests/` or `metadata/` is missing (the registry+v1 layout: `olm-v0.md` §2.1).
    #[error(
        "{dir}: no {name}/ directory; a registry+v1 bundle has manifests/ and metadata/ (manifests/ holds the CSV and the other objects, metadata/ holds annotations.yaml){hint}"
    )]
    MissingDirectory {
        /// The bundle directory.
        dir: PathBuf,
        /// `manifests` or `metadata`.
        name: &'static str,
        /// "" or a suggestion such as `; did you mean <dir>/bundle?`.
        hint: String,
    },
    /// A file is larger than [`MAX_FILE_SIZE`].
    #[error(
        "{path}: file is {size} bytes, over the {limit}-byte limit; Kubernetes stores no object over about 1.5 MiB, so shrink it (for example a shorter spec.description)"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// A file is not UTF-8.
    #[error("{path}: not valid UTF-8 (invalid byte at offset {offset}); save the file as UTF-8")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// A file is not valid YAML or JSON.
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Parser message with line and column.
        message: String,
    },
    /// A manifest document is not a Kubernetes object (a mapping with apiVersion and kind).
    #[error("{path} (document {document}): {message}")]
    NotAnObject {
        /// The file.
        path: PathBuf,
        /// One-based document number.
        document: usize,
        /// What is wrong.
        message: String,
    },
    /// No file in `metadata/` holds bundle annotations.
    #[error(
        "{dir}/metadata: could not find annotations file; add metadata/annotations.yaml with `annotations:` holding {ANNOTATION_PACKAGE} and {ANNOTATION_CHANNELS}"
    )]
    NoAnnotations {
        /// The bundle directory.
        dir: PathBuf,
    },
    /// A metadata file meant as the annotations file (named `annotations.yaml` / `.yml`, or
    /// holding bundle annotation keys) has no usable top-level `annotations:` map.
    #[error(
        "{path}: {problem}; the file must look like:\n  annotations:\n    {ANNOTATION_PACKAGE}: <package>\n    {ANNOTATION_CHANNELS}: <channel>[,<channel>...]\n    {ANNOTATION_DEFAULT_CHANNEL}: <channel>"
    )]
    BadAnnotations {
        /// The file, relative to the bundle directory.
        path: PathBuf,
        /// What is wrong, e.g. that the `annotations:` map is missing.
        problem: String,
    },
    /// `manifests/` holds no ClusterServiceVersion.
    #[error("{dir}/manifests: no csv in bundle; {}", match (spelled_kind, empty.first()) {
        (Some((path, key)), _) => format!("{} says `{key}: ClusterServiceVersion`, but an object's top-level `kind` is matched exactly (by the API server, opm and OLM): write `kind: ClusterServiceVersion`", path.display()),
        (None, Some(file)) => format!("{} is empty (no YAML or JSON document) and no other manifest is one: write the operator's ClusterServiceVersion (kind: ClusterServiceVersion) into manifests/ — into that file if it was meant to hold it", file.display()),
        (None, None) => "add the operator's ClusterServiceVersion (kind: ClusterServiceVersion) to manifests/".to_string(),
    })]
    NoCsv {
        /// The bundle directory.
        dir: PathBuf,
        /// A manifest whose top-level key is a case variant of `kind` (`Kind:`) with value
        /// `ClusterServiceVersion`, and that key.
        spelled_kind: Option<(PathBuf, String)>,
        /// The manifests without any document (empty, or comments only), relative to the bundle
        /// directory: a CSV whose content was lost is named.
        empty: Vec<PathBuf>,
    },
    /// The bundle path is a file, not a directory.
    #[error("{}: a file, not a bundle directory; give the directory that holds manifests/ and metadata/", .path.display())]
    NotADirectory {
        /// The path as given.
        path: PathBuf,
    },
    /// A field has the wrong type or shape.
    #[error("{path}: field {field}: {message}")]
    Field {
        /// The file.
        path: PathBuf,
        /// JSON path of the field, e.g. `spec.version`.
        field: String,
        /// What is wrong and what is expected.
        message: String,
    },
}

impl Bundle {
    /// Reads the registry+v1 bundle in `dir` (`olm-v0.md` §2.1–2.2; operator-registry
    /// `pkg/registry/parse.go`).
    ///
    /// - `manifests/`: every regular file not starting with `.`, in name order, parsed as YAML
    ///   (multi-document) or JSON. The first document of each file is an object; later documents
    ///   and CSVs after the first go to [`Bundle::ignored`], as opm ignores them.
    /// - `metadata/`: the first file (in name order) that decodes as an annotations file, a
    ///   dependencies file and a properties file respectively.
    ///
    /// # Errors
    /// [`BundleError`] naming the file: unreadable, too large, not UTF-8, bad YAML/JSON, a
    /// document that is not an object, no annotations file, no ClusterServiceVersion, or a CSV
    /// whose `metadata.name` is not a string. Unlike opm, which logs and skips an undecodable
    /// manifest, capstan refuses it so that no object is lost silently.
    pub fn load(dir: &Path) -> Result<Bundle, BundleError> {
        decode::load(dir)
    }

    /// A bundle of objects held in memory rather than in a directory: a ConfigMap catalog's CSV
    /// and CRDs ([`configmap`]), or the `olm.bundle.object`s of a catalog bundle without an image
    /// ([`Bundle::from_blob`]). Each object is named by its path in messages; `origin` stands for
    /// the bundle directory; the annotations give the package and channels.
    ///
    /// # Errors
    /// [`BundleError::NotAnObject`], [`BundleError::NoCsv`], or a CSV without a string
    /// `metadata.name`, as [`Bundle::load`].
    pub fn from_objects(
        origin: &Path,
        annotations: Annotations,
        objects: Vec<(PathBuf, Value)>,
    ) -> Result<Bundle, BundleError> {
        decode::from_objects(origin, annotations, objects)
    }

    /// The bundle a catalog's `olm.bundle` blob without an image holds in its
    /// `olm.bundle.object` properties (OLM installs such a bundle from the catalog alone).
    ///
    /// # Errors
    /// [`BundleError::Field`] for an object whose data is not base64 JSON, and those of
    /// [`Bundle::from_objects`] (no CSV among the objects, …).
    pub fn from_blob(blob: &crate::catalog::model::Bundle) -> Result<Bundle, BundleError> {
        decode::from_blob(blob)
    }

    /// Every object of [`Bundle::objects`] as written in its file (the CSV from
    /// [`Bundle::csv_as_written`] when set), in order: what opm puts in `olm.bundle.object`.
    pub fn objects_as_written(&self) -> impl Iterator<Item = &Value> {
        self.objects.iter().enumerate().map(|(i, m)| match (&self.csv_as_written, i == self.csv_index) {
            (Some(raw), true) => raw,
            _ => &m.value,
        })
    }

    /// The bundle's ClusterServiceVersion.
    pub fn csv(&self) -> CsvView<'_> {
        CsvView::new(&self.objects[self.csv_index])
    }

    /// The CustomResourceDefinitions among [`Bundle::objects`].
    pub fn crds(&self) -> impl Iterator<Item = &Manifest> {
        self.objects.iter().filter(|m| m.is_crd())
    }

    /// Typed views of the CustomResourceDefinitions among [`Bundle::objects`].
    pub fn custom_resource_definitions(&self) -> impl Iterator<Item = CrdView<'_>> {
        self.objects.iter().filter_map(CrdView::new)
    }

    /// Bundle name: the CSV's `metadata.name`.
    pub fn name(&self) -> &str {
        self.objects[self.csv_index].name()
    }

    /// Package name from the annotations.
    pub fn package(&self) -> &str {
        &self.annotations.package
    }

    /// APIs the bundle provides: one entry per served version of every CRD (v1 `spec.versions`,
    /// v1beta1 `spec.versions` and `spec.version`) plus every owned APIService of the CSV, as
    /// operator-registry's `Bundle.ProvidedAPIs` computes them. Sorted and deduplicated.
    pub fn provided_apis(&self) -> Vec<ApiKey> {
        let mut out = Vec::new();
        for crd in self.crds() {
            let v = &crd.value;
            let group = str_at(v, "/spec/group");
            let kind = str_at(v, "/spec/names/kind");
            let plural = str_at(v, "/spec/names/plural");
            let version_of_api = crd.api_version().rsplit('/').next().unwrap_or("");
            if version_of_api != "v1" && version_of_api != "v1beta1" {
                continue;
            }
            if let Some(versions) = v.pointer("/spec/versions").and_then(Value::as_array) {
                for ver in versions {
                    out.push(ApiKey::new(group, str_at(ver, "/name"), kind, plural));
                }
            }
            if version_of_api == "v1beta1" {
                let single = str_at(v, "/spec/version");
                if !single.is_empty() {
                    out.push(ApiKey::new(group, single, kind, plural));
                }
            }
        }
        for api in self.csv().owned_apiservices() {
            out.push(api);
        }
        out.sort();
        out.dedup();
        out
    }

    /// APIs the CSV requires: `spec.customresourcedefinitions.required` (group and plural from
    /// `name` = `plural.group`) and `spec.apiservicedefinitions.required`. Sorted, deduplicated;
    /// entries whose name has no `.` are skipped here and reported by [`validate()`].
    pub fn required_apis(&self) -> Vec<ApiKey> {
        let csv = self.csv();
        let mut out: Vec<ApiKey> = csv.required_crds().iter().filter_map(|d| d.api_key()).collect();
        out.extend(csv.required_apiservices());
        out.sort();
        out.dedup();
        out
    }
}

/// A group/version/kind with the plural resource name, as operator-registry's `APIKey`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApiKey {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
}

impl ApiKey {
    fn new(group: &str, version: &str, kind: &str, plural: &str) -> ApiKey {
        ApiKey { group: group.into(), version: version.into(), kind: kind.into(), plural: plural.into() }
    }
}

impl std::fmt::Display for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} {} ({}.{})", self.group, self.version, self.kind, self.plural, self.group)
    }
}

/// String at a JSON pointer, "" when absent or not a string.
pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}
