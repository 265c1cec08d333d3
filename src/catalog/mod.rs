//! File-Based Catalogs: model, parse, validate, render, add, and the in-memory index.

pub mod model;
pub mod property;
pub mod render;
