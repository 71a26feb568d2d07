//! The guard's rules for a PodVolumeBackup (docs/security.md): it belongs to exactly the Backup it waits for —
//! labels, owner reference and UID that Backup's on this cluster — bound to that Backup's BSL, and its pod is in
//! one of that Backup's namespaces. Velero's restore finds a backup's volume data by these PVBs: one of another
//! backup, or of another namespace's pod, would restore data the backup never held.

use std::time::SystemTime;

use serde_json::Value;

use super::{Policy, Related, annotation, backup, label, text};
use crate::grpc::proto::DesiredItem;
use crate::model::names::velero_label_value;
use crate::model::{Backup, Kind, Object, labels};
use crate::plan::pod_volume_backups::namespace_in_backup;

/// Why `body` (a PVB whose shape passed) is not one ferry would plan, or `None`.
pub fn body_refusal(item: &DesiredItem, body: &Value) -> Option<String> {
    let backup = annotation(body, labels::FERRY_BACKUP_NAME);
    let backup_label = label(body, labels::VELERO_BACKUP_NAME);
    if backup_label != velero_label_value(backup) {
        return Some(format!(
            "its label {} is {backup_label:?}, not that of its backup {backup:?} ({})",
            labels::VELERO_BACKUP_NAME,
            labels::FERRY_BACKUP_NAME
        ));
    }
    if body.pointer("/metadata/labels").and_then(|l| l.get(labels::VELERO_BACKUP_UID)).is_none() {
        return Some(format!("it lacks the label {}", labels::VELERO_BACKUP_UID));
    }
    let owners = body.pointer("/metadata/ownerReferences").map(|o| o.as_array().cloned().unwrap_or_default());
    let foreign_owner = owners.iter().flatten().find(|o| {
        o.get("apiVersion").and_then(Value::as_str) != Some(Backup::API_VERSION)
            || o.get("kind").and_then(Value::as_str) != Some(Backup::KIND)
            || o.get("name").and_then(Value::as_str) != Some(backup)
    });
    if let Some(owner) = foreign_owner {
        return Some(format!("its ownerReference {owner} is not its backup {backup:?}"));
    }
    let waits_elsewhere = item.waits_for.iter().find(|w| w.kind == Backup::KIND && w.name != backup);
    if let Some(w) = waits_elsewhere {
        return Some(format!("it waits for Backup {:?}, not its own backup {backup:?}", w.name));
    }
    None
}

/// Why `body` (as it would be written: its Backup's UID filled in) does not belong to the Backup read from this
/// cluster, or `None`.
pub fn related_refusal(policy: &Policy, body: &Value, related: Related<'_>, now: SystemTime) -> Option<String> {
    let name = annotation(body, labels::FERRY_BACKUP_NAME);
    let Some(live) = related.backup else {
        return Some(format!("its Backup {name:?} does not exist on this cluster"));
    };
    let uid = text(live, "/metadata/uid");
    if uid.is_empty() {
        return Some(format!("its Backup {name:?} has no UID yet"));
    }
    if label(body, labels::VELERO_BACKUP_UID) != uid {
        return Some(format!(
            "its label {} is {:?}, not the UID of Backup {name:?} here ({uid})",
            labels::VELERO_BACKUP_UID,
            label(body, labels::VELERO_BACKUP_UID)
        ));
    }
    let owners = body.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
    if let Some(owner) = owners.iter().find(|o| o.get("uid").and_then(Value::as_str) != Some(uid)) {
        return Some(format!("its ownerReference {owner} is not Backup {name:?} here ({uid})"));
    }
    let bsl = text(body, "/spec/backupStorageLocation");
    let backup_bsl = text(live, "/spec/storageLocation");
    if bsl != backup_bsl {
        return Some(format!("its spec.backupStorageLocation is {bsl:?}, not its Backup's {backup_bsl:?}"));
    }
    let backup = match Object::<Backup>::from_value(live.clone()) {
        Ok(backup) => backup,
        Err(e) => return Some(format!("its Backup {name:?} is unreadable: {e}")),
    };
    let pod_ns = text(body, "/spec/pod/namespace");
    let spec = &backup.view.spec;
    if !namespace_in_backup(pod_ns, &spec.included_namespaces, &spec.excluded_namespaces) {
        return Some(format!(
            "its pod's namespace {pod_ns:?} is not among Backup {name:?}'s namespaces (includedNamespaces {:?}, \
             excludedNamespaces {:?})",
            spec.included_namespaces, spec.excluded_namespaces
        ));
    }
    backup::location_refusal(policy, live, related.location, &format!("its Backup {name:?}"), now)
}
