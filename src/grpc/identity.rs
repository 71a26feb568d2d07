//! Who is calling: derived from the peer's verified client certificate, never from a message.
//!
//! The scheme (docs/security.md) is a single URI SAN in SPIFFE form:
//! `spiffe://<trust-domain>/cluster/<name>` for an agent and `spiffe://<trust-domain>/operator/<name>` for an
//! operator. A URI SAN is used rather than a DNS SAN so that an agent certificate can never double as a server
//! certificate for a host name, and so that the role is explicit in the identity itself.
//!
//! Everything here is pure: it looks at DER bytes that rustls has already verified against the CA (or, with
//! `--insecure-dev` only, at the identity a request claims in a header).

use std::fmt;

use tonic::{Request, Status};
use x509_parser::extensions::GeneralName;

use crate::model::names::invalid_namespace_name;

/// The scheme prefix of every ferry identity.
const SPIFFE: &str = "spiffe://";

/// The metadata key that carries the caller's identity when TLS is off (`--insecure-dev` only).
pub const DEV_IDENTITY_HEADER: &str = "x-ferry-dev-identity";

/// What a verified caller may be.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    /// The agent of one cluster: may open a `Session` for that cluster only.
    Agent { cluster: String },
    /// A human or tool with the operator role: may call `GetStatus` and `Plan`.
    Operator { name: String },
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Agent { cluster } => write!(f, "cluster/{cluster}"),
            Role::Operator { name } => write!(f, "operator/{name}"),
        }
    }
}

/// Why a certificate does not carry a usable ferry identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("the peer presented no client certificate")]
    NoCertificate,
    #[error("the client certificate is not valid X.509: {0}")]
    Malformed(String),
    #[error("the client certificate has no URI SAN with a spiffe:// identity")]
    NoIdentity,
    #[error("the client certificate has {0} spiffe:// identities; exactly one is allowed")]
    Ambiguous(usize),
    #[error("identity {uri:?} is in trust domain {found:?}, expected {expected:?}")]
    WrongTrustDomain { uri: String, found: String, expected: String },
    #[error("identity {uri:?} is not of the form spiffe://<trust-domain>/cluster/<name> or /operator/<name>")]
    UnknownShape { uri: String },
    #[error("identity {uri:?} names an invalid {what} name: {reason}")]
    InvalidName { uri: String, what: &'static str, reason: String },
}

/// The identity in a DER certificate (the leaf of the peer's chain), for the given trust domain.
///
/// Every `spiffe://` URI SAN counts, whatever its trust domain: a certificate naming two identities is
/// refused rather than letting the order of SANs decide who the caller is.
pub fn identity_from_der(der: &[u8], trust_domain: &str) -> Result<Role, IdentityError> {
    let uris = spiffe_uris(der)?;
    match uris.as_slice() {
        [] => Err(IdentityError::NoIdentity),
        [uri] => parse_identity(uri, trust_domain),
        more => Err(IdentityError::Ambiguous(more.len())),
    }
}

/// Every `spiffe://` URI SAN of a DER certificate, whatever its trust domain.
pub fn spiffe_uris(der: &[u8]) -> Result<Vec<&str>, IdentityError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| IdentityError::Malformed(e.to_string()))?;
    let san = cert.subject_alternative_name().map_err(|e| IdentityError::Malformed(e.to_string()))?;
    Ok(san
        .iter()
        .flat_map(|ext| ext.value.general_names.iter())
        .filter_map(|name| match name {
            GeneralName::URI(uri) if uri.starts_with(SPIFFE) => Some(*uri),
            _ => None,
        })
        .collect())
}

/// The identity of the first certificate of a peer chain (what tonic's `Request::peer_certs` returns).
pub fn identity_from_chain<C: AsRef<[u8]>>(chain: Option<&[C]>, trust_domain: &str) -> Result<Role, IdentityError> {
    let leaf = chain.and_then(|c| c.first()).ok_or(IdentityError::NoCertificate)?;
    identity_from_der(leaf.as_ref(), trust_domain)
}

/// How callers are identified.
#[derive(Debug, Clone)]
pub enum Authentication {
    /// From the verified client certificate's SPIFFE URI SAN, in this trust domain.
    Certificate { trust_domain: String },
    /// `--insecure-dev`: from the `x-ferry-dev-identity` header (`cluster/<name>` or `operator/<name>`). Anyone
    /// can claim anything; for local demos only.
    InsecureDev { trust_domain: String },
}

impl Authentication {
    /// The caller of `request`, or UNAUTHENTICATED.
    pub fn caller<T>(&self, request: &Request<T>) -> Result<Role, Status> {
        match self {
            Authentication::Certificate { trust_domain } => {
                let certs = request.peer_certs();
                identity_from_chain(certs.as_deref().map(Vec::as_slice), trust_domain)
                    .map_err(|e| Status::unauthenticated(e.to_string()))
            }
            Authentication::InsecureDev { trust_domain } => {
                let claimed =
                    request.metadata().get(DEV_IDENTITY_HEADER).and_then(|v| v.to_str().ok()).ok_or_else(|| {
                        Status::unauthenticated(format!("--insecure-dev: no {DEV_IDENTITY_HEADER} header"))
                    })?;
                parse_identity(&format!("spiffe://{trust_domain}/{claimed}"), trust_domain)
                    .map_err(|e| Status::unauthenticated(e.to_string()))
            }
        }
    }
}

/// Parses one `spiffe://` URI into a role.
pub fn parse_identity(uri: &str, trust_domain: &str) -> Result<Role, IdentityError> {
    let rest = uri.strip_prefix(SPIFFE).ok_or_else(|| IdentityError::UnknownShape { uri: uri.to_owned() })?;
    let (domain, path) = rest.split_once('/').ok_or_else(|| IdentityError::UnknownShape { uri: uri.to_owned() })?;
    // Trust domains are case-insensitive host-like names (SPIFFE ID spec), so compare them that way.
    if !domain.eq_ignore_ascii_case(trust_domain) {
        return Err(IdentityError::WrongTrustDomain {
            uri: uri.to_owned(),
            found: domain.to_owned(),
            expected: trust_domain.to_owned(),
        });
    }
    let (kind, name) = path.split_once('/').ok_or_else(|| IdentityError::UnknownShape { uri: uri.to_owned() })?;
    // Names double as Kubernetes label values and file names, so hold them to DNS-1123 label rules; this also
    // refuses '/', '..', query strings and empty names.
    let what = match kind {
        "cluster" => "cluster",
        "operator" => "operator",
        _ => return Err(IdentityError::UnknownShape { uri: uri.to_owned() }),
    };
    if let Some(reason) = invalid_name(name) {
        return Err(IdentityError::InvalidName { uri: uri.to_owned(), what, reason });
    }
    Ok(match kind {
        "cluster" => Role::Agent { cluster: name.to_owned() },
        _ => Role::Operator { name: name.to_owned() },
    })
}

/// The URI SAN for a role in a trust domain (what `ferry certs` writes).
pub fn spiffe_uri(trust_domain: &str, role: &Role) -> String {
    format!("{SPIFFE}{trust_domain}/{role}")
}

/// Why a cluster or operator name is unusable, or `None` when it is a DNS-1123 label.
pub fn invalid_name(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("name is empty".into());
    }
    // The namespace rules fit (a DNS-1123 label), but their messages say "namespace", so check '.' here.
    if name.contains('.') {
        return Some("name must not contain '.' (a DNS-1123 label: lowercase letters, digits, '-')".into());
    }
    invalid_namespace_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, KeyPair, SanType};

    const TD: &str = "ferry.local";

    fn cert_with(sans: Vec<SanType>) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.subject_alt_names = sans;
        let key = KeyPair::generate().expect("key");
        params.self_signed(&key).expect("cert").der().to_vec()
    }

    fn uri(s: &str) -> SanType {
        SanType::URI(s.try_into().expect("ia5"))
    }

    #[test]
    fn agent_and_operator_identities() {
        let der = cert_with(vec![uri("spiffe://ferry.local/cluster/a")]);
        assert_eq!(identity_from_der(&der, TD), Ok(Role::Agent { cluster: "a".into() }));
        let der =
            cert_with(vec![uri("spiffe://FERRY.local/operator/admin"), SanType::DnsName("x".try_into().unwrap())]);
        assert_eq!(identity_from_der(&der, TD), Ok(Role::Operator { name: "admin".into() }));
    }

    #[test]
    fn round_trips_through_spiffe_uri() {
        for role in [Role::Agent { cluster: "prod-1".into() }, Role::Operator { name: "ops".into() }] {
            assert_eq!(parse_identity(&spiffe_uri(TD, &role), TD), Ok(role));
        }
    }

    #[test]
    fn wrong_trust_domain() {
        let der = cert_with(vec![uri("spiffe://evil.example/cluster/a")]);
        assert!(
            matches!(identity_from_der(&der, TD), Err(IdentityError::WrongTrustDomain { found, .. }) if found == "evil.example")
        );
    }

    #[test]
    fn no_uri_san() {
        assert_eq!(identity_from_der(&cert_with(vec![]), TD), Err(IdentityError::NoIdentity));
        let dns_only = cert_with(vec![SanType::DnsName("cluster-a".try_into().unwrap())]);
        assert_eq!(identity_from_der(&dns_only, TD), Err(IdentityError::NoIdentity));
        let other_scheme = cert_with(vec![uri("https://ferry.local/cluster/a")]);
        assert_eq!(identity_from_der(&other_scheme, TD), Err(IdentityError::NoIdentity));
    }

    #[test]
    fn two_identities_are_refused() {
        let der = cert_with(vec![uri("spiffe://ferry.local/cluster/a"), uri("spiffe://ferry.local/operator/admin")]);
        assert_eq!(identity_from_der(&der, TD), Err(IdentityError::Ambiguous(2)));
        // Even when the second one is in a foreign trust domain: no first-match-wins.
        let der = cert_with(vec![uri("spiffe://ferry.local/cluster/a"), uri("spiffe://other/cluster/b")]);
        assert_eq!(identity_from_der(&der, TD), Err(IdentityError::Ambiguous(2)));
    }

    #[test]
    fn invalid_names_and_shapes() {
        for bad in [
            "spiffe://ferry.local/cluster/A",
            "spiffe://ferry.local/cluster/",
            "spiffe://ferry.local/cluster/a/b",
            "spiffe://ferry.local/cluster/a.b",
            "spiffe://ferry.local/cluster/-a",
        ] {
            assert!(
                matches!(parse_identity(bad, TD), Err(IdentityError::InvalidName { what: "cluster", .. })),
                "{bad}"
            );
        }
        for bad in [
            "spiffe://ferry.local",
            "spiffe://ferry.local/cluster",
            "spiffe://ferry.local/admin/x",
            "spiffe://ferry.local/",
        ] {
            assert!(matches!(parse_identity(bad, TD), Err(IdentityError::UnknownShape { .. })), "{bad}");
        }
    }

    #[test]
    fn missing_or_garbage_certificate() {
        assert_eq!(identity_from_chain::<Vec<u8>>(None, TD), Err(IdentityError::NoCertificate));
        assert_eq!(identity_from_chain::<Vec<u8>>(Some(&[]), TD), Err(IdentityError::NoCertificate));
        assert!(matches!(identity_from_der(b"not a cert", TD), Err(IdentityError::Malformed(_))));
    }
}
