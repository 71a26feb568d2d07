//! A small PKI for demos and tests (`ferry certs`): a CA, the coordinator's server certificate, and client
//! certificates carrying ferry identities ([`super::identity`]). Production should use a real PKI
//! (docs/security.md shows cert-manager); nothing else in ferry depends on how certificates were made.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use time::OffsetDateTime;

use super::coordinator_identity::coordinator_uri;
use super::identity::{Role, invalid_name, spiffe_uri};

/// File names inside the output directory.
pub const CA_CERT: &str = "ca.pem";
pub const CA_KEY: &str = "ca-key.pem";
pub const COORDINATOR_CERT: &str = "coordinator.pem";
pub const COORDINATOR_KEY: &str = "coordinator-key.pem";

/// Why certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is a symbolic link; refusing to write a certificate or key through it (remove it first)")]
    Symlink { path: PathBuf },
    #[error("invalid {what} name {name:?}: {reason}")]
    InvalidName { what: &'static str, name: String, reason: String },
    #[error("invalid trust domain {0:?}: must be a non-empty host-like name without '/' or ':'")]
    InvalidTrustDomain(String),
    #[error("validity ends ({not_after:?}) before it starts ({not_before:?})")]
    InvalidValidity { not_before: SystemTime, not_after: SystemTime },
}

/// When a certificate is valid. Tests use a window entirely in the past to get an expired certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl Validity {
    /// From a minute ago (tolerates small clock skew between machines) for `days` days.
    pub fn days_from_now(days: u32) -> Self {
        let now = SystemTime::now();
        Validity {
            not_before: now - Duration::from_secs(60),
            not_after: now + Duration::from_secs(u64::from(days) * 86_400),
        }
    }

    fn apply(&self, params: &mut CertificateParams) -> Result<(), CertError> {
        if self.not_after <= self.not_before {
            return Err(CertError::InvalidValidity { not_before: self.not_before, not_after: self.not_after });
        }
        params.not_before = OffsetDateTime::from(self.not_before);
        params.not_after = OffsetDateTime::from(self.not_after);
        Ok(())
    }
}

/// A certificate and its private key, PEM-encoded.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A certificate authority able to sign ferry certificates.
pub struct Ca {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    // Never print the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// A new self-signed CA whose name mentions the trust domain (for humans reading `openssl x509`).
    pub fn generate(trust_domain: &str, validity: Validity) -> Result<Ca, CertError> {
        check_trust_domain(trust_domain)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(&format!("ferry CA for {trust_domain}"));
        // Only leaf certificates below it: a leaked demo CA cannot mint intermediates.
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        validity.apply(&mut params)?;
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        let key_pem = key.serialize_pem();
        Ok(Ca { cert_pem: cert.pem(), key_pem, issuer: Issuer::new(params, key) })
    }

    /// An existing CA (so more clusters can be added later without re-issuing everything).
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca, CertError> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        Ok(Ca { cert_pem: cert_pem.to_owned(), key_pem: key_pem.to_owned(), issuer })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The coordinator's server certificate: DNS/IP SANs (strings that parse as IP addresses become IP SANs).
    pub fn server_cert(&self, sans: &[String], validity: Validity) -> Result<Issued, CertError> {
        let mut params = CertificateParams::new(sans.to_vec())?;
        params.distinguished_name = dn("ferry coordinator");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        validity.apply(&mut params)?;
        self.sign(params)
    }

    /// The coordinator's certificate: [`Ca::server_cert`] plus the URI SAN `spiffe://<trust-domain>/coordinator`,
    /// which agents with strict coordinator identity require (docs/security.md).
    pub fn coordinator_cert(
        &self,
        trust_domain: &str,
        sans: &[String],
        validity: Validity,
    ) -> Result<Issued, CertError> {
        check_trust_domain(trust_domain)?;
        let mut params = CertificateParams::new(sans.to_vec())?;
        params.subject_alt_names.push(SanType::URI(coordinator_uri(trust_domain).try_into()?));
        params.distinguished_name = dn("ferry coordinator");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        validity.apply(&mut params)?;
        self.sign(params)
    }

    /// A client certificate whose only identity is the role's `spiffe://` URI SAN.
    pub fn client_cert(&self, trust_domain: &str, role: &Role, validity: Validity) -> Result<Issued, CertError> {
        check_trust_domain(trust_domain)?;
        let (what, name) = match role {
            Role::Agent { cluster } => ("cluster", cluster),
            Role::Operator { name } => ("operator", name),
        };
        if let Some(reason) = invalid_name(name) {
            return Err(CertError::InvalidName { what, name: name.clone(), reason });
        }
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(&role.to_string());
        params.subject_alt_names = vec![SanType::URI(spiffe_uri(trust_domain, role).try_into()?)];
        // Client-only: an agent certificate must not be usable as a server certificate.
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        validity.apply(&mut params)?;
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Result<Issued, CertError> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

fn dn(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

fn check_trust_domain(td: &str) -> Result<(), CertError> {
    if td.is_empty() || td.contains(['/', ':', ' ']) {
        return Err(CertError::InvalidTrustDomain(td.to_owned()));
    }
    Ok(())
}

/// What `ferry certs` should make.
#[derive(Debug, Clone)]
pub struct CertsSpec {
    pub out: PathBuf,
    pub trust_domain: String,
    pub clusters: Vec<String>,
    pub operators: Vec<String>,
    /// Extra SANs for the coordinator, besides `localhost` and `127.0.0.1`.
    pub coordinator_sans: Vec<String>,
    pub validity: Validity,
}

/// File names of a role's certificate and key.
pub fn client_file_names(role: &Role) -> (String, String) {
    let stem = match role {
        Role::Agent { cluster } => format!("cluster-{cluster}"),
        Role::Operator { name } => format!("operator-{name}"),
    };
    (format!("{stem}.pem"), format!("{stem}-key.pem"))
}

/// Makes (or reuses, when `ca.pem` and `ca-key.pem` already exist in `out`) the CA and writes the coordinator,
/// agent and operator certificates. Returns the files written, in order. Key files are mode 0600.
pub fn write_all(spec: &CertsSpec) -> Result<Vec<PathBuf>, CertError> {
    // Validate every name before writing anything, so a typo does not leave half a directory behind.
    for (what, names) in [("cluster", &spec.clusters), ("operator", &spec.operators)] {
        for name in names {
            if let Some(reason) = invalid_name(name) {
                return Err(CertError::InvalidName { what, name: name.clone(), reason });
            }
        }
    }
    check_trust_domain(&spec.trust_domain)?;
    fs::create_dir_all(&spec.out).map_err(|source| CertError::Io { path: spec.out.clone(), source })?;

    let (ca_cert, ca_key) = (spec.out.join(CA_CERT), spec.out.join(CA_KEY));
    let roles: Vec<Role> = spec
        .clusters
        .iter()
        .map(|c| Role::Agent { cluster: c.clone() })
        .chain(spec.operators.iter().map(|n| Role::Operator { name: n.clone() }))
        .collect();
    // Every path is checked before anything is written, like the names above; write_file checks again.
    let client_files = roles.iter().flat_map(|role| {
        let (cert, key) = client_file_names(role);
        [cert, key]
    });
    // A reused CA is only read, and may be a link (e.g. to a CA kept elsewhere).
    let reuse_ca = ca_cert.exists() && ca_key.exists();
    let ca_files = if reuse_ca { vec![] } else { vec![CA_CERT, CA_KEY] };
    let own_files = ca_files.into_iter().chain([COORDINATOR_CERT, COORDINATOR_KEY]).map(String::from);
    for name in own_files.chain(client_files) {
        let path = spec.out.join(name);
        if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(CertError::Symlink { path });
        }
    }

    let mut written = Vec::new();
    let ca = if reuse_ca {
        Ca::from_pem(&read(&ca_cert)?, &read(&ca_key)?)?
    } else {
        let ca = Ca::generate(&spec.trust_domain, spec.validity)?;
        written.push(write_file(&ca_cert, ca.cert_pem(), false)?);
        written.push(write_file(&ca_key, ca.key_pem(), true)?);
        ca
    };

    let mut sans = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    sans.extend(spec.coordinator_sans.iter().filter(|s| !sans.contains(s)).cloned().collect::<Vec<_>>());
    let server = ca.coordinator_cert(&spec.trust_domain, &sans, spec.validity)?;
    written.push(write_file(&spec.out.join(COORDINATOR_CERT), &server.cert_pem, false)?);
    written.push(write_file(&spec.out.join(COORDINATOR_KEY), &server.key_pem, true)?);

    for role in &roles {
        let issued = ca.client_cert(&spec.trust_domain, role, spec.validity)?;
        let (cert, key) = client_file_names(role);
        written.push(write_file(&spec.out.join(cert), &issued.cert_pem, false)?);
        written.push(write_file(&spec.out.join(key), &issued.key_pem, true)?);
    }
    Ok(written)
}

fn read(path: &Path) -> Result<String, CertError> {
    fs::read_to_string(path).map_err(|source| CertError::Io { path: path.to_owned(), source })
}

/// Writes a file by creating a new one beside it (mode 0600 for keys from the start, so a key is never briefly
/// world-readable) and renaming it over `path`. A symlink at `path` is refused rather than followed: whoever
/// planted it (in a shared or reused `--out`) would otherwise choose which file receives a private key, or which
/// file gets overwritten. The rename replaces a name, never writes through one, so a link appearing after the
/// check does not redirect the key either.
fn write_file(path: &Path, contents: &str, private: bool) -> Result<PathBuf, CertError> {
    let io = |source| CertError::Io { path: path.to_owned(), source };
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => return Err(CertError::Symlink { path: path.to_owned() }),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let temp_io = |source| CertError::Io { path: temp.clone(), source };
    let mode = if private { 0o600 } else { 0o644 };
    let open = || {
        // O_NOFOLLOW + create_new: never an existing file, never through a link.
        fs::OpenOptions::new().write(true).create_new(true).mode(mode).custom_flags(libc::O_NOFOLLOW).open(&temp)
    };
    let mut file = match open() {
        // Left over from a run that died between create and rename: it is ours to replace.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            fs::remove_file(&temp).map_err(temp_io)?;
            open().map_err(temp_io)?
        }
        other => other.map_err(temp_io)?,
    };
    // The umask may have narrowed the mode of a public file; state it exactly.
    let written = file
        .set_permissions(fs::Permissions::from_mode(mode))
        .and_then(|()| file.write_all(contents.as_bytes()))
        .and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| fs::rename(&temp, path)) {
        let _ = fs::remove_file(&temp);
        return Err(io(e));
    }
    Ok(path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::identity::identity_from_der;

    fn der(pem: &str) -> Vec<u8> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("pem");
        pem.contents
    }

    #[test]
    fn client_certs_carry_the_identity() {
        let ca = Ca::generate("ferry.local", Validity::days_from_now(1)).expect("ca");
        let role = Role::Agent { cluster: "a".into() };
        let issued = ca.client_cert("ferry.local", &role, Validity::days_from_now(1)).expect("cert");
        assert_eq!(identity_from_der(&der(&issued.cert_pem), "ferry.local"), Ok(role));
    }

    #[test]
    fn the_coordinator_certificate_names_the_coordinator() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = CertsSpec {
            out: dir.path().to_owned(),
            trust_domain: "example.org".into(),
            clusters: vec![],
            operators: vec![],
            coordinator_sans: vec!["coordinator.ferry.svc".into()],
            validity: Validity::days_from_now(1),
        };
        write_all(&spec).expect("write");
        let pem = fs::read_to_string(dir.path().join(COORDINATOR_CERT)).expect("read");
        let der = der(&pem);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("x509");
        let san = cert.subject_alternative_name().expect("san").expect("has SANs");
        let names: Vec<String> = san.value.general_names.iter().map(|n| n.to_string()).collect();
        for wanted in ["URI(spiffe://example.org/coordinator)", "DNSName(coordinator.ferry.svc)", "DNSName(localhost)"]
        {
            assert!(names.iter().any(|n| n == wanted), "{wanted} not in {names:?}");
        }
    }

    #[test]
    fn writes_files_with_private_keys_0600_and_reuses_the_ca() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = CertsSpec {
            out: dir.path().join("pki"),
            trust_domain: "ferry.local".into(),
            clusters: vec!["a".into(), "b".into()],
            operators: vec!["admin".into()],
            coordinator_sans: vec!["coordinator.ferry.svc".into()],
            validity: Validity::days_from_now(1),
        };
        let written = write_all(&spec).expect("write");
        assert_eq!(written.len(), 10);
        for path in &written {
            let mode = fs::metadata(path).expect("meta").permissions().mode() & 0o777;
            let is_key = path.to_string_lossy().ends_with("-key.pem");
            assert_eq!(mode, if is_key { 0o600 } else { 0o644 }, "{}", path.display());
        }
        let ca_before = fs::read_to_string(spec.out.join(CA_CERT)).expect("ca");
        let again =
            write_all(&CertsSpec { clusters: vec!["c".into()], operators: vec![], ..spec.clone() }).expect("again");
        assert_eq!(again.len(), 4, "CA reused, not rewritten");
        assert_eq!(fs::read_to_string(spec.out.join(CA_CERT)).expect("ca"), ca_before);
    }

    #[test]
    fn a_symlink_at_a_key_path_is_refused_and_its_target_left_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("pki");
        fs::create_dir(&out).expect("mkdir");
        // Someone who can write the output directory points the coordinator's key at a file of theirs.
        let target = dir.path().join("victim.txt");
        fs::write(&target, "unchanged").expect("write");
        fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).expect("chmod");
        std::os::unix::fs::symlink(&target, out.join(COORDINATOR_KEY)).expect("symlink");
        let spec = CertsSpec {
            out: out.clone(),
            trust_domain: "ferry.local".into(),
            clusters: vec![],
            operators: vec![],
            coordinator_sans: vec![],
            validity: Validity::days_from_now(1),
        };
        let err = write_all(&spec).expect_err("must refuse the symlink");
        assert!(matches!(&err, CertError::Symlink { path } if path == &out.join(COORDINATOR_KEY)), "{err:?}");
        assert!(err.to_string().contains("coordinator-key.pem"), "{err}");
        assert_eq!(fs::read_to_string(&target).expect("read"), "unchanged");
        assert_eq!(fs::metadata(&target).expect("meta").permissions().mode() & 0o777, 0o644);
        assert!(!out.join(CA_CERT).exists(), "checked before anything was written");
        assert!(fs::symlink_metadata(out.join(COORDINATOR_KEY)).expect("meta").file_type().is_symlink());
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(&out).expect("dir").map(|e| e.expect("entry").file_name()).collect();
        assert!(names.iter().all(|n| !n.to_string_lossy().contains(".tmp-")), "{names:?}");
    }

    #[test]
    fn existing_files_are_replaced_with_the_right_modes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("k-key.pem");
        fs::write(&path, "old").expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        write_file(&path, "new", true).expect("write");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new");
        assert_eq!(fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        // The write itself refuses a link too (one planted after write_all's check).
        let link = dir.path().join("link-key.pem");
        std::os::unix::fs::symlink(&path, &link).expect("symlink");
        assert!(matches!(write_file(&link, "evil", true), Err(CertError::Symlink { .. })));
        assert_eq!(fs::read_to_string(&path).expect("read"), "new");
    }

    #[test]
    fn refuses_bad_names_and_validity_before_writing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = CertsSpec {
            out: dir.path().join("pki"),
            trust_domain: "ferry.local".into(),
            clusters: vec!["Bad_Name".into()],
            operators: vec![],
            coordinator_sans: vec![],
            validity: Validity::days_from_now(1),
        };
        assert!(matches!(write_all(&spec), Err(CertError::InvalidName { what: "cluster", .. })));
        assert!(!spec.out.exists());
        let now = SystemTime::now();
        let backwards = Validity { not_before: now, not_after: now - Duration::from_secs(1) };
        assert!(matches!(Ca::generate("ferry.local", backwards), Err(CertError::InvalidValidity { .. })));
    }
}
