//! Errors from reading and writing File-Based Catalogs.
//!
//! Every variant names the file it came from; variants about one blob also name the blob's
//! position (index in the file, counting from 0, and the 1-based line where it starts) and,
//! where one field is at fault, the field.

use std::path::PathBuf;

/// An error reading, parsing or writing an FBC file or directory.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The file or directory could not be read or written.
    #[error("{path}: {action}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// What capstan tried to do, e.g. "read file".
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not UTF-8 text.
    #[error(
        "{file}: line {line}, column {column}: invalid UTF-8 byte sequence; FBC files must be UTF-8 encoded JSON or YAML (re-encode the file as UTF-8)"
    )]
    NotUtf8 {
        /// File name.
        file: String,
        /// 1-based line of the first invalid byte.
        line: usize,
        /// 1-based byte column of the first invalid byte.
        column: usize,
    },
    /// The file is not well-formed JSON or YAML (including a truncated file).
    #[error("{file}: line {line}: invalid {format}: {message}")]
    Syntax {
        /// File name.
        file: String,
        /// `JSON` or `YAML`.
        format: &'static str,
        /// 1-based line where the parser stopped.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A document is not a JSON object / YAML mapping.
    #[error("{file}: blob {index} (line {line}): expected an object (a mapping with a \"schema\" key), found {found}")]
    NotAnObject {
        /// File name.
        file: String,
        /// Index of the blob in the file, from 0.
        index: usize,
        /// 1-based line where the blob starts.
        line: usize,
        /// What was found instead (e.g. "a string").
        found: &'static str,
    },
    /// A blob has no `schema` key (operator-registry: "missing root schema field").
    #[error(
        "{file}: blob {index} (line {line}{named}): missing root field \"schema\"; every FBC blob needs one (olm.package, olm.channel, olm.bundle, olm.deprecations or a custom schema)"
    )]
    MissingSchema {
        /// File name.
        file: String,
        /// Index of the blob in the file, from 0.
        index: usize,
        /// 1-based line where the blob starts.
        line: usize,
        /// `, name "x"` when the blob has a name, else empty.
        named: String,
    },
    /// Two keys of a blob are equal when compared case-insensitively (operator-registry matches
    /// the meta keys `schema`, `package`, `name` case-insensitively and rejects such duplicates).
    #[error(
        "{file}: blob {index} (line {line}): duplicate keys {keys:?} (keys are matched case-insensitively); keep one of them"
    )]
    DuplicateKey {
        /// File name.
        file: String,
        /// Index of the blob in the file, from 0.
        index: usize,
        /// 1-based line where the blob starts.
        line: usize,
        /// The colliding keys.
        keys: Vec<String>,
    },
    /// A field of a blob has the wrong shape.
    #[error("{file}: blob {index} (line {line}, {blob}): field {field}: {message}")]
    Field {
        /// File name.
        file: String,
        /// Index of the blob in the file, from 0.
        index: usize,
        /// 1-based line where the blob starts.
        line: usize,
        /// The blob's schema and, when it has one, its name: `olm.bundle "foo.v1.0.0"`.
        blob: String,
        /// Path of the field, e.g. `entries[3].skips`.
        field: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// A field is larger than capstan accepts (see [`crate::catalog::parse::MAX_DESCRIPTION_BYTES`]).
    #[error(
        "{file}: blob {index} (line {line}, {blob}): field {field} is {size} bytes, more than the limit of {limit} bytes; shorten it"
    )]
    TooLarge {
        /// File name.
        file: String,
        /// Index of the blob in the file, from 0.
        index: usize,
        /// 1-based line where the blob starts.
        line: usize,
        /// The blob's schema and name, as in [`CatalogError::Field`].
        blob: String,
        /// Field path.
        field: String,
        /// Size in bytes.
        size: usize,
        /// Limit in bytes.
        limit: usize,
    },
    /// A catalog cannot be written as asked (e.g. a package name that is not a single path element).
    #[error("{path}: cannot write catalog: {message}")]
    Write {
        /// The target path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl CatalogError {
    /// The file (or path) the error is about, as shown in the message.
    pub fn file(&self) -> String {
        match self {
            CatalogError::Io { path, .. } | CatalogError::Write { path, .. } => path.display().to_string(),
            CatalogError::NotUtf8 { file, .. }
            | CatalogError::Syntax { file, .. }
            | CatalogError::NotAnObject { file, .. }
            | CatalogError::MissingSchema { file, .. }
            | CatalogError::DuplicateKey { file, .. }
            | CatalogError::Field { file, .. }
            | CatalogError::TooLarge { file, .. } => file.clone(),
        }
    }
}
