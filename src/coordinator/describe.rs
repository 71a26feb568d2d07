//! One backup everywhere (`DescribeBackup`, `ferry describe backup`): its metadata and PVB file from the first
//! location that holds it, and per cluster the objects of it there and its items in the cluster's DesiredSet
//! with the agent's outcomes. Pure; the rpc (from the hub's records) and the offline command (from recorded
//! inventories and a fresh plan) both build their answer here, so they cannot disagree.

use std::collections::BTreeSet;

use serde_json::Value;

use super::cluster::{AgentResult, Liveness};
use super::held_set::HeldSet;
use crate::catalog::{BackupFile, CatalogBackup, Layout, LocationCatalog};
use crate::grpc::proto::{
    ApplyOutcome, CatalogObjectError, DescribeBackupResponse, DescribedBackup, DescribedCluster,
    DescribedClusterBackup, DescribedClusterPodVolumeBackup, DescribedItem, DescribedLocation, DescribedNonAdminBackup,
    DescribedOwner, DescribedPodVolumeBackup, DesiredItem,
};
use crate::model::labels;
use crate::model::names::velero_label_value;
use crate::model::ownership::is_ferry_managed;
use crate::model::{Backup, Inventory, NonAdminBackup, Object, PodVolumeBackup};
use crate::resolve::{Owner, owner_of};

/// No location and no cluster knows a backup of that name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backup {0:?} is in no location's catalog and on no cluster")]
pub struct UnknownBackup(pub String);

/// What one cluster's records hold, as the hub keeps them (or as a recorded inventory and a fresh plan give
/// them). Only what of the cluster's inventory concerns the backup is described.
pub struct ClusterRecords<'a> {
    pub cluster: &'a str,
    /// `connected`, `stale`, `disconnected`, or `recorded` (an inventory file).
    pub state: &'a str,
    pub inventory: &'a Inventory,
    pub desired: &'a HeldSet,
    /// The agent's results by the position of their item in `desired` (empty: none).
    pub results: &'a [Option<AgentResult>],
}

/// How a cluster's liveness reads in a description.
pub fn liveness_name(liveness: Liveness) -> &'static str {
    match liveness {
        Liveness::Live => "connected",
        Liveness::Stale => "stale",
        Liveness::Disconnected => "disconnected",
    }
}

/// Describes backup `name` from the catalogs (config order: the first that holds it is the one clusters get
/// it from) and every cluster's records. Clusters that hold nothing of it and plan nothing for it are left out.
pub fn describe_backup<L: AsRef<LocationCatalog>>(
    name: &str,
    catalogs: &[L],
    clusters: &[ClusterRecords<'_>],
) -> Result<DescribeBackupResponse, UnknownBackup> {
    let catalogs: Vec<&LocationCatalog> = catalogs.iter().map(AsRef::as_ref).collect();
    let holding: Vec<(&LocationCatalog, &CatalogBackup)> =
        catalogs.iter().filter_map(|c| c.backups.get(name).map(|b| (*c, &**b))).collect();
    let subject = Subject::new(name, holding.iter().map(|(_, b)| *b));
    let bucket_errors: Vec<CatalogObjectError> = catalogs
        .iter()
        .flat_map(|c| {
            let dir = Layout::new(&c.location.prefix).backup_dir(name);
            c.errors.iter().filter(move |e| e.object.starts_with(&dir))
        })
        .map(|e| CatalogObjectError { object: e.object.clone(), error: e.error.clone() })
        .collect();
    let mut described: Vec<DescribedCluster> =
        clusters.iter().map(|c| describe_cluster(&subject, c)).filter(|c| !is_empty(c)).collect();
    described.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    if holding.is_empty() && bucket_errors.is_empty() && described.is_empty() {
        return Err(UnknownBackup(name.to_string()));
    }
    Ok(DescribeBackupResponse {
        caller: String::new(),
        name: name.to_string(),
        bucket: (!holding.is_empty()).then(|| describe_bucket_backup(&holding)),
        bucket_errors,
        clusters: described,
    })
}

/// What identifies the backup's objects on a cluster.
struct Subject {
    name: String,
    /// `velero.io/backup-name` as Velero writes it for this name (cut and hashed past 63 characters).
    label_value: String,
    /// The entries of its PVB file(s): a PVB of that name belongs here even when labelled for another backup
    /// (the planner reports that as a conflict).
    pvb_names: BTreeSet<String>,
}

impl Subject {
    fn new<'a>(name: &str, entries: impl Iterator<Item = &'a CatalogBackup>) -> Self {
        let pvb_names = entries.flat_map(|e| e.pod_volume_backups.names().map(str::to_string)).collect();
        Self { name: name.to_string(), label_value: velero_label_value(name), pvb_names }
    }

    fn owns_pod_volume_backup(&self, pvb: &Object<PodVolumeBackup>) -> bool {
        pvb.meta().label(labels::VELERO_BACKUP_NAME) == Some(self.label_value.as_str())
            || self.pvb_names.contains(pvb.name())
    }

    /// A NAB refers to a NAC backup by NACUUID, which is also the backup's name; ferry's NABs also say it.
    fn refers(&self, nab: &Object<NonAdminBackup>) -> bool {
        let name = Some(self.name.as_str());
        nab.view.nacuuid() == name
            || nab.meta().annotation(labels::FERRY_BACKUP_NAME) == name
            || nab.view.status.velero_backup.as_ref().map(|v| v.name.as_str()) == name
    }
}

fn describe_bucket_backup(holding: &[(&LocationCatalog, &CatalogBackup)]) -> DescribedBackup {
    let locations = holding
        .iter()
        .map(|(catalog, _)| DescribedLocation {
            name: catalog.location.name.clone(),
            source_cluster: catalog.location.source_cluster.clone(),
            metadata_key: Layout::new(&catalog.location.prefix).key(&holding[0].1.name, BackupFile::Metadata),
            collision: catalog.collision.as_ref().map(|c| c.reason.clone()).unwrap_or_default(),
        })
        .collect();
    let (catalog, entry) = holding[0];
    let backup = &entry.backup;
    let raw = backup.to_value();
    let status = &backup.view.status;
    let owner = match owner_of(backup) {
        Ok(Owner::Admin) => DescribedOwner { kind: "admin".into(), ..Default::default() },
        Ok(Owner::Tenant(t)) => DescribedOwner {
            kind: "tenant".into(),
            origin_namespace: t.origin_namespace,
            origin_name: t.origin_name,
            nacuuid: t.nacuuid,
            refusal: String::new(),
        },
        Err(refusal) => DescribedOwner { kind: "refused".into(), refusal: refusal.0, ..Default::default() },
    };
    let pod_volume_backups_key = match entry.pod_volume_backups_version {
        Some(_) => Layout::new(&catalog.location.prefix).key(&entry.name, BackupFile::PodVolumeBackups),
        None => String::new(),
    };
    DescribedBackup {
        locations,
        source_cluster: catalog.location.source_cluster.clone(),
        phase: status.phase.as_str().to_string(),
        start_timestamp: text(&raw, "/status/startTimestamp"),
        completion_timestamp: status.completion_timestamp.as_deref().unwrap_or_default().to_string(),
        expiration: status.expiration.as_deref().unwrap_or_default().to_string(),
        owner: Some(owner),
        included_namespaces: backup.view.spec.included_namespaces.to_vec(),
        storage_location: backup.view.spec.storage_location.clone(),
        pod_volume_backups: entry.pod_volume_backups.objects().iter().map(describe_file_pod_volume_backup).collect(),
        pod_volume_backups_key,
        pod_volume_backups_error: entry.pod_volume_backups_error.clone().unwrap_or_default(),
        // Read on demand by the caller (`coordinator::legacy_volumes`): assembling a description does no IO.
        legacy_volume_backups: Vec::new(),
        legacy_volume_backups_error: String::new(),
    }
}

fn describe_file_pod_volume_backup(pvb: &Object<PodVolumeBackup>) -> DescribedPodVolumeBackup {
    let raw = pvb.to_value();
    let view = &pvb.view;
    DescribedPodVolumeBackup {
        name: pvb.name().to_string(),
        pod_namespace: view.spec.pod.namespace.clone(),
        pod_name: view.spec.pod.name.clone(),
        volume: view.spec.volume.clone(),
        // Velero writes `snapshotID`, which the typed view does not read.
        snapshot_id: text(&raw, "/status/snapshotID"),
        phase: view.status.phase.clone(),
        total_bytes: raw.pointer("/status/progress/totalBytes").and_then(Value::as_u64),
        bytes_done: raw.pointer("/status/progress/bytesDone").and_then(Value::as_u64),
        uploader_type: text(&raw, "/spec/uploaderType"),
    }
}

fn describe_cluster(subject: &Subject, records: &ClusterRecords<'_>) -> DescribedCluster {
    let mut described = DescribedCluster {
        cluster: records.cluster.to_string(),
        state: records.state.to_string(),
        desired_version: records.desired.version.clone(),
        ..Default::default()
    };
    let inventory = records.inventory;
    described.backups = inventory.backups.iter().filter(|b| b.name() == subject.name).map(cluster_backup).collect();
    described.pod_volume_backups = inventory
        .pod_volume_backups
        .iter()
        .filter(|p| subject.owns_pod_volume_backup(p))
        .map(cluster_pod_volume_backup)
        .collect();
    described.non_admin_backups =
        inventory.non_admin_backups.iter().filter(|n| subject.refers(n)).map(cluster_non_admin_backup).collect();
    described.backups.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    described.pod_volume_backups.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    described.non_admin_backups.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    described.planned = records
        .desired
        .items
        .iter()
        .enumerate()
        .filter(|(_, i)| i.backup == subject.name)
        .map(|(index, i)| planned_item(i, records.results.get(index).and_then(Option::as_ref)))
        .collect();
    described
}

fn is_empty(c: &DescribedCluster) -> bool {
    c.backups.is_empty() && c.pod_volume_backups.is_empty() && c.non_admin_backups.is_empty() && c.planned.is_empty()
}

fn cluster_backup(backup: &Object<Backup>) -> DescribedClusterBackup {
    DescribedClusterBackup {
        namespace: backup.namespace().to_string(),
        name: backup.name().to_string(),
        uid: backup.meta().uid.clone().unwrap_or_default(),
        storage_location: backup.view.spec.storage_location.clone(),
        phase: backup.view.status.phase.as_str().to_string(),
        managed_by_ferry: is_ferry_managed(&backup.meta().labels),
    }
}

fn cluster_pod_volume_backup(pvb: &Object<PodVolumeBackup>) -> DescribedClusterPodVolumeBackup {
    let label = |key| pvb.meta().label(key).unwrap_or_default().to_string();
    DescribedClusterPodVolumeBackup {
        namespace: pvb.namespace().to_string(),
        name: pvb.name().to_string(),
        backup_label: label(labels::VELERO_BACKUP_NAME),
        backup_uid_label: label(labels::VELERO_BACKUP_UID),
        phase: pvb.view.status.phase.clone(),
        managed_by_ferry: is_ferry_managed(&pvb.meta().labels),
    }
}

fn cluster_non_admin_backup(nab: &Object<NonAdminBackup>) -> DescribedNonAdminBackup {
    DescribedNonAdminBackup {
        namespace: nab.namespace().to_string(),
        name: nab.name().to_string(),
        nacuuid: nab.view.nacuuid().unwrap_or_default().to_string(),
        phase: nab.view.status.phase.clone(),
        velero_backup: nab.view.status.velero_backup.as_ref().map(|v| v.name.clone()).unwrap_or_default(),
        managed_by_ferry: is_ferry_managed(&nab.meta().labels),
    }
}

fn planned_item(item: &DesiredItem, result: Option<&AgentResult>) -> DescribedItem {
    let (outcome, message) =
        result.map_or((ApplyOutcome::Unspecified, String::new()), |r| (r.outcome, r.message.to_string()));
    DescribedItem {
        // Kept as the number: a value newer than this build still reaches the operator.
        action: item.action,
        r#ref: item.r#ref.clone(),
        reason: item.reason.clone(),
        waits_for: item.waits_for.clone(),
        waits_for_condition: item.waits_for_condition.clone(),
        outcome: outcome as i32,
        message,
    }
}

fn text(raw: &Value, pointer: &str) -> String {
    raw.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::SystemTime;

    use serde_json::{Value, json};

    use super::*;
    use crate::catalog::{CatalogBackup, Listing, Location, ObjectVersion, PodVolumeBackupFile, StoreKind};
    use crate::fixture::{nac_backup_json, nac_object_uuid, pod_volume_backup_json};
    use crate::grpc::convert::{desired_set, object_ref};
    use crate::grpc::proto::DesiredAction;
    use crate::model::{BackupPhase, Inventory};
    use crate::plan::{ClusterState, PlanOptions, plan_cluster};
    use crate::resolve::{NamespaceMapping, NamespaceMappings, ProtectedNamespaces};

    const NS: &str = "velero";

    fn location() -> Location {
        Location {
            name: "shared".into(),
            kind: StoreKind::S3,
            bucket: "velero-backups".into(),
            prefix: "velero".into(),
            source_cluster: "a".into(),
        }
    }

    fn entry(backup: Value, pvbs: Vec<Value>) -> Arc<CatalogBackup> {
        let backup = Object::from_value(backup).expect("backup");
        let version = ObjectVersion::new(Some("e"), 1, 0);
        let pvbs: Vec<Object<PodVolumeBackup>> =
            pvbs.into_iter().map(|p| Object::from_value(p).expect("pvb")).collect();
        Arc::new(CatalogBackup {
            name: backup.name().to_string(),
            backup,
            pod_volume_backups: PodVolumeBackupFile::from_objects(&pvbs),
            metadata_version: version.clone(),
            pod_volume_backups_version: Some(version),
            pod_volume_backups_error: None,
            has_resource_list: false,
        })
    }

    fn cluster(name: &str, docs: Vec<Value>) -> ClusterState {
        let bsl = json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
            "metadata": {"name": "dr-bsl", "namespace": NS},
            "spec": {"provider": "aws", "accessMode": "ReadOnly",
                "objectStorage": {"bucket": "velero-backups", "prefix": "velero"}}});
        let mut inventory = Inventory::default();
        inventory.add_document(json!({"kind": "List", "items": [bsl]})).expect("bsl");
        inventory.add_document(json!({"kind": "List", "items": docs})).expect("inventory");
        ClusterState {
            name: name.into(),
            velero_namespace: NS.into(),
            inventory,
            granted_locations: ["shared".to_string()].into(),
            ..Default::default()
        }
    }

    fn mappings() -> NamespaceMappings {
        let to = |cluster: &str| NamespaceMapping {
            from: "a".into(),
            to: cluster.into(),
            namespaces: BTreeMap::from([("team-x".into(), "team-x-dr".into())]),
            prefix: None,
        };
        NamespaceMappings::new(vec![to("b"), to("c")], ProtectedNamespaces::default()).expect("mappings")
    }

    /// Backup T (tenant team-x, two PVBs): materialized on b by ferry (Backup CR, PVBs, NAB attached by NAC),
    /// planned on c where team-x-dr does not exist. Backup R has tampered NAC marks.
    #[test]
    fn a_tenant_backup_on_two_clusters_and_a_refused_one() {
        let tenant = nac_object_uuid("team-x", "nightly", "1483357a-89a1-436b-8e7a-8a577c1b49f4");
        let source = nac_backup_json("team-x", "nightly", &tenant, BackupPhase::Completed);
        let source_uid = source["metadata"]["uid"].as_str().expect("uid").to_string();
        let pvbs: Vec<Value> = (0..2).map(|i| pod_volume_backup_json(&tenant, &source_uid, "team-x", i)).collect();
        let pvb_names: Vec<String> = pvbs.iter().map(|p| p["metadata"]["name"].as_str().unwrap().into()).collect();
        let refused = nac_object_uuid("team-a", "stolen", "0b7c1e2a-5d4f-4e3a-9c8b-7a6f5e4d3c2b");
        let mut tampered = nac_backup_json("team-a", "stolen", &refused, BackupPhase::Completed);
        tampered["spec"]["includedNamespaces"] = json!(["team-b"]);
        let mut catalog = LocationCatalog::empty(location());
        catalog.backups = [entry(source.clone(), pvbs.clone()), entry(tampered, Vec::new())]
            .into_iter()
            .map(|e| (e.name.clone(), e))
            .collect();
        catalog.listing = Listing::Complete;
        let catalogs = vec![catalog];

        let ferry_labels = json!({labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE});
        let mut on_b = vec![json!({"kind": "Namespace", "metadata": {"name": "team-x-dr"}})];
        let mut backup_b = source.clone();
        backup_b["metadata"]["namespace"] = json!(NS);
        backup_b["metadata"]["uid"] = json!("uid-on-b");
        backup_b["metadata"]["labels"][labels::FERRY_MANAGED_BY] = json!(labels::FERRY_MANAGED_BY_VALUE);
        backup_b["metadata"]["annotations"][labels::NAB_ORIGIN_NAMESPACE] = json!("team-x-dr");
        backup_b["spec"]["storageLocation"] = json!("dr-bsl");
        backup_b["kind"] = json!("Backup");
        on_b.push(backup_b);
        for pvb in &pvbs {
            let mut pvb = pvb.clone();
            pvb["kind"] = json!("PodVolumeBackup");
            pvb["metadata"]["namespace"] = json!(NS);
            pvb["metadata"]["labels"][labels::VELERO_BACKUP_UID] = json!("uid-on-b");
            pvb["metadata"]["labels"][labels::FERRY_MANAGED_BY] = json!(labels::FERRY_MANAGED_BY_VALUE);
            on_b.push(pvb);
        }
        on_b.push(json!({"kind": "NonAdminBackup",
            "metadata": {"name": "nightly", "namespace": "team-x-dr", "labels": ferry_labels.clone()},
            "status": {"phase": "Created", "veleroBackup": {"nacuuid": tenant, "name": tenant, "namespace": NS}}}));
        // Someone else's NAB elsewhere: not this backup's.
        on_b.push(json!({"kind": "NonAdminBackup", "metadata": {"name": "weekly", "namespace": "team-c"}}));
        let b = cluster("b", on_b);
        let c = cluster("c", vec![json!({"kind": "Namespace", "metadata": {"name": "team-x"}})]);

        let options =
            PlanOptions { materialize_velero_backups: true, now: SystemTime::UNIX_EPOCH, ..Default::default() };
        let desired_b = HeldSet::from(desired_set(&plan_cluster(&catalogs, &b, &mappings(), &options), true));
        let desired_c = HeldSet::from(desired_set(&plan_cluster(&catalogs, &c, &mappings(), &options), true));
        // c's agent holds the NAB until its namespace exists, and says so.
        let nab_ref = object_ref("NonAdminBackup", "team-x-dr", "nightly");
        let mut results_c = vec![None; desired_c.items.len()];
        let nab_at =
            desired_c.items.iter().position(|i| i.r#ref.as_ref() == Some(&nab_ref)).expect("the NAB is planned");
        results_c[nab_at] =
            Some(AgentResult { outcome: ApplyOutcome::Held, message: "waits for Namespace team-x-dr".into() });
        let records = vec![
            ClusterRecords {
                cluster: "c",
                state: "disconnected",
                inventory: &c.inventory,
                desired: &desired_c,
                results: &results_c,
            },
            ClusterRecords {
                cluster: "b",
                state: "connected",
                inventory: &b.inventory,
                desired: &desired_b,
                results: &[],
            },
        ];

        let d = describe_backup(&tenant, &catalogs, &records).expect("known");
        let bucket = d.bucket.as_ref().expect("in the bucket");
        assert_eq!(bucket.locations.len(), 1);
        assert_eq!(bucket.locations[0].metadata_key, format!("velero/backups/{tenant}/velero-backup.json"));
        assert_eq!((bucket.source_cluster.as_str(), bucket.phase.as_str()), ("a", "Completed"));
        assert_eq!(bucket.start_timestamp, source["status"]["startTimestamp"].as_str().unwrap());
        assert_eq!(bucket.expiration, source["status"]["expiration"].as_str().unwrap());
        let owner = bucket.owner.as_ref().expect("owner");
        assert_eq!(
            (owner.kind.as_str(), owner.origin_namespace.as_str(), owner.origin_name.as_str(), owner.nacuuid.as_str()),
            ("tenant", "team-x", "nightly", tenant.as_str())
        );
        assert_eq!(bucket.included_namespaces, ["team-x"]);
        assert_eq!(bucket.storage_location, "default");
        assert_eq!(bucket.pod_volume_backups_key, format!("velero/backups/{tenant}/{tenant}-podvolumebackups.json.gz"));
        assert_eq!(bucket.pod_volume_backups_error, "");
        let names: Vec<&str> = bucket.pod_volume_backups.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, pvb_names);
        let first = &bucket.pod_volume_backups[0];
        assert_eq!((first.pod_namespace.as_str(), first.volume.as_str()), ("team-x", "data"));
        assert_eq!(first.pod_name, pvbs[0]["spec"]["pod"]["name"].as_str().unwrap());
        assert_eq!(first.snapshot_id, pvbs[0]["status"]["snapshotID"].as_str().unwrap());
        assert_eq!(first.total_bytes, pvbs[0]["status"]["progress"]["totalBytes"].as_u64());
        assert!(first.total_bytes.is_some());
        assert_eq!(first.uploader_type, "kopia");

        // Clusters by name, whatever order the records came in.
        let clusters: Vec<(&str, &str)> = d.clusters.iter().map(|c| (c.cluster.as_str(), c.state.as_str())).collect();
        assert_eq!(clusters, [("b", "connected"), ("c", "disconnected")]);

        let on_b = &d.clusters[0];
        assert_eq!(on_b.desired_version, desired_b.version);
        assert_eq!(on_b.backups.len(), 1);
        let cr = &on_b.backups[0];
        assert_eq!(
            (cr.namespace.as_str(), cr.name.as_str(), cr.uid.as_str(), cr.storage_location.as_str()),
            (NS, tenant.as_str(), "uid-on-b", "dr-bsl")
        );
        assert!(cr.managed_by_ferry);
        let mut pvbs_b: Vec<(&str, &str, &str, bool)> = on_b
            .pod_volume_backups
            .iter()
            .map(|p| (p.name.as_str(), p.backup_label.as_str(), p.backup_uid_label.as_str(), p.managed_by_ferry))
            .collect();
        pvbs_b.sort();
        let mut expected: Vec<(&str, &str, &str, bool)> =
            pvb_names.iter().map(|n| (n.as_str(), tenant.as_str(), "uid-on-b", true)).collect();
        expected.sort();
        assert_eq!(pvbs_b, expected);
        assert_eq!(on_b.non_admin_backups.len(), 1, "team-c/weekly refers to another backup");
        let nab = &on_b.non_admin_backups[0];
        assert_eq!(
            (nab.namespace.as_str(), nab.name.as_str(), nab.nacuuid.as_str(), nab.phase.as_str()),
            ("team-x-dr", "nightly", tenant.as_str(), "Created")
        );
        assert_eq!(nab.velero_backup, tenant);
        assert!(nab.managed_by_ferry);
        assert!(on_b.planned.is_empty(), "converged: nothing left to do there");

        // On c nothing exists; the NAB waits for its namespace, and the Backup and PVBs with it (GC coupling).
        let on_c = &d.clusters[1];
        assert!(on_c.backups.is_empty() && on_c.pod_volume_backups.is_empty() && on_c.non_admin_backups.is_empty());
        assert_eq!(on_c.desired_version, desired_c.version);
        assert_eq!(on_c.planned.len(), 1, "{:?}", on_c.planned);
        let nab_c = &on_c.planned[0];
        assert_eq!(nab_c.action, DesiredAction::Wait as i32);
        assert_eq!(nab_c.r#ref, Some(nab_ref));
        assert_eq!(nab_c.waits_for, [object_ref("Namespace", "", "team-x-dr")]);
        assert!(nab_c.reason.contains("ferry never creates tenant namespaces"), "{}", nab_c.reason);
        assert_eq!(nab_c.outcome, ApplyOutcome::Held as i32);
        assert_eq!(nab_c.message, "waits for Namespace team-x-dr");

        // The refused backup: its owner says why, and so does the cluster's item.
        let r = describe_backup(&refused, &catalogs, &records).expect("known");
        let owner = r.bucket.as_ref().and_then(|b| b.owner.as_ref()).expect("owner");
        assert_eq!(owner.kind, "refused");
        assert!(owner.refusal.starts_with("owner namespace \"team-a\" but spec.includedNamespaces is [\"team-b\"]"));
        let on_b = r.clusters.iter().find(|c| c.cluster == "b").expect("b plans it");
        assert_eq!(on_b.planned.len(), 1);
        assert_eq!(on_b.planned[0].action, DesiredAction::Refuse as i32);
        assert_eq!(on_b.planned[0].r#ref, Some(object_ref("Backup", NS, &refused)));
        assert_eq!(on_b.planned[0].reason, owner.refusal);

        // A name nothing knows.
        assert_eq!(describe_backup("nope", &catalogs, &records), Err(UnknownBackup("nope".into())));
    }
}
