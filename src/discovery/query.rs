//! List and get of PackageManifests over the catalogs a namespace can see, their selectors, and
//! the `meta.k8s.io/v1` `Table` kubectl asks for — as packageserver answers them.
//!
//! Sources: `pkg/package-server/provider/registry.go` `List` (a namespace sees the CatalogSources
//! in it and, unless it is the global catalog namespace, those of the global catalog namespace;
//! every item gets the request's namespace; all namespaces: every catalog, items keep their
//! catalog's namespace), `Get` (the first listed item of that name, so a package of a CatalogSource
//! in the namespace wins over the global one's), `pkg/package-server/storage/reststorage.go`
//! (`metadata.name` is the only field selector; any other field is an error) and `printer.go`
//! (columns Name, Catalog = the CatalogSource's display name, Age).

use std::collections::BTreeSet;

use kube::core::{Expression, Selector, SelectorExt};
use serde_json::{Value, json};

use super::packagemanifest::{CatalogSourceInfo, PackageManifest, PackageSummary};

/// One catalog's packages, as the server holds them.
#[derive(Debug, Clone)]
pub struct CatalogPackages {
    /// The CatalogSource.
    pub source: CatalogSourceInfo,
    /// Its packages, sorted by name (shared with the loaded catalog; a snapshot copies no package).
    pub packages: std::sync::Arc<Vec<PackageSummary>>,
}

/// A list request's options.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`, parsed.
    pub labels: Option<Selector>,
    /// `metadata.name` from the `fieldSelector`.
    pub name: Option<String>,
}

/// A selector the server cannot use (HTTP 400 to the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A malformed label selector.
    #[error("labelSelector {selector:?}: {reason}")]
    Label {
        /// The selector as given.
        selector: String,
        /// What is wrong.
        reason: BadSelectorTerm,
    },
    /// A field selector on another field than `metadata.name`.
    #[error("field label not supported: {0}")]
    Field(String),
}

impl ListOptions {
    /// Parses the `labelSelector` and `fieldSelector` query parameters.
    ///
    /// # Errors
    /// [`SelectorError`] for a malformed label selector or a field other than `metadata.name`.
    pub fn parse(label_selector: Option<&str>, field_selector: Option<&str>) -> Result<ListOptions, SelectorError> {
        let labels = match label_selector.map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) => Some(
                parse_label_selector(s).map_err(|reason| SelectorError::Label { selector: s.to_string(), reason })?,
            ),
            None => None,
        };
        let mut name = None;
        for term in field_selector.unwrap_or("").split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, value) = match term.split_once("==").or_else(|| term.split_once('=')) {
                Some((f, v)) if !f.ends_with('!') => (f.trim(), v.trim()),
                _ => {
                    return Err(SelectorError::Field(term.split(['=', '!']).next().unwrap_or(term).trim().to_string()));
                }
            };
            if field != "metadata.name" {
                return Err(SelectorError::Field(field.to_string()));
            }
            name = Some(value.to_string());
        }
        Ok(ListOptions { labels, name })
    }
}

/// Parses a label selector as `k8s.io/apimachinery/pkg/labels.Parse` does: comma-separated
/// `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`.
///
/// # Errors
/// [`BadSelectorTerm`], naming the first term that is not one of these.
pub fn parse_label_selector(s: &str) -> Result<Selector, BadSelectorTerm> {
    let mut exprs = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        // A term ends at a comma outside parentheses.
        let mut depth = 0;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let term = rest[..end].trim();
        rest = rest.get(end + 1..).unwrap_or("").trim();
        exprs.push(parse_term(term)?);
    }
    Ok(exprs.into_iter().collect())
}

/// A term of a label selector that is not one of the forms [`parse_label_selector`] takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{term:?} is not a selector term (key=value, key!=value, key in (a,b), key notin (a,b), key, !key)")]
pub struct BadSelectorTerm {
    /// The term as written, trimmed.
    pub term: String,
}

fn parse_term(term: &str) -> Result<Expression, BadSelectorTerm> {
    let bad = || BadSelectorTerm { term: term.to_string() };
    let key_ok = |k: &str| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    if let Some(k) = term.strip_prefix('!') {
        let k = k.trim();
        return if key_ok(k) { Ok(Expression::DoesNotExist(k.into())) } else { Err(bad()) };
    }
    if let Some((k, v)) = term.split_once("!=") {
        return if key_ok(k.trim()) { Ok(Expression::NotEqual(k.trim().into(), v.trim().into())) } else { Err(bad()) };
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return if key_ok(k.trim()) { Ok(Expression::Equal(k.trim().into(), v.trim().into())) } else { Err(bad()) };
    }
    let mut words = term.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or("").trim();
    let tail = words.next().unwrap_or("").trim();
    if tail.is_empty() {
        return if key_ok(key) { Ok(Expression::Exists(key.into())) } else { Err(bad()) };
    }
    let (op, set) = tail.split_once('(').ok_or_else(bad)?;
    let set = set.strip_suffix(')').ok_or_else(bad)?;
    let values: BTreeSet<String> = set.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
    if !key_ok(key) {
        return Err(bad());
    }
    match op.trim() {
        "in" => Ok(Expression::In(key.into(), values)),
        "notin" => Ok(Expression::NotIn(key.into(), values)),
        _ => Err(bad()),
    }
}

/// The PackageManifests `namespace` lists (`""` = all namespaces), in catalog order then package
/// name, filtered by `opts`. `global_namespace` is the global catalog namespace.
pub fn list(
    catalogs: &[CatalogPackages],
    namespace: &str,
    global_namespace: &str,
    opts: &ListOptions,
) -> Vec<PackageManifest> {
    let visible = |c: &&CatalogPackages| {
        namespace.is_empty()
            || c.source.namespace == namespace
            || (namespace != global_namespace && c.source.namespace == global_namespace)
    };
    // packageserver lists the namespace's own catalogs first, then the global ones.
    let own = catalogs.iter().filter(|c| !namespace.is_empty() && c.source.namespace == namespace);
    let rest = catalogs.iter().filter(|c| namespace.is_empty() || c.source.namespace != namespace);
    let mut out = Vec::new();
    for c in own.chain(rest).filter(visible) {
        for p in c.packages.iter() {
            if opts.name.as_ref().is_some_and(|n| *n != p.name) {
                continue;
            }
            let m = p.manifest(&c.source, namespace);
            if opts.labels.as_ref().is_some_and(|s| !s.matches(&m.metadata.labels)) {
                continue;
            }
            out.push(m);
        }
    }
    out
}

/// The PackageManifest `get` returns for `name` in `namespace`, if any.
pub fn get(
    catalogs: &[CatalogPackages],
    namespace: &str,
    global_namespace: &str,
    name: &str,
) -> Option<PackageManifest> {
    list(catalogs, namespace, global_namespace, &ListOptions::default()).into_iter().find(|m| m.metadata.name == name)
}

/// A `PackageManifestList` object.
pub fn list_object(items: &[PackageManifest], resource_version: &str) -> Value {
    json!({
        "kind": "PackageManifestList",
        "apiVersion": super::packagemanifest::API_VERSION,
        "metadata": {"resourceVersion": resource_version},
        "items": items,
    })
}

/// What a Table row carries as its `object` (`includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (kubectl's default).
    Metadata,
    /// The whole PackageManifest.
    Object,
}

impl IncludeObject {
    /// From the query parameter (`None`, `Metadata`, `Object`; default `Metadata`).
    pub fn parse(v: Option<&str>) -> IncludeObject {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// The `meta.k8s.io/v1` Table of PackageManifests with packageserver's columns: Name, Catalog
/// (the CatalogSource's display name), Age (relative to `now`, as Go's `duration.HumanDuration`).
pub fn table(
    items: &[PackageManifest],
    include: IncludeObject,
    now: std::time::SystemTime,
    resource_version: &str,
) -> Value {
    let rows: Vec<Value> = items
        .iter()
        .map(|m| {
            let age = m.metadata.creation_timestamp.as_deref().and_then(|t| t.parse::<jiff::Timestamp>().ok()).map_or("<unknown>".to_string(), |t| {
                let created = std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.as_second().max(0) as u64);
                human_duration(now.duration_since(created).unwrap_or_default())
            });
            let mut row = json!({"cells": [m.metadata.name, m.status.catalog_source_display_name, age]});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": m.metadata});
                }
                IncludeObject::Object => row["object"] = serde_json::to_value(m).unwrap_or_default(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Catalog", "type": "string", "format": "", "description": "The source catalog for this package", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ],
        "rows": rows,
    })
}

/// Go's `k8s.io/apimachinery/pkg/util/duration.HumanDuration`: `45s`, `3m12s`, `5h4m`, `2d3h`, `400d`, `3y20d`.
pub fn human_duration(d: std::time::Duration) -> String {
    let s = d.as_secs() as i64;
    if s < -1 {
        return "<invalid>".into();
    } else if s < 0 {
        return "0s".into();
    } else if s < 60 * 2 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let sec = s % 60;
        return if sec == 0 { format!("{m}m") } else { format!("{m}m{sec}s") };
    } else if m < 60 * 3 {
        return format!("{m}m");
    }
    let h = m / 60;
    if h < 8 {
        let min = m % 60;
        return if min == 0 { format!("{h}h") } else { format!("{h}h{min}m") };
    } else if h < 48 {
        return format!("{h}h");
    } else if h < 24 * 8 {
        let hour = h % 24;
        return if hour == 0 { format!("{}d", h / 24) } else { format!("{}d{hour}h", h / 24) };
    } else if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    } else if h < 24 * 365 * 8 {
        let dy = (h / 24) % 365;
        return if dy == 0 { format!("{}y", h / 24 / 365) } else { format!("{}y{dy}d", h / 24 / 365) };
    }
    format!("{}y", h / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::packagemanifest::{PackageManifestStatus, PackageSummary};
    use std::collections::BTreeMap;
    use std::time::{Duration, UNIX_EPOCH};

    fn pkg(name: &str, provider: &str) -> PackageSummary {
        let mut status = PackageManifestStatus { package_name: name.into(), ..Default::default() };
        status.provider.name = provider.into();
        PackageSummary { name: name.into(), status, csv_labels: BTreeMap::new(), keywords: vec![] }
    }

    fn catalogs() -> Vec<CatalogPackages> {
        let src = |name: &str, ns: &str| CatalogSourceInfo {
            name: name.into(),
            namespace: ns.into(),
            display_name: format!("{name} display"),
            creation_timestamp: Some("2026-12-01T10:00:00Z".into()),
            ..Default::default()
        };
        vec![
            CatalogPackages {
                source: src("global", "olm"),
                packages: vec![pkg("etcd", "CoreOS"), pkg("nginx", "Acme")].into(),
            },
            CatalogPackages {
                source: src("team", "team-a"),
                packages: vec![pkg("etcd", "Team A"), pkg("private", "Team A")].into(),
            },
        ]
    }

    fn names(v: &[PackageManifest]) -> Vec<String> {
        v.iter().map(|m| format!("{}/{}@{}", m.metadata.namespace, m.metadata.name, m.status.catalog_source)).collect()
    }

    #[test]
    fn namespaces_see_their_own_and_the_global_catalogs() {
        let c = catalogs();
        let none = ListOptions::default();
        assert_eq!(
            names(&list(&c, "team-a", "olm", &none)),
            ["team-a/etcd@team", "team-a/private@team", "team-a/etcd@global", "team-a/nginx@global"]
        );
        assert_eq!(names(&list(&c, "team-b", "olm", &none)), ["team-b/etcd@global", "team-b/nginx@global"]);
        assert_eq!(names(&list(&c, "olm", "olm", &none)), ["olm/etcd@global", "olm/nginx@global"]);
        assert_eq!(
            names(&list(&c, "", "olm", &none)),
            ["olm/etcd@global", "olm/nginx@global", "team-a/etcd@team", "team-a/private@team"]
        );
        assert_eq!(
            get(&c, "team-a", "olm", "etcd").unwrap().status.catalog_source,
            "team",
            "the namespace's own catalog first"
        );
        assert!(get(&c, "team-b", "olm", "private").is_none());
    }

    #[test]
    fn selectors() {
        let c = catalogs();
        let o = ListOptions::parse(Some("catalog=global"), None).unwrap();
        assert_eq!(names(&list(&c, "team-a", "olm", &o)), ["team-a/etcd@global", "team-a/nginx@global"]);
        let o = ListOptions::parse(Some("catalog-namespace in (team-a), provider!=Acme"), Some("metadata.name=etcd"))
            .unwrap();
        assert_eq!(names(&list(&c, "team-a", "olm", &o)), ["team-a/etcd@team"]);
        let o = ListOptions::parse(Some("!nope,catalog"), None).unwrap();
        assert_eq!(list(&c, "team-a", "olm", &o).len(), 4);
        let o = ListOptions::parse(Some("provider notin (Acme,CoreOS)"), None).unwrap();
        assert_eq!(names(&list(&c, "team-a", "olm", &o)), ["team-a/etcd@team", "team-a/private@team"]);
        assert_eq!(
            ListOptions::parse(None, Some("status.catalogSource=x")).unwrap_err(),
            SelectorError::Field("status.catalogSource".into())
        );
        assert!(matches!(ListOptions::parse(Some("a in b"), None), Err(SelectorError::Label { .. })));
        assert!(matches!(ListOptions::parse(Some("=x"), None), Err(SelectorError::Label { .. })));
    }

    #[test]
    fn table_has_packageservers_columns() {
        let c = catalogs();
        let items = list(&c, "team-b", "olm", &ListOptions::default());
        let now = UNIX_EPOCH + Duration::from_secs(1_796_119_200 + 3 * 3600 + 5 * 60); // 2026-12-01T13:05:00Z
        let t = table(&items, IncludeObject::Metadata, now, "7");
        let cols: Vec<&str> =
            t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(cols, ["Name", "Catalog", "Age"]);
        assert_eq!(t["rows"][0]["cells"], json!(["etcd", "global display", "3h5m"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "etcd");
        assert!(table(&items, IncludeObject::None, now, "7")["rows"][0].get("object").is_none());
    }

    #[test]
    fn human_durations_as_go() {
        let h = |s| human_duration(Duration::from_secs(s));
        assert_eq!(h(45), "45s");
        assert_eq!(h(119), "119s");
        assert_eq!(h(192), "3m12s");
        assert_eq!(h(600), "10m");
        assert_eq!(h(5 * 3600 + 4 * 60), "5h4m");
        assert_eq!(h(30 * 3600), "30h");
        assert_eq!(h(51 * 3600), "2d3h");
        assert_eq!(h(400 * 86400), "400d");
        assert_eq!(h((3 * 365 + 20) * 86400), "3y20d");
    }
}
