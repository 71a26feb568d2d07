//! The coordinator runtime (`ferry coordinator`): keeps every location's catalog fresh, holds every cluster's
//! inventory as its agent publishes it, and recomputes a cluster's DesiredSet whenever one of its inputs
//! changes (debounced), plus a periodic full resync. It is stateless: after a restart, the catalog and the
//! agents' reconnect snapshots rebuild everything.
//!
//! The pure parts are [`cluster`] (one cluster's record), [`location`] (one location's catalog and health) and
//! [`status`]; [`hub`] is the shared state; [`service`] is the gRPC `Federation` service over it, each agent
//! stream a `session` task; this file joins them to tokio tasks and the gRPC server.

pub mod cluster;
pub mod describe;
#[cfg(test)]
mod fuzz;
pub mod held_set;
pub mod http;
pub mod hub;
pub mod leadership;
pub mod legacy_volumes;
pub mod location;
pub mod metrics;
pub mod page_policy;
pub mod service;
mod session;
pub mod settings;
pub mod status;
pub mod status_page;
pub mod telemetry;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::Server;

use crate::bucket::{self, Loader};
use crate::catalog::LocationCatalog;
use crate::config::LoadedConfig;
use crate::grpc::identity::Authentication;
use crate::grpc::tls_acceptor::{AcceptLimits, ReloadingTls, incoming};
use crate::plan::{ClusterState, PlanOptions};
use hub::Hub;
use location::LocationState;
use service::FederationService;
pub use settings::Settings;
use telemetry::ErrorKind;

/// HTTP/2 streams one connection may have open at once.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 32;

/// How agents and operators reach the coordinator.
pub enum Transport {
    /// mTLS: the server presents its certificate and requires a client certificate from the CA; the files are
    /// read again whenever they change.
    Mtls { tls: Arc<ReloadingTls>, trust_domain: String },
    /// Plaintext, identities from a header (`--insecure-dev`): local demos only.
    InsecureDev { trust_domain: String },
}

#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    #[error("location {location}: {source}")]
    Open { location: String, source: bucket::OpenError },
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("listener: {0}")]
    Listener(std::io::Error),
}

/// A started coordinator.
pub struct RunningCoordinator {
    pub addr: SocketAddr,
    pub hub: Arc<Hub>,
    shutdown: watch::Sender<bool>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningCoordinator {
    /// Ends every agent stream with a `Goodbye`, stops serving and returns within the shutdown grace period
    /// (open streams that do not close in time are dropped).
    pub async fn shutdown(self) -> Result<(), CoordinatorError> {
        let _ = self.shutdown.send(true);
        let grace = self.hub.settings.shutdown_grace;
        let server = self.server;
        let abort = server.abort_handle();
        let result = match tokio::time::timeout(grace, server).await {
            Ok(Ok(result)) => result.map_err(CoordinatorError::from),
            Ok(Err(join)) => {
                tracing::warn!(error = %join, "gRPC server task ended abnormally");
                Ok(())
            }
            Err(_) => {
                tracing::warn!(
                    grace_ms = grace.as_millis() as u64,
                    "streams still open after the grace period; dropping them"
                );
                abort.abort();
                Ok(())
            }
        };
        // The tasks watch the same shutdown signal; a moment for them to end on their own (the leader election
        // releases its Lease then, so a standby takes over at once), then the rest is dropped.
        let mut tasks = self.tasks;
        let ended = futures::future::join_all(tasks.iter_mut());
        if tokio::time::timeout(Duration::from_secs(2), ended).await.is_err() {
            for task in &tasks {
                task.abort();
            }
        }
        result
    }
}

impl RunningCoordinator {
    /// Resolves with the reason once this replica lost the leadership it held (never without leader election):
    /// it must then stop serving, which the caller does by shutting down and exiting.
    pub async fn leadership_lost(&self) -> String {
        let mut role = self.hub.role.subscribe();
        match role.wait_for(|r| matches!(r, leadership::Role::Lost { .. })).await {
            Ok(role) => role.not_serving().unwrap_or_default(),
            Err(_) => std::future::pending().await,
        }
    }

    /// Also serves `/healthz`, `/readyz` and `/metrics` on `listener` (plain HTTP), until shutdown.
    pub fn serve_http(&mut self, listener: TcpListener) {
        let (hub, stop) = (self.hub.clone(), self.shutdown.subscribe());
        self.tasks.push(tokio::spawn(async move {
            if let Err(e) = http::serve(hub, listener, stop).await {
                tracing::error!(error = %e, "metrics/health endpoint failed");
            }
        }));
    }

    /// Also serves the web status page on `listener` (plain HTTP), until shutdown. The caller checks that it
    /// is a loopback address ([`status_page::check_listen_address`]): the page has no authentication.
    pub fn serve_status_page(&mut self, listener: TcpListener) {
        let (hub, stop) = (self.hub.clone(), self.shutdown.subscribe());
        self.tasks.push(tokio::spawn(async move {
            if let Err(e) = status_page::serve(hub, listener, stop).await {
                tracing::error!(error = %e, "status page failed");
            }
        }));
    }
}

/// Leader election among replicas: the Lease to hold and how.
pub struct Election {
    pub api: kube::Api<k8s_openapi::api::coordination::v1::Lease>,
    pub config: leadership::ElectionConfig,
}

/// Opens the locations, starts the catalog refreshers, the recompute loop and the gRPC server on `listener`.
pub async fn start(
    config: &LoadedConfig,
    settings: Settings,
    listener: TcpListener,
    transport: Transport,
) -> Result<RunningCoordinator, CoordinatorError> {
    start_with(config, settings, listener, transport, None).await
}

/// [`start`], as one replica among several when `election` is set: it serves only while it holds the Lease
/// (a standby keeps its catalogs warm), and [`RunningCoordinator::leadership_lost`] says when it must stop.
pub async fn start_with(
    config: &LoadedConfig,
    settings: Settings,
    listener: TcpListener,
    transport: Transport,
    election: Option<Election>,
) -> Result<RunningCoordinator, CoordinatorError> {
    let addr = listener.local_addr().map_err(CoordinatorError::Listener)?;
    let mut loaders = Vec::new();
    // One budget for every location's reads: it bounds the process's memory, not one location's.
    let budget = config.config.catalog.budget();
    let mut locations = Vec::new();
    for location in &config.config.locations {
        let store = bucket::open(&config.store_config(location))
            .map_err(|source| CoordinatorError::Open { location: location.name.clone(), source })?;
        let domain = config.location(location, store.kind, &store.bucket);
        if location.insecure_skip_tls_verify {
            // Said once at start, and for as long as it runs in the status and the metrics: never silent.
            tracing::warn!(
                location = %location.name,
                "insecureSkipTLSVerify: the location's server certificate is not checked; anyone on the path to \
                 the bucket can serve ferry backups (test beds only)"
            );
        }
        locations.push(LocationState {
            name: location.name.clone(),
            source_cluster: location.source_cluster.clone(),
            insecure_tls: location.insecure_skip_tls_verify,
            catalog: None,
            error: None,
            last_refresh: None,
        });
        let catalog = &config.config.catalog;
        loaders.push(
            Loader::new(store, domain, catalog.concurrency).with_limits(catalog.limits()).with_budget(budget.clone()),
        );
    }
    let clusters = config
        .config
        .clusters
        .iter()
        .map(|c| ClusterState {
            name: c.name.clone(),
            velero_namespace: c.velero_namespace.clone(),
            storage_locations: c.storage_locations.clone(),
            granted_locations: c.granted_locations(),
            allow_read_write_locations: c.allow_read_write_locations,
            ..Default::default()
        })
        .collect();
    let hub = Arc::new(Hub::new(settings.clone(), config.mappings.clone(), clusters, locations));
    let plan_options = PlanOptions {
        materialize_velero_backups: config.config.materialize.velero_backups,
        now: SystemTime::now(),
        retirement: config.config.retirement.options(),
    };
    let (shutdown_tx, shutdown_rx) = watch::channel(false);

    let mut tasks = Vec::new();
    if let Some(Election { api, config }) = election {
        // Standby until the Lease is ours: set before the server can take a stream.
        hub.role.send_replace(leadership::Role::Standby { leader: None });
        tasks.push(tokio::spawn(leadership::run(api, config, hub.role.clone(), shutdown_rx.clone())));
    }
    let describe_loaders = loaders.clone();
    for (index, loader) in loaders.into_iter().enumerate() {
        tasks.push(tokio::spawn(refresh_location(hub.clone(), index, loader, shutdown_rx.clone())));
    }
    tasks.push(tokio::spawn(recompute_loop(hub.clone(), plan_options.clone(), shutdown_rx.clone())));

    let (authentication, tls) = match transport {
        Transport::Mtls { tls, trust_domain } => (Authentication::Certificate { trust_domain }, Some(tls)),
        Transport::InsecureDev { trust_domain } => (Authentication::InsecureDev { trust_domain }, None),
    };
    let mut service = FederationService::new(hub.clone(), authentication, shutdown_rx.clone(), plan_options)
        .with_loaders(describe_loaders);
    if let Some(tls) = &tls
        && let Some(trust_domain) = tls.revocation_trust_domain()
    {
        service = service.with_revocations(tls.revocations(), trust_domain.to_owned());
        let telemetry_hub = hub.clone();
        tls.observe_refusals(Box::new(move |revoked| telemetry_hub.telemetry.revoked(&revoked.identity, "handshake")));
        tasks.push(tokio::spawn(watch_revocations(tls.clone(), shutdown_rx.clone())));
    }
    let mut builder = Server::builder()
        // HTTP/2 pings find dead peers (a killed agent, a vanished NAT entry) that TCP alone notices late.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .tcp_keepalive(Some(Duration::from_secs(60)))
        .tcp_nodelay(true)
        // A connection is closed after this age, so its agent reconnects and authenticates again with the
        // certificate it has now (a revoked or replaced identity does not live on in an old stream).
        .max_connection_age(settings.max_connection_age)
        .max_connection_age_grace(settings.max_connection_age.min(Duration::from_secs(30)))
        // An agent needs one stream and an operator a few calls: no connection gets to open hundreds.
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION));
    let mut stop = shutdown_rx.clone();
    let until_stopped = async move {
        let _ = stop.wait_for(|stopping| *stopping).await;
    };
    let router = builder.add_service(service.into_server());
    let server = match tls {
        Some(tls) => {
            let limits = AcceptLimits {
                handshake_timeout: settings.tls_handshake_timeout,
                max_connections: settings.max_connections,
            };
            tokio::spawn(router.serve_with_incoming_shutdown(incoming(listener, tls, limits), until_stopped))
        }
        None => tokio::spawn(router.serve_with_incoming_shutdown(TcpListenerStream::new(listener), until_stopped)),
    };
    tracing::info!(%addr, "coordinator listening");
    Ok(RunningCoordinator { addr, hub, shutdown: shutdown_tx, server, tasks })
}

/// How often the TLS files are checked for changes between handshakes: a revocation must end open streams
/// even when nobody connects. Four `stat` calls a second.
const REVOCATION_POLL: Duration = Duration::from_secs(1);

/// Reads the TLS files again whenever they change (the same check every handshake makes), so that a revocation
/// list edited while nobody connects still reaches the open streams within [`REVOCATION_POLL`].
async fn watch_revocations(tls: Arc<ReloadingTls>, mut shutdown: watch::Receiver<bool>) {
    loop {
        tls.current();
        tokio::select! {
            _ = tokio::time::sleep(REVOCATION_POLL) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
    }
}

/// Refreshes one location forever: lists it, fetches what changed, and hands the result to the hub. A failed
/// refresh keeps the previous catalog.
async fn refresh_location(hub: Arc<Hub>, index: usize, loader: Loader, mut shutdown: watch::Receiver<bool>) {
    let interval = hub.settings.catalog_refresh_interval;
    let name = loader.location().name.clone();
    loop {
        let previous = hub.location(index).and_then(|l| l.catalog);
        let cold = previous.as_deref().is_none_or(|p| !p.pending.is_empty());
        let started = std::time::Instant::now();
        let mut partial = |catalog: LocationCatalog| {
            // A few lines per cold load (partials double), so that minutes of loading are not silent.
            tracing::info!(
                location = %name,
                read = catalog.backups.len() + catalog.skipped.len(),
                pending = catalog.pending.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "location loading; planned and served as it is read"
            );
            hub.set_partial_catalog(index, catalog, SystemTime::now());
        };
        let outcome = loader.refresh_streaming(previous.as_deref(), &mut partial).await;
        let elapsed = started.elapsed();
        if cold && let Ok(catalog) = &outcome {
            tracing::info!(
                location = %name,
                backups = catalog.backups.len(),
                errors = catalog.errors.len(),
                elapsed_ms = elapsed.as_millis() as u64,
                "location read whole"
            );
        }
        hub.telemetry.refreshed(&name, outcome.is_ok(), elapsed);
        match &outcome {
            Ok(catalog) => {
                // Counted here, where the previous catalog is at hand: a bad object counts once, not per refresh.
                hub.telemetry.error(ErrorKind::BadObject, telemetry::new_bad_objects(previous.as_deref(), catalog));
                tracing::debug!(
                    location = %name,
                    backups = catalog.backups.len(),
                    errors = catalog.errors.len(),
                    foreign_folders = catalog.foreign_folders.len(),
                    elapsed_ms = elapsed.as_millis() as u64,
                    "location refreshed"
                )
            }
            Err(e) => {
                tracing::warn!(location = %name, error = %e, "location refresh failed; keeping the previous catalog")
            }
        }
        hub.set_catalog(index, outcome.map_err(|e| e.to_string()), SystemTime::now());
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
    }
}

/// Recomputes dirty clusters: wakes on a change, waits the debounce time so a burst of changes (a fleet of
/// snapshots after a restart) costs one pass, then plans every dirty cluster and publishes changed sets.
async fn recompute_loop(hub: Arc<Hub>, options: PlanOptions, mut shutdown: watch::Receiver<bool>) {
    let mut resync = tokio::time::interval(hub.settings.resync_interval);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = hub.changed.notified() => {}
            _ = resync.tick() => hub.mark_all_dirty(),
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
        tokio::time::sleep(hub.settings.debounce).await;
        let options = PlanOptions { now: SystemTime::now(), ..options.clone() };
        let hub2 = hub.clone();
        // Planning many clusters is CPU work; keep it off the threads that serve the streams.
        let outcome = tokio::task::spawn_blocking(move || recompute(&hub2, &options)).await;
        if let Err(e) = outcome {
            tracing::error!(error = %e, "recompute failed");
        }
    }
}

/// One recompute pass over the dirty clusters. Returns how many sets were published.
pub fn recompute(hub: &Hub, options: &PlanOptions) -> usize {
    let inputs = hub.take_dirty();
    if inputs.clusters.is_empty() {
        return 0;
    }
    let started = std::time::Instant::now();
    let mut published = 0;
    // Built once for every cluster of the pass that gets the same object, and kept for the next pass (plan once,
    // share: plan/template.rs): a set planned again holds the objects it already published, not a second copy.
    let templates = &hub.templates;
    templates.begin_pass(&inputs.catalogs);
    for (cluster, generation) in &inputs.clusters {
        let desired = hub::compute(&inputs.catalogs, cluster, &hub.mappings, options, inputs.complete, templates);
        let (items, version) = (desired.items.len(), desired.version.clone());
        if hub.publish(&cluster.name, desired, *generation) {
            published += 1;
            tracing::debug!(cluster = %cluster.name, items, %version, "desired set published");
        }
    }
    templates.end_pass();
    let shared_items = hub.prune_items();
    tracing::debug!(
        clusters = inputs.clusters.len(),
        published,
        shared_objects = templates.len(),
        shared_items,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "recompute pass"
    );
    published
}
