//! File-Based Catalogs: model, parse, validate, add, and the in-memory index. (Rendering a bundle into a catalog blob is [`crate::bundle::render`]: bundle sits above catalog.)

pub mod error;
pub mod image;
pub mod index;
pub mod model;
pub mod parse;
pub mod property;
pub mod placeholder;
pub mod semver_range;
pub mod validate;
pub mod generate;
pub mod grpc;
pub mod add;
