//! The agent runtime (`ferry agent`): publishes its cluster's inventory to the coordinator and applies the
//! DesiredSets it receives. It decides nothing beyond order and retries (the coordinator decides); it never
//! deletes, and it never modifies an object without ferry's label.
//!
//! [`client`] is its link to the coordinator (the `Session` stream), [`discovery`] finds which kinds the cluster
//! serves, [`watch`] feeds their inventory, [`reconcile`] applies a set (and [`retire`] deletes) through a
//! [`cluster_api::ClusterApi`] ([`kube_api`]) after [`guard`] checked each item, [`order`] orders it.

pub mod client;
pub mod cluster_api;
pub mod discovery;
pub mod event_budget;
#[cfg(test)]
mod fuzz;
pub mod guard;
pub mod health;
pub mod index;
pub mod kube_api;
pub mod order;
pub mod reconcile;
pub mod retire;
pub mod telemetry;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::grpc::convert::{is_required, watched_types};
use crate::grpc::proto::{ApplyOutcome, ApplyResult, DesiredSet, InventoryItem, ItemResult, ResourceType};
use client::{AgentClient, AgentConfig};
use discovery::ApiState;
use kube_api::KubeApi;
use reconcile::{Memory, reconcile_with};
use watch::{Update, Watches};

/// How the agent runs.
pub struct AgentOptions {
    pub kube: kube::Client,
    /// Where Velero runs (Backups, PVBs and BSLs are watched and created there).
    pub velero_namespace: String,
    /// How to reach the coordinator.
    pub transport: AgentConfig,
    /// How often held or failed items are retried while nothing else happens.
    pub retry_interval: Duration,
    /// How often API discovery runs again (a CRD installed or removed later is found within this).
    pub discovery_interval: Duration,
    /// Namespaces no NonAdminBackup may go into, on top of `default`, `kube-*`, `openshift-*` and the Velero
    /// namespace (the agent refuses such items whatever the coordinator says).
    pub protected_namespaces: Vec<String>,
    /// What this cluster allows beyond what every agent accepts (ReadWrite BSLs, namespace mappings, retirement).
    pub policy: guard::Policy,
    /// Items of one dependency layer applied at once.
    pub apply_concurrency: usize,
    /// Where to serve `/healthz`, `/readyz` and `/metrics` (plain HTTP), if anywhere.
    pub http_listener: Option<tokio::net::TcpListener>,
}

/// How long the first connect waits for the first list of an optional kind (NonAdminBackup) that the cluster
/// serves but the agent cannot list yet (e.g. its RBAC lacks it): after that it connects without it, and the
/// kind joins once listed. Required kinds are always waited for.
const OPTIONAL_LIST_GRACE: Duration = Duration::from_secs(10);

/// Runs until `shutdown` resolves.
pub async fn run(mut options: AgentOptions, shutdown: impl Future<Output = ()>) {
    let (view, view_rx) = tokio::sync::watch::channel(health::AgentView::default());
    let telemetry = Arc::new(telemetry::AgentTelemetry::new());
    let http_telemetry = telemetry.clone();
    let http = options.http_listener.take().map(|listener| {
        tokio::spawn(async move {
            if let Err(e) = health::serve(listener, view_rx, http_telemetry, std::future::pending()).await {
                tracing::error!(error = %e, "the health and metrics listener failed");
            }
        })
    });
    let _http = AbortOnDrop(http);
    let (mut watches, mut updates) = Watches::new(&options.kube, &options.velero_namespace);
    let mut apis = ApiState::default();
    tokio::pin!(shutdown);
    let served = tokio::select! {
        served = first_discovery(&options.kube, options.retry_interval) => served,
        _ = &mut shutdown => return,
    };
    start_and_stop(&mut watches, &mut apis, &served, None, None);
    apis.set_velero_version(discovery::velero_version(&options.kube, &options.velero_namespace).await);
    let initial = tokio::select! {
        initial = initial_inventory(&mut updates, &mut apis) => initial,
        _ = &mut shutdown => None,
    };
    let Some(initial) = initial else { return };
    let cluster_apis = apis.cluster_apis();
    tracing::info!(
        objects = initial.iter().map(|(_, i)| i.len()).sum::<usize>(),
        served = ?cluster_apis.served.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        velero = %cluster_apis.velero_version,
        "inventory listed; connecting"
    );
    let mut index = index::Index::new(&options.velero_namespace);
    for (resource, items) in &initial {
        index.apply(&Update::Snapshot(resource.clone(), items.clone()));
    }
    view.send_modify(|v| {
        v.listed = true;
        v.apis = cluster_apis.clone();
    });
    let client = AgentClient::spawn_with_apis(options.transport, initial, Some(cluster_apis));
    let mut link = client.link();
    let link_view = view.clone();
    let link_telemetry = telemetry.clone();
    let _link_task = AbortOnDrop(Some(tokio::spawn(async move {
        while link.changed().await.is_ok() {
            let current = link.borrow_and_update().clone();
            link_telemetry.link_changed(&current);
            link_view.send_modify(|v| v.link = current);
        }
    })));
    let api = KubeApi::new(options.kube.clone());
    let guard =
        guard::Guard::new(&options.velero_namespace, &options.protected_namespaces).with_policy(options.policy.clone());
    tracing::info!(
        read_write_locations = options.policy.allow_read_write_locations,
        namespace_mappings = %options.policy.mappings.describe(),
        retirement = options.policy.allow_retirement,
        "what this agent accepts from its coordinator"
    );
    let mut desired = client.desired();
    let mut memory = Memory::default();
    let mut current: Option<Arc<DesiredSet>> = None;
    let mut last_report: Option<ApplyResult> = None;
    let mut needs_retry = false;
    let mut retry = tokio::time::interval(options.retry_interval);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut rediscover = tokio::time::interval(options.discovery_interval);
    rediscover.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    rediscover.tick().await;
    loop {
        let reconcile_now = tokio::select! {
            update = updates.recv() => {
                let Some(update) = update else { break };
                forward(&client, &view, &mut index, &mut apis, update, &mut updates);
                false
            }
            changed = desired.changed() => {
                if changed.is_err() {
                    break;
                }
                current = desired.borrow_and_update().clone();
                true
            }
            _ = retry.tick() => needs_retry,
            _ = rediscover.tick() => {
                match discovery::discover(&options.kube).await {
                    Ok(served) => {
                        let version = discovery::velero_version(&options.kube, &options.velero_namespace).await;
                        let version_changed = apis.set_velero_version(version);
                        let stopped = start_and_stop(&mut watches, &mut apis, &served, Some(&client), Some(&mut index));
                        if stopped || version_changed {
                            announce(&client, &view, &apis);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "API discovery failed; keeping the kinds watched so far"),
                }
                false
            }
            _ = &mut shutdown => break,
        };
        let Some(set) = current.clone().filter(|_| reconcile_now) else { continue };
        let cached = index::Cached { index: &index, api: &api };
        let started = std::time::Instant::now();
        let results = reconcile_with(&cached, &guard, &set, &mut memory, options.apply_concurrency).await;
        telemetry.apply_pass(&results, started.elapsed());
        needs_retry = results.iter().any(|r| {
            let outcome = ApplyOutcome::try_from(r.outcome).unwrap_or(ApplyOutcome::Unspecified);
            matches!(outcome, ApplyOutcome::Held | ApplyOutcome::Failed)
        });
        view.send_modify(|v| v.set_results(&results));
        let report = ApplyResult { desired_version: set.version.clone(), items: results };
        if last_report.as_ref() != Some(&report) {
            log_results(&report.items);
            client.report(report.clone());
            last_report = Some(report);
        }
    }
    client.shutdown().await;
}

/// Aborts a background task when dropped (the agent's side tasks end with it).
struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

/// Discovery until it answers once (an API server still starting, a network blip): nothing is watched before.
async fn first_discovery(kube: &kube::Client, retry: Duration) -> BTreeSet<String> {
    loop {
        match discovery::discover(kube).await {
            Ok(served) => return served,
            Err(e) => tracing::warn!(error = %e, "API discovery failed; retrying"),
        }
        tokio::time::sleep(retry.max(Duration::from_secs(1))).await;
    }
}

/// Applies a discovery answer: starts watches of kinds that appeared; stops those of kinds gone, telling the
/// coordinator (when connected) that they are empty. Missing required CRDs are logged as errors on every
/// discovery, since nothing can be materialized until they exist. Returns whether a watch was stopped.
fn start_and_stop(
    watches: &mut Watches,
    apis: &mut ApiState,
    served: &BTreeSet<String>,
    client: Option<&AgentClient>,
    mut index: Option<&mut index::Index>,
) -> bool {
    let changes = apis.observe(served);
    for resource in changes.start {
        tracing::info!(kind = %resource.kind, "the cluster serves this kind; watching it");
        watches.start(resource);
    }
    for resource in &changes.stop {
        tracing::warn!(kind = %resource.kind, "the cluster no longer serves this kind; its watch stopped");
        watches.stop(&resource.kind);
        let empty = Update::Snapshot(resource.clone(), Vec::new());
        if let Some(index) = index.as_deref_mut() {
            index.apply(&empty);
        }
        if let Some(client) = client {
            client.publish_snapshot(resource.clone(), Vec::new());
        }
    }
    let missing = apis.missing_required();
    if !missing.is_empty() {
        tracing::error!(
            missing = %missing.join(", "),
            "this cluster lacks Velero CRDs ferry needs: install Velero (its CRDs) there; nothing is materialized until then"
        );
    }
    !changes.stop.is_empty()
}

/// Waits for the first complete list of every watched kind (an optional one only for
/// [`OPTIONAL_LIST_GRACE`]); changes that arrive meanwhile are folded in. Returns the listed kinds' objects.
async fn initial_inventory(
    updates: &mut mpsc::UnboundedReceiver<Update>,
    apis: &mut ApiState,
) -> Option<Vec<(ResourceType, Vec<InventoryItem>)>> {
    let mut lists: BTreeMap<String, (ResourceType, Vec<InventoryItem>)> = BTreeMap::new();
    let grace = tokio::time::sleep(OPTIONAL_LIST_GRACE);
    tokio::pin!(grace);
    let mut grace_over = false;
    loop {
        let waiting: Vec<&str> = apis.pending().filter(|k| !grace_over || is_required(k)).collect();
        if waiting.is_empty() {
            break;
        }
        let update = tokio::select! {
            update = updates.recv() => update?,
            _ = &mut grace, if !grace_over => {
                grace_over = true;
                let late: Vec<&str> = apis.pending().filter(|k| !is_required(k)).collect();
                if !late.is_empty() {
                    tracing::warn!(kinds = ?late, "not listed yet (RBAC?); connecting without them, they join once listed");
                }
                continue;
            }
        };
        match update {
            Update::Snapshot(resource, items) => {
                apis.mark_listed(&resource.kind);
                lists.insert(resource.kind.clone(), (resource, items));
            }
            Update::Upsert(item) => {
                if let Some((_, list)) = lists.get_mut(&item.kind) {
                    list.retain(|o| !(o.namespace == item.namespace && o.name == item.name));
                    list.push(item);
                }
            }
            Update::Delete(r) => {
                if let Some((_, list)) = lists.get_mut(&r.kind) {
                    list.retain(|o| !(o.namespace == r.namespace && o.name == r.name));
                }
            }
        }
    }
    // In the planner's order (watched_types), not the order the lists happened to finish in.
    let order = watched_types();
    let mut initial: Vec<_> = lists.into_values().collect();
    initial.sort_by_key(|(t, _)| order.iter().position(|o| o.kind == t.kind));
    Some(initial)
}

/// Tells the coordinator, and the agent's own `/metrics`, which kinds the cluster serves now.
fn announce(client: &AgentClient, view: &tokio::sync::watch::Sender<health::AgentView>, apis: &ApiState) {
    let now = apis.cluster_apis();
    view.send_modify(|v| v.apis = now.clone());
    client.set_apis(now);
}

/// Sends an update and whatever else is already queued, batched: a burst of changes is one Delta. The first
/// list of a kind that appeared at runtime is followed by the new `ClusterApis` naming it.
fn forward(
    client: &AgentClient,
    view: &tokio::sync::watch::Sender<health::AgentView>,
    index: &mut index::Index,
    apis: &mut ApiState,
    first: Update,
    updates: &mut mpsc::UnboundedReceiver<Update>,
) {
    let mut upserts = Vec::new();
    let mut deletes = Vec::new();
    let mut next = Some(first);
    while let Some(update) = next.take() {
        // A stopped watch may have left updates in the channel; its kind was published empty.
        if apis.is_watching(update.kind()) {
            index.apply(&update);
            match update {
                Update::Snapshot(resource, items) => {
                    // Keep order: what came before the relist goes first.
                    flush(client, &mut upserts, &mut deletes);
                    let kind = resource.kind.clone();
                    client.publish_snapshot(resource, items);
                    if apis.mark_listed(&kind) {
                        tracing::info!(%kind, "listed; telling the coordinator the cluster serves it");
                        announce(client, view, apis);
                    }
                }
                Update::Upsert(item) => upserts.push(item),
                Update::Delete(r) => deletes.push(r),
            }
        }
        if upserts.len() + deletes.len() < 500 {
            next = updates.try_recv().ok();
        }
    }
    flush(client, &mut upserts, &mut deletes);
}

fn flush(client: &AgentClient, upserts: &mut Vec<InventoryItem>, deletes: &mut Vec<crate::grpc::proto::ObjectRef>) {
    if !upserts.is_empty() {
        client.upsert(std::mem::take(upserts));
    }
    if !deletes.is_empty() {
        client.delete(std::mem::take(deletes));
    }
}

fn log_results(items: &[ItemResult]) {
    for item in items {
        let outcome = ApplyOutcome::try_from(item.outcome).unwrap_or(ApplyOutcome::Unspecified);
        let object = item.r#ref.as_ref().map(cluster_api::describe).unwrap_or_default();
        match outcome {
            ApplyOutcome::Failed | ApplyOutcome::Conflict => {
                tracing::warn!(%object, outcome = outcome.as_str_name(), message = %item.message, "apply")
            }
            _ => tracing::debug!(%object, outcome = outcome.as_str_name(), message = %item.message, "apply"),
        }
    }
}
