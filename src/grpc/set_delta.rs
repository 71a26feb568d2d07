//! DesiredSet deltas: the change from the set last sent on a stream to the current one as one message, and
//! folding such a message onto the set the agent holds. A one-backup change then costs one backup's items on the
//! wire and in the agent's decoder, not the cluster's whole set. Pure.

use std::borrow::Borrow;
use std::collections::HashMap;

use prost::Message;

use super::proto::{DesiredItem, DesiredSet, ObjectRef};

/// The Hello capability of an agent that folds DesiredSet deltas (and sends `Resync` when it cannot).
pub const DESIRED_SET_DELTAS: &str = "desired-set-deltas-v1";

/// Why a delta could not be folded; the agent then asks for the whole set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    #[error("the delta is against version {base:?} but this agent holds {held:?}")]
    OtherBase { base: String, held: String },
    #[error("the folded set has {folded} items where the coordinator says {stated}")]
    Count { folded: usize, stated: u64 },
    #[error("an item of the delta has no ref")]
    NoRef,
}

/// An item's identity within a set.
type Key<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);

fn key(r: &ObjectRef) -> Key<'_> {
    (&r.group, &r.version, &r.kind, &r.namespace, &r.name)
}

/// A DesiredSet however it is held: as a message, or with its items shared among clusters (the coordinator's).
pub trait SetOfItems {
    type Item: Borrow<DesiredItem>;
    fn version(&self) -> &str;
    fn complete(&self) -> bool;
    fn items(&self) -> &[Self::Item];
}

impl SetOfItems for DesiredSet {
    type Item = DesiredItem;

    fn version(&self) -> &str {
        &self.version
    }

    fn complete(&self) -> bool {
        self.complete
    }

    fn items(&self) -> &[DesiredItem] {
        &self.items
    }
}

/// Every item's ref, or `None` when an item has none or two items share one (a set a delta cannot describe).
fn keyed<S: SetOfItems>(set: &S) -> Option<HashMap<Key<'_>, &DesiredItem>> {
    let mut by_ref = HashMap::with_capacity(set.items().len());
    for item in set.items() {
        let item: &DesiredItem = item.borrow();
        if by_ref.insert(key(item.r#ref.as_ref()?), item).is_some() {
            return None;
        }
    }
    Some(by_ref)
}

/// What to send to turn `sent` (the set last sent on the stream) into `current`: a delta when one can describe
/// the change and is smaller than the whole set and within `budget` bytes, else the whole set.
pub fn change<S: SetOfItems, C: SetOfItems>(sent: &S, current: &C, budget: usize) -> DesiredSet {
    let current_items = || current.items().iter().map(Borrow::<DesiredItem>::borrow);
    let whole = || DesiredSet {
        version: current.version().to_string(),
        items: current_items().cloned().collect(),
        complete: current.complete(),
        ..Default::default()
    };
    let (Some(before), Some(after)) = (keyed(sent), keyed(current)) else {
        return whole();
    };
    // Items shared among sets (the coordinator's) are compared by address first.
    let unchanged = |held: &DesiredItem, item: &DesiredItem| std::ptr::eq(held, item) || held == item;
    let items: Vec<DesiredItem> = current_items()
        .filter(|item| item.r#ref.as_ref().and_then(|r| before.get(&key(r))).is_none_or(|held| !unchanged(held, item)))
        .cloned()
        .collect();
    let removed: Vec<ObjectRef> = sent
        .items()
        .iter()
        .filter_map(|i| Borrow::<DesiredItem>::borrow(i).r#ref.as_ref())
        .filter(|r| !after.contains_key(&key(r)))
        .cloned()
        .collect();
    let total = current.items().len();
    let delta = DesiredSet {
        version: current.version().to_string(),
        items,
        complete: current.complete(),
        more: false,
        base_version: sent.version().to_string(),
        removed,
        total_items: total as u64,
    };
    let changed = delta.items.len() + delta.removed.len();
    if sent.version().is_empty() || changed >= total.max(1) || delta.encoded_len() > budget {
        return whole();
    }
    delta
}

/// A whole set as the agent keeps it: an item equal to one of `held` takes the held copy's JSON (one copy of an
/// object in both sets while a pass still applies the older), and every other item's JSON is copied out of the
/// received message, whose buffer (a whole chunk's) would otherwise live as long as any one item decoded from it.
pub fn share_held(held: Option<&DesiredSet>, mut set: DesiredSet) -> DesiredSet {
    let before = held.and_then(keyed);
    for item in &mut set.items {
        let held_item = before.as_ref().zip(item.r#ref.as_ref()).and_then(|(before, r)| before.get(&key(r)));
        item.raw_json = match held_item.filter(|h| h.raw_json == item.raw_json) {
            Some(h) => h.raw_json.clone(),
            None => bytes::Bytes::copy_from_slice(&item.raw_json),
        };
    }
    set
}

/// Whether a received set is a delta (to be folded) rather than a whole set.
pub fn is_delta(set: &DesiredSet) -> bool {
    !set.base_version.is_empty()
}

/// The set `delta` describes, folded onto `held` (the set of version `delta.base_version`): held items keep
/// their order, changed ones are replaced where they were, new ones follow.
pub fn fold(held: Option<&DesiredSet>, delta: DesiredSet) -> Result<DesiredSet, FoldError> {
    let held_version = held.map(|h| h.version.as_str()).unwrap_or_default();
    let Some(held) = held.filter(|h| h.version == delta.base_version) else {
        return Err(FoldError::OtherBase { base: delta.base_version, held: held_version.to_string() });
    };
    let mut upserts: HashMap<Key<'_>, &DesiredItem> = HashMap::with_capacity(delta.items.len());
    for item in &delta.items {
        upserts.insert(key(item.r#ref.as_ref().ok_or(FoldError::NoRef)?), item);
    }
    let removed: std::collections::HashSet<Key<'_>> = delta.removed.iter().map(key).collect();
    let mut items = Vec::with_capacity(delta.total_items.min(1 << 20) as usize);
    for item in &held.items {
        let Some(k) = item.r#ref.as_ref().map(key) else { continue };
        if removed.contains(&k) {
            continue;
        }
        match upserts.remove(&k) {
            Some(changed) => items.push(changed.clone()),
            None => items.push(item.clone()),
        }
    }
    // The rest, in the delta's order.
    items.extend(
        delta.items.iter().filter(|i| i.r#ref.as_ref().is_some_and(|r| upserts.contains_key(&key(r)))).cloned(),
    );
    if items.len() as u64 != delta.total_items {
        return Err(FoldError::Count { folded: items.len(), stated: delta.total_items });
    }
    Ok(DesiredSet {
        version: delta.version,
        items,
        complete: delta.complete,
        more: false,
        base_version: String::new(),
        removed: Vec::new(),
        total_items: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::object_ref;

    fn item(name: &str, body: &str) -> DesiredItem {
        DesiredItem {
            r#ref: Some(object_ref("Backup", "velero", name)),
            backup: name.into(),
            raw_json: body.as_bytes().to_vec().into(),
            ..Default::default()
        }
    }

    fn set(version: &str, items: Vec<DesiredItem>) -> DesiredSet {
        DesiredSet { version: version.into(), items, complete: true, ..Default::default() }
    }

    fn names(set: &DesiredSet) -> Vec<&str> {
        set.items.iter().map(|i| i.r#ref.as_ref().unwrap().name.as_str()).collect()
    }

    fn hundred(version: &str) -> DesiredSet {
        set(version, (0..100).map(|i| item(&format!("b-{i:03}"), "{}")).collect())
    }

    #[test]
    fn a_one_item_change_is_sent_as_that_item_and_folds_back_into_the_whole_set() {
        let v1 = hundred("v1");
        let mut v2 = v1.clone();
        v2.version = "v2".into();
        v2.items[7] = item("b-007", r#"{"changed":true}"#);
        v2.items.remove(50);
        v2.items.push(item("new", "{}"));
        let delta = change(&v1, &v2, 1 << 20);
        assert!(is_delta(&delta));
        assert_eq!(names(&delta), ["b-007", "new"]);
        assert_eq!(delta.removed, [object_ref("Backup", "velero", "b-050")]);
        assert_eq!(delta.total_items, 100);
        let folded = fold(Some(&v1), delta).unwrap();
        assert_eq!(folded, v2, "same items, same order, same version and completeness");
    }

    /// Issue 30: a whole set received while the agent holds another shares the unchanged items' JSON with it,
    /// and holds nothing of the received message's buffer.
    #[test]
    fn a_whole_set_shares_unchanged_json_with_the_held_set_and_keeps_no_message_buffer() {
        let held = set("v1", vec![item("a", "{\"a\":1}"), item("b", "{\"b\":1}")]);
        let sent = set("v2", vec![item("a", "{\"a\":1}"), item("b", "{\"b\":2}"), item("c", "{\"c\":1}")]);
        let message = bytes::Bytes::from(sent.encode_to_vec());
        let in_message = |json: &bytes::Bytes| message.as_ptr_range().contains(&json.as_ptr());
        let received = DesiredSet::decode(message.clone()).expect("decodes");
        assert!(received.items.iter().all(|i| in_message(&i.raw_json)), "decoded as views of the message");
        let kept = share_held(Some(&held), received);
        assert_eq!(kept, sent);
        assert_eq!(kept.items[0].raw_json.as_ptr(), held.items[0].raw_json.as_ptr(), "a: the held copy");
        assert!(kept.items.iter().all(|i| !in_message(&i.raw_json)), "nothing points into the message");
        let alone = share_held(None, DesiredSet::decode(message.clone()).expect("decodes"));
        assert!(alone == sent && alone.items.iter().all(|i| !in_message(&i.raw_json)));
    }

    #[test]
    fn an_unchanged_item_is_not_sent_and_a_changed_completeness_is() {
        let v1 = hundred("v1");
        let v2 = DesiredSet { version: "v2".into(), complete: false, ..v1.clone() };
        let delta = change(&v1, &v2, 1 << 20);
        assert!(is_delta(&delta) && delta.items.is_empty() && delta.removed.is_empty());
        assert!(!fold(Some(&v1), delta).unwrap().complete);
    }

    #[test]
    fn the_whole_set_goes_when_a_delta_would_not_be_smaller_or_fit_or_has_no_base() {
        let v1 = hundred("v1");
        let other = set("v2", (0..100).map(|i| item(&format!("c-{i:03}"), "{}")).collect());
        assert!(!is_delta(&change(&v1, &other, 1 << 20)), "everything changed");
        let mut v2 = v1.clone();
        v2.version = "v2".into();
        v2.items[0] = item("b-000", &"x".repeat(5000));
        assert!(!is_delta(&change(&v1, &v2, 1000)), "over the budget");
        assert!(!is_delta(&change(&DesiredSet::default(), &v2, 1 << 20)), "nothing sent before");
        let mut twice = v2.clone();
        twice.items.push(item("b-001", "{}"));
        assert_eq!(change(&v1, &twice, 1 << 20), twice, "two items of one ref: no delta can say which");
    }

    #[test]
    fn a_delta_folds_only_onto_its_base_and_only_to_the_stated_count() {
        let v1 = hundred("v1");
        let mut v2 = v1.clone();
        v2.version = "v2".into();
        v2.items[3] = item("b-003", "[]");
        let delta = change(&v1, &v2, 1 << 20);
        let err = fold(Some(&hundred("v0")), delta.clone()).unwrap_err();
        assert!(matches!(err, FoldError::OtherBase { .. }), "{err}");
        assert!(matches!(fold(None, delta.clone()), Err(FoldError::OtherBase { .. })));
        let lost = DesiredSet { total_items: 101, ..delta };
        assert_eq!(fold(Some(&v1), lost), Err(FoldError::Count { folded: 100, stated: 101 }));
    }
}
