//! Turning an object read from a bucket into one to create on another cluster: server-owned metadata goes,
//! ferry's marks come.

use serde_json::{Map, Value};

use crate::catalog::{CatalogBackup, Location};
use crate::model::{Provenance, labels};

/// Fields the API server owns or that only mean something on the source cluster.
const SERVER_FIELDS: [&str; 10] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    // Finalizers of the source cluster's controllers would block deletion on the target.
    "finalizers",
    "generateName",
];

/// Where an object made from `entry` of `location` comes from (recorded on it; retirement reads it back).
pub fn provenance(location: &Location, entry: &CatalogBackup) -> Provenance {
    Provenance {
        location: location.name.clone(),
        bucket: location.bucket.clone(),
        prefix: location.prefix.clone(),
        backup_name: entry.name.clone(),
        backup_uid: entry.backup.meta().uid.clone().unwrap_or_default(),
    }
}

/// Prepares `object` (of backup `entry`) for creation as `api_version`/`kind` in `namespace`, marked as ferry's
/// with its provenance.
pub fn for_target(
    mut object: Value,
    api_version: &str,
    kind: &str,
    namespace: &str,
    location: &Location,
    entry: &CatalogBackup,
) -> Value {
    let root = root_mut(&mut object);
    root.insert("apiVersion".into(), api_version.into());
    root.insert("kind".into(), kind.into());
    let meta = metadata_mut(&mut object);
    for field in SERVER_FIELDS {
        meta.remove(field);
    }
    meta.insert("namespace".into(), namespace.into());
    set_label(&mut object, labels::FERRY_MANAGED_BY, labels::FERRY_MANAGED_BY_VALUE);
    set_annotation(&mut object, labels::FERRY_SOURCE_CLUSTER, &location.source_cluster);
    for (key, value) in provenance(location, entry).annotations() {
        set_annotation(&mut object, key, value);
    }
    object
}

pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    map_at(root_mut(object), "metadata")
}

/// The object at `map[key]`, made an empty one first if it is missing or not an object.
fn map_at<'v>(map: &'v mut Map<String, Value>, key: &str) -> &'v mut Map<String, Value> {
    let slot = map.entry(key).or_insert(Value::Null);
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("slot was just made an object")
}

fn root_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    object.as_object_mut().expect("object was just made an object")
}

pub fn set_label(object: &mut Value, key: &str, value: &str) {
    map_at(metadata_mut(object), "labels").insert(key.into(), value.into());
}

pub fn set_annotation(object: &mut Value, key: &str, value: &str) {
    map_at(metadata_mut(object), "annotations").insert(key.into(), value.into());
}

/// Sets `spec.<field>`.
pub fn set_spec(object: &mut Value, field: &str, value: Value) {
    map_at(root_mut(object), "spec").insert(field.into(), value);
}
