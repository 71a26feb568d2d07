//! The lookups planning makes into a cluster's inventory, as hash maps built once per plan: every backup in the
//! catalog asks whether its Backup, PVBs and NAB exist, and a scan per question is O(backups × inventory) per
//! cluster (10k × 10k at fleet scale). Entries keep inventory order, so results match a scan's first match.

use std::collections::HashMap;

use crate::model::{Backup, Inventory, NonAdminBackup, Object, PodVolumeBackup, labels};

/// (namespace, name).
type Name<'a> = (&'a str, &'a str);

#[derive(Debug, Default)]
pub struct InventoryIndex<'a> {
    backups: HashMap<Name<'a>, &'a Object<Backup>>,
    pod_volume_backups: HashMap<Name<'a>, &'a Object<PodVolumeBackup>>,
    non_admin_backups: HashMap<Name<'a>, &'a Object<NonAdminBackup>>,
    /// NABs by the NACUUID they refer to (`NonAdminBackup::nacuuid`).
    nabs_by_nacuuid: HashMap<&'a str, Vec<&'a Object<NonAdminBackup>>>,
    /// NABs by the backup name in ferry's provenance annotation (any NAB may carry it; callers check the rest).
    nabs_by_ferry_backup: HashMap<&'a str, Vec<&'a Object<NonAdminBackup>>>,
}

/// Inserts unless the key is taken: the first object of a name wins, as a scan's `find` would.
fn first<'a, T>(map: &mut HashMap<Name<'a>, &'a T>, key: Name<'a>, value: &'a T) {
    map.entry(key).or_insert(value);
}

impl<'a> InventoryIndex<'a> {
    pub fn new(inventory: &'a Inventory) -> Self {
        let mut index = Self::default();
        for b in &inventory.backups {
            first(&mut index.backups, (b.namespace(), b.name()), b);
        }
        for p in &inventory.pod_volume_backups {
            first(&mut index.pod_volume_backups, (p.namespace(), p.name()), p);
        }
        for n in &inventory.non_admin_backups {
            first(&mut index.non_admin_backups, (n.namespace(), n.name()), n);
            if let Some(uuid) = n.view.nacuuid() {
                index.nabs_by_nacuuid.entry(uuid).or_default().push(n);
            }
            if let Some(backup) = n.meta().annotation(labels::FERRY_BACKUP_NAME) {
                index.nabs_by_ferry_backup.entry(backup).or_default().push(n);
            }
        }
        index
    }

    pub fn backup(&self, namespace: &str, name: &str) -> Option<&'a Object<Backup>> {
        self.backups.get(&(namespace, name)).copied()
    }

    pub fn pod_volume_backup(&self, namespace: &str, name: &str) -> Option<&'a Object<PodVolumeBackup>> {
        self.pod_volume_backups.get(&(namespace, name)).copied()
    }

    pub fn non_admin_backup(&self, namespace: &str, name: &str) -> Option<&'a Object<NonAdminBackup>> {
        self.non_admin_backups.get(&(namespace, name)).copied()
    }

    /// The NABs that refer to `nacuuid`, in inventory order.
    pub fn nabs_referring_to(&self, nacuuid: &str) -> &[&'a Object<NonAdminBackup>] {
        self.nabs_by_nacuuid.get(nacuuid).map_or(&[], Vec::as_slice)
    }

    /// The NABs whose ferry provenance annotation names `backup`, in inventory order.
    pub fn nabs_annotated_with_backup(&self, backup: &str) -> &[&'a Object<NonAdminBackup>] {
        self.nabs_by_ferry_backup.get(backup).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object<K: crate::model::Kind>(kind: &str, ns: &str, name: &str, uid: &str) -> Object<K> {
        Object::from_value(json!({"kind": kind, "metadata": {"namespace": ns, "name": name, "uid": uid}})).unwrap()
    }

    #[test]
    fn lookups_find_what_a_scan_finds_first() {
        let mut inventory = Inventory::default();
        inventory.backups.push(object("Backup", "velero", "b", "first"));
        inventory.backups.push(object("Backup", "velero", "b", "second"));
        inventory.backups.push(object("Backup", "other", "b", "elsewhere"));
        inventory.pod_volume_backups.push(object("PodVolumeBackup", "velero", "p", "p1"));
        let index = InventoryIndex::new(&inventory);
        assert_eq!(index.backup("velero", "b").and_then(|b| b.meta().uid.as_deref()), Some("first"));
        assert_eq!(index.backup("other", "b").and_then(|b| b.meta().uid.as_deref()), Some("elsewhere"));
        assert!(index.backup("velero", "p").is_none());
        assert!(index.pod_volume_backup("velero", "p").is_some() && index.pod_volume_backup("other", "p").is_none());
        assert!(index.nabs_referring_to("x").is_empty() && index.nabs_annotated_with_backup("b").is_empty());
    }
}
