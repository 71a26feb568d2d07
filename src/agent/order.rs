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
    // Every item of a ref: a set may hold two of one object (a REFUSE next to a CREATE), and what waits for the
    // object goes after all of them — keeping only one put a NAB in its PVB's layer, held for a pass.
    let mut index: HashMap<ObjectKey, Vec<usize>> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(r) = item.r#ref.as_ref() {
            index.entry(ObjectKey::of_ref(r)).or_default().push(i);
        }
    }
    let graph: Vec<(usize, Vec<usize>)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let deps = item.waits_for.iter().filter_map(|w| index.get(&ObjectKey::of_ref(w))).flatten().copied();
            // A Backup left to Velero's sync waits for itself: not a dependency within the set.
            let mut deps: Vec<usize> = deps.filter(|&d| d != i).collect();
            deps.sort_unstable();
            deps.dedup();
            (i, deps)
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

    /// A ref the set holds twice (a CREATE, then a REFUSE of the same PVB): what waits for it goes after both.
    #[test]
    fn an_item_waits_for_every_item_of_a_repeated_ref() {
        let items = vec![
            item("Backup", "b", &[]),
            item("PodVolumeBackup", "p", &[("Backup", "b")]),
            item("PodVolumeBackup", "p", &[]),
            item("NonAdminBackup", "nab", &[("Backup", "b"), ("PodVolumeBackup", "p")]),
        ];
        let layers = apply_layers(&items);
        let layer_of = |i: usize| layers.iter().position(|l| l.contains(&i)).unwrap();
        assert!(layer_of(3) > layer_of(1), "the NAB after the PVB's CREATE: {layers:?}");
        assert!(layer_of(3) > layer_of(2) && layer_of(1) > layer_of(0), "{layers:?}");
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
