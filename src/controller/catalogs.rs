//! [`CatalogStore`]: what the controller knows of every CatalogSource's catalog — being loaded,
//! loaded ([`LoadedIndex`]), or failed with the error people see — keyed by the CatalogSource's
//! namespace and name. Written by the CatalogSource reconciler, read by the Subscription
//! reconciler (catalog health, resolution input) and the InstallPlan reconciler.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::resolve::{CatalogIndex, CatalogSourceKey};

/// A catalog loaded from a CatalogSource's image.
#[derive(Debug, Clone)]
pub struct LoadedIndex {
    /// The image reference as written in `spec.image`.
    pub image: String,
    /// The digest the reference resolved to (`sha256:…`).
    pub digest: String,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// The resolver's index of the catalog.
    pub index: Arc<CatalogIndex>,
    /// The catalog's PackageManifests and content for discovery (`kubectl get packagemanifests`,
    /// the catalog content endpoint), built with the load when [`super::Options::discovery`] is on.
    pub served: Option<Arc<crate::discovery::served::ServedCatalog>>,
    /// The catalog's bundles that have no image, by name, with their `olm.bundle.object`
    /// properties: installed from the catalog alone, as OLM installs them ([`inline_bundles`]).
    pub inline: Arc<BTreeMap<String, crate::catalog::model::Bundle>>,
    /// The ConfigMap a `configmap` / `internal` source was read from, as
    /// `status.configMapReference` shows it; `None` for the other sources.
    pub config_map: Option<crate::api::catalogsource::ConfigMapResourceReference>,
}

/// The bundles of `config` without an image that hold their objects (`olm.bundle.object`), by
/// name: what [`LoadedIndex::inline`] keeps (the resolver's index drops the objects).
pub fn inline_bundles(
    config: &crate::catalog::model::DeclarativeConfig,
) -> BTreeMap<String, crate::catalog::model::Bundle> {
    config
        .bundles
        .iter()
        .filter(|b| {
            b.image.is_empty() && b.properties.iter().any(|p| p.type_ == crate::catalog::property::BUNDLE_OBJECT)
        })
        .map(|b| (b.name.clone(), b.clone()))
        .collect()
}

/// The state of one CatalogSource's catalog.
#[derive(Debug, Clone)]
pub enum CatalogState {
    /// The first pull is running; nothing was loaded yet.
    Loading,
    /// Loaded and current.
    Ready(LoadedIndex),
    /// The last load failed with `error` (a sentence naming the image and what to do); `last` is
    /// what an earlier load gave, still used for resolution (a registry outage does not make
    /// installed operators unresolvable).
    Failed {
        /// Why the catalog could not be loaded.
        error: String,
        /// The catalog of the last successful load, if any.
        last: Option<LoadedIndex>,
    },
}

impl CatalogState {
    /// The catalog to resolve against: the current one, or the last one of a failed source.
    pub fn index(&self) -> Option<&LoadedIndex> {
        match self {
            CatalogState::Ready(l) | CatalogState::Failed { last: Some(l), .. } => Some(l),
            _ => None,
        }
    }

    /// The load error, when the last load failed.
    pub fn error(&self) -> Option<&str> {
        match self {
            CatalogState::Failed { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// What a change of a catalog's state means for the Subscriptions that see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogChange {
    /// Nothing a Subscription shows or resolves against changed.
    None,
    /// A new digest or priority was loaded (or the first one).
    NewContent,
    /// The catalog is healthy again with the content it had; or the error changed.
    Health,
}

/// Every CatalogSource's [`CatalogState`], keyed by (namespace, name). Cheap to share (`Arc` inside
/// the [`super::Context`]); every method takes the lock once.
#[derive(Debug, Default)]
pub struct CatalogStore {
    states: Mutex<BTreeMap<(String, String), CatalogState>>,
}

impl CatalogStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), CatalogState>> {
        self.states.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `key` as being loaded, unless something is known of it already.
    pub fn loading(&self, key: &(String, String)) {
        self.lock().entry(key.clone()).or_insert(CatalogState::Loading);
    }

    /// Records a successful load of `key`.
    pub fn ready(&self, key: &(String, String), loaded: LoadedIndex) -> CatalogChange {
        let old = self.lock().insert(key.clone(), CatalogState::Ready(loaded.clone()));
        match old {
            Some(CatalogState::Ready(o)) if o.digest == loaded.digest && o.priority == loaded.priority => {
                CatalogChange::None
            }
            Some(CatalogState::Failed { last: Some(o), .. })
                if o.digest == loaded.digest && o.priority == loaded.priority =>
            {
                CatalogChange::Health
            }
            _ => CatalogChange::NewContent,
        }
    }

    /// Records a failed load of `key` with `error`, keeping the last loaded catalog.
    pub fn failed(&self, key: &(String, String), error: String) -> CatalogChange {
        let mut states = self.lock();
        let (same, last) = match states.remove(key) {
            Some(CatalogState::Ready(l)) => (false, Some(l)),
            Some(CatalogState::Failed { error: e, last }) => (e == error, last),
            Some(CatalogState::Loading) | None => (false, None),
        };
        states.insert(key.clone(), CatalogState::Failed { error, last });
        if same { CatalogChange::None } else { CatalogChange::Health }
    }

    /// The state of `key`, if the CatalogSource reconciler has seen it.
    pub fn get(&self, key: &(String, String)) -> Option<CatalogState> {
        self.lock().get(key).cloned()
    }

    /// The loaded catalog of `key` (current, or the last one of a failed source).
    pub fn index(&self, key: &CatalogSourceKey) -> Option<LoadedIndex> {
        self.lock().get(&(key.namespace.clone(), key.name.clone())).and_then(|s| s.index().cloned())
    }

    /// The states of `keys` that are known, in the order of `keys`.
    pub fn states_of<'a>(
        &self,
        keys: impl IntoIterator<Item = &'a (String, String)>,
    ) -> Vec<((String, String), CatalogState)> {
        let states = self.lock();
        keys.into_iter().filter_map(|k| states.get(k).map(|s| (k.clone(), s.clone()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(digest: &str) -> LoadedIndex {
        LoadedIndex {
            image: "r/c:1".into(),
            digest: digest.into(),
            priority: 0,
            index: Arc::new(CatalogIndex::default()),
            served: None,
            inline: Default::default(),
            config_map: None,
        }
    }

    #[test]
    fn states_and_changes() {
        let s = CatalogStore::default();
        let k = ("ns".to_string(), "c".to_string());
        s.loading(&k);
        assert!(matches!(s.get(&k), Some(CatalogState::Loading)));
        assert_eq!(s.ready(&k, loaded("a")), CatalogChange::NewContent);
        assert_eq!(s.ready(&k, loaded("a")), CatalogChange::None);
        s.loading(&k);
        assert!(matches!(s.get(&k), Some(CatalogState::Ready(_))), "loading never hides what is loaded");
        assert_eq!(s.failed(&k, "down".into()), CatalogChange::Health);
        assert_eq!(s.failed(&k, "down".into()), CatalogChange::None);
        assert_eq!(s.failed(&k, "other".into()), CatalogChange::Health);
        let st = s.get(&k).unwrap();
        assert_eq!(st.error(), Some("other"));
        assert_eq!(st.index().map(|l| l.digest.as_str()), Some("a"), "the last catalog stays for resolution");
        assert_eq!(s.ready(&k, loaded("a")), CatalogChange::Health, "recovered with the same content");
        assert_eq!(s.ready(&k, loaded("b")), CatalogChange::NewContent);
        let k2 = ("ns".to_string(), "d".to_string());
        assert_eq!(s.failed(&k2, "x".into()), CatalogChange::Health);
        assert!(s.get(&k2).unwrap().index().is_none());
        assert_eq!(s.states_of([&k2, &("x".to_string(), "y".to_string())]).len(), 1);
    }
}
