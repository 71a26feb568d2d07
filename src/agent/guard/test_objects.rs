//! Objects in the shape the planner makes them (plan/velero_backup.rs, pod_volume_backups.rs,
//! non_admin_backup.rs), and what a cluster holds for them, for the guard's and the reconciler's unit tests.

use serde_json::{Value, json};

use crate::model::labels;

pub const BSL: &str = "dr";
pub const UUID: &str = "0b4c6e1a-1d2f-4c4b-9a57-1f2e3d4c5b6a";

/// The NACUUID NAC generates for `ns`/`name` with [`UUID`].
pub fn nacuuid(ns: &str, name: &str) -> String {
    crate::resolve::nac_uuid::generate(ns, name, UUID)
}

fn provenance(backup: &str) -> Value {
    json!({labels::FERRY_SOURCE_CLUSTER: "a", labels::FERRY_SOURCE_LOCATION: "shared",
        labels::FERRY_SOURCE_BUCKET: "bkt", labels::FERRY_SOURCE_PREFIX: "velero",
        labels::FERRY_BACKUP_NAME: backup, labels::FERRY_BACKUP_UID: format!("src-{backup}")})
}

/// A BSL of this cluster, `mode` its accessMode (`None`: unset, i.e. ReadWrite).
pub fn bsl(name: &str, mode: Option<&str>) -> Value {
    let mut bsl = json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": name, "namespace": "velero"},
        "spec": {"provider": "aws", "objectStorage": {"bucket": "bkt", "prefix": "velero"}}});
    if let Some(mode) = mode {
        bsl["spec"]["accessMode"] = mode.into();
    }
    bsl
}

/// An admin Backup of namespace `shop`, bound to [`BSL`].
pub fn backup(name: &str) -> Value {
    json!({"apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": name, "namespace": "velero",
            "labels": {labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE, labels::VELERO_STORAGE_LOCATION: BSL},
            "annotations": provenance(name)},
        "spec": {"includedNamespaces": ["shop"], "storageLocation": BSL, "ttl": "720h0m0s"},
        "status": {"phase": "Completed", "expiration": "2099-01-01T00:00:00Z"}})
}

/// A tenant's (NAC) Backup of `ns`/`name`, placed in namespace `placed_in` (mapped when it differs).
pub fn tenant_backup(ns: &str, name: &str, placed_in: &str) -> Value {
    let uuid = nacuuid(ns, name);
    let mut b = backup(&uuid);
    b["spec"]["includedNamespaces"] = json!([ns]);
    let meta = &mut b["metadata"];
    meta["labels"][labels::OADP] = labels::OADP_VALUE.into();
    meta["labels"][labels::MANAGED_BY] = labels::NAC_MANAGED_BY_VALUE.into();
    meta["labels"][labels::NAB_ORIGIN_NACUUID] = uuid.into();
    meta["annotations"][labels::NAB_ORIGIN_NAME] = name.into();
    meta["annotations"][labels::NAB_ORIGIN_NAMESPACE] = placed_in.into();
    if placed_in != ns {
        meta["annotations"][labels::FERRY_SOURCE_NAMESPACE] = ns.into();
    }
    b
}

/// A PVB of `backup` for a pod in `pod_ns`, as a template waiting for the Backup's UID (`uid` empty) or with it.
pub fn pvb(name: &str, backup: &str, pod_ns: &str, uid: &str) -> Value {
    json!({"apiVersion": "velero.io/v1", "kind": "PodVolumeBackup",
        "metadata": {"name": name, "namespace": "velero",
            "labels": {labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE,
                labels::VELERO_BACKUP_NAME: crate::model::names::velero_label_value(backup),
                labels::VELERO_BACKUP_UID: uid},
            "annotations": provenance(backup),
            "ownerReferences": [{"apiVersion": "velero.io/v1", "kind": "Backup", "name": backup, "uid": uid,
                "controller": true}]},
        "spec": {"backupStorageLocation": BSL, "pod": {"kind": "Pod", "namespace": pod_ns, "name": "web-0"},
            "volume": "data", "snapshotID": "abc"},
        "status": {"phase": "Completed"}})
}

/// The synced NAB of the tenant backup `ns`/`name` in namespace `placed_in`.
pub fn nab(ns: &str, name: &str, placed_in: &str) -> Value {
    let uuid = nacuuid(ns, name);
    let mut annotations = provenance(&uuid);
    if placed_in != ns {
        annotations[labels::FERRY_SOURCE_NAMESPACE] = ns.into();
    }
    let mut spec = tenant_backup(ns, name, placed_in)["spec"].clone();
    spec["storageLocation"] = "".into();
    json!({"apiVersion": "oadp.openshift.io/v1alpha1", "kind": "NonAdminBackup",
        "metadata": {"name": name, "namespace": placed_in,
            "labels": {labels::NAB_SYNCED_FROM_NACUUID: uuid,
                labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE},
            "annotations": annotations},
        "spec": {"backupSpec": spec}})
}

/// `object` as the API server returns it after a create: with a UID.
pub fn stored(mut object: Value, uid: &str) -> Value {
    object["metadata"]["uid"] = uid.into();
    object
}
