//! The Subscription's `spec.config` and how it is merged into the Deployments of a CSV.
//!
//! Merge rules are OLM's (\[OLM\] `pkg/controller/operators/olm/overrides/inject/inject.go`,
//! applied in the order of `overrides/initializer.go`; `reference/olm-v0.md` §1.3):
//! - `env`: into every container; an entry overwrites the container's entry of the same name in
//!   place, new names are appended in the Subscription's order.
//! - `envFrom`: appended to every container unless an identical entry is already there.
//! - `volumes` (pod) and `volumeMounts` (every container): same-named entries are replaced, new
//!   ones appended.
//! - `tolerations`: appended unless an identical toleration is already there.
//! - `resources`: when set, replaces the resources of **every** container; when unset the
//!   containers' resources are left as they are (OLM issue #1912 was the opposite bug).
//! - `nodeSelector`: when set, replaces the pod's node selector.
//! - `affinity`: an empty `affinity: {}` removes the pod's affinity; otherwise each of
//!   `nodeAffinity`, `podAffinity`, `podAntiAffinity` that is set replaces the pod's one, and an
//!   empty one (`{}`) removes it. (OLM's code removes the whole affinity when `podAntiAffinity: {}`
//!   is given, which its own comment contradicts; capstan removes only `podAntiAffinity`.)
//! - `annotations`: added to the Deployment and its pod template; existing annotations win.
//!
//! `selector` is parsed and kept but, as in OLM, not injected into Deployments.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Affinity, EnvFromSource, EnvVar, PodSpec, Toleration, Volume, VolumeMount};
use serde_json::Value;

/// The Subscription's `spec.config`: the one type is [`crate::api::subscription::SubscriptionConfig`]
/// (what the API server stores); this module adds how it is read and merged into Deployments.
pub use crate::api::subscription::SubscriptionConfig;

/// A Subscription's `spec.config` that does not have the shape of a `SubscriptionConfig`.
#[derive(Debug, thiserror::Error)]
#[error("Subscription spec.config: {message}; fix the field (see `kubectl explain subscription.spec.config`)")]
pub struct ConfigError {
    /// serde's description of the problem, naming the field and position.
    pub message: String,
}

impl SubscriptionConfig {
    /// Reads a Subscription's `spec.config` object. `null` gives the empty config.
    ///
    /// # Errors
    /// [`ConfigError`] when a field has the wrong type (for example `env` not a list, or an `env`
    /// entry without `name`).
    pub fn from_value(value: &Value) -> Result<SubscriptionConfig, ConfigError> {
        if value.is_null() {
            return Ok(SubscriptionConfig::default());
        }
        let config: SubscriptionConfig =
            serde_json::from_value(value.clone()).map_err(|e| ConfigError { message: e.to_string() })?;
        config.check_names()?;
        Ok(config)
    }

    /// Checks that every `env`, `volumes` and `volumeMounts` entry has a name.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first nameless entry.
    pub fn check_names(&self) -> Result<(), ConfigError> {
        let config = self;
        // k8s-openapi defaults a missing `name` to "", which would merge into every nameless entry.
        let nameless = |field: &str, names: Vec<&str>| match names.iter().position(|n| n.is_empty()) {
            Some(i) => Err(ConfigError { message: format!("{field}[{i}] has no name; every entry needs a name") }),
            None => Ok(()),
        };
        nameless("env", config.env.iter().flatten().map(|e| e.name.as_str()).collect())?;
        nameless("volumes", config.volumes.iter().flatten().map(|v| v.name.as_str()).collect())?;
        nameless("volumeMounts", config.volume_mounts.iter().flatten().map(|v| v.name.as_str()).collect())?;
        Ok(())
    }

    /// Whether nothing is set (an empty list counts as unset, as in OLM's merge).
    pub fn is_empty(&self) -> bool {
        let none = |v: Option<usize>| v.unwrap_or(0) == 0;
        self.selector.is_none()
            && self.node_selector.is_none()
            && none(self.tolerations.as_ref().map(Vec::len))
            && self.resources.is_none()
            && none(self.env_from.as_ref().map(Vec::len))
            && none(self.env.as_ref().map(Vec::len))
            && none(self.volumes.as_ref().map(Vec::len))
            && none(self.volume_mounts.as_ref().map(Vec::len))
            && self.affinity.is_none()
            && self.annotations.is_none()
    }

    /// Applies this config to a Deployment with OLM's merge rules (module documentation), in
    /// OLM's order: env, envFrom, volumes, volumeMounts, tolerations, resources, nodeSelector,
    /// affinity, annotations.
    pub fn apply_to(&self, deployment: &mut Deployment) {
        let spec = deployment.spec.get_or_insert_with(Default::default);
        let pod = spec.template.spec.get_or_insert_with(Default::default);
        inject_env(pod, self.env.as_deref().unwrap_or_default());
        inject_env_from(pod, self.env_from.as_deref().unwrap_or_default());
        inject_volumes(pod, self.volumes.as_deref().unwrap_or_default());
        inject_volume_mounts(pod, self.volume_mounts.as_deref().unwrap_or_default());
        inject_tolerations(pod, self.tolerations.as_deref().unwrap_or_default());
        if let Some(r) = &self.resources {
            for c in &mut pod.containers {
                c.resources = Some(r.clone());
            }
        }
        if let Some(ns) = &self.node_selector {
            pod.node_selector = Some(ns.clone());
        }
        if let Some(a) = &self.affinity {
            override_affinity(pod, a);
        }
        if let Some(extra) = &self.annotations {
            let meta = &mut deployment.metadata;
            let mut merged = extra.clone();
            merged.extend(meta.annotations.take().unwrap_or_default());
            meta.annotations = Some(merged);
            let tmeta = deployment
                .spec
                .get_or_insert_with(Default::default)
                .template
                .metadata
                .get_or_insert_with(Default::default);
            let mut merged = extra.clone();
            merged.extend(tmeta.annotations.take().unwrap_or_default());
            tmeta.annotations = Some(merged);
        }
    }
}

/// Merges `new` into every container's env: same names overwritten in place, new names appended
/// in order (\[OLM\] `inject.go` `mergeEnvVars`).
pub(crate) fn inject_env(pod: &mut PodSpec, new: &[EnvVar]) {
    if new.is_empty() {
        return;
    }
    for c in &mut pod.containers {
        let mut env = c.env.take().unwrap_or_default();
        for n in new {
            match env.iter_mut().find(|e| e.name == n.name) {
                Some(e) => *e = n.clone(),
                None => env.push(n.clone()),
            }
        }
        c.env = Some(env);
    }
}

fn inject_env_from(pod: &mut PodSpec, new: &[EnvFromSource]) {
    if new.is_empty() {
        return;
    }
    for c in &mut pod.containers {
        let original = c.env_from.clone().unwrap_or_default();
        let mut merged = original.clone();
        for n in new {
            if !original.contains(n) {
                merged.push(n.clone());
            }
        }
        c.env_from = Some(merged);
    }
}

fn inject_volumes(pod: &mut PodSpec, new: &[Volume]) {
    if new.is_empty() {
        return;
    }
    let mut vols = pod.volumes.take().unwrap_or_default();
    for n in new {
        match vols.iter_mut().find(|v| v.name == n.name) {
            Some(v) => *v = n.clone(),
            None => vols.push(n.clone()),
        }
    }
    pod.volumes = Some(vols);
}

fn inject_volume_mounts(pod: &mut PodSpec, new: &[VolumeMount]) {
    if new.is_empty() {
        return;
    }
    for c in &mut pod.containers {
        let mut mounts = c.volume_mounts.take().unwrap_or_default();
        for n in new {
            match mounts.iter_mut().find(|m| m.name == n.name) {
                Some(m) => *m = n.clone(),
                None => mounts.push(n.clone()),
            }
        }
        c.volume_mounts = Some(mounts);
    }
}

fn inject_tolerations(pod: &mut PodSpec, new: &[Toleration]) {
    if new.is_empty() {
        return;
    }
    let original = pod.tolerations.clone().unwrap_or_default();
    let mut merged = original.clone();
    for n in new {
        if !original.contains(n) {
            merged.push(n.clone());
        }
    }
    pod.tolerations = Some(merged);
}

fn override_affinity(pod: &mut PodSpec, a: &Affinity) {
    let empty = Affinity::default();
    if a == &empty {
        pod.affinity = None;
        return;
    }
    let cur = pod.affinity.get_or_insert_with(Default::default);
    if let Some(n) = &a.node_affinity {
        cur.node_affinity = (n != &Default::default()).then(|| n.clone());
    }
    if let Some(p) = &a.pod_affinity {
        cur.pod_affinity = (p != &Default::default()).then(|| p.clone());
    }
    if let Some(p) = &a.pod_anti_affinity {
        cur.pod_anti_affinity = (p != &Default::default()).then(|| p.clone());
    }
    if pod.affinity.as_ref() == Some(&empty) {
        pod.affinity = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(v: Value) -> Deployment {
        serde_json::from_value(v).expect("test deployment")
    }

    fn base() -> Deployment {
        deployment(json!({
            "metadata": {"name": "d", "annotations": {"keep": "deployment"}},
            "spec": {
                "selector": {"matchLabels": {"app": "x"}},
                "template": {
                    "metadata": {"annotations": {"keep": "pod"}},
                    "spec": {
                        "nodeSelector": {"disk": "ssd"},
                        "tolerations": [{"key": "a", "operator": "Exists"}],
                        "volumes": [{"name": "v1", "emptyDir": {}}],
                        "containers": [
                            {"name": "c1", "image": "i",
                             "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                             "envFrom": [{"configMapRef": {"name": "cm"}}],
                             "volumeMounts": [{"name": "v1", "mountPath": "/v1"}],
                             "resources": {"limits": {"cpu": "500m"}}},
                            {"name": "c2", "image": "i"}
                        ]
                    }
                }
            }
        }))
    }

    fn cfg(v: Value) -> SubscriptionConfig {
        SubscriptionConfig::from_value(&v).expect("config")
    }

    fn pod(d: &Deployment) -> &PodSpec {
        d.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod spec")
    }

    #[test]
    fn env_overwrites_in_place_and_appends_new_names_to_every_container() {
        let mut d = base();
        cfg(json!({"env": [{"name": "C", "value": "3"}, {"name": "A", "value": "x"}]})).apply_to(&mut d);
        let p = pod(&d);
        let names = |i: usize| -> Vec<(String, Option<String>)> {
            p.containers[i].env.clone().unwrap_or_default().into_iter().map(|e| (e.name, e.value)).collect()
        };
        assert_eq!(
            names(0),
            vec![("A".into(), Some("x".into())), ("B".into(), Some("2".into())), ("C".into(), Some("3".into()))]
        );
        assert_eq!(names(1), vec![("C".into(), Some("3".into())), ("A".into(), Some("x".into()))]);
    }

    #[test]
    fn resources_untouched_when_unset_olm_issue_1912() {
        let mut d = base();
        cfg(json!({"env": [{"name": "X", "value": "1"}]})).apply_to(&mut d);
        let p = pod(&d);
        let limits = p.containers[0].resources.as_ref().and_then(|r| r.limits.as_ref()).expect("limits kept");
        assert_eq!(limits.get("cpu").map(|q| q.0.as_str()), Some("500m"));
        assert!(p.containers[1].resources.is_none());
    }

    #[test]
    fn resources_when_set_replace_every_container() {
        let mut d = base();
        cfg(json!({"resources": {"requests": {"memory": "1Gi"}}})).apply_to(&mut d);
        for c in &pod(&d).containers {
            let r = c.resources.as_ref().expect("resources");
            assert!(r.limits.is_none(), "{}: old limits must be gone", c.name);
            assert_eq!(r.requests.as_ref().and_then(|q| q.get("memory")).map(|q| q.0.as_str()), Some("1Gi"));
        }
    }

    #[test]
    fn env_from_and_tolerations_append_unless_identical() {
        let mut d = base();
        cfg(json!({
            "envFrom": [{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "s"}}],
            "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]
        }))
        .apply_to(&mut d);
        let p = pod(&d);
        assert_eq!(p.containers[0].env_from.as_ref().map(Vec::len), Some(2));
        assert_eq!(p.containers[1].env_from.as_ref().map(Vec::len), Some(2));
        let keys: Vec<_> = p.tolerations.clone().unwrap_or_default().into_iter().map(|t| t.key).collect();
        assert_eq!(keys, vec![Some("a".to_string()), Some("b".to_string())]);
    }

    #[test]
    fn volumes_and_mounts_replace_same_names() {
        let mut d = base();
        cfg(json!({
            "volumes": [{"name": "v1", "configMap": {"name": "cm"}}, {"name": "v2", "emptyDir": {}}],
            "volumeMounts": [{"name": "v1", "mountPath": "/new"}]
        }))
        .apply_to(&mut d);
        let p = pod(&d);
        let vols = p.volumes.clone().unwrap_or_default();
        assert_eq!(vols.len(), 2);
        assert!(vols[0].config_map.is_some() && vols[0].empty_dir.is_none());
        let m = p.containers[0].volume_mounts.clone().unwrap_or_default();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].mount_path, "/new");
        assert_eq!(p.containers[1].volume_mounts.clone().unwrap_or_default().len(), 1);
    }

    #[test]
    fn node_selector_replaces_and_annotations_do_not_override() {
        let mut d = base();
        cfg(json!({"nodeSelector": {"zone": "a"}, "annotations": {"keep": "config", "new": "n"}})).apply_to(&mut d);
        let p = pod(&d);
        assert_eq!(
            p.node_selector.clone().unwrap_or_default().into_iter().collect::<Vec<_>>(),
            vec![("zone".to_string(), "a".to_string())]
        );
        let da = d.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(da.get("keep").map(String::as_str), Some("deployment"));
        assert_eq!(da.get("new").map(String::as_str), Some("n"));
        let pa = d
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default();
        assert_eq!(pa.get("keep").map(String::as_str), Some("pod"));
        assert_eq!(pa.get("new").map(String::as_str), Some("n"));
    }

    #[test]
    fn unset_config_changes_nothing() {
        let mut d = base();
        SubscriptionConfig::default().apply_to(&mut d);
        assert_eq!(d, base());
    }

    #[test]
    fn affinity_override_rules() {
        let with_affinity = || {
            let mut d = base();
            cfg(json!({"affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}
            }}))
            .apply_to(&mut d);
            d
        };
        let d = with_affinity();
        let a = pod(&d).affinity.clone().expect("affinity set");
        assert!(a.node_affinity.is_some() && a.pod_anti_affinity.is_some());

        let mut d = with_affinity();
        cfg(json!({"affinity": {"podAntiAffinity": {}}})).apply_to(&mut d);
        let a = pod(&d).affinity.clone().expect("node affinity remains");
        assert!(a.node_affinity.is_some() && a.pod_anti_affinity.is_none());

        let mut d = with_affinity();
        cfg(json!({"affinity": {}})).apply_to(&mut d);
        assert!(pod(&d).affinity.is_none());
    }

    #[test]
    fn bad_config_names_the_field() {
        let err = SubscriptionConfig::from_value(&json!({"env": {"A": "1"}})).expect_err("env must be a list");
        assert!(err.to_string().contains("spec.config"), "{err}");
        let err =
            SubscriptionConfig::from_value(&json!({"env": [{"value": "1"}]})).expect_err("env entry needs a name");
        assert!(err.to_string().contains("name"), "{err}");
    }
}
