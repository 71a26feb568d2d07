//! `ferry coordinator`: serves agents and operators until SIGTERM/SIGINT, then ends every stream and exits.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tokio::net::TcpListener;

use ferry::config::LoadedConfig;
use ferry::coordinator::{self, Settings, Transport};
use ferry::grpc::tls::{TlsFiles, server_tls_config};

#[derive(Debug, Args)]
pub struct CoordinatorArgs {
    /// The ferry config file (YAML): locations, clusters, mappings and the `coordinator:` section.
    #[arg(long, short = 'c', env = "FERRY_CONFIG")]
    pub config: PathBuf,
    /// Listen address (overrides coordinator.listen).
    #[arg(long, env = "FERRY_LISTEN")]
    pub listen: Option<String>,
    /// CA that issued agent and operator certificates (overrides coordinator.tls.ca).
    #[arg(long, env = "FERRY_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// The coordinator's certificate (overrides coordinator.tls.cert).
    #[arg(long, env = "FERRY_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The coordinator's private key (overrides coordinator.tls.key).
    #[arg(long, env = "FERRY_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Plaintext gRPC with identities taken from a header: anyone can claim to be any cluster. Local demos only.
    #[arg(long)]
    pub insecure_dev: bool,
}

pub async fn run(args: CoordinatorArgs) -> anyhow::Result<()> {
    let config = LoadedConfig::load(&args.config)?;
    let section = &config.config.coordinator;
    let trust_domain = section.trust_domain.clone();
    let transport = if args.insecure_dev {
        tracing::warn!(
            "--insecure-dev: gRPC is PLAINTEXT and callers choose their own identity; never use this outside a local demo"
        );
        Transport::InsecureDev { trust_domain }
    } else {
        let from_config = section.tls.as_ref();
        let pick = |flag: &Option<PathBuf>, configured: Option<&PathBuf>, what: &str| {
            flag.clone()
                .or_else(|| configured.map(|p| config.resolve_path(p)))
                .with_context(|| format!("no TLS {what}: set coordinator.tls in the config or --tls-{what} (or --insecure-dev for a local demo)"))
        };
        let files = TlsFiles {
            ca: pick(&args.tls_ca, from_config.map(|t| &t.ca), "ca")?,
            cert: pick(&args.tls_cert, from_config.map(|t| &t.cert), "cert")?,
            key: pick(&args.tls_key, from_config.map(|t| &t.key), "key")?,
        };
        Transport::Mtls { tls: server_tls_config(&files)?, trust_domain }
    };
    let listen = args.listen.clone().unwrap_or_else(|| section.listen.clone());
    let listener = TcpListener::bind(&listen).await.with_context(|| format!("cannot listen on {listen}"))?;
    let running = coordinator::start(&config, Settings::from_config(section), listener, transport).await?;
    // Tests and scripts read the actual address (with port 0 in the config) from this line.
    println!("listening on {}", running.addr);
    shutdown_signal().await?;
    tracing::info!("shutting down: ending agent streams");
    running.shutdown().await?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM (Kubernetes) or SIGINT (Ctrl-C).
pub async fn shutdown_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
