//! The CA and serving certificate OLM gives every Deployment that serves webhooks or an owned
//! APIService, and when to rotate them. Pure: no I/O (the clock is an argument).
//!
//! Semantics: \[OLM\] `pkg/controller/certs/certs.go` (`GenerateCA`, `CreateSignedServingPair`,
//! `PEMSHA256`) and `pkg/controller/install/certresources.go` (`DefaultCertValidFor` = 2 years,
//! `DefaultCertMinFresh` = 1 day, `CalculateCertRotatesAt`, `shouldRotateCerts`,
//! `HostnamesForService`, the Secret keys `tls.crt`, `tls.key`, `olmCAKey` and the annotation
//! `olmcahash`). Like OLM: one self-signed CA (CN `olm-selfsigned-<hex serial>`, key usage
//! certSign) per install, a serving certificate (CN = the first host name, SANs = the Service's
//! three DNS names, extended key usage serverAuth) signed by it, both ECDSA P-256, valid from now
//! for the validity. Differences: the organization is `capstan` (OLM writes `Red Hat, Inc.`),
//! the private key is PKCS#8 PEM (`PRIVATE KEY`; OLM writes SEC1 `EC PRIVATE KEY`; Go's
//! `tls.X509KeyPair` and every TLS library read both), and a validity shorter than 4 days (only
//! set for tests, [`CERT_VALIDITY_ENV`]) rotates a quarter of the validity before expiry instead
//! of one day, so that it is not due at once.

use std::collections::BTreeMap;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType, SerialNumber,
};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

/// How long certificates are valid: 730 days (\[OLM\] `DefaultCertValidFor`).
pub const DEFAULT_CERT_VALID_FOR: Duration = Duration::from_secs(730 * 24 * 3600);
/// How long before expiry certificates are rotated: 1 day (\[OLM\] `DefaultCertMinFresh`).
pub const DEFAULT_CERT_MIN_FRESH: Duration = Duration::from_secs(24 * 3600);
/// Environment variable overriding [`DEFAULT_CERT_VALID_FOR`] for the controller, in seconds or
/// with a unit (`90s`, `10m`, `2h`, `3d`). For tests of rotation; not an OLM setting.
pub const CERT_VALIDITY_ENV: &str = "CAPSTAN_CERT_VALIDITY";
/// Secret key of the CA certificate (\[OLM\] `OLMCAPEMKey`).
pub const SECRET_CA_KEY: &str = "olmCAKey";
/// Secret key of the serving certificate.
pub const SECRET_CERT_KEY: &str = "tls.crt";
/// Secret key of the serving certificate's private key.
pub const SECRET_PRIVATE_KEY: &str = "tls.key";
/// Annotation with the SHA-256 (hex) of the CA PEM, on the Secret and the pod template, so that
/// pods restart when the CA changes (\[OLM\] `OLMCAHashAnnotationKey`).
pub const ANNOTATION_CA_HASH: &str = "olmcahash";
/// Organization of capstan's certificates.
pub const ORGANIZATION: &str = "capstan";

/// A CA and a serving certificate signed by it, PEM-encoded, as stored in the Secret
/// `<service>-cert` (`olmCAKey`, `tls.crt`, `tls.key`).
#[derive(Clone, PartialEq, Eq)]
pub struct ServingCert {
    /// The CA certificate (PEM); the `caBundle` of webhook configurations, CRD conversion and
    /// APIServices.
    pub ca_pem: String,
    /// The serving certificate (PEM).
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8 PEM).
    pub key_pem: String,
    /// When both certificates expire.
    pub not_after: OffsetDateTime,
    /// When they are due for rotation ([`rotate_at`]).
    pub rotate_at: OffsetDateTime,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert")
            .field("not_after", &self.not_after)
            .field("rotate_at", &self.rotate_at)
            .finish_non_exhaustive()
    }
}

impl ServingCert {
    /// [`ca_hash`] of the CA.
    pub fn ca_hash(&self) -> String {
        ca_hash(&self.ca_pem)
    }

    /// The Secret's `data` (base64 is the caller's business): `olmCAKey`, `tls.crt`, `tls.key`.
    pub fn secret_data(&self) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([
            (SECRET_CA_KEY.to_string(), self.ca_pem.clone().into_bytes()),
            (SECRET_CERT_KEY.to_string(), self.cert_pem.clone().into_bytes()),
            (SECRET_PRIVATE_KEY.to_string(), self.key_pem.clone().into_bytes()),
        ])
    }
}

/// Why certificates could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// No host names were given.
    #[error("no host names for the serving certificate; the Service name and namespace must not be empty")]
    NoHosts,
    /// rcgen refused the parameters (e.g. a host name that is not a DNS name).
    #[error("cannot issue the serving certificate for {hosts:?}: {source}")]
    Issue {
        /// The host names.
        hosts: Vec<String>,
        /// rcgen's error.
        source: rcgen::Error,
    },
}

/// The DNS names of a Service: `<svc>.<ns>`, `<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local`
/// (\[OLM\] `HostnamesForService`).
pub fn hostnames_for_service(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// SHA-256 of the CA PEM text, lower-case hex (\[OLM\] `certs.PEMSHA256`).
pub fn ca_hash(ca_pem: &str) -> String {
    hex::encode(Sha256::digest(ca_pem.as_bytes()))
}

/// How long before expiry a certificate valid for `valid_for` is rotated: one day
/// ([`DEFAULT_CERT_MIN_FRESH`]), or a quarter of `valid_for` when that is shorter.
pub fn min_fresh(valid_for: Duration) -> Duration {
    DEFAULT_CERT_MIN_FRESH.min(valid_for / 4)
}

/// When a certificate valid from `not_before` to `not_after` is due for rotation:
/// `not_after - min_fresh` (\[OLM\] `CalculateCertRotatesAt`; this is the CSV's
/// `status.certsRotateAt`).
pub fn rotate_at(not_before: OffsetDateTime, not_after: OffsetDateTime) -> OffsetDateTime {
    let valid_for = Duration::try_from(not_after - not_before).unwrap_or_default();
    not_after - min_fresh(valid_for)
}

/// Issues a new CA and a serving certificate for `hosts`, valid from `now` for `valid_for`
/// (\[OLM\] `GenerateCA` + `CreateSignedServingPair`).
///
/// # Errors
/// [`CertError`]: no hosts, or rcgen refuses them.
pub fn issue(hosts: &[String], now: OffsetDateTime, valid_for: Duration) -> Result<ServingCert, CertError> {
    let first = hosts.first().ok_or(CertError::NoHosts)?;
    let err = |source| CertError::Issue { hosts: hosts.to_vec(), source };
    let not_after = now + valid_for;
    let serial = |n: u64| SerialNumber::from_slice(&(n & (i64::MAX as u64)).to_be_bytes());

    let ca_serial: u64 = rand_u64();
    let mut ca = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("olm-selfsigned-{:x}", ca_serial & (i64::MAX as u64)));
    dn.push(DnType::OrganizationName, ORGANIZATION);
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    ca.not_before = now;
    ca.not_after = not_after;
    ca.serial_number = Some(serial(ca_serial));
    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(err)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
    let issuer = Issuer::new(ca, ca_key);

    let mut leaf = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, first.clone());
    dn.push(DnType::OrganizationName, ORGANIZATION);
    leaf.distinguished_name = dn;
    leaf.subject_alt_names =
        hosts.iter().map(|h| h.clone().try_into().map(SanType::DnsName)).collect::<Result<_, _>>().map_err(err)?;
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.not_before = now;
    leaf.not_after = not_after;
    leaf.serial_number = Some(serial(rand_u64()));
    let leaf_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(err)?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(err)?;

    Ok(ServingCert {
        ca_pem: ca_cert.pem(),
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
        not_after,
        rotate_at: rotate_at(now, not_after),
    })
}

/// A random 64-bit number from the OS (through ring, already a dependency of rcgen).
fn rand_u64() -> u64 {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut b = [0u8; 8];
    // SystemRandom fails only when the OS has no randomness; a fixed serial is then still valid.
    let _ = SystemRandom::new().fill(&mut b);
    u64::from_be_bytes(b)
}

/// Whether the certificates in a serving Secret's `data` must be replaced, and why; `None`
/// when they may be kept (\[OLM\] `shouldRotateCerts`): the CA or the serving certificate is
/// missing or malformed, not yet valid or past its [`rotate_at`], the serving certificate lacks
/// one of `hosts` or is not signed by the CA, or the private key is missing.
pub fn rotation_reason(data: &BTreeMap<String, Vec<u8>>, hosts: &[String], now: OffsetDateTime) -> Option<String> {
    use x509_parser::prelude::*;
    let Some(ca_pem) = data.get(SECRET_CA_KEY) else { return Some(format!("no {SECRET_CA_KEY}")) };
    let Some(cert_pem) = data.get(SECRET_CERT_KEY) else { return Some(format!("no {SECRET_CERT_KEY}")) };
    if data.get(SECRET_PRIVATE_KEY).is_none_or(|k| k.is_empty()) {
        return Some(format!("no {SECRET_PRIVATE_KEY}"));
    }
    let parse = |key: &str, pem: &[u8]| -> Result<Pem, String> {
        let (_, p) = parse_x509_pem(pem).map_err(|e| format!("{key} is not PEM: {e}"))?;
        Ok(p)
    };
    let ca_pem = match parse(SECRET_CA_KEY, ca_pem) {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    let cert_pem = match parse(SECRET_CERT_KEY, cert_pem) {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    let ca = match ca_pem.parse_x509() {
        Ok(c) => c,
        Err(e) => return Some(format!("{SECRET_CA_KEY} is not a certificate: {e}")),
    };
    let cert = match cert_pem.parse_x509() {
        Ok(c) => c,
        Err(e) => return Some(format!("{SECRET_CERT_KEY} is not a certificate: {e}")),
    };
    for (key, c) in [(SECRET_CA_KEY, &ca), (SECRET_CERT_KEY, &cert)] {
        let nb = c.validity().not_before.to_datetime();
        let na = c.validity().not_after.to_datetime();
        if now < nb || now >= na {
            return Some(format!("{key} is not valid now (valid from {nb} to {na})"));
        }
        let due = rotate_at(nb, na);
        if now >= due {
            return Some(format!("{key} is due for rotation since {due} (expires {na})"));
        }
    }
    if cert.verify_signature(Some(ca.public_key())).is_err() {
        return Some(format!("{SECRET_CERT_KEY} is not signed by {SECRET_CA_KEY}"));
    }
    let names: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| if let GeneralName::DNSName(d) = n { Some(d.to_string()) } else { None })
            .collect(),
        _ => Vec::new(),
    };
    for h in hosts {
        if !names.contains(h) {
            return Some(format!("{SECRET_CERT_KEY} does not name host {h}"));
        }
    }
    None
}

/// The validity (`notBefore`, `notAfter`) of the serving certificate (`tls.crt`) in a serving
/// Secret's `data`; `None` when it is missing or not a PEM certificate. With [`rotate_at`] this
/// gives the CSV's `status.certsLastUpdated` / `status.certsRotateAt`.
pub fn validity(data: &BTreeMap<String, Vec<u8>>) -> Option<(OffsetDateTime, OffsetDateTime)> {
    use x509_parser::prelude::*;
    let (_, pem) = parse_x509_pem(data.get(SECRET_CERT_KEY)?).ok()?;
    let cert = pem.parse_x509().ok()?;
    Some((cert.validity().not_before.to_datetime(), cert.validity().not_after.to_datetime()))
}

/// The validity in [`CERT_VALIDITY_ENV`] (`90`, `90s`, `10m`, `2h`, `3d`), else
/// [`DEFAULT_CERT_VALID_FOR`].
///
/// # Errors
/// [`ValidityError`], naming the variable and its value, when it cannot be read or is under 60 s.
pub fn validity_from_env() -> Result<Duration, ValidityError> {
    match std::env::var(CERT_VALIDITY_ENV) {
        Err(_) => Ok(DEFAULT_CERT_VALID_FOR),
        Ok(v) if v.trim().is_empty() => Ok(DEFAULT_CERT_VALID_FOR),
        Ok(v) => parse_validity(&v).ok_or(ValidityError { value: v }),
    }
}

/// [`CERT_VALIDITY_ENV`] is set to something that is not a duration of at least 60 s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{CERT_VALIDITY_ENV}={value:?} is not a duration of at least 60 s; write seconds or a number with s, m, h or d (e.g. 10m)"
)]
pub struct ValidityError {
    /// The variable's value.
    pub value: String,
}

fn parse_validity(v: &str) -> Option<Duration> {
    let v = v.trim();
    let (num, unit) = match v.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&v[..i], &v[i..]),
        None => (v, "s"),
    };
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        "d" => n.checked_mul(86400)?,
        _ => return None,
    };
    (secs >= 60).then(|| Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Vec<String> {
        hostnames_for_service("op-service", "ns")
    }

    #[test]
    fn issued_certificates_are_kept_until_one_day_before_expiry() {
        let now = OffsetDateTime::now_utc();
        let c = issue(&hosts(), now, DEFAULT_CERT_VALID_FOR).unwrap();
        assert_eq!(c.not_after - now, time::Duration::days(730));
        assert_eq!(c.not_after - c.rotate_at, time::Duration::days(1));
        let data = c.secret_data();
        assert_eq!(rotation_reason(&data, &hosts(), now + time::Duration::seconds(1)), None);
        assert_eq!(rotation_reason(&data, &hosts(), now + time::Duration::days(728)), None);
        let due =
            rotation_reason(&data, &hosts(), now + time::Duration::days(729) + time::Duration::seconds(1)).unwrap();
        assert!(due.contains("due for rotation"), "{due}");
        assert!(rotation_reason(&data, &hosts(), now + time::Duration::days(731)).unwrap().contains("not valid now"));
        assert!(c.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(c.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_eq!(c.ca_hash().len(), 64);
    }

    #[test]
    fn serving_certificate_names_the_service_and_is_signed_by_the_ca() {
        use x509_parser::prelude::*;
        let now = OffsetDateTime::now_utc();
        let c = issue(&hosts(), now, DEFAULT_CERT_VALID_FOR).unwrap();
        let (_, pem) = parse_x509_pem(c.cert_pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        assert_eq!(cert.subject().iter_common_name().next().unwrap().as_str().unwrap(), "op-service.ns");
        let eku = cert.extended_key_usage().unwrap().unwrap();
        assert!(eku.value.server_auth);
        let (_, capem) = parse_x509_pem(c.ca_pem.as_bytes()).unwrap();
        let ca = capem.parse_x509().unwrap();
        assert!(ca.is_ca());
        assert!(ca.subject().iter_common_name().next().unwrap().as_str().unwrap().starts_with("olm-selfsigned-"));
        assert!(ca.key_usage().unwrap().unwrap().value.key_cert_sign());
        cert.verify_signature(Some(ca.public_key())).unwrap();
    }

    #[test]
    fn wrong_hosts_foreign_ca_and_missing_keys_force_rotation() {
        let now = OffsetDateTime::now_utc();
        let c = issue(&hosts(), now, DEFAULT_CERT_VALID_FOR).unwrap();
        let other = issue(&hostnames_for_service("x-service", "ns"), now, DEFAULT_CERT_VALID_FOR).unwrap();
        let r = rotation_reason(&c.secret_data(), &hostnames_for_service("x-service", "ns"), now).unwrap();
        assert!(r.contains("does not name host x-service.ns"), "{r}");
        let mut mixed = c.secret_data();
        mixed.insert(SECRET_CA_KEY.into(), other.ca_pem.clone().into_bytes());
        assert!(rotation_reason(&mixed, &hosts(), now).unwrap().contains("not signed by"));
        for key in [SECRET_CA_KEY, SECRET_CERT_KEY, SECRET_PRIVATE_KEY] {
            let mut d = c.secret_data();
            d.remove(key);
            assert_eq!(rotation_reason(&d, &hosts(), now).unwrap(), format!("no {key}"));
        }
        let mut garbage = c.secret_data();
        garbage.insert(SECRET_CERT_KEY.into(), b"not pem".to_vec());
        assert!(rotation_reason(&garbage, &hosts(), now).unwrap().contains("tls.crt is not PEM"));
    }

    #[test]
    fn short_validity_rotates_a_quarter_before_expiry() {
        let now = OffsetDateTime::now_utc();
        let c = issue(&hosts(), now, Duration::from_secs(120)).unwrap();
        assert_eq!(c.not_after - c.rotate_at, time::Duration::seconds(30));
        assert_eq!(rotation_reason(&c.secret_data(), &hosts(), now + time::Duration::seconds(89)), None);
        assert!(rotation_reason(&c.secret_data(), &hosts(), now + time::Duration::seconds(91)).is_some());
        assert_eq!(parse_validity("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_validity("90"), Some(Duration::from_secs(90)));
        assert_eq!(parse_validity("3d"), Some(Duration::from_secs(3 * 86400)));
        assert_eq!(parse_validity("30s"), None);
        assert_eq!(parse_validity("1w"), None);
    }
}
