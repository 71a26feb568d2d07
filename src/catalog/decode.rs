//! Bytes from a bucket → typed objects. Pure: no IO, every failure says what was wrong.

use std::io::Read;

use flate2::read::MultiGzDecoder;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::model::compressed_json::compact;
use crate::model::names::invalid_object_name;
use crate::model::object::view_from_json_text;
use crate::model::{Backup, Kind, Object, PodVolumeBackup};

/// `<name>-resource-list.json.gz`: its format (and the objects it names) is [`crate::dag::resource_list`]'s.
pub use crate::dag::resource_list::ResourceList;

/// What decompressing one bucket object may cost: a gzip bomb (a few KB that inflate to gigabytes) is refused
/// by its ratio long before it could exhaust memory, and anything by the absolute cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Most bytes one object may decompress to (`catalog.maxDecompressedBytes`).
    pub max_decompressed_bytes: u64,
    /// Most times its compressed size one object may decompress to (`catalog.maxDecompressionRatio`). Velero's
    /// JSON files compress 5–30×; deflate's own limit is about 1032×.
    pub max_ratio: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self { max_decompressed_bytes: 256 * 1024 * 1024, max_ratio: 200 }
    }
}

/// A small file may compress better than any ratio (a list of one PVB name repeated): up to this it may.
const RATIO_FLOOR_BYTES: u64 = 1024 * 1024;

impl DecodeLimits {
    /// The most a `compressed`-byte object may decompress to.
    pub fn cap_for(&self, compressed: usize) -> u64 {
        let by_ratio = (compressed as u64).saturating_mul(self.max_ratio).max(RATIO_FLOOR_BYTES);
        by_ratio.min(self.max_decompressed_bytes)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not valid gzip: {0}")]
    Gzip(std::io::Error),
    #[error(
        "decompresses to more than {cap} bytes from {compressed} (limits: catalog.maxDecompressedBytes, catalog.maxDecompressionRatio)"
    )]
    TooLarge { cap: u64, compressed: usize },
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
pub fn pod_volume_backups(bytes: &[u8], limits: &DecodeLimits) -> Result<Vec<Object<PodVolumeBackup>>, DecodeError> {
    let mut out = Vec::new();
    for_each_pod_volume_backup(bytes, limits, |i, text| {
        let pvb = Object::<PodVolumeBackup>::from_json_text(text)
            .map_err(|e| DecodeError::Shape(format!("item {i}: {e}")))?;
        out.push(pvb);
        Ok(())
    })?;
    Ok(out)
}

/// Validates a PVB file as [`pod_volume_backups`] does and returns the PVB names and the items as one compact
/// JSON array (`[]` for a `null` file), so the caller can keep them in its own form.
pub fn pod_volume_backup_items(bytes: &[u8], limits: &DecodeLimits) -> Result<(Vec<Box<str>>, Vec<u8>), DecodeError> {
    let (mut names, mut array) = (Vec::new(), vec![b'[']);
    for_each_pod_volume_backup(bytes, limits, |i, text| {
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
    limits: &DecodeLimits,
    mut each: impl FnMut(usize, &str) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let text = gunzip(bytes, limits)?;
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

pub fn resource_list(bytes: &[u8], limits: &DecodeLimits) -> Result<ResourceList, DecodeError> {
    let value = gzip_json(bytes, limits)?;
    serde_json::from_value(value).map_err(|e| DecodeError::Shape(format!("expected a map of kind to names: {e}")))
}

fn gzip_json(bytes: &[u8], limits: &DecodeLimits) -> Result<Value, DecodeError> {
    serde_json::from_slice(&gunzip(bytes, limits)?).map_err(DecodeError::Json)
}

/// Inflates at most the object's cap (and one byte more, to tell "exactly the cap" from "over it").
fn gunzip(bytes: &[u8], limits: &DecodeLimits) -> Result<Vec<u8>, DecodeError> {
    let cap = limits.cap_for(bytes.len());
    // Sized once: growing by doubling would copy the text at every step, and at the last one (a bomb reaching
    // its cap) hold the old 256 MiB and the new 512 MiB at once. Pages are only resident once written, so a
    // small file costs no more than its text.
    let mut text = Vec::with_capacity(usize::try_from(cap.saturating_add(1)).unwrap_or(usize::MAX));
    MultiGzDecoder::new(bytes).take(cap + 1).read_to_end(&mut text).map_err(DecodeError::Gzip)?;
    if text.len() as u64 > cap {
        return Err(DecodeError::TooLarge { cap, compressed: bytes.len() });
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

    fn pod_volume_backups_default(bytes: &[u8]) -> Result<Vec<Object<PodVolumeBackup>>, DecodeError> {
        pod_volume_backups(bytes, &DecodeLimits::default())
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
        assert!(pod_volume_backups_default(&gz("null\n")).unwrap().is_empty());
        assert!(pod_volume_backups_default(&gz("[]")).unwrap().is_empty());
        let one = pod_volume_backups_default(&gz(r#"[{"metadata":{"name":"b1-x"},"spec":{"pod":{"namespace":"a"}}}]"#))
            .unwrap();
        assert_eq!(one[0].view.spec.pod.namespace, "a");
        assert!(pod_volume_backups_default(&gz("{}")).unwrap_err().to_string().contains("array or null"));
        assert!(pod_volume_backups_default(&gz("[1]")).unwrap_err().to_string().contains("item 0"));
        assert!(matches!(pod_volume_backups_default(b"not gzip"), Err(DecodeError::Gzip(_))));
        let mut truncated = gz("[]");
        truncated.truncate(truncated.len() - 4);
        assert!(pod_volume_backups_default(&truncated).is_err());
    }

    #[test]
    fn resource_list_shape() {
        let limits = DecodeLimits::default();
        let list = resource_list(&gz(r#"{"v1/Pod":["a/p1"],"v1/Namespace":["a"]}"#), &limits).unwrap();
        assert_eq!(list["v1/Pod"], ["a/p1"]);
        assert!(resource_list(&gz("[]"), &limits).is_err());
    }

    #[test]
    fn a_gzip_bomb_is_refused_by_its_ratio_and_anything_by_the_absolute_cap() {
        // 8 MiB of one repeated PVB name compresses to a few KB: over 200× and over the 1 MiB floor.
        let item = r#"{"metadata":{"name":"x"}},"#;
        let bomb = gz(&format!("[{}{{\"metadata\":{{\"name\":\"y\"}}}}]", item.repeat(8 * 1024 * 1024 / item.len())));
        let limits = DecodeLimits::default();
        match pod_volume_backups(&bomb, &limits) {
            Err(DecodeError::TooLarge { cap, compressed }) => {
                assert_eq!(cap, limits.cap_for(compressed));
                assert!(cap < 8 * 1024 * 1024, "{cap}");
            }
            other => panic!("not refused: {:?}", other.map(|v| v.len())),
        }
        let message = pod_volume_backups(&bomb, &limits).unwrap_err().to_string();
        assert!(message.contains("catalog.maxDecompressionRatio"), "{message}");
        // With a higher ratio the same file reads.
        let lenient = DecodeLimits { max_ratio: 100_000, ..limits };
        assert!(pod_volume_backups(&bomb, &lenient).is_ok());
        // The absolute cap holds whatever the ratio.
        let tight = DecodeLimits { max_decompressed_bytes: 1024, max_ratio: 100_000 };
        assert!(matches!(pod_volume_backups(&bomb, &tight), Err(DecodeError::TooLarge { cap: 1024, .. })));
        // Small files are never refused by the ratio alone.
        assert_eq!(limits.cap_for(10), RATIO_FLOOR_BYTES);
    }
}
