//! The cases of `../shared/cases/olm-cases.yaml` whose expected outcome is `reject_catalog` or
//! `load`: each case's catalog goes through
//! `parse_bytes` + `validate`, and the error text must mention what the case says.
//!
//! `error_must_mention` lists facts, not strings. They are checked two ways: (1) every name in a
//! fact that is a package, channel or bundle name (or looks like a bundle name, `x.vN…`) must
//! appear in the error text; (2) per case, the key phrases of each fact (below) must appear.

use std::collections::BTreeSet;

use crate::support::shared_dir;
use capstan::catalog::model::DeclarativeConfig;
use capstan::catalog::{parse, validate};
use serde_json::Value;

fn cases() -> Vec<Value> {
    let path = shared_dir().join("cases/olm-cases.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str::<Vec<Value>>(&text).unwrap()
}

/// Key phrases per (case id, variant name or ""), one group per `error_must_mention` fact.
fn key_phrases(id: &str, variant: &str) -> Option<Vec<&'static str>> {
    Some(match (id, variant) {
        ("case-01", "") => vec![
            "package testop-a / channel v1.0",
            "two heads",
            "testop-a.v1.0.1 and testop-a.v1.0.0",
            "skipRange does not create an ordering edge; add replaces or skips to link the entries",
        ],
        ("case-02", "") => vec![
            "channel stable of package streams has two heads, streams.v1.7.1 and streams.v1.6.2",
            "streams.v1.7.1...streams.v1.7.0",
            "streams.v1.6.2...streams.v1.6.1",
            "streams.v1.7.0 replaces streams.v1.6.3, which is not an entry of channel stable",
        ],
        ("case-03", "") => {
            vec!["cycle in the replaces chain of channel stable, package loop", "loop.v2 -> loop.v1 -> loop.v2"]
        }
        ("case-05", "") => vec![
            "my.v0.0.3 replaces my.v0.0.1, which is not an entry of channel stable",
            "my.v0.0.2 is left disconnected",
            "two heads",
        ],
        ("case-12", "") => vec!["package op has duplicate version 1.0.0", "op.v1.0.0 and op.v1.0.0-respin"],
        ("case-14", "") => vec![
            "package rstudio / channel v1.0 / bundle rstudio.v1.0.9",
            "a bundle needs exactly one olm.package property with packageName and version",
        ],
        ("case-16", "") => vec![
            "defaultChannel \"stabel\" of package foo does not name any channel",
            "the existing channels are (fast, stable)",
        ],
        ("case-16", "empty-default-channel") => vec!["package foo has no defaultChannel"],
        _ => return None,
    })
}

/// Applies a variant's `change` (prose in the case file) to the case's blobs.
fn apply_variant(id: &str, variant: &str, blobs: &mut [Value]) -> bool {
    match (id, variant) {
        ("case-16", "empty-default-channel") => {
            for b in blobs.iter_mut().filter(|b| b["schema"] == "olm.package") {
                b["defaultChannel"] = Value::String(String::new());
            }
            true
        }
        _ => false,
    }
}

/// The blobs of a case: a list of blobs, or of `{catalogSource, blobs}` items.
fn blobs_of(case: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for item in case["catalog"].as_array().into_iter().flatten() {
        match item.get("blobs").and_then(Value::as_array) {
            Some(bs) => out.extend(bs.iter().cloned()),
            None => out.push(item.clone()),
        }
    }
    out
}

fn load(blobs: &[Value]) -> Result<DeclarativeConfig, String> {
    let stream: String = blobs.iter().map(|b| serde_json::to_string(b).unwrap() + "\n").collect();
    parse::parse_bytes("case.json", stream.as_bytes()).map_err(|e| e.to_string())
}

/// Names the error must contain: catalog names and bundle-like tokens that occur in the facts.
fn names_in_facts(facts: &[String], cfg_blobs: &[Value]) -> BTreeSet<String> {
    let mut known = BTreeSet::new();
    for b in cfg_blobs {
        for k in ["name", "package"] {
            if let Some(s) = b.get(k).and_then(Value::as_str) {
                known.insert(s.to_string());
            }
        }
    }
    let mut out = BTreeSet::new();
    for fact in facts {
        for raw in fact.split(|c: char| c.is_whitespace() || "(),\"'".contains(c)) {
            let tok = raw.trim_end_matches(['.', ':', ';']);
            let bundle_like = tok.contains(".v") && tok.chars().last().is_some_and(|c| c.is_ascii_digit());
            if !tok.is_empty() && (known.contains(tok) || bundle_like) {
                out.insert(tok.to_string());
            }
        }
    }
    out
}

fn check(id: &str, variant: &str, outcome: &str, expected: &Value, blobs: &[Value]) -> Result<(), String> {
    let label = if variant.is_empty() { id.to_string() } else { format!("{id}/{variant}") };
    let result = load(blobs).and_then(|cfg| validate::validate(&cfg).map(|()| cfg).map_err(|e| e.to_string()));
    match outcome {
        "load" => result.map(|_| ()).map_err(|e| format!("{label}: expected the catalog to load, got: {e}")),
        "reject_catalog" => {
            let text = match result {
                Ok(_) => return Err(format!("{label}: expected the catalog to be rejected, but it validated")),
                Err(t) => t,
            };
            let facts: Vec<String> = expected["error_must_mention"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str().map(str::to_string))
                // Facts about what a Subscription reports belong to the resolver/controller
                // tests; for the catalog, `case_14_errors_stay_with_the_broken_package` covers it.
                .filter(|f| !f.contains("Subscription"))
                .collect();
            let mut missing: Vec<String> =
                names_in_facts(&facts, blobs).into_iter().filter(|n| !text.contains(n)).collect();
            let phrases =
                key_phrases(id, variant).ok_or_else(|| format!("{label}: no key phrases written for this case"))?;
            missing.extend(phrases.iter().filter(|p| !text.contains(*p)).map(|p| format!("phrase {p:?}")));
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("{label}: error does not mention {missing:?}:\n{text}"))
            }
        }
        _ => Ok(()),
    }
}

#[test]
fn reject_catalog_and_load_cases() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in cases() {
        let id = case["id"].as_str().unwrap_or_default().to_string();
        let blobs = blobs_of(&case);
        let outcome = case["expected"]["outcome"].as_str().unwrap_or_default();
        // case-30 (`load`) has no blobs but a generator spec; tests/it/catalog_large.rs builds it.
        if matches!(outcome, "reject_catalog" | "load") && id != "case-30" {
            checked += 1;
            if let Err(e) = check(&id, "", outcome, &case["expected"], &blobs) {
                failures.push(e);
            }
        }
        for v in case["variants"].as_array().into_iter().flatten() {
            let vname = v["name"].as_str().unwrap_or_default();
            let voutcome = v["expected"]["outcome"].as_str().unwrap_or_default();
            if !matches!(voutcome, "reject_catalog" | "load") {
                continue;
            }
            let mut vblobs = blobs.clone();
            if !apply_variant(&id, vname, &mut vblobs) {
                failures.push(format!("{id}/{vname}: variant change not implemented in this test: {}", v["change"]));
                continue;
            }
            checked += 1;
            if let Err(e) = check(&id, vname, voutcome, &v["expected"], &vblobs) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(checked >= 8, "only {checked} cases checked");
}

/// case-14: one broken bundle must not make the other package look missing.
#[test]
fn case_14_errors_stay_with_the_broken_package() {
    let case = cases().into_iter().find(|c| c["id"] == "case-14").unwrap();
    let cfg = load(&blobs_of(&case)).unwrap();
    let errs = validate::validate(&cfg).unwrap_err();
    assert!(errs.errors.iter().all(|e| e.package == "rstudio"), "{errs}");
}
