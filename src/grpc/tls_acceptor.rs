//! The coordinator's TLS front door: mTLS handshakes with certificate files that are read again whenever they
//! change (a cert-manager renewal rewrites them in place; the fleet must not fall off at expiry), a deadline
//! on every handshake (a peer that connects and says nothing holds no slot for long), and a cap on open
//! connections (past it, new peers wait in the kernel's backlog). Handshakes run concurrently; only finished
//! ones reach the gRPC server, which reads each caller's certificate chain from the connection as before.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

use super::tls::TlsFiles;

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

/// The server configuration built from [`TlsFiles`], rebuilt when they change.
pub struct ReloadingTls {
    files: TlsFiles,
    loaded: Mutex<(Stamp, Arc<ServerConfig>)>,
}

impl ReloadingTls {
    /// Reads the files; they must be usable now (a coordinator never starts without a certificate).
    pub fn new(files: TlsFiles) -> Result<Self, ReloadError> {
        let stamp = stamp(&files);
        let config = build(&files)?;
        Ok(Self { files, loaded: Mutex::new((stamp, config)) })
    }

    /// The configuration for the next handshake: re-read if a file changed since the last one. Files caught
    /// half-written (or broken) keep the previous configuration, and the next handshake tries again.
    pub fn current(&self) -> Arc<ServerConfig> {
        let now = stamp(&self.files);
        let mut loaded = self.loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if loaded.0 != now {
            match build(&self.files) {
                Ok(config) => {
                    tracing::info!(cert = %self.files.cert.display(), "TLS files changed; new handshakes use them");
                    *loaded = (now, config);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "TLS files changed but cannot be used yet; keeping the previous ones")
                }
            }
        }
        loaded.1.clone()
    }
}

fn stamp(files: &TlsFiles) -> Stamp {
    [&files.ca, &files.cert, &files.key]
        .iter()
        .map(|p| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
        .collect()
}

fn build(files: &TlsFiles) -> Result<Arc<ServerConfig>, ReloadError> {
    let file_error =
        |path: &std::path::Path, message: String| ReloadError::File { path: path.display().to_string(), message };
    let certs = |path: &std::path::Path| -> Result<Vec<CertificateDer<'static>>, ReloadError> {
        let certs: Vec<_> = CertificateDer::pem_file_iter(path)
            .map_err(|e| file_error(path, e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| file_error(path, e.to_string()))?;
        if certs.is_empty() {
            return Err(file_error(path, "no PEM certificate in it".into()));
        }
        Ok(certs)
    };
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
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ReloadError::Rustls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| ReloadError::Rustls(e.to_string()))?;
    // gRPC is HTTP/2 only.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
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
