//! The agent runtime (`ferry agent`): publishes its cluster's inventory to the coordinator and applies the
//! DesiredSets it receives. It decides nothing beyond order and retries (the coordinator decides); it never
//! deletes, and it never modifies an object without ferry's label.
//!
//! [`watch`] feeds the inventory, [`reconcile`] applies a set through [`kube_api`], [`order`] orders it.

pub mod index;
pub mod kube_api;
pub mod order;
pub mod reconcile;
pub mod watch;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::grpc::agent_client::{AgentClient, AgentConfig};
use crate::grpc::convert::watched_types;
use crate::grpc::proto::{ApplyOutcome, ApplyResult, DesiredSet, InventoryItem, ItemResult};
use kube_api::KubeApi;
use reconcile::{Memory, reconcile};
use watch::Update;

/// How the agent runs.
pub struct AgentOptions {
    pub kube: kube::Client,
    /// Where Velero runs (Backups, PVBs and BSLs are watched and created there).
    pub velero_namespace: String,
    /// How to reach the coordinator.
    pub transport: AgentConfig,
    /// How often held or failed items are retried while nothing else happens.
    pub retry_interval: Duration,
}

/// Runs until `shutdown` resolves.
pub async fn run(options: AgentOptions, shutdown: impl Future<Output = ()>) {
    let mut updates = watch::start(&options.kube, &options.velero_namespace);
    tokio::pin!(shutdown);
    let initial = tokio::select! {
        initial = initial_inventory(&mut updates) => initial,
        _ = &mut shutdown => None,
    };
    let Some(initial) = initial else { return };
    tracing::info!(objects = initial.iter().map(|(_, i)| i.len()).sum::<usize>(), "inventory listed; connecting");
    let mut index = index::Index::new(&options.velero_namespace);
    for (resource, items) in &initial {
        index.apply(&Update::Snapshot(resource.clone(), items.clone()));
    }
    let client = AgentClient::spawn(options.transport, initial);
    let api = KubeApi::new(options.kube.clone());
    let mut desired = client.desired();
    let mut memory = Memory::default();
    let mut current: Option<Arc<DesiredSet>> = None;
    let mut last_report: Option<ApplyResult> = None;
    let mut needs_retry = false;
    let mut retry = tokio::time::interval(options.retry_interval);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let reconcile_now = tokio::select! {
            update = updates.recv() => {
                let Some(update) = update else { break };
                forward(&client, &mut index, update, &mut updates);
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
            _ = &mut shutdown => break,
        };
        let Some(set) = current.clone().filter(|_| reconcile_now) else { continue };
        let cached = index::Cached { index: &index, api: &api };
        let results = reconcile(&cached, &set, &mut memory).await;
        needs_retry = results.iter().any(|r| {
            let outcome = ApplyOutcome::try_from(r.outcome).unwrap_or(ApplyOutcome::Unspecified);
            matches!(outcome, ApplyOutcome::Held | ApplyOutcome::Failed)
        });
        let report = ApplyResult { desired_version: set.version.clone(), items: results };
        if last_report.as_ref() != Some(&report) {
            log_results(&report.items);
            client.report(report.clone());
            last_report = Some(report);
        }
    }
    client.shutdown().await;
}

/// Waits for the first complete list of every watched type; changes that arrive meanwhile are folded in.
async fn initial_inventory(
    updates: &mut mpsc::UnboundedReceiver<Update>,
) -> Option<Vec<(crate::grpc::proto::ResourceType, Vec<InventoryItem>)>> {
    let types = watched_types();
    let mut lists: Vec<Option<Vec<InventoryItem>>> = vec![None; types.len()];
    while lists.iter().any(Option::is_none) {
        let update = updates.recv().await?;
        let slot = |kind: &str| types.iter().position(|t| t.kind == kind);
        match update {
            Update::Snapshot(resource, items) => {
                if let Some(i) = slot(&resource.kind) {
                    lists[i] = Some(items);
                }
            }
            Update::Upsert(item) => {
                if let Some(Some(list)) = slot(&item.kind).map(|i| &mut lists[i]) {
                    list.retain(|o| !(o.namespace == item.namespace && o.name == item.name));
                    list.push(item);
                }
            }
            Update::Delete(r) => {
                if let Some(Some(list)) = slot(&r.kind).map(|i| &mut lists[i]) {
                    list.retain(|o| !(o.namespace == r.namespace && o.name == r.name));
                }
            }
        }
    }
    Some(types.into_iter().zip(lists.into_iter().map(Option::unwrap_or_default)).collect())
}

/// Sends an update and whatever else is already queued, batched: a burst of changes is one Delta.
fn forward(
    client: &AgentClient,
    index: &mut index::Index,
    first: Update,
    updates: &mut mpsc::UnboundedReceiver<Update>,
) {
    let mut upserts = Vec::new();
    let mut deletes = Vec::new();
    let mut next = Some(first);
    while let Some(update) = next.take() {
        index.apply(&update);
        match update {
            Update::Snapshot(resource, items) => {
                // Keep order: what came before the relist goes first.
                flush(client, &mut upserts, &mut deletes);
                client.publish_snapshot(resource, items);
            }
            Update::Upsert(item) => upserts.push(item),
            Update::Delete(r) => deletes.push(r),
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
        let object = item.r#ref.as_ref().map(reconcile::describe).unwrap_or_default();
        match outcome {
            ApplyOutcome::Failed | ApplyOutcome::Conflict => {
                tracing::warn!(%object, outcome = outcome.as_str_name(), message = %item.message, "apply")
            }
            _ => tracing::debug!(%object, outcome = outcome.as_str_name(), message = %item.message, "apply"),
        }
    }
}
