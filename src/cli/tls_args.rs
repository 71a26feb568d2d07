//! The TLS flags every gRPC command shares: the CA, this side's certificate and key (each also from the
//! environment), and for clients the name to check the coordinator's certificate against.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tonic::transport::ClientTlsConfig;

use ferry::grpc::tls::{TlsFiles, client_tls_config};

#[derive(Debug, Args)]
pub struct TlsArgs {
    /// The CA certificate (PEM) that issued the peers' certificates.
    #[arg(long, env = "FERRY_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// This side's certificate (PEM); its URI SAN is its identity (docs/security.md).
    #[arg(long, env = "FERRY_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// This side's private key (PEM).
    #[arg(long, env = "FERRY_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The three files, each from its flag or else from `configured` (the config file); a missing one is an
    /// error naming its flag.
    pub fn files(&self, configured: Option<TlsFiles>) -> anyhow::Result<TlsFiles> {
        let pick = |flag: &Option<PathBuf>, configured: Option<PathBuf>, name: &str| {
            flag.clone()
                .or(configured)
                .with_context(|| format!("--tls-{name} is required (or --insecure-dev, for a local demo only)"))
        };
        let (ca, cert, key) = match configured {
            Some(files) => (Some(files.ca), Some(files.cert), Some(files.key)),
            None => (None, None, None),
        };
        Ok(TlsFiles {
            ca: pick(&self.tls_ca, ca, "ca")?,
            cert: pick(&self.tls_cert, cert, "cert")?,
            key: pick(&self.tls_key, key, "key")?,
        })
    }
}

/// A client's TLS flags (agents, operators).
#[derive(Debug, Args)]
pub struct ClientTlsArgs {
    #[command(flatten)]
    pub files: TlsArgs,
    /// The name to check the coordinator's certificate against, if not the host in --coordinator.
    #[arg(long, env = "FERRY_TLS_SERVER_NAME")]
    pub tls_server_name: Option<String>,
}

impl ClientTlsArgs {
    pub fn config(&self) -> anyhow::Result<ClientTlsConfig> {
        Ok(client_tls_config(&self.files.files(None)?, self.tls_server_name.as_deref())?)
    }

    /// The files and the server name, for a client that reads them again on every connect.
    pub fn reloadable(&self) -> anyhow::Result<(TlsFiles, Option<String>)> {
        Ok((self.files.files(None)?, self.tls_server_name.clone()))
    }
}
