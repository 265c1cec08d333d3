//! OCI registry access: pull and push manifests and blobs, auth, plain HTTP for loopback, digest cache.
//!
//! - [`Registry`]: resolve a tag to a digest, pull an image by digest (every blob's sha256 checked),
//!   push blobs and a manifest; built on `oci-client`.
//! - [`ClientConfig`]: TLS by default, plain HTTP for loopback hosts or when asked
//!   (`--plain-http`, `insecure_registries`); credentials from [`DockerConfig`] (docker config file or
//!   Kubernetes pull secret); the [`BlobCache`] at `<cache>/oci/blobs/sha256/<hex>`.
//! - [`RegistriesConf`]: registry mirrors from a containers-registries.conf v2 file; every pull
//!   tries the mirrors of the longest matching prefix, then the source unless it is blocked.
//! - [`layer`]: deterministic layer building and safe unpacking (whiteouts, no path traversal, no
//!   symlinks or devices, bounded sizes).
//! - [`Limits`]: size limits on manifests, configs, layers, images and unpacked content
//!   (`CAPSTAN_MAX_*`).
//!
//! This module knows nothing of Kubernetes: pull secrets come in as their bytes.

pub mod auth;
pub mod cache;
pub mod config;
pub mod error;
pub mod layer;
pub mod limits;
pub mod mirrors;
pub mod progress;
pub mod registry;

pub use auth::DockerConfig;
pub use cache::BlobCache;
pub use config::ClientConfig;
pub use error::{OciError, Result};
pub use limits::{InvalidLimit, Limits};
pub use mirrors::RegistriesConf;
pub use oci_client::Reference;
pub use oci_client::manifest::{OciDescriptor, OciImageManifest};
pub use registry::{Blob, ImageToPush, PulledImage, PushedImage, Registry, parse_reference};
