//! What the agent publishes: watches (kube-rs watcher: list, then watch, relisting after errors and expired
//! resource versions) on Namespaces, Velero Backups, PodVolumeBackups and BackupStorageLocations in the Velero
//! namespace, and NonAdminBackups in all namespaces; each type is also listed again every 10 minutes. Every
//! (re)list becomes a full snapshot of its type; single changes become upserts and deletes. Level-triggered:
//! nothing depends on seeing a particular event.

use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::mpsc;

use super::kube_api::api_resource;
use crate::grpc::convert::{inventory_item, object_ref, watched_types};
use crate::grpc::proto::{InventoryItem, ObjectRef, ResourceType};

/// A change to publish.
#[derive(Debug)]
pub enum Update {
    /// A complete list of one type (after the initial list and after every relist).
    Snapshot(ResourceType, Vec<InventoryItem>),
    Upsert(InventoryItem),
    Delete(ObjectRef),
}

/// Starts one watcher per watched type; their updates arrive on the returned channel.
pub fn start(client: &Client, velero_namespace: &str) -> mpsc::UnboundedReceiver<Update> {
    let (tx, rx) = mpsc::unbounded_channel();
    for resource in watched_types() {
        let ar = api_resource(&resource.group, &resource.version, &resource.kind);
        let api: Api<DynamicObject> = match resource.kind.as_str() {
            // Tenants' NABs live in their own namespaces; Namespaces are cluster-scoped.
            "Namespace" | "NonAdminBackup" => Api::all_with(client.clone(), &ar),
            _ => Api::namespaced_with(client.clone(), velero_namespace, &ar),
        };
        tokio::spawn(watch_type(api, resource, tx.clone()));
    }
    rx
}

/// How often each type is listed again from scratch, even when its watch looks healthy: a missed event
/// (level-triggered design) is healed within this period.
pub const RELIST_INTERVAL: Duration = Duration::from_secs(600);

async fn watch_type(api: Api<DynamicObject>, resource: ResourceType, tx: mpsc::UnboundedSender<Update>) {
    loop {
        let relist = tokio::time::sleep(RELIST_INTERVAL);
        tokio::select! {
            closed = watch_until_closed(api.clone(), &resource, &tx) => if closed { return },
            _ = relist => tracing::debug!(kind = %resource.kind, "periodic relist"),
        }
    }
}

/// Follows one watch (which relists by itself after errors); returns true when nobody listens any more.
async fn watch_until_closed(
    api: Api<DynamicObject>,
    resource: &ResourceType,
    tx: &mpsc::UnboundedSender<Update>,
) -> bool {
    // Small pages: a relist holds the old and the new list at once.
    let config = watcher::Config::default().page_size(100);
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let mut buffer: Vec<InventoryItem> = Vec::new();
    let kind = resource.kind.clone();
    while let Some(event) = events.next().await {
        let update = match event {
            Ok(Event::Init) => {
                buffer.clear();
                continue;
            }
            Ok(Event::InitApply(object)) => {
                buffer.push(item(&kind, object));
                continue;
            }
            Ok(Event::InitDone) => Update::Snapshot(resource.clone(), std::mem::take(&mut buffer)),
            Ok(Event::Apply(object)) => Update::Upsert(item(&kind, object)),
            Ok(Event::Delete(object)) => {
                let namespace = object.metadata.namespace.clone().unwrap_or_default();
                let name = object.metadata.name.clone().unwrap_or_default();
                Update::Delete(object_ref(&kind, &namespace, &name))
            }
            Err(e) => {
                // default_backoff() keeps the stream alive and relists; the error is only worth a log line.
                tracing::warn!(%kind, error = %e, "watch error; retrying");
                continue;
            }
        };
        if tx.send(update).is_err() {
            return true;
        }
    }
    false
}

/// An object as an inventory item, without managedFields (large, and nothing ferry reads).
fn item(kind: &str, mut object: DynamicObject) -> InventoryItem {
    object.metadata.managed_fields = None;
    let mut value = serde_json::to_value(&object).unwrap_or(Value::Null);
    if value.get("kind").is_none() {
        value["kind"] = Value::String(kind.to_string());
    }
    inventory_item(kind, &value)
}
