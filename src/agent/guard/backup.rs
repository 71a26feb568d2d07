//! The guard's rules for a Velero Backup (docs/security.md): ferry's own, named after its backup, bound to a
//! ReadOnly BSL of this cluster, no owner here, and — for a tenant's backup — marks that agree with each other
//! and an origin namespace this cluster allows.

use std::time::SystemTime;

use serde_json::Value;

use super::{Guard, Policy, annotation, label, text};
use crate::model::names::velero_label_value;
use crate::model::{Backup, BackupStorageLocation, Object, labels};
use crate::resolve::{Owner, owner_of};

/// Why `body` (a Backup whose shape passed) is not one ferry would plan, or `None`.
pub fn body_refusal(guard: &Guard, body: &Value) -> Option<String> {
    let name = text(body, "/metadata/name");
    if annotation(body, labels::FERRY_BACKUP_NAME) != name {
        return Some(format!(
            "its annotation {} is {:?}, not its own name",
            labels::FERRY_BACKUP_NAME,
            annotation(body, labels::FERRY_BACKUP_NAME)
        ));
    }
    // The plan drops the source cluster's owners: an owner here would hand the Backup's life to another object.
    if body.pointer("/metadata/ownerReferences").is_some_and(|o| o.as_array().is_none_or(|a| !a.is_empty())) {
        return Some("a Backup ferry plans has no ownerReferences".into());
    }
    let bsl = text(body, "/spec/storageLocation");
    if bsl.is_empty() {
        return Some("its spec.storageLocation is empty".into());
    }
    let bsl_label = label(body, labels::VELERO_STORAGE_LOCATION);
    if bsl_label != velero_label_value(bsl) {
        return Some(format!(
            "its label {} is {bsl_label:?}, not its spec.storageLocation {bsl:?}",
            labels::VELERO_STORAGE_LOCATION
        ));
    }
    tenant_refusal(guard, body)
}

/// A tenant (NAC) backup's marks must be what NAC generated for its source namespace, and the namespace it is
/// placed in (its origin-namespace annotation here) the same or one this cluster allows it to be mapped to.
fn tenant_refusal(guard: &Guard, body: &Value) -> Option<String> {
    let placed_in = annotation(body, labels::NAB_ORIGIN_NAMESPACE).to_string();
    let source = match annotation(body, labels::FERRY_SOURCE_NAMESPACE) {
        "" => placed_in.clone(),
        source => source.to_string(),
    };
    // Checked as the bucket had it: the origin namespace put back to the source namespace.
    let mut as_in_bucket = body.clone();
    if let Some(annotations) = as_in_bucket.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut)
        && annotations.contains_key(labels::NAB_ORIGIN_NAMESPACE)
    {
        annotations.insert(labels::NAB_ORIGIN_NAMESPACE.into(), source.clone().into());
    }
    let object = match Object::<Backup>::from_value(as_in_bucket) {
        Ok(object) => object,
        Err(e) => return Some(format!("it is not a Velero Backup: {e}")),
    };
    match owner_of(&object) {
        Ok(Owner::Admin) if !annotation(body, labels::FERRY_SOURCE_NAMESPACE).is_empty() => {
            Some(format!("it carries {} but no tenant marks", labels::FERRY_SOURCE_NAMESPACE))
        }
        Ok(Owner::Admin) => None,
        Ok(Owner::Tenant(_)) => {
            guard.mapping_refusal(&source, &placed_in).map(|why| format!("tenant backup of {source:?}: {why}"))
        }
        Err(refusal) => Some(format!("its tenant marks are not NAC's: {}", refusal.0)),
    }
}

/// Why an object bound to BSL `location` (as read from this cluster) may not be written, or `None`: the BSL
/// must exist and be ReadOnly — a ReadWrite BSL's Velero deletes a backup's data from the bucket (GC of an
/// expired backup, `velero backup delete`, a NAB's deleteBackup) — unless `--allow-read-write-locations`, and
/// then the Backup must not have expired already (GC would delete it at once). `whose` names the Backup.
pub fn location_refusal(
    policy: &Policy,
    backup: &Value,
    location: Option<&Value>,
    whose: &str,
    now: SystemTime,
) -> Option<String> {
    let name = text(backup, "/spec/storageLocation");
    let Some(location) = location else {
        return Some(format!("{whose} names BSL {name:?}, which does not exist on this cluster"));
    };
    let bsl = match Object::<BackupStorageLocation>::from_value(location.clone()) {
        Ok(bsl) => bsl,
        Err(e) => return Some(format!("BSL {name:?} of this cluster is unreadable: {e}")),
    };
    if !bsl.view.is_read_write() {
        return None;
    }
    if !policy.allow_read_write_locations {
        return Some(format!(
            "{whose} names BSL {name:?}, which is ReadWrite here: this cluster's Velero could delete the backup's data \
             from the bucket; the agent accepts only ReadOnly BSLs (set spec.accessMode: ReadOnly, or start the agent \
             with --allow-read-write-locations to accept the risk)"
        ));
    }
    let expiration = text(backup, "/status/expiration");
    if expiration.is_empty() {
        return None;
    }
    match humantime::parse_rfc3339_weak(expiration) {
        Ok(at) if at > now => None,
        Ok(_) => Some(format!(
            "{whose} expired at {expiration} and BSL {name:?} is ReadWrite: Velero's garbage collection would delete \
             its data from the bucket at once"
        )),
        Err(e) => Some(format!("{whose} has an unreadable status.expiration {expiration:?}: {e}")),
    }
}
