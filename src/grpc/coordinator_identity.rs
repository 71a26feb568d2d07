//! Strict coordinator identity, on the agent's side: besides the usual checks (the CA's signature, the DNS name
//! dialled, validity, `serverAuth`), the coordinator's certificate must carry the URI SAN
//! `spiffe://<trust-domain>/coordinator`. Without it, any server certificate the CA ever issued for that name —
//! another service's, one from a cert-manager Issuer shared with other workloads — would be taken for the
//! coordinator, and a rogue server holding one could send agents DesiredSets.
//!
//! tonic's own TLS settings cannot add a check to the server's verification, so a strict connection is made
//! here: TCP, then rustls with [`CoordinatorVerifier`], handed to tonic as an already-secured stream.

use std::path::Path;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tonic::codegen::http::Uri;
use tonic::codegen::{BoxFuture, Context, Poll, Service};

use super::identity;
use super::tls::{TlsFiles, pem_certificates};

/// The path of the coordinator's identity under its trust domain.
const COORDINATOR_PATH: &str = "coordinator";

/// The coordinator's URI SAN in a trust domain (what `ferry certs` writes, and strict agents require).
pub fn coordinator_uri(trust_domain: &str) -> String {
    format!("spiffe://{trust_domain}/{COORDINATOR_PATH}")
}

/// Which coordinator identity an agent requires.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CoordinatorIdentity {
    /// Any server certificate of the CA for the name dialled (ferry's behaviour before strict identity).
    #[default]
    Any,
    /// `spiffe://<trust domain of the agent's own certificate>/coordinator`.
    SameTrustDomain,
    /// Exactly this URI.
    Uri(String),
}

impl CoordinatorIdentity {
    /// `none`, `auto` or a `spiffe://…` URI (the `--coordinator-identity` flag).
    pub fn parse(text: &str) -> Result<Self, StrictError> {
        match text {
            "none" => Ok(CoordinatorIdentity::Any),
            "auto" => Ok(CoordinatorIdentity::SameTrustDomain),
            uri if uri.starts_with("spiffe://") && uri.len() > "spiffe://".len() => {
                Ok(CoordinatorIdentity::Uri(uri.to_owned()))
            }
            other => Err(StrictError::BadSetting(other.to_owned())),
        }
    }

    /// The URI to require when connecting with `files`, or `None` when any server certificate will do.
    pub fn expected(&self, files: &TlsFiles) -> Result<Option<String>, StrictError> {
        match self {
            CoordinatorIdentity::Any => Ok(None),
            CoordinatorIdentity::Uri(uri) => Ok(Some(uri.clone())),
            CoordinatorIdentity::SameTrustDomain => {
                let chain = certificates(&files.cert)?;
                let leaf = chain.first().ok_or_else(|| StrictError::file(&files.cert, "no PEM certificate in it"))?;
                let domain = spiffe_uris(leaf)
                    .into_iter()
                    .find_map(|uri| uri.strip_prefix("spiffe://")?.split('/').next().map(str::to_owned))
                    .ok_or_else(|| StrictError::NoTrustDomain(files.cert.display().to_string()))?;
                Ok(Some(coordinator_uri(&domain)))
            }
        }
    }
}

/// Why a strict connection could not be set up, or the coordinator's certificate was refused.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("TLS configuration: {0}")]
    Rustls(String),
    #[error(
        "--coordinator-identity {0:?}: expected none, auto or a spiffe:// URI (e.g. spiffe://ferry.local/coordinator)"
    )]
    BadSetting(String),
    #[error("{0}: no spiffe:// URI SAN, so no trust domain to derive the coordinator's identity from (auto)")]
    NoTrustDomain(String),
    #[error("the coordinator's certificate is not {expected}: its spiffe:// URI SANs are {found:?}")]
    NotTheCoordinator { expected: String, found: Vec<String> },
    #[error("strict coordinator identity needs the TLS files (CA, certificate, key), not a prepared TLS config")]
    NoFiles,
}

// rustls shows the reason a verifier gives with `{:?}`; the agent's log should read as a sentence.
impl std::fmt::Debug for StrictError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl StrictError {
    fn file(path: &Path, message: impl ToString) -> Self {
        StrictError::File { path: path.display().to_string(), message: message.to_string() }
    }
}

/// The CA's verifier for the name dialled, then the URI SAN.
#[derive(Debug)]
pub struct CoordinatorVerifier {
    inner: Arc<WebPkiServerVerifier>,
    expected: String,
}

impl CoordinatorVerifier {
    /// Whether the (already CA-verified) certificate names exactly the expected identity. One `spiffe://` URI
    /// only, as for clients: a certificate claiming two identities is not the coordinator's. The trust domain
    /// compares case-insensitively (SPIFFE), the path exactly.
    fn check(&self, der: &[u8]) -> Result<(), StrictError> {
        let found = spiffe_uris(der);
        match found.as_slice() {
            [uri] if same_spiffe_id(uri, &self.expected) => Ok(()),
            _ => Err(StrictError::NotTheCoordinator { expected: self.expected.clone(), found }),
        }
    }
}

fn split_spiffe(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix("spiffe://")?.split_once('/')
}

fn same_spiffe_id(a: &str, b: &str) -> bool {
    match (split_spiffe(a), split_spiffe(b)) {
        (Some((domain_a, path_a)), Some((domain_b, path_b))) => {
            domain_a.eq_ignore_ascii_case(domain_b) && path_a == path_b
        }
        _ => false,
    }
}

impl ServerCertVerifier for CoordinatorVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
        match self.check(end_entity) {
            Ok(()) => Ok(verified),
            Err(e) => {
                tracing::warn!(error = %e, "refused the coordinator's certificate");
                Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(e)))))
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A client configuration from `files` that presents the agent's certificate and requires `expected` of the
/// coordinator's.
pub fn strict_client_config(files: &TlsFiles, expected: &str) -> Result<ClientConfig, StrictError> {
    let mut roots = RootCertStore::empty();
    for ca in certificates(&files.ca)? {
        roots.add(ca).map_err(|e| StrictError::file(&files.ca, e))?;
    }
    let chain = certificates(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| StrictError::file(&files.key, e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| StrictError::Rustls(e.to_string()))?;
    let verifier = Arc::new(CoordinatorVerifier { inner, expected: expected.to_owned() });
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StrictError::Rustls(e.to_string()))?
        .dangerous()
        // Not a weaker check: the CA's full verification runs first inside CoordinatorVerifier.
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, key)
        .map_err(|e| StrictError::Rustls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// Connects tonic's channel over TCP + rustls with a strict configuration. The endpoint given to tonic must use
/// `http://` (tonic would add TLS of its own to `https://`); its origin stays `https://`.
#[derive(Clone)]
pub struct StrictConnector {
    tls: TlsConnector,
    server_name: Option<ServerName<'static>>,
}

impl StrictConnector {
    /// `server_name` overrides the host of the URI for the certificate's DNS check (`--tls-server-name`).
    pub fn new(config: ClientConfig, server_name: Option<&str>) -> Result<Self, StrictError> {
        let server_name = server_name
            .map(|name| ServerName::try_from(name.to_owned()).map_err(|e| StrictError::Rustls(e.to_string())))
            .transpose()?;
        Ok(Self { tls: TlsConnector::from(Arc::new(config)), server_name })
    }
}

impl Service<Uri> for StrictConnector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = std::io::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let (tls, server_name) = (self.tls.clone(), self.server_name.clone());
        Box::pin(async move {
            let invalid = |message: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, message);
            let host = uri.host().ok_or_else(|| invalid(format!("{uri}: no host")))?;
            // IPv6 literals come bracketed in a URI; neither TCP nor a server name wants the brackets.
            let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let server_name = match server_name {
                Some(name) => name,
                None => ServerName::try_from(host.clone()).map_err(|e| invalid(format!("{host}: {e}")))?,
            };
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            Ok(TokioIo::new(tls.connect(server_name, tcp).await?))
        })
    }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, StrictError> {
    pem_certificates(path).map_err(|message| StrictError::file(path, message))
}

/// Every `spiffe://` URI SAN of a DER certificate (none when it does not parse).
fn spiffe_uris(der: &[u8]) -> Vec<String> {
    identity::spiffe_uris(der).unwrap_or_default().into_iter().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse() {
        assert_eq!(CoordinatorIdentity::parse("none"), Ok(CoordinatorIdentity::Any));
        assert_eq!(CoordinatorIdentity::parse("auto"), Ok(CoordinatorIdentity::SameTrustDomain));
        let uri = "spiffe://ferry.local/coordinator";
        assert_eq!(CoordinatorIdentity::parse(uri), Ok(CoordinatorIdentity::Uri(uri.into())));
        for bad in ["", "yes", "spiffe://", "https://ferry.local/coordinator"] {
            assert!(matches!(CoordinatorIdentity::parse(bad), Err(StrictError::BadSetting(_))), "{bad}");
        }
    }

    #[test]
    fn spiffe_ids_compare_the_trust_domain_case_insensitively_and_the_path_exactly() {
        assert!(same_spiffe_id("spiffe://FERRY.local/coordinator", "spiffe://ferry.local/coordinator"));
        assert!(!same_spiffe_id("spiffe://ferry.local/Coordinator", "spiffe://ferry.local/coordinator"));
        assert!(!same_spiffe_id("spiffe://ferry.local/cluster/a", "spiffe://ferry.local/coordinator"));
        assert!(!same_spiffe_id("spiffe://other/coordinator", "spiffe://ferry.local/coordinator"));
    }
}
