//! case-30 of `../shared/cases/olm-cases.yaml` (outcome `load`): a ~60 MB catalog built from
//! the case's `generator` spec loads and validates from a directory (no size-limited object in
//! between), and the in-memory index resolves the newest bundle of the last package while
//! leaving the large `olm.bundle.object` payloads on disk.

use capstan::catalog::model::{Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property};
use capstan::catalog::parse;
use capstan::catalog::property::{self, Gvk, PackageProperty};
use capstan::catalog::validated::ValidatedCatalog;
use serde_json::json;

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn package(
    cfg: &mut DeclarativeConfig,
    name: &str,
    versions: &[String],
    channels: &[&str],
    extra: impl Fn(&str, usize) -> Vec<Property>,
) {
    cfg.packages.push(Package {
        schema: "olm.package".into(),
        name: name.into(),
        default_channel: Some(channels[0].into()),
        ..Default::default()
    });
    let names: Vec<String> = versions.iter().map(|v| format!("{name}.v{v}")).collect();
    for ch in channels {
        cfg.channels.push(Channel {
            schema: "olm.channel".into(),
            package: name.into(),
            name: (*ch).into(),
            entries: names
                .iter()
                .enumerate()
                .map(|(i, n)| ChannelEntry {
                    name: n.clone(),
                    replaces: i.checked_sub(1).map(|p| names[p].clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
    }
    for (i, v) in versions.iter().enumerate() {
        let mut properties = vec![Property::new(
            property::PACKAGE,
            &PackageProperty { package_name: name.into(), version: v.clone(), release: None },
        )];
        properties.extend(extra(name, i));
        cfg.bundles.push(Bundle {
            schema: "olm.bundle".into(),
            package: name.into(),
            name: names[i].clone(),
            image: format!("registry.local/{name}-bundle:v{v}"),
            properties,
            ..Default::default()
        });
    }
}

fn crd(name: &str, size: usize) -> Property {
    let manifest = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"description": "x".repeat(size)},
    });
    Property { type_: property::BUNDLE_OBJECT.into(), value: json!({"data": base64(manifest.to_string().as_bytes())}) }
}

/// The case's generator: 400 packages x 15 bundles, three replaces-chain channels, 5 olm.gvk and
/// an ~8 KiB description-like property per bundle, plus bigcrd-op and hugecrd-op.
fn case_30_catalog() -> DeclarativeConfig {
    let mut cfg = DeclarativeConfig::default();
    let versions: Vec<String> = (0..15).map(|m| format!("1.{m}.0")).collect();
    let text: String = "This operator manages a distributed database cluster with backups. ".repeat(8 * 1024 / 68 + 1);
    for p in 0..400 {
        package(&mut cfg, &format!("pkg-{p:04}"), &versions, &["stable", "fast", "candidate"], |name, i| {
            let mut props: Vec<Property> = (0..5)
                .map(|k| {
                    Property::new(
                        property::GVK,
                        &Gvk { group: format!("{name}.example.com"), version: "v1".into(), kind: format!("Kind{k}") },
                    )
                })
                .collect();
            props.push(Property {
                type_: "example.com/long-description".into(),
                value: json!(format!("{name} {i}: {text}")),
            });
            props
        });
    }
    let one = vec!["1.0.0".to_string()];
    package(&mut cfg, "bigcrd-op", &one, &["stable"], |_, _| {
        (0..3).map(|i| crd(&format!("big{i}.example.com"), 500 * 1024)).collect()
    });
    package(&mut cfg, "hugecrd-op", &one, &["stable"], |_, _| vec![crd("huge.example.com", 3 * 1024 * 1024)]);
    cfg
}

#[test]
fn case_30_sixty_megabyte_catalog_loads_validates_and_indexes() {
    let dir = tempfile::tempdir().unwrap();
    parse::write_dir(&case_30_catalog(), dir.path()).unwrap();
    let size: u64 = walkdir::WalkDir::new(dir.path())
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(size > 50 << 20, "catalog is only {size} bytes");

    let index = ValidatedCatalog::load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(index.all_bundles().len(), 400 * 15 + 2);
    let stable = index.channel("pkg-0399", "stable").unwrap();
    assert_eq!(index.bundle_at(stable.head).name, "pkg-0399.v1.14.0");
    for name in ["bigcrd-op", "hugecrd-op"] {
        let b = index.bundle(name, &format!("{name}.v1.0.0")).unwrap();
        assert!(b.properties.iter().all(|p| p.type_ != property::BUNDLE_OBJECT), "{name}: payload kept in memory");
    }
    // The payloads are still in the catalog on disk.
    let on_disk = std::fs::read_to_string(dir.path().join("hugecrd-op/catalog.json")).unwrap();
    assert!(on_disk.len() > 3 << 20 && on_disk.contains("olm.bundle.object"));
}
