//! Splitting a message that would not fit into one (a snapshot of 100k objects, a DesiredSet of 100k items)
//! into consecutive chunks under a byte budget, and putting a chunked DesiredSet together again. Pure.

use prost::Message;

use super::proto::{DesiredSet, Snapshot};

/// The Hello capability of an agent that reassembles chunked DesiredSets.
pub const CHUNKED_DESIRED_SETS: &str = "chunked-desired-sets-v1";

/// The default limit on one message's size, both directions (`max_message_bytes`): room for a snapshot of ~10k
/// objects; tonic's own default (4 MiB) is too small for a big cluster.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

/// The size messages on a stream are cut to, whatever the limit. Each end of a stream keeps a buffer as large
/// as the largest message it ever encoded or decoded (tonic grows it and never shrinks it), so with a thousand
/// streams a one-megabyte snapshot or set costs a gigabyte held for as long as the streams live. At 16 KiB (one
/// HTTP/2 frame) rather than 64 KiB a coordinator with 1,000 streams holds ~50 MiB less (docs/performance.md).
pub const STREAM_MESSAGE_BYTES: usize = 16 * 1024;

/// What one chunk may take: [`STREAM_MESSAGE_BYTES`], or less under a smaller message limit (leaving headroom
/// for the envelope).
pub fn budget(max_message_bytes: usize) -> usize {
    (max_message_bytes / 4 * 3).min(STREAM_MESSAGE_BYTES)
}

/// The largest DesiredSet delta sent as one message. Deltas are never chunked: a larger one goes as the whole set,
/// in chunks. Above a chunk's size so that a one-backup change with many PVBs stays a delta; only a stream that
/// carries such a delta grows its buffer to it.
pub const DELTA_MESSAGE_BYTES: usize = 64 * 1024;

/// What one delta may take: [`DELTA_MESSAGE_BYTES`], or less under a smaller message limit.
pub fn delta_budget(max_message_bytes: usize) -> usize {
    (max_message_bytes / 4 * 3).min(DELTA_MESSAGE_BYTES)
}

/// `items` in consecutive groups whose encoded size stays within `budget` (an item larger than the budget
/// goes alone: the transport then refuses it, naming the limit).
pub fn by_encoded_size<T: Message>(items: Vec<T>, budget: usize) -> Vec<Vec<T>> {
    let mut chunks = Vec::new();
    let mut current = Vec::new();
    let mut size = 0;
    for item in items {
        // The item's bytes plus its field tag and length prefix.
        let len = item.encoded_len() + 10;
        if !current.is_empty() && size + len > budget {
            chunks.push(std::mem::take(&mut current));
            size = 0;
        }
        size += len;
        current.push(item);
    }
    if !current.is_empty() || chunks.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// A snapshot as the messages to send: itself when it fits `budget`, else chunks of the same type, all but the
/// final one marked `more` (`last` stays on the final one).
pub fn split_snapshot(snapshot: Snapshot, budget: usize) -> Vec<Snapshot> {
    if snapshot.encoded_len() <= budget {
        return vec![snapshot];
    }
    let Snapshot { items, resource, last, .. } = snapshot;
    let chunks = by_encoded_size(items, budget);
    let count = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, items)| {
            let final_chunk = i + 1 == count;
            Snapshot { items, resource: resource.clone(), last: last && final_chunk, more: !final_chunk }
        })
        .collect()
}

/// A DesiredSet as the messages to send (see [`split_snapshot`]; every chunk carries the set's version).
pub fn split_desired_set(set: DesiredSet, budget: usize) -> Vec<DesiredSet> {
    if set.encoded_len() <= budget {
        return vec![set];
    }
    // Deltas are never chunked (see the proto), so a chunk carries no delta fields.
    let DesiredSet { version, items, complete, .. } = set;
    let chunks = by_encoded_size(items, budget);
    let count = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, items)| DesiredSet {
            version: version.clone(),
            items,
            complete,
            more: i + 1 < count,
            ..Default::default()
        })
        .collect()
}

/// Takes one received DesiredSet message; returns the whole set once its final chunk is in. A chunk of another
/// version than the one being assembled starts over (the coordinator moved on).
pub fn assemble(partial: &mut Option<DesiredSet>, chunk: DesiredSet) -> Option<DesiredSet> {
    let mut set = match partial.take() {
        Some(mut set) if set.version == chunk.version => {
            set.items.extend(chunk.items);
            set.complete = chunk.complete;
            set.more = chunk.more;
            set
        }
        _ => chunk,
    };
    if set.more {
        *partial = Some(set);
        return None;
    }
    set.more = false;
    Some(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::convert::{inventory_item, object_ref, watched_types};
    use crate::grpc::proto::DesiredItem;
    use serde_json::json;

    fn items(n: usize) -> Vec<DesiredItem> {
        (0..n)
            .map(|i| DesiredItem {
                r#ref: Some(object_ref("Backup", "velero", &format!("backup-{i:06}"))),
                raw_json: vec![b'x'; 100].into(),
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn a_hundred_thousand_items_go_in_chunks_under_the_limit_and_come_back_whole() {
        let limit = 4 * 1024 * 1024;
        let set = DesiredSet { version: "v1".into(), items: items(100_000), complete: true, ..Default::default() };
        assert!(set.encoded_len() > limit, "the test needs a set over the limit");
        let chunks = split_desired_set(set.clone(), budget(limit));
        assert!(chunks.len() > 1);
        assert!(chunks.iter().all(|c| c.encoded_len() <= limit), "every chunk fits");
        assert!(chunks[..chunks.len() - 1].iter().all(|c| c.more) && !chunks.last().unwrap().more);
        let mut partial = None;
        let mut whole = None;
        for chunk in chunks {
            assert!(whole.is_none(), "complete before the final chunk");
            whole = assemble(&mut partial, chunk);
        }
        assert_eq!(whole, Some(set));
        assert!(partial.is_none());
    }

    #[test]
    fn a_small_set_is_one_message_and_a_new_version_starts_over() {
        let set = DesiredSet { version: "v1".into(), items: items(3), complete: true, ..Default::default() };
        assert_eq!(split_desired_set(set.clone(), 1 << 20), vec![set.clone()]);
        let mut partial = None;
        let first = DesiredSet { more: true, ..set.clone() };
        assert_eq!(assemble(&mut partial, first), None);
        let newer = DesiredSet { version: "v2".into(), ..set };
        assert_eq!(assemble(&mut partial, newer.clone()), Some(newer), "the half-assembled v1 is dropped");
    }

    #[test]
    fn snapshots_split_keep_their_type_and_last_only_on_the_final_chunk() {
        let namespace = watched_types().remove(0);
        let names: Vec<_> = (0..5000)
            .map(|i| {
                inventory_item("Namespace", &json!({"kind": "Namespace", "metadata": {"name": format!("ns-{i}")}}))
            })
            .collect();
        let snapshot = Snapshot { items: names, resource: Some(namespace.clone()), last: true, more: false };
        let chunks = split_snapshot(snapshot, 64 * 1024);
        assert!(chunks.len() > 2, "{}", chunks.len());
        assert_eq!(chunks.iter().map(|c| c.items.len()).sum::<usize>(), 5000);
        assert!(chunks.iter().all(|c| c.resource.as_ref() == Some(&namespace)));
        let (init, end) = chunks.split_at(chunks.len() - 1);
        assert!(init.iter().all(|c| c.more && !c.last));
        assert!(!end[0].more && end[0].last);
    }
}
