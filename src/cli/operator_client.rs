//! How operator commands (`ferry status`) reach a running coordinator: its address and an operator
//! certificate, or `--insecure-dev` with a claimed identity.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

use ferry::config::DEFAULT_MAX_MESSAGE_BYTES;
use ferry::grpc::proto::federation_client::FederationClient;
use ferry::grpc::server::DEV_IDENTITY_HEADER;
use ferry::grpc::tls::{TlsFiles, client_tls_config};

#[derive(Debug, Args)]
pub struct CoordinatorConnection {
    /// The coordinator's address.
    #[arg(long, env = "FERRY_COORDINATOR", default_value = "https://127.0.0.1:7443")]
    pub coordinator: String,
    /// The CA that issued the coordinator's certificate.
    #[arg(long, env = "FERRY_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// An operator certificate (URI SAN spiffe://<trust-domain>/operator/<name>).
    #[arg(long, env = "FERRY_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    #[arg(long, env = "FERRY_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// The name to check the coordinator's certificate against, if not the host in --coordinator.
    #[arg(long, env = "FERRY_TLS_SERVER_NAME")]
    pub tls_server_name: Option<String>,
    /// Plaintext, for a coordinator started with --insecure-dev; claims this identity.
    #[arg(long, value_name = "IDENTITY", num_args = 0..=1, default_missing_value = "operator/dev")]
    pub insecure_dev: Option<String>,
}

pub type OperatorClient = FederationClient<tonic::service::interceptor::InterceptedService<Channel, DevIdentity>>;

/// Adds the claimed identity header in `--insecure-dev` mode.
#[derive(Clone)]
pub struct DevIdentity(Option<MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for DevIdentity {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert(DEV_IDENTITY_HEADER, value.clone());
        }
        Ok(request)
    }
}

impl CoordinatorConnection {
    pub async fn connect(&self) -> anyhow::Result<OperatorClient> {
        let mut endpoint = Endpoint::from_shared(self.coordinator.clone())
            .with_context(|| format!("invalid --coordinator {:?}", self.coordinator))?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30));
        let identity = match &self.insecure_dev {
            Some(identity) => {
                Some(MetadataValue::try_from(identity.as_str()).context("invalid --insecure-dev identity")?)
            }
            None => {
                let need = |p: &Option<PathBuf>, flag: &str| {
                    p.clone()
                        .with_context(|| format!("{flag} is required (or --insecure-dev for a local demo coordinator)"))
                };
                let files = TlsFiles {
                    ca: need(&self.tls_ca, "--tls-ca")?,
                    cert: need(&self.tls_cert, "--tls-cert")?,
                    key: need(&self.tls_key, "--tls-key")?,
                };
                endpoint = endpoint.tls_config(client_tls_config(&files, self.tls_server_name.as_deref())?)?;
                None
            }
        };
        let channel = endpoint
            .connect()
            .await
            .with_context(|| format!("cannot reach the coordinator at {}", self.coordinator))?;
        Ok(FederationClient::with_interceptor(channel, DevIdentity(identity))
            .max_decoding_message_size(DEFAULT_MAX_MESSAGE_BYTES))
    }
}
