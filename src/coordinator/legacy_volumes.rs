//! Legacy volume backups in a description: a backup without a PVB file predates them, and
//! its volume backups are its Pods' `snapshot.velero.io/<volume>` annotations inside its tarball. The tarball
//! is read on demand, for the one backup described (never while planning), by the coordinator's rpc and by
//! `ferry describe backup --config` alike.

use crate::bucket::{FetchError, Loader};
use crate::grpc::proto::{DescribeBackupResponse, DescribedLegacyVolumeBackup};

/// Fills `described`'s legacy volume backups from the tarball in the location it was described from, when it
/// has no PVB file. A tarball that cannot be read is reported in `legacy_volume_backups_error`, never fatal.
pub async fn add_legacy_volume_backups(described: &mut DescribeBackupResponse, loaders: &[Loader]) {
    let Some(bucket) = described.bucket.as_mut() else { return };
    if !bucket.pod_volume_backups_key.is_empty() {
        return;
    }
    let Some(location) = bucket.locations.first() else { return };
    let Some(loader) = loaders.iter().find(|l| l.location().name == location.name) else { return };
    match loader.legacy_volume_backups(&described.name).await {
        Ok(found) => {
            bucket.legacy_volume_backups = found
                .volume_backups
                .into_iter()
                .map(|v| DescribedLegacyVolumeBackup {
                    pod_namespace: v.pod_namespace,
                    pod_name: v.pod_name,
                    volume: v.volume,
                    snapshot_id: v.snapshot_id,
                    source: v.source.as_str().to_string(),
                })
                .collect();
            bucket.legacy_volume_backups_error =
                found.errors.iter().map(|e| format!("{}: {}", e.path, e.error)).collect::<Vec<_>>().join("; ");
        }
        // No tarball (a backup that failed before writing one): nothing to show, and nothing wrong to report.
        Err(FetchError::Read(object_store::Error::NotFound { .. })) => {}
        Err(e) => bucket.legacy_volume_backups_error = format!("tarball not read: {e}"),
    }
}
