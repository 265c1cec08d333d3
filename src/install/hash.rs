//! The hashes capstan puts in names and labels: Go's base-62 digits ([`base62`]), OLM's
//! `DeepHashObject` ([`deep_hash_object`]) and capstan's own short name-safe hash
//! ([`short_hash`]). Pure.

use serde_json::Value;
use sha2::{Digest, Sha224, Sha256};

use crate::bundle::gojson::marshal_raw;

/// Big-endian bytes as a base-62 number with Go's `big.Int.Text(62)` digits (0-9, a-z, A-Z).
pub(crate) fn base62(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut num: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut out = Vec::new();
    while !num.is_empty() {
        let mut rem: u32 = 0;
        let mut next = Vec::with_capacity(num.len());
        for &b in &num {
            let cur = (rem << 8) | u32::from(b);
            let q = cur / 62;
            rem = cur % 62;
            if !(next.is_empty() && q == 0) {
                next.push(q as u8);
            }
        }
        out.push(DIGITS[rem as usize]);
        num = next;
    }
    if out.is_empty() {
        out.push(b'0');
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// A short, name-safe hash of a JSON value: the first 4 bytes of SHA-256 of its compact JSON as
/// a decimal number, each digit mapped through Kubernetes' `rand.SafeEncodeString` alphabet
/// (`bcdfghjklmnpqrstvwxz2456789`), the same shape as OLM's `DeepHashObject` names (e.g.
/// `6f7b8c9d5`).
pub fn short_hash(v: &Value) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let digest = Sha256::digest(marshal_raw(v).as_bytes());
    let n = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    n.to_string().bytes().map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char).collect()
}

/// OLM's `DeepHashObject` (v0.38.0 `pkg/lib/kubernetes/pkg/util/hash/hash.go`): base62 of SHA-224
/// over what Go's `json.Encoder` writes for `obj` (compact JSON, HTML characters escaped, a
/// trailing newline). `obj`'s keys must be in the Go struct's field order.
pub fn deep_hash_object(obj: &Value) -> String {
    let mut text = marshal_raw(obj);
    text.push('\n');
    base62(&Sha224::digest(text.as_bytes()))
}
