//! A backup's `<name>-podvolumebackups.json.gz`, kept compressed.
//!
//! A catalog of 100k backups holds one for every backup; decoded, two PVBs cost ~5 KB, as the bucket's gzip
//! ~0.9 KB, as compact JSON compressed against Velero's field names ([`CompressedJson`]) ~0.6 KB.
//! The file is decoded once when read (so a bad file is reported then), its PVB names kept for the planner's
//! cheap "is it there already?" check, and the objects decoded again only when one must be created.

use super::decode::{self, DecodeError};
use crate::model::compressed_json::CompressedJson;
use crate::model::{Object, PodVolumeBackup};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumeBackupFile {
    /// The items as one compact JSON array.
    items: CompressedJson,
    names: Vec<Box<str>>,
}

impl PodVolumeBackupFile {
    /// Validates the file (see [`decode::pod_volume_backups`]) and keeps it.
    pub fn from_gzip(bytes: &[u8], limits: &decode::DecodeLimits) -> Result<Self, DecodeError> {
        let (names, array) = decode::pod_volume_backup_items(bytes, limits)?;
        Ok(Self { items: CompressedJson::new(&array), names })
    }

    /// A file holding `items` (for tests and tools that build catalogs by hand).
    pub fn from_objects(items: &[Object<PodVolumeBackup>]) -> Self {
        let array: Vec<serde_json::Value> = items.iter().map(Object::to_value).collect();
        let items_text = serde_json::Value::Array(array).to_string();
        Self {
            items: CompressedJson::new(items_text.as_bytes()),
            names: items.iter().map(|p| Box::from(p.name())).collect(),
        }
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    /// Bytes of compressed JSON held (for memory accounting).
    pub fn compressed_len(&self) -> usize {
        self.items.len()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The PVBs. The file was validated when read, so this decodes without error.
    pub fn objects(&self) -> Vec<Object<PodVolumeBackup>> {
        if self.names.is_empty() {
            return Vec::new();
        }
        decode::pod_volume_backup_array(&self.items.text()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_names_and_decodes_again_on_demand() {
        let pvb =
            Object::from_value(serde_json::json!({"metadata": {"name": "b-x"}, "spec": {"volume": "data"}})).unwrap();
        let file = PodVolumeBackupFile::from_objects(std::slice::from_ref(&pvb));
        assert_eq!(file.names().collect::<Vec<_>>(), ["b-x"]);
        let gzip = crate::fixture::gzip(&file.items.text());
        let again = PodVolumeBackupFile::from_gzip(&gzip, &Default::default()).unwrap();
        assert_eq!(again, file);
        assert_eq!(again.objects(), vec![pvb]);
        assert!(PodVolumeBackupFile::from_gzip(b"nope", &Default::default()).is_err());
    }
}
