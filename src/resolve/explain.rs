//! Resolution failures as data: an [`Explanation`] is a chain of [`Cause`]s (outermost first) and
//! separate hints (what to do), rendered only when shown — in the style of uv's resolver, whose
//! `NoSolutionError` keeps the derivation tree and formats it at display time.
//!
//! The resolver fills these from its candidate selection (`candidates.rs`) and from resolvo's
//! conflict graph (`conflict.rs`); [`Explanation`]'s `Display` is the one-line message the
//! controller puts in a Subscription's `ResolutionFailed` condition and `capstan resolve` prints:
//! the summary, the causes joined by `"; "`, then each hint as `"; hint: …"`.

use std::fmt;

use serde::Serialize;

use super::index::join_and;

/// Why something cannot be resolved: what failed (`summary`), the causes and the hints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The failure in one phrase, e.g. `subscription che cannot be resolved`; `None` when the
    /// single cause says it all (the checks of candidate selection).
    pub summary: Option<String>,
    /// The chain of causes, from the Subscription's request down to what cannot be met.
    pub causes: Vec<Cause>,
    /// What to do, each a sentence in the imperative, without duplicates.
    pub hints: Vec<String>,
}

impl Explanation {
    /// An explanation of one fact and one hint (`hint` may be empty for none).
    pub fn fact(fact: impl Into<String>, hint: impl Into<String>) -> Explanation {
        let mut e = Explanation { summary: None, causes: vec![Cause::Fact(fact.into())], hints: Vec::new() };
        e.hint(hint);
        e
    }

    /// Adds a hint unless it is empty or already there.
    pub fn hint(&mut self, hint: impl Into<String>) {
        let h = hint.into();
        if !h.is_empty() && !self.hints.contains(&h) {
            self.hints.push(h);
        }
    }

    /// Adds a cause unless the same cause is already there.
    pub fn cause(&mut self, cause: Cause) {
        if !self.causes.contains(&cause) {
            self.causes.push(cause);
        }
    }

    /// The same explanation under a (new) summary.
    pub fn with_summary(mut self, summary: impl Into<String>) -> Explanation {
        self.summary = Some(summary.into());
        self
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let causes: Vec<String> = self.causes.iter().map(|c| c.to_string()).collect();
        match (&self.summary, causes.is_empty()) {
            (Some(s), false) => write!(f, "{s}: {}", causes.join("; "))?,
            (Some(s), true) => write!(f, "{s}: the requirements cannot be met together")?,
            (None, false) => f.write_str(&causes.join("; "))?,
            (None, true) => f.write_str("the requirements cannot be met together")?,
        }
        for h in &self.hints {
            write!(f, "; hint: {h}")?;
        }
        Ok(())
    }
}

/// An operator taking part in a conflict: its package and the bundles of it that would be
/// installed, as a phrase (`pelorus-operator 0.0.9 (pelorus-operator.v0.0.9, alpha, catalog
/// olm/community)`, `installed strimzi-cluster-operator.v0.45.0 (strimzi-kafka-operator 0.45.0)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Operator {
    /// Package name.
    pub package: String,
    /// The bundles, described.
    pub bundles: String,
    /// Whether the package's bundle is already installed in the namespace.
    pub installed: bool,
}

/// One link of an [`Explanation`]'s chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Cause {
    /// What a Subscription asks for, and its candidates in OLM's order of preference.
    Request {
        /// `subscription X asks for package P from channel C of catalog K`.
        request: String,
        /// The candidate bundles, described.
        candidates: String,
    },
    /// A bundle's dependency and what can meet it.
    Requires {
        /// The bundles that require it, described (several read "each require").
        by: String,
        /// Whether `by` names several bundles.
        several: bool,
        /// The requirement, e.g. `package devworkspace-operator >=0.11.0`.
        requirement: String,
        /// `met only by …` or, when nothing meets it, what the catalogs offer.
        met_by: String,
        /// Whether nothing meets it at all (then `met_by` says what the catalogs offer).
        unmet: bool,
        /// The bundle author's `failureMessage`, if any.
        failure_message: Option<String>,
    },
    /// Two operators would provide the same APIs in one namespace (at most one provider per API
    /// and namespace, `reference/olm-v0.md` §4.6).
    ApiConflict {
        /// The APIs both provide (`group/version Kind`).
        apis: Vec<String>,
        /// One operator.
        first: Operator,
        /// The other.
        second: Operator,
        /// The namespace.
        namespace: String,
    },
    /// Several bundles of one package would each be needed (one bundle per package and namespace).
    SamePackage {
        /// The package.
        package: String,
        /// The bundles, described (`prometheus 0.47.0 and 0.56.3 (beta, catalog olm/community)`).
        bundles: String,
        /// The namespace.
        namespace: String,
    },
    /// A bundle that can never be installed, and why.
    Excluded {
        /// The bundle, described.
        bundle: String,
        /// Why not (e.g. `it is skipped by foo.v1.2.0 in channel stable`).
        why: String,
    },
    /// An installed bundle that no Subscription being resolved may change.
    InstalledStays {
        /// The installed bundle, described.
        bundle: String,
    },
    /// Any other fact, as a sentence (candidate selection's checks: catalog, package, channel, range).
    Fact(String),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Request { request, candidates } => write!(f, "{request}; candidates: {candidates}"),
            Cause::Requires { by, several, requirement, met_by, unmet, failure_message } => {
                let verb = if *several { "each require" } else { "requires" };
                write!(f, "{by} {verb} {requirement}")?;
                if *unmet {
                    write!(f, "; {met_by}")?
                } else {
                    write!(f, ", met only by {met_by}")?
                }
                if let Some(m) = failure_message {
                    write!(f, " ({m})")?;
                }
                Ok(())
            }
            Cause::ApiConflict { apis, first, second, namespace } => {
                let what =
                    if apis.len() == 1 { format!("API {}", apis[0]) } else { format!("APIs {}", join_and(apis)) };
                write!(
                    f,
                    "{} and {} both provide {what}, and namespace {namespace} can have only one operator providing an API",
                    first.bundles, second.bundles
                )
            }
            Cause::SamePackage { package, bundles, namespace } => write!(
                f,
                "{bundles} would each be installed, but they are bundles of one package, {package}, and namespace {namespace} holds one bundle per package"
            ),
            Cause::Excluded { bundle, why } => write!(f, "{bundle} cannot be installed: {why}"),
            Cause::InstalledStays { bundle } => {
                write!(f, "{bundle} is not referenced by a Subscription being resolved, so it stays as it is")
            }
            Cause::Fact(s) => f.write_str(s),
        }
    }
}

/// Newer candidates a Subscription did not get, and why: the channel head (or the bundles
/// preferred before the chosen one) cannot be installed, so an older bundle was picked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PassedOver {
    /// Names (CSV) of the bundles passed over, most preferred first.
    pub bundles: Vec<String>,
    /// Why none of them can be installed.
    pub why: Explanation,
}

impl fmt::Display for PassedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.bundles.len();
        let names = match n {
            0 => String::from("none"),
            1..=3 => join_and(&self.bundles),
            _ => format!("{}, {} and {} more", self.bundles[0], self.bundles[1], n - 2),
        };
        let noun = if n == 1 { "bundle" } else { "bundles" };
        write!(f, "passed over {n} preferred {noun} ({names}) because they cannot be installed: {}", self.why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_summary_causes_then_hints() {
        let mut e = Explanation::fact("package x (spec.name) is not in catalog olm/c", "check spec.name");
        e.hint("check spec.name");
        assert_eq!(e.to_string(), "package x (spec.name) is not in catalog olm/c; hint: check spec.name");
        let e = e.with_summary("subscription s cannot be resolved");
        assert_eq!(
            e.to_string(),
            "subscription s cannot be resolved: package x (spec.name) is not in catalog olm/c; hint: check spec.name"
        );
    }

    #[test]
    fn passed_over_names_at_most_two_bundles_then_counts() {
        let p = PassedOver {
            bundles: vec!["a.v4".into(), "a.v3".into(), "a.v2".into(), "a.v1".into()],
            why: Explanation::fact("a requires b", ""),
        };
        assert_eq!(
            p.to_string(),
            "passed over 4 preferred bundles (a.v4, a.v3 and 2 more) because they cannot be installed: a requires b"
        );
    }
}
