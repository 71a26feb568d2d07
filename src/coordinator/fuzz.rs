//! Fuzz harness over what agents send the hub: snapshots, deltas, API reports and results with arbitrary
//! metadata and raw JSON never panic a cluster's record, its plan or its status, and the record holds only
//! objects of watched kinds that agree with their own JSON.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::Value;

use super::cluster::{ClusterRecord, Session};
use super::settings::Settings;
use super::status::cluster_status;
use crate::catalog::{CatalogBackup, Location, LocationCatalog, ObjectVersion, PodVolumeBackupFile, StoreKind};
use crate::fixture;
use crate::fuzz_input::{cluster_objects, json_value, mutated_json, random_bytes, text};
use crate::grpc::convert::{api_of, desired_set, inventory_item, inventory_object, watched_types};
use crate::grpc::proto::{ClusterApis, InventoryItem, ItemResult, ObjectRef, ResourceType};
use crate::model::{BackupPhase, Object};
use crate::plan::{ClusterState, PlanOptions, plan_cluster};
use crate::resolve::{NamespaceMapping, NamespaceMappings, PrefixRewrite, ProtectedNamespaces};

const VELERO_NAMESPACE: &str = "velero";
const KINDS: &[&str] =
    &["Namespace", "BackupStorageLocation", "Backup", "PodVolumeBackup", "NonAdminBackup", "Secret", "ConfigMap"];

fn record() -> ClusterRecord {
    ClusterRecord::new(ClusterState {
        name: "cluster-b".into(),
        velero_namespace: VELERO_NAMESPACE.into(),
        granted_locations: ["shared".to_string()].into(),
        ..Default::default()
    })
}

/// The location the inventory's BSL reads, with an admin backup (and its PVBs) and a tenant's backup.
fn catalog() -> LocationCatalog {
    let mut catalog = LocationCatalog::empty(Location {
        name: "shared".into(),
        kind: StoreKind::S3,
        bucket: "velero-backups".into(),
        prefix: "velero".into(),
        source_cluster: "cluster-a".into(),
    });
    let admin = fixture::admin_backup_json("daily-1", BackupPhase::Completed, "default");
    let uid = admin["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let pvbs: Vec<_> = (0..2)
        .map(|i| {
            Object::from_value(fixture::pod_volume_backup_json("daily-1", &uid, "team-a", i)).expect("fixture PVB")
        })
        .collect();
    let nacuuid = fixture::nac_object_uuid("team-a", "nightly", "0b4c6e1a-1d2f-4c4b-9a57-1f2e3d4c5b6a");
    let tenant = fixture::nac_backup_json("team-a", "nightly", &nacuuid, BackupPhase::Completed);
    for (backup, pvbs) in [(admin, pvbs), (tenant, Vec::new())] {
        let backup = Object::from_value(backup).expect("fixture backup");
        let version = ObjectVersion::new(Some("e"), 1, 0);
        let entry = CatalogBackup {
            name: backup.name().to_string(),
            backup,
            pod_volume_backups: PodVolumeBackupFile::from_objects(&pvbs),
            metadata_version: version.clone(),
            pod_volume_backups_version: Some(version),
            pod_volume_backups_error: None,
            has_resource_list: false,
        };
        catalog.backups.insert(entry.name.clone(), Arc::new(entry));
    }
    catalog
}

fn mappings() -> NamespaceMappings {
    let rewrite = NamespaceMapping {
        from: "cluster-a".into(),
        to: "cluster-b".into(),
        namespaces: BTreeMap::new(),
        prefix: Some(PrefixRewrite { strip: "team-".into(), add: "dr-".into() }),
    };
    NamespaceMappings::new(vec![rewrite], ProtectedNamespaces::default()).expect("valid mapping")
}

fn kind() -> impl Strategy<Value = String> {
    prop_oneof![4 => select(KINDS).prop_map(str::to_string), 1 => text()]
}

/// Group and version: the kind's own mostly, anything sometimes.
fn api(kind: &str) -> impl Strategy<Value = (String, String)> + use<> {
    let (group, version) = api_of(kind).unwrap_or_default();
    prop_oneof![4 => Just((group.to_string(), version.to_string())), 1 => (text(), text())]
}

fn object_ref() -> impl Strategy<Value = ObjectRef> {
    kind().prop_flat_map(|kind| {
        let namespace = prop_oneof![Just(VELERO_NAMESPACE.to_string()), Just(String::new()), text()];
        (api(&kind), namespace, text()).prop_map(move |((group, version), namespace, name)| ObjectRef {
            group,
            version,
            kind: kind.clone(),
            namespace,
            name,
        })
    })
}

/// The valid objects of `kind`, as its agent would send them.
fn valid_items(kind: &str) -> Vec<InventoryItem> {
    cluster_objects(VELERO_NAMESPACE).iter().filter(|(k, _)| *k == kind).map(|(k, o)| inventory_item(k, o)).collect()
}

/// One of `objects` as is or mutated, its metadata lifted as an agent lifts it (from the JSON while it is still
/// JSON), then maybe one lifted field changed.
fn item_from(objects: Vec<(&'static str, Value)>) -> impl Strategy<Value = InventoryItem> {
    let mutated = (0..objects.len()).prop_flat_map(move |i| {
        let (kind, object) = objects[i].clone();
        let raw = serde_json::to_vec(&object).unwrap_or_default();
        (Just(kind), prop_oneof![2 => Just(raw), 3 => mutated_json(object)])
    });
    let labels = proptest::collection::hash_map(text(), text(), 0..3);
    (mutated, proptest::option::weighted(0.3, (0..5usize, text())), proptest::option::of(labels)).prop_map(
        |((kind, raw_json), tamper, labels)| {
            let lifted: Value = serde_json::from_slice(&raw_json).unwrap_or_default();
            let mut item = InventoryItem { raw_json, ..inventory_item(kind, &lifted) };
            match tamper {
                Some((0, value)) => item.group = value,
                Some((1, value)) => item.version = value,
                Some((2, value)) => item.kind = value,
                Some((3, value)) => item.namespace = value,
                Some((_, value)) => item.name = value,
                None => {}
            }
            if let Some(labels) = labels {
                item.labels = labels;
            }
            item
        },
    )
}

/// Every field arbitrary.
fn random_item() -> impl Strategy<Value = InventoryItem> {
    let raw = prop_oneof![random_bytes(), json_value().prop_map(|v| v.to_string().into_bytes())];
    (kind(), text(), text(), text(), text(), raw).prop_map(|(kind, group, version, namespace, name, raw_json)| {
        InventoryItem { group, version, kind, namespace, name, raw_json, ..Default::default() }
    })
}

fn item() -> impl Strategy<Value = InventoryItem> {
    prop_oneof![4 => item_from(cluster_objects(VELERO_NAMESPACE)), 1 => random_item()]
}

/// A snapshot of a watched type, mostly of items of that type; or of any type, of any items.
fn snapshot() -> impl Strategy<Value = Message> {
    let of_its_type = select(watched_types()).prop_flat_map(|resource| {
        let own: Vec<_> = cluster_objects(VELERO_NAMESPACE).into_iter().filter(|(k, _)| *k == resource.kind).collect();
        let items = proptest::collection::vec(prop_oneof![4 => item_from(own), 1 => item()], 0..6);
        (Just(resource), items)
    });
    prop_oneof![4 => of_its_type, 1 => (resource_type(), items())].prop_map(|(t, items)| Message::Snapshot(t, items))
}

fn items() -> impl Strategy<Value = Vec<InventoryItem>> {
    proptest::collection::vec(item(), 0..6)
}

fn resource_type() -> impl Strategy<Value = ResourceType> {
    let any_type = (text(), text(), text()).prop_map(|(group, version, kind)| ResourceType { group, version, kind });
    prop_oneof![4 => select(watched_types()), 1 => any_type]
}

/// Which object a result is about: an item of the current DesiredSet, or anything.
#[derive(Debug, Clone)]
enum ResultRef {
    Desired(Index),
    Other(Option<ObjectRef>),
}

#[derive(Debug, Clone)]
enum Message {
    Snapshot(ResourceType, Vec<InventoryItem>),
    Delta(Vec<InventoryItem>, Vec<ObjectRef>),
    Apis(Option<ClusterApis>),
    /// For the current DesiredSet's version, or another.
    Results(Option<String>, Vec<(ResultRef, i32, String)>),
}

fn message() -> impl Strategy<Value = Message> {
    let apis = proptest::option::of(
        (
            proptest::collection::vec(resource_type(), 0..6),
            proptest::collection::vec(prop_oneof![Just("backups.velero.io".to_string()), text()], 0..2),
            text(),
        )
            .prop_map(|(served, missing_required, velero_version)| ClusterApis {
                served,
                missing_required,
                velero_version,
            }),
    );
    let result_ref = prop_oneof![
        3 => any::<Index>().prop_map(ResultRef::Desired),
        1 => proptest::option::of(object_ref()).prop_map(ResultRef::Other),
    ];
    // Outcomes the protocol knows, and integers it does not.
    let outcome = prop_oneof![3 => 0..6i32, 1 => any::<i32>()];
    let results = proptest::collection::vec((result_ref, outcome, text()), 0..6);
    prop_oneof![
        3 => snapshot(),
        3 => (items(), proptest::collection::vec(object_ref(), 0..3)).prop_map(|(u, d)| Message::Delta(u, d)),
        1 => apis.prop_map(Message::Apis),
        2 => (proptest::option::weighted(0.2, text()), results).prop_map(|(v, r)| Message::Results(v, r)),
    ]
}

/// Whether a held object is what its key says.
#[test]
fn valid_items_are_taken_and_planned() {
    let mut record = record();
    for resource in watched_types() {
        let items = valid_items(&resource.kind);
        assert!(items.iter().all(|item| inventory_object(item).is_ok()), "{}", resource.kind);
        assert!(record.apply_snapshot(&resource, &items).1.is_empty());
    }
    assert_eq!(record.inventory().len(), cluster_objects(VELERO_NAMESPACE).len());
    let plan = plan_cluster(&[catalog()], &record.cluster_state(), &mappings(), &PlanOptions::default());
    assert!(plan.count(crate::plan::Action::Create) > 0, "{plan:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn what_agents_send_never_breaks_the_hub(
        messages in proptest::collection::vec(message(), 1..6),
        last_seen_secs in -100_000i64..100_000,
        materialize in any::<bool>(),
    ) {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let options = PlanOptions { materialize_velero_backups: materialize, now, ..Default::default() };
        let (catalogs, no_catalogs, mappings, settings) = ([catalog()], Vec::<LocationCatalog>::new(), mappings(), Settings::default());
        let mut record = record();
        // What an agent sends first: a valid snapshot of every type.
        for resource in watched_types() {
            let (_, rejected) = record.apply_snapshot(&resource, &valid_items(&resource.kind));
            prop_assert!(rejected.is_empty(), "{:?}", rejected);
        }
        record.session = Some(Session { id: 1, software_version: "fuzz".into(), connected_at: now });
        // Heard from in the past, or (a skewed clock) in the future.
        let offset = Duration::from_secs(last_seen_secs.unsigned_abs());
        record.last_seen = if last_seen_secs > 0 { now.checked_add(offset) } else { now.checked_sub(offset) };
        for message in messages {
            let generation = record.generation;
            match message {
                Message::Snapshot(resource, items) => {
                    let (_, rejected) = record.apply_snapshot(&resource, &items);
                    let held = record.inventory().count_of(&resource.kind);
                    prop_assert!(held + rejected.len() <= items.len());
                    prop_assert!(record.generation > generation);
                }
                Message::Delta(upserts, deletes) => {
                    let (changed, rejected) = record.apply_delta(&upserts, &deletes);
                    prop_assert!(rejected.len() <= upserts.len());
                    prop_assert_eq!(changed, record.generation > generation);
                }
                Message::Apis(apis) => {
                    record.set_apis(apis);
                }
                Message::Results(version, results) => {
                    let version = version.unwrap_or_else(|| record.desired.version.clone());
                    let desired = record.desired.clone();
                    let results: Vec<ItemResult> = results.into_iter().map(|(r, outcome, message)| {
                        let r = match r {
                            ResultRef::Desired(i) if !desired.items.is_empty() => desired.items[i.index(desired.items.len())].r#ref.clone(),
                            ResultRef::Desired(_) => None,
                            ResultRef::Other(r) => r,
                        };
                        ItemResult { r#ref: r, outcome, message }
                    }).collect();
                    let taken = record.record_results(&version, &results);
                    // Only results about items of the current set are kept.
                    prop_assert!(taken <= results.len());
                    prop_assert!(record.results().is_empty() || record.results().len() == record.desired.items.len());
                    prop_assert!(record.reported() <= record.desired.items.len());
                }
            }
            // Each object is found where a lookup looks for it (each kind sorted, no name twice).
            let inventory = record.inventory();
            for object in inventory.objects() {
                prop_assert!(inventory.contains(object.kind(), object.namespace(), object.name()), "{:?}", object);
            }
            prop_assert!(inventory.namespaces.is_disjoint(&inventory.terminating_namespaces));
            let state = record.cluster_state();
            for locations in [&no_catalogs[..], &catalogs[..]] {
                let plan = plan_cluster(locations, &state, &mappings, &options);
                record.set_desired(Arc::new(desired_set(&plan, true).into()));
            }
            for detail in [false, true] {
                let status = cluster_status(&record, &settings, now, detail);
                prop_assert_eq!(status.inventory_items, record.inventory().len() as u64);
                let outcomes = status.applied + status.failed + status.held + status.agent_refused;
                prop_assert!(outcomes <= record.desired.items.len() as u64);
            }
        }
    }
}
