//! How much memory the coordinator holds per inventory object an agent sent, counted by a counting allocator
//! (exact, not RSS): a regression guard for the target of ≤ 0.5 KB per object (docs/performance.md), which is
//! what lets one coordinator hold 1,000 clusters × 1,000 objects. The coordinator keeps typed views only, never
//! an object's JSON (`InventoryObject::parse_view`), each kind in a list sorted by name (`model/inventory_updates.rs`).

use ferry::coordinator::cluster::{CheckedItems, ClusterRecord};
use ferry::fixture;
use ferry::grpc::convert::{inventory_item, watched_types};
use ferry::model::BackupPhase;
use ferry::plan::ClusterState;
use serde_json::json;

#[path = "support/counting_allocator.rs"]
mod counting_allocator;

/// The allocator's count is the process's: one measurement at a time.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Bytes a cluster's record holds per object once `items` (of `kind`) are taken as the hub takes a snapshot:
/// checked outside the lock, then kept (the checked items, keys and all, are dropped by then).
fn held_per_object(kind: &str, items: &[ferry::grpc::proto::InventoryItem]) -> usize {
    let resource = watched_types().into_iter().find(|t| t.kind == kind).expect("a watched type");
    let mut record = ClusterRecord::new(ClusterState { name: "b".into(), ..Default::default() });
    let before = counting_allocator::live();
    let checked = CheckedItems::of_snapshot(&resource, items);
    let (changed, rejected) = record.apply_checked_snapshot(&resource, checked, usize::MAX);
    assert!(changed && rejected.is_empty(), "{rejected:?}");
    let held = counting_allocator::live() - before;
    assert_eq!(record.inventory().len(), items.len());
    held as usize / items.len()
}

#[test]
fn the_coordinator_keeps_at_most_half_a_kilobyte_per_inventory_object() {
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 1000;
    // Velero Backups as an agent sends them (the largest kind, and most of a cluster's inventory).
    let backups: Vec<_> = (0..N)
        .map(|i| {
            let mut backup = fixture::admin_backup_json(&format!("local-{i}"), BackupPhase::Completed, "default");
            backup["metadata"]["namespace"] = json!("velero");
            backup["metadata"]["uid"] = json!(format!("0b7e5a3c-8d1f-4f6e-9a2b-{i:012}"));
            backup["metadata"]["resourceVersion"] = json!(format!("{}", 100_000 + i));
            inventory_item("Backup", &backup)
        })
        .collect();
    let namespaces: Vec<_> = (0..N)
        .map(|i| inventory_item("Namespace", &json!({"kind": "Namespace", "metadata": {"name": format!("team-{i}")}})))
        .collect();
    let wire: usize = backups.iter().map(|b| b.raw_json.len()).sum::<usize>() / N;
    let per_backup = held_per_object("Backup", &backups);
    let per_namespace = held_per_object("Namespace", &namespaces);
    eprintln!("held per Backup {per_backup} B (its JSON on the wire {wire} B), per Namespace {per_namespace} B");
    // Measured 463 B per Backup (the typed view: 248 B inline and its strings, in its kind's sorted list) and
    // 34 B per Namespace (a name in a set built whole); the benchmark's mix (half each) ~0.25 KB. In a map keyed by a copy
    // of each object's identity they were 641 B and 164 B without the map's own nodes (~140 B per object more).
    assert!(per_backup <= 500, "a Backup costs {per_backup} bytes held");
    assert!(per_namespace <= 50, "a Namespace costs {per_namespace} bytes held");
    assert!((per_backup + per_namespace) / 2 <= 512, "the mix costs more than 0.5 KB per object");
}

#[test]
fn an_agents_results_cost_a_few_bytes_per_item_of_its_set() {
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    use ferry::grpc::convert::object_ref;
    use ferry::grpc::proto::{ApplyOutcome, DesiredItem, DesiredSet, ItemResult};
    const N: usize = 300;
    let mut record = ClusterRecord::new(ClusterState { name: "b".into(), ..Default::default() });
    let refs: Vec<_> = (0..N).map(|i| object_ref("PodVolumeBackup", "velero", &format!("backup-{i}-pvb"))).collect();
    let items = refs.iter().map(|r| DesiredItem { r#ref: Some(r.clone()), ..Default::default() }).collect();
    record.set_desired(std::sync::Arc::new(DesiredSet { version: "v1".into(), items, ..Default::default() }.into()));
    let results: Vec<ItemResult> = refs
        .iter()
        .map(|r| ItemResult { r#ref: Some(r.clone()), outcome: ApplyOutcome::Applied as i32, message: String::new() })
        .collect();
    let before = counting_allocator::live();
    assert_eq!(record.record_results("v1", &results), N);
    let per_item = (counting_allocator::live() - before) as usize / N;
    eprintln!("held per reported item {per_item} B");
    // By the item's position in the set (24 B); in a map keyed by a copy of each object's identity it was ~250 B.
    assert!(per_item <= 32, "a result costs {per_item} bytes held");
}

#[test]
fn a_clusters_whole_record_is_its_inventory_and_a_few_bytes_per_item_of_its_set() {
    use ferry::coordinator::held_set::ItemPool;
    use ferry::grpc::convert::object_ref;
    use ferry::grpc::proto::{DesiredItem, DesiredSet};
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    const CLUSTERS: usize = 20;
    // What the federation benchmark's agents send: a BSL, 499 Namespaces and 500 Backups, as an API server
    // returns them.
    let mut snapshot: Vec<(&str, Vec<ferry::grpc::proto::InventoryItem>)> = Vec::new();
    let bsl = json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default", "namespace": "velero", "uid": "0b7e5a3c-8d1f-4f6e-9a2b-000000000001"},
        "spec": {"provider": "aws", "accessMode": "ReadOnly", "objectStorage": {"bucket": "b", "prefix": "p"}}});
    snapshot.push(("BackupStorageLocation", vec![inventory_item("BackupStorageLocation", &bsl)]));
    let namespaces = (0..499)
        .map(|i| {
            let name = format!("team-{i}");
            let ns = json!({"kind": "Namespace", "metadata": {"name": name, "uid": format!("5f0c9a1e-3b7d-4c2a-9e8f-{i:012}"),
                "labels": {"kubernetes.io/metadata.name": name}}, "status": {"phase": "Active"}});
            inventory_item("Namespace", &ns)
        })
        .collect();
    snapshot.push(("Namespace", namespaces));
    let backups = (0..500)
        .map(|i| {
            let mut backup = fixture::admin_backup_json(&format!("local-{i}"), BackupPhase::Completed, "default");
            backup["metadata"]["namespace"] = json!("velero");
            backup["metadata"]["resourceVersion"] = json!(format!("{}", 100_000 + i));
            inventory_item("Backup", &backup)
        })
        .collect();
    snapshot.push(("Backup", backups));
    // Every cluster planned the same 300 items (the benchmark's sets), each cluster's copy shared through the pool.
    let set = || DesiredSet {
        version: "v1".into(),
        items: (0..300)
            .map(|i| DesiredItem {
                r#ref: Some(object_ref("PodVolumeBackup", "velero", &format!("b-{i}"))),
                ..Default::default()
            })
            .collect(),
        complete: true,
        ..Default::default()
    };
    let mut pool = ItemPool::default();
    let mut records = Vec::new();
    let before = counting_allocator::live();
    for c in 0..CLUSTERS {
        let mut record = ClusterRecord::new(ClusterState { name: format!("c{c}"), ..Default::default() });
        for (kind, items) in &snapshot {
            let resource = watched_types().into_iter().find(|t| t.kind == *kind).expect("a watched type");
            let checked = CheckedItems::of_snapshot(&resource, items);
            assert!(record.apply_checked_snapshot(&resource, checked, usize::MAX).1.is_empty());
        }
        record.set_desired(std::sync::Arc::new(pool.share(set())));
        records.push(record);
    }
    let held = (counting_allocator::live() - before) as usize;
    let per_cluster = held / CLUSTERS;
    eprintln!("held per cluster {} KB ({CLUSTERS} clusters, {} shared items)", per_cluster / 1000, pool.len());
    // Measured 258 KB: the inventory (~254 KB, the test above) and ~4 KB for the set (an 8-byte reference and a
    // 4-byte index per item); the items themselves once for all clusters. 362 KB when each set's references kept
    // the allocation of the list they were collected from.
    assert!(per_cluster <= 280_000, "a cluster's record costs {per_cluster} bytes");
}

/// What the coordinator holds per planned object (every Backup, PVB and NAB of a pass's sets): its JSON text,
/// parsed again only where read. Held as a `serde_json::Value` it cost ~6× more (30,000 objects at 10,000 backups).
#[test]
fn a_planned_object_is_held_as_its_json_text() {
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 1000;
    let values: Vec<serde_json::Value> =
        (0..N).map(|i| fixture::admin_backup_json(&format!("daily-{i}"), BackupPhase::Completed, "default")).collect();
    let text: usize = values.iter().map(|v| serde_json::to_vec(v).expect("json").len()).sum::<usize>() / N;
    let before = counting_allocator::live();
    let copies: Vec<serde_json::Value> = values.to_vec();
    let as_values = (counting_allocator::live() - before) as usize / N;
    drop(copies);
    let before = counting_allocator::live();
    // Each value is built, handed over and dropped, as the planner's builders do.
    let planned: Vec<ferry::plan::PlannedObject> =
        values.iter().cloned().map(ferry::plan::PlannedObject::new).collect();
    let held = (counting_allocator::live() - before) as usize / N;
    eprintln!("planned object: {held} B held (JSON {text} B); as a Value {as_values} B");
    assert!(held <= text + 200, "a planned object holds {held} B for {text} B of JSON");
    assert_eq!(planned[0]["metadata"]["name"], "daily-0", "still read as a value");
}
