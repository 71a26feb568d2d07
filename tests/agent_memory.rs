//! How much memory the agent's index of its cluster holds per watched object, counted by a counting allocator
//! (exact, not RSS): a regression guard for docs/performance.md's agent sizing. The index keeps each object as the
//! JSON text its watch delivered and parses it when read; held as `serde_json::Value`s, the same objects cost
//! several times more (measured beside it here, for the record).

use ferry::agent::index::Index;
use ferry::agent::watch::Update;
use ferry::fixture;
use ferry::grpc::convert::{inventory_item, watched_types};
use ferry::model::BackupPhase;
use serde_json::{Value, json};

#[path = "support/counting_allocator.rs"]
mod counting_allocator;

/// The allocator's count is the process's: one measurement at a time.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_agents_index_holds_about_its_json_per_object() {
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 1000;
    // Backups and PVBs as the agent's watch delivers them (managedFields dropped), each as an inventory item.
    let objects: Vec<Value> = (0..N)
        .flat_map(|i| {
            let name = format!("daily-{i}");
            let mut backup = fixture::admin_backup_json(&name, BackupPhase::Completed, "default");
            backup["metadata"]["namespace"] = json!("velero");
            let uid = backup["metadata"]["uid"].as_str().unwrap_or_default().to_string();
            let pvb = fixture::pod_volume_backup_json(&name, &uid, "shop", 0);
            [backup, pvb]
        })
        .collect();
    let items = |kind: &str, of: &str| -> Vec<_> {
        let kind_of = |o: &Value| if o.pointer("/spec/pod").is_some() { "PodVolumeBackup" } else { "Backup" };
        objects.iter().filter(|o| kind_of(o) == of).map(|o| inventory_item(kind, o)).collect()
    };
    let backups = items("Backup", "Backup");
    let pvbs = items("PodVolumeBackup", "PodVolumeBackup");
    let resource = |kind: &str| watched_types().into_iter().find(|t| t.kind == kind).expect("a watched type");
    let wire: usize = backups.iter().chain(&pvbs).map(|i| i.raw_json.len()).sum::<usize>() / (2 * N);

    let before = counting_allocator::live();
    let mut index = Index::new("velero");
    index.apply(&Update::Snapshot(resource("Backup"), backups.clone()));
    index.apply(&Update::Snapshot(resource("PodVolumeBackup"), pvbs.clone()));
    let per_object = (counting_allocator::live() - before) as usize / (2 * N);

    let before = counting_allocator::live();
    let values: Vec<Value> =
        backups.iter().chain(&pvbs).map(|i| serde_json::from_slice(&i.raw_json).unwrap()).collect();
    let per_value = (counting_allocator::live() - before) as usize / (2 * N);
    drop(values);
    eprintln!("index: {per_object} B per object (JSON {wire} B); as serde_json::Value it was {per_value} B");
    // Measured: the text and a map entry, against ~5× the text as Values.
    assert!(per_object <= wire + 300, "the index holds {per_object} B per object of {wire} B");
    assert!(per_object * 3 < per_value, "{per_object} B is not well under a Value's {per_value} B");
}

/// What the agent's mirror (the inventory it resends after a reconnect, `agent/client.rs`) saves per object by
/// keeping items without the labels and annotations lifted out of their JSON.
#[test]
fn the_mirror_keeps_items_without_their_lifted_maps() {
    let _one_at_a_time = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 1000;
    let objects: Vec<Value> = (0..N)
        .map(|i| {
            let mut backup = fixture::admin_backup_json(&format!("daily-{i}"), BackupPhase::Completed, "default");
            backup["metadata"]["namespace"] = json!("velero");
            backup
        })
        .collect();
    let before = counting_allocator::live();
    let whole: Vec<_> = objects.iter().map(|o| inventory_item("Backup", o)).collect();
    let per_whole = (counting_allocator::live() - before) as usize / N;
    let before = counting_allocator::live();
    let kept: Vec<_> = whole
        .iter()
        .map(|i| ferry::grpc::proto::InventoryItem {
            labels: Default::default(),
            annotations: Default::default(),
            ..i.clone()
        })
        .collect();
    let per_kept = (counting_allocator::live() - before) as usize / N;
    eprintln!("mirror: {per_kept} B per Backup kept, {per_whole} B with its lifted maps");
    assert!(per_kept + 400 < per_whole, "{per_kept} B kept against {per_whole} B");
    drop(kept);
}
