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

//!
//! [`VersionRange`] reads a range in either dialect the resolver sees: **blang** (above; plain
//! semver 2.0 precedence, so `4.3.0-201911201000 < 4.3.0` and `>=4.3.0-0` admits pre-releases of
//! 4.3.0) or **OLM v1 `version`** (operator-controller, Masterminds/semver v3 constraints), the
//! syntax of a Subscription's optional `spec.versionRange`: `>=1.2 <2`, `>=1.2, <2`, `~1.4`,
//! `^1.2`, `1.2.x`, `||`, and an exact version to pin. Partial versions are wildcards (`1.2` =
//! `1.2.x`); a pre-release version only satisfies a comparator that itself names a pre-release.
//! This is the one owner of semver ranges (the resolver re-exports [`VersionRange`]).
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
#[error(
    "invalid semver range {range:?}: {message} (ranges use blang/semver syntax, e.g. \">=1.0.0 <2.0.0\", \"<1.2.3 || >=2.0.0\", \"1.2.x\")"
)]
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
            let op =
                Op::parse(op_str).ok_or_else(|| err(format!("could not parse comparator {op_str:?} in {part:?}")))?;
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

/// Which range dialect a text is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// blang/semver, as OLM v0 reads `olm.skipRange` and `olm.package.required`.
    Blang,
    /// Masterminds/semver v3, as OLM v1 reads a `version` constraint.
    OlmV1,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Blang(Range),
    OlmV1(Vec<Vec<Comparator>>),
}

/// A parsed range in either dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRange {
    text: String,
    kind: Kind,
}

/// A [`VersionRange`] that does not parse: names the text and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version range {text:?}: {message}")]
pub struct VersionRangeError {
    /// The range text as written.
    pub text: String,
    /// What is wrong.
    pub message: String,
}

impl VersionRange {
    /// Parses `text` in `dialect`.
    ///
    /// # Errors
    /// [`VersionRangeError`] when an operator or version does not parse, or the range is empty.
    pub fn parse(text: &str, dialect: Dialect) -> Result<VersionRange, VersionRangeError> {
        match dialect {
            Dialect::Blang => Self::blang(text),
            Dialect::OlmV1 => Self::olm_v1(text),
        }
    }

    /// Parses a blang/semver range (skipRange, `olm.package.required`) with
    /// [`parse`].
    ///
    /// # Errors
    /// [`VersionRangeError`] carrying blang's reason.
    pub fn blang(text: &str) -> Result<VersionRange, VersionRangeError> {
        let r = parse(text).map_err(|e| VersionRangeError { text: text.to_string(), message: e.message })?;
        Ok(VersionRange { text: text.trim().to_string(), kind: Kind::Blang(r) })
    }

    /// Parses an OLM v1 `version` constraint (a Subscription's `spec.versionRange`).
    ///
    /// # Errors
    /// [`VersionRangeError`] when an operator or version does not parse, or an alternative is empty.
    pub fn olm_v1(text: &str) -> Result<VersionRange, VersionRangeError> {
        let err = |message: String| VersionRangeError { text: text.to_string(), message };
        let mut any_of = Vec::new();
        for alternative in text.split("||") {
            let cleaned = alternative.replace(',', " ");
            let tokens = join_operators(cleaned.split_whitespace());
            if tokens.is_empty() {
                return Err(err("empty alternative (nothing between `||`)".into()));
            }
            let mut all_of = Vec::new();
            for token in tokens {
                parse_term(&token, &mut all_of).map_err(&err)?;
            }
            any_of.push(all_of);
        }
        Ok(VersionRange { text: text.trim().to_string(), kind: Kind::OlmV1(any_of) })
    }

    /// Whether `version` lies in the range.
    pub fn matches(&self, version: &Version) -> bool {
        match &self.kind {
            Kind::Blang(r) => r.matches(version),
            Kind::OlmV1(any_of) => any_of.iter().any(|all| all.iter().all(|c| v1_matches(c, version))),
        }
    }

    /// Whether the range would admit `version` if its pre-release were dropped — used to explain
    /// why an installed pre-release falls outside a skipRange.
    pub fn matches_release_of(&self, version: &Version) -> bool {
        let mut release = version.clone();
        release.pre = semver::Prerelease::EMPTY;
        release.build = semver::BuildMetadata::EMPTY;
        self.matches(&release)
    }

    /// The range as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether `v` satisfies comparator `c` of an OLM v1 range: as [`Comparator::matches`], except
/// that a pre-release only satisfies a comparator that itself names one (Masterminds rule).
fn v1_matches(c: &Comparator, v: &Version) -> bool {
    (v.pre.is_empty() || !c.version.pre.is_empty()) && c.matches(v)
}

/// Joins a lone operator token with the version after it (`>= 1.0.0` → `>=1.0.0`).
fn join_operators<'a>(tokens: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut pending = String::new();
    for t in tokens {
        if t.chars().all(|c| matches!(c, '<' | '>' | '=' | '!' | '~' | '^')) {
            pending.push_str(t);
        } else {
            out.push(format!("{pending}{t}"));
            pending.clear();
        }
    }
    if !pending.is_empty() {
        out.push(pending);
    }
    out
}

/// A version with possibly missing or wildcard parts.
struct Partial {
    major: Option<u64>,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: semver::Prerelease,
    build: semver::BuildMetadata,
}

impl Partial {
    fn parse(s: &str) -> Result<Partial, String> {
        let s = s.strip_prefix('v').unwrap_or(s);
        if s.is_empty() {
            return Err("missing version after operator".into());
        }
        let (core, build) = match s.split_once('+') {
            Some((c, b)) => (c, Some(b)),
            None => (s, None),
        };
        let (core, pre) = match core.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (core, None),
        };
        let mut parts = core.split('.');
        let mut next = |name: &str| -> Result<Option<u64>, String> {
            match parts.next() {
                None => Ok(None),
                Some("x" | "X" | "*") => Ok(None),
                Some(p) => {
                    p.parse::<u64>().map(Some).map_err(|_| format!("{name} version {p:?} in {s:?} is not a number"))
                }
            }
        };
        let major = next("major")?;
        let minor = next("minor")?;
        let patch = next("patch")?;
        if parts.next().is_some() {
            return Err(format!("{s:?} has more than three version parts"));
        }
        if major.is_none() && (minor.is_some() || patch.is_some()) || minor.is_none() && patch.is_some() {
            return Err(format!("{s:?} has a number after a wildcard"));
        }
        let pre = match pre {
            Some(p) => semver::Prerelease::new(p).map_err(|e| format!("pre-release of {s:?}: {e}"))?,
            None => semver::Prerelease::EMPTY,
        };
        let build = match build {
            Some(b) => semver::BuildMetadata::new(b).map_err(|e| format!("build metadata of {s:?}: {e}"))?,
            None => semver::BuildMetadata::EMPTY,
        };
        Ok(Partial { major, minor, patch, pre, build })
    }

    fn is_complete(&self) -> bool {
        self.patch.is_some()
    }

    /// The lowest version the partial covers (`1.2` → `1.2.0`, `*` → `0.0.0`).
    fn floor(&self) -> Version {
        let mut v = Version::new(self.major.unwrap_or(0), self.minor.unwrap_or(0), self.patch.unwrap_or(0));
        v.pre = self.pre.clone();
        v.build = self.build.clone();
        v
    }

    /// The first version above everything the partial covers, or `None` for `*`.
    fn ceiling(&self) -> Option<Version> {
        match (self.major, self.minor, self.patch) {
            (None, _, _) => None,
            (Some(m), None, _) => Some(Version::new(m.saturating_add(1), 0, 0)),
            (Some(m), Some(n), None) => Some(Version::new(m, n.saturating_add(1), 0)),
            (Some(m), Some(n), Some(p)) => Some(Version::new(m, n, p.saturating_add(1))),
        }
    }
}

fn parse_term(token: &str, out: &mut Vec<Comparator>) -> Result<(), String> {
    let (op, rest) = split_op(token);
    let partial = Partial::parse(rest)?;
    let floor = partial.floor();
    let ge = |v: Version| Comparator { op: Op::Ge, version: v };
    let lt = |v: Version| Comparator { op: Op::Lt, version: v };
    match op {
        "~" | "~>" => {
            // ~1.2.3 → >=1.2.3 <1.3.0; ~1.2 → >=1.2.0 <1.3.0; ~1 → >=1.0.0 <2.0.0
            out.push(ge(floor));
            let m = partial.major.unwrap_or(0);
            match partial.minor {
                Some(n) => out.push(lt(Version::new(m, n.saturating_add(1), 0))),
                None if partial.major.is_some() => out.push(lt(Version::new(m.saturating_add(1), 0, 0))),
                None => {}
            }
        }
        "^" => {
            out.push(ge(floor));
            let (m, n, p) = (partial.major.unwrap_or(0), partial.minor, partial.patch);
            let upper = match (m, n, p) {
                (0, Some(0), Some(p)) if partial.is_complete() => Version::new(0, 0, p.saturating_add(1)),
                (0, Some(n), _) => Version::new(0, n.saturating_add(1), 0),
                (0, None, _) if partial.major.is_none() => return Ok(()),
                (m, _, _) => Version::new(m.saturating_add(1), 0, 0),
            };
            out.push(lt(upper));
        }
        "" | "=" | "==" => {
            if partial.is_complete() {
                out.push(Comparator { op: Op::Eq, version: floor });
            } else {
                out.push(ge(floor));
                if let Some(c) = partial.ceiling() {
                    out.push(lt(c));
                }
            }
        }
        "!=" | "!" => {
            if partial.is_complete() {
                out.push(Comparator { op: Op::Ne, version: floor });
            } else {
                return Err(format!("`{token}`: a wildcard cannot be negated"));
            }
        }
        ">" => match partial.ceiling() {
            _ if partial.is_complete() => out.push(Comparator { op: Op::Gt, version: floor }),
            Some(c) => out.push(ge(c)),
            None => out.push(Comparator { op: Op::Lt, version: Version::new(0, 0, 0) }),
        },
        ">=" | "=>" => out.push(ge(floor)),
        "<" => out.push(lt(floor)),
        "<=" | "=<" => match partial.ceiling() {
            _ if partial.is_complete() => out.push(Comparator { op: Op::Le, version: floor }),
            Some(c) => out.push(lt(c)),
            None => out.push(ge(Version::new(0, 0, 0))),
        },
        other => return Err(format!("unknown operator {other:?}")),
    }
    Ok(())
}

fn split_op(token: &str) -> (&str, &str) {
    let end = token.find(|c: char| !matches!(c, '<' | '>' | '=' | '!' | '~' | '^')).unwrap_or(token.len());
    (&token[..end], &token[end..])
}

/// Parses a bundle version as semver 2.0 (a leading `v` is tolerated).
///
/// # Errors
/// The semver parser's message.
pub fn parse_version(text: &str) -> Result<Version, semver::Error> {
    let t = text.trim();
    Version::parse(t.strip_prefix('v').unwrap_or(t))
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

    // The dialect layer (formerly resolve::range).

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn blang_prerelease_sorts_below_release() {
        let r = VersionRange::blang(">=4.3.0 <4.3.1").unwrap();
        assert!(!r.matches(&v("4.3.0-201911201000")));
        assert!(r.matches(&v("4.3.0")));
        assert!(r.matches_release_of(&v("4.3.0-201911201000")));
        let floor = VersionRange::blang(">=4.3.0-0 <4.3.1").unwrap();
        assert!(floor.matches(&v("4.3.0-201911201000")));
        assert!(!floor.matches(&v("4.3.1")));
    }

    #[test]
    fn blang_or_not_and_spaced_operators() {
        let r = VersionRange::blang("> 1.0.0 !1.2.1 || >=3.0.0").unwrap();
        assert!(r.matches(&v("1.2.0")));
        assert!(!r.matches(&v("1.2.1")));
        assert!(!r.matches(&v("1.0.0")));
        assert!(r.matches(&v("3.1.0")));
        assert!(r.matches(&v("2.5.0")));
        assert!(VersionRange::blang("~1.2").is_err());
        assert!(VersionRange::blang(">=a.b").is_err());
        assert!(VersionRange::blang("").is_err());
    }

    #[test]
    fn build_metadata_is_ignored() {
        let r = VersionRange::blang("=1.0.0").unwrap();
        assert!(r.matches(&v("1.0.0+build.5")));
    }

    #[test]
    fn olm_v1_forms() {
        let r = VersionRange::olm_v1(">=1.2 <2").unwrap();
        assert!(r.matches(&v("1.2.0")) && r.matches(&v("1.9.9")) && !r.matches(&v("2.0.0")) && !r.matches(&v("1.1.9")));
        let t = VersionRange::olm_v1("~1.4").unwrap();
        assert!(t.matches(&v("1.4.7")) && !t.matches(&v("1.5.0")));
        let x = VersionRange::olm_v1("1.2.x").unwrap();
        assert!(x.matches(&v("1.2.9")) && !x.matches(&v("1.3.0")));
        let o = VersionRange::olm_v1("1.0.0 || 2.x").unwrap();
        assert!(o.matches(&v("1.0.0")) && o.matches(&v("2.3.0")) && !o.matches(&v("1.0.1")));
        let pin = VersionRange::olm_v1("0.1.1").unwrap();
        assert!(pin.matches(&v("0.1.1")) && !pin.matches(&v("0.1.2")));
        let caret = VersionRange::olm_v1("^0.2.3").unwrap();
        assert!(caret.matches(&v("0.2.9")) && !caret.matches(&v("0.3.0")));
        let comma = VersionRange::olm_v1(">=1.0.0, <1.1.0").unwrap();
        assert!(comma.matches(&v("1.0.5")) && !comma.matches(&v("1.1.0")));
        // Masterminds: pre-releases only match comparators that name one.
        assert!(!r.matches(&v("1.5.0-rc1")));
        assert!(VersionRange::olm_v1(">=1.5.0-0").unwrap().matches(&v("1.5.0-rc1")));
        let gt = VersionRange::olm_v1(">1.2").unwrap();
        assert!(!gt.matches(&v("1.2.5")) && gt.matches(&v("1.3.0")));
        let le = VersionRange::olm_v1("<=1.2").unwrap();
        assert!(le.matches(&v("1.2.5")) && !le.matches(&v("1.3.0")));
        // Huge numbers saturate instead of overflowing (no panic on input).
        let huge = VersionRange::olm_v1("~18446744073709551615.18446744073709551615").unwrap();
        assert!(!huge.matches(&v("1.0.0")));
    }
}
