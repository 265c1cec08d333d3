//! Field names matched as Go's `encoding/json` matches them when it decodes into a struct, which
//! is how operator-registry (`opm`) and OLM read a ClusterServiceVersion
//! (`operator-framework/api` `pkg/operators/v1alpha1/clusterserviceversion_types.go`, decoded
//! with `json.Unmarshal` after `sigs.k8s.io/yaml` turned the YAML into JSON).
//!
//! Go's rule (`encoding/json/decode.go` `object`, `encode.go` `typeFields`): for each key of a
//! JSON object, in the order written, the struct field whose JSON name equals the key is used;
//! failing that, the first field (in declaration order) whose name equals the key under Unicode
//! simple case folding (`bytes.EqualFold`); failing that, the key is ignored. When several keys
//! reach one field, the last one written wins. So `Kind:` fills `kind`, `MinKubeVersion:` fills
//! `minKubeVersion` and `ApiVersion:` fills `apiVersion`.
//!
//! [`canonical_csv`] applies that rule to a CSV kept as JSON: every key that reaches a field
//! of the Go type under another spelling is renamed to the field's own name (keys that reach no
//! field are kept, untouched), and each rename is reported so that validation can warn about
//! it. The shapes of the Go types come from two places: the OLM types are described here, field
//! by field, after the upstream file above; the Kubernetes types inside them (`ObjectMeta`,
//! `apps/v1` `DeploymentSpec`, `rbac/v1` `PolicyRule`, `LabelSelector`, admission
//! `RuleWithOperations`) come from k8s-openapi's JSON schemas of those types.
//!
//! One difference, for files nobody writes: when two keys reach one field whose value is an
//! object, Go decodes the second into the first (merging them); here the second replaces it.

use std::sync::LazyLock;

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// A key written in another spelling than the Go field it fills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonCanonicalKey {
    /// Dotted path of the object holding the key, e.g. `spec`, `spec.customresourcedefinitions.owned[0].resources[4]`; "" at the top level.
    pub path: String,
    /// The key as written, e.g. `Kind`.
    pub written: String,
    /// The field's name, e.g. `kind`.
    pub canonical: String,
}

impl NonCanonicalKey {
    /// The dotted path of the key itself (`spec.MinKubeVersion`).
    pub fn field(&self) -> String {
        join(&self.path, &self.written)
    }

    /// The dotted path of the field the key fills (`spec.minKubeVersion`).
    pub fn canonical_field(&self) -> String {
        join(&self.path, &self.canonical)
    }
}

/// The CSV with every key spelled as its Go field (see the module documentation), and the keys
/// that were spelled otherwise, in document order. A value with no such key comes back equal.
pub fn canonical_csv(csv: &Value) -> (Value, Vec<NonCanonicalKey>) {
    let mut out = Vec::new();
    let v = canonical(csv, &CSV_SCHEMA.root, "", &mut out);
    (v, out)
}

/// Whether `key` matches the ASCII field name `field` under Go's `bytes.EqualFold` (Unicode
/// simple folding): ASCII letters match either case, and the two non-ASCII runes whose fold
/// orbit holds an ASCII letter match it too (U+212A KELVIN SIGN ~ `k`, U+017F LONG S ~ `s`).
pub fn go_fold_eq(key: &str, field: &str) -> bool {
    let mut k = key.chars();
    for f in field.chars() {
        let Some(c) = k.next() else { return false };
        let c = match c {
            '\u{212A}' => 'k',
            '\u{17F}' => 's',
            c => c.to_ascii_lowercase(),
        };
        if c != f.to_ascii_lowercase() {
            return false;
        }
    }
    k.next().is_none()
}

struct CsvSchema {
    root: Value,
    defs: Map<String, Value>,
}

static CSV_SCHEMA: LazyLock<CsvSchema> = LazyLock::new(csv_schema);

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

/// The schema node `s` stands for: `$ref` resolved; of an `anyOf` / `oneOf` / `allOf` (an
/// optional type), the first alternative that describes an object or a list.
fn resolve<'a>(mut s: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    for _ in 0..16 {
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            match r.rsplit('/').next().and_then(|name| defs.get(name)) {
                Some(d) => {
                    s = d;
                    continue;
                }
                None => return s,
            }
        }
        let alt = ["anyOf", "oneOf", "allOf"].iter().find_map(|k| s.get(*k).and_then(Value::as_array));
        if let Some(alts) = alt
            && let Some(a) = alts.iter().find(|a| {
                let a = resolve_ref_only(a, defs);
                a.get("properties").is_some() || a.get("items").is_some() || a.get("additionalProperties").is_some()
            })
        {
            s = a;
            continue;
        }
        return s;
    }
    s
}

fn resolve_ref_only<'a>(s: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str).and_then(|r| r.rsplit('/').next()).and_then(|n| defs.get(n)) {
        Some(d) => d,
        None => s,
    }
}

fn canonical(v: &Value, schema: &Value, path: &str, out: &mut Vec<NonCanonicalKey>) -> Value {
    let defs = &CSV_SCHEMA.defs;
    let schema = resolve(schema, defs);
    match v {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let mut o = Map::new();
                for (k, x) in m {
                    let field = if props.contains_key(k) {
                        Some(k.as_str())
                    } else {
                        props.keys().map(String::as_str).find(|f| go_fold_eq(k, f))
                    };
                    match field {
                        Some(f) => {
                            if f != k {
                                out.push(NonCanonicalKey {
                                    path: path.to_string(),
                                    written: k.clone(),
                                    canonical: f.to_string(),
                                });
                            }
                            let x = canonical(x, &props[f], &join(path, f), out);
                            o.insert(f.to_string(), x);
                        }
                        None => {
                            o.insert(k.clone(), x.clone());
                        }
                    }
                }
                Value::Object(o)
            } else if let Some(each) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                Value::Object(m.iter().map(|(k, x)| (k.clone(), canonical(x, each, &join(path, k), out))).collect())
            } else {
                v.clone()
            }
        }
        Value::Array(items) => match schema.get("items") {
            Some(each) => Value::Array(
                items.iter().enumerate().map(|(i, x)| canonical(x, each, &format!("{path}[{i}]"), out)).collect(),
            ),
            None => v.clone(),
        },
        _ => v.clone(),
    }
}

fn object(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

fn list(item: Value) -> Value {
    json!({"type": "array", "items": item})
}

/// The ClusterServiceVersion's shape: OLM's types (upstream `clusterserviceversion_types.go`,
/// fields in declaration order) around k8s-openapi's schemas of the Kubernetes types.
fn csv_schema() -> CsvSchema {
    use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use k8s_openapi::api::rbac::v1::PolicyRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    let mut generator = SchemaGenerator::new(SchemaSettings::draft2020_12());
    let sub = |s: schemars::Schema| s.to_value();
    let object_meta = sub(generator.subschema_for::<ObjectMeta>());
    let deployment_spec = sub(generator.subschema_for::<DeploymentSpec>());
    let policy_rule = sub(generator.subschema_for::<PolicyRule>());
    let label_selector = sub(generator.subschema_for::<LabelSelector>());
    let webhook_rule = sub(generator.subschema_for::<RuleWithOperations>());
    let defs = generator.definitions().clone();

    let s = json!({"type": "string"});
    let strings = list(s.clone());
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let descriptor = object(json!({
        "path": s, "displayName": s, "description": s, "x-descriptors": strings, "value": {},
    }));
    let resource = object(json!({"name": s, "kind": s, "version": s}));
    let descriptors = |o: &mut Map<String, Value>| {
        o.insert("resources".into(), list(resource.clone()));
        o.insert("statusDescriptors".into(), list(descriptor.clone()));
        o.insert("specDescriptors".into(), list(descriptor.clone()));
        o.insert("actionDescriptors".into(), list(descriptor.clone()));
    };
    let mut crd = json!({"name": s, "version": s, "kind": s, "displayName": s, "description": s});
    descriptors(crd.as_object_mut().expect("object literal"));
    let mut apiservice = json!({
        "name": s, "group": s, "version": s, "kind": s, "deploymentName": s, "containerPort": {"type": "integer"},
        "displayName": s, "description": s,
    });
    descriptors(apiservice.as_object_mut().expect("object literal"));
    let owned_required = |d: Value| object(json!({"owned": list(d.clone()), "required": list(d)}));
    let install = install_schema(deployment_spec, policy_rule);
    let webhook = webhook_schema(webhook_rule, label_selector.clone());
    let app_link = object(json!({"name": s, "url": s}));
    let spec = object(json!({
        "install": install,
        "version": s,
        "release": s,
        "maturity": s,
        "customresourcedefinitions": owned_required(object(crd)),
        "apiservicedefinitions": owned_required(object(apiservice)),
        "webhookdefinitions": list(webhook),
        "nativeAPIs": list(object(json!({"group": s, "version": s, "kind": s}))),
        "minKubeVersion": s,
        "displayName": s,
        "description": s,
        "keywords": strings,
        "maintainers": list(object(json!({"name": s, "email": s}))),
        "provider": app_link,
        "links": list(app_link),
        "icon": list(object(json!({"base64data": s, "mediatype": s}))),
        "installModes": list(object(json!({"type": s, "supported": {"type": "boolean"}}))),
        "replaces": s,
        "labels": string_map,
        "annotations": string_map,
        "selector": label_selector,
        "cleanup": object(json!({"enabled": {"type": "boolean"}})),
        "skips": strings,
        "relatedImages": list(object(json!({"name": s, "image": s}))),
    }));
    // metav1.TypeMeta is embedded first (kind, then apiVersion), then metadata, spec, status.
    let root = object(json!({"kind": s, "apiVersion": s, "metadata": object_meta, "spec": spec, "status": {}}));
    CsvSchema { root, defs }
}

/// `spec.install` (`NamedInstallStrategy`): the strategy name and its deployments and
/// permissions.
fn install_schema(deployment_spec: Value, policy_rule: Value) -> Value {
    let s = json!({"type": "string"});
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let permissions = list(object(json!({"serviceAccountName": s, "rules": list(policy_rule)})));
    object(json!({
        "strategy": s,
        "spec": object(json!({
            "deployments": list(object(json!({"name": s, "spec": deployment_spec, "label": string_map}))),
            "permissions": permissions,
            "clusterPermissions": permissions,
        })),
    }))
}

/// One of `spec.webhookdefinitions` (`WebhookDescription`).
fn webhook_schema(webhook_rule: Value, label_selector: Value) -> Value {
    let s = json!({"type": "string"});
    let strings = list(s.clone());
    object(json!({
        "generateName": s, "type": s, "deploymentName": s, "containerPort": {"type": "integer"},
        "targetPort": {}, "rules": list(webhook_rule), "failurePolicy": s, "matchPolicy": s,
        "objectSelector": label_selector, "sideEffects": s, "timeoutSeconds": {"type": "integer"},
        "admissionReviewVersions": strings, "reinvocationPolicy": s, "webhookPath": s, "conversionCRDs": strings,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_folding() {
        assert!(go_fold_eq("Kind", "kind"));
        assert!(go_fold_eq("KIND", "kind"));
        assert!(go_fold_eq("\u{212A}ind", "kind"));
        assert!(go_fold_eq("Minkubeversion", "minKubeVersion"));
        assert!(!go_fold_eq("kinds", "kind"));
        assert!(!go_fold_eq("kin", "kind"));
        assert!(!go_fold_eq("min_kube_version", "minKubeVersion"));
    }

    #[test]
    fn keys_are_renamed_to_the_go_field_and_reported() {
        let csv = json!({
            "ApiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"Name": "x.v1", "annotations": {"Keep": "as is"}},
            "spec": {
                "MinKubeVersion": "1.30.0",
                "customresourcedefinitions": {"owned": [{"name": "a.b", "resources": [{"kind": "Pod"}, {"Kind": "Job"}]}]},
                "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "d", "spec": {
                    "Replicas": 1, "template": {"spec": {"containers": [{"name": "c", "Image": "i"}]}}}}],
                    "permissions": [{"ServiceAccountName": "sa", "rules": [{"Verbs": ["get"]}]}]}},
                "unknownKey": {"Kind": "stays"},
            },
        });
        let (v, keys) = canonical_csv(&csv);
        assert_eq!(v["apiVersion"], "operators.coreos.com/v1alpha1");
        assert_eq!(v["metadata"]["name"], "x.v1");
        assert_eq!(v["metadata"]["annotations"], json!({"Keep": "as is"}));
        assert_eq!(v["spec"]["minKubeVersion"], "1.30.0");
        assert_eq!(v["spec"]["customresourcedefinitions"]["owned"][0]["resources"][1], json!({"kind": "Job"}));
        let d = &v["spec"]["install"]["spec"]["deployments"][0]["spec"];
        assert_eq!(d["replicas"], 1);
        assert_eq!(d["template"]["spec"]["containers"][0]["image"], "i");
        assert_eq!(v["spec"]["install"]["spec"]["permissions"][0]["serviceAccountName"], "sa");
        assert_eq!(v["spec"]["install"]["spec"]["permissions"][0]["rules"][0]["verbs"], json!(["get"]));
        assert_eq!(v["spec"]["unknownKey"], json!({"Kind": "stays"}));
        let fields: Vec<(String, &str)> = keys.iter().map(|k| (k.field(), k.canonical.as_str())).collect();
        assert_eq!(
            fields,
            vec![
                ("ApiVersion".to_string(), "apiVersion"),
                ("metadata.Name".to_string(), "name"),
                ("spec.MinKubeVersion".to_string(), "minKubeVersion"),
                ("spec.customresourcedefinitions.owned[0].resources[1].Kind".to_string(), "kind"),
                ("spec.install.spec.deployments[0].spec.Replicas".to_string(), "replicas"),
                ("spec.install.spec.deployments[0].spec.template.spec.containers[0].Image".to_string(), "image"),
                ("spec.install.spec.permissions[0].ServiceAccountName".to_string(), "serviceAccountName"),
                ("spec.install.spec.permissions[0].rules[0].Verbs".to_string(), "verbs"),
            ]
        );
    }

    #[test]
    fn the_last_key_reaching_a_field_wins_and_canonical_csvs_are_unchanged() {
        let (v, keys) = canonical_csv(&json!({"spec": {"minKubeVersion": "1.1.0", "MinKubeVersion": "1.2.0"}}));
        assert_eq!(v, json!({"spec": {"minKubeVersion": "1.2.0"}}));
        assert_eq!(keys.len(), 1);
        let csv =
            json!({"apiVersion": "v", "kind": "ClusterServiceVersion", "spec": {"version": "1.0.0", "x": {"Y": 1}}});
        assert_eq!(canonical_csv(&csv), (csv.clone(), vec![]));
    }
}
