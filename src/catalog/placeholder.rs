//! The placeholder image a bundle directory is rendered with when no image reference is given,
//! and the warning a catalog carrying one gets.

use super::model;

/// The deterministic image reference used when a bundle directory is rendered without one:
/// `capstan.invalid/<package>/bundle:v<version>`. The `.invalid` top-level domain never
/// resolves (RFC 2606), so a catalog that still carries it fails loudly; pass a real reference
/// (`capstan catalog render --image`) to override it.
pub fn placeholder_image(package: &str, version: &str) -> String {
    format!("capstan.invalid/{package}/bundle:v{version}")
}

/// True when `image` is a [`placeholder_image`] (its registry is `capstan.invalid`).
pub fn is_placeholder_image(image: &str) -> bool {
    image.starts_with("capstan.invalid/")
}

/// The warning for bundle `bundle` of package `package` whose image is the placeholder `image`:
/// the catalog is valid, but no cluster can pull the bundle, so it cannot be installed.
pub fn placeholder_warning(package: &str, bundle: &str, image: &str) -> String {
    format!(
        "bundle {bundle} of package {package} has the placeholder image {image}, which no cluster can pull; add the bundle by its image (`capstan catalog add CATALOG <image-ref>`) or give `--image <image-ref>` when adding or rendering its directory"
    )
}

/// [`placeholder_warning`] for every bundle of `cfg` with a placeholder image, in blob order.
pub fn placeholder_warnings(cfg: &model::DeclarativeConfig) -> Vec<String> {
    cfg.bundles
        .iter()
        .filter(|b| is_placeholder_image(&b.image))
        .map(|b| placeholder_warning(&b.package, &b.name, &b.image))
        .collect()
}
