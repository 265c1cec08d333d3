//! The one Go-JSON encoder: JSON bytes exactly as Go's `encoding/json` writes them, for the places
//! where operator-registry's or OLM's output depends on those bytes ([`marshal_raw`]: OLM's RBAC
//! name hashes and the CSV properties annotation; [`to_string`]): `olm.bundle.object` data (base64 of `json.Marshal` of an
//! unstructured object: map keys sorted, HTML characters escaped) and the property sort key
//! (`string(Value)`, operator-registry `pkg/registry/registry_to_model.go`).
//!
//! Numbers follow apimachinery's unstructured decoding: integers that fit `int64` print as
//! integers, everything else as Go prints a `float64` (`strconv.FormatFloat(f, 'f', -1, 64)`,
//! switching to exponent form below 1e-6 and from 1e21).

use serde_json::{Number, Value};

/// How map keys are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// Sorted bytewise, as Go marshals a `map[string]interface{}`.
    Sorted,
    /// As stored in the value (a Go struct's field order, when the value was built in that order).
    AsIs,
}

/// Compact JSON as Go writes it. `escape_html` is `json.Marshal`'s default (`<`, `>`, `&` become
/// `\u003c`, `\u003e`, `\u0026`); `json.Encoder` with `SetEscapeHTML(false)` turns it off.
pub(crate) fn to_string(v: &Value, order: KeyOrder, escape_html: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, v, order, escape_html);
    out
}

/// JSON text as Go's `json.Marshal` writes a struct whose fields hold `json.RawMessage`s (what
/// OLM hashes for RBAC names and writes as the CSV's properties annotation): compact, keys in
/// the order of the [`Value`], `<`, `>`, `&`, U+2028 and U+2029 escaped, and numbers as serde_json
/// writes them (a raw message keeps a number's text; [`to_string`] prints them as Go's float64).
pub(crate) fn marshal_raw(v: &Value) -> String {
    let s = serde_json::to_string(v).unwrap_or_default();
    // These characters can only occur inside JSON strings, so replacing them everywhere is exact.
    s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

fn write_value(out: &mut String, v: &Value, order: KeyOrder, html: bool) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&format_number(n)),
        Value::String(s) => write_string(out, s, html),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, x, order, html);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            if order == KeyOrder::Sorted {
                entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            }
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k, html);
                out.push(':');
                write_value(out, x, order, html);
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str, html: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' if html => out.push_str(&format!("\\u{:04x}", c as u32)),
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A number as apimachinery + Go print it (see module docs).
pub(crate) fn format_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.223_372_036_854_775e18 {
        // An integral float (YAML `1.0`) round-trips through JSON as an int64 in apimachinery.
        return format!("{}", f as i64);
    }
    format_float(f)
}

/// Go's `encoding/json` float64 format.
pub(crate) fn format_float(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        return format!("{f}");
    }
    // Rust writes 1e21 / 1.5e-7; Go writes 1e+21 / 1.5e-07 and then trims e-07 to e-7.
    let s = format!("{f:e}");
    match s.split_once('e') {
        Some((mant, exp)) if !exp.starts_with('-') => format!("{mant}e+{exp}"),
        _ => s,
    }
}

/// Go's `fmt` `%g` for a float64 (shortest digits; exponent form when the decimal exponent is
/// < -4 or >= 6, as `strconv.FormatFloat(f, 'g', -1, 64)`), used for a numeric CSV `spec.release`.
pub(crate) fn format_float_g(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return format!("{f}");
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mant, e)) => {
                let (sign, digits) = if let Some(d) = e.strip_prefix('-') { ('-', d) } else { ('+', e) };
                format!("{mant}e{sign}{digits:0>2}")
            }
            None => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorted_keys_and_html_escaping_like_json_marshal() {
        let v = json!({"b": "<a & b>", "a": [1, 2.5, true, null], "\u{2028}": "x\u{1}"});
        assert_eq!(
            to_string(&v, KeyOrder::Sorted, true),
            r#"{"a":[1,2.5,true,null],"b":"\u003ca \u0026 b\u003e","\u2028":"x\u0001"}"#
        );
        assert_eq!(to_string(&v, KeyOrder::AsIs, false), r#"{"b":"<a & b>","a":[1,2.5,true,null],"\u2028":"x\u0001"}"#);
    }

    #[test]
    fn floats_print_like_go() {
        assert_eq!(format_number(&Number::from_f64(1.0).unwrap()), "1");
        assert_eq!(format_number(&Number::from_f64(0.5).unwrap()), "0.5");
        assert_eq!(format_float(1e21), "1e+21");
        assert_eq!(format_float(1.5e-7), "1.5e-7");
        assert_eq!(format_float(123456789.125), "123456789.125");
    }

    #[test]
    fn control_characters() {
        assert_eq!(to_string(&json!("a\u{8}\u{c}\n\"\\"), KeyOrder::AsIs, true), r#""a\b\f\n\"\\""#);
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e30f64..1e30).prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever the escaping and number format, the bytes parse back to the same JSON
        /// (floats compared by value).
        #[test]
        fn go_json_round_trips(v in arb_json(), html in proptest::bool::ANY) {
            let text = to_string(&v, KeyOrder::Sorted, html);
            let back: Value = serde_json::from_str(&text).unwrap();
            proptest::prop_assert!(same(&v, &back), "{} -> {}", v, text);
            if html {
                proptest::prop_assert!(!text.contains(['<', '>', '&']));
            }
        }
    }

    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            // serde_json's default float parser may be one ULP off; Go's shortest form is exact.
            (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
                (Some(p), Some(q)) => p == q || ((p - q) / p).abs() < 1e-15,
                _ => false,
            },
            (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
            }
            _ => a == b,
        }
    }
}
