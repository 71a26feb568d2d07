//! What one cluster holds of the kinds ferry plans against: Namespaces, BSLs, Backups, PVBs and NABs.
//!
//! Built from watch caches by the agent, or from `kubectl get -o json` output for `ferry plan`.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use super::meta::{ObjectMeta, struct_from_object};
use super::object::{Kind, Object, view_from_json_text};
use super::{Backup, BackupStorageLocation, NonAdminBackup, PodVolumeBackup, ServedApis};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inventory {
    /// Namespaces that exist and are not being deleted.
    pub namespaces: BTreeSet<String>,
    /// Namespaces being deleted: absent to the planner, kept so that an inventory held across deltas knows
    /// every object its agent reported.
    pub terminating_namespaces: BTreeSet<String>,
    pub storage_locations: Vec<Object<BackupStorageLocation>>,
    pub backups: Vec<Object<Backup>>,
    pub pod_volume_backups: Vec<Object<PodVolumeBackup>>,
    pub non_admin_backups: Vec<Object<NonAdminBackup>>,
    /// Which of these kinds the cluster serves (all, unless its agent or its recorded inventory says otherwise).
    pub apis: ServedApis,
    /// Whether a recorded document showed the NonAdminBackup kind (one such object, or a typed
    /// `NonAdminBackupList`): how `ferry plan` tells an OADP cluster's inventory from a plain-Velero one.
    pub declares_non_admin_backups: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("item {index} has no kind")]
    MissingKind { index: usize },
    #[error("{kind} {name:?} (item {index}) is malformed: {source}")]
    Malformed { index: usize, kind: String, name: String, source: serde_json::Error },
}

impl Inventory {
    /// Adds a `kubectl get -o json` document: a `List`, a typed list (`BackupList`, …) or a single object.
    /// Kinds ferry does not plan against are ignored. Returns how many objects were taken.
    pub fn add_document(&mut self, doc: Value) -> Result<usize, InventoryError> {
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        let Some(items) = doc.get("items").and_then(Value::as_array) else {
            return self.add_object(0, doc, None).map(usize::from);
        };
        // Items of a typed list (as the API returns them) carry no kind of their own.
        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty()).map(str::to_string);
        self.declares_non_admin_backups |= item_kind.as_deref() == Some(NonAdminBackup::KIND);
        let mut taken = 0;
        for (index, item) in items.iter().enumerate() {
            taken += usize::from(self.add_object(index, item.clone(), item_kind.as_deref())?);
        }
        Ok(taken)
    }

    fn add_object(&mut self, index: usize, item: Value, default_kind: Option<&str>) -> Result<bool, InventoryError> {
        let kind = item
            .get("kind")
            .and_then(Value::as_str)
            .or(default_kind)
            .ok_or(InventoryError::MissingKind { index })?
            .to_string();
        let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        match InventoryObject::parse(&kind, item) {
            Ok(Some(object)) => {
                self.insert(object);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(source) => Err(InventoryError::Malformed { index, kind, name, source }),
        }
    }

    /// Adds one parsed object.
    pub fn insert(&mut self, object: InventoryObject) {
        match object {
            InventoryObject::Namespace { name, terminating: false } => {
                self.namespaces.insert(name);
            }
            InventoryObject::Namespace { name, terminating: true } => {
                self.terminating_namespaces.insert(name);
            }
            InventoryObject::StorageLocation(o) => self.storage_locations.push(o),
            InventoryObject::Backup(o) => self.backups.push(o),
            InventoryObject::PodVolumeBackup(o) => self.pod_volume_backups.push(o),
            InventoryObject::NonAdminBackup(o) => {
                self.declares_non_admin_backups = true;
                self.non_admin_backups.push(o)
            }
        }
    }
}

/// What of a Namespace is read: its name and whether it is being deleted.
#[derive(Deserialize)]
struct NamespaceView {
    #[serde(default, deserialize_with = "struct_from_object")]
    metadata: ObjectMeta,
    #[serde(default)]
    status: Option<Value>,
}

/// One object of a kind ferry plans against, parsed from its JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum InventoryObject {
    /// Only existence matters; a Terminating namespace counts as absent (nothing new may go into it).
    Namespace {
        name: String,
        terminating: bool,
    },
    StorageLocation(Object<BackupStorageLocation>),
    Backup(Object<Backup>),
    PodVolumeBackup(Object<PodVolumeBackup>),
    NonAdminBackup(Object<NonAdminBackup>),
}

impl InventoryObject {
    /// Parses `item` as `kind`; `Ok(None)` for kinds ferry does not plan against.
    pub fn parse(kind: &str, item: Value) -> Result<Option<Self>, serde_json::Error> {
        Ok(Some(match kind {
            "Namespace" => {
                let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
                Self::namespace_in_phase(name.to_string(), item.pointer("/status/phase").and_then(Value::as_str))?
            }
            BackupStorageLocation::KIND => InventoryObject::StorageLocation(Object::from_value(item)?),
            Backup::KIND => InventoryObject::Backup(Object::from_value(item)?),
            PodVolumeBackup::KIND => InventoryObject::PodVolumeBackup(Object::from_value(item)?),
            NonAdminBackup::KIND => InventoryObject::NonAdminBackup(Object::from_value(item)?),
            _ => return Ok(None),
        }))
    }

    /// [`InventoryObject::parse`] from JSON text, keeping only the typed views (what planning reads): how the
    /// coordinator holds every cluster's inventory, never building anything from an inventory object's JSON.
    /// No tree is built either: the view is read from the text, so taking a thousand agents' snapshots leaves
    /// behind only what is kept, not a heap of freed tree nodes among it.
    pub fn parse_view(kind: &str, text: &str) -> Result<Option<Self>, serde_json::Error> {
        Ok(Some(match kind {
            "Namespace" => {
                let NamespaceView { metadata, status } = view_from_json_text(text)?;
                Self::namespace_in_phase(
                    metadata.name,
                    status.as_ref().and_then(|s| s.get("phase")).and_then(Value::as_str),
                )?
            }
            BackupStorageLocation::KIND => InventoryObject::StorageLocation(Object::view_only_text(text)?),
            Backup::KIND => InventoryObject::Backup(Object::view_only_text(text)?),
            PodVolumeBackup::KIND => InventoryObject::PodVolumeBackup(Object::view_only_text(text)?),
            NonAdminBackup::KIND => InventoryObject::NonAdminBackup(Object::view_only_text(text)?),
            _ => return Ok(None),
        }))
    }

    /// A Namespace named `name` in `phase`: one in `Terminating` is absent to the planner.
    fn namespace_in_phase(name: String, phase: Option<&str>) -> Result<Self, serde_json::Error> {
        if name.is_empty() {
            return Err(serde::de::Error::custom("metadata.name is missing"));
        }
        Ok(InventoryObject::Namespace { name, terminating: phase == Some("Terminating") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_lists_typed_lists_and_single_objects() {
        let mut inv = Inventory::default();
        let list = json!({"kind": "List", "items": [
            {"kind": "Namespace", "metadata": {"name": "team-a"}},
            {"kind": "Namespace", "metadata": {"name": "gone"}, "status": {"phase": "Terminating"}},
            {"kind": "ConfigMap", "metadata": {"name": "ignored"}},
        ]});
        assert_eq!(inv.add_document(list).unwrap(), 2);
        let typed = json!({"kind": "BackupList", "items": [{"metadata": {"name": "b1", "namespace": "velero"}}]});
        assert_eq!(inv.add_document(typed).unwrap(), 1);
        let single = json!({"kind": "NonAdminBackup", "metadata": {"name": "n", "namespace": "team-a"}});
        assert_eq!(inv.add_document(single).unwrap(), 1);
        assert_eq!(inv.namespaces.iter().collect::<Vec<_>>(), ["team-a"]);
        assert_eq!(inv.backups[0].name(), "b1");
        assert_eq!(inv.non_admin_backups[0].namespace(), "team-a");
        assert!(inv.declares_non_admin_backups);
    }

    #[test]
    fn an_empty_typed_list_declares_its_kind_and_an_untyped_one_does_not() {
        let mut inv = Inventory::default();
        inv.add_document(json!({"kind": "List", "items": []})).unwrap();
        assert!(!inv.declares_non_admin_backups, "kubectl's empty List names no kind");
        inv.add_document(json!({"kind": "NonAdminBackupList", "items": []})).unwrap();
        assert!(inv.declares_non_admin_backups);
    }

    #[test]
    fn a_malformed_item_is_an_error_naming_it() {
        let mut inv = Inventory::default();
        let bad = json!({"kind": "List", "items": [
            {"kind": "Backup", "metadata": {"name": "b1"}, "status": {"phase": "Exploded"}}
        ]});
        let err = inv.add_document(bad).unwrap_err().to_string();
        assert!(err.contains("Backup \"b1\""), "{err}");
        assert!(err.contains("Exploded"), "{err}");
    }
}
