//! tonic TLS configuration from PEM files: the coordinator requires a client certificate issued by the
//! configured CA; clients (agents, operators) present theirs and verify the coordinator against the same CA.
//!
//! tonic with the `tls-aws-lc` feature builds its rustls configs with the aws-lc-rs provider, the only one in
//! ferry's tree.

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: no PEM certificate in it")]
    NoCertificate { path: PathBuf },
    #[error("{path}: no PEM private key in it")]
    NoKey { path: PathBuf },
}

/// The three files every ferry TLS endpoint needs.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA that issued the peers' certificates.
    pub ca: PathBuf,
    /// This endpoint's certificate (chain), PEM.
    pub cert: PathBuf,
    /// Its private key, PEM.
    pub key: PathBuf,
}

/// Server side: presents `cert`/`key` and refuses any client without a certificate issued by `ca`.
pub fn server_tls_config(files: &TlsFiles) -> Result<ServerTlsConfig, TlsError> {
    let (ca, identity) = load(files)?;
    // client_auth_optional(false) is tonic's default; stated because mTLS is the whole point here.
    Ok(ServerTlsConfig::new().identity(identity).client_ca_root(ca).client_auth_optional(false))
}

/// Client side: presents `cert`/`key` and trusts only `ca` for the server. `domain` overrides the name checked
/// against the server certificate (e.g. `localhost` when dialing an IP address that the certificate lacks).
pub fn client_tls_config(files: &TlsFiles, domain: Option<&str>) -> Result<ClientTlsConfig, TlsError> {
    let (ca, identity) = load(files)?;
    let config = ClientTlsConfig::new().ca_certificate(ca).identity(identity);
    Ok(match domain {
        Some(domain) => config.domain_name(domain),
        None => config,
    })
}

/// Reads and sanity-checks the files now: tonic only parses PEM when the first connection is made, and a
/// typo'd path should fail at start-up with the file's name instead.
fn load(files: &TlsFiles) -> Result<(Certificate, Identity), TlsError> {
    let ca = read(&files.ca)?;
    require_cert(&files.ca, &ca)?;
    let cert = read(&files.cert)?;
    require_cert(&files.cert, &cert)?;
    let key = read(&files.key)?;
    if !String::from_utf8_lossy(&key).contains("PRIVATE KEY-----") {
        return Err(TlsError::NoKey { path: files.key.clone() });
    }
    Ok((Certificate::from_pem(ca), Identity::from_pem(cert, key)))
}

/// The PEM certificates of `path`, for the configs built with rustls directly (`tls_acceptor`,
/// `coordinator_identity`); the error is a message for the caller to put beside the path.
pub fn pem_certificates(path: &Path) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no PEM certificate in it".into());
    }
    Ok(certs)
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_owned(), source })
}

fn require_cert(path: &Path, pem: &[u8]) -> Result<(), TlsError> {
    let has_cert =
        x509_parser::pem::Pem::iter_from_buffer(pem).any(|p| p.map(|p| p.label == "CERTIFICATE").unwrap_or(false));
    if has_cert { Ok(()) } else { Err(TlsError::NoCertificate { path: path.to_owned() }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_wrong_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let not_pem = dir.path().join("x.pem");
        std::fs::write(&not_pem, "hello").expect("write");
        let files = TlsFiles { ca: dir.path().join("nope.pem"), cert: not_pem.clone(), key: not_pem.clone() };
        assert!(matches!(server_tls_config(&files), Err(TlsError::Read { path, .. }) if path.ends_with("nope.pem")));
        let files = TlsFiles { ca: not_pem.clone(), ..files };
        assert!(matches!(client_tls_config(&files, None), Err(TlsError::NoCertificate { .. })));
    }
}
