//! `ferry coordinator`: serves agents and operators until SIGTERM/SIGINT, then ends every stream and exits.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tokio::net::TcpListener;

use ferry::config::LoadedConfig;
use ferry::coordinator::leadership::ElectionConfig;
use ferry::coordinator::{self, Election, Settings, Transport};
use ferry::grpc::revocation::RevocationFile;
use ferry::grpc::tls::TlsFiles;
use ferry::grpc::tls_acceptor::ReloadingTls;

use super::tls_args::TlsArgs;

#[derive(Debug, Args)]
pub struct CoordinatorArgs {
    /// The ferry config file (YAML): locations, clusters, mappings and the `coordinator:` section.
    #[arg(long, short = 'c', env = "FERRY_CONFIG")]
    pub config: PathBuf,
    /// Listen address (overrides coordinator.listen).
    #[arg(long, env = "FERRY_LISTEN")]
    pub listen: Option<String>,
    /// /healthz, /readyz and /metrics address (overrides coordinator.metricsListen; "" disables it).
    #[arg(long, env = "FERRY_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Web status page address (overrides coordinator.statusPageListen; "" disables it, the default). Loopback
    /// only (e.g. 127.0.0.1:8080): open it through `kubectl port-forward`.
    #[arg(long, env = "FERRY_STATUS_PAGE_LISTEN")]
    pub status_page_listen: Option<String>,
    /// mTLS (each flag overrides coordinator.tls in the config): the CA of agent and operator certificates,
    /// and the coordinator's own certificate and key.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Identities (spiffe://…) and certificate serial numbers (serial=<hex>) to refuse, one a line (overrides
    /// coordinator.tls.revocationList). Read again whenever it changes: no restart to revoke an agent.
    #[arg(long, env = "FERRY_TLS_REVOCATION_LIST")]
    pub tls_revocation_list: Option<PathBuf>,
    /// Plaintext gRPC with identities taken from a header: anyone can claim to be any cluster. Local demos only.
    #[arg(long)]
    pub insecure_dev: bool,
    /// Run as one of several replicas: only the holder of this Lease (coordination.k8s.io) serves agents and
    /// operators; the others wait as warm standbys (not ready). Unset: a single replica that always serves.
    #[arg(long, env = "FERRY_LEADER_ELECTION_LEASE")]
    pub leader_election_lease: Option<String>,
    /// The Lease's namespace (in a pod: its own, from the downward API).
    #[arg(long, env = "POD_NAMESPACE", default_value = "ferry")]
    pub leader_election_namespace: String,
    /// This replica's name in the Lease (in a pod: its name; default: the host name).
    #[arg(long, env = "POD_NAME")]
    pub leader_election_identity: Option<String>,
    /// How long a Lease its holder stopped renewing keeps it (failover takes up to this long after a crash).
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub lease_duration: std::time::Duration,
    /// kubeconfig for the Lease (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "FERRY_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
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
        let configured = section.tls.as_ref().map(|t| TlsFiles {
            ca: config.resolve_path(&t.ca),
            cert: config.resolve_path(&t.cert),
            key: config.resolve_path(&t.key),
        });
        let files = args.tls.files(configured)?;
        let revocation_list = args
            .tls_revocation_list
            .clone()
            .or_else(|| section.tls.as_ref().and_then(|t| t.revocation_list.as_ref()).map(|p| config.resolve_path(p)));
        let revocation = revocation_list.map(|path| RevocationFile { path, trust_domain: trust_domain.clone() });
        let tls = ReloadingTls::with_revocation_list(files, revocation)?;
        Transport::Mtls { tls: std::sync::Arc::new(tls), trust_domain }
    };
    let status_page_listen = args.status_page_listen.clone().unwrap_or_else(|| section.status_page_listen.clone());
    // Checked before anything starts: a coordinator asked to show its page on the network does not start.
    if !status_page_listen.is_empty() {
        coordinator::status_page::check_listen_address(&status_page_listen)?;
    }
    let listen = args.listen.clone().unwrap_or_else(|| section.listen.clone());
    let listener = TcpListener::bind(&listen).await.with_context(|| format!("cannot listen on {listen}"))?;
    let election = match &args.leader_election_lease {
        Some(lease) => Some(election(&args, lease).await?),
        None => None,
    };
    let mut running =
        coordinator::start_with(&config, Settings::from_config(section), listener, transport, election).await?;
    // Tests and scripts read the actual addresses (with port 0 in the config) from these lines.
    println!("listening on {}", running.addr);
    let metrics_listen = args.metrics_listen.clone().unwrap_or_else(|| section.metrics_listen.clone());
    if !metrics_listen.is_empty() {
        let http = TcpListener::bind(&metrics_listen)
            .await
            .with_context(|| format!("cannot listen on {metrics_listen} (metrics)"))?;
        println!("metrics on {}", http.local_addr()?);
        running.serve_http(http);
    }
    if !status_page_listen.is_empty() {
        let page = TcpListener::bind(&status_page_listen)
            .await
            .with_context(|| format!("cannot listen on {status_page_listen} (status page)"))?;
        let bound = page.local_addr()?;
        // `localhost` is taken as loopback without resolving it; what was bound is checked too.
        anyhow::ensure!(bound.ip().is_loopback(), "status page bound to {bound}, which is not a loopback address");
        println!("status page on http://{bound}/");
        running.serve_status_page(page);
    }
    let lost = tokio::select! {
        signal = super::shutdown::shutdown_signal() => { signal?; None }
        reason = running.leadership_lost() => Some(reason),
    };
    tracing::info!("shutting down: ending agent streams");
    running.shutdown().await?;
    tracing::info!("stopped");
    match lost {
        // Exiting is how a replica steps down: restarted, it comes back as a standby.
        Some(reason) => anyhow::bail!("{reason}"),
        None => Ok(()),
    }
}

async fn election(args: &CoordinatorArgs, lease: &str) -> anyhow::Result<Election> {
    let identity = match &args.leader_election_identity {
        Some(identity) => identity.clone(),
        None => hostname().context("no --leader-election-identity (POD_NAME) and no host name")?,
    };
    let client = super::kube_client::kube_client(args.kubeconfig.as_deref(), None).await?;
    let namespace = args.leader_election_namespace.clone();
    tracing::info!(%lease, %namespace, %identity, "leader election on: standby until the lease is ours");
    Ok(Election {
        api: kube::Api::namespaced(client, &namespace),
        config: ElectionConfig { lease: lease.into(), namespace, identity, lease_duration: args.lease_duration },
    })
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string()).filter(|h| !h.is_empty())
}
