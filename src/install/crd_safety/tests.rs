use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::*;

/// A namespaced CRD `widgets.example.com` with the given `(name, served, storage, schema)`
/// versions, `status.storedVersions` and conversion strategy.
fn crd(versions: &[(&str, bool, bool, Value)], stored: &[&str], strategy: Option<&str>) -> CustomResourceDefinition {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(name, served, storage, schema)| {
            json!({"name": name, "served": served, "storage": storage, "schema": {"openAPIV3Schema": schema}})
        })
        .collect();
    let mut v = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": versions},
        "status": {"storedVersions": stored}
    });
    if let Some(s) = strategy {
        v["spec"]["conversion"] = json!({"strategy": s});
    }
    serde_json::from_value(v).expect("test CRD")
}

/// A root schema whose `spec` has the given properties and required list.
fn schema(spec_props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "required": required, "properties": spec_props}}})
}

fn widget(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"namespace": ns, "name": name}, "spec": spec})
}

fn base_props() -> Value {
    json!({"size": {"type": "integer"}, "color": {"type": "string"}})
}

fn one_version(schema: Value, stored: &[&str]) -> CustomResourceDefinition {
    crd(&[("v1", true, true, schema)], stored, None)
}

fn errors(r: Result<(), Vec<CrdUpgradeError>>) -> Vec<CrdUpgradeError> {
    r.expect_err("the check must refuse this upgrade")
}

#[test]
fn removing_a_stored_version_names_crd_version_and_remediation() {
    // storedVersions [v1alpha1, v2alpha1], the new CRD keeps only v2alpha1.
    let s = schema(base_props(), &[]);
    let old = crd(
        &[("v1alpha1", true, false, s.clone()), ("v2alpha1", true, true, s.clone())],
        &["v1alpha1", "v2alpha1"],
        None,
    );
    let new = crd(&[("v2alpha1", true, true, s)], &[], None);
    let errs = errors(check_crd_upgrade(Some(&old), &new, &[]));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(matches!(&errs[0], CrdUpgradeError::StoredVersionRemoved { version, .. } if version == "v1alpha1"));
    let msg = errs[0].to_string();
    for needle in [
        "CRD widgets.example.com",
        "version v1alpha1 would be removed but is still listed in status.storedVersions",
        "rewrite stored objects",
        "drop v1alpha1 from storedVersions",
        r#"\"storedVersions\":[\"v2alpha1\"]"#,
    ] {
        assert!(msg.contains(needle), "message lacks {needle:?}: {msg}");
    }
    assert!(!msg.contains("version v2alpha1 would be removed"), "{msg}");
}

#[test]
fn removing_the_current_storage_version_says_to_move_storage_first() {
    let s = schema(base_props(), &[]);
    let old = crd(&[("v1alpha1", true, true, s.clone())], &["v1alpha1"], None);
    let new = crd(&[("v1", true, true, s)], &[], None);
    let errs = errors(check_crd_upgrade(Some(&old), &new, &[]));
    assert_eq!(errs.len(), 1, "{errs:?}");
    let msg = errs[0].to_string();
    assert!(msg.contains("version v1alpha1 would be removed"), "{msg}");
    assert!(msg.contains("v1alpha1 is still the storage version"), "{msg}");
    assert!(msg.contains("keeps v1alpha1 but stores another version (one of [v1])"), "{msg}");
}

#[test]
fn every_removed_stored_version_is_reported() {
    let s = schema(base_props(), &[]);
    let old = crd(
        &[("v1alpha1", false, false, s.clone()), ("v1beta1", true, false, s.clone()), ("v1", true, true, s.clone())],
        &["v1alpha1", "v1beta1", "v1"],
        None,
    );
    let new = crd(&[("v1", true, true, s)], &[], None);
    let errs = errors(check_crd_upgrade(Some(&old), &new, &[]));
    let removed: Vec<&str> = errs
        .iter()
        .filter_map(|e| match e {
            CrdUpgradeError::StoredVersionRemoved { version, .. } => Some(version.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(removed, ["v1alpha1", "v1beta1"]);
}

#[test]
fn missing_required_field_names_object_and_field_path() {
    let old = one_version(schema(base_props(), &[]), &["v1"]);
    let new = one_version(schema(base_props(), &["color"]), &["v1"]);
    let objects = vec![
        ("v1".to_string(), widget("apps", "has-color", json!({"size": 1, "color": "red"}))),
        ("v1".to_string(), widget("apps", "no-color", json!({"size": 1}))),
    ];
    let errs = errors(check_crd_upgrade(Some(&old), &new, &objects));
    assert_eq!(errs.len(), 1, "{errs:?}");
    let CrdUpgradeError::InvalidObjects { objects: bad, total, version, .. } = &errs[0] else {
        panic!("expected InvalidObjects, got {errs:?}")
    };
    assert_eq!((*total, version.as_str()), (1, "v1"));
    assert_eq!(bad[0].key(), "apps/no-color");
    assert_eq!(bad[0].errors, vec![FieldError { path: "spec.color".into(), reason: "Required value".into() }]);
    let msg = errs[0].to_string();
    assert!(msg.contains("CRD widgets.example.com"), "{msg}");
    assert!(msg.contains("1 existing Widget object read at version v1 does not validate"), "{msg}");
    assert!(msg.contains("apps/no-color (spec.color: Required value)"), "{msg}");
    assert!(!msg.contains("has-color"), "{msg}");
}

#[test]
fn type_mismatch_is_reported_with_the_value() {
    let old = one_version(schema(json!({"size": {"x-kubernetes-int-or-string": true}}), &[]), &["v1"]);
    let new = one_version(schema(json!({"size": {"type": "integer"}}), &[]), &["v1"]);
    let objects = vec![("v1".to_string(), widget("apps", "w", json!({"size": "three"})))];
    let errs = errors(check_crd_upgrade(Some(&old), &new, &objects));
    let msg = errs[0].to_string();
    assert!(msg.contains("apps/w (spec.size: "), "{msg}");
    assert!(msg.contains("\"three\"") && msg.contains("integer"), "{msg}");
}

#[test]
fn enum_restriction_is_enforced() {
    let old = one_version(schema(base_props(), &[]), &["v1"]);
    let new = one_version(schema(json!({"color": {"type": "string", "enum": ["red", "blue"]}}), &[]), &["v1"]);
    let ok = ("v1".to_string(), widget("apps", "red", json!({"color": "red"})));
    let bad = ("v1".to_string(), widget("apps", "green", json!({"color": "green"})));
    let errs = errors(check_crd_upgrade(Some(&old), &new, &[ok.clone(), bad]));
    let msg = errs[0].to_string();
    assert!(msg.contains("apps/green (spec.color: "), "{msg}");
    assert!(msg.contains("\"green\""), "{msg}");
    assert!(check_crd_upgrade(Some(&old), &new, &[ok]).is_ok());
}

#[test]
fn bounds_pattern_and_lengths_are_enforced() {
    let old = one_version(schema(json!({}), &[]), &["v1"]);
    let new = one_version(
        schema(
            json!({
                "replicas": {"type": "integer", "minimum": 1, "maximum": 9},
                "version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$", "minLength": 3, "maxLength": 5},
                "nodes": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}}
            }),
            &[],
        ),
        &["v1"],
    );
    let cases = [
        (json!({"replicas": 0}), "spec.replicas"),
        (json!({"replicas": 10}), "spec.replicas"),
        (json!({"version": "x.y"}), "spec.version"),
        (json!({"version": "1.2345"}), "spec.version"),
        (json!({"nodes": []}), "spec.nodes"),
        (json!({"nodes": ["a", "b", "c"]}), "spec.nodes"),
        (json!({"nodes": ["a", 7]}), "spec.nodes[1]"),
    ];
    for (spec, path) in cases {
        let errs = errors(check_crd_upgrade(Some(&old), &new, &[("v1".into(), widget("ns", "w", spec.clone()))]));
        let CrdUpgradeError::InvalidObjects { objects, .. } = &errs[0] else { panic!("{errs:?}") };
        assert_eq!(objects[0].errors[0].path, path, "spec {spec}: {errs:?}");
    }
    let fine = json!({"replicas": 3, "version": "1.22", "nodes": ["a"]});
    assert!(check_crd_upgrade(Some(&old), &new, &[("v1".into(), widget("ns", "w", fine))]).is_ok());
}

#[test]
fn nullable_preserve_unknown_and_int_or_string_follow_kubernetes() {
    let props = json!({
        "owner": {"type": "string", "nullable": true},
        "strict": {"type": "string"},
        "port": {"x-kubernetes-int-or-string": true},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    });
    let old = one_version(schema(json!({}), &[]), &["v1"]);
    let new = one_version(schema(props, &[]), &["v1"]);
    let good =
        widget("ns", "good", json!({"owner": null, "port": "http", "extra": {"any": {"thing": [1]}}, "other": 1}));
    let good2 = widget("ns", "good2", json!({"port": 8080}));
    assert!(check_crd_upgrade(Some(&old), &new, &[("v1".into(), good), ("v1".into(), good2)]).is_ok());
    let bad = widget("ns", "bad", json!({"strict": null, "port": true}));
    let errs = errors(check_crd_upgrade(Some(&old), &new, &[("v1".into(), bad)]));
    let CrdUpgradeError::InvalidObjects { objects, .. } = &errs[0] else { panic!("{errs:?}") };
    let paths: Vec<&str> = objects[0].errors.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&"spec.strict") && paths.contains(&"spec.port"), "{paths:?}");
}

#[test]
fn compatible_upgrade_and_new_optional_field_pass() {
    let old = one_version(schema(base_props(), &["size"]), &["v1"]);
    let mut props = base_props();
    props["shape"] = json!({"type": "string", "enum": ["round", "square"]});
    let new = one_version(schema(props, &["size"]), &["v1"]);
    let objects: Vec<(String, Value)> =
        (0..20).map(|i| ("v1".to_string(), widget("apps", &format!("w{i}"), json!({"size": i})))).collect();
    assert_eq!(check_crd_upgrade(Some(&old), &new, &objects), Ok(()));
    // A CRD that is not on the cluster yet has no objects to check.
    assert_eq!(check_crd_upgrade(None, &new, &[]), Ok(()));
}

#[test]
fn many_invalid_objects_list_the_first_five_and_count_all() {
    let old = one_version(schema(base_props(), &[]), &["v1"]);
    let new = one_version(schema(base_props(), &["color"]), &["v1"]);
    let objects: Vec<(String, Value)> =
        (0..12).map(|i| ("v1".to_string(), widget("apps", &format!("w{i:02}"), json!({"size": i})))).collect();
    let errs = errors(check_crd_upgrade(Some(&old), &new, &objects));
    let CrdUpgradeError::InvalidObjects { objects: bad, total, .. } = &errs[0] else { panic!("{errs:?}") };
    assert_eq!(*total, 12);
    assert_eq!(bad.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["w00", "w01", "w02", "w03", "w04"]);
    let msg = errs[0].to_string();
    assert!(msg.contains("12 existing Widget objects read at version v1 do not validate"), "{msg}");
    assert!(msg.contains("; and 7 more."), "{msg}");
    assert!(!msg.contains("w05"), "{msg}");
}

#[test]
fn only_versions_served_by_both_crds_are_validated() {
    let loose = schema(base_props(), &[]);
    let strict = schema(base_props(), &["color"]);
    // v1beta1 is served today but not by the new CRD: its objects are not validated (OLM's rule);
    // v1 is served by both and is validated with the new v1 schema.
    let old = crd(&[("v1beta1", true, false, loose.clone()), ("v1", true, true, loose.clone())], &["v1"], None);
    let new = crd(&[("v1beta1", false, false, strict.clone()), ("v1", true, true, loose)], &[], None);
    let object = widget("apps", "w", json!({"size": 1}));
    let objects = vec![("v1beta1".to_string(), object.clone()), ("v1".to_string(), object)];
    assert_eq!(check_crd_upgrade(Some(&old), &new, &objects), Ok(()));
    assert_eq!(CrdUpgradeCheck::new(Some(&old), &new).versions_to_read(), ["v1"]);
}

#[test]
fn webhook_conversion_turns_validation_failures_into_warnings() {
    let old = one_version(schema(base_props(), &[]), &["v1"]);
    let s = schema(base_props(), &["color"]);
    let new = crd(&[("v1", true, true, s)], &[], Some("Webhook"));
    let mut check = CrdUpgradeCheck::new(Some(&old), &new);
    check.add_object("v1", &widget("apps", "w", json!({"size": 1})));
    let outcome = check.finish();
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(outcome.warnings.len(), 1);
    assert!(outcome.warnings[0].contains("apps/w (spec.color: Required value)"), "{}", outcome.warnings[0]);
}

#[test]
fn storage_version_count_must_be_exactly_one() {
    let s = schema(base_props(), &[]);
    let none = crd(&[("v1", true, false, s.clone()), ("v2", true, false, s.clone())], &[], None);
    let errs = errors(check_crd_upgrade(None, &none, &[]));
    assert_eq!(errs.len(), 1, "{errs:?}");
    let msg = errs[0].to_string();
    assert!(
        msg.contains("CRD widgets.example.com: spec.versions must have exactly one version marked as storage version"),
        "{msg}"
    );
    assert!(msg.contains("none of [v1, v2]"), "{msg}");
    let two = crd(&[("v1", true, true, s.clone()), ("v2", true, true, s)], &[], None);
    let msg = errors(check_crd_upgrade(None, &two, &[]))[0].to_string();
    assert!(msg.contains("[v1, v2] all have storage: true"), "{msg}");
}

#[test]
fn duplicate_versions_and_served_versions_without_schema_are_refused() {
    let s = schema(base_props(), &[]);
    let dup = crd(&[("v1", true, true, s.clone()), ("v1", true, false, s)], &[], None);
    let msg = errors(check_crd_upgrade(None, &dup, &[]))[0].to_string();
    assert!(msg.contains("lists version v1 more than once"), "{msg}");

    let mut no_schema = one_version(json!({"type": "object"}), &[]);
    no_schema.spec.versions[0].schema = None;
    let msg = errors(check_crd_upgrade(None, &no_schema, &[]))[0].to_string();
    assert!(msg.contains("served version v1 without schema.openAPIV3Schema"), "{msg}");
}

#[test]
fn none_conversion_warns_about_fields_the_storage_version_lacks() {
    let mut wide = base_props();
    wide["shape"] = json!({"type": "string"});
    let new = crd(&[("v1", true, true, schema(base_props(), &[])), ("v2", true, false, schema(wide, &[]))], &[], None);
    let outcome = CrdUpgradeCheck::new(None, &new).finish();
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(outcome.warnings.len(), 1, "{:?}", outcome.warnings);
    assert!(
        outcome.warnings[0].contains("served version v2 has field spec.shape that storage version v1 lacks"),
        "{}",
        outcome.warnings[0]
    );

    // Same fields, or a storage schema that keeps unknown fields: no warning.
    let same = crd(
        &[("v1", true, true, schema(base_props(), &[])), ("v2", true, false, schema(base_props(), &[]))],
        &[],
        None,
    );
    assert!(CrdUpgradeCheck::new(None, &same).finish().warnings.is_empty());
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let open_crd = crd(&[("v1", true, true, open), ("v2", true, false, schema(base_props(), &[]))], &[], None);
    assert!(CrdUpgradeCheck::new(None, &open_crd).finish().warnings.is_empty());
}

#[test]
fn all_problems_of_one_crd_are_reported_together() {
    let s = schema(base_props(), &[]);
    let old = crd(&[("v1alpha1", true, false, s.clone()), ("v1", true, true, s)], &["v1alpha1", "v1"], None);
    let new = crd(&[("v1", true, true, schema(base_props(), &["color"]))], &[], None);
    let objects = vec![("v1".to_string(), widget("apps", "w", json!({})))];
    let errs = errors(check_crd_upgrade(Some(&old), &new, &objects));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs.iter().any(|e| matches!(e, CrdUpgradeError::StoredVersionRemoved { .. })));
    assert!(errs.iter().any(|e| matches!(e, CrdUpgradeError::InvalidObjects { .. })));
}

#[test]
fn translation_keeps_validation_keywords_and_drops_kubernetes_extensions() {
    let openapi = json!({
        "type": "object", "description": "d", "x-kubernetes-validations": [{"rule": "self.a > 0"}],
        "properties": {"a": {"type": "integer", "nullable": true, "enum": [1, 2], "x-kubernetes-list-type": "atomic"}},
        "additionalProperties": {"type": "string"}
    });
    assert_eq!(
        to_json_schema(&openapi),
        json!({"type": "object",
            "properties": {"a": {"type": ["integer", "null"], "enum": [1, 2, null]}},
            "additionalProperties": {"type": "string"}})
    );
}

#[test]
fn patterns_are_go_syntax() {
    // Go RE2 accepts a mid-pattern (?i) and POSIX classes; ECMA-262 engines do not.
    let props = json!({
        "month": {"type": "string", "pattern": "^((?i)january|february)$"},
        "code": {"type": "string", "pattern": "^[[:alpha:]]+$"}
    });
    let old = one_version(schema(json!({}), &[]), &["v1"]);
    let new = one_version(schema(props, &[]), &["v1"]);
    let good = widget("ns", "good", json!({"month": "JANUARY", "code": "abc"}));
    assert_eq!(check_crd_upgrade(Some(&old), &new, &[("v1".into(), good)]), Ok(()));
    let bad = widget("ns", "bad", json!({"month": "march", "code": "ab1"}));
    let errs = errors(check_crd_upgrade(Some(&old), &new, &[("v1".into(), bad)]));
    let CrdUpgradeError::InvalidObjects { objects, .. } = &errs[0] else { panic!("{errs:?}") };
    let mut paths: Vec<&str> = objects[0].errors.iter().map(|e| e.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["spec.code", "spec.month"]);
    assert!(objects[0].errors.iter().all(|e| e.reason.contains("does not match")), "{:?}", objects[0].errors);
}

#[test]
fn a_pattern_capstan_cannot_compile_is_a_warning_not_a_refusal() {
    // \Q…\E quoting is Go syntax the regex crate lacks.
    let props = json!({"id": {"type": "string", "pattern": "^\\Qa.b\\E$"}, "size": {"type": "integer"}});
    let old = one_version(schema(json!({}), &[]), &["v1"]);
    let new = one_version(schema(props, &[]), &["v1"]);
    let mut check = CrdUpgradeCheck::new(Some(&old), &new);
    check.add_object("v1", &widget("ns", "w", json!({"id": "anything", "size": "x"})));
    let outcome = check.finish();
    assert_eq!(outcome.warnings.len(), 1, "{:?}", outcome.warnings);
    assert!(outcome.warnings[0].contains("field spec.id (version v1)"), "{}", outcome.warnings[0]);
    // The rest of the schema is still enforced.
    assert_eq!(outcome.errors.len(), 1, "{:?}", outcome.errors);
    assert!(outcome.errors[0].to_string().contains("ns/w (spec.size: "), "{}", outcome.errors[0]);
}

#[test]
fn describe_all_numbers_several_problems() {
    let s = schema(base_props(), &[]);
    let old = crd(&[("v1alpha1", true, false, s.clone()), ("v1", true, true, s)], &["v1alpha1", "v1"], None);
    let new = crd(&[("v1", true, true, schema(base_props(), &["color"]))], &[], None);
    let errs = errors(check_crd_upgrade(Some(&old), &new, &[("v1".into(), widget("apps", "w", json!({})))]));
    let text = describe_all(&errs);
    assert!(text.starts_with("2 CRD upgrade problems: (1) CRD widgets.example.com: version v1alpha1"), "{text}");
    assert!(text.contains(" (2) CRD widgets.example.com: 1 existing Widget object"), "{text}");
    assert_eq!(describe_all(&errs[..1]), errs[0].to_string());
}

#[test]
fn cluster_scoped_objects_are_named_without_namespace() {
    let old = one_version(schema(base_props(), &[]), &["v1"]);
    let new = one_version(schema(base_props(), &["color"]), &["v1"]);
    let object = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "global"}, "spec": {}});
    let errs = errors(check_crd_upgrade(Some(&old), &new, &[("v1".into(), object)]));
    let msg = errs[0].to_string();
    assert!(msg.contains("): global (spec.color: Required value)"), "{msg}");
}

/// The controller runs reconcilers on a multi-threaded runtime: the cluster check's future must be
/// `Send` (a compile-time check; the function only has to type-check).
#[allow(dead_code)]
fn check_plan_crds_future_is_send<'a>(client: &'a kube::Client, steps: &'a [crate::install::Step]) -> impl Send + 'a {
    check_plan_crds(client, steps)
}
