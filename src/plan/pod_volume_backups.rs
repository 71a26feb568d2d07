//! DESIGN §3 rule 2: the backup's PodVolumeBackups on the target, owned by the target's Backup UID.

use serde_json::Value;

use crate::catalog::CatalogBackup;
use crate::model::names::velero_label_value;
use crate::model::{Backup, Kind, Object, PodVolumeBackup, labels};

use super::object_template::{for_target, metadata_mut, set_label, set_spec};
use super::velero_backup::BackupState;
use super::{Action, PlanItem, Prerequisite, Target};

/// Rule 2: every PVB of the backup's PVB file that the target lacks (by name and `velero.io/backup-name`) is
/// created in the Velero namespace, its Backup owner reference and `velero.io/backup-uid` set to the UID of
/// the Backup **on the target**, `spec.backupStorageLocation` set to the target's BSL. `spec.pod.namespace`
/// stays the source namespace: Velero's restore matches PVBs by it (rule 4). Backups whose CR already existed
/// get their PVBs too (Velero skips those).
pub fn plan(target: &Target<'_>, entry: &CatalogBackup, state: &BackupState) -> Vec<PlanItem> {
    if *state == BackupState::Conflict || entry.pod_volume_backups.is_empty() {
        return Vec::new();
    }
    let ns = target.cluster.velero_namespace.as_str();
    let backup_label = velero_label_value(&entry.name);
    let item =
        |action, name: &str, reason: Option<String>, waits_for: Option<Prerequisite>, object: Option<Value>| PlanItem {
            action,
            kind: PodVolumeBackup::KIND.into(),
            namespace: ns.to_string(),
            name: name.to_string(),
            backup: entry.name.clone(),
            reason,
            waits_for,
            object,
        };
    let existing = |name: &str| {
        target.cluster.inventory.pod_volume_backups.iter().find(|p| p.name() == name && p.namespace() == ns)
    };
    let mut items = Vec::new();
    let mut missing = Vec::new();
    // Names first: on a converged cluster every PVB exists and nothing is decoded.
    for name in entry.pod_volume_backups.names() {
        match existing(name) {
            Some(p) if p.meta().label(labels::VELERO_BACKUP_NAME) == Some(backup_label.as_str()) => {}
            Some(_) => {
                let reason =
                    format!("PodVolumeBackup {ns}/{name} exists but belongs to another backup; left untouched");
                items.push(item(Action::Conflict, name, Some(reason), None, None));
            }
            None => missing.push(name),
        }
    }
    if missing.is_empty() {
        return items;
    }
    for pvb in entry.pod_volume_backups.objects().iter().filter(|p| missing.contains(&p.name())) {
        match state {
            BackupState::Exists { uid: Some(uid) } => {
                items.push(item(Action::Create, pvb.name(), None, None, Some(desired(target, entry, pvb, uid))));
            }
            _ => {
                let waits_for = state.waits_for(target, &entry.name);
                let template = desired(target, entry, pvb, "");
                items.push(item(Action::Wait, pvb.name(), None, Some(waits_for), Some(template)));
            }
        }
    }
    items
}

/// The PVB to create; `backup_uid` is empty in a template that waits for the Backup.
fn desired(target: &Target<'_>, entry: &CatalogBackup, pvb: &Object<PodVolumeBackup>, backup_uid: &str) -> Value {
    let mut object = for_target(
        pvb.to_value(),
        PodVolumeBackup::API_VERSION,
        PodVolumeBackup::KIND,
        &target.cluster.velero_namespace,
        target.location,
    );
    let meta = metadata_mut(&mut object);
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        // Only the reference to this PVB's Backup survives, re-pointed at the target's Backup; any other
        // owner is a source-cluster UID the target's garbage collector would act on.
        refs.retain(|r| is_backup_ref(r, &entry.name));
        for r in refs.iter_mut() {
            r["uid"] = backup_uid.into();
        }
    }
    let has_uid_label = meta.get("labels").and_then(|l| l.get(labels::VELERO_BACKUP_UID)).is_some();
    if has_uid_label {
        set_label(&mut object, labels::VELERO_BACKUP_UID, backup_uid);
    }
    set_spec(&mut object, "backupStorageLocation", target.bsl.name().into());
    object
}

fn is_backup_ref(r: &Value, backup: &str) -> bool {
    r.get("apiVersion").and_then(Value::as_str) == Some(Backup::API_VERSION)
        && r.get("kind").and_then(Value::as_str) == Some(Backup::KIND)
        && r.get("name").and_then(Value::as_str) == Some(backup)
}
