//! Catalog image push → pull / load round trips against a real `docker-registry` on loopback
//! (`capstan catalog push DIR REF`, `capstan catalog pull REF DIR`, loading a catalog
//! image into memory by digest with a disk cache keyed by digest).

use std::collections::BTreeMap;

use crate::support::oci::{cache_dir, dead_registry, files, registry};
use crate::support::shared_dir;
use capstan::catalog::image::{
    CatalogCache, CatalogImageError, LABEL_CONFIGS, load_catalog_image, pull_catalog, push_catalog,
};
use capstan::catalog::parse;
use capstan::oci::layer::{self, LayerEntry};
use capstan::oci::{ClientConfig, ImageToPush, Registry, parse_reference};

/// A catalog directory made of two real v4.20 packages.
fn catalog_dir() -> tempfile::TempDir {
    let src = shared_dir().join("corpus/community-operators-prod/catalogs/v4.20");
    let dir = tempfile::tempdir().unwrap();
    for pkg in ["ecr-secret-operator", "nfs-provisioner-operator"] {
        for e in walkdir::WalkDir::new(src.join(pkg)) {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(&src).unwrap();
            let to = dir.path().join(rel);
            if e.file_type().is_dir() {
                std::fs::create_dir_all(&to).unwrap();
            } else {
                std::fs::copy(e.path(), &to).unwrap();
            }
        }
    }
    dir
}

#[test]
fn catalog_push_load_gives_the_same_catalog_and_second_load_uses_the_cache() {
    crate::support::run("oci_catalog", 0, async {
        let addr = crate::support::registry();
        let dir = catalog_dir();
        let expected = parse::load_path(dir.path()).unwrap();
        assert!(!expected.bundles.is_empty());
        let blobs = cache_dir();
        let reg = registry(&blobs);
        let reference = parse_reference(&format!("{addr}/capstan-test/catalog:v4.20")).unwrap();
        let pushed = push_catalog(&reg, dir.path(), &reference).await.unwrap();

        let catalogs = cache_dir();
        let cache = CatalogCache::new(catalogs.path());
        // A client with no blob cache: the first load must read the image from the registry.
        let fresh = Registry::new(ClientConfig { quiet: true, ..Default::default() });
        let first = load_catalog_image(&fresh, &reference, Some(&cache)).await.unwrap();
        assert_eq!(first.digest, pushed.digest);
        assert!(!first.from_cache);
        assert_eq!(first.config, expected);
        let fbc_bytes: u64 = files(dir.path()).values().map(|v| v.len() as u64).sum();
        assert_eq!(first.size_bytes, fbc_bytes);

        // Same tag again: one tag lookup, and the parsed catalog comes from the cache.
        let second = load_catalog_image(&fresh, &reference, Some(&cache)).await.unwrap();
        assert!(second.from_cache);
        assert_eq!(second.config, expected);
        assert_eq!(second.size_bytes, fbc_bytes);

        // The digest on an address where nothing listens: only the cache can answer.
        let dead = dead_registry();
        let offline = parse_reference(&format!("{dead}/capstan-test/catalog@{}", pushed.digest)).unwrap();
        let third = load_catalog_image(&fresh, &offline, Some(&cache)).await.unwrap();
        assert!(third.from_cache);
        assert_eq!(third.config, expected);
        // Without the catalog cache the same load fails, naming the registry.
        let err = load_catalog_image(&fresh, &offline, None).await.unwrap_err().to_string();
        assert!(err.contains(&dead), "{err}");
    })
}

#[test]
fn catalog_pull_writes_the_configs_directory() {
    crate::support::run("oci_catalog", 0, async {
        let addr = crate::support::registry();
        let dir = catalog_dir();
        let blobs = cache_dir();
        let reg = registry(&blobs);
        let reference = parse_reference(&format!("{addr}/capstan-test/catalog-pull:v1")).unwrap();
        let pushed = push_catalog(&reg, dir.path(), &reference).await.unwrap();
        let again = push_catalog(&reg, dir.path(), &reference).await.unwrap();
        assert_eq!(pushed.digest, again.digest);
        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("catalog");
        let pulled = pull_catalog(&reg, &reference, &dest).await.unwrap();
        assert_eq!(pulled.digest, pushed.digest);
        assert_eq!(pulled.configs_dir, "/configs");
        assert_eq!(files(dir.path()), files(&dest));
    })
}

#[test]
fn catalog_label_names_the_directory_and_bad_content_names_the_file() {
    crate::support::run("oci_catalog", 0, async {
        let addr = crate::support::registry();
        // An image built elsewhere that keeps its FBC under /catalog (label says so) and other files
        // outside it, which must be ignored.
        let good = r#"{"schema":"olm.package","name":"demo","defaultChannel":"alpha"}
{"schema":"olm.channel","package":"demo","name":"alpha","entries":[{"name":"demo.v1.0.0"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.0.0","image":"quay.io/x/demo-bundle:v1.0.0","properties":[{"type":"olm.package","value":{"packageName":"demo","version":"1.0.0"}}]}
"#;
        let push = |files: Vec<LayerEntry>, label: &str, tag: &str| {
            let built = layer::build_layer(files).unwrap();
            let labels = BTreeMap::from([(LABEL_CONFIGS.to_string(), label.to_string())]);
            let image = ImageToPush {
                config: layer::image_config(&labels, std::slice::from_ref(&built.diff_id)),
                layers: vec![built.blob],
                annotations: BTreeMap::new(),
            };
            let reference = parse_reference(&format!("{addr}/capstan-test/labelled:{tag}")).unwrap();
            (image, reference)
        };
        let blobs = cache_dir();
        let reg = registry(&blobs);
        let (image, reference) = push(
            vec![
                LayerEntry::File("catalog/demo/index.json".into(), good.as_bytes().to_vec(), false),
                LayerEntry::File("bin/opm".into(), b"\x7fELF".to_vec(), false),
            ],
            "/catalog",
            "good",
        );
        reg.push(&reference, &image).await.unwrap();
        let loaded = load_catalog_image(&reg, &reference, None).await.unwrap();
        assert_eq!(loaded.config.packages.len(), 1);
        assert_eq!(loaded.config.packages[0].name, "demo");

        let (image, reference) = push(
            vec![LayerEntry::File("catalog/demo/index.json".into(), b"{\"schema\": ".to_vec(), false)],
            "/catalog",
            "broken",
        );
        reg.push(&reference, &image).await.unwrap();
        let err = load_catalog_image(&reg, &reference, None).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, CatalogImageError::Content { .. }), "{text}");
        assert!(text.contains("labelled:broken") && text.contains("/catalog/demo/index.json"), "{text}");
        assert!(!text.contains("capstan-catalog-"), "scratch paths must not leak: {text}");
    })
}
