//! Velero `BackupStorageLocation` (velero.io/v1, `pkg/apis/velero/v1/backupstoragelocation_types.go`).

use serde::Deserialize;

use super::labels;
use super::meta::{ObjectMeta, null_as_default, struct_from_object, struct_from_object_or_null};
use super::object::Kind;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct BackupStorageLocation {
    #[serde(deserialize_with = "struct_from_object")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "struct_from_object_or_null")]
    pub spec: BackupStorageLocationSpec,
}

impl Kind for BackupStorageLocation {
    const API_VERSION: &'static str = "velero.io/v1";
    const KIND: &'static str = "BackupStorageLocation";
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackupStorageLocationSpec {
    #[serde(deserialize_with = "null_as_default")]
    pub provider: String,
    #[serde(deserialize_with = "struct_from_object_or_null")]
    pub object_storage: ObjectStorage,
    pub default: bool,
    /// `ReadOnly` or `ReadWrite`; Velero treats unset as `ReadWrite`.
    #[serde(deserialize_with = "null_as_default")]
    pub access_mode: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ObjectStorage {
    #[serde(deserialize_with = "null_as_default")]
    pub bucket: String,
    #[serde(deserialize_with = "null_as_default")]
    pub prefix: String,
}

impl BackupStorageLocation {
    /// Bucket with surrounding `/` trimmed, as Velero reads it.
    pub fn bucket(&self) -> &str {
        self.spec.object_storage.bucket.trim_matches('/')
    }

    /// Prefix with surrounding `/` trimmed, as Velero reads it.
    pub fn prefix(&self) -> &str {
        self.spec.object_storage.prefix.trim_matches('/')
    }

    /// Whether Velero on this cluster may delete from the location through this BSL (its GC of expired backups,
    /// `velero backup delete`, a DeleteBackupRequest): anything but an explicit `ReadOnly`.
    pub fn is_read_write(&self) -> bool {
        self.spec.access_mode != "ReadOnly"
    }

    /// For a BSL that NAC created from a tenant's NonAdminBackupStorageLocation: that NaBSL's
    /// `(namespace, name)`. NAC's own sync writes this NaBSL name into a synced NAB's `storageLocation`.
    pub fn non_admin_origin(&self) -> Option<(&str, &str)> {
        let m = &self.metadata;
        let nac = m.label(labels::OADP) == Some(labels::OADP_VALUE)
            && m.label(labels::MANAGED_BY) == Some(labels::NAC_MANAGED_BY_VALUE)
            && m.label(labels::NABSL_ORIGIN_NACUUID).is_some_and(|v| !v.is_empty());
        if !nac {
            return None;
        }
        match (m.annotation(labels::NABSL_ORIGIN_NAMESPACE), m.annotation(labels::NABSL_ORIGIN_NAME)) {
            (Some(ns), Some(name)) if !ns.is_empty() && !name.is_empty() => Some((ns, name)),
            _ => None,
        }
    }
}
