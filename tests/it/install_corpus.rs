//! `install::plan::steps` over every bundle of the community-operators-prod corpus: real bundles
//! plan (or fail only as OLM would, with UnsupportedResource), in OLM's order, with one step per
//! object and per install-strategy Deployment, and generated names Kubernetes accepts.

use std::path::PathBuf;

use crate::support::shared_dir;
use capstan::bundle::Bundle;
use capstan::install::plan::{PlanError, kind_info};
use capstan::install::{self, InstallTarget};
use serde_json::Value;

/// Bundle directories under operators/: `<pkg>/<ver>/` or `<pkg>/<ver>/bundle/`.
fn corpus_bundles() -> Vec<PathBuf> {
    let root = shared_dir().join("corpus/community-operators-prod/operators");
    let mut out = Vec::new();
    for pkg in std::fs::read_dir(&root).expect("corpus operators/ directory").flatten() {
        let pkg = pkg.path();
        for ver in std::fs::read_dir(&pkg).into_iter().flatten().flatten() {
            let ver = ver.path();
            for dir in [ver.clone(), ver.join("bundle")] {
                if dir.join("manifests").is_dir() && dir.join("metadata").is_dir() {
                    out.push(dir);
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_corpus_bundle_plans_in_olm_order() {
    let bundles = corpus_bundles();
    assert!(bundles.len() >= 241, "expected the 241 corpus bundles, found {}", bundles.len());
    let mut planned = 0;
    let mut unsupported = Vec::new();
    for dir in &bundles {
        let b = Bundle::load(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let t = InstallTarget {
            namespace: "operators".into(),
            target_namespaces: vec!["operators".into()],
            package: b.package().into(),
            csv_name: b.name().into(),
            ..Default::default()
        };
        let steps = match install::steps(&b, &t) {
            Ok(s) => s,
            Err(PlanError::UnsupportedResource { objects, .. }) => {
                unsupported.push(format!("{}: {}", dir.display(), objects.join(", ")));
                continue;
            }
            Err(e) => panic!("{}: {e}", dir.display()),
        };
        planned += 1;
        let ranks: Vec<u8> = steps.iter().map(|s| kind_info(&s.kind).map(|k| k.rank).unwrap_or(u8::MAX)).collect();
        assert!(
            ranks.windows(2).all(|w| w[0] <= w[1]),
            "{}: steps out of order: {:?}",
            dir.display(),
            steps.iter().map(|s| &s.kind).collect::<Vec<_>>()
        );
        assert_eq!(steps.iter().filter(|s| s.kind == "ClusterServiceVersion").count(), 1, "{}", dir.display());
        assert!(steps.len() >= b.objects.len(), "{}: every bundle object is a step", dir.display());
        let deployments = b
            .csv()
            .value()
            .pointer("/spec/install/spec/deployments")
            .and_then(Value::as_array)
            .map(Vec::len)
            .unwrap_or(0);
        assert_eq!(steps.iter().filter(|s| s.kind == "Deployment").count(), deployments, "{}", dir.display());
        for s in &steps {
            assert!(!s.name.is_empty() && !s.version.is_empty(), "{}: {}", dir.display(), s.describe());
            assert_eq!(s.resolving, b.name());
            let namespaced = kind_info(&s.kind).is_some_and(|k| k.namespaced);
            // OLM's extension-apiserver-authentication-reader binding of a webhook or APIService
            // Deployment lives in kube-system (install::webhook).
            let ns = if s.kind == "RoleBinding" && s.name.ends_with("-service-auth-reader") {
                "kube-system"
            } else {
                "operators"
            };
            assert_eq!(s.namespace.as_deref(), namespaced.then_some(ns), "{}: {}", dir.display(), s.describe());
            if s.manifest.pointer("/metadata/labels/olm.permissions.hash").is_some() {
                // OLM's own cut (`rbac.go` generateName) lets a name of 64 characters through;
                // capstan names RBAC exactly as OLM does, and RBAC names may be that long.
                assert!(s.name.len() <= 64, "{}: generated name too long: {}", dir.display(), s.name);
            }
        }
    }
    // OLM refuses these too; print them so a change in the corpus is visible.
    eprintln!(
        "{planned} bundles planned; {} refused as UnsupportedResource:\n{}",
        unsupported.len(),
        unsupported.join("\n")
    );
    assert!(planned + unsupported.len() == bundles.len());
    assert!(planned >= bundles.len() * 9 / 10, "most real bundles must plan: {planned} of {}", bundles.len());
}
