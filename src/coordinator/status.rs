//! The operator's view (`GetStatus`): per cluster, liveness and counts over its current DesiredSet and the
//! agent's results; per location, health. Pure.

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::cluster::{ClusterRecord, Liveness};
use super::location::LocationState;
use super::settings::Settings;
use crate::grpc::proto::{
    ApplyOutcome, BackupItemStatus, BackupStatus, CatalogObjectError, ClusterStatus, DesiredAction, KindCount,
    LocationStatus,
};

pub fn cluster_status(record: &ClusterRecord, settings: &Settings, now: SystemTime, detail: bool) -> ClusterStatus {
    let liveness = record.liveness(now, settings.heartbeat_interval, settings.stale_after_missed);
    let unix = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let since = record.last_seen.map_or(-1, |t| now.duration_since(t).map_or(0, |d| d.as_secs() as i64));
    let mut status = ClusterStatus {
        cluster: record.name().to_string(),
        connected: liveness != Liveness::Disconnected,
        stale: liveness == Liveness::Stale,
        last_heartbeat_unix: record.last_seen.map_or(0, unix),
        software_version: record.session.as_ref().map(|s| s.software_version.clone()).unwrap_or_default(),
        inventory_items: record.inventory().len() as u64,
        inventory_by_kind: record.counts_by_kind().into_iter().map(|(kind, count)| KindCount { kind, count }).collect(),
        desired_version: record.desired.version.clone(),
        seconds_since_heartbeat: since,
        apis: record.apis.clone(),
        ..Default::default()
    };
    let mut backups: BTreeMap<&str, Vec<BackupItemStatus>> = BTreeMap::new();
    for (index, item) in record.desired.items.iter().enumerate() {
        let action = DesiredAction::try_from(item.action).unwrap_or(DesiredAction::Unspecified);
        let result = record.result(index);
        let outcome = result.map_or(ApplyOutcome::Unspecified, |r| r.outcome);
        match action {
            DesiredAction::Create | DesiredAction::Wait => status.desired += 1,
            DesiredAction::Refuse => {
                status.refused += 1;
                let about_bsl = item.r#ref.as_ref().is_some_and(|r| r.kind == "BackupStorageLocation");
                status.refused_storage_locations += u64::from(about_bsl);
            }
            DesiredAction::Conflict => status.conflicts += 1,
            DesiredAction::Retire => status.retiring += 1,
            DesiredAction::WouldRetire => status.would_retire += 1,
            DesiredAction::Unspecified => {}
        }
        if action == DesiredAction::Wait {
            status.waiting += 1;
        }
        match outcome {
            ApplyOutcome::Applied => status.applied += 1,
            ApplyOutcome::Failed => status.failed += 1,
            ApplyOutcome::Held => status.held += 1,
            ApplyOutcome::Refused => status.agent_refused += 1,
            ApplyOutcome::Conflict => status.conflicts += u64::from(action != DesiredAction::Conflict),
            ApplyOutcome::Unspecified => {}
        }
        if detail {
            let reason = match result {
                Some(result) if !result.message.is_empty() => result.message.to_string(),
                _ if !item.reason.is_empty() => item.reason.clone(),
                _ => item.waits_for_condition.clone(),
            };
            backups.entry(item.backup.as_str()).or_default().push(BackupItemStatus {
                r#ref: item.r#ref.clone(),
                action: item.action,
                reason,
                outcome: outcome as i32,
            });
        }
    }
    status.backups =
        backups.into_iter().map(|(backup, items)| BackupStatus { backup: backup.to_string(), items }).collect();
    status
}

pub fn location_status(location: &LocationState) -> LocationStatus {
    let unix = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let catalog = location.catalog.as_deref();
    let message = match (&location.error, catalog.map(|c| &c.listing)) {
        (Some(error), _) => error.clone(),
        (None, Some(crate::catalog::Listing::Incomplete { reason })) => format!("listing incomplete: {reason}"),
        (None, None) => "not read yet".into(),
        (None, Some(_)) => String::new(),
    };
    LocationStatus {
        name: location.name.clone(),
        source_cluster: location.source_cluster.clone(),
        healthy: location.is_complete(),
        message,
        last_refresh_unix: location.last_refresh.map_or(0, unix),
        backups: catalog.map_or(0, |c| c.backups.len() as u64),
        foreign_folders: catalog.map_or(0, |c| c.foreign_folders.len() as u64),
        errors: catalog
            .map(|c| {
                c.errors
                    .iter()
                    .map(|e| CatalogObjectError { object: e.object.clone(), error: e.error.clone() })
                    .collect()
            })
            .unwrap_or_default(),
        collision: catalog.and_then(|c| c.collision.as_ref()).map(|c| c.reason.clone()).unwrap_or_default(),
        writers: catalog.and_then(|c| c.collision.as_ref()).map(|c| c.writers.clone()).unwrap_or_default(),
        insecure_skip_tls_verify: location.insecure_tls,
        pending: catalog.map_or(0, |c| c.pending.len() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::object_ref;
    use crate::grpc::proto::{DesiredItem, DesiredSet, ItemResult};
    use crate::plan::ClusterState;
    use std::sync::Arc;

    #[test]
    fn counts_and_per_backup_detail() {
        let mut record = ClusterRecord::new(ClusterState {
            name: "b".into(),
            velero_namespace: "velero".into(),
            ..Default::default()
        });
        let item = |action: DesiredAction, kind: &str, name: &str, reason: &str| DesiredItem {
            action: action as i32,
            r#ref: Some(object_ref(kind, "velero", name)),
            backup: "b1".into(),
            reason: reason.into(),
            ..Default::default()
        };
        record.set_desired(Arc::new(
            DesiredSet {
                version: "v".into(),
                items: vec![
                    item(DesiredAction::Create, "Backup", "b1", ""),
                    item(DesiredAction::Wait, "PodVolumeBackup", "p1", ""),
                    item(DesiredAction::Refuse, "Backup", "b2", "tampered ownership"),
                ],
                complete: true,
                ..Default::default()
            }
            .into(),
        ));
        let results = [
            ItemResult { r#ref: Some(object_ref("Backup", "velero", "b1")), outcome: 1, message: String::new() },
            ItemResult {
                r#ref: Some(object_ref("PodVolumeBackup", "velero", "p1")),
                outcome: ApplyOutcome::Held as i32,
                message: "waits for Backup velero/b1".into(),
            },
        ];
        record.record_results("v", &results);
        let s = cluster_status(&record, &Settings::default(), SystemTime::UNIX_EPOCH, true);
        assert_eq!((s.desired, s.applied, s.held, s.refused, s.waiting), (2, 1, 1, 1, 1));
        assert!(!s.connected);
        assert_eq!(s.seconds_since_heartbeat, -1);
        assert_eq!(s.backups.len(), 1);
        let refused = &s.backups[0].items[2];
        assert_eq!(refused.reason, "tampered ownership");
        assert_eq!(s.backups[0].items[1].reason, "waits for Backup velero/b1");
        let brief = cluster_status(&record, &Settings::default(), SystemTime::UNIX_EPOCH, false);
        assert!(brief.backups.is_empty());
    }

    #[test]
    fn a_location_counts_its_foreign_folders_apart_from_its_bad_objects() {
        let location = crate::catalog::Location {
            name: "shared".into(),
            kind: crate::catalog::StoreKind::Local,
            bucket: String::new(),
            prefix: "velero".into(),
            source_cluster: "a".into(),
        };
        let mut catalog = crate::catalog::LocationCatalog::empty(location);
        catalog.foreign_folders.insert("half-written".into());
        let state = LocationState {
            name: "shared".into(),
            source_cluster: "a".into(),
            insecure_tls: false,
            catalog: Some(Arc::new(catalog)),
            error: None,
            last_refresh: Some(SystemTime::UNIX_EPOCH),
        };
        let status = location_status(&state);
        assert_eq!((status.foreign_folders, status.errors.len(), status.healthy), (1, 0, true));
        assert!(status.collision.is_empty() && status.writers.is_empty());
    }
}
