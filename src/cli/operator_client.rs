//! How operator commands (`ferry status`, `ferry describe`) reach a running coordinator: its address and an
//! operator certificate, or `--insecure-dev` with a claimed identity. Each comes from its flag (or environment
//! variable), else from the client config file's context, else the default.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

use ferry::grpc::chunks::DEFAULT_MAX_MESSAGE_BYTES;
use ferry::grpc::identity::DEV_IDENTITY_HEADER;
use ferry::grpc::proto::federation_client::FederationClient;

use ferry::grpc::tls::client_tls_config;

use super::client_config;
use super::exit::{ExitKind, classify, usage};
use super::tls_args::{ClientTlsArgs, TlsArgs};

#[derive(Debug, Args)]
pub struct CoordinatorConnection {
    /// The coordinator's address [default: the client config context's, else https://127.0.0.1:7443].
    #[arg(long, env = "FERRY_COORDINATOR")]
    pub coordinator: Option<String>,
    /// mTLS with an operator certificate (URI SAN spiffe://<trust-domain>/operator/<name>).
    #[command(flatten)]
    pub tls: ClientTlsArgs,
    /// Plaintext, for a coordinator started with --insecure-dev; claims this identity.
    #[arg(long, value_name = "IDENTITY", num_args = 0..=1, default_missing_value = "operator/dev")]
    pub insecure_dev: Option<String>,
    /// The client config file (contexts: coordinator, ca, cert, key) [default: ~/.config/ferry/client.yaml if it
    /// exists].
    #[arg(long, env = "FERRY_CLIENT_CONFIG", value_name = "FILE")]
    pub client_config: Option<PathBuf>,
    /// The context of the client config file to use [default: its current-context].
    #[arg(long, env = "FERRY_CLIENT_CONTEXT", value_name = "NAME")]
    pub client_context: Option<String>,
}

/// Where no flag and no context says otherwise.
pub const DEFAULT_COORDINATOR: &str = "https://127.0.0.1:7443";

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
        let context =
            client_config::select(self.client_config.as_deref(), self.client_context.as_deref())?.unwrap_or_default();
        let coordinator =
            self.coordinator.clone().or(context.coordinator.clone()).unwrap_or_else(|| DEFAULT_COORDINATOR.to_string());
        let mut endpoint = Endpoint::from_shared(coordinator.clone())
            .with_context(|| format!("invalid coordinator address {coordinator:?}"))
            .map_err(usage)?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30));
        let identity = match &self.insecure_dev {
            Some(identity) => Some(
                MetadataValue::try_from(identity.as_str()).context("invalid --insecure-dev identity").map_err(usage)?,
            ),
            None => {
                // Flag over file, file by file.
                let files = TlsArgs {
                    tls_ca: self.tls.files.tls_ca.clone().or(context.ca),
                    tls_cert: self.tls.files.tls_cert.clone().or(context.cert),
                    tls_key: self.tls.files.tls_key.clone().or(context.key),
                }
                .files(None)
                .map_err(usage)?;
                let server_name = self.tls.tls_server_name.clone().or(context.tls_server_name);
                let config = client_tls_config(&files, server_name.as_deref()).map_err(usage)?;
                endpoint = endpoint.tls_config(config).map_err(usage)?;
                None
            }
        };
        let channel = endpoint
            .connect()
            .await
            .with_context(|| format!("cannot reach the coordinator at {coordinator}"))
            .map_err(|e| classify(ExitKind::Unreachable, e))?;
        Ok(FederationClient::with_interceptor(channel, DevIdentity(identity))
            .max_decoding_message_size(DEFAULT_MAX_MESSAGE_BYTES))
    }
}
