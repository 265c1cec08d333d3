//! Bundle validation: what `operator-sdk bundle validate` / operator-framework/api's validators,
//! opm and OLM's installer would reject, each finding with the file, the field and the fix.
//!
//! Sources: `olm-v0.md` §1.5 (CSV fields, install modes), §2.1–2.3 (layout, annotations,
//! dependencies, properties, `olm.constraint`), §2.5 (object kinds a bundle may contain);
//! operator-framework/api `pkg/validation/internal/csv.go` (CSV name is a DNS-1123 subdomain and a
//! label value, install modes), operator-registry `pkg/registry/bundle.go`
//! (`AllProvidedAPIsInBundle`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::csv::INSTALL_MODE_TYPES;
use super::decode::type_name;
use super::finding::{Finding, Severity};
use super::render::{Migration, RenderError, render_bundle, render_bundle_with};
use super::{ANNOTATION_MANIFESTS, ANNOTATION_MEDIATYPE, ANNOTATION_METADATA, Bundle, CsvView, Manifest, str_at};
use crate::catalog::model;
use crate::catalog::property;
use crate::catalog::validate::is_dns1123_label;

/// Kinds a bundle may contain besides the CSV and CRDs: OLM turns them into InstallPlan steps;
/// any other kind makes the step `UnsupportedResource` and the plan fail (`olm-v0.md` §2.5;
/// OLM `pkg/controller/operators/catalog/supportedresources.go`).
pub const ALLOWED_KINDS: [&str; 21] = [
    "ClusterServiceVersion",
    "CustomResourceDefinition",
    "Secret",
    "ConfigMap",
    "Service",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsolePlugin",
    "NetworkPolicy",
];

/// Largest object the API server stores (etcd's default request limit, 1.5 MiB).
pub const MAX_OBJECT_SIZE: usize = 3 << 19;

struct Out {
    findings: Vec<Finding>,
}

impl Out {
    fn push(
        &mut self,
        severity: Severity,
        file: impl std::fmt::Display,
        field: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.findings.push(Finding {
            severity,
            file: file.to_string(),
            field: field.into(),
            message: message.into(),
            fix: fix.into(),
        });
    }
    fn error(
        &mut self,
        file: impl std::fmt::Display,
        field: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.push(Severity::Error, file, field, message, fix);
    }
    fn warn(
        &mut self,
        file: impl std::fmt::Display,
        field: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.push(Severity::Warning, file, field, message, fix);
    }
}

/// Checks a loaded bundle. Errors first, then warnings, each group in the order of the checks
/// below (annotations, CSV, CRDs, objects, dependencies, properties). An empty list
/// (or warnings only) means the bundle renders, publishes and installs.
///
/// Checked: CSV name (DNS-1123 subdomain and label value), `spec.version` semver,
/// `spec.replaces` / `spec.skips` names, `olm.skipRange`, `spec.minKubeVersion`, install modes
/// (known types, no duplicates, at least one supported, AllNamespaces only with conversion
/// webhooks), install strategy, related images, `olm.properties` annotation; annotations
/// (package, channels, default channel among them, media type); owned CRDs present with the
/// owned version and kind, and every CRD well formed; required CRD names; object kinds allowed
/// in a bundle; RBAC reaching beyond the operator ([`super::rbac::check`]); webhook and owned
/// APIService definitions as OLM checks them ([`super::webhooks::check`]), their ports, failure
/// policies and side effects as the API server checks them, and webhooks served by a deployment
/// the install strategy lacks (a warning); container ports; object size; `dependencies.yaml` and `properties.yaml` entries; documents opm
/// ignores; and anything else that keeps [`super::render::render_bundle`] from
/// rendering the bundle.
pub fn validate(bundle: &Bundle) -> Vec<Finding> {
    let mut out = Out { findings: Vec::new() };
    check_annotations(bundle, &mut out);
    check_csv(bundle, &mut out);
    check_crds(bundle, &mut out);
    check_objects(bundle, &mut out);
    check_webhooks(bundle, &mut out);
    check_webhook_fields(bundle, &mut out);
    check_entries(bundle, &mut out, true);
    check_entries(bundle, &mut out, false);
    // Whatever else keeps opm from rendering the bundle, or `catalog add` / `opm validate` from
    // accepting the rendered blob (and is not reported above).
    match render_bundle(bundle, "") {
        Err(RenderError::Field { file, field, message, .. }) => {
            if !out.findings.iter().any(|f| f.severity == Severity::Error && f.file == file) {
                out.error(
                    file,
                    field,
                    format!("the bundle cannot be rendered into a catalog: {message}"),
                    "fix the field",
                );
            }
        }
        Err(_) => {}
        Ok(blob) => check_blob(bundle, &blob, &mut out),
    }
    let mut findings = out.findings;
    findings.sort_by_key(|f| f.severity);
    findings
}

/// [`render_bundle_with`] after [`validate()`], the one bundle validation that
/// `bundle validate`, `catalog render` and `catalog add` share: a bundle with errors is not
/// rendered. Returns the blob and the warnings.
///
/// # Errors
/// [`RenderError::Invalid`] with every error finding, else as [`render_bundle_with`].
pub fn render_validated(
    bundle: &Bundle,
    image: &str,
    migration: Migration,
) -> Result<(model::Bundle, Vec<Finding>), RenderError> {
    let (errors, warnings): (Vec<Finding>, Vec<Finding>) =
        validate(bundle).into_iter().partition(|f| f.severity == Severity::Error);
    if !errors.is_empty() {
        return Err(RenderError::Invalid {
            bundle: bundle.name().to_string(),
            dir: bundle.dir.display().to_string(),
            errors,
        });
    }
    Ok((render_bundle_with(bundle, image, migration)?, warnings))
}

/// The catalog's per-bundle rules ([`crate::catalog::validate::check_bundle_blob`]) on the
/// rendered blob, for what the checks above do not already report: image references are
/// checked above field by field, and a version, name or property error is not repeated.
fn check_blob(b: &Bundle, blob: &model::Bundle, out: &mut Out) {
    use crate::catalog::validate::ErrorKind;
    let csv_file = b.csv().path().display().to_string();
    let has_error = |out: &Out, pred: &dyn Fn(&Finding) -> bool| {
        out.findings.iter().any(|f| f.severity == Severity::Error && pred(f))
    };
    for e in crate::catalog::validate::check_bundle_blob(blob) {
        let covered = match e.kind {
            ErrorKind::Image => true,
            ErrorKind::Version => {
                has_error(out, &|f| f.field.starts_with("spec.version") || f.field.starts_with("spec.release"))
            }
            ErrorKind::Name => has_error(out, &|f| f.field == "metadata.name"),
            ErrorKind::Property => has_error(out, &|f| {
                f.file.starts_with("metadata/")
                    || f.field.contains("olm.properties")
                    || f.field.contains(super::ANNOTATION_PACKAGE)
            }),
            _ => false,
        };
        if !covered {
            out.error(
                &csv_file,
                "",
                format!("the bundle's catalog entry (olm.bundle blob) is invalid: {}", e.message),
                "fix the bundle so that `capstan catalog render` gives a valid blob",
            );
        }
    }
}

fn check_annotations(b: &Bundle, out: &mut Out) {
    let a = &b.annotations;
    let file = a.file.display().to_string();
    check_annotation_keys(a, &file, out);
    check_package_and_channels(a, &file, out);
    check_default_channel_and_layout(a, &file, out);
}

/// Annotation keys opm and OLM do not read but that look meant as bundle annotations.
fn check_annotation_keys(a: &super::Annotations, file: &str, out: &mut Out) {
    let key = |k: &str| format!("annotations.{k}");
    // A misspelt bundle annotation (`…bundle.chanels.v1`) is ignored by opm and OLM: the value
    // it meant to give is missing (reported below) or silently the default.
    const KNOWN: [&str; 6] = [
        super::ANNOTATION_PACKAGE,
        super::ANNOTATION_CHANNELS,
        super::ANNOTATION_DEFAULT_CHANNEL,
        ANNOTATION_MEDIATYPE,
        ANNOTATION_MANIFESTS,
        ANNOTATION_METADATA,
    ];
    // Keys are matched exactly: a case variant or a typo in the prefix is as lost as one after it.
    let apart = |n: &str, k: &str| strsim::levenshtein(&n.to_ascii_lowercase(), &k.to_ascii_lowercase());
    let misspelt = |k: &&String| {
        !KNOWN.contains(&k.as_str())
            && (k.starts_with("operators.operatorframework.io.bundle.") || KNOWN.iter().any(|n| apart(n, k) <= 3))
    };
    for k in a.all.keys().filter(misspelt) {
        let near = KNOWN.iter().copied().filter(|n| apart(n, k) <= 3).min_by_key(|n| apart(n, k));
        let (hint, fix) = match near {
            Some(n) => (format!("; did you mean {n}?"), format!("rename it to {n}")),
            None => (String::new(), format!("remove it, or use one of {}", KNOWN.join(", "))),
        };
        out.warn(file, key(k), format!("not a bundle annotation opm or OLM reads, so it has no effect{hint}"), fix);
    }
}

/// The package annotation is a DNS-1123 label, the channels a list of names.
fn check_package_and_channels(a: &super::Annotations, file: &str, out: &mut Out) {
    let key = |k: &str| format!("annotations.{k}");
    if a.package.is_empty() {
        out.error(
            file,
            key(super::ANNOTATION_PACKAGE),
            "package name is missing",
            "set it to the operator's package name",
        );
    } else if !is_dns1123_label(&a.package) {
        out.error(
            file,
            key(super::ANNOTATION_PACKAGE),
            format!("package name {:?} is not a DNS-1123 label", a.package),
            "use lowercase letters, digits and '-', at most 63 characters",
        );
    }
    if a.channels.is_empty() {
        out.error(
            file,
            key(super::ANNOTATION_CHANNELS),
            "channels are missing",
            "list the channels this bundle is published in, comma-separated, e.g. \"stable\"",
        );
    }
    for c in &a.channels {
        if c.is_empty() || c.trim() != c {
            out.error(
                file,
                key(super::ANNOTATION_CHANNELS),
                format!("channel {c:?} is empty or has surrounding spaces; opm splits at ',' without trimming"),
                "write the list without spaces, e.g. \"alpha,stable\"",
            );
        }
    }
}

/// The default channel is among the bundle's channels; the media type and the content
/// directories are registry+v1's.
fn check_default_channel_and_layout(a: &super::Annotations, file: &str, out: &mut Out) {
    let key = |k: &str| format!("annotations.{k}");
    match &a.default_channel {
        // A warning, not an error: the default channel is a package setting, and opm accepts a
        // bundle whose default channel is another bundle's channel (the corpus' etcd
        // 0.9.x-clusterwide bundles do that on purpose).
        Some(d) if !a.channels.iter().any(|c| c == d) => out.warn(
            file,
            key(super::ANNOTATION_DEFAULT_CHANNEL),
            format!(
                "default channel {d:?} is not among this bundle's channels {:?}; the package gets no {d:?} channel unless another bundle is in it",
                a.channels.join(",")
            ),
            "add it to the channels annotation, or make sure another bundle of the package is in that channel",
        ),
        None if a.channels.len() > 1 => out.warn(
            file,
            key(super::ANNOTATION_DEFAULT_CHANNEL),
            "no default channel while the bundle is in several channels",
            "set the default channel annotation so the catalog's package gets a defaultChannel",
        ),
        _ => {}
    }
    match a.all.get(ANNOTATION_MEDIATYPE).map(String::as_str) {
        Some("registry+v1") => {}
        None => out.warn(file, key(ANNOTATION_MEDIATYPE), "media type is missing", "set it to \"registry+v1\""),
        Some(other) => out.error(
            file,
            key(ANNOTATION_MEDIATYPE),
            format!("media type {other:?} is not registry+v1; capstan and OLM v0 install registry+v1 bundles only"),
            "set it to \"registry+v1\"",
        ),
    }
    for (k, want) in [(ANNOTATION_MANIFESTS, "manifests/"), (ANNOTATION_METADATA, "metadata/")] {
        if let Some(v) = a.all.get(k)
            && v.trim_end_matches('/') != want.trim_end_matches('/')
        {
            out.warn(
                file,
                key(k),
                format!("is {v:?}, but the bundle image keeps this content in {want}"),
                format!("set it to \"{want}\""),
            );
        }
    }
}

/// Fields of the CSV's `spec` that a ClusterServiceVersion does not have (a misspelt
/// `spec.replace` loses the upgrade edge without a word): a warning each, with the declared
/// field it is nearest to. OLM's CRD declares every `spec` field (upstream
/// `deploy/chart/crds/0000_50_olm_00-clusterserviceversions.crd.yaml`) and its API server drops
/// the rest; OLM and opm accept such a bundle, so this is a warning, not an error.
fn check_csv_spec_fields(csv: &Value, file: &str, out: &mut Out) {
    const KIND: &str = "ClusterServiceVersion";
    let Some(spec) = csv.get("spec").filter(|s| s.is_object()) else { return };
    for field in crate::api::unknown_fields_at(KIND, "v1alpha1", "spec", spec) {
        let parent = &field.parent;
        let (hint, fix) = match field.near(KIND, "v1alpha1")[..] {
            [one] => (format!("; did you mean {parent}.{one}?"), format!("rename it to {parent}.{one}")),
            _ => (
                String::new(),
                format!(
                    "remove it, or use one of the fields of {parent}: {}",
                    crate::api::declared_fields(KIND, "v1alpha1", parent).join(", ")
                ),
            ),
        };
        out.warn(
            file,
            field.to_string(),
            format!("a ClusterServiceVersion has no such field: OLM's API server drops it, so it has no effect{hint}"),
            fix,
        );
    }
}

/// The CSV's own fields: name, version, upgrade edges, ranges, annotations, install modes and
/// strategy, related images and required CRDs.
fn check_csv(b: &Bundle, out: &mut Out) {
    let csv = b.csv();
    let file = csv.path().display().to_string();
    let v = csv.value();
    let name = csv.name();
    if let Err(why) = csv_name_format(name) {
        out.error(
            &file,
            "metadata.name",
            format!("{name:?} is invalid: {why}"),
            "use <package>.v<version>, e.g. etcd.v0.9.4",
        );
    }
    check_csv_spec_fields(v, &file, out);
    check_csv_version(b, &file, out);
    check_csv_replaces(v, name, &file, out);
    check_csv_skips(v, name, &file, out);
    check_csv_ranges(v, &file, out);
    check_csv_annotations(&csv, &file, out);
    check_install_modes(v, &file, out);
    check_install_strategy(v, &file, out);
    check_related_images(v, &file, out);
    check_required_crds(&csv, &file, out);
}

/// `spec.version`: a semver string, carried by a conventional CSV name (a warning).
fn check_csv_version(b: &Bundle, file: &str, out: &mut Out) {
    let csv = b.csv();
    let (v, name) = (csv.value(), csv.name());
    match v.pointer("/spec/version") {
        None | Some(Value::Null) => {
            out.error(file, "spec.version", "missing", "set the operator version, a semver such as \"1.2.3\"")
        }
        Some(Value::String(s)) => {
            if let Err(e) = semver::Version::parse(s) {
                out.error(
                    file,
                    "spec.version",
                    format!("{s:?} is not semver: {e}"),
                    "use MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD] without a leading 'v'",
                );
            } else if !b.annotations.package.is_empty() {
                let conventional = format!("{}.v{s}", b.annotations.package);
                if name != conventional && !name.ends_with(&format!("v{s}")) && !name.ends_with(s.as_str()) {
                    out.warn(
                        file,
                        "metadata.name",
                        format!("{name:?} does not carry the version {s}; catalogs and users expect {conventional:?}"),
                        format!("rename the CSV to {conventional}"),
                    );
                }
            }
        }
        Some(other) => out.error(
            file,
            "spec.version",
            format!("must be a string, found {}", type_name(other)),
            "quote the version, e.g. \"1.2.3\"",
        ),
    }
}

/// `spec.replaces`: a CSV name, not the CSV's own.
fn check_csv_replaces(v: &Value, name: &str, file: &str, out: &mut Out) {
    match v.pointer("/spec/replaces") {
        None | Some(Value::Null) => {}
        Some(Value::String(r)) if r.is_empty() => {}
        Some(Value::String(r)) => {
            if let Err(why) = csv_name_format(r) {
                out.error(
                    file,
                    "spec.replaces",
                    format!("{r:?} is invalid: {why}"),
                    "name the CSV this one replaces, e.g. etcd.v0.9.2",
                );
            }
            if r == name {
                out.error(file, "spec.replaces", "the CSV replaces itself", "name the previous version's CSV");
            }
        }
        Some(other) => {
            out.error(file, "spec.replaces", format!("must be a string, found {}", type_name(other)), "name one CSV")
        }
    }
}

/// `spec.skips`: a list of CSV names, none empty or the CSV's own.
fn check_csv_skips(v: &Value, name: &str, file: &str, out: &mut Out) {
    match v.pointer("/spec/skips") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, s) in items.iter().enumerate() {
                let field = format!("spec.skips[{i}]");
                match s.as_str() {
                    None => {
                        out.error(file, field, format!("must be a string, found {}", type_name(s)), "list CSV names")
                    }
                    Some("") => {
                        out.error(file, field, "empty name (opm validate rejects empty skips)", "remove the entry")
                    }
                    Some(s) if s == name => out.error(file, field, "the CSV skips itself", "remove the entry"),
                    Some(s) => {
                        if let Err(why) = csv_name_format(s) {
                            out.error(
                                file,
                                field,
                                format!("{s:?} is invalid: {why}"),
                                "list CSV names such as etcd.v0.9.2",
                            );
                        }
                    }
                }
            }
        }
        Some(other) => out.error(
            file,
            "spec.skips",
            format!("must be a list of CSV names, found {}", type_name(other)),
            "write skips as a list",
        ),
    }
}

/// The `olm.skipRange` annotation and `spec.minKubeVersion` parse.
fn check_csv_ranges(v: &Value, file: &str, out: &mut Out) {
    match v.pointer("/metadata/annotations/olm.skipRange") {
        None => {}
        Some(Value::String(r)) => {
            if let Err(e) = check_range(r) {
                out.error(
                    file,
                    "metadata.annotations[olm.skipRange]",
                    format!("{r:?} is not a semver range: {e}"),
                    "use blang/semver range syntax, e.g. \">=1.0.0 <1.2.0\"",
                );
            }
        }
        Some(other) => out.error(
            file,
            "metadata.annotations[olm.skipRange]",
            format!("must be a string, found {}", type_name(other)),
            "quote the range",
        ),
    }
    match v.pointer("/spec/minKubeVersion") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.trim().is_empty() => {}
        Some(Value::String(s)) => {
            if semver::Version::parse(s.trim()).is_err() {
                out.error(
                    file,
                    "spec.minKubeVersion",
                    format!("{s:?} is not semver"),
                    "use a full version such as \"1.25.0\"",
                );
            }
        }
        Some(other) => out.error(
            file,
            "spec.minKubeVersion",
            format!("must be a string, found {}", type_name(other)),
            "quote the version",
        ),
    }
}

/// The `olm.properties` and `alm-examples` annotations parse as JSON lists.
fn check_csv_annotations(csv: &CsvView<'_>, file: &str, out: &mut Out) {
    if let Some(Err(e)) = csv.annotation_properties() {
        out.error(
            file,
            "metadata.annotations[olm.properties]",
            format!("is not a JSON list of {{type, value}}: {e}; opm ignores it and the properties are lost"),
            "write a JSON list such as [{\"type\":\"olm.maxOpenShiftVersion\",\"value\":\"4.16\"}]",
        );
    }
    // operator-framework/api `validateExamplesAnnotations`: consoles parse alm-examples as JSON;
    // an empty value is no example at all (`validateJSON` accepts it), which is a warning there.
    if csv.annotation("alm-examples") == Some("") {
        out.warn(
            file,
            "metadata.annotations[alm-examples]",
            "is empty: consoles offer no example for the APIs the operator provides",
            "write a JSON array of example custom resources, or remove the annotation",
        );
    } else if let Some(examples) = csv.annotation("alm-examples")
        && let Err(e) = alm_examples(examples)
    {
        out.error(
            file,
            "metadata.annotations[alm-examples]",
            format!("is not a JSON list of example objects: {e}"),
            "write a JSON array of example custom resources, each with apiVersion, kind and metadata",
        );
    }
}

/// `spec.relatedImages`: a list whose images are valid references.
fn check_related_images(v: &Value, file: &str, out: &mut Out) {
    match v.pointer("/spec/relatedImages") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, r) in items.iter().enumerate() {
                let field = format!("spec.relatedImages[{i}].image");
                match str_at(r, "/image") {
                    "" => out.error(
                        file,
                        field,
                        "missing or not a string",
                        "give the image reference, preferably by digest",
                    ),
                    image => check_image(image, file, field, out),
                }
            }
        }
        Some(other) => out.error(
            file,
            "spec.relatedImages",
            format!("must be a list of {{name, image}}, found {}", type_name(other)),
            "write a list",
        ),
    }
}

/// `spec.customresourcedefinitions.required`: CRD names with version and kind.
fn check_required_crds(csv: &CsvView<'_>, file: &str, out: &mut Out) {
    for (i, d) in csv.required_crds().iter().enumerate() {
        if d.api_key().is_none() {
            out.error(
                file,
                format!("spec.customresourcedefinitions.required[{i}].name"),
                format!("{:?} is not <plural>.<group>", d.name),
                "use the CRD's metadata.name, e.g. etcdclusters.etcd.database.coreos.com",
            );
        }
        if d.version.is_empty() || d.kind.is_empty() {
            out.error(
                file,
                format!("spec.customresourcedefinitions.required[{i}]"),
                "version and kind are required",
                "give the required API's version and kind",
            );
        }
    }
}

fn check_install_modes(v: &Value, file: &str, out: &mut Out) {
    let modes = match v.pointer("/spec/installModes") {
        None | Some(Value::Null) => {
            out.error(
                file,
                "spec.installModes",
                "install modes not found; OLM fails such a CSV",
                "list OwnNamespace, SingleNamespace, MultiNamespace and AllNamespaces with supported: true/false",
            );
            return;
        }
        Some(Value::Array(a)) => a,
        Some(other) => {
            out.error(
                file,
                "spec.installModes",
                format!("must be a list, found {}", type_name(other)),
                "list {type, supported} entries",
            );
            return;
        }
    };
    if modes.is_empty() {
        out.error(
            file,
            "spec.installModes",
            "install modes not found; OLM fails such a CSV",
            "list the install modes with supported: true/false",
        );
        return;
    }
    let supported = install_mode_entries(modes, file, out);
    if supported.is_empty() {
        out.error(
            file,
            "spec.installModes",
            "none of the install mode types is supported; no OperatorGroup can install this CSV",
            "set supported: true on at least one mode",
        );
    }
    let conversion = v.pointer("/spec/webhookdefinitions").and_then(Value::as_array).is_some_and(|w| {
        w.iter().any(|d| d.get("conversionCRDs").and_then(Value::as_array).is_some_and(|c| !c.is_empty()))
    });
    if conversion && (supported.len() != 1 || !supported.contains("AllNamespaces")) {
        out.error(
            file,
            "spec.installModes",
            "only AllNamespaces may be supported when a webhook definition has conversionCRDs",
            "support AllNamespaces only",
        );
    }
}

/// What OLM refuses in the webhook and owned APIService definitions ([`super::webhooks::check`]):
/// the same problems the install plan would fail with (`InvalidWebhookDescription`).
fn check_webhooks(b: &Bundle, out: &mut Out) {
    let file = b.csv().path().display().to_string();
    for (field, message) in super::webhooks::problems(b) {
        // The checks write "what is wrong; what to do".
        let (what, fix) = message.split_once("; ").unwrap_or((message.as_str(), "fix the definition"));
        out.error(&file, field, format!("{what} (the InstallPlan would fail with InvalidWebhookDescription)"), fix);
    }
}

/// What the API server refuses in the webhook and owned APIService definitions, and a webhook
/// served by a deployment the install strategy lacks. None of these is checked by
/// operator-framework/api's validators (`pkg/validation/internal`, v0.45.0), so each rule is
/// the cluster's:
///
/// - a webhook `containerPort` outside 1–65535: the CSV CRD's schema refuses the CSV
///   (`minimum: 1`, `maximum: 65535`); an APIService `containerPort` negative or above 65535
///   (0 means 443): the Service OLM creates for it is refused. Errors.
/// - `failurePolicy` other than `Ignore` or `Fail`, `sideEffects` other than `None` or
///   `NoneOnDryRun` (of a validating or mutating webhook): the
///   admissionregistration.k8s.io/v1 webhook configuration OLM creates is refused (v1 refuses
///   `Some` and `Unknown`, which only v1beta1 allowed). Errors.
/// - a `deploymentName` that is not a deployment of `spec.install.spec.deployments`: OLM still
///   plans the webhook ([`super::webhooks::check`]), but makes no Service or certificate for it,
///   so it works only when the operator creates that deployment itself. A warning.
fn check_webhook_fields(b: &Bundle, out: &mut Out) {
    use crate::api::clusterserviceversion::WebhookAdmissionType;
    let csv = b.csv();
    let file = csv.path().display().to_string();
    // A definition that does not decode is already reported by `check_webhooks`.
    let Ok(defs) = super::webhooks::Definitions::read(csv.value()) else { return };
    let deployments: Vec<&str> = csv
        .value()
        .pointer("/spec/install/spec/deployments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|d| str_at(d, "/name"))
        .filter(|n| !n.is_empty())
        .collect();
    for (i, w) in defs.webhooks.iter().enumerate() {
        let field = format!("spec.webhookdefinitions[{i}]");
        if let Some(port) = w.container_port.filter(|p| !(1..=65535).contains(p)) {
            out.error(
                &file,
                format!("{field}.containerPort"),
                format!("{port} is not a port (1-65535); the API server refuses the CSV"),
                "give the Service port the webhook is served on, e.g. 443, or leave it out for 443",
            );
        }
        if w.type_ != WebhookAdmissionType::ConversionWebhook {
            if let Some(p) = w.failure_policy.as_deref().filter(|p| !["Ignore", "Fail"].contains(p)) {
                out.error(
                    &file,
                    format!("{field}.failurePolicy"),
                    format!(
                        "{p:?} is not a failure policy; the API server refuses the webhook configuration OLM creates"
                    ),
                    "use Ignore or Fail",
                );
            }
            if !["None", "NoneOnDryRun"].contains(&w.side_effects.as_str()) {
                out.error(
                    &file,
                    format!("{field}.sideEffects"),
                    format!(
                        "{:?} is not allowed; admissionregistration.k8s.io/v1, the webhook configuration OLM creates, accepts only None and NoneOnDryRun",
                        w.side_effects
                    ),
                    "use None, or NoneOnDryRun for a webhook that has side effects except on dry-run requests",
                );
            }
        }
        if let Some(d) = w.deployment_name.as_deref().filter(|d| !d.is_empty() && !deployments.contains(d)) {
            out.warn(
                &file,
                format!("{field}.deploymentName"),
                format!(
                    "{d:?} is not a deployment of spec.install.spec.deployments ({}); OLM creates the webhook configuration pointing at Service {}, but no Service, certificate or caBundle for it",
                    if deployments.is_empty() { "none".to_string() } else { deployments.join(", ") },
                    super::webhooks::service_name(d)
                ),
                "name the install strategy deployment that serves the webhook, unless the operator creates that deployment and its certificate itself",
            );
        }
    }
    for (i, a) in defs.apiservices.iter().enumerate() {
        if let Some(port) = a.container_port.filter(|p| !(0..=65535).contains(p)) {
            out.error(
                &file,
                format!("spec.apiservicedefinitions.owned[{i}].containerPort"),
                format!(
                    "{port} is not a port (1-65535); the API server refuses the Service OLM creates for the APIService"
                ),
                "give the port the API is served on, e.g. 443, or leave it out for 443",
            );
        }
    }
}

/// Container ports of the install strategy's deployments outside 1–65535, which the API server
/// refuses in the Deployment (`spec.template.spec.{containers,initContainers}[].ports[].containerPort`).
fn check_container_ports(deployment: &Value, at: &str, file: &str, out: &mut Out) {
    for list in ["containers", "initContainers"] {
        for (j, c) in deployment
            .pointer(&format!("/spec/template/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            for (k, p) in c.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
                if let Some(port) = p.get("containerPort").and_then(Value::as_i64).filter(|p| !(1..=65535).contains(p))
                {
                    out.error(
                        file,
                        format!("{at}.spec.template.spec.{list}[{j}].ports[{k}].containerPort"),
                        format!("{port} is not a port (1-65535); the API server refuses the Deployment"),
                        "give the port the container listens on",
                    );
                }
            }
        }
    }
}

/// Each install mode entry: a known type, listed once, `supported` a boolean. Returns the types
/// marked supported.
fn install_mode_entries<'a>(modes: &'a [Value], file: &str, out: &mut Out) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut supported = BTreeSet::new();
    for (i, m) in modes.iter().enumerate() {
        let field = format!("spec.installModes[{i}]");
        let t = str_at(m, "/type");
        if !INSTALL_MODE_TYPES.contains(&t) {
            out.error(
                file,
                format!("{field}.type"),
                format!("{t:?} is not an install mode type"),
                format!("use one of {}", INSTALL_MODE_TYPES.join(", ")),
            );
        } else if !seen.insert(t) {
            out.error(file, format!("{field}.type"), format!("{t} is listed twice"), "keep one entry per type");
        }
        match m.get("supported") {
            Some(Value::Bool(true)) => {
                supported.insert(t);
            }
            Some(Value::Bool(false)) | None => {}
            Some(other) => out.error(
                file,
                format!("{field}.supported"),
                format!("must be true or false, found {}", type_name(other)),
                "write true or false",
            ),
        }
    }
    supported
}

fn check_install_strategy(v: &Value, file: &str, out: &mut Out) {
    let strategy = str_at(v, "/spec/install/strategy");
    if strategy != "deployment" {
        out.error(
            file,
            "spec.install.strategy",
            format!("is {strategy:?}; OLM knows only \"deployment\""),
            "set strategy: deployment with spec.deployments",
        );
        return;
    }
    if !check_strategy_types(v, file, out) {
        return;
    }
    let deployments = v.pointer("/spec/install/spec/deployments").and_then(Value::as_array);
    let Some(deployments) = deployments.filter(|d| !d.is_empty()) else {
        out.warn(
            file,
            "spec.install.spec.deployments",
            "no deployments: the operator runs nothing",
            "add the operator's Deployment",
        );
        return;
    };
    let mut names = BTreeSet::new();
    for (i, d) in deployments.iter().enumerate() {
        let n = str_at(d, "/name");
        if n.is_empty() {
            out.error(file, format!("spec.install.spec.deployments[{i}].name"), "missing", "name the Deployment");
        } else if !names.insert(n) {
            out.error(
                file,
                format!("spec.install.spec.deployments[{i}].name"),
                format!("{n:?} is used twice"),
                "give each Deployment its own name",
            );
        }
        if d.pointer("/spec/template/spec/containers").and_then(Value::as_array).is_none_or(|c| c.is_empty()) {
            out.error(
                file,
                format!("spec.install.spec.deployments[{i}].spec.template.spec.containers"),
                "no containers",
                "add the operator container",
            );
        }
        check_container_ports(d, &format!("spec.install.spec.deployments[{i}]"), file, out);
        check_deployment_images(i, d, file, out);
    }
    check_service_accounts(v, file, out);
}

/// `spec.install.spec` as OLM decodes it (operator-framework/api `StrategyDetailsDeployment`:
/// `deployments[]` of `{name, spec: apps/v1 DeploymentSpec, label}`, `permissions[]` and
/// `clusterPermissions[]` of `{serviceAccountName, rules: []rbac/v1 PolicyRule}`), each entry
/// checked against the Kubernetes types of k8s-openapi, so that a wrongly typed field
/// (`rules: everything`, `replicas: "2"`) is an error here rather than a failed install. Absent
/// and `null` fields pass, as Go decodes them to zero values. Reports each entry's first type
/// error with its field path; false when any was found (then the shape checks that follow are
/// skipped).
/// The images of deployment `i`'s containers and init containers: the catalog lists them as
/// relatedImages, so they must be references too.
fn check_deployment_images(i: usize, d: &Value, file: &str, out: &mut Out) {
    for list in ["containers", "initContainers"] {
        for (j, c) in d
            .pointer(&format!("/spec/template/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let image = str_at(c, "/image");
            if !image.is_empty() {
                check_image(
                    image,
                    file,
                    format!("spec.install.spec.deployments[{i}].spec.template.spec.{list}[{j}].image"),
                    out,
                );
            }
        }
    }
}

/// Every permission and cluster permission names its ServiceAccount.
fn check_service_accounts(v: &Value, file: &str, out: &mut Out) {
    for key in ["permissions", "clusterPermissions"] {
        if let Some(perms) = v.pointer(&format!("/spec/install/spec/{key}")).and_then(Value::as_array) {
            for (i, p) in perms.iter().enumerate() {
                if str_at(p, "/serviceAccountName").is_empty() {
                    out.error(
                        file,
                        format!("spec.install.spec.{key}[{i}].serviceAccountName"),
                        "missing",
                        "name the ServiceAccount the rules are granted to",
                    );
                }
            }
        }
    }
}

fn check_strategy_types(v: &Value, file: &str, out: &mut Out) -> bool {
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use k8s_openapi::api::rbac::v1::PolicyRule;
    let before = out.findings.len();
    let base = "spec.install.spec";
    let spec = match v.pointer("/spec/install/spec") {
        None | Some(Value::Null) => return true,
        Some(Value::Object(m)) => m,
        Some(other) => {
            out.error(
                file,
                base,
                format!(
                    "must be a mapping with deployments, permissions and clusterPermissions, found {}",
                    type_name(other)
                ),
                "write spec.install.spec as a mapping",
            );
            return false;
        }
    };
    let entries = |key: &str, out: &mut Out| strategy_entries(spec, key, file, out);
    for key in ["permissions", "clusterPermissions"] {
        for (field, p) in entries(key, out) {
            expect_string(p.get("serviceAccountName"), file, &format!("{field}.serviceAccountName"), out);
            if let Some(rules) = p.get("rules") {
                typed::<Option<Vec<PolicyRule>>>(
                    rules,
                    file,
                    &format!("{field}.rules"),
                    "a list of rbac/v1 PolicyRule ({apiGroups, resources, verbs, …}, each a list of strings)",
                    out,
                );
            }
        }
    }
    for (field, d) in entries("deployments", out) {
        expect_string(d.get("name"), file, &format!("{field}.name"), out);
        if let Some(spec) = d.get("spec") {
            typed::<Option<DeploymentSpec>>(spec, file, &format!("{field}.spec"), "an apps/v1 DeploymentSpec", out);
        }
        if let Some(label) = d.get("label") {
            typed::<Option<BTreeMap<String, String>>>(
                label,
                file,
                &format!("{field}.label"),
                "a mapping of label names to strings",
                out,
            );
        }
    }
    out.findings.len() == before
}

fn expect_string(v: Option<&Value>, file: &str, field: &str, out: &mut Out) {
    match v {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(other) => {
            out.error(file, field, format!("must be a string, found {}", type_name(other)), "quote the value")
        }
    }
}

/// Deserializes `v` into `T`; on failure, an error naming the field path inside `v` (from
/// serde_path_to_error), serde's reason and `expected`, the type OLM decodes the field into.
fn typed<T: serde::de::DeserializeOwned>(v: &Value, file: &str, field: &str, expected: &str, out: &mut Out) {
    if let Err(e) = serde_path_to_error::deserialize::<_, T>(v) {
        let inner = e.path().to_string();
        let at = match inner.as_str() {
            "." | "" => field.to_string(),
            p if p.starts_with('[') => format!("{field}{p}"),
            p => format!("{field}.{p}"),
        };
        out.error(
            file,
            at,
            format!("{}; {field} must be {expected}, and OLM fails the install otherwise", e.inner()),
            "write the field with the type the Kubernetes API gives it",
        );
    }
}

/// Every CRD of the bundle is well formed and defined once; the CSV's owned CRDs are in the
/// bundle with the owned version and kind, and every CRD of the bundle is owned.
fn check_crds(b: &Bundle, out: &mut Out) {
    let mut by_name: BTreeMap<&str, &Manifest> = BTreeMap::new();
    for crd in b.crds() {
        check_crd(crd, &mut by_name, out);
    }
    check_owned_crds(b, &by_name, out);
}

/// One CRD: its API version, names and versions; recorded in `by_name` (CRDs by name) once its
/// names are there.
fn check_crd<'a>(crd: &'a Manifest, by_name: &mut BTreeMap<&'a str, &'a Manifest>, out: &mut Out) {
    let file = crd.location();
    let v = &crd.value;
    let name = crd.name();
    let group = str_at(v, "/spec/group");
    let plural = str_at(v, "/spec/names/plural");
    let kind = str_at(v, "/spec/names/kind");
    let api = crd.api_version();
    if api != "apiextensions.k8s.io/v1" && api != "apiextensions.k8s.io/v1beta1" {
        out.error(&file, "apiVersion", format!("{api:?} is not a CRD API version"), "use apiextensions.k8s.io/v1");
        return;
    }
    if api.ends_with("v1beta1") {
        out.warn(
            &file,
            "apiVersion",
            "apiextensions.k8s.io/v1beta1 CRDs are gone since Kubernetes 1.22",
            "convert the CRD to apiextensions.k8s.io/v1",
        );
    }
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        out.error(&file, "spec", "spec.group, spec.names.plural and spec.names.kind are required", "fill them in");
        return;
    }
    if name != format!("{plural}.{group}") {
        out.error(
            &file,
            "metadata.name",
            format!("{name:?} must be <spec.names.plural>.<spec.group> = {plural}.{group}"),
            format!("rename it to {plural}.{group}"),
        );
    }
    if let Some(prev) = by_name.insert(name, crd) {
        out.error(
            &file,
            "metadata.name",
            format!("CRD {name} is also defined in {}", prev.location()),
            "keep one file per CRD",
        );
    }
    check_crd_versions(v, api, &file, out);
}

/// `spec.versions`: at least one, each named, exactly one stored (a v1beta1 CRD may give
/// `spec.version` instead).
fn check_crd_versions(v: &Value, api: &str, file: &str, out: &mut Out) {
    let versions = v.pointer("/spec/versions").and_then(Value::as_array);
    match versions {
        Some(vs) if !vs.is_empty() => {
            let storage = vs.iter().filter(|x| x.get("storage").and_then(Value::as_bool) == Some(true)).count();
            if storage != 1 && !(api.ends_with("v1beta1") && vs.len() == 1) {
                out.error(
                    file,
                    "spec.versions",
                    format!("{storage} versions are marked storage: true; exactly one must be"),
                    "mark exactly one version storage: true",
                );
            }
            for (i, x) in vs.iter().enumerate() {
                if str_at(x, "/name").is_empty() {
                    out.error(file, format!("spec.versions[{i}].name"), "missing", "name the version, e.g. v1");
                }
            }
        }
        _ if api.ends_with("v1beta1") && !str_at(v, "/spec/version").is_empty() => {}
        _ => out.error(
            file,
            "spec.versions",
            "no versions",
            "list at least one version with served: true and storage: true",
        ),
    }
}

/// The CSV's owned CRDs (`by_name`: the bundle's CRDs by name).
fn check_owned_crds(b: &Bundle, by_name: &BTreeMap<&str, &Manifest>, out: &mut Out) {
    let csv = b.csv();
    let csv_file = csv.path().display().to_string();
    // Owned CRDs must be in the bundle with the owned version and kind.
    let provided: BTreeSet<_> = b.provided_apis().into_iter().collect();
    for (i, d) in csv.owned_crds().iter().enumerate() {
        let field = format!("spec.customresourcedefinitions.owned[{i}]");
        let Some(key) = d.api_key() else {
            out.error(
                &csv_file,
                format!("{field}.name"),
                format!("{:?} is not <plural>.<group>", d.name),
                "use the CRD's metadata.name",
            );
            continue;
        };
        if d.version.is_empty() || d.kind.is_empty() {
            out.error(
                &csv_file,
                field.clone(),
                "version and kind are required",
                "give the owned API's version and kind",
            );
        }
        if !by_name.contains_key(d.name.as_str()) {
            out.error(
                &csv_file,
                format!("{field}.name"),
                format!("owned CRD {} has no file in manifests/", d.name),
                "add the CRD manifest to manifests/ or remove the entry",
            );
        } else if !provided.contains(&key) {
            out.error(
                &csv_file,
                field,
                format!(
                    "owned API {} {} {} is not served by the CRD {} in the bundle",
                    key.group, key.version, key.kind, d.name
                ),
                "make version and kind match a version and spec.names.kind of the CRD",
            );
        }
    }
    let owned: BTreeSet<String> = csv.owned_crds().into_iter().map(|d| d.name).collect();
    for (name, crd) in by_name {
        if !owned.contains(*name) {
            out.warn(
                crd.location(),
                "metadata.name",
                format!("CRD {name} is not listed in the CSV's spec.customresourcedefinitions.owned"),
                format!("add it to owned in {csv_file} so OLM and the catalog know the bundle provides it"),
            );
        }
    }
}

/// The entries of list `key` of `spec.install.spec` that are mappings, each with its field
/// path; an entry or list of another type is an error.
fn strategy_entries<'a>(
    spec: &'a serde_json::Map<String, Value>,
    key: &str,
    file: &str,
    out: &mut Out,
) -> Vec<(String, &'a serde_json::Map<String, Value>)> {
    let base = "spec.install.spec";
    match spec.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut ok = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let field = format!("{base}.{key}[{i}]");
                match item {
                    Value::Object(m) => ok.push((field, m)),
                    Value::Null => {}
                    other => out.error(
                        file,
                        field,
                        format!("must be a mapping, found {}", type_name(other)),
                        "write each entry as a mapping",
                    ),
                }
            }
            ok
        }
        Some(other) => {
            out.error(
                file,
                format!("{base}.{key}"),
                format!("must be a list, found {}", type_name(other)),
                format!("write {key} as a list of entries"),
            );
            Vec::new()
        }
    }
}

fn check_objects(b: &Bundle, out: &mut Out) {
    let csv_file = b.csv().path().display().to_string();
    for k in &b.noncanonical_keys {
        out.warn(
            &csv_file,
            k.field(),
            format!(
                "key {:?} is not spelled as the field {:?}; OLM and opm read it as {} (Go matches field names case-insensitively), other tools may not",
                k.written,
                k.canonical,
                k.canonical_field()
            ),
            format!("rename {:?} to {:?}", k.written, k.canonical),
        );
    }
    for m in &b.objects {
        let file = m.location();
        if check_type_meta(m, &file, out) {
            check_object(m, &file, out);
        }
    }
    // RBAC that reaches beyond the operator: refused by the install plan, so an error here.
    for f in super::rbac::check(b) {
        out.error(
            f.manifest.location(),
            f.field,
            format!("{} {}: {}", f.manifest.kind(), f.manifest.name(), f.message()),
            f.fix(),
        );
    }
    check_ignored(b, out);
}

/// One object of the bundle: a kind OLM installs from a bundle, a name, a size the API server
/// stores.
fn check_object(m: &Manifest, file: &str, out: &mut Out) {
    let kind = m.kind();
    if kind == "Deployment" {
        out.error(
            file,
            "kind",
            "a bundle cannot carry a Deployment; OLM creates Deployments only from the CSV",
            "move it into the CSV's spec.install.spec.deployments",
        );
    } else if !ALLOWED_KINDS.contains(&kind) {
        out.error(
            file,
            "kind",
            format!("{kind} is not a kind OLM installs from a bundle (the InstallPlan fails with UnsupportedResource)"),
            format!("remove it or use one of {}", ALLOWED_KINDS.join(", ")),
        );
    }
    if m.name().is_empty() {
        out.error(file, "metadata.name", "missing", "name the object");
    }
    let size = serde_json::to_vec(&m.value).map(|v| v.len()).unwrap_or(0);
    if size > MAX_OBJECT_SIZE {
        let biggest = biggest_field(&m.value);
        out.error(
            file,
            biggest.clone(),
            format!("the object is {size} bytes of JSON; the API server stores no object over {MAX_OBJECT_SIZE} bytes"),
            format!("shrink it, starting with {biggest}"),
        );
    }
}

/// Documents opm ignores: a second CSV is an error, anything else a warning.
fn check_ignored(b: &Bundle, out: &mut Out) {
    for m in &b.ignored {
        if m.kind() == "ClusterServiceVersion" {
            out.error(
                m.location(),
                "kind",
                format!(
                    "a second ClusterServiceVersion ({}); a bundle holds exactly one and opm uses {}",
                    m.name(),
                    b.csv().path().display()
                ),
                "put each CSV in its own bundle",
            );
        } else {
            out.warn(
                m.location(),
                "",
                format!("{} {} is in a later document of a multi-document file; opm and OLM read only the first document of each file, so it is not installed", m.kind(), m.name()),
                "move it to a file of its own",
            );
        }
    }
}

/// `apiVersion` and `kind` are non-empty strings and `metadata` is a mapping; false (after
/// reporting it) when `apiVersion` or `kind` is not, so that kind-specific checks are skipped.
fn check_type_meta(m: &Manifest, file: &str, out: &mut Out) -> bool {
    let mut ok = true;
    for key in ["apiVersion", "kind"] {
        match m.value.get(key) {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(Value::String(_)) | None => {
                ok = false;
                let spelled = m.value.as_object().and_then(|o| o.keys().find(|k| super::gofields::go_fold_eq(k, key)));
                let message = match spelled {
                    Some(other) => format!("missing (there is {other:?}; the API server matches field names exactly)"),
                    None => "missing; every manifest needs apiVersion and kind".to_string(),
                };
                let fix = match spelled {
                    Some(other) => format!("rename {other:?} to {key:?}"),
                    None => {
                        format!("set {key}, e.g. {}", if key == "kind" { "kind: ConfigMap" } else { "apiVersion: v1" })
                    }
                };
                out.error(file, key, message, fix);
            }
            Some(other) => {
                ok = false;
                out.error(file, key, format!("must be a string, found {}", type_name(other)), "quote the value");
            }
        }
    }
    if let Some(meta) = m.value.get("metadata")
        && !meta.is_object()
    {
        out.error(
            file,
            "metadata",
            format!("must be a mapping, found {}", type_name(meta)),
            "give metadata with at least a name",
        );
    }
    ok
}

/// The dotted path of the largest leaf string or subtree, for size messages.
fn biggest_field(v: &Value) -> String {
    let mut path = String::new();
    let mut cur = v;
    loop {
        let next = match cur {
            Value::Object(m) => m
                .iter()
                .max_by_key(|(_, x)| serde_json::to_vec(x).map(|b| b.len()).unwrap_or(0))
                .map(|(k, x)| (k.clone(), x)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .max_by_key(|(_, x)| serde_json::to_vec(x).map(|b| b.len()).unwrap_or(0))
                .map(|(i, x)| (format!("[{i}]"), x)),
            _ => None,
        };
        match next {
            Some((k, x)) => {
                if !path.is_empty() && !k.starts_with('[') {
                    path.push('.');
                }
                path.push_str(&k);
                cur = x;
            }
            None => return path,
        }
    }
}

fn check_entries(b: &Bundle, out: &mut Out, dependencies: bool) {
    let (entries, file, list): (Vec<(&str, &Value)>, _, _) = if dependencies {
        let e = b.dependencies.iter().map(|d| (d.type_.as_str(), &d.value)).collect();
        (e, b.dependencies_file.as_ref(), "dependencies")
    } else {
        let e = b.properties.iter().map(|p| (p.type_.as_str(), &p.value)).collect();
        (e, b.properties_file.as_ref(), "properties")
    };
    let Some(file) = file else { return };
    let file = file.display().to_string();
    for (i, (type_, v)) in entries.into_iter().enumerate() {
        let field = format!("{list}[{i}]");
        match type_ {
            "" => out.error(&file, format!("{field}.type"), "missing", "set the type, e.g. olm.package or olm.gvk"),
            property::PACKAGE if dependencies => {
                let name = str_at(v, "/packageName");
                let range = str_at(v, "/version");
                if name.is_empty() {
                    out.error(&file, format!("{field}.value.packageName"), "missing or not a string", "name the required package");
                }
                if range.is_empty() {
                    out.error(&file, format!("{field}.value.version"), "missing or not a string", "give a semver range, e.g. \">=1.0.0\"");
                } else if let Err(err) = check_range(range) {
                    out.error(&file, format!("{field}.value.version"), format!("{range:?} is not a semver range: {err}"), "use blang/semver range syntax, e.g. \">=1.0.0 <2.0.0\"");
                }
            }
            property::GVK | property::GVK_REQUIRED => {
                for k in ["version", "kind"] {
                    if str_at(v, &format!("/{k}")).is_empty() {
                        out.error(&file, format!("{field}.value.{k}"), "missing or not a string", "give group, version and kind of the API");
                    }
                }
                if !v.is_object() || v.get("group").is_some_and(|g| !g.is_string()) {
                    out.error(&file, format!("{field}.value"), "must be {group, version, kind} strings", "write the API's group, version and kind");
                }
            }
            property::PACKAGE_REQUIRED => {
                if str_at(v, "/packageName").is_empty() {
                    out.error(&file, format!("{field}.value.packageName"), "missing or not a string", "name the required package");
                }
                match check_range(str_at(v, "/versionRange")) {
                    Ok(()) => {}
                    Err(err) => out.error(&file, format!("{field}.value.versionRange"), format!("not a semver range: {err}"), "use blang/semver range syntax"),
                }
            }
            property::PACKAGE if !dependencies => {
                out.warn(&file, format!("{field}.type"), "an olm.package property here replaces the one derived from the annotations and CSV version", "remove it unless you mean to override package and version");
            }
            property::CONSTRAINT => check_constraint(v, &file, &field, out),
            "olm.label" | "olm.label.required" | "olm.deprecated" | "olm.maxOpenShiftVersion" => {}
            other if dependencies => out.warn(
                &file,
                format!("{field}.type"),
                format!("{other:?} is not a dependency type OLM knows (olm.package, olm.gvk, olm.constraint, olm.label); it becomes a plain property"),
                "use olm.package, olm.gvk or olm.constraint",
            ),
            _ => {}
        }
    }
}

fn check_constraint(v: &Value, file: &str, field: &str, out: &mut Out) {
    let size = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
    if size > property::MAX_CONSTRAINT_SIZE {
        out.error(
            file,
            format!("{field}.value"),
            format!("olm.constraint value is {size} bytes, over the {} limit", property::MAX_CONSTRAINT_SIZE),
            "split or simplify the constraint",
        );
    }
    match serde_json::from_value::<property::Constraint>(v.clone()) {
        Err(e) => out.error(
            file,
            format!("{field}.value"),
            format!("not an olm.constraint: {e}"),
            "give failureMessage and exactly one of gvk, package, cel, all, any, not",
        ),
        Ok(c) => check_constraint_shape(&c, file, &format!("{field}.value"), out),
    }
}

fn check_constraint_shape(c: &property::Constraint, file: &str, field: &str, out: &mut Out) {
    let n = [c.gvk.is_some(), c.package.is_some(), c.cel.is_some(), c.all.is_some(), c.any.is_some(), c.not.is_some()]
        .iter()
        .filter(|x| **x)
        .count();
    if n != 1 {
        out.error(
            file,
            field,
            format!("has {n} constraints; exactly one of gvk, package, cel, all, any, not is required"),
            "split it or wrap several in all/any",
        );
    }
    if let Some(p) = &c.package
        && let Err(e) = check_range(&p.version_range)
    {
        out.error(
            file,
            format!("{field}.package.versionRange"),
            format!("{:?} is not a semver range: {e}", p.version_range),
            "use blang/semver range syntax",
        );
    }
    for (key, comp) in [("all", &c.all), ("any", &c.any), ("not", &c.not)] {
        if let Some(comp) = comp {
            for (i, inner) in comp.constraints.iter().enumerate() {
                check_constraint_shape(inner, file, &format!("{field}.{key}.constraints[{i}]"), out);
            }
        }
    }
}

/// An image reference as `catalog add` and `opm validate` check it
/// ([`crate::catalog::validate::check_reference`], the distribution reference grammar).
fn check_image(image: &str, file: &str, field: String, out: &mut Out) {
    if let Err(e) = crate::catalog::validate::check_reference(image) {
        let hint = if image.contains("://") {
            "; drop the scheme (oci://, docker://, https://)"
        } else if image.ends_with('@') || image.contains("@:") {
            "; give the digest after '@' (…@sha256:<64 hex digits>) or drop the '@'"
        } else {
            ""
        };
        out.error(
            file,
            field,
            format!("{image:?} is not a valid image reference ({e}); the catalog rejects it"),
            format!("write a pull spec such as quay.io/org/image:v1.0.0 or quay.io/org/image@sha256:<digest>{hint}"),
        );
    }
}

/// operator-framework/api `validateExamplesAnnotations` on a non-empty `alm-examples`: JSON
/// that decodes into `[]unstructured.Unstructured`, so a list whose every entry is an object
/// with a `kind` (unstructured's decoder refuses anything else: "Object 'Kind' is missing"), an
/// error there. Returns the list.
fn alm_examples(examples: &str) -> Result<Vec<Value>, String> {
    let list: Vec<Value> = serde_json::from_str(examples).map_err(|e| e.to_string())?;
    for (i, e) in list.iter().enumerate() {
        match e {
            Value::Object(o) if o.get("kind").and_then(Value::as_str).is_some_and(|k| !k.is_empty()) => {}
            Value::Object(_) => return Err(format!("entry {i} has no kind")),
            other => return Err(format!("entry {i} is {}, not an object", type_name(other))),
        }
    }
    Ok(list)
}

/// Checks a blang/semver range (`olm.skipRange`, dependency `version`, `versionRange`) with the
/// catalog's port of blang's parser ([`crate::catalog::semver_range`]); the error is blang's reason.
pub(crate) fn check_range(range: &str) -> Result<(), String> {
    crate::catalog::semver_range::parse(range).map(|_| ()).map_err(|e| e.message)
}

/// operator-framework/api `parseCSVNameFormat`: a DNS-1123 subdomain that is also a label value.
fn csv_name_format(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty".into());
    }
    if name.len() > 63 {
        return Err(format!("{} characters; a label value has at most 63", name.len()));
    }
    let ok_chars = name.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.');
    let alnum = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !ok_chars || !alnum(name.bytes().next()) || !alnum(name.bytes().last()) {
        return Err("must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (a DNS-1123 subdomain)".into());
    }
    if name.split('.').any(|l| l.is_empty() || l.starts_with('-') || l.ends_with('-')) {
        return Err("each dot-separated part must start and end with a letter or digit".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        for ok in [
            ">=1.0.0 <2.0.0",
            ">= 1.0.0",
            ">1.0.0 !1.2.1 || =3.0.0",
            "<0.9.2-clusterwide",
            ">=4.1.0 <4.2.0-rc1",
            "1.2.x",
        ] {
            assert!(check_range(ok).is_ok(), "{ok}");
        }
        for bad in ["", ">=1.0", "foo", ">=1.0.0 ||", ">="] {
            assert!(check_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn csv_names() {
        assert!(csv_name_format("etcdoperator.v0.9.4").is_ok());
        assert!(csv_name_format("etcdoperator.v0.9.4-clusterwide").is_ok());
        assert!(csv_name_format("Etcd.v1").is_err());
        assert!(csv_name_format("etcd..v1").is_err());
        assert!(csv_name_format(&"a".repeat(64)).is_err());
    }

    #[test]
    fn biggest_field_path() {
        let v = serde_json::json!({"spec": {"description": "x".repeat(100), "a": [1, "y".repeat(200)]}});
        assert_eq!(biggest_field(&v), "spec.a[1]");
    }
}
