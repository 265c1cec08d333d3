//! File-Based Catalogs: model, parse, validate, render, add, and the in-memory index.

pub mod model;
pub mod property;
pub mod error;
pub mod parse;
pub mod semver_range;
pub mod validate;
pub mod index;
pub mod generate;
pub mod add;
