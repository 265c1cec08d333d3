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

/// The placeholders of an image reference template (`capstan catalog render --image-template`):
/// capstan's `{package}`, `{name}`, `{version}` and opm's `{{.Package}}`, `{{.Name}}`,
/// `{{.Version}}` (`opm render --image-ref-template`, a Go template over the bundle).
pub const TEMPLATE_PLACEHOLDERS: &str = "{package}, {name}, {version} (or {{.Package}}, {{.Name}}, {{.Version}})";

/// Fills an image reference template with a bundle's package, CSV name and version.
///
/// # Errors
/// [`TemplateError`]: the first placeholder that is not one of [`TEMPLATE_PLACEHOLDERS`]
/// (spaces inside `{{ … }}` are allowed, as in Go templates), or an unclosed `{`.
pub fn expand_image_template(
    template: &str,
    package: &str,
    name: &str,
    version: &str,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        let (inner, len, go) = if let Some(body) = after.strip_prefix("{{") {
            let close = body.find("}}").ok_or_else(|| TemplateError::UnclosedGo { at: truncate(after).to_string() })?;
            (body[..close].trim(), close + 4, true)
        } else {
            let close = after.find('}').ok_or_else(|| TemplateError::Unclosed { at: truncate(after).to_string() })?;
            (&after[1..close], close + 1, false)
        };
        let value = match (go, inner) {
            (true, ".Package") | (false, "package") => package,
            (true, ".Name") | (false, "name") => name,
            (true, ".Version") | (false, "version") => version,
            _ => return Err(TemplateError::Unknown { placeholder: after[..len].to_string() }),
        };
        out.push_str(value);
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Why an image reference template cannot be filled ([`expand_image_template`]); each message
/// ends with the placeholders there are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A `{{` without its `}}`; `at` is the template from the `{{` on (at most 20 characters).
    #[error("{{{{ at {at:?} is not closed with }}}}; use {}", TEMPLATE_PLACEHOLDERS)]
    UnclosedGo {
        /// The template from the `{{` on, cut at 20 characters.
        at: String,
    },
    /// A `{` without its `}`.
    #[error("{{ at {at:?} is not closed with }}; use {}", TEMPLATE_PLACEHOLDERS)]
    Unclosed {
        /// The template from the `{` on, cut at 20 characters.
        at: String,
    },
    /// A placeholder that is not one of [`TEMPLATE_PLACEHOLDERS`], braces included.
    #[error("unknown placeholder {placeholder}; use {}", TEMPLATE_PLACEHOLDERS)]
    Unknown {
        /// The placeholder as written, e.g. `{pkg}` or `{{.Tag}}`.
        placeholder: String,
    },
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(20) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_templates_fill_known_placeholders_and_refuse_others() {
        let fill = |t: &str| expand_image_template(t, "etcd", "etcd.v0.9.4", "0.9.4").map_err(|e| e.to_string());
        assert_eq!(fill("quay.io/o/{package}-bundle:v{version}").unwrap(), "quay.io/o/etcd-bundle:v0.9.4");
        assert_eq!(
            fill("quay.io/o/{{.Package}}:{{ .Version }}-{{.Name}}").unwrap(),
            "quay.io/o/etcd:0.9.4-etcd.v0.9.4"
        );
        assert_eq!(fill("quay.io/o/{name}").unwrap(), "quay.io/o/etcd.v0.9.4");
        assert_eq!(fill("quay.io/o/etcd:latest").unwrap(), "quay.io/o/etcd:latest");
        assert_eq!(
            fill("quay.io/o/{pkg}:v{version}").unwrap_err(),
            "unknown placeholder {pkg}; use {package}, {name}, {version} (or {{.Package}}, {{.Name}}, {{.Version}})"
        );
        assert_eq!(
            fill("quay.io/o/{{.Tag}}").unwrap_err(),
            "unknown placeholder {{.Tag}}; use {package}, {name}, {version} (or {{.Package}}, {{.Name}}, {{.Version}})"
        );
        assert_eq!(
            fill("quay.io/o/{Package}").unwrap_err().split(';').next().unwrap(),
            "unknown placeholder {Package}"
        );
        assert!(fill("quay.io/o/{version").unwrap_err().contains("is not closed"));
        assert!(fill("quay.io/o/{{.Version}").unwrap_err().contains("is not closed"));
    }
}
