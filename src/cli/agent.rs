//! `ferry agent`: publishes this cluster's inventory to the coordinator and applies what it sends, until
//! SIGTERM/SIGINT.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use ferry::agent::client::AgentConfig;
use ferry::agent::guard::{AllowedMapping, MappingAllowlist, Policy};
use ferry::agent::{self, AgentOptions};
use ferry::grpc::coordinator_identity::CoordinatorIdentity;

use super::tls_args::ClientTlsArgs;

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The coordinator's address.
    #[arg(long, env = "FERRY_COORDINATOR")]
    pub coordinator: String,
    /// mTLS: the agent certificate (URI SAN spiffe://<trust-domain>/cluster/<name>) says which cluster this
    /// agent speaks for.
    #[command(flatten)]
    pub tls: ClientTlsArgs,
    /// What the coordinator's certificate must carry as its URI SAN, besides the name dialled: `auto`
    /// (spiffe://<this agent's trust domain>/coordinator, what `ferry certs` issues), a spiffe:// URI, or `none`
    /// (any server certificate of the CA for that name: only for a coordinator certificate without the URI).
    #[arg(long, env = "FERRY_COORDINATOR_IDENTITY", default_value = "auto", value_name = "auto|none|URI")]
    pub coordinator_identity: String,
    /// Plaintext, for a coordinator started with --insecure-dev: claim this identity (`cluster/<name>`).
    #[arg(long, value_name = "IDENTITY")]
    pub insecure_dev: Option<String>,
    /// kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "FERRY_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, env = "FERRY_KUBE_CONTEXT")]
    pub context: Option<String>,
    /// Where Velero runs on this cluster.
    #[arg(long, env = "FERRY_VELERO_NAMESPACE", default_value = "velero")]
    pub velero_namespace: String,
    /// Heartbeat interval (must match the coordinator's heartbeatInterval).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub heartbeat_interval: Duration,
    /// How often held or failed items are retried.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub retry_interval: Duration,
    /// How often API discovery runs again, so that a CRD installed later (OADP after ferry) is watched without a
    /// restart and one removed stops its watch.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub discovery_interval: Duration,
    /// Namespaces no NonAdminBackup may go into, on top of default, kube-*, openshift-* and the Velero
    /// namespace (the coordinator's protectedNamespaces; the agent checks again what it is sent).
    #[arg(long, env = "FERRY_PROTECTED_NAMESPACES", value_delimiter = ',')]
    pub protected_namespaces: Vec<String>,
    /// Items of one dependency layer (Backups, then PVBs, then NABs) applied at once; the API server's 429s
    /// (API Priority and Fairness) are retried with backoff.
    #[arg(long, env = "FERRY_APPLY_CONCURRENCY", default_value_t = ferry::agent::reconcile::DEFAULT_APPLY_CONCURRENCY)]
    pub apply_concurrency: usize,
    /// Accept Backups and PodVolumeBackups bound to a ReadWrite BSL of this cluster (by default only ReadOnly ones:
    /// a ReadWrite BSL's Velero deletes backup data from the bucket when a backup expires or is deleted).
    #[arg(long, env = "FERRY_ALLOW_READ_WRITE_LOCATIONS")]
    pub allow_read_write_locations: bool,
    /// A namespace mapping this cluster allows for tenant backups: FROM=TO, or FROM-PREFIX*=TO-PREFIX*
    /// (repeatable, or comma-separated). The identity is always allowed; any other mapping the coordinator
    /// sends is refused.
    #[arg(long, env = "FERRY_ALLOW_NAMESPACE_MAPPING", value_delimiter = ',')]
    pub allow_namespace_mapping: Vec<AllowedMapping>,
    /// Carry out the coordinator's RETIRE items (its retirement.mode: delete): delete ferry's own objects whose
    /// backup is gone. Without it none is deleted, whatever the coordinator sends; the RBAC needs `delete` too.
    #[arg(long, env = "FERRY_ALLOW_RETIREMENT")]
    pub allow_retirement: bool,
    /// /healthz, /readyz and /metrics address (plain HTTP); "" disables it.
    #[arg(long, env = "FERRY_METRICS_LISTEN", default_value = "0.0.0.0:9090")]
    pub metrics_listen: String,
}

pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let kube = super::kube_client::kube_client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let mut transport = match &args.insecure_dev {
        Some(identity) => {
            tracing::warn!(
                "--insecure-dev: gRPC is PLAINTEXT and the identity is claimed, not proven; local demos only"
            );
            let mut config = AgentConfig::new(args.coordinator.clone(), None);
            config.dev_identity = Some(identity.clone());
            config
        }
        None => {
            let mut config = AgentConfig::new(args.coordinator.clone(), Some(args.tls.config()?));
            // Renewed certificate files (cert-manager rewrites them) are used from the next connect on.
            config.tls_files = Some(args.tls.reloadable()?);
            config.coordinator_identity = CoordinatorIdentity::parse(&args.coordinator_identity)?;
            if config.coordinator_identity == CoordinatorIdentity::Any {
                tracing::warn!(
                    "--coordinator-identity none: any server certificate of the CA for the coordinator's name is trusted"
                );
            }
            config
        }
    };
    transport.heartbeat_interval = args.heartbeat_interval;
    let http_listener = if args.metrics_listen.is_empty() {
        None
    } else {
        let listener = tokio::net::TcpListener::bind(&args.metrics_listen)
            .await
            .with_context(|| format!("cannot listen on {} (metrics)", args.metrics_listen))?;
        // Tests and scripts read the actual address (with port 0) from this line.
        println!("metrics on {}", listener.local_addr()?);
        Some(listener)
    };
    let options = AgentOptions {
        kube,
        velero_namespace: args.velero_namespace.clone(),
        transport,
        retry_interval: args.retry_interval,
        discovery_interval: args.discovery_interval,
        protected_namespaces: args.protected_namespaces.clone(),
        policy: Policy {
            allow_read_write_locations: args.allow_read_write_locations,
            mappings: MappingAllowlist(args.allow_namespace_mapping.clone()),
            allow_retirement: args.allow_retirement,
        },
        apply_concurrency: args.apply_concurrency,
        http_listener,
    };
    agent::run(options, async {
        if let Err(e) = super::shutdown::shutdown_signal().await {
            tracing::error!(error = %e, "signal handler");
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down");
    })
    .await;
    Ok(())
}
