//! OADP `NonAdminBackup` (oadp.openshift.io/v1alpha1, NAC `api/v1alpha1/nonadminbackup_types.go`).

use serde::Deserialize;
use serde_json::Value;

use super::labels;
use super::meta::{
    ObjectMeta, null_as_default, optional_struct_from_object, struct_from_object, struct_from_object_or_null,
};
use super::object::Kind;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NonAdminBackup {
    #[serde(deserialize_with = "struct_from_object")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "struct_from_object_or_null")]
    pub spec: NonAdminBackupSpec,
    #[serde(deserialize_with = "struct_from_object_or_null")]
    pub status: NonAdminBackupStatus,
}

impl Kind for NonAdminBackup {
    const API_VERSION: &'static str = "oadp.openshift.io/v1alpha1";
    const KIND: &'static str = "NonAdminBackup";
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NonAdminBackupSpec {
    pub backup_spec: Option<Value>,
    pub delete_backup: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NonAdminBackupStatus {
    #[serde(deserialize_with = "optional_struct_from_object")]
    pub velero_backup: Option<VeleroBackupReference>,
    #[serde(deserialize_with = "null_as_default")]
    pub phase: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct VeleroBackupReference {
    #[serde(deserialize_with = "null_as_default")]
    pub nacuuid: String,
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub namespace: String,
}

impl NonAdminBackup {
    /// The NACUUID this NAB stands for: its sync label, else the one NAC recorded in its status.
    pub fn nacuuid(&self) -> Option<&str> {
        let from_label = self.metadata.label(labels::NAB_SYNCED_FROM_NACUUID).filter(|v| !v.is_empty());
        let from_status = self.status.velero_backup.as_ref().map(|v| v.nacuuid.as_str()).filter(|v| !v.is_empty());
        from_label.or(from_status)
    }
}
