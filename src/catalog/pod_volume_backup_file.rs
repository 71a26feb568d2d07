//! A backup's `<name>-podvolumebackups.json.gz`, kept compressed.
//!
//! A catalog of 100k backups holds one for every backup; decoded, two PVBs cost ~5 KB, compressed under 1 KB.
//! The file is decoded once when read (so a bad file is reported then), its PVB names kept for the planner's
//! cheap "is it there already?" check, and the objects decoded again only when one must be created.

use bytes::Bytes;

use super::decode::{self, DecodeError};
use crate::model::{Object, PodVolumeBackup};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumeBackupFile {
    gzip: Bytes,
    names: Vec<Box<str>>,
}

impl PodVolumeBackupFile {
    /// Validates the file (see [`decode::pod_volume_backups`]) and keeps it.
    pub fn from_gzip(bytes: &[u8]) -> Result<Self, DecodeError> {
        let names = decode::pod_volume_backup_names(bytes)?;
        Ok(Self { gzip: Bytes::copy_from_slice(bytes), names })
    }

    /// A file holding `items` (for tests and tools that build catalogs by hand).
    pub fn from_objects(items: &[Object<PodVolumeBackup>]) -> Self {
        use std::io::Write;
        let array: Vec<serde_json::Value> = items.iter().map(Object::to_value).collect();
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        // Writing to a Vec cannot fail.
        let _ = encoder.write_all(serde_json::Value::Array(array).to_string().as_bytes());
        let gzip = Bytes::from(encoder.finish().unwrap_or_default());
        Self { gzip, names: items.iter().map(|p| Box::from(p.name())).collect() }
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    /// Bytes of the compressed file held (for memory accounting).
    pub fn gzip_len(&self) -> usize {
        self.gzip.len()
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
        decode::pod_volume_backups(&self.gzip).unwrap_or_default()
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
        let again = PodVolumeBackupFile::from_gzip(&file.gzip).unwrap();
        assert_eq!(again, file);
        assert_eq!(again.objects(), vec![pvb]);
        assert!(PodVolumeBackupFile::from_gzip(b"nope").is_err());
    }
}
