//! Messages and exit codes of a bundle directory that does not load, shared by the commands that
//! read one (`bundle image push`, `catalog render`, `catalog add`).

use std::path::Path;

use capstan::bundle::BundleError;

/// Exit code of a bundle directory that does not load: 2 when it cannot be read (an I/O error, no
/// such directory, a file where the directory belongs, no `manifests/` or `metadata/`), 1 when it
/// was read and its content is wrong.
pub(crate) fn bundle_load_code(e: &BundleError) -> u8 {
    match e {
        BundleError::Io { .. }
        | BundleError::NotFound { .. }
        | BundleError::NotADirectory { .. }
        | BundleError::MissingDirectory { .. } => 2,
        _ => 1,
    }
}

/// The message and exit code of a bundle directory `dir` that does not load, naming the bundle
/// once as the user gave it (`shown`; a pulled image is read from a scratch directory).
pub(crate) fn bundle_load_failure(shown: &str, dir: &Path, e: &BundleError) -> (String, u8) {
    let message = e.to_string();
    let message =
        if message.starts_with(&dir.display().to_string()) { message } else { format!("bundle {shown}: {message}") };
    (message, bundle_load_code(e))
}
