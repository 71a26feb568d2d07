//! What the agent publishes: watches (kube-rs watcher: list, then watch, relisting after errors and expired
//! resource versions) on Namespaces, Velero Backups, PodVolumeBackups and BackupStorageLocations in the Velero
//! namespace, and NonAdminBackups in all namespaces — each only while the cluster serves it (the agent
//! starts and stops them as [`super::discovery`] finds CRDs come and go); each type is also listed again
//! every 10 minutes. Every
//! (re)list becomes a full snapshot of its type; single changes become upserts and deletes. Level-triggered:
//! nothing depends on seeing a particular event.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::kube_api::api_resource;
use crate::grpc::convert::{inventory_item, object_ref};
use crate::grpc::proto::{InventoryItem, ObjectRef, ResourceType};

/// A change to publish.
#[derive(Debug)]
pub enum Update {
    /// A complete list of one type (after the initial list and after every relist).
    Snapshot(ResourceType, Vec<InventoryItem>),
    Upsert(InventoryItem),
    Delete(ObjectRef),
}

impl Update {
    /// The kind this update is about.
    pub fn kind(&self) -> &str {
        match self {
            Update::Snapshot(resource, _) => &resource.kind,
            Update::Upsert(item) => &item.kind,
            Update::Delete(r) => &r.kind,
        }
    }
}

/// The running watchers, one per kind; their updates arrive on one channel. Dropping it stops them all.
pub struct Watches {
    client: Client,
    velero_namespace: String,
    tx: mpsc::UnboundedSender<Update>,
    tasks: BTreeMap<String, JoinHandle<()>>,
}

impl Watches {
    pub fn new(client: &Client, velero_namespace: &str) -> (Self, mpsc::UnboundedReceiver<Update>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let watches =
            Self { client: client.clone(), velero_namespace: velero_namespace.to_string(), tx, tasks: BTreeMap::new() };
        (watches, rx)
    }

    /// Starts watching `resource` (its first list arrives as a `Snapshot`); a no-op if it is watched already.
    pub fn start(&mut self, resource: ResourceType) {
        if self.tasks.contains_key(&resource.kind) {
            return;
        }
        let ar = api_resource(&resource.group, &resource.version, &resource.kind);
        let api: Api<DynamicObject> = match resource.kind.as_str() {
            // Tenants' NABs live in their own namespaces; Namespaces are cluster-scoped.
            "Namespace" | "NonAdminBackup" => Api::all_with(self.client.clone(), &ar),
            _ => Api::namespaced_with(self.client.clone(), &self.velero_namespace, &ar),
        };
        let kind = resource.kind.clone();
        self.tasks.insert(kind, tokio::spawn(watch_type(api, resource, self.tx.clone())));
    }

    /// Stops watching `kind`. Updates it queued before are still in the channel: callers drop them.
    pub fn stop(&mut self, kind: &str) {
        if let Some(task) = self.tasks.remove(kind) {
            task.abort();
        }
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for task in self.tasks.values() {
            task.abort();
        }
    }
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
