//! `install::plan::steps` for CSVs with `spec.webhookdefinitions` and
//! `spec.apiservicedefinitions.owned`: the objects OLM v0 creates for them
//! (`pkg/controller/install/{certresources,webhook,apiservice}.go`), checked on capstan's test
//! operator (`tests/fixtures/webhook-operator`) and on every corpus bundle that declares them,
//! against OLM's rules written out here from the CSV's own YAML; and the certificate material
//! [`install::webhook::fill_certificates`] puts in at apply time (issued, reused, rotated).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::shared_dir;
use base64::Engine;
use capstan::bundle::Bundle;
use capstan::install::certs::{self, ANNOTATION_CA_HASH};
use capstan::install::plan::kind_info;
use capstan::install::webhook::{self, fill_certificates};
use capstan::install::{self, InstallTarget, Step};
use serde_json::{Value, json};

fn fixture() -> Bundle {
    Bundle::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/webhook-operator/0.1.0")).unwrap()
}

fn target(b: &Bundle, all: bool) -> InstallTarget {
    InstallTarget {
        namespace: "operators".into(),
        target_namespaces: if all { vec!["".into()] } else { vec!["operators".into()] },
        package: b.package().into(),
        csv_name: b.name().into(),
        owner: Some(InstallTarget { csv_name: b.name().into(), ..Default::default() }.csv_owner_reference()),
        ..Default::default()
    }
}

fn find<'a>(steps: &'a [Step], kind: &str, name: &str) -> &'a Step {
    steps
        .iter()
        .find(|s| s.kind == kind && s.name == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {:?}", steps.iter().map(Step::describe).collect::<Vec<_>>()))
}

fn label<'a>(s: &'a Step, key: &str) -> Option<&'a str> {
    s.manifest.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
}

#[test]
fn test_operator_plans_olms_objects() {
    let b = fixture();
    let t = target(&b, true);
    let steps = install::steps(&b, &t).unwrap();
    let svc = find(&steps, "Service", "webhook-operator-service");
    assert_eq!(
        svc.manifest["spec"]["ports"],
        json!([{"name": "443", "port": 443, "targetPort": 9443}]),
        "one port for both webhooks"
    );
    assert_eq!(svc.manifest["spec"]["selector"], json!({"app": "webhook-operator"}));
    assert_eq!(label(svc, "olm.managed"), Some("true"));
    assert_eq!(svc.manifest["metadata"]["ownerReferences"][0]["kind"], "ClusterServiceVersion");

    let secret = find(&steps, "Secret", "webhook-operator-service-cert");
    assert_eq!(secret.manifest["type"], "kubernetes.io/tls");
    assert!(secret.manifest.get("data").is_none(), "no key material in the plan");
    assert!(webhook::is_planned_serving_secret(secret));
    let role = find(&steps, "Role", "webhook-operator-service-cert");
    assert_eq!(
        role.manifest["rules"],
        json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["webhook-operator-service-cert"]}])
    );
    let rb = find(&steps, "RoleBinding", "webhook-operator-service-cert");
    assert_eq!(
        rb.manifest["subjects"],
        json!([{"kind": "ServiceAccount", "name": "webhook-operator", "namespace": "operators"}])
    );
    let crb = find(&steps, "ClusterRoleBinding", "webhook-operator-service-system:auth-delegator");
    assert_eq!(crb.manifest["roleRef"]["name"], "system:auth-delegator");
    assert_eq!(label(crb, "olm.owner"), Some("webhook-operator.v0.1.0"));
    let reader = find(&steps, "RoleBinding", "webhook-operator-service-auth-reader");
    assert_eq!(reader.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        reader.manifest["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"})
    );

    let dep = find(&steps, "Deployment", "webhook-operator");
    let pod = &dep.manifest["spec"]["template"];
    assert_eq!(pod["metadata"]["annotations"][ANNOTATION_CA_HASH], "");
    let vols = pod["spec"]["volumes"].as_array().unwrap();
    assert_eq!(vols.len(), 2);
    assert_eq!(
        vols[0],
        json!({"name": "apiservice-cert", "secret": {"secretName": "webhook-operator-service-cert", "items": [{"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]}})
    );
    assert_eq!(
        vols[1],
        json!({"name": "webhook-cert", "secret": {"secretName": "webhook-operator-service-cert", "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}})
    );
    assert_eq!(
        pod["spec"]["containers"][0]["volumeMounts"],
        json!([{"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"}, {"name": "webhook-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"}])
    );

    let vwc =
        steps.iter().find(|s| s.kind == "ValidatingWebhookConfiguration").expect("a ValidatingWebhookConfiguration");
    assert!(vwc.name.starts_with("vwidgets.webhook.capstan.dev-"), "{}", vwc.name);
    for (k, v) in [
        ("olm.owner", "webhook-operator.v0.1.0"),
        ("olm.owner.kind", "ClusterServiceVersion"),
        ("olm.owner.namespace", "operators"),
        ("olm.managed", "true"),
        ("olm.webhook-description-generate-name", "vwidgets.webhook.capstan.dev"),
    ] {
        assert_eq!(label(vwc, k), Some(v), "label {k}");
    }
    let hook = &vwc.manifest["webhooks"][0];
    assert_eq!(hook["name"], "vwidgets.webhook.capstan.dev");
    assert_eq!(
        hook["clientConfig"],
        json!({"service": {"namespace": "operators", "name": "webhook-operator-service", "port": 443, "path": "/validate"}})
    );
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["sideEffects"], "None");
    assert_eq!(hook["timeoutSeconds"], 10);
    assert!(hook.get("namespaceSelector").is_none(), "all namespaces: no selector");
    assert_eq!(
        hook["rules"],
        json!([{"apiGroups": ["webhook.capstan.dev"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}])
    );
    assert!(steps.iter().all(|s| s.kind != "MutatingWebhookConfiguration"));

    let crd = find(&steps, "CustomResourceDefinition", "widgets.webhook.capstan.dev");
    assert_eq!(
        crd.manifest["spec"]["conversion"],
        json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"namespace": "operators", "name": "webhook-operator-service", "port": 443, "path": "/convert"}}, "conversionReviewVersions": ["v1"]}})
    );
    // Webhook configurations come after the Deployment (OLM creates them once it is applied).
    let pos = |k: &str| steps.iter().position(|s| s.kind == k).unwrap();
    assert!(pos("ValidatingWebhookConfiguration") > pos("Deployment"));

    // Named targets: the namespaces by name.
    let own = install::steps(&b, &target(&b, false)).unwrap();
    let vwc = own.iter().find(|s| s.kind == "ValidatingWebhookConfiguration").unwrap();
    assert_eq!(
        vwc.manifest["webhooks"][0]["namespaceSelector"],
        json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["operators"]}]})
    );
}

#[test]
fn certificates_are_issued_reused_and_rotated_at_apply_time() {
    let b = fixture();
    let mut steps = install::steps(&b, &target(&b, true)).unwrap();
    let planned = steps.clone();
    let now = time::OffsetDateTime::now_utc();
    let out = fill_certificates(&mut steps, &BTreeMap::new(), now, certs::DEFAULT_CERT_VALID_FOR).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].issued.as_deref(), Some("no certificate yet"));
    let b64 = base64::engine::general_purpose::STANDARD;
    let secret = find(&steps, "Secret", "webhook-operator-service-cert");
    let data: BTreeMap<String, Vec<u8>> = secret.manifest["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), b64.decode(v.as_str().unwrap()).unwrap()))
        .collect();
    let ca = String::from_utf8(data["olmCAKey"].clone()).unwrap();
    let hash = certs::ca_hash(&ca);
    assert_eq!(secret.manifest["metadata"]["annotations"][ANNOTATION_CA_HASH], json!(hash));
    let ca_b64 = json!(b64.encode(&ca));
    assert_eq!(
        find(
            &steps,
            "ValidatingWebhookConfiguration",
            &steps.iter().find(|s| s.kind == "ValidatingWebhookConfiguration").unwrap().name.clone()
        )
        .manifest["webhooks"][0]["clientConfig"]["caBundle"],
        ca_b64
    );
    assert_eq!(
        find(&steps, "CustomResourceDefinition", "widgets.webhook.capstan.dev").manifest["spec"]["conversion"]["webhook"]
            ["clientConfig"]["caBundle"],
        ca_b64
    );
    assert_eq!(
        find(&steps, "Deployment", "webhook-operator").manifest["spec"]["template"]["metadata"]["annotations"]
            [ANNOTATION_CA_HASH],
        json!(hash)
    );
    assert_eq!(
        certs::rotation_reason(&data, &certs::hostnames_for_service("webhook-operator-service", "operators"), now),
        None
    );

    // The next apply (an upgrade, a re-apply) keeps the certificate: same CA, no window.
    let existing =
        BTreeMap::from([(("operators".to_string(), "webhook-operator-service-cert".to_string()), data.clone())]);
    let mut again = planned.clone();
    let out = fill_certificates(&mut again, &existing, now + time::Duration::days(100), certs::DEFAULT_CERT_VALID_FOR)
        .unwrap();
    assert_eq!(out[0].issued, None);
    assert_eq!(out[0].ca_hash, hash);
    // A day before expiry it is rotated: a new CA everywhere.
    let mut later = planned.clone();
    let out = fill_certificates(
        &mut later,
        &existing,
        now + time::Duration::days(729) + time::Duration::minutes(1),
        certs::DEFAULT_CERT_VALID_FOR,
    )
    .unwrap();
    assert!(out[0].issued.as_deref().unwrap().contains("due for rotation"), "{:?}", out[0].issued);
    assert_ne!(out[0].ca_hash, hash);
    assert_eq!(
        find(&later, "Deployment", "webhook-operator").manifest["spec"]["template"]["metadata"]["annotations"]
            [ANNOTATION_CA_HASH],
        json!(out[0].ca_hash)
    );
    // A short validity (CAPSTAN_CERT_VALIDITY) rotates a quarter before expiry.
    let mut short = planned;
    fill_certificates(&mut short, &BTreeMap::new(), now, Duration::from_secs(120)).unwrap();
    let d: BTreeMap<String, Vec<u8>> = find(&short, "Secret", "webhook-operator-service-cert").manifest["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), b64.decode(v.as_str().unwrap()).unwrap()))
        .collect();
    let hosts = certs::hostnames_for_service("webhook-operator-service", "operators");
    assert_eq!(certs::rotation_reason(&d, &hosts, now + time::Duration::seconds(80)), None);
    assert!(certs::rotation_reason(&d, &hosts, now + time::Duration::seconds(95)).is_some());
}

#[test]
fn invalid_webhook_definitions_are_refused_naming_the_field() {
    let b = fixture();
    let mut csv = b.objects[b.csv_index].value.clone();
    csv["spec"]["webhookdefinitions"][0]["rules"][0]["apiGroups"] = json!(["operators.coreos.com"]);
    csv["spec"]["webhookdefinitions"][1]["generateName"] = json!("vwidgets.webhook.capstan.dev");
    csv["spec"]["webhookdefinitions"][1]["conversionCRDs"] = json!(["gadgets.webhook.capstan.dev"]);
    let mut bad = b.clone();
    bad.objects[b.csv_index].value = csv;
    let err = install::steps(&bad, &target(&b, true)).unwrap_err().to_string();
    assert!(err.contains("spec.webhookdefinitions[0].rules: webhook rules cannot include the OLM group"), "{err}");
    assert!(
        err.contains("spec.webhookdefinitions[1].generateName: \"vwidgets.webhook.capstan.dev\" is repeated"),
        "{err}"
    );
    assert!(err.contains("\"gadgets.webhook.capstan.dev\" is not in spec.customresourcedefinitions.owned"), "{err}");
    // `bundle validate` reports the same problems, each naming its field, so a bundle that would
    // fail its InstallPlan is never pushed or added to a catalog.
    let errors: Vec<String> = capstan::bundle::validate(&bad)
        .iter()
        .filter(|f| f.severity == capstan::bundle::Severity::Error && f.message.contains("InvalidWebhookDescription"))
        .map(|f| format!("{}: {}", f.field, f.message))
        .collect();
    assert_eq!(
        errors,
        vec![
            "spec.webhookdefinitions[0].rules: webhook rules cannot include the OLM group (the InstallPlan would fail with InvalidWebhookDescription)".to_string(),
            "spec.webhookdefinitions[1].generateName: \"vwidgets.webhook.capstan.dev\" is repeated (the InstallPlan would fail with InvalidWebhookDescription)".to_string(),
            "spec.webhookdefinitions[1].conversionCRDs: \"gadgets.webhook.capstan.dev\" is not in spec.customresourcedefinitions.owned (the InstallPlan would fail with InvalidWebhookDescription)".to_string(),
        ]
    );
    assert!(
        capstan::bundle::validate(&b).iter().all(|f| !f.message.contains("InvalidWebhookDescription")),
        "the fixture itself is valid"
    );
}

/// Bundle directories under operators/ (and tests/fixtures) whose CSV declares webhooks or
/// owned APIServices.
fn bundles_with_definitions() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let roots = [
        shared_dir().join("corpus/community-operators-prod/operators"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
    ];
    fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
        if dir.join("manifests").is_dir() && dir.join("metadata").is_dir() {
            out.push(dir.to_path_buf());
            return;
        }
        if depth == 0 {
            return;
        }
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                walk(&e.path(), out, depth - 1);
            }
        }
    }
    for r in roots {
        walk(&r, &mut out, 3);
    }
    out.sort();
    out
}

#[test]
fn every_corpus_bundle_with_webhooks_plans_what_olm_creates() {
    let mut checked = 0;
    let mut hooks = 0;
    for dir in bundles_with_definitions() {
        let b = Bundle::load(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let csv = b.csv().value().clone();
        let defs: Vec<Value> =
            csv.pointer("/spec/webhookdefinitions").and_then(Value::as_array).cloned().unwrap_or_default();
        let apis: Vec<Value> =
            csv.pointer("/spec/apiservicedefinitions/owned").and_then(Value::as_array).cloned().unwrap_or_default();
        if defs.is_empty() && apis.is_empty() {
            continue;
        }
        let all = b.csv().install_modes().iter().any(|m| m.type_.as_str() == "AllNamespaces" && m.supported);
        let t = target(&b, all);
        let ns = "operators";
        let where_ = dir.display().to_string();
        let steps = install::steps(&b, &t).unwrap_or_else(|e| panic!("{where_}: {e}"));
        checked += 1;
        let strategy_deps: Vec<Value> =
            csv.pointer("/spec/install/spec/deployments").and_then(Value::as_array).cloned().unwrap_or_default();
        let ranks: Vec<u8> = steps.iter().map(|s| kind_info(&s.kind).map(|k| k.rank).unwrap_or(u8::MAX)).collect();
        assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{where_}: out of order");
        let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let port_of = |v: &Value| v.get("containerPort").and_then(Value::as_i64).filter(|p| *p > 0).unwrap_or(443);
        // Per serving deployment: OLM's Service, Secret, RBAC and Deployment mutation.
        let mut serving: Vec<String> = defs.iter().chain(&apis).map(|d| str_of(d, "deploymentName")).collect();
        serving.dedup();
        for dep_name in serving.iter().filter(|d| strategy_deps.iter().any(|s| str_of(s, "name") == **d)) {
            let svc_name = format!("{dep_name}-service");
            let svc = find(&steps, "Service", &svc_name);
            let entry = strategy_deps.iter().find(|s| str_of(s, "name") == *dep_name).unwrap();
            assert_eq!(
                svc.manifest["spec"]["selector"],
                entry.pointer("/spec/selector/matchLabels").cloned().unwrap_or(json!({})),
                "{where_}: {svc_name} selector"
            );
            for d in defs.iter().chain(&apis).filter(|d| str_of(d, "deploymentName") == *dep_name) {
                let port = port_of(d);
                let target_port = d.get("targetPort").cloned().unwrap_or(json!(port));
                let want = json!({"name": port.to_string(), "port": port, "targetPort": target_port});
                assert!(
                    svc.manifest["spec"]["ports"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|p| p["port"] == want["port"] && p["name"] == want["name"]),
                    "{where_}: {svc_name} lacks {want}"
                );
            }
            let secret = format!("{svc_name}-cert");
            find(&steps, "Secret", &secret);
            find(&steps, "Role", &secret);
            find(&steps, "RoleBinding", &secret);
            find(&steps, "ClusterRoleBinding", &format!("{svc_name}-system:auth-delegator"));
            assert_eq!(
                find(&steps, "RoleBinding", &format!("{svc_name}-auth-reader")).namespace.as_deref(),
                Some("kube-system")
            );
            let dep = find(&steps, "Deployment", dep_name);
            let pod = &dep.manifest["spec"]["template"];
            assert!(
                pod.pointer(&format!("/metadata/annotations/{ANNOTATION_CA_HASH}")).is_some(),
                "{where_}: {dep_name} olmcahash"
            );
            for (vol, path) in [
                ("apiservice-cert", "/apiserver.local.config/certificates"),
                ("webhook-cert", "/tmp/k8s-webhook-server/serving-certs"),
            ] {
                let v = pod["spec"]["volumes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == vol)
                    .unwrap_or_else(|| panic!("{where_}: {dep_name} has no volume {vol}"));
                assert_eq!(v["secret"]["secretName"], json!(secret), "{where_}");
                for c in pod["spec"]["containers"].as_array().unwrap() {
                    let mounts = c["volumeMounts"].as_array().unwrap();
                    assert!(
                        mounts.iter().any(|m| m["name"] == vol && m["mountPath"] == path),
                        "{where_}: container {} lacks {vol} at {path}",
                        c["name"]
                    );
                    assert_eq!(
                        mounts.iter().filter(|m| m["mountPath"] == path).count(),
                        1,
                        "{where_}: one mount at {path}"
                    );
                }
            }
        }
        for d in &defs {
            hooks += 1;
            let gen_name = str_of(d, "generateName");
            let service = json!({"namespace": ns, "name": format!("{}-service", str_of(d, "deploymentName").replace('.', "-")), "port": port_of(d)});
            let mut service = service;
            let kind = match str_of(d, "type").as_str() {
                "ValidatingAdmissionWebhook" => "ValidatingWebhookConfiguration",
                "MutatingAdmissionWebhook" => "MutatingWebhookConfiguration",
                _ => {
                    service["path"] = d.get("webhookPath").cloned().unwrap_or(json!("/"));
                    for crd in d["conversionCRDs"].as_array().unwrap() {
                        let c = find(&steps, "CustomResourceDefinition", crd.as_str().unwrap());
                        assert_eq!(c.manifest["spec"]["conversion"]["strategy"], "Webhook", "{where_}");
                        assert_eq!(
                            c.manifest["spec"]["conversion"]["webhook"]["clientConfig"]["service"], service,
                            "{where_}: {crd}"
                        );
                        assert_eq!(
                            c.manifest["spec"]["conversion"]["webhook"]["conversionReviewVersions"],
                            d["admissionReviewVersions"],
                            "{where_}"
                        );
                    }
                    continue;
                }
            };
            if let Some(p) = d.get("webhookPath") {
                service["path"] = p.clone();
            }
            let configs: Vec<&Step> = steps
                .iter()
                .filter(|s| {
                    s.kind == kind && label(s, "olm.webhook-description-generate-name") == Some(gen_name.as_str())
                })
                .collect();
            assert_eq!(configs.len(), 1, "{where_}: one {kind} for {gen_name}");
            let c = configs[0];
            assert!(c.name.starts_with(&format!("{gen_name}-")) && c.name.len() <= 253, "{where_}: {}", c.name);
            assert_eq!(label(c, "olm.owner"), Some(b.name()));
            assert_eq!(label(c, "olm.owner.kind"), Some("ClusterServiceVersion"));
            assert_eq!(label(c, "olm.owner.namespace"), Some(ns));
            assert_eq!(label(c, "olm.managed"), Some("true"));
            let h = &c.manifest["webhooks"][0];
            assert_eq!(h["name"], json!(gen_name), "{where_}");
            assert_eq!(h["clientConfig"]["service"], service, "{where_}: {gen_name}");
            for k in [
                "rules",
                "failurePolicy",
                "matchPolicy",
                "objectSelector",
                "sideEffects",
                "timeoutSeconds",
                "admissionReviewVersions",
            ] {
                assert_eq!(h.get(k), d.get(k).filter(|v| !v.is_null()), "{where_}: {gen_name} {k}");
            }
            if kind == "MutatingWebhookConfiguration" {
                assert_eq!(h.get("reinvocationPolicy"), d.get("reinvocationPolicy"), "{where_}");
            }
            assert_eq!(
                h.get("namespaceSelector").is_none(),
                all,
                "{where_}: namespace selector only for named targets"
            );
        }
        for a in &apis {
            let s = find(&steps, "APIService", &format!("{}.{}", str_of(a, "version"), str_of(a, "group")));
            assert_eq!(s.manifest["spec"]["groupPriorityMinimum"], 2000);
            assert_eq!(s.manifest["spec"]["versionPriority"], 15);
            assert_eq!(
                s.manifest["spec"]["service"],
                json!({"namespace": ns, "name": format!("{}-service", str_of(a, "deploymentName")), "port": port_of(a)})
            );
            assert_eq!(label(s, "olm.owner"), Some(b.name()));
        }
    }
    eprintln!("{checked} bundles, {hooks} webhook definitions checked");
    assert!(checked >= 135, "expected the 134 corpus CSVs with webhooks and the test operator, found {checked}");
}

#[test]
fn next_version_takes_over_the_same_objects_and_certificate() {
    // The upgrade handover: the next CSV of the package plans the same webhook configuration,
    // Service and Secret names, so applying it replaces the old CSV's objects in place (one
    // field manager), and its serving Secret keeps the certificate: the caBundle the API server
    // uses never changes during the upgrade, and there is no moment without a webhook.
    let b = fixture();
    let mut next = b.clone();
    next.objects[b.csv_index].value["metadata"]["name"] = json!("webhook-operator.v0.2.0");
    next.objects[b.csv_index].value["spec"]["version"] = json!("0.2.0");
    let old_steps = install::steps(&b, &target(&b, true)).unwrap();
    let new_steps = install::steps(&next, &target(&next, true)).unwrap();
    let names = |s: &[Step]| -> Vec<(String, String)> {
        s.iter()
            .filter(|s| s.kind != "ClusterServiceVersion" && !s.kind.contains("Role") || s.name.contains("-service"))
            .map(|s| (s.kind.clone(), s.name.clone()))
            .collect()
    };
    assert_eq!(names(&old_steps), names(&new_steps));
    let vwc = |s: &[Step]| s.iter().find(|s| s.kind == "ValidatingWebhookConfiguration").unwrap().clone();
    assert_eq!(label(&vwc(&new_steps), "olm.owner"), Some("webhook-operator.v0.2.0"), "the new CSV owns it");
    let mut old_filled = old_steps.clone();
    let now = time::OffsetDateTime::now_utc();
    fill_certificates(&mut old_filled, &BTreeMap::new(), now, certs::DEFAULT_CERT_VALID_FOR).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let data: BTreeMap<String, Vec<u8>> = find(&old_filled, "Secret", "webhook-operator-service-cert").manifest["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), b64.decode(v.as_str().unwrap()).unwrap()))
        .collect();
    let existing = BTreeMap::from([(("operators".to_string(), "webhook-operator-service-cert".to_string()), data)]);
    let mut new_filled = new_steps.clone();
    let out =
        fill_certificates(&mut new_filled, &existing, now + time::Duration::hours(1), certs::DEFAULT_CERT_VALID_FOR)
            .unwrap();
    assert_eq!(out[0].issued, None, "the certificate is taken over");
    assert_eq!(
        vwc(&new_filled).manifest["webhooks"][0]["clientConfig"]["caBundle"],
        vwc(&old_filled).manifest["webhooks"][0]["clientConfig"]["caBundle"]
    );
    // Another namespace's install of the same package gets its own configuration.
    let mut elsewhere = target(&b, true);
    elsewhere.namespace = "other".into();
    let other = install::steps(&b, &elsewhere).unwrap();
    assert_ne!(vwc(&other).name, vwc(&old_steps).name);
}

#[test]
fn unavailable_names_each_webhook_and_its_deployment() {
    let b = fixture();
    let defs = webhook::Definitions::read(b.csv().value()).unwrap();
    assert_eq!(webhook::unavailable(&defs, |_| Some(true)), None);
    let r = webhook::unavailable(&defs, |d| (d == "webhook-operator").then_some(false)).unwrap();
    assert_eq!(
        r,
        "webhook vwidgets.webhook.capstan.dev (ValidatingAdmissionWebhook) is served by Deployment webhook-operator, which is not available; \
         webhook cwidgets.webhook.capstan.dev (ConversionWebhook) is served by Deployment webhook-operator, which is not available"
    );
}
