//! registry+v1 bundles: read, validate, build and push images, pull and unpack them.

pub mod image;
