//! File-Based Catalogs: model, parse, validate, add, and a valid catalog's content in memory ([`validated::ValidatedCatalog`], for discovery). (Rendering a bundle into a catalog blob is [`crate::bundle::render`]: bundle sits above catalog.)

pub mod add;
pub mod error;
pub mod generate;
pub mod grpc;
pub mod image;
pub mod model;
pub mod parse;
pub mod placeholder;
pub mod property;
pub mod semver_range;
pub mod validate;
pub mod validated;
