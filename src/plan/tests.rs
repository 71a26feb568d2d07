//! Table tests: one case or table per rule of docs/design.md §3, on hand-built objects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;
use crate::catalog::{
    CatalogBackup, Listing, Location, LocationCatalog, ObjectVersion, PodVolumeBackupFile, StoreKind,
};
use crate::model::{BackupPhase, Inventory, Object, labels};
use crate::resolve::{NamespaceMapping, NamespaceMappings, ProtectedNamespaces};

const NACUUID: &str = "team-a-nightly-0b4c6e1a-1d2f-4c4b-9a57-1f2e3d4c5b6a";

pub(super) fn location() -> Location {
    Location {
        name: "shared".into(),
        kind: StoreKind::S3,
        bucket: "velero-backups".into(),
        prefix: "velero".into(),
        source_cluster: "cluster-a".into(),
    }
}

pub(super) fn bsl(name: &str, prefix: &str) -> Value {
    json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": name, "namespace": "velero"},
        "spec": {"provider": "aws", "accessMode": "ReadOnly", "objectStorage": {"bucket": "velero-backups", "prefix": prefix}}})
}

pub(super) fn admin_backup(name: &str, phase: &str) -> Value {
    json!({"apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": name, "namespace": "openshift-adp", "uid": "src-uid", "resourceVersion": "42",
            "labels": {"velero.io/storage-location": "default", "velero.io/schedule-name": "daily"},
            "ownerReferences": [{"apiVersion": "velero.io/v1", "kind": "Schedule", "name": "daily", "uid": "sched-uid"}]},
        "spec": {"includedNamespaces": ["*"], "storageLocation": "default", "ttl": "720h0m0s"},
        "status": {"phase": phase, "expiration": "2026-12-01T00:00:00Z"}})
}

fn nac_backup(phase: &str) -> Value {
    json!({"apiVersion": "velero.io/v1", "kind": "Backup",
        "metadata": {"name": NACUUID, "namespace": "openshift-adp", "uid": "src-uid",
            "labels": {"openshift.io/oadp": "True", "app.kubernetes.io/managed-by": "oadp-nac-controller",
                "openshift.io/oadp-nab-origin-nacuuid": NACUUID, "velero.io/storage-location": "default"},
            "annotations": {"openshift.io/oadp-nab-origin-name": "nightly",
                "openshift.io/oadp-nab-origin-namespace": "team-a"}},
        "spec": {"includedNamespaces": ["team-a"], "storageLocation": "default", "excludedResources": ["nonadminbackups"]},
        "status": {"phase": phase}})
}

/// A Completed NAC backup of team-a's `nightly`, with one PVB.
pub(super) fn nac_entry() -> Arc<CatalogBackup> {
    entry(nac_backup("Completed"), 1)
}

pub(super) fn pvb(backup: &str, i: usize) -> Value {
    json!({"metadata": {"name": format!("{backup}-pvb{i}"), "namespace": "openshift-adp", "uid": "src-pvb",
            "labels": {"velero.io/backup-name": backup, "velero.io/backup-uid": "src-uid"},
            "ownerReferences": [{"apiVersion": "velero.io/v1", "kind": "Backup", "name": backup, "uid": "src-uid", "controller": true}]},
        "spec": {"pod": {"kind": "Pod", "namespace": "team-a", "name": "app-0"}, "volume": "data",
            "backupStorageLocation": "default"},
        "status": {"phase": "Completed", "snapshotID": "abc"}})
}

pub(super) fn entry(backup: Value, pvbs: usize) -> Arc<CatalogBackup> {
    let name = backup["metadata"]["name"].as_str().unwrap().to_string();
    entry_with_pvbs(backup, (0..pvbs).map(|i| pvb(&name, i)).collect())
}

pub(super) fn entry_with_pvbs(backup: Value, pvbs: Vec<Value>) -> Arc<CatalogBackup> {
    let backup = Object::from_value(backup).unwrap();
    let name = backup.name().to_string();
    let version = ObjectVersion::new(Some("e"), 1, 0);
    Arc::new(CatalogBackup {
        pod_volume_backups: PodVolumeBackupFile::from_objects(
            &pvbs.into_iter().map(|p| Object::from_value(p).unwrap()).collect::<Vec<_>>(),
        ),
        name,
        backup,
        metadata_version: version.clone(),
        pod_volume_backups_version: Some(version),
        pod_volume_backups_error: None,
        has_resource_list: false,
    })
}

pub(super) fn catalog(entries: Vec<Arc<CatalogBackup>>) -> Vec<LocationCatalog> {
    let mut c = LocationCatalog::empty(location());
    c.backups = entries.into_iter().map(|e| (e.name.clone(), e)).collect();
    c.listing = Listing::Complete;
    vec![c]
}

pub(super) fn inventory(docs: Vec<Value>) -> Inventory {
    let mut inv = Inventory::default();
    inv.add_document(json!({"kind": "List", "items": docs})).unwrap();
    inv
}

pub(super) fn cluster(docs: Vec<Value>) -> ClusterState {
    ClusterState {
        name: "cluster-b".into(),
        velero_namespace: "velero".into(),
        inventory: inventory(docs),
        granted_locations: ["shared".to_string()].into(),
        ..Default::default()
    }
}

pub(super) fn ns(name: &str) -> Value {
    json!({"kind": "Namespace", "metadata": {"name": name}})
}

pub(super) fn identity() -> NamespaceMappings {
    NamespaceMappings::new(vec![], ProtectedNamespaces::default()).unwrap()
}

pub(super) fn mapped() -> NamespaceMappings {
    let m = NamespaceMapping {
        from: "cluster-a".into(),
        to: "cluster-b".into(),
        namespaces: BTreeMap::from([("team-a".into(), "team-a-dr".into())]),
        prefix: None,
    };
    NamespaceMappings::new(vec![m], ProtectedNamespaces::default()).unwrap()
}

pub(super) fn now() -> SystemTime {
    humantime::parse_rfc3339("2026-11-15T00:00:00Z").unwrap()
}

fn run(entries: Vec<Arc<CatalogBackup>>, cluster: &ClusterState, mappings: &NamespaceMappings) -> Vec<PlanItem> {
    let options = PlanOptions { materialize_velero_backups: true, now: now(), ..Default::default() };
    plan_cluster(&catalog(entries), cluster, mappings, &options).items
}

fn summary(items: &[PlanItem]) -> Vec<(Action, &str, &str, &str)> {
    items.iter().map(|i| (i.action, i.kind.as_str(), i.namespace.as_str(), i.name.as_str())).collect()
}

fn backup_cr(uid: &str, from: Value) -> Value {
    let mut b = from;
    b["metadata"]["namespace"] = "velero".into();
    b["metadata"]["uid"] = uid.into();
    b["spec"]["storageLocation"] = "b-bsl".into();
    b
}

// === Rule 1: Velero Backup CR ===

#[test]
fn rule1_backup_cr_is_bound_to_the_targets_bsl() {
    let t = cluster(vec![bsl("b-bsl", "velero")]);
    let items = run(vec![entry(admin_backup("daily-1", "Completed"), 0)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Create, "Backup", "velero", "daily-1")]);
    let obj = items[0].object.as_ref().unwrap();
    assert_eq!(obj["spec"]["storageLocation"], "b-bsl");
    assert_eq!(obj["metadata"]["labels"][labels::VELERO_STORAGE_LOCATION], "b-bsl");
    assert_eq!(obj["metadata"]["labels"][labels::FERRY_MANAGED_BY], "ferry");
    assert_eq!(obj["metadata"]["labels"][labels::VELERO_SCHEDULE_NAME], "daily");
    assert_eq!(obj["metadata"]["namespace"], "velero");
    assert_eq!(obj["metadata"]["annotations"][labels::FERRY_SOURCE_CLUSTER], "cluster-a");
    for gone in ["uid", "resourceVersion", "ownerReferences"] {
        assert!(obj["metadata"].get(gone).is_none(), "{gone} kept");
    }
    assert_eq!(obj["spec"]["ttl"], "720h0m0s", "unmodelled fields are kept");
    assert_eq!(obj["status"]["phase"], "Completed");
}

#[test]
fn rule1_existing_backups_are_left_alone() {
    let synced = backup_cr("b-uid", admin_backup("daily-1", "Completed"));
    let t = cluster(vec![bsl("b-bsl", "velero"), synced]);
    assert!(run(vec![entry(admin_backup("daily-1", "Completed"), 0)], &t, &identity()).is_empty());

    let mut foreign = backup_cr("b-uid", admin_backup("daily-1", "Completed"));
    foreign["spec"]["storageLocation"] = "local".into();
    let t = cluster(vec![bsl("b-bsl", "velero"), foreign]);
    let items = run(vec![entry(admin_backup("daily-1", "Completed"), 1)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Conflict, "Backup", "velero", "daily-1")]);
    assert!(items[0].reason.as_ref().unwrap().contains("local"));
}

#[test]
fn rule1_optional_waits_for_velero_sync() {
    let t = cluster(vec![bsl("b-bsl", "velero")]);
    let options = PlanOptions { materialize_velero_backups: false, now: now(), ..Default::default() };
    let items = plan_cluster(&catalog(vec![entry(admin_backup("d", "Completed"), 1)]), &t, &identity(), &options).items;
    assert_eq!(items.iter().map(|i| i.action).collect::<Vec<_>>(), [Action::Wait, Action::Wait]);
    assert!(items[0].waits_for.as_ref().unwrap().to_string().contains("Velero's backup sync"));
}

#[test]
fn rule1_long_bsl_names_get_veleros_label_value() {
    let long = "b".repeat(70);
    let t = cluster(vec![bsl(&long, "velero")]);
    let items = run(vec![entry(admin_backup("d", "Completed"), 0)], &t, &identity());
    let label = items[0].object.as_ref().unwrap()["metadata"]["labels"][labels::VELERO_STORAGE_LOCATION].clone();
    assert_eq!(label.as_str().unwrap().len(), 63);
}

#[test]
fn a_target_reads_a_location_only_through_a_matching_bsl() {
    let backups = || vec![entry(admin_backup("d", "Completed"), 0)];
    assert!(run(backups(), &cluster(vec![]), &identity()).is_empty(), "no BSL");
    assert!(run(backups(), &cluster(vec![bsl("x", "other")]), &identity()).is_empty(), "other prefix");
    let mut gcp = bsl("x", "velero");
    gcp["spec"]["provider"] = "gcp".into();
    assert!(run(backups(), &cluster(vec![gcp]), &identity()).is_empty(), "other provider");
    let mut other_ns = bsl("x", "velero");
    other_ns["metadata"]["namespace"] = "elsewhere".into();
    assert!(run(backups(), &cluster(vec![other_ns]), &identity()).is_empty(), "BSL outside the Velero namespace");

    // Two BSLs on the location: the default one wins; config can name one explicitly.
    let mut default = bsl("zz-default", "/velero/");
    default["spec"]["default"] = true.into();
    let t = cluster(vec![bsl("aa", "velero"), default]);
    let items = run(backups(), &t, &identity());
    assert_eq!(items[0].object.as_ref().unwrap()["spec"]["storageLocation"], "zz-default");
    let mut named = t.clone();
    named.storage_locations.insert("shared".into(), "aa".into());
    assert_eq!(run(backups(), &named, &identity())[0].object.as_ref().unwrap()["spec"]["storageLocation"], "aa");
    named.storage_locations.insert("shared".into(), "missing".into());
    let items = run(backups(), &named, &identity());
    assert_eq!(summary(&items), [(Action::Refuse, "BackupStorageLocation", "velero", "missing")]);
}

#[test]
fn phases_decide_what_is_materialized() {
    let t = cluster(vec![bsl("b-bsl", "velero")]);
    for phase in BackupPhase::ALL {
        let items = run(vec![entry(admin_backup("d", phase.as_str()), 0)], &t, &identity());
        let expected = match phase {
            BackupPhase::Completed | BackupPhase::PartiallyFailed | BackupPhase::Failed => Action::Create,
            // Their expiration (2026-12-01) is after "now": still finishing.
            BackupPhase::FailedValidation | BackupPhase::Deleting => Action::Refuse,
            _ => Action::Wait,
        };
        assert_eq!(items[0].action, expected, "{phase}");
    }
    // Expired while finishing: synced as PartiallyFailed, as Velero does.
    let options = PlanOptions { now: now() + Duration::from_secs(40 * 86400), ..Default::default() };
    let c = catalog(vec![entry(admin_backup("d", "WaitingForPluginOperations"), 0)]);
    let items = plan_cluster(&c, &t, &identity(), &options).items;
    assert_eq!(items[0].action, Action::Create);
    assert_eq!(items[0].object.as_ref().unwrap()["status"]["phase"], "PartiallyFailed");
}

// === Rule 2: PodVolumeBackups ===

#[test]
fn rule2_pvbs_get_the_targets_backup_uid_and_bsl() {
    let t = cluster(vec![bsl("b-bsl", "velero"), backup_cr("b-uid", admin_backup("daily-1", "Completed"))]);
    let items = run(vec![entry(admin_backup("daily-1", "Completed"), 2)], &t, &identity());
    assert_eq!(
        summary(&items),
        [
            (Action::Create, "PodVolumeBackup", "velero", "daily-1-pvb0"),
            (Action::Create, "PodVolumeBackup", "velero", "daily-1-pvb1")
        ],
        "a Backup CR that already existed gets its PVBs (Velero skips those)"
    );
    let obj = items[0].object.as_ref().unwrap();
    assert_eq!(obj["apiVersion"], "velero.io/v1");
    assert_eq!(obj["kind"], "PodVolumeBackup");
    assert_eq!(obj["metadata"]["ownerReferences"][0]["uid"], "b-uid");
    assert_eq!(obj["metadata"]["labels"][labels::VELERO_BACKUP_UID], "b-uid");
    assert_eq!(obj["metadata"]["labels"][labels::VELERO_BACKUP_NAME], "daily-1");
    assert_eq!(obj["spec"]["backupStorageLocation"], "b-bsl");
    assert_eq!(obj["spec"]["pod"]["namespace"], "team-a");
    assert_eq!(obj["status"]["snapshotID"], "abc");
    assert!(obj["metadata"].get("uid").is_none());
}

#[test]
fn rule2_pvbs_wait_for_a_backup_still_to_be_created() {
    let t = cluster(vec![bsl("b-bsl", "velero")]);
    let items = run(vec![entry(admin_backup("daily-1", "Completed"), 1)], &t, &identity());
    assert_eq!(items.iter().map(|i| i.action).collect::<Vec<_>>(), [Action::Create, Action::Wait]);
    assert_eq!(items[1].waits_for.as_ref().map(ToString::to_string).as_deref(), Some("Backup velero/daily-1"));
    assert_eq!(items[1].object.as_ref().unwrap()["metadata"]["ownerReferences"][0]["uid"], "");
}

#[test]
fn rule2_existing_pvbs_are_matched_by_name_and_backup_label() {
    let mut same: Value = pvb("daily-1", 0);
    same["kind"] = "PodVolumeBackup".into();
    same["metadata"]["namespace"] = "velero".into();
    let mut other = pvb("daily-1", 1);
    other["kind"] = "PodVolumeBackup".into();
    other["metadata"]["namespace"] = "velero".into();
    other["metadata"]["labels"]["velero.io/backup-name"] = "another".into();
    let t =
        cluster(vec![bsl("b-bsl", "velero"), backup_cr("b-uid", admin_backup("daily-1", "Completed")), same, other]);
    let items = run(vec![entry(admin_backup("daily-1", "Completed"), 2)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Conflict, "PodVolumeBackup", "velero", "daily-1-pvb1")]);
}

// === Rule 3: NonAdminBackups ===

#[test]
fn rule3_nab_in_the_tenant_namespace_shaped_as_synced() {
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a")]);
    let items = run(vec![entry(nac_backup("Completed"), 1)], &t, &identity());
    assert_eq!(
        summary(&items),
        [
            (Action::Create, "Backup", "velero", NACUUID),
            (Action::Wait, "PodVolumeBackup", "velero", &format!("{NACUUID}-pvb0")),
            (Action::Wait, "NonAdminBackup", "team-a", "nightly"),
        ]
    );
    let nab = items[2].object.as_ref().unwrap();
    assert_eq!(nab["apiVersion"], "oadp.openshift.io/v1alpha1");
    assert_eq!(nab["metadata"]["labels"][labels::NAB_SYNCED_FROM_NACUUID], NACUUID);
    assert_eq!(nab["metadata"]["labels"][labels::FERRY_MANAGED_BY], "ferry");
    assert_eq!(nab["spec"]["backupSpec"]["storageLocation"], "");
    assert_eq!(nab["spec"]["backupSpec"]["includedNamespaces"], json!(["team-a"]));
    assert!(nab.get("status").is_none(), "NAC owns NAB status");
    let backup = items[0].object.as_ref().unwrap();
    assert_eq!(backup["metadata"]["annotations"][labels::NAB_ORIGIN_NAMESPACE], "team-a");
    assert_eq!(backup["metadata"]["labels"][labels::NAB_ORIGIN_NACUUID], NACUUID);

    // Once the Backup exists, the NAB is created.
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), backup_cr("b-uid", nac_backup("Completed"))]);
    let items = run(vec![entry(nac_backup("Completed"), 0)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Create, "NonAdminBackup", "team-a", "nightly")]);
}

#[test]
fn rule3_only_terminal_nac_backups() {
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a")]);
    for (phase, action) in
        [("InProgress", Action::Wait), ("Failed", Action::Create), ("PartiallyFailed", Action::Create)]
    {
        assert_eq!(run(vec![entry(nac_backup(phase), 0)], &t, &identity())[0].action, action, "{phase}");
    }
}

#[test]
fn rule3_a_nab_referring_to_the_nacuuid_is_done() {
    let by_label = json!({"kind": "NonAdminBackup", "metadata": {"name": "nightly", "namespace": "team-a",
        "labels": {labels::NAB_SYNCED_FROM_NACUUID: NACUUID}}, "spec": {"backupSpec": {}}});
    let by_status = json!({"kind": "NonAdminBackup", "metadata": {"name": "renamed", "namespace": "team-a"},
        "spec": {"backupSpec": {"ttl": "1h"}}, "status": {"veleroBackup": {"nacuuid": NACUUID}}});
    for nab in [by_label, by_status] {
        let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), backup_cr("b-uid", nac_backup("Completed")), nab]);
        assert!(run(vec![entry(nac_backup("Completed"), 0)], &t, &identity()).is_empty());
    }
}

#[test]
fn rule3_a_nab_claiming_the_nacuuid_in_another_namespace_blocks_nothing_and_is_reported() {
    // Tenant team-evil labels a NAB of its own with team-a's NACUUID.
    let claim = json!({"kind": "NonAdminBackup", "metadata": {"name": "grab", "namespace": "team-evil",
        "labels": {labels::NAB_SYNCED_FROM_NACUUID: NACUUID}}, "spec": {"backupSpec": {}}});
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), ns("team-evil"), claim]);
    let items = run(vec![entry(nac_backup("Completed"), 1)], &t, &identity());
    assert_eq!(
        summary(&items),
        [
            (Action::Create, "Backup", "velero", NACUUID),
            (Action::Conflict, "NonAdminBackup", "team-evil", "grab"),
            (Action::Wait, "PodVolumeBackup", "velero", &*format!("{NACUUID}-pvb0")),
            (Action::Wait, "NonAdminBackup", "team-a", "nightly"),
        ],
        "team-a's NAB is still planned, with its Backup and PVB"
    );
    assert!(items[1].reason.as_deref().unwrap().contains("does not count"), "{:?}", items[1].reason);
}

#[test]
fn rule3_an_unrelated_nab_with_the_name_is_a_conflict() {
    let user_nab = json!({"kind": "NonAdminBackup", "metadata": {"name": "nightly", "namespace": "team-a"},
        "spec": {"backupSpec": {}}, "status": {"veleroBackup": {"nacuuid": "team-a-nightly-other"}}});
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), user_nab]);
    let items = run(vec![entry(nac_backup("Completed"), 1)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Conflict, "NonAdminBackup", "team-a", "nightly")]);
    assert!(items[0].reason.as_ref().unwrap().contains("team-a-nightly-other"));
}

#[test]
fn rule3_tampered_ownership_is_refused() {
    let mut tampered = nac_backup("Completed");
    tampered["spec"]["includedNamespaces"] = json!(["team-b"]);
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), ns("team-b")]);
    let items = run(vec![entry(tampered, 1)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Refuse, "Backup", "velero", NACUUID)]);
    assert!(items[0].reason.as_ref().unwrap().contains("team-b"));
}

#[test]
fn rule3_nabsl_locations_name_the_tenants_nabsl() {
    let mut nac_bsl = bsl("team-a-nabsl-uuid", "velero");
    nac_bsl["metadata"]["labels"] = json!({"openshift.io/oadp": "True", "app.kubernetes.io/managed-by": "oadp-nac-controller",
        "openshift.io/oadp-nabsl-origin-nacuuid": "team-a-nabsl-uuid"});
    nac_bsl["metadata"]["annotations"] = json!({"openshift.io/oadp-nabsl-origin-name": "my-bsl",
        "openshift.io/oadp-nabsl-origin-namespace": "team-a"});
    let t = cluster(vec![nac_bsl.clone(), ns("team-a"), ns("team-b")]);
    let items = run(vec![entry(nac_backup("Completed"), 0)], &t, &identity());
    assert_eq!(items[1].object.as_ref().unwrap()["spec"]["backupSpec"]["storageLocation"], "my-bsl");

    nac_bsl["metadata"]["annotations"]["openshift.io/oadp-nabsl-origin-namespace"] = "team-b".into();
    let t = cluster(vec![nac_bsl, ns("team-a"), ns("team-b")]);
    let items = run(vec![entry(nac_backup("Completed"), 0)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Refuse, "NonAdminBackup", "team-a", "nightly")]);
}

// === Rule 4: consequences of OADP's controllers ===

#[test]
fn rule4_mapped_namespace_rewrites_the_origin_and_keeps_pvb_pod_namespace() {
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), ns("team-a-dr")]);
    let items = run(vec![entry(nac_backup("Completed"), 1)], &t, &mapped());
    assert_eq!(items[2].namespace, "team-a-dr", "the NAB lands only in the mapped namespace");
    assert!(items.iter().all(|i| i.namespace != "team-a"));
    let backup = items[0].object.as_ref().unwrap();
    assert_eq!(backup["metadata"]["annotations"][labels::NAB_ORIGIN_NAMESPACE], "team-a-dr");
    assert_eq!(backup["metadata"]["annotations"][labels::FERRY_SOURCE_NAMESPACE], "team-a");
    assert_eq!(items[1].object.as_ref().unwrap()["spec"]["pod"]["namespace"], "team-a", "PVB pod namespace untouched");
    let nab = items[2].object.as_ref().unwrap();
    assert_eq!(nab["metadata"]["annotations"][labels::FERRY_NAMESPACE_MAPPING], "team-a=team-a-dr");
    assert!(nab["metadata"]["annotations"][labels::FERRY_RESTORE_HINT].as_str().unwrap().contains("ferry restore"));
    assert!(items[2].reason.as_ref().unwrap().contains("NonAdminRestore"));
}

#[test]
fn rule4_no_target_namespace_means_no_backup_cr_either() {
    // NAC's garbage collector would delete a NAC Backup without its NAB.
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a")]);
    let items = run(vec![entry(nac_backup("Completed"), 2)], &t, &mapped());
    assert_eq!(summary(&items), [(Action::Wait, "NonAdminBackup", "team-a-dr", "nightly")]);
    assert_eq!(items[0].waits_for.as_ref().map(ToString::to_string).as_deref(), Some("Namespace team-a-dr"));
    // Admin backups have no such coupling.
    let items = run(vec![entry(admin_backup("d", "Completed"), 0)], &cluster(vec![bsl("b-bsl", "velero")]), &mapped());
    assert_eq!(items[0].action, Action::Create);
}

#[test]
fn rule4_nabs_are_create_only() {
    // NAC rewrites a synced NAB's spec with defaults; ferry never re-applies it.
    let ours = json!({"kind": "NonAdminBackup", "metadata": {"name": "nightly", "namespace": "team-a",
        "labels": {labels::NAB_SYNCED_FROM_NACUUID: NACUUID, labels::FERRY_MANAGED_BY: "ferry"}},
        "spec": {"backupSpec": {"ttl": "1h", "snapshotMoveData": false}}, "status": {"phase": "Created"}});
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), backup_cr("b-uid", nac_backup("Completed")), ours]);
    assert!(run(vec![entry(nac_backup("Completed"), 0)], &t, &identity()).is_empty());
}

#[test]
fn rule4_a_velero_synced_backup_with_the_source_origin_blocks_a_mapped_nab() {
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a-dr"), backup_cr("b-uid", nac_backup("Completed"))]);
    let items = run(vec![entry(nac_backup("Completed"), 0)], &t, &mapped());
    assert_eq!(summary(&items), [(Action::Conflict, "NonAdminBackup", "team-a-dr", "nightly")]);
    let reason = items[0].reason.as_deref().unwrap();
    assert!(reason.contains("origin namespace \"team-a\""), "{reason}");
    // The conflict names Velero's sync and the fix.
    assert!(reason.contains("Velero's own backup sync on cluster-b") && reason.contains("BSL \"b-bsl\""), "{reason}");
    assert!(reason.contains("--backup-sync-period=0"), "{reason}");

    // A Backup of another origin that is neither the bucket's nor Velero's sync is only "not ferry's to change".
    let mut other = backup_cr("b-uid", nac_backup("Completed"));
    other["metadata"]["annotations"][labels::NAB_ORIGIN_NAMESPACE] = "team-z".into();
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a-dr"), other]);
    let items = run(vec![entry(nac_backup("Completed"), 0)], &t, &mapped());
    let reason = items[0].reason.as_deref().unwrap();
    assert!(reason.contains("not ferry's to change") && !reason.contains("Velero's own backup sync"), "{reason}");
}

#[test]
fn mappings_into_protected_namespaces_are_refused_at_load() {
    let m = NamespaceMapping {
        from: "cluster-a".into(),
        to: "cluster-b".into(),
        namespaces: BTreeMap::new(),
        prefix: Some(crate::resolve::PrefixRewrite { strip: "team-".into(), add: "kube-".into() }),
    };
    let err = NamespaceMappings::new(vec![m], ProtectedNamespaces::default()).unwrap_err().to_string();
    assert!(err.contains("\"kube-\""), "{err}");
}

// === Rule 6: what may cross ===

#[test]
fn rule6_only_finished_pvbs_of_the_backups_own_namespaces_cross_and_the_rest_is_named() {
    let name = NACUUID;
    let mut in_progress = pvb(name, 1);
    in_progress["status"]["phase"] = "InProgress".into();
    let mut foreign = pvb(name, 2);
    foreign["spec"]["pod"]["namespace"] = "kube-system".into();
    let mut other_backup = pvb(name, 3);
    other_backup["metadata"]["labels"]["velero.io/backup-name"] = "someone-elses".into();
    let mut bad_name = pvb(name, 4);
    bad_name["metadata"]["name"] = "Not_A_Name".into();
    let pvbs = vec![pvb(name, 0), in_progress, foreign, other_backup, bad_name];
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a")]);
    let items = run(vec![entry_with_pvbs(nac_backup("Completed"), pvbs)], &t, &identity());
    let pvb_items: Vec<&PlanItem> = items.iter().filter(|i| i.kind == "PodVolumeBackup").collect();
    let refused: Vec<(&str, &str)> = pvb_items
        .iter()
        .filter(|i| i.action == Action::Refuse)
        .map(|i| (i.name.as_str(), i.reason.as_deref().unwrap()))
        .collect();
    assert_eq!(refused.len(), 4, "{refused:?}");
    let reason_of = |n: &str| refused.iter().find(|(name, _)| *name == n).map(|(_, r)| *r).unwrap();
    assert!(reason_of(&format!("{name}-pvb1")).contains("status.phase is \"InProgress\""));
    assert!(reason_of(&format!("{name}-pvb2")).contains("spec.pod.namespace \"kube-system\""));
    assert!(reason_of(&format!("{name}-pvb3")).contains("\"someone-elses\""));
    assert!(reason_of("Not_A_Name").contains("metadata.name"));
    assert!(refused.iter().all(|(_, r)| r.contains(&format!("of backup \"{name}\""))), "each names its backup");
    // The good PVB still goes, and so do the Backup and the NAB.
    let good: Vec<&str> = pvb_items.iter().filter(|i| i.action != Action::Refuse).map(|i| i.name.as_str()).collect();
    assert_eq!(good, [format!("{name}-pvb0")]);
    assert!(items.iter().any(|i| i.kind == "NonAdminBackup" && i.action == Action::Wait));
    assert!(items.iter().any(|i| i.kind == "Backup" && i.action == Action::Create));
}

fn read_write_bsl(mode: Option<&str>) -> Value {
    let mut b = bsl("b-bsl", "velero");
    match mode {
        Some(mode) => b["spec"]["accessMode"] = mode.into(),
        None => {
            b["spec"].as_object_mut().unwrap().remove("accessMode");
        }
    }
    b
}

#[test]
fn rule6_a_read_write_reader_gets_nothing_and_every_backup_says_why() {
    for mode in [None, Some("ReadWrite")] {
        let t = cluster(vec![read_write_bsl(mode), ns("team-a")]);
        let items = run(
            vec![entry(admin_backup("daily-1", "Completed"), 2), entry(nac_backup("Completed"), 1)],
            &t,
            &identity(),
        );
        assert_eq!(
            summary(&items),
            [
                (Action::Refuse, "BackupStorageLocation", "velero", "b-bsl"),
                (Action::Refuse, "Backup", "velero", "daily-1"),
                (Action::Refuse, "Backup", "velero", NACUUID),
            ],
            "{mode:?}"
        );
        let reason = items[1].reason.as_deref().unwrap();
        assert!(reason.contains("ReadOnly") && reason.contains("could delete cluster-a's backups"), "{reason}");
        if mode.is_none() {
            assert!(reason.contains("unset (ReadWrite)"), "{reason}");
        }
    }
}

#[test]
fn rule6_read_write_is_fine_for_the_writer_itself_and_for_an_opted_out_cluster() {
    let mut writer = cluster(vec![read_write_bsl(None)]);
    writer.name = "cluster-a".into();
    let items = run(vec![entry(admin_backup("daily-1", "Completed"), 0)], &writer, &identity());
    assert_eq!(items[0].action, Action::Create, "the source cluster reads its own location");
    let mut opted_out = cluster(vec![read_write_bsl(None)]);
    opted_out.allow_read_write_locations = true;
    let items = run(vec![entry(admin_backup("daily-1", "Completed"), 0)], &opted_out, &identity());
    assert_eq!(items[0].action, Action::Create);
}

#[test]
fn rule6_a_location_the_config_does_not_grant_is_never_read_whatever_bsl_the_agent_reports() {
    let mut t = cluster(vec![bsl("b-bsl", "velero")]);
    t.granted_locations.clear();
    let items = run(vec![entry(admin_backup("daily-1", "Completed"), 1)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Refuse, "BackupStorageLocation", "velero", "b-bsl")]);
    assert!(items[0].reason.as_deref().unwrap().contains("does not grant"), "{:?}", items[0].reason);
    assert!(items.iter().all(|i| i.object.is_none()), "no backup JSON reaches an ungranted cluster");
    // The writer's own BSL on its location is no attempt to read anything.
    t.name = "cluster-a".into();
    assert!(run(vec![entry(admin_backup("daily-1", "Completed"), 1)], &t, &identity()).is_empty());
    // Without a BSL on the location there is nothing to report.
    let mut bare = cluster(vec![]);
    bare.granted_locations.clear();
    assert!(run(vec![entry(admin_backup("daily-1", "Completed"), 1)], &bare, &identity()).is_empty());
}

#[test]
fn pvb_labels_are_set_for_their_own_backup_and_a_name_listed_twice_is_reported() {
    let t = cluster(vec![bsl("b-bsl", "velero"), backup_cr("b-uid", admin_backup("daily-1", "Completed"))]);
    let pvbs = vec![pvb("daily-1", 1), pvb("daily-1", 1), pvb("daily-1", 0)];
    let items = run(vec![entry_with_pvbs(admin_backup("daily-1", "Completed"), pvbs)], &t, &identity());
    assert_eq!(
        summary(&items),
        [
            (Action::Create, "PodVolumeBackup", "velero", "daily-1-pvb1"),
            (Action::Refuse, "PodVolumeBackup", "velero", "daily-1-pvb1"),
            (Action::Create, "PodVolumeBackup", "velero", "daily-1-pvb0"),
        ]
    );
    assert!(items[1].reason.as_deref().unwrap().contains("listed twice"));
    let labels = &items[0].object.as_ref().unwrap()["metadata"]["labels"];
    assert_eq!(labels[labels::VELERO_BACKUP_NAME], "daily-1");
    assert_eq!(labels[labels::VELERO_BACKUP_UID], "b-uid");
}

/// Issue 29 (3): one PVB name in the PVB files of two backups is created once, for the first backup, and a
/// reported conflict for the other (never sent to be applied over the first).
#[test]
fn one_pvb_name_in_two_backups_is_one_create_and_a_reported_conflict() {
    let t = cluster(vec![bsl("b-bsl", "velero")]);
    let mut borrowed = pvb("second", 0);
    borrowed["metadata"]["name"] = "first-pvb0".into();
    let first = entry_with_pvbs(admin_backup("first", "Completed"), vec![pvb("first", 0)]);
    let second = entry_with_pvbs(admin_backup("second", "Completed"), vec![borrowed, pvb("second", 1)]);
    let items = run(vec![first, second], &t, &identity());
    let pvbs: Vec<_> = items.iter().filter(|i| i.kind == "PodVolumeBackup").collect();
    let seen: Vec<_> = pvbs.iter().map(|i| (i.action, i.name.as_str(), i.backup.as_str())).collect();
    assert_eq!(
        seen,
        [
            (Action::Wait, "first-pvb0", "first"),
            (Action::Conflict, "first-pvb0", "second"),
            (Action::Wait, "second-pvb1", "second"),
        ]
    );
    let reason = pvbs[1].reason.as_deref().unwrap();
    assert!(reason.contains("backup \"first\"'s PVB file too") && reason.contains("left out"), "{reason}");
    assert!(pvbs[1].object.is_none() && pvbs[1].waits_for.is_none(), "nothing to apply");
}

#[test]
fn one_backup_name_in_two_locations_is_one_create_and_a_reported_conflict() {
    let mut t = cluster(vec![bsl("b-bsl", "velero"), bsl("b-bsl-2", "velero/other")]);
    t.granted_locations.insert("other".into());
    let mut locations = catalog(vec![entry(admin_backup("daily-1", "Completed"), 0)]);
    let mut other =
        LocationCatalog::empty(Location { name: "other".into(), prefix: "velero/other".into(), ..location() });
    other.backups.insert("daily-1".into(), entry(admin_backup("daily-1", "Completed"), 0));
    other.listing = Listing::Complete;
    locations.push(other);
    let items = plan_cluster(
        &locations,
        &t,
        &identity(),
        &PlanOptions { materialize_velero_backups: true, now: now(), ..Default::default() },
    )
    .items;
    assert_eq!(
        summary(&items),
        [(Action::Create, "Backup", "velero", "daily-1"), (Action::Conflict, "Backup", "velero", "daily-1")]
    );
    assert!(items[1].reason.as_deref().unwrap().contains("in location \"shared\" too"), "{:?}", items[1].reason);
}

/// Issue 30: while the first location's cold load has listed a name and not read it, a later location's backup
/// of that name waits (no item, no conflict to report): it must never win a name the first location holds.
#[test]
fn a_name_an_earlier_location_has_listed_but_not_read_is_not_taken_by_a_later_one() {
    let mut t = cluster(vec![bsl("b-bsl", "velero"), bsl("b-bsl-2", "velero/other")]);
    t.granted_locations.insert("other".into());
    let options = PlanOptions { materialize_velero_backups: true, now: now(), ..Default::default() };
    let mut locations = catalog(vec![entry(admin_backup("daily-2", "Completed"), 0)]);
    locations[0].pending.insert("daily-1".into());
    locations[0].listing = Listing::Incomplete { reason: "loading: 1 of 2 backups read".into() };
    let mut other =
        LocationCatalog::empty(Location { name: "other".into(), prefix: "velero/other".into(), ..location() });
    for name in ["daily-1", "daily-3"] {
        other.backups.insert(name.into(), entry(admin_backup(name, "Completed"), 0));
    }
    locations.push(other);
    let loading = plan_cluster(&locations, &t, &identity(), &options).items;
    assert_eq!(
        summary(&loading),
        [(Action::Create, "Backup", "velero", "daily-2"), (Action::Create, "Backup", "velero", "daily-3")]
    );
    assert_eq!(loading[1].object.as_ref().unwrap()["spec"]["storageLocation"], "b-bsl-2", "from location other");
    // Read: the first location wins it, and the later one's is the reported conflict.
    locations[0].pending.clear();
    locations[0].backups.insert("daily-1".into(), entry(admin_backup("daily-1", "Completed"), 0));
    let read = plan_cluster(&locations, &t, &identity(), &options).items;
    let daily_1: Vec<_> = read.iter().filter(|i| i.name == "daily-1").collect();
    assert_eq!(daily_1.iter().map(|i| i.action).collect::<Vec<_>>(), [Action::Create, Action::Conflict]);
    assert_eq!(daily_1[0].object.as_ref().unwrap()["spec"]["storageLocation"], "b-bsl", "from location shared");
}

// === Rule 7: targets differ (plain Velero, no OADP) ===

fn plain_velero(docs: Vec<Value>) -> ClusterState {
    let mut t = cluster(docs);
    t.inventory.apis = crate::model::ServedApis::plain_velero();
    t
}

#[test]
fn rule7_without_oadp_a_tenant_backup_is_its_backup_cr_and_pvbs_for_admins() {
    // No tenant namespace on B, no NAB kind: the Backup CR and PVBs still come (no NAC GC deletes them there).
    let t = plain_velero(vec![bsl("b-bsl", "velero")]);
    let items = run(vec![entry(nac_backup("Completed"), 2)], &t, &mapped());
    assert_eq!(
        summary(&items),
        [
            (Action::Create, "Backup", "velero", NACUUID),
            (Action::Wait, "PodVolumeBackup", "velero", &*format!("{NACUUID}-pvb0")),
            (Action::Wait, "PodVolumeBackup", "velero", &*format!("{NACUUID}-pvb1")),
        ]
    );
    assert!(items.iter().all(|i| i.kind != "NonAdminBackup"), "no NonAdminBackup for a cluster without OADP");
    let reason = items[0].reason.as_deref().unwrap();
    assert!(reason.contains("serves no NonAdminBackups") && reason.contains("ferry restore"), "{reason}");
    assert!(reason.contains("into team-a-dr"), "{reason}");
    // Shaped as on an OADP cluster: once OADP is installed, a NAB in the mapped namespace attaches to it.
    let backup = items[0].object.as_ref().unwrap();
    assert_eq!(backup["metadata"]["annotations"][labels::NAB_ORIGIN_NAMESPACE], "team-a-dr");
    assert_eq!(backup["metadata"]["labels"][labels::NAB_ORIGIN_NACUUID], NACUUID);
}

#[test]
fn rule7_ownership_and_mapping_refusals_hold_without_oadp_too() {
    let mut tampered = nac_backup("Completed");
    tampered["spec"]["includedNamespaces"] = json!(["team-b"]);
    let items = run(vec![entry(tampered, 1)], &plain_velero(vec![bsl("b-bsl", "velero")]), &identity());
    assert_eq!(summary(&items), [(Action::Refuse, "Backup", "velero", NACUUID)]);
    let items = run(vec![entry(nac_backup("InProgress"), 1)], &plain_velero(vec![bsl("b-bsl", "velero")]), &identity());
    assert!(items.iter().all(|i| i.action != Action::Create), "{items:?}");
}

#[test]
fn rule7_then_oadp_arrives_and_the_nab_follows_without_a_second_backup() {
    let mut t = plain_velero(vec![bsl("b-bsl", "velero"), ns("team-a-dr")]);
    let options = PlanOptions { materialize_velero_backups: true, now: now(), ..Default::default() };
    let entries = || vec![entry(nac_backup("Completed"), 1)];
    for _ in 0..2 {
        let p = plan_cluster(&catalog(entries()), &t, &mapped(), &options);
        simulate::apply(&p, &mut t.inventory);
    }
    assert!(plan_cluster(&catalog(entries()), &t, &mapped(), &options).items.is_empty());
    t.inventory.apis = crate::model::ServedApis::default();
    let items = plan_cluster(&catalog(entries()), &t, &mapped(), &options).items;
    assert_eq!(summary(&items), [(Action::Create, "NonAdminBackup", "team-a-dr", "nightly")]);
}

#[test]
fn rule7_a_cluster_without_veleros_crds_gets_nothing_but_the_reason() {
    let mut t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a")]);
    t.inventory.apis.missing_required = vec!["backups.velero.io".into()];
    let items = run(vec![entry(admin_backup("daily-1", "Completed"), 1)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Refuse, "CustomResourceDefinition", "", "backups.velero.io")]);
    assert!(items[0].reason.as_deref().unwrap().contains("install Velero's CRDs"));
}

// === Idempotency and determinism ===

#[test]
fn planning_over_the_applied_plan_converges_to_nothing() {
    let mut t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), ns("team-a-dr")]);
    let entries = || vec![entry(nac_backup("Completed"), 2), entry(admin_backup("daily-1", "Completed"), 2)];
    let options = PlanOptions { materialize_velero_backups: true, now: now(), ..Default::default() };
    let mut created = Vec::new();
    for _ in 0..3 {
        let p = plan_cluster(&catalog(entries()), &t, &mapped(), &options);
        created.push(simulate::apply(&p, &mut t.inventory));
    }
    assert_eq!(created, [2, 5, 0], "backups, then PVBs + NAB, then nothing");
    let last = plan_cluster(&catalog(entries()), &t, &mapped(), &options);
    assert!(last.items.is_empty(), "{:?}", last.items);
}

#[test]
fn plans_are_deterministic() {
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a")]);
    let c = catalog(vec![entry(nac_backup("Completed"), 2), entry(admin_backup("a", "Completed"), 1)]);
    let options = PlanOptions::default();
    let one = serde_json::to_string(&plan(&c, std::slice::from_ref(&t), &identity(), &options)).unwrap();
    let two = serde_json::to_string(&plan(&c, &[t], &identity(), &options)).unwrap();
    assert_eq!(one, two);
}

// === An unusable PVB file costs the PVBs only (docs/design.md §3 rules 2–3) ===

fn with_unusable_pvb_file(entry: Arc<CatalogBackup>) -> Arc<CatalogBackup> {
    let mut entry = CatalogBackup::clone(&entry);
    entry.pod_volume_backups = PodVolumeBackupFile::default();
    entry.pod_volume_backups_error = Some("not gzip: invalid gzip header".into());
    Arc::new(entry)
}

#[test]
fn an_unusable_pvb_file_keeps_the_admin_backup_and_says_its_volumes_are_missing() {
    let t = cluster(vec![bsl("b-bsl", "velero")]);
    let items = run(vec![with_unusable_pvb_file(entry(admin_backup("daily-1", "Completed"), 2))], &t, &identity());
    assert_eq!(summary(&items), [(Action::Create, "Backup", "velero", "daily-1")]);
    let reason = items[0].reason.as_deref().unwrap();
    assert!(reason.contains("velero/backups/daily-1/daily-1-podvolumebackups.json.gz"), "{reason}");
    assert!(reason.contains("invalid gzip header") && reason.contains("volumes back empty"), "{reason}");
}

/// Issue 29 (6): the Backup exists already (Velero's sync, or ferry before the file broke): the plan still says
/// that its volume data is missing, in an item of its own that the agent only holds.
#[test]
fn an_unusable_pvb_file_is_reported_when_the_backup_exists_already() {
    let existing = backup_cr("b-uid", admin_backup("daily-1", "Completed"));
    let t = cluster(vec![bsl("b-bsl", "velero"), existing]);
    let items = run(vec![with_unusable_pvb_file(entry(admin_backup("daily-1", "Completed"), 2))], &t, &identity());
    assert_eq!(summary(&items), [(Action::Wait, "Backup", "velero", "daily-1")]);
    assert!(items[0].object.is_none(), "nothing to apply");
    let reason = items[0].reason.as_deref().unwrap();
    assert!(reason.contains("exists here") && reason.contains("invalid gzip header"), "{reason}");
    let waits = items[0].waits_for.as_ref().unwrap().to_string();
    assert!(waits.contains("velero/backups/daily-1/daily-1-podvolumebackups.json.gz"), "{waits}");
    // Someone else's Backup of that name: the conflict is the item, no second one about the file.
    let mut foreign = backup_cr("b-uid", admin_backup("daily-1", "Completed"));
    foreign["spec"]["storageLocation"] = "local".into();
    let t = cluster(vec![bsl("b-bsl", "velero"), foreign]);
    let items = run(vec![with_unusable_pvb_file(entry(admin_backup("daily-1", "Completed"), 2))], &t, &identity());
    assert_eq!(summary(&items), [(Action::Conflict, "Backup", "velero", "daily-1")]);
}

#[test]
fn an_unusable_pvb_file_holds_a_tenants_nab_and_with_it_the_backup_cr() {
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a")]);
    let items = run(vec![with_unusable_pvb_file(entry(nac_backup("Completed"), 1))], &t, &identity());
    assert_eq!(summary(&items), [(Action::Wait, "NonAdminBackup", "team-a", "nightly")]);
    let waits = items[0].waits_for.as_ref().unwrap().to_string();
    assert!(waits.contains(&format!("velero/backups/{NACUUID}/{NACUUID}-podvolumebackups.json.gz")), "{waits}");
    assert!(items[0].reason.as_deref().unwrap().contains("NonAdminRestore would restore its volumes empty"));

    // Without OADP the Backup CR is for admins, as for an admin backup: created, with the note.
    let t = plain_velero(vec![bsl("b-bsl", "velero")]);
    let items = run(vec![with_unusable_pvb_file(entry(nac_backup("Completed"), 1))], &t, &identity());
    assert_eq!(summary(&items), [(Action::Create, "Backup", "velero", NACUUID)]);
    let reason = items[0].reason.as_deref().unwrap();
    assert!(reason.contains("serves no NonAdminBackups") && reason.contains("is unusable"), "{reason}");

    // A NAB that exists already stays done: nothing is held that the tenant has.
    let nab = json!({"kind": "NonAdminBackup", "metadata": {"name": "nightly", "namespace": "team-a",
        "labels": {labels::NAB_SYNCED_FROM_NACUUID: NACUUID}}, "spec": {"backupSpec": {}}});
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), nab.clone()]);
    let items = run(vec![with_unusable_pvb_file(entry(nac_backup("Completed"), 1))], &t, &identity());
    assert_eq!(summary(&items), [(Action::Create, "Backup", "velero", NACUUID)]);
    // And with its Backup CR there too, the file is still reported (issue 29, 6).
    let cr = backup_cr("t-uid", nac_backup("Completed"));
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), nab, cr]);
    let items = run(vec![with_unusable_pvb_file(entry(nac_backup("Completed"), 1))], &t, &identity());
    assert_eq!(summary(&items), [(Action::Wait, "Backup", "velero", NACUUID)]);
}

// === Drift of ferry's own NABs is reported, never re-applied ===

fn ferry_nab(namespace: &str, sync_label: Option<&str>) -> Value {
    let mut labels_map = json!({labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE});
    if let Some(v) = sync_label {
        labels_map[labels::NAB_SYNCED_FROM_NACUUID] = v.into();
    }
    json!({"kind": "NonAdminBackup", "metadata": {"name": "nightly", "namespace": namespace, "labels": labels_map,
        "annotations": {labels::FERRY_BACKUP_NAME: NACUUID, labels::FERRY_SOURCE_LOCATION: "shared"}},
        "spec": {"backupSpec": {}}})
}

#[test]
fn drift_of_a_ferry_nab_is_reported_with_its_reason_and_nothing_is_re_applied() {
    let synced = backup_cr("b-uid", nac_backup("Completed"));
    // Its sync label removed, or changed: one drift item, no create, no second conflict about the same NAB.
    for label in [None, Some("team-a-nightly-00000000-0000-4000-8000-000000000000")] {
        let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), synced.clone(), ferry_nab("team-a", label)]);
        let items = run(vec![entry(nac_backup("Completed"), 0)], &t, &identity());
        assert_eq!(summary(&items), [(Action::Conflict, "NonAdminBackup", "team-a", "nightly")], "{label:?}");
        let reason = items[0].reason.as_deref().unwrap();
        assert!(reason.starts_with("drift: ferry's NonAdminBackup team-a/nightly"), "{reason}");
        assert!(reason.contains("openshift.io/oadp-nab-synced-from-nacuuid") && reason.contains("never re-applies"));
    }
    // NAC still refers to it by status: it stays done (no second NAB), and the drift is reported.
    let mut by_status = ferry_nab("team-a", None);
    by_status["status"] = json!({"veleroBackup": {"nacuuid": NACUUID}});
    let t = cluster(vec![bsl("b-bsl", "velero"), ns("team-a"), synced.clone(), by_status]);
    let items = run(vec![entry(nac_backup("Completed"), 0)], &t, &identity());
    assert_eq!(summary(&items), [(Action::Conflict, "NonAdminBackup", "team-a", "nightly")]);
    assert!(items[0].reason.as_deref().unwrap().starts_with("drift:"));

    // The mapping changed (team-a → team-a-dr) after ferry made the NAB in team-a: the old one is drift, not a
    // tenant's foreign claim; the new namespace gets nothing NAC would refuse (the CR's origin is team-a).
    let t = cluster(vec![
        bsl("b-bsl", "velero"),
        ns("team-a"),
        ns("team-a-dr"),
        synced,
        ferry_nab("team-a", Some(NACUUID)),
    ]);
    let items = run(vec![entry(nac_backup("Completed"), 0)], &t, &mapped());
    let drift: Vec<_> = items.iter().filter(|i| i.reason.as_deref().is_some_and(|r| r.starts_with("drift:"))).collect();
    assert_eq!(drift.len(), 1, "{items:#?}");
    assert_eq!((drift[0].namespace.as_str(), drift[0].action), ("team-a", Action::Conflict));
    assert!(drift[0].reason.as_deref().unwrap().contains("now maps to \"team-a-dr\""));
    assert!(items.iter().all(|i| i.action != Action::Create), "{items:#?}");
    assert!(!items.iter().any(|i| i.reason.as_deref().is_some_and(|r| r.contains("claims backup"))), "{items:#?}");
}

// === Objects built once per pass, shared by every cluster that gets the same ===

#[test]
fn clusters_that_get_the_same_object_share_one_copy_and_others_get_their_own() {
    let entries = vec![entry(admin_backup("daily-1", "Completed"), 2), entry(nac_backup("Completed"), 1)];
    let catalogs = catalog(entries);
    let options = PlanOptions { now: now(), ..Default::default() };
    let reader = |name: &str, bsl_name: &str| {
        let mut t = cluster(vec![bsl(bsl_name, "velero"), ns("team-a"), ns("team-a-dr")]);
        t.name = name.into();
        t
    };
    let templates = TemplateCache::default();
    let plan_of =
        |t: &ClusterState, m: &NamespaceMappings| plan_cluster_with(&catalogs, t, m, &options, &templates).items;
    let (b, c, d) = (reader("cluster-b", "dr"), reader("cluster-c", "dr"), reader("cluster-d", "other"));
    let (on_b, on_c, on_d) = (plan_of(&b, &identity()), plan_of(&c, &identity()), plan_of(&d, &identity()));
    let object = |items: &[PlanItem], kind: &str| items.iter().find(|i| i.kind == kind).and_then(|i| i.object.clone());
    for kind in ["Backup", "PodVolumeBackup", "NonAdminBackup"] {
        let (ob, oc, od) = (object(&on_b, kind).unwrap(), object(&on_c, kind).unwrap(), object(&on_d, kind).unwrap());
        assert!(ob.shares(&oc), "{kind}: same BSL name and namespaces, one copy");
        assert!(ob.json() == oc.json());
        if kind != "NonAdminBackup" {
            assert!(!ob.shares(&od) && ob != od, "{kind}: another BSL name is another object");
        }
    }
    // A mapped NAB's restore hint names its cluster: not shared between clusters.
    let (mb, mc) = (plan_of(&b, &mapped()), plan_of(&c, &mapped()));
    let (nb, nc) = (object(&mb, "NonAdminBackup").unwrap(), object(&mc, "NonAdminBackup").unwrap());
    assert!(!nb.shares(&nc) && nb != nc);
    // Sharing changes nothing but the copies: a plan without it is equal item for item.
    let alone = plan_cluster_with(&catalogs, &c, &identity(), &options, &TemplateCache::disabled()).items;
    assert_eq!(alone, on_c);
    assert!(!object(&alone, "Backup").unwrap().shares(&object(&on_c, "Backup").unwrap()));
}

/// Issue 30: a set planned again from a grown catalog (a cold load's next partial) holds the very objects the
/// previous pass planned for the entries both share, so the coordinator never holds two copies of a set while
/// the first is still published; a re-read entry (another `Arc`) is built anew, and what no pass uses any more
/// is dropped with the catalogs it came from.
#[test]
fn a_pass_planned_again_from_a_grown_catalog_reuses_the_objects_the_previous_pass_planned() {
    let t = cluster(vec![bsl("b-bsl", "velero")]);
    let options = PlanOptions { now: now(), ..Default::default() };
    let templates = TemplateCache::default();
    let plan = |catalogs: &[Arc<LocationCatalog>]| {
        templates.begin_pass(catalogs);
        let items = plan_cluster_with(catalogs, &t, &identity(), &options, &templates).items;
        templates.end_pass();
        items
    };
    let backup_of = |items: &[PlanItem], name: &str| {
        items.iter().find(|i| i.kind == "Backup" && i.name == name).and_then(|i| i.object.clone()).unwrap()
    };
    let first: Vec<Arc<LocationCatalog>> =
        catalog(vec![entry(admin_backup("daily-1", "Completed"), 1)]).into_iter().map(Arc::new).collect();
    let daily_1 = first[0].backups["daily-1"].clone();
    let before = plan(&first);
    let mut grown = LocationCatalog::clone(&first[0]);
    grown.backups.insert("daily-2".into(), entry(admin_backup("daily-2", "Completed"), 1));
    drop(first);
    let grown = vec![Arc::new(grown)];
    let after = plan(&grown);
    assert!(backup_of(&after, "daily-1").shares(&backup_of(&before, "daily-1")), "planned once, held once");
    assert_eq!(templates.len(), 4, "two Backups and two PVBs");

    let mut reread = LocationCatalog::clone(&grown[0]);
    reread.backups.insert("daily-1".into(), entry(admin_backup("daily-1", "Completed"), 1));
    drop(grown);
    let again = plan(&[Arc::new(reread)]);
    let (old, new) = (backup_of(&after, "daily-1"), backup_of(&again, "daily-1"));
    assert!(!old.shares(&new) && old == new, "another entry is built anew (equal here)");
    assert!(backup_of(&again, "daily-2").shares(&backup_of(&after, "daily-2")));
    assert_eq!(templates.len(), 4, "the first daily-1's objects are dropped");
    drop((before, after, again));
    assert_eq!(Arc::strong_count(&daily_1), 1, "nor does the cache keep the replaced entry alive");
}
