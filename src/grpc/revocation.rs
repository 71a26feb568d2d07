//! The coordinator's revocation list: identities and certificate serial numbers it refuses even though their
//! certificates are valid and from the right CA (a stolen agent certificate, a decommissioned cluster).
//!
//! A plain text file rather than a CRL: ferry's demo PKI and cert-manager's CA issuer publish no CRLs, and what an
//! operator has at hand when a certificate leaks is the cluster's name or the certificate's serial number
//! (`openssl x509 -noout -serial`). One entry a line, `#` starts a comment:
//!
//! ```text
//! spiffe://ferry.local/cluster/prod-east   # every certificate of this identity, renewed ones too
//! serial=4F2A9C01...                       # this one certificate (openssl's output, pasted as is)
//! serial:4f:2a:9c:01:...                   # the same, as `openssl x509 -text` prints it
//! ```
//!
//! The file is read with the coordinator's certificates and again whenever it changes (`tls_acceptor.rs`); the
//! check itself is pure: a DER certificate in, whether (and why) it is revoked out.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use super::identity::{Role, identity_from_der, parse_identity};

/// Why a revocation list cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevocationError {
    #[error("{path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path}:{line}: {message}")]
    Entry { path: PathBuf, line: usize, message: String },
}

/// Where the list is and the trust domain its identities are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevocationFile {
    pub path: PathBuf,
    pub trust_domain: String,
}

/// The identities and serial numbers refused. Empty when no list is configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevocationList {
    identities: HashSet<Role>,
    /// Big-endian serial numbers without leading zero bytes (DER adds one to keep a serial positive).
    serials: HashSet<Vec<u8>>,
}

/// A certificate the list refuses, for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revoked {
    /// The certificate's ferry identity (`cluster/b`), or what was wrong with it when it has none.
    pub identity: String,
    /// Its serial number, colon-separated hex.
    pub serial: String,
    /// Which entry matched: `identity` or `serial`.
    pub by: &'static str,
}

impl fmt::Display for Revoked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the certificate of {} (serial {}) is revoked by {}", self.identity, self.serial, self.by)
    }
}

impl RevocationList {
    /// Reads and parses the file; any bad line makes the whole file unusable (a typo must not silently un-revoke).
    pub fn load(file: &RevocationFile) -> Result<Self, RevocationError> {
        let text = std::fs::read_to_string(&file.path)
            .map_err(|e| RevocationError::Read { path: file.path.clone(), message: e.to_string() })?;
        Self::parse(&text, &file.path, &file.trust_domain)
    }

    /// Parses the list's text; `path` is only for error messages.
    pub fn parse(text: &str, path: &Path, trust_domain: &str) -> Result<Self, RevocationError> {
        let mut list = RevocationList::default();
        for (index, raw) in text.lines().enumerate() {
            let entry = raw.split('#').next().unwrap_or_default().trim();
            if entry.is_empty() {
                continue;
            }
            let error = |message: String| RevocationError::Entry { path: path.to_owned(), line: index + 1, message };
            if entry.starts_with("spiffe://") {
                let role = parse_identity(entry, trust_domain).map_err(|e| error(e.to_string()))?;
                list.identities.insert(role);
            } else if let Some(hex) = entry.strip_prefix("serial=").or_else(|| entry.strip_prefix("serial:")) {
                list.serials.insert(parse_serial(hex).map_err(error)?);
            } else {
                return Err(error(format!(
                    "{entry:?} is neither a spiffe:// identity nor serial=<hex> (e.g. the output of openssl x509 \
                     -noout -serial)"
                )));
            }
        }
        Ok(list)
    }

    pub fn is_empty(&self) -> bool {
        self.identities.is_empty() && self.serials.is_empty()
    }

    /// Whether the certificate (DER, already verified against the CA) is refused, and why.
    pub fn check(&self, der: &[u8], trust_domain: &str) -> Option<Revoked> {
        if self.is_empty() {
            return None;
        }
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let serial = cert.tbs_certificate.raw_serial_as_string();
        let identity = identity_from_der(der, trust_domain);
        let by = if self.serials.contains(strip_zeros(cert.tbs_certificate.raw_serial())) {
            "serial"
        } else if identity.as_ref().is_ok_and(|role| self.identities.contains(role)) {
            "identity"
        } else {
            return None;
        };
        let identity = match identity {
            Ok(role) => role.to_string(),
            Err(e) => format!("a certificate without a ferry identity ({e})"),
        };
        Some(Revoked { identity, serial, by })
    }
}

fn parse_serial(hex: &str) -> Result<Vec<u8>, String> {
    let digits: String = hex.chars().filter(|c| *c != ':').collect();
    let bad = || format!("{hex:?} is not a hexadecimal serial number");
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad());
    }
    // An odd number of digits is a leading zero openssl leaves out.
    let padded = if digits.len() % 2 == 1 { format!("0{digits}") } else { digits };
    let bytes = (0..padded.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&padded[i..i + 2], 16).map_err(|_| bad()))
        .collect::<Result<Vec<u8>, String>>()?;
    Ok(strip_zeros(&bytes).to_vec())
}

fn strip_zeros(serial: &[u8]) -> &[u8] {
    let first = serial.iter().position(|b| *b != 0).unwrap_or(serial.len());
    &serial[first..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::certs::{Ca, Validity};

    const TD: &str = "ferry.local";

    fn der(pem: &str) -> Vec<u8> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("pem");
        pem.contents
    }

    fn agent(ca: &Ca, cluster: &str) -> Vec<u8> {
        let role = Role::Agent { cluster: cluster.into() };
        der(&ca.client_cert(TD, &role, Validity::days_from_now(1)).expect("cert").cert_pem)
    }

    fn serial_of(der: &[u8]) -> String {
        x509_parser::parse_x509_certificate(der).expect("x509").1.tbs_certificate.raw_serial_as_string()
    }

    #[test]
    fn identities_and_serials_are_refused_and_nothing_else() {
        let ca = Ca::generate(TD, Validity::days_from_now(1)).expect("ca");
        let (a, b, b_renewed, c) = (agent(&ca, "a"), agent(&ca, "b"), agent(&ca, "b"), agent(&ca, "c"));
        // openssl prints `serial=4F2A...` (upper case, no colons); `-text` prints lower case with colons.
        let c_serial = serial_of(&c).replace(':', "").to_uppercase();
        let text = format!("# stolen laptop\nspiffe://FERRY.local/cluster/b  # all of b\n\nserial={c_serial}\n");
        let list = RevocationList::parse(&text, Path::new("revoked.txt"), TD).expect("parse");
        assert_eq!(list.check(&a, TD), None);
        let revoked = list.check(&b, TD).expect("b is revoked");
        assert_eq!((revoked.identity.as_str(), revoked.by), ("cluster/b", "identity"));
        assert_eq!(list.check(&b_renewed, TD).map(|r| r.by), Some("identity"), "every certificate of b");
        let revoked = list.check(&c, TD).expect("c's certificate is revoked");
        assert_eq!((revoked.by, revoked.serial.clone()), ("serial", serial_of(&c)));
        // Only that certificate: c's next one is fine.
        assert_eq!(list.check(&agent(&ca, "c"), TD), None);
        let colons = RevocationList::parse(&format!("serial:{}", serial_of(&a)), Path::new("r"), TD).expect("parse");
        assert_eq!(colons.check(&a, TD).map(|r| r.by), Some("serial"));
    }

    #[test]
    fn a_bad_line_names_the_file_and_line() {
        for (text, needle) in [
            ("spiffe://ferry.local/cluster/a\ncluster/b\n", "neither a spiffe:// identity"),
            ("spiffe://other.example/cluster/a", "trust domain"),
            ("spiffe://ferry.local/cluster/A", "invalid cluster name"),
            ("serial=xyz", "not a hexadecimal serial"),
            ("serial=", "not a hexadecimal serial"),
        ] {
            let err = RevocationList::parse(text, Path::new("/etc/ferry/revoked.txt"), TD).expect_err(text);
            let message = err.to_string();
            assert!(message.starts_with("/etc/ferry/revoked.txt:"), "{message}");
            assert!(message.contains(needle), "{text}: {message}");
        }
        let err = RevocationList::parse("\n\nnope", Path::new("r"), TD).expect_err("bad");
        assert!(matches!(err, RevocationError::Entry { line: 3, .. }), "{err:?}");
    }

    #[test]
    fn an_empty_list_refuses_nothing() {
        let list = RevocationList::parse("# nobody yet\n", Path::new("r"), TD).expect("parse");
        assert!(list.is_empty());
        assert_eq!(list.check(b"not even a certificate", TD), None);
    }
}
