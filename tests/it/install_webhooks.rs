//! `install::plan::steps` for CSVs with `spec.webhookdefinitions` and
//! `spec.apiservicedefinitions.owned`: the objects OLM v0 creates for them
//! (`pkg/controller/install/{certresources,webhook,apiservice}.go`), checked on capstan's test
//! operator (`tests/fixtures/webhook-operator`) and on every corpus bundle that declares them,
//! against OLM's rules written out here from the CSV's own YAML; and the certificate material
//! [`install::webhook::fill_certificates`] puts in at apply time (issued, reused, rotated), one
//! test per case.

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
        // What the OperatorGroup reconcilers give (`install::operator_group::webhook_selector`).
        webhook_selector: (!all).then(|| json!({"matchLabels": {"olm.operatorgroup.uid/u-1": ""}})),
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

/// The test operator installed for all namespaces: OLM's Service, serving Secret and its RBAC,
/// the Deployment's certificate volumes, the ValidatingWebhookConfiguration and the CRD's
/// conversion webhook, the configurations after the Deployment.
#[test]
fn test_operator_plans_olms_objects() {
    let b = fixture();
    let t = target(&b, true);
    let steps = install::steps(&b, &t).unwrap();
    assert_service_secret_and_rbac(&steps);
    assert_deployment_mounts_the_certificate(&steps);
    assert_validating_webhook_configuration(&steps);
    let crd = find(&steps, "CustomResourceDefinition", "widgets.webhook.capstan.dev");
    assert_eq!(
        crd.manifest["spec"]["conversion"],
        json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"namespace": "operators", "name": "webhook-operator-service", "port": 443, "path": "/convert"}}, "conversionReviewVersions": ["v1"]}})
    );
    // Webhook configurations come after the Deployment (OLM creates them once it is applied).
    let pos = |k: &str| steps.iter().position(|s| s.kind == k).unwrap();
    assert!(pos("ValidatingWebhookConfiguration") > pos("Deployment"));
}

/// Named targets: the webhook selects the OperatorGroup's namespace label, as OLM's.
#[test]
fn test_operator_for_named_targets_selects_the_groups_namespace_label() {
    let b = fixture();
    let own = install::steps(&b, &target(&b, false)).unwrap();
    let vwc = own.iter().find(|s| s.kind == "ValidatingWebhookConfiguration").unwrap();
    assert_eq!(
        vwc.manifest["webhooks"][0]["namespaceSelector"],
        json!({"matchLabels": {"olm.operatorgroup.uid/u-1": ""}})
    );
}

/// One Service port for both webhooks, the TLS Secret without key material, its reader Role and
/// RoleBinding, and the auth-delegator and auth-reader bindings.
fn assert_service_secret_and_rbac(steps: &[Step]) {
    let svc = find(steps, "Service", "webhook-operator-service");
    assert_eq!(
        svc.manifest["spec"]["ports"],
        json!([{"name": "443", "port": 443, "targetPort": 9443}]),
        "one port for both webhooks"
    );
    assert_eq!(svc.manifest["spec"]["selector"], json!({"app": "webhook-operator"}));
    assert_eq!(label(svc, "olm.managed"), Some("true"));
    assert_eq!(svc.manifest["metadata"]["ownerReferences"][0]["kind"], "ClusterServiceVersion");

    let secret = find(steps, "Secret", "webhook-operator-service-cert");
    assert_eq!(secret.manifest["type"], "kubernetes.io/tls");
    assert!(secret.manifest.get("data").is_none(), "no key material in the plan");
    assert!(webhook::is_planned_serving_secret(secret));
    let role = find(steps, "Role", "webhook-operator-service-cert");
    assert_eq!(
        role.manifest["rules"],
        json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["webhook-operator-service-cert"]}])
    );
    let rb = find(steps, "RoleBinding", "webhook-operator-service-cert");
    assert_eq!(
        rb.manifest["subjects"],
        json!([{"kind": "ServiceAccount", "name": "webhook-operator", "namespace": "operators"}])
    );
    let crb = find(steps, "ClusterRoleBinding", "webhook-operator-service-system:auth-delegator");
    assert_eq!(crb.manifest["roleRef"]["name"], "system:auth-delegator");
    assert_eq!(label(crb, "olm.owner"), Some("webhook-operator.v0.1.0"));
    let reader = find(steps, "RoleBinding", "webhook-operator-service-auth-reader");
    assert_eq!(reader.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        reader.manifest["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"})
    );
}

/// The Deployment's pod: an empty CA hash annotation, the two certificate volumes of the serving
/// Secret and their mounts.
fn assert_deployment_mounts_the_certificate(steps: &[Step]) {
    let dep = find(steps, "Deployment", "webhook-operator");
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
}

/// The ValidatingWebhookConfiguration: OLM's generated name and labels, the webhook as the CSV
/// declares it, pointing at the Service, no namespace selector; no mutating configuration.
fn assert_validating_webhook_configuration(steps: &[Step]) {
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
}

/// The serving Secret's data of planned `steps` after [`fill_certificates`], decoded.
fn serving_secret_data(steps: &[Step]) -> BTreeMap<String, Vec<u8>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    find(steps, "Secret", "webhook-operator-service-cert").manifest["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), b64.decode(v.as_str().unwrap()).unwrap()))
        .collect()
}

/// A certificate issued at `now` for the test operator's planned steps: the plan as planned, and
/// the serving Secret's data, as the cluster would keep it.
fn issued(now: time::OffsetDateTime) -> (Vec<Step>, BTreeMap<String, Vec<u8>>) {
    let b = fixture();
    let planned = install::steps(&b, &target(&b, true)).unwrap();
    let mut steps = planned.clone();
    fill_certificates(&mut steps, &BTreeMap::new(), now, certs::DEFAULT_CERT_VALID_FOR).unwrap();
    (planned, serving_secret_data(&steps))
}

/// The existing serving Secrets of the cluster: the test operator's, with `data`.
fn existing_secret(data: &BTreeMap<String, Vec<u8>>) -> BTreeMap<(String, String), BTreeMap<String, Vec<u8>>> {
    BTreeMap::from([(("operators".to_string(), "webhook-operator-service-cert".to_string()), data.clone())])
}

/// The first apply issues a certificate: its CA is in the Secret's annotation, every caBundle and
/// the Deployment's CA hash annotation, and it is valid for the Service's hostnames.
#[test]
fn certificates_are_issued_at_apply_time_into_every_consumer() {
    let b = fixture();
    let mut steps = install::steps(&b, &target(&b, true)).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let out = fill_certificates(&mut steps, &BTreeMap::new(), now, certs::DEFAULT_CERT_VALID_FOR).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].issued.as_deref(), Some("no certificate yet"));
    let b64 = base64::engine::general_purpose::STANDARD;
    let secret = find(&steps, "Secret", "webhook-operator-service-cert");
    let data = serving_secret_data(&steps);
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
}

/// The next apply (an upgrade, a re-apply) keeps the certificate: same CA, no window.
#[test]
fn the_next_apply_reuses_the_certificate() {
    let now = time::OffsetDateTime::now_utc();
    let (planned, data) = issued(now);
    let hash = certs::ca_hash(&String::from_utf8(data["olmCAKey"].clone()).unwrap());
    let mut again = planned;
    let out = fill_certificates(
        &mut again,
        &existing_secret(&data),
        now + time::Duration::days(100),
        certs::DEFAULT_CERT_VALID_FOR,
    )
    .unwrap();
    assert_eq!(out[0].issued, None);
    assert_eq!(out[0].ca_hash, hash);
}

/// A day before expiry the certificate is rotated: a new CA everywhere.
#[test]
fn a_certificate_is_rotated_a_day_before_expiry() {
    let now = time::OffsetDateTime::now_utc();
    let (planned, data) = issued(now);
    let hash = certs::ca_hash(&String::from_utf8(data["olmCAKey"].clone()).unwrap());
    let mut later = planned;
    let out = fill_certificates(
        &mut later,
        &existing_secret(&data),
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
}

/// A short validity (CAPSTAN_CERT_VALIDITY) rotates a quarter before expiry.
#[test]
fn a_short_validity_rotates_a_quarter_before_expiry() {
    let b = fixture();
    let now = time::OffsetDateTime::now_utc();
    let mut short = install::steps(&b, &target(&b, true)).unwrap();
    fill_certificates(&mut short, &BTreeMap::new(), now, Duration::from_secs(120)).unwrap();
    let d = serving_secret_data(&short);
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

/// The namespace every corpus bundle is planned into.
const NS: &str = "operators";

/// Field `k` of `v` as a string ("" when absent).
fn str_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

/// A definition's `containerPort`, 443 when absent or not positive (as OLM defaults it).
fn port_of(v: &Value) -> i64 {
    v.get("containerPort").and_then(Value::as_i64).filter(|p| *p > 0).unwrap_or(443)
}

/// Every corpus bundle (and the test operator) that declares webhooks or owned APIServices plans
/// the objects OLM creates for them.
#[test]
fn every_corpus_bundle_with_webhooks_plans_what_olm_creates() {
    let mut checked = 0;
    let mut hooks = 0;
    for dir in bundles_with_definitions() {
        if let Some(definitions) = check_bundle(&dir) {
            checked += 1;
            hooks += definitions;
        }
    }
    eprintln!("{checked} bundles, {hooks} webhook definitions checked");
    assert!(checked >= 135, "expected the 134 corpus CSVs with webhooks and the test operator, found {checked}");
}

/// Checks the plan of the bundle in `dir` against OLM's rules when its CSV declares webhooks or
/// owned APIServices: the number of webhook definitions checked, or `None` when it declares
/// neither.
fn check_bundle(dir: &Path) -> Option<usize> {
    let b = Bundle::load(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let csv = b.csv().value().clone();
    let defs: Vec<Value> =
        csv.pointer("/spec/webhookdefinitions").and_then(Value::as_array).cloned().unwrap_or_default();
    let apis: Vec<Value> =
        csv.pointer("/spec/apiservicedefinitions/owned").and_then(Value::as_array).cloned().unwrap_or_default();
    if defs.is_empty() && apis.is_empty() {
        return None;
    }
    let all = b.csv().install_modes().iter().any(|m| m.type_.as_str() == "AllNamespaces" && m.supported);
    let t = target(&b, all);
    let where_ = dir.display().to_string();
    let steps = install::steps(&b, &t).unwrap_or_else(|e| panic!("{where_}: {e}"));
    let strategy_deps: Vec<Value> =
        csv.pointer("/spec/install/spec/deployments").and_then(Value::as_array).cloned().unwrap_or_default();
    let ranks: Vec<u8> = steps.iter().map(|s| kind_info(&s.kind).map(|k| k.rank).unwrap_or(u8::MAX)).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{where_}: out of order");
    // Per serving deployment: OLM's Service, Secret, RBAC and Deployment mutation.
    let mut serving: Vec<String> = defs.iter().chain(&apis).map(|d| str_of(d, "deploymentName")).collect();
    serving.dedup();
    for dep_name in serving.iter().filter(|d| strategy_deps.iter().any(|s| str_of(s, "name") == **d)) {
        let entry = strategy_deps.iter().find(|s| str_of(s, "name") == *dep_name).unwrap();
        let served: Vec<&Value> =
            defs.iter().chain(&apis).filter(|d| str_of(d, "deploymentName") == *dep_name).collect();
        check_serving_service(&steps, &where_, dep_name, entry, &served);
        check_serving_deployment(&steps, &where_, dep_name);
    }
    for d in &defs {
        check_webhook_definition(&steps, &where_, &b, d, all);
    }
    for a in &apis {
        let s = find(&steps, "APIService", &format!("{}.{}", str_of(a, "version"), str_of(a, "group")));
        assert_eq!(s.manifest["spec"]["groupPriorityMinimum"], 2000);
        assert_eq!(s.manifest["spec"]["versionPriority"], 15);
        assert_eq!(
            s.manifest["spec"]["service"],
            json!({"namespace": NS, "name": format!("{}-service", str_of(a, "deploymentName")), "port": port_of(a)})
        );
        assert_eq!(label(s, "olm.owner"), Some(b.name()));
    }
    Some(defs.len())
}

/// The Service of serving deployment `dep_name` (strategy entry `entry`) selects its pods and has
/// a port for each definition it `served`.
fn check_serving_service(steps: &[Step], where_: &str, dep_name: &str, entry: &Value, served: &[&Value]) {
    let svc_name = format!("{dep_name}-service");
    let svc = find(steps, "Service", &svc_name);
    assert_eq!(
        svc.manifest["spec"]["selector"],
        entry.pointer("/spec/selector/matchLabels").cloned().unwrap_or(json!({})),
        "{where_}: {svc_name} selector"
    );
    for d in served {
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
}

/// The serving Secret of deployment `dep_name`, its RBAC, and the Deployment's CA hash annotation
/// and certificate volumes, mounted once in every container.
fn check_serving_deployment(steps: &[Step], where_: &str, dep_name: &str) {
    let svc_name = format!("{dep_name}-service");
    let secret = format!("{svc_name}-cert");
    find(steps, "Secret", &secret);
    find(steps, "Role", &secret);
    find(steps, "RoleBinding", &secret);
    find(steps, "ClusterRoleBinding", &format!("{svc_name}-system:auth-delegator"));
    assert_eq!(
        find(steps, "RoleBinding", &format!("{svc_name}-auth-reader")).namespace.as_deref(),
        Some("kube-system")
    );
    let dep = find(steps, "Deployment", dep_name);
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
            assert_eq!(mounts.iter().filter(|m| m["mountPath"] == path).count(), 1, "{where_}: one mount at {path}");
        }
    }
}

/// Webhook definition `d`: a conversion webhook in each CRD it names, or one admission webhook
/// configuration with OLM's labels and the definition's fields.
fn check_webhook_definition(steps: &[Step], where_: &str, b: &Bundle, d: &Value, all: bool) {
    let gen_name = str_of(d, "generateName");
    let mut service = json!({"namespace": NS, "name": format!("{}-service", str_of(d, "deploymentName").replace('.', "-")), "port": port_of(d)});
    let kind = match str_of(d, "type").as_str() {
        "ValidatingAdmissionWebhook" => "ValidatingWebhookConfiguration",
        "MutatingAdmissionWebhook" => "MutatingWebhookConfiguration",
        _ => {
            service["path"] = d.get("webhookPath").cloned().unwrap_or(json!("/"));
            for crd in d["conversionCRDs"].as_array().unwrap() {
                let c = find(steps, "CustomResourceDefinition", crd.as_str().unwrap());
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
            return;
        }
    };
    if let Some(p) = d.get("webhookPath") {
        service["path"] = p.clone();
    }
    let configs: Vec<&Step> = steps
        .iter()
        .filter(|s| s.kind == kind && label(s, "olm.webhook-description-generate-name") == Some(gen_name.as_str()))
        .collect();
    assert_eq!(configs.len(), 1, "{where_}: one {kind} for {gen_name}");
    let c = configs[0];
    assert!(c.name.starts_with(&format!("{gen_name}-")) && c.name.len() <= 253, "{where_}: {}", c.name);
    assert_eq!(label(c, "olm.owner"), Some(b.name()));
    assert_eq!(label(c, "olm.owner.kind"), Some("ClusterServiceVersion"));
    assert_eq!(label(c, "olm.owner.namespace"), Some(NS));
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
    assert_eq!(h.get("namespaceSelector").is_none(), all, "{where_}: namespace selector only for named targets");
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
    let existing = existing_secret(&serving_secret_data(&old_filled));
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
