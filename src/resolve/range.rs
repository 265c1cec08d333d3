//! Semver version ranges in the two dialects the resolver reads.
//!
//! - **blang/semver** (`reference/olm-v0.md` §2.2, §3.4): `olm.skipRange` and the `versionRange` of
//!   `olm.package.required` / `olm.constraint` — parsed by [`crate::catalog::semver_range`] (a port
//!   of blang's `ParseRange`). Versions compare by plain semver 2.0 precedence, so
//!   `4.3.0-201911201000 < 4.3.0` and `>=4.3.0-0` admits pre-releases of 4.3.0.
//! - **OLM v1 `version`** (operator-controller, Masterminds/semver v3 constraints): the syntax of a
//!   Subscription's optional `spec.versionRange`: `>=1.2 <2`, `>=1.2, <2`, `~1.4`, `^1.2`, `1.2.x`,
//!   `||`, and an exact version to pin. Partial versions are wildcards (`1.2` = `1.2.x`). A pre-release
//!   version only satisfies a comparator that itself names a pre-release (Masterminds rule).
//!
//! Build metadata is ignored when comparing (semver 2.0 §10).

use semver::Version;
use std::cmp::Ordering;
use std::fmt;

use crate::catalog::semver_range;

/// Which range dialect a text is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// blang/semver, as OLM v0 reads `olm.skipRange` and `olm.package.required`.
    Blang,
    /// Masterminds/semver v3, as OLM v1 reads a `version` constraint.
    OlmV1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Version,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Blang(semver_range::Range),
    OlmV1(Vec<Vec<Comparator>>),
}

/// A parsed range in either dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRange {
    text: String,
    kind: Kind,
}

/// A range that does not parse: names the text and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version range {text:?}: {message}")]
pub struct RangeError {
    /// The range text as written.
    pub text: String,
    /// What is wrong.
    pub message: String,
}

impl VersionRange {
    /// Parses `text` in `dialect`.
    ///
    /// # Errors
    /// [`RangeError`] when an operator or version does not parse, or the range is empty.
    pub fn parse(text: &str, dialect: Dialect) -> Result<VersionRange, RangeError> {
        match dialect {
            Dialect::Blang => Self::blang(text),
            Dialect::OlmV1 => Self::olm_v1(text),
        }
    }

    /// Parses a blang/semver range (skipRange, `olm.package.required`) with
    /// [`crate::catalog::semver_range::parse`].
    ///
    /// # Errors
    /// [`RangeError`] carrying blang's reason.
    pub fn blang(text: &str) -> Result<VersionRange, RangeError> {
        let r = semver_range::parse(text).map_err(|e| RangeError { text: text.to_string(), message: e.message })?;
        Ok(VersionRange { text: text.trim().to_string(), kind: Kind::Blang(r) })
    }

    /// Parses an OLM v1 `version` constraint (a Subscription's `spec.versionRange`).
    ///
    /// # Errors
    /// [`RangeError`] when an operator or version does not parse, or an alternative is empty.
    pub fn olm_v1(text: &str) -> Result<VersionRange, RangeError> {
        let err = |message: String| RangeError { text: text.to_string(), message };
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
            Kind::OlmV1(any_of) => any_of.iter().any(|all| all.iter().all(|c| c.matches(version))),
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

impl Comparator {
    fn matches(&self, v: &Version) -> bool {
        if !v.pre.is_empty() && self.version.pre.is_empty() {
            return false;
        }
        let ord = v.cmp_precedence(&self.version);
        match self.op {
            Op::Eq => ord == Ordering::Equal,
            Op::Ne => ord != Ordering::Equal,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
        }
    }
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
                Some(p) => p
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| format!("{name} version {p:?} in {s:?} is not a number")),
            }
        };
        let major = next("major")?;
        let minor = next("minor")?;
        let patch = next("patch")?;
        if parts.next().is_some() {
            return Err(format!("{s:?} has more than three version parts"));
        }
        if major.is_none() && (minor.is_some() || patch.is_some())
            || minor.is_none() && patch.is_some()
        {
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
