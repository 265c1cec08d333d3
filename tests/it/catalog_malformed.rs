//! Malformed FBC input gives an error that names the file, never a panic:
//! truncated YAML, a blob with no schema, a 50 MB description, non-UTF-8 bytes; plus a
//! property test feeding arbitrary bytes to `parse_bytes` (the cargo-fuzz target in `fuzz/` does
//! the same with coverage guidance).

use std::path::Path;

use capstan::catalog::error::CatalogError;
use capstan::catalog::parse::{self, MAX_DESCRIPTION_BYTES};
use proptest::prelude::*;

const GOOD: &str = "---\nschema: olm.package\nname: foo\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: foo\nname: stable\nentries:\n  - name: foo.v1.0.0\n---\nschema: olm.bundle\npackage: foo\nname: foo.v1.0.0\nimage: registry.local/foo:1.0.0\nproperties:\n  - type: olm.package\n    value:\n      packageName: foo\n      version: 1.0.0\n";

/// Writes `content` as `<tmp>/foo/catalog.<ext>` next to a valid package and loads the directory.
fn load_with(file: &str, content: &[u8]) -> (CatalogError, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ok")).unwrap();
    std::fs::write(dir.path().join("ok/catalog.yaml"), GOOD.replace("foo", "okpkg")).unwrap();
    let path = dir.path().join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, content).unwrap();
    let err = parse::load_path(dir.path()).expect_err("malformed input must be rejected");
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "error does not name {}: {msg}", path.display());
    (err, msg)
}

#[test]
fn truncated_yaml_names_file_and_line() {
    // Cut inside a flow mapping: a syntax error with the line where the parser stopped.
    let flow = GOOD.replace(
        "    value:\n      packageName: foo\n      version: 1.0.0\n",
        "    value: {packageName: foo, version: 1.0.0}\n",
    );
    let cut = &flow[..flow.find("version: 1.0.0}").unwrap()];
    let (err, msg) = load_with("foo/catalog.yaml", cut.as_bytes());
    match err {
        CatalogError::Syntax { format: "YAML", line, .. } => assert!(line >= 17, "{msg}"),
        other => panic!("expected a YAML syntax error, got {other}"),
    }
    // Cut inside a quoted scalar.
    let (err, msg) = load_with("foo/catalog.yaml", b"schema: olm.package\nname: \"fo");
    assert!(matches!(err, CatalogError::Syntax { format: "YAML", .. }), "{msg}");
}

#[test]
fn yaml_cut_at_a_line_boundary_parses_but_does_not_validate() {
    // A cut that leaves well-formed YAML cannot be told from intent by the parser; validation
    // then names the bundle and what is missing.
    let cut = &GOOD[..GOOD.find("    value:").unwrap()];
    let cfg = parse::parse_bytes("foo/catalog.yaml", cut.as_bytes()).unwrap();
    let err = capstan::catalog::validate::validate(&cfg).unwrap_err().to_string();
    assert!(err.contains("bundle foo.v1.0.0") && err.contains("olm.package"), "{err}");
}

#[test]
fn truncated_json_names_file() {
    let json = "{\"schema\": \"olm.package\", \"name\": \"foo\"}\n{\"schema\": \"olm.channel\", \"package\": \"fo";
    let (err, msg) = load_with("foo/catalog.json", json.as_bytes());
    assert!(matches!(err, CatalogError::Syntax { format: "JSON", line: 2, .. }), "{msg}");
}

#[test]
fn blob_without_schema_names_file_blob_and_name() {
    let text = GOOD.replace("schema: olm.bundle\n", "");
    let (err, msg) = load_with("foo/catalog.yaml", text.as_bytes());
    assert!(matches!(err, CatalogError::MissingSchema { index: 2, .. }), "{msg}");
    assert!(msg.contains("foo.v1.0.0") && msg.contains("\"schema\""), "{msg}");
}

#[test]
fn fifty_megabyte_description_is_rejected_naming_file_and_field() {
    let desc = "a".repeat(50 * 1024 * 1024);
    let json = format!(
        "{{\"schema\":\"olm.package\",\"name\":\"foo\",\"defaultChannel\":\"stable\",\"description\":\"{desc}\"}}\n"
    );
    let (err, msg) = load_with("foo/catalog.json", json.as_bytes());
    match err {
        CatalogError::TooLarge { size, limit, ref field, .. } => {
            assert_eq!((size, limit, field.as_str()), (desc.len(), MAX_DESCRIPTION_BYTES, "description"));
        }
        other => panic!("expected TooLarge, got {other}"),
    }
    assert!(msg.len() < 2000, "the message must not echo the description");
}

#[test]
fn non_utf8_bytes_name_file_line_and_column() {
    let mut bytes = GOOD.as_bytes().to_vec();
    let at = GOOD.find("image:").unwrap() + 7;
    bytes[at] = 0xC3; // a lead byte followed by ASCII: invalid
    let (err, _msg) = load_with("foo/catalog.yaml", &bytes);
    match err {
        CatalogError::NotUtf8 { line, column, .. } => assert_eq!((line, column), (15, 8)),
        other => panic!("expected NotUtf8, got {other}"),
    }
    // UTF-16 (a BOM other than UTF-8's) is not accepted either.
    let (err, _) = load_with("foo/catalog.json", b"\xFF\xFE{\x00}\x00");
    assert!(matches!(err, CatalogError::NotUtf8 { .. }));
}

#[test]
fn unreadable_path_is_an_io_error_naming_it() {
    let err = parse::load_path(Path::new("/nonexistent/capstan/catalog")).unwrap_err();
    assert!(matches!(err, CatalogError::Io { .. }) && err.to_string().contains("/nonexistent/capstan/catalog"));
}

#[test]
fn deeply_nested_input_is_an_error_not_a_stack_overflow() {
    let deep = format!("{{\"schema\":\"x\",\"v\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    let err = parse::parse_bytes("deep.json", deep.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("deep.json"));
    let deep_yaml = format!("schema: x\nv: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let err = parse::parse_bytes("deep.yaml", deep_yaml.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("deep.yaml"));
}

#[test]
fn yaml_alias_bomb_is_an_error() {
    let mut y = String::from("schema: x\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let prev = i - 1;
        y.push_str(&format!("a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"));
    }
    let err = parse::parse_bytes("bomb.yaml", y.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("bomb.yaml"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Err(e) = parse::parse_bytes("p.bin", &bytes) {
            prop_assert!(e.to_string().contains("p.bin"));
        }
    }

    #[test]
    fn mutated_catalogs_never_panic_and_round_trip(cut in 0usize..GOOD.len(), byte in any::<u8>(), at in 0usize..GOOD.len()) {
        let mut bytes = GOOD.as_bytes().to_vec();
        bytes[at] = byte;
        bytes.truncate(cut.max(1));
        match parse::parse_bytes("m.yaml", &bytes) {
            Err(e) => prop_assert!(e.to_string().contains("m.yaml")),
            Ok(cfg) => {
                let _ = capstan::catalog::validate::validate(&cfg);
                let json = parse::to_json_stream(&cfg);
                let again = parse::parse_bytes("again.json", json.as_bytes()).unwrap();
                prop_assert_eq!(parse::to_json_stream(&again), json);
            }
        }
    }
}

/// Deeply nested flow collections (a fresh-user finding: 256 KB of `{a: {a: …` kept the parser
/// busy for over a minute before it reported its recursion limit) are refused up front, naming
/// the file and the line.
#[test]
fn deeply_nested_flow_yaml_is_refused_naming_file_and_line() {
    let bomb = format!("schema: olm.package\nname: x\ndescription: {}\n", "{a: ".repeat(64 * 1024));
    let (_, msg) = load_with("bomb/catalog.yaml", bomb.as_bytes());
    assert!(msg.contains("bomb/catalog.yaml"), "{msg}");
    assert!(msg.contains("nested deeper than") && msg.contains("line 3"), "{msg}");
    let seq = format!("schema: olm.package\nname: y\nicon: {}{}\n", "[".repeat(128 * 1024), "]".repeat(128 * 1024));
    let (_, msg) = load_with("seq/catalog.yaml", seq.as_bytes());
    assert!(msg.contains("seq/catalog.yaml") && msg.contains("nested deeper than"), "{msg}");
}
