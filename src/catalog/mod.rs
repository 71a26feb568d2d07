//! The catalog: what a location (a bucket + prefix in Velero's layout) holds, as typed backups.
//!
//! Pure: decoding and the refresh bookkeeping live here; reading the bucket is `crate::bucket`'s job. The formats
//! inside a backup (the tarball's layout, the resource list) are `crate::dag`'s, which never depends back on the
//! catalog.

pub mod absence;
pub mod decode;
#[cfg(test)]
mod fuzz;
pub mod layout;
pub mod legacy_volume_backups;
pub mod location;
pub mod pod_volume_backup_file;
pub mod refresh;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::model::{Backup, Object};

pub use layout::{BackupFile, Layout};
pub use legacy_volume_backups::{LegacyVolumeBackup, LegacyVolumeBackups, VolumeBackupSource};
pub use location::{Location, StoreKind};
pub use pod_volume_backup_file::PodVolumeBackupFile;

/// Identifies one stored version of an object, to avoid fetching it again when it did not change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    /// A 64-bit hash of the ETag: only equality matters, and a catalog holds two of these per backup (an ETag
    /// string would be two heap allocations per backup more).
    pub e_tag: Option<u64>,
    pub size: u64,
    /// Milliseconds since the Unix epoch.
    pub last_modified_ms: i64,
}

impl ObjectVersion {
    pub fn new(e_tag: Option<&str>, size: u64, last_modified_ms: i64) -> Self {
        let e_tag = e_tag.map(|tag| {
            let mut hasher = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(tag, &mut hasher);
            std::hash::Hasher::finish(&hasher)
        });
        Self { e_tag, size, last_modified_ms }
    }

    /// Same ETag (and size), or where a store has no ETag, same size and last-modified time.
    pub fn same_as(&self, other: &ObjectVersion) -> bool {
        match (&self.e_tag, &other.e_tag) {
            (Some(a), Some(b)) => a == b && self.size == other.size,
            _ => self.size == other.size && self.last_modified_ms == other.last_modified_ms,
        }
    }
}

/// One backup as read from its location.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogBackup {
    pub name: String,
    /// `velero-backup.json`.
    pub backup: Object<Backup>,
    /// `<name>-podvolumebackups.json.gz`; empty when the file is absent or `null`.
    pub pod_volume_backups: PodVolumeBackupFile,
    pub metadata_version: ObjectVersion,
    /// `None` when the backup has no PVB file.
    pub pod_volume_backups_version: Option<ObjectVersion>,
    /// Why the PVB file (which exists: its version is set) could not be used. Velero's sync then creates the
    /// Backup without PVBs, and so does ferry: the backup is not lost with its PVB file.
    pub pod_volume_backups_error: Option<String>,
    /// Whether `<name>-resource-list.json.gz` exists (it is read on demand).
    pub has_resource_list: bool,
}

/// A problem with one object: which location, which key, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, PartialOrd, Ord)]
pub struct CatalogError {
    pub location: String,
    pub object: String,
    pub error: String,
}

/// Whether the last listing saw the whole location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listing {
    Complete,
    /// Some pages could not be read: backups not seen keep their previous entries, and absence proves nothing.
    Incomplete {
        reason: String,
    },
}

/// Everything read from one location in one refresh.
#[derive(Debug, Clone, PartialEq)]
pub struct LocationCatalog {
    pub location: Location,
    pub backups: BTreeMap<String, Arc<CatalogBackup>>,
    /// Backups present in the bucket but unusable this pass (see `errors`): present, so never "deleted".
    pub skipped: BTreeSet<String>,
    /// Directories under `backups/` without `velero-backup.json` (half-written, or not Velero's). Velero's
    /// `BackupExists` is false for them, so they are no backups and no error; kept apart from `skipped` only to
    /// be counted in status. Present, so a backup whose metadata is deleted first is never read as deleted.
    pub foreign_folders: BTreeSet<String>,
    pub errors: Vec<CatalogError>,
    pub listing: Listing,
    /// Backups listed but not read yet: set only on the partial catalogs a cold load hands out while it runs
    /// (`bucket::load::Loader::refresh_streaming`), whose listing is then `Incomplete`. Present, so never
    /// "deleted"; and each keeps its name taken, so a later location never wins a name this one holds.
    pub pending: BTreeSet<String>,
    /// Set by the coordinator, not the loader: how long what ferry's objects refer to has been absent (rule 5).
    pub absences: absence::AbsenceLedger,
    /// Set by the coordinator: the error of the last refresh when it failed (this catalog is then the previous
    /// one, kept; nothing is retired from it).
    pub refresh_error: Option<String>,
    /// Set by the coordinator from every cluster's BSLs (`plan::collision`): more than one cluster writes here,
    /// or one that is not `sourceCluster`. Nothing new is materialized from it and nothing retired meanwhile.
    pub collision: Option<Collision>,
}

/// A location whose writers are not exactly its `sourceCluster` (ACM's BackupCollision, velero #627).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Collision {
    /// The clusters holding a read-write BSL on the location, sorted.
    pub writers: Vec<String>,
    /// Why it is a collision and how to resolve it.
    pub reason: String,
}

impl AsRef<LocationCatalog> for LocationCatalog {
    fn as_ref(&self) -> &LocationCatalog {
        self
    }
}

impl LocationCatalog {
    pub fn empty(location: Location) -> Self {
        Self {
            location,
            backups: BTreeMap::new(),
            skipped: BTreeSet::new(),
            foreign_folders: BTreeSet::new(),
            errors: Vec::new(),
            listing: Listing::Complete,
            pending: BTreeSet::new(),
            absences: absence::AbsenceLedger::default(),
            refresh_error: None,
            collision: None,
        }
    }

    pub fn error(&mut self, object: impl Into<String>, error: impl ToString) {
        self.errors.push(CatalogError {
            location: self.location.name.clone(),
            object: object.into(),
            error: error.to_string(),
        });
    }
}
