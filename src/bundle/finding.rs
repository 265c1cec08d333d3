//! One problem found in a bundle ([`Finding`]): what [`super::validate()`] reports and what a
//! refused render ([`super::render::RenderError::Invalid`]) carries.

use serde::Serialize;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The bundle will not render, publish or install correctly.
    Error,
    /// Works, but is probably not what the author meant or goes against convention.
    Warning,
}

/// One problem found in a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// File relative to the bundle directory (e.g. `manifests/x.clusterserviceversion.yaml`).
    pub file: String,
    /// Field inside the file, e.g. `spec.version`, `annotations.<key>`; "" for the whole file.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub fix: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{sev}: {}", self.file)?;
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)?;
        if !self.fix.is_empty() {
            write!(f, " (fix: {})", self.fix)?;
        }
        Ok(())
    }
}
