//! Fuzz harness over [`Inventory::add_document`], which reads `kubectl get -o json` output: arbitrary JSON and
//! mutated lists of valid objects never panic, and a document takes no more objects than it holds.

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

use super::Inventory;
use crate::fuzz_input::{cluster_objects, json_value, mutated_value, text};

const LIST_KINDS: &[&str] = &[
    "List",
    "NamespaceList",
    "BackupStorageLocationList",
    "BackupList",
    "PodVolumeBackupList",
    "NonAdminBackupList",
    "ConfigMapList",
    "",
];

/// An item: a valid object with some values changed, or anything.
fn item() -> impl Strategy<Value = Value> {
    let objects: Vec<Value> = cluster_objects("velero").into_iter().map(|(_, object)| object).collect();
    let mutated = (0..objects.len()).prop_flat_map(move |i| mutated_value(objects[i].clone()));
    prop_oneof![4 => mutated, 1 => json_value()]
}

/// A single object, a list of items (typed or not; typed lists' items often carry no kind), or anything.
fn document() -> impl Strategy<Value = Value> {
    let list = (
        prop_oneof![select(LIST_KINDS).prop_map(str::to_string), text()],
        proptest::collection::vec(item(), 0..8),
        any::<bool>(),
    )
        .prop_map(|(kind, mut items, strip_kinds)| {
            if strip_kinds {
                items.iter_mut().filter_map(Value::as_object_mut).for_each(|item| {
                    item.remove("kind");
                });
            }
            json!({"apiVersion": "v1", "kind": kind, "items": items})
        });
    prop_oneof![4 => list, 2 => item(), 1 => json_value()]
}

fn object_count(inventory: &Inventory) -> usize {
    inventory.namespaces.len()
        + inventory.storage_locations.len()
        + inventory.backups.len()
        + inventory.pod_volume_backups.len()
        + inventory.non_admin_backups.len()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_document_takes_at_most_what_it_holds(documents in proptest::collection::vec(document(), 1..4)) {
        let mut inventory = Inventory::default();
        for document in documents {
            let held = document.get("items").and_then(Value::as_array).map_or(1, Vec::len);
            let before = object_count(&inventory);
            if let Ok(taken) = inventory.add_document(document) {
                prop_assert!(taken <= held, "took {} of {}", taken, held);
                // Namespaces are a set: one seen twice is taken twice and counted once.
                prop_assert!(object_count(&inventory) <= before + taken);
            }
        }
        let raw = inventory.backups.iter().map(|o| o.to_value())
            .chain(inventory.pod_volume_backups.iter().map(|o| o.to_value()))
            .chain(inventory.non_admin_backups.iter().map(|o| o.to_value()))
            .chain(inventory.storage_locations.iter().map(|o| o.to_value()));
        for value in raw {
            prop_assert!(value.is_object(), "an object taken expands to {}", value);
        }
    }
}
