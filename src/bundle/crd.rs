//! Typed read access to a CustomResourceDefinition in a bundle (apiextensions.k8s.io v1 and
//! v1beta1), kept as raw JSON like every manifest.

use serde_json::Value;

use super::{Manifest, str_at};

/// A borrowed view of a CRD manifest in a bundle, as written (the API type is k8s-openapi's
/// `CustomResourceDefinition`).
#[derive(Debug, Clone, Copy)]
pub struct CrdView<'a> {
    manifest: &'a Manifest,
}

/// One served/stored version of a CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdVersion {
    /// Version name, e.g. `v1`.
    pub name: String,
    /// Whether the API server serves it.
    pub served: bool,
    /// Whether objects are stored in it (exactly one version is).
    pub storage: bool,
}

impl<'a> CrdView<'a> {
    /// The view of `manifest` when it is a CRD.
    pub fn new(manifest: &'a Manifest) -> Option<Self> {
        manifest.is_crd().then_some(CrdView { manifest })
    }

    /// The manifest (file, document, raw object).
    pub fn manifest(&self) -> &'a Manifest {
        self.manifest
    }

    /// `metadata.name` (`<plural>.<group>`).
    pub fn name(&self) -> &'a str {
        self.manifest.name()
    }

    /// `spec.group`.
    pub fn group(&self) -> &'a str {
        str_at(&self.manifest.value, "/spec/group")
    }

    /// `spec.names.kind`.
    pub fn kind(&self) -> &'a str {
        str_at(&self.manifest.value, "/spec/names/kind")
    }

    /// `spec.names.plural`.
    pub fn plural(&self) -> &'a str {
        str_at(&self.manifest.value, "/spec/names/plural")
    }

    /// `spec.scope` (`Namespaced` or `Cluster`).
    pub fn scope(&self) -> &'a str {
        str_at(&self.manifest.value, "/spec/scope")
    }

    /// `spec.versions`; for a v1beta1 CRD with only `spec.version`, that version, served and
    /// stored (the API server's defaulting).
    pub fn versions(&self) -> Vec<CrdVersion> {
        let v = &self.manifest.value;
        let mut out: Vec<CrdVersion> = v
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .map(|x| CrdVersion {
                        name: str_at(x, "/name").to_string(),
                        served: x.get("served").and_then(Value::as_bool).unwrap_or(false),
                        storage: x.get("storage").and_then(Value::as_bool).unwrap_or(false),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let single = str_at(v, "/spec/version");
        if out.is_empty() && !single.is_empty() {
            out.push(CrdVersion { name: single.to_string(), served: true, storage: true });
        }
        out
    }

    /// The storage version's name, if exactly one version is marked storage.
    pub fn storage_version(&self) -> Option<String> {
        let stored: Vec<CrdVersion> = self.versions().into_iter().filter(|v| v.storage).collect();
        match stored.as_slice() {
            [one] => Some(one.name.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn manifest(v: Value) -> Manifest {
        Manifest { path: PathBuf::from("manifests/crd.yaml"), document: 0, value: v }
    }

    #[test]
    fn versions_of_v1_and_legacy_v1beta1() {
        let m = manifest(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "kaiwuclusters.kaiwu.inspur.com"},
            "spec": {"group": "kaiwu.inspur.com", "scope": "Namespaced",
                     "names": {"kind": "KaiwuCluster", "plural": "kaiwuclusters"},
                     "versions": [{"name": "v1", "served": true, "storage": true},
                                  {"name": "v2alpha1", "served": true, "storage": false}]}}));
        let crd = CrdView::new(&m).unwrap();
        assert_eq!(
            (crd.group(), crd.kind(), crd.plural(), crd.scope()),
            ("kaiwu.inspur.com", "KaiwuCluster", "kaiwuclusters", "Namespaced")
        );
        assert_eq!(crd.versions().len(), 2);
        assert_eq!(crd.storage_version().as_deref(), Some("v1"));

        let old = manifest(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "a.b"}, "spec": {"group": "b", "version": "v1alpha1", "names": {"kind": "A", "plural": "a"}}}));
        let crd = CrdView::new(&old).unwrap();
        assert_eq!(crd.versions(), vec![CrdVersion { name: "v1alpha1".into(), served: true, storage: true }]);
        assert!(CrdView::new(&manifest(serde_json::json!({"kind": "Service"}))).is_none());
    }
}
