//! File-Based Catalogs: model, parse, validate, render, add, and the in-memory index.

pub mod error;
pub mod image;
pub mod index;
pub mod model;
pub mod parse;
pub mod property;
pub mod render;
pub mod semver_range;
pub mod validate;
pub mod generate;
pub mod grpc;
pub mod add;
