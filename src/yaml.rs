//! A guard run before YAML parsing: flow collections (`[…]`, `{…}`) nested deeper than
//! [`MAX_FLOW_DEPTH`] are rejected at once.
//!
//! Why: the YAML parser behind `serde_norway` only reports its recursion limit after scanning the
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_are_located_once_in_file_lines() {
        let e = serde_norway::from_str::<serde_norway::Value>("a: 1\nb: [x\n  y: : z\n").unwrap_err();
        let (line, message) = error_in_file(&e, 10);
        assert_eq!(line, 12);
        assert_eq!(message, "did not find expected ',' or ']' at column 4, while parsing a flow sequence at line 11 column 4");
        let (line, message) = error_in_file(&e, 1);
        assert_eq!((line, message.as_str()), (3, "did not find expected ',' or ']' at column 4, while parsing a flow sequence at line 2 column 4"));
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
