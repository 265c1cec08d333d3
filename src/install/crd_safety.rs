//! CRD upgrade safety: before any step of an InstallPlan is applied, every CustomResourceDefinition
//! step is checked against the CRD already on the cluster and the objects stored under it.
//!
//! Three checks, each reported with the CRD's name, the version, the objects and fields involved
//! and what to do (`reference/olm-v0.md` §5.3):
//!
//! 1. **Stored versions** — every version in the existing CRD's `status.storedVersions` must still
//!    be in the new CRD's `spec.versions`, else objects persisted at that version could no longer be
//!    read. Upstream: \[OLM\] `pkg/lib/crd/storage.go` `SafeStorageVersionUpgrade` (error "new CRD
//!    removes version V that is listed as a stored version on the existing CRD", wrapped as "risk of
//!    data loss updating …" in `pkg/controller/operators/catalog/step.go` `NewCRDV1Step`). Like OLM,
//!    capstan never prunes `storedVersions` itself (§8 item 2): the admin migrates and prunes.
//! 2. **Existing objects** — for every version served by both the existing and the new CRD, every
//!    object read at that version must validate against the new CRD's schema of that version.
//!    Upstream: \[OLM\] `pkg/controller/operators/catalog/operator.go` `validateV1CRDCompatibility`
//!    and `validateExistingCRs` (paged list, 500 per page as client-go's `tools/pager`, each object
//!    checked with apiextensions' `validation.ValidateCustomResource`; error "updated validation is
//!    too restrictive"). As in OLM's `step.go`, when the new CRD's conversion strategy is `Webhook`,
//!    validation failures only warn: the new webhook may convert the objects. (Read at
//!    operator-lifecycle-manager commit 992bb09, 2026-08; the "served by both" rule dates from
//!    242f63f, 2023, "Correct CRD validation to validate CRs against each version of the updated
//!    CRD".)
//! 3. **The new CRD's versions** — at least one version, unique names, exactly one storage version,
//!    and a schema for every served version: the API server's own rules
//!    (k8s.io/apiextensions-apiserver `pkg/apis/apiextensions/validation/validation.go`
//!    `ValidateCustomResourceDefinitionSpec`: "must have exactly one version marked as storage
//!    version"), checked here so that a plan fails before its first step instead of half-applied.
//!    OLM adds no rule of its own here. Two further findings are warnings only, because Kubernetes
//!    accepts such CRDs: a storage version that is not served, and — with conversion strategy
//!    `None` and several served versions — fields of a served version that the storage version's
//!    schema lacks (the API server prunes them when it stores the object).
//!
//! Schemas are validated with the `jsonschema` crate (JSON Schema draft 4, the dialect of
//! Kubernetes' OpenAPI v3 structural schemas) after [`to_json_schema`] translates the Kubernetes
//! extensions; `pattern`s are Go RE2 and are matched with the `regex` crate (whose `\d`, `\w`, `\s`
//! are Unicode-aware where Go's are ASCII: capstan may accept a value the API server would not,
//! never the reverse). Not checked, as in OLM (its `ValidateCustomResource` runs only the OpenAPI
//! schema validator): CEL rules (`x-kubernetes-validations`), list-type uniqueness
//! (`x-kubernetes-list-type`), embedded-resource metadata. Not checked although OLM does:
//! `format` (Kubernetes' formats, such as Go durations, differ from JSON Schema's, and a wrong
//! format check would refuse good objects). A `null` in a field without `nullable: true` is refused,
//! as by OLM's validator (the API server prunes such nulls on write, so stored objects rarely hold
//! one). `tests/e2e/install_crd_safety.rs` compares these verdicts with the API server's.
//!
//! [`check_crd_upgrade`] is the pure core; [`CrdUpgradeCheck`] is the same check fed one object at
//! a time; [`check_plan_crds`] reads the cluster for a plan's CRD steps.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::{Map, Value};

use super::Step;

/// How many invalid objects an error names; the rest are counted.
pub const MAX_LISTED_OBJECTS: usize = 5;
/// How many field errors are kept per named object; the rest are counted.
pub const MAX_FIELD_ERRORS: usize = 5;
/// Objects per list request when reading a CRD's objects (client-go `tools/pager`
/// `defaultPageSize`, which OLM's `validateExistingCRs` uses).
pub const LIST_PAGE_SIZE: u32 = 500;
/// Longest reason text kept for one field error, in bytes (values quoted in reasons are cut).
const MAX_REASON_LEN: usize = 240;

/// One field of one object that does not validate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Field path in Kubernetes' notation, e.g. `spec.storage.size` or `spec.nodes[2].name`;
    /// `<root>` for the object itself.
    pub path: String,
    /// Why, e.g. `Required value` or `"three" is not of type "integer"`.
    pub reason: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// An existing object that does not validate against the new schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidObject {
    /// `metadata.namespace`; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// The first [`MAX_FIELD_ERRORS`] field errors.
    pub errors: Vec<FieldError>,
    /// How many field errors the object has in all.
    pub error_count: usize,
}

impl InvalidObject {
    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

impl fmt::Display for InvalidObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (", self.key())?;
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        if self.error_count > self.errors.len() {
            write!(f, "; and {} more field errors", self.error_count - self.errors.len())?;
        }
        f.write_str(")")
    }
}

/// Why a CRD step may not be applied. Every message names the CRD and says what to do; the
/// Display text is complete and meant for users (InstallPlan status, events).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrdUpgradeError {
    /// A version of the existing CRD's `status.storedVersions` is missing from the new CRD
    /// (\[OLM\] `pkg/lib/crd/storage.go` `SafeStorageVersionUpgrade`).
    #[error(
        "CRD {crd}: version {version} would be removed but is still listed in status.storedVersions \
         [{}] of the CRD on the cluster: objects stored at {version} could no longer be read (risk of data loss; \
         OLM refuses this too). Nothing of this plan was applied. Remediation: {}",
        stored_versions.join(", "),
        stored_version_remediation(crd, version, stored_versions, kept_versions, current_storage.as_deref())
    )]
    StoredVersionRemoved {
        /// The CRD name (`<plural>.<group>`).
        crd: String,
        /// The removed version.
        version: String,
        /// The existing CRD's `status.storedVersions`.
        stored_versions: Vec<String>,
        /// The versions of the new CRD (`spec.versions[].name`).
        kept_versions: Vec<String>,
        /// The existing CRD's storage version, when it has one.
        current_storage: Option<String>,
    },
    /// Existing objects do not validate against the new CRD's schema for the version they are
    /// served at (\[OLM\] `catalog/operator.go` `validateExistingCRs`).
    #[error(
        "CRD {crd}: {total} existing {kind} object{} read at version {version} do{} not validate against \
         the new CRD's schema for {version} (updated validation is too restrictive): {}{}. Nothing of this \
         plan was applied. Fix or delete these objects so that they validate against the new schema \
         (list them with `kubectl get {crd} -A -o yaml`), or publish a bundle whose CRD still accepts them; \
         the upgrade can proceed once no object fails.",
        plural_s(*total), if *total == 1 { "es" } else { "" },
        objects.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
        if *total > objects.len() { format!("; and {} more", total - objects.len()) } else { String::new() }
    )]
    InvalidObjects {
        /// The CRD name.
        crd: String,
        /// The CRD's kind (`spec.names.kind`).
        kind: String,
        /// The version the objects were read at and validated for.
        version: String,
        /// The first [`MAX_LISTED_OBJECTS`] invalid objects, in list order.
        objects: Vec<InvalidObject>,
        /// How many objects are invalid in all.
        total: usize,
    },
    /// The new CRD's `spec.versions` break a rule of the API server.
    #[error("CRD {crd}: spec.versions {problem}; the API server refuses such a CRD. Fix the CRD in the bundle: {fix}.")]
    InconsistentVersions {
        /// The CRD name.
        crd: String,
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// The new CRD's schema for a version cannot be compiled into a validator.
    #[error(
        "CRD {crd}: the schema of version {version} (spec.versions[].schema.openAPIV3Schema) is not a valid schema: \
         {message}; fix the CRD in the bundle"
    )]
    InvalidSchema {
        /// The CRD name.
        crd: String,
        /// The version whose schema is broken.
        version: String,
        /// The validator's message.
        message: String,
    },
    /// The step's manifest is not a readable `apiextensions.k8s.io/v1` CustomResourceDefinition.
    #[error(
        "CRD {crd}: the plan's manifest cannot be read as an apiextensions.k8s.io/v1 CustomResourceDefinition: {message}"
    )]
    InvalidManifest {
        /// The step's name.
        crd: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// Reading the cluster failed, so the CRD could not be checked (the plan is not applied).
    #[error(
        "CRD {crd}: cannot check the upgrade: {action} failed: {message}; nothing is applied until the check can run"
    )]
    Cluster {
        /// The CRD name.
        crd: String,
        /// What capstan was doing, e.g. `listing kaiwuclusters.kaiwu.inspur.com at v1`.
        action: String,
        /// The API error.
        message: String,
    },
}

fn plural_s(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The remediation text of [`CrdUpgradeError::StoredVersionRemoved`]: rewrite stored objects,
/// then drop the version from `storedVersions`, with the exact `kubectl` command.
fn stored_version_remediation(
    crd: &str,
    version: &str,
    stored: &[String],
    kept: &[String],
    current_storage: Option<&str>,
) -> String {
    if current_storage == Some(version) {
        return format!(
            "{version} is still the storage version of the CRD on the cluster, so objects are written at {version} \
             today. First install a release whose CRD keeps {version} but stores another version (one of [{}]), \
             then rewrite stored objects (read and write back every {crd} object), then drop {version} from \
             storedVersions (kubectl patch crd {crd} --subresource=status --type=merge -p \
             '{{\"status\":{{\"storedVersions\":[\"<the new storage version>\"]}}}}'); after that this upgrade proceeds \
             on the next reconcile. Uninstalling the operator is not needed.",
            kept.join(", ")
        );
    }
    let remaining: Vec<&str> = stored
        .iter()
        .map(String::as_str)
        .filter(|v| kept.iter().any(|k| k == v) || Some(*v) == current_storage)
        .collect();
    let list = remaining.iter().map(|v| format!("\\\"{v}\\\"")).collect::<Vec<_>>().join(",");
    format!(
        "rewrite stored objects (read and write back every {crd} object, e.g. with kube-storage-version-migrator or \
         `kubectl get {crd} -A -o json | kubectl replace -f -`, so that each is stored at the storage version{}), \
         then drop {version} from storedVersions (kubectl patch crd {crd} --subresource=status --type=merge -p \
         \"{{\\\"status\\\":{{\\\"storedVersions\\\":[{list}]}}}}\"); the upgrade proceeds on the next reconcile. \
         Uninstalling the operator is not needed.",
        current_storage.map(|s| format!(" {s}")).unwrap_or_default()
    )
}

/// One message for all of a plan's CRD problems, for an InstallPlan's `status.message`: the
/// single error's text, or `N CRD upgrade problems: (1) … (2) …`.
pub fn describe_all(errors: &[CrdUpgradeError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!(
            "{} CRD upgrade problems: {}",
            many.len(),
            many.iter().enumerate().map(|(i, e)| format!("({}) {e}", i + 1)).collect::<Vec<_>>().join(" ")
        ),
    }
}

/// The outcome of checking CRDs: errors refuse the plan; warnings are worth telling the user
/// (an InstallPlan event, a log line) but do not refuse it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrdCheckOutcome {
    /// Reasons to refuse the plan.
    pub errors: Vec<CrdUpgradeError>,
    /// Findings that do not refuse the plan, each a complete sentence naming the CRD.
    pub warnings: Vec<String>,
}

impl CrdCheckOutcome {
    /// `Ok(warnings)` when there is no error, else `Err(errors)`.
    pub fn into_result(self) -> Result<Vec<String>, Vec<CrdUpgradeError>> {
        if self.errors.is_empty() { Ok(self.warnings) } else { Err(self.errors) }
    }

    fn extend(&mut self, other: CrdCheckOutcome) {
        self.errors.extend(other.errors);
        self.warnings.extend(other.warnings);
    }
}

/// Per-version state of [`CrdUpgradeCheck`]'s object validation.
struct VersionCheck {
    validator: Option<jsonschema::Validator>,
    invalid: Vec<InvalidObject>,
    total_invalid: usize,
}

/// The CRD upgrade check of one CRD, fed the existing objects one at a time so that a large
/// number of objects never has to be held in memory.
///
/// Create it with [`CrdUpgradeCheck::new`], read the objects at each version of
/// [`CrdUpgradeCheck::versions_to_read`] and give each to [`CrdUpgradeCheck::add_object`], then
/// call [`CrdUpgradeCheck::finish`].
pub struct CrdUpgradeCheck {
    crd: String,
    kind: String,
    webhook_conversion: bool,
    outcome: CrdCheckOutcome,
    versions: BTreeMap<String, VersionCheck>,
}

impl CrdUpgradeCheck {
    /// Runs the checks that need no objects (stored versions, the new CRD's versions) and
    /// prepares a validator for every version whose objects must be validated.
    ///
    /// `existing` is the CRD on the cluster (`None` when it does not exist yet: only the new
    /// CRD's own versions are checked). `new` is the CRD the plan would apply.
    pub fn new(existing: Option<&CustomResourceDefinition>, new: &CustomResourceDefinition) -> CrdUpgradeCheck {
        let crd = crd_name(new);
        let mut outcome = CrdCheckOutcome::default();
        check_new_versions(&crd, new, &mut outcome);
        let mut versions = BTreeMap::new();
        if let Some(existing) = existing {
            check_stored_versions(&crd, existing, new, &mut outcome);
            for version in versions_to_validate(existing, new) {
                let schema = new
                    .spec
                    .versions
                    .iter()
                    .find(|v| v.name == version)
                    .and_then(|v| v.schema.as_ref())
                    .and_then(|s| s.open_api_v3_schema.as_ref());
                let validator = match schema.map(serde_json::to_value).transpose() {
                    Err(e) => {
                        outcome.errors.push(CrdUpgradeError::InvalidSchema {
                            crd: crd.clone(),
                            version: version.clone(),
                            message: e.to_string(),
                        });
                        continue;
                    }
                    Ok(None) => None,
                    Ok(Some(schema)) => match compile(&crd, &version, &schema) {
                        Ok((v, warnings)) => {
                            outcome.warnings.extend(warnings);
                            Some(v)
                        }
                        Err(SchemaError { message, .. }) => {
                            outcome.errors.push(CrdUpgradeError::InvalidSchema {
                                crd: crd.clone(),
                                version: version.clone(),
                                message,
                            });
                            continue;
                        }
                    },
                };
                versions.insert(version, VersionCheck { validator, invalid: Vec::new(), total_invalid: 0 });
            }
        }
        let webhook_conversion = new.spec.conversion.as_ref().is_some_and(|c| c.strategy == "Webhook");
        CrdUpgradeCheck { crd, kind: new.spec.names.kind.clone(), webhook_conversion, outcome, versions }
    }

    /// The CRD name (`metadata.name` of the new CRD, else `<plural>.<group>`).
    pub fn crd(&self) -> &str {
        &self.crd
    }

    /// The versions whose objects must be read and validated: served by both the existing and
    /// the new CRD (\[OLM\] `validateV1CRDCompatibility`), in name order. Empty when the CRD does
    /// not exist yet.
    pub fn versions_to_read(&self) -> Vec<String> {
        self.versions.keys().cloned().collect()
    }

    /// Validates one existing object, read from the API at `version`, against the new CRD's
    /// schema for `version`. Objects read at a version not in
    /// [`CrdUpgradeCheck::versions_to_read`] are not checked (OLM checks only those).
    pub fn add_object(&mut self, version: &str, object: &Value) {
        let Some(check) = self.versions.get_mut(version) else { return };
        let Some(validator) = &check.validator else { return };
        let mut errors = Vec::new();
        let mut count = 0usize;
        for e in validator.iter_errors(object) {
            count += 1;
            if errors.len() < MAX_FIELD_ERRORS {
                errors.push(field_error(&e));
            }
        }
        if count == 0 {
            return;
        }
        check.total_invalid += 1;
        if check.invalid.len() < MAX_LISTED_OBJECTS {
            let meta = object.get("metadata");
            let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("<unnamed>").to_string();
            let namespace = meta.and_then(|m| m.get("namespace")).and_then(Value::as_str).map(str::to_string);
            check.invalid.push(InvalidObject { namespace, name, errors, error_count: count });
        }
    }

    /// All findings: errors refuse the plan, warnings do not.
    pub fn finish(self) -> CrdCheckOutcome {
        let mut outcome = self.outcome;
        for (version, check) in self.versions {
            if check.total_invalid == 0 {
                continue;
            }
            let error = CrdUpgradeError::InvalidObjects {
                crd: self.crd.clone(),
                kind: self.kind.clone(),
                version,
                objects: check.invalid,
                total: check.total_invalid,
            };
            if self.webhook_conversion {
                // [OLM] step.go: with a Webhook conversion strategy a validation failure is only a
                // warning event ("CRDValidation"); the new webhook may convert the objects.
                outcome.warnings.push(format!(
                    "{error} (Not refused: the new CRD uses conversion strategy Webhook, which may convert these \
                     objects once the new operator runs; OLM proceeds in this case too.)"
                ));
            } else {
                outcome.errors.push(error);
            }
        }
        outcome
    }
}

/// Checks one CRD upgrade without a cluster: `existing` is the CRD on the cluster (`None` when
/// new), `new` the CRD the plan would apply, `objects` the existing objects, each with the version
/// it was read at (`(version, object)`).
///
/// # Errors
/// Every problem found, all at once: stored versions removed
/// ([`CrdUpgradeError::StoredVersionRemoved`], one per version), objects that do not validate
/// ([`CrdUpgradeError::InvalidObjects`], one per version), the new CRD's versions
/// ([`CrdUpgradeError::InconsistentVersions`]), broken schemas
/// ([`CrdUpgradeError::InvalidSchema`]). Warnings are dropped; use [`CrdUpgradeCheck`] to get them.
pub fn check_crd_upgrade(
    existing: Option<&CustomResourceDefinition>,
    new: &CustomResourceDefinition,
    objects: &[(String, Value)],
) -> Result<(), Vec<CrdUpgradeError>> {
    let mut check = CrdUpgradeCheck::new(existing, new);
    for (version, object) in objects {
        check.add_object(version, object);
    }
    check.finish().into_result().map(|_| ())
}

/// The CRD's name: `metadata.name`, else `<plural>.<group>`.
fn crd_name(crd: &CustomResourceDefinition) -> String {
    crd.metadata.name.clone().unwrap_or_else(|| format!("{}.{}", crd.spec.names.plural, crd.spec.group))
}

/// Versions served by both CRDs (\[OLM\] `validateV1CRDCompatibility`: `oldVersion.Served` and
/// `newVersion.Served`).
fn versions_to_validate(existing: &CustomResourceDefinition, new: &CustomResourceDefinition) -> BTreeSet<String> {
    let old_served: BTreeSet<&str> =
        existing.spec.versions.iter().filter(|v| v.served).map(|v| v.name.as_str()).collect();
    new.spec
        .versions
        .iter()
        .filter(|v| v.served && old_served.contains(v.name.as_str()))
        .map(|v| v.name.clone())
        .collect()
}

/// Check 1: `status.storedVersions` of the existing CRD ⊆ `spec.versions` of the new one.
fn check_stored_versions(
    crd: &str,
    existing: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
    out: &mut CrdCheckOutcome,
) {
    let stored: Vec<String> = existing.status.as_ref().and_then(|s| s.stored_versions.clone()).unwrap_or_default();
    let kept: Vec<String> = new.spec.versions.iter().map(|v| v.name.clone()).collect();
    let current_storage = existing.spec.versions.iter().find(|v| v.storage).map(|v| v.name.clone());
    for version in &stored {
        if !kept.contains(version) {
            out.errors.push(CrdUpgradeError::StoredVersionRemoved {
                crd: crd.to_string(),
                version: version.clone(),
                stored_versions: stored.clone(),
                kept_versions: kept.clone(),
                current_storage: current_storage.clone(),
            });
        }
    }
}

/// Check 3: the new CRD's versions obey the API server's rules; plus the two warnings.
fn check_new_versions(crd: &str, new: &CustomResourceDefinition, out: &mut CrdCheckOutcome) {
    let versions = &new.spec.versions;
    if versions.is_empty() {
        out.errors.push(CrdUpgradeError::InconsistentVersions {
            crd: crd.into(),
            problem: "is empty".into(),
            fix: "list at least one version, with served: true and storage: true".into(),
        });
        return;
    }
    let mut seen = BTreeSet::new();
    let duplicates: BTreeSet<&str> = versions.iter().map(|v| v.name.as_str()).filter(|n| !seen.insert(*n)).collect();
    if !duplicates.is_empty() {
        out.errors.push(CrdUpgradeError::InconsistentVersions {
            crd: crd.into(),
            problem: format!("lists version {} more than once", duplicates.into_iter().collect::<Vec<_>>().join(", ")),
            fix: "keep one entry per version name".into(),
        });
    }
    let storage: Vec<&str> = versions.iter().filter(|v| v.storage).map(|v| v.name.as_str()).collect();
    if storage.len() != 1 {
        let names: Vec<&str> = versions.iter().map(|v| v.name.as_str()).collect();
        out.errors.push(CrdUpgradeError::InconsistentVersions {
            crd: crd.into(),
            problem: if storage.is_empty() {
                format!("must have exactly one version marked as storage version, but none of [{}] has storage: true", names.join(", "))
            } else {
                format!("must have exactly one version marked as storage version, but [{}] all have storage: true", storage.join(", "))
            },
            fix: "set storage: true on exactly one version (the one objects are persisted at) and storage: false on the others"
                .into(),
        });
    }
    let preserve_unknown = new.spec.preserve_unknown_fields.unwrap_or(false);
    for v in versions.iter().filter(|v| v.served) {
        if !preserve_unknown && v.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).is_none() {
            out.errors.push(CrdUpgradeError::InconsistentVersions {
                crd: crd.into(),
                problem: format!("has served version {} without schema.openAPIV3Schema", v.name),
                fix: format!(
                    "give version {} a structural schema (at least `type: object` with \
                     `x-kubernetes-preserve-unknown-fields: true`), or stop serving it",
                    v.name
                ),
            });
        }
    }
    if let [storage_version] = storage.as_slice() {
        if versions.iter().any(|v| v.name == *storage_version && !v.served) {
            out.warnings.push(format!(
                "CRD {crd}: storage version {storage_version} is not served; objects are persisted at a version no \
                 client can read directly (Kubernetes allows this, but it is usually a mistake in the bundle)."
            ));
        }
        warn_pruned_fields(crd, new, storage_version, out);
    }
}

/// The warning of check 3 for conversion strategy `None` with several served versions: the
/// fields of a served version that the storage version's schema lacks (pruned when stored).
fn warn_pruned_fields(crd: &str, new: &CustomResourceDefinition, storage_version: &str, out: &mut CrdCheckOutcome) {
    let versions = &new.spec.versions;
    let none_conversion = new.spec.conversion.as_ref().is_none_or(|c| c.strategy == "None");
    let served: Vec<_> = versions.iter().filter(|v| v.served).collect();
    if !none_conversion || served.len() <= 1 {
        return;
    }
    let fields_of = |name: &str| -> Option<BTreeSet<String>> {
        let schema = versions.iter().find(|v| v.name == name)?.schema.as_ref()?.open_api_v3_schema.as_ref()?;
        let value = serde_json::to_value(schema).ok()?;
        let mut set = BTreeSet::new();
        field_paths(&value, "", &mut set);
        Some(set)
    };
    let Some(stored_fields) = fields_of(storage_version) else { return };
    for v in served.iter().filter(|v| v.name != storage_version) {
        let Some(fields) = fields_of(&v.name) else { continue };
        let pruned: Vec<&String> = fields
            .iter()
            .filter(|f| !stored_fields.contains(*f) && !covered_by_open_field(f, &stored_fields))
            .collect();
        if !pruned.is_empty() {
            let shown: Vec<&str> = pruned.iter().take(MAX_LISTED_OBJECTS).map(|s| s.as_str()).collect();
            out.warnings.push(format!(
                "CRD {crd}: conversion strategy None serves several versions, but the schema of served version \
                 {} has field{} {}{} that storage version {storage_version} lacks; with strategy None objects are \
                 stored unchanged at {storage_version}, so the API server prunes these fields when it stores an \
                 object written at {}. Give the versions the same fields or use a conversion webhook.",
                v.name,
                plural_s(pruned.len()),
                shown.join(", "),
                if pruned.len() > shown.len() {
                    format!(" and {} more", pruned.len() - shown.len())
                } else {
                    String::new()
                },
                v.name
            ));
        }
    }
}

/// The field paths a structural schema declares (`spec.replicas`, `spec.nodes[].name`,
/// `spec.labels{}`), not descending below `x-kubernetes-preserve-unknown-fields: true`, which is
/// recorded as `<path>.*`.
fn field_paths(schema: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    let Some(obj) = schema.as_object() else { return };
    if obj.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true) {
        out.insert(format!("{prefix}.*"));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
            out.insert(path.clone());
            field_paths(sub, &path, out);
        }
    }
    if let Some(items) = obj.get("items") {
        field_paths(items, &format!("{prefix}[]"), out);
    }
    if let Some(additional) = obj.get("additionalProperties").filter(|a| a.is_object()) {
        let path = format!("{prefix}{{}}");
        out.insert(path.clone());
        field_paths(additional, &path, out);
    }
}

/// Whether `field` lies under a path that keeps unknown fields in `fields`.
fn covered_by_open_field(field: &str, fields: &BTreeSet<String>) -> bool {
    fields
        .iter()
        .filter_map(|f| f.strip_suffix(".*"))
        .any(|open| open.is_empty() || field.strip_prefix(open).is_some_and(|rest| rest.starts_with(['.', '[', '{'])))
}

/// The keyword [`to_json_schema`] puts in place of `pattern`: a Go RE2 pattern, checked with the
/// `regex` crate (whose syntax is RE2's) instead of jsonschema's ECMA-262 engine, which rejects or
/// misreads Go syntax such as a mid-pattern `(?i)` or `[[:alpha:]]`.
pub const GO_PATTERN_KEYWORD: &str = "x-capstan-go-pattern";

/// A `pattern` of a CRD schema (Kubernetes matches it with Go's `regexp.MatchString`: unanchored).
struct GoPattern {
    regex: regex::Regex,
}

impl<'i> jsonschema::Keyword<'i> for GoPattern {
    fn validate(&self, instance: &'i Value) -> Result<(), jsonschema::ValidationError<'i>> {
        if self.is_valid(instance) {
            return Ok(());
        }
        Err(jsonschema::ValidationError::custom(format!("{instance} does not match {:?}", self.regex.as_str())))
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        instance.as_str().is_none_or(|s| self.regex.is_match(s))
    }
}

/// Compiles a CRD version's schema (after [`to_json_schema`]) with JSON Schema draft 4 semantics,
/// `pattern` as Go RE2 and no format checks. Patterns the `regex` crate cannot compile are left
/// unchecked and returned as warnings.
fn compile(crd: &str, version: &str, openapi: &Value) -> Result<(jsonschema::Validator, Vec<String>), SchemaError> {
    let mut unsupported = Vec::new();
    let schema = translate(openapi, "", &mut unsupported);
    let validator = jsonschema::draft4::options()
        .should_validate_formats(false)
        .with_keyword(GO_PATTERN_KEYWORD, |_, value, _| {
            let pattern = value.as_str().unwrap_or_default();
            let regex = regex::Regex::new(pattern)
                .map_err(|e| jsonschema::ValidationError::custom(format!("pattern {pattern:?}: {e}")))?;
            Ok(Box::new(GoPattern { regex }))
        })
        .build(&schema)
        .map_err(|e| SchemaError { crd: crd.to_string(), version: version.to_string(), message: cut(e.to_string()) })?;
    let warnings = unsupported
        .into_iter()
        .map(|(path, pattern, err)| {
            format!(
                "CRD {crd}: the pattern {pattern:?} of field {path} (version {version}) cannot be compiled by capstan                  ({err}); existing objects are not checked against it."
            )
        })
        .collect();
    Ok((validator, warnings))
}

/// A CRD version's schema that does not compile (after [`to_json_schema`]); shown as the
/// validator's message, cut to [`MAX_REASON_LEN`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SchemaError {
    /// The CRD's name.
    pub crd: String,
    /// The version whose schema does not compile.
    pub version: String,
    /// The validator's message.
    pub message: String,
}

/// A CRD version's `openAPIV3Schema`, compiled once, to find the field errors of objects as the
/// API server's schema validation finds them (types, enums, required fields, patterns; unknown
/// fields are not errors: see [`crate::api::unknown_fields`]).
pub struct SchemaCheck(jsonschema::Validator);

impl SchemaCheck {
    /// Compiles `openapi`; `crd` and `version` name the schema in errors.
    ///
    /// # Errors
    /// [`SchemaError`]: the schema does not compile.
    pub fn new(crd: &str, version: &str, openapi: &Value) -> Result<SchemaCheck, SchemaError> {
        Ok(SchemaCheck(compile(crd, version, openapi)?.0))
    }

    /// The first [`MAX_FIELD_ERRORS`] field errors of `object`.
    pub fn errors(&self, object: &Value) -> Vec<FieldError> {
        self.0.iter_errors(object).take(MAX_FIELD_ERRORS).map(|e| field_error(&e)).collect()
    }
}

/// Translates a Kubernetes structural schema (OpenAPI v3 `JSONSchemaProps`) into JSON Schema
/// draft 4 with the same validation meaning:
/// - `nullable: true` → `null` added to `type` (and to `enum`);
/// - `x-kubernetes-int-or-string: true` without `type` → `type: [integer, string]`;
/// - `pattern` → [`GO_PATTERN_KEYWORD`] (Go RE2 syntax, checked with the `regex` crate); a
///   pattern that crate cannot compile is dropped (capstan's validator then does not check it);
/// - empty `required` lists and empty `type` strings (allowed by Kubernetes, not by draft 4's
///   meta-schema) are dropped;
/// - other `x-kubernetes-*` keys, `$ref`, `$schema`, `id`, and documentation keys
///   (`description`, `example`, `externalDocs`) are dropped;
/// - sub-schemas (`properties`, `patternProperties`, `definitions`, `items`,
///   `additionalProperties`, `additionalItems`, `allOf`, `anyOf`, `oneOf`, `not`) are translated.
///
/// Unknown fields stay allowed unless `additionalProperties: false`, as in Kubernetes'
/// validation (pruning, not validation, removes them).
pub fn to_json_schema(openapi: &Value) -> Value {
    translate(openapi, "", &mut Vec::new())
}

/// [`to_json_schema`], collecting `(field path, pattern, error)` for every pattern that the
/// `regex` crate cannot compile (dropped from the schema).
fn translate(openapi: &Value, path: &str, unsupported: &mut Vec<(String, String, String)>) -> Value {
    let Some(obj) = openapi.as_object() else { return openapi.clone() };
    let child = |suffix: &str| {
        if path.is_empty() { suffix.trim_start_matches('.').to_string() } else { format!("{path}{suffix}") }
    };
    let mut out = Map::new();
    for (key, value) in obj {
        match key.as_str() {
            "properties" | "patternProperties" | "definitions" => {
                let mapped = match value.as_object() {
                    Some(m) => Value::Object(
                        m.iter()
                            .map(|(k, v)| (k.clone(), translate(v, &child(&format!(".{k}")), unsupported)))
                            .collect(),
                    ),
                    None => value.clone(),
                };
                out.insert(key.clone(), mapped);
            }
            "items" | "additionalItems" | "additionalProperties" | "not" => {
                let sub = match key.as_str() {
                    "items" | "additionalItems" => child("[]"),
                    "additionalProperties" => child("{}"),
                    _ => path.to_string(),
                };
                let mapped = match value {
                    Value::Array(a) => Value::Array(a.iter().map(|v| translate(v, &sub, unsupported)).collect()),
                    other => translate(other, &sub, unsupported),
                };
                out.insert(key.clone(), mapped);
            }
            "allOf" | "anyOf" | "oneOf" => {
                let mapped = match value.as_array() {
                    Some(a) => Value::Array(a.iter().map(|v| translate(v, path, unsupported)).collect()),
                    None => value.clone(),
                };
                out.insert(key.clone(), mapped);
            }
            "pattern" => match value.as_str().map(|p| (p, regex::Regex::new(p))) {
                Some((_, Ok(_))) => {
                    out.insert(GO_PATTERN_KEYWORD.into(), value.clone());
                }
                Some((p, Err(e))) => {
                    let at = if path.is_empty() { "<root>".to_string() } else { path.to_string() };
                    unsupported.push((
                        at,
                        p.to_string(),
                        e.to_string().lines().last().unwrap_or_default().trim().to_string(),
                    ));
                }
                None => {}
            },
            "nullable" | "$ref" | "$schema" | "id" | "description" | "example" | "externalDocs" => {}
            // Kubernetes allows `required: []` and `type: ""`; draft 4's meta-schema does not.
            "required" if value.as_array().is_some_and(Vec::is_empty) => {}
            "type" if value.as_str() == Some("") => {}
            k if k.starts_with("x-kubernetes-") => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    int_or_string_and_nullable(obj, &mut out);
    Value::Object(out)
}

/// The type a schema `obj` means with Kubernetes' `x-kubernetes-int-or-string` (no `type`:
/// integer or string) and `nullable: true` (`null` added to `type` and `enum`), written into its
/// translation `out`.
fn int_or_string_and_nullable(obj: &Map<String, Value>, out: &mut Map<String, Value>) {
    if obj.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) && !out.contains_key("type") {
        out.insert("type".into(), serde_json::json!(["integer", "string"]));
    }
    if obj.get("nullable").and_then(Value::as_bool) == Some(true) {
        match out.get_mut("type") {
            Some(Value::String(t)) => {
                let t = std::mem::take(t);
                out.insert("type".into(), serde_json::json!([t, "null"]));
            }
            Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => types.push("null".into()),
            _ => {}
        }
        if let Some(Value::Array(options)) = out.get_mut("enum")
            && !options.iter().any(Value::is_null)
        {
            options.push(Value::Null);
        }
    }
}

/// A validation error → field path in Kubernetes' notation and reason.
fn field_error(e: &jsonschema::ValidationError<'_>) -> FieldError {
    let mut path = String::new();
    for segment in e.instance_path().segments() {
        match segment {
            jsonschema::paths::LocationSegment::Index(i) => path.push_str(&format!("[{i}]")),
            jsonschema::paths::LocationSegment::Property(p) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&p);
            }
        }
    }
    let reason = match e.kind() {
        jsonschema::error::ValidationErrorKind::Required { property } => {
            if let Some(p) = property.as_str() {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(p);
            }
            "Required value".to_string()
        }
        _ => e.to_string(),
    };
    if path.is_empty() {
        path.push_str("<root>");
    }
    FieldError { path, reason: cut(reason) }
}

/// `s` cut to [`MAX_REASON_LEN`] bytes at a character boundary, with `…` when cut.
fn cut(mut s: String) -> String {
    if s.len() > MAX_REASON_LEN {
        let mut at = MAX_REASON_LEN;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
        s.push('…');
    }
    s
}

/// Checks every CustomResourceDefinition step of a plan against the cluster, before any step is
/// applied, and returns all problems at once. Warnings are logged (`tracing::warn!`); use
/// [`check_plan_crds_outcome`] to get them.
///
/// # Errors
/// Every [`CrdUpgradeError`] of every CRD step.
pub async fn check_plan_crds(client: &kube::Client, steps: &[Step]) -> Result<(), Vec<CrdUpgradeError>> {
    let outcome = check_plan_crds_outcome(client, steps).await;
    for warning in &outcome.warnings {
        tracing::warn!(%warning, "CRD upgrade check");
    }
    outcome.into_result().map(|_| ())
}

/// [`check_plan_crds`] with the warnings: for each CustomResourceDefinition step, reads the CRD on
/// the cluster; when it exists, lists every object of it in all namespaces (pages of
/// [`LIST_PAGE_SIZE`]) at each version served by both the existing and the new CRD, and runs
/// [`CrdUpgradeCheck`]. A CRD that does not exist yet gets only the checks of its own versions.
/// Objects are validated page by page and not kept (only the first [`MAX_LISTED_OBJECTS`]
/// invalid ones per version are named).
pub async fn check_plan_crds_outcome(client: &kube::Client, steps: &[Step]) -> CrdCheckOutcome {
    let mut outcome = CrdCheckOutcome::default();
    for step in steps.iter().filter(|s| s.kind == "CustomResourceDefinition") {
        outcome.extend(check_step(client, step).await);
    }
    outcome
}

async fn check_step(client: &kube::Client, step: &Step) -> CrdCheckOutcome {
    let fail = |e: CrdUpgradeError| CrdCheckOutcome { errors: vec![e], warnings: Vec::new() };
    if step.group != "apiextensions.k8s.io" || step.version != "v1" {
        return fail(CrdUpgradeError::InvalidManifest {
            crd: step.name.clone(),
            message: format!(
                "apiVersion is {}; only apiextensions.k8s.io/v1 is served by current Kubernetes (v1beta1 was removed in \
                 1.22); convert the CRD in the bundle to apiextensions.k8s.io/v1",
                step.api_version()
            ),
        });
    }
    let new: CustomResourceDefinition = match serde_json::from_value(step.manifest.clone()) {
        Ok(c) => c,
        Err(e) => {
            return fail(CrdUpgradeError::InvalidManifest {
                crd: step.name.clone(),
                message: format!("{e}; fix the CRD in the bundle"),
            });
        }
    };
    let crd = crd_name(&new);
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let existing = match api.get_opt(&crd).await {
        Ok(e) => e,
        Err(e) => {
            return fail(CrdUpgradeError::Cluster {
                crd: crd.clone(),
                action: format!("reading CustomResourceDefinition {crd}"),
                message: e.to_string(),
            });
        }
    };
    let mut check = CrdUpgradeCheck::new(existing.as_ref(), &new);
    for version in check.versions_to_read() {
        let resource = ApiResource {
            group: new.spec.group.clone(),
            version: version.clone(),
            api_version: format!("{}/{version}", new.spec.group),
            kind: new.spec.names.kind.clone(),
            plural: new.spec.names.plural.clone(),
        };
        let objects: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let mut params = ListParams::default().limit(LIST_PAGE_SIZE);
        loop {
            let page = match objects.list(&params).await {
                Ok(p) => p,
                Err(e) => {
                    let mut out = check.finish();
                    out.errors.push(CrdUpgradeError::Cluster {
                        crd: crd.clone(),
                        action: format!("listing {crd} at version {version}"),
                        message: e.to_string(),
                    });
                    return out;
                }
            };
            for object in &page.items {
                match serde_json::to_value(object) {
                    Ok(value) => check.add_object(&version, &value),
                    Err(e) => {
                        let mut out = check.finish();
                        out.errors.push(CrdUpgradeError::Cluster {
                            crd: crd.clone(),
                            action: format!("reading an object of {crd} at version {version}"),
                            message: e.to_string(),
                        });
                        return out;
                    }
                }
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    check.finish()
}

#[cfg(test)]
mod tests;
