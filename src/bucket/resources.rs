//! Fetching what a backup holds, for the dependency graph: its tarball (`<name>.tar.gz`), or its resource list
//! when there is no tarball. Keys come from [`Layout`] only.

use bytes::Bytes;
use object_store::ObjectStoreExt;
use object_store::path::Path;

use super::load::FetchError;
use super::store::Store;
use crate::catalog::decode::{self, ResourceList};
use crate::catalog::{BackupFile, Layout};

/// The best source found for a backup's objects.
#[derive(Debug, Clone)]
pub enum BackupResources {
    /// The gzip tarball's bytes (read with `dag::tarball::read`).
    Tarball { key: String, bytes: Bytes },
    /// The decoded resource list: names only, no uids or specs.
    ResourceList { key: String, list: ResourceList },
}

impl BackupResources {
    pub fn key(&self) -> &str {
        match self {
            BackupResources::Tarball { key, .. } | BackupResources::ResourceList { key, .. } => key,
        }
    }
}

/// The tarball of backup `name`, else its resource list; `None` when the location has neither.
pub async fn backup_resources(
    store: &Store,
    layout: &Layout,
    name: &str,
) -> Result<Option<BackupResources>, FetchError> {
    let key = layout.key(name, BackupFile::Tarball);
    match store.objects.get(&Path::from(key.as_str())).await {
        Ok(result) => return Ok(Some(BackupResources::Tarball { bytes: result.bytes().await?, key })),
        Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let key = layout.key(name, BackupFile::ResourceList);
    match store.objects.get(&Path::from(key.as_str())).await {
        Ok(result) => {
            let list = decode::resource_list(&result.bytes().await?, &decode::DecodeLimits::default())?;
            Ok(Some(BackupResources::ResourceList { key, list }))
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
