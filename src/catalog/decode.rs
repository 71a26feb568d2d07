//! Bytes from a bucket → typed objects. Pure: no IO, every failure says what was wrong.

use std::collections::BTreeMap;
use std::io::Read;

use flate2::read::MultiGzDecoder;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::model::compressed_json::compact;
use crate::model::names::invalid_object_name;
use crate::model::object::view_from_json_text;
use crate::model::{Backup, Kind, Object, PodVolumeBackup};

/// Decompressed metadata files larger than this are refused (a gzip bomb would otherwise exhaust memory).
pub const MAX_DECOMPRESSED_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not valid gzip: {0}")]
    Gzip(std::io::Error),
    #[error("decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes")]
    TooLarge,
    #[error("not valid JSON: {0}")]
    Json(serde_json::Error),
    #[error("wrong shape: {0}")]
    Shape(String),
    #[error("backup directory {dir:?} holds metadata for a backup named {name:?}")]
    NameMismatch { dir: String, name: String },
    #[error("invalid backup name {name:?}: {reason}")]
    InvalidName { name: String, reason: String },
}

/// Decodes `velero-backup.json` of backup directory `dir`.
pub fn backup_metadata(dir: &str, bytes: &[u8]) -> Result<Object<Backup>, DecodeError> {
    if let Some(reason) = invalid_object_name(dir) {
        return Err(DecodeError::InvalidName { name: dir.to_string(), reason });
    }
    let text: &RawValue = serde_json::from_slice(bytes).map_err(DecodeError::Json)?;
    check_kind::<Backup>(text.get())?;
    let backup = Object::<Backup>::from_json_text(text.get()).map_err(|e| DecodeError::Shape(e.to_string()))?;
    if backup.name() != dir {
        return Err(DecodeError::NameMismatch { dir: dir.to_string(), name: backup.name().to_string() });
    }
    Ok(backup)
}

/// Decodes `<name>-podvolumebackups.json.gz`: a JSON array of PodVolumeBackups, or `null` for none.
pub fn pod_volume_backups(bytes: &[u8]) -> Result<Vec<Object<PodVolumeBackup>>, DecodeError> {
    let mut out = Vec::new();
    for_each_pod_volume_backup(bytes, |i, text| {
        let pvb = Object::<PodVolumeBackup>::from_json_text(text)
            .map_err(|e| DecodeError::Shape(format!("item {i}: {e}")))?;
        out.push(pvb);
        Ok(())
    })?;
    Ok(out)
}

/// Validates a PVB file as [`pod_volume_backups`] does and returns the PVB names and the items as one compact
/// JSON array (`[]` for a `null` file), so the caller can keep them in its own form.
pub fn pod_volume_backup_items(bytes: &[u8]) -> Result<(Vec<Box<str>>, Vec<u8>), DecodeError> {
    let (mut names, mut array) = (Vec::new(), vec![b'[']);
    for_each_pod_volume_backup(bytes, |i, text| {
        let view: PodVolumeBackup =
            view_from_json_text(text).map_err(|e| DecodeError::Shape(format!("item {i}: {e}")))?;
        names.push(view.metadata.name.into_boxed_str());
        if i > 0 {
            array.push(b',');
        }
        array.extend_from_slice(&compact(text));
        Ok(())
    })?;
    array.push(b']');
    Ok((names, array))
}

/// The items of a compact JSON array made by [`pod_volume_backup_items`].
pub fn pod_volume_backup_array(text: &[u8]) -> Result<Vec<Object<PodVolumeBackup>>, DecodeError> {
    let items: Vec<&RawValue> = serde_json::from_slice(text).map_err(DecodeError::Json)?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| Object::from_json_text(item.get()).map_err(|e| DecodeError::Shape(format!("item {i}: {e}"))))
        .collect()
}

/// Calls `each(index, item text)` for every item of a PVB file, after checking the file's and the item's shape.
fn for_each_pod_volume_backup(
    bytes: &[u8],
    mut each: impl FnMut(usize, &str) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let text = gunzip(bytes)?;
    let document: &RawValue = serde_json::from_slice(&text).map_err(DecodeError::Json)?;
    let items: Option<Vec<&RawValue>> = serde_json::from_str(document.get()).map_err(|_| {
        DecodeError::Shape(format!("expected a JSON array or null, found {}", json_type(document.get())))
    })?;
    for (i, item) in items.unwrap_or_default().into_iter().enumerate() {
        let item = item.get();
        if json_type(item) != "an object" {
            return Err(DecodeError::Shape(format!("item {i} is {}, not an object", json_type(item))));
        }
        check_kind::<PodVolumeBackup>(item)?;
        let named: NameOnly = serde_json::from_str(item).map_err(|e| DecodeError::Shape(format!("item {i}: {e}")))?;
        if named.metadata.name.is_empty() {
            return Err(DecodeError::Shape(format!("item {i} has no metadata.name")));
        }
        each(i, item)?;
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct NameOnly {
    #[serde(default)]
    metadata: NameOnlyMeta,
}

#[derive(serde::Deserialize, Default)]
struct NameOnlyMeta {
    #[serde(default)]
    name: String,
}

/// `<name>-resource-list.json.gz`: `"<group>/<version>/<Kind>"` (core: `"v1/Pod"`) → `["ns/name" | "name"]`.
pub type ResourceList = BTreeMap<String, Vec<String>>;

pub fn resource_list(bytes: &[u8]) -> Result<ResourceList, DecodeError> {
    let value = gzip_json(bytes)?;
    serde_json::from_value(value).map_err(|e| DecodeError::Shape(format!("expected a map of kind to names: {e}")))
}

fn gzip_json(bytes: &[u8]) -> Result<Value, DecodeError> {
    serde_json::from_slice(&gunzip(bytes)?).map_err(DecodeError::Json)
}

fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut text = Vec::new();
    MultiGzDecoder::new(bytes).take(MAX_DECOMPRESSED_BYTES + 1).read_to_end(&mut text).map_err(DecodeError::Gzip)?;
    if text.len() as u64 > MAX_DECOMPRESSED_BYTES {
        return Err(DecodeError::TooLarge);
    }
    Ok(text)
}

/// Velero's files may omit `apiVersion`/`kind` (PVBs come from an informer cache); when present they must match.
fn check_kind<K: Kind>(text: &str) -> Result<(), DecodeError> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct TypeMeta {
        kind: Option<String>,
        api_version: Option<String>,
    }
    let found: TypeMeta = serde_json::from_str(text).map_err(|_| {
        DecodeError::Shape(format!("expected a JSON object with string kind and apiVersion, found {}", json_type(text)))
    })?;
    for (field, found, expected) in [("kind", found.kind, K::KIND), ("apiVersion", found.api_version, K::API_VERSION)] {
        if let Some(found) = found
            && !found.is_empty()
            && found != expected
        {
            return Err(DecodeError::Shape(format!("{field} is {found:?}, expected {expected:?}")));
        }
    }
    Ok(())
}

/// The JSON type of valid JSON `text`, by its first character.
fn json_type(text: &str) -> &'static str {
    match text.trim_start().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compression, write::GzEncoder};
    use std::io::Write;

    fn gz(text: &str) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(text.as_bytes()).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn metadata_is_checked_against_its_directory() {
        let json =
            br#"{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"b1"},"status":{"phase":"Completed"}}"#;
        assert_eq!(backup_metadata("b1", json).unwrap().name(), "b1");
        assert!(matches!(backup_metadata("b2", json), Err(DecodeError::NameMismatch { .. })));
        assert!(matches!(backup_metadata("b1", b"{\"metadata\":"), Err(DecodeError::Json(_))));
        assert!(matches!(backup_metadata(&"b".repeat(254), json), Err(DecodeError::InvalidName { .. })));
        let restore = br#"{"kind":"Restore","metadata":{"name":"b1"}}"#;
        assert!(backup_metadata("b1", restore).unwrap_err().to_string().contains("Restore"));
        let unknown_phase = br#"{"metadata":{"name":"b1"},"status":{"phase":"Exploded"}}"#;
        assert!(backup_metadata("b1", unknown_phase).unwrap_err().to_string().contains("Exploded"));
    }

    #[test]
    fn unknown_fields_are_kept_in_raw_json() {
        let json = br#"{"metadata":{"name":"b1"},"spec":{"futureField":{"x":1}},"status":{}}"#;
        let b = backup_metadata("b1", json).unwrap();
        assert_eq!(b.to_value()["spec"]["futureField"]["x"], 1);
    }

    #[test]
    fn pvb_file_shapes() {
        assert!(pod_volume_backups(&gz("null\n")).unwrap().is_empty());
        assert!(pod_volume_backups(&gz("[]")).unwrap().is_empty());
        let one =
            pod_volume_backups(&gz(r#"[{"metadata":{"name":"b1-x"},"spec":{"pod":{"namespace":"a"}}}]"#)).unwrap();
        assert_eq!(one[0].view.spec.pod.namespace, "a");
        assert!(pod_volume_backups(&gz("{}")).unwrap_err().to_string().contains("array or null"));
        assert!(pod_volume_backups(&gz("[1]")).unwrap_err().to_string().contains("item 0"));
        assert!(matches!(pod_volume_backups(b"not gzip"), Err(DecodeError::Gzip(_))));
        let mut truncated = gz("[]");
        truncated.truncate(truncated.len() - 4);
        assert!(pod_volume_backups(&truncated).is_err());
    }

    #[test]
    fn resource_list_shape() {
        let list = resource_list(&gz(r#"{"v1/Pod":["a/p1"],"v1/Namespace":["a"]}"#)).unwrap();
        assert_eq!(list["v1/Pod"], ["a/p1"]);
        assert!(resource_list(&gz("[]")).is_err());
    }
}
