//! The order in which an agent applies a DesiredSet: an item after every item of the same set it waits for
//! (Backup → its PVBs → its NAB), so that one pass can create a Backup, read its UID and create its PVBs. The
//! ordering itself is the dependency DAG's (`dag::apply_order`); this maps DesiredSet items onto it.

use std::collections::HashMap;

use crate::dag::apply_order::apply_order as dag_order;
use crate::grpc::convert::ObjectKey;
use crate::grpc::proto::DesiredItem;

/// Indices of `items` in apply order: layer by layer of the waits-for graph within the set (items waiting on
/// something outside the set, such as a Namespace, are in the first layer), input order within a layer. A
/// waits-for cycle, which the planner never produces, is logged and the set is applied in input order (every
/// item still checks its own prerequisites, so nothing is applied early).
pub fn apply_order(items: &[DesiredItem]) -> Vec<usize> {
    apply_layers(items).into_iter().flatten().collect()
}

/// The same order as layers: no item of a layer waits on another of the same layer, so each layer can be
/// applied concurrently. A waits-for cycle gives one layer per item, in input order.
pub fn apply_layers(items: &[DesiredItem]) -> Vec<Vec<usize>> {
    let index: HashMap<ObjectKey, usize> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| item.r#ref.as_ref().map(|r| (ObjectKey::of_ref(r), i)))
        .collect();
    let graph: Vec<(usize, Vec<usize>)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            // A Backup left to Velero's sync waits for itself: not a dependency within the set.
            let deps = item.waits_for.iter().filter_map(|w| index.get(&ObjectKey::of_ref(w)).copied());
            (i, deps.filter(|&d| d != i).collect())
        })
        .collect();
    match dag_order(&graph) {
        Ok(layers) => layers,
        Err(e) => {
            tracing::warn!(error = %e, "waits-for cycle in a DesiredSet; applying in input order");
            (0..items.len()).map(|i| vec![i]).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::object_ref;

    fn item(kind: &str, name: &str, waits: &[(&str, &str)]) -> DesiredItem {
        DesiredItem {
            r#ref: Some(object_ref(kind, "velero", name)),
            waits_for: waits.iter().map(|(k, n)| object_ref(k, "velero", n)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn backups_before_their_pvbs_before_their_nabs() {
        let items = vec![
            item("NonAdminBackup", "nab", &[("Backup", "b")]),
            item("PodVolumeBackup", "p1", &[("Backup", "b")]),
            item("Backup", "b", &[]),
            item("PodVolumeBackup", "p2", &[("Backup", "other-not-in-set")]),
        ];
        let order = apply_order(&items);
        let pos = |name: &str| order.iter().position(|&i| items[i].r#ref.as_ref().unwrap().name == name).unwrap();
        assert!(pos("b") < pos("p1") && pos("b") < pos("nab"));
        assert_eq!(order.len(), 4);
    }

    #[test]
    fn a_cycle_terminates() {
        let items = vec![item("Backup", "a", &[("Backup", "b")]), item("Backup", "b", &[("Backup", "a")])];
        assert_eq!(apply_order(&items).len(), 2);
        // An item that waits for itself (a Backup left to Velero's sync) is not its own dependency.
        let items = vec![item("Backup", "a", &[("Backup", "a")])];
        assert_eq!(apply_order(&items), vec![0]);
    }
}
