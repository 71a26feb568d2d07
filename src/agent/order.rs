//! The order in which an agent applies a DesiredSet: an item after every item of the same set it waits for
//! (Backup → its PVBs → its NAB), so that one pass can create a Backup, read its UID and create its PVBs.
//! Pure.

use std::collections::HashMap;

use crate::coordinator::cluster::ObjectKey;
use crate::grpc::proto::DesiredItem;

/// Indices of `items` in apply order: by depth in the waits-for graph within the set (items waiting on
/// something outside the set, such as a Namespace, have depth 0), stable within a depth. A waits-for cycle
/// (which the planner never produces) cannot loop: depth is capped at the number of items.
pub fn apply_order(items: &[DesiredItem]) -> Vec<usize> {
    let index: HashMap<ObjectKey, usize> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| item.r#ref.as_ref().map(|r| (ObjectKey::of_ref(r), i)))
        .collect();
    let mut depth: Vec<Option<usize>> = vec![None; items.len()];
    fn depth_of(
        i: usize,
        items: &[DesiredItem],
        index: &HashMap<ObjectKey, usize>,
        depth: &mut Vec<Option<usize>>,
        guard: usize,
    ) -> usize {
        if let Some(d) = depth[i] {
            return d;
        }
        if guard > items.len() {
            return items.len();
        }
        let own = items[i].r#ref.as_ref().map(ObjectKey::of_ref);
        let d = items[i]
            .waits_for
            .iter()
            .filter_map(|w| index.get(&ObjectKey::of_ref(w)).copied())
            .filter(|&j| own.as_ref() != items[j].r#ref.as_ref().map(ObjectKey::of_ref).as_ref())
            .map(|j| depth_of(j, items, index, depth, guard + 1) + 1)
            .max()
            .unwrap_or(0);
        depth[i] = Some(d);
        d
    }
    for i in 0..items.len() {
        depth_of(i, items, &index, &mut depth, 0);
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| depth[i].unwrap_or(0));
    order
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
