//! YAML as operator-registry and OLM read it, for every bundle, catalog and Subscription file:
//!
//! - [`check_flow_depth`], a guard run before parsing: flow collections (`[…]`, `{…}`) nested
//!   deeper than [`MAX_FLOW_DEPTH`] are rejected at once.
//! - [`documents`] / [`from_str`]: YAML documents read into JSON values with merge keys (`<<:`)
//!   expanded as Go's YAML library does it (see [`from_str`]).
//!
//! Why the depth guard: the YAML parser behind `serde_norway` only reports its recursion limit after scanning the
//! whole input, and scanning deeply nested flow collections costs time quadratic in the depth — a
//! 256 KB file of `{a: {a: …` took 24 s to reject. Catalog files come from registries, so one
//! hostile file must not stall a `catalog validate` or a controller. Legitimate catalogs, bundles
//! and Subscriptions nest flow collections a few levels at most.
//!
//! The scan follows YAML's lexical rules closely enough for this purpose: quotes and brackets
//! only count where a value may start (start of line after indentation, after `: `, `- `, `,`, `[`
//! or `{`), quoted scalars and comments are skipped, and everything else is ignored. It may miss
//! nesting that YAML sees (then the parser's own limit still applies), but it never rejects input
//! whose flow nesting is shallow.

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Deepest flow-collection nesting accepted (the parser's own recursion limit is 128).
pub const MAX_FLOW_DEPTH: usize = 100;

/// Input whose flow collections nest deeper than [`MAX_FLOW_DEPTH`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "flow collections ([…] or {{…}}) nested deeper than {max} levels at line {line}; no catalog, bundle or Subscription needs this — the file is malformed or hostile"
)]
pub struct TooDeep {
    /// 1-based line where the limit was crossed.
    pub line: usize,
    /// The limit, [`MAX_FLOW_DEPTH`].
    pub max: usize,
}

/// Checks `text` (one YAML stream) before it is parsed; `Ok(())` when its flow nesting is
/// shallow. Linear in the input size.
///
/// # Errors
/// [`TooDeep`] naming the line where the nesting passed [`MAX_FLOW_DEPTH`].
pub fn check_flow_depth(text: &str) -> Result<(), TooDeep> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut line = 1usize;
    // True where a value may start: line start (after indentation), after ": ", "- ", ",", "[", "{".
    let mut value_start = true;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\n' => {
                line += 1;
                value_start = true;
            }
            b' ' | b'\t' | b'\r' => {}
            b'#' if i == 0 || matches!(bytes[i - 1], b' ' | b'\t' | b'\n') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\'' | b'"' if value_start => {
                let quote = c;
                i += 1;
                while i < bytes.len() {
                    match bytes[i] {
                        b'\n' => line += 1,
                        b'\\' if quote == b'"' => i += 1,
                        b'\'' if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 1,
                        b if b == quote => break,
                        _ => {}
                    }
                    i += 1;
                }
                value_start = false;
            }
            b'[' | b'{' if value_start || depth > 0 => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Err(TooDeep { line, max: MAX_FLOW_DEPTH });
                }
                value_start = true;
            }
            b']' | b'}' if depth > 0 => {
                depth -= 1;
                value_start = false;
            }
            b',' if depth > 0 => value_start = true,
            b':' | b'-' if matches!(bytes.get(i + 1), Some(b' ' | b'\t' | b'\n' | b'\r') | None) => value_start = true,
            _ => value_start = false,
        }
        i += 1;
    }
    Ok(())
}

/// A YAML parse error of a document that starts at line `first_line` (1-based) of its file, for
/// a message that shows the line itself (`file: line N: …`): returns the file line of the error and
/// the parser's message without its own position — `" at line L column C"` becomes
/// `" at column C"` — and with any other position in it (libyaml's `"while parsing … at line L
/// column C"`) moved from document lines to file lines.
pub fn error_in_file(e: &serde_norway::Error, first_line: usize) -> (usize, String) {
    let offset = first_line.saturating_sub(1);
    let mut message = e.to_string();
    let line = match e.location() {
        Some(loc) => {
            let own = format!(" at line {} column {}", loc.line(), loc.column());
            if let Some(at) = message.find(&own) {
                message.replace_range(at..at + own.len(), &format!(" at column {}", loc.column()));
            }
            offset + loc.line()
        }
        None => first_line,
    };
    if offset == 0 {
        return (line, message);
    }
    // Shift the remaining " at line N" positions by the document's offset.
    let mut out = String::with_capacity(message.len());
    let mut rest = message.as_str();
    while let Some(at) = rest.find(" at line ") {
        let (before, after) = rest.split_at(at + " at line ".len());
        out.push_str(before);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    (line, out)
}

/// The message Go's YAML library gives for a `<<` whose value is not a mapping or a list of
/// mappings (`go.yaml.in/yaml/v2` `failWantMap`).
pub const MERGE_WANTS_MAP: &str = "map merge requires map or sequence of maps as the value";

/// Parses one YAML document into a JSON value as `sigs.k8s.io/yaml` (`YAMLToJSON`, which decodes
/// with `go.yaml.in/yaml/v2`) does for operator-registry and OLM: aliases are expanded, and a
/// merge key `<<` (plain or tagged `!!merge`) merges the mapping, or the list of mappings, it
/// holds into the surrounding mapping. The merge follows goyaml v2 `decoder.mapping` /
/// `decoder.merge` exactly:
///
/// - keys are applied in the order written, so a key written *after* `<<` overrides a merged
///   one, while a key written *before* it is overridden by the merged value;
/// - of a list of mappings, the earlier mapping wins;
/// - a duplicate key keeps the last value (goyaml v2 is not strict), as without merges.
///
/// `serde_norway::Value::apply_merge` is not used: it lets every explicit key win wherever it
/// stands (the YAML 1.1 merge spec, goyaml v3) and rejects duplicate keys, so it would read some
/// files differently from opm and OLM.
///
/// Known gaps, both of which only matter for files no tool writes: a quoted `"<<"` key merges
/// here (goyaml v2 treats it as a plain key), and an alias to a *list* of mappings merges here
/// (goyaml v2 rejects it; an inline list is fine in both).
///
/// # Errors
/// The parser's error (with line and column), or [`MERGE_WANTS_MAP`] when a `<<` holds a scalar
/// or a list with a non-mapping entry.
pub fn from_str(doc: &str) -> Result<Value, serde_norway::Error> {
    let mut docs = documents(doc);
    match docs.next() {
        None => Ok(Value::Null),
        Some(first) => {
            let v = first?;
            match docs.next() {
                None => Ok(v),
                Some(_) => {
                    Err(de::Error::custom("deserializing from YAML containing more than one document is not supported"))
                }
            }
        }
    }
}

/// The first mapping key written twice in one mapping of the YAML stream `text`, as the parser's
/// message with its line and column (`spec: duplicate entry with key "channel" at line 5
/// column 3`); `None` when there is none (or the text does not parse: [`documents`] says why).
/// [`documents`] keeps the last of duplicates, as goyaml v2 does for bundles; `kubectl apply`'s
/// strict decoding refuses them, and callers reading what users `kubectl apply` check this.
pub fn duplicate_key(text: &str) -> Option<String> {
    // The first error ends the search: after a syntax error the stream yields errors forever.
    let e = serde_norway::Deserializer::from_str(text)
        .find_map(|doc| serde_norway::Value::deserialize(doc).err())?
        .to_string();
    e.contains("duplicate entry with key").then_some(e)
}

/// Every document of a YAML stream, each read as [`from_str`] reads one (an empty document reads
/// as `Value::Null`).
pub fn documents(text: &str) -> impl Iterator<Item = Result<Value, serde_norway::Error>> + '_ {
    // Fast path: without "<<" anywhere there is no merge key, so read straight into JSON.
    let merges = text.contains("<<");
    serde_norway::Deserializer::from_str(text).map(move |doc| {
        if merges {
            Node::deserialize(doc).and_then(|n| n.into_json().map_err(de::Error::custom))
        } else {
            Value::deserialize(doc)
        }
    })
}

/// A YAML node with its mapping entries in written order, duplicates and `<<` kept, so that
/// merges can be applied as goyaml v2 applies them.
enum Node {
    Leaf(Value),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    fn into_json(self) -> Result<Value, &'static str> {
        Ok(match self {
            Node::Leaf(v) => v,
            Node::Seq(items) => Value::Array(items.into_iter().map(Node::into_json).collect::<Result<_, _>>()?),
            Node::Map(entries) => {
                let mut out = Map::new();
                for (k, v) in entries {
                    if k == "<<" {
                        merge(&mut out, v)?;
                    } else {
                        out.insert(k, v.into_json()?);
                    }
                }
                Value::Object(out)
            }
        })
    }
}

/// goyaml v2 `decoder.merge`: a mapping is applied over `out`; a list of mappings is applied
/// last to first, so that the earlier mapping wins.
fn merge(out: &mut Map<String, Value>, v: Node) -> Result<(), &'static str> {
    let apply = |out: &mut Map<String, Value>, m: Node| -> Result<(), &'static str> {
        if let Value::Object(o) = m.into_json()? {
            for (k, x) in o {
                out.insert(k, x);
            }
        }
        Ok(())
    };
    match v {
        m @ Node::Map(_) => apply(out, m),
        Node::Seq(items) => {
            if !items.iter().all(|i| matches!(i, Node::Map(_))) {
                return Err(MERGE_WANTS_MAP);
            }
            for m in items.into_iter().rev() {
                apply(out, m)?;
            }
            Ok(())
        }
        Node::Leaf(_) => Err(MERGE_WANTS_MAP),
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Leaf(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Leaf(Value::Number(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Leaf(Value::Number(v.into())))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Node, E> {
        Ok(Node::Leaf(Number::from_i128(v).map_or_else(|| Value::from(v as f64), Value::Number)))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Node, E> {
        Ok(Node::Leaf(Number::from_u128(v).map_or_else(|| Value::from(v as f64), Value::Number)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        // As serde_json's own visitor: NaN and infinities become null.
        Ok(Node::Leaf(Number::from_f64(v).map_or(Value::Null, Value::Number)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Leaf(Value::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Leaf(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Leaf(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Leaf(Value::Null))
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_newtype_struct<D: de::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(x) = seq.next_element()? {
            items.push(x);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Node>()? {
            entries.push((k, v));
        }
        Ok(Node::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_are_located_once_in_file_lines() {
        let e = serde_norway::from_str::<serde_norway::Value>("a: 1\nb: [x\n  y: : z\n").unwrap_err();
        let (line, message) = error_in_file(&e, 10);
        assert_eq!(line, 12);
        assert_eq!(
            message,
            "did not find expected ',' or ']' at column 4, while parsing a flow sequence at line 11 column 4"
        );
        let (line, message) = error_in_file(&e, 1);
        assert_eq!(
            (line, message.as_str()),
            (3, "did not find expected ',' or ']' at column 4, while parsing a flow sequence at line 2 column 4")
        );
    }

    #[test]
    fn a_key_written_twice_is_found_in_any_document() {
        assert_eq!(
            duplicate_key("a: 1\n---\nb: {c: 1, c: 2}\n").as_deref(),
            Some("b: duplicate entry with key \"c\" at line 3 column 4")
        );
        assert_eq!(
            duplicate_key("a: 1\n---\nb: {c: 1, d: [{c: 1}, {c: 2}]}\n"),
            None,
            "the same key in sibling mappings is no duplicate"
        );
        assert_eq!(
            duplicate_key("a: [\n---\nb: {c: 1, c: 2}\n"),
            None,
            "a syntax error is for documents() to report (and ends the search)"
        );
        assert_eq!(
            documents("b: {c: 1, c: 2}\n").next().unwrap().unwrap(),
            serde_json::json!({"b": {"c": 2}}),
            "documents() keeps the last"
        );
    }

    fn yaml(text: &str) -> Value {
        from_str(text).unwrap()
    }

    #[test]
    fn merge_keys_expand_as_goyaml_v2() {
        // Later explicit keys win; an explicit key before << is overridden (goyaml v2 order).
        let v = yaml("base: &b {a: 1, b: 2, c: 3}\nx:\n  c: 9\n  <<: *b\n  b: 7\n");
        assert_eq!(v["x"], serde_json::json!({"c": 3, "a": 1, "b": 7}));
        // A list of mappings: the earlier one wins.
        let v = yaml("p: &p {a: 1}\nq: &q {a: 2, z: 0}\nx:\n  <<: [*p, *q]\n");
        assert_eq!(v["x"], serde_json::json!({"a": 1, "z": 0}));
        // The explicit !!merge tag, as the clickhouse CRDs write it, and merges inside merges.
        let v = yaml("t: &t {type: string, <<: {enum: [a]}}\nf:\n  !!merge <<: *t\n  description: d\n");
        assert_eq!(v["f"], serde_json::json!({"type": "string", "enum": ["a"], "description": "d"}));
        // No merge key: read as before (duplicate keys keep the last value).
        assert_eq!(yaml("a: 1\na: 2\n"), serde_json::json!({"a": 2}));
        assert_eq!(yaml("a: 1\nb: [x, {c: ~}]\n"), serde_json::json!({"a": 1, "b": ["x", {"c": null}]}));
    }

    #[test]
    fn a_merge_of_a_scalar_is_goyamls_error() {
        for bad in ["x:\n  <<: 1\n", "x:\n  <<: [{a: 1}, 2]\n"] {
            let e = from_str(bad).unwrap_err();
            assert!(e.to_string().contains(MERGE_WANTS_MAP), "{bad}: {e}");
        }
    }

    #[test]
    fn documents_of_a_stream() {
        let docs: Vec<Value> = documents("a: &a {k: v}\n---\nb: {<<: {k: w}}\n").collect::<Result<_, _>>().unwrap();
        assert_eq!(docs, vec![serde_json::json!({"a": {"k": "v"}}), serde_json::json!({"b": {"k": "w"}})]);
    }

    #[test]
    fn ordinary_yaml_passes() {
        let text = "schema: olm.bundle\nname: a\nproperties:\n  - {type: olm.gvk, value: {group: g, kind: K, version: v1}}\n  - type: x\n    value: [1, [2, [3]]]\ndescription: |\n  see [the docs](https://x) and {braces}\n  it's fine: [unbalanced\n";
        assert_eq!(check_flow_depth(text), Ok(()));
    }

    #[test]
    fn deep_flow_sequences_and_mappings_are_rejected_with_the_line() {
        let seq = format!("a: 1\nb: {}{}\n", "[".repeat(5000), "]".repeat(5000));
        assert_eq!(check_flow_depth(&seq), Err(TooDeep { line: 2, max: MAX_FLOW_DEPTH }));
        let map = format!("x: {}\n", "{a: ".repeat(5000));
        assert!(check_flow_depth(&map).is_err());
        let top = "[".repeat(MAX_FLOW_DEPTH + 1);
        assert!(check_flow_depth(&top).is_err());
    }

    #[test]
    fn exactly_the_limit_passes() {
        let ok = format!("{}{}", "[".repeat(MAX_FLOW_DEPTH), "]".repeat(MAX_FLOW_DEPTH));
        assert_eq!(check_flow_depth(&ok), Ok(()));
    }

    #[test]
    fn brackets_inside_quotes_comments_and_plain_scalars_do_not_count() {
        let many = "[".repeat(500);
        let text = format!(
            "a: '{many}'\nb: \"{many}\"\n# {many}\nc: don't{many}\nd: 'it''s {many}'\ne: \"esc \\\" {many}\"\n"
        );
        assert_eq!(check_flow_depth(&text), Ok(()));
    }

    #[test]
    fn an_apostrophe_in_a_plain_scalar_does_not_hide_a_later_bomb() {
        let text = format!("a: don't\nb: {}\n", "[".repeat(1000));
        assert!(check_flow_depth(&text).is_err());
    }
}
