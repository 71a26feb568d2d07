//! The agent's view of its cluster, from its own watches: what exists, to decide without asking the API
//! server. A DesiredSet of thousands of items (most of them waiting for namespaces that do not exist) is
//! then checked in memory; only writes, and reads of kinds the agent does not watch, go to the API server.
//! The view may lag a write by a moment: a create that meets `AlreadyExists` reads the API server instead.

use std::collections::HashMap;

use serde_json::Value;

use super::cluster_api::{ApiError, ClusterApi};
use super::watch::Update;
use crate::grpc::convert::ObjectKey;
use crate::grpc::proto::{InventoryItem, ObjectRef};

/// Each object is held as the JSON text its watch delivered (managedFields dropped), parsed only when read: a
/// `serde_json::Value` costs several times its text (a string and a map node per field), and at 10,000 backups
/// the index held 30,000 of them for a few hundred reads per pass.
#[derive(Debug, Default)]
pub struct Index {
    objects: HashMap<ObjectKey, Box<[u8]>>,
    /// Where the Velero kinds are watched (they are watched in that namespace only).
    velero_namespace: String,
}

impl Index {
    pub fn new(velero_namespace: &str) -> Self {
        Self { objects: HashMap::new(), velero_namespace: velero_namespace.to_string() }
    }

    pub fn apply(&mut self, update: &Update) {
        match update {
            Update::Snapshot(resource, items) => {
                self.objects.retain(|k, _| !(k.kind == resource.kind && k.group == resource.group));
                for item in items {
                    self.insert(item);
                }
            }
            Update::Upsert(item) => self.insert(item),
            Update::Delete(r) => {
                self.objects.remove(&ObjectKey::of_ref(r));
            }
        }
    }

    fn insert(&mut self, item: &InventoryItem) {
        self.objects.insert(ObjectKey::of_item(item), item.raw_json.as_slice().into());
    }

    /// `r` as its watch last delivered it.
    fn get(&self, r: &ObjectRef) -> Result<Option<Value>, ApiError> {
        let Some(text) = self.objects.get(&ObjectKey::of_ref(r)) else { return Ok(None) };
        serde_json::from_slice(text)
            .map(Some)
            .map_err(|e| ApiError::Other(format!("the watched object is not JSON: {e}")))
    }

    /// Whether the watches cover `r` (its kind, and for Velero's kinds, its namespace).
    fn covers(&self, r: &ObjectRef) -> bool {
        match r.kind.as_str() {
            "Namespace" | "NonAdminBackup" => true,
            "Backup" | "PodVolumeBackup" | "BackupStorageLocation" => r.namespace == self.velero_namespace,
            _ => false,
        }
    }
}

/// The cluster as the reconciler sees it: reads from the index where it covers the object, everything else
/// (writes, Events, other reads) from the API server.
pub struct Cached<'a> {
    pub index: &'a Index,
    pub api: &'a dyn ClusterApi,
}

#[async_trait::async_trait]
impl ClusterApi for Cached<'_> {
    async fn get(&self, r: &ObjectRef) -> Result<Option<Value>, ApiError> {
        if self.index.covers(r) {
            return self.index.get(r);
        }
        self.api.get(r).await
    }

    async fn get_fresh(&self, r: &ObjectRef) -> Result<Option<Value>, ApiError> {
        self.api.get(r).await
    }

    async fn create(&self, r: &ObjectRef, object: &Value) -> Result<Value, ApiError> {
        self.api.create(r, object).await
    }

    async fn delete(&self, r: &ObjectRef, uid: &str, resource_version: &str) -> Result<(), ApiError> {
        self.api.delete(r, uid, resource_version).await
    }

    async fn event(&self, about: &ObjectRef, uid: Option<&str>, reason: &str, note: &str, warning: bool) {
        self.api.event(about, uid, reason, note, warning).await
    }
}
