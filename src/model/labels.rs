//! Every label and annotation key ferry reads or writes, in one place.
//!
//! Velero's keys come from `pkg/apis/velero/v1/labels_annotations.go`, NAC's from
//! `internal/common/constant/constant.go` (see docs/upstream.md §V3 and §O0).

// === Velero ===

/// Label on a Backup: the (label-safe) name of its BackupStorageLocation.
pub const VELERO_STORAGE_LOCATION: &str = "velero.io/storage-location";
/// Label on a PodVolumeBackup: the (label-safe) name of its Backup. Restore lists PVBs by it.
pub const VELERO_BACKUP_NAME: &str = "velero.io/backup-name";
/// Label on a PodVolumeBackup: the UID of its Backup on this cluster.
pub const VELERO_BACKUP_UID: &str = "velero.io/backup-uid";
/// Label on a Backup created from a Schedule.
pub const VELERO_SCHEDULE_NAME: &str = "velero.io/schedule-name";

// === OADP Non-Admin Controller ===

/// `openshift.io/oadp=True` marks every object NAC creates.
pub const OADP: &str = "openshift.io/oadp";
pub const OADP_VALUE: &str = "True";
/// `app.kubernetes.io/managed-by=oadp-nac-controller`.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const NAC_MANAGED_BY_VALUE: &str = "oadp-nac-controller";
/// Label on a NAC-created Velero Backup: the NACUUID (also the Backup's name).
pub const NAB_ORIGIN_NACUUID: &str = "openshift.io/oadp-nab-origin-nacuuid";
/// Annotation on a NAC-created Velero Backup: the NonAdminBackup's name.
pub const NAB_ORIGIN_NAME: &str = "openshift.io/oadp-nab-origin-name";
/// Annotation on a NAC-created Velero Backup: the NonAdminBackup's namespace (the tenant).
pub const NAB_ORIGIN_NAMESPACE: &str = "openshift.io/oadp-nab-origin-namespace";
/// Label on a NonAdminBackup that NAC must attach to an existing Velero Backup instead of creating one.
pub const NAB_SYNCED_FROM_NACUUID: &str = "openshift.io/oadp-nab-synced-from-nacuuid";
/// Label on a NAC-created Velero BSL (from a NonAdminBackupStorageLocation).
pub const NABSL_ORIGIN_NACUUID: &str = "openshift.io/oadp-nabsl-origin-nacuuid";
/// Annotation on a NAC-created Velero BSL: the NonAdminBackupStorageLocation's name.
pub const NABSL_ORIGIN_NAME: &str = "openshift.io/oadp-nabsl-origin-name";
/// Annotation on a NAC-created Velero BSL: the NonAdminBackupStorageLocation's namespace.
pub const NABSL_ORIGIN_NAMESPACE: &str = "openshift.io/oadp-nabsl-origin-namespace";

// === ferry ===

/// ferry's ownership mark: ferry modifies or deletes only objects carrying `ferry.dev/managed-by=ferry`.
pub const FERRY_MANAGED_BY: &str = "ferry.dev/managed-by";
pub const FERRY_MANAGED_BY_VALUE: &str = "ferry";
/// Annotation: the cluster whose Velero wrote the backup.
pub const FERRY_SOURCE_CLUSTER: &str = "ferry.dev/source-cluster";
/// Annotation: the ferry location (bucket + prefix) the object was read from.
pub const FERRY_SOURCE_LOCATION: &str = "ferry.dev/source-location";
/// Annotation: the tenant namespace on the source cluster, kept when a mapping rewrote it.
pub const FERRY_SOURCE_NAMESPACE: &str = "ferry.dev/source-namespace";
/// Annotation: the Velero Backup a NonAdminBackup was materialized for.
pub const FERRY_BACKUP_NAME: &str = "ferry.dev/backup-name";
/// Annotation: the bucket of the location the object was read from (provenance, for retirement).
pub const FERRY_SOURCE_BUCKET: &str = "ferry.dev/source-bucket";
/// Annotation: the prefix of the location the object was read from (provenance, for retirement).
pub const FERRY_SOURCE_PREFIX: &str = "ferry.dev/source-prefix";
/// Annotation: the UID of the backup in `velero-backup.json` (the source cluster's Backup UID).
pub const FERRY_BACKUP_UID: &str = "ferry.dev/backup-uid";
/// Annotation on a mapped NonAdminBackup: `<source ns>=<target ns>`.
pub const FERRY_NAMESPACE_MAPPING: &str = "ferry.dev/namespace-mapping";
/// Annotation on a mapped NonAdminBackup: why NAC's NonAdminRestore cannot restore it and what works instead.
pub const FERRY_RESTORE_HINT: &str = "ferry.dev/restore-hint";

/// Every label and annotation key ferry reads from an object; typed views keep only these.
pub const READ_KEYS: &[&str] = &[
    VELERO_STORAGE_LOCATION,
    VELERO_BACKUP_NAME,
    VELERO_BACKUP_UID,
    OADP,
    MANAGED_BY,
    NAB_ORIGIN_NACUUID,
    NAB_ORIGIN_NAME,
    NAB_ORIGIN_NAMESPACE,
    NAB_SYNCED_FROM_NACUUID,
    NABSL_ORIGIN_NACUUID,
    NABSL_ORIGIN_NAME,
    NABSL_ORIGIN_NAMESPACE,
    FERRY_MANAGED_BY,
    FERRY_SOURCE_CLUSTER,
    FERRY_SOURCE_LOCATION,
    FERRY_SOURCE_NAMESPACE,
    FERRY_BACKUP_NAME,
    FERRY_NAMESPACE_MAPPING,
    FERRY_SOURCE_BUCKET,
    FERRY_SOURCE_PREFIX,
    FERRY_BACKUP_UID,
];
