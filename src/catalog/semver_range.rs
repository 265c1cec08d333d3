//! Semver ranges in blang/semver syntax, as OLM uses them for `skipRange`, `olm.package.required`
//! `versionRange` and `olm.constraint` package ranges (`../shared/reference/olm-v0.md` §2.2).
//!
//! The syntax is github.com/blang/semver/v4 `ParseRange` (`v4/range.go`), which differs from the
//! `semver` crate's (comma-separated, caret defaults):
//!
//! - comparators `<`, `<=`, `>`, `>=`, `=`, `==`, `!=`, `!`, or none (equal); a space may follow
//!   the operator (`> 1.0.0`);
//! - comparators separated by spaces are ANDed, groups separated by `||` are ORed (AND binds
//!   tighter; no brackets): `>1.0.0 <2.0.0 || >3.0.0 !4.2.1`;
//! - wildcards in the last position: `1.2.x` is `>=1.2.0 <1.3.0`, `1.x` is `>=1.0.0 <2.0.0`,
//!   `>1.2.x` is `>=1.3.0`, `<=1.x` is `<2.0.0`, `!=1.2.x` is `<1.2.0 >=1.3.0` (ANDed, so
//!   it matches nothing — blang's behaviour).
//!
//! The parser is a line-by-line port of blang's, quirks included, so that a range capstan
//! accepts is one OLM accepts and matches the same versions: versions must be full
//! `MAJOR.MINOR.PATCH` semver (no `v` prefix); an `x` anywhere in a comparator takes the wildcard
//! path (so `1.x.x` means `>=1.0.0 <1.1.0`, and `1.0.0-xyz` without an operator is an error);
//! comparison is semver precedence, ignoring build metadata.

use std::cmp::Ordering;
use std::fmt;

use semver::Version;

/// A comparison operator of one comparator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `=`, `==` or no operator.
    Eq,
    /// `!=` or `!`.
    Ne,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "" | "=" | "==" => Op::Eq,
            "!" | "!=" => Op::Ne,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            "<=" => Op::Le,
            _ => return None,
        })
    }

    fn holds(self, ord: Ordering) -> bool {
        match self {
            Op::Eq => ord == Ordering::Equal,
            Op::Ne => ord != Ordering::Equal,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
        }
    }

    /// The operator as written in a normalized range.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }
}

/// One comparator: `op version`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Comparator {
    /// The operator.
    pub op: Op,
    /// The version compared against.
    pub version: Version,
}

impl Comparator {
    /// Whether `v` satisfies this comparator (semver precedence, build metadata ignored).
    pub fn matches(&self, v: &Version) -> bool {
        self.op.holds(v.cmp_precedence(&self.version))
    }
}

/// A parsed range: an OR of AND-groups of comparators.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Range {
    source: String,
    alternatives: Vec<Vec<Comparator>>,
}

impl Range {
    /// Whether `v` is in the range: some `||` group whose every comparator holds.
    pub fn matches(&self, v: &Version) -> bool {
        self.alternatives.iter().any(|group| group.iter().all(|c| c.matches(v)))
    }

    /// The range text as given to [`parse`].
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The `||` alternatives, each a list of ANDed comparators, after wildcard expansion.
    pub fn alternatives(&self) -> &[Vec<Comparator>] {
        &self.alternatives
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl std::str::FromStr for Range {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Range, RangeError> {
        parse(s)
    }
}

/// A range that does not parse: the range text and blang's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid semver range {range:?}: {message} (ranges use blang/semver syntax, e.g. \">=1.0.0 <2.0.0\", \"<1.2.3 || >=2.0.0\", \"1.2.x\")")]
pub struct RangeError {
    /// The range text.
    pub range: String,
    /// What is wrong.
    pub message: String,
}

/// Parses a blang/semver range (see the module documentation for the syntax).
///
/// # Errors
/// [`RangeError`] with blang's reason: empty range or misplaced `||`, a comparator without a
/// version, an unknown operator, or a version that is not strict semver.
pub fn parse(s: &str) -> Result<Range, RangeError> {
    let err = |message: String| RangeError { range: s.to_string(), message };
    let parts = split_and_trim(s);
    let or_parts = split_or_parts(&parts).map_err(|m| err(m.to_string()))?;
    let expanded = expand_wildcards(or_parts).map_err(err)?;
    let mut alternatives = Vec::with_capacity(expanded.len());
    for group in expanded {
        let mut comparators = Vec::with_capacity(group.len());
        for part in group {
            let (op_str, v_str) = split_comparator_version(&part).map_err(err)?;
            let op = Op::parse(op_str)
                .ok_or_else(|| err(format!("could not parse comparator {op_str:?} in {part:?}")))?;
            let version = Version::parse(v_str)
                .map_err(|e| err(format!("could not parse version {v_str:?} in {part:?}: {e}")))?;
            comparators.push(Comparator { op, version });
        }
        alternatives.push(comparators);
    }
    Ok(Range { source: s.to_string(), alternatives })
}

/// blang `splitAndTrim`: splits on spaces, except a space right after `>`, `<` or `=`; then
/// removes the spaces inside each part. (Like blang, a one-byte trailing part is dropped.)
fn split_and_trim(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut result = Vec::new();
    let mut last = 0usize;
    let mut last_char = 0u8;
    for i in 0..b.len() {
        if b[i] == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            if last + 1 < i {
                result.push(&s[last..i]);
            }
            last = i + 1;
        } else if b[i] != b' ' {
            last_char = b[i];
        }
    }
    if last + 1 < b.len() {
        result.push(&s[last..]);
    }
    result.into_iter().map(|p| p.replace(' ', "")).collect()
}

fn split_or_parts(parts: &[String]) -> Result<Vec<Vec<String>>, &'static str> {
    let mut out = Vec::new();
    let mut last = 0usize;
    for (i, p) in parts.iter().enumerate() {
        if p == "||" {
            if i == 0 {
                return Err("first element in range is '||'");
            }
            out.push(parts[last..i].to_vec());
            last = i + 1;
        }
    }
    if last == parts.len() {
        return Err(if parts.is_empty() { "empty range" } else { "last element in range is '||'" });
    }
    out.push(parts[last..].to_vec());
    Ok(out)
}

/// blang `splitComparatorVersion`: the operator is everything before the first digit.
fn split_comparator_version(s: &str) -> Result<(&str, &str), String> {
    match s.find(|c: char| c.is_ascii_digit()) {
        Some(i) => Ok((s[..i].trim(), &s[i..])),
        None => Err(format!("could not get version from string {s:?}")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wildcard {
    None,
    Minor,
    Patch,
}

fn wildcard_type(v: &str) -> Wildcard {
    let parts: Vec<&str> = v.split('.').collect();
    if parts.last() != Some(&"x") {
        return Wildcard::None;
    }
    match parts.len() {
        2 => Wildcard::Minor,
        3 => Wildcard::Patch,
        // blang's majorWildcard (one part) never increments; treat like no wildcard.
        _ => Wildcard::None,
    }
}

fn version_from_wildcard(v: &str) -> String {
    let v2 = v.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
    if v2.split('.').count() == 2 { format!("{v2}.0") } else { v2 }
}

fn increment(v: &str, index: usize) -> String {
    let mut parts: Vec<String> = v.split('.').map(str::to_string).collect();
    // blang ignores the Atoi error here and leaves an empty version, which then fails to parse.
    match parts.get(index).and_then(|p| p.parse::<u64>().ok()) {
        Some(n) => {
            parts[index] = (n + 1).to_string();
            parts.join(".")
        }
        None => String::new(),
    }
}

fn expand_wildcards(groups: Vec<Vec<String>>) -> Result<Vec<Vec<String>>, String> {
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        let mut new_parts = Vec::with_capacity(group.len() + 1);
        for part in group {
            if !part.contains('x') {
                new_parts.push(part);
                continue;
            }
            let (op, v) = split_comparator_version(&part)?;
            let wildcard = wildcard_type(v);
            let flat = version_from_wildcard(v);
            let (result_op, increment_version) = match op {
                ">" => (">=", true),
                ">=" => (">=", false),
                "<" => ("<", false),
                "<=" => ("<", true),
                "" | "=" | "==" => {
                    new_parts.push(format!(">={flat}"));
                    ("<", true)
                }
                "!=" | "!" => {
                    new_parts.push(format!("<{flat}"));
                    (">=", true)
                }
                // blang leaves the operator empty; the version check below then fails.
                _ => ("", false),
            };
            let result_version = if increment_version {
                match wildcard {
                    Wildcard::Patch => increment(&flat, 1),
                    Wildcard::Minor => increment(&flat, 0),
                    Wildcard::None => String::new(),
                }
            } else {
                flat
            };
            new_parts.push(format!("{result_op}{result_version}"));
        }
        out.push(new_parts);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(range: &str, v: &str) -> bool {
        parse(range).unwrap().matches(&Version::parse(v).unwrap())
    }

    #[test]
    fn and_or_and_operators() {
        assert!(m(">=1.0.0 <2.0.0", "1.5.0"));
        assert!(!m(">=1.0.0 <2.0.0", "2.0.0"));
        assert!(m(">1.0.0 <3.0.0 !2.0.3-beta.2", "2.0.3"));
        assert!(!m(">1.0.0 <3.0.0 !2.0.3-beta.2", "2.0.3-beta.2"));
        assert!(m("<2.0.0 || >=3.0.0", "3.1.0"));
        assert!(!m("<2.0.0 || >=3.0.0", "2.5.0"));
        assert!(m("> 1.0.0", "1.0.1"), "a space after the operator is allowed");
        assert!(m("==1.2.3", "1.2.3") && m("1.2.3", "1.2.3") && !m("!=1.2.3", "1.2.3"));
        assert!(m("<=1.2.3", "1.2.3") && !m("<1.2.3", "1.2.3"));
    }

    #[test]
    fn prerelease_and_build_metadata() {
        assert!(m("<1.0.0", "1.0.0-rc.1"), "prereleases sort before the release");
        assert!(m("=1.0.0", "1.0.0+build.5"), "build metadata is ignored");
        assert!(m(">=4.8.0 <4.9.0-0", "4.8.3"));
    }

    #[test]
    fn wildcards_expand_as_blang() {
        assert!(m("1.2.x", "1.2.9") && !m("1.2.x", "1.3.0") && !m("1.2.x", "1.1.9"));
        assert!(m("1.x", "1.9.0") && !m("1.x", "2.0.0"));
        assert!(m(">1.2.x", "1.3.0") && !m(">1.2.x", "1.2.5"));
        assert!(m("<=1.x", "1.99.0") && !m("<=1.x", "2.0.0"));
        // blang quirk kept: "!=1.2.x" expands to "<1.2.0 >=1.3.0" in one AND group, matching nothing.
        assert!(!m("!=1.2.x", "1.2.4") && !m("!=1.2.x", "1.3.0") && !m("!=1.2.x", "1.1.0"));
        // blang quirk kept: "1.x.x" is a patch wildcard over 1.0.
        assert!(m("1.x.x", "1.0.5") && !m("1.x.x", "1.1.0"));
    }

    #[test]
    fn errors_name_the_range() {
        for bad in ["", "||", ">=1.0.0 ||", "|| 1.0.0", "v1.0.0", ">=1.0", "~1.0.0", "x", "1.0.0-xyz", ">=1,<2"] {
            let e = parse(bad).expect_err(bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        assert!(parse(">=1.0.0-xyz").is_ok(), "an x in a prerelease is fine with an operator");
    }
}
