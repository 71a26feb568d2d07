//! The coordinator's TLS front door: mTLS handshakes with certificate files that are read again whenever they
//! change (a cert-manager renewal rewrites them in place; the fleet must not fall off at expiry), a deadline
//! on every handshake (a peer that connects and says nothing holds no slot for long), and a cap on open
//! connections (past it, new peers wait in the kernel's backlog). Handshakes run concurrently; only finished
//! ones reach the gRPC server, which reads each caller's certificate chain from the connection as before.
//!
//! The revocation list ([`super::revocation`]) is one more of those files: read with them, again when it changes,
//! and checked in the handshake after the CA's signature, so a revoked certificate gets the TLS alert
//! `certificate_revoked` and never reaches the service. Open streams are the service's to end: it watches
//! [`ReloadingTls::revocations`].

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

use super::revocation::{RevocationFile, RevocationList, Revoked};
use super::tls::{TlsFiles, pem_certificates};

/// Why the TLS files could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("TLS configuration: {0}")]
    Rustls(String),
}

/// Bounds on the front door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptLimits {
    /// Longest a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
}

impl Default for AcceptLimits {
    fn default() -> Self {
        Self { handshake_timeout: Duration::from_secs(10), max_connections: 10_000 }
    }
}

/// The files' modification times and sizes: a change in any means a new configuration.
type Stamp = Vec<Option<(SystemTime, u64)>>;

/// Told of every handshake refused for a revoked certificate (the coordinator counts them in its metrics).
pub type RefusalObserver = Box<dyn Fn(&Revoked) + Send + Sync>;

/// The server configuration built from [`TlsFiles`] (and the revocation list, when there is one), rebuilt when
/// they change.
pub struct ReloadingTls {
    files: TlsFiles,
    revocation: Option<RevocationFile>,
    loaded: Mutex<(Stamp, Arc<ServerConfig>)>,
    revocations: watch::Sender<Arc<RevocationList>>,
    observer: Arc<OnceLock<RefusalObserver>>,
}

impl ReloadingTls {
    /// Reads the files; they must be usable now (a coordinator never starts without a certificate).
    pub fn new(files: TlsFiles) -> Result<Self, ReloadError> {
        Self::with_revocation_list(files, None)
    }

    /// As [`ReloadingTls::new`], refusing the certificates that `revocation` names; the list must be usable now
    /// too (a coordinator told to refuse someone does not start without knowing whom).
    pub fn with_revocation_list(files: TlsFiles, revocation: Option<RevocationFile>) -> Result<Self, ReloadError> {
        let stamp = stamp(&files, revocation.as_ref());
        let observer = Arc::new(OnceLock::new());
        let (config, list) = build(&files, revocation.as_ref(), &observer)?;
        Ok(Self {
            files,
            revocation,
            loaded: Mutex::new((stamp, config)),
            revocations: watch::Sender::new(list),
            observer,
        })
    }

    /// The configuration for the next handshake: re-read if a file changed since the last one. Files caught
    /// half-written (or broken) keep the previous configuration, and the next handshake tries again.
    pub fn current(&self) -> Arc<ServerConfig> {
        let now = stamp(&self.files, self.revocation.as_ref());
        let mut loaded = self.loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if loaded.0 != now {
            match build(&self.files, self.revocation.as_ref(), &self.observer) {
                Ok((config, list)) => {
                    tracing::info!(cert = %self.files.cert.display(), "TLS files changed; new handshakes use them");
                    *loaded = (now, config);
                    self.revocations.send_if_modified(|current| {
                        let changed = **current != *list;
                        if changed {
                            tracing::info!(
                                revocation_list = ?self.revocation.as_ref().map(|r| r.path.display().to_string()),
                                "revocation list changed; open streams of revoked certificates are ended"
                            );
                            *current = list;
                        }
                        changed
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "TLS files changed but cannot be used yet; keeping the previous ones")
                }
            }
        }
        loaded.1.clone()
    }

    /// The revocation list in force, updated whenever a changed file is read (by a handshake, or by
    /// [`ReloadingTls::current`] called on a timer).
    pub fn revocations(&self) -> watch::Receiver<Arc<RevocationList>> {
        self.revocations.subscribe()
    }

    /// The trust domain of the revocation list's identities, when there is a list.
    pub fn revocation_trust_domain(&self) -> Option<&str> {
        self.revocation.as_ref().map(|r| r.trust_domain.as_str())
    }

    /// Calls `observer` for every handshake refused for a revoked certificate; only the first observer set counts.
    pub fn observe_refusals(&self, observer: RefusalObserver) {
        let _ = self.observer.set(observer);
    }
}

fn stamp(files: &TlsFiles, revocation: Option<&RevocationFile>) -> Stamp {
    let revocation: Option<&PathBuf> = revocation.map(|r| &r.path);
    [&files.ca, &files.cert, &files.key]
        .into_iter()
        .chain(revocation)
        .map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
        .collect()
}

/// The CA's verifier, then the revocation list: a certificate that is not the CA's is refused as before, and
/// one on the list with `certificate_revoked`.
struct RevokingVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    list: Arc<RevocationList>,
    trust_domain: String,
    observer: Arc<OnceLock<RefusalObserver>>,
}

impl std::fmt::Debug for RevokingVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevokingVerifier").field("list", &self.list).finish_non_exhaustive()
    }
}

impl ClientCertVerifier for RevokingVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self.inner.verify_client_cert(end_entity, intermediates, now)?;
        match self.list.check(end_entity, &self.trust_domain) {
            None => Ok(verified),
            Some(revoked) => {
                tracing::warn!(identity = %revoked.identity, serial = %revoked.serial, by = revoked.by,
                    "refused a revoked client certificate in the TLS handshake");
                if let Some(observer) = self.observer.get() {
                    observer(&revoked);
                }
                Err(rustls::Error::InvalidCertificate(CertificateError::Revoked))
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

fn build(
    files: &TlsFiles,
    revocation: Option<&RevocationFile>,
    observer: &Arc<OnceLock<RefusalObserver>>,
) -> Result<(Arc<ServerConfig>, Arc<RevocationList>), ReloadError> {
    let file_error =
        |path: &std::path::Path, message: String| ReloadError::File { path: path.display().to_string(), message };
    let certs = |path: &std::path::Path| pem_certificates(path).map_err(|message| file_error(path, message));
    let mut roots = RootCertStore::empty();
    for ca in certs(&files.ca)? {
        roots.add(ca).map_err(|e| file_error(&files.ca, e.to_string()))?;
    }
    let chain = certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| file_error(&files.key, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| ReloadError::Rustls(e.to_string()))?;
    let list = match revocation {
        Some(file) => Arc::new(
            RevocationList::load(file)
                .map_err(|e| ReloadError::File { path: file.path.display().to_string(), message: e.to_string() })?,
        ),
        None => Arc::new(RevocationList::default()),
    };
    let verifier: Arc<dyn ClientCertVerifier> = match revocation {
        Some(file) => Arc::new(RevokingVerifier {
            inner: verifier,
            list: list.clone(),
            trust_domain: file.trust_domain.clone(),
            observer: observer.clone(),
        }),
        None => verifier,
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ReloadError::Rustls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| ReloadError::Rustls(e.to_string()))?;
    // gRPC is HTTP/2 only.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok((Arc::new(config), list))
}

/// One accepted mTLS connection; its slot is given back when it closes.
pub struct Connection {
    stream: TlsStream<TcpStream>,
    _slot: OwnedSemaphorePermit,
}

impl Connected for Connection {
    type ConnectInfo = TlsConnectInfo<TcpConnectInfo>;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Connection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Accepts connections on `listener` until the returned stream is dropped; yields finished handshakes.
pub fn incoming(
    listener: TcpListener,
    tls: Arc<ReloadingTls>,
    limits: AcceptLimits,
) -> ReceiverStream<Result<Connection, std::io::Error>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
        loop {
            let slot = tokio::select! {
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => return,
                },
                _ = tx.closed() => return,
            };
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: wait rather than spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = tx.closed() => return,
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = TlsAcceptor::from(tls.current());
            let tx = tx.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        let _ = tx.send(Ok(Connection { stream, _slot: slot })).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, timeout = ?limits.handshake_timeout, "TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}
