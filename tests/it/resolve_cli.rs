//! `capstan resolve` flags and formats: several catalogs with `--priority`, several Subscription
//! documents (one failing alone), `--installed NAMESPACE/CSV`, `-o text|json|yaml`, exit codes.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn provider_catalog(pkg: &str) -> String {
    format!(
        r#"{{"schema":"olm.package","name":"{pkg}","defaultChannel":"stable"}}
{{"schema":"olm.channel","package":"{pkg}","name":"stable","entries":[{{"name":"{pkg}.v1.0.0"}}]}}
{{"schema":"olm.bundle","package":"{pkg}","name":"{pkg}.v1.0.0","image":"reg/{pkg}:1.0.0","properties":[{{"type":"olm.package","value":{{"packageName":"{pkg}","version":"1.0.0"}}}},{{"type":"olm.gvk","value":{{"group":"db.io","version":"v1","kind":"Db"}}}}]}}
"#
    )
}

const APP: &str = r#"---
schema: olm.package
name: app
defaultChannel: stable
---
schema: olm.channel
package: app
name: stable
entries:
  - name: app.v1.0.0
  - name: app.v2.0.0
    replaces: app.v1.0.0
---
schema: olm.bundle
package: app
name: app.v1.0.0
image: reg/app:1.0.0
properties:
  - {type: olm.package, value: {packageName: app, version: 1.0.0}}
---
schema: olm.bundle
package: app
name: app.v2.0.0
image: reg/app:2.0.0
properties:
  - {type: olm.package, value: {packageName: app, version: 2.0.0}}
  - {type: olm.gvk.required, value: {group: db.io, version: v1, kind: Db}}
"#;

const SUBS: &str = r#"apiVersion: operators.coreos.com/v1alpha1
kind: OperatorGroup
metadata: {name: og, namespace: team-a}
spec: {}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: app, namespace: team-a}
spec: {name: app, channel: stable, source: apps, sourceNamespace: olm, installPlanApproval: Manual}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: ghost, namespace: team-a}
spec: {name: ghost, source: apps, sourceNamespace: olm}
"#;

fn capstan(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "resolve".to_string(),
        "--catalog".into(),
        format!("olm/apps={}", dir.join("apps").display()),
        "--catalog".into(),
        format!("olm/low={}", dir.join("low/catalog.json").display()),
        "--catalog".into(),
        format!("olm/high={}", dir.join("high").display()),
        "-f".into(),
        dir.join("subs.yaml").display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Command::new(env!("CARGO_BIN_EXE_capstan")).args(&args).output().expect("run capstan")
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("apps/app/catalog.yaml"), APP);
    write(&dir.path().join("low/catalog.json"), &provider_catalog("db-low"));
    write(&dir.path().join("high/db-high/catalog.json"), &provider_catalog("db-high"));
    write(&dir.path().join("subs.yaml"), SUBS);
    dir
}

#[test]
fn priority_picks_the_provider_and_one_bad_subscription_fails_alone() {
    let dir = setup();
    let out = capstan(dir.path(), &["--priority", "olm/high=5", "--installed", "team-a/app.v1.0.0", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    let resolved = json["resolved"].as_array().expect("resolved");
    let names: Vec<&str> = resolved.iter().map(|r| r["bundle"].as_str().unwrap_or_default()).collect();
    assert_eq!(names, vec!["app.v2.0.0", "db-high.v1.0.0"]);
    assert_eq!(resolved[0]["reason"], "upgrade from app.v1.0.0");
    assert_eq!(resolved[0]["catalog"], "olm/apps");
    assert_eq!(resolved[1]["catalog"], "olm/high");
    assert_eq!(resolved[1]["subscription"], "app");
    let errors = json["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["subscription"], "ghost");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("package ghost (spec.name) is not in catalog olm/apps")
    );

    // The higher priority wins ...
    let out = capstan(dir.path(), &["--priority", "olm/low=1", "-o", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["resolved"][1]["bundle"], "db-low.v1.0.0");
    // ... and equal priorities are ranked by catalog name (olm/high before olm/low).
    let out = capstan(dir.path(), &["-o", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["resolved"][1]["bundle"], "db-high.v1.0.0");
}

#[test]
fn text_and_yaml_outputs_carry_the_same_plan() {
    let dir = setup();
    let text = capstan(dir.path(), &["--priority", "olm/high=5"]);
    let t = String::from_utf8_lossy(&text.stdout);
    assert!(
        t.contains("subscription app:")
            && t.contains("app.v2.0.0 (app 2.0.0) channel stable catalog olm/apps: requested"),
        "{t}"
    );
    assert!(t.contains("db-high.v1.0.0") && t.contains("dependency of app.v2.0.0"), "{t}");
    assert!(t.contains("subscription ghost failed:"), "{t}");
    let yaml = capstan(dir.path(), &["--priority", "olm/high=5", "-o", "yaml"]);
    let y: Value = serde_norway::from_slice(&yaml.stdout).expect("yaml");
    assert_eq!(y["resolved"][1]["bundle"], "db-high.v1.0.0");
    assert_eq!(y["errors"][0]["subscription"], "ghost");
}

#[test]
fn bad_flags_exit_2_and_name_the_argument() {
    let dir = setup();
    for (args, fact) in [
        (vec!["--priority", "olm/none=3"], "no --catalog names catalog source olm/none"),
        (vec!["--priority", "olm/high=x"], "is not an integer"),
        (vec!["-o", "xml"], "xml"),
    ] {
        let out = capstan(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(fact), "{args:?}: {err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args([
            "resolve",
            "--catalog",
            "olm/x=/definitely/not/here",
            "-f",
            &dir.path().join("subs.yaml").display().to_string(),
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/definitely/not/here"));
}
