//! Proptest strategies for hostile input: arbitrary JSON, and valid documents broken value by value or byte by
//! byte. The fuzz harnesses next to each parser feed these to everything ferry reads from other parties.

use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::{Value, json};

use crate::fixture;
use crate::model::{BackupPhase, labels};

/// Words ferry's parsers look for, so that random documents get past the first check more often.
const WORDS: &[&str] = &[
    "",
    "*",
    "kind",
    "apiVersion",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "uid",
    "items",
    "spec",
    "status",
    "phase",
    "Backup",
    "BackupList",
    "PodVolumeBackup",
    "PodVolumeBackupList",
    "NonAdminBackup",
    "NonAdminBackupList",
    "BackupStorageLocation",
    "Namespace",
    "List",
    "v1",
    "velero.io",
    "velero.io/v1",
    "oadp.openshift.io",
    "oadp.openshift.io/v1alpha1",
    "velero",
    "openshift-adp",
    "kube-system",
    "default",
    "team-a",
    "dr-a",
    "daily-1",
    "Completed",
    "PartiallyFailed",
    "Failed",
    "InProgress",
    "New",
    "Terminating",
    "ReadOnly",
    "ReadWrite",
    "aws",
    "velero-backups",
    "includedNamespaces",
    "storageLocation",
    "objectStorage",
    "bucket",
    "prefix",
    "accessMode",
    "backupSpec",
    "pod",
    "volume",
    "ownerReferences",
    "expiration",
    "2026-12-01T00:00:00Z",
    labels::FERRY_MANAGED_BY,
    labels::FERRY_MANAGED_BY_VALUE,
    labels::VELERO_BACKUP_NAME,
    labels::VELERO_STORAGE_LOCATION,
    labels::OADP,
    labels::MANAGED_BY,
    labels::NAC_MANAGED_BY_VALUE,
    labels::NAB_ORIGIN_NACUUID,
    labels::NAB_ORIGIN_NAME,
    labels::NAB_ORIGIN_NAMESPACE,
];

/// JSON text serde_json's tree parser refuses or that sits at the edge of what it accepts, though a scanner
/// that only skips over values takes all of it.
const ODD_JSON: &[&str] = &[
    "null",
    "-0",
    "18446744073709551616",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "1e400",
    "-1e400",
    "1e-400",
    "\"\\ud800\"",
    "\"\\udc00x\"",
    "\"\\u0000\"",
    "\"\\ud83d\\ude00\"",
    "\"\"",
    "[]",
    "{}",
];

/// A string: often one of [`WORDS`] or name-like, sometimes anything, sometimes longer than any name limit.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => select(WORDS).prop_map(str::to_string),
        3 => "[a-z0-9.-]{0,16}",
        2 => any::<String>(),
        1 => "[a-z]{250,300}",
    ]
}

/// An arbitrary JSON value, at most a few levels deep (serde_json's own limit is 128).
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // `Value::from` makes a NaN or an infinity null.
        any::<f64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((text(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// Raw JSON text to put in place of a value: another value of any type, an odd one, or deep nesting.
pub fn raw_json() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => json_value().prop_map(|v| v.to_string()),
        2 => select(ODD_JSON).prop_map(str::to_string),
        1 => (select(&[129usize, 5_000, 100_000][..]), any::<bool>()).prop_map(|(depth, array)| nested(depth, array)),
        1 => Just(format!("\"{}\"", "a".repeat(70_000))),
    ]
}

/// `depth` nested arrays, or objects.
fn nested(depth: usize, array: bool) -> String {
    if array {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    } else {
        format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
    }
}

/// One change to a JSON tree; the index picks a node in document order.
#[derive(Debug, Clone)]
pub enum JsonEdit {
    Replace(Index, String),
    Remove(Index),
    /// Every key of an object twice (a tree keeps the last, a typed view refuses known ones).
    DuplicateKeys(Index),
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    prop_oneof![
        3 => (any::<Index>(), raw_json()).prop_map(|(at, raw)| JsonEdit::Replace(at, raw)),
        2 => any::<Index>().prop_map(JsonEdit::Remove),
        1 => any::<Index>().prop_map(JsonEdit::DuplicateKeys),
    ]
}

/// One change to bytes; the index picks a position.
#[derive(Debug, Clone)]
pub enum ByteEdit {
    Set(Index, u8),
    Insert(Index, Vec<u8>),
    Delete(Index, usize),
    Truncate(Index),
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| ByteEdit::Set(at, byte)),
        (any::<Index>(), proptest::collection::vec(any::<u8>(), 1..8)).prop_map(|(at, b)| ByteEdit::Insert(at, b)),
        (any::<Index>(), 1..16usize).prop_map(|(at, len)| ByteEdit::Delete(at, len)),
        any::<Index>().prop_map(ByteEdit::Truncate),
    ]
}

/// Mostly no byte edits, so that most mutated documents are still JSON and reach the checks past the parser.
pub fn byte_edits() -> impl Strategy<Value = Vec<ByteEdit>> {
    prop_oneof![3 => Just(Vec::new()), 1 => proptest::collection::vec(byte_edit(), 1..4)]
}

pub fn apply_byte_edits(mut bytes: Vec<u8>, edits: &[ByteEdit]) -> Vec<u8> {
    for edit in edits {
        // One past the end is a valid place to insert or cut.
        let at = |i: &Index| i.index(bytes.len() + 1);
        match edit {
            ByteEdit::Set(i, byte) => {
                if !bytes.is_empty() {
                    let i = i.index(bytes.len());
                    bytes[i] = *byte;
                }
            }
            ByteEdit::Insert(i, inserted) => {
                let i = at(i);
                bytes.splice(i..i, inserted.iter().copied());
            }
            ByteEdit::Delete(i, len) => {
                let i = at(i);
                bytes.drain(i..(i + len).min(bytes.len()));
            }
            ByteEdit::Truncate(i) => {
                let i = at(i);
                bytes.truncate(i);
            }
        }
    }
    bytes
}

/// `document` with up to four value edits, pretty or compact, then maybe a few byte edits.
pub fn mutated_json(document: Value) -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(json_edit(), 0..4), any::<bool>(), byte_edits()).prop_map(
        move |(edits, pretty, bytes)| {
            apply_byte_edits(apply_json_edits(&document, &edits, pretty).into_bytes(), &bytes)
        },
    )
}

/// `document` with value edits only, as a tree again where the result is still one.
pub fn mutated_value(document: Value) -> impl Strategy<Value = Value> {
    proptest::collection::vec(json_edit(), 0..4).prop_map(move |edits| {
        serde_json::from_str(&apply_json_edits(&document, &edits, false)).unwrap_or_else(|_| document.clone())
    })
}

/// Applies `edits` in order. Raw replacements cannot live in a tree, so each is a marker string in the tree
/// and is substituted into the text at the end (latest first: a later edit's text may hold an earlier marker).
pub fn apply_json_edits(document: &Value, edits: &[JsonEdit], pretty: bool) -> String {
    let mut tree = document.clone();
    let mut raws: Vec<(String, String)> = Vec::new();
    for edit in edits {
        let paths = node_paths(&tree);
        let pick = |i: &Index| paths[i.index(paths.len())].clone();
        match edit {
            JsonEdit::Replace(i, raw) => {
                if let Some(slot) = tree.pointer_mut(&pick(i)) {
                    let marker = format!("\u{1}ferry-fuzz-{}", raws.len());
                    raws.push((Value::String(marker.clone()).to_string(), raw.clone()));
                    *slot = Value::String(marker);
                }
            }
            JsonEdit::Remove(i) => remove(&mut tree, &pick(i)),
            JsonEdit::DuplicateKeys(i) => {
                if let Some(slot) = tree.pointer_mut(&pick(i))
                    && let Some(map) = slot.as_object()
                    && !map.is_empty()
                {
                    let text = slot.to_string();
                    let body = &text[1..text.len() - 1];
                    let marker = format!("\u{1}ferry-fuzz-{}", raws.len());
                    raws.push((Value::String(marker.clone()).to_string(), format!("{{{body},{body}}}")));
                    *slot = Value::String(marker);
                }
            }
        }
    }
    let mut text = if pretty { serde_json::to_string_pretty(&tree).unwrap_or_default() } else { tree.to_string() };
    for (marker, raw) in raws.iter().rev() {
        text = text.replace(marker, raw);
    }
    text
}

/// JSON pointers of every node, root first, in document order.
fn node_paths(tree: &Value) -> Vec<String> {
    fn walk(value: &Value, path: String, out: &mut Vec<String>) {
        out.push(path.clone());
        match value {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, format!("{path}/{i}"), out);
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    walk(item, format!("{path}/{}", key.replace('~', "~0").replace('/', "~1")), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(tree, String::new(), &mut out);
    out
}

/// Removes the node at `pointer` from its parent (the root stays).
fn remove(tree: &mut Value, pointer: &str) {
    let Some((parent, token)) = pointer.rsplit_once('/') else { return };
    let token = token.replace("~1", "/").replace("~0", "~");
    match tree.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.shift_remove(&token);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = token.parse::<usize>()
                && i < items.len()
            {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// One valid object of every kind an agent publishes, as a cluster whose Velero runs in `velero_namespace`
/// holds them: `(kind, object)`. Names match what the catalogs of the harnesses hold, so plans meet them.
pub fn cluster_objects(velero_namespace: &str) -> Vec<(&'static str, Value)> {
    let ferry_label = json!({labels::FERRY_MANAGED_BY: labels::FERRY_MANAGED_BY_VALUE});
    let mut backup = fixture::admin_backup_json("daily-1", BackupPhase::Completed, "b-bsl");
    backup["metadata"]["namespace"] = json!(velero_namespace);
    backup["metadata"]["labels"][labels::FERRY_MANAGED_BY] = json!(labels::FERRY_MANAGED_BY_VALUE);
    let mut pvb = fixture::pod_volume_backup_json("daily-1", "src-uid", "team-a", 0);
    pvb["metadata"]["namespace"] = json!(velero_namespace);
    vec![
        ("Namespace", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})),
        (
            "Namespace",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dr-a"}, "status": {"phase": "Terminating"}}),
        ),
        (
            "BackupStorageLocation",
            json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
                "metadata": {"name": "b-bsl", "namespace": velero_namespace},
                "spec": {"provider": "aws", "accessMode": "ReadOnly",
                    "objectStorage": {"bucket": "velero-backups", "prefix": "velero"}}}),
        ),
        ("Backup", backup),
        ("PodVolumeBackup", pvb),
        (
            "NonAdminBackup",
            json!({"apiVersion": "oadp.openshift.io/v1alpha1", "kind": "NonAdminBackup",
                "metadata": {"name": "nightly", "namespace": "dr-a", "labels": ferry_label},
                "spec": {"backupSpec": {"includedNamespaces": ["team-a"]}}, "status": {"phase": "Created"}}),
        ),
    ]
}

/// Bytes that are nothing in particular: random, or random and gzipped.
pub fn random_bytes() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(any::<u8>(), 0..2048), any::<bool>())
        .prop_map(|(bytes, gzip)| if gzip { fixture::gzip(&bytes) } else { bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use serde_json::json;

    #[test]
    fn edits_land_where_they_point() {
        let doc = json!({"a": {"b": 1}, "c": [true]});
        // Nodes: "", /a, /a/b, /c, /c/0.
        let replaced = apply_json_edits(&doc, &[JsonEdit::Replace(index(2, 5), "1e400".into())], false);
        assert_eq!(replaced, r#"{"a":{"b":1e400},"c":[true]}"#);
        let removed = apply_json_edits(&doc, &[JsonEdit::Remove(index(4, 5))], false);
        assert_eq!(removed, r#"{"a":{"b":1},"c":[]}"#);
        let doubled = apply_json_edits(&doc, &[JsonEdit::DuplicateKeys(index(1, 5))], false);
        assert_eq!(doubled, r#"{"a":{"b":1,"b":1},"c":[true]}"#);
        let nested = apply_json_edits(
            &doc,
            &[JsonEdit::Replace(index(2, 5), "\"x\"".into()), JsonEdit::DuplicateKeys(index(1, 5))],
            false,
        );
        assert_eq!(nested, r#"{"a":{"b":"x","b":"x"},"c":[true]}"#);
        assert_eq!(apply_byte_edits(b"abc".to_vec(), &[ByteEdit::Truncate(index(1, 4))]), b"a");
    }

    /// The `Index` that picks `i` of `n`.
    fn index(i: usize, n: usize) -> Index {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        loop {
            let candidate = any::<Index>().new_tree(&mut runner).expect("index").current();
            if candidate.index(n) == i {
                return candidate;
            }
        }
    }
}
