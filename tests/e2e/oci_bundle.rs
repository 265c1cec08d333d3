//! Bundle image push → pull round trips against a real `docker-registry` on loopback
//! (`capstan bundle push DIR REF`, `capstan bundle pull REF DIR`).

use std::collections::BTreeMap;

use crate::support::oci::{cache_dir, files, registry};
use crate::support::shared_dir;
use capstan::bundle::image::{BundleImageError, pull_bundle, push_bundle};
use capstan::oci::layer::{self, LayerEntry};
use capstan::oci::{ImageToPush, parse_reference};

fn corpus_bundle(package: &str, version: &str) -> std::path::PathBuf {
    shared_dir().join("corpus/community-operators-prod/operators").join(package).join(version)
}

#[test]
fn bundle_push_pull_gives_identical_files_and_stable_digest() {
    crate::support::run("oci_bundle", 0, async {
        let addr = crate::support::registry();
        let src = corpus_bundle("etcd", "0.9.4");
        assert!(src.join("metadata/annotations.yaml").is_file(), "corpus bundle missing at {}", src.display());
        let cache = cache_dir();
        let reg = registry(&cache);
        let reference = parse_reference(&format!("{addr}/capstan-test/etcd-bundle:v0.9.4")).unwrap();
        let first = push_bundle(&reg, &src, &reference).await.unwrap();
        let second = push_bundle(&reg, &src, &reference).await.unwrap();
        assert_eq!(first.digest, second.digest, "pushing the same directory twice must give the same digest");

        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("bundle");
        let pulled = pull_bundle(&reg, &reference, &dest).await.unwrap();
        assert_eq!(pulled.digest, first.digest);
        assert_eq!(files(&src), files(&dest));
        assert_eq!(pulled.labels["operators.operatorframework.io.bundle.package.v1"], "etcd");
        assert_eq!(pulled.labels["operators.operatorframework.io.bundle.mediatype.v1"], "registry+v1");

        // Pulling into a non-empty directory is refused, and nothing there is touched.
        let err = pull_bundle(&reg, &reference, &dest).await.unwrap_err();
        assert!(matches!(err, BundleImageError::DestinationNotEmpty { .. }), "{err}");
    })
}

#[test]
fn multi_layer_bundle_with_whiteouts_unpacks_like_a_runtime() {
    crate::support::run("oci_bundle", 0, async {
        // A bundle image built by `docker build` has one layer per COPY; a later layer may replace or
        // delete files of an earlier one.
        let addr = crate::support::registry();
        let l1 = layer::build_layer(vec![
            LayerEntry::Dir("manifests".into()),
            LayerEntry::File("manifests/csv.yaml".into(), b"old csv\n".to_vec(), false),
            LayerEntry::File("manifests/stale.crd.yaml".into(), b"stale\n".to_vec(), false),
        ])
        .unwrap();
        let l2 = layer::build_layer(vec![
            LayerEntry::Dir("manifests".into()),
            LayerEntry::File("manifests/csv.yaml".into(), b"new csv\n".to_vec(), false),
            LayerEntry::File("manifests/.wh.stale.crd.yaml".into(), Vec::new(), false),
            LayerEntry::Dir("metadata".into()),
            LayerEntry::File(
                "metadata/annotations.yaml".into(),
                b"annotations:\n  operators.operatorframework.io.bundle.package.v1: demo\n".to_vec(),
                false,
            ),
        ])
        .unwrap();
        let labels = BTreeMap::from([(
            "operators.operatorframework.io.bundle.mediatype.v1".to_string(),
            "registry+v1".to_string(),
        )]);
        let image = ImageToPush {
            config: layer::image_config(&labels, &[l1.diff_id.clone(), l2.diff_id.clone()]),
            layers: vec![l1.blob, l2.blob],
            annotations: BTreeMap::new(),
        };
        let cache = cache_dir();
        let reg = registry(&cache);
        let reference = parse_reference(&format!("{addr}/capstan-test/layered-bundle:v1")).unwrap();
        reg.push(&reference, &image).await.unwrap();
        let out = tempfile::tempdir().unwrap();
        pull_bundle(&reg, &reference, out.path()).await.unwrap();
        let got = files(out.path());
        assert_eq!(got.get("manifests/csv.yaml").map(Vec::as_slice), Some(&b"new csv\n"[..]));
        assert!(!got.contains_key("manifests/stale.crd.yaml"), "{:?}", got.keys());
        assert!(!got.keys().any(|k| k.contains(".wh.")), "{:?}", got.keys());
        assert!(got.contains_key("metadata/annotations.yaml"));
    })
}

#[test]
fn an_image_that_is_not_a_bundle_is_named() {
    crate::support::run("oci_bundle", 0, async {
        let addr = crate::support::registry();
        let built = layer::build_layer(vec![LayerEntry::File("etc/motd".into(), b"hi".to_vec(), false)]).unwrap();
        let image = ImageToPush {
            config: layer::image_config(&BTreeMap::new(), std::slice::from_ref(&built.diff_id)),
            layers: vec![built.blob],
            annotations: BTreeMap::new(),
        };
        let cache = cache_dir();
        let reg = registry(&cache);
        let reference = parse_reference(&format!("{addr}/capstan-test/not-a-bundle:v1")).unwrap();
        reg.push(&reference, &image).await.unwrap();
        let out = tempfile::tempdir().unwrap();
        let err = pull_bundle(&reg, &reference, &out.path().join("b")).await.unwrap_err().to_string();
        assert!(err.contains("not-a-bundle:v1") && err.contains("annotations.yaml"), "{err}");
        // A failed pull keeps nothing: the directory it created is gone, so a retry fails for the
        // same reason and not because the destination is now non-empty.
        assert!(!out.path().join("b").exists(), "a failed pull left {}", out.path().join("b").display());
        let again = pull_bundle(&reg, &reference, &out.path().join("b")).await.unwrap_err().to_string();
        assert_eq!(again, err);
        // An existing empty destination is left empty.
        std::fs::create_dir(out.path().join("c")).unwrap();
        pull_bundle(&reg, &reference, &out.path().join("c")).await.unwrap_err();
        assert_eq!(std::fs::read_dir(out.path().join("c")).unwrap().count(), 0);
    })
}

#[test]
fn docker_v2_bundle_images_are_read_too() {
    crate::support::run("oci_bundle", 0, async {
        // `docker build` + `docker push` of operator-sdk's bundle.Dockerfile gives a Docker v2
        // schema 2 manifest with Docker media types; pulls must read it like an OCI one.
        let addr = crate::support::registry();
        let src = corpus_bundle("etcd", "0.9.4");
        let image = capstan::bundle::image::build_bundle_image(&src).unwrap();
        let mut layer = image.layers[0].clone();
        layer.descriptor.media_type = "application/vnd.docker.image.rootfs.diff.tar.gzip".into();
        let mut config = image.config.clone();
        config.descriptor.media_type = "application/vnd.docker.container.image.v1+json".into();
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": config.descriptor,
            "layers": [layer.descriptor],
        });
        let cache = cache_dir();
        let reg = registry(&cache);
        let reference = parse_reference(&format!("{addr}/capstan-test/docker-v2-bundle:v1")).unwrap();
        reg.push_manifest_and_blobs(
            &reference,
            [&layer, &config].into_iter(),
            serde_json::to_vec(&manifest).unwrap(),
            "application/vnd.docker.distribution.manifest.v2+json",
        )
        .await
        .unwrap();
        let out = tempfile::tempdir().unwrap();
        let pulled = pull_bundle(&reg, &reference, out.path()).await.unwrap();
        assert_eq!(pulled.labels["operators.operatorframework.io.bundle.package.v1"], "etcd");
        assert_eq!(files(&src), files(out.path()));
    })
}
