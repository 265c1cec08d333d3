//! Types and helpers shared by the `operators.coreos.com` kinds.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Status of a condition: `True`, `False` or `Unknown` (Kubernetes `corev1.ConditionStatus`, as
/// OLM's Subscription, InstallPlan and bundle-lookup conditions use it;
/// `reference/olm-v0.md` §1.3, §1.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known whether the condition holds.
    Unknown,
}

impl ConditionStatus {
    /// The wire string (`True`, `False`, `Unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b { ConditionStatus::True } else { ConditionStatus::False }
    }
}

/// How an InstallPlan gets approved: `Automatic` or `Manual` (OLM `Approval`,
/// `pkg/operators/v1alpha1/installplan_types.go`; `reference/olm-v0.md` §1.3, §1.4).
/// A Subscription without `installPlanApproval` means `Automatic`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Approval {
    /// InstallPlans are approved on creation (`spec.approved: true`).
    #[default]
    Automatic,
    /// InstallPlans wait in `RequiresApproval` until `spec.approved` is set to `true`.
    Manual,
}

impl Approval {
    /// The wire string (`Automatic` or `Manual`).
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Automatic => "Automatic",
            Approval::Manual => "Manual",
        }
    }
}

/// Schema of a preserved object: `{type: object, x-kubernetes-preserve-unknown-fields: true}`.
pub(crate) fn preserve_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

/// Schema of a preserved value that may also be `null`.
pub(crate) fn preserve_object_nullable(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "nullable": true, "x-kubernetes-preserve-unknown-fields": true })
}

/// Schema of a preserved list of objects that may also be `null`.
pub(crate) fn preserve_object_list_nullable(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "nullable": true,
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// Deserializes a field that is present, including an explicit `null`, as `Some(value)`, so a
/// preserved subtree round-trips exactly (absent stays `None` through `#[serde(default)]`).
pub(crate) fn keep_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Parses a Go duration string (`500ms`, `45s`, `1m30s`, `1.5h`), as Go's `time.ParseDuration`
/// does (via [`kube::core::Duration`]), refusing negative values.
///
/// # Errors
/// A message quoting `text` when it does not parse or is negative.
pub fn parse_go_duration(text: &str) -> Result<std::time::Duration, String> {
    let d: kube::core::Duration =
        text.trim().parse().map_err(|e| format!("{text:?} is not a duration ({e}); write e.g. 500ms, 45s or 1m30s"))?;
    if d.is_negative() {
        return Err(format!("{text:?} is negative; a duration must be zero or more"));
    }
    Ok(d.into())
}

/// The error Go's `time.ParseDuration` gives for `text`, word for word (`time: unknown unit
/// "mError" in duration "45mError.code"`, `time: missing unit in duration "45"`, `time: invalid
/// duration "x"`; Go's `src/time/format.go`), for status messages OLM clients compare; `None`
/// when Go would parse it (overflow aside). Pure.
pub fn go_duration_error(text: &str) -> Option<String> {
    const UNITS: [&str; 8] = ["ns", "us", "\u{b5}s", "\u{3bc}s", "ms", "s", "m", "h"];
    let invalid = |what: &str| Some(format!("time: {what} {text:?}"));
    let mut s = text.as_bytes();
    if let Some(b'-' | b'+') = s.first() {
        s = &s[1..];
    }
    if s == b"0" {
        return None;
    }
    if s.is_empty() {
        return invalid("invalid duration");
    }
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return invalid("invalid duration");
        }
        let int = s.iter().take_while(|c| c.is_ascii_digit()).count();
        s = &s[int..];
        let mut frac = 0;
        if s.first() == Some(&b'.') {
            frac = s[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            s = &s[1 + frac..];
        }
        if int == 0 && frac == 0 {
            return invalid("invalid duration");
        }
        let len = s.iter().take_while(|&&c| !(c == b'.' || c.is_ascii_digit())).count();
        if len == 0 {
            return invalid("missing unit in duration");
        }
        // The unit ends before an ASCII byte, so it is whole UTF-8.
        let unit = std::str::from_utf8(&s[..len]).unwrap_or_default();
        if !UNITS.contains(&unit) {
            return Some(format!("time: unknown unit {unit:?} in duration {text:?}"));
        }
        s = &s[len..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_errors_are_gos_words() {
        assert_eq!(
            go_duration_error("45mError.code").as_deref(),
            Some(r#"time: unknown unit "mError" in duration "45mError.code""#),
            "OLM's e2e suite compares this one"
        );
        assert_eq!(go_duration_error("45").as_deref(), Some(r#"time: missing unit in duration "45""#));
        assert_eq!(go_duration_error("").as_deref(), Some(r#"time: invalid duration """#));
        assert_eq!(go_duration_error("x5m").as_deref(), Some(r#"time: invalid duration "x5m""#));
        assert_eq!(go_duration_error(".m").as_deref(), Some(r#"time: invalid duration ".m""#));
        for ok in ["0", "45m", "1h30m", "1.5h", ".5s", "-3s", "10\u{b5}s", "2ms"] {
            assert_eq!(go_duration_error(ok), None, "{ok}");
        }
    }

    open_enum! {
        /// Test enum.
        enum Colour {
            /// Red.
            Red = "red",
            /// Green.
            Green = "GreenLight",
        }
    }

    #[test]
    fn open_enum_reads_known_and_keeps_unknown_values() {
        let v: Vec<Colour> = serde_json::from_str(r#"["red","GreenLight","blue",""]"#).unwrap();
        assert_eq!(v, vec![Colour::Red, Colour::Green, Colour::Other("blue".into()), Colour::Other(String::new())]);
        assert_eq!(serde_json::to_string(&v).unwrap(), r#"["red","GreenLight","blue",""]"#);
        assert!(Colour::Red.is_known());
        assert!(!Colour::from("green").is_known(), "matching is exact, case-sensitive");
        assert_eq!(Colour::KNOWN, &["red", "GreenLight"]);
    }

    #[test]
    fn condition_status_and_approval_use_olm_spelling() {
        assert_eq!(serde_json::to_value(ConditionStatus::Unknown).unwrap(), "Unknown");
        assert_eq!(serde_json::from_value::<Approval>("Manual".into()).unwrap(), Approval::Manual);
        assert!(serde_json::from_value::<Approval>("manual".into()).is_err());
        assert_eq!(Approval::default(), Approval::Automatic);
    }
}
