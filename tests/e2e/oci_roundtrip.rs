//! Registry round trips against a real `docker-registry` on loopback: push an OCI image with a
//! config and one layer over plain HTTP and pull it back by digest byte for byte; the blob cache
//! serves a second pull without the registry; credentials from a docker config file and from a pull
//! secret.

use std::collections::BTreeMap;

use crate::support::oci::{ExtraRegistry, cache_dir, dead_registry};
use base64::Engine as _;
use capstan::oci::layer::{self, LayerEntry};
use capstan::oci::{Blob, BlobCache, ClientConfig, DockerConfig, ImageToPush, OciError, Registry, parse_reference};

fn test_image(seed: &str) -> ImageToPush {
    let built = layer::build_layer(vec![
        LayerEntry::Dir("data".into()),
        LayerEntry::File("data/hello.txt".into(), format!("hello {seed}\n").into_bytes(), false),
    ])
    .unwrap();
    let mut labels = BTreeMap::new();
    labels.insert("org.example.seed".to_string(), seed.to_string());
    ImageToPush {
        config: layer::image_config(&labels, std::slice::from_ref(&built.diff_id)),
        layers: vec![built.blob],
        annotations: BTreeMap::new(),
    }
}

fn client(cache: Option<&tempfile::TempDir>) -> Registry {
    Registry::new(ClientConfig { cache: cache.map(|c| BlobCache::new(c.path())), quiet: true, ..Default::default() })
}

#[test]
fn oci_image_round_trips_by_digest_byte_for_byte() {
    crate::support::run("oci_roundtrip", 0, async {
        let addr = crate::support::registry();
        let image = test_image("roundtrip");
        let reference = parse_reference(&format!("{addr}/capstan-test/roundtrip:v1")).unwrap();
        let pushed = client(None).push(&reference, &image).await.unwrap();
        let manifest = image.manifest_bytes();
        assert_eq!(pushed.digest, capstan::oci::cache::sha256_digest(&manifest));
        assert_eq!(pushed.size, manifest.len() as u64);

        // The tag resolves to the pushed digest.
        let registry = client(None);
        assert_eq!(registry.resolve_digest(&reference).await.unwrap(), pushed.digest);

        // Pull by digest: every byte comes back.
        let by_digest = parse_reference(&format!("{addr}/capstan-test/roundtrip@{}", pushed.digest)).unwrap();
        let pulled = registry.pull(&by_digest).await.unwrap();
        assert_eq!(pulled.digest, pushed.digest);
        assert_eq!(pulled.manifest_bytes, manifest);
        assert_eq!(pulled.config, image.config.data);
        assert_eq!(pulled.layers.len(), 1);
        assert_eq!(pulled.layers[0].data, image.layers[0].data);
        assert_eq!(pulled.layers[0].descriptor.digest, image.layers[0].descriptor.digest);
        assert_eq!(pulled.labels().unwrap()["org.example.seed"], "roundtrip");
    })
}

#[test]
fn second_pull_of_a_digest_is_served_from_the_cache() {
    crate::support::run("oci_roundtrip", 0, async {
        let addr = crate::support::registry();
        let image = test_image("cache");
        let reference = parse_reference(&format!("{addr}/capstan-test/cache:v1")).unwrap();
        let pushed = client(None).push(&reference, &image).await.unwrap();
        let cache = cache_dir();
        let by_digest = parse_reference(&format!("{addr}/capstan-test/cache@{}", pushed.digest)).unwrap();
        let first = client(Some(&cache)).pull(&by_digest).await.unwrap();

        // Same repository and digest on a registry address where nothing listens: only the cache
        // can answer.
        let dead = dead_registry();
        let offline = parse_reference(&format!("{dead}/capstan-test/cache@{}", pushed.digest)).unwrap();
        let second = client(Some(&cache)).pull(&offline).await.unwrap();
        assert_eq!(second.manifest_bytes, first.manifest_bytes);
        assert_eq!(second.layers[0].data, first.layers[0].data);

        // Without the cache the dead registry is an error that names it.
        let err = client(None).pull(&offline).await.unwrap_err();
        assert!(matches!(err, OciError::Connect { .. }), "{err}");
        assert!(err.to_string().contains(&dead), "{err}");

        // A corrupted cache entry is not trusted: it is fetched again from the registry.
        let layer_path = BlobCache::new(cache.path()).path_for(&image.layers[0].descriptor.digest).unwrap();
        std::fs::write(&layer_path, b"garbage").unwrap();
        let third = client(Some(&cache)).pull(&by_digest).await.unwrap();
        assert_eq!(third.layers[0].data, image.layers[0].data);
    })
}

#[test]
fn unknown_image_is_named_with_its_registry() {
    crate::support::run("oci_roundtrip", 0, async {
        let addr = crate::support::registry();
        let reference = parse_reference(&format!("{addr}/capstan-test/does-not-exist:nope")).unwrap();
        let err = client(None).pull(&reference).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, OciError::NotFound { .. }), "{text}");
        assert!(text.contains(&format!("image {addr}/capstan-test/does-not-exist:nope not found in {addr}")), "{text}");
    })
}

#[test]
fn a_pushed_blob_that_does_not_match_its_digest_is_refused() {
    crate::support::run("oci_roundtrip", 0, async {
        let addr = crate::support::registry();
        let mut image = test_image("tamper");
        // Lie about the layer: the descriptor names other content. The registry checks the digest on
        // upload, so the push fails, and nothing is silently stored.
        image.layers[0] = Blob { descriptor: image.layers[0].descriptor.clone(), data: b"not the layer".to_vec() };
        let reference = parse_reference(&format!("{addr}/capstan-test/tamper:v1")).unwrap();
        let err = client(None).push(&reference, &image).await.unwrap_err();
        assert!(err.to_string().contains(&addr), "{err}");
    })
}

#[test]
fn auth_from_docker_config_file_and_pull_secret() {
    crate::support::run("oci_roundtrip", 0, async {
        let reg = ExtraRegistry::start(Some(("capstan", "s3cret-pw")));
        let addr = reg.addr.clone();
        let b64 = base64::engine::general_purpose::STANDARD.encode("capstan:s3cret-pw");
        let config_json = format!(r#"{{"auths":{{"{addr}":{{"auth":"{b64}"}}}}}}"#);
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("config.json");
        std::fs::write(&config_path, &config_json).unwrap();
        let file_auth = DockerConfig::from_file(&config_path).unwrap();

        let with_file = Registry::new(ClientConfig { auth: Some(file_auth), quiet: true, ..Default::default() });
        let reference = parse_reference(&format!("{addr}/private/app:v1")).unwrap();
        let image = test_image("auth");
        let pushed = with_file.push(&reference, &image).await.unwrap();

        // Anonymous: refused, with the registry named and a hint about credentials.
        let err = client(None).pull(&reference).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, OciError::Unauthorized { .. }), "{text}");
        assert!(text.contains(&addr) && text.contains("pull"), "{text}");
        assert!(text.contains("docker login") || text.contains("REGISTRY_AUTH_FILE"), "{text}");

        // A config file that has no entry for this registry: the error names the file read.
        let other_path = dir.path().join("other.json");
        std::fs::write(&other_path, r#"{"auths":{"quay.io":{"auth":"dTpw"}}}"#).unwrap();
        let err = Registry::new(ClientConfig {
            auth: Some(DockerConfig::from_file(&other_path).unwrap()),
            quiet: true,
            ..Default::default()
        })
        .pull(&reference)
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains(&other_path.display().to_string()) && err.contains(&addr), "{err}");

        // Wrong password: refused, naming where the credentials came from.
        let bad_b64 = base64::engine::general_purpose::STANDARD.encode("capstan:wrong");
        let bad = DockerConfig::from_config_json(
            format!(r#"{{"auths":{{"{addr}":{{"auth":"{bad_b64}"}}}}}}"#).as_bytes(),
            "secret ns/bad-pull-secret",
        )
        .unwrap();
        let err = Registry::new(ClientConfig { auth: Some(bad), quiet: true, ..Default::default() })
            .pull(&reference)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("secret ns/bad-pull-secret") && err.contains("rejected"), "{err}");

        // The config file and a pull secret's .dockerconfigjson both work.
        let pulled = with_file.pull(&reference).await.unwrap();
        assert_eq!(pulled.digest, pushed.digest);
        let secret_bytes = config_json.as_bytes();
        let secret = DockerConfig::from_pull_secret(
            capstan::oci::auth::SECRET_TYPE_DOCKER_CONFIG_JSON,
            |k| (k == capstan::oci::auth::DOCKER_CONFIG_JSON_KEY).then_some(secret_bytes),
            "secret ns/pull-secret",
        )
        .unwrap();
        let pulled = Registry::new(ClientConfig { auth: Some(secret), quiet: true, ..Default::default() })
            .pull(&reference)
            .await
            .unwrap();
        assert_eq!(pulled.layers[0].data, image.layers[0].data);
        drop(reg);
    })
}

#[test]
fn a_multi_platform_index_is_followed_to_one_image() {
    crate::support::run("oci_roundtrip", 0, async {
        // Catalog images on public registries are usually multi-platform indexes.
        let addr = crate::support::registry();
        let image = test_image("index");
        let reg = client(None);
        let repo = format!("{addr}/capstan-test/multi");
        let manifest = image.manifest_bytes();
        let digest = capstan::oci::cache::sha256_digest(&manifest);
        let by_digest = parse_reference(&format!("{repo}@{digest}")).unwrap();
        reg.push(&by_digest, &image).await.unwrap();
        // An index with an s390x entry first, then linux/amd64 pointing at the image.
        let other = test_image("other");
        let other_manifest = other.manifest_bytes();
        let other_digest = capstan::oci::cache::sha256_digest(&other_manifest);
        reg.push(&parse_reference(&format!("{repo}@{other_digest}")).unwrap(), &other).await.unwrap();
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": other_digest,
                 "size": other_manifest.len(), "platform": {"architecture": "s390x", "os": "linux"}},
                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
                 "size": manifest.len(), "platform": {"architecture": "amd64", "os": "linux"}},
                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
                 "size": manifest.len(), "platform": {"architecture": "arm64", "os": "linux"}}
            ]
        });
        let index_bytes = serde_json::to_vec(&index).unwrap();
        let tag = parse_reference(&format!("{repo}:v1")).unwrap();
        reg.push_manifest_and_blobs(&tag, std::iter::empty(), index_bytes, "application/vnd.oci.image.index.v1+json")
            .await
            .unwrap();
        let pulled = reg.pull(&tag).await.unwrap();
        assert_eq!(pulled.digest, digest, "the running platform's (amd64 or arm64) entry is chosen");
        assert_eq!(pulled.layers[0].data, image.layers[0].data);
    })
}

/// A registry that accepts the connection and then never answers (case from a fresh-user test:
/// capstan hung forever) fails after the read timeout with an error naming the registry.
#[test]
fn a_registry_that_never_answers_times_out_with_an_error_naming_it() {
    crate::support::run("oci_roundtrip", 0, async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // Accept connections and hold them open without writing a byte.
        let _holder = std::thread::spawn(move || {
            let mut held = Vec::new();
            for c in listener.incoming().take(8).flatten() {
                held.push(c);
            }
            std::thread::sleep(std::time::Duration::from_secs(30));
        });
        let registry = Registry::new(ClientConfig {
            quiet: true,
            read_timeout: Some(std::time::Duration::from_secs(2)),
            ..Default::default()
        });
        let reference = parse_reference(&format!("{addr}/capstan-test/silent:v1")).unwrap();
        let started = std::time::Instant::now();
        let result =
            tokio::time::timeout(std::time::Duration::from_secs(20), registry.resolve_digest(&reference)).await;
        let err = match result {
            Ok(Err(e)) => e,
            Ok(Ok(d)) => panic!("a silent registry returned a digest {d}"),
            Err(_) => panic!("no answer after 20 s: the read timeout did not apply"),
        };
        assert!(started.elapsed() < std::time::Duration::from_secs(15), "took {:?}", started.elapsed());
        let msg = err.to_string();
        assert!(msg.contains(&addr.to_string()), "the error names the registry: {msg}");
    })
}
