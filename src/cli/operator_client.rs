//! How operator commands (`ferry status`) reach a running coordinator: its address and an operator
//! certificate, or `--insecure-dev` with a claimed identity.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

use ferry::config::DEFAULT_MAX_MESSAGE_BYTES;
use ferry::grpc::proto::federation_client::FederationClient;
use ferry::grpc::server::DEV_IDENTITY_HEADER;

use super::tls_args::ClientTlsArgs;

#[derive(Debug, Args)]
pub struct CoordinatorConnection {
    /// The coordinator's address.
    #[arg(long, env = "FERRY_COORDINATOR", default_value = "https://127.0.0.1:7443")]
    pub coordinator: String,
    /// mTLS with an operator certificate (URI SAN spiffe://<trust-domain>/operator/<name>).
    #[command(flatten)]
    pub tls: ClientTlsArgs,
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
                endpoint = endpoint.tls_config(self.tls.config()?)?;
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
