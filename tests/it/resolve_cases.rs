//! Every case of `../shared/cases/olm-cases.yaml` whose outcome is `resolve`, `upgrade`,
//! `no_upgrade` or `resolution_error` (and every variant with such an outcome) runs the
//! `capstan resolve` binary on the case's catalog and Subscription and checks the bundles chosen
//! and the facts the error must mention.

use std::collections::BTreeSet;
use std::process::Command;

use crate::support::shared_dir;
use serde_json::{Value, json};

fn cases() -> Vec<Value> {
    let path = shared_dir().join("cases/olm-cases.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_norway::from_str(&text).expect("olm-cases.yaml parses")
}

fn case(id: &str) -> Value {
    cases().into_iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("case {id} not in olm-cases.yaml"))
}

const RESOLVER_OUTCOMES: [&str; 4] = ["resolve", "upgrade", "no_upgrade", "resolution_error"];

/// The cases (and `case#variant`s) these tests cover; a new resolver case in the file fails
/// `every_resolver_case_is_covered` until it gets a test here.
const COVERED: [&str; 9] = [
    "case-07",
    "case-08",
    "case-10",
    "case-10#range-includes-prereleases",
    "case-17",
    "case-18",
    "case-20",
    "case-23",
    "case-27",
];

#[test]
fn every_resolver_case_is_covered() {
    let mut want = BTreeSet::new();
    for c in cases() {
        let id = c["id"].as_str().unwrap_or_default().to_string();
        if RESOLVER_OUTCOMES.contains(&c["expected"]["outcome"].as_str().unwrap_or_default()) {
            want.insert(id.clone());
        }
        for v in c["variants"].as_array().into_iter().flatten() {
            if RESOLVER_OUTCOMES.contains(&v["expected"]["outcome"].as_str().unwrap_or_default()) {
                want.insert(format!("{id}#{}", v["name"].as_str().unwrap_or_default()));
            }
        }
    }
    let have: BTreeSet<String> = COVERED.iter().map(|s| s.to_string()).collect();
    assert_eq!(want, have);
}

/// Result of one `capstan resolve` run.
struct Run {
    code: i32,
    json: Value,
    stderr: String,
}

impl Run {
    fn bundles(&self) -> Vec<String> {
        self.json["resolved"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["bundle"].as_str().unwrap_or_default().to_string())
            .collect()
    }
    fn entry(&self, bundle: &str) -> &Value {
        self.json["resolved"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["bundle"] == bundle)
            .unwrap_or_else(|| panic!("{bundle} not resolved: {}", self.json))
    }
    fn error(&self) -> String {
        let errs = self.json["errors"].as_array().cloned().unwrap_or_default();
        assert_eq!(errs.len(), 1, "expected one error: {} (stderr: {})", self.json, self.stderr);
        errs[0]["message"].as_str().unwrap_or_default().to_string()
    }
}

/// Writes the case's catalog(s) and Subscription to a temp dir and runs the binary.
fn run_case(c: &Value, sub_override: &dyn Fn(&mut Value), installed: &[&str]) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args: Vec<String> = vec!["resolve".into()];
    let items = c["catalog"].as_array().cloned().unwrap_or_default();
    let multi = items.iter().any(|i| i.get("catalogSource").is_some());
    let groups: Vec<(String, String, i64, Vec<Value>)> = if multi {
        items
            .iter()
            .map(|i| {
                let cs = &i["catalogSource"];
                (
                    cs["namespace"].as_str().unwrap_or("olm").to_string(),
                    cs["name"].as_str().unwrap_or_default().to_string(),
                    cs["priority"].as_i64().unwrap_or(0),
                    i["blobs"].as_array().cloned().unwrap_or_default(),
                )
            })
            .collect()
    } else {
        vec![("olm".into(), "cat-a".into(), 0, items)]
    };
    for (ns, name, priority, blobs) in groups {
        let cat_dir = dir.path().join(format!("{ns}-{name}"));
        std::fs::create_dir_all(&cat_dir).expect("mkdir");
        let text: String = blobs.iter().map(|b| serde_json::to_string(b).expect("json") + "\n").collect();
        std::fs::write(cat_dir.join("catalog.json"), text).expect("write catalog");
        args.push("--catalog".into());
        args.push(format!("{ns}/{name}={}", cat_dir.display()));
        if priority != 0 {
            args.push("--priority".into());
            args.push(format!("{ns}/{name}={priority}"));
        }
    }
    let s = &c["subscription"];
    let mut doc = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": s["name"], "namespace": s["namespace"]},
        "spec": {"name": s["package"], "source": s["source"], "sourceNamespace": s["sourceNamespace"]},
    });
    for (from, to) in [
        ("channel", "channel"),
        ("startingCSV", "startingCSV"),
        ("installPlanApproval", "installPlanApproval"),
        ("versionRange", "versionRange"),
    ] {
        if let Some(v) = s.get(from) {
            doc["spec"][to] = json!(v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()));
        }
    }
    sub_override(&mut doc);
    let sub_path = dir.path().join("subscription.yaml");
    std::fs::write(&sub_path, serde_norway::to_string(&doc).expect("yaml")).expect("write subscription");
    args.push("-f".into());
    args.push(sub_path.display().to_string());
    for i in installed {
        args.push("--installed".into());
        args.push(i.to_string());
    }
    args.push("-o".into());
    args.push("json".into());
    let out = Command::new(env!("CARGO_BIN_EXE_capstan")).args(&args).output().expect("run capstan");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let code = out.status.code().unwrap_or(-1);
    // Exit 2 (invalid input) prints only the error on stderr.
    let json: Value = if code == 2 && stdout.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("capstan resolve {args:?} printed no JSON ({e}): {stdout}\n{stderr}"))
    };
    Run { code, json, stderr }
}

/// Installed bundles of the case's cluster_state in the Subscription's namespace.
fn installed_of(c: &Value) -> Vec<String> {
    let ns = &c["subscription"]["namespace"];
    c["cluster_state"]["installed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i.get("namespace").is_none_or(|n| n == ns))
        .map(|i| i["bundle"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn no_override(_: &mut Value) {}

fn assert_mentions(text: &str, facts: &[&str]) {
    for f in facts {
        assert!(text.contains(f), "message does not mention {f:?}: {text}");
    }
}

#[test]
fn case_07_upgrade_along_a_skips_edge() {
    let c = case("case-07");
    assert_eq!(c["expected"]["outcome"], "upgrade");
    let installed = installed_of(&c);
    let r = run_case(&c, &no_override, &installed.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(r.code, 0, "{}", r.json);
    let to = c["expected"]["to"].as_str().unwrap_or_default();
    assert_eq!(r.bundles(), vec![to.to_string()]);
    assert_eq!(r.entry(to)["reason"], "upgrade from registry-op.v0.1.0");
    let text = r.json.to_string();
    assert!(!text.contains("solution") && !text.contains("entity"), "internal solver wording: {text}");
}

#[test]
fn case_08_pinned_upgrades_walk_the_replaces_chain() {
    let c = case("case-08");
    assert_eq!(c["expected"]["outcome"], "upgrade");
    // Step 1: fresh install pinned to 1.0.0 (versionRange from the case).
    let r = run_case(&c, &no_override, &[]);
    assert_eq!(r.code, 0, "{}", r.json);
    assert_eq!(r.bundles(), vec!["my-package.v1.0.0"]);
    assert_eq!(r.entry("my-package.v1.0.0")["reason"], "requested");
    // Steps 2 and 3: each new pin moves one edge from what is installed now.
    for (installed, range, want) in
        [("my-package.v1.0.0", "1.0.1", "my-package.v1.0.1"), ("my-package.v1.0.1", "1.0.2", "my-package.v1.0.2")]
    {
        let set = |d: &mut Value| d["spec"]["versionRange"] = json!(range);
        let r = run_case(&c, &set, &[installed]);
        assert_eq!(r.code, 0, "{}", r.json);
        assert_eq!(r.bundles(), vec![want.to_string()]);
        assert_eq!(r.entry(want)["reason"], format!("upgrade from {installed}"));
    }
    assert_eq!(c["expected"]["final"], "my-package.v1.0.2");
}

#[test]
fn case_10_installed_pre_release_outside_skip_range() {
    let c = case("case-10");
    assert_eq!(c["expected"]["outcome"], "no_upgrade");
    let installed = installed_of(&c);
    assert_eq!(installed, vec!["ptp.v4.3.0-201911201000"]);
    let r = run_case(&c, &no_override, &["ptp.v4.3.0-201911201000"]);
    assert_eq!(r.code, 0, "{}", r.json);
    assert_eq!(r.bundles(), vec!["ptp.v4.3.0-201911201000"]);
    let reason = r.entry("ptp.v4.3.0-201911201000")["reason"].as_str().unwrap_or_default().to_string();
    assert_mentions(
        &reason,
        &[
            "no upgrade edge",
            "ptp.v4.3.0-201911201000",
            "pre-release",
            "sorts below 4.3.0",
            "skipRange >=4.3.0 <4.3.1",
            "ptp.v4.3.1",
        ],
    );
}

#[test]
fn case_10_variant_range_including_pre_releases_upgrades() {
    let mut c = case("case-10");
    let v = c["variants"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == "range-includes-prereleases").cloned())
        .expect("variant");
    assert_eq!(v["expected"]["outcome"], "upgrade");
    // The variant's change: skipRange of ptp.v4.3.1 becomes >=4.3.0-0 <4.3.1.
    for blob in c["catalog"].as_array_mut().expect("catalog") {
        if blob["schema"] == "olm.channel" {
            for e in blob["entries"].as_array_mut().expect("entries") {
                if e["name"] == "ptp.v4.3.1" {
                    e["skipRange"] = json!(">=4.3.0-0 <4.3.1");
                }
            }
        }
    }
    let r = run_case(&c, &no_override, &["ptp.v4.3.0-201911201000"]);
    assert_eq!(r.code, 0, "{}", r.json);
    let to = v["expected"]["to"].as_str().unwrap_or_default();
    assert_eq!(r.bundles(), vec![to.to_string()]);
    assert_eq!(r.entry(to)["reason"], "upgrade from ptp.v4.3.0-201911201000");
}

#[test]
fn case_17_missing_channel_lists_the_channels() {
    let c = case("case-17");
    assert_eq!(c["expected"]["outcome"], "resolution_error");
    let r = run_case(&c, &no_override, &[]);
    assert_eq!(r.code, 1, "{}", r.json);
    assert!(r.bundles().is_empty());
    let m = r.error();
    assert_mentions(
        &m,
        &[
            "channel stable-6.9 does not exist in package logstore of catalog olm/cat-a",
            "stable-6.1 and stable-6.2",
            "default stable-6.2",
            "set spec.channel",
        ],
    );
    assert!(!m.contains("constraints not satisfiable"), "{m}");
}

#[test]
fn case_18_gvk_provider_is_the_newest_entry_that_provides_it() {
    let c = case("case-18");
    assert_eq!(c["expected"]["outcome"], "resolve");
    let r = run_case(&c, &no_override, &[]);
    assert_eq!(r.code, 0, "{}", r.json);
    let want: Vec<String> = c["expected"]["resolution"]
        .as_array()
        .expect("resolution")
        .iter()
        .map(|x| x["bundle"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(r.bundles(), want);
    for x in c["expected"]["resolution"].as_array().expect("resolution") {
        let e = r.entry(x["bundle"].as_str().unwrap_or_default());
        assert_eq!(e["package"], x["package"]);
        if let Some(ch) = x.get("channel") {
            assert_eq!(&e["channel"], ch);
        }
    }
    let reason = r.entry("bar.v3")["reason"].as_str().unwrap_or_default().to_string();
    assert_mentions(&reason, &["foo.v1.0.0", "example.com/v1 Bar"]);
}

#[test]
fn case_20_shared_crd_owned_by_an_installed_operator() {
    let c = case("case-20");
    assert_eq!(c["expected"]["outcome"], "resolution_error");
    let installed = installed_of(&c);
    let r = run_case(&c, &no_override, &installed.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(r.code, 1, "{}", r.json);
    assert!(r.bundles().is_empty(), "nothing may be installed for cache-ctrl: {}", r.json);
    let m = r.error();
    assert_mentions(
        &m,
        &[
            "installed s3-ctrl.v1.0.0 (s3-ctrl 1.0.0) and cache-ctrl 1.0.0",
            "both provide API services.example.com/v1alpha1 AdoptedResource",
            "can have only one operator providing an API",
            "hint: install cache-ctrl in a namespace of its own (with its own OperatorGroup), or remove s3-ctrl from namespace",
        ],
    );
}

#[test]
fn case_23_newer_release_replaces_a_skipped_one() {
    let c = case("case-23");
    assert_eq!(c["expected"]["outcome"], "upgrade");
    let r = run_case(&c, &no_override, &["app.v1.0.0"]);
    assert_eq!(r.code, 0, "{}", r.json);
    assert_eq!(r.bundles(), vec![c["expected"]["to"].as_str().unwrap_or_default().to_string()]);
    assert_eq!(r.entry("app.v1.1.1")["reason"], "upgrade from app.v1.0.0");
}

#[test]
fn case_27_installed_head_stays() {
    let c = case("case-27");
    assert_eq!(c["expected"]["outcome"], "no_upgrade");
    let installed = installed_of(&c);
    let r = run_case(&c, &no_override, &installed.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(r.code, 0, "{}", r.json);
    assert_eq!(r.bundles(), vec!["registry-op.v0.1.1"]);
    let reason = r.entry("registry-op.v0.1.1")["reason"].as_str().unwrap_or_default().to_string();
    assert_mentions(&reason, &["installed", "head of channel stable-v0.1"]);
}

#[test]
fn invalid_input_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sub = dir.path().join("bad.yaml");
    let cat = dir.path().join("cat");
    std::fs::create_dir_all(&cat).expect("mkdir");
    std::fs::write(&sub, "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: x, namespace: y}\nspec: {name: foo}\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["resolve", "--catalog", &format!("olm/c={}", cat.display()), "-f", &sub.display().to_string()])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml") && err.contains("spec.source is required"), "{err}");

    let out = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args([
            "resolve",
            "--catalog",
            "olm/c=127.0.0.1:9/capstan/absent-catalog:latest",
            "-f",
            &sub.display().to_string(),
        ])
        .env("CAPSTAN_CACHE", dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    // A catalog image is pulled; an unreachable registry is named in the error.
    assert!(err.contains("olm/c=") && err.contains("127.0.0.1:9"), "{err}");
}

/// case-14 is a `reject_catalog` case (the catalog module's tests cover the rejection, the
/// resolver's tests that a Subscription on an invalid catalog says so). `capstan resolve` treats
/// an invalid catalog as invalid input: exit 2, naming the catalog and the path to the bad bundle,
/// rather than reporting that the package is missing.
#[test]
fn case_14_invalid_catalog_is_invalid_input() {
    let c = case("case-14");
    let r = run_case(&c, &no_override, &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_mentions(
        &r.stderr,
        &["catalog olm/cat-a is invalid", "package rstudio / channel v1.0 / bundle rstudio.v1.0.9", "olm.package"],
    );
    assert!(!r.stderr.contains("is not in catalog"), "{}", r.stderr);
}
