//! File-Based Catalogs: model, parse, validate, add, and a valid catalog's content in memory ([`validated::ValidatedCatalog`], for discovery). (Rendering a bundle into a catalog blob is [`crate::bundle::render`]: bundle sits above catalog.)

pub mod error;
pub mod image;
pub mod validated;
pub mod model;
pub mod parse;
pub mod property;
pub mod placeholder;
pub mod semver_range;
pub mod validate;
pub mod generate;
pub mod grpc;
pub mod add;
