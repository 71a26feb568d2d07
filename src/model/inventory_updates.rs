//! Keeping an [`Inventory`] current from what a cluster's agent reports: a kind replaced by a snapshot, objects
//! upserted and deleted by deltas. Each kind's objects stay sorted by namespace and name, so a lookup is a binary
//! search and the inventory is held as the planner reads it, not as a second map beside a copy for the planner
//! (at a thousand clusters the map's nodes and keys were a third of the coordinator's memory). Pure.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::inventory::{Inventory, InventoryObject};
use super::object::{Kind, Object};
use super::{Backup, BackupStorageLocation, NonAdminBackup, PodVolumeBackup};

const NAMESPACE: &str = "Namespace";

/// Every kind an inventory holds, as agents name them.
pub const KINDS: [&str; 5] =
    [NAMESPACE, BackupStorageLocation::KIND, Backup::KIND, PodVolumeBackup::KIND, NonAdminBackup::KIND];

impl InventoryObject {
    /// The object's kind, as agents name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Namespace { .. } => NAMESPACE,
            Self::StorageLocation(_) => BackupStorageLocation::KIND,
            Self::Backup(_) => Backup::KIND,
            Self::PodVolumeBackup(_) => PodVolumeBackup::KIND,
            Self::NonAdminBackup(_) => NonAdminBackup::KIND,
        }
    }

    /// The object's namespace (empty for a Namespace).
    pub fn namespace(&self) -> &str {
        match self {
            Self::Namespace { .. } => "",
            Self::StorageLocation(o) => o.namespace(),
            Self::Backup(o) => o.namespace(),
            Self::PodVolumeBackup(o) => o.namespace(),
            Self::NonAdminBackup(o) => o.namespace(),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Namespace { name, .. } => name,
            Self::StorageLocation(o) => o.name(),
            Self::Backup(o) => o.name(),
            Self::PodVolumeBackup(o) => o.name(),
            Self::NonAdminBackup(o) => o.name(),
        }
    }
}

impl Inventory {
    /// How many objects the inventory holds, Terminating namespaces included.
    pub fn len(&self) -> usize {
        self.namespaces.len()
            + self.terminating_namespaces.len()
            + self.storage_locations.len()
            + self.backups.len()
            + self.pod_volume_backups.len()
            + self.non_admin_backups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many objects of `kind` it holds (0 for a kind it does not model).
    pub fn count_of(&self, kind: &str) -> usize {
        match kind {
            NAMESPACE => self.namespaces.len() + self.terminating_namespaces.len(),
            BackupStorageLocation::KIND => self.storage_locations.len(),
            Backup::KIND => self.backups.len(),
            PodVolumeBackup::KIND => self.pod_volume_backups.len(),
            NonAdminBackup::KIND => self.non_admin_backups.len(),
            _ => 0,
        }
    }

    /// Every object, kind by kind (each a reference count, not a copy of the object).
    pub fn objects(&self) -> impl Iterator<Item = InventoryObject> + '_ {
        let namespace =
            |terminating| move |name: &String| InventoryObject::Namespace { name: name.clone(), terminating };
        self.namespaces
            .iter()
            .map(namespace(false))
            .chain(self.terminating_namespaces.iter().map(namespace(true)))
            .chain(self.storage_locations.iter().cloned().map(InventoryObject::StorageLocation))
            .chain(self.backups.iter().cloned().map(InventoryObject::Backup))
            .chain(self.pod_volume_backups.iter().cloned().map(InventoryObject::PodVolumeBackup))
            .chain(self.non_admin_backups.iter().cloned().map(InventoryObject::NonAdminBackup))
    }

    /// Whether it holds the object of `kind` named `name` in `namespace`.
    pub fn contains(&self, kind: &str, namespace: &str, name: &str) -> bool {
        match kind {
            NAMESPACE => {
                namespace.is_empty() && (self.namespaces.contains(name) || self.terminating_namespaces.contains(name))
            }
            BackupStorageLocation::KIND => position(&self.storage_locations, namespace, name).is_ok(),
            Backup::KIND => position(&self.backups, namespace, name).is_ok(),
            PodVolumeBackup::KIND => position(&self.pod_volume_backups, namespace, name).is_ok(),
            NonAdminBackup::KIND => position(&self.non_admin_backups, namespace, name).is_ok(),
            _ => false,
        }
    }

    /// Replaces every object of `kind` with `objects` (objects of other kinds among them are left out; of two
    /// with one name, the later is kept). Returns whether the inventory changed.
    pub fn replace_kind(&mut self, kind: &str, objects: impl IntoIterator<Item = InventoryObject>) -> bool {
        let objects = objects.into_iter().filter(|o| o.kind() == kind);
        let changed = match kind {
            NAMESPACE => {
                let named = objects.filter_map(|o| match o {
                    InventoryObject::Namespace { name, terminating } => Some((name, terminating)),
                    _ => None,
                });
                // Collected from sorted names the sets are built whole, their nodes full; inserted one by one
                // they would be about half full.
                let (terminating, live): (Vec<_>, Vec<_>) =
                    sorted_keeping_the_last(named.collect(), |a, b| a.0.cmp(&b.0)).into_iter().partition(|(_, t)| *t);
                let live: BTreeSet<String> = live.into_iter().map(|(name, _)| name).collect();
                let terminating: BTreeSet<String> = terminating.into_iter().map(|(name, _)| name).collect();
                let changed = live != self.namespaces || terminating != self.terminating_namespaces;
                (self.namespaces, self.terminating_namespaces) = (live, terminating);
                changed
            }
            BackupStorageLocation::KIND => replace(&mut self.storage_locations, objects.filter_map(storage_location)),
            Backup::KIND => replace(&mut self.backups, objects.filter_map(backup)),
            PodVolumeBackup::KIND => replace(&mut self.pod_volume_backups, objects.filter_map(pod_volume_backup)),
            NonAdminBackup::KIND => replace(&mut self.non_admin_backups, objects.filter_map(non_admin_backup)),
            _ => false,
        };
        self.declares_non_admin_backups = !self.non_admin_backups.is_empty();
        changed
    }

    /// Adds `object`, or replaces the one of its kind, namespace and name. Returns whether that changed anything.
    pub fn upsert(&mut self, object: InventoryObject) -> bool {
        let changed = match object {
            InventoryObject::Namespace { name, terminating } => {
                let (into, other) = match terminating {
                    false => (&mut self.namespaces, &mut self.terminating_namespaces),
                    true => (&mut self.terminating_namespaces, &mut self.namespaces),
                };
                let moved = other.remove(&name);
                into.insert(name) || moved
            }
            InventoryObject::StorageLocation(o) => upsert(&mut self.storage_locations, o),
            InventoryObject::Backup(o) => upsert(&mut self.backups, o),
            InventoryObject::PodVolumeBackup(o) => upsert(&mut self.pod_volume_backups, o),
            InventoryObject::NonAdminBackup(o) => upsert(&mut self.non_admin_backups, o),
        };
        self.declares_non_admin_backups = !self.non_admin_backups.is_empty();
        changed
    }

    /// Removes the object of `kind` named `name` in `namespace`. Returns whether it was there.
    pub fn remove(&mut self, kind: &str, namespace: &str, name: &str) -> bool {
        let removed = match kind {
            NAMESPACE => {
                namespace.is_empty() && (self.namespaces.remove(name) | self.terminating_namespaces.remove(name))
            }
            BackupStorageLocation::KIND => remove(&mut self.storage_locations, namespace, name),
            Backup::KIND => remove(&mut self.backups, namespace, name),
            PodVolumeBackup::KIND => remove(&mut self.pod_volume_backups, namespace, name),
            NonAdminBackup::KIND => remove(&mut self.non_admin_backups, namespace, name),
            _ => false,
        };
        self.declares_non_admin_backups = !self.non_admin_backups.is_empty();
        removed
    }
}

fn storage_location(object: InventoryObject) -> Option<Object<BackupStorageLocation>> {
    if let InventoryObject::StorageLocation(o) = object { Some(o) } else { None }
}

fn backup(object: InventoryObject) -> Option<Object<Backup>> {
    if let InventoryObject::Backup(o) = object { Some(o) } else { None }
}

fn pod_volume_backup(object: InventoryObject) -> Option<Object<PodVolumeBackup>> {
    if let InventoryObject::PodVolumeBackup(o) = object { Some(o) } else { None }
}

fn non_admin_backup(object: InventoryObject) -> Option<Object<NonAdminBackup>> {
    if let InventoryObject::NonAdminBackup(o) = object { Some(o) } else { None }
}

fn order<K: Kind>(object: &Object<K>, namespace: &str, name: &str) -> Ordering {
    (object.namespace(), object.name()).cmp(&(namespace, name))
}

fn position<K: Kind>(objects: &[Object<K>], namespace: &str, name: &str) -> Result<usize, usize> {
    objects.binary_search_by(|o| order(o, namespace, name))
}

/// `items` sorted by `compare`, of those it finds equal only the one that came last, in a list of its own size.
fn sorted_keeping_the_last<T>(mut items: Vec<T>, compare: impl Fn(&T, &T) -> Ordering) -> Vec<T> {
    // Stable: of equal items the later stays last.
    items.sort_by(&compare);
    let mut kept: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        match kept.last_mut() {
            Some(last) if compare(last, &item).is_eq() => *last = item,
            _ => kept.push(item),
        }
    }
    kept.shrink_to_fit();
    kept
}

fn replace<K: Kind + PartialEq>(held: &mut Vec<Object<K>>, objects: impl Iterator<Item = Object<K>>) -> bool {
    let sorted = sorted_keeping_the_last(objects.collect(), |a, b| order(a, b.namespace(), b.name()));
    let changed = *held != sorted;
    *held = sorted;
    changed
}

fn upsert<K: Kind + PartialEq>(held: &mut Vec<Object<K>>, object: Object<K>) -> bool {
    match position(held, object.namespace(), object.name()) {
        Ok(i) if held[i] == object => false,
        Ok(i) => {
            held[i] = object;
            true
        }
        Err(i) => {
            held.insert(i, object);
            true
        }
    }
}

fn remove<K: Kind>(held: &mut Vec<Object<K>>, namespace: &str, name: &str) -> bool {
    match position(held, namespace, name) {
        Ok(i) => {
            held.remove(i);
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(kind: &str, value: serde_json::Value) -> InventoryObject {
        InventoryObject::parse_view(kind, &value.to_string()).unwrap().unwrap()
    }

    fn backup(name: &str, phase: &str) -> InventoryObject {
        parsed("Backup", json!({"metadata": {"name": name, "namespace": "velero"}, "status": {"phase": phase}}))
    }

    fn namespace(name: &str, terminating: bool) -> InventoryObject {
        InventoryObject::Namespace { name: name.into(), terminating }
    }

    fn names(inventory: &Inventory) -> Vec<String> {
        inventory.objects().map(|o| format!("{}/{}/{}", o.kind(), o.namespace(), o.name())).collect()
    }

    #[test]
    fn a_snapshot_replaces_one_kind_sorted_keeping_the_later_of_two() {
        let mut inv = Inventory::default();
        assert!(inv.replace_kind("Namespace", [namespace("b", false), namespace("a", true)]));
        assert!(inv.replace_kind("Backup", [backup("y", "New"), backup("x", "New"), backup("y", "Completed")]));
        assert_eq!(names(&inv), ["Namespace//b", "Namespace//a", "Backup/velero/x", "Backup/velero/y"]);
        assert!(inv.namespaces.contains("b") && !inv.namespaces.contains("a"), "Terminating is absent to the planner");
        assert_eq!(inv.backups[1].view.status.phase, crate::model::BackupPhase::Completed);
        assert!(!inv.replace_kind("Backup", [backup("x", "New"), backup("y", "Completed")]), "same again");
        assert!(inv.replace_kind("Backup", [namespace("c", false)]), "no backups now");
        assert_eq!(inv.len(), 2, "objects of another kind are left out of a snapshot");
        assert!(!inv.replace_kind("ConfigMap", [backup("x", "New")]));
    }

    #[test]
    fn upserts_and_removals_keep_the_order_and_say_what_changed() {
        let mut inv = Inventory::default();
        for name in ["m", "c", "x", "a"] {
            assert!(inv.upsert(backup(name, "New")));
        }
        assert!(!inv.upsert(backup("c", "New")), "the same object again");
        assert!(inv.upsert(backup("c", "Completed")));
        let order: Vec<&str> = inv.backups.iter().map(|b| b.name()).collect();
        assert_eq!(order, ["a", "c", "m", "x"]);
        assert!(inv.contains("Backup", "velero", "m") && !inv.contains("Backup", "other", "m"));
        assert!(inv.remove("Backup", "velero", "m"));
        assert!(!inv.remove("Backup", "velero", "m"));
        assert!(inv.upsert(namespace("t", false)));
        assert!(inv.upsert(namespace("t", true)), "starting to terminate is a change");
        assert!(!inv.upsert(namespace("t", true)));
        assert!(inv.contains("Namespace", "", "t") && !inv.namespaces.contains("t"));
        assert!(!inv.remove("Namespace", "x", "t"), "a namespace is in no namespace");
        assert!(inv.remove("Namespace", "", "t"));
        assert_eq!(inv.len(), 3);
    }

    #[test]
    fn the_non_admin_backup_kind_is_declared_while_one_is_held() {
        let mut inv = Inventory::default();
        let nab = parsed("NonAdminBackup", json!({"metadata": {"name": "n", "namespace": "team"}}));
        assert!(inv.upsert(nab));
        assert!(inv.declares_non_admin_backups && inv.count_of("NonAdminBackup") == 1);
        assert!(inv.remove("NonAdminBackup", "team", "n"));
        assert!(!inv.declares_non_admin_backups);
    }
}
