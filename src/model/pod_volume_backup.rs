//! Velero `PodVolumeBackup` (velero.io/v1, `pkg/apis/velero/v1/pod_volume_backup_types.go`).

use serde::Deserialize;

use super::meta::{ObjectMeta, null_as_default, struct_from_object, struct_from_object_or_null};
use super::object::Kind;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PodVolumeBackup {
    #[serde(deserialize_with = "struct_from_object")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "struct_from_object_or_null")]
    pub spec: PodVolumeBackupSpec,
    #[serde(deserialize_with = "struct_from_object_or_null")]
    pub status: PodVolumeBackupStatus,
}

impl Kind for PodVolumeBackup {
    const API_VERSION: &'static str = "velero.io/v1";
    const KIND: &'static str = "PodVolumeBackup";
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodVolumeBackupSpec {
    #[serde(deserialize_with = "struct_from_object_or_null")]
    pub pod: PodReference,
    #[serde(deserialize_with = "null_as_default")]
    pub volume: String,
    #[serde(deserialize_with = "null_as_default")]
    pub backup_storage_location: String,
}

/// `spec.pod`: the pod on the **source** cluster. Velero's restore matches PVBs by this namespace.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PodReference {
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodVolumeBackupStatus {
    #[serde(deserialize_with = "null_as_default")]
    pub phase: String,
    #[serde(deserialize_with = "null_as_default")]
    /// Velero writes `snapshotID` (Go's initialism), not camelCase `snapshotId`.
    #[serde(rename = "snapshotID")]
    pub snapshot_id: String,
}
